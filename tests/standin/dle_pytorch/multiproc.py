"""STAND-IN for DeepLearningExamples' PyTorch multiproc.py (tests only): one main.py per local rank."""

import argparse
import os
import subprocess
import sys

parser = argparse.ArgumentParser()
for flag in ("--master_addr", "--master_port", "--nnodes", "--nproc_per_node", "--node_rank"):
    parser.add_argument(flag, default="127.0.0.1" if flag == "--master_addr" else "0")
args, rest = parser.parse_known_args()
nodes, local, node = int(args.nnodes or 1), int(args.nproc_per_node or 1), int(args.node_rank)
children = []
for rank in range(local):
    env = dict(os.environ, MASTER_ADDR=args.master_addr, MASTER_PORT=args.master_port, WORLD_SIZE=str(nodes * local),
               RANK=str(node * local + rank), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(local))
    children.append(subprocess.Popen([sys.executable, "-u", *rest], env=env))
sys.exit(max(child.wait() for child in children))
