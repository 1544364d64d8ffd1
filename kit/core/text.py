"""Text from tools, bundles and logs: printed-for-a-terminal output made plain (clean_output), and anything from a
bundle or a log made safe to print: no character in it can move the cursor, end a line, clear the
screen or reorder what follows.

What a bundle or a log holds (member names, log lines, values) is the author's, not the kit's: a name holding
"\\n  OK: fake\\x1b[2K" would print a line the kit never wrote. printable() writes every such character as an
escape a reader sees: C0 controls (newline, CR, tab, ESC, ...), DEL, C1 controls, the Unicode line and paragraph
separators (str.splitlines splits there) and the bidirectional marks, embeddings, overrides and isolates
(U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: "Trojan Source", CVE-2021-42574). Everything else,
backslashes included, is kept as it is: a name stays readable, and no escape can end a line.
"""

from __future__ import annotations

import re

# ECMA-48: CSI (ESC [ params intermediates final: colours, underline, cursor), OSC (ESC ] ... BEL or ESC \, on
# one line), and the short ones (ESC [intermediates] final: ESC =, ESC ( B, ...)
TERMINAL_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[ -/]*[0-~])")


def clean_output(text: str) -> str:
    """What a tool printed for a terminal, as plain lines: escape sequences removed, CRLF as LF; the lines stay
    where they were (errors name them). Driver 580 wraps the header of `nvidia-smi topo -m` in ESC[4m ... ESC[0m
    even when the output is a file."""
    return TERMINAL_ESCAPE.sub("", text).replace("\r\n", "\n")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
UNSAFE = frozenset(
    [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
    + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
    + [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
)


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


_TABLE = {ord(ch): _escape(ch) for ch in UNSAFE}


def printable(value: object) -> str:
    """str(value) with every control, line-separator and bidi character written as an escape (\\n, \\x1b,
    \\u202e): one line, shown as it is stored."""
    return str(value).translate(_TABLE)
