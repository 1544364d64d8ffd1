"""Slurm's client commands as the Slurm runner uses them: run one, name what is missing, the partition's nodes and
their states, the container mode this srun supports, and the words of their outputs."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

from kit.config.inventory import SlurmConfig
from kit.run.runner import RunError

TOOLS = ("salloc", "srun", "squeue", "scancel", "scontrol", "sinfo")


class SlurmError(RunError):
    """Slurm cannot be used or refuses the job (one line for the user)."""


def slurm(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """A Slurm client command; SlurmError when the tool is not on this machine."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(no_slurm()) from None


def no_slurm() -> str:
    missing = [t for t in TOOLS if shutil.which(t) is None]
    return (f"no Slurm on this machine: {', '.join(missing or TOOLS)} not found on PATH (Debian package "
            "slurm-client; SLURM_CONF or /etc/slurm/slurm.conf names the controller)")


def first_line(res: subprocess.CompletedProcess) -> str:
    return next((ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()), f"exit {res.returncode}")


def partition_nodes(cfg: SlurmConfig) -> list[str]:
    """The partition's node names; SlurmError: no Slurm, no answer from the controller, unknown partition."""
    if any(shutil.which(t) is None for t in TOOLS):
        raise SlurmError(no_slurm())
    res = slurm(["sinfo", "-h", "-o", "%R"])
    if res.returncode != 0:
        raise SlurmError(f"Slurm does not answer (sinfo): {first_line(res)}")
    known = sorted(set(res.stdout.split()))
    if cfg.partition not in known:
        raise SlurmError(f"slurm.partition {cfg.partition!r}: Slurm has no such partition "
                         f"(sinfo lists: {', '.join(known) or 'none'})")
    return list(dict.fromkeys(slurm(["sinfo", "-h", "-N", "-p", cfg.partition, "-o", "%N"]).stdout.split()))


def node_states(names: list[str]) -> dict[str, tuple[str, str]]:
    """{node: (sinfo's compact state, its reason)} of the nodes named that Slurm knows ('down*', 'Not responding')."""
    res = slurm(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%t|%E"])
    found = {}
    for line in res.stdout.splitlines():
        name, state, reason = (line.split("|", 2) + ["", ""])[:3]
        if name.strip():
            found.setdefault(name.strip(), (state.strip(), reason.strip()))
    return found


UNUSABLE = ("down", "drain", "drng", "fail", "failg", "maint", "inval", "unk")  # sinfo %t: takes no new job


def unusable(state: str, reason: str) -> str | None:
    """PURE: why a node in this state (sinfo %t and %E) takes no new job ('Slurm lists it down*: Not
    responding'), or None: '*' (the controller no longer hears from it), down, drained or draining, failed..."""
    if not (state.endswith("*") or state.rstrip("*~#!%$@^-+") in UNUSABLE):
        return None
    return f"Slurm lists it {state}" + (f": {reason}" if reason and reason != "none" else "")


def has_pyxis() -> bool:
    """Whether this srun takes --container-image (the pyxis SPANK plugin)."""
    return "--container-image" in (res := slurm(["srun", "--help"])).stdout + res.stderr


def container_mode(cfg: SlurmConfig) -> str:
    """native, docker or pyxis: slurm.container, `auto` resolved against this srun and slurm.images."""
    if cfg.container == "auto":
        return "native" if not cfg.images else "pyxis" if has_pyxis() else "docker"
    if cfg.container == "pyxis" and not has_pyxis():
        raise SlurmError("slurm.container is pyxis, but this srun has no --container-image (the pyxis plugin is "
                         "not installed on this cluster); use container: docker or native")
    return cfg.container


def scontrol_fields(line: str) -> dict[str, str]:
    """`scontrol show ... -o` output: Key=Value words."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def read_or_empty(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")
    return ""


def sacct_fields(line: str) -> dict:
    state, code, nodes, elapsed = (line.split("|") + ["", "", "", ""])[:4]
    return {"state": state.split()[0] if state else "", "exit_code": code, "nodes": nodes, "elapsed": elapsed}


def job_in(lines: list[str]) -> str | None:
    """The job id salloc names ("Pending job allocation 12", "Granted job allocation 12")."""
    for line in lines:
        words = line.split()
        if "allocation" in words and words[-1].isdigit():
            return words[-1]
    return None
