"""The PLSC, FleetX VGG16, Paddle models 1.8, OneFlow and older-NGC-TF NVLOG parsers.

Every line is rendered the way the tool renders it: its own format string through str.format or
%, and, where the tool logs through `logging`, its own logging format through logging.Formatter
(clock pinned to UTC). The format strings are quoted from the tools' sources (see each module).
"""

from __future__ import annotations

import calendar
import datetime
import json
import logging
import re
import time
from pathlib import Path

import pytest

from kit.results.parsers import (
    FORMATS,
    PER_STEP,
    SUMMARY,
    ParseError,
    detect_format,
    get_format,
    parse_text,
    refuse_non_finite_loss,
)
from kit.results.parsers.logtext import read_log_text

FIXTURES = Path(__file__).parent / "fixtures"

ORIGINAL_FORMATS = {"tf2-keras-timehistory", "dle-pytorch", "dle-tf1", "dle-mxnet", "paddleclas"}
NEW_FORMATS = {"plsc", "fleetx-vgg", "paddle-models-1.8", "oneflow", "nvlog-tf"}
# the Perf family's other models (tests/test_parsers_perf_models.py reads their real logs)
PERF_MODELS_FORMATS = {"paddlenlp-bert", "paddlenlp-transformer", "paddleseg", "dle-bert-pytorch", "dle-bert-tf1",
                       "mmseg", "dle-transformer-pytorch"}
# Lambda's deeplearning-benchmark logs' own formats (tests/test_claims_lambda.py)
LAMBDA_FORMATS = {"dle-ssd-pytorch", "dle-gnmt-pytorch", "dle-transformerxl-pytorch", "dle-tts-pytorch"}


