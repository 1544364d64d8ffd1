"""The Slurm runner: each group of cases one allocation, each run one job step over its nodes.

    salloc --no-shell -N n -p P [-A A] [--gpus-per-node G] [--time T]     the group's job (it holds the nodes)
    srun --jobid J -N n --ntasks-per-node 1 --kill-on-bad-exit=1 bash <step.sh>        one run = one step

step.sh holds every rank's command (kit.run.command.command_for, the allocation's nodes as sites, rank 0 the
first node) and picks its own by $SLURM_NODEID. Everything is written to the shared directory (hosts.yaml
`slurm: shared_dir`, the same path on this machine and on every node), in the SSH runner's layout:

    <shared_dir>/runs/<run id>/<node>/<run folder>/   stdout.log, exit_code, slurm_step (job.step and node)
    <shared_dir>/runs/<run id>/steps/<run folder>/    step.sh, srun.log (srun's own messages)
    <shared_dir>/harness/<digest>/                     the harness

gather copies them into runs/<id>/hosts/<node>/ and runs/<id>/slurm/, rank 0's stdout.log into logs/. A case
timeout, a node Slurm stops hearing from, or Ctrl-C: `scancel` of the step (the allocation is cancelled when
the group ends, or at once on Ctrl-C). States come from srun and `scontrol show job`; `sacct` is asked first
and used where the cluster keeps accounting.
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kit.config.hosts import HostConfig, SlurmConfig
from kit.config.suites import Suite
from kit.hosts.connect import quote_cmd, remote_env
from kit.run import gather, records
from kit.run.bench import write_report
from kit.run.command import HARNESS, command_for
from kit.run.plan import PlannedRun, plan_for_nodes
from kit.run.runner import KILL_GRACE_S, HostStatus, RunError, Runner, RunOutcome, execute, master_port
from kit.run.ssh import HARNESS_FILES, harness_dir, ssh_site

TOOLS = ("salloc", "srun", "squeue", "scancel", "scontrol", "sinfo")
Progress = Callable[[str, str, str], None]
POLL_S = 0.5
NODE_CHECK_S = 2.0
STOP_WAIT_S = 90.0  # srun's end after scancel: Slurm's KillWait (30 s by default) and more


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


def _first_line(res: subprocess.CompletedProcess) -> str:
    return next((ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()), f"exit {res.returncode}")


def partition_nodes(cfg: SlurmConfig) -> list[str]:
    """The partition's node names; SlurmError: no Slurm, no answer from the controller, unknown partition."""
    if any(shutil.which(t) is None for t in TOOLS):
        raise SlurmError(no_slurm())
    res = slurm(["sinfo", "-h", "-o", "%R"])
    if res.returncode != 0:
        raise SlurmError(f"Slurm does not answer (sinfo): {_first_line(res)}")
    known = sorted(set(res.stdout.split()))
    if cfg.partition not in known:
        raise SlurmError(f"slurm.partition {cfg.partition!r}: Slurm has no such partition "
                         f"(sinfo lists: {', '.join(known) or 'none'})")
    res = slurm(["sinfo", "-h", "-N", "-p", cfg.partition, "-o", "%N"])
    return list(dict.fromkeys(res.stdout.split()))


