"""Records built a column at a time (the bulk paths): columns of raw matches read as numbers and units, items
dropped, Records made with C-level maps while the garbage collector waits.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from contextlib import contextmanager
from itertools import chain, compress, repeat

from kit.results.parsers.records import Record, new_record


@contextmanager
def gc_paused():
    """The cyclic garbage collector off while a log's records are built: they are tuples of numbers and strings (no
    cycles to find), and its passes over hundreds of thousands of fresh tuples cost as much as building them."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def finite_floats(raws: list[str]) -> list[float] | None:
    """float() of each, or None when one is not a finite float (the caller reads them one by one then)."""
    try:
        values = list(map(float, raws))
    except (TypeError, ValueError):
        return None
    total = sum(values)
    return None if total - total else values  # nan or inf in the values, or a sum past the float range


def ints(raws: list[str]) -> list[int] | None:
    try:
        return list(map(int, raws))
    except (TypeError, ValueError):
        return None


def units_of(raws: list[str], units: dict[str, str]) -> list[str | None]:
    """units[raw.rstrip(",.")] of each (None where unknown), as a record_of() reads a unit that ends a clause; the
    keys of units end in neither."""
    found = list(map(units.get, raws))
    if None in found:  # a unit followed by ',' or '.', or one the format does not know
        found = list(map(units.get, map(str.rstrip, raws, repeat(",."))))
    return found


def positions(column: list, value) -> list[int]:
    """Each i where column[i] == value, in order: list.index() from one to the next (C speed where they are few)."""
    found, at, index = [], -1, column.index
    for _ in range(column.count(value)):
        at = index(value, at + 1)
        found.append(at)
    return found


def drop(columns: Iterable[list], at: list[int]) -> list[list]:
    """Each column but its items at the (increasing) positions at: slices between them where they are few, compress()
    where they are many."""
    columns = list(columns)
    if not at:
        return columns
    if len(at) * 16 > len(columns[0]):
        keep = [True] * len(columns[0])
        for i in at:
            keep[i] = False
        return [list(compress(column, keep)) for column in columns]
    bounds = [-1, *at]
    ends = [*at, None]
    return [list(chain.from_iterable(map(column.__getitem__, map(slice, map((1).__add__, bounds), ends))))
            for column in columns]


def make_records(*columns) -> list[Record]:
    """Records from columns of equal length (a str or None column is repeated)."""
    return list(map(new_record, repeat(Record), zip(*(repeat(c) if c is None or isinstance(c, str) else c
                                                      for c in columns), strict=False)))
