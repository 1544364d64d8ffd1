from __future__ import annotations

import math
import re

import pytest
from kitlogs import harness_log, rewrite_kitlog

from kit.results.extract import Method, MethodError, compute_figure, format_number
from kit.results.parsers import ParseError, parse_log, parse_text


def fig(published, rel, **method):
    return compute_figure(parse_log(published / rel), Method.from_mapping(method))


def test_mean_after_warmup_matches_publisher(published):
    f = fig(published, "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", skip=9)
    assert f.value == pytest.approx(370.194, rel=2e-5)
    assert (f.used, f.available, f.first_line, f.last_line) == (90, 99, 18, 107)


def test_metric_choice_compute_ips(published):
    f = fig(published, "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", skip=9, metric="compute_ips")
    assert f.metric == "train.compute_ips" and f.value > 370.194
    with pytest.raises(MethodError, match="no metric 'bogus_ips'"):
        fig(published, "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", metric="bogus_ips")


def test_last_summary_uses_the_tools_final_figure(published):
    assert fig(published, "perf-v100/tensorflow/tf_gpu32_amp_bs256.txt", reduce="last_summary").value == pytest.approx(
        33317.67, rel=1e-7
    )
    table = fig(published, "perf-v100/mxnet/mxnet_gpu8_amp_bs256.txt", reduce="last_summary")
    assert table.value == 10336.0 and table.warnings == ()
    with pytest.raises(MethodError, match="no summary line"):
        fig(published, "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log", reduce="last_summary")


def test_harmonic_mean_of_epochs_with_significant_digits(published):
    f = fig(published, "perf-v100/mxnet/mxnet_gpu1_fp32_bs128.txt", skip=1, reduce="harmonic_mean", sig=5)
    assert (f.value, f.kind, f.used) == (389.54, "per-epoch", 2)


def test_per_card_scaling_and_warning(published):
    rel = "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log"
    unscaled = fig(published, rel, skip=10)
    assert any("per card" in w for w in unscaled.warnings)
    scaled = fig(published, rel, skip=10, scale=8)
    assert scaled.value == pytest.approx(unscaled.value * 8) and scaled.warnings == ()


def test_count_shortfall_is_an_error_not_a_smaller_figure(published):
    with pytest.raises(MethodError, match="only 5 value\\(s\\) after skipping 1 of 6; 6 asked for"):
        fig(published, "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log", skip=1, count=6)


def test_wallclock_method_between_steps():
    lines = []
    for step in range(1, 46):
        t = 10 + step * 0.5  # 0.5 s per step of 256 images -> 512 images/s
        lines.append(
            f"DLL 2023-08-04 05:46:{int(t):02d}.{round((t % 1) * 1e6):06d} - Epoch: 0 Iteration: {step}  "
            f"train.total_ips : 500.00 images/s"
        )
    parsed = parse_text("\n".join(lines) + "\n", "w.log")
    f = compute_figure(parsed, Method(reduce="wallclock", steps=(20, 40), batch=256))
    assert f.value == pytest.approx(20 * 256 / 10.0)
    assert (f.used, f.first_line, f.last_line) == (2, 20, 40)


def test_wallclock_needs_logged_steps_and_batch(published):
    with pytest.raises(MethodError, match="no record at step 120"):
        fig(published, "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", reduce="wallclock", batch=256)
    with pytest.raises(MethodError, match="needs --batch"):
        Method.from_mapping({"reduce": "wallclock"})


def test_several_ranks_use_the_lowest_and_say_so():
    text = (
        "[1,1]<stdout>:DLL 2023-01-01 00:00:01.0 - Epoch: 0 Iteration: 1  train.total_ips : 90.0 images/s\n"
        "[1,0]<stdout>:DLL 2023-01-01 00:00:01.0 - Epoch: 0 Iteration: 1  train.total_ips : 100.0 images/s\n"
        "[1,0]<stdout>:DLL 2023-01-01 00:00:02.0 - Epoch: 0 Iteration: 2  train.total_ips : 110.0 images/s\n"
    )
    f = compute_figure(parse_text(text, "r.log"), Method())
    assert f.value == 105.0 and any("rank 0" in w for w in f.warnings)
    assert compute_figure(parse_text(text, "r.log"), Method(rank=1)).value == 90.0


