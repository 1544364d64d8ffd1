"""`kit bench` end to end on this host: real harness runs, the DLPerf layout, the report, resume, timeouts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from kit.cli import main
from kit.config import reference
from kit.config.suites import load_suite
from kit.run import bench
from kit.run.local import LocalRunner
from kit.run.plan import plan

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("KIT_SHARED") or REPO.parent / "shared")  # as in conftest.py
STANDIN_SMI = REPO / "tests" / "standin" / "nvidia-smi"  # the stand-in nvidia-smi (tests/standin/README.md)

TINY_SUITE_BASE = """\
schema_version: 1
name: tiny
description: two frameworks, tiny ResNet50
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 2, batch_size: 2, image_size: 32, num_classes: 10}
cases:
  - framework: [paddle, torch]
    model: resnet50
"""
TINY_SUITE = TINY_SUITE_BASE + """\
    references:
      - {framework: torch, value: 0.02, lower: -0.5, upper: null, unit: samples/s, source: a floor}  # a busy host: 0.25 seen
      - {framework: paddle, value: 1000000, lower: -0.05, upper: 0.05, unit: samples/s, source: out of reach}
"""


def write_suite(tmp_path: Path, text: str = TINY_SUITE) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(text)
    return path


def only_run_dir(runs: Path) -> Path:
    dirs = [p for p in runs.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def harness_processes(run_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            if proc.info["cwd"] == str(run_dir) and any("train.py" in a for a in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_bench_writes_layout_report_and_every_log_extracts(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(write_suite(tmp_path)), "--runs-dir", str(runs)]) == 0
    run_dir = only_run_dir(runs)
    logs = sorted((run_dir / "logs").rglob("*.log"))
    assert [p.relative_to(run_dir / "logs").as_posix() for p in logs] == [
        "paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log",
        "paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log",
        "torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log",
        "torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log",
    ]
    for log in logs:
        assert main(["extract", str(log), "--format", "auto"]) == 0
        assert float(capsys.readouterr().out.strip().splitlines()[-1]) > 0
    report = (run_dir / "report.md").read_text()
    assert report.startswith("# tiny benchmark: ")
    assert "## Frameworks side by side" in report and "| resnet50 | images/s | 2 | fp32 | 1n1g |" in report
    assert "Median throughput in each row's unit (CV of the runs)" in report
    assert report.count("images/s, median of 2 run(s) per case.") == 2  # the harness's samples are images
    assert "Frameworks: paddle 3." in report and "torch 2." in report
    assert "| resnet50 | 32 | 10 | 1 | 10 | synthetic | cpu |" in report
    assert "### Against published references" in report
    assert "| torch/resnet50/bz2/1n1g/fp32 |" in report and "| within | a floor |" in report
    assert "| OUTSIDE | out of reach |" in report
    assert (run_dir / "frameworks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (run_dir / "scaling.png").exists(), "one case per framework: nothing scales"
    assert (run_dir / "results.csv").is_file() and "counts processes" in report
    results = json.loads((run_dir / "results.json").read_text())
    assert results["schema_version"] == 1 and len(results["groups"]) == 2
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["suite"] == "tiny" and len(meta["runs"]) == 4
    assert all(r["status"] == "ok" and r["figure"] > 0 and r["unit"] == "images/s" for r in meta["runs"].values())
    assert (run_dir / "suite.yaml").read_text() == TINY_SUITE


def test_interrupted_bench_resumes_only_what_is_missing(tmp_path, capsys):
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "kit", "bench", "--suite", str(write_suite(tmp_path)), "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    run_dir = None
    while time.monotonic() < deadline:  # wait until the first run is recorded and the second has begun
        dirs = list(runs.glob("*/run.json")) if runs.exists() else []
        if dirs and len(json.loads(dirs[0].read_text()).get("runs", {})) >= 1:
            run_dir = dirs[0].parent
            if len(list((run_dir / "logs").rglob("*.log"))) >= 2 and harness_processes(run_dir):
                break
        time.sleep(0.2)
    assert run_dir is not None, "the first run never finished"
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"kit bench --resume {run_dir}" in err
    time.sleep(0.5)
    assert harness_processes(run_dir) == [], "Ctrl-C left harness processes behind"
    first = run_dir / "logs/paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    first_bytes = first.read_bytes()
    interrupted = run_dir / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    assert interrupted.is_file()
    assert main(["bench", "--resume", str(run_dir)]) == 0
    assert first.read_bytes() == first_bytes, "a finished run was re-run"
    assert len(list((run_dir / "logs").rglob("*.log"))) == 4
    assert list((run_dir / "attempts").rglob("resnet50_b2_fp32_1.log.1")), "the interrupted log was not kept"
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["runs"]) == 4 and all(r["status"] == "ok" for r in meta["runs"].values())
    report = (run_dir / "report.md").read_text()
    assert "Logs that gave no figure" not in report and "attempts" not in report
    # a finished run's log deleted, then a resume: refused, the finished run's record kept as it was (no best-of-N)
    first.unlink()
    assert main(["bench", "--resume", str(run_dir)]) == 2
    assert ("run.json records logs/paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log as finished, but its log is "
            "missing; a resume never replaces a finished run") in capsys.readouterr().err
    assert json.loads((run_dir / "run.json").read_text())["runs"] == meta["runs"] and not first.exists()


def test_kill_9_of_kit_bench_takes_its_training_process_with_it(tmp_path):
    from kit.run.records import live_processes

    text = TINY_SUITE_BASE.replace("repeats: 2", "repeats: 1").replace("[paddle, torch]", "torch")
    text = text.replace("measure_steps: 10", "measure_steps: 100000")  # trains for hours unless stopped
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "kit", "bench", "--suite", str(write_suite(tmp_path, text)), "--runs-dir", str(runs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline, trainers = time.monotonic() + 240, []
    try:
        while not trainers and proc.poll() is None and time.monotonic() < deadline:  # until train.py runs
            time.sleep(0.2)
            dirs = list(runs.glob("*/run.json")) if runs.exists() else []
            trainers = harness_processes(dirs[0].parent) if dirs else []
        assert trainers, "train.py never started"
        run_dir = dirs[0].parent
        settled = time.monotonic() + 30  # a process caught mid-fork or mid-exec shows no environment for a moment
        while True:
            live = {p.pid for p in live_processes(run_dir)}
            trainers = harness_processes(run_dir)
            if trainers and {p.pid for p in trainers} <= live:
                break
            assert time.monotonic() < settled, f"train.py {[p.pid for p in trainers]} not among the run's {live}"
            time.sleep(0.2)
        proc.kill()  # kill -9: no handler of kit's runs
        proc.wait(timeout=30)
        _gone, alive = psutil.wait_procs(trainers, timeout=30)
        assert alive == [], "train.py outlived kit bench"
        assert live_processes(run_dir) == []
    finally:
        for leftover in trainers:
            with contextlib.suppress(psutil.NoSuchProcess):
                leftover.kill()
        proc.kill()
        proc.wait()


def test_hung_case_is_killed_after_its_timeout_and_reported(tmp_path):
    text = TINY_SUITE_BASE.replace("repeats: 2", "repeats: 1, timeout_s: 2").replace("[paddle, torch]", "torch")
    text = text.replace("measure_steps: 10", "measure_steps: 100000")
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(write_suite(tmp_path, text)), "--runs-dir", str(runs)]) == 1
    run_dir = only_run_dir(runs)
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["status"] == "timeout" and "killed" in entry["reason"] and entry["wall_seconds"] < 30
    assert harness_processes(run_dir) == []
    assert "Logs that gave no figure" in (run_dir / "report.md").read_text()


def test_dry_run_prints_commands_and_starts_nothing(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", "local", "--dry-run", "--runs-dir", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "torch.distributed.run --nnodes 1" in out and "paddle.distributed.launch" in out
    assert "--threads" in out and not runs.exists()


def test_gpu_suite_refused_on_a_host_without_gpus(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi anywhere
    assert main(["bench", "--suite", "v100", "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "needs NVIDIA GPUs" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()




def test_gpu_suite_starts_on_a_driver_580_host(tmp_path):
    """Issue 30: driver 580 wraps `nvidia-smi topo -m`'s header in ANSI escapes; pre-flight must still pass."""
    smi = SHARED / "fixtures" / "nvidia-smi"
    assert smi.is_dir(), f"fixtures missing: {smi} (put shared/ beside the repo or set KIT_SHARED)"
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "kit", "bench", "--suite", str(REPO / "kit" / "suites" / "gpu1.yaml"),
           "--runs-dir", str(runs)]
    env = {**os.environ, "PATH": f"{STANDIN_SMI}{os.pathsep}{os.environ['PATH']}", "STANDIN_SMI_DIR": str(smi)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # the first run trains (a GPU) or fails (no CUDA)
        logs = sorted(runs.glob("*/logs/**/*.log"))
        if logs and '"run_start"' in logs[0].read_text(errors="replace"):
            break
        if any(json.loads(p.read_text() or "{}").get("runs") for p in runs.glob("*/run.json")):
            break  # one run ended: the other 19 of gpu1 would say the same
        time.sleep(0.2)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 2 and "not a topo -m matrix" not in err, (out + err)[-3000:]  # 2: refused to start
    run_dir = only_run_dir(runs)
    assert list((run_dir / "logs").rglob("*.log")), "pre-flight passed but no run was started"
    assert "env_error" not in json.loads((run_dir / "run.json").read_text())
    (host_dir,) = (run_dir / "env").iterdir()
    capture = json.loads((host_dir / "capture.json").read_text())
    assert capture["smi"]["gpus"][0]["product_name"] == "NVIDIA H100 80GB HBM3"
    assert capture["smi"]["driver_version"] == "580.159.04" and capture["smi"]["cuda_version"] == "13.0"
    assert capture["topology"]["gpus"] == ["GPU0"] and capture["topology"]["cpu_affinity"] == {"GPU0": "0-15"}
    kept = (host_dir / "nvidia-smi-topo.txt").read_bytes()
    assert kept == (smi / "topo-m_1xH100-80GB-HBM3_driver580.txt").read_bytes() and b"\x1b[4m" in kept


def test_resume_of_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert main(["bench", "--resume", str(tmp_path)]) == 2
    assert "not a kit bench run directory" in capsys.readouterr().err


def test_plan_interleaves_repeats_and_skips_what_needs_other_hosts():
    runs, skipped = plan(load_suite("v100"), reference.CODE_ROOT)
    assert all(s[0].impl == "reference" or s[0].nodes > 1 for s in skipped)
    assert runs[0].repeat == 1 and runs[-1].repeat == 5
    first_two = {r.repeat for r in runs[: len(runs) // 5]}
    assert first_two == {1}
    assert not any(r.case.impl != "harness" for r in runs)  # no model code for the reference cases here


@pytest.mark.parametrize("suite", ["local", "v100"])
def test_every_planned_command_is_buildable(tmp_path, suite):
    loaded = load_suite(suite)
    runner = LocalRunner(tmp_path)
    runs, _ = plan(loaded, runner.model_code)
    for run in runs[:20]:
        command = runner.command(run, loaded.hardware).launched
        assert command.argv[0] == sys.executable and "train.py" in command.shell()


def test_imagenet_cases_read_real_jpegs_from_a_synthetic_tree_on_cpu(tmp_path):
    text = TINY_SUITE_BASE.replace("repeats: 2", "repeats: 1, data: imagenet").replace("[paddle, torch]", "torch")
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(write_suite(tmp_path, text)), "--runs-dir", str(runs)]) == 0
    run_dir = only_run_dir(runs)
    listing = run_dir / "data" / "synthetic-imagenet" / "train_list.txt"
    assert len(listing.read_text().splitlines()) == 8 * 16
    (log,) = (run_dir / "logs").rglob("*.log")
    start = json.loads(next(line for line in log.read_text().splitlines() if '"run_start"' in line).split(" ", 1)[1])
    assert start["data"] == str(listing)
    assert (start["loader"], start["decode_device"]) == ("cpu", "cpu")
    report = (run_dir / "report.md").read_text()
    assert "| resnet50 | 32 | 10 | 1 | 10 | " + str(listing) in report
    ran = json.loads((run_dir / "run.json").read_text())["runs"][str(log.relative_to(run_dir))]["ran"]
    assert ran["loader"] == "cpu" and ran["input_rate"] > 0  # the loader alone, measured before warm-up
    row = next(line for line in report.splitlines() if line.startswith("| torch/resnet50/bz2/1n1g/fp32 | cpu | "))
    assert f"| {ran['input_rate']:.1f} | " in row and row.endswith((" | no |", " | **input-bound?** |"))


def test_gpu_suite_with_imagenet_needs_a_train_list(tmp_path):
    suite = load_suite("v100")
    imagenet = suite.__class__(suite.name, suite.path, suite.description, "gpu",
                               [c.__class__(**{**c.__dict__, "data": "imagenet"}) for c in suite.cases[:1]])
    with pytest.raises(bench.BenchError, match="give --train-list"):
        bench.resolve_train_list(tmp_path, imagenet, None)
    with pytest.raises(bench.BenchError, match="no such train list"):
        bench.resolve_train_list(tmp_path, imagenet, tmp_path / "missing.txt")
