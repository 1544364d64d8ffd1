"""STAND-IN for DeepLearningExamples' PyTorch main.py (tests only): joins the real process group of its rank
(torch.distributed, gloo), says what it was given, then replays its node's lines of a real published log
(replay.log beside this file, mpirun-tagged [1,<node>]). A rank named in hang_rank beside it hangs instead."""

import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("NCCL_SOCKET_IFNAME", "lo"))
dist.init_process_group("gloo", timeout=timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
dist.barrier()
print("stand-in main.py " + json.dumps({"rank": rank, "world": world, "argv": sys.argv[1:], "cwd": os.getcwd(),
                                         "master": os.environ["MASTER_ADDR"]}), flush=True)
hang = Path(__file__).parent / "hang_rank"  # a test's hung rank: it ignores SIGTERM, only SIGKILL stops it
if hang.is_file() and hang.read_text().strip() == str(rank):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("stand-in main.py: this rank hangs", flush=True)
    while True:
        time.sleep(1)
node = rank // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
if int(os.environ["LOCAL_RANK"]) == 0:
    tag = f"[1,{node}]<stdout>:"
    for line in (Path(__file__).parent / "replay.log").read_text().splitlines():
        if tag in line:
            print(line, flush=True)
dist.destroy_process_group()
