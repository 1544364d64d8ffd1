"""What the first GPU visit recorded (tests/fixtures/gpu-runs/h200-20261128/, README.md there): one NVIDIA H200,
driver 580.159.04, PyTorch 2.11.0+cu130, `bash bench/gpu_proof.sh` and a second, shorter visit. The recorded run
directories are reported and verified again here, and the gates bench/gpu_proof.sh applies are recomputed from the
harness's logs and the yardstick's JSON, so the figures the closing note quotes come from these files."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import SHARED
from kitlogs import without_the_nan_repeat

from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.cli import main
from kit.hosts.capture.model import capture_from_dir
from kit.hosts.capture.smi import parse_query_xml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import gpu_stages as gs  # noqa: E402

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
ONE_GPU = "torch/resnet50/bz256/1n1g"


def kitlog_figures(folder: Path, pattern: str) -> list[float]:
    """run_stop figures of the harness logs in FOLDER matching PATTERN, in repeat order."""
    out = []
    for log in sorted(folder.glob(pattern)):
        events = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in log.read_text().splitlines()
                  if ":::KITLOG " in line]
        out += [e["samples_per_sec"] for e in events if e["event"] == "run_stop" and e["status"] == "success"]
    return out


def test_the_machine_is_what_the_kits_capture_says():
    capture = capture_from_dir("vm", VISIT / "dle" / "env" / "vm")
    gpu = capture.smi.gpus[0]
    assert (gpu.product_name, capture.smi.driver_version, capture.smi.cuda_version) == (
        "NVIDIA H200", "580.159.04", "13.0")
    raw = parse_query_xml((VISIT / "nvidia-smi" / "q-x.xml").read_text())
    assert [g.product_name for g in raw.gpus] == ["NVIDIA H200"]


@pytest.mark.parametrize("model,batch,tag,ratio,verdict", [
    ("resnet50", 256, "tf32", "1.000", "met"),
    ("resnet50", 256, "amp-nhwc", "0.973", "inconclusive"),
    ("vgg16", 128, "amp-nhwc", "0.982", "inconclusive"),
])
def test_stage_one_harness_against_the_torchvision_yardstick(model, batch, tag, ratio, verdict):
    """Three interleaved harness runs per setting against the yardstick's three windows (its JSON), by the kit's
    noise rule: met only when the whole 95% interval of the ratio lies at or above 0.97."""
    sticks = {(s["model"], s["tag"]): s for s in json.loads((VISIT / "proof-1" / "yardstick.json").read_text())}
    stick = sticks[(model, tag)]
    assert stick["device_name"] == "NVIDIA H200" and stick["torch"] == "2.11.0+cu130"
    mine = kitlog_figures(VISIT / "suite-interrupted" / "logs" / "torch" / model / f"bz{batch}" / "1n1g",
                          f"*_{tag}_*.log")
    assert len(mine) == 3
    row = gs.ratio_row("1 suite", tag, stick["repeats"], mine, gs.RATIO_TARGET, ("yardstick", "harness"))
    assert (row.figure, row.verdict) == (ratio, verdict)


def test_stage_one_resnet50_amp_nhwc_meets_the_h200_figure_target():
    mine = kitlog_figures(VISIT / "suite-interrupted" / "logs" / ONE_GPU, "*_amp-nhwc_*.log")
    row = gs.figure_row("1 suite", "resnet50 amp-nhwc", mine, "NVIDIA H200")
    assert (row.figure, row.target, row.verdict) == ("5642.4", ">= 4950", "met")


def test_the_interrupted_suite_run_is_not_bundled(tmp_path, capsys):
    """Stage 1's kit bench hit its timeout as the ninth run ended (its log is whole, run.json never listed it, no
    report was written): kit bundle refuses the unfinished run and says how to finish it (it used to bundle it and
    fail its own verify); the stage's budget was raised since (bench/gpu_proof.py STAGES)."""
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "suite-interrupted", run_dir)
    assert kitlog_figures(run_dir / "logs" / "torch" / "vgg16" / "bz128" / "1n1g", "*_3.log") == [3322.257]
    assert "vgg16_b128_amp-nhwc_3" not in (run_dir / "run.json").read_text()
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 2
    assert "an unfinished run (no results.json" in capsys.readouterr().err
    assert not (tmp_path / "b.tgz").exists()


