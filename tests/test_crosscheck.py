from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from kit.core.yamlio import ConfigError
from kit.results.crosscheck import ERROR, FLAGGED, MATCH, MISMATCH, check_claims

REPO = Path(__file__).resolve().parents[1]
PERF_MODELS_CLAIMS = REPO / "kit" / "claims" / "perf-models.yaml"


def test_published_claims(published):
    verdicts = check_claims(published / "expected.yaml")
    logs = [v for v in verdicts if v.claim.startswith("perf-v100/")]
    suite = [v for v in verdicts if v.claim.startswith("dlperf-tf2-resnet50 ")]
    derivable = [v for v in logs if v.declared_derives]
    assert len(derivable) == 21 and all(v.status == MATCH for v in derivable)
    assert len(suite) == 12 and all(v.status == MATCH for v in suite)
    (flagged,) = [v for v in logs if not v.declared_derives]
    assert flagged.status == FLAGGED
    assert flagged.claim.endswith("PaddleClas_ResNet50_bs256_pure_fp16_DP_N1C1_log")
    assert round(flagged.recomputed, 2) == 1432.07 and flagged.published == 1438.518
    assert flagged.rel_diff == pytest.approx(-0.004484, abs=1e-6)
    assert "declared recomputed 1432.07: agrees" in flagged.detail


def test_a_changed_figure_is_caught(published, tmp_path):
    shutil.copytree(published / "perf-v100/tensorflow", tmp_path / "tf")
    (tmp_path / "claims.yaml").write_text(
        textwrap.dedent("""\
        logs:
          - {file: tf/tf_gpu1_fp32_bs256.txt, format: dle-tf1, method: {skip: 5, reduce: mean}, published: 415.786, rel_tol: 0.00002}
          - {file: tf/tf_gpu1_fp32_bs256.txt, method: {skip: 5, reduce: mean}, published: 420.0, rel_tol: 0.00002}
          - {file: tf/missing.txt, method: {}, published: 1.0}
        """)
    )
    statuses = [v.status for v in check_claims(tmp_path / "claims.yaml")]
    assert statuses == [MATCH, MISMATCH, ERROR]


def test_derives_false_is_flagged_only_while_the_log_gives_what_the_claims_file_says(published, tmp_path):
    shutil.copytree(published / "perf-v100/tensorflow", tmp_path / "tf")
    (tmp_path / "claims.yaml").write_text(
        textwrap.dedent("""\
        logs:
          - {file: tf/tf_gpu1_fp32_bs256.txt, method: {skip: 5}, published: 420.0, derives: false, recomputed: 415.786}
          - {file: tf/tf_gpu1_fp32_bs256.txt, method: {skip: 5}, published: 420.0, derives: false, recomputed: 418.0}
          - {file: tf/tf_gpu1_fp32_bs256.txt, method: {skip: 5}, published: 415.786, rel_tol: 0.00002, derives: false}
          - {file: tf/tf_gpu1_fp32_bs256.txt, method: {skip: 5}, published: 420.0, derives: false, note: "a typo?"}
        """)
    )
    verdicts = check_claims(tmp_path / "claims.yaml")
    assert [v.status for v in verdicts] == [FLAGGED, MISMATCH, MISMATCH, FLAGGED]
    assert "DISAGREES" in verdicts[1].detail and "yet it matches" in verdicts[2].detail
    assert verdicts[3].detail.endswith("note: a typo?")


def test_perf_models_claims(published):
    """The 58 published figures of PaddlePaddle/Perf's BERT, Transformer, HRNet-W18 and DeepLabV3+ tables."""
    verdicts = check_claims(PERF_MODELS_CLAIMS)
    assert len(verdicts) == 58
    by_status = {s: [v for v in verdicts if v.status == s] for s in (MATCH, FLAGGED, MISMATCH, ERROR)}
    assert len(by_status[MATCH]) == 50 and all(v.declared_derives for v in by_status[MATCH])
    assert len(by_status[FLAGGED]) == 8 and not by_status[MISMATCH] and not by_status[ERROR]
    flagged = {v.claim.split("perf-models/")[1]: (v.published, v.recomputed) for v in by_status[FLAGGED]}
    assert flagged == {
        "Transformer/OtherReports/PyTorch/logs/V100_LOG/pytorch_gpu32_fp32_bs2560": (166352.6, 166408.7),
        "HRNetW18/logs/paddle/Hrnet_FP16_BS8-N32.log": (422, 428),
        "HRNetW18/logs/paddle/Hrnet_FP32_BS8-N32.log": (428, 431),
        "HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu1": (17.448, 17.488),
        "HRNetW18/OtherReports/PyTorch/logs/hrnet_c32_fp16.log": (246, 237),
        "HRNetW18/OtherReports/PyTorch/logs/hrnet_c32_fp32.log": (243, 240),
        "DeepLabV3P/logs/paddle/Deeplabv3_FP16_BS4-N32.log": (373.76, 356.66),
        "DeepLabV3P/logs/paddle/Deeplabv3_FP32_BS4-N32.log": (176, 174.73),
    }
    # every claim is one PUBLISHED.yaml entry with a figure, with that figure
    listed = yaml.safe_load((published / "perf-models/PUBLISHED.yaml").read_text())
    figures = {e["file"]: e["published"] for e in listed if e["published"] is not None}
    assert {v.claim.split("perf-models/")[1]: v.published for v in verdicts} == figures


