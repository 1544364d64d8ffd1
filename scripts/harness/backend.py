"""What every framework backend shares: the failure type, the process's place in the run, the step the timed loop
calls (through the model's Trainer), and the model sets that decide what a backend may do (and the unit of each
model's figure). Standard library only."""

from __future__ import annotations

import os
import platform
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

from catalogue import NAMES as MODELS  # noqa: F401  (the model sets, from the one catalogue)
from catalogue import NLP, NOT_COMPILABLE, SEED003, UNIT  # noqa: F401


class HarnessFailure(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @classmethod
    def from_env(cls, framework: str) -> Dist:
        env = os.environ
        if framework == "paddle" and "PADDLE_TRAINER_ID" in env:
            rank, world = int(env["PADDLE_TRAINER_ID"]), int(env.get("PADDLE_TRAINERS_NUM", "1"))
            local = int(env.get("PADDLE_LOCAL_RANK", env.get("FLAGS_selected_gpus", "0").split(",")[0] or 0))
            local_world = int(env.get("PADDLE_LOCAL_SIZE", env.get("PADDLE_NPROC_PER_NODE", "1")))
            return cls(rank, world, local, local_world)
        rank, world = int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
        return cls(rank, world, int(env.get("LOCAL_RANK", "0")), int(env.get("LOCAL_WORLD_SIZE", "1")))


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_peak_memory() -> dict:
    """Peak resident set size of this process in MiB (every rank reports its own in its rank_stop line)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    mib = peak / 2**20 if sys.platform == "darwin" else peak / 1024
    return {"peak_memory_mb": round(mib, 1), "peak_memory_kind": "peak_rss"}


def model_options(args) -> dict:
    """build_model's extra arguments for seed 003's models (their size; nothing for the older three)."""
    return {"size": args.size} if args.model in SEED003 else {}


def optimizer_options(args) -> dict:
    """The Trainer's settings from the command line: --lr (None: the model's own); the ImageNet models also take
    --momentum and --weight-decay (seed 003's: their publisher's, model_specs.OPTIMIZER_SETTINGS)."""
    if args.model in SEED003:
        return {"lr": args.lr}
    return {"lr": args.lr, "momentum": args.momentum, "weight_decay": args.weight_decay}


class Backend:
    """What differs between frameworks, behind one small surface used by the timed loop."""

    name = ""
    version = ""
    device = "cpu"
    device_name = ""
    device_count = 0
    cuda_version: str | None = None  # the CUDA the framework was built with
    cudnn_version: int | None = None  # the cuDNN it loaded
    model = ""
    autocast_dtype: str | None = None  # the autocast that runs ("float16", "bfloat16"), None: FP32
    note: str | None = None  # why the run is FP32 although more was asked
    math: dict = {}  # the math flags read back from the framework (precision.py)
    compiler: str | None = None  # what compiles the network (--mode compiled), None: eager
    started = False  # a step has run (the first one compiles, --mode compiled)

    net = scaler = None
    trainer = None  # the model's optimizer(s) and step (torch_trainer / paddle_trainer .Trainer)
    launch_step = None  # one forward/backward/update, not waited for: the Trainer's launcher()

    @property
    def amp_effective(self) -> bool:
        """True when FP16 or BF16 autocast really runs (run_start's field for readers older than `math`)."""
        return self.autocast_dtype is not None

    def count_params(self) -> int: ...
    def to_device(self, arrays: tuple) -> tuple: ...
    def peak_memory(self) -> dict: ...
    def autocast(self): ...  # the framework's autocast context for autocast_dtype (a no-op context for FP32)
    def batch_from_numpy(self, images, labels): ...
    def batch_from_loader(self, images, labels): ...  # device tensors from loader_gpu/loader_dali, [B,S,S,3] for nhwc
    def synthetic_batch(self, batch: int, size: int, classes: int, seed: int): ...
    def sync(self) -> None: ...
    def is_oom(self, exc: BaseException) -> bool: ...
    def barrier(self) -> None: ...

    def train_step(self, *batch) -> float:
        """One forward/backward/update; returns the loss as a Python float (which waits for the step)."""
        if not self.started:
            return self._first_step(batch)
        loss = self.launch_step(*batch)
        return loss if isinstance(loss, float) else float(loss.detach())

    def _first_step(self, batch) -> float:
        """The first step compiles the network (--mode compiled): a failure there is the compiler's, said so."""
        try:
            loss = self.launch_step(*batch)
            loss = loss if isinstance(loss, float) else float(loss.detach())
        except Exception as exc:
            if self.compiler is None or isinstance(exc, HarnessFailure) or self.is_oom(exc):
                raise
            raise HarnessFailure("bad_input", f"--mode compiled: {self.compiler} could not compile {self.model} "
                                              f"({self.name}): {type(exc).__name__}: {exc}") from exc
        self.started = True
        return loss

    def _start_trainer(self, trainer, args, dist: Dist, model, who: str, where: str) -> None:
        """The math read back checked against the autocast asked for (WHO: the framework, WHERE: the device), then
        the run's TRAINER over MODEL (self.net: what runs it) and the step the timed loop launches."""
        if self.math["autocast"] != self.autocast_dtype:
            raise HarnessFailure("bad_input", f"--precision {args.precision}: {who} did not enable "
                                              f"{self.autocast_dtype} autocast on {where}")
        self.trainer = trainer(args.model, model, self.net, batch_size=args.batch_size * dist.world_size,
                               scaler=self.scaler, autocast=self.autocast if self.autocast_dtype else None,
                               **optimizer_options(args))
        self.launch_step = self.trainer.launcher()
        self.net.train()

    def close(self) -> None:
        pass
