"""The other NGC PyTorch programs of Lambda's deeplearning-benchmark (LambdaLabsML/DeepLearningExamples, branch
lambda/benchmark, run by lambdal/deeplearning-benchmark's pytorch/scripts): one format per program's own prints.
(Its ResNet-50, BERT SQuAD and NCF logs are DLLogger text that dle-pytorch and dle-bert-pytorch read.)

SSD (Detection/SSD main.py --mode benchmark-training), end of run, on every rank (tab-separated):
    'Done benchmarking. Total images: 51200<TAB>total time: 97.667<TAB>Average images/sec: 524.231<TAB>
     Median images/sec: 524.283'    (ranks' lines can run together: each is read)
GNMT (Translation/GNMT train.py), per epoch on rank 0 ('<rank>: ' is its logging prefix):
    '0: Performance: Epoch: 1<TAB>Training: 220229 Tok/s<TAB>Validation: 300320 Tok/s'
Transformer-XL (LanguageModeling/Transformer-XL train.py): per log interval, then once at the end:
    '| epoch   1 step       10 | batches     10 / 647 | lr 0.000e+00 | ms/batch 1061.2 | tok/s  196325 | loss ...'
    'Training throughput: 45697.75 tok/s'
Tacotron2 / WaveGlow (SpeechSynthesis/Tacotron2 train.py), DLLogger text: per iteration '(1, 18)', per epoch '(1,)'
and end of run '()':
    'DLL 2023-02-14 05:37:33.096679 - () train_items_per_sec : 360558.7583777193 items/s'   (older: no unit)
Every figure is the whole job's. A log none of whose lines is whole gives no record (parse_text refuses it).
The SSD, GNMT and Tacotron2/WaveGlow figure lines carry no loss (SSD's benchmark prints none; GNMT prints
'Loss/tok 10.43 (10.43)' on its TRAIN lines, not read as a loss; Tacotron2/WaveGlow 'train_loss : 47.09' on a DLLogger
line of its own): a loss printed as NaN or infinite anywhere in their logs refuses them (the whole text searched, as
before; no published log of theirs is in bench-parse's corpus). Transformer-XL's interval line carries its loss,
'| loss 12.55 |' (no ':', not read as one, as before): its lines are searched.
"""

from __future__ import annotations

import re
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_EPOCH, PER_STEP, SUMMARY, Record, refuse_non_finite_loss, to_float
from kit.results.parsers.times import posix_time

_SSD = re.compile(
    r"Done benchmarking\. Total images: \d+\s+total time: (?:" + NUMBER + r")\s+"
    r"Average images/sec: (?P<avg>" + NUMBER + r")\s+Median images/sec: (?P<med>" + NUMBER + r")(?=\s|$|Done )"
)
_GNMT = re.compile(r"(?:^|(?P<rank>\d+): )Performance: Epoch: (?P<epoch>\d+)\s+Training: (?P<value>" + NUMBER
                   + r") Tok/s(?=\s|$)")
_TXL_STEP = re.compile(r"^\| epoch +(?P<epoch>\d+) step +(?P<step>\d+) \|.*?\| tok/s +(?P<value>" + NUMBER + r") \|")
_TXL_END = re.compile(r"^Training throughput: (?P<value>" + NUMBER + r") tok/s(?=\s|$)")
_TTS = re.compile(
    r"DLL (\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))? - "
    r"\((?P<epoch>\d+)?(?P<comma>,)? ?(?P<step>\d+)?\) train_items_per_sec : (?P<value>" + NUMBER + r")(?=\s|$)"
)


