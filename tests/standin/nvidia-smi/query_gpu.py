"""STAND-IN for `nvidia-smi --query-gpu=...` (tests only), called by the stand-in nvidia-smi beside it. It replays
the real loop output recorded on an NVIDIA H200, driver 580.159.04 (tests/fixtures/gpu-runs/h200-20261128/
telemetry/smi-100ms.csv, or $STANDIN_SMI_LOOP), row after row, each stamped with the current time as the real tool
stamps its rows. Known fields: the ones that recording holds, and those of FROM_SNAPSHOT that the driver's recorded
`--help-query-gpu` lists (help-query-gpu.txt beside the recording, or $STANDIN_SMI_HELP); others get the real tool's
error and exit 2.

    --query-gpu=F1,F2 --format=csv[,noheader][,nounits] [--loop-ms=N] [--id=0 or the recorded GPU's UUID]
"""

import datetime as dt
import os
import re
import sys
import time
from pathlib import Path

VISIT = Path(__file__).resolve().parents[2] / "fixtures" / "gpu-runs" / "h200-20261128"
RECORDED = Path(os.environ.get("STANDIN_SMI_LOOP") or VISIT / "telemetry" / "smi-100ms.csv")
HELP = Path(os.environ.get("STANDIN_SMI_HELP") or VISIT / "telemetry" / "help-query-gpu.txt")
SNAPSHOT = VISIT / "nvidia-smi" / "q-x.xml"  # the same H200's `nvidia-smi -q -x`, recorded on the same visit
# fields the loop recording lacks, answered on every row with the value the H200's `-q -x` recorded (COMPOSED: one
# recorded value, not a recorded series): field -> (its -q -x element, the unit its CSV header names)
FROM_SNAPSHOT = {"utilization.jpeg": ("jpeg_util", "%")}


def listed(help_text: str) -> set[str]:
    """The field names a `--help-query-gpu` lists: its lines '"name"' or '"name" or "old_name"'."""
    return {name for line in help_text.splitlines() if line.startswith('"') for name in re.findall(r'"([^"]+)"', line)}


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    fields = opts["--query-gpu"].split(",")
    fmt = opts.get("--format", "csv").split(",")
    lines = [line for line in RECORDED.read_text().splitlines() if not line.startswith("#")]
    header = [h.strip() for h in lines[0].split(",")]
    names = [h.split(" [")[0] for h in header]
    rows = [[v.strip() for v in line.split(",")] for line in lines[1:]]
    snapshot = SNAPSHOT.read_text()
    for field, (element, unit) in FROM_SNAPSHOT.items():
        if field in fields and field not in names and field in listed(HELP.read_text()):
            value = re.search(rf"<{element}>([^<]*)</{element}>", snapshot).group(1).removesuffix(f" {unit}")
            header.append(f"{field} [{unit}]")  # as the recording's header names utilization.gpu [%]
            names.append(field)
            rows = [[*row, value] for row in rows]
    for f in fields:
        if f not in names:
            print(f'Field "{f}" is not a valid field to query.\n')
            return 2
    cols = [names.index(f) for f in fields]
    recorded_ids = {"0", rows[0][names.index("uuid")]} if "uuid" in names else {"0"}
    if "--id" in opts and not set(opts["--id"].split(",")) <= recorded_ids:
        print("No devices were found")  # the real tool's answer to an id it has not, exit 6
        return 6
    if "noheader" not in fmt:
        print(", ".join(header[c] for c in cols))  # recorded with nounits: the values carry none
    loop_ms = int(opts.get("--loop-ms", opts.get("-lms", "0")) or 0)
    i = 0
    while True:
        row = rows[i % len(rows)]
        now = dt.datetime.now().strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        print(", ".join(now if names[c] == "timestamp" else row[c] for c in cols), flush=True)
        if not loop_ms:
            return 0
        i += 1
        time.sleep(loop_ms / 1000)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
