from __future__ import annotations

import shutil
import textwrap

import pytest

from kit.core.yamlio import ConfigError
from kit.results.crosscheck import ERROR, MATCH, MISMATCH, check_claims


def test_published_claims(published):
    verdicts = check_claims(published / "expected.yaml")
    logs = [v for v in verdicts if v.claim.startswith("perf-v100/")]
    suite = [v for v in verdicts if v.claim.startswith("dlperf-tf2-resnet50 ")]
    derivable = [v for v in logs if v.declared_derives]
    assert len(derivable) == 21 and all(v.status == MATCH for v in derivable)
    assert len(suite) == 12 and all(v.status == MATCH for v in suite)
    (flagged,) = [v for v in logs if not v.declared_derives]
    assert flagged.status == MISMATCH
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
