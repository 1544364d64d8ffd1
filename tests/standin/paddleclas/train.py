"""STAND-IN for PaddleClas's ppcls/static/train.py (tests only): one worker of the real
`paddle.distributed.launch`. It joins the real collective group of its rank (paddle.distributed on gloo: this
Paddle is a CPU build; the launcher's PADDLE_MASTER and trainer endpoints, over the test hosts' network), says
what it was given and the data it sees (the -o image_root/cls_label_path overrides), then prints the program's
lines of a real published log (replay.log beside this file, the rank-0 launcher output of PaddlePaddle/Perf's
4-node run): the lines after the launcher's own ('launch proc_id').
PaddleClas logs through ppcls.utils.logger, which prints on rank 0 only (init_logger(log_ranks=[0]): every other
rank sets ERROR); so rank 0 prints every program line and the other ranks all but the 'ppcls INFO' records."""

import json
import os
import re
import sys
from pathlib import Path

import paddle
import paddle.distributed as dist

if not (paddle.is_compiled_with_cuda() or paddle.is_compiled_with_xpu()):  # NCCL's NIC for gloo, as torch's
    os.environ.setdefault("PADDLE_DISTRI_BACKEND", "gloo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("NCCL_SOCKET_IFNAME", "lo"))
dist.init_parallel_env()
rank, world = dist.get_rank(), dist.get_world_size()
overrides = dict(sys.argv[i + 1].split("=", 1) for i, a in enumerate(sys.argv) if a == "-o")
labels = overrides.get("DataLoader.Train.dataset.cls_label_path")
ranks = paddle.to_tensor([rank])
if world > 1:  # one GPU: no launcher, no group
    dist.all_reduce(ranks)  # every rank's number, summed over the group: 0 + 1 + ... + world-1
print("stand-in ppcls/static/train.py " + json.dumps({
    "rank": rank, "world": world, "rank_sum": int(ranks.numpy()[0]), "argv": sys.argv[1:], "cwd": os.getcwd(),
    "data": {"image_root": overrides.get("DataLoader.Train.dataset.image_root"), "cls_label_path": labels,
             "labels": len(Path(labels).read_text().splitlines()) if labels and os.path.isfile(labels) else None},
    "env": {k: os.environ.get(k) for k in ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
                                           "PADDLE_CURRENT_ENDPOINT", "PADDLE_MASTER", "PADDLE_NNODES",
                                           "PADDLE_LOCAL_RANK", "FLAGS_selected_gpus", "POD_IP", "PADDLE_LOG_DIR")},
}), flush=True)

PPCLS = re.compile(r"^\[\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\] ppcls ")
lines = (Path(__file__).parent / "replay.log").read_text().splitlines()
start = max(i for i, line in enumerate(lines) if line.startswith("launch proc_id:")) + 1
in_record = False
for line in lines[start:]:
    if PPCLS.match(line):
        in_record = True
    elif line and not line.startswith("=="):  # the banner (and its blank end) belong to its ppcls record
        in_record = False
    if rank == 0 or not in_record:
        print(line, flush=True)
if world > 1:
    dist.barrier()
