"""The kit's own harness (scripts/harness/train.py) and MLPerf-style ':::MLLOG' throughput lines.

Harness, one JSON object per line (scripts/harness/README.md):
    :::KITLOG {"kit": 1, "event": "step", "step": 21, "global_batch": 32, "seconds": 0.412, ...}
    :::KITLOG {"kit": 1, "event": "run_stop", "status": "success", "steps": 100, "seconds": 41.2, ...}
  A step's figure is recomputed from its raw fields: global_batch / seconds (global, every rank).
  Only measured steps are logged (warm-up is reported as one 'warmup_end' line), so the whole
  series is the measurement. A 'run_stop' with status 'failed', or a run that started and never
  stopped, is an error: a failed or killed run never yields a figure.
  NLP runs (bert, transformer; seed 003) are timed over whole epochs: their step lines carry
  "timing": "epochs" and give no figure; each line
    :::KITLOG {"event": "epoch", "epoch": 1, "sequences": 4096, "tokens": 1900000, "seconds": 52.1, "unit": "tokens/s", ...}
  is one record, (tokens or sequences, by its unit) / seconds, in tokens/s (Transformer) or
  sequences/s (BERT); every epoch holds the same corpus, so their harmonic mean is the whole run's
  tokens (sequences) / time, which run_stop's "throughput" states. The series keeps the metric
  name 'samples/s' (the harness's figure) whatever its unit.
  run_stop's "peak_memory_mb" (peak RSS on a CPU, the framework's peak-allocated bytes on a GPU)
  is read by read_peak_memory(). A step's loss is its only one; the grammar (harnesslog) refuses one that is not
  finite, as the harness itself stops on it (reason nan_loss).
mlcommons/logging mlperf_logging/mllog (mllog.get_mllogger().event(key=..., value=..., metadata=...)):
    :::MLLOG {"namespace": "", "time_ms": 1611234567890, "event_type": "POINT_IN_TIME",
              "key": "tracked_stats", "value": {"throughput": 2412.6}, "metadata": {"step": 42, ...}}
  read as a per-step throughput (samples/s) when the key is 'tracked_stats' and the value holds
  'throughput'. Its lines carry no loss: a loss printed as NaN or infinite anywhere in such a log refuses it (the
  whole text searched).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

from kit.core.catalogue import contract
from kit.core.inputs import parse_json
from kit.results.parsers import harnesslog
from kit.results.parsers.base import LogFormat
from kit.results.parsers.harnesslog import KITLOG, MLLOG, LogEvent
from kit.results.parsers.records import PER_STEP, SUMMARY, ParseError, Record, refuse_non_finite_loss

SAMPLES = "samples/s"
EPOCH_UNITS = {"tokens/s": "tokens", "sequences/s": "sequences"}  # unit -> the epoch line's count field


def _json_after(line: str, marker: str, lineno: int, path: str | Path) -> dict:
    start = line.find(marker)
    try:
        data = parse_json(line[start + len(marker) :])
    except json.JSONDecodeError as exc:
        raise ParseError(path, f"{marker.strip()} line is not valid JSON ({exc.msg} at column {exc.colno})", lineno) from None
    except ValueError as exc:  # an integer of thousands of digits, nesting too deep
        raise ParseError(path, f"{marker.strip()} line is not valid JSON ({str(exc).split(';')[0]})", lineno) from None
    if not isinstance(data, dict):
        raise ParseError(path, f"{marker.strip()} line holds a {type(data).__name__}, not a JSON object", lineno)
    return data


def _finite(value: int | float) -> bool:
    """math.isfinite, False for an integer no float holds (a hostile log's 10**400)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _number(data: dict, key: str, lineno: int, path: str | Path, positive: bool = True) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
        raise ParseError(path, f"key {key!r} must be a finite number, got {value!r}", lineno)
    if positive and value <= 0:
        raise ParseError(path, f"key {key!r} must be > 0, got {value!r}", lineno)
    return float(value)


def _time(data: dict) -> float | None:
    """The record's clock in seconds, None where it has none (or one no float holds: an untimed record)."""
    t = data.get("time_ms")
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return None
    try:
        return t / 1000.0
    except OverflowError:
        return None


def events(path: str | Path) -> list[LogEvent]:
    """Every ':::KITLOG {...}' record of a harness log, with its line (kit.results.parsers.harnesslog, the one
    reader); records that cannot be read are left out here: the parser refuses the log."""
    return harnesslog.read(path).events


def read_run_start(path: str | Path) -> dict | None:
    """The harness's run_start settings of a log (framework, model, image size, threads, ...), or None."""
    return next((e.data for e in events(path) if e.data.get("event") == "run_start"), None)


RECORDED = tuple(s.start for s in contract.SETTINGS if s.recorded)  # the contract's settings run.json keeps
RAN_KEYS = tuple(dict.fromkeys((*RECORDED, "math", "amp_effective", "note", "device", "device_name", "cuda_version",
                                "cudnn_version", "decode_device", "decoder", "loader_only")))


def read_what_ran(path: str | Path) -> dict:
    """What a harness run says it ran: run_start's precision, math flags, layout, mode, loader, device and
    CUDA/cuDNN, the run_stop's compile_seconds and gpu-loader decode counts, and the input_rate line's images/s
    (the loader alone); {} for a log with no run_start. Older logs state channels_last, not layout."""
    found = events(path)
    start = next((e.data for e in found if e.data.get("event") == "run_start"), None)
    if start is None:
        return {}
    ran = {k: start[k] for k in RAN_KEYS if k in start}
    if "layout" not in ran and isinstance(start.get("channels_last"), bool):
        ran["layout"] = "nhwc" if start["channels_last"] else "nchw"
    stops = [e.data for e in found if e.data.get("event") == "run_stop" and "compile_seconds" in e.data]
    if stops:
        ran["compile_seconds"] = stops[-1]["compile_seconds"]
    stops = [e.data for e in found if e.data.get("event") == "run_stop" and "decode_calls" in e.data]
    if stops:  # the gpu loader's batched decode calls, batches and refusals
        ran.update({k: stops[-1][k] for k in DECODE_COUNTS if _count(stops[-1].get(k))})
    rates = [e.data.get("images_per_sec") for e in found if e.data.get("event") == "input_rate"]
    if rates and _positive(rates[-1]):
        ran["input_rate"] = float(rates[-1])
    return ran


DECODE_COUNTS = ("decode_calls", "decoded_batches", "refused_batches")


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _positive(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and _finite(value) and value > 0


def read_peak_memory(path: str | Path) -> float | None:
    """Peak memory in MiB of a successful harness run (its last run_stop), or None where the log has none."""
    stops = [e.data for e in events(path) if e.data.get("event") == "run_stop" and e.data.get("status") == "success"]
    value = stops[-1].get("peak_memory_mb") if stops else None
    if not _positive(value):
        return None
    return float(value)


def _unit(data: dict) -> str:
    unit = data.get("unit")
    return unit if unit in EPOCH_UNITS else SAMPLES  # images/s and samples/s are both samples/s


class KitLog(LogFormat):
    name = "kitlog"
    description = "the kit's harness: ':::KITLOG {\"event\": \"step\", \"global_batch\": B, \"seconds\": s, ...}' (+ MLLOG tracked_stats)"
    needle = re.compile(r":::(?:KITLOG|MLLOG) ")
    detectors = (re.compile(r":::KITLOG \{"), re.compile(r':::MLLOG \{[^\n]*"tracked_stats"[^\n]*"throughput"'))
    detect_literals = (KITLOG, MLLOG)
    default_metric = SAMPLES
    summary_metric = SAMPLES
    priority = 100  # a structured line is unambiguous
    reads_loss = True  # a harness log's steps (above); an MLLOG log's whole text

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        """An MLLOG line of a log that is not the harness's (a harness log is read whole: parse_text)."""
        if MLLOG in line:
            yield from self._mllog(_json_after(line, MLLOG, lineno, path), lineno, rank, path)

    def _mllog(self, data: dict, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        value = data.get("value")
        if data.get("key") != "tracked_stats" or not isinstance(value, dict) or "throughput" not in value:
            return
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        step = meta.get("step")
        throughput = _number(value, "throughput", lineno, path)
        yield Record(throughput, SAMPLES, SAMPLES, PER_STEP, lineno, step if isinstance(step, int) else None, None, _time(data), rank)

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        if ":::KITLOG" not in text:
            refuse_non_finite_loss(text, path)
            return super().parse_text(text, path)
        return harness_records(harnesslog.read_text(text), path)


NO_FIGURE = "no figure: "


def harness_records(log: harnesslog.HarnessLog, path: str | Path) -> list[Record]:
    """The figure's records of a harness log: its steps (an epoch-timed run's epochs) and run_stop, read by the one
    reader; a failed run, or any record the grammar refuses, gives none (ParseError naming the first line)."""
    if log.failure is not None:
        raise ParseError(path, log.failure[1], log.failure[0])
    if log.problems:
        line, why = log.problems[0]
        more = f" (and {len(log.problems) - 1} more)" if len(log.problems) > 1 else ""
        raise ParseError(path, f"{NO_FIGURE}{why}{more}", line)
    records = []
    for e in log.events:
        d, line = e.data, e.line
        if e.event == "step" and d.get("timing") != "epochs":
            value = _number(d, "global_batch", line, path) / _number(d, "seconds", line, path)
            records.append(Record(value, SAMPLES, SAMPLES, PER_STEP, line, d["step"], None, _time(d), None))
        elif e.event == "epoch":
            unit = d["unit"]
            value = _number(d, EPOCH_UNITS[unit], line, path) / _number(d, "seconds", line, path)
            records.append(Record(value, unit, SAMPLES, PER_STEP, line, None, d["epoch"], _time(d), None))
        elif e.event == "run_stop":
            unit = _unit(d)
            value = _number(d, "throughput" if unit != SAMPLES else "samples_per_sec", line, path)
            records.append(Record(value, unit, SAMPLES, SUMMARY, line, None, None, _time(d), None))
    return records
