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
  is read by read_peak_memory().
mlcommons/logging mlperf_logging/mllog (mllog.get_mllogger().event(key=..., value=..., metadata=...)):
    :::MLLOG {"namespace": "", "time_ms": 1611234567890, "event_type": "POINT_IN_TIME",
              "key": "tracked_stats", "value": {"throughput": 2412.6}, "metadata": {"step": 42, ...}}
  read as a per-step throughput (samples/s) when the key is 'tracked_stats' and the value holds
  'throughput'.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kit.core.catalogue import contract
from kit.core.inputs import open_regular, parse_json
from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import PER_STEP, SUMMARY, ParseError, Record

KITLOG = ":::KITLOG "
MLLOG = ":::MLLOG "
SAMPLES = "samples/s"
EPOCH_UNITS = {"tokens/s": "tokens", "sequences/s": "sequences"}  # unit -> the epoch line's count field
_RUN_START = re.compile(r':::KITLOG \{[^\n]*"event":\s*"run_start"')
_RUN_STOP = re.compile(r':::KITLOG \{[^\n]*"event":\s*"run_stop"')


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


@dataclass
class LogEvent:
    line: int
    data: dict


def events(path: str | Path) -> list[LogEvent]:
    """Every ':::KITLOG {...}' object of a file, also behind prefixes such as mpirun's '[1,0]<stdout>:'.
    Lines that are not JSON objects are left out here: the parser judges them."""
    found = []
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8", errors="replace") as f:  # a FIFO: no events
            for lineno, line in enumerate(f, 1):
                at = line.find(KITLOG)
                if at < 0:
                    continue
                try:
                    data = parse_json(line[at + len(KITLOG):])
                except ValueError:
                    continue
                if isinstance(data, dict):
                    found.append(LogEvent(lineno, data))
    except OSError:
        return []
    return found


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

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        if KITLOG in line:
            yield from self._kitlog(_json_after(line, KITLOG, lineno, path), lineno, rank, path)
        elif MLLOG in line:
            yield from self._mllog(_json_after(line, MLLOG, lineno, path), lineno, rank, path)

    def _kitlog(self, data: dict, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        event = data.get("event")
        if event == "step":
            if data.get("timing") == "epochs":  # an epoch-timed run: its epoch lines are the series
                return
            batch = _number(data, "global_batch", lineno, path)
            seconds = _number(data, "seconds", lineno, path)
            step = data.get("step")
            yield Record(batch / seconds, SAMPLES, SAMPLES, PER_STEP, lineno, step if isinstance(step, int) else None, None, _time(data), rank)
        elif event == "epoch":
            unit = data.get("unit")
            if unit not in EPOCH_UNITS:
                raise ParseError(path, f"epoch line's unit must be one of {', '.join(EPOCH_UNITS)}, got {unit!r}", lineno)
            count = _number(data, EPOCH_UNITS[unit], lineno, path)
            seconds = _number(data, "seconds", lineno, path)
            epoch = data.get("epoch")
            yield Record(count / seconds, unit, SAMPLES, PER_STEP, lineno, None, epoch if isinstance(epoch, int) else None, _time(data), rank)
        elif event == "run_stop":
            status = data.get("status")
            if status != "success":
                reason = data.get("reason", "unknown")
                message = data.get("message", "")
                raise ParseError(path, f"the harness reported a failed run ({reason}): {message}".rstrip(": "), lineno)
            unit = _unit(data)
            key = "throughput" if unit != SAMPLES else "samples_per_sec"
            yield Record(_number(data, key, lineno, path), unit, SAMPLES, SUMMARY, lineno, None, None, _time(data), rank)

    def _mllog(self, data: dict, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        value = data.get("value")
        if data.get("key") != "tracked_stats" or not isinstance(value, dict) or "throughput" not in value:
            return
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        step = meta.get("step")
        throughput = _number(value, "throughput", lineno, path)
        yield Record(throughput, SAMPLES, SAMPLES, PER_STEP, lineno, step if isinstance(step, int) else None, None, _time(data), rank)

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        harness = KITLOG in text and _RUN_START.search(text)
        if harness and MLLOG in text:  # the harness writes none: such a record would feed the figure unchecked
            lineno = text.count("\n", 0, text.find(MLLOG)) + 1
            raise ParseError(path, "an MLLOG record in a harness log (the harness writes none): no figure", lineno)
        records = super().parse_text(text, path)
        if harness and not _RUN_STOP.search(text):
            raise ParseError(path, "the harness run started but never stopped (killed, hung or cut short): no figure")
        if harness:
            untimed = next((r for r in records if r.kind == PER_STEP and r.timestamp is None), None)
            if untimed is not None:  # each step record carries its own clock, which verify checks
                raise ParseError(path, "a harness step record without its time_ms: no figure", untimed.line)
        return records