def utc(text: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> float:
    return float(calendar.timegm(time.strptime(text, fmt)))


def logged(
    fmt: str,
    msg: str,
    when: str,
    *,
    datefmt: str | None = None,
    name: str = "root",
    filename: str = "entry.py",
    lineno: int = 1,
    msecs: int = 0,
) -> str:
    """`msg` as logging.Formatter(fmt, datefmt) prints it, the record made at `when` (UTC)."""
    formatter = logging.Formatter(fmt, datefmt)
    formatter.converter = time.gmtime
    record = logging.LogRecord(name, logging.INFO, filename, lineno, msg, None, None)
    record.created = utc(when) + msecs / 1000
    record.msecs = float(msecs)
    return formatter.format(record)


def mpirun(rank: int, line: str) -> str:
    return f"[1,{rank}]<stdout>:{line}"


def only(records, **fields):
    return [r for r in records if all(getattr(r, k) == v for k, v in fields.items())]


# --------------------------------------------------------------------------------------------
# PLSC
# --------------------------------------------------------------------------------------------

# plsc/entry.py, first release: logging.basicConfig(format=..., datefmt=...)
PLSC_V1_FMT, PLSC_V1_DATEFMT = "%(asctime)s - %(levelname)s - %(message)s", "%d %b %Y %H:%M:%S"
# plsc/entry.py, Paddle 2.0 static releases
PLSC_V1B_FMT = "%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s"
# utils/logging.py (arcface_paddle)
PLSC_ARC_FMT = "Training: %(asctime)s - %(message)s"
# plsc/utils/logger.py (2.x)
PLSC_2X_FMT, PLSC_2X_DATEFMT = "[%(asctime)s] %(name)s %(levelname)s: %(message)s", "%Y/%m/%d %H:%M:%S"


def plsc_v1(pass_id, batch_id, lr, loss, speed, when):
    msg = f"Pass:{pass_id} batch:{batch_id} lr:{lr} loss:{loss} qps:{speed:.2f}"
    return logged(PLSC_V1_FMT, msg, when, datefmt=PLSC_V1_DATEFMT)


def plsc_v1_acc_shifted(pass_id, batch_id, lr, loss, speed, acc1, acc5, when):
    # the release's own 6-field format string fed 7 values
    msg = f"Pass:{pass_id} batch:%d lr:{batch_id} loss:{lr} qps:{loss:.2f} acc1:{speed} acc5:{acc1}"
    return logged(PLSC_V1_FMT, msg, when, datefmt=PLSC_V1_DATEFMT)


def plsc_v1b(pass_id, batch_id, lr, loss, speed, when, msecs, acc=None):
    if acc is None:
        msg = f"Pass:{pass_id} batch:{batch_id} lr:{lr:.8f} loss:{loss:.6f} qps:{speed:.2f}"
    else:
        msg = "Pass:{} batch:{} lr:{:.8f} loss:{:.6f} qps:{:.2f} acc1:{:.6f} acc5:{:.6f}".format(
            pass_id, batch_id, lr, loss, speed, *acc
        )
    return logged(PLSC_V1B_FMT, msg, when, filename="entry.py", lineno=1050, msecs=msecs)


def plsc_arcface(loss, lr, epoch, step, eta, speed_total, when, msecs):
    msg = "loss %.4f, lr: %f, epoch: %d, step: %d, eta: %1.2f hours, throughput: %.2f imgs/sec" % (
        loss,
        lr,
        epoch,
        step,
        eta,
        speed_total,
    )
    return logged(PLSC_ARC_FMT, msg, when, msecs=msecs)


def plsc_2x(epoch, epochs, it, iters, lr, loss, batch_cost, reader_cost, batch_size, world_size, when):
    lr_msg = f"lr: {lr:.6f}"
    metric_msg = ", ".join(["{}: {:.5f}".format("loss", loss)])
    time_msg = "s, ".join([f"{k}: {v:.5f}" for k, v in (("batch_cost", batch_cost), ("reader_cost", reader_cost))])
    ips_msg = f"ips: {batch_size * world_size / batch_cost:.5f} images/sec"
    eta_sec = ((epochs - epoch + 1) * iters - it) * batch_cost
    eta_msg = f"eta: {str(datetime.timedelta(seconds=int(eta_sec))):s}"
    msg = f"[Train][Epoch {epoch}/{epochs}][Iter: {it}/{iters}]{lr_msg}, {metric_msg}, {time_msg}, {ips_msg}, {eta_msg}"
    return logged(PLSC_2X_FMT, msg, when, datefmt=PLSC_2X_DATEFMT, name="plsc")


def test_plsc_first_release_qps_is_global_per_step():
    text = (
        "\n".join(
            [
                plsc_v1(0, 0, 0.1, 45.3046, 523.4567, "2020-01-28 10:11:02"),
                plsc_v1(0, 200, 0.1, 44.1021, 9408.2391, "2020-01-28 10:11:12"),
                "28 Jan 2020 10:11:13 - INFO - End pass 0, train_loss 44.5",
            ]
        )
        + "\n"
    )
    assert text.splitlines()[1] == "28 Jan 2020 10:11:12 - INFO - Pass:0 batch:200 lr:0.1 loss:44.1021 qps:9408.24"
    parsed = parse_text(text, "plsc.log")
    assert parsed.format.name == "plsc"
    assert [(r.value, r.step, r.epoch, r.line) for r in parsed.records] == [(523.46, 0, 0, 1), (9408.24, 200, 0, 2)]
    second = parsed.records[1]
    assert (second.kind, second.unit, second.metric) == (PER_STEP, "images/s", "throughput")
    assert second.timestamp == utc("2020-01-28 10:11:12") == 1580206272.0


def test_plsc_shifted_acc_line_reads_speed_from_acc1_not_the_loss_under_qps():
    line = plsc_v1_acc_shifted(
        1, 400, 0.1, 44.1021, 9408.2391234, "[0.00390625]", "[0.01171875]", "2020-01-28 10:20:00"
    )
    assert "batch:%d lr:400 loss:0.1 qps:44.10 acc1:9408.2391234 acc5:[0.00390625]" in line
    (record,) = parse_text(line + "\n", "acc.log").records
    assert (record.value, record.step, record.epoch) == (9408.2391234, 400, 1)


@pytest.mark.parametrize("acc", [None, (0.921875, 0.96875)])
def test_plsc_paddle2_static_release_with_millisecond_timestamps(acc):
    line = plsc_v1b(2, 600, 0.2, 12.3456789, 10003.5812, "2021-01-20 10:00:00", 123, acc)
    assert line.startswith("INFO 2021-01-20 10:00:00,123 entry.py:1050] Pass:2 batch:600 lr:0.20000000 ")
    (record,) = parse_text(line + "\n", "v1b.log").records
    assert (record.value, record.step, record.epoch) == (10003.58, 600, 2)
    assert record.timestamp == pytest.approx(utc("2021-01-20 10:00:00") + 0.123, abs=1e-9)


def test_plsc_arcface_paddle_throughput():
    lines = [
        plsc_arcface(45.30451, 0.2, 0, 100, 13.6549, 2607.1012, "2021-09-28 11:08:48", 654),
        plsc_arcface(43.72638, 0.2, 0, 200, 8.7512, 9408.2449, "2021-09-28 11:08:59", 539),
        "Training: 2021-09-28 11:12:23,557 - [lfw][2000]XNorm: 4.269427",
    ]
    assert lines[0] == (
        "Training: 2021-09-28 11:08:48,654 - loss 45.3045, lr: 0.200000, epoch: 0, step: 100, "
        "eta: 13.65 hours, throughput: 2607.10 imgs/sec"
    )
    parsed = parse_text("\n".join(lines) + "\n", "training.log")
    assert parsed.format.name == "plsc"
    assert [(r.value, r.step, r.epoch, r.kind, r.unit) for r in parsed.records] == [
        (2607.1, 100, 0, PER_STEP, "images/s"),
        (9408.24, 200, 0, PER_STEP, "images/s"),
    ]
    assert parsed.records[1].timestamp - parsed.records[0].timestamp == pytest.approx(10.885)


def test_plsc_2x_global_ips_is_detected_as_plsc_not_per_card_paddleclas():
    lines = [
        plsc_2x(1, 25, 100, 5058, 0.2, 45.3045, 0.1, 0.001, 128, 8, "2022-10-12 10:00:00"),
        plsc_2x(1, 25, 110, 5058, 0.2, 44.9, 0.1024, 0.00098, 128, 8, "2022-10-12 10:00:01"),
    ]
    assert lines[0] == (
        "[2022/10/12 10:00:00] plsc INFO: [Train][Epoch 1/25][Iter: 100/5058]lr: 0.200000, "
        "loss: 45.30450, batch_cost: 0.10000s, reader_cost: 0.00100, ips: 10240.00000 images/sec, "
        "eta: 3:30:35"
    )
    text = "\n".join(lines) + "\n"
    assert FORMATS["paddleclas"].detect(text)  # the same 'ips: N images/sec' shape ...
    parsed = parse_text(text, "plsc2.log")
    assert parsed.format.name == "plsc"  # ... but the 'plsc' logger makes it PLSC's global figure
    assert [(r.value, r.step, r.epoch, r.kind) for r in parsed.records] == [
        (10240.0, 100, 1, PER_STEP),
        (10000.0, 110, 1, PER_STEP),
    ]
    assert parsed.records[0].timestamp == utc("2022-10-12 10:00:00")


def test_plsc_mpirun_prefixed_lines_keep_their_rank():
    lines = [mpirun(r, plsc_v1b(0, 200, 0.1, 40.5, 9000.0 + r, "2021-01-20 10:00:00", 5)) for r in (0, 1)]
    parsed = parse_text("\n".join(lines) + "\n", "mpi.log")
    assert parsed.format.name == "plsc"
    assert [(r.rank, r.value, r.step) for r in parsed.records] == [(0, 9000.0, 200), (1, 9001.0, 200)]


# --------------------------------------------------------------------------------------------
# FleetX VGG16
# --------------------------------------------------------------------------------------------

FLEETX_FIT = "epoch id: %d, step%d, train_loss: %f, total time cost = %f, step per second: %f, speed: %f"
FLEETX_FIT_OLD = "worker_index: %d, step%d, train_loss: %f, total time cost = %f, step per second: %f, speed: %f"
FLEETX_DOCS = "worker_index: %d, step%d cost = %f, total time cost = %f, step per second: %f, speed: %f"


def fleetx_fit(epoch_id, step, loss, durations, start_step=10, fmt=FLEETX_FIT):
    total_time = sum(durations)
    return fmt % (epoch_id, step, loss, total_time, (step - start_step) / total_time, 1 / durations[-1])


def test_fleetx_speed_is_steps_per_second_per_step():
    durations = [0.5237, 0.5191, 0.5302]
    lines = [fleetx_fit(0, 11 + i, 6.9077552 - i / 100, durations[: i + 1]) for i in range(3)]
    assert lines[0] == (
        "epoch id: 0, step11, train_loss: 6.907755, total time cost = 0.523700, "
        "step per second: 1.909490, speed: 1.909490"
    )
    parsed = parse_text("\n".join(lines) + "\n", "vgg16.log")
    assert parsed.format.name == "fleetx-vgg"
    assert [(r.value, r.step, r.epoch) for r in parsed.records] == [
        (1.90949, 11, 0),
        (1.926411, 12, 0),
        (1.886081, 13, 0),
    ]
    first = parsed.records[0]
    assert (first.kind, first.unit, first.metric, first.timestamp, first.rank) == (
        PER_STEP,
        "steps/s",
        "speed",
        None,
        None,
    )


@pytest.mark.parametrize("fmt", [FLEETX_FIT_OLD, FLEETX_DOCS])
def test_fleetx_worker_index_releases(fmt):
    line = fleetx_fit(3, 25, 6.5, [0.25, 0.5], fmt=fmt)
    assert line.endswith("total time cost = 0.750000, step per second: 20.000000, speed: 2.000000")
    (record,) = parse_text(line + "\n", "w.log").records
    assert (record.value, record.step, record.epoch, record.rank) == (2.0, 25, None, 3)


def test_fleetx_mpirun_rank_wins_over_worker_index():
    line = mpirun(5, fleetx_fit(5, 12, 6.5, [0.5, 0.5], fmt=FLEETX_FIT_OLD))
    (record,) = parse_text(line + "\n", "m.log").records
    assert (record.rank, record.value) == (5, 2.0)


# --------------------------------------------------------------------------------------------
# PaddlePaddle models 1.8 image classification
# --------------------------------------------------------------------------------------------

MODELS18_TRAIN = "[Pass {0}, train batch {1}] \tloss {2}, acc1 {3}, acc{7} {4}, lr {5}, elapse {6}"
MODELS18_MIXUP = "[Pass {0}, train batch {1}] \tloss {2}, lr {3}, elapse {4}"
MODELS18_TEST = "[Pass {0}, test  batch {1}] \tloss {2}, acc1 {3}, acc{6} {4}, elapse {5}"
MODELS_OLD_TRAIN = "[Pass {0}, train batch {1}] \tloss {2}, acc1 {3}, acc5 {4}, lr {5}, elapse {6}"


def models18(pass_id, batch_id, loss, acc1, acc5, lr, elapse, class_dim=1000):
    return MODELS18_TRAIN.format(
        pass_id,
        batch_id,
        "%.5f" % loss,
        "%.5f" % acc1,
        "%.5f" % acc5,
        "%.5f" % lr,
        "%2.4f sec" % elapse,
        min(class_dim, 5),
    )


def basic_config(msg):  # logging.basicConfig(level=logging.INFO) in utils/utility.py
    return logged(logging.BASIC_FORMAT, msg, "2020-07-29 12:00:00", name="utils.utility")


def test_models18_elapse_is_seconds_per_batch_and_never_inverted():
    lines = [
        basic_config(models18(0, i, 6.9 - i / 1000, 0.0, 0.0078125, 0.1, e))
        for i, e in ((0, 2.345678), (1, 0.36181), (2, 0.3587))
    ]
    lines.append(
        basic_config(MODELS18_TEST.format(0, 0, "%.5f" % 6.9, "%.5f" % 0.0, "%.5f" % 0.0, "%2.4f sec" % 0.1, 5))
    )
    lines.append(basic_config("[End pass 0]\ttrain_loss 6.89900, train_acc1 0.00000, train_acc5 0.00781"))
    assert lines[1] == (
        "INFO:utils.utility:[Pass 0, train batch 1] \tloss 6.89900, acc1 0.00000, "
        "acc5 0.00781, lr 0.10000, elapse 0.3618 sec"
    )
    parsed = parse_text("\n".join(lines) + "\n", "r50_b128_fp32_1.log")
    assert parsed.format.name == "paddle-models-1.8"
    assert [(r.value, r.step, r.epoch) for r in parsed.records] == [(2.3457, 0, 0), (0.3618, 1, 0), (0.3587, 2, 0)]
    assert {(r.kind, r.unit, r.metric, r.timestamp) for r in parsed.records} == {(PER_STEP, "s", "elapse", None)}


def test_models18_variants_mixup_small_class_dim_old_print_and_asctime():
    mixup = MODELS18_MIXUP.format(1, 30, "%.5f" % 4.2, "%.5f" % 0.05, "%2.4f sec" % 0.41234)
    small = models18(1, 40, 1.0, 0.5, 1.0, 0.05, 0.2, class_dim=2)
    assert "acc2 1.00000" in small
    old = MODELS_OLD_TRAIN.format(1, 50, "%.5f" % 4.0, "%.5f" % 0.1, "%.5f" % 0.3, "%.5f" % 0.05, "%2.2f sec" % 0.4567)
    stamped = logged(
        "%(asctime)s-%(levelname)s: %(message)s",
        models18(1, 60, 4.0, 0.1, 0.3, 0.05, 0.3712),
        "2020-07-29 12:34:56",
        msecs=789,
    )
    assert stamped.startswith("2020-07-29 12:34:56,789-INFO: [Pass 1, train batch 60]")
    parsed = parse_text("\n".join([mixup, small, old, stamped]) + "\n", "v.log")
    assert parsed.format.name == "paddle-models-1.8"
    assert [(r.value, r.step) for r in parsed.records] == [(0.4123, 30), (0.2, 40), (0.46, 50), (0.3712, 60)]
    assert [r.timestamp for r in parsed.records] == [None, None, None, utc("2020-07-29 12:34:56") + 0.789]


def test_models18_zero_elapse_is_no_duration():
    with pytest.raises(ParseError, match="not a duration"):
        parse_text(models18(0, 5, 6.9, 0.0, 0.0, 0.1, 0.00001) + "\n", "z.log")


def test_models18_mpirun_prefixed():
    line = mpirun(0, basic_config(models18(0, 10, 6.8, 0.0, 0.01, 0.1, 0.3456)))
    (record,) = parse_text(line + "\n", "m.log").records
    assert (record.rank, record.value, record.step) == (0, 0.3456, 10)


# --------------------------------------------------------------------------------------------
# OneFlow-Benchmark
# --------------------------------------------------------------------------------------------

ONEFLOW_LOSS = "{}: epoch {}, iter {}, loss: {:.6f}, top_1: {:.6f}, top_k: {:.6f}, samples/s: {:.3f}"
ONEFLOW_NOLOSS = "{}: epoch {}, iter {}, top_1: {:.6f}, top_k: {:.6f}, samples/s: {:.3f}"
ONEFLOW_COMPRESSION = (
    "{}: epoch {}, iter {}, loss: {:.6f}, accuracy(top1): {:.6f}, accuracy(topk): {:.6f}, samples/s: {:.3f}"
)
ONEFLOW_FIRST = "epoch {}, iter {}, loss: {:.6f}, accuracy: {:.6f}, samples/s: {:.3f}"


def printed(*values) -> str:  # print(a, b): str() of each, joined by a space
    return " ".join(str(v) for v in values)


def test_oneflow_samples_per_second_is_global_with_print_time():
    lines = [
        printed(ONEFLOW_LOSS.format("train", 0, 20, 7.0870041, 0.0, 0.0, 3988.8912), 1597933942.9863544),
        printed(ONEFLOW_LOSS.format("train", 0, 120, 1.0504991, 1.0, 1.0, 5917.5834), 1597933977.6064055),
        printed(ONEFLOW_NOLOSS.format("validation", 0, 50, 0.7, 0.9, 12000.1234), 1597934000.5),
    ]
    assert lines[0] == (
        "train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, "
        "samples/s: 3988.891 1597933942.9863544"
    )
    parsed = parse_text("\n".join(lines) + "\n", "resnet50_b128_fp32_1.log")
    assert parsed.format.name == "oneflow"
    assert [(r.value, r.step, r.epoch, r.timestamp) for r in parsed.records] == [
        (3988.891, 20, 0, 1597933942.9863544),
        (5917.583, 120, 0, 1597933977.6064055),
    ]
    assert {(r.kind, r.unit, r.metric) for r in parsed.records} == {(PER_STEP, "samples/s", "samples/s")}


def test_oneflow_release_variants():
    lines = [
        ONEFLOW_LOSS.format("train", 1, 100, 6.5, 0.01, 0.05, 1234.5678),
        ONEFLOW_NOLOSS.format("train", 1, 200, 0.01, 0.05, 1240.25),
        ONEFLOW_COMPRESSION.format("train", 1, 300, 6.4, 0.02, 0.06, 1250.0),
        ONEFLOW_FIRST.format(2, 400, 6.3, 0.03, 1260.1254),
    ]
    parsed = parse_text("\n".join(lines) + "\n", "v.log")
    assert parsed.format.name == "oneflow"
    assert [(r.value, r.step, r.epoch, r.timestamp) for r in parsed.records] == [
        (1234.568, 100, 1, None),
        (1240.25, 200, 1, None),
        (1250.0, 300, 1, None),
        (1260.125, 400, 2, None),
    ]


def test_oneflow_placeholder_minus_one_is_not_a_measurement():
    line = ONEFLOW_LOSS.format("train", 0, 0, 6.9, 0.0 / 128, -1, -1)
    assert line.endswith("top_k: -1.000000, samples/s: -1.000")
    with pytest.raises(ParseError, match="placeholder"):
        parse_text(line + "\n", "graph.log")


def test_oneflow_mpirun_prefixed():
    line = mpirun(0, printed(ONEFLOW_LOSS.format("train", 0, 20, 7.0, 0.0, 0.0, 3000.5), 1597933942.5))
    (record,) = parse_text(line + "\n", "m.log").records
    assert (record.rank, record.value, record.timestamp) == (0, 3000.5, 1597933942.5)


# --------------------------------------------------------------------------------------------
# NVLOG (older NGC TensorFlow ResNet-50)
# --------------------------------------------------------------------------------------------


def nvlog(key, value, secs, call_site="benchmark_hooks.py:62", model="resnet", prefix=""):
    """_ParentStdOutBackend.log_stdout of dllogger 0.2.3."""
    msg = key if value is None else f"{key}: {json.dumps(value)}"
    return "{prefix}{token}v{ver} {model} {secs:.9f} ({call_site}) {msg}".format(
        prefix=prefix, token=":::NVLOG", ver="0.2.3", secs=secs, model=model, call_site=call_site, msg=msg
    )


def nvlog_benchmark_run(t0=1556214443.0):
    lines = [nvlog("Starting Model Training...", None, t0 - 5, "runner.py:480")]
    for i, (step, ips) in enumerate(((20, 1234.5678901234), (30, 1240.1234567891), (40, 1228.75))):
        lines.append(nvlog("iteration", step, t0 + i, "benchmark_hooks.py:61"))
        lines.append(nvlog("total_ips", ips, t0 + i + 0.125, "benchmark_hooks.py:62"))
    lines.append(nvlog("Average total_ips", 1234.4637822375, t0 + 10, "benchmark_hooks.py:71"))
    return lines


def test_nvlog_total_ips_per_step_with_iteration_and_average_summary():
    lines = nvlog_benchmark_run()
    assert lines[2] == ":::NVLOGv0.2.3 resnet 1556214443.125000000 (benchmark_hooks.py:62) total_ips: 1234.5678901234"
    parsed = parse_text("\n".join(lines) + "\n", "nvlog.log")
    assert parsed.format.name == "nvlog-tf"
    steps = only(parsed.records, kind=PER_STEP)
    assert [(r.value, r.step, r.line) for r in steps] == [
        (1234.5678901234, 20, 3),
        (1240.1234567891, 30, 5),
        (1228.75, 40, 7),
    ]
    assert steps[0].timestamp == 1556214443.125 and steps[0].unit == "images/s"
    assert {(r.metric, r.epoch) for r in steps} == {("total_ips", None)}
    (summary,) = only(parsed.records, kind=SUMMARY)
    assert (summary.value, summary.metric, summary.step, summary.timestamp) == (
        1234.4637822375,
        "Average total_ips",
        None,
        1556214453.0,
    )


def test_nvlog_training_hook_imgs_per_sec_and_evaluation_left_out():
    t0 = 1605627653.398838758  # the seconds of a real run's lines (DLE RN50 TF README of the time)
    lines = [
        nvlog("iteration", 0, t0, "training_hooks.py:100"),
        nvlog("imgs_per_sec", 37.5667719118656, 1605627653.400741577, "training_hooks.py:101"),
        nvlog("cross_entropy", 9.02121639251709, 1605627653.402500391, "training_hooks.py:102"),
        nvlog("iteration", 10, t0 + 4, "training_hooks.py:100"),
        nvlog("imgs_per_sec", 812.25, t0 + 4.001, "training_hooks.py:101"),
        nvlog("Starting Model Evaluation...", None, t0 + 60, "runner.py:560"),
        nvlog("iteration", 20, t0 + 61, "benchmark_hooks.py:61"),
        nvlog("total_ips", 2500.5, t0 + 61.01, "benchmark_hooks.py:62"),
    ]
    assert (
        lines[1] == ":::NVLOGv0.2.3 resnet 1605627653.400741577 (training_hooks.py:101) imgs_per_sec: 37.5667719118656"
    )
    parsed = parse_text("\n".join(lines) + "\n", "train.log")
    assert parsed.format.name == "nvlog-tf"
    assert [(r.value, r.step, r.kind, r.metric) for r in parsed.records] == [
        (37.5667719118656, 0, PER_STEP, "total_ips"),
        (812.25, 10, PER_STEP, "total_ips"),
    ]
    assert parsed.records[0].timestamp == 1605627653.400741577


def test_nvlog_inference_only_log_is_an_error():
    lines = [
        nvlog("Starting Model Evaluation...", None, 1.0e9, "runner.py:560"),
        nvlog("iteration", 20, 1.0e9 + 1),
        nvlog("total_ips", 2500.5, 1.0e9 + 1.01),
    ]
    with pytest.raises(ParseError, match="only evaluation"):
        parse_text("\n".join(lines) + "\n", "infer.log")


def test_nvlog_mpirun_prefixed_ranks_keep_their_own_iteration():
    lines = [
        mpirun(0, nvlog("iteration", 20, 1.5e9)),
        mpirun(1, nvlog("iteration", 21, 1.5e9)),
        mpirun(0, nvlog("total_ips", 1000.0, 1.5e9 + 1)),
        mpirun(1, nvlog("total_ips", 1001.0, 1.5e9 + 1)),
    ]
    parsed = parse_text("\n".join(lines) + "\n", "mpi.log")
    assert [(r.rank, r.step, r.value) for r in parsed.records] == [(0, 20, 1000.0), (1, 21, 1001.0)]


# --------------------------------------------------------------------------------------------
# Shared behaviour: non-finite values, logs cut mid-line, detection
# --------------------------------------------------------------------------------------------

FULL_LINES = {
    "plsc": plsc_v1b(0, 200, 0.1, 40.123456, 9408.2391, "2021-01-20 10:00:00", 0),
    "fleetx-vgg": fleetx_fit(0, 11, 6.9, [0.5237]),
    "paddle-models-1.8": models18(0, 10, 6.9, 0.0, 0.0, 0.1, 0.36181),
    "oneflow": printed(ONEFLOW_LOSS.format("train", 0, 20, 7.0870041, 0.0, 0.0, 3988.8912), 1597933942.9863544),
    "nvlog-tf": nvlog("total_ips", 1234.5678901234, 1556214443.0),
}
CUT_AT = {  # (marker, characters of it kept)
    "plsc": ("qps:9408.24", len("qps:9408.2")),
    "fleetx-vgg": ("speed: 1.909490", len("speed: 1.90")),
    "paddle-models-1.8": ("elapse 0.3618 sec", len("elapse 0.36")),
    "oneflow": ("samples/s: 3988.891", len("samples/s: 398")),
    "nvlog-tf": ("total_ips: 1234.5678901234", len("total_ips: 1234.5")),
}


@pytest.mark.parametrize("name", sorted(CUT_AT))
def test_log_cut_mid_throughput_line_is_an_error(name):
    marker, keep = CUT_AT[name]
    complete = FULL_LINES[name] + "\n"
    assert parse_text(complete, "ok.log").records  # the whole line is fine
    cut = complete[: complete.index(marker) + keep]
    with pytest.raises(ParseError, match="cut mid-line"):
        parse_text(complete + cut, "cut.log", name)
    with pytest.raises(ParseError, match="cut mid-line"):
        parse_text(complete + cut, "cut.log")


def test_cut_line_of_the_plsc_2x_and_oneflow_trailing_time():
    line = plsc_2x(1, 25, 100, 5058, 0.2, 45.3, 0.1, 0.001, 128, 8, "2022-10-12 10:00:00")
    with pytest.raises(ParseError, match="cut mid-line"):
        parse_text(line[: line.index("ips: ") + len("ips: 10240.0")], "cut.log", "plsc")
    # a OneFlow line ending in print()'s time.time() is complete only with its newline
    with pytest.raises(ParseError, match="cut mid-line"):
        parse_text(FULL_LINES["oneflow"][:-3], "cut.log", "oneflow")


SAMPLES = {
    "plsc": [plsc_v1(0, 200, 0.1, 44.1, 9408.2391, "2020-01-28 10:11:12")],
    "fleetx-vgg": [fleetx_fit(0, 11, 6.9, [0.5237])],
    "paddle-models-1.8": [basic_config(models18(0, 10, 6.9, 0.0, 0.0, 0.1, 0.36181))],
    "oneflow": [FULL_LINES["oneflow"]],
    "nvlog-tf": nvlog_benchmark_run(),
}


NAN_LINES = {
    "plsc": plsc_v1b(0, 200, 0.1, float("nan"), float("nan"), "2021-01-20 10:00:00", 0),
    # CallBackLogging: `except ZeroDivisionError: speed_total = float('inf')`
    "plsc-arcface": plsc_arcface(45.3, 0.2, 0, 100, 1.0, float("inf"), "2021-09-28 11:08:48", 0),
    "fleetx-vgg": FLEETX_FIT % (0, 11, float("nan"), 0.5, 2.0, float("nan")),
    "paddle-models-1.8": models18(0, 10, 6.9, 0.0, 0.0, 0.1, float("nan")),
    "oneflow": ONEFLOW_LOSS.format("train", 0, 20, 7.0, 0.0, 0.0, float("nan")),
    "nvlog-tf": nvlog("total_ips", float("nan"), 1.5e9),
}


@pytest.mark.parametrize("case", sorted(NAN_LINES))
def test_non_finite_throughput_is_an_error(case):
    name = case.split("-arcface")[0]
    good = "\n".join(SAMPLES[name]) + "\n"
    # (a line whose loss is not finite either says that first: the run trained on it)
    with pytest.raises(ParseError, match="diverged or failed|non-finite loss") as info:
        parse_text(good + NAN_LINES[case] + "\n", f"{case}.log")  # detected from the good lines
    assert info.value.line == len(SAMPLES[name]) + 1
    with pytest.raises(ParseError, match="diverged or failed|non-finite loss"):
        parse_text(NAN_LINES[case] + "\n", f"{case}.log", name)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_auto_detection_chooses_the_format(name):
    text = "noise before the run\n" + "\n".join(SAMPLES[name]) + "\nnoise after\n"
    assert detect_format(text, "x.log").name == name
    assert [f for f in NEW_FORMATS if FORMATS[f].detect(text)] == [name]  # no other new format claims it
    assert not [f for f in ORIGINAL_FORMATS | PERF_MODELS_FORMATS if FORMATS[f].detect(text)]


def test_new_formats_are_registered_with_distinct_priorities():
    assert set(FORMATS) == ORIGINAL_FORMATS | NEW_FORMATS | PERF_MODELS_FORMATS | LAMBDA_FORMATS | {"kitlog"}
    priorities = [f.priority for f in FORMATS.values()]
    assert len(set(priorities)) == len(priorities)
    for name in NEW_FORMATS:
        fmt = get_format(name)
        assert fmt.series_kind == PER_STEP and fmt.default_metric and fmt.description


def test_no_published_fixture_is_detected_as_a_new_format(published):
    # perf-models/ holds BERT/Transformer/HRNet/DeepLabV3+ logs in formats of their own (PERF_MODELS_FORMATS)
    files = [p for p in sorted(published.rglob("*")) if p.is_file() and p.suffix not in (".md", ".yaml")
             and "perf-models" not in p.relative_to(published).parts]
    assert len(files) >= 50
    for path in files:
        text = read_log_text(path)
        assert detect_format(text, path).name in ORIGINAL_FORMATS, path
        assert not [f for f in NEW_FORMATS if FORMATS[f].detect(text)], path


def test_parse_speed_on_a_large_log_stays_linear():
    """Needles with literal prefixes: ten times the other lines take about ten times as long to parse, never the
    hundred a search tried at every character of every line would (a ratio of this process's CPU seconds, the best
    of five for each size: time spent waiting for a core on a loaded host is not counted)."""
    line = "I0826 15:13:29.256277 140405777909504 some_module.py:133] a line that is not throughput\n"

    def seconds(name: str, lines: list[str], filler: int) -> float:
        text = line * filler + "\n".join(lines) + "\n"
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            parsed = parse_text(text, "big.log", name)
            best = min(best, time.process_time() - start)
        assert parsed.records, name
        return best

    for name, lines in SAMPLES.items():
        small, large = seconds(name, lines, 20_000), seconds(name, lines, 200_000)
        assert large < 30 * max(small, 1e-4), (name, small, large)


@pytest.mark.parametrize("line, said", [
    ("DLL 2022-06-13 - (0, 12) train.loss : nan train.ips : 120.0", "train.loss : nan"),
    ('{"step": 3, "loss": NaN, "ips": 12}', 'loss": NaN'),
    ("[Train][Epoch 1/2][Iter: 3/9]lr: 0.1, Loss: inf, top1: 0.0", "Loss: inf"),
    ("Epoch[0] Batch [20] Train-loss=-Infinity", "Train-loss=-Infinity"),
    ("step 3, total_loss: 'NAN'", "total_loss: 'NAN"),
])
def test_a_non_finite_loss_is_found_in_each_spelling(line, said):
    text = "INFO: loss: 6.9 at step 1, info=inf elsewhere, cross: nan, boss=nan\n" + line + "\n"
    with pytest.raises(ParseError, match="no figure: the run trained on a non-finite loss") as info:
        refuse_non_finite_loss(text, "x.log")
    assert info.value.line == 2 and f"({said})" in str(info.value)
    refuse_non_finite_loss(text.replace(line, "loss: 6.5, Loss=inference, LOSS: nano"), "x.log")  # none here


# --------------------------------------------------------------------------------------------
# A loss printed as NaN or infinite: each format searches the lines it reads (LogFormat.reads_loss)
# --------------------------------------------------------------------------------------------

# (format, real log, its throughput line's loss as printed, the same loss NaN or infinite, what the error names)
REAL_LOSS_LINES = [
    ("dle-pytorch", "perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt", r"train\.loss : [\d.]+", "train.loss : nan",
     "train.loss : nan"),
    ("dle-mxnet", "perf-v100/mxnet/mxnet_gpu1_amp_bs256.txt", r"train\.loss : [\d.]+", "train.loss : inf",
     "train.loss : inf"),
    ("dle-bert-pytorch", "perf-models/Bert/OtherReports/PyTorch/logs/A100_LOG/"
     "bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs128_gpu1.log", r"final_loss : [\d.]+",
     "final_loss : nan", "final_loss : nan"),
    ("dle-bert-tf1", "perf-models/Bert/OtherReports/TensorFlow/logs/A100_LOG/"
     "tf_bert_pretraining_lamb_base_fp16_bs128_gpu1.log", r"total_loss : [\d.]+", "total_loss : -inf",
     "total_loss : -inf"),
    ("paddleclas", "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log", r"loss: +[\d.]+", "loss:     nan",
     "loss:     nan"),
    ("paddlenlp-bert", "perf-models/Bert/logs/A100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C1_log",
     r"loss: [\d.]+", "loss: nan", "loss: nan"),
    ("paddlenlp-transformer", "perf-models/Transformer/logs/A100_LOG/"
     "PaddleNLP_transformer_big_bs5120_pure_fp16_DP_N1C1_log", r"avg loss: [\d.]+, normalized loss: [\d.]+",
     "avg loss: nan, normalized loss: nan", "loss: nan"),
    ("paddleseg", "perf-models/HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C1_log", r"loss: [\d.]+",
     "loss: inf", "loss: inf"),
    ("mmseg", "perf-models/DeepLabV3P/OtherReports/PyTorch/logs/pytorch/deeplabv3p_c1_fp16.log", r"loss: [\d.]+$",
     "loss: nan", "loss: nan"),
]


@pytest.mark.parametrize(("name", "log", "loss", "broken", "said"), REAL_LOSS_LINES, ids=[c[0] for c in REAL_LOSS_LINES])
def test_a_non_finite_loss_on_a_real_throughput_line_is_refused_naming_its_line(published, name, log, loss, broken,
                                                                                  said):
    text = read_log_text(published / log)
    lines = text.split("\n")
    with_loss = [r.line for r in parse_text(text, log, name).records if re.search(loss, lines[r.line - 1])]
    at = with_loss[len(with_loss) // 2]  # a throughput line mid-run
    lines[at - 1] = re.sub(loss, broken, lines[at - 1], count=1)
    for fmt in (name, "auto"):
        with pytest.raises(ParseError, match=re.escape(f"no figure: the run trained on a non-finite loss ({said})")
                           ) as refused:
            parse_text("\n".join(lines), log, fmt)
        assert refused.value.line == at


def test_fairseq_s_avg_loss_nan_gives_the_published_figure_as_it_always_did(published):
    """The published fp16 1-GPU logs print 'avg loss nan' (no ':') 529 and 450 times: a few intervals between finite
    losses, then every one to the end (validation loss nan, BLEU 0.00). Their published figures are re-derived from
    those lines (kit/claims/perf-models.yaml), so they are read, never refused; the check does not read that shape."""
    for gpu, count in (("A100", 529), ("V100", 450)):
        log = published / f"perf-models/Transformer/OtherReports/PyTorch/logs/{gpu}_LOG/transformer_pytorch_bs5120_fp16_gpu1"
        text = read_log_text(log)
        lines = text.split("\n")
        assert text.count("|avg loss nan |") == count and "UNCASED BLEU 0.00" in text
        skipped = [i for i, line in enumerate(lines, 1) if "|avg loss nan |" in line and "|tokens/s " in line]
        assert len(skipped) == count - 1  # (and the end-of-epoch line, 'step ()', no figure)
        parsed = parse_text(text, log)
        assert parsed.format.name == "dle-transformer-pytorch"
        assert set(skipped) <= {r.line for r in parsed.records}
        assert all("avg loss nan" in lines[r.line - 1] for r in parsed.records[-300:])  # to the end


def test_tf2_keras_loss_after_the_throughput_lines_is_refused(published):
    """TimeHistory lines carry no loss: Keras prints the epoch's at its end and the run's in 'Run stats', after the
    last one; either printed as NaN refuses the log, naming its line."""
    log = published / "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log"
    lines = read_log_text(log).split("\n")
    epoch_end = next(i for i, line in enumerate(lines) if line.startswith("600/600 - ")) + 1
    stats = next(i for i, line in enumerate(lines) if "'loss': 10.46327018737793" in line) + 1
    assert epoch_end < stats and "TimeHistory: " not in "".join(lines[epoch_end:])
    for at, old, new in ((epoch_end, "loss: 10.4633", "loss: nan"), (stats, "'loss': 10.46327018737793", "'loss': nan")):
        broken = lines.copy()
        broken[at - 1] = broken[at - 1].replace(old, new)
        with pytest.raises(ParseError, match="no figure: the run trained on a non-finite loss") as refused:
            parse_text("\n".join(broken), log)
        assert refused.value.line == at


def test_dle_tf1_s_lines_print_no_loss_and_one_on_an_item_line_is_refused(published):
    """The NGC TF1 ResNet benchmark's lines are '(0, 210) total_ips : 415.71' (a PARAMETER line states a setting):
    no loss. A DLLogger line it reads that carries one beside its figure is searched like dle-pytorch's."""
    text = read_log_text(published / "perf-v100/tensorflow/tf_gpu1_amp_bs256.txt")
    assert "loss" not in "".join(line for line in text.split("\n") if "PARAMETER" not in line)
    line = "DLL 2022-11-24 04:01:47.584573 - (0, 210) total_ips : 1222.29 total_loss : nan\n"
    with pytest.raises(ParseError, match=r"non-finite loss \(total_loss : nan\)") as refused:
        parse_text(text + line, "tf1.log", "dle-tf1")
    assert refused.value.line == text.count("\n") + 1


def test_a_non_finite_loss_on_the_harness_s_step_is_refused(published):
    log = FIXTURES / "gpu-runs/h200-20261128/suite-interrupted/logs/torch/resnet50/bz256/1n1g/resnet50_b256_tf32_1.log"
    lines = log.read_text().split("\n")
    at = [i for i, line in enumerate(lines, 1) if '"event": "step"' in line][3]
    lines[at - 1] = re.sub(r'"loss": [\d.]+', '"loss": NaN', lines[at - 1])
    with pytest.raises(ParseError, match=r'non-finite loss \(loss": NaN\)') as refused:
        parse_text("\n".join(lines), log)
    assert refused.value.line == at


NAN = float("nan")
# (format, good lines, the same run's line whose loss is NaN or infinite, refused): the tools' own format strings
LOSS_LINES = [
    ("plsc", [plsc_v1(0, 200, 0.1, 44.1, 9408.2391, "2020-01-28 10:11:12")],
     plsc_v1(0, 400, 0.1, NAN, 9408.2391, "2020-01-28 10:11:22"), True),
    ("plsc", [plsc_v1b(0, 200, 0.1, 40.123456, 9408.2391, "2021-01-20 10:00:00", 0)],
     plsc_v1b(0, 400, 0.1, float("inf"), 9408.2391, "2021-01-20 10:00:10", 0), True),
    ("plsc", [plsc_2x(1, 25, 100, 5058, 0.2, 45.3, 0.1, 0.001, 128, 8, "2022-10-12 10:00:00")],
     plsc_2x(1, 25, 110, 5058, 0.2, NAN, 0.1, 0.001, 128, 8, "2022-10-12 10:00:01"), True),
    # arcface_paddle's 'loss nan,' (no ':'): not read as a loss, as before
    ("plsc", [plsc_arcface(45.3, 0.2, 0, 100, 1.0, 2607.1, "2021-09-28 11:08:48", 0)],
     plsc_arcface(NAN, 0.2, 0, 200, 1.0, 2607.1, "2021-09-28 11:08:58", 0), False),
    ("fleetx-vgg", [fleetx_fit(0, 11, 6.9, [0.5237])], fleetx_fit(0, 12, NAN, [0.5237, 0.5]), True),
    ("oneflow", [ONEFLOW_LOSS.format("train", 0, 20, 7.0, 0.0, 0.0, 3988.9)],
     ONEFLOW_LOSS.format("train", 0, 40, NAN, 0.0, 0.0, 3988.9), True),
    # '\tloss nan,' (no ':'): not read as a loss, as before
    ("paddle-models-1.8", [models18(0, 10, 6.9, 0.0, 0.0, 0.1, 0.36181)], models18(0, 20, NAN, 0.0, 0.0, 0.1, 0.36),
     False),
    ("dle-transformerxl-pytorch", ["| epoch   1 step       10 | batches     10 / 2585 | lr 0.000e+00 | ms/batch 948.3 "
                                   "| tok/s   57889 | loss 12.55 | ppl 282432.58"],
     "| epoch   1 step       20 | batches     20 / 2585 | lr 0.000e+00 | ms/batch 294.0 | tok/s  135858 | loss nan "
     "| ppl nan", False),
    # the formats whose figure lines carry no loss: the whole text searched (the loss on a line of its own)
    ("nvlog-tf", nvlog_benchmark_run(), nvlog("total_loss", NAN, 1556214453.0, "training_hooks.py:101"), True),
    ("dle-tts-pytorch", ["DLL 2022-11-30 06:50:54.604540 - (0, 0) train_items_per_sec : 17214.87 items/s"],
     "DLL 2022-11-30 06:51:05.869919 - (1, 0) train_loss : nan ", True),
    # GNMT's 'Loss/tok nan' (no ':'): not read as a loss, as before
    ("dle-gnmt-pytorch", ["0: Performance: Epoch: 0\tTraining: 1161371 Tok/s\tValidation: 1192748 Tok/s"],
     "0: TRAIN [1][10/21]\tTime 0.294 (0.295)\tData 1.1e-04 (1.2e-04)\tTok/s 135858 (135000)\tLoss/tok nan (nan)", False),
]


@pytest.mark.parametrize(("name", "good", "line", "refused"), LOSS_LINES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LOSS_LINES)])
def test_a_non_finite_loss_in_each_format_s_own_line_shape(name, good, line, refused):
    text = "\n".join([*good, line, *good]) + "\n"
    assert parse_text("\n".join(good) + "\n", "good.log").format.name == name
    if not refused:
        assert parse_text(text, "nan.log", name).records
        return
    with pytest.raises(ParseError, match="no figure: the run trained on a non-finite loss") as info:
        parse_text(text, "nan.log", name)
    assert info.value.line == len(good) + 1


