"""PaddleNLP Transformer (examples/machine_translation/transformer/static/train.py): per-card 'ips'.

Every print_step steps, on every card. 2023 (the logger's prefix in ANSI colours):
    '\\x1b[32m[2023-07-31 11:35:31,558] [    INFO]\\x1b[0m - step_idx: 100, epoch: 0, batch: 100, avg loss: ...,
     batch_cost: 0.20967 sec, reader_cost: 0.00008 sec, tokens: 47286, ips: 22552.83189 words/sec'
2021:
    '2021-05-08 17:19:20,407-INFO: step_idx: 100, epoch: 0, batch: 100, avg loss: 8.613505, ...,
     avg_speed: 4.77 step/s, batch_cost: 0.20967 sec, reader_cost: 0.00008 sec, tokens: 47286,
     ips: 22552.83189 words/sec'
'ips' is one card's target words/s (tokens / batch_cost): the job's figure is ips x cards (--scale).
'avg_speed' (steps/s) is not a throughput of the data and is not read.
"""

from __future__ import annotations

import re
from itertools import repeat

from kit.results.parsers.logtext import ANSI_ESCAPE
from kit.results.parsers.paddle_ips import PaddleIpsLine


class PaddleNLPTransformer(PaddleIpsLine):
    name = "paddlenlp-transformer"
    description = "PaddleNLP Transformer: per-card 'step_idx: 100, ... ips: 22552.83 words/sec'"
    needle = re.compile(r"step_idx: ")
    detectors = (re.compile(r"step_idx: \d+, epoch: \d+, batch: \d+, avg loss: "),)
    detect_literals = ("step_idx: ",)
    priority = 57
    head = r"step_idx: (?P<step>\d+), epoch: (?P<epoch>\d+), batch: \d+, "
    loss = "avg loss: "
    unit_chars = r"[^\s\x1b]"  # the unit ends at a space or the logger's colour reset
    units = {"words/sec": "words/s", "words/s": "words/s", "tokens/sec": "tokens/s", "tokens/s": "tokens/s"}
    time = re.compile(r"\[?(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)")
    times = re.compile(r"\n\[?(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d),(\d+)")

    # the 2023 logger colours its '[time] [INFO]' prefix
    def time_of(self, prefix: str) -> float | None:
        if "\x1b" in prefix:
            prefix = ANSI_ESCAPE.sub("", prefix)
        return super().time_of(prefix)

    def times_of(self, prefixes: list[str]) -> list[float | None]:
        if any(map(str.__contains__, prefixes, repeat("\x1b"))):
            prefixes = ANSI_ESCAPE.sub("", "\n".join(prefixes)).split("\n")  # (the escapes never hold a newline)
        return super().times_of(prefixes)