@pytest.mark.parametrize(
    "body,message",
    [
        ("logs: [1, 2\n", ":2: malformed YAML"),
        ("{}\n", "no claims"),
        ("logs:\n  - {file: a.log}\n", ":2: published: missing required key"),
        ("logs:\n  - file: a.log\n    published: high\n", ":3: published: expected an integer or a number"),
        ("logs:\n  - file: a.log\n    published: 1\n    method: {reduce: avg}\n", ":4: method: unknown reduce 'avg'"),
        ("logs:\n  - file: a.log\n    published: 1\n    format: nginx\n", ":4: format: unknown format 'nginx'"),
        (
            "suites:\n  - name: s\n    published_median: {one: 3}\n",
            ":3: published_median: case 'one' is not of the form",
        ),
        ("claims: []\n", ":1: claims: unknown top-level key"),
        (
            "logs:\n  - {file: a.log, published: 1}\n  - {file: a.log, published: 1, file: b.log}\n",
            ":3: file: duplicate key",
        ),
        ("- just a list\n", "top level must be a mapping"),
        ("", "empty YAML file"),
    ],
)
def test_malformed_claims_name_file_line_and_key(tmp_path, body, message):
    path = tmp_path / "claims.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        check_claims(path)
    assert str(info.value).startswith(str(path)) and message in str(info.value)


def test_perf_models_claims_from_the_repo_exit_0():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "kit", "crosscheck", "kit/claims/perf-models.yaml"], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("50 match, 8 flagged (published figures that do not derive from their logs, "
                                      "as the claims file declares), 0 mismatch, 0 error of 58 claims")


def test_a_wallclock_batch_beyond_what_the_log_s_rates_and_clock_show_is_refused(published, tmp_path):
    """The real NGC PyTorch log's rates x seconds between its records say 256.1 images a step: wallclock with batch
    256 derives its figure; with batch 256000 (a 1000x claim, which `scale: 1000` cannot make) it is refused naming
    the claims line; strict=False (rule sets v1, v2) took it."""
    shutil.copytree(published / "perf-v100" / "pytorch", tmp_path / "pytorch")
    log = "pytorch/pytorch_gpu1_amp_bs256.txt"
    (tmp_path / "claims.yaml").write_text(textwrap.dedent(f"""\
        logs:
          - {{file: {log}, method: {{reduce: wallclock, steps: [20, 90], batch: 256, metric: train.total_ips}}, published: 789.954, rel_tol: 0.00001}}
          - {{file: {log}, method: {{reduce: wallclock, steps: [20, 90], batch: 256000, metric: train.total_ips}}, published: 789954, rel_tol: 0.00001}}
        """))
    verdicts = check_claims(tmp_path / "claims.yaml")
    assert [v.status for v in verdicts] == [MATCH, ERROR], verdicts
    assert verdicts[1].source_line == 3
    assert verdicts[1].detail == (f"{tmp_path / log}: wallclock batch 256000 exceeds the 256.1 samples per step the "
                                  "log's own rates and clock show (rate x seconds between its records over the steps "
                                  "between them; at most 1.1x that)")
    assert [v.status for v in check_claims(tmp_path / "claims.yaml", strict=False)] == [MATCH, MATCH]