def test_a_loss_on_a_line_the_format_does_not_read_is_not_searched(published):
    """reads_loss: the lines a format reads are searched, not the whole log; a format whose lines carry none (here
    NVLOG's) has its whole text searched."""
    log = published / "perf-models/HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C1_log"
    text = read_log_text(log)
    echo = "the last run's loss: nan (not this run's)\n"
    assert parse_text(echo + text, log).records == [r._replace(line=r.line + 1) for r in parse_text(text, log).records]
    nvlog_text = "\n".join(nvlog_benchmark_run()) + "\n"
    with pytest.raises(ParseError, match="non-finite loss") as refused:
        parse_text(echo + nvlog_text, "nvlog.log")
    assert refused.value.line == 1


def test_a_log_that_gives_no_figure_and_trained_on_nan_is_refused_for_the_nan():
    """A format that finds no throughput line (or refuses one) in a log holding a non-finite loss anywhere says the
    loss, the first in the text, as before the check moved into the formats."""
    text = "epoch 1 loss: nan\n" + plsc_v1(0, 200, 0.1, 44.1, 9408.2391, "2020-01-28 10:11:12") + "\n"
    assert parse_text(text, "x.log", "plsc").records  # the line plsc reads holds a finite loss
    for fmt in ("paddleseg", "dle-pytorch", "tf2-keras-timehistory"):
        with pytest.raises(ParseError, match=r"non-finite loss \(loss: nan\)") as refused:
            parse_text(text, "x.log", fmt)
        assert refused.value.line == 1
