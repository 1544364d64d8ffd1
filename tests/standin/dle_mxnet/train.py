"""STAND-IN for DeepLearningExamples' MXNet RN50v1.5 train.py (tests only): one rank of the real mpirun the
runner starts (rank and world from Open MPI, as Horovod reads them). It says what it was given and which data
files it finds, then prints its rank's lines of a real published log (replay.log beside this file, as
horovodrun's mpirun tagged them: [1,<rank>]<stdout>:) WITHOUT their tag: the real mpirun adds it again. One
print() per line, as DLLogger's StdOutBackend and Python's logging write them, a few ms apart (a burst would fill
mpirun's 4 KiB reads and have it tag the middle of a line). Rank 0 also writes the LOG entries DLLogger's
JSONStreamBackend (dllogger v0.1.0, the requirements.txt pin) would have written to --workspace/--dllogger-log:
'DLLL {json}' per replayed DLLogger line."""

import argparse
import datetime as dt
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

TAGGED = re.compile(r"^\[1,(\d+)\]<(stdout|stderr)>:(.*)$")
DLL = re.compile(r"DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) - "
                 r"(Summary:|PARAMETER|Epoch: (\d+) (?:Iteration: (\d+) )?)")
ITEM = re.compile(r"([\w.]+) : (\S+)")
PACE_S = 0.005

parser = argparse.ArgumentParser()
parser.add_argument("--dllogger-log", default="dllogger.log")
parser.add_argument("--workspace", default="./")
for flag in ("--data-train", "--data-train-idx", "--data-backend"):
    parser.add_argument(flag)
args, _rest = parser.parse_known_args()
rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
files = (args.data_train, args.data_train_idx)
seen = None if args.data_backend == "synthetic" else {path: os.path.isfile(path) for path in files}
print("stand-in train.py " + json.dumps({"rank": rank, "world": world, "host": socket.gethostname(),
                                         "argv": sys.argv[1:], "cwd": os.getcwd(), "data": seen}), flush=True)


def entry(line: str, start: dt.datetime | None) -> dict | None:
    """The JSONStreamBackend entry of one DLLogger text line (step [] / [e] / [e, i] / "PARAMETER")."""
    m = DLL.search(line)
    if m is None:
        return None
    when = dt.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S.%f")
    if m[2] == "PARAMETER":
        body = line[m.end():].strip()
        step, data = "PARAMETER", dict(i.split(" : ", 1) for i in re.split(r"  (?=\S+ : )", body) if " : " in i)
    else:
        step = [] if m[2] == "Summary:" else [int(m[3])] + ([int(m[4])] if m[4] is not None else [])
        data = {name: float(value) for name, value in ITEM.findall(line, m.end())}
    return {"timestamp": str(when.timestamp()), "datetime": str(when),
            "elapsedtime": str(when - (start or when)), "type": "LOG", "step": step, "data": data}


start, entries = None, []
for line in (Path(__file__).parent / "replay.log").read_text().splitlines():
    m = TAGGED.match(line)
    if not m or int(m[1]) != rank:
        continue
    print(m[3], file=sys.stdout if m[2] == "stdout" else sys.stderr, flush=True)
    time.sleep(PACE_S)
    found = entry(m[3], start) if m[2] == "stdout" else None
    if found is not None:
        start = start or dt.datetime.fromisoformat(found["datetime"])
        entries.append(found)
if rank == 0:
    with open(Path(args.workspace) / args.dllogger_log, "w") as f:
        for e in entries:
            f.write(f"DLLL {json.dumps(e)}\n")
