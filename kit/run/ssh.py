"""The SSH runner: one run over several hosts, every host started at the same moment (one thread each).

Rank 0 is the first host (the master address). Each host's process tree runs in its own session (`setsid`),
its process-group id written beside its stdout.log, so a timeout, a failed host or Ctrl-C stops the run on
EVERY host: SIGTERM to the tree, SIGKILL after the grace period (kit.run.runner.KILL_GRACE_S); so does the end of
the kit's SSH connection (kill -9 of the kit included: wrapper_command's watcher). Hosts with a container
runtime (docker, podman: kit.config.runtimes) run each rank in the pinned image; a killed client's container is
removed too.

    <work_dir>/runs/<run id>/<host>/<run folder>/   stdout.log, pgid, launcher/, <log stem>.cmd.json
    <work_dir>/harness/<digest>/                     the staged harness (native hosts)
"""

from __future__ import annotations

import hashlib
import posixpath
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kit.config import reference
from kit.config.inventory import HostConfig, Inventory
from kit.config.runtimes import runtime
from kit.core.layout import sidecar_name, telemetry_name
from kit.core.rundir import remote_run_id
from kit.hosts.connect import connect, quote_cmd, remote_env
from kit.hosts.fanout import on_all
from kit.run import gather
from kit.run.command import (
    HARNESS,
    SAMPLER,
    SCRIPT_FILES,
    SCRIPTS,
    Container,
    Mount,
    Site,
    cleanup_command,
    command_for,
    container_name,
)
from kit.run.needs import needs_script, read_needs, settle
from kit.run.plan import PlannedRun
from kit.run.runner import KILL_GRACE_S, KILL_REAPED_S, HostStatus, RunError, Runner, master_port

# every module of the harness travels (train.py imports its backends, precision, synthetic data, loaders)
HARNESS_FILES = tuple(sorted(p.name for p in HARNESS.parent.glob("*.py")))
Progress = Callable[[str, str, str], None]


def harness_dir(host: HostConfig) -> str:
    """Where the harness is staged on a native host: content-addressed, so changed files never mix."""
    digest = hashlib.sha256(b"".join((HARNESS.parent / f).read_bytes() for f in HARNESS_FILES)).hexdigest()[:12]
    return posixpath.join(host.work_dir, "harness", digest)


def scripts_dir(host: HostConfig) -> str:
    """Where the kit's scripts for the published programs are staged on a host (SCRIPT_FILES)."""
    return posixpath.join(host.work_dir, "kit-scripts")


def ssh_site(host: HostConfig, workdir: str | None, log_name: str, image: str | None, program: bool = False,
             gpus: tuple[int, ...] | None = None) -> Site:
    """A host of the inventory as a rank's site; workdir None: not known yet (a dry run). A published program
    (program=True) in a container sees the scripts staged for it (SshRunner.stage). gpus: the host's GPUs the rank
    is pinned to (kit.run.command.pinned_env); None: all of them."""
    container = None
    if engine := runtime(host.runtime):
        mounts = (Mount(workdir, workdir), Mount(host.data_dir, host.data_dir, read_only=True)) if workdir else ()
        if workdir and program:
            mounts += (Mount(scripts_dir(host), reference.SCRIPTS_DIR, read_only=True),)
            if host.model_code:  # the host's checkouts over the image's (checked against the pins like native)
                mounts += (Mount(host.model_code, reference.CODE_ROOT, read_only=True),)
        container = Container(image or "", mounts, workdir=workdir, runtime=engine)
    return Site(name=host.name, address=host.address, nic=host.nic, python=host.python,
                harness=posixpath.join(harness_dir(host), "train.py"),
                scripts=scripts_dir(host), model_code=host.model_code or reference.CODE_ROOT, data_dir=host.data_dir,
                launcher_logs=posixpath.join(workdir, "launcher") if workdir else None,
                sidecar=posixpath.join(workdir, sidecar_name(log_name)) if workdir else None, container=container,
                telemetry=posixpath.join(workdir, telemetry_name(log_name)) if workdir else None, gpus=gpus)


