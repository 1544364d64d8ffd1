"""make bench-overhead: the ratio's interval, the stopping rule, and both designs on real Paddle and PyTorch training."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from harness_overhead import RESOLVE, ratio_interval, wants_more  # noqa: E402

TINY = ["--model", "resnet50", "--batch-size", "2", "--image-size", "32", "--num-classes", "10",
        "--warmup-steps", "1", "--measure-steps", "2", "--threads", "1"]


def test_ratio_interval_is_the_t_interval_of_the_mean_log_ratio():
    ratios = [0.98, 1.00, 1.02, 0.99]
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    centre, low, high = ratio_interval(ratios)
    assert centre == pytest.approx(math.exp(mean))
    assert low == pytest.approx(math.exp(mean - 3.182 * sd / 2))  # t(0.975, 3 df) = 3.182
    assert high == pytest.approx(math.exp(mean + 3.182 * sd / 2))
    assert ratio_interval([1.1]) == (pytest.approx(1.1), 0.0, math.inf)


def test_pairs_are_added_until_the_interval_is_within_one_percent_or_the_cap():
    assert wants_more([1.0] * 3, pairs=4, max_pairs=10)  # below the minimum
    assert not wants_more([1.0, 1.001, 0.999, 1.0], pairs=4, max_pairs=10)  # resolved
    spread = [0.9, 1.1, 0.95, 1.05]
    assert max(ratio_interval(spread)[2] / ratio_interval(spread)[0] - 1, 0) > RESOLVE
    assert wants_more(spread, pairs=4, max_pairs=10)
    assert not wants_more(spread * 3, pairs=4, max_pairs=10)  # the cap


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_interleaved_blocks_run_the_harness_loop_and_the_bare_loop_in_one_process(framework):
    out = subprocess.run([sys.executable, str(REPO / "bench" / "interleaved_overhead.py"), "--framework", framework,
                          "--pairs", "2", "--max-pairs", "2", "--", *TINY],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    pairs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [p["pair"] for p in pairs] == [1, 2]
    assert list(pairs[0]) == ["pair", "harness", "bare"] and list(pairs[1]) == ["pair", "bare", "harness"]  # ABBA
    assert all(p["harness"] > 0 and p["bare"] > 0 for p in pairs)
    assert ":::KITLOG" not in out.stdout  # the harness's lines went to its log file, not into the pair lines


def test_interleaved_nlp_blocks_are_whole_epochs_in_the_harness_unit():
    args = ["--model", "bert", "--size", "tiny", "--batch-size", "4", "--seq-len", "16", "--corpus-size", "8",
            "--warmup-steps", "1", "--threads", "1"]
    out = subprocess.run([sys.executable, str(REPO / "bench" / "interleaved_overhead.py"), "--framework", "torch",
                          "--pairs", "2", "--max-pairs", "2", "--", *args],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    pairs = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(pairs) == 2 and all(p["harness"] > 0 and p["bare"] > 0 for p in pairs)


@pytest.mark.parametrize("design", [[], ["--processes"]])
def test_bench_overhead_prints_the_ratio_its_interval_and_the_verdict(design):
    pairs = 1 if design else 2  # a pair of processes is two framework start-ups
    out = subprocess.run([sys.executable, str(REPO / "bench" / "harness_overhead.py"), "--frameworks", "torch",
                          "--pairs", str(pairs), "--max-pairs", str(pairs), "--model", "resnet50", "--batch-size", "2",
                          "--image-size", "32", "--num-classes", "10", "--warmup-steps", "1", "--measure-steps", "2",
                          "--threads", "1", *design], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode in (0, 1), out.stderr[-2000:]  # 1: not resolved in so few pairs, which is likely
    lines = out.stdout.splitlines()
    assert ("separate processes" if design else "blocks of >= 4 steps and >= 1 s (NLP: an epoch) interleaved in one process") in lines[0]
    assert sum(line.startswith("  torch pair ") for line in lines) == pairs
    (verdict,) = [line for line in lines if line.startswith("torch resnet50: ")]
    assert "95% CI [" in verdict and f"{pairs} pairs" in verdict and "resolved at +-1%" in verdict
    assert (out.returncode == 0) == ("NOT resolved" not in verdict and "meets target" in verdict)
