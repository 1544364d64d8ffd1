"""bench/gpu_proof.sh dry-run on this CPU: all three stages end to end, as a new user would start it on a GPU
machine, with the two replayed boundaries: a STAND-IN nvidia-smi replaying the outputs recorded on one H100
(tests/standin/nvidia-smi) and the DLE stand-in (tests/standin/dle_pytorch) in the model-code tree. Everything else
is real: kit check-env, kit bench of a small suite (the harness trains ResNet50 on this CPU), bundle, verify, the
JPEG tree, the gpu loader's CPU twin, kit bench of the harness beside the DLE stand-in."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, SHARED
from test_reference_native import model_code

sys.path.insert(0, str(REPO / "bench"))
import gpu_stages  # noqa: E402

STANDIN_SMI = REPO / "tests" / "standin" / "nvidia-smi"
SUITE = """\
schema_version: 1
name: gpu-proof-cpu
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 3, data: synthetic, timeout_s: 120}
cases:
  - {framework: torch, model: resnet50, precision: amp, layout: nhwc, batch_size: 2, image_size: 64}
"""
PROGRAM_SUITE = """\
schema_version: 1
name: gpu-proof-dle-cpu
hardware: cpu
defaults: {batch_size: 2, precision: amp, data: synthetic, repeats: 2, timeout_s: 120}
cases:
  - {framework: torch, model: resnet50, impl: harness, layout: nhwc, warmup_steps: 1, measure_steps: 2}
  - {framework: torch, model: resnet50, impl: reference}
