"""NVIDIA DLLogger output, as printed by DeepLearningExamples (shared by the NGC formats).

Text backend: 'DLL 2023-08-04 05:46:28.192913 - <step> <name> : <value> [unit] ...' where
<step> is 'Epoch: 0 Iteration: 1', 'Epoch: 0', 'Summary:', '(0, 210)', '()' or 'PARAMETER'.
JSON backend: 'DLLL {"timestamp": ..., "step": [0, 210], "data": {...}}'.
A line's items hold its loss beside its figure ('train.loss : nan  train.total_ips : 5852.99 img/s'): a loss printed
as NaN or infinite among the items of a line it reads (after its step) refuses the log; a PARAMETER line states a
setting ('init_loss_scale : inf'), never a step's loss, and is not searched.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import accumulate, compress, repeat
from operator import add, itemgetter
from pathlib import Path

from kit.core.inputs import parse_json
from kit.results.parsers.base import LogFormat
from kit.results.parsers.columns import drop, finite_floats, make_records, positions
from kit.results.parsers.lines import MPI_TAG, TWO_TAGS, last_line_start, line_ranks, scan_lines, split_rank_fragments
from kit.results.parsers.logtext import holds
from kit.results.parsers.records import (
    PER_EPOCH,
    PER_STEP,
    SUMMARY,
    ParseError,
    Record,
    cannot_read,
    new_record,
    non_finite_loss,
    refuse_non_finite_loss,
    to_float,
)
from kit.results.parsers.times import minute_start, posix_time, posix_times

# time, then the step: Summary: | PARAMETER | Epoch: e [Iteration: i] | Iteration: i | (e, i) | ()
# ((?:x|) is (?:x)?, and x*+ is x* where no backtracking into it can let ')' match: faster, see records.NUMBER)
_TEXT_LINE = re.compile(
    r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+)|) - \s*"
    r"(?:(Summary:)"
    r"|(PARAMETER)"
    r"|Epoch: (\d+)(?:\s+Iteration: (\d+)|)"
    r"|Iteration: (\d+)"
    r"|\( *(?:(\d+)|)(?:, *(\d+)|)(?:, *\d+)*+\))"
)
ITEM = (  # a throughput item: its name, value and unit (groups)
    r"([A-Za-z_][\w.]*(?:ips|throughput)) : (\S+)(?: (images/s|img/s|imgs/s|samples/s|sequences/s|tokens/s)|)"
)
_THROUGHPUT_ITEM = re.compile(r"(?:^|\s)" + ITEM + r"(?=\s|$)")
DEFAULT_UNIT = "images/s"
# _TEXT_LINE over a whole log: its blanks never cross a line's end (each line is read alone)
_TEXT_LINE_IN_TEXT = re.compile(_TEXT_LINE.pattern.replace(r"\s", r"[^\S\n]"))
_MAX_INT_DIGITS = 4300
_POW10 = [10**n for n in range(33)]  # int() refuses longer digit strings (a ValueError scan_lines reports)
# _TEXT_LINE_IN_TEXT for the bulk path, the same matches: the time as posix_times() takes it (minute, seconds,
# fraction), the step with its blanks (a whole group: its length bounds the head's), the step's groups, and the rest
# of the line (a line's first head is its one match)
_BULK_LINE = re.compile(
    r"DLL (\d{4}-\d\d-\d\d[ T]\d\d:\d\d):(\d\d)(?:\.(\d+)|) - "
    r"([^\S\n]*(?:(Summary:)|(PARAMETER)|Epoch: (\d+)(?:[^\S\n]+Iteration: (\d+)|)|Iteration: (\d+)"
    r"|\( *(?:(\d+)|)(?:, *(\d+)|)(?:, *\d+)*+\)))([^\n]*)"
)
# _THROUGHPUT_ITEM over the rests of the lines joined by newlines, re.MULTILINE: '$' at each rest's end; the blank
# before an item is one of its own rest ('^' and a newline never start one: findall from the step's end)
_ITEM_IN_RESTS = re.compile(r"[^\S\n]" + ITEM + r"(?=\s|$)", re.MULTILINE)
_BULK_HEAD = len("DLL YYYY-MM-DD HH:MM:SS. - ")  # a head's length beside its step and fraction
# _ITEM_IN_RESTS' matches found from their ' : ' (a literal: the regex engine skips to each, where _ITEM_IN_RESTS is
# tried at every blank): the ' : ' after a name's last four (eleven) characters ending in 'ips' ('throughput'), ITEM's
# value and unit; the name is the text between the blank before it and the ' : ' (see _items)
_UNIT = r"(?: (images/s|img/s|imgs/s|samples/s|sequences/s|tokens/s)|)(?=\s|$)"
_ITEM_TAIL = re.compile(r" : (?:(?<=[\w.]ips : )|(?<=[\w.]throughput : ))(\S+)" + _UNIT, re.MULTILINE)
_IPS_ITEM_TAIL = re.compile(r"ips : (?<=[\w.]ips : )(\S+)" + _UNIT, re.MULTILINE)  # where no 'throughput : ' is
_NAMES = re.compile(r"(?:[A-Za-z_][\w.]*\n)*")  # names, each followed by a newline
assert ITEM.endswith(_UNIT[: -len(r"(?=\s|$)")])


def _items(rests: str) -> tuple[list[str], list[str], list[str], list[str | None]]:
    """_ITEM_IN_RESTS.split(rests)'s texts before each item (the newlines in them as many), names, values and units.

    From _ITEM_TAIL's (_IPS_ITEM_TAIL's) matches where the text before each (after the one before) ends with a blank (' '), then the name
    ([A-Za-z_][\\w.]*): then _ITEM_IN_RESTS matches at each of those blanks, and nowhere else (each of its matches holds
    one ' : ', where _ITEM_TAIL matches, the same value and unit after it). Else (an item after a tab, an item's value
    that is the next one's name) _ITEM_IN_RESTS itself.
    """
    ips_only = "throughput : " not in rests  # then each item's ' : ' follows 'ips': _IPS_ITEM_TAIL, the name's 'ips' in it
    parts = (_IPS_ITEM_TAIL if ips_only else _ITEM_TAIL).split(rests)  # gap, value, unit, gap, ...
    gaps = parts[::3]
    n = len(gaps) - 1
    cut = list(map(str.rpartition, gaps[:n], repeat(" ")))  # (before, ' ', name or the name but its 'ips')
    names = list(map(itemgetter(2), cut))
    joined = "\n".join(names) + "\n"
    if list(map(itemgetter(1), cut)).count(" ") == n and joined.count("\n") == n and _NAMES.fullmatch(joined):
        return gaps, list(map(add, names, repeat("ips"))) if ips_only else names, parts[1::3], parts[2::3]
    items = _ITEM_IN_RESTS.split(rests)
    return items[::4], items[1::4], items[2::4], items[3::4]


def head_ranks(gaps: list[str]) -> list[int] | None:
    """Each head's mpirun rank, from split()'s text between the heads (each head's match ends its line); None unless
    each head's line starts with one tag."""
    tagged = line_ranks(list(map(itemgetter(2), map(str.rpartition, gaps[:-1], repeat("\n")))))
    return None if tagged is None else tagged[0]


def _pick(column: list, index: list[int]) -> list:
    """column[i] for each i of index."""
    return list(map(column.__getitem__, index))


def _kind_step_epoch(summary: str | None, epoch: str | None, iteration: str | None, it_only: str | None,
                     first: str | None, second: str | None) -> tuple[str, int | None, int | None]:
    """A text line's kind, step and epoch from _TEXT_LINE's step groups."""
    if summary:
        return SUMMARY, None, None
    if epoch is not None:
        return (PER_STEP, int(iteration), int(epoch)) if iteration is not None else (PER_EPOCH, None, int(epoch))
    if it_only is not None:
        return PER_STEP, int(it_only), None
    if first is None:
        return SUMMARY, None, None
    if second is None:
        return PER_EPOCH, None, int(first)
    return PER_STEP, int(second), int(first)


def _ints_or_none(column: list[str | None]) -> list[int | None]:
    """[s and int(s) for s in column] (s a digit string or None), in one map(int) where the Nones are few."""
    if None not in column:
        return list(map(int, column))
    nones = positions(column, None)
    if len(nones) * 16 > len(column):
        return [s and int(s) for s in column]
    column = column.copy()
    for i in nones:
        column[i] = "0"
    found = list(map(int, column))
    for i in nones:
        found[i] = None
    return found


PER_SUMMARY_OR_EPOCH = (PER_EPOCH, SUMMARY)  # [no epoch]: a row without a step


def _holds_non_finite_loss(rests: str, params: list[str | None]) -> bool:
    """Whether a head's rest of its line but a PARAMETER line's (rests: them joined by newlines; params: each head's
    PARAMETER group) holds a loss printed as NaN or infinite."""
    found = non_finite_loss(rests)
    while found is not None:
        if params[rests.count("\n", 0, found[0])] is None:
            return True
        after = rests.find("\n", found[1])  # a PARAMETER line's: search from the next
        found = None if after == -1 else non_finite_loss(rests, after + 1)
    return False


def _shapes(summaries: list, epochs: list, iterations: list, it_onlys: list, firsts: list, seconds: list
            ) -> tuple[list, list, list]:
    """_kind_step_epoch of each row of the columns, as three columns (kinds, steps, epochs); a ValueError as it raises
    one (or where it reads no number). Column-wise where the steps are all 'Epoch: e[ Iteration: i]', 'Summary:' or
    '()' (the other groups None): kind per-step where i is, else per-epoch where e is, else summary."""
    n = len(epochs)
    if it_onlys.count(None) != n or firsts.count(None) != n or seconds.count(None) != n:
        shapes = list(map(_kind_step_epoch, summaries, epochs, iterations, it_onlys, firsts, seconds))
        return (list(map(itemgetter(0), shapes)), list(map(itemgetter(1), shapes)),
                list(map(itemgetter(2), shapes)))
    steps, numbers = _ints_or_none(iterations), _ints_or_none(epochs)
    kinds = [PER_STEP] * n
    for i in positions(iterations, None):
        kinds[i] = PER_SUMMARY_OR_EPOCH[epochs[i] is None]
    return kinds, steps, numbers



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

    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        json_at = line.find("DLLL {")
        if json_at != -1:
            return list(self._parse_json(line[json_at + 5 :], lineno, rank, path))
        m = _TEXT_LINE.search(line)
        if m is None:
            return []
        y, mo, d, hh, mi, ss, frac, summary, param, *step_groups = m.groups()
        if param:
            return []
        refuse_non_finite_loss(line, path, m.end(), line=lineno)
        kind, step, epoch = _kind_step_epoch(summary, *step_groups)
        ts = posix_time(y, mo, d, hh, mi, ss, frac)
        found = []
        for name, raw, unit in _THROUGHPUT_ITEM.findall(line, m.end()):
            if raw == "None":
                continue
            found.append(
                Record(to_float(raw, path, lineno), UNITS.get(unit, unit), name, kind, lineno, step, epoch, ts, rank)
            )
        return found

    def parse_text(self, text: str, path: str | Path) -> list[Record]:
        """scan_lines + parse_line, over the whole text at once where no line is JSON: _scan's reading (a line without a
        figure is not read) where each line has at most one mpirun tag, at its start; else scan_lines' (each line's
        step and time are read), its lines of two fragments one by one."""
        if holds(text, "DLLL {", 5):
            return super().parse_text(text, path)
        tagged = holds(text, "<std")  # mpirun --tag-output
        stop = last_line_start(text)
        if not (tagged and TWO_TAGS.search(text)):
            records = self._bulk(text[:stop] if stop < len(text) else text, tagged)
            if records is None:
                records = self._scan(text, stop, tagged, path)
        else:
            records = self._scan_lines_bulk(text, stop, path)
        if stop < len(text):  # the final line has no newline: scan_lines' rules for a cut line
            records += scan_lines(text[stop:], self.needle, lambda ln, no, rk: self.parse_line(ln, no, rk, path), path,
                                  self.value_delimited, text.count("\n", 0, stop) + 1)
        return records

    def _scan_lines_bulk(self, text: str, stop: int, path: str | Path) -> list[Record]:
        """scan_lines + parse_line on the text's lines before stop (a tagged log with lines of two mpirun fragments): in
        bulk with those lines emptied, each of them read by scan_lines alone, its records put in at its line."""
        def read(lines: str, first_line: int = 1) -> list[Record]:
            return scan_lines(lines, self.needle, lambda ln, no, rk: self.parse_line(ln, no, rk, path), path,
                              self.value_delimited, first_line)

        odd = [(text.rfind("\n", 0, m.start()) + 1, text.index("\n", m.end())) for m in TWO_TAGS.finditer(text, 0, stop)]
        kept, at = [], 0  # the text but those lines' contents (their newlines stay: so do the line numbers)
        for begin, end in odd:
            kept.append(text[at:begin])
            at = end
        kept.append(text[at:stop])
        records = self._bulk("".join(kept), True, every_line=True)
        if records is None:
            return read(text[:stop])
        out, taken, lineno, counted = [], 0, 1, 0
        for begin, end in odd:
            lineno += text.count("\n", counted, begin)
            counted = begin
            cut = bisect_right(records, lineno, taken, key=itemgetter(4))  # the records of the lines before it
            out += records[taken:cut]
            out += read(text[begin : end + 1], lineno)
            taken = cut
        return out + records[taken:]

    def _bulk(self, text: str, tagged: bool, every_line: bool = False) -> list[Record] | None:
        """_scan's records of text (whole lines) from one regex.split() for the heads and one for the throughput items,
        C-level maps, and Python code per figure only for its step's groups; with every_line, scan_lines' (parse_line
        reads the step and time of each head but a PARAMETER one, on a line without a figure too).
        None where a line needs more (_scan or scan_lines reads the text then, errors included): a line not behind
        one mpirun tag in a tagged log, a number int() refuses (or, for _scan, a head long enough to hold one), a
        figure float() refuses or that is not finite, a time posix_time() refuses, a loss printed as NaN or infinite.
        """
        k = _BULK_LINE.groups + 1
        parts = _BULK_LINE.split(text)  # gap, 12 groups, gap, ...
        gaps = parts[::k]
        n = len(gaps) - 1
        minutes, seconds, fractions, steps, summaries, params, *step_groups, rests = (parts[j::k] for j in range(1, k))
        if not every_line and n and _MAX_INT_DIGITS <= (
                _BULK_HEAD + max(map(len, steps)) + max(map(len, filter(None, fractions)), default=0)):
            return None  # _scan reads such a head's numbers even on a line without a figure
        lines = list(accumulate(map(str.count, gaps[:n], repeat("\n")), initial=1))
        del lines[0]  # each head's line: a head's rest ends at its line's end, each line has one
        ranks = head_ranks(gaps) if tagged else None
        if tagged and ranks is None:
            return None
        # the items: the rests joined, each item's rest (line) from the newlines before it
        joined = "\n".join(rests)
        if _holds_non_finite_loss(joined, params):  # (_scan or scan_lines names it)
            return None
        befores, names, raws, units = _items(joined)
        at = list(accumulate(map(str.count, befores[:-1], repeat("\n"))))
        if "PARAMETER" in params:  # a PARAMETER line's items are no figures
            heads_at = positions(params, "PARAMETER")
            at, names, raws, units = drop((at, names, raws, units), [
                i for head in heads_at for i in range(bisect_left(at, head), bisect_right(at, head))])
        # each item's step and time, its line's: _scan reads those of the lines with an item (a 'None' too),
        # parse_line those of each head but a PARAMETER one's
        heads = [p is None for p in params] if every_line else []
        read = list(compress(range(n), heads)) if every_line else at
        try:
            kinds, steps, epochs = _shapes(*(_pick(column, read) for column in [summaries, *step_groups]))
            times = posix_times(_pick(minutes, read), _pick(seconds, read), _pick(fractions, read))
        except ValueError:
            return None
        if every_line:  # each item's: its line's place among the heads read
            places = [place - 1 for place in _pick(list(accumulate(heads)), at)]
            kinds, steps, epochs, times = (_pick(column, places) for column in (kinds, steps, epochs, times))
        if "None" in raws:  # an item 'None' is no figure
            at, names, raws, units, kinds, steps, epochs, times = drop(
                (at, names, raws, units, kinds, steps, epochs, times), positions(raws, "None"))
        values = finite_floats(raws)
        if values is None:
            return None
        if not at:
            return []
        return make_records(values, list(map(UNITS.get, units, units)), names, kinds, _pick(lines, at), steps, epochs,
                            times, None if ranks is None else _pick(ranks, at))

    def _scan(self, text: str, stop: int, tagged: bool, path: str | Path) -> list[Record]:
        """scan_lines + parse_line on every line before stop, one match at a time."""
        records: list[Record] = []
        append = records.append
        items = _THROUGHPUT_ITEM.findall
        item_at = _THROUGHPUT_ITEM.match
        units = UNITS
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
                tag = MPI_TAG.match(text, start)
                if tag is None:  # text before a tag, or no tag at all: split_rank_fragments decides
                    try:
                        found = [r for rk, fragment in split_rank_fragments(text[start:end])
                                 for r in self.parse_line(fragment, lineno, rk, path)]
                    except ValueError as exc:
                        raise cannot_read(path, exc, lineno) from None
                    records += found
                    continue
                rank = int(tag.group(1))
            y, mo, d, hh, mi, ss, frac, summary, param, *step_groups = m.groups()
            if param:
                continue
            refuse_non_finite_loss(text, path, after, end, lineno)
            # findall's items: most lines hold one, right after the step, and no other ' : ' after it
            one = item_at(text, after, end)
            found = (one.groups(""),) if one and text.find(" : ", one.end(), end) == -1 else items(text, after, end)
            if not found and after - begin < _MAX_INT_DIGITS:  # no figure, and no number int() could refuse
                continue
            try:
                kind, step, epoch = _kind_step_epoch(summary, *step_groups)
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
        refuse_non_finite_loss(payload, path, line=lineno)
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


UNITS = {"": DEFAULT_UNIT, None: DEFAULT_UNIT, "img/s": DEFAULT_UNIT, "imgs/s": DEFAULT_UNIT}  # None: split()'s no unit