def test_a_scale_beyond_the_ranks_the_log_shows_is_refused_naming_the_claims_line(published, tmp_path):
    """A job's figure (DLE's, whatever its ranks) takes no scale; a per-card one at most the ranks its log tags or its
    claim states. strict=False is rule sets v1/v2's check, which took any scale."""
    for folder in ("tensorflow", "paddle", "mxnet"):
        shutil.copytree(published / "perf-v100" / folder, tmp_path / folder)
    one_card = "paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"
    (tmp_path / "claims.yaml").write_text(textwrap.dedent(f"""\
        logs:
          - {{file: tensorflow/tf_gpu1_fp32_bs256.txt, method: {{skip: 5, scale: 1000}}, published: 415786, rel_tol: 0.00002}}
          - {{file: {one_card}, gpus: 1, method: {{skip: 10, scale: 1000}}, published: 393561, rel_tol: 0.0001}}
          - {{file: {one_card}, method: {{skip: 10, scale: 8}}, published: 3148.488, rel_tol: 0.0001}}
          - {{file: mxnet/mxnet_gpu8_fp32_bs128.txt, gpus: 8, method: {{skip: 1, reduce: harmonic_mean, sig: 5, scale: 8}}, published: 23662, rel_tol: 0.0001}}
          - {{file: paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log, gpus: 8, method: {{skip: 10, scale: 8}}, published: 3019.361, rel_tol: 0.001}}
        """))
    verdicts = check_claims(tmp_path / "claims.yaml")
    assert [v.status for v in verdicts] == [ERROR, ERROR, ERROR, ERROR, MATCH]
    assert [v.source_line for v in verdicts[:4]] == [2, 3, 4, 5]
    assert "method scale 1000 exceeds 1: a per-step figure of this format counts every rank" in verdicts[0].detail
    assert "scale 1000 exceeds the ranks the log shows (0 rank tag(s); GPUs stated by the claim: 1)" in \
        verdicts[1].detail
    assert "scale 8 exceeds the ranks the log shows (0 rank tag(s); GPUs stated by the claim: none)" in \
        verdicts[2].detail
    assert "scale 8 exceeds 1: a per-epoch figure" in verdicts[3].detail  # 8 rank tags, yet the job's figure
    loose = check_claims(tmp_path / "claims.yaml", strict=False)
    assert [v.status for v in loose] == [MATCH] * 5  # v1/v2 took every forged figure
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "kit", "crosscheck", str(tmp_path / "claims.yaml")], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == 2 and f"kit: {tmp_path / 'claims.yaml'}:3: " in r.stderr, r.stderr


def test_a_suite_claims_scale_is_bounded_by_its_case_folders_gpus(published, tmp_path):
    shutil.copytree(published / "dlperf-tf2-resnet50", tmp_path / "dlperf")
    (tmp_path / "claims.yaml").write_text(textwrap.dedent("""\
        suites:
          - name: dlperf
            method: {skip: 1, count: 5, reduce: mean, round: 2, scale: 8}
            per_device_batch: 128
            published_median: {1n1g: 2574.4}
            rel_tol: 0.00002
        """))
    (verdict,) = check_claims(tmp_path / "claims.yaml")
    assert verdict.status == ERROR and "method scale 8 exceeds 1" in verdict.detail
    assert "(claims line 3)" in verdict.detail


def test_a_claim_listing_one_log_twice_is_refused_naming_the_claims_line(published, tmp_path):
    shutil.copytree(published / "perf-v100/tensorflow", tmp_path / "tf")
    for twice in ("tf/tf_gpu1_fp32_bs256.txt, ./tf/tf_gpu1_fp32_bs256.txt",
                  "tf/tf_gpu1_fp32_bs256.txt, tf/../tf/tf_gpu1_fp32_bs256.txt"):
        (tmp_path / "claims.yaml").write_text(textwrap.dedent(f"""\
            logs:
              - {{file: tf/tf_gpu1_fp32_bs256.txt, method: {{skip: 5}}, published: 415.786, rel_tol: 0.00002}}
              - files: [{twice}]
                method: {{skip: 5}}
                published: 415.786
            """))
        with pytest.raises(ConfigError) as info:
            check_claims(tmp_path / "claims.yaml")
        said = str(info.value)
        assert said.startswith(f"{tmp_path / 'claims.yaml'}:3: files: ") and "again" in said, said
        assert [v.status for v in check_claims(tmp_path / "claims.yaml", strict=False)] == [MATCH, MATCH]


def test_a_steps_per_second_figures_scale_is_at_most_the_global_batch_its_claim_states(tmp_path):
    """FleetX prints steps/s: the scale that makes it samples/s is the global batch, which the claim must state."""
    line = "epoch id: 0, step{}, train_loss: 1.0, total time cost = 0.5, step per second: 2.0, speed: 2.0\n"
    (tmp_path / "vgg.log").write_text("".join(line.format(i) for i in range(1, 6)))
    (tmp_path / "claims.yaml").write_text(textwrap.dedent("""\
        logs:
          - {file: vgg.log, format: fleetx-vgg, batch: 256, method: {scale: 256}, published: 512}
          - {file: vgg.log, format: fleetx-vgg, batch: 256, method: {scale: 2560}, published: 5120}
          - {file: vgg.log, format: fleetx-vgg, method: {scale: 256}, published: 512}
        """))
    verdicts = check_claims(tmp_path / "claims.yaml")
    assert [v.status for v in verdicts] == [MATCH, ERROR, ERROR]
    assert "method scale 2560 exceeds the global batch the claim states (256)" in verdicts[1].detail
    assert "method scale 256 exceeds 1: the claim states no global batch" in verdicts[2].detail
