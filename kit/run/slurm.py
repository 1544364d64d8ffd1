"""The Slurm runner: each group of cases one allocation, each run one job step over its nodes.

    salloc --no-shell -N n -p P [-w nodes] [-A A] [--gpus-per-node G] [--time T]   the group's job (its nodes)
    srun --jobid J -N n --ntasks-per-node 1 --kill-on-bad-exit=1 bash <step.sh>        one run = one step

step.sh holds every rank's command (kit.run.command.command_for, the allocation's nodes as sites, rank 0 the
first node) and picks its own by $SLURM_NODEID. Everything is written to the shared directory (hosts.yaml
`slurm: shared_dir`, the same path on this machine and on every node), in the SSH runner's layout:

    <shared_dir>/runs/<run id>/<node>/<run folder>/   stdout.log, exit_code, slurm_step (job.step and node)
    <shared_dir>/runs/<run id>/steps/<run folder>/    step.sh, srun.log (srun's own messages)
    <shared_dir>/harness/<digest>/                     the harness

gather copies them into runs/<id>/hosts/<node>/ and runs/<id>/slurm/, rank 0's stdout.log into logs/. A runner
given a node list asks for those nodes (salloc -w), refusing at once one that Slurm lists down, drained or not
responding (it would pend); `kit sweep --scheduler slurm` gives each node's job its node, into the sweep's
hosts/<node>/, which keeps the sweep's id on the shared directory (kit.core.rundir.remote_run_id), its steps under
steps/<node>/ and its job named kit-<sweep id>-<node>. A case
timeout, a node Slurm stops hearing from, or Ctrl-C: `scancel` of the step (the allocation is cancelled when
the group ends, or at once on Ctrl-C; one still pending too, and the kit names it). The step's state is what
the kit saw (srun's exit, Slurm's node states, its own timeout or cancel); `sacct`'s record of the step (state,
exit code, nodes, elapsed) is kept beside it where the cluster keeps accounting.

Containers (slurm.container): `pyxis` starts the step in the case's image (srun --container-image, the shared
directory, data, scripts and model code mounted); a container runtime's name (docker, podman: kit.config.runtimes)
has each node's task run its rank in that runtime (the node's own engine holds the image; its id is recorded);
`native` runs slurm.python; `auto` picks pyxis where srun knows --container-image and images are named, docker
where only images are named, else native.
Before the first run of an allocation one step checks every node (kit.run.needs): data and model code of the
published programs at their pins, and with a runtime the image; a node that lacks one refuses the runs.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import os
import posixpath
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kit.config import reference
from kit.config.inventory import HostConfig, SlurmConfig
from kit.config.runtimes import NATIVE, runtime
from kit.core.rundir import remote_run_id
from kit.hosts.connect import quote_cmd, remote_env
from kit.run import gather
from kit.run.command import HARNESS, SAMPLER, SCRIPT_FILES, SCRIPTS, Container, Mount, cleanup_command, command_for
from kit.run.needs import needs_script, read_needs, settle
from kit.run.plan import PlannedRun
from kit.run.runner import KILL_GRACE_S, Guard, HostStatus, Runner, RunOutcome, master_port
from kit.run.slurm_cli import (  # noqa: F401  (SlurmError, partition_nodes: the runner's errors and nodes)
    SlurmError,
    container_mode,
    first_line,
    job_in,
    node_states,
    partition_nodes,
    read_or_empty,
    sacct_fields,
    scontrol_fields,
    slurm,
    unusable,
)
from kit.run.ssh import HARNESS_FILES, harness_dir, scripts_dir, ssh_site

Progress = Callable[[str, str, str], None]
POLL_S, NODE_CHECK_S = 0.5, 2.0
STOP_WAIT_S = 90.0  # srun's end after scancel: Slurm's KillWait (30 s by default) and more


class SlurmRunner(Runner):
    def __init__(self, cfg: SlurmConfig, run_dir: Path, hardware: str, progress: Progress | None = None,
                 nodelist: list[str] | None = None):
        self.cfg, self.hardware = cfg, hardware
        self.run_dir = Path(run_dir).resolve()
        self.run_id = remote_run_id(self.run_dir)  # a sweep's node: the sweep's id, as on SSH hosts
        self.part = self.run_dir.name if self.run_id != self.run_dir.name else ""  # that node, apart from its peers
        self.nodelist = list(nodelist or [])  # the nodes the job is to hold (salloc -w); []: any of the partition
        self.progress = progress or (lambda host, what, detail: None)
        self.mode = container_mode(cfg)
        self.engine = None if self.mode == "pyxis" else runtime(self.mode)  # the runtime the tasks start ranks in
        self.job_id: str | None = None
        self.nodes: list[HostConfig] = []
        self.image_ids: dict[str, dict[str, str]] = {}  # with a runtime: node -> image reference -> id there
        self._run: PlannedRun | None = None
        self._srun: subprocess.Popen | None = None
        self._guard = Guard()  # scancels the job should the kit die holding it (kill -9 included)
        self._lines: dict[str, str] = {}
        self._lost: dict[str, str] = {}
        self._timed_out = self._cancelled = False
        self._t0 = 0.0
        self._seconds = 0.0

    # ---- the allocation ------------------------------------------------------------------------

    def stage(self, runs: list[PlannedRun]) -> None:
        """The harness (content-addressed, as on SSH hosts) and, for published programs, the kit's launcher,
        drivers and patch into the shared directory."""
        node = self._node("stage", "127.0.0.1")
        files = [(HARNESS.parent / n, Path(harness_dir(node), n)) for n in HARNESS_FILES]
        if any(r.case.impl == "reference" for r in runs):
            files += [(SCRIPTS / n, Path(scripts_dir(node), n)) for n in SCRIPT_FILES]
        if self.hardware == "gpu":
            files.append((SCRIPTS / SAMPLER, Path(scripts_dir(node), SAMPLER)))
        for local, there in files:  # whole files only: a sweep's other nodes may be reading them
            there.parent.mkdir(parents=True, exist_ok=True)
            if there.is_file() and there.read_bytes() == local.read_bytes():
                continue
            temp = there.with_name(f".{there.name}.{secrets.token_hex(4)}")
            shutil.copyfile(local, temp)
            os.replace(temp, there)
        if not self.cfg.data_dir:  # the default data root (a container mounts it): <shared_dir>/data
            Path(node.data_dir).mkdir(parents=True, exist_ok=True)

    def capture_env(self, env_dir: Path, require_gpu: bool):
        """check_env's probes on every node of the allocation in one step; raw outputs, captures and the
        cross-node verdict under env_dir as for SSH hosts (kit.hosts.probe)."""
        from kit.core.files import write_text
        from kit.hosts import probe
        from kit.hosts.consistency import consistency

        where = self.steps_root() / "env"
        if where.exists():
            shutil.rmtree(where)
        where.mkdir(parents=True)
        nonce = secrets.token_hex(8)
        (where / "probes.sh").write_text(probe.probe_script(self.cfg.nic, nonce))
        out = quote_cmd([str(where)]) + '/"$SLURMD_NODENAME".out'
        res = slurm(["srun", "--jobid", self.job_id, "-N", str(len(self.nodes)), "--ntasks-per-node", "1",
                     "--time=5", "-J", "kit-check-env", "bash", "-c",
                     f"bash {quote_cmd([str(where / 'probes.sh')])} > {out}"], timeout=600)
        if res.returncode != 0:
            raise SlurmError(f"check_env step on {', '.join(n.name for n in self.nodes)} failed: {first_line(res)}")
        env_dir.mkdir(parents=True, exist_ok=True)
        captures = [probe.probe_from_output(n.name, self.cfg.nic, read_or_empty(where / f"{n.name}.out"), nonce,
                                            env_dir / n.name) for n in self.nodes]
        verdict = consistency(captures, require_gpu=require_gpu)
        write_text(env_dir / "verdict.json", json.dumps(verdict.to_dict(), indent=2) + "\n")
        return verdict

    def image_for(self, run: PlannedRun) -> str | None:
        return None if self.mode == "native" else self.cfg.image(run.case.framework)

    def check(self, runs: list[PlannedRun], force: bool = False) -> list[dict]:
        """One step on every node of the allocation: the published programs' data and model code (at their
        pins), and with a runtime each image in the node's engine. SlurmError naming every node and what it
        lacks; nothing has run then. Checkouts off the pin refuse the runs unless `force`: then they are
        returned (node added) for run.json."""
        programs = sorted({r.case.key: r.case for r in runs if r.case.impl == "reference"}.items())
        images = sorted({i for r in runs if (i := self.image_for(r))}) if self.engine else []
        if not programs and not images:
            return []
        node = self.nodes[0]
        where = self.steps_root() / "check"
        if where.exists():
            shutil.rmtree(where)
        where.mkdir(parents=True)
        script = [f"if i=$({quote_cmd(self.engine.image_id_argv(ref))} 2>&1); then "
                  f"printf 'image\\t%s\\t%s\\n' {quote_cmd([ref])} \"$i\"; else printf 'noimage\\t%s\\t%s\\n' "
                  f"{quote_cmd([ref])} \"$(echo $i | head -c 300)\"; fi" for ref in images]
        (where / "check.sh").write_text("\n".join(script) + "\n" + needs_script(
            programs, node.data_dir, node.model_code, check_code=self.mode == "native" or bool(node.model_code)))
        out = quote_cmd([str(where)]) + '/"$SLURMD_NODENAME".out'
        res = slurm(["srun", "--jobid", self.job_id, "-N", str(len(self.nodes)), "--ntasks-per-node", "1",
                     "--time=5", "-J", "kit-check", "bash", "-c", f"bash {quote_cmd([str(where / 'check.sh')])} "
                     f"> {out} 2>&1"], timeout=600)
        problems, mismatches = [], []
        for n in self.nodes:
            try:
                said = (where / f"{n.name}.out").read_text(errors="replace")
            except OSError:
                problems.append(f"{n.name}: the check step left no answer (srun: {first_line(res)})")
                continue
            found, off_pin = read_needs(programs, said)
            problems += [f"{n.name}: {f}" for f in found]
            mismatches += [{"host": n.name, **m} for m in off_pin]
            for line in said.splitlines():
                what, *fields = line.split("\t")
                if what == "image" and len(fields) == 2:
                    self.image_ids.setdefault(n.name, {})[fields[0]] = fields[1]
                elif what == "noimage" and len(fields) == 2:
                    problems.append(f"{n.name}: no image {fields[0]} in the node's {self.engine.name} engine "
                                    f"({fields[1]}); load or pull it on every node")
        return settle(problems, mismatches, force, self.progress, SlurmError, "node")

    def allocate(self, nodes: int, runs: int = 1) -> None:
        """A job holding `nodes` nodes of the partition (kept while it lives); SlurmError when it pends longer
        than slurm.pending_timeout (with squeue's reason) or Slurm refuses it."""
        if self.job_id and self._job_state() in ("RUNNING", "CONFIGURING"):
            return
        self.release()
        name = f"kit-{self.run_id}" + (f"-{self.part}" if self.part else "")
        argv = ["salloc", "--no-shell", "-N", str(nodes), "-p", self.cfg.partition, "-J", name]
        if self.nodelist:
            self._refuse_unusable()
            argv += ["-w", ",".join(self.nodelist)]
        if self.cfg.account:
            argv += ["-A", self.cfg.account]
        if self.cfg.gpus_per_node:
            argv += [f"--gpus-per-node={self.cfg.gpus_per_node}"]
        if self.cfg.time_limit:
            argv += [f"--time={self.cfg.time_limit * runs}"]
        # the request is this run's job by its name until salloc names its id: cancelled should the kit die first
        self._guard = Guard(["scancel", "--name", name, "--user", getpass.getuser()])
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)  # Ctrl-C reaches the kit only
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + self.cfg.pending_timeout
        try:
            while proc.poll() is None:
                self.job_id = self.job_id or job_in(said)
                if time.monotonic() > deadline:
                    reason = first_line(slurm(["squeue", "-h", "-j", self.job_id, "-o", "%r"])) if self.job_id \
                        else "no job id from salloc"
                    raise SlurmError(f"job {self.job_id or '?'} for {nodes} node(s) of partition "
                                     f"{self.cfg.partition} still pending after {self.cfg.pending_timeout:g} s "
                                     f"(squeue reason: {reason}); cancelled")
                time.sleep(POLL_S)
            reader.join(timeout=5)
            self.job_id = self.job_id or job_in(said)
            if proc.returncode != 0 or not self.job_id:
                text = " ".join(ln.strip() for ln in said if ln.strip()) or f"exit {proc.returncode}"
                raise SlurmError(f"salloc refused {nodes} node(s) of partition {self.cfg.partition}: {text}")
        except BaseException as exc:
            self.job_id = self.job_id or job_in(said)  # salloc may have named it since the last look
            done = self._cancel_request(name, nodes)  # before salloc's end revokes it: also when it never named it
            proc.terminate()
            if isinstance(exc, KeyboardInterrupt):  # kit.cli.main.Terminated (SIGTERM, SIGHUP) names its signal
                self.progress("slurm", "cancelled", f"{done} ({str(exc) or 'Ctrl-C'})")
            self.release()
            raise
        self._guard.close()
        self._guard = Guard(["scancel", self.job_id])
        names = slurm(["scontrol", "show", "hostnames", first_line(slurm(["squeue", "-h", "-j", self.job_id,
                                                                              "-o", "%N"]))]).stdout.split()
        self.nodes = [self._node(n, self._address(n)) for n in names]
        self.progress("slurm", "allocated", f"job {self.job_id}: {', '.join(names)}")

    def _refuse_unusable(self) -> None:
        """SlurmError naming each node of the node list that takes no new job (down, drained, not responding):
        salloc -w would pend until pending_timeout."""
        states = node_states(self.nodelist)
        why = [f"{n}: {w}" for n in self.nodelist if n in states and (w := unusable(*states[n]))]
        if why:
            raise SlurmError(f"{'; '.join(why)}; no job asked of it")

    def _cancel_request(self, name: str, nodes: int) -> str:
        """scancel the allocation asked for (by its id, else by its name: salloc had not named it yet); what was
        cancelled, for the user."""
        target = [self.job_id] if self.job_id else ["--name", name, "--user", getpass.getuser()]
        state = (self._job_state() or "?") if self.job_id else "not yet named by salloc"
        res = slurm(["scancel", *target])
        said = "" if res.returncode == 0 else f"; scancel said: {first_line(res)}"
        return (f"{'job ' + self.job_id if self.job_id else 'the job named ' + name} ({state}) for {nodes} node(s) "
                f"of partition {self.cfg.partition}: scancel {' '.join(target)}{said}")

    def release(self) -> None:
        """Cancel the group's job (nothing of it stays on any node); silent when it is gone."""
        if self.job_id:
            slurm(["scancel", self.job_id])
            self._gone(lambda: self._job_state() not in ("RUNNING", "PENDING", "CONFIGURING", "COMPLETING"))
            self.progress("slurm", "released", f"job {self.job_id}")
        self._guard.close()
        self.job_id, self.nodes = None, []

    def _job_state(self) -> str:
        res = slurm(["scontrol", "show", "job", "-o", self.job_id or "0"])
        return scontrol_fields(res.stdout).get("JobState", "") if res.returncode == 0 else ""

    def _address(self, name: str) -> str:
        return scontrol_fields(slurm(["scontrol", "show", "node", "-o", name]).stdout).get("NodeAddr") or name

    def _node(self, name: str, address: str) -> HostConfig:
        """A node as the SSH runner's host: its work_dir is the shared directory (ssh_site builds the Site)."""
        return HostConfig(name=name, address=address, user=os.environ.get("USER") or "slurm",
                          runtime=self.engine.name if self.engine else NATIVE, work_dir=self.cfg.shared_dir,
                          python=self.cfg.python, nic=self.cfg.nic, gpus=self.cfg.gpus_per_node,
                          data_dir=self.cfg.data_dir or posixpath.join(self.cfg.shared_dir, "data"),
                          model_code=self.cfg.model_code)

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

    def steps_root(self) -> Path:
        """<shared_dir>/runs/<run id>/steps/ (a sweep's node: .../steps/<node>/): step scripts and srun's words."""
        return Path(self.cfg.shared_dir, "runs", self.run_id, "steps", self.part)

    def step_dir(self, run: PlannedRun) -> Path:
        return self.steps_root() / run.folder.as_posix()

    def pyxis_mounts(self) -> tuple[Mount, ...]:
        """What a pyxis step sees of the nodes: the shared directory; data, scripts and model code read-only."""
        node = self.nodes[0]
        mounts = [Mount(self.cfg.shared_dir, self.cfg.shared_dir),
                  Mount(scripts_dir(node), reference.SCRIPTS_DIR, read_only=True)]
        if self.cfg.data_dir:
            mounts.append(Mount(self.cfg.data_dir, self.cfg.data_dir, read_only=True))
        if self.cfg.model_code:
            mounts.append(Mount(self.cfg.model_code, reference.CODE_ROOT, read_only=True))
        return tuple(mounts)

    def step_script(self, run: PlannedRun, port: int) -> str:
        image, program = self.image_for(run), run.case.impl == "reference"
        sites = [ssh_site(n, self.workdir(n, run), run.log_rel.name, image, program) for n in self.nodes]
        if self.mode == "pyxis":
            sites = [replace(s, container=Container(image or "", self.pyxis_mounts(), runtime=None)) for s in sites]
        cases = []
        for rank, node in enumerate(self.nodes):
            cmd = command_for(run.case, run.repeat, rank, sites, port, self.hardware, self.run_id).launched
            if not cmd.argv:
                raise SlurmError(f"{run.case.key}: rank {rank} is started by rank 0's launcher, which a Slurm "
                                 "step cannot hold")
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
        limit = self.cfg.time_limit or math.ceil(self.time_limit(run) / 60) + 1  # Slurm's backstop to the kit's own
        argv = ["srun", "--jobid", self.job_id, "-N", str(len(self.nodes)), "-n", str(len(self.nodes)),
                "--ntasks-per-node", "1", "--kill-on-bad-exit=1", f"--time={limit}", "-J", run.label.replace(" ", "")]
        if self.mode == "pyxis":
            argv += [f"--container-image={self.image_for(run)}", "--container-mounts=" + ",".join(
                f"{m.source}:{m.target}" + (":ro" if m.read_only else "") for m in self.pyxis_mounts())]
        argv += ["bash", str(script)]
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
        live = [n.name for n in self.nodes if n.name not in self._lost]
        if self.engine and self.job_id and live:  # a container whose `docker run` client died lives on
            slurm(["srun", "--jobid", self.job_id, "-N", str(len(live)), "-w", ",".join(live), "--ntasks-per-node",
                   "1", "--time=2", "-J", "kit-cleanup", *cleanup_command(self.run_id, self.engine)], timeout=180)

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

    def _sacct(self, step: str, settle_s: float = 20.0) -> dict | None:
        """The accounting record of the step (state, exit code, nodes, elapsed), or None where the cluster keeps
        no accounting. The controller hands a step's end to slurmdbd a moment later: asked until it is final."""
        if not shutil.which("sacct"):
            return None
        end = time.monotonic() + settle_s
        while True:
            res = slurm(["sacct", "-n", "-P", "-j", step, "-o", "State,ExitCode,NodeList,Elapsed"])
            if res.returncode != 0:  # accounting disabled (or unreachable): no record
                return None
            rows = [sacct_fields(ln) for ln in res.stdout.splitlines() if ln.strip()]
            final = rows and rows[0]["state"] not in ("RUNNING", "PENDING", "REQUEUED")
            if final or time.monotonic() > end:
                return rows[0] if rows else None
            time.sleep(POLL_S)

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

    def recorded(self, outcome: RunOutcome) -> dict:
        return super().recorded(outcome) | {"slurm": self.record()}

    def record(self) -> dict:
        """The run's Slurm record for run.json: job, step, states, each node's exit code."""
        step = ""
        with contextlib.suppress(OSError, IndexError):
            step = Path(self.workdir(self.nodes[0], self._run), "slurm_step").read_text().split()[0]
        code = self._srun.returncode if self._srun else None
        state = ("NODE_FAIL" if self._lost else "TIMEOUT" if self._timed_out else "CANCELLED" if self._cancelled
                 else "COMPLETED" if code == 0 else "FAILED")
        acct = self._sacct(step) if step else None  # Slurm's own record; step_state is what the kit saw
        image = self.image_for(self._run)
        return {"job_id": self.job_id, "step": step, "partition": self.cfg.partition, "srun_exit": code,
                "step_state": state, "job_state": self._job_state(),
                "sacct": acct, "container": self.mode, "image": image,
                "nodes": {n.name: {"exit_code": self._exit_code(n), "lost": self._lost.get(n.name),
                                   **({"image_id": self.image_ids.get(n.name, {}).get(image)}
                                      if self.engine else {})}
                          for n in self.nodes}}
