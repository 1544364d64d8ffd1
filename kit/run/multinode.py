"""One benchmark job over several hosts: stage the harness, start every host at once, watch, kill, gather.

For each run (case x repeat) every host starts its launcher at the same moment (one thread per
host), rank 0 on the first host (the master address). Each host's process tree runs in its own
session (`setsid`), its process-group id written beside its log, so a timeout, a failed host or
Ctrl-C stops the run on EVERY host: SIGTERM to the group, SIGKILL after a grace period.
Logs come back after every run:
    runs/<id>/logs/<DLPerf path>.log                    rank 0's log (the figure)
    runs/<id>/hosts/<host>/<case>/<repeat>/...          every host's stdout and launcher logs
A run counts as done when its rank-0 log yields a figure; `--resume` redoes the others.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import posixpath
import random
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kit.config.hosts import HostConfig, Inventory
from kit.config.suites import Suite
from kit.core.inputs import KitError
from kit.core.layout import log_of_run_folder
from kit.hosts import probe as envprobe
from kit.hosts.connect import check_reachable, connect, quote_cmd, remote_env
from kit.run import bench
from kit.run.command import (
    HARNESS,
    IMAGE_HARNESS,
    Command,
    DockerRun,
    Mount,
    Placement,
    build_command,
    cleanup_command,
    container_name,
    docker_command,
)

KILL_GRACE_S = 5
HARNESS_FILES = ("train.py", "models_torch.py", "models_paddle.py", "data.py")


class MultinodeError(KitError):
    """The job cannot start or go on (one line for the user)."""


@dataclass
class HostResult:
    host: str
    exit_code: int | None = None
    error: str = ""
    seconds: float = 0.0
    command: str = ""  # the exact remote command line (environment included)


@dataclass
class JobOutcome:
    run: bench.PlannedRun
    status: str  # ok | failed | timeout
    value: float | None
    reason: str
    hosts: list[HostResult] = field(default_factory=list)
    seconds: float = 0.0


def preflight(inv: Inventory, hosts: list[HostConfig]) -> None:
    """Every host answers over SSH with a known host key, or nothing starts."""
    problems = check_reachable(hosts, inv)
    if problems:
        lines = "; ".join(f"{getattr(h, 'name', h)}: {e}" for h, e in problems)
        raise MultinodeError(f"not every host is reachable, nothing started: {lines}")


def remote_run_dir(host: HostConfig, run_id: str, run: bench.PlannedRun) -> str:
    return posixpath.join(host.work_dir, "runs", run_id, host.name, run.folder.as_posix())


def wrapper_command(workdir: str, env: dict[str, str], argv: list[str]) -> str:
    """mkdir, cd, then the command as its own session leader (pgid file), stdout+stderr to stdout.log."""
    inner = f"echo $$ > pgid; exec {remote_env(env)} {quote_cmd(argv)} > stdout.log 2>&1"
    where = quote_cmd([workdir])
    return f"mkdir -p {where} && cd {where} && exec setsid -w bash -c {quote_cmd([inner])}"


# every descendant of a pid (launchers such as paddle.distributed.launch put workers in sessions of their own,
# out of reach of a process-group kill); collected BEFORE any signal, while the tree is still linked
_DESCENDANTS = (
    "ps -eo pid=,ppid= | awk -v root=\"$p\" '{parent[$1] = $2} END {ids[root] = 1; grow = 1; "
    "while (grow) {grow = 0; for (c in parent) if (!(c in ids) && (parent[c] in ids)) {ids[c] = 1; grow = 1}} "
    "for (i in ids) printf \"%s \", i}'"
)


def kill_command(workdir: str, grace: int = KILL_GRACE_S) -> str:
    """Stop the run's whole process tree on a host (TERM, then KILL); silent when it is already gone."""
    pgid_file = quote_cmd([posixpath.join(workdir, "pgid")])
    return (
        f"p=$(cat {pgid_file} 2>/dev/null) || exit 0; [ -n \"$p\" ] || exit 0; "
        f"tree=$({_DESCENDANTS}); "
        f"kill -TERM -- -$p $tree 2>/dev/null; "
        f"for i in $(seq {grace * 10}); do alive=; for q in $tree; do kill -0 $q 2>/dev/null && alive=1; done; "
        f"[ -n \"$alive\" ] || exit 0; sleep 0.1; done; "
        f"kill -KILL -- -$p $tree 2>/dev/null; exit 0"
    )


