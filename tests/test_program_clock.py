"""A published program's rates held to its own log's clock (rule set v6, kit/audit/rules/program_clock.py): the band
measured on every genuine log in the clocked formats, and the H200 visit's real DLE run with its rates doubled
(report, results and bundle rebuilt to agree) refused, where rule set v5 passed it."""

from __future__ import annotations

import re
import shutil
import statistics
from pathlib import Path

import pytest
from kitlogs import recorded_clean, without_the_nan_repeat

from kit.audit import bundle as bd
from kit.audit.rules.program_clock import (
    CLOCK_BAND,
    CLOCKED_FORMATS,
    FIGURE_BAND,
    RECORD_BAND,
    SUMMARY_BAND,
    SUMMARY_IS_MEAN,
    summary_over_step_mean,
)
from kit.audit.verify import verify
from kit.cli import main
from kit.results.extract import clocked_intervals, samples_per_step
from kit.results.parsers import PER_STEP, parse_log

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
DLE = Path("logs") / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g"


def _global_batch(path: Path) -> int:
    """From the log's path: its per-GPU batch (bz/b/bs) times its GPUs (NnGg or gpuN)."""
    batch = int(next(g for g in re.search(r"_b(\d+)|bs(\d+)|bz(\d+)", path.as_posix()).groups() if g))
    layout, count = re.search(r"(\d+)n(\d+)g", path.as_posix()), re.search(r"gpu(\d+)", path.name)
    return batch * (int(layout[1]) * int(layout[2]) if layout else int(count[1]) if count else 1)


def genuine_clocked_series(published: Path):
    """(path, records, metric) of every per-step series of every genuine log in a clocked format: the published
    fixtures and the H200 visit's DLE run."""
    for path in sorted(p for p in published.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".md")) + \
            [VISIT / "dle" / DLE / "resnet50_b256_amp_1.log"]:
        try:
            parsed = parse_log(path)
        except Exception:  # noqa: BLE001 - logs of other formats, or no figure: not this rule's
            continue
        if parsed.format.name in CLOCKED_FORMATS:
            for metric in sorted({r.metric for r in parsed.records if r.kind == PER_STEP}):
                yield path, parsed.records, metric


def test_the_band_holds_every_genuine_clocked_log(published):
    ratios = {}
    for path, records, metric in genuine_clocked_series(published):
        said = [samples / _global_batch(path) for samples in samples_per_step(records, metric)]
        if len(said) >= 3:
            ratios[(path.as_posix(), metric)] = statistics.median(said)
    assert len(ratios) >= 40 and {f for f in CLOCKED_FORMATS} <= {parse_log(p).format.name for p in [
        published / "perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt", published / "perf-v100/mxnet/mxnet_gpu1_amp_bs256.txt",
        published / "perf-v100/tensorflow/tf_gpu1_amp_bs256.txt",
        published / "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log"]}
    low, high = min(ratios.values()), max(ratios.values())
    assert 0.985 < low and high < 1.01, (low, high)  # measured: see kit/audit/rules/program_clock.py
    assert CLOCK_BAND[0] < low and high < CLOCK_BAND[1]


def test_the_figure_and_record_bands_hold_every_genuine_clocked_log(published):
    """Version 2's bands (rule set v9): over every interval of each genuine series, the mean of the printed rates
    over the mean of their clock's, and each interval's rate over its clock's (measured: 0.9987-1.0082 and
    0.821-1.025)."""
    means, singles = [], []
    for path, records, metric in genuine_clocked_series(published):
        intervals = clocked_intervals(records, metric)
        if len(intervals) < 3:
            continue
        clock = [_global_batch(path) * (b.step - a.step) / (b.timestamp - a.timestamp) for a, b in intervals]
        printed = [b.value for _, b in intervals]
        means.append(statistics.fmean(printed) / statistics.fmean(clock))
        singles += [p / c for p, c in zip(printed, clock, strict=True)]
    assert len(means) >= 40
    assert 0.998 < min(means) and max(means) < 1.009, (min(means), max(means))
    assert FIGURE_BAND[0] < min(means) and max(means) < FIGURE_BAND[1]
    assert 0.82 < min(singles) and max(singles) < 1.026, (min(singles), max(singles))
    assert RECORD_BAND[0] < min(singles) and max(singles) < RECORD_BAND[1]


