"""The real PaddleClas at its pin (ppcls/static/train.py from ../shared/programs, unpacked by bench/prepare_models.py
and judged at the pin by its files) trained by `kit bench` on this CPU beside the harness's Paddle ResNet50 at the
same setting (issue 58): the kit's CPU recipe (launcher-side -o overrides only), the publisher's reduction of its log,
its checkpoint kept out of the run, the report's harness ÷ program row, and a bundle that verifies. No stand-in."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED

from kit.cli.main import main
from kit.images.spec import pin_of
from kit.run.command import SCRIPTS

PIN = pin_of("paddleclas")
SUITE = """\
schema_version: 1
name: paddleclas-cpu
hardware: cpu
defaults: {batch_size: 4, precision: fp32, data: imagenet, image_size: 64, repeats: 1, timeout_s: 900}
cases:
  - {framework: paddle, model: resnet50, impl: harness, mode: compiled, layout: nchw, warmup_steps: 10, measure_steps: 10}
  - {framework: paddle, model: resnet50, impl: reference}
"""
IPS = re.compile(r"ppcls INFO: epoch:0\s+train step:(\d+)\s.*ips: ([0-9.]+) samples/sec")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One kit bench of the suite, native: (run directory, model-code root)."""
    tmp = tmp_path_factory.mktemp("paddleclas")
    archive = next((SHARED / "programs").glob("PaddleClas-*.tar.gz"))
    subprocess.run([sys.executable, str(REPO / "bench" / "prepare_models.py"), "--dest", str(tmp / "models"),
                    "--from", f"paddleclas={archive}", "paddle/resnet50"], check=True, capture_output=True,
                   timeout=300)
    (tmp / "bin").mkdir()
    (tmp / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')  # the publisher's bare `python`
    (tmp / "bin" / "python").chmod(0o755)  # (a link would lose the venv: Python finds pyvenv.cfg beside the link)
    (tmp / "suite.yaml").write_text(SUITE)
    env = {"KIT_MODEL_CODE": str(tmp / "models"), "PATH": f"{tmp / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("KIT_DATA_DIR", raising=False)
        assert main(["bench", "--suite", str(tmp / "suite.yaml"), "--runs-dir", str(tmp / "runs")]) == 0
    (run_dir,) = (tmp / "runs").iterdir()
    return run_dir, tmp / "models"


def test_the_real_paddleclas_trains_here_at_its_pin_by_the_kits_cpu_recipe(bench_run):
    run_dir, models = bench_run
    meta = json.loads((run_dir / "run.json").read_text())
    entries = {Path(k).parts[1]: v for k, v in meta["runs"].items()}
    assert entries["paddle"]["status"] == entries["paddleclas"]["status"] == "ok", entries
    assert "model_code_forced" not in meta  # an unpacked archive whose files are the pin's: no --force
    (log,) = run_dir.glob("logs/paddleclas/resnet50/bz4/1n1g/*.log")
    text = log.read_text()
    assert "stand-in" not in text
    steps = [(int(s), float(v)) for s, v in IPS.findall(text)]
    assert [s for s, _ in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 16, text[-3000:]
    sidecar = json.loads(log.with_suffix(".cmd.json").read_text())
    state = sidecar["model_code_state"]
    assert sidecar["model_code_commit"] == PIN and state["files_of"] == PIN and state["clean"]
    # the CPU recipe: the published overrides, then the CPU's; nothing in the program's files changed
    argv = sidecar["argv"]
    assert argv[:4] == ["python", "ppcls/static/train.py", "-c", "ppcls/configs/ImageNet/ResNet/ResNet50.yaml"]
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    assert overrides[-4:] == ["Global.device=cpu", "print_interval=1", "Global.image_shape=[3,64,64]",
                              "DataLoader.Train.dataset.transform_ops.1.RandCropImage.size=64"]
    data = run_dir.resolve() / "data" / "paddle"
    assert f"DataLoader.Train.dataset.cls_label_path={data}/train_list.txt" in overrides
    assert sidecar["env"]["FLAGS_enable_pir_api"] == "0" and sidecar["device"] == "cpu"
    placeholder = SCRIPTS / "reference" / "placeholders" / "visualdl"
    assert [(p["module"], p["placeholder"]) for p in sidecar["placeholders"]] == [("visualdl", str(placeholder))]
    # its checkpoint (every epoch, ~200 MB) went to the scratch folder and was removed: not in the run, not the code
    removed = sidecar["scratch"]["removed"]
    assert any(f["path"].startswith("output/ResNet50/0/") for f in removed) and sidecar["scratch"]["bytes"] > 10**8
    assert not Path(sidecar["scratch"]["path"]).exists() and not (models / "PaddleClas" / "output").exists()
    assert not [p for p in run_dir.rglob("*.pdparams")]
    # the publisher's reduction (per-card ips after 10 printed steps, mean), recomputed here from the log
    figure = statistics.mean(v for _, v in steps[10:])
    assert entries["paddleclas"]["figure"] == pytest.approx(figure, rel=1e-6)


def test_the_report_sets_the_harness_beside_paddleclas_and_the_bundle_verifies(bench_run, tmp_path):
    from kit.audit import bundle as bd
    from kit.audit.rules.program_clock import EXACT_RECORD_BAND, paddleclas_timed, shares
    from kit.audit.verify import verify
    from kit.results.parsers import PER_CARD, parse_log

    run_dir, _ = bench_run
    meta = json.loads((run_dir / "run.json").read_text())
    figures = {Path(k).parts[1]: v["figure"] for k, v in meta["runs"].items()}
    report = (run_dir / "report.md").read_text()
    (row,) = [line for line in report.splitlines() if "| paddleclas/resnet50/bz4/1n1g/fp32 |" in line
              and line.startswith("| paddle resnet50")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == f"{figures['paddle']:.2f}" and cells[4] == f"{figures['paddleclas']:.2f}"
    assert cells[5] == f"{figures['paddle'] / figures['paddleclas']:.3f}"
    assert "static" in cells[0] and "compiled" in cells[0], row
    result = verify(bd.make_bundle(run_dir, tmp_path / "run.tar.gz", submitter="Lab", system_name="box"))
    assert [v for v in result.violations if v.rule.startswith("program_")] == [], result.violations
    # rule set v10 holds its records to their stamps (to the second; a record every step, about 0.6 s, so some
    # share a second): each over the span since its epoch's first record from the meter's reset, a second allowed
    # at each end (kit/audit/rules/program_clock.py). Measured on this run here: 26 records, 1.0000-1.0000.
    (clock,) = [f for f in result.findings if f.rule.name == "program_figure_agrees_with_its_clock"]
    assert clock.checked == 1 and clock.violations == [], clock
    (log,) = run_dir.glob("logs/paddleclas/resnet50/bz4/1n1g/*.log")
    held = shares(paddleclas_timed(parse_log(log).records, "ips", PER_CARD, 4))
    assert len(held) >= 10 and EXACT_RECORD_BAND[0] < min(held) and max(held) < EXACT_RECORD_BAND[1], held


def test_the_real_paddleclas_trains_in_the_cpu_image_from_this_machines_copy(docker_engine, cpu_image, tmp_path,
                                                                              monkeypatch):
    """kit bench --runtime docker: the pinned cpu image (PaddleClas's imports pinned in it) runs the program from
    this machine's copy mounted over the image's /opt/models, judged at the pin by its files inside the container
    (no git there), its data mounted with the run."""
    from test_images import run_containers

    archive = next((SHARED / "programs").glob("PaddleClas-*.tar.gz"))
    subprocess.run([sys.executable, str(REPO / "bench" / "prepare_models.py"), "--dest", str(tmp_path / "models"),
                    "--from", f"paddleclas={archive}", "paddle/resnet50"], check=True, capture_output=True,
                   timeout=300)
    (tmp_path / "suite.yaml").write_text(SUITE.replace("  - {framework: paddle, model: resnet50, impl: harness, "
                                                       "mode: compiled, layout: nchw, warmup_steps: 10, "
                                                       "measure_steps: 10}\n", ""))
    monkeypatch.setenv("KIT_MODEL_CODE", str(tmp_path / "models"))
    monkeypatch.delenv("KIT_DATA_DIR", raising=False)
    assert main(["bench", "--suite", str(tmp_path / "suite.yaml"), "--runs-dir", str(tmp_path / "runs"),
                 "--runtime", "docker"]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["status"] == "ok" and entry["figure"] > 0 and "model_code_forced" not in meta
    (log,) = run_dir.glob("logs/paddleclas/resnet50/bz4/1n1g/*.log")
    assert log.read_text().startswith("# kit bench: docker run") and cpu_image.ref in log.read_text().splitlines()[0]
    assert len(IPS.findall(log.read_text())) >= 16
    sidecar = json.loads(log.with_suffix(".cmd.json").read_text())
    assert sidecar["code_root"] == "/opt/models" and sidecar["cwd"] == "/opt/models/PaddleClas"
    assert sidecar["model_code_commit"] == PIN and sidecar["model_code_state"]["files_of"] == PIN
    assert [(p["module"], p["placeholder"]) for p in sidecar["placeholders"]] == [
        ("visualdl", "/opt/kit/scripts/reference/placeholders/visualdl")]
    assert not (tmp_path / "models" / "PaddleClas" / "output").exists()
    assert run_containers(docker_engine, run_dir.name) == []
