"""Older NGC TensorFlow ResNet-50 (DeepLearningExamples TensorFlow/Classification/RN50v1.5, 2018-2019): ':::NVLOG'.

The bundled dllogger (dllogger/logger.py @ 52c60d2ed2d999d480ea9599f7e84c977d27fa4b, NVLOGGER_VERSION '0.2.3')
prints every logged value on its own line:
    msg = '{key}: {value}'.format(key=key, value=json.dumps(value))
    message = '{prefix}{token}v{ver} {model} {secs:.9f} ({call_site}) {msg}'.format(...)
utils/hooks/benchmark_hooks.py @ b1ae8dd47c0e1474741431ad7f0d7a14d6bd6210 (BenchmarkLoggingHook, JoCBackend),
every log_every steps after warmup_steps:
    ips = self.global_batch_size / batch_time
    LOGGER.log("iteration", int(self.current_step)); LOGGER.log("total_ips", float(ips))
    ':::NVLOGv0.2.3 resnet 1556214443.123456789 (benchmark_hooks.py:61) iteration: 20'
    ':::NVLOGv0.2.3 resnet 1556214443.125116587 (benchmark_hooks.py:62) total_ips: 1234.5678901234'
  and at the end JoCBackend.finish() logs each AverageMeter as 'Average ' + key:
    ':::NVLOGv0.2.3 resnet 1556214500.987654321 (benchmark_hooks.py:71) Average total_ips: 1230.123456789'
    (the line PerfKitBenchmarker's horovod_benchmark.py reads as the run's throughput).
utils/hooks/training_hooks.py (TrainingLoggingHook, StdOutBackend) of the same commit logs
    LOGGER.log("imgs_per_sec", float(ips))  with the same ips = global_batch_size / batch_time:
    ':::NVLOGv0.2.3 resnet 1605627653.400741577 (training_hooks.py:101) imgs_per_sec: 37.5667719118656'
  recorded under the metric name "total_ips" (same quantity, one name for the stats layer).

All figures are GLOBAL (runtime/runner.py: global_batch_size = batch_size * hvd.size(), the hooks
exist on hvd.rank() == 0 only): per-step
records, plus the summary. The step is the 'iteration' line logged just before (same rank); the
timestamp is the line's own seconds field. NaN/Infinity (json.dumps of a diverged value) are errors.
Throughput logged after ':::NVLOG... Starting Model Evaluation...' is inference, not training,
and is left out; a log that has only that is an error.
A throughput line carries no loss (the training hook logs 'total_loss: ...' on a line of its own): a loss printed as
NaN or infinite anywhere in the log refuses it (the whole text searched).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.lines import scan_lines
from kit.results.parsers.records import PER_STEP, SUMMARY, ParseError, Record, to_float

_LINE = re.compile(
    r":::NVLOGv(?P<ver>[\d.]+) (?P<model>\S+) (?P<secs>\d+(?:\.\d+)?) \((?P<site>[^)]*)\) "
    r"(?P<key>Average total_ips|Average imgs_per_sec|total_ips|imgs_per_sec|iteration): (?P<value>\S+)"
)
_EVALUATION = re.compile(r":::NVLOGv[\d.]+ \S+ [\d.]+ \([^)]*\) Starting Model Evaluation")


class NVLogTF(LogFormat):
    name = "nvlog-tf"
    description = "older NGC TensorFlow: ':::NVLOGv0.2.3 ... total_ips: 1234.5', 'Average total_ips: 1230.1'"
    needle = re.compile(
        r":::NVLOGv[\d.]+ \S+ [\d.]+ \([^)]*\) "
        r"(?:Average |total_ips|imgs_per_sec|iteration|Starting Model Evaluation)"
    )
    detectors = (re.compile(r":::NVLOGv[\d.]+ \S+ [\d.]+ \([^)]*\) (?:Average )?(?:total_ips|imgs_per_sec): "),)
    detect_literals = (":::NVLOG",)
    default_metric = "total_ips"
    summary_metric = "Average total_ips"
    priority = 15

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        """One line alone: per-step records carry no step (parse_text supplies it)."""
        return iter(self._records(line, lineno, rank, path, {}))

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        iteration: dict[int | None, int] = {}  # rank -> last 'iteration: N' logged
        evaluation_at: list[int] = []  # the line of 'Starting Model Evaluation...' once seen

        def parse(line: str, lineno: int, rank: int | None) -> list[Record]:
            if evaluation_at:
                return []
            if _EVALUATION.search(line):
                evaluation_at.append(lineno)
                return []
            return self._records(line, lineno, rank, path, iteration)

        records = scan_lines(text, self.needle, parse, path)
        if evaluation_at and not records:
            raise ParseError(
                path,
                "only evaluation (inference) throughput, logged after 'Starting Model Evaluation'",
                evaluation_at[0],
            )
        return records

    @staticmethod
    def _records(
        line: str, lineno: int, rank: int | None, path: str | Path, iteration: dict[int | None, int]
    ) -> list[Record]:
        m = _LINE.search(line)
        if m is None:
            return []
        key = m["key"]
        if key == "iteration":
            if m["value"].isdigit():
                iteration[rank] = int(m["value"])
            return []
        value = to_float(m["value"], path, lineno)
        secs = float(m["secs"])
        if key.startswith("Average "):
            return [Record(value, "images/s", "Average total_ips", SUMMARY, lineno, None, None, secs, rank)]
        return [Record(value, "images/s", "total_ips", PER_STEP, lineno, iteration.get(rank), None, secs, rank)]
