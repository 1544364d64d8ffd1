"""PaddlePaddle/models release/1.8 image classification (PaddleCV/image_classification): per-batch 'elapse'.

utils/utility.py print_info(info_mode, metrics, time_info, ...) of the 1.7/1.8 line (release/1.8 is what
Oneflow-Inc/DLPerf PaddlePaddle/resnet50v1.5 benchmarked; commit of the quoted version unknown), called from
train.py with
`print_info("batch", train_batch_metrics_avg, train_batch_elapse, pass_id, train_batch_id, args.print_step)`
by trainer 0 only:
    logger.info("[Pass {0}, train batch {1}] \\tloss {2}, acc1 {3}, acc{7} {4}, lr {5}, elapse {6}".format(
        pass_id, batch_id, "%.5f" % loss, "%.5f" % acc1, "%.5f" % acc5, "%.5f" % lr,
        "%2.4f sec" % time_info, min(class_dim, 5)))
    (mixup: "[Pass {0}, train batch {1}] \\tloss {2}, lr {3}, elapse {4}")
    'INFO:utils.utility:[Pass 0, train batch 10] \\tloss 6.90215, acc1 0.00000, acc5 0.00391, lr 0.10000, elapse 0.3618 sec'
Earlier releases (PaddlePaddle/models utils/utility.py @ 05f6a80bef994cfd7e11c482bc5ea5278c7b5f5a) print()
the same text with "acc5" and "%2.2f sec". Test-batch lines ('[Pass 0, test  batch 10] ... elapse') are
evaluation, never training throughput.

The logger is `logging.basicConfig(level=logging.INFO)` ('INFO:utils.utility:' prefix); runs whose root
logger has an %(asctime)s format carry '2020-07-29 12:34:56,789' before the message, which is the time
DLPerf's PaddlePaddle/resnet50v1.5/extract_paddle_logs_time.py (Oneflow-Inc/DLPerf) reads; it is
recorded when present.

The value is seconds per batch (`train_batch_elapse = t2 - t1`, t1 taken after the previous
batch's bookkeeping, so data waiting is included), kept as printed: unit "s", never inverted here.
The batch it covers is args.batch_size ("Minibatch size on all the devices" of the process);
DLPerf's extract_paddle_logs.py turns it into samples/s as total_batch_size / elapse.
The line's loss is printed 'loss 6.90215' (no ':'), which the search for a non-finite loss does not read as one
(records.NON_FINITE_LOSS): its lines are searched, and a 'loss nan' gives a figure, as it always did.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_STEP, ParseError, Record, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_ELAPSE = re.compile(
    r"\[Pass (?P<epoch>\d+), train batch (?P<step>\d+)\]\s*loss \S+, (?:acc1 \S+, acc\d+ \S+, )?lr \S+, "
    r"elapse (?P<value>" + NUMBER + r") sec"
)
_ASCTIME = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d+)")


class PaddleModels18(LogFormat):
    name = "paddle-models-1.8"
    description = "PaddlePaddle models 1.8 classification: '[Pass 0, train batch 10] ... elapse 0.3618 sec'"
    needle = re.compile(r"\[Pass \d+, train batch ")
    detectors = (re.compile(r"\[Pass \d+, train batch \d+\]\s*loss [^\n]*?, elapse [\d.]+ sec"),)
    detect_literals = ("train batch ",)
    default_metric = "elapse"
    priority = 35
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        m = _ELAPSE.search(line)
        if m is None:
            return
        refuse_non_finite_loss(line, path, line=lineno)
        value = to_float(m["value"], path, lineno)
        if value <= 0:
            raise ParseError(path, f"batch time 'elapse {m['value']} sec' is not a duration", lineno)
        ts = None
        t = _ASCTIME.search(line, 0, m.start())
        if t:
            ts = posix_time(*t.groups())
        yield Record(value, "s", "elapse", PER_STEP, lineno, int(m["step"]), int(m["epoch"]), ts, rank)
