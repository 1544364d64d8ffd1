"""NGC PyTorch (DeepLearningExamples ConvNets main.py): DLLogger 'train.total_ips' lines.

Per iteration: 'Epoch: 0 Iteration: 2  ... train.compute_ips : 366.98 images/s train.total_ips : 365.85 images/s'
End of run:    'Summary: train.loss : 6.67079  train.total_ips : 10523.32 img/s' (often mpirun-tagged).
"""

import re

from kit.results.parsers.dllogger import DLLoggerFormat


class DLEPyTorch(DLLoggerFormat):
    name = "dle-pytorch"
    description = "NGC PyTorch DLLogger: 'train.total_ips : 365.85 images/s' per iteration, 'Summary:'"
    needle = re.compile(r"DLLL? ")
    detectors = (re.compile(r"train\.total_ips\b"), re.compile(r"train\.compute_ips\b"))
    detect_literals = ("train.total_ips", "train.compute_ips")
    default_metric = "train.total_ips"
    summary_metric = "train.total_ips"
    priority = 30
