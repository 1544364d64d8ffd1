"""A published program runs in a scratch folder outside the run directory (scripts/reference/launch.py --scratch):
links to its checkout folder's entries, so its relative paths and imports reach the pinned code, while what it saves
where it runs (DLE PyTorch's checkpoint.pth.tar, PaddleClas's output/) lands in the scratch folder, which is removed
after the run, also when the program fails or is stopped, and recorded (each file removed, its bytes).

The launcher is run as the kit runs it; `kit bench` runs DLE PyTorch's stand-in (tests/standin/dle_pytorch/main.py),
which saves a fake checkpoint where it runs, then fails or waits to be stopped (the case's timeout)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.cli import main
from kit.config.reference import Cluster, RefJob, build
from kit.run.command import SCRIPTS

LAUNCHER = SCRIPTS / "reference" / "launch.py"
STANDIN = Path(__file__).resolve().parent / "standin"
CONVNETS = "DeepLearningExamples/PyTorch/Classification/ConvNets"
# a program as DLE's main.py behaves where it runs: imports a module of its folder, reads a file relative to its cwd,
# writes its raport (collected), its checkpoint and a folder of its own (PaddleClas's output/), then waits or ends
PROGRAM = """\
import os, sys, time
import helper
print("cwd", os.getcwd(), "helper", helper.__file__, "config", open("configs/a.yaml").read().strip(), flush=True)
open("benchmark.json", "w").write('{"fresh": 1}')
open("checkpoint.pth.tar", "wb").write(b"\\0" * 1000)
os.makedirs("output/ResNet50", exist_ok=True)
open("output/ResNet50/0.pdparams", "wb").write(b"\\0" * 24)
print("saved", flush=True)
if sys.argv[1] == "wait":
    time.sleep(60)
sys.exit(int(sys.argv[1]) if sys.argv[1] != "wait" else 0)
"""


def checkout(tmp_path: Path) -> Path:
    """A checkout folder with an earlier run's leftovers in it (a stale checkpoint and raport)."""
    code = tmp_path / "models" / "Program"
    (code / "configs").mkdir(parents=True)
    (code / "main.py").write_text(PROGRAM)
    (code / "helper.py").write_text("")
    (code / "configs" / "a.yaml").write_text("pinned\n")
    (code / "checkpoint.pth.tar").write_bytes(b"old")
    (code / "benchmark.json").write_text("stale")
    return code


def launch(tmp_path: Path, code: Path, ending: str) -> tuple[subprocess.Popen, Path]:
    run = tmp_path / "run"  # the launcher's working directory: the run's folder
    run.mkdir(exist_ok=True)
    record = run / "logs" / "x_b1_fp32_1.cmd.json"
    argv = [sys.executable, "main.py", ending]
    line = [sys.executable, str(LAUNCHER), "--record", str(record), "--meta", json.dumps({"argv": argv}),
            "--cwd", str(code), "--scratch", "--unlinked", "checkpoint.pth.tar", "--unlinked", "output",
            "--collect", "benchmark.json", "--", *argv]
    return subprocess.Popen(line, cwd=run, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), record


def assert_cleared(code: Path, record: Path, exit_code: int) -> dict:
    meta = json.loads(record.read_text())
    scratch = meta["scratch"]
    assert meta["exit_code"] == exit_code and meta["ran_in"] == scratch["path"]
    assert not Path(scratch["path"]).exists() and not Path(scratch["path"]).is_relative_to(record.parents[1])
    # what it saved is gone with the folder; its raport was collected first
    assert scratch["removed"] == [{"path": "checkpoint.pth.tar", "bytes": 1000},
                                  {"path": "output/ResNet50/0.pdparams", "bytes": 24}] and scratch["bytes"] == 1024
    assert meta["outputs"] == ["benchmark.json"]
    assert (record.parent / "outputs" / "benchmark.json").read_text() == '{"fresh": 1}'
    # the checkout is as it was: nothing written through a link (the leftovers are never linked)
    assert (code / "checkpoint.pth.tar").read_bytes() == b"old" and (code / "benchmark.json").read_text() == "stale"
    # (but Python's cache of the module it imported from there, as any import writes it: not code, code_state.py)
    assert sorted(p.name for p in code.iterdir() if p.name != "__pycache__") == [
        "benchmark.json", "checkpoint.pth.tar", "configs", "helper.py", "main.py"]
    return meta


@pytest.mark.parametrize("exit_code", [0, 3])
def test_the_program_runs_in_a_scratch_mirror_removed_after_it_ends(tmp_path, exit_code):
    code = checkout(tmp_path)
    proc, record = launch(tmp_path, code, str(exit_code))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == exit_code, err
    meta = assert_cleared(code, record, exit_code)
    # it ran in the scratch folder, imported its module from the checkout (Python resolves the script's link for
    # sys.path[0]) and read its config through a link
    assert out.splitlines()[0] == f"cwd {meta['scratch']['path']} helper {code / 'helper.py'} config pinned"


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_program_leaves_no_scratch_behind(tmp_path, stop):
    code = checkout(tmp_path)
    proc, record = launch(tmp_path, code, "wait")
    assert proc.stdout.readline().startswith("cwd ") and proc.stdout.readline() == "saved\n"
    proc.send_signal(stop)  # to the launcher, which passes it on, waits for the program and then clears up
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + stop, err
    assert_cleared(code, record, 128 + stop)


