"""Parsers on the real published logs, and on real lines in the variants other releases print."""

from __future__ import annotations

import json

import pytest

from kit.core.yamlio import load_yaml
from kit.results.parsers import (
    FORMATS,
    PER_CARD,
    PER_EPOCH,
    PER_STEP,
    SUMMARY,
    ParseError,
    detect_format,
    parse_log,
    parse_text,
)
from kit.results.parsers.lines import split_rank_fragments


def claims(published):
    return load_yaml(published / "expected.yaml")


def test_every_published_log_is_detected_as_its_declared_format(published):
    data = claims(published)
    for entry in data["logs"]:
        assert parse_log(published / entry["file"]).format.name == entry["format"], entry["file"]
    for log in sorted((published / "dlperf-tf2-resnet50").rglob("*.log")):
        assert parse_log(log).format.name == "tf2-keras-timehistory"


def test_tf2_timehistory_records(published):
    parsed = parse_log(published / "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log")
    values = [r.value for r in parsed.records]
    assert values == [110.12, 327.08, 324.9, 327.4, 318.56, 321.57]
    assert [r.step for r in parsed.records] == [100, 200, 300, 400, 500, 600]
    first = parsed.records[0]
    assert first.line == 322 and first.kind == PER_STEP and first.unit == "images/s"
    # glog time '0826 15:12:50.113950' -> 15:13:29.256277 a line later: 39.14 s apart
    assert parsed.records[1].timestamp - first.timestamp == pytest.approx(39.142327)


def test_dle_pytorch_steps_epoch_and_summary(published):
    parsed = parse_log(published / "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt")
    total = [r for r in parsed.records if r.metric == "train.total_ips"]
    steps = [r for r in total if r.kind == PER_STEP]
    assert len(steps) == 99 and steps[0].step == 1 and steps[0].epoch == 0
    assert steps[1].value == 365.85 and steps[1].line == 10
    assert [r.value for r in total if r.kind == PER_EPOCH] == [366.74]
    assert [r.value for r in total if r.kind == SUMMARY] == [366.74]
    compute = [r.value for r in parsed.records if r.metric == "train.compute_ips" and r.kind == PER_STEP]
    assert compute[:2] == [25.22, 366.98]


def test_dle_pytorch_mpirun_prefixed_summary(published):
    parsed = parse_log(published / "perf-v100/pytorch/pytorch_gpu32_fp32_bs256.txt")
    summary = [r for r in parsed.records if r.kind == SUMMARY]
    assert [(r.metric, r.value, r.rank) for r in summary] == [
        ("train.total_ips", 10523.32, 0),
        ("train.compute_ips", 10543.3, 0),
    ]
    assert summary[0].unit == "images/s"  # 'img/s' in this release


def test_dle_tf1_steps_and_throughput(published):
    parsed = parse_log(published / "perf-v100/tensorflow/tf_gpu1_fp32_bs256.txt")
    steps = [r for r in parsed.records if r.kind == PER_STEP]
    assert steps[0].step == 200 and steps[0].epoch == 0 and steps[0].value == 417.7218198532487
    assert [r.value for r in parsed.records if r.kind == SUMMARY] == [416.1881084364622]
    last = parse_log(published / "perf-v100/tensorflow/tf_gpu32_fp32_bs256.txt").records[-1]
    assert (last.kind, last.metric, last.value, last.rank) == (SUMMARY, "train_throughput", 12671.899230200308, 0)


def test_dle_mxnet_epochs_and_table(published):
    parsed = parse_log(published / "perf-v100/mxnet/mxnet_gpu1_fp32_bs128.txt")
    epochs = [r.value for r in parsed.records if r.kind == PER_EPOCH]
    assert epochs == [390.3846520745186, 389.63206820378514, 389.4435542147299]
    table = parsed.records[-1]
    assert (table.kind, table.metric, table.value, table.rank) == (SUMMARY, "train.ips", 389.54, None)