class Job:
    def __init__(self, inv: Inventory, hosts: list[HostConfig], suite: Suite, run_dir: Path,
                 progress: Callable[[str, str, str], None] | None = None, images: dict[str, str] | None = None):
        if not hosts:
            raise MultinodeError("no hosts given")
        self.inv, self.hosts, self.suite = inv, hosts, suite
        self.run_dir = Path(run_dir).resolve()
        self.run_id = self.run_dir.name
        self.progress = progress or (lambda host, what, detail: None)
        self.images = images or {}  # framework -> image reference, for hosts with runtime: docker

    @property
    def docker_hosts(self) -> list[HostConfig]:
        return [h for h in self.hosts if h.runtime == "docker"]

    def preflight(self) -> None:
        preflight(self.inv, self.hosts)

    def harness_dir(self, host: HostConfig) -> str:
        digest = hashlib.sha256(b"".join((HARNESS.parent / f).read_bytes() for f in HARNESS_FILES)).hexdigest()[:12]
        return posixpath.join(host.work_dir, "harness", digest)

    def stage_harness(self) -> None:
        """The harness files to every native host (docker hosts have it in the image)."""
        def put(host: HostConfig) -> None:
            if host.runtime == "docker":
                return
            target = self.harness_dir(host)
            with connect(host, self.inv) as conn:
                conn.run(f"mkdir -p {quote_cmd([target])}", hide=True)
                for name in HARNESS_FILES:
                    conn.put(str(HARNESS.parent / name), posixpath.join(target, name))
            self.progress(host.name, "staged", target)

        self._on_all(put)

    def _on_all(self, fn: Callable[[HostConfig], object]) -> list[object]:
        with cf.ThreadPoolExecutor(max_workers=len(self.hosts)) as pool:
            futures = [pool.submit(fn, h) for h in self.hosts]
            return [f.result() for f in futures]

    def commands(self, run: bench.PlannedRun, port: int) -> list[tuple[HostConfig, str, str]]:
        """(host, remote workdir, remote command line) for every host that starts something.

        Reference cases (kit.reference) run scripts/reference/launch.py from <work_dir>/kit-scripts on native
        hosts and /opt/kit/scripts in the image (refrun.SCRIPT_FILES must be there); it records the run in
        the workdir. Hosts that rank 0's mpirun starts over ssh (NGC TensorFlow) get no command."""
        from kit.run import reference, refrun

        master = self.hosts[0].address
        out = []
        for rank, host in enumerate(self.hosts):
            workdir = remote_run_dir(host, self.run_id, run)
            docker = host.runtime == "docker"
            if run.case.impl == "reference":
                job = run.case.ref_job()
                cluster = reference.Cluster(rank, tuple(h.address for h in self.hosts), port, host.nic)
                scripts = reference.SCRIPTS_DIR if docker else posixpath.join(host.work_dir, "kit-scripts")
                ref = reference.build(job, cluster, scripts_dir=scripts, code_root=reference.CODE_ROOT if docker
                                      else host.model_code or reference.CODE_ROOT)
                if not ref.argv:
                    continue
                record = posixpath.join(workdir, refrun.sidecar_path(run.log_rel).name)
                argv = refrun.launch_argv("python3" if docker else host.python, scripts, ref, job, cluster, record)
                cmd = Command(argv, {"PYTHONUNBUFFERED": "1", **ref.env})
                if docker:
                    cmd = self._in_container(host, run, cmd, workdir)
                out.append((host, workdir, wrapper_command(workdir, cmd.env, cmd.argv)))
                continue
            cmd = build_command(  # threads: the harness divides each host's cores by its local processes
                run.case,
                Placement(len(self.hosts), rank, master, port, host.nic, host.address),
                python="python" if docker else host.python,
                harness=IMAGE_HARNESS if docker else posixpath.join(self.harness_dir(host), "train.py"),
                device="cpu" if self.suite.hardware == "cpu" else "gpu",
                launcher_log_dir=posixpath.join(workdir, "launcher"),
            )
            if docker:
                cmd = self._in_container(host, run, cmd, workdir)
            out.append((host, workdir, wrapper_command(workdir, cmd.env, cmd.argv)))
        return out

    def _in_container(self, host: HostConfig, run: bench.PlannedRun, cmd: Command, workdir: str) -> Command:
        image = self.images.get(run.case.framework)
        if image is None:
            raise MultinodeError(f"{host.name} has runtime docker but there is no image for {run.case.framework}")
        mounts = (Mount(workdir, workdir), Mount(host.data_dir, host.data_dir, read_only=True))
        return docker_command(Command(cmd.argv, {**cmd.env, "HOME": "/tmp"}), DockerRun(
            image=image, run_id=self.run_id, case_key=run.case.key,
            name=container_name(self.run_id, run.case.key, run.repeat, host.name),
            gpus=run.case.gpus_per_node if self.suite.hardware == "gpu" else 0,
            mounts=mounts, workdir=workdir, memlock_unlimited=self.suite.hardware == "gpu"))

    def execute(self, run: bench.PlannedRun) -> JobOutcome:
        port = random.randint(20000, 39999)
        plan = self.commands(run, port)
        results = {h.name: HostResult(h.name, command=cmd) for h, _workdir, cmd in plan}
        stop = threading.Event()
        start = time.monotonic()

        def on_host(item) -> None:
            host, _workdir, command = item
            t0 = time.monotonic()
            self.progress(host.name, "start", run.label)
            try:
                with connect(host, self.inv) as conn:
                    res = conn.run(command, hide=True, warn=True, timeout=run.case.timeout_s)
                results[host.name].exit_code = res.exited
                if res.exited != 0:
                    results[host.name].error = f"exit {res.exited}"
                    stop.set()
            except Exception as exc:  # connection lost, timeout, ...
                name = type(exc).__name__
                results[host.name].error = "timeout" if name == "CommandTimedOut" else f"{name}: {exc}".strip()
                stop.set()
            finally:
                results[host.name].seconds = time.monotonic() - t0
                self.progress(host.name, "end", results[host.name].error or "ok")

        pool = cf.ThreadPoolExecutor(max_workers=len(plan))
        futures = [pool.submit(on_host, item) for item in plan]
        try:
            while not all(f.done() for f in futures):
                if stop.wait(0.2):
                    self.stop_everywhere(run)
                    break
            cf.wait(futures)
        except BaseException:
            self.stop_everywhere(run)
            cf.wait(futures, timeout=60)
            raise
        finally:
            pool.shutdown(wait=False)
        self.gather(run)
        outcome = self._judge(run, list(results.values()))
        outcome.seconds = time.monotonic() - start
        return outcome

    def stop_everywhere(self, run: bench.PlannedRun) -> None:
        def kill(host: HostConfig) -> None:
            try:
                with connect(host, self.inv) as conn:
                    conn.run(kill_command(remote_run_dir(host, self.run_id, run)), hide=True, warn=True,
                             timeout=KILL_GRACE_S + 15)
                    if host.runtime == "docker":  # a killed `docker run` client leaves its container running
                        conn.run(quote_cmd(cleanup_command(self.run_id)), hide=True, warn=True, timeout=60)
            except Exception as exc:  # a dead host has nothing left to kill
                self.progress(host.name, "kill-failed", str(exc))

        self._on_all(kill)

    def gather(self, run: bench.PlannedRun) -> None:
        def fetch(host: HostConfig) -> None:
            remote = remote_run_dir(host, self.run_id, run)
            local = self.run_dir / "hosts" / host.name / run.folder
            try:
                with connect(host, self.inv) as conn:
                    _get_tree(conn.sftp(), remote, local)
            except Exception as exc:
                self.progress(host.name, "gather-failed", str(exc))

        self._on_all(fetch)
        rank0 = self.run_dir / "hosts" / self.hosts[0].name / run.folder
        target = self.run_dir / run.log_rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = rank0 / "stdout.log"
        if source.is_file():
            target.write_bytes(source.read_bytes())

    def _judge(self, run: bench.PlannedRun, hosts: list[HostResult]) -> JobOutcome:
        failed = [h for h in hosts if h.error]
        log = self.run_dir / run.log_rel
        if any(h.error == "timeout" for h in hosts):
            return JobOutcome(run, "timeout", None, f"no end after {run.case.timeout_s:g} s: stopped on every host",
                              hosts)
        try:
            value = bench.figure_of(log) if log.is_file() else None
        except Exception as exc:  # ParseError / MethodError
            value, why = None, getattr(exc, "reason", str(exc))
        else:
            why = "no log from rank 0" if value is None else ""
        if failed or value is None:
            detail = "; ".join(f"{h.host}: {h.error}" for h in failed)
            return JobOutcome(run, "failed", None, "; ".join(p for p in (detail, why) if p), hosts)
        return JobOutcome(run, "ok", value, "", hosts)


