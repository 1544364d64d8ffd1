"""Regenerate tests/fixtures/golden-bundles/: unpacked, unsigned bundles of real runs and what each rule set finds.

    KIT_SHARED=../shared PYTHONPATH=. .venv/bin/python tests/make_golden_bundles.py [--run-dir RUN]

Sources: a real one-case `kit bench` on this CPU (PyTorch ResNet50, ImageNet JPEGs through the cpu loader; made
here unless --run-dir names one) and the fuzz fixture's real run (tests/fixtures/fuzz). A variant edits the
run_start line of a harness log and writes the report again from the logs before bundling (a forger's edit). <name>.expected.json holds
every violation per rule set; tests/test_rule_versions.py holds verify to them. Only regenerate on purpose: a
change of an old rule set's findings is what that test exists to catch.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kit.audit import bundle as bd
from kit.audit import rules as rl
from kit.audit.verify import verify_tree
from kit.config.suites import load_suite
from kit.run import bench, records

HERE = Path(__file__).resolve().parent
OUT = HERE / "fixtures" / "golden-bundles"
FUZZ_RUN = HERE / "fixtures" / "fuzz" / "fuzz-20261124-053313"
SUITE = """\
schema_version: 1
name: golden
description: one real-data PyTorch case on CPU for the rule-version golden bundles
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10,
           data: imagenet}
cases:
  - framework: torch
    model: resnet50
"""


def real_run(work: Path) -> Path:
    """A real kit bench run; its JPEG tree lies outside the run, so the bundle holds text files only."""
    tree = work / "data"
    tool = HERE.parent / "data_prep" / "make_synthetic_imagenet.py"
    args = [f"--{k.replace('_', '-')}={v}" for k, v in bench.SYNTHETIC_TREE.items()]
    subprocess.run([sys.executable, str(tool), str(tree), *args], check=True)
    (work / "golden.yaml").write_text(SUITE)
    run_dir, suite = records.start(work / "golden.yaml", work / "runs")
    result = bench.run_bench(run_dir, suite, train_list=tree / "train_list.txt")
    if result.failed:
        raise SystemExit(f"the run failed: {[o.reason for o in result.failed]}")
    return run_dir


def unpacked_bundle(run_dir: Path, name: str, work: Path, edits: dict[str, str]) -> Path:
    """A copy of the run, EDITS (old: new) made to the run_start line of its first harness log and its report
    written again from the logs (as test_bundle's swapped log), bundled and unpacked into OUT/NAME."""
    copy = work / name / run_dir.name
    shutil.copytree(run_dir, copy)
    if edits:
        log = sorted(copy.glob("logs/**/*.log"))[0]
        lines = log.read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if '"event": "run_start"' in line)
        for old, new in edits.items():
            if old not in lines[at]:
                raise SystemExit(f"{log}: no {old} in its run_start")
            lines[at] = lines[at].replace(old, new)
        log.write_text("".join(lines))
        bench.write_report(copy, load_suite(copy / "suite.yaml"))
    bundle = bd.make_bundle(copy, submitter="Kit Lab", system_name="golden-box")
    target = OUT / name
    shutil.move(bd.unpack(bundle, work / name / "open"), target)
    return target


def findings(root: Path) -> dict[str, list[dict]]:
    """Every violation verify reports, per rule set."""
    return {v: [x.to_dict() for x in verify_tree(root, rules_version=v).violations] for v in rl.versions()}


def add_version(version: str) -> int:
    """VERSION's findings on each golden bundle, added to its <name>.expected.json; the others are kept."""
    for path in sorted(OUT.glob("*.expected.json")):
        found = json.loads(path.read_text())
        root = OUT / path.name.removesuffix(".expected.json")
        found[version] = [x.to_dict() for x in verify_tree(root, rules_version=version).violations]
        path.write_text(json.dumps(found, indent=1) + "\n")
        print(root.name, {v: len(found[v]) for v in found})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, help="a finished run of the golden suite to use (default: run one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (the run, for --run-dir)")
    parser.add_argument("--add-version", metavar="VN", help="only add a new rule set's findings to the goldens as "
                        "they are (the older sets' findings stay as recorded)")
    args = parser.parse_args()
    if args.add_version:
        return add_version(args.add_version)
    work = Path(tempfile.mkdtemp(prefix="kit-golden-"))
    try:
        run_dir = args.run_dir.resolve() if args.run_dir else real_run(work)
        print(f"run: {run_dir}")
        OUT.mkdir(parents=True, exist_ok=True)
        for old in OUT.iterdir():  # the bundles and their findings; README.md stays
            if old.is_dir():
                shutil.rmtree(old)
            elif old.name.endswith(".expected.json"):
                old.unlink()
        gpu, batch4 = {'"loader": "cpu"': '"loader": "gpu"'}, {'"local_batch": 2,': '"local_batch": 4,'}
        made = {name: unpacked_bundle(source, name, work, edits) for name, source, edits in (
            ("cpu-loader", run_dir, {}),  # holds under every rule set
            ("cpu-loader-says-gpu", run_dir, gpu),  # v1 holds, v2 fails (the loader)
            ("cpu-loader-says-gpu-batch-4", run_dir, gpu | batch4),  # fails both, v2 names the loader too
            ("fuzz-batch-4", FUZZ_RUN, batch4))}  # the fuzz fixture's real run: fails both
        shape = {"cpu-loader": (False, False), "cpu-loader-says-gpu": (False, True),
                 "cpu-loader-says-gpu-batch-4": (True, True), "fuzz-batch-4": (True, True)}  # (v1, v2) fail
        for name, root in made.items():
            found = findings(root)
            if (bool(found["v1"]), bool(found["v2"])) != shape[name]:
                raise SystemExit(f"{name}: expected (v1, v2) failing {shape[name]}, got {found}")
            (OUT / f"{name}.expected.json").write_text(json.dumps(found, indent=1) + "\n")
            print(name, {v: len(found[v]) for v in found})
    finally:
        if not args.keep:
            shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