def _fields(line: str) -> dict[str, str]:
    """`scontrol show ... -o` output: Key=Value words."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


class SlurmRunner(Runner):
    def __init__(self, cfg: SlurmConfig, run_dir: Path, hardware: str, progress: Progress | None = None):
        self.cfg, self.hardware = cfg, hardware
        self.run_dir = Path(run_dir).resolve()
        self.run_id = self.run_dir.name
        self.progress = progress or (lambda host, what, detail: None)
        self.job_id: str | None = None
        self.nodes: list[HostConfig] = []
        self._run: PlannedRun | None = None
        self._srun: subprocess.Popen | None = None
        self._lines: dict[str, str] = {}
        self._lost: dict[str, str] = {}
        self._timed_out = self._cancelled = False
        self._t0 = 0.0
        self._seconds = 0.0

    # ---- the allocation ------------------------------------------------------------------------

    def stage(self) -> None:
        """The harness into the shared directory (content-addressed, as on SSH hosts)."""
        where = Path(harness_dir(self._node("stage", "127.0.0.1")))
        where.mkdir(parents=True, exist_ok=True)
        for name in HARNESS_FILES:
            shutil.copyfile(HARNESS.parent / name, where / name)

    def allocate(self, nodes: int, runs: int = 1) -> None:
        """A job holding `nodes` nodes of the partition (kept while it lives); SlurmError when it pends longer
        than slurm.pending_timeout (with squeue's reason) or Slurm refuses it."""
        if self.job_id and self._job_state() in ("RUNNING", "CONFIGURING"):
            return
        self.release()
        argv = ["salloc", "--no-shell", "-N", str(nodes), "-p", self.cfg.partition, "-J", f"kit-{self.run_id}"]
        if self.cfg.account:
            argv += ["-A", self.cfg.account]
        if self.cfg.gpus_per_node:
            argv += [f"--gpus-per-node={self.cfg.gpus_per_node}"]
        if self.cfg.time_limit:
            argv += [f"--time={self.cfg.time_limit * runs}"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)  # Ctrl-C reaches the kit only
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + self.cfg.pending_timeout
        try:
            while proc.poll() is None:
                self.job_id = self.job_id or _job_in(said)
                if time.monotonic() > deadline:
                    reason = _first_line(slurm(["squeue", "-h", "-j", self.job_id, "-o", "%r"])) if self.job_id \
                        else "no job id from salloc"
                    raise SlurmError(f"job {self.job_id or '?'} for {nodes} node(s) of partition "
                                     f"{self.cfg.partition} still pending after {self.cfg.pending_timeout:g} s "
                                     f"(squeue reason: {reason}); cancelled")
                time.sleep(POLL_S)
            reader.join(timeout=5)
            self.job_id = self.job_id or _job_in(said)
            if proc.returncode != 0 or not self.job_id:
                text = " ".join(ln.strip() for ln in said if ln.strip()) or f"exit {proc.returncode}"
                raise SlurmError(f"salloc refused {nodes} node(s) of partition {self.cfg.partition}: {text}")
        except BaseException:
            proc.terminate()
            self.release()
            raise
        names = slurm(["scontrol", "show", "hostnames", _first_line(slurm(["squeue", "-h", "-j", self.job_id,
                                                                              "-o", "%N"]))]).stdout.split()
        self.nodes = [self._node(n, self._address(n)) for n in names]
        self.progress("slurm", "allocated", f"job {self.job_id}: {', '.join(names)}")

    def release(self) -> None:
        """Cancel the group's job (nothing of it stays on any node); silent when it is gone."""
        if self.job_id:
            slurm(["scancel", self.job_id])
            self._gone(lambda: self._job_state() not in ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING"))
            self.progress("slurm", "released", f"job {self.job_id}")
        self.job_id, self.nodes = None, []

    def _job_state(self) -> str:
        res = slurm(["scontrol", "show", "job", "-o", self.job_id or "0"])
        return _fields(res.stdout).get("JobState", "") if res.returncode == 0 else ""

    def _address(self, name: str) -> str:
        return _fields(slurm(["scontrol", "show", "node", "-o", name]).stdout).get("NodeAddr") or name

    def _node(self, name: str, address: str) -> HostConfig:
        """A node as the SSH runner's host: its work_dir is the shared directory (ssh_site builds the Site)."""
        return HostConfig(name=name, address=address, user=os.environ.get("USER") or "slurm", runtime="native",
                          work_dir=self.cfg.shared_dir, python=self.cfg.python, nic=self.cfg.nic,
                          gpus=self.cfg.gpus_per_node)

    def _gone(self, done: Callable[[], bool], limit: float = STOP_WAIT_S) -> bool:
        end = time.monotonic() + limit
        while not done():
            if time.monotonic() > end:
                return False
            time.sleep(POLL_S)
        return True

    # ---- one run: one job step -------------------------------------------------------------------

    def workdir(self, node: HostConfig, run: PlannedRun) -> str:
        return posixpath.join(self.cfg.shared_dir, "runs", self.run_id, node.name, run.folder.as_posix())

    def step_dir(self, run: PlannedRun) -> Path:
        return Path(self.cfg.shared_dir, "runs", self.run_id, "steps", run.folder.as_posix())

    def step_script(self, run: PlannedRun, port: int) -> str:
        sites = [ssh_site(n, self.workdir(n, run), run.log_rel.name, None) for n in self.nodes]
        cases = []
        for rank, node in enumerate(self.nodes):
            cmd = command_for(run.case, run.repeat, rank, sites, port, self.hardware, self.run_id).launched
            line = f"exec {remote_env(cmd.env)} {quote_cmd(cmd.argv)}"
            self._lines[node.name] = line
            cases.append(f"{rank}) d={quote_cmd([self.workdir(node, run)])}; line={quote_cmd([line])} ;;")
        return "\n".join([
            "#!/bin/bash", f"# kit: {run.label}, one task per node; rank = $SLURM_NODEID", 'case "$SLURM_NODEID" in',
            *cases, '*) echo "kit: no rank $SLURM_NODEID in this step" >&2; exit 97 ;;', "esac",
            'if [ -e "$d" ]; then mv "$d" "$d.attempt-$(date +%s%N)"; fi',  # an earlier attempt, never mixed in
            'mkdir -p "$d" && cd "$d" || exit 96',
            'echo "$SLURM_JOB_ID.$SLURM_STEP_ID $SLURMD_NODENAME" > slurm_step',
            'bash -c "$line" > stdout.log 2>&1', "rc=$?", "echo $rc > exit_code", "exit $rc", ""])

    def start(self, run: PlannedRun) -> None:
        if not self.nodes:
            raise SlurmError("no allocation: SlurmRunner.allocate() first")
        self._run, self._lines, self._lost = run, {}, {}
        self._timed_out = self._cancelled = False
        steps = self.step_dir(run)
        steps.mkdir(parents=True, exist_ok=True)
        script = steps / "step.sh"
        script.write_text(self.step_script(run, master_port()))
        limit = self.cfg.time_limit or math.ceil(run.case.timeout_s / 60) + 1  # Slurm's backstop to the kit's own
        argv = ["srun", "--jobid", self.job_id, "-N", str(len(self.nodes)), "-n", str(len(self.nodes)),
                "--ntasks-per-node", "1", "--kill-on-bad-exit=1", f"--time={limit}", "-J", run.label.replace(" ", ""),
                "bash", str(script)]
        for node in self.nodes:
            self.progress(node.name, "start", run.label)
        with open(steps / "srun.log", "wb") as log:
            self._srun = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)  # Ctrl-C: the kit scancels, srun does not
        self._t0 = time.monotonic()

    def wait(self, timeout: float) -> bool:
        limit = min(timeout, self.cfg.time_limit * 60 + 30) if self.cfg.time_limit else timeout
        end, checked = time.monotonic() + limit, 0.0
        try:
            while self._srun.poll() is None:
                now = time.monotonic()
                if now > end:
                    self._timed_out = True
                    return False
                if now - checked > NODE_CHECK_S:
                    checked = now
                    self._lost = self._unresponsive()
                    if self._lost:
                        return True
                time.sleep(POLL_S)
            if "DUE TO TIME LIMIT" in self._srun_log():
                self._timed_out = True
            return not self._timed_out
        finally:
            self._seconds = time.monotonic() - self._t0

    def _unresponsive(self) -> dict[str, str]:
        """Nodes of the step Slurm no longer hears from or took away (state with '*', down, fail)."""
        res = slurm(["sinfo", "-h", "-N", "-n", ",".join(n.name for n in self.nodes), "-o", "%N %t"])
        found = dict(line.split()[:2] for line in res.stdout.splitlines() if len(line.split()) >= 2)
        return {n: s for n, s in found.items() if s.endswith("*") or s.startswith(("down", "fail", "drain"))}

    def stop(self) -> None:
        """scancel every step of the job (TERM, KILL after Slurm's KillWait) and wait until srun ends."""
        self._cancelled = True
        if self.job_id:
            steps = slurm(["squeue", "-h", "-s", "-j", self.job_id, "-o", "%i"]).stdout.split()
            for step in steps:
                if step.split(".")[-1].isdigit():
                    slurm(["scancel", step])
            self._gone(lambda: not [s for s in slurm(["squeue", "-h", "-s", "-j", self.job_id, "-o", "%i"]).stdout
                                    .split() if s.split(".")[-1].isdigit()])
        if self._srun is not None:  # srun never ends by itself after a node failure: the step is gone, end it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._srun.wait(timeout=KILL_GRACE_S + 10)
            if self._srun.poll() is None:
                self._srun.kill()
                self._srun.wait()

    def statuses(self) -> list[HostStatus]:
        if self._run is None:
            return []
        out = []
        for node in self.nodes:
            code = self._exit_code(node)
            if node.name in self._lost:
                error = f"node lost (Slurm lists it {self._lost[node.name]})"
            elif self._timed_out:
                error = "timeout"
            elif code is None:
                error = "no exit status" + (" (step cancelled)" if self._cancelled else "")
            else:
                error = f"exit {code}" if code else ""
            out.append(HostStatus(node.name, code, error, self._seconds, self._lines.get(node.name, "")))
        return out

    def _exit_code(self, node: HostConfig) -> int | None:
        with contextlib.suppress(OSError, ValueError):
            return int(Path(self.workdir(node, self._run), "exit_code").read_text().strip())
        return None

    def _srun_log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.step_dir(self._run) / "srun.log").read_text(errors="replace")
        return ""

    def gather(self, run: PlannedRun) -> None:
        """Each node's folder of the run from the shared directory; step.sh and srun.log into slurm/."""
        for node in self.nodes:
            src = Path(self.workdir(node, run))
            if src.is_dir():
                shutil.copytree(src, self.run_dir / "hosts" / node.name / run.folder, dirs_exist_ok=True)
        if self.step_dir(run).is_dir():
            shutil.copytree(self.step_dir(run), self.run_dir / "slurm" / run.folder, dirs_exist_ok=True)
        if self.nodes:
            gather.place_rank0(self.run_dir / "hosts" / self.nodes[0].name / run.folder, self.run_dir / run.log_rel)

    def record(self) -> dict:
        """The run's Slurm record for run.json: job, step, states, each node's exit code."""
        step = ""
        with contextlib.suppress(OSError, IndexError):
            step = Path(self.workdir(self.nodes[0], self._run), "slurm_step").read_text().split()[0]
        code = self._srun.returncode if self._srun else None
        state = ("NODE_FAIL" if self._lost else "TIMEOUT" if self._timed_out else "CANCELLED" if self._cancelled
                 else "COMPLETED" if code == 0 else "FAILED")
        source = "srun+scontrol"
        acct = slurm(["sacct", "-n", "-P", "-j", step, "-o", "State"]) if step and shutil.which("sacct") else None
        if acct is not None and acct.returncode == 0 and acct.stdout.strip():
            state, source = acct.stdout.split()[0], "sacct"
        return {"job_id": self.job_id, "step": step, "partition": self.cfg.partition, "srun_exit": code,
                "step_state": state, "job_state": self._job_state(), "state_source": source,
                "nodes": {n.name: {"exit_code": self._exit_code(n), "lost": self._lost.get(n.name)}
                          for n in self.nodes}}


