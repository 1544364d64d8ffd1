"""check_env: run the probe commands on every host at once, keep the raw outputs, parse, compare.

    runs/<id>/env/<host>/<probe>.txt    raw output of each probe (exactly what the host printed)
    runs/<id>/env/<host>/probes.json    each probe's command and exit code
    runs/<id>/env/<host>/capture.json   the parsed machine description (kit.envcapture.HostCapture)
    runs/<id>/env/verdict.json          the cross-host consistency verdict
Parsing and comparison are kit.envcapture's (pure); this module only talks to hosts.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
from pathlib import Path

from kit import envcapture as ec
from kit.config import HostConfig, Inventory
from kit.inventory import connect, quote_cmd

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


def _run_probes(conn, host: HostConfig, out_dir: Path) -> tuple[dict[str, tuple[int, str]], dict[str, str]]:
    """Run every probe; keep each raw output byte-exact in <probe>.txt. Returns (exit, stdout) and commands."""
    raw: dict[str, tuple[int, str]] = {}
    for name, command in PROBES.items():
        if name.startswith("nvidia-smi") and raw.get("has-nvidia-smi", (1, ""))[0] != 0:
            continue
        result = conn.run(command, hide=True, warn=True, timeout=60)
        raw[name] = (result.exited, result.stdout)
        if name != "has-nvidia-smi":
            (out_dir / f"{name}.txt").write_text(result.stdout)
    commands = dict(PROBES)
    if host.nic:
        commands["nic"] = f"cat /sys/class/net/{quote_cmd([host.nic])}/operstate"
        nic = conn.run(commands["nic"], hide=True, warn=True, timeout=30)
        raw["nic"] = (nic.exited, nic.stdout)
    return raw, commands


def probe_host(host: HostConfig, inv: Inventory, out_dir: Path) -> ec.HostCapture:
    with connect(host, inv) as conn:
        raw, commands = _run_probes(conn, host, out_dir)
    (out_dir / "probes.json").write_text(
        json.dumps({name: {"command": commands[name], "exit": code} for name, (code, _) in raw.items()}, indent=2)
        + "\n"
    )

    def ok(name: str) -> str | None:
        code, text = raw.get(name, (1, ""))
        return text if code == 0 and text.strip() else None

    smi = topo = None
    if ok("nvidia-smi-q"):
        smi = ec.parse_query_xml(raw["nvidia-smi-q"][1], f"{host.name}: nvidia-smi -q -x")
    if ok("nvidia-smi-topo"):
        topo = ec.parse_topo(raw["nvidia-smi-topo"][1], f"{host.name}: nvidia-smi topo -m")
    capture = ec.HostCapture(
        host=host.name,
        smi=smi,
        topology=topo,
        cpu=ec.parse_cpuinfo(raw["cpuinfo"][1], f"{host.name}:/proc/cpuinfo"),
        memory_bytes=ec.parse_meminfo(raw["meminfo"][1], f"{host.name}:/proc/meminfo"),
        os_release=ec.parse_os_release(raw["os-release"][1], f"{host.name}:/etc/os-release"),
        kernel=raw["kernel"][1].strip(),
        docker_version=(ok("docker") or "").strip() or None,
        ib_devices=sorted((ok("infiniband") or "").split()),
        nic=host.nic if host.nic and raw.get("nic", (1, ""))[0] == 0 else None,
    )
    (out_dir / "capture.json").write_text(json.dumps(capture.to_dict(), indent=2) + "\n")
    return capture


def check_env(inv: Inventory, hosts: list[HostConfig], env_dir: Path, require_gpu: bool = False) -> ec.Verdict:
    """Probe every host in parallel; write the raw outputs, captures and the verdict under env_dir."""
    env_dir.mkdir(parents=True, exist_ok=True)

    def one(host: HostConfig) -> ec.HostCapture:
        out = env_dir / host.name
        out.mkdir(parents=True, exist_ok=True)
        return probe_host(host, inv, out)

    with cf.ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        captures = list(pool.map(one, hosts))
    verdict = ec.consistency(captures, require_gpu=require_gpu)
    (env_dir / "verdict.json").write_text(json.dumps(verdict.to_dict(), indent=2) + "\n")
    return verdict