@pytest.mark.parametrize(
    "mapping,message",
    [
        ({"reduce": "average"}, "unknown reduce"),
        ({"skip": -1}, "skip must be >= 0"),
        ({"count": 0}, "count must be >= 1"),
        ({"scale": 0}, "scale must be a finite number > 0"),
        ({"scale": math.inf}, "scale must be a finite number > 0, got inf"),
        ({"batch": math.nan, "reduce": "wallclock"}, "batch must be a finite number > 0, got nan"),
        ({"round": 2, "sig": 5}, "round or sig"),
        ({"round": 2, "trunc": 2}, "round or sig or trunc"),
        ({"trunc": -1}, "trunc must be >= 0"),
        ({"trim": -1}, "trim must be >= 0"),
        ({"trim": 1.5}, "trim must be an integer"),
        ({"trim": 2, "reduce": "last_summary"}, "reduce last_summary reduces no window"),
        ({"skip": "ten"}, "skip must be an integer"),
        ({"warmup": 3}, "unknown method key"),
    ],
)
def test_bad_methods(mapping, message):
    with pytest.raises(MethodError, match=message):
        Method.from_mapping(mapping)


def test_format_number():
    assert [format_number(v) for v in (321.8, 10336.0, 1.0, 370.19444444444446)] == [
        "321.8",
        "10336",
        "1",
        "370.19444444444446",
    ]


def test_a_scale_that_overflows_the_figure_is_refused_not_printed_as_inf(published):
    with pytest.raises(MethodError, match=r"x scale 1e\+308 is past the largest number"):
        fig(published, "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", scale=1e308)


def test_steps_per_second_times_the_global_batch_is_samples_per_second(tmp_path):
    from kit.results.extract import Method, compute_figure
    from kit.results.parsers import parse_text

    line = "epoch id: 0, step{}, train_loss: 6.9, total time cost = 0.5, step per second: 2.0, speed: 2.0"
    text = "\n".join(line.format(step) for step in range(11, 14)) + "\n"  # FleetX's fit() line
    parsed = parse_text(text, "vgg16.log", "fleetx-vgg")
    assert compute_figure(parsed, Method()).unit == "steps/s"
    figure = compute_figure(parsed, Method(scale=64))
    assert (figure.value, figure.unit) == (128.0, "samples/s")


PM = "perf-models"


def test_trim_drops_the_lowest_and_highest_of_the_window(published):
    """PaddlePaddle/benchmark's rule on PaddleNLP BERT (Bert/README.md): skip 10, sort, drop 5 each side, x cards."""
    log = f"{PM}/Bert/logs/V100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C8_log"
    f = fig(published, log, skip=10, trim=5, scale=8, round=3)
    assert (f.value, f.unit, f.used, f.available) == (5355.659, "sequences/s", 30, 50)
    assert fig(published, log, skip=10, scale=8, round=3).value != 5355.659  # without the trim it does not derive
    with pytest.raises(MethodError, match="trim 20 drops all 40 value"):
        fig(published, log, skip=10, trim=20)


def test_trunc_cuts_where_round_would_round_up(published):
    log = f"{PM}/HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu8"  # published 59.709
    exact = fig(published, log, skip=5, reduce="harmonic_mean", scale=8).value
    assert 59.7098 < exact < 59.7099
    assert fig(published, log, skip=5, reduce="harmonic_mean", scale=8, trunc=3).value == 59.709
    assert fig(published, log, skip=5, reduce="harmonic_mean", scale=8, round=3).value == 59.71


def test_truncate_decimals_works_on_the_decimal_text():
    from kit.results.extract import truncate_decimals

    assert [truncate_decimals(v, d) for v, d in ((0.29, 2), (5055.566265125031, 2), (-1.239, 2), (7.0, 0))] == [
        0.29, 5055.56, -1.23, 7.0]
    assert truncate_decimals(1.7e308, 3) == 1.7e308 and truncate_decimals(1e-300, 400) == 1e-300
    assert truncate_decimals(123456.789, 0) == 123456.0 and truncate_decimals(2.5e-7, 6) == 0.0


@pytest.mark.parametrize(("fields", "says"), [({"global_batch": 1e308, "seconds": 0.5}, "global_batch 1e+308"),
                                            ({"seconds": 5e-324}, "where 4 over 5e-324 s is inf")])
def test_finite_numbers_that_overflow_a_step_figure_are_refused_naming_the_line(tmp_path, fields, says, capsys):
    from kit.cli import main

    log = tmp_path / "overflow.log"
    log.write_text(harness_log("torch", "resnet50", [0.5] * 10, 4))
    rewrite_kitlog(log, lambda d: d | fields if d["event"] == "step" and d["step"] == 3 else d)
    with pytest.raises(ParseError, match=f":4: .*{re.escape(says)}"):
        parse_log(log)
    assert main(["extract", str(log)]) == 2  # was exit 3, an internal error
    assert "overflow.log:4:" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "r")]) in (0, 1, 2)
    assert "internal error" not in capsys.readouterr().err