def _job_in(lines: list[str]) -> str | None:
    """The job id salloc names ("Pending job allocation 12", "Granted job allocation 12")."""
    for line in lines:
        words = line.split()
        if "allocation" in words and words[-1].isdigit():
            return words[-1]
    return None


def run_slurm_job(cfg: SlurmConfig, nodes: int, suite: Suite, run_dir: Path, policy: str = "continue",
                  progress: Progress | None = None) -> tuple[list[RunOutcome], list[Path]]:
    """Every case of the suite for `nodes` nodes through one allocation (kit.run.multinode.run_job's loop, with
    Slurm's record of each run), then the report. The allocation is cancelled at the end, on error or Ctrl-C."""
    progress = progress or (lambda host, what, detail: None)
    run_dir = Path(run_dir)
    planned = plan_for_nodes(suite, nodes)
    refused = {r.case.key: why for r in planned if (why := _unfit(r.case, cfg, suite.hardware))}
    for key, why in refused.items():
        progress("plan", "not run", f"{key}: {why}")
    runs = [r for r in planned if r.case.key not in refused and not records.is_done(run_dir, r)]
    meta = records.open_run_meta(run_dir, suite, scheduler="slurm", partition=cfg.partition)
    if refused:
        known = {s["case"] for s in meta.get("skipped_cases", [])}
        meta["skipped_cases"] = meta.get("skipped_cases", []) + [
            {"case": k, "reason": w} for k, w in refused.items() if k not in known]
        records.save_run_meta(run_dir, meta)
    runner = SlurmRunner(cfg, run_dir, suite.hardware, progress)
    outcomes = []
    if runs:
        runner.stage()
    try:
        for run in runs:
            runner.allocate(nodes, len(runs))
            meta["hosts"] = [n.name for n in runner.nodes]
            records.clear_for_rerun(run_dir, run)
            outcome = execute(runner, run, run_dir)
            outcomes.append(outcome)
            records.record_run(run_dir, meta, run, outcome.status, outcome.value, outcome.seconds, outcome.reason,
                               hosts={h.host: h.to_dict() for h in outcome.hosts}, slurm=runner.record())
            if outcome.status != "ok" and policy == "stop":
                break
    finally:
        runner.release()
    return outcomes, write_report(run_dir, suite)


def _unfit(case, cfg: SlurmConfig, hardware: str) -> str | None:
    if case.impl == "reference":
        return "published programs through Slurm: not implemented yet (the kit's harness runs)"
    if hardware == "gpu" and cfg.gpus_per_node < case.gpus_per_node:
        return f"needs {case.gpus_per_node} GPU(s) per node; slurm.gpus_per_node is {cfg.gpus_per_node}"
    return None
