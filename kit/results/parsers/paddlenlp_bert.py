"""PaddleNLP BERT pre-training (examples/language_model/bert/static/run_pretrain.py): per-card 'ips'.

Every logging_steps steps, on every card:
    'total step: 100, epoch: 0, batch: 99, loss: 10.973790, avg_reader_cost: 0.00008 sec,
     avg_batch_cost: 0.14302 sec, avg_samples: 96.00000, ips: 670.84088 sequences/sec'
The 2021 release of the script spells the first word 'tobal step'. 'ips' is one card's
sequences/s (avg_samples / avg_batch_cost): the job's figure is ips x cards (--scale).
"""

from __future__ import annotations

import re

from kit.results.parsers.paddle_ips import PaddleIpsLine


class PaddleNLPBert(PaddleIpsLine):
    name = "paddlenlp-bert"
    description = "PaddleNLP BERT: per-card 'total step: 100, ... ips: 670.84 sequences/sec'"
    needle = re.compile(r"al step: ")  # total / tobal: a literal needle is fast
    detectors = (re.compile(r"total step: \d+, epoch: \d+, batch: \d+, "),
                 re.compile(r"tobal step: \d+, epoch: \d+, batch: \d+, "))
    detect_literals = ("total step: ", "tobal step: ")
    priority = 56
    # 'to[tb]al': total or tobal, starting with literal characters (fast over a whole log)
    head = r"to[tb]al step: (?P<step>\d+), epoch: (?P<epoch>\d+), batch: \d+, "
    unit_chars = r"[^\s\x1b]"  # the unit ends at a space or the logger's colour reset
    units = {"sequences/sec": "sequences/s", "sequences/s": "sequences/s", "seqs/sec": "sequences/s",
             "samples/sec": "samples/s", "samples/s": "samples/s"}
