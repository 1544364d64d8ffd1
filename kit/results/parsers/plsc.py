"""PLSC (PaddlePaddle large-scale classification, ArcFace): its three throughput prints.

All three figures are for the WHOLE job (every card), so records are per-step, never per-card.

1.x static engine: PaddlePaddle/PLSC plsc/entry.py (Entry.train) @ 019957718a83f0e4be287c89520d84c78fef664d:
    logger.info("Pass:{} batch:{} lr:{} loss:{} qps:{:.2f}".format(pass_id, batch_id, avg_lr, avg_loss, speed))
    logging format '%(asctime)s - %(levelname)s - %(message)s', datefmt '%d %b %Y %H:%M:%S':
    '28 Jan 2020 10:11:12 - INFO - Pass:0 batch:200 lr:0.1 loss:11.235 qps:1234.56'
  later 1.x releases (the kit's pin 9bba9c90f542, 2020-07-30, which DLPerf ran on Paddle 1.8.5: entry.py:1022-1027,
  its formatter entry.py:49-50; and the Paddle 2.0 static releases, same file) print
    "Pass:{} batch:{} lr:{:.8f} loss:{:.6f} qps:{:.2f}" (+ " acc1:{:.6f} acc5:{:.6f}") through
    '%(levelname)s %(asctime)s %(filename)s:%(lineno)d] %(message)s':
    'INFO 2021-01-20 10:00:00,123 entry.py:1050] Pass:0 batch:200 lr:0.10000000 loss:40.123456 qps:1234.56'
  as the pin printed it on a CPU (tests/fixtures/genuine-cpu-logs/plsc, DLPerf's patch 2 lines above it):
    'INFO 2026-12-05 04:55:55,568 entry.py:1029] Pass:0 batch:50 lr:0.00019531 loss:46.223274 qps:0.26'
  That release's acc variant, "Pass:{} batch:%d lr:{} loss:{} qps:{:.2f} acc1:{} acc5:{}".format(pass_id,
  batch_id, avg_lr, avg_loss, speed, acc1, acc5), has 6 fields for 7 values: it prints a literal
  'batch:%d', the batch id after 'lr:', the LOSS after 'qps:' and the speed after 'acc1:':
    'Pass:0 batch:%d lr:200 loss:0.1 qps:11.23 acc1:1234.5612 acc5:[0.00390625]'
  so there the figure is read from 'acc1:' and the step from 'lr:', never from 'qps:'.
  qps: `nsamples += global_batch_size` each step (global_train_batch_size = train_batch_size
  x num_trainers), `speed = nsamples / local_time` where local_time sums exe.run() only:
  a global figure of the interval since the last print (reader time excluded).
arcface_paddle (PLSC 2021 dynamic/static): PaddlePaddle/PLSC utils/logging.py
@ c4e9e65c327ba6ddd95a83cd447e92fbf07e9726 (the same CallBackLogging as deepinsight/insightface arcface_paddle):
    msg = "loss %.4f, lr: %f, epoch: %d, step: %d, eta: %1.2f hours, throughput: %.2f imgs/sec" % (...)
    formatter "Training: %(asctime)s - %(message)s":
    'Training: 2021-09-28 11:08:48,654 - loss 45.3045, lr: 0.200000, epoch: 0, step: 100, eta: 13.65 hours,
     throughput: 2607.10 imgs/sec'
  throughput: `speed_total = frequent * batch_size / (time.time() - tic) * world_size`: global. PLSC's own
  experiments/logs/static/ms1mv3_r50_static_128_fp16_0.1/training.log (@ 894c79d34e0d) shows it:
  'world_size: 8', 'total_batch_size: 1024', then '... throughput: 9408.24 imgs/sec'.
2.x engine: PaddlePaddle/PLSC plsc/engine/recognition/utils.py (log_info)
@ 3155fea75572db7a4a1ca77d027d2b2fcf58b5aa (classification/utils.py prints the same):
    total_batch_size = batch_size * world_size
    ips_msg = "ips: {:.5f} images/sec".format(total_batch_size / trainer.time_info["batch_cost"].avg)
    logger.info("[Train][Epoch {}/{}][Iter: {}/{}]{}, {}, {}, {}, {}".format(...))
    formatter '[%(asctime)s] %(name)s %(levelname)s: %(message)s' with the logger named 'plsc':
    '[2022/10/12 10:00:00] plsc INFO: [Train][Epoch 1/25][Iter: 100/5058]lr: 0.200000, loss: 45.30450,
     batch_cost: 0.10000s, reader_cost: 0.00100, ips: 10240.00000 images/sec, eta: 1 day, 2:00:00'
  It looks like PaddleClas's per-card 'ips' but is global: the 'plsc' logger name tells them
  apart, and this format's priority is above PaddleClas's so --format auto picks plsc.
Each of the three lines carries the loss: one printed as NaN or infinite ('loss:nan', 'loss: nan,') refuses the log;
arcface_paddle's 'loss nan,' (no ':') is not read as one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_STEP, Record, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_QPS = re.compile(
    r"Pass:(?P<epoch>\d+)\s+batch:(?P<step>\d+)\s+lr:\S+\s+loss:\S+\s+qps:(?P<value>" + NUMBER + r")(?!\w)"
)
# The oldest acc variant: 6 '{}' for 7 arguments, so lr shows batch_id, qps the loss, acc1 the speed.
_QPS_SHIFTED = re.compile(
    r"Pass:(?P<epoch>\d+)\s+batch:%d\s+lr:(?P<step>\d+)\s+loss:\S+\s+qps:\S+\s+acc1:(?P<value>" + NUMBER + r")(?!\w)"
)
_THROUGHPUT = re.compile(
    r"loss \S+, lr: \S+, epoch: (?P<epoch>\d+), step: (?P<step>\d+), eta: \S+ hours, "
    r"throughput: (?P<value>" + NUMBER + r") imgs/sec"
)
_IPS = re.compile(
    r"\bplsc INFO: \[Train\]\[Epoch (?P<epoch>\d+)/\d+\]\[Iter: (?P<step>\d+)/\d+\]"
    r".*?(?<![\w-])ips: (?P<value>" + NUMBER + r") images/sec"
)
_PATTERNS = (_QPS, _QPS_SHIFTED, _THROUGHPUT, _IPS)

_ISO_TIME = re.compile(r"(\d{4})[-/](\d\d)[-/](\d\d)[ T](\d\d):(\d\d):(\d\d)(?:,(\d+))?")
_DMY_TIME = re.compile(r"(\d{1,2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}) (\d\d):(\d\d):(\d\d)")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def _timestamp(prefix: str) -> float | None:
    """Logging time before the message: '2021-01-20 10:00:00,123', '[2022/10/12 10:00:00]', '28 Jan 2020 10:11:12'."""
    t = _ISO_TIME.search(prefix)
    if t:
        return posix_time(*t.groups())
    t = _DMY_TIME.search(prefix)
    if t:
        d, mon, y, hh, mi, ss = t.groups()
        return posix_time(y, _MONTHS[mon], d, hh, mi, ss)
    return None


class PLSC(LogFormat):
    name = "plsc"
    description = "PLSC ArcFace, global: 'Pass:0 batch:200 ... qps:9408.24', 'throughput: 9408.24 imgs/sec', 'ips:'"
    needle = re.compile(r"qps:|throughput: |plsc INFO: \[Train\]")
    detectors = (
        re.compile(r"Pass:\d+ batch:(?:\d+|%d) lr:\S+ loss:\S+ qps:[\d.]"),
        re.compile(r"eta: [\d.]+ hours, throughput: [\d.]+ imgs/sec"),
        re.compile(r"plsc INFO: \[Train\]\[Epoch \d+/\d+\]\[Iter: \d+/\d+\][^\n]*?ips: [\d.]+ images/sec"),
    )
    detect_literals = ("qps:", "throughput: ", "plsc INFO")
    default_metric = "throughput"  # one name for 'qps', 'throughput' and 'ips': the same global figure
    priority = 60  # above PaddleClas (50): a 2.x PLSC 'ips: ... images/sec' line matches both detectors
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        for pattern in _PATTERNS:
            m = pattern.search(line)
            if m is not None:
                break
        else:
            return
        refuse_non_finite_loss(line, path, line=lineno)
        value = to_float(m["value"], path, lineno)
        step = int(m["step"])
        yield Record(
            value,
            "images/s",
            "throughput",
            PER_STEP,
            lineno,
            step,
            int(m["epoch"]),
            _timestamp(line[: m.start()]),
            rank,
        )