class DLESSDPyTorch(LogFormat):
    name = "dle-ssd-pytorch"
    description = "NGC PyTorch SSD: 'Done benchmarking. ... Average images/sec: 524.231  Median images/sec: 524.283'"
    needle = re.compile(r"Done benchmarking\. ")
    detectors = (re.compile(r"Done benchmarking\. Total images: \d+\s+total time: "),)
    detect_literals = ("Done benchmarking. ",)
    default_metric = "average_images_per_sec"
    summary_metric = "average_images_per_sec"
    series_kind = SUMMARY
    priority = 36

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        found = []
        for m in _SSD.finditer(line):
            for metric, raw in (("average_images_per_sec", m["avg"]), ("median_images_per_sec", m["med"])):
                found.append(Record(to_float(raw, path, lineno), "images/s", metric, SUMMARY, lineno, rank=rank))
        return found


class DLEGNMTPyTorch(LogFormat):
    name = "dle-gnmt-pytorch"
    description = "NGC PyTorch GNMT: per epoch '0: Performance: Epoch: 1  Training: 220229 Tok/s  Validation: ...'"
    needle = re.compile(r"Performance: Epoch: ")
    detectors = (re.compile(r"Performance: Epoch: \d+\s+Training: "),)
    detect_literals = ("Performance: Epoch: ",)
    default_metric = "training_tokens_per_sec"
    series_kind = PER_EPOCH
    priority = 37

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _GNMT.search(line)
        if m is None:
            return []
        if m["rank"] is not None and rank is None:
            rank = int(m["rank"])
        return [Record(to_float(m["value"], path, lineno), "tokens/s", self.default_metric, PER_EPOCH, lineno,
                       epoch=int(m["epoch"]), rank=rank)]


class DLETransformerXLPyTorch(LogFormat):
    name = "dle-transformerxl-pytorch"
    description = "NGC PyTorch Transformer-XL: '| epoch 1 step 10 | ... | tok/s 196325 |', 'Training throughput: ...'"
    needle = re.compile(r"\| tok/s |Training throughput: ")
    detectors = (re.compile(r"Training throughput: [\d.]+ tok/s"), re.compile(r"\| epoch +\d+ step +\d+ \| batches "))
    detect_literals = ("Training throughput: ", "| tok/s ")
    default_metric = "tok/s"
    summary_metric = "training_throughput"
    priority = 38
    reads_loss = True

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _TXL_END.search(line)
        if m is not None:
            return [Record(to_float(m["value"], path, lineno), "tokens/s", "training_throughput", SUMMARY, lineno,
                           rank=rank)]
        m = _TXL_STEP.search(line)
        if m is None:
            return []
        refuse_non_finite_loss(line, path, line=lineno)
        return [Record(to_float(m["value"], path, lineno), "tokens/s", "tok/s", PER_STEP, lineno, int(m["step"]),
                       int(m["epoch"]), rank=rank)]


class DLETTSPyTorch(LogFormat):
    name = "dle-tts-pytorch"
    description = "NGC PyTorch Tacotron2/WaveGlow DLLogger: '(1, 18)' / '(1,)' / '() train_items_per_sec : 360558.76'"
    needle = re.compile(r"\) train_items_per_sec : ")
    detectors = (re.compile(r"\) train_items_per_sec : "),)
    detect_literals = (") train_items_per_sec : ",)
    default_metric = "train_items_per_sec"
    summary_metric = "train_items_per_sec"
    priority = 39

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> list[Record]:
        m = _TTS.search(line)
        if m is None:
            return []
        epoch, step = m["epoch"], m["step"]
        if epoch is None:  # '()': the run's
            if m["comma"] or step is not None:
                return []
            kind = SUMMARY
        elif step is None:  # '(1,)': an epoch's
            kind = PER_EPOCH
        elif m["comma"]:  # '(1, 18)'
            kind = PER_STEP
        else:
            return []
        return [Record(to_float(m["value"], path, lineno), "items/s", self.default_metric, kind, lineno,
                       None if step is None else int(step), None if epoch is None else int(epoch),
                       posix_time(*m.groups()[:7]), rank)]


LAMBDA_DLE_FORMATS = (DLESSDPyTorch(), DLEGNMTPyTorch(), DLETransformerXLPyTorch(), DLETTSPyTorch())
