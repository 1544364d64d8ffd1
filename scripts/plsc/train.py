#!/usr/bin/env python3
"""PLSC ArcFace benchmark driver: what DLPerf's PaddlePaddle/PLSC/scripts/train.py does, with flags.

DLPerf copies its train.py into the PLSC checkout and edits it with sed before every run (batch size,
LOSS_TYPE 'arcface' on one GPU, 'dist_arcface' on several). Here those two are flags; the rest is
DLPerf's: random 3x112x112 samples (5,822,653 of them, 85,742 classes) through an 8-thread xmap
reader, one epoch, no test, log every 10 batches, checkpoints under ./checkpoints. (DLPerf's file
writes `ins.set_train_batch_size=128`, an assignment that leaves PLSC's default batch in place;
this driver calls the setter.) scripts/plsc/exit_at_batch_150.patch stops the run at batch 150.
Runs from inside the (patched) checkout, like DLPerf's: `from plsc import Entry` is that code.

DLPerf launched it with Paddle 1.8.5's `paddle.distributed.launch --cluster_node_ips=A,B --node_ip=A
--selected_gpus=...`. Paddle >= 2 runs that line in its launcher's compatibility mode, which keeps only the
flags it still knows: --cluster_node_ips and --node_ip are dropped, so every node would train as a job of its
own (and on a CPU build --selected_gpus too). restore_cluster() gives each trainer, before PLSC reads it, the
cluster those flags name, as Paddle 1.8.5's launcher set it: trainers node by node, this node's in the order
its launcher started them, endpoints ip:6070+i (its default --started_port for several nodes). It reads the
flags from the launcher's command line (this process's parent) and changes nothing where the launcher built
that cluster itself (Paddle 1.8) or where there is one node.
"""

from __future__ import annotations  # the images' Python may be older than 3.10

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import paddle
from plsc import Entry

NUM_EPOCHS = 1
NUM_SAMPLES = 5822653
NUM_CLASSES = 85742
READER_THREADS = 8
READER_BUFFER = 5000
LEGACY_FIRST_PORT = 6070  # Paddle 1.8.5's launcher, several nodes and no --started_port
LEGACY_FLAGS = ("--cluster_node_ips", "--node_ip", "--started_port")


def random_samples():
    def reader():
        for _ in range(NUM_SAMPLES):
            yield np.random.normal(size=(3, 112, 112)), int(np.random.randint(NUM_CLASSES))

    return paddle.reader.xmap_readers(lambda sample: sample, reader, READER_THREADS, READER_BUFFER)


def launcher_flags(launcher_argv: list[str], script: str) -> dict[str, str]:
    """The legacy flags on the launcher's command line before the training script (--flag=value or --flag value)."""
    found: dict[str, str] = {}
    for i, token in enumerate(launcher_argv):
        if token == script:
            break
        for name in LEGACY_FLAGS:
            if token.startswith(name + "="):
                found[name] = token.split("=", 1)[1]
            elif token == name and i + 1 < len(launcher_argv):
                found[name] = launcher_argv[i + 1]
    return found


def parent_argv() -> list[str]:
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def restore_cluster(environ=os.environ, launcher_argv: list[str] | None = None, script: str | None = None) -> str:
    """Set this trainer's PADDLE_TRAINER_ID/TRAINERS_NUM/TRAINER_ENDPOINTS/CURRENT_ENDPOINT and POD_IP to the
    cluster of the launcher's --cluster_node_ips/--node_ip where its launcher dropped them; what was done, or ''."""
    argv = parent_argv() if launcher_argv is None else launcher_argv
    if "paddle.distributed.launch" not in argv:
        return ""
    flags = launcher_flags(argv, script or sys.argv[0])
    ips = [ip.strip() for ip in flags.get("--cluster_node_ips", "").split(",") if ip.strip()]
    here = flags.get("--node_ip", "")
    given = [e for e in environ.get("PADDLE_TRAINER_ENDPOINTS", "").split(",") if e]
    if len(ips) < 2 or here not in ips or not given or {e.rsplit(":", 1)[0] for e in given} == set(ips):
        return ""  # one node, or the launcher built the cluster of its flags
    current = environ.get("PADDLE_CURRENT_ENDPOINT", "")
    local = given.index(current) if current in given else int(environ.get("PADDLE_RANK_IN_NODE", "0"))
    port = int(flags.get("--started_port", LEGACY_FIRST_PORT))
    endpoints = [f"{ip}:{port + i}" for ip in ips for i in range(len(given))]
    rank = ips.index(here) * len(given) + local
    was = f"trainer {environ.get('PADDLE_TRAINER_ID')} of {environ.get('PADDLE_TRAINERS_NUM')} at {','.join(given)}"
    environ.update({"PADDLE_TRAINER_ID": str(rank), "PADDLE_TRAINERS_NUM": str(len(endpoints)),
                    "PADDLE_TRAINER_ENDPOINTS": ",".join(endpoints), "PADDLE_CURRENT_ENDPOINT": endpoints[rank],
                    "POD_IP": here})
    return (f"train.py: the launcher dropped --cluster_node_ips/--node_ip ({was}); as Paddle 1.8.5's launcher: "
            f"trainer {rank} of {len(endpoints)} at {','.join(endpoints)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loss-type", choices=("arcface", "dist_arcface"), required=True,
                        help="arcface on one GPU, dist_arcface on several (as DLPerf's runner.sh sets it)")
    parser.add_argument("--batch-size", type=int, default=128, help="per GPU")
    args = parser.parse_args()

    restored = restore_cluster()
    if restored:
        print(restored, flush=True)
    ins = Entry()
    ins.set_model_save_dir("./checkpoints")
    ins.set_train_epochs(NUM_EPOCHS)
    ins.set_loss_type(args.loss_type)
    ins.set_train_batch_size(args.batch_size)
    ins.set_with_test(False)
    ins.set_class_num(NUM_CLASSES)
    ins.set_log_period(10)
    ins.train_reader = random_samples()
    ins.train()


if __name__ == "__main__":
    main()