def test_paddleclas_per_card_ips_and_never_launcher_ips(published):
    parsed = parse_log(published / "perf-v100/paddle/paddle_gpu32_fp32_bs256.txt")
    assert all(r.kind == PER_CARD and r.metric == "ips" for r in parsed.records)
    assert len(parsed.records) == 12  # '--ips:0,1,...' and 'ips: 127.0.0.1' are host lists
    first = parsed.records[0]
    assert (first.value, first.step, first.epoch, first.line, first.unit) == (338.69825, 10, 0, 249, "samples/s")
    launch = parse_log(published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log")
    assert launch.records[0].line == 184  # not line 9's 'LAUNCH INFO ... ips: None'


PADDLECLAS_VARIANTS = [
    # 2.x dynamic graph engine
    (
        "[2022/05/01 10:00:00] ppcls INFO: [Train][Epoch 1/120][Iter: 10/5005]lr(PiecewiseDecay): 0.10000000, "
        "top1: 0.00000, top5: 0.00391, CELoss: 7.02040, loss: 7.02040, batch_cost: 0.64842s, reader_cost: 0.00067, "
        "ips: 394.81086 samples/s, eta: 2 days, 19:23:47",
        394.81086,
        10,
        1,
        "samples/s",
    ),
    # older releases
    (
        "2020-07-10 12:00:00 INFO: epoch:0    train step:10   loss: 7.0, top1: 0.0, batch_cost: 0.65 s, "
        "reader_cost: 0.01 s, ips: 390.12 images/sec",
        390.12,
        10,
        0,
        "images/s",
    ),
]


@pytest.mark.parametrize("line,value,step,epoch,unit", PADDLECLAS_VARIANTS)
def test_paddleclas_release_variants(line, value, step, epoch, unit):
    parsed = parse_text(line + "\n", "variant.log")
    assert parsed.format.name == "paddleclas"
    (record,) = parsed.records
    assert (record.value, record.step, record.epoch, record.unit) == (value, step, epoch, unit)


def test_paddleclas_eval_lines_are_not_training_throughput():
    text = (
        "[2022/05/01 10:00:00] ppcls INFO: [Eval][Epoch 1][Iter: 0/196]CELoss: 6.9, top1: 0.0, "
        "batch_cost: 0.5s, reader_cost: 0.0, ips: 512.0 images/sec\n"
        "[2022/05/01 10:00:01] ppcls INFO: [Train][Epoch 1/120][Iter: 20/5005]lr: 0.1, batch_cost: 0.6s, "
        "ips: 400.5 samples/s, eta: 1 day\n"
    )
    assert [r.value for r in parse_text(text, "x.log").records] == [400.5]


def test_dllogger_json_backend_lines():
    lines = [
        'DLLL {"timestamp": "1596000000.5", "datetime": "2020-07-29 05:20:00.5", "elapsedtime": "1.0", '
        '"type": "LOG", "step": [0, 10], "data": {"train.loss": 7.1, "train.total_ips": 1234.5, "train.compute_ips": 1240.0}}',
        'DLLL {"timestamp": "1596000010.5", "type": "LOG", "step": [], "data": {"train.total_ips": 1200.0}}',
        'DLLL {"timestamp": "1596000000.0", "type": "LOG", "step": "PARAMETER", "data": {"batch_size": 256}}',
    ]
    parsed = parse_text("\n".join(lines) + "\n", "json.log")
    assert parsed.format.name == "dle-pytorch"
    total = [(r.kind, r.value, r.step, r.timestamp) for r in parsed.records if r.metric == "train.total_ips"]
    assert total == [(PER_STEP, 1234.5, 10, 1596000000.5), (SUMMARY, 1200.0, None, 1596000010.5)]


def test_mpirun_interleaved_fragments_are_joined_per_rank():
    line = "[1,4]<stderr>:[09:09:06] storage.cc:196[1,5]<stderr>:other rank[1,4]<stderr>:: Using Pooled"
    assert split_rank_fragments(line) == [(4, "[09:09:06] storage.cc:196: Using Pooled"), (5, "other rank")]
    stamped = "Wed Jun  1 12:20:31 2022[1,0]<stdout>:DLL 2022-06-01 12:20:31.126419 - Summary: train.total_ips : 10523.32 img/s"
    assert split_rank_fragments(stamped) == [(0, stamped.split("<stdout>:", 1)[1])]


def test_crlf_line_endings(published):
    raw = (published / "perf-v100/tensorflow/tf_gpu1_fp32_bs256.txt").read_text()
    crlf = parse_text(raw.replace("\n", "\r\n"), "crlf.log")
    plain = parse_text(raw, "plain.log")
    assert [r.value for r in crlf.records] == [r.value for r in plain.records]


@pytest.mark.parametrize(
    "content,reason",
    [
        (b"", "empty file"),
        (b"  \n\n", "empty file"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50, "binary file"),
        (b"nothing to see here\n", "no throughput line of any known format"),
    ],
)
def test_bad_inputs_raise_parse_error_naming_the_file(tmp_path, content, reason):
    path = tmp_path / "bad.log"
    path.write_bytes(content)
    with pytest.raises(ParseError) as info:
        parse_log(path)
    assert str(info.value).startswith(str(path)) and reason in str(info.value)


def _cut(published, rel, marker, keep):
    text = (published / rel).read_text()
    at = text.index(marker)
    return text[: at + keep]


@pytest.mark.parametrize(
    "rel,marker,keep",
    [
        ("perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log", "ips: 394.43388", len("ips: 394.43")),
        (
            "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log",
            "ips: 394.43388",
            len("ips: 394.43388 samples/se"),
        ),
        ("perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", "train.total_ips : 370.04", len("train.total_ips : 370.0")),
        ("perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt", "DLL 2023-08-04 05:46:31", len("DLL 2023-08-04 05:4")),
        ("dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log", "between steps 300 and 400", len("between steps 300 and 4")),
        ("dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log", "between steps 300 and 400", len("between steps 300 a")),
        ("perf-v100/tensorflow/tf_gpu1_fp32_bs256.txt", "train_throughput : 416.18", len("train_throughput : 416.18")),
    ],
)
def test_log_cut_mid_throughput_line_is_an_error(published, rel, marker, keep):
    with pytest.raises(ParseError, match="cut mid-line"):
        parse_text(_cut(published, rel, marker, keep), "cut.log")


def test_complete_final_line_without_newline_is_read(published):
    # real published logs end without a newline after a complete line
    parsed = parse_log(published / "perf-v100/tensorflow/tf_gpu32_fp32_bs256.txt")
    assert parsed.unterminated and parsed.records[-1].value == 12671.899230200308


def test_non_finite_throughput_is_an_error():
    with pytest.raises(ParseError, match="not a number|diverged"):
        parse_text("DLL 2023-08-04 05:46:28.1 - Epoch: 0 Iteration: 1  train.total_ips : nan images/s\n", "nan.log")


def test_explicit_format_that_does_not_fit(published):
    with pytest.raises(ParseError, match="no throughput line of format paddleclas"):
        parse_log(published / "perf-v100/tensorflow/tf_gpu1_fp32_bs256.txt", "paddleclas")


def test_detection_does_not_depend_on_registry_order(published):
    text = (published / "perf-v100/mxnet/mxnet_gpu8_amp_bs256.txt").read_text()
    assert detect_format(text, "x").name == "dle-mxnet"
    assert set(FORMATS) >= {"tf2-keras-timehistory", "dle-pytorch", "dle-tf1", "dle-mxnet", "paddleclas"}


def test_records_serialise(published):
    record = parse_log(published / "perf-v100/pytorch/pytorch_gpu1_fp32_bs256.txt").records[0]
    assert json.loads(json.dumps(record.to_dict()))["metric"] == "train.compute_ips"


@pytest.mark.parametrize("bad", ["-327.08", "0"])  # NaN: refused by to_float already
def test_a_published_log_with_a_throughput_that_is_not_positive_is_refused_naming_file_and_line(published, tmp_path,
                                                                                                bad):
    real = published / "dlperf-tf2-resnet50/2n8g/rn50_b128_fp32_3.log"
    lines = real.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "examples/second between steps 100 and 200" in line)
    lines[at] = lines[at].replace("4900.45 examples/second", f"{bad} examples/second")
    (tmp_path / "tf2.log").write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as err:
        parse_log(tmp_path / "tf2.log")
    assert str(err.value).startswith(f"{tmp_path / 'tf2.log'}:{at + 1}: ") and "must be > 0" in str(err.value)
    paddle = PADDLECLAS_VARIANTS[0][0].replace("ips: 394.81086", f"ips: {bad}")
    with pytest.raises(ParseError, match=r"x\.log:2: .*must be > 0"):
        parse_text(PADDLECLAS_VARIANTS[0][0] + "\n" + paddle + "\n", "x.log")


def test_a_number_of_thousands_of_digits_is_a_parse_error_naming_file_and_line(published, tmp_path):
    real = published / "dlperf-tf2-resnet50/2n8g/rn50_b128_fp32_3.log"
    lines = real.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "examples/second between steps 100 and 200" in line)
    lines[at] = lines[at].replace("between steps 100 and 200", "between steps 100 and " + "9" * 5000)
    (tmp_path / "tf2.log").write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError) as err:
        parse_log(tmp_path / "tf2.log")
    assert str(err.value).startswith(f"{tmp_path / 'tf2.log'}:{at + 1}: a number that cannot be read (Exceeds")
