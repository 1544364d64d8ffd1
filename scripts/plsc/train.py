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
--selected_gpus=...`; on Paddle >= 2 the kit's recipe (kit/config/reference.py) also gives the launcher that
cluster in its PaddleCloud variables, which its compatibility mode keeps.
"""

from __future__ import annotations  # the images' Python may be older than 3.10

import argparse

import numpy as np
import paddle
from plsc import Entry

NUM_EPOCHS = 1
NUM_SAMPLES = 5822653
NUM_CLASSES = 85742
READER_THREADS = 8
READER_BUFFER = 5000


def random_samples():
    def reader():
        for _ in range(NUM_SAMPLES):
            yield np.random.normal(size=(3, 112, 112)), int(np.random.randint(NUM_CLASSES))

    return paddle.reader.xmap_readers(lambda sample: sample, reader, READER_THREADS, READER_BUFFER)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loss-type", choices=("arcface", "dist_arcface"), required=True,
                        help="arcface on one GPU, dist_arcface on several (as DLPerf's runner.sh sets it)")
    parser.add_argument("--batch-size", type=int, default=128, help="per GPU")
    args = parser.parse_args()

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