def _get_tree(sftp, remote: str, local: Path) -> None:
    local.mkdir(parents=True, exist_ok=True)
    for entry in sftp.listdir_attr(remote):
        src = posixpath.join(remote, entry.filename)
        if stat.S_ISDIR(entry.st_mode):
            _get_tree(sftp, src, local / entry.filename)
        elif stat.S_ISREG(entry.st_mode):
            sftp.get(src, str(local / entry.filename))


def run_job(inv: Inventory, host_names: list[str], suite: Suite, run_dir: Path, policy: str = "continue",
            progress: Callable[[str, str, str], None] | None = None,
            force: bool = False, image: str | None = None) -> tuple[list[JobOutcome], list[Path]]:
    """Every case of the suite whose node count equals the hosts given, then the report.

    Hosts with runtime docker get the image (the pinned one of each framework, or `image`) delivered and
    verified first; its IDs go into <run_dir>/images.json."""
    hosts = [inv.get(name) for name in host_names]
    if len({h.name for h in hosts}) != len(hosts):
        raise MultinodeError(f"a host is named twice: {', '.join(host_names)}")
    job = Job(inv, hosts, suite, run_dir, progress)
    runs = bench.plan_for_nodes(suite, len(hosts))
    if not runs:
        raise MultinodeError(f"suite {suite.name} has no harness case for {len(hosts)} node(s)")
    job.preflight()
    verdict = envprobe.check_env(inv, hosts, Path(run_dir) / "env", require_gpu=suite.hardware == "gpu")
    if not verdict.ok:
        detail = "; ".join(verdict.lines()[:8])
        if not force:
            raise MultinodeError(f"check_env refuses these hosts ({detail}); captures in {Path(run_dir) / 'env'}; "
                                 "fix them or pass --force")
        for line in verdict.lines():
            job.progress("check_env", "forced", line)
    if job.docker_hosts:
        job.images = deliver_images(inv, job.docker_hosts, suite, runs, Path(run_dir), image, job.progress)
    job.stage_harness()
    meta = bench.open_run_meta(run_dir, suite, hosts=[h.name for h in hosts])
    outcomes = []
    for run in runs:
        if bench.is_done(Path(run_dir), run):
            continue
        bench.clear_for_rerun(run_dir, run)
        outcome = job.execute(run)
        outcomes.append(outcome)
        bench.record_run(run_dir, meta, run, outcome.status, outcome.value, outcome.seconds, outcome.reason,
                         hosts={h.host: {"exit_code": h.exit_code, "error": h.error, "seconds": round(h.seconds, 3),
                                "command": h.command}
                                for h in outcome.hosts})
        if outcome.status != "ok" and policy == "stop":
            break
    files = bench.write_report(Path(run_dir), suite)
    return outcomes, files