def test_a_scratch_folder_inside_the_run_is_refused(tmp_path, monkeypatch):
    code = checkout(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "run" / "tmp"))
    (tmp_path / "run" / "tmp").mkdir(parents=True)
    proc, record = launch(tmp_path, code, "0")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and not record.exists()
    assert err.startswith(f"launch.py: the scratch folder {tmp_path / 'run' / 'tmp'}/kit-scratch-")
    assert err.rstrip().endswith(f"lies inside the run's folder {tmp_path / 'run'} (TMPDIR): set TMPDIR outside it")
    assert list((tmp_path / "run" / "tmp").iterdir()) == []


def test_which_programs_run_in_scratch():
    """Every program launch.py starts, but PLSC (its patched work copy) and one mpirun over several hosts (their
    ranks start in rank 0's working directory); DLE PyTorch's and PaddleClas's saves are never linked there."""
    two = Cluster(0, ("10.0.0.1", "10.0.0.2"))
    assert build(RefJob("torch", "resnet50", "amp", 256, 8, 2), two).scratch
    assert build(RefJob("torch", "resnet50", "amp", 256, 1, 1)).scratch
    assert build(RefJob("paddle", "resnet50", "amp", 256, 8, 2), two).scratch
    assert build(RefJob("paddle", "vgg16", "fp32", 32, 8, 2), two).scratch
    assert build(RefJob("mxnet", "resnet50", "amp", 256, 8, 1)).scratch
    assert build(RefJob("tensorflow", "resnet50", "amp", 256, 8, 1)).scratch
    assert not build(RefJob("tensorflow", "resnet50", "amp", 256, 8, 2), two).scratch
    assert not build(RefJob("paddle", "arcface", "fp32", 128, 8, 1)).scratch
    assert build(RefJob("torch", "resnet50", "amp", 256, 1, 1)).impl.saves == ("checkpoint.pth.tar",
                                                                               "model_best.pth.tar")
    assert build(RefJob("paddle", "resnet50", "amp", 256, 1, 1)).impl.saves == ("output",)


# ---- kit bench: the DLE PyTorch stand-in fails, or is stopped by its case's timeout --------------------------------

SUITE = """\
schema_version: 1
name: scratch
hardware: cpu
defaults: {{batch_size: 2, precision: amp, data: synthetic, repeats: 1, timeout_s: {timeout}}}
cases:
  - {{framework: torch, model: resnet50, impl: reference}}
"""


@pytest.mark.parametrize(("ending", "timeout"), [("fail", 60), ("wait", 3)])
def test_kit_bench_leaves_no_scratch_when_the_program_fails_or_is_stopped(tmp_path, published, monkeypatch, ending,
                                                                          timeout):
    root = tmp_path / "models"
    code = root / CONVNETS
    code.mkdir(parents=True)
    (code / "main.py").write_bytes((STANDIN / "dle_pytorch" / "main.py").read_bytes())
    (code / "replay.log").write_bytes((published / "perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt").read_bytes())
    (code / "after_checkpoint").write_text(ending)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # this test's scratch folders only
    monkeypatch.setenv("KIT_MODEL_CODE", str(root))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    (tmp_path / "suite.yaml").write_text(SUITE.format(timeout=timeout))
    runs = tmp_path / "runs"
    t0 = time.monotonic()
    main(["bench", "--suite", str(tmp_path / "suite.yaml"), "--runs-dir", str(runs), "--force"])
    assert time.monotonic() - t0 < 50
    (run_dir,) = runs.iterdir()
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] != "ok", entry
    (sidecar,) = run_dir.glob("logs/**/*.cmd.json")
    scratch = json.loads(sidecar.read_text())["scratch"]
    assert Path(scratch["path"]).parent == tmp_path / "tmp" and list((tmp_path / "tmp").iterdir()) == []
    assert scratch["removed"] == [{"path": "checkpoint.pth.tar", "bytes": 65536}]
    assert [p for p in (*run_dir.rglob("*"), *root.rglob("*")) if p.name.endswith(".pth.tar")] == []


def test_the_report_line_counts_every_hosts_scratch_once_and_names_one_left_behind(tmp_path):
    from kit.results.sections import program_scratch_section

    def record(path: Path, scratch: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"impl": "ngc-pytorch", "scratch": scratch}))

    done = {"path": "/tmp/kit-scratch-a", "removed": [{"path": "checkpoint.pth.tar", "bytes": 3 * 2**20}],
            "bytes": 3 * 2**20}
    run = "ngc-pytorch/resnet50/bz256/2n1g"
    record(tmp_path / "logs" / run / "resnet50_b256_fp32_1.cmd.json", done)  # rank 0's, beside the log
    record(tmp_path / "hosts" / "h1" / run / "fp32/1/resnet50_b256_fp32_1.cmd.json", done)
    record(tmp_path / "hosts" / "h2" / run / "fp32/1/resnet50_b256_fp32_1.cmd.json",
           {"path": "/tmp/kit-scratch-b", "removed": None})  # its launcher was killed (SIGKILL) before clearing up
    assert program_scratch_section(tmp_path).splitlines()[1:] == [
        "What the published programs saved where they ran (checkpoints) went to a scratch folder outside the run "
        "directory, removed after each run: 1 file(s), 3145728 bytes (3.0 MiB) in 1 run(s); a bundle never holds them.",
        "Scratch folder(s) not removed (see their command records): /tmp/kit-scratch-b."]
    assert program_scratch_section(tmp_path / "none") == ""
