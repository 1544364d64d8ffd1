"""Where `make test`'s time goes: each test's wall seconds and the CPU seconds of its process tree, per file.

    make test-profile            # the suite as `make test` runs it, with this plugin; then the table
    python bench/testprofile.py DIR [--top N]   # the table again from DIR's rows-*.json

As a pytest plugin (`-p testprofile`, bench/ on PYTHONPATH) it writes, per xdist worker, DIR/rows-<worker>.json:
[{"id", "wall", "cpu"}] where cpu is this process's user + system seconds and its waited-for children's over the
test (setup, call and teardown). Work done in other sessions' processes (sshd's, Docker's, Slurm's daemons) is not
counted: a test with much more wall than CPU waits on them, or on a clock. The same work burning more CPU in the
suite than alone is contention (it found OpenMP threads spinning beside the other worker: tests/conftest.py).

That work is counted by the kernel's process accounting: as root with `accton` (Debian's acct), make test-profile
records every process that ended into DIR/pacct, and the table ends with the CPU of each kind of process by where it
ran -- under the test hosts' sshd, a Slurm step, a container, or the suite's own tree (python bench/testprofile.py
DIR --pacct DIR/pacct again).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ENV_DIR = "KIT_TEST_PROFILE_DIR"
_rows: list[dict] = []


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cpu, wall = _cpu(), time.monotonic()
    yield
    _rows.append({"id": item.nodeid, "wall": round(time.monotonic() - wall, 3), "cpu": round(_cpu() - cpu, 3)})


def pytest_sessionfinish(session):
    folder = os.environ.get(ENV_DIR)
    if not folder or not _rows:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (Path(folder) / f"rows-{worker}.json").write_text(json.dumps(_rows))


def read_rows(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("rows-*.json")):
        rows += json.loads(path.read_text())
    if not rows:
        raise SystemExit(f"testprofile: no rows-*.json in {folder} (run the suite with -p testprofile and {ENV_DIR})")
    return rows


def table(rows: list[dict], top: int = 20) -> str:
    """Totals, then the files and the tests by wall seconds (wall, CPU, wall not spent on this tree's CPU)."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        entry = files[r["id"].split("::", 1)[0]]
        entry[0] += r["wall"]
        entry[1] += r["cpu"]
        entry[2] += 1
    wall, cpu = sum(r["wall"] for r in rows), sum(r["cpu"] for r in rows)
    out = [f"{len(rows)} tests: {wall:.0f} s of wall in all, {cpu:.0f} s of CPU (this machine's processes of them)",
           "", "| file | tests | wall s | CPU s | waiting s |", "| --- | --- | --- | --- | --- |"]
    out += [f"| {name} | {n} | {w:.1f} | {c:.1f} | {max(w - c, 0):.1f} |"
            for name, (w, c, n) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]]
    out += ["", "| test | wall s | CPU s |", "| --- | --- | --- |"]
    out += [f"| {r['id']} | {r['wall']:.1f} | {r['cpu']:.1f} |" for r in sorted(rows, key=lambda r: -r["wall"])[:top]]
    return "\n".join(out) + "\n"


# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime, then the comp_t
# utime, stime, mem, io, rw, minflt, majflt, swaps, and the command's first 16 bytes
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")
ACCT_HZ = 100
DAEMONS = ("sshd", "slurmstepd", "containerd-shim", "dockerd")


def _comp_t(value: int) -> int:
    return (value & 0x1FFF) << (3 * (value >> 13))


def read_pacct(path: Path) -> list[dict]:
    """Each process a v3 accounting file records: pid, ppid, command, CPU seconds (user + system)."""
    data, out = path.read_bytes(), []
    for at in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        f = ACCT_V3.unpack_from(data, at)
        if f[1] != 3:
            raise SystemExit(f"testprofile: {path}: record at byte {at} is version {f[1]}, not acct v3")
        out.append({"pid": f[6], "ppid": f[7], "comm": f[18].split(b"\0", 1)[0].decode(errors="replace"),
                    "cpu": (_comp_t(f[10]) + _comp_t(f[11])) / ACCT_HZ})
    return out


def pacct_table(procs: list[dict], top: int = 20) -> str:
    """CPU seconds by command and where it ran: under which daemon (its nearest ancestor of DAEMONS), else here."""
    # a record is written when its process ends, after its children's: a child's parent is the first later record
    # of its ppid (pids are reused over a suite's ~20000 processes)
    parent: list[int | None] = [None] * len(procs)
    latest: dict[int, int] = {}
    for i in range(len(procs) - 1, -1, -1):
        parent[i] = latest.get(procs[i]["ppid"])
        latest[procs[i]["pid"]] = i
    cpu, count = Counter(), Counter()
    for i, p in enumerate(procs):
        where, up = "the suite's tree", parent[i]
        while up is not None:
            if procs[up]["comm"] in DAEMONS:
                where = f"under {procs[up]['comm']}"
                break
            up = parent[up]
        cpu[(where, p["comm"])] += p["cpu"]
        count[(where, p["comm"])] += 1
    total = sum(cpu.values())
    out = [f"process accounting: {len(procs)} processes ended, {total:.0f} s of CPU", "",
           "| where | command | processes | CPU s |", "| --- | --- | --- | --- |"]
    out += [f"| {w} | {c} | {count[(w, c)]} | {v:.1f} |" for (w, c), v in cpu.most_common(top)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder the plugin wrote rows-*.json into")
    parser.add_argument("--top", type=int, default=20, help="files and tests listed (default 20)")
    parser.add_argument("--pacct", type=Path, help="a process accounting file (accton) of the same run")
    args = parser.parse_args(argv)
    sys.stdout.write(table(read_rows(args.folder), args.top))
    if args.pacct:
        sys.stdout.write("\n" + pacct_table(read_pacct(args.pacct), args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
