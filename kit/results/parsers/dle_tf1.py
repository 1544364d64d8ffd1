"""NGC TensorFlow 1 (DeepLearningExamples resnet50v1.5 main.py): DLLogger 'total_ips' lines.

Per logged step: 'DLL 2022-11-24 03:57:07.886213 - (0, 210) total_ips : 415.7120505726513 '
End of run:      'DLL 2022-11-24 04:00:06.586395 - () train_throughput : 416.1881084364622 images/s'
"""

import re

from kit.results.parsers.dllogger import DLLoggerFormat


class DLETensorFlow1(DLLoggerFormat):
    name = "dle-tf1"
    description = "NGC TensorFlow 1 DLLogger: '(0, 210) total_ips : 415.71', '() train_throughput : 416.19'"
    needle = re.compile(r"DLLL? ")
    detectors = tuple(
        re.compile(re.escape(literal))
        for literal in (") total_ips : ", ") train_throughput : ", '"total_ips"', '"train_throughput"')
    )
    detect_literals = ("total_ips", "train_throughput")
    default_metric = "total_ips"
    summary_metric = "train_throughput"
    priority = 20
