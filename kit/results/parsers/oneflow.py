"""OneFlow-Benchmark CNNs (Oneflow-Inc/OneFlow-Benchmark Classification/cnns): 'samples/s:' lines.

util.py class Metric @ 04ee8e932be495f5501959332206c65be3767c35 (used by of_cnn_train_val.py):
    self.fmt = "{}: epoch {}, iter {}, loss: {:.6f}, top_1: {:.6f}, top_k: {:.6f}, samples/s: {:.3f}"
    throughput = self.num_samples / self.timer.split()
    print(self.fmt.format(self.desc, epoch, step + 1, loss, top_1_accuracy, top_k_accuracy, throughput),
          time.time())
    'train: epoch 0, iter 20, loss: 7.087004, top_1: 0.000000, top_k: 0.000000, samples/s: 3988.891 1597933942.9863544'
    (the line Oneflow-Inc/DLPerf OneFlow/Classification/ConvNets/resnet50v1.5/extract_cnn_result.py reads).
Other releases print it without the trailing time.time(), or without the loss
("{}: epoch {}, iter {}, top_1: ..., top_k: ..., samples/s: {:.3f}"); forks print
"accuracy(top1)/accuracy(topk)"; the first cnn_benchmark/of_cnn_train_val.py printed
"epoch {}, iter {}, loss: {:.6f}, accuracy: {:.6f}, samples/s: {:.3f}" (no desc). All are read.
Only 'train' lines (or lines without a desc) are training throughput; 'validation: ...' is not.

The figure is GLOBAL (all devices of all nodes): the job function returns the consistent
(global) batch, so num_samples counts total_device_num x batch_size_per_device per step
(of_cnn_train_val.py: train_batch_size = total_device_num * args.batch_size_per_device), over the
wall time between two prints. DLPerf's 2n8g example (batch 128 per V100) reads 5917.583 samples/s:
about 370 per GPU, i.e. the whole 16-GPU job. The trailing number is time.time() at the print: the timestamp.
Some graph-mode test scripts print a placeholder 'samples/s: -1.000': that is no measurement and
is an error, never a figure. A line's 'loss: nan' (or inf) refuses the log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_STEP, ParseError, Record, refuse_non_finite_loss, to_float

_SAMPLES = re.compile(
    r"(?:(?P<desc>\w+): )?epoch (?P<epoch>\d+), iter (?P<step>-?\d+), [^\n]*?"
    r"samples/s: (?P<value>" + NUMBER + r")(?: (?P<ts>\d+\.\d+))?\s*$"
)


class OneFlow(LogFormat):
    name = "oneflow"
    description = "OneFlow-Benchmark CNNs, global: 'train: epoch 0, iter 20, ... samples/s: 3988.891 <time>'"
    needle = re.compile(r"samples/s: ")
    detectors = (re.compile(r"epoch \d+, iter \d+, [^\n]*?samples/s: -?[\d.]"),)
    detect_literals = ("samples/s: ",)
    default_metric = "samples/s"
    priority = 25
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        m = _SAMPLES.search(line)
        if m is None or m["desc"] not in (None, "train"):
            return
        refuse_non_finite_loss(line, path, line=lineno)
        value = to_float(m["value"], path, lineno)
        if value < 0:
            raise ParseError(path, f"'samples/s: {m['value']}' is a placeholder, not a measured throughput", lineno)
        ts = float(m["ts"]) if m["ts"] else None
        yield Record(value, "samples/s", "samples/s", PER_STEP, lineno, int(m["step"]), int(m["epoch"]), ts, rank)