def wrapper_command(workdir: str, env: dict[str, str], argv: list[str], after: str | None = None) -> str:
    """An earlier attempt's folder moved aside, mkdir, cd, then the command as its own session leader (pgid
    file), stdout+stderr to stdout.log. The run dies with its SSH connection: sshd, this shell's parent, ends when
    the connection closes (kit ended, kill -9 included), and a watcher then stops the tree as kill_command does; a
    run that ends first takes its watcher with it. (The session's input cannot tell: it is closed from the start.)
    `after`, a shell command, runs once the run has ended, however it ended (the watcher's stop too), its output
    dropped and the run's exit status kept."""
    inner = f"echo $$ > pgid; exec {remote_env(env)} {quote_cmd(argv)} > stdout.log 2>&1"
    where = quote_cmd([workdir])
    keep = quote_cmd([workdir + ".attempt-"])  # an earlier attempt's files stay on the host, never mixed in
    then = f"({after}) < /dev/null > /dev/null 2>&1; " if after else ""
    watch = (f"(while kill -0 $PPID 2>/dev/null; do sleep 1; done; ({kill_command(workdir)}); {then}) "
             "< /dev/null > /dev/null 2>&1 &")
    return (f"if [ -e {where} ]; then mv {where} {keep}$(date +%s%N); fi; "
            f"mkdir -p {where} && cd {where} && {{ {watch} w=$!; setsid -w bash -c {quote_cmd([inner])}; "
            f"rc=$?; kill $w 2>/dev/null; {then}exit $rc; }}")


# every descendant of a pid outside its process group (launchers such as paddle.distributed.launch put workers in
# sessions of their own, out of reach of a process-group kill); the group's own members are left to the group's
# signal, so each process gets one TERM (a docker client force-exits at its third, not waiting for its container);
# collected BEFORE any signal, while the tree is still linked
_DESCENDANTS = (
    "ps -eo pid=,ppid=,pgid= | awk -v root=\"$p\" '{parent[$1] = $2; group[$1] = $3} END {ids[root] = 1; grow = 1; "
    "while (grow) {grow = 0; for (c in parent) if (!(c in ids) && (parent[c] in ids)) {ids[c] = 1; grow = 1}} "
    "for (i in ids) if (group[i] != root) printf \"%s \", i}'"
)


def kill_command(workdir: str, grace: float = KILL_GRACE_S, reaped: float = KILL_REAPED_S) -> str:
    """Stop the run's whole process tree on a host (TERM, then KILL after GRACE) and return once it is gone (up to
    REAPED after the KILL); silent when it is already gone. Alive means a process of the tree collected first, or
    of the run's process group: one whose parent a concurrent stop (the connection watcher's) already ended is
    still stopped."""
    pgid_file = quote_cmd([posixpath.join(workdir, "pgid")])
    return (
        f"p=$(cat {pgid_file} 2>/dev/null) || exit 0; [ -n \"$p\" ] || exit 0; "
        f"tree=$({_DESCENDANTS}); "
        "alive() { kill -0 -$p 2>/dev/null && return 0; for q in $tree; do kill -0 $q 2>/dev/null && return 0; "
        "done; return 1; }; "
        f"kill -TERM -$p $tree 2>/dev/null; "
        f"for i in $(seq {int(grace * 10)}); do alive || exit 0; sleep 0.1; done; "
        f"kill -KILL -$p $tree 2>/dev/null; "
        f"for i in $(seq {int(reaped * 10)}); do alive || exit 0; sleep 0.1; done; exit 0"
    )


