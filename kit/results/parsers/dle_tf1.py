"""NGC TensorFlow 1 (DeepLearningExamples resnet50v1.5 main.py): DLLogger 'total_ips' lines.

Per logged step: 'DLL 2022-11-24 03:57:07.886213 - (0, 210) total_ips : 415.7120505726513 '
End of run:      'DLL 2022-11-24 04:00:06.586395 - () train_throughput : 416.1881084364622 images/s'
"""

import re
from itertools import accumulate, repeat

from kit.results.parsers.columns import drop, finite_floats, make_records, positions
from kit.results.parsers.dllogger import ITEM, UNITS, DLLoggerFormat, _ints_or_none, head_ranks
from kit.results.parsers.records import PER_STEP, SUMMARY, Record
from kit.results.parsers.times import posix_times

# The whole line of either (the head, the item, blanks to the line's end) with _BULK_LINE's groups of the time and
# of a '(epoch, step)' or '()' step, then ITEM's; or a PARAMETER line (no figure). Where each 'DLL ' of a log starts
# one of these (each holds one), they read what _bulk reads.
_LINE = re.compile(
    r"DLL (\d{4}-\d\d-\d\d[ T]\d\d:\d\d):(\d\d)(?:\.(\d+)|) - "
    r"(?:\((?:(\d+), (\d+)|)\) " + ITEM + r"(?=[^\S\n]*\n)|PARAMETER[^\n]*)"
)


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

    def _bulk(self, text: str, tagged: bool, every_line: bool = False) -> list[Record] | None:
        """DLLoggerFormat._bulk, in one regex.split() where the log's lines are all of the two above."""
        if not every_line:
            k = _LINE.groups + 1
            parts = _LINE.split(text)
            gaps = parts[::k]
            n = len(gaps) - 1
            if n and n == text.count("DLL "):  # each head is the start of a line of the two (which holds one 'DLL ')
                records = self._bulk_lines(parts, gaps, tagged)
                if records is not None:
                    return records
        return super()._bulk(text, tagged, every_line)

    def _bulk_lines(self, parts: list, gaps: list[str], tagged: bool) -> list[Record] | None:
        columns = [parts[j :: _LINE.groups + 1] for j in range(1, _LINE.groups + 1)]
        lines = list(accumulate(map(str.count, gaps[:-1], repeat("\n")), initial=1))
        del lines[0]
        ranks = head_ranks(gaps) if tagged else None
        if tagged and ranks is None:
            return None
        if None in columns[5]:  # a PARAMETER line's head (no name): no figure
            params = positions(columns[5], None)
            *columns, lines = drop((*columns, lines), params)
            ranks = None if ranks is None else drop((ranks,), params)[0]
        minutes, seconds, fractions, epochs, steps, names, raws, units = columns
        values = None if "None" in raws else finite_floats(raws)
        if values is None:
            return None
        try:
            times = posix_times(minutes, seconds, fractions)
            kinds = [PER_STEP] * len(steps)  # as _kind_step_epoch reads them: '()' (no step, no epoch) a summary
            for i in positions(steps, None):
                kinds[i] = SUMMARY
            steps, epochs = _ints_or_none(steps), _ints_or_none(epochs)
        except ValueError:
            return None
        return make_records(values, list(map(UNITS.get, units, units)), names, kinds, lines, steps, epochs, times,
                            ranks)