def test_dle_pytorch_summaries_are_the_mean_of_their_steps_on_every_genuine_log(published):
    """The band a summary figure is held to: DLE PyTorch's dllogger summary over the mean of the per-step records of
    its metric, on the Perf logs (1, 8, 32 GPUs; 32-GPU compute_ips has no per-step records) and the H200 visit's."""
    shares = {}
    for path in sorted((published / "perf-v100" / "pytorch").iterdir()) + [VISIT / "dle" / DLE /
                                                                          "resnet50_b256_amp_1.log"]:
        parsed = parse_log(path)
        assert parsed.format.name in SUMMARY_IS_MEAN
        for metric in ("train.total_ips", "train.compute_ips"):
            if (share := summary_over_step_mean(parsed.records, metric)) is not None:
                shares[(path.name, metric)] = share
    assert len(shares) == 12, sorted(shares)
    low, high = min(shares.values()), max(shares.values())
    assert 0.999 < low and high < 1.001, (low, high)  # measured: 0.9995-1.0002
    assert SUMMARY_BAND[0] < low and high < SUMMARY_BAND[1]


@pytest.fixture
def dle_run(tmp_path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    recorded_clean(run_dir)  # DERIVED: its records predate model_code_state
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN
    assert main(["report", str(run_dir)]) == 0
    return run_dir


def test_the_real_dle_run_agrees_with_its_clock_and_doubled_rates_do_not(dle_run, tmp_path):
    genuine = verify(bd.make_bundle(dle_run, tmp_path / "a.tgz", submitter="t", system_name="t"))
    assert genuine.ok, genuine.violations
    (finding,) = [f for f in genuine.findings if f.rule.name == "program_figure_agrees_with_its_clock"]
    assert finding.checked == 1 and not finding.violations
    log = dle_run / DLE / "resnet50_b256_amp_1.log"
    log.write_text(re.sub(r"(_ips : )([\d.]+)", lambda m: f"{m[1]}{float(m[2]) * 2:.2f}", log.read_text()))
    assert main(["report", str(dle_run)]) == 0
    forged = bd.make_bundle(dle_run, tmp_path / "b.tgz", submitter="t", system_name="t")
    said = [(v.rule, v.message) for v in verify(forged, rules_version="v8").violations]
    assert len(said) == 1 and said[0][0] == "program_figure_agrees_with_its_clock", said
    assert re.search(r"its train\.total_ips rates are 2\.0\d\dx what its records' clock shows", said[0][1]), said
    assert verify(forged, rules_version="v5").ok  # the hole was real: the harness / program ratio halved unseen
    said = [(v.rule, v.message) for v in verify(forged).violations]  # v9: by the figure's own reduction
    assert [rule for rule, _ in said] == ["program_figure_agrees_with_its_clock"] * 2, said
    assert re.search(r"the \w+ of the \d+ train\.total_ips rates its figure counts is 2\.0\d\dx the \w+ of what "
                     r"their clock gives", said[0][1]), said
    assert re.search(r"\d+ of the \d+ train\.total_ips records its figure counts lie beyond 0\.75-1\.25x their "
                     r"clock \(the first 2\.0\d\dx\)", said[1][1]), said


def _inflated(run_dir: Path, tmp_path: Path, name: str, factor: float, every: int, of: int) -> Path:
    """The DLE log's rates (both metrics) x FACTOR on EVERY of each OF records (all: every == of), the report
    written again from the logs (a forger with the key), bundled."""
    log = run_dir / DLE / "resnet50_b256_amp_1.log"
    seen = iter(range(10**9))
    log.write_text(re.sub(r"(_ips : )([\d.]+)", lambda m: f"{m[1]}{float(m[2]) * factor:.2f}"
                          if next(seen) // 2 % of < every else m[0], log.read_text()))
    assert main(["report", str(run_dir)]) == 0
    return bd.make_bundle(run_dir, tmp_path / f"{name}.tgz", submitter="t", system_name="t")


@pytest.mark.parametrize("factor, every, of", [(1.09, 1, 1), (1.6, 2, 5)])
def test_inflations_the_median_rule_let_through_are_held_by_the_figures_own_reduction(dle_run, tmp_path, factor,
                                                                                    every, of):
    """Every rate +9% (inside v6-v8's 10% band), or 2 of every 5 records x1.6 (the median interval untouched): the
    figure moves, v8 passes it, v9 does not."""
    forged = _inflated(dle_run, tmp_path, "forged", factor, every, of)
    assert verify(forged, rules_version="v8").ok
    said = [(v.rule, v.message) for v in verify(forged).violations]
    assert said and {rule for rule, _ in said} == {"program_figure_agrees_with_its_clock"}, said
    assert re.search(r"rates its figure counts is 1\.[0-2]\d\dx", said[0][1]), said