"""


def proof(tmp_path: Path, published: Path, *args: str, timeout: float = 600,
          prepare=None) -> tuple[subprocess.CompletedProcess, Path]:
    root = model_code(tmp_path, published)
    (tmp_path / "bin").mkdir(exist_ok=True)
    if not (tmp_path / "bin" / "python").exists():  # DLE's recipe starts a bare `python`
        (tmp_path / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "program.yaml").write_text(PROGRAM_SUITE)
    if prepare:
        prepare()
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "GPU_PROOF_FORCE": "1",
           "STANDIN_SMI_DIR": str(SHARED / "fixtures" / "nvidia-smi"),
           "PATH": os.pathsep.join([str(STANDIN_SMI), str(tmp_path / "bin"), os.environ["PATH"]])}
    argv = ["bash", str(REPO / "bench" / "gpu_proof.sh"), "--device", "cpu", "--suite", str(tmp_path / "suite.yaml"),
            "--program-suite", str(tmp_path / "program.yaml"), "--model-code", str(root),
            "--runs-dir", str(tmp_path / "runs"), "--jpeg-dir", str(tmp_path / "jpegs"), "--images", "64",
            "--loader-batch", "4", "--loader-image-size", "64", "--loader-steps", "1,3", "--loader-repeats", "2",
            *args]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    return done, out


def summary_rows(out: Path) -> list[list[str]]:
    lines = [x for x in (out / "summary.md").read_text().splitlines() if x.startswith("| ") and "---" not in x]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def test_the_dry_run_goes_through_all_three_stages_and_keeps_each_stages_results(tmp_path, published):
    began = time.monotonic()
    done, out = proof(tmp_path, published, "--budget-s", "420")
    took = time.monotonic() - began
    print(f"gpu_proof.sh dry run: {took:.0f} s")
    text = done.stdout + done.stderr
    rows = {(r[0], r[1]): r for r in summary_rows(out)}
    assert [k[0] for k in rows] == ["1 suite", "1 suite", "1 suite", "1 suite", "2 loader", "3 program"], text[-4000:]
    assert rows[("1 suite", "GPU telemetry of every run (scripts/telemetry/gpu_sampler.py)")][4] == "no target"

    # stage 1: the suite ran, bundled and verified; this CPU venv has no torchvision, and says so; the stand-in
    # nvidia-smi names an H100, so the H100 figure target applies to a CPU's figure: missed (or, on a busy machine,
    # too noisy to tell), with the figure
    assert rows[("1 suite", "kit bundle + kit verify")][4] == "met"
    stick = rows[("1 suite", "resnet50 bs2 amp-nhwc: harness / torchvision")]
    assert stick[4] == "failed" and "torchvision is not importable" in stick[5]
    figure = rows[("1 suite", "resnet50 amp-nhwc: harness images/s")]
    assert figure[3] == ">= 4500" and figure[4] in ("missed", "inconclusive") and "NVIDIA H100 80GB HBM3; runs 3" in figure[5]
    suite_out = out / "1-suite"
    results = json.loads((suite_out / "results.json").read_text())
    (group,) = results["groups"]
    assert [r["value"] for r in group["cases"][0]["runs"]] and len(group["cases"][0]["runs"]) == 3
    assert float(figure[2]) == pytest.approx(group["cases"][0]["median"], abs=0.05)
    assert (suite_out / "report.md").is_file() and (suite_out / "run" / "run.json").is_file()
    assert list(suite_out.glob("*.bundle.tar.gz")) and "CONSISTENT" in (suite_out / "verify.txt").read_text()
    assert (suite_out / "verdict.txt").read_text().startswith("1 suite: FAILED")
    assert "error" in json.loads((suite_out / "yardstick.json").read_text())[0]

    # stage 2: real JPEGs through the gpu loader's CPU twin against synthetic, interleaved, each run's log kept
    loader = rows[("2 loader", "resnet50 bs4 amp-nhwc: real JPEGs (gpu loader) / synthetic")]
    assert loader[3] == ">= 0.9" and loader[4] in ("met", "missed", "inconclusive") and float(loader[2]) > 0
    assert "loader alone" in loader[5] and "runs 2 / 2" in loader[5]
    if loader[4] != "met":  # where the loader's time went, measured at once (bench/loader_profile.py), or why not
        assert ("profile: loader" in loader[5] and "workers alone" in loader[5]
                or re.search(r"no loader profile: \d+ s of the stage left", loader[5])), loader[5]
        phases = [p["phase"] for p in json.loads((out / "2-loader" / "loader-profile.json").read_text())]
        assert phases == ["loader", "workers", "host_decode"]
    logs = sorted(p.name for p in (out / "2-loader" / "logs").iterdir())
    assert logs == ["gpu-loader_1.log", "gpu-loader_2.log", "synthetic_1.log", "synthetic_2.log"]
    figures = json.loads((out / "2-loader" / "figures.json").read_text())
    assert [r["decoder"] for r in figures["runs"]["gpu loader"]] == ["pillow", "pillow"]  # the CPU twin's

    # stage 3: the harness beside the DLE stand-in (its replayed 790 images/s): a ratio, two runs a side
    program = rows[("3 program", "resnet50 bs2 amp-nhwc: harness / DLE")]
    assert program[4] in ("missed", "inconclusive") and "runs 2 / 2" in program[5]
    assert gpu_stages.PROGRAM_SECTION in (out / "3-program" / "report.md").read_text()

    # the record: raw nvidia-smi outputs, the console, one verdict line per stage, the exit status
    fixture = SHARED / "fixtures" / "nvidia-smi" / "q-x_1xH100-80GB-HBM3_driver580.xml"
    assert (out / "nvidia-smi" / "q-x.xml").read_bytes() == fixture.read_bytes()
    assert "===== stage 3: program" in (out / "console.log").read_text()
    assert all((out / d / "verdict.txt").is_file() for d in ("1-suite", "2-loader", "3-program"))
    assert done.returncode == 1, text[-3000:]  # a target missed


def test_a_stage_the_budget_cannot_hold_is_skipped_with_a_message(tmp_path, published):
    done, out = proof(tmp_path, published, "--stages", "2,3", "--budget-s", "50", timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "stage 2 (loader) skipped: " in done.stdout and "it needs about 60 s" in done.stdout
    assert [(r[0], r[4]) for r in summary_rows(out)] == [("2 loader", "skipped"), ("3 program", "skipped")]


def test_a_harness_case_of_other_settings_than_the_programs_is_no_ratio(tmp_path, published):
    """The program stage takes the kit's own pairing: a harness case at another image size is other work."""
    done, out = proof(tmp_path, published, "--stages", "3", "--program-suite", str(tmp_path / "other.yaml"),
                      prepare=lambda: (tmp_path / "other.yaml").write_text(
                          PROGRAM_SUITE.replace("measure_steps: 2}", "measure_steps: 2, image_size: 64}")))
    (row,) = summary_rows(out)
    assert done.returncode == 1 and row[4] == "failed", done.stdout[-3000:]
    assert "the report pairs no harness case with the program at the same setting" in row[5]


def test_bad_stages_are_refused(tmp_path, published):
    done, _ = proof(tmp_path, published, "--stages", "1,4", timeout=60)
    assert done.returncode == 2 and "--stages: pick from 1, 2, 3, got 1,4" in done.stdout  # the console, via tee


def test_a_command_past_its_timeout_is_stopped_with_its_whole_process_group():
    began = time.monotonic()
    done = gpu_stages.run(["sh", "-c", "sleep 300 & sleep 300; echo never"], 1, capture=True)
    assert done.returncode is None and "never" not in done.stdout and time.monotonic() - began < 30
    assert done.why() == f"timed out after {done.seconds:.0f} s"
    assert subprocess.run(["pgrep", "-f", "sleep 300"], capture_output=True).returncode == 1  # none left
