"""STAND-IN for DeepLearningExamples' TensorFlow 1 ConvNets main.py (tests only): one rank of rank 0's real
`mpirun`. Its rank and world come from Open MPI (OMPI_COMM_WORLD_RANK/SIZE, as Horovod reads them); it says what
it was given and the data it sees, then prints its rank's lines of a real published log (replay.log beside this
file, written by `mpirun -tag-output -timestamp-output`) WITHOUT their tag and time: the real mpirun adds them
again. One print() per line, as DLLogger's StdOutBackend writes them, a few ms apart (the real program logs one
step every ~0.6 s): a burst would fill mpirun's 4 KiB reads and have it tag the middle of a line."""

import json
import os
import re
import socket
import sys
import time
from pathlib import Path

# 'Mon Jun 13 17:45:27 2022[1,0]<stdout>:' (-timestamp-output, then -tag-output), or the tag alone
TAGGED = re.compile(r"^(?:\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})?\[1,(\d+)\]<(stdout|stderr)>:(.*)$")
PACE_S = 0.005

rank, world = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
data = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--data_dir=")), None)  # none: synthetic input
print("stand-in main.py " + json.dumps({
    "rank": rank, "world": world, "local_rank": int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")),
    "host": socket.gethostname(), "argv": sys.argv[1:], "cwd": os.getcwd(),
    "data": sorted(os.listdir(data)) if data and os.path.isdir(data) else None}), flush=True)
for line in (Path(__file__).parent / "replay.log").read_text().splitlines():
    m = TAGGED.match(line)
    if m and int(m[1]) == rank:
        print(m[3], file=sys.stdout if m[2] == "stdout" else sys.stderr, flush=True)
        time.sleep(PACE_S)
