"""STAND-IN for DeepLearningExamples' PyTorch main.py (tests only): distributed where its launcher says so, as the
real one decides (WORLD_SIZE > 1: it joins the real process group of its rank, torch.distributed over gloo), says
what it was given and where it found pynvml and dllogger (the real main.py imports both first thing: pynvml through
image_classification/gpu_affinity.py), then replays its node's lines of a real published log (replay.log beside this
file: mpirun-tagged [1,<node>] lines, or every line of a one-GPU log) and, on rank 0, saves a fake checkpoint where
it runs, as the real one's save_checkpoint does (--workspace ./, --checkpoint-filename checkpoint.pth.tar).
A rank named in hang_rank beside it hangs instead; after_checkpoint beside it says how a test's run ends after the
checkpoint: "fail" (exit 3), "fail-on-release" (exit 3 once a file `release` is beside it, 120 s at most) or
"wait" (until a stop signal). Its DLLogger PARAMETER line says what it was given (as
the real one prints its parsed arguments): the replayed line's arch, batch_size, amp, data_backend, memory_format and
world_size are this run's."""

import json
import os
import re
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

try:
    import pynvml  # image_classification/gpu_affinity.py's first import
except ImportError:  # the real main.py stops here; only a test that puts one on PYTHONPATH has it
    pynvml = None
try:
    import dllogger
except ImportError:  # the real main.py stops here; the multi-host tests' trees carry no dllogger
    dllogger = None

CHECKPOINT_BYTES = 65536  # the real one is ~200 MB

distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
if distributed:
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("NCCL_SOCKET_IFNAME", "lo"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier()
else:
    rank, world = 0, 1
print("stand-in main.py " + json.dumps({"rank": rank, "world": world, "argv": sys.argv[1:], "cwd": os.getcwd(),
                                         "master": os.environ.get("MASTER_ADDR"),
                                         "dllogger": dllogger and dllogger.__file__,
                                         "pynvml": pynvml and pynvml.__file__}), flush=True)
hang = Path(__file__).parent / "hang_rank"  # a test's hung rank: it ignores SIGTERM, only SIGKILL stops it
if hang.is_file() and hang.read_text().strip() == str(rank):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("stand-in main.py: this rank hangs", flush=True)
    while True:
        time.sleep(1)


def flag(name: str, default: str) -> str:
    argv = sys.argv[1:]
    return argv[argv.index(name) + 1] if name in argv else default


# main.py's defaults at the pinned commit (tests/test_reference_native.py dle_main_parse)
said = {"arch": flag("--arch", "resnet50"), "batch_size": flag("-b", "256"), "amp": str("--amp" in sys.argv),
        "data_backend": flag("--data-backend", "dali-cpu"), "memory_format": flag("--memory-format", "nchw"),
        "world_size": str(world)}


def as_run(line: str) -> str:
    if " - PARAMETER data : " not in line:
        return line
    return re.sub(r"(?<=  )(\w+) : (\S+)", lambda m: f"{m[1]} : {said.get(m[1], m[2])}", line)


if int(os.environ.get("LOCAL_RANK", "0")) == 0:
    node = rank // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    lines = (Path(__file__).parent / "replay.log").read_text().splitlines()
    tag = f"[1,{node}]<stdout>:"
    for line in [line for line in lines if tag in line] or lines:
        print(as_run(line), flush=True)
if rank == 0:  # image_classification/utils.py save_checkpoint: rank 0, at the end of its epoch
    Path("checkpoint.pth.tar").write_bytes(b"\0" * CHECKPOINT_BYTES)
if distributed:
    dist.destroy_process_group()
then = Path(__file__).parent / "after_checkpoint"
ending = then.read_text().strip() if then.is_file() else ""
if ending == "fail-on-release":  # a test lets it end once it has seen what it waits for
    released = Path(__file__).resolve().parent / "release"  # the tree itself: its scratch mirror was made before
    deadline = time.monotonic() + 120
    while not released.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    sys.exit(3)
if ending == "fail":
    sys.exit(3)
while ending == "wait":
    time.sleep(1)
