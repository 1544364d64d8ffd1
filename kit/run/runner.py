"""The Runner interface: start every rank of one run, wait with a timeout, stop everything, say how each host
ended. Two runners today: kit.run.local (processes on this machine) and kit.run.ssh (SSH hosts); a batch
scheduler's runner implements the same four methods and touches nothing else.

    outcome = execute(runner, run, run_dir)   # start -> wait(timeout) -> stop on timeout/failure/Ctrl-C
                                              # -> gather -> judge: the run's status and figure from its log
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.catalogue import quantity_unit
from kit.core.inputs import KitError
from kit.results.extract import MethodError
from kit.results.parsers import ParseError
from kit.run.plan import PlannedRun
from kit.run.records import measure_of

KILL_GRACE_S = 5.0  # SIGTERM, then SIGKILL what is left after this many seconds (every runner, every host)
KILL_REAPED_S = 5.0  # after SIGKILL, how long a stop waits for the killed processes to be gone


# Sets the parent-death signal (prctl PR_SET_PDEATHSIG = 1), ends at once if kit is already gone, then becomes argv.
_WITH_PARENT = """import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[2]))
if os.getppid() != int(sys.argv[1]):
    os._exit(128 + int(sys.argv[2]))
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as exc:
    sys.stderr.write(f"kit: cannot start {sys.argv[3]}: {exc.strerror}\\n")
    os._exit(127)
"""


def dies_with_kit(argv: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """argv started so that it gets SIG when this process ends (Linux; elsewhere argv as it is). SIGKILL for a
    process that may be held still (SIGSTOP), which a pending SIGTERM would not end."""
    if not sys.platform.startswith("linux"):
        return list(argv)
    return [sys.executable, "-c", _WITH_PARENT, str(os.getpid()), str(int(sig)), *argv]


# Waits for the parent-death signal, then runs argv; a guard kit closes (SIGKILL) runs nothing.
_GUARD = """import ctypes, os, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
if os.getppid() == int(sys.argv[1]):
    signal.sigwait({signal.SIGTERM})
subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


class Guard:
    """Runs a cleanup command (scancel of a job, say) should this process end without closing the guard, kill -9
    included (Linux; elsewhere it does nothing)."""

    def __init__(self, argv: list[str] | None = None):  # None: a guard of nothing
        self._proc = subprocess.Popen([sys.executable, "-c", _GUARD, str(os.getpid()), *argv],
                                      stdin=subprocess.DEVNULL, start_new_session=True) \
            if argv and sys.platform.startswith("linux") else None

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


class RunError(KitError):
    """A run that cannot start or go on (one line for the user)."""


def master_port() -> int:
    """The one master-port rule: a port the OS reports free on this machine, picked per run."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class HostStatus:
    host: str
    exit_code: int | None = None
    error: str = ""  # "" | "timeout" | "exit N" | why the host was lost
    seconds: float = 0.0
    command: str = ""  # the exact command line (environment included)

    def to_dict(self) -> dict:
        return {"exit_code": self.exit_code, "error": self.error, "seconds": round(self.seconds, 3),
                "command": self.command}


@dataclass
class RunOutcome:
    run: PlannedRun
    status: str  # ok | failed | timeout | skipped | done
    seconds: float
    value: float | None = None
    reason: str = ""
    exit_code: int | None = None
    hosts: list[HostStatus] = field(default_factory=list)
    unit: str = "images/s"  # of value, named as the report names it (kit.core.catalogue.quantity_unit)


class Runner(ABC):
    """Starts and stops the ranks of one run at a time."""

    time_limits: dict[str, float] | None = None  # case key -> a run's seconds, set by its caller (kit reproduce: the
    # auditor's); the suite's timeout_s otherwise

    def time_limit(self, run: PlannedRun) -> float:
        return (self.time_limits or {}).get(run.case.key, run.case.timeout_s)

    @abstractmethod
    def start(self, run: PlannedRun) -> None:
        """Start every rank of the run (all hosts at once); return without waiting."""

    @abstractmethod
    def wait(self, timeout: float) -> bool:
        """Wait until every rank ended, one failed, or `timeout` seconds passed; False on timeout."""

    @abstractmethod
    def stop(self) -> None:
        """Stop every process (and container) of the run on every host; silent where nothing is left."""

    @abstractmethod
    def statuses(self) -> list[HostStatus]:
        """How each host's part ended (rank order)."""

    def gather(self, run: PlannedRun) -> None:
        """Bring the run's logs into the run directory (rank 0's log into logs/). Nothing for local runs."""
        return None

    # ---- the bench loop's hooks (kit.run.bench.run_each), each with what a runner that needs nothing does ----

    def allocate(self, nodes: int, runs: int = 1) -> None:
        """Hold `nodes` nodes for the next run (`runs` still to come): a scheduler's allocation. Nothing here."""
        return None

    def watched(self) -> AbstractContextManager:
        """A context around one run whose value, if not None, has .result(): run.json's host_load of the run."""
        return nullcontext()

    def recorded(self, outcome: RunOutcome) -> dict:
        """What run.json keeps of a run beyond its figure: every host's command and end."""
        return {"hosts": {h.host: h.to_dict() for h in outcome.hosts}}

    def release(self) -> None:
        """Give back what allocate() held; silent where nothing is held."""
        return None


