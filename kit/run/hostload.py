"""How busy this host was while a run ran: what run.json's `host_load` records per run (hyperfine warns the same way
when other programs compete for the CPU).

    with HostLoad(containers=bool(runner.images), env_dir=run_dir / "env") as load:
        outcome = execute(runner, run, run_dir)
    record_run(..., host_load=load.result())

"The run" is a process tree: this process and every process it starts (by default; `pid` picks another root), plus,
with `containers`, the containers started during the run (their processes are the container runtime's children,
not ours). A background thread samples every INTERVAL_S seconds the 1-minute load average (its maximum is kept)
and the adopted containers' cgroup CPU time. CPU totals are read at the window's two ends, so nothing that ran
in between is missed however short: the machine's busy CPU time (psutil.cpu_times: user, nice, system, irq,
softirq and steal, summed over all logical CPUs) against the run's own (user + system of each process of the
tree, plus the children it reaped). What is left is other processes' (and other guests', via steal):

    other_cpu_share = (busy CPU seconds of the machine - CPU seconds of the run) / (wall seconds x logical cores)

"The machine" is the logical CPUs the run may use (its CPU affinity) when that is fewer than all: other processes
on other CPUs do not compete with it. A CPU quota without a cpuset (docker --cpus) is not seen.

GPUs that other processes held come from check-env's capture of this host (env/<host>/capture.json, taken before
the runs), through kit.hosts.consistency's busy-GPU verdict. Whether that makes the host "busy" is
kit.results.noise's rule. Memory is bounded: the thread keeps running maxima and the cgroups it adopted, nothing
per sample. Sampling never stops a benchmark: a psutil error ends up as `error` in the record.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import psutil

INTERVAL_S = 0.5
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")  # guest time is inside user and nice
# a container's own cgroup (/docker/<id>, docker-<id>.scope, libpod-<id>, ...), not its runtime daemon's service
CONTAINER_CGROUP = re.compile(r"(docker|libpod|crio|cri-containerd)[-/][0-9a-f]{12,}|kubepods")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_ROOT = Path("/proc")


def run_cpus(proc: psutil.Process) -> list[int] | None:
    """The logical CPUs the run may use (its affinity: taskset, a cpuset), None when that is all of them or
    unknown (psutil has no affinity on macOS)."""
    try:
        cpus = sorted(proc.cpu_affinity())
        listed = len(psutil.cpu_times(percpu=True))
    except (psutil.Error, AttributeError, OSError):
        return None
    every = psutil.cpu_count() or 0
    return cpus if cpus and len(cpus) < every and max(cpus) < listed == every else None


def machine_busy_seconds(cpus: list[int] | None = None) -> float:
    """Busy CPU seconds since boot, of every logical CPU or of `cpus`."""
    if cpus is None:
        times = [psutil.cpu_times()]
    else:
        per_cpu = psutil.cpu_times(percpu=True)
        times = [per_cpu[i] for i in cpus]
    return sum(getattr(t, name, 0.0) for t in times for name in BUSY_FIELDS)


def tree_cpu_seconds(root: psutil.Process) -> float:
    """CPU seconds of root and its descendants, each with the children it already reaped (so a process that ended
    and was waited for still counts, in its parent's children_* times)."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        procs = [root]
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def _container_cpu_file(pid: int) -> Path | None:
    """The CPU accounting file of the container cgroup `pid` lives in (cgroup v1 cpuacct or v2), if any."""
    try:
        lines = (PROC_ROOT / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3 or not CONTAINER_CGROUP.search(parts[2]):
            continue
        controllers, path = parts[1].split(","), parts[2].lstrip("/")
        if "cpuacct" in controllers:
            candidate = CGROUP_ROOT / parts[1] / path / "cpuacct.usage"
        elif parts[1] == "":
            base = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
            candidate = base / path / "cpu.stat"
        else:
            continue
        if candidate.is_file():
            return candidate
    return None


def _read_cpu_file(path: Path) -> float | None:
    """CPU seconds a cgroup used so far (v1 cpuacct.usage: ns; v2 cpu.stat usage_usec), None when unreadable."""
    try:
        text = path.read_text()
    except OSError:
        return None
    if path.name == "cpuacct.usage":
        return int(text.strip()) / 1e9 if text.strip().isdigit() else None
    match = re.search(r"^usage_usec (\d+)$", text, re.M)
    return int(match.group(1)) / 1e6 if match else None


def gpus_busy(env_dir: Path | None) -> list[str]:
    """'host: GPU 0 runs pid 4242 python (1024 MiB)' for every process on a GPU in the captures under env_dir
    (check-env's busy verdict), [] where there is none or no capture."""
    if env_dir is None:
        return []
    from kit.core.rundir import env_captures
    from kit.hosts.capture import HostCapture
    from kit.hosts.consistency import consistency

    out = []
    for data in env_captures(env_dir).values():
        try:
            busy = consistency([HostCapture.from_dict(data)]).busy
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
        out += [f"{host}: {entry}" for host, entries in busy.items() for entry in entries]
    return out


class HostLoad:
    """Context manager: samples the host while the block runs; result() is run.json's host_load entry."""

    def __init__(self, pid: int | None = None, containers: bool = False, env_dir: Path | None = None,
                 interval: float = INTERVAL_S):
        self.pid = os.getpid() if pid is None else pid
        self.containers = containers
        self.env_dir = env_dir
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error = ""
        self._record: dict | None = None

    # ----- the window -----

    def __enter__(self) -> HostLoad:
        try:
            self._root = psutil.Process(self.pid)
            self._machine_cores = psutil.cpu_count() or 1
            self._cpus = run_cpus(self._root)
            self._cores = len(self._cpus) if self._cpus else self._machine_cores
            self._load_before = os.getloadavg()[0]
            self._load_max = self._load_before
            self._samples = 0
            self._cgroups: dict[Path, float] = {}  # adopted container cgroup -> its CPU seconds when last read
            self._seen: set[int] = set()  # pids already looked at for a container
            self._old_cgroups = self._scan_containers(adopt=False) if self.containers else set()
            self._t0 = time.monotonic()
            self._busy0 = machine_busy_seconds(self._cpus)
            self._tree0 = tree_cpu_seconds(self._root)
        except (psutil.Error, OSError) as exc:
            self._error = f"{type(exc).__name__}: {exc}"
            return self
        self._thread = threading.Thread(target=self._loop, name="kit-hostload", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._error:
            try:
                self._record = self._finish()
            except (psutil.Error, OSError) as exc:
                self._error = f"{type(exc).__name__}: {exc}"

    def result(self) -> dict:
        busy_gpus = gpus_busy(self.env_dir)
        if self._error or self._record is None:
            out = {"error": self._error or "not sampled"}
        else:
            out = dict(self._record)
        return out | ({"gpus_busy": busy_gpus} if busy_gpus else {})

    # ----- sampling -----

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except (psutil.Error, OSError):  # one lost sample: the window's totals do not need it
                continue

    def _sample(self) -> None:
        self._load_max = max(self._load_max, os.getloadavg()[0])
        if self.containers:
            self._scan_containers(adopt=True)
        self._samples += 1

    def _scan_containers(self, adopt: bool) -> set[Path]:
        """Container cgroups of processes not seen before; with adopt, the ones new since __enter__ become the
        run's and every adopted cgroup's CPU time is read again (kept when its container has gone)."""
        found, alive = set(), set()
        for proc in psutil.process_iter():
            alive.add(proc.pid)
            if proc.pid in self._seen:
                continue
            self._seen.add(proc.pid)
            cpu_file = _container_cpu_file(proc.pid)
            if cpu_file is not None:
                found.add(cpu_file)
        self._seen &= alive  # bounded by the processes alive now
        if adopt:
            for cpu_file in found - self._old_cgroups:
                self._cgroups.setdefault(cpu_file, 0.0)
            for cpu_file in self._cgroups:
                seconds = _read_cpu_file(cpu_file)
                if seconds is not None:
                    self._cgroups[cpu_file] = max(self._cgroups[cpu_file], seconds)
        return found

    def _finish(self) -> dict:
        self._sample()
        wall = max(time.monotonic() - self._t0, 1e-9)
        capacity = wall * self._cores
        machine = max(machine_busy_seconds(self._cpus) - self._busy0, 0.0)
        own = max(tree_cpu_seconds(self._root) - self._tree0, 0.0) + sum(self._cgroups.values())
        other = max(machine - own, 0.0)
        record = {
            "cores": self._cores,
            "seconds": round(wall, 3),
            "samples": self._samples,
            "load_before": round(self._load_before, 2),
            "load_during_max": round(self._load_max, 2),
            "cpu_busy_share": round(min(machine / capacity, 1.0), 3),
            "own_cpu_share": round(min(own / capacity, 1.0), 3),
            "other_cpu_share": round(min(other / capacity, 1.0), 3),
            "other_cpu_seconds": round(other, 2),
        }
        if self._cpus:  # the shares are of these CPUs; the load average is the whole machine's
            record |= {"cpus": self._cpus, "machine_cores": self._machine_cores}
        if self._cgroups:
            record["containers"] = len(self._cgroups)
        return record


def _cpu_seconds_by_process(skip: int) -> dict[tuple[int, float], tuple[str, float]]:
    """{(pid, start time): (name, CPU seconds so far)} of every process but `skip` (a pid reused is another key)."""
    out = {}
    for proc in psutil.process_iter(["name", "create_time", "cpu_times"]):
        info = proc.info
        if proc.pid == skip or info.get("cpu_times") is None:
            continue
        out[(proc.pid, info.get("create_time") or 0.0)] = (info.get("name") or "?",
                                                           info["cpu_times"].user + info["cpu_times"].system)
    return out


def busy_now(seconds: float = 2.0, named: int = 3) -> tuple[dict, list[str]]:
    """How busy this host is while the kit only waits, SECONDS long: (the window's host_load entry, as a run's; the
    processes that used most CPU in it, 'pid 4242 python 99% of a core', at most NAMED, each over 5% of a core)."""
    me = os.getpid()
    before = _cpu_seconds_by_process(me)
    t0 = time.monotonic()
    with HostLoad() as load:
        time.sleep(seconds)
    wall = max(time.monotonic() - t0, 1e-9)
    used = []
    for key, (name, cpu) in _cpu_seconds_by_process(me).items():
        share = (cpu - before.get(key, (name, 0.0))[1]) / wall  # one not there before started in the window
        if share > 0.05:
            used.append((share, f"pid {key[0]} {name} {share:.0%} of a core"))
    return load.result(), [said for _, said in sorted(used, reverse=True)[:named]]
