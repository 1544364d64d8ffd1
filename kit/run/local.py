"""The local runner: one run at a time on this machine, natively or in the pinned image (a container runtime).

Each run is one process (the harness, its framework's launcher, or a publisher's program through
scripts/reference/launch.py) in a session of its own, stdout+stderr into the run's log; a timeout or
Ctrl-C stops its whole process tree, and with an image every container of the run is removed.

When kit itself dies (kill -9 included), the run's process dies with it: on Linux it starts with a parent-death
signal, SIGTERM, which the launchers (torch.distributed.run, paddle.distributed.launch, scripts/reference/launch.py)
pass on to their workers. Every process of the run carries RUN_ENV (the run directory) in its environment, so a
resume finds any that outlived it (kit.run.records.live_processes) and refuses to train beside them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kit.config import reference
from kit.config.runtimes import DOCKER, ContainerRuntime
from kit.run import hostload
from kit.run.command import SCRIPTS, Command, Container, Mount, RunCommand, Site, cleanup_command, command_for
from kit.run.plan import PlannedRun, model_code_root
from kit.run.records import RUN_ENV, cpu_count, sidecar_path, telemetry_path
from kit.run.runner import HostStatus, RunError, Runner, RunOutcome, dies_with_kit, master_port, stop_tree


class BenchError(RunError):
    """Why a bench cannot start or go on (one line for the user)."""


class LocalRunner(Runner):
    def __init__(self, run_dir: Path, python: str = sys.executable, threads_per_host: int | None = None,
                 train_list: str | None = None, images: dict[str, str] | None = None,
                 model_code: str | None = None, hardware: str = "cpu", runtime: ContainerRuntime = DOCKER,
                 data_dir: str | None = None):
        self.run_dir = Path(run_dir).resolve()
        self.python = python
        self.threads_per_host = threads_per_host or cpu_count()
        self.train_list = train_list
        self.data_dir = data_dir  # the published programs' data root (<data_dir>/<format>/); None: their defaults
        self.images = images or {}  # framework -> image reference (in `runtime`); empty: native
        self.runtime = runtime
        self.model_code = model_code or model_code_root()
        self.hardware = hardware
        self._proc: subprocess.Popen | None = None
        self._status = HostStatus("local")
        self._t0 = 0.0
        self.launched = Command([])  # the last run's command line

    def site(self, run: PlannedRun) -> Site:
        """This machine as the run's only site: its paths, or the image's with the run directory mounted."""
        case = run.case
        image = self.images.get(case.framework)
        if self.images and image is None:
            raise BenchError(f"case {case.key}: no image for framework {case.framework}")
        container = None
        if image:
            mounts = [Mount(str(self.run_dir), str(self.run_dir))]
            if case.impl == "reference":
                mounts.append(Mount(str(SCRIPTS), reference.SCRIPTS_DIR, read_only=True))
                if self.data_dir and not Path(self.data_dir).resolve().is_relative_to(self.run_dir):
                    mounts.append(Mount(self.data_dir, self.data_dir, read_only=True))
                if self.model_code != reference.CODE_ROOT:  # this machine's checkouts over the image's, as a host's
                    mounts.append(Mount(self.model_code, reference.CODE_ROOT, read_only=True))
            elif self.train_list:
                data = str(Path(self.train_list).parent)
                mounts.append(Mount(data, data, read_only=True))
            container = Container(image, tuple(mounts), user=f"{os.getuid()}:{os.getgid()}",
                                  shm_size="2g" if case.impl == "harness" else "16g", workdir=str(self.run_dir),
                                  runtime=self.runtime)
        return Site(loopback=True, python=self.python, model_code=self.model_code,
                    train_list=self.train_list, data_dir=self.data_dir, cpu_threads=self.threads_per_host,
                    launcher_logs=str(self.run_dir / "launcher" / run.folder),
                    sidecar=str(sidecar_path(self.run_dir / run.log_rel)), container=container,
                    telemetry=str(telemetry_path(self.run_dir / run.log_rel)) if self.hardware == "gpu" else None)

    def command(self, run: PlannedRun, hardware: str | None = None, port: int | None = None) -> RunCommand:
        return command_for(run.case, run.repeat, 0, [self.site(run)], port or master_port(),
                           hardware or self.hardware, self.run_dir.name)

    # ---- Runner ------------------------------------------------------------------------------------

    def start(self, run: PlannedRun) -> None:
        self.launched = command = self.command(run).launched
        log = self.run_dir / run.log_rel
        log.parent.mkdir(parents=True, exist_ok=True)
        self._status = HostStatus("local", command=command.shell())
        self._t0 = time.monotonic()
        with open(log, "wb") as out:
            out.write(f"# kit bench: {command.shell()}\n".encode())
            out.flush()
            self._proc = subprocess.Popen(dies_with_kit(command.argv), stdout=out, stderr=subprocess.STDOUT,
                                          env=os.environ | command.env | {RUN_ENV: str(self.run_dir)},
                                          cwd=self.run_dir, start_new_session=True)

    def wait(self, timeout: float) -> bool:
        try:
            code = self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._status.error = "timeout"
            return False
        finally:
            self._status.seconds = time.monotonic() - self._t0
        self._status.exit_code = code
        self._status.error = f"exit {code}" if code != 0 else ""
        return True

    def stop(self) -> None:
        if self._proc is not None:
            stop_tree(self._proc)
        if self.images:
            subprocess.run(cleanup_command(self.run_dir.name, self.runtime), capture_output=True, timeout=60)

    def statuses(self) -> list[HostStatus]:
        return [self._status]

    def watched(self) -> hostload.HostLoad:
        return hostload.HostLoad(containers=bool(self.images), env_dir=self.run_dir / "env")

    def recorded(self, outcome: RunOutcome) -> dict:
        return {"command": self.launched.shell(), "argv": list(self.launched.argv), "env": dict(self.launched.env)}
