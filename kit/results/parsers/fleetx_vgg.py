"""FleetX (PaddlePaddle/PaddleFleetX, formerly PaddlePaddle/FleetX) VGG16 benchmark: 'speed:' in steps/s.

benchmark/paddle/vgg_benchmark.py @ 714b499a8fae3c78427972bebfbde1558dce730a runs
`X.MultiGPUTrainer().fit(model, loader, epoch=10)`; the print is in
python/fleetx/applications/trainer.py (MultiGPUTrainer.fit) @ 1cd9c21364c6193389000f6adfa49862db2a060e:
    print("epoch id: %d, step%d, train_loss: %f, total time cost = %f, step per second: %f, speed: %f"
          % (epoch_id, step, loss[0], total_time, (step - start_step) / total_time,
             1 / (end_time - start_time)))
    'epoch id: 0, step11, train_loss: 6.907755, total time cost = 0.523456, step per second: 1.910380,
     speed: 1.910380'
Earlier releases of the same trainer print 'worker_index: %d, step%d, train_loss: %f, ...' (fleet.worker_index()
instead of the epoch), and FleetX's documentation examples 'worker_index: %d, step%d cost = %f, total time
cost = %f, step per second: %f, speed: %f'; both are read.

'speed' is 1 / the duration of this one exe.run() (data loading excluded): steps per second of
the synchronous data-parallel job, the same on every card. It is NOT images/s: multiply by the
global batch (per-card batch x cards, `kit extract --scale`). 'step per second' is the running
mean since step start_step+1 of the epoch; it is not recorded (the stats layer reduces 'speed').
Lines are printed from step start_step+1 (11) on, by every worker. A line's 'train_loss: nan' (or inf) refuses the
log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_STEP, Record, refuse_non_finite_loss, to_float

_SPEED = re.compile(
    r"(?:epoch id: (?P<epoch>\d+)|worker_index: (?P<worker>\d+)), step(?P<step>\d+)"
    r"(?:, train_loss: \S+| cost = \S+), total time cost = \S+, "
    r"step per second: (?:" + NUMBER + r"), speed: (?P<value>" + NUMBER + r")(?![\w.])"
)


class FleetXVGG(LogFormat):
    name = "fleetx-vgg"
    description = "FleetX VGG16: 'epoch id: 0, step11, ... step per second: 1.91, speed: 1.91' (steps/s)"
    needle = re.compile(r"step per second: ")
    detectors = (re.compile(r", total time cost = [\d.]+, step per second: [\d.]+, speed: [\d.]"),)
    detect_literals = ("step per second: ",)
    default_metric = "speed"
    priority = 45
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        m = _SPEED.search(line)
        if m is None:
            return
        refuse_non_finite_loss(line, path, line=lineno)
        value = to_float(m["value"], path, lineno)
        epoch = int(m["epoch"]) if m["epoch"] is not None else None
        if rank is None and m["worker"] is not None:
            rank = int(m["worker"])
        yield Record(value, "steps/s", "speed", PER_STEP, lineno, int(m["step"]), epoch, None, rank)
