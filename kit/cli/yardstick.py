"""`kit yardstick`: what this machine's GPU (or CPU) itself delivers, apart from any model, and whether that is what
it should: GEMM per math mode, memory copy, the host link and (2+ GPUs) the all-reduce bus, each the median of its
windows with their spread (scripts/yardstick/hardware.py), held to the GPU model's datasheet peak
(kit/claims/gpu-datasheets.yaml, every figure with its source), to the kit's recordings of that GPU model, to this
host's earlier runs and to its peers' (same GPU or CPU model) under RUNS_DIR/yardstick/. A CPU is held only to
itself and its peers, never to a GPU.

Each run is kept as RUNS_DIR/yardstick/<host>/<UTC time>.json (--no-record: not). `--from FILE` judges a recorded
result without measuring. Exit 0: healthy or not judged; 1: suspect (a measure under its floor, named).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from pathlib import Path

from kit.cli.common import EXIT_MISMATCH, EXIT_OK
from kit.core.inputs import InputError

EARLIER_KEPT = 3  # this host's newest runs held against; each peer's newest one


def add_parser(sub) -> None:
    p = sub.add_parser("yardstick", help="GEMM, memory and link bandwidth of this machine against datasheet and "
                       "earlier runs", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--repeats", type=int, default=5, help="timed windows per measure [5]")
    p.add_argument("--only", help="measures, comma-separated: gemm,memory,host,allreduce [all the device has]")
    p.add_argument("--gemm-n", type=int, help="matrix size [8192 on a GPU, 1024 on a CPU]")
    p.add_argument("--copy-mib", type=int, help="copy size in MiB [1024 on a GPU, 256 on a CPU]")
    p.add_argument("--window-s", type=float, help="about how long one window lasts [0.2]")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are kept and read [runs]")
    p.add_argument("--no-record", action="store_true", help="do not keep this run under RUNS_DIR/yardstick/")
    p.add_argument("--from", dest="source", type=Path, metavar="FILE",
                   help="judge a recorded result (hardware.py --json, or a kept run) instead of measuring")
    p.add_argument("--json", action="store_true", help="the judgement as JSON")


def host_folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).strip(".") or "host"


def earlier_runs(runs_dir: Path, result: dict, sheets, before: str | None = None) -> list:
    """This host's newest EARLIER_KEPT runs, each peer's newest (kept before BEFORE, a kept run's name, where given),
    and (a GPU) the kit's recordings of the same model."""
    from kit.results.yardstick import Earlier, read_yardstick, same_model

    out = []
    root = runs_dir / "yardstick"
    mine = host_folder(str(result.get("host") or ""))
    for folder in sorted(p for p in root.glob("*") if p.is_dir()) if root.is_dir() else []:
        files = sorted((f for f in folder.glob("*.json") if before is None or f.stem < before), reverse=True)
        files = files[:EARLIER_KEPT] if folder.name == mine else files[:1]
        for path in files:
            try:
                run = read_yardstick(path)
            except InputError as exc:
                print(f"kit: {exc} (skipped)", file=sys.stderr)
                continue
            if not same_model(result, run):
                continue
            label = f"this host's run of {path.stem}" if folder.name == mine else f"peer {folder.name} ({path.stem})"
            out.append(Earlier(label, run))
    if result["device"] == "gpu":
        sheet = sheets.sheet_for(result.get("gpu"))
        for path in sheets.recorded:
            run = read_yardstick(path)
            if sheet and sheets.sheet_for(run.get("gpu")) == sheet:
                out.append(Earlier(f"the kit's recording {path.parent.parent.name}", run))
    return out


def keep(runs_dir: Path, result: dict) -> Path:
    """A measured result as RUNS_DIR/yardstick/<host>/<UTC time>.json, where later runs find it."""
    from kit.core.files import write_text

    folder = runs_dir / "yardstick" / host_folder(str(result["host"]))
    folder.mkdir(parents=True, exist_ok=True)
    while (path := folder / f"{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}.json").exists():  # named by the second
        time.sleep(0.2)
    return write_text(path, json.dumps(result, indent=1) + "\n")


def judged(path: Path, runs_dir: Path):
    """A kept or recorded result judged against what was kept before it (under RUNS_DIR/yardstick/ where it is one
    of those, its name the time it was kept) and the kit's recordings."""
    from kit.results.yardstick import judge, load_datasheets, read_yardstick

    sheets = load_datasheets()
    result = read_yardstick(path)
    before = path.stem if STAMP.fullmatch(path.stem) else None
    earlier = [e for e in earlier_runs(runs_dir, result, sheets, before) if e.result != result]
    return judge(result, sheets, earlier)


STAMP = re.compile(r"\d{8}T\d{6}Z")
BESIDE_S = 3600  # a yardstick kept within an hour of a run's span measured the device that run ran on


def beside_run(run_dir: Path, started: dt.datetime | None, finished: dt.datetime | None,
               hosts: list[str]) -> Path | None:
    """The yardstick run kept nearest in time to RUN_DIR's span (within BESIDE_S) under its runs folder, on one of
    its hosts; None when there is none."""
    if started is None:
        return None
    end = finished or started
    best: tuple[float, Path] | None = None
    for host in hosts:
        for path in (run_dir.parent / "yardstick" / host_folder(host)).glob("*.json"):
            if not STAMP.fullmatch(path.stem):
                continue
            when = dt.datetime.strptime(path.stem, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
            gap = max((started - when).total_seconds(), (when - end).total_seconds(), 0.0)
            if gap <= BESIDE_S and (best is None or gap < best[0]):
                best = (gap, path)
    return best[1] if best else None


def measured(runs_dir: Path, record: bool = True, **how):
    """kit yardstick here (kit.hosts.yardstick.measure's arguments), judged against the datasheet, the kit's
    recordings and what RUNS_DIR keeps, then kept there (record): (result, judgement, where it was kept or None)."""
    from kit.hosts.yardstick import measure
    from kit.results.yardstick import judge, load_datasheets

    result = measure(**how)
    sheets = load_datasheets()
    answer = judge(result, sheets, earlier_runs(runs_dir, result, sheets))
    return result, answer, keep(runs_dir, result) if record else None


def cmd_yardstick(args: argparse.Namespace) -> int:
    from kit.results.yardstick import to_dict, to_markdown

    if args.repeats < 1:
        raise InputError("--repeats", f"must be 1 or more, got {args.repeats}")
    kept = None
    if args.source:
        answer = judged(args.source, args.runs_dir)
    else:
        _, answer, kept = measured(args.runs_dir, not args.no_record, device=args.device, repeats=args.repeats,
                                   only=args.only, gemm_n=args.gemm_n, copy_mib=args.copy_mib,
                                   window_s=args.window_s)
    print(json.dumps(to_dict(answer), indent=2) if args.json else to_markdown(answer), end="\n" if args.json else "")
    if kept:
        print(f"yardstick: kept as {kept}", file=sys.stderr)
    return EXIT_MISMATCH if answer.verdict == "suspect" else EXIT_OK