def test_dle_ran_beside_the_harness_through_the_dali_placeholder_and_the_run_verifies_under_v3(tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    sidecar = json.loads((run_dir / "logs" / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g" /
                          "resnet50_b256_amp_1.cmd.json").read_text())
    [placed] = sidecar["placeholders"]
    assert placed["module"] == "nvidia.dali" and "No module named 'nvidia.dali'" in placed["why"]
    results = json.loads((run_dir / "results.json").read_text())
    figures = {(g["framework"], g["precision"]): [round(r["value"], 2) for r in g["cases"][0]["runs"]]
               for g in results["groups"]}  # as the visit's kit wrote them
    assert figures == {("ngc-pytorch", "amp"): [5830.96, 5799.24], ("torch", "amp-nhwc"): [5740.57, 5757.58]}
    assert "| 5749.08 | ngc-pytorch/resnet50/bz256/1n1g/amp | 5815.10 | 0.989 |" in (run_dir / "report.md").read_text()
    # bundled as the visit left it: its derived files are an earlier kit's, written again in the bundle only
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "stale.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 1
    assert ("kit bundle: report.md, results.csv, results.json differed from what this kit writes from the run's logs "
            "(an earlier kit's, or edited): the bundle holds them as this kit writes them") in capsys.readouterr().err
    assert "| 5815.10 | 0.989 |" in (run_dir / "report.md").read_text()
    # today's kit: program repeat 2 trained on a NaN loss from iteration 49 on (3.8% faster): no figure, and why
    assert main(["report", str(run_dir)]) == 2
    report = (run_dir / "report.md").read_text()
    assert "| 5749.08 | ngc-pytorch/resnet50/bz256/1n1g/amp | 5830.96 | 0.986 |" in report
    assert "resnet50_b256_amp_2.log`: line 66: no figure: the run trained on a non-finite loss (train.loss : nan)" \
        in report
    assert "imports nvidia.dali, which the Python of vm lacks" in report
    packed = bd.make_bundle(run_dir, tmp_path / "nan.tgz", force=True, submitter="t", system_name="t")
    assert sorted((v.rule, v.where) for v in verify(packed, rules_version="v10").violations) == [
        ("every_log_read", "logs/ngc-pytorch/resnet50/bz256/1n1g/resnet50_b256_amp_2.log:66"),
        ("program_code_at_pin", "logs/ngc-pytorch/resnet50/bz256/1n1g/resnet50_b256_amp_1.cmd.json"),
        ("repeats_as_declared", "suite.yaml:17")]
    # rule set v11: the repeat that trained on NaN is a failed repeat named, the record from before v4 judged as v3
    # judged it and named: the run as the visit left it verifies
    named = verify(packed, rules_version="v11")
    assert named.ok, named.violations
    notes = {f.rule.name: f.note for f in named.findings}
    assert notes["repeats_as_declared"].startswith("1 declared repeat(s) ran and gave no figure, each named (the "
                                                   "case's figure is its other repeats'): ngc-pytorch/resnet50/bz256/"
                                                   "1n1g/amp repeat 2: logs/") and "non-finite loss" in \
        notes["repeats_as_declared"]
    assert notes["every_log_read"] == ("1 log(s) trained on a non-finite loss, no figure (named): logs/ngc-pytorch/"
                                       "resnet50/bz256/1n1g/resnet50_b256_amp_2.log")
    assert notes["program_code_at_pin"].startswith("1 run record(s) from before rule set v4 keep no model_code_state")
    without_the_nan_repeat(run_dir)
    assert main(["report", str(run_dir)]) == 0
    bundle = tmp_path / "b.tgz"
    # its launcher predates model_code_state: v4 cannot tell whether the checkout at the pin was clean. kit bundle
    # judges the run by v3, current when it started; an auditor's newest rules name what it did not record
    assert main(["bundle", str(run_dir), "--out", str(bundle), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    said = capsys.readouterr().err
    assert "judged by rule set v3, the set current when the run started (2026-11-28T05:33:36+00:00)" in said
    assert "differ" not in said  # the raw record alone: kit report renewed the rest
    assert main(["verify", str(bundle)]) == 0  # the newest, v11: what it did not record named
    assert "OK   program_code_at_pin: 1 checked  (1 run record(s) from before rule set v4 keep no " \
        "model_code_state: HEAD was the pin, whether the checkout was clean is unknown)" in capsys.readouterr().out
    assert main(["verify", str(bundle), "--rules", "v10"]) == 1
    said = capsys.readouterr().out
    assert "FAIL program_code_at_pin" in said
    assert "recorded before launchers kept model_code_state (which rule set v4 asks for): whether the checkout at " \
        "the pin" in said and "HEAD was the pin, all that v3 asks" in said
    assert main(["verify", str(bundle), "--rules", "v3"]) == 0
    assert "CONSISTENT" in capsys.readouterr().out


def test_dle_without_the_placeholder_stopped_at_import():
    """The first visit's DLE runs, before the placeholder: main.py died on DALI's missing Pipeline."""
    folder = VISIT / "dle-without-dali" / "logs" / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g"
    for log in sorted(folder.glob("*.log")):
        assert log.read_text().rstrip().endswith("NameError: name 'Pipeline' is not defined")
        assert "placeholders" not in json.loads(log.with_suffix(".cmd.json").read_text())


def test_gpu_proofs_telemetry_row_reads_the_runs_samples(tmp_path):
    """Stage 1's row on what the sampler recorded, from results.json: here the real DLE run with the samples of its
    harness runs cut from the visit's recording (tests/test_gpu_telemetry_report.py says how; DERIVED)."""
    from test_gpu_telemetry_report import cut_nvml, cut_smi, span

    from kit.core.layout import telemetry_name

    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN and gives no figure
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(meta | {"gpu_telemetry": {"interval_ms": 100}}))
    unsampled = gs.telemetry_row("1 suite", run_dir)
    assert unsampled.verdict == "failed" and unsampled.figure == "0/3" and "unsampled: ngc-pytorch/" in unsampled.detail
    for log in sorted((run_dir / "logs").rglob("*.log")):
        (cut_smi if "ngc-pytorch" in log.parts else cut_nvml)(*span(log), log.with_name(telemetry_name(log.name)))
    assert main(["report", str(run_dir)]) == 0
    row = gs.telemetry_row("1 suite", run_dir)
    assert (row.figure, row.verdict) == ("3/3", "met")
    assert row.detail == ("resnet50 amp-nhwc: 0.1155 J/image at 1980 MHz; resnet50 amp-nhwc: 0.1163 J/image at 1980 MHz; "
                          "resnet50 amp: 0.1110 J/image at 1980 MHz")  # DLE over its timed steps (report layout 2)


SHIPPED = [VISIT / "dle", VISIT / "dle-without-dali", SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"]


@pytest.mark.parametrize("recording", SHIPPED, ids=lambda p: p.name)
def test_every_finished_gpu_recording_the_kit_ships_bundles_and_verifies(recording, tmp_path, capsys):
    """The real GPU runs the kit ships, as they were recorded (the H200 DLE run with its repeat that trained on NaN,
    the one without DALI whose two repeats died at import, the H100 run): `kit bundle --rules v11` and `kit verify`
    pass, every failed repeat named; the derived files an earlier kit wrote are written again in the bundle."""
    run_dir = tmp_path / "run"
    shutil.copytree(recording, run_dir)
    packed = tmp_path / "b.tgz"
    assert main(["bundle", str(run_dir), "--out", str(packed), "--submitter", "t", "--system-name", "t",
                 "--rules", "v11"]) == 0, capsys.readouterr().err
    assert "judged by rule set v11, named with --rules (run.json's own: v" in capsys.readouterr().err
    assert main(["verify", str(packed)]) == 0
    said = capsys.readouterr().out
    assert "CONSISTENT" in said and "rule set v11" in said.splitlines()[0]
    failed = [e for e in json.loads((run_dir / "run.json").read_text())["runs"].values() if e.get("status") != "ok"]
    if failed or recording.name == "dle":
        assert "declared repeat(s) ran and gave no figure, each named" in said
    assert main(["bundle", str(run_dir), "--rules", "v99", "--out", str(tmp_path / "x.tgz")]) == 2
    assert "--rules: 'v99' is no rule set of this kit (v1, " in capsys.readouterr().err
