"""The one reader of a harness log (kit/results/parsers/harnesslog.py): genuine logs of each family (models timed by
steps, models timed by epochs; real CPU and GPU runs) read whole, and every record kind the harness writes, forged
into every place of each, or any record taken out, refused naming its line. The figure and the rules read the same
records with the same line numbers (test_closed_world holds verify to the refusal: every_log_read)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kit.results.parsers import ParseError, parse_log, parse_text
from kit.results.parsers import harnesslog as hl
from kit.results.parsers.kitlog import events
from kit.results.parsers.records import PER_STEP

FIXTURES = Path(__file__).parent / "fixtures"
GENUINE = {  # name: a real harness log (what ran it)
    "resnet50-cpu-imagenet": next(FIXTURES.glob(
        "golden-bundles/cpu-loader/run/*/logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log")),  # input_rate probe
    "resnet50-cpu-synthetic": FIXTURES / "fuzz/fuzz-20261124-053313/logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log",
    "resnet50-h200-tf32": FIXTURES / "gpu-runs/h200-20261128/suite-interrupted/logs/torch/resnet50/bz256/1n1g/"
                                     "resnet50_b256_tf32_1.log",
    "bert-cpu": FIXTURES / "harness-logs/bert_torch_cpu.log",  # timed by epochs: corpus, steps, epoch records
    "transformer-cpu": FIXTURES / "harness-logs/transformer_torch_cpu.log",
}


def _lines(name: str) -> list[str]:
    return GENUINE[name].read_text().splitlines(keepends=True)


def _record_kinds() -> dict[str, str]:
    """One real line of each record kind the harness writes, from the genuine logs of both families."""
    kinds: dict[str, str] = {}
    for name in GENUINE:
        for line in _lines(name):
            if line.startswith(hl.KITLOG):
                kinds.setdefault(json.loads(line[len(hl.KITLOG):])["event"], line)
    return kinds


KINDS = _record_kinds()


def test_every_genuine_log_reads_whole_and_the_rules_see_the_figure_s_lines():
    assert set(KINDS) == {"run_start", "input_rate", "warmup_end", "step", "corpus", "epoch", "run_stop", "rank_stop"}
    for name, path in GENUINE.items():
        log = hl.read(path)
        assert log.problems == [] and log.failure is None, (name, log.problems)
        parsed = parse_log(path)
        timed = [e for e in events(path) if e.event == ("epoch" if name in ("bert-cpu", "transformer-cpu") else "step")]
        per_step = [r for r in parsed.records if r.kind == PER_STEP]
        assert [r.line for r in per_step] == [e.line for e in timed], name  # one numbering, one set of records
        assert all(_lines(name)[r.line - 1].startswith(hl.KITLOG) for r in parsed.records)


def _places(name: str) -> list[int]:
    """Each index of the log's lines before which a record could stand: before each record, and at the end."""
    lines = _lines(name)
    return [i for i, line in enumerate(lines) if line.startswith(hl.KITLOG)] + [len(lines)]


@pytest.mark.parametrize("name", sorted(GENUINE))
def test_every_record_kind_forged_into_every_place_is_refused(name):
    lines = _lines(name)
    tried = 0
    for kind, record in sorted(KINDS.items()):
        for at in _places(name):
            text = "".join(lines[:at] + [record] + lines[at:])
            with pytest.raises(ParseError) as refused:
                parse_text(text, GENUINE[name])
            assert refused.value.line is not None, (kind, at)
            tried += 1
    assert tried == len(KINDS) * len(_places(name))


@pytest.mark.parametrize("name", sorted(GENUINE))
def test_any_record_taken_out_is_refused(name):
    """Each record but a rank_stop (another rank's may stand in a launcher's or host's log: every_rank_logged)."""
    lines = _lines(name)
    for at in _places(name)[:-1]:
        if '"event": "rank_stop"' in lines[at]:
            continue
        with pytest.raises(ParseError):
            parse_text("".join(lines[:at] + lines[at + 1:]), GENUINE[name])


@pytest.mark.parametrize(("edit", "says"), [
    (lambda t: t.replace("\n", "\r\n"), "a stray control character '\\r'"),  # CRLF: not how the harness writes
    (lambda t: t.replace("# kit bench:", "# kit\r\r bench:", 1), "a stray control character '\\r'"),
    (lambda t: t.replace("\n", "\u2028\n", 1), "a stray control character '\\u2028'"),
    (lambda t: t.replace(':::KITLOG {"kit": 1, "event": "step"', '[1,0]<stdout>::::KITLOG {"kit": 1, "event": "step"'),
     "a :::KITLOG record behind '[1,0]<stdout>:'"),
    (lambda t: t.replace('"loss": ', '"loss": NaN, "l": ', 1), "the run trained on a non-finite loss"),
    (lambda t: t.replace('"loss": ', '"loss": "x", "l": ', 1), "loss 'x' (a finite number)"),
    (lambda t: t.replace('"framework": "torch"', '"framework": "t\\u00f6rch"', 1), ""),
    (lambda t: t.replace('"framework": "torch"', '"framework": "t\u00f6rch"', 1), "printable ASCII only"),
    (lambda t: t.rstrip("\n"), "log cut mid-line"),
    (lambda t: t.replace('"kit": 1, "event": "warmup_end"', '"kit": 2, "event": "warmup_end"'), "log version 2"),
])
def test_what_the_harness_never_writes_is_named_by_its_line(edit, says):
    text = edit(GENUINE["resnet50-cpu-synthetic"].read_text())
    with pytest.raises(ParseError, match="no figure: .*" + re.escape(says)) as refused:
        parse_text(text, "forged.log")
    assert refused.value.line is not None


def test_a_failed_rank_is_a_failed_run_and_no_figure():
    text = GENUINE["bert-cpu"].read_text().replace('"status": "success", "rank": 0',
                                                    '"status": "failed", "rank": 0, "reason": "nan_loss"')
    with pytest.raises(ParseError, match=r"rank 0 reported a failed run \(nan_loss\)"):
        parse_text(text, "bert.log")


def test_a_log_without_a_harness_record_is_not_the_reader_s():
    assert hl.read_text("epoch 1 step 3 loss 2.0\n") == hl.HarnessLog()
    assert not hl.read(GENUINE["bert-cpu"].parent).harness  # a folder: nothing read, nothing claimed


def test_a_step_rate_is_judged_against_its_seconds_as_rounded_when_written():
    """train.py writes seconds to 6 decimals and the rate from the unrounded time: a 12.2 us loader-only step of
    4 samples is written 1.2e-05 s at 327118.094 samples/s (a real paddle run, 4% off 4 / 1.2e-05), and holds; a
    rate off by more than the rounding and RATE_TOLERANCE does not."""
    from kit.results.parsers.harnesslog import _rate_differs

    assert not _rate_differs(327118.094, 4, 1.2e-05)
    assert _rate_differs(2 * 327118.094, 4, 1.2e-05)
    assert not _rate_differs(100.0, 200, 2.0) and _rate_differs(101.0, 200, 2.0)