def execute(runner: Runner, run: PlannedRun, run_dir: Path) -> RunOutcome:
    """One run through any runner: its outcome judged from rank 0's log and every host's status."""
    t0 = time.monotonic()
    limit = runner.time_limit(run)
    runner.start(run)
    try:
        ended = runner.wait(limit)
        if not ended or any(s.error for s in runner.statuses()):
            runner.stop()
    except BaseException:  # Ctrl-C or any error here: leave no process (and no container) behind
        runner.stop()
        raise
    runner.gather(run)
    return judge(run, Path(run_dir), runner.statuses(), ended, time.monotonic() - t0, limit)


def judge(run: PlannedRun, run_dir: Path, hosts: list[HostStatus], ended: bool, seconds: float,
          limit: float | None = None) -> RunOutcome:
    """The run's status and figure: rank 0's log (run_dir/<log_rel>) reduced as its case says, and each host's end;
    limit: the seconds it was given (its case's timeout_s where not said)."""
    log = run_dir / run.log_rel
    several = len(hosts) > 1
    code = hosts[0].exit_code if hosts else None
    if not ended or any(h.error == "timeout" for h in hosts):
        where = "stopped on every host" if several else "killed (every process of the run)"
        given = run.case.timeout_s if limit is None else limit
        return RunOutcome(run, "timeout", seconds, reason=f"no end after {given:g} s: {where}",
                          exit_code=code, hosts=hosts)
    try:
        figure, why = (measure_of(log, run_dir / "logs"), "") if log.is_file() else (None, "no log from rank 0")
    except (ParseError, MethodError) as exc:
        figure, why = None, exc.reason if isinstance(exc, ParseError) else str(exc)
    value = None if figure is None else figure.value
    failed = [h for h in hosts if h.error]
    if figure is not None and not failed:
        return RunOutcome(run, "ok", seconds, value=value, exit_code=0, hosts=hosts,
                          unit=quantity_unit(run.case.model, figure.unit))
    if several or any(not h.error.startswith("exit ") for h in failed):  # name the hosts and what they said
        reason = "; ".join(p for p in ("; ".join(f"{h.host}: {h.error}" for h in failed), why) if p)
    else:
        reason = f"exit {code}: {why}" if value is None else f"exit {code} after a complete log"
    return RunOutcome(run, "failed", seconds, reason=reason, exit_code=code, hosts=hosts)


def stop_tree(proc: subprocess.Popen, grace: float = KILL_GRACE_S) -> None:
    """SIGTERM a local process's whole tree, SIGKILL what is left after the grace period.

    The tree is collected first: launchers such as paddle.distributed.launch start their workers in
    sessions of their own, which a process-group kill alone would miss.
    """
    import psutil

    try:
        tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    for member in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.terminate()
    _gone, alive = psutil.wait_procs(tree, timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for member in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(alive, timeout=5.0)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