class SshRunner(Runner):
    """gpus: the GPUs of each host every run is pinned to (one GPU's part of a sweep: kit.run.sweep); None: all."""

    def __init__(self, inv: Inventory, hosts: list[HostConfig], run_dir: Path, hardware: str,
                 images: dict[str, str] | None = None, progress: Progress | None = None,
                 gpus: tuple[int, ...] | None = None):
        self.inv, self.hosts, self.hardware, self.gpus = inv, hosts, hardware, gpus
        self.run_dir = Path(run_dir).resolve()
        self.run_id = remote_run_id(self.run_dir)
        self.images = images or {}  # framework -> image reference, for hosts with a container runtime
        self.progress = progress or (lambda host, what, detail: None)
        self._run: PlannedRun | None = None
        self._status: dict[str, HostStatus] = {}
        self._threads: list[threading.Thread] = []
        self._settled = threading.Event()  # every host's part ended, or one failed
        self._left = 0  # hosts whose part has not ended
        self._left_lock = threading.Lock()

    def workdir(self, host: HostConfig, run: PlannedRun) -> str:
        return posixpath.join(host.work_dir, "runs", self.run_id, host.name, run.folder.as_posix())

    def commands(self, run: PlannedRun, port: int) -> list[tuple[HostConfig, str, str]]:
        """(host, remote workdir, remote command line) for every host that starts something."""
        image = self.images.get(run.case.framework)
        boxed = next((h for h in self.hosts if runtime(h.runtime)), None)
        if image is None and boxed:
            raise RunError(f"{boxed.name} has runtime {boxed.runtime} but there is no image for {run.case.framework}")
        program = run.case.impl == "reference"
        sites = [ssh_site(h, self.workdir(h, run), run.log_rel.name, image, program, self.gpus) for h in self.hosts]
        out = []
        for rank, host in enumerate(self.hosts):
            cmd = command_for(run.case, run.repeat, rank, sites, port, self.hardware, self.run_id)
            if not cmd.starts_nothing:
                workdir = self.workdir(host, run)
                # a `docker run` client stopped before it saw its container start (a stop signal in its first
                # moments) exits and leaves the container behind, created or even running: --rm does not apply
                engine = runtime(host.runtime)
                after = quote_cmd(engine.remove_argv(container_name(self.run_id, run.case.key, run.repeat,
                                                                    host.name))) if engine else None
                out.append((host, workdir, wrapper_command(workdir, cmd.launched.env, cmd.launched.argv, after)))
        return out

    def stage(self, runs: list[PlannedRun], force: bool = False) -> list[dict]:
        """What the runs need on every host, put there and checked (sha256) on all hosts at once: the harness
        (native hosts; the images carry it) and, for published programs, the kit's launcher, drivers and
        patch; then each host's model code for those programs (a native host's, or a container host's
        `model_code` mounted over the image's) must be there, at the commit docker/pins.yaml pins (images
        check out the pins themselves), and the data they read. RunError naming every host and path that is
        missing or differs; nothing has started then. A checkout at another commit refuses the runs unless
        `force`; then the mismatches are returned (host added) for the run's record."""
        programs = sorted({run.case.key: run.case for run in runs if run.case.impl == "reference"}.items())
        mismatches: list[dict] = []

        def put(host: HostConfig) -> list[str]:
            files = [] if runtime(host.runtime) else [(HARNESS.parent / n, posixpath.join(harness_dir(host), n))
                                                         for n in HARNESS_FILES]
            if programs:
                files += [(SCRIPTS / n, posixpath.join(scripts_dir(host), n)) for n in SCRIPT_FILES]
            if self.hardware == "gpu":
                files.append((SCRIPTS / SAMPLER, posixpath.join(scripts_dir(host), SAMPLER)))
            with connect(host, self.inv) as conn:
                for folder in sorted({posixpath.dirname(remote) for _local, remote in files}):
                    conn.run(f"mkdir -p {quote_cmd([folder])}", hide=True)
                for local, remote in files:
                    conn.put(str(local), remote)
                problems = _differ(conn, files)
                if programs:
                    check = needs_script(programs, host.data_dir, host.model_code,
                                         check_code=not runtime(host.runtime) or bool(host.model_code))
                    found, off_pin = read_needs(programs, conn.run(check, hide=True, warn=True).stdout)
                    problems += found
                    mismatches.extend({"host": host.name, **m} for m in off_pin)
            self.progress(host.name, "staged", f"{len(files)} file(s)")
            return problems

        found = [f"{name}: {problem}" for name, out in on_all(self.hosts, put).items()
                 for problem in (out.get() if out.ok else [str(out.error)])]
        return settle(found, mismatches, force, self.progress, RunError, "host")

    # ---- Runner ------------------------------------------------------------------------------------

    def start(self, run: PlannedRun) -> None:
        plan = self.commands(run, master_port())
        self._run, self._settled, self._left = run, threading.Event(), len(plan)
        if not plan:
            self._settled.set()
        self._status = {h.name: HostStatus(h.name, command=line) for h, _workdir, line in plan}
        self._threads = [threading.Thread(target=self._on_host, args=(h, line, run), daemon=True)
                         for h, _workdir, line in plan]
        for thread in self._threads:
            thread.start()

    def _on_host(self, host: HostConfig, line: str, run: PlannedRun) -> None:
        status = self._status[host.name]
        try:
            self._run_on(host, line, run, status)
        finally:  # whatever happened in this thread, wait() hears of it
            with self._left_lock:
                self._left -= 1
                if status.error or not self._left:
                    self._settled.set()

    def _run_on(self, host: HostConfig, line: str, run: PlannedRun, status: HostStatus) -> None:
        t0 = time.monotonic()
        self.progress(host.name, "start", run.label)
        try:
            with connect(host, self.inv) as conn:
                res = conn.run(line, hide=True, warn=True, timeout=self.time_limit(run))
            status.exit_code = res.exited
            if res.exited != 0:
                status.error = f"exit {res.exited}"
        except Exception as exc:  # connection lost, timeout, ...
            name = type(exc).__name__
            status.error = "timeout" if name == "CommandTimedOut" else f"{name}: {exc}".strip()
        finally:
            status.seconds = time.monotonic() - t0
            self.progress(host.name, "end", status.error or "ok")

    def wait(self, timeout: float) -> bool:
        # woken the moment the last host ends or one fails; each host's own SSH timeout fires first
        if not self._settled.wait(timeout + 30):
            return False
        return not any(s.error == "timeout" for s in self._status.values())

    def stop(self) -> None:
        run = self._run

        def kill(host: HostConfig) -> None:
            with connect(host, self.inv) as conn:
                conn.run(kill_command(self.workdir(host, run)), hide=True, warn=True,
                         timeout=KILL_GRACE_S + KILL_REAPED_S + 15)
                if engine := runtime(host.runtime):  # a killed `docker run` client leaves its container running
                    conn.run(quote_cmd(cleanup_command(self.run_id, engine)), hide=True, warn=True, timeout=60)

        for name, out in on_all(self.hosts, kill).items():
            if not out.ok:  # a dead host has nothing left to kill
                self.progress(name, "kill-failed", str(out.error))
        for thread in self._threads:
            thread.join(timeout=60)

    def statuses(self) -> list[HostStatus]:
        return list(self._status.values())

    def gather(self, run: PlannedRun) -> None:
        started = [h for h in self.hosts if h.name in self._status]  # not those whose ranks rank 0's mpirun ran
        gather.gather_run(self.inv, started, self.run_dir, run, self.progress)


def _differ(conn, files: list[tuple[Path, str]]) -> list[str]:
    """The staged files whose sha256 on the host is not the local one."""
    if not files:
        return []
    out = conn.run(quote_cmd(["sha256sum", "--", *(remote for _local, remote in files)]), hide=True, warn=True).stdout
    there = dict(reversed(line.split(None, 1)) for line in out.splitlines() if line.strip())
    return [f"{remote} differs after staging (sha256)" for local, remote in files
            if there.get(remote) != hashlib.sha256(local.read_bytes()).hexdigest()]
