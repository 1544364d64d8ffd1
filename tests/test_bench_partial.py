"""`kit bench` keeps every finished run's figure as it goes: results.json, report.md and results.csv rewritten after
each run, marked partial until the bench's normal end (kill -9 included), complete only then. Real harness runs."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kit.audit.bundle import BundleError, make_bundle
from kit.cli import main
from kit.run import bench, records

# The cheapest real case the bench tests use (tests/test_bench.py): PyTorch ResNet50 at 32 px, batch 2; 10 measured
# steps, the fewest `kit verify` accepts.
SUITE = """\
schema_version: 1
name: partial
description: tiny PyTorch ResNet50, and one case that trains for hours unless stopped
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 2, batch_size: 2, image_size: 32, num_classes: 10}
cases:
  - framework: torch
    model: resnet50
"""
ENDLESS = SUITE + """\
  - framework: torch
    model: resnet50
    batch_size: 4
    repeats: 1
    measure_steps: 100000
"""
QUICK, SLOW = "torch/resnet50/bz2/1n1g/fp32", "torch/resnet50/bz4/1n1g/fp32"


def write_suite(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "partial.yaml"
    path.write_text(text)
    return path


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def figures(results: dict) -> dict[tuple[str, int], float]:
    """(case key, repeat) -> the run's figure in results.json."""
    out = {}
    for g in results["groups"]:
        for c in g["cases"]:
            key = f"{g['framework']}/{g['model']}/bz{g['batch_per_device']}/{c['case']}/{g['precision']}"
            out.update({(key, r["run"]): r["value"] for r in c["runs"]})
    return out


def trainers_of(run_dir: Path) -> list[psutil.Process]:
    return [p for p in records.live_processes(run_dir) if any("train.py" in a for a in p.cmdline())]


