"""The Perf family's other models (BERT, Transformer, HRNet-W18, DeepLabV3+): their real logs, read as printed.

Every case reads a real log of ../shared/fixtures/published-logs/perf-models (or one cut or altered from it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kit.results.extract import Method, compute_figure
from kit.results.parsers import FORMATS, PER_CARD, PER_STEP, SUMMARY, ParseError, parse_log, parse_text

PM = "perf-models"

# every log under published-logs and the format --format auto must find in it (the older folders' formats are
# the ones their expected.yaml names: a new parser must not take a log from an existing one)
NEW_FORMATS = [
    ("Bert/logs/", "paddlenlp-bert"),
    ("Bert/OtherReports/PyTorch/", "dle-bert-pytorch"),
    ("Bert/OtherReports/TensorFlow/", "dle-bert-tf1"),
    ("Transformer/logs/", "paddlenlp-transformer"),
    ("Transformer/OtherReports/PyTorch/", "dle-transformer-pytorch"),
    ("HRNetW18/logs/paddle/", "paddleseg"),
    ("DeepLabV3P/logs/paddle/", "paddleseg"),
    ("HRNetW18/OtherReports/PyTorch/", "mmseg"),
    ("DeepLabV3P/OtherReports/PyTorch/", "mmseg"),
]


def _logs(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".yaml", ".md"))


def _expected_format(published: Path, path: Path) -> str:
    rel = path.relative_to(published).as_posix()
    if rel.startswith(PM + "/"):
        inner = rel[len(PM) + 1 :]
        return next(fmt for prefix, fmt in NEW_FORMATS if inner.startswith(prefix))
    claims = yaml.safe_load((published / "expected.yaml").read_text())
    by_file = {entry["file"]: entry["format"] for entry in claims["logs"]}
    if rel in by_file:
        return by_file[rel]
    suite = next(s for s in claims["suites"] if rel.startswith(s["name"] + "/"))
    return suite["format"]


def test_auto_detection_of_every_published_log(published):
    logs = _logs(published)
    assert len([p for p in logs if PM in p.parts]) == 68 and len(logs) > 68
    found = {p.relative_to(published).as_posix(): parse_log(p).format.name for p in logs}
    expected = {p.relative_to(published).as_posix(): _expected_format(published, p) for p in logs}
    assert found == expected


def test_the_new_formats_are_listed(published):
    for _, name in NEW_FORMATS:
        assert name in FORMATS and FORMATS[name].description


@pytest.mark.parametrize(
    "rel,count,unit,kind,first,last",
    [
        ("Bert/logs/V100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C8_log", 50, "sequences/s", PER_CARD,
         213.505, 669.54333),
        ("Bert/logs/V100_LOG/base_bs96_fp16_gpu32.log", 50, "sequences/s", PER_CARD, 187.69641, 659.74974),
        ("Bert/OtherReports/PyTorch/logs/V100_LOG/bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_gpu8"
         ".log", 1, "sequences/s", SUMMARY, 5055.566265125031, 5055.566265125031),
        ("Bert/OtherReports/TensorFlow/logs/V100_LOG/tf_bert_pretraining_lamb_base_fp32_bs96_gpu32.log", 27,
         "sequences/s", PER_STEP, 1109.447, 4275.433),
        ("Transformer/logs/A100_LOG/PaddleNLP_transformer_big_bs5120_fp32_DP_N1C8_log", 29, "words/s", PER_CARD,
         37152.56615, 34862.26387),
        ("Transformer/logs/V100_LOG/paddle_gpu32_fp32_bs2560", 99, "words/s", PER_CARD, 5396.56101, 5388.03311),
        ("Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp16_gpu8", 394, "tokens/s",
         PER_STEP, 222468.82, 175440.025),
        ("HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C1_log", 26, "samples/s", PER_CARD, 12.9063,
         22.1864),
        ("DeepLabV3P/logs/paddle/Deeplabv3_FP16_BS4-N32.log", 20, "samples/s", PER_CARD, 0.2445, 11.6006),
        # mmseg: samples_per_gpu (8) / 'time' (1.661 s ... 0.568 s)
        ("HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu1", 45, "samples/s", PER_CARD, 8 / 1.661,
         8 / 0.568),
        ("DeepLabV3P/OtherReports/PyTorch/logs/pytorch/deeplabv3p_c8_fp32.log", 5, "samples/s", PER_CARD, 4 / 8.777,
         4 / 1.659),
    ],
)
def test_records_as_the_log_prints_them(published, rel, count, unit, kind, first, last):
    records = [r for r in parse_log(published / PM / rel).records if r.kind == kind]
    assert len(records) == count
    assert {r.unit for r in records} == {unit}
    assert records[0].value == pytest.approx(first, rel=1e-12) and records[-1].value == pytest.approx(last, rel=1e-12)


def test_steps_epochs_and_times_are_kept(published):
    bert = parse_log(published / PM / "Bert/logs/A100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp32_DP_N1C1_log")
    assert [r.step for r in bert.records[:3]] == [10, 20, 30] and bert.records[0].epoch == 0
    seg = parse_log(published / PM / "HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C1_log").records
    assert [r.step for r in seg[:2]] == [15, 30] and seg[1].timestamp - seg[0].timestamp == 5.0
    tr = parse_log(published / PM / "Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp16_gpu8")
    assert [r.step for r in tr.records[:2]] == [10, 20] and tr.records[0].epoch == 0


def test_ansi_colour_codes_and_the_2021_form_of_paddlenlp_transformer(published):
    colour = published / PM / "Transformer/logs/A100_LOG/PaddleNLP_transformer_big_bs5120_fp32_DP_N1C1_log"
    assert "\x1b[32m" in colour.read_text(errors="replace")
    records = parse_log(colour).records
    assert records[0].timestamp is not None and records[0].step == 100
    old = parse_log(published / PM / "Transformer/logs/V100_LOG/paddle_gpu32_amp_bs5120").records
    assert old[0].step == 10 and old[0].value == 20729.05367  # 'avg_speed: ... step/s' is not read


def test_mpirun_prefixes_are_tolerated(published):
    for rel, value in [
        ("Bert/OtherReports/PyTorch/logs/V100_LOG/bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_"
         "gpu32.log", 16610.595729661483),  # 'Thu Jun  9 09:17:45 2022[1,0]<stdout>:DLL ...', no units
        ("Bert/OtherReports/TensorFlow/logs/V100_LOG/tf_bert_pretraining_lamb_base_fp16_bs96_gpu32.log", 1537.697),
        ("Transformer/OtherReports/PyTorch/logs/V100_LOG/pytorch_gpu32_fp32_bs2560", 167003.45),
        ("HRNetW18/OtherReports/PyTorch/logs/hrnet_c32_fp16.log", 8 / 5.92),
    ]:
        records = parse_log(published / PM / rel).records
        assert {r.rank for r in records} == {0} and records[0].value == pytest.approx(value, rel=1e-12), rel
    # the same line with the short '[1,0]<stdout>:' tag
    line = "[1,0]<stdout>:Transformer | epoch 0 | step 10 |avg loss 9.1 |avg tokens 70332.6 |tokens/s 167003.45 |walltime 17.2 |\n"
    (record,) = parse_text(line, "t.log").records
    assert (record.rank, record.value, record.unit) == (0, 167003.45, "tokens/s")


def test_inference_and_end_of_run_lines_are_not_training_throughput(published):
    log = published / PM / "Transformer/OtherReports/PyTorch/logs/V100_LOG/pytorch_gpu32_fp32_bs2560"
    text = log.read_text()
    assert "(1133.53 sentences/s, 21597.18 tokens/s)" in text  # the evaluation's '| Translated ...' line
    assert 21597.18 not in {r.value for r in parse_log(log).records}
    tf = parse_log(published / PM / "Bert/OtherReports/TensorFlow/logs/A100_LOG/tf_bert_pretraining_lamb_base_fp16_"
                                    "bs128_gpu1.log").records
    assert [r.value for r in tf if r.kind == SUMMARY] == [862.988]  # 'throughput_val : 759.08' is not read
    launcher = parse_log(published / PM / "HRNetW18/logs/paddle/Hrnet_FP16_BS8-N32.log").records
    assert len(launcher) == 5  # 'ips: 127.0.0.1' of the launcher is not a [TRAIN] line


def test_a_last_line_without_newline_is_complete(published):
    for rel, count in [
        ("HRNetW18/OtherReports/PyTorch/logs/hrnet_c32_fp32.log", 5),  # ends on 'loss: 2.0911', no newline
        ("Bert/logs/V100_LOG/base_bs96_fp16_gpu32.log", 50),
        ("Transformer/logs/V100_LOG/paddle_gpu32_fp32_bs2560", 99),  # ends '... ips: 3107.99 words/sec'
        ("Bert/OtherReports/TensorFlow/logs/V100_LOG/tf_bert_pretraining_lamb_base_fp32_bs96_gpu32.log", 27),
    ]:
        path = published / PM / rel
        assert not path.read_bytes().endswith(b"\n")
        parsed = parse_log(path)
        assert parsed.unterminated and len(parsed.records) == count, rel


def test_a_stray_nul_byte_in_a_real_text_log_is_not_binary(published):
    log = published / PM / "Bert/logs/A100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C1_log"
    data = log.read_bytes()
    assert data[:8192].count(0) == 1  # Paddle's 'WARNING: device: \x00. The installed Paddle is compiled with ...'
    assert len(parse_log(log).records) == 50


def test_mmseg_reads_time_whatever_the_eta_reads(published):
    text = (published / PM / "HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu8").read_text()
    long_run = text.replace("eta: 0:04:34,", "eta: 1 day, 0:04:34,")  # mmcv prints days on long runs
    assert long_run != text
    assert [r.value for r in parse_text(long_run, "l.log").records] == [r.value for r in parse_text(text, "t.log").records]


def test_mmseg_without_the_batch_in_the_log_gives_steps_per_second(published):
    text = (published / PM / "DeepLabV3P/OtherReports/PyTorch/logs/pytorch/deeplabv3p_c8_fp32.log").read_text()
    text = "\n".join(line for line in text.splitlines() if "samples_per_gpu" not in line) + "\n"
    parsed = parse_text(text, "nobatch.log")
    assert {r.unit for r in parsed.records} == {"steps/s"} and parsed.records[0].value == pytest.approx(1 / 8.777)
    figure = compute_figure(parsed, Method(skip=2, reduce="harmonic_mean", scale=32, kind=PER_STEP))
    assert figure.unit == "samples/s" and round(figure.value, 2) == 25.65


@pytest.mark.parametrize(
    "rel,old,new,unit",
    [
        ("Bert/logs/V100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C1_log", "sequences/sec", "sequences/min",
         "sequences/min"),
        ("Transformer/logs/V100_LOG/paddle_gpu32_fp32_bs2560", "words/sec", "chars/sec", "chars/sec"),
        ("HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp32_DP_N1C1_log", "samples/sec", "frames/sec",
         "frames/sec"),
        ("Bert/OtherReports/TensorFlow/logs/V100_LOG/tf_bert_pretraining_lamb_base_fp16_bs96_gpu8.log",
         "sequences/s", "batches/s", "batches/s"),
        ("Bert/OtherReports/PyTorch/logs/V100_LOG/bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_"
         "gpu8.log", "5055.566265125031 sequences/s", "5055.566265125031 tokens/s", "tokens/s"),
    ],
)
def test_an_unknown_unit_is_named(published, rel, old, new, unit):
    text = (published / PM / rel).read_text(errors="replace").replace(old, new)
    with pytest.raises(ParseError, match=f"unknown throughput unit '{unit}'"):
        parse_text(text, "u.log")


def kit(*args):
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True, text=True)


def _variants(published, tmp_path):
    """(file, expected message) per bad input, each made from a real log of one new format."""
    out = []
    cases = [
        ("Bert/logs/V100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C8_log", "ips: 670.84088", "ips: 670.8"),
        ("Transformer/logs/V100_LOG/paddle_gpu32_fp16_bs5120", "ips: 21503.88913", "ips: 21503.88"),
        ("HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C8_log", "ips: 14.8861", "ips: 14.88"),
        ("Bert/OtherReports/PyTorch/logs/V100_LOG/bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_"
         "gpu8.log", "training_sequences_per_second : 5055.566265125031", "training_sequences_per_second : 5055.5"),
        ("Bert/OtherReports/TensorFlow/logs/V100_LOG/tf_bert_pretraining_lamb_base_fp16_bs96_gpu8.log",
         "throughput_train : 4320.103", "throughput_train : 4320.1"),
        ("HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu8", "time: 1.008", "time: 1.00"),
        ("Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp16_gpu8",
         "tokens/s 187501.887", "tokens/s 187501.8"),
    ]
    for i, (rel, marker, cut) in enumerate(cases):
        text = (published / PM / rel).read_text(errors="replace")
        at = text.index(marker)
        name = f"{i}_{Path(rel).name}"
        (tmp_path / f"cut_{name}").write_text(text[:at] + cut)
        out.append((tmp_path / f"cut_{name}", "log cut mid-line"))
        number = marker.rsplit(" ", 1)[1]
        (tmp_path / f"neg_{name}").write_text(text.replace(marker, marker.replace(number, "-" + number), 1))
        negative = "is not a duration" if "time:" in marker else "is not a throughput"
        out.append((tmp_path / f"neg_{name}", negative))
        (tmp_path / f"nan_{name}").write_text(text.replace(marker, marker.replace(number, "nan"), 1))
        out.append((tmp_path / f"nan_{name}", "the run diverged or failed"))
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "binary.log").write_bytes((published / PM / "Bert/logs/V100_LOG/base_bs96_fp16_gpu32.log").read_bytes()
                                          .replace(b"\n", b"\x00\n"))
    return out + [(tmp_path / "empty.log", "empty file"), (tmp_path / "binary.log", "binary file")]


def test_bad_inputs_exit_2_with_one_line_naming_the_file(published, tmp_path):
    for path, message in _variants(published, tmp_path):
        r = kit("extract", path)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, (path.name, r.stdout, r.stderr)
        assert len(lines) == 1 and lines[0].startswith(f"kit: {path}") and message in lines[0], (path.name, r.stderr)
        assert "Traceback" not in r.stderr


def test_kit_extract_with_the_publishers_flags(published):
    bert = kit("extract", published / PM / "Bert/logs/A100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C8_log",
               "--skip", "10", "--trim", "5", "--scale", "8", "--round", "3")
    assert bert.returncode == 0, bert.stderr
    assert bert.stdout.splitlines()[-1] == "11714.331" and "format: paddlenlp-bert (auto)" in bert.stdout
    assert "unit: sequences/s" in bert.stdout and "records: 40 used of 50" not in bert.stdout
    hrnet = kit("extract", published / PM / "HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu8",
                "--skip", "5", "--reduce", "harmonic_mean", "--scale", "8", "--trunc", "3")
    assert hrnet.returncode == 0 and hrnet.stdout.splitlines()[-1] == "59.709"
    clash = kit("extract", published / PM / "HRNetW18/OtherReports/PyTorch/logs/hrnet_torch_bs8_fp16_gpu8",
                "--round", "3", "--trunc", "3")
    assert clash.returncode == 2 and "not allowed with argument" in clash.stderr


def test_the_whole_text_fast_path_reads_what_the_line_scanner_reads(published):
    from kit.results.parsers.lines import scan_lines
    from kit.results.parsers.logtext import read_log_text

    fast = [f for f in FORMATS.values() if f.line_regex is not None]
    assert {f.name for f in fast} >= {"paddlenlp-bert", "paddlenlp-transformer", "paddleseg", "dle-transformer-pytorch"}
    checked = 0
    for path in _logs(published / PM):
        text = read_log_text(path)
        for fmt in fast:
            if not fmt.detect(text) or "<std" in text:
                continue
            for variant in (text, text.replace("\n", "\r\n"), text.rstrip("\n")):
                slow = scan_lines(variant, fmt.needle, lambda ln, no, rk, f=fmt, p=path: f.parse_line(ln, no, rk, p), path,
                                  fmt.value_delimited)
                assert fmt.parse_text(variant, path) == slow, path
            checked += 1
    assert checked == 44  # 9 PaddleNLP BERT + 11 Transformer + 16 PaddleSeg + 8 untagged NGC Transformer logs
    # a cut last line is refused by both
    text = read_log_text(published / PM / "HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C8_log")
    cut = text[: text.rindex("ips: ") + len("ips: 15.03")]
    with pytest.raises(ParseError, match="log cut mid-line"):
        FORMATS["paddleseg"].parse_text(cut, "cut.log")
