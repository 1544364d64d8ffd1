"""Each file read once within a report, a rewrite of it or a verify: what a reader made of a file, kept by the file's
identity and stat (size, mtime, inode) while cached() holds, so that every section, plot and rewrite asking for the
same unchanged file shares one read. Outside cached() every read is fresh."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

_CACHE: dict | None = None  # while cached() holds: (reader, file identity and stat) -> what the reader made of it
T = TypeVar("T")


@contextlib.contextmanager
def cached() -> Iterator[None]:
    """Within it, each file is read once however many sections, plots or rewrites of a report ask for its records
    (a file rewritten since, by size, mtime or inode, is read again); the outermost exit forgets them all."""
    global _CACHE
    outer = _CACHE
    if outer is None:
        _CACHE = {}
    try:
        yield
    finally:
        if outer is None:
            _CACHE = None


def once(kind: str, path: str | Path, read_it: Callable[[], T]) -> T:
    """read_it() for `path`, or within cached() what it gave for the same file unchanged (by size, mtime and inode);
    `kind` keeps apart what different readers make of one file. An exception is never kept. What it gives is shared:
    its readers do not change it."""
    cache = _CACHE
    if cache is None:
        return read_it()
    try:
        st = os.stat(path)
    except OSError:
        return read_it()  # the reader says what is wrong with it
    key = (kind, os.path.abspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in cache:
        cache[key] = read_it()
    return cache[key]