def test_kill_9_mid_suite_keeps_the_finished_runs_figure_marked_partial(tmp_path, capsys):
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "kit", "bench", "--suite", str(write_suite(tmp_path, ENDLESS)), "--runs-dir",
           str(runs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, run_dir, trainers = time.monotonic() + 240, None, []
    try:
        # polled, not slept on: the first run's figure in results.json, then the endless run training
        while not trainers and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            found = list(runs.glob("*/results.json")) if runs.exists() else []
            with contextlib.suppress(ValueError, KeyError):  # a file is replaced whole, never half-written
                if found and read_json(found[0])["completion"]["finished"]:
                    run_dir = found[0].parent
                    trainers = trainers_of(run_dir)
        assert trainers, f"the first run never finished or the second never started (exit {proc.poll()})"
        proc.kill()  # kill -9: no handler runs, nothing is written after this
        proc.wait(timeout=30)
        _gone, alive = psutil.wait_procs(trainers, timeout=30)
        assert alive == [], "train.py outlived kit bench"
    finally:
        for leftover in trainers:
            with contextlib.suppress(psutil.NoSuchProcess):
                leftover.kill()
        proc.kill()
        proc.wait()

    meta, results = read_json(run_dir / "run.json"), read_json(run_dir / "results.json")
    assert "finished" not in meta and [(p["case"], p["repeat"]) for p in meta["planned_runs"]] == \
        [(QUICK, 1), (SLOW, 1), (QUICK, 2)], "repeats interleaved, as planned"
    assert results["completion"] == {"state": "partial", "planned": 3, "finished": [{"case": QUICK, "repeat": 1}],
                                     "missing": [{"case": SLOW, "repeat": 1}, {"case": QUICK, "repeat": 2}]}
    first = meta["runs"]["logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"]
    assert first["status"] == "ok" and figures(results) == {(QUICK, 1): first["figure"]}
    partial_line = f"partial: 1 of 3 runs finished; missing: {SLOW} #1, {QUICK} #2 "
    assert (run_dir / "report.md").read_text().splitlines()[2].startswith(partial_line)
    assert (run_dir / "results.csv").read_text().count("\ntorch,resnet50,2,fp32,") == 1

    # kit report of it: the line near the top, the finished run's figure, the killed run's log named
    capsys.readouterr()
    code = main(["report", str(run_dir)])
    out, err = capsys.readouterr()
    assert out.splitlines()[2].startswith(partial_line) and f"kit: warning: {partial_line}" in err
    assert f"| 1 | 1 | {first['figure']:.2f} |" in out
    killed = "torch/resnet50/bz4/1n1g/resnet50_b4_fp32_1.log"
    assert code == 2 and f"`{killed}`" in out, "the killed run's log gives no figure and is named"
    assert read_json(run_dir / "results.json")["completion"]["state"] == "partial", "kit report keeps it partial"

    with pytest.raises(BundleError, match=f"partial: 1 of 3 runs finished; missing: {SLOW} #1"):
        make_bundle(run_dir, tmp_path / "partial.bundle.tar.gz")


def test_a_report_rewrite_is_paced_to_a_share_of_the_benchs_time():
    clock, written = [0.0], []

    def write():  # a rewrite that takes 1 s
        clock[0] += 1.0
        written.append(clock[0])

    pacer = bench.ReportPacer(write, share=0.1, clock=lambda: clock[0])
    for _ in range(40):  # runs of 2 s each
        clock[0] += 2.0
        pacer.ran()
    # the first run's at once; then one whenever the rewrites took at most a tenth of the time so far
    assert written[:3] == [3.0, 12.0, 21.0] and pacer.rewrites == len(written)
    assert pacer.spent <= 0.1 * (clock[0] - 0.0) + 1.0  # within the share, one rewrite's worth at most
    assert 7 <= pacer.rewrites <= 9 and pacer.pending
    pacer.flush()
    assert not pacer.pending and pacer.rewrites == len(written)
    pacer.flush()  # nothing pending: nothing written
    assert pacer.rewrites == len(written)


def test_results_are_rewritten_after_each_run_and_complete_only_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "REPORT_SHARE", float("inf"))  # every run's rewrite, whatever the report costs
    run_dir, suite = records.start(write_suite(tmp_path, SUITE), tmp_path / "runs")
    seen = []

    def progress(phase, run, outcome, finished, total):
        if phase == "end":  # what a kill at this moment would leave
            seen.append((read_json(run_dir / "results.json"), (run_dir / "report.md").read_text().splitlines()[2]))

    result = bench.run_bench(run_dir, suite, progress=progress)
    assert not result.failed and len(seen) == 2
    after_first, after_second = seen
    assert after_first[0]["completion"] == {"state": "partial", "planned": 2, "finished": [{"case": QUICK,
                                            "repeat": 1}], "missing": [{"case": QUICK, "repeat": 2}]}
    assert after_first[1] == f"partial: 1 of 2 runs finished; missing: {QUICK} #2 (kit bench did not reach its " \
                             "end; `kit bench --resume` finishes it)."
    assert list(figures(after_first[0])) == [(QUICK, 1)]
    assert after_second[0]["completion"]["state"] == "partial", "the last run ended, the bench not yet"
    assert after_second[0]["completion"]["missing"] == []

    meta, results = read_json(run_dir / "run.json"), read_json(run_dir / "results.json")
    assert "finished" in meta
    assert results["completion"] == {"state": "complete", "planned": 2, "missing": [],
                                     "finished": [{"case": QUICK, "repeat": 1}, {"case": QUICK, "repeat": 2}]}
    assert figures(results) == {(QUICK, r["repeat"]): r["figure"] for r in meta["runs"].values()}
    assert (run_dir / "report.md").read_text().splitlines()[2] == "complete: all 2 planned runs finished."
    bundle = make_bundle(run_dir, tmp_path / "complete.bundle.tar.gz")
    assert main(["verify", str(bundle)]) == 0, "a complete run verifies as before"

    # a log deleted afterwards: the run is no longer complete, whatever run.json says, and the report names it
    (log,) = [name for name, entry in meta["runs"].items() if entry["repeat"] == 2]
    (run_dir / log).unlink()
    main(["report", str(run_dir)])
    line = (run_dir / "report.md").read_text().splitlines()[2]
    assert line == (f"incomplete: 1 of 2 planned runs have their log; run.json records 1 more as finished whose log "
                     f"is gone: {QUICK} #2 ({log}).")
    assert read_json(run_dir / "results.json")["completion"]["state"] == "incomplete"
    assert read_json(run_dir / "results.json")["completion"]["gone"] == [{"case": QUICK, "repeat": 2, "log": log}]
    with pytest.raises(BundleError, match="incomplete: 1 of 2 planned runs have their log"):
        make_bundle(run_dir, tmp_path / "gone.bundle.tar.gz")
