"""Issue 49, runs: the dry run refuses what the real run refuses (before any folder), ends with totals and an
estimated time; --select/--exclude; the ETA; the expansion frozen in run.json and read back by `kit report`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from test_bench import TINY_SUITE, TINY_SUITE_BASE, only_run_dir, write_suite

from kit.audit.rules.engine import load_rules, newest
from kit.cli import main
from kit.config.case_keys import MIN_MEASURED_STEPS, MIN_WARMUP_STEPS
from kit.config.expansion import FROZEN_KEY, freeze, thaw
from kit.config.suites import load_suite
from kit.run import bench, records
from kit.run.estimate import Eta, estimate
from kit.run.frozen import Selection, SelectionError, run_suite
from kit.run.plan import PlannedRun
from kit.run.progress import EtaColumn

TORCH = "torch/resnet50/bz2/1n1g/fp32"
PADDLE = "paddle/resnet50/bz2/1n1g/fp32"
IMAGENET_TORCH = TINY_SUITE_BASE.replace("repeats: 2", "repeats: 1, data: imagenet").replace("[paddle, torch]",
                                                                                              "torch")


def made(runs: Path) -> list[Path]:
    return sorted(runs.iterdir()) if runs.exists() else []


@pytest.mark.parametrize("dry", [True, False])
def test_a_missing_train_list_is_refused_before_any_folder(tmp_path, capsys, dry):
    runs = tmp_path / "runs"
    args = ["bench", "--suite", str(write_suite(tmp_path, IMAGENET_TORCH)), "--runs-dir", str(runs),
            "--train-list", str(tmp_path / "missing.txt")]
    assert main(args + ["--dry-run"] * dry) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'missing.txt'}: no such train list" in err and len(err.strip().splitlines()) == 1
    assert made(runs) == []


def test_a_gpu_suite_reading_imagenet_without_a_train_list_is_refused_by_the_dry_run(tmp_path, capsys):
    text = IMAGENET_TORCH.replace("hardware: cpu", "hardware: gpu")
    assert main(["bench", "--suite", str(write_suite(tmp_path, text)), "--dry-run"]) == 2
    assert "reads ImageNet: give --train-list" in capsys.readouterr().err


def test_a_run_refused_after_its_folder_was_made_leaves_none(tmp_path, capsys, monkeypatch):
    def refuse(*_args, **_kw):
        raise bench.BenchError("the synthetic tree could not be made")
    monkeypatch.setattr(bench, "resolve_train_list", refuse)
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(write_suite(tmp_path)), "--runs-dir", str(runs)]) == 2
    assert "the synthetic tree could not be made" in capsys.readouterr().err
    assert made(runs) == []


def test_start_removes_its_folder_when_the_copy_fails(tmp_path, monkeypatch):
    def broken(*_args):
        raise OSError("disk full")
    monkeypatch.setattr(records.shutil, "copyfile", broken)
    with pytest.raises(OSError, match="disk full"):
        records.start(write_suite(tmp_path), tmp_path / "runs")
    assert made(tmp_path / "runs") == []


def test_dry_run_ends_with_totals_and_an_estimate_from_earlier_runs(tmp_path, capsys):
    runs = tmp_path / "runs"
    suite = str(write_suite(tmp_path))
    assert main(["bench", "--suite", suite, "--dry-run", "--runs-dir", str(runs)]) == 0
    last = capsys.readouterr().out.splitlines()[-2:]
    assert last == ["totals: 2 case(s), 4 run(s) on this host",
                    "estimated time: at most 2 h 0 min for 4 run(s) no earlier run here times (their cases' "
                    "timeout_s)"]
    earlier = runs / "tiny-20240101-000000"  # this host's earlier run of the torch case: 10 s and 30 s
    earlier.mkdir(parents=True)
    entries = {f"logs/{i}": {"case": TORCH, "status": "ok", "wall_seconds": s} for i, s in enumerate((10.0, 30.0))}
    entries["logs/x"] = {"case": PADDLE, "status": "timeout", "wall_seconds": 999.0}  # a failed run times nothing
    (earlier / "run.json").write_text(json.dumps({"host": {"hostname": socket.gethostname()}, "runs": entries}))
    other = runs / "tiny-20240101-000001"  # another host's
    other.mkdir()
    (other / "run.json").write_text(json.dumps({"host": {"hostname": "elsewhere"}, "runs": {
        "a": {"case": PADDLE, "status": "ok", "wall_seconds": 1.0}}}))
    assert main(["bench", "--suite", suite, "--dry-run", "--runs-dir", str(runs)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"estimated time: 40 s for 2 run(s), from this host's earlier runs of the same cases (1 run directory "
        f"under {runs}/: median run.json wall_seconds); at most 1 h 0 min for 2 run(s) no earlier run here times "
        "(their cases' timeout_s)")


def test_select_and_exclude_trim_the_dry_run(tmp_path, capsys):
    suite = str(write_suite(tmp_path))
    assert main(["bench", "--suite", suite, "--dry-run", "--select", "torch/*"]) == 0
    out = capsys.readouterr().out
    assert f"\n{TORCH} [harness]" in out and PADDLE not in out and "totals: 1 case(s), 2 run(s)" in out
    assert main(["bench", "--suite", suite, "--dry-run", "--exclude", "torch/*"]) == 0
    out = capsys.readouterr().out
    assert f"\n{PADDLE} [harness]" in out and TORCH not in out


@pytest.mark.parametrize("flags,said", [
    (["--select", "mxnet/*"], "--select 'mxnet/*' matches no case of suite tiny"),
    (["--select", "torch/*", "--exclude", "mxnet/*"], "--exclude 'mxnet/*' matches no case of suite tiny"),
    (["--select", "torch/*", "--exclude", "*/fp32"], "suite tiny: --select torch/* --exclude */fp32 leaves no case"),
])
@pytest.mark.parametrize("dry", [True, False])
def test_a_pattern_matching_nothing_is_refused_naming_it(tmp_path, capsys, flags, said, dry):
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(write_suite(tmp_path)), "--runs-dir", str(runs), *flags]
                + ["--dry-run"] * dry) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and len(err.splitlines()) == 1
    assert made(runs) == []


def test_a_selected_run_records_its_selection_and_expansion_and_reports_from_it(tmp_path, capsys):
    runs = tmp_path / "runs"
    text = TINY_SUITE.replace("repeats: 2", "repeats: 1")
    assert main(["bench", "--suite", str(write_suite(tmp_path, text)), "--runs-dir", str(runs),
                 "--select", "torch/*"]) == 0
    run_dir = only_run_dir(runs)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["selection"] == {"select": ["torch/*"], "exclude": [], "cases": [TORCH]}
    assert [r["case"] for r in meta["planned_runs"]] == [TORCH]
    assert thaw(meta[FROZEN_KEY], run_dir / "suite.yaml").cases == load_suite(run_dir / "suite.yaml").cases
    assert [p.relative_to(run_dir / "logs").parts[0] for p in (run_dir / "logs").rglob("*.log")] == ["torch"]
    # a resume keeps the recorded selection (nothing left to run), and takes none of its own
    assert main(["bench", "--resume", str(run_dir), "--dry-run"]) == 0
    assert "totals: 1 case(s), 0 run(s) on this host (1 done already)" in capsys.readouterr().out
    assert main(["bench", "--resume", str(run_dir), "--select", "paddle/*"]) == 2
    assert "a resume runs those its run.json records" in capsys.readouterr().err
    assert main(["bench", "--resume", str(run_dir)]) == 0
    assert not list((run_dir / "logs").glob("paddle"))
    # kit report: the frozen expansion, not suite.yaml as today's kit expands it; no warning for a selected run
    meta = json.loads((run_dir / "run.json").read_text())
    for case in meta[FROZEN_KEY]["cases"]:
        for ref in case["references"]:
            ref["source"] += " (as expanded at the start)"
    (run_dir / "run.json").write_text(json.dumps(meta))
    capsys.readouterr()
    assert main(["report", str(run_dir)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "a floor (as expanded at the start)" in (run_dir / "report.md").read_text()
    assert run_suite(run_dir)[1] == "frozen"
    # a log of no case, a case without logs: one line each
    log = next((run_dir / "logs").rglob("*.log"))
    stray = run_dir / "logs/torch/resnet50/bz4/1n1g/resnet50_b4_fp32_1.log"
    stray.parent.mkdir(parents=True)
    log.rename(stray)
    main(["report", str(run_dir)])
    err = capsys.readouterr().err
    assert f"kit: warning: {run_dir}: 1 case(s) of suite tiny have no logs: {TORCH}" in err
    assert (f"kit: warning: {run_dir}: 1 log(s) belong to no case of suite tiny: "
            "logs/torch/resnet50/bz4/1n1g/resnet50_b4_fp32_1.log") in err
    # an older run directory (no frozen expansion): suite.yaml, as before
    del meta[FROZEN_KEY]
    (run_dir / "run.json").write_text(json.dumps(meta))
    assert run_suite(run_dir)[1] == "suite.yaml"


@pytest.mark.parametrize("name", ["v100", "local", "seed003"])
def test_the_frozen_expansion_reads_back_as_the_same_cases(name):
    suite = load_suite(name)
    again = thaw(json.loads(json.dumps(freeze(suite))), suite.path)
    assert again.cases == suite.cases and (again.name, again.hardware) == (suite.name, suite.hardware)


def test_selection_keeps_suite_order_and_excludes_after_selecting():
    suite = load_suite("v100")
    kept = Selection(("*/resnet50/*",), ("*/amp*",)).apply(suite)
    assert kept.cases and all("/resnet50/" in c.key and "/amp" not in c.key for c in kept.cases)
    assert [c.key for c in kept.cases] == [c.key for c in suite.cases if c in kept.cases]
    with pytest.raises(SelectionError, match="--select 'nope' matches no case"):
        Selection(("nope",)).apply(suite)


def _runs(suite, n=None):
    return [PlannedRun(c, r) for r in (1, 2) for c in suite.cases][:n]


def test_eta_from_finished_runs_then_history_then_the_bench_mean():
    suite = load_suite(write_suite(Path(__import__("tempfile").mkdtemp())))
    paddle1, torch1, paddle2, torch2 = _runs(suite)
    eta = Eta(past={TORCH: [10.0, 20.0, 90.0]})
    assert eta.remaining([paddle1, torch1]) is None  # paddle: never ran here, and nothing ran yet
    eta.done(paddle1, 4.0)
    assert eta.remaining([torch1, paddle2, torch2]) == 20.0 + 4.0 + 20.0  # torch: its earlier median
    eta.done(torch1, 6.0)
    assert eta.remaining([paddle2, torch2], current_elapsed=1.0) == 3.0 + 6.0  # this bench's own, less elapsed
    now = [100.0]
    column = EtaColumn([paddle1, torch1], Eta(), clock=lambda: now[0])
    assert column.text() == "ETA ?"
    column.update("start", paddle1, None)
    now[0] += 30
    column.update("end", paddle1, type("Outcome", (), {"status": "ok", "seconds": 30.0})())
    assert column.text() == "ETA 30 s"  # torch1, timed by the bench's mean
    column.update("start", torch1, None)
    now[0] += 75
    assert column.text() == "ETA 0 s"


def test_estimate_counts_timeouts_where_no_earlier_run(tmp_path):
    suite = load_suite(write_suite(tmp_path))
    found = estimate(_runs(suite), tmp_path / "no-runs")
    assert (found.known_runs, found.unknown_runs, found.bound) == (0, 4, 4 * suite.cases[0].timeout_s)


@pytest.mark.parametrize(("key", "fewer", "rule", "bound", "what"), [
    ("measure_steps", 9, "measured_steps", MIN_MEASURED_STEPS, "measured steps kit verify asks of a harness run"),
    ("warmup_steps", 0, "warmup_skipped", MIN_WARMUP_STEPS, "warm-up steps kit verify asks a harness run to skip")])
def test_fewer_steps_than_verify_asks_are_refused_before_anything_runs(tmp_path, capsys, key, fewer, rule, bound, what):
    """One truth for a bound: the suite refuses what kit verify's newest rule would, naming file:line:key, in the dry
    run and the real run alike; nothing is made. At the bound it runs."""
    (minimum,) = [r.args["minimum"] for r in load_rules(newest()) if r.name == rule]
    assert minimum == bound
    at = {"measure_steps": "measure_steps: 10", "warmup_steps": "warmup_steps: 1"}[key]
    suite = write_suite(tmp_path, TINY_SUITE_BASE.replace(at, f"{key}: {fewer}"))
    for dry in (["--dry-run"], []):
        assert main(["bench", "--suite", str(suite), *dry, "--runs-dir", str(tmp_path / "runs")]) == 2
        err = capsys.readouterr().err
        assert f"{suite}:5: {key}: {fewer} is fewer than the {minimum} {what} (case paddle/resnet50)" in err
    assert not (tmp_path / "runs").exists()
    write_suite(tmp_path, TINY_SUITE_BASE.replace(at, f"{key}: {bound}"))
    assert main(["bench", "--suite", str(suite), "--dry-run", "--runs-dir", str(tmp_path / "runs")]) == 0


def test_publishers_and_epoch_timed_models_are_not_held_to_the_step_bound(tmp_path):
    """The bound shapes harness cases of image models only: an NLP model counts epochs, a published program its
    own steps."""
    text = ("schema_version: 1\nname: b\nhardware: cpu\ndefaults: {measure_steps: 2, repeats: 1}\ncases:\n"
            "  - {framework: torch, model: bert, batch_size: 2, precision: fp32, size: tiny}\n"
            "  - {framework: paddle, model: resnet50, impl: reference, batch_size: 2, precision: fp32}\n")
    assert [c.measure_steps for c in load_suite(write_suite(tmp_path, text)).cases] == [2, 2]
