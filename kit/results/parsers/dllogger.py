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
from kit.results.parsers.base import (
    _MPI_TAG,
    PER_EPOCH,
    PER_STEP,
    SUMMARY,
    TWO_TAGS,
    LogFormat,
    ParseError,
    Record,
    cannot_read,
    last_line_start,
    minute_start,
    new_record,
    posix_time,
    scan_lines,
    split_rank_fragments,
    to_float,
)

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
# _TEXT_LINE over a whole log: its blanks never cross a line's end (each line is read alone)
_TEXT_LINE_IN_TEXT = re.compile(_TEXT_LINE.pattern.replace(r"\s", r"[^\S\n]"))
_MAX_INT_DIGITS = 4300
_POW10 = [10**n for n in range(33)]  # int() refuses longer digit strings (a ValueError scan_lines reports)


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

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        """scan_lines + parse_line, over the whole text at once where each line has at most one mpirun tag (at its
        start) and no line is JSON."""
        tagged = "<std" in text  # mpirun --tag-output: read here where each line has at most one tag
        if "DLLL {" in text or (tagged and TWO_TAGS.search(text)):
            return super().parse_text(text, path)
        stop = last_line_start(text)
        records = self._scan(text, stop, tagged, path)
        if stop < len(text):  # the final line has no newline: scan_lines' rules for a cut line
            records += scan_lines(text[stop:], self.needle, lambda ln, no, rk: self.parse_line(ln, no, rk, path), path,
                                  self.value_delimited, text.count("\n", 0, stop) + 1)
        return records

    def _scan(self, text: str, stop: int, tagged: bool, path: str | Path) -> list[Record]:
        """scan_lines + parse_line on every line before stop, one match at a time."""
        records: list[Record] = []
        append = records.append
        items = _THROUGHPUT_ITEM.findall
        item_at = _THROUGHPUT_ITEM.match
        units = _UNITS
        minutes: dict[str, int] = {}  # 'YYYY-MM-DD HH:MM' -> posix_time of its start
        lineno, counted_to, last = 1, 0, -1
        for m in _TEXT_LINE_IN_TEXT.finditer(text, 0, stop):
            begin = m.start()
            start = text.rfind("\n", 0, begin) + 1
            if start == last:  # the line's first match is the one parse_line reads
                continue
            last = start
            after = m.end()
            end = text.find("\n", after)
            if text[end - 1] == "\r":
                end -= 1
            lineno += text.count("\n", counted_to, start)
            counted_to = start
            rank = None
            if tagged:
                tag = _MPI_TAG.match(text, start)
                if tag is None:  # text before a tag, or no tag at all: split_rank_fragments decides
                    try:
                        found = [r for rk, fragment in split_rank_fragments(text[start:end])
                                 for r in self.parse_line(fragment, lineno, rk, path)]
                    except ValueError as exc:
                        raise cannot_read(path, exc, lineno) from None
                    records += found
                    continue
                rank = int(tag.group(1))
            y, mo, d, hh, mi, ss, frac, summary, param, epoch, iteration, it_only, first, second = m.groups()
            if param:
                continue
            # findall's items: most lines hold one, right after the step, and no other ' : ' after it
            one = item_at(text, after, end)
            found = (one.groups(""),) if one and text.find(" : ", one.end(), end) == -1 else items(text, after, end)
            if not found and after - begin < _MAX_INT_DIGITS:  # no figure, and no number int() could refuse
                continue
            step = None
            try:
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
                minute = minutes.get(text[begin + 4 : begin + 20])  # the digits right after 'DLL '
                if minute is None:
                    minute = minutes[text[begin + 4 : begin + 20]] = minute_start(y, mo, d, hh, mi)
                # posix_time(y, mo, d, hh, mi, ss, frac), the same float
                seconds = minute + int(ss)
                ts = seconds + ((int(frac) / (_POW10[len(frac)] if len(frac) < 33 else 10 ** len(frac))) if frac else 0.0)
            except ValueError as exc:
                raise cannot_read(path, exc, lineno) from None
            for name, raw, unit in found:
                if raw == "None":
                    continue
                try:
                    value = float(raw)
                except ValueError:
                    value = to_float(raw, path, lineno)  # raises, naming the text
                if value - value:  # inf or nan
                    to_float(raw, path, lineno)
                append(new_record(Record, (value, units.get(unit, unit), name, kind, lineno, step, epoch, ts, rank)))
        return records

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
