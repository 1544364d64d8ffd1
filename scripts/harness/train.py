#!/usr/bin/env python3
"""The kit's training harness: one model, one data path, one timing rule, one log line, any framework.

    python train.py --framework paddle|torch --batch-size B [options] --model resnet50|vgg16|arcface|
        se_resnext50|deeplabv3p|bert|transformer|cyclegan

See README.md beside this file for the log lines and exit codes. Standard library + the framework
(+ numpy, Pillow for JPEG data); never imports the kit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HARNESS_DIR = Path(__file__).resolve().parent
if str(HARNESS_DIR) not in sys.path:
    sys.path.insert(0, str(HARNESS_DIR))

SEED003 = ("se_resnext50", "deeplabv3p", "bert", "transformer", "cyclegan")  # seed 003's benchmark set
NLP = ("bert", "transformer")  # timed over whole epochs of a variable-length corpus (seed 003's rule)
MODELS = ("resnet50", "vgg16", "arcface", *SEED003)
FRAMEWORKS = ("paddle", "torch")
# the published shapes: ImageNet 224, PLSC's 112, Paddle's DeepLabV3+ Cityscapes crop 769, CycleGAN's 256
DEFAULT_IMAGE_SIZE = {"resnet50": 224, "vgg16": 224, "arcface": 112, "se_resnext50": 224, "deeplabv3p": 769,
                      "cyclegan": 256}
# arcface: PLSC's MS1M-V3 identities; deeplabv3p: Cityscapes' 19 classes
DEFAULT_CLASSES = {"resnet50": 1000, "vgg16": 1000, "arcface": 93431, "se_resnext50": 1000, "deeplabv3p": 19}
DEFAULT_SEQ_LEN = {"bert": 512, "transformer": 256}  # BERT's max_seq_len; the Transformer's max sentence length
DEFAULT_CORPUS = {"bert": 4096, "transformer": 20000}  # sequences / sentence pairs in the synthetic corpus
UNIT = {"bert": "sequences/s", "transformer": "tokens/s", "cyclegan": "samples/s"}  # others: images/s
PADDLE_GPU_MEMORY_FLAG = "FLAGS_fraction_of_gpu_memory_to_use"  # 0: no pre-allocated pool, real peak (seed 003)
LOG_VERSION = 1

EXIT_ERROR, EXIT_BAD_INPUT, EXIT_NAN, EXIT_OOM = 1, 2, 3, 4
REASON_EXIT = {"error": EXIT_ERROR, "bad_input": EXIT_BAD_INPUT, "nan_loss": EXIT_NAN, "out_of_memory": EXIT_OOM}


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


def emit(event: str, **fields) -> None:
    line = {"kit": LOG_VERSION, "event": event, "time_ms": round(time.time() * 1000), **fields}
    # one write per line: ranks sharing one stdout (torch.distributed.run, PYTHONUNBUFFERED) must not interleave
    sys.stdout.write(":::KITLOG " + json.dumps(line, separators=(", ", ": ")) + "\n")
    sys.stdout.flush()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])
    p.add_argument("--framework", required=True, choices=FRAMEWORKS)
    p.add_argument("--model", required=True, choices=MODELS)
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="per-process batch (not for --count-params): images, sequences (bert), tokens (transformer)")
    p.add_argument("--image-size", type=positive_int, default=None,
                   help="square input side (default 224; arcface 112, deeplabv3p 769, cyclegan 256)")
    p.add_argument("--num-classes", type=positive_int, default=None,
                   help="classes (default 1000; arcface 93431, deeplabv3p 19)")
    p.add_argument("--size", choices=("full", "tiny"), default="full",
                   help="seed 003's models: the published configuration (full) or a small one for CPU tests")
    p.add_argument("--seq-len", type=positive_int, default=None,
                   help="bert: max sequence length (default 512); transformer: max sentence length (default 256)")
    p.add_argument("--corpus-size", type=positive_int, default=None,
                   help="bert: sequences (default 4096), transformer: sentence pairs (default 20000) per epoch")
    p.add_argument("--measure-epochs", type=positive_int, default=1,
                   help="bert, transformer: whole epochs measured (after --warmup-steps steps)")
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--data", default="synthetic", help="'synthetic' or the path of an ImageNet train_list.txt")
    p.add_argument("--data-root", default=None, help="root the list's paths are relative to (default: its folder)")
    p.add_argument("--workers", type=positive_int, default=4, help="JPEG decode threads per process")
    p.add_argument("--channels-last", action="store_true", help="NHWC (Paddle) / channels_last memory (PyTorch)")
    p.add_argument("--warmup-steps", type=non_negative_int, default=20)
    p.add_argument("--measure-steps", type=positive_int, default=100)
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 0.1 x global batch / 256)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads per process (default: cores/procs)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count-params", action="store_true", help="print the model's trainable parameter count and exit")
    return p


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def default_threads(local_world_size: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, local_world_size))


class Backend:
    """What differs between frameworks, behind one small surface used by the timed loop."""

    name = ""
    version = ""
    device = "cpu"
    device_name = ""
    amp_effective = False

    net = opt = scaler = None

    trainer = None  # seed 003's models: their publisher's optimizer(s) and step (models_*.Trainer)

    def count_params(self) -> int: ...
    def to_device(self, arrays: tuple) -> tuple: ...
    def peak_memory(self) -> dict: ...
    def autocast(self): ...  # the framework's mixed-precision context (used only when amp_effective)
    def zero_grad(self) -> None: ...
    def batch_from_numpy(self, images, labels): ...
    def synthetic_batch(self, batch: int, size: int, classes: int, seed: int): ...
    def sync(self) -> None: ...
    def is_oom(self, exc: BaseException) -> bool: ...
    def barrier(self) -> None: ...

    def train_step(self, *batch) -> float:
        """One forward/backward/update; returns the loss as a Python float (which waits for the step)."""
        loss = self.launch_step(*batch)
        return loss if isinstance(loss, float) else float(loss.detach())

    def launch_step(self, *batch):
        """One forward/backward/update, not waited for: the loss tensor (seed 003's Trainer: its float loss)."""
        if self.trainer is not None:
            return self.trainer.step(*batch)
        images, labels = batch
        self.zero_grad()
        if self.scaler is not None:
            with self.autocast():
                loss = self.net(images, labels)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss = self.net(images, labels)
            loss.backward()
            self.opt.step()
        return loss


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, args, dist: Dist, threads: int):
        import models_torch
        import torch

        self.torch = torch
        self.version = torch.__version__
        torch.set_num_threads(threads)
        torch.manual_seed(args.seed + dist.rank)
        use_gpu = args.device == "gpu" or (args.device == "auto" and torch.cuda.is_available())
        if use_gpu and not torch.cuda.is_available():
            raise HarnessFailure("bad_input", "--device gpu but PyTorch sees no CUDA device")
        if use_gpu:
            torch.cuda.set_device(dist.local_rank)
            self.dev = torch.device("cuda", dist.local_rank)
            self.device, self.device_name = "gpu", torch.cuda.get_device_name(self.dev)
            torch.backends.cudnn.benchmark = True
        else:
            self.dev = torch.device("cpu")
            self.device_name = cpu_name()
        self.amp_effective = args.precision == "amp" and use_gpu and args.model != "cyclegan"
        self.memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
        net = models_torch.build_model(args.model, num_classes=args.num_classes, **model_options(args))
        net = net.to(self.dev, memory_format=self.memory_format)
        model = net
        self.params = models_torch.count_params(net)
        self.distributed = dist.world_size > 1
        if self.distributed:
            torch.distributed.init_process_group(backend="nccl" if use_gpu else "gloo")
            net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[dist.local_rank] if use_gpu else None)
        self.net = net
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_effective else None
        if args.model in SEED003:
            self.trainer = models_torch.Trainer(args.model, model, net, lr=args.lr,
                                                batch_size=args.batch_size * dist.world_size, scaler=self.scaler,
                                                autocast=self.autocast if self.amp_effective else None)
        else:
            self.opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                                       weight_decay=args.weight_decay)
        self.net.train()

    def count_params(self) -> int:
        return self.params

    def to_device(self, arrays):
        return tuple(self.torch.from_numpy(a).to(self.dev) for a in arrays)

    def peak_memory(self) -> dict:
        if self.device == "gpu":
            return {"peak_memory_mb": round(self.torch.cuda.max_memory_allocated(self.dev) / 2**20, 1),
                    "peak_memory_kind": "torch.cuda.max_memory_allocated"}
        return cpu_peak_memory()

    def batch_from_numpy(self, images, labels):
        torch = self.torch
        x = torch.from_numpy(images).to(self.dev, non_blocking=True).contiguous(memory_format=self.memory_format)
        return x, torch.from_numpy(labels).to(self.dev, non_blocking=True)

    def synthetic_batch(self, batch, size, classes, seed):
        torch = self.torch
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, 3, size, size, generator=gen).to(self.dev).contiguous(memory_format=self.memory_format)
        y = torch.randint(0, classes, (batch,), generator=gen).to(self.dev)
        return x, y

    def autocast(self):
        return self.torch.autocast("cuda", dtype=self.torch.float16)

    def zero_grad(self) -> None:
        self.opt.zero_grad(set_to_none=True)

    def sync(self) -> None:
        if self.device == "gpu":
            self.torch.cuda.synchronize(self.dev)

    def is_oom(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        oom_words = ("out of memory", "can't allocate memory", "cannot allocate memory")
        return isinstance(exc, MemoryError | self.torch.cuda.OutOfMemoryError) or any(w in text for w in oom_words)

    def barrier(self) -> None:
        if self.distributed:
            self.torch.distributed.barrier()

    def close(self) -> None:
        if self.distributed and self.torch.distributed.is_initialized():
            self.torch.distributed.destroy_process_group()


class PaddleBackend(Backend):
    name = "paddle"

    def __init__(self, args, dist: Dist, threads: int):
        # read when paddle starts, so set before the import; Paddle's CPU kernels follow OMP_NUM_THREADS
        os.environ["FLAGS_paddle_num_threads"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        # seed 003: no pre-allocated memory pool, so the peak is the model's own (a value set outside is kept)
        os.environ.setdefault(PADDLE_GPU_MEMORY_FLAG, "0")
        import models_paddle
        import paddle

        self.paddle = paddle
        self.version = paddle.__version__
        paddle.seed(args.seed + dist.rank)
        has_gpu = paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
        use_gpu = args.device == "gpu" or (args.device == "auto" and has_gpu)
        if use_gpu and not has_gpu:
            raise HarnessFailure("bad_input", "--device gpu but this Paddle build sees no CUDA device")
        if use_gpu:
            paddle.set_device(f"gpu:{dist.local_rank}")
            self.device, self.device_name = "gpu", paddle.device.cuda.get_device_name(dist.local_rank)
        else:
            paddle.set_device("cpu")
            self.device_name = cpu_name()
        self.amp_effective = args.precision == "amp" and use_gpu and args.model != "cyclegan"
        self.data_format = "NHWC" if args.channels_last else "NCHW"
        self.distributed = dist.world_size > 1
        if self.distributed:
            paddle.distributed.init_parallel_env()
        net = models_paddle.build_model(args.model, num_classes=args.num_classes, data_format=self.data_format,
                                        **model_options(args))
        model = net
        self.params = models_paddle.count_params(net)
        if self.distributed:
            net = paddle.DataParallel(net)
        self.net = net
        self.scaler = paddle.amp.GradScaler(init_loss_scaling=2.0**15) if self.amp_effective else None
        if args.model in SEED003:
            self.trainer = models_paddle.Trainer(args.model, model, net, lr=args.lr,
                                                 batch_size=args.batch_size * dist.world_size, scaler=self.scaler,
                                                 autocast=self.autocast if self.amp_effective else None)
        else:
            self.opt = paddle.optimizer.Momentum(
                learning_rate=args.lr,
                momentum=args.momentum,
                parameters=net.parameters(),
                weight_decay=paddle.regularizer.L2Decay(args.weight_decay),
            )
        self.net.train()

    def count_params(self) -> int:
        return self.params

    def _layout(self, images):
        return images.transpose(0, 2, 3, 1) if self.data_format == "NHWC" and images.shape[1] == 3 else images

    def to_device(self, arrays):
        return tuple(self.paddle.to_tensor(a) for a in arrays)

    def peak_memory(self) -> dict:
        if self.device == "gpu":
            return {"peak_memory_mb": round(self.paddle.device.cuda.max_memory_allocated() / 2**20, 1),
                    "peak_memory_kind": "paddle.device.cuda.max_memory_allocated",
                    PADDLE_GPU_MEMORY_FLAG: os.environ.get(PADDLE_GPU_MEMORY_FLAG)}
        return cpu_peak_memory()

    def batch_from_numpy(self, images, labels):
        return self.paddle.to_tensor(self._layout(images)), self.paddle.to_tensor(labels)

    def synthetic_batch(self, batch, size, classes, seed):
        import numpy as np

        rng = np.random.default_rng(seed)
        images = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
        labels = rng.integers(0, classes, size=(batch,), dtype=np.int64)
        return self.batch_from_numpy(images, labels)

    def autocast(self):
        return self.paddle.amp.auto_cast(level="O1")

    def zero_grad(self) -> None:
        self.opt.clear_grad()

    def sync(self) -> None:
        if self.device == "gpu":
            self.paddle.device.synchronize()

    def is_oom(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        oom_words = ("out of memory", "resourceexhausted", "cannot allocate memory")
        return isinstance(exc, MemoryError) or any(w in text for w in oom_words)

    def barrier(self) -> None:
        if self.distributed:
            self.paddle.distributed.barrier()

    def close(self) -> None:
        pass


BACKENDS = {"torch": TorchBackend, "paddle": PaddleBackend}


def cpu_peak_memory() -> dict:
    """Peak resident set size of this process in MiB (every rank reports its own in its rank_stop line)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    mib = peak / 2**20 if sys.platform == "darwin" else peak / 1024
    return {"peak_memory_mb": round(mib, 1), "peak_memory_kind": "peak_rss"}


def model_options(args) -> dict:
    """build_model's extra arguments for seed 003's models (their size; nothing for the older three)."""
    return {"size": args.size} if args.model in SEED003 else {}


def count_params_only(args) -> int:
    """Shapes only: the layers are built without allocating or initialising their weights."""
    if args.framework == "torch":
        import models_torch as models
        import torch

        with torch.device("meta"):
            net = models.build_model(args.model, num_classes=args.num_classes, **model_options(args))
    else:
        import models_paddle as models
        import paddle

        with paddle.LazyGuard():
            net = models.build_model(args.model, num_classes=args.num_classes, **model_options(args))
    n = models.count_params(net)
    classes = f" num_classes={args.num_classes}" if args.num_classes is not None else ""
    size = f" size={args.size}" if args.model in SEED003 else ""
    print(f"model={args.model} framework={args.framework}{classes}{size} params={n}", flush=True)
    return 0


def batches(args, backend: Backend, dist: Dist):
    """An endless stream of device batches: one fixed random batch (synthetic) or the JPEG loader."""
    if args.model in SEED003:  # numpy-made, so both frameworks train on the same batch
        import synthetic

        arrays = synthetic.vision_batch(args.model, args.batch_size, args.image_size, args.num_classes or 0,
                                        args.seed + dist.rank)
        fixed = backend.to_device(arrays)
        while True:
            yield fixed
    if args.data == "synthetic":
        fixed = backend.synthetic_batch(args.batch_size, args.image_size, args.num_classes, args.seed + dist.rank)
        while True:
            yield fixed
    import data

    try:
        entries = data.load_list(args.data, args.data_root)
        loader = data.ImageListLoader(
            entries,
            args.batch_size,
            args.image_size,
            rank=dist.rank,
            world_size=dist.world_size,
            seed=args.seed,
            workers=args.workers,
            channels_last=False,
        )
    except data.DataError as exc:
        raise HarnessFailure("bad_input", str(exc)) from None
    with loader:
        try:
            for images, labels in loader:
                yield backend.batch_from_numpy(images, labels)
        except data.DataError as exc:
            raise HarnessFailure("bad_input", str(exc)) from None


def timed_loop(args, backend: Backend, dist: Dist, log) -> None:
    global_batch = args.batch_size * dist.world_size
    common = {"ranks": dist.world_size, "framework": args.framework, "model": args.model, "precision": args.precision}
    stream = batches(args, backend, dist)
    total_steps = args.warmup_steps + args.measure_steps
    measured = 0.0
    warm_start = time.perf_counter()
    for step in range(1, total_steps + 1):
        backend.sync()
        t0 = time.perf_counter()
        batch = next(stream)
        loss = backend.train_step(*batch)  # float(): waits for the step's work
        backend.sync()
        seconds = time.perf_counter() - t0
        if not math.isfinite(loss):
            raise HarnessFailure("nan_loss", f"loss is {loss} at step {step} (lr {args.lr}, batch {args.batch_size})")
        if step == args.warmup_steps:
            log("warmup_end", steps=step, seconds=round(time.perf_counter() - warm_start, 6))
        if step > args.warmup_steps:
            measured += seconds
            log(
                "step",
                step=step,
                global_batch=global_batch,
                seconds=round(seconds, 6),
                samples_per_sec=round(global_batch / seconds, 3),
                **common,
                loss=round(loss, 5),
            )
    steps = args.measure_steps
    figure = round(global_batch * steps / measured, 3)
    log(
        "run_stop",
        status="success",
        steps=steps,
        seconds=round(measured, 6),
        samples_per_sec=figure,
        **common,
        unit=UNIT.get(args.model, "images/s"),
        throughput=figure,
        **backend.peak_memory(),
    )
    return steps


def nlp_corpus(args, dist: Dist) -> list:
    """The epoch's batches (synthetic.Batch, numpy) for this rank: the same corpus on every rank, rows split."""
    import synthetic

    vocab = synthetic_vocab(args)
    if args.model == "bert":
        return synthetic.bert_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                     dist.rank, dist.world_size)
    return synthetic.transformer_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                        dist.rank, dist.world_size)


def synthetic_vocab(args) -> int:
    """The configuration's vocabulary, from the framework's own model module (already imported by the backend)."""
    import importlib

    return importlib.import_module(f"models_{args.framework}").seed003_config(args.model, args.size)["vocab"]


def counted(unit: str, sequences: int, tokens: int) -> int:
    """What an NLP figure in unit counts: tokens for tokens/s, else sequences."""
    return tokens if unit == "tokens/s" else sequences


def timed_epochs(args, backend: Backend, dist: Dist, log) -> int:
    """Seed 003's rule for NLP: samples differ in length, so the figure is whole epochs of a fixed corpus over
    their time. W warm-up steps (cycling through the corpus), then E epochs; each step timed as in timed_loop.
    BERT: sequences/s; Transformer: (target) tokens/s."""
    try:
        corpus = nlp_corpus(args, dist)
    except ValueError as exc:
        raise HarnessFailure("bad_input", str(exc)) from None
    batches = [backend.to_device(b.arrays) for b in corpus]
    unit = UNIT[args.model]
    common = {"ranks": dist.world_size, "framework": args.framework, "model": args.model, "precision": args.precision}
    log("corpus", batches_per_epoch=len(corpus), sequences_per_epoch=sum(b.sequences for b in corpus),
        tokens_per_epoch=sum(b.tokens for b in corpus), seq_len=args.seq_len, corpus_size=args.corpus_size)

    def one_step(index: int, what: str) -> tuple[float, float]:
        backend.sync()
        t0 = time.perf_counter()
        loss = backend.train_step(*batches[index])
        backend.sync()
        seconds = time.perf_counter() - t0
        if not math.isfinite(loss):
            raise HarnessFailure("nan_loss", f"loss is {loss} at {what} (lr {args.lr}, batch {args.batch_size})")
        return seconds, loss

    warm_start = time.perf_counter()
    for step in range(1, args.warmup_steps + 1):
        one_step((step - 1) % len(batches), f"warm-up step {step}")
    if args.warmup_steps:
        log("warmup_end", steps=args.warmup_steps, seconds=round(time.perf_counter() - warm_start, 6))
    step = args.warmup_steps
    total = {"seconds": 0.0, "sequences": 0, "tokens": 0, "steps": 0}
    for epoch in range(1, args.measure_epochs + 1):
        seconds_sum, sequences, tokens = 0.0, 0, 0
        for index, item in enumerate(corpus):
            step += 1
            seconds, loss = one_step(index, f"epoch {epoch} batch {index + 1}")
            seconds_sum += seconds
            sequences += item.sequences
            tokens += item.tokens
            log("step", step=step, epoch=epoch, timing="epochs", global_batch=item.sequences, tokens=item.tokens,
                seconds=round(seconds, 6), samples_per_sec=round(item.sequences / seconds, 3),
                tokens_per_sec=round(item.tokens / seconds, 3), **common, loss=round(loss, 5))
        value = counted(unit, sequences, tokens) / seconds_sum
        log("epoch", epoch=epoch, steps=len(corpus), sequences=sequences, tokens=tokens,
            seconds=round(seconds_sum, 6), unit=unit, throughput=round(value, 3), **common)
        total["seconds"] += seconds_sum
        total["sequences"] += sequences
        total["tokens"] += tokens
        total["steps"] += len(corpus)
    measured = total["seconds"]
    log(
        "run_stop",
        status="success",
        steps=total["steps"],
        epochs=args.measure_epochs,
        sequences=total["sequences"],
        tokens=total["tokens"],
        seconds=round(measured, 6),
        samples_per_sec=round(total["sequences"] / measured, 3),
        sequences_per_sec=round(total["sequences"] / measured, 3),
        tokens_per_sec=round(total["tokens"] / measured, 3),
        **common,
        unit=unit,
        throughput=round(counted(unit, total["sequences"], total["tokens"]) / measured, 3),
        **backend.peak_memory(),
    )
    return total["steps"]


def run(args, dist: Dist) -> int:
    is_logger = dist.rank == 0

    def log(event: str, **fields) -> None:
        if is_logger:
            emit(event, **fields)

    threads = args.threads or default_threads(dist.local_world_size)
    backend = None
    try:
        backend = BACKENDS[args.framework](args, dist, threads)
        amp_note = {}
        if args.precision == "amp" and not backend.amp_effective:
            why = ("cyclegan's two-optimizer step has no AMP path here" if backend.device == "gpu"
                   else "the device is a CPU")
            amp_note = {"note": f"AMP requested but {why}: the run is FP32" + (
                " (AMP needs a GPU)" if backend.device != "gpu" else "")}
            if is_logger:
                print(f"train.py: warning: {amp_note['note']}", file=sys.stderr, flush=True)
        if backend.trainer is not None:
            settings = backend.trainer.settings
            optimizer = {"optimizer": settings["optimizer"], "lr": settings["lr"],
                         **{k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()
                            if k not in ("optimizer", "lr")}}
        else:
            optimizer = {"optimizer": "momentum_sgd", "lr": args.lr, "momentum": args.momentum,
                         "weight_decay": args.weight_decay}
        shape = {"image_size": args.image_size} if args.model not in NLP else {
            "seq_len": args.seq_len, "corpus_size": args.corpus_size, "measure_epochs": args.measure_epochs}
        seed003 = {"size": args.size, "unit": UNIT.get(args.model, "images/s")} if args.model in SEED003 else {}
        log(
            "run_start",
            framework=args.framework,
            framework_version=backend.version,
            model=args.model,
            params=backend.count_params(),
            num_classes=args.num_classes,
            precision=args.precision,
            amp_effective=backend.amp_effective,
            **amp_note,
            device=backend.device,
            device_name=backend.device_name,
            ranks=dist.world_size,
            local_batch=args.batch_size,
            global_batch=args.batch_size * dist.world_size,
            **shape,
            **seed003,
            data=args.data,
            channels_last=args.channels_last,
            threads=threads,
            warmup_steps=args.warmup_steps,
            measure_steps=args.measure_steps,
            **optimizer,
            seed=args.seed,
            host=socket.gethostname(),
            python=platform.python_version(),
        )
        steps = (timed_epochs if args.model in NLP else timed_loop)(args, backend, dist, log)
        backend.barrier()
        rank_stop(dist, "success", steps, **backend.peak_memory())
        return 0
    except HarnessFailure as exc:
        return fail(exc.reason, str(exc), dist, log)
    except KeyboardInterrupt:
        fail("interrupted", "interrupted (Ctrl-C / SIGINT)", dist, log)
        return 130
    except Exception as exc:  # the framework's own errors: report them as a failed run, never as a figure
        reason = "out_of_memory" if backend is not None and backend.is_oom(exc) else "error"
        if reason == "error" and isinstance(exc, MemoryError):
            reason = "out_of_memory"
        return fail(reason, f"{type(exc).__name__}: {exc}", dist, log)
    finally:
        if backend is not None:
            backend.close()


def fail(reason: str, message: str, dist: Dist, log) -> int:
    first_line = message.strip().splitlines()[0] if message.strip() else reason
    print(f"train.py: rank {dist.rank}: {reason}: {message}", file=sys.stderr, flush=True)
    log("run_stop", status="failed", reason=reason, message=first_line[:500])
    rank_stop(dist, "failed", 0, reason=reason)
    return REASON_EXIT.get(reason, EXIT_ERROR)


def rank_stop(dist: Dist, status: str, steps: int, **fields) -> None:
    """Every rank, not only the logger, says it finished: an auditor checks that no rank is missing."""
    emit("rank_stop", status=status, rank=dist.rank, ranks=dist.world_size, local_rank=dist.local_rank,
         host=socket.gethostname(), steps=steps, **fields)


def prepare(argv: list[str] | None = None) -> tuple[argparse.Namespace, Dist]:
    """The command line checked and completed (defaults per model, the lr rule) and this process's place in the
    run; a bad argument exits with argparse's message. --count-params is main's."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model in NLP:
        for flag, value in (("--image-size", args.image_size), ("--num-classes", args.num_classes)):
            if value is not None:
                parser.error(f"{flag} does not apply to {args.model}")
        args.seq_len = args.seq_len or DEFAULT_SEQ_LEN[args.model]
        args.corpus_size = args.corpus_size or DEFAULT_CORPUS[args.model]
    elif args.model == "cyclegan":
        if args.num_classes is not None:
            parser.error("--num-classes does not apply to cyclegan")
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
    else:
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
        args.num_classes = args.num_classes or DEFAULT_CLASSES[args.model]
    if args.model not in SEED003 and args.size != "full":
        parser.error(f"--size applies to seed 003's models ({', '.join(SEED003)}), not {args.model}")
    if args.count_params:
        return args, Dist(0, 1, 0, 1)
    if args.batch_size is None:
        parser.error("--batch-size is required (per process)")
    if args.data != "synthetic" and not Path(args.data).is_file():
        parser.error(f"--data: no such train list: {args.data} (give 'synthetic' or a train_list.txt)")
    if args.model in ("arcface", "deeplabv3p") and args.batch_size < 2:
        parser.error(f"--batch-size must be >= 2 for {args.model} (its BatchNorm on pooled features needs two samples)")
    if args.model in SEED003:
        if args.data != "synthetic":
            parser.error(f"--data: {args.model} runs on synthetic data only (no reader for its dataset yet)")
        if args.channels_last:
            parser.error(f"--channels-last: {args.model} is built NCHW only")
    if args.model in NLP and args.measure_steps != parser.get_default("measure_steps"):
        parser.error(f"--measure-steps: {args.model} is timed over whole epochs; give --measure-epochs")
    dist = Dist.from_env(args.framework)
    if args.model == "cyclegan" and dist.world_size > 1:
        parser.error("cyclegan runs in one process (seed 003's single-card CycleGAN); no data-parallel path")
    if args.lr is None and args.model not in SEED003:  # seed 003's models: their publisher's lr (models_*.py)
        args.lr = 0.1 * args.batch_size * dist.world_size / 256  # the linear scaling rule the seeds use
    return args, dist


def main(argv: list[str] | None = None) -> int:
    args, dist = prepare(argv)
    return count_params_only(args) if args.count_params else run(args, dist)


if __name__ == "__main__":
    sys.exit(main())
