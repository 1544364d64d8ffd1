"""The one clean-up every capture parser makes first: what a tool printed for a terminal, as plain lines."""

from __future__ import annotations

import re

# ECMA-48: CSI (ESC [ params intermediates final: colours, underline, cursor), OSC (ESC ] ... BEL or ESC \, on
# one line), and the short ones (ESC [intermediates] final: ESC =, ESC ( B, ...)
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[ -/]*[0-~])")


def clean_output(text: str) -> str:
    """text without terminal escape sequences and with CRLF as LF; the lines stay where they were (errors name them).

    Driver 580 wraps the header of `nvidia-smi topo -m` in ESC[4m ... ESC[0m even when the output is a file."""
    return _ESCAPE.sub("", text).replace("\r\n", "\n")
