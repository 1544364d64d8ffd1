"""NVIDIA DLLogger output, as printed by DeepLearningExamples (shared by the NGC formats).

Text backend: 'DLL 2023-08-04 05:46:28.192913 - <step> <name> : <value> [unit] ...' where
<step> is 'Epoch: 0 Iteration: 1', 'Epoch: 0', 'Summary:', '(0, 210)', '()' or 'PARAMETER'.
JSON backend: 'DLLL {"timestamp": ..., "step": [0, 210], "data": {...}}'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.core.inputs import parse_json
from kit.results.parsers.base import PER_EPOCH, PER_STEP, SUMMARY, LogFormat, ParseError, Record, posix_time, to_float

# time, then the step: Summary: | PARAMETER | Epoch: e [Iteration: i] | Iteration: i | (e, i) | ()
_TEXT_LINE = re.compile(
    r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))? - \s*"
    r"(?:(Summary:)"
    r"|(PARAMETER)"
    r"|Epoch: (\d+)(?:\s+Iteration: (\d+))?"
    r"|Iteration: (\d+)"
    r"|\( *(\d+)?(?:, *(\d+))?(?:, *\d+)*\))"
)
_THROUGHPUT_ITEM = re.compile(
    r"(?:^|\s)(?P<name>[A-Za-z_][\w.]*(?:ips|throughput)) : (?P<value>\S+)"
    r"(?: (?P<unit>images/s|img/s|imgs/s|samples/s|sequences/s|tokens/s))?(?=\s|$)"
)
DEFAULT_UNIT = "images/s"


def _json_kind_and_step(step: object) -> tuple[str, int | None, int | None] | None:
    if isinstance(step, str):
        return None if step == "PARAMETER" else (SUMMARY, None, None)
    if isinstance(step, (list, tuple)):
        numbers = [n for n in step if isinstance(n, int)]
        if not numbers:
            return SUMMARY, None, None
        if len(numbers) == 1:
            return PER_EPOCH, None, numbers[0]
        return PER_STEP, numbers[-1], numbers[0]
    if isinstance(step, int):
        return PER_STEP, step, None
    return None


class DLLoggerFormat(LogFormat):
    """Base for the NGC DeepLearningExamples formats; subclasses name metrics and detectors."""

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        json_at = line.find("DLLL {")
        if json_at != -1:
            return list(self._parse_json(line[json_at + 5 :], lineno, rank, path))
        m = _TEXT_LINE.search(line)
        if m is None:
            return []
        y, mo, d, hh, mi, ss, frac, summary, param, epoch, iteration, it_only, first, second = m.groups()
        if param:
            return []
        step = None
        if summary:
            kind = SUMMARY
        elif epoch is not None:
            epoch = int(epoch)
            kind, step = (PER_STEP, int(iteration)) if iteration is not None else (PER_EPOCH, None)
        elif it_only is not None:
            kind, step = PER_STEP, int(it_only)
        elif first is None:
            kind = SUMMARY
        elif second is None:
            kind, epoch = PER_EPOCH, int(first)
        else:
            kind, step, epoch = PER_STEP, int(second), int(first)
        ts = posix_time(y, mo, d, hh, mi, ss, frac)
        found = []
        for name, raw, unit in _THROUGHPUT_ITEM.findall(line, m.end()):
            if raw == "None":
                continue
            found.append(
                Record(to_float(raw, path, lineno), _UNITS.get(unit, unit), name, kind, lineno, step, epoch, ts, rank)
            )
        return found

    def _parse_json(self, payload: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        try:
            entry = parse_json(payload)
        except ValueError as exc:
            raise ParseError(path, f"DLLL line is not valid JSON ({getattr(exc, 'msg', exc)})", lineno) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
            return
        ks = _json_kind_and_step(entry.get("step"))
        if ks is None:
            return
        kind, step, epoch = ks
        ts = entry.get("timestamp")
        try:
            ts = float(ts) if ts is not None else None
        except (TypeError, ValueError):
            ts = None
        for name, raw in entry["data"].items():
            if not (name.endswith("ips") or name.endswith("throughput")) or raw is None:
                continue
            value = to_float(str(raw), path, lineno)
            yield Record(value, DEFAULT_UNIT, name, kind, lineno, step, epoch, ts, rank)


_UNITS = {"": DEFAULT_UNIT, "img/s": DEFAULT_UNIT, "imgs/s": DEFAULT_UNIT}