def deliver_images(inv: Inventory, hosts: list[HostConfig], suite: Suite, runs: list[bench.PlannedRun],
                   run_dir: Path, explicit: str | None, progress: Callable[[str, str, str], None]) -> dict[str, str]:
    """framework -> image reference, present with the same ID on every docker host (streamed where missing)."""
    from kit.images import engine as images

    client = images.docker_client()
    pinned = images.pinned_images(client, suite, sorted({r.case.framework for r in runs}), explicit,
                                  lambda who, line: progress("image", who, line))
    for ref, spec in pinned.values():
        results = images.deliver_stream(client, inv, hosts, ref, lambda who, line: progress(who, "image", line))
        failed = [f"{r.host}: {r.error}" for r in results.values() if r.action == "failed"]
        if failed:
            raise MultinodeError(f"{ref} could not be delivered: " + "; ".join(failed))
        want = images.image_id(client, ref)
        host_ids = images.verify_hosts(inv, hosts, ref, want)
        images.record(run_dir, ref, want, spec_key=spec.key if spec else None,
                      pins_hash=spec.pins_hash() if spec else None, hosts=host_ids)
    return {fw: ref for fw, (ref, _spec) in pinned.items()}


def gather_all(inv: Inventory, host_names: list[str], run_dir: Path) -> list[Path]:
    """Fetch every host's raw logs of a run again (all of runs/<id>/<host>/ on each host); rank 0's into logs/."""
    run_dir = Path(run_dir).resolve()
    hosts = [inv.get(name) for name in host_names]

    def fetch(host: HostConfig) -> None:
        remote = posixpath.join(host.work_dir, "runs", run_dir.name, host.name)
        with connect(host, inv) as conn:
            _get_tree(conn.sftp(), remote, run_dir / "hosts" / host.name)

    with cf.ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        list(pool.map(fetch, hosts))
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").is_file() else {}
    rank0 = (meta.get("hosts") or host_names)[0]
    restored = []
    for stdout in sorted((run_dir / "hosts" / rank0).rglob("stdout.log")):
        try:
            target = run_dir / "logs" / log_of_run_folder(stdout.parent.relative_to(run_dir / "hosts" / rank0))
        except ValueError:  # not a run's folder: stays in hosts/ only
            continue
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(stdout.read_bytes())
            restored.append(target)
    return restored


def cluster_plan(suite: Suite, host_names: list[str]) -> tuple[list[tuple[list[str], int]], list[str]]:
    """(hosts, nodes) groups to run: single-node cases on the first host, n-node cases on the first n hosts."""
    wanted = sorted({c.nodes for c in suite.cases if c.runner == "harness"})
    groups, skipped = [], []
    for nodes in wanted:
        if nodes <= len(host_names):
            groups.append((host_names[:nodes], nodes))
        else:
            skipped.append(f"{nodes}-node cases: the inventory has {len(host_names)} host(s)")
    return groups, skipped
