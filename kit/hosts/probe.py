"""check_env: run the probe commands on every host at once, keep the raw outputs, parse, compare.

    runs/<id>/env/<host>/<probe>.txt    raw output of each probe (exactly what the host printed)
    runs/<id>/env/<host>/probes.json    each probe's command and exit code
    runs/<id>/env/<host>/capture.json   the parsed machine description (kit.hosts.capture.HostCapture)
    runs/<id>/env/verdict.json          the cross-host consistency verdict
Parsing (kit.hosts.capture) and comparison (kit.hosts.consistency) are pure; this module only talks to hosts.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

from kit.config.inventory import HostConfig, Inventory
from kit.core.files import write_text
from kit.core.rundir import save_capture
from kit.hosts import capture as ec
from kit.hosts.connect import connect, quote_cmd
from kit.hosts.consistency import Verdict, consistency
from kit.hosts.fanout import on_all, values

# name -> shell command; a probe that fails leaves its output (and exit code) on record
PROBES = {
    "has-nvidia-smi": "command -v nvidia-smi",  # first: the nvidia-smi probes run only where it exists
    "nvidia-smi-topo": "nvidia-smi topo -m",
    "nvidia-smi-q": "nvidia-smi -q -x",
    "cpuinfo": "cat /proc/cpuinfo",
    "cpu-quota": ec.CPU_QUOTA_PROBE,  # the tightest cgroup CPU quota of the host's sessions
    "cpus-allowed": "grep Cpus_allowed_list /proc/self/status",  # the CPUs its sessions may run on
    "meminfo": "cat /proc/meminfo",
    "os-release": "cat /etc/os-release",
    "kernel": "uname -r",
    "docker": "docker version --format '{{.Server.Version}}'",
    "infiniband": "ls /sys/class/infiniband",
}
PROBE_TIMEOUT_S = 180


def probe_script(nic: str | None, nonce: str) -> str:
    """Every probe in ONE shell script (one SSH command, or one scheduler step per node): each output framed
    by `::kit-probe <nonce> begin <name>` and `::kit-probe <nonce> end <name> <exit>` lines on stdout."""
    lines = []
    for name, command in _commands(nic).items():
        lines.append(f"echo '::kit-probe {nonce} begin {name}'; ( {command} ) 2>/dev/null; rc=$?; "
                     f"echo; echo \"::kit-probe {nonce} end {name} $rc\"")
    return "\n".join([*lines, "exit 0", ""])


def read_probes(text: str, nic: str | None, nonce: str) -> dict[str, tuple[int, str]]:
    """probe -> (exit code, output exactly as printed) from probe_script's stdout; a probe with no frame: 127."""
    raw: dict[str, tuple[int, str]] = {}
    for name in _commands(nic):
        begin, end = f"::kit-probe {nonce} begin {name}\n", f"\n::kit-probe {nonce} end {name} "
        i = text.find(begin)
        j = text.find(end, i + len(begin)) if i >= 0 else -1
        if i < 0 or j < 0:
            raw[name] = (127, "")
            continue
        code = text[j + len(end):].split("\n", 1)[0].strip()
        raw[name] = (int(code) if code.lstrip("-").isdigit() else 127, text[i + len(begin):j])
    return raw


def _record(raw: dict[str, tuple[int, str]], nic: str | None,
            out_dir: Path) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """Keep each raw output byte-exact in <probe>.txt; the nvidia-smi probes count only where it exists."""
    gpu = raw.get("has-nvidia-smi", (1, ""))[0] == 0
    kept = {name: out for name, out in raw.items() if gpu or not name.startswith("nvidia-smi")}
    for name, (_code, text) in kept.items():
        if name not in ("has-nvidia-smi", "nic"):
            write_text(out_dir / f"{name}.txt", text)
    return kept, _commands(nic)


def probe_host(host: HostConfig, inv: Inventory, out_dir: Path) -> ec.HostCapture:
    nonce = secrets.token_hex(8)
    with connect(host, inv) as conn:
        result = conn.run(probe_script(host.nic, nonce), hide=True, warn=True, timeout=PROBE_TIMEOUT_S)
    return probe_from_output(host.name, host.nic, result.stdout, nonce, out_dir)


def probe_local(name: str, out_dir: Path) -> ec.HostCapture:
    """The same probes on this machine (kit bench): runs/<id>/env/<name>/ as for a remote host."""
    nonce = secrets.token_hex(8)
    try:
        done = subprocess.run(["bash", "-c", probe_script(None, nonce)], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S)
        text = done.stdout
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
    return probe_from_output(name, None, text, nonce, out_dir)


def probe_from_output(name: str, nic: str | None, text: str, nonce: str, out_dir: Path) -> ec.HostCapture:
    """A host's capture from probe_script's stdout (over SSH, here, or a scheduler step's output file)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    raw, commands = _record(read_probes(text, nic, nonce), nic, out_dir)
    return _capture(name, nic, raw, commands, out_dir)


def _commands(nic: str | None) -> dict[str, str]:
    return {**PROBES, **({"nic": f"cat /sys/class/net/{quote_cmd([nic])}/operstate"} if nic else {})}


def _capture(name: str, nic: str | None, raw: dict[str, tuple[int, str]], commands: dict[str, str],
             out_dir: Path) -> ec.HostCapture:
    entries = {probe: {"command": commands[probe], "exit": code} for probe, (code, _) in raw.items()}
    if "nic" in entries:
        entries["nic"]["interface"] = nic
    write_text(out_dir / "probes.json", json.dumps(entries, indent=2) + "\n")
    capture = ec.capture_from_probes(name, raw, nic, commands)
    save_capture(out_dir, capture.to_dict())
    return capture


def check_env(inv: Inventory, hosts: list[HostConfig], env_dir: Path, require_gpu: bool = False) -> Verdict:
    """Probe every host in parallel; write the raw outputs, captures and the verdict under env_dir."""
    env_dir.mkdir(parents=True, exist_ok=True)

    def one(host: HostConfig) -> ec.HostCapture:
        out = env_dir / host.name
        out.mkdir(parents=True, exist_ok=True)
        return probe_host(host, inv, out)

    captures = values(on_all(hosts, one))
    verdict = consistency(captures, require_gpu=require_gpu)
    write_text(env_dir / "verdict.json", json.dumps(verdict.to_dict(), indent=2) + "\n")
    return verdict
