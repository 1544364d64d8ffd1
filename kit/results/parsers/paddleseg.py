"""PaddleSeg (tools/train.py, paddleseg/core/train.py): per-card 'ips' of the [TRAIN] lines.

Every log_iters iterations, on every card:
    '2023-07-27 12:54:59 [INFO]\\t[TRAIN] epoch: 1, iter: 30/400, loss: 1.4993, lr: 0.009345,
     batch_cost: 0.5432, reader_cost: 0.01917, ips: 14.7280 samples/sec | ETA 00:03:20'
'ips' is one card's images/s (batch_size / batch_cost): the job's figure is ips x cards (--scale).
The launcher's 'ips: 127.0.0.1' (a host list) is not a [TRAIN] line and is never read.
"""

from __future__ import annotations

import re

from kit.results.parsers.paddle_ips import PaddleIpsLine


class PaddleSeg(PaddleIpsLine):
    name = "paddleseg"
    description = "PaddleSeg: per-card '[TRAIN] epoch: 1, iter: 30/400, ... ips: 14.7280 samples/sec'"
    needle = re.compile(r"\[TRAIN\] epoch: ")
    detectors = (re.compile(r"\[TRAIN\] epoch: \d+, iter: \d+/\d+, "),)
    detect_literals = ("[TRAIN] epoch: ",)
    priority = 65  # its 'ips: 14.7 samples/sec' would also satisfy PaddleClas's (50) detector
    head = r"\[TRAIN\] epoch: (?P<epoch>\d+), iter: (?P<step>\d+)/\d+, "
    unit_chars = r"[^\s|]"
    units = {"samples/sec": "samples/s", "samples/s": "samples/s", "images/sec": "images/s", "images/s": "images/s"}
    time = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
    times = re.compile(r"\n(\d{4}-\d\d-\d\d \d\d:\d\d):(\d\d)")
