"""What the third GPU visit recorded (tests/fixtures/gpu-runs/h200-20261204/, README.md there): one NVIDIA H200,
`bash bench/gpu_proof.sh`, then stage 1 twice more. Each stage-1 table is recomputed here from the windows and the
telemetry its pack holds, the suite's bundle is verified again, and the hardware yardsticks are read back, so the
figures the closing note quotes come from these files."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from kit.audit.verify import verify

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
import gpu_stages as gs  # noqa: E402
import loader_interleave  # noqa: E402

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261204"
LOADER_RUNS = ("proof", "loader", "loader-mps")


def unpacked(run: str, tmp_path: Path) -> Path:
    """The run's returned pack, unpacked under TMP_PATH: its gpu-proof/ folder."""
    with tarfile.open(VISIT / run / "gpu-proof.tar.gz") as pack:
        pack.extractall(tmp_path / run, filter="data")
    return tmp_path / run / "gpu-proof"


def windows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "1-loader" / "windows.jsonl").read_text().splitlines() if line]


def losses(folder: Path) -> list[float]:
    events = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in
              (folder / "1-loader" / "harness.log").read_text().splitlines() if ":::KITLOG " in line]
    return [e["loss"] for e in events if e["event"] == "step"]


@pytest.mark.parametrize("run", LOADER_RUNS)
def test_stage_one_rows_are_recomputed_from_the_packs_windows_and_telemetry(run, tmp_path):
    folder = unpacked(run, tmp_path)
    recorded = [r for r in json.loads((VISIT / run / "results.json").read_text())["rows"] if r["stage"] == "1 loader"]
    rows = gs.interleave_rows("1 loader", windows(folder), decoders=["torchvision", "nvimgcodec"],
                              telemetry=folder / "1-loader" / "gpu.telemetry")
    assert [(r.what, r.figure, r.verdict, r.detail) for r in rows] == [
        (r["what"], r["figure"], r["verdict"], r["detail"]) for r in recorded]


def test_the_first_run_diverged_at_the_harness_lr_and_the_later_ones_at_the_stable_lr_did_not(tmp_path):
    """lr 0.1 (the harness's for bs256): the first real window after the learnt synthetic batch climbs from 7.8 to
    66, then every window is NaN, both decoders failed. At loader_interleave.STABLE_LR every step's loss is finite
    and both decoders give their ratios (at most 20.4: the step from the learnt batch to a real one)."""
    first = unpacked("proof", tmp_path)
    failed = [w for w in windows(first) if w["kind"] == "failed"]
    assert [w["decoder"] for w in failed] == ["torchvision", "nvimgcodec"]
    assert all("loss is nan" in w["why"] and "lr 0.1," in w["why"] for w in failed)
    diverging = losses(first)
    assert diverging[0] < 8 and max(diverging) > 60
    assert loader_interleave.STABLE_LR < 0.1 / 50
    for run in LOADER_RUNS[1:]:
        later = unpacked(run, tmp_path)
        assert not [w for w in windows(later) if w["kind"] == "failed"]
        steps = losses(later)
        assert len(steps) >= 200 and all(math.isfinite(v) and v < 25 for v in steps)


def test_the_decode_process_time_slices_the_gpu_with_the_trainer_unless_mps_shares_it():
    """Without MPS the trainer and its decode process are two CUDA contexts the GPU runs in turn: real / synthetic
    0.675 and 0.636 while the loader alone gives 2.07x and 1.80x synthetic training; with the MPS daemon running
    (mps-control.log: the processes its clients) 0.867 and 0.798 -- the loss is the sharing, not the loader."""
    def ratios(run: str) -> dict[str, float]:
        rows = json.loads((VISIT / run / "results.json").read_text())["rows"]
        return {r["what"].split(": ", 1)[1]: float(r["figure"]) for r in rows if r["stage"] == "1 loader"}

    alone, shared = ratios("loader"), ratios("loader-mps")
    for decoder in ("torchvision", "nvimgcodec"):
        real = f"real JPEGs ({decoder}) / synthetic, windows of one process"
        loader = f"the loader alone ({decoder}) / synthetic training"
        assert alone[real] < 0.7 and alone[loader] > 1.5
        assert shared[real] > alone[real] + 0.1
    log = (VISIT / "loader-mps" / "mps-control.log").read_text()
    assert "NEW SERVER" in log and log.count("NEW CLIENT") >= 4


def test_the_suites_bundle_verifies_with_this_kit(tmp_path):
    folder = unpacked("proof", tmp_path)
    (bundle,) = (folder / "2-suite").glob("*.bundle.tar.gz")
    verdict = verify(bundle)
    assert verdict.ok, [(v.rule, v.where) for v in verdict.violations]
    recorded = {r["what"]: r for r in json.loads((VISIT / "proof" / "results.json").read_text())["rows"]}
    assert recorded["kit bundle + kit verify"]["figure"] == "consistent"
    assert recorded["resnet50 amp-nhwc: harness images/s"]["figure"] == "5650.8"


def test_the_hardware_yardsticks_of_the_h200_read_back_with_the_cpu_runs_shape(tmp_path):
    """scripts/yardstick/hardware.py on the H200 and on this CPU: the same fields; the H200's GEMM per math mode,
    HBM copy and host link as recorded (medians of 5 windows)."""
    h200 = json.loads((VISIT / "proof" / "hardware.json").read_text())
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "yardstick" / "hardware.py"), "--device", "cpu",
                          "--repeats", "2", "--gemm-n", "256", "--copy-mib", "16", "--window-s", "0.02", "--json"],
                         capture_output=True, text=True, check=True, timeout=120)
    cpu = json.loads(out.stdout)
    # the host a run names came later (kit yardstick keeps runs per host): the recording predates it
    assert set(cpu) - {"host"} <= set(h200) and {m["measure"] for m in cpu["measures"]} == {"gemm", "memory"}
    fields = {m["measure"]: set(m) for m in h200["measures"]}
    assert all(set(m) == fields[m["measure"]] for m in cpu["measures"])
    for row in cpu["measures"]:
        assert len(row["windows"]) == 2 and row["median"] > 0
    assert (h200["gpu"], h200["capability"], h200["sm_count"]) == ("NVIDIA H200", "9.0", 132)
    medians = {(m["measure"], m["mode"]): m["median"] for m in h200["measures"]}
    assert medians == {("gemm", "fp32"): 50.988, ("gemm", "tf32"): 354.749, ("gemm", "bf16"): 680.189,
                       ("gemm", "fp16"): 655.522, ("memory", "copy"): 4215.24, ("host", "h2d"): 55.299,
                       ("host", "d2h"): 55.321}
    for row in h200["measures"]:
        assert len(row["windows"]) == 5 and sorted(row["windows"])[2] == row["median"]
