"""A log's wall-clock times as seconds since the epoch (read as UTC), one at a time or a whole column at once."""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from functools import lru_cache
from itertools import repeat
from operator import add, truediv


@lru_cache(maxsize=4096)
def _day_start(year: int, month: int, day: int) -> int:
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))


_minute_starts: dict[tuple, int] = {}


def minute_start(year, month, day, hh, mm) -> int:
    """posix_time() of the minute's first second, an int (cached)."""
    key = (year, month, day, hh, mm)
    start = _minute_starts.get(key)
    if start is None:
        if len(_minute_starts) > 65536:
            _minute_starts.clear()
        start = _minute_starts[key] = _day_start(int(year), int(month), int(day)) + int(hh) * 3600 + int(mm) * 60
    return start


def posix_time(year, month, day, hh, mm, ss, frac: str | None = None) -> float:
    """Seconds since the epoch of a log's wall-clock time, read as UTC (only differences matter).

    Takes ints or the digit strings a regex captured; frac is the digits after the point. The minute's
    start is cached (logs print thousands of lines a minute); integer sums, so the float is exact.
    """
    seconds = minute_start(year, month, day, hh, mm) + int(ss)
    return seconds + (int(frac) / 10 ** len(frac) if frac else 0.0)


class _MinuteStarts(dict):
    """'YYYY-MM-DD HH:MM' (any separators: digits at those places) -> minute_start(), computed once per minute."""

    def __missing__(self, key: str) -> int:
        start = self[key] = minute_start(key[0:4], key[5:7], key[8:10], key[11:13], key[14:16])
        return start


def posix_times(minutes: Iterable[str], seconds: Iterable[str], fractions: list[str | None] | None = None
                ) -> list[float]:
    """posix_time() of each (minute 'YYYY-MM-DD HH:MM', seconds digits[, fraction digits or None]): the same floats,
    and the same error at the same item, with C-level maps."""
    whole = map(add, map(_MinuteStarts().__getitem__, minutes), map(int, seconds))
    if fractions is None:
        return list(map(float, whole))  # posix_time's int + 0.0
    if None in fractions or "" in fractions:
        return [w + (int(f) / 10 ** len(f) if f else 0.0) for w, f in zip(whole, fractions, strict=True)]
    size = len(fractions[0]) if fractions else 0
    if list(map(len, fractions)).count(size) == len(fractions):  # one length (the usual): one divisor for all
        return list(map(add, whole, map(truediv, map(int, fractions), repeat(10**size))))
    return list(map(add, whole, map(truediv, map(int, fractions), map(pow, repeat(10), map(len, fractions)))))


def leading_times(texts: list[str], regex: re.Pattern[str]) -> list[float] | None:
    """posix_times() of the time each text (holding no newline) starts with, or None when one does not.

    regex starts with a newline and captures the minute, seconds[, fraction] as posix_times() takes them; it runs once
    over the texts each after a newline (a literal to find fast, where '^' is tried at every character), never
    crossing the next: each text's match is the one regex.match('\\n' + text) gives.
    """
    if not texts:
        return []
    found = regex.findall("\n" + "\n".join(texts))
    return posix_times(*zip(*found, strict=True)) if len(found) == len(texts) else None
