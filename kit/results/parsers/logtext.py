"""A log's text: read and decoded (missing, empty and binary files refused), and a fast search for a literal in it."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from kit.core.inputs import read_input
from kit.core.text import TERMINAL_ESCAPE
from kit.results.parsers.records import ParseError

BINARY_SNIFF_BYTES = 8192
# Real text logs can carry a stray NUL (Paddle 2.5 prints 'WARNING: device: \x00.' on a cuDNN mismatch):
# a file is binary when NULs are more than this share of its first BINARY_SNIFF_BYTES, not at the first one.
BINARY_NUL_SHARE = 1 / 1000


def read_log_text(path: str | Path) -> str:
    """The log as text; refuses missing, empty and binary files."""
    return decode_log_bytes(read_input(path, "log file", ParseError), path)


def decode_log_bytes(data: bytes, path: str | Path) -> str:
    if not data or data.isspace():  # what `not data.strip()` says, without copying the log
        raise ParseError(path, "empty file")
    head_bytes = data[:BINARY_SNIFF_BYTES]
    if head_bytes.count(0) > max(1, int(len(head_bytes) * BINARY_NUL_SHARE)):
        raise ParseError(path, "binary file (NUL bytes), not a text log")
    text = data.decode("utf-8", errors="replace")
    head = text[:BINARY_SNIFF_BYTES]
    if head.count("\ufffd") > len(head) // 10:
        raise ParseError(path, "binary file (mostly non-UTF-8 bytes), not a text log")
    return text


def holds(text: str, literal: str, rare: int = 0) -> bool:
    """literal in text, found through its character literal[rare], one rare in logs ('<', '{'): memchr to each, then a
    compare (over megabytes several times faster than `in`, which slows on the literal's common letters). Where that
    character is not rare after all (over one a 4 KiB), the regex engine's literal search (faster than `in` too)."""
    find, startswith, char = text.find, text.startswith, literal[rare]
    at = find(char, rare)
    for _ in range(64 + len(text) // 4096):
        if at == -1:
            return False
        if startswith(literal, at - rare):
            return True
        at = find(char, at + 1)
    return _literal(literal).search(text, at - rare) is not None


@lru_cache(maxsize=64)
def _literal(literal: str) -> re.Pattern[str]:
    return re.compile(re.escape(literal))



ANSI_ESCAPE = TERMINAL_ESCAPE  # one pattern for every reader of terminal output (kit.core.text)
