"""check_env: run the probe commands on every host at once, keep the raw outputs, parse, compare.

    runs/<id>/env/<host>/<probe>.txt    raw output of each probe (exactly what the host printed)
    runs/<id>/env/<host>/probes.json    each probe's command and exit code
    runs/<id>/env/<host>/capture.json   the parsed machine description (kit.hosts.capture.HostCapture)
    runs/<id>/env/verdict.json          the cross-host consistency verdict
Parsing (kit.hosts.capture) and comparison (kit.hosts.consistency) are pure; this module only talks to hosts.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from kit.config.hosts import HostConfig, Inventory
from kit.core.files import write_text
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
    "meminfo": "cat /proc/meminfo",
    "os-release": "cat /etc/os-release",
    "kernel": "uname -r",
    "docker": "docker version --format '{{.Server.Version}}'",
    "infiniband": "ls /sys/class/infiniband",
}


Runner = Callable[[str, int], tuple[int, str]]  # (shell command, timeout s) -> (exit code, stdout)


def _run_probes(run: Runner, nic: str | None,
                out_dir: Path) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """Run every probe; keep each raw output byte-exact in <probe>.txt. Returns (exit, stdout) and commands."""
    raw: dict[str, tuple[int, str]] = {}
    for name, command in PROBES.items():
        if name.startswith("nvidia-smi") and raw.get("has-nvidia-smi", (1, ""))[0] != 0:
            continue
        raw[name] = run(command, 60)
        if name != "has-nvidia-smi":
            write_text(out_dir / f"{name}.txt", raw[name][1])
    commands = _commands(nic)
    if nic:
        raw["nic"] = run(commands["nic"], 30)
    return raw, commands


def _fabric_runner(conn) -> Runner:
    def run(command: str, timeout: int) -> tuple[int, str]:
        result = conn.run(command, hide=True, warn=True, timeout=timeout)
        return result.exited, result.stdout
    return run


def _local_runner(command: str, timeout: int) -> tuple[int, str]:
    try:
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout


def probe_host(host: HostConfig, inv: Inventory, out_dir: Path) -> ec.HostCapture:
    with connect(host, inv) as conn:
        raw, commands = _run_probes(_fabric_runner(conn), host.nic, out_dir)
    return _capture(host.name, host.nic, raw, commands, out_dir)


def probe_local(name: str, out_dir: Path) -> ec.HostCapture:
    """The same probes on this machine (kit bench): runs/<id>/env/<name>/ as for a remote host."""
    out_dir.mkdir(parents=True, exist_ok=True)
    raw, commands = _run_probes(_local_runner, None, out_dir)
    return _capture(name, None, raw, commands, out_dir)


def probe_script(nic: str | None, out_dir: str, node_var: str | None = None) -> str:
    """Every probe in one shell script (for a scheduler's job step): <out_dir>[/$node_var]/<probe>.out and .rc
    on the node; probe_from_files reads them back as if each had run over a connection."""
    where = quote_cmd([out_dir]) + (f'/"${node_var}"' if node_var else "")
    lines = [f"mkdir -p {where} || exit 1"]
    for name, command in _commands(nic).items():
        lines.append(f"( {command} ) > {where}/{name}.out 2>/dev/null; echo $? > {where}/{name}.rc")
    return "\n".join([*lines, "exit 0", ""])


def probe_from_files(name: str, nic: str | None, answers: Path, out_dir: Path) -> ec.HostCapture:
    """A node's capture from what probe_script left in `answers` (a probe with no answer: exit 127)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    by_command = {command: probe for probe, command in _commands(nic).items()}

    def run(command: str, timeout: int) -> tuple[int, str]:
        probe = by_command[command]
        try:
            code = int((answers / f"{probe}.rc").read_text().strip())
            return code, (answers / f"{probe}.out").read_text(errors="replace")
        except (OSError, ValueError):
            return 127, ""

    raw, commands = _run_probes(run, nic, out_dir)
    return _capture(name, nic, raw, commands, out_dir)


def _commands(nic: str | None) -> dict[str, str]:
    return {**PROBES, **({"nic": _nic_probe(nic)} if nic else {})}


def _nic_probe(nic: str) -> str:
    return f"cat /sys/class/net/{quote_cmd([nic])}/operstate"


def _capture(name: str, nic: str | None, raw: dict[str, tuple[int, str]], commands: dict[str, str],
             out_dir: Path) -> ec.HostCapture:
    entries = {probe: {"command": commands[probe], "exit": code} for probe, (code, _) in raw.items()}
    if "nic" in entries:
        entries["nic"]["interface"] = nic
    write_text(out_dir / "probes.json", json.dumps(entries, indent=2) + "\n")
    capture = ec.capture_from_probes(name, raw, nic)
    write_text(out_dir / "capture.json", json.dumps(capture.to_dict(), indent=2) + "\n")
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
