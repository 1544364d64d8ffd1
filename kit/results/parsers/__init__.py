"""Log-format parsers: one module per real format, each returning throughput Records.

Adding a format: write a LogFormat subclass in its own module and list it in _ALL below.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter, lt
from pathlib import Path

from kit.core import filecache
from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import gc_paused
from kit.results.parsers.dle_bert_pytorch import DLEBertPyTorch
from kit.results.parsers.dle_bert_tf1 import DLEBertTF1
from kit.results.parsers.dle_mxnet import DLEMXNet
from kit.results.parsers.dle_pytorch import DLEPyTorch
from kit.results.parsers.dle_tf1 import DLETensorFlow1
from kit.results.parsers.fairseq_transformer import FairseqTransformer
from kit.results.parsers.fleetx_vgg import FleetXVGG
from kit.results.parsers.kitlog import KitLog
from kit.results.parsers.lambda_dle_pytorch import LAMBDA_DLE_FORMATS
from kit.results.parsers.logtext import read_log_text
from kit.results.parsers.mmseg import MMSeg
from kit.results.parsers.nvlog_tf import NVLogTF
from kit.results.parsers.oneflow import OneFlow
from kit.results.parsers.paddle_models18 import PaddleModels18
from kit.results.parsers.paddleclas import PaddleClas
from kit.results.parsers.paddlenlp_bert import PaddleNLPBert
from kit.results.parsers.paddlenlp_transformer import PaddleNLPTransformer
from kit.results.parsers.paddleseg import PaddleSeg
from kit.results.parsers.plsc import PLSC
from kit.results.parsers.records import (
    KINDS,
    PER_CARD,
    PER_EPOCH,
    PER_STEP,
    SUMMARY,
    ParseError,
    Record,
    refuse_non_finite_loss,
)
from kit.results.parsers.tf2_keras import TF2KerasTimeHistory

__all__ = [
    "FORMATS",
    "KINDS",
    "PER_CARD",
    "PER_EPOCH",
    "PER_STEP",
    "SUMMARY",
    "LogFormat",
    "ParseError",
    "ParsedLog",
    "Record",
    "UnknownFormat",
    "detect_format",
    "get_format",
    "parse_log",
    "parse_text",
    "refuse_non_finite_loss",
]

_ALL: list[LogFormat] = [
    TF2KerasTimeHistory(),
    DLEPyTorch(),
    DLETensorFlow1(),
    DLEMXNet(),
    PaddleClas(),
    PLSC(),
    FleetXVGG(),
    PaddleModels18(),
    OneFlow(),
    NVLogTF(),
    KitLog(),
    # the Perf family's other models (PaddlePaddle/Perf Bert, Transformer, HRNetW18, DeepLabV3P)
    PaddleNLPBert(),
    PaddleNLPTransformer(),
    PaddleSeg(),
    DLEBertPyTorch(),
    DLEBertTF1(),
    MMSeg(),
    FairseqTransformer(),
    *LAMBDA_DLE_FORMATS,  # SSD, GNMT, Transformer-XL, Tacotron2/WaveGlow of Lambda's deeplearning-benchmark
]
FORMATS: dict[str, LogFormat] = {f.name: f for f in sorted(_ALL, key=lambda f: f.name)}


_BY_PRIORITY = sorted(_ALL, key=lambda f: -f.priority)


class UnknownFormat(ValueError):
    """A --format name the kit does not know (a usage error, not a log error)."""


@dataclass(frozen=True)
class ParsedLog:
    path: str
    format: LogFormat
    records: list[Record]
    unterminated: bool = False  # the last line has no newline: the log may have been cut short


def get_format(name: str) -> LogFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownFormat(f"unknown format {name!r}; known: auto, {', '.join(FORMATS)}") from None


def _detect(text: str) -> LogFormat | None:
    """The highest-priority format with a throughput line in TEXT; first the harness's log, whatever else it holds
    (read by its one reader, harnesslog)."""
    if ":::KITLOG" in text:
        return FORMATS["kitlog"]
    return next((candidate for candidate in _BY_PRIORITY if candidate.detect(text)), None)


# --format auto reads the log's first DETECT_HEADS characters (cut at a line's end) first: a format detected
# there is the log's format, without scanning megabytes for every other format's markers (a log whose heads
# hold no throughput line of any format is searched whole). Only a log holding lines of two formats, the
# higher-priority one's first after the head, reads differently from a whole-text detection.
DETECT_HEADS = (64 << 10, 256 << 10, 1 << 20, 4 << 20)  # each tried in turn: the cost stays near the first


def detect_format(text: str, path: str | Path) -> LogFormat:
    for size in DETECT_HEADS:
        if len(text) <= size:
            break
        cut = text.rfind("\n", 0, size) + 1
        if cut and (found := _detect(text[:cut])) is not None:
            return found
    if (found := _detect(text)) is not None:
        return found
    raise ParseError(path, f"no throughput line of any known format ({', '.join(FORMATS)})")


def parse_text(text: str, path: str | Path, fmt: str = "auto") -> ParsedLog:
    log_format = detect_format(text, path) if fmt == "auto" else get_format(fmt)
    if not log_format.reads_loss:  # its lines carry no loss: a non-finite one anywhere refuses the log
        refuse_non_finite_loss(text, path)
    try:
        records = _records(log_format, text, path)
    except ParseError:
        if log_format.reads_loss:  # a log refused that trained on a non-finite loss is refused for it, as it was
            refuse_non_finite_loss(text, path)  # (its first one in the text; a pass only where no figure comes)
        raise
    return ParsedLog(str(path), log_format, records, not text.endswith("\n"))


def _records(log_format: LogFormat, text: str, path: str | Path) -> list[Record]:
    try:
        with gc_paused():
            records = log_format.parse_text(text, path)
    except ValueError as exc:  # a number past what int() reads, outside the line scanner
        raise ParseError(path, f"a number that cannot be read ({str(exc).split(';')[0]})") from None
    if not records:
        raise ParseError(path, f"no throughput line of format {log_format.name} ({log_format.description})")
    # also NaN; the whole column compared at C level first (a Python generator over millions of records is slow)
    wrong = None if all(map(lt, repeat(0), map(itemgetter(0), records))) else next(
        (r for r in records if not r.value > 0), None)
    if wrong is not None:
        raise ParseError(path, f"{wrong.metric or 'throughput'} {wrong.value:g} {wrong.unit} is not a throughput "
                         "(must be > 0)", wrong.line)
    return records


def parse_log(path: str | Path, fmt: str = "auto") -> ParsedLog:
    """The log's records (parsed once per file and format within kit.core.filecache.cached(): a report's sections share it)."""
    if fmt != "auto":
        get_format(fmt)
    return filecache.once(f"parse {fmt}", path, lambda: parse_text(read_log_text(path), path, fmt))
