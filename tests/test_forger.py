"""The generic forger: an operator with the signing key edits a genuine log consistently -- its rates and the seconds
they are computed from as its own sums require, its clock left alone or compressed to match -- in each way that
would move a figure, and the kit must refuse it. Every format `kit formats` lists meets every transformation
(TRANSFORMS) once it declares where its lines hold its rates, their seconds and its clock (Fields; the harness's
:::KITLOG records: Kitlog), or is named in NO_GENUINE_LOG (the kit holds no genuine log of it to forge):

- a format a published program writes (a run of a run directory, RUNS): its genuine log as that run -- the H200
  visit's (tests/fixtures/gpu-runs/h200-20261128/dle: DLE PyTorch and the GPU harness), or a published log or a real
  CPU run's (tests/fixtures/genuine-cpu-logs: PLSC) at its case's place (publishedruns.recorded_program_run) --
  forged, its report and results written again from the logs
  (kit report), bundled anew: kit verify refuses it naming the forged log; or, in a format whose lines carry no
  clock, verify's output names its run as not held to a clock (kit/audit/rules/program_clock.py);
- a format read only for published figures (CLAIMED: kit/claims/*.yaml, the fixtures' expected.yaml, a genuine CPU
  log's claims.yaml, `kit crosscheck`; no bundle can hold such a run): the kit's own claim of its genuine log, pointed
  at the forged copy, no longer derives (mismatch).

A forgery no rule refuses is a hole named here as such (HOLES: xfail, strict, so that closing one fails the test
until its expectation moves): a re-run is what catches it (kit reproduce, tests/test_reproduce.py).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import PUBLISHED
from kitlogs import recorded_clean, rewrite_kitlog, without_the_nan_repeat
from publishedruns import recorded_program_run

from kit.audit import bundle as bd
from kit.audit.rules.program_clock import CLOCKED_FORMATS_V3
from kit.audit.verify import verify
from kit.cli import main
from kit.config.programs import IMPLS
from kit.config.suites import load_suite
from kit.core.yamlio import ConfigError
from kit.results.crosscheck import MATCH, MISMATCH, check_claims
from kit.results.parsers import FORMATS

TESTS = Path(__file__).resolve().parent
VISIT = TESTS / "fixtures" / "gpu-runs" / "h200-20261128" / "dle"
CLAIMS = TESTS.parent / "kit" / "claims"
LAMBDA = "../../tests/fixtures/published-logs/lambda/pytorch/results/"  # as kit/claims/lambda.yaml names its logs
MODELS = "../../../shared/fixtures/published-logs/perf-models/"  # as kit/claims/perf-models.yaml names its logs
GENUINE_CPU = TESTS / "fixtures" / "genuine-cpu-logs"  # real CPU runs of published programs (its README.md)
Rates = Callable[[int], float]  # the i-th timed record's rate factor


# ---- where a format's lines hold what a forger moves

def _digits(value: float, like: str) -> str:
    """VALUE written with as many decimals as LIKE has."""
    return f"{value:.{len(like.split('.')[1]) if '.' in like else 0}f}"


def _moved(stamp: str, fmt: str, anchor: dt.datetime | float | None, clock: float) -> tuple[str, object]:
    """A stamp of the clock moved toward the first one (ANCHOR; None: this is it) by the clock's factor, in its own
    spelling: (the stamp, the anchor)."""
    if fmt == "epoch":  # seconds since 1970
        when = float(stamp)
        anchor = when if anchor is None else anchor
        return _digits(anchor + (when - anchor) / clock, stamp), anchor
    when = dt.datetime.strptime(stamp, fmt)
    anchor = when if anchor is None else anchor
    moved = anchor + (when - anchor) / clock
    if "%f" not in fmt:
        return moved.strftime(fmt), anchor
    fraction = re.search(r"[.,](\d+)$", stamp)[1]  # the stamp's own digits of a second (%f writes six)
    return moved.strftime(fmt.replace("%f", "{f}")).format(f=f"{moved.microsecond:06d}"[:len(fraction)]), anchor


@dataclass(frozen=True)
class Fields:
    """Where a format's lines hold what moves a figure, as regular expressions over one line: RECORD, a line of one
    timed record (its group 1, where it has one, names the record: lines naming the same record share its factor);
    RATES, (label)(number), a rate in a record or summary line, x its record's factor; SECONDS, (label)(number), the
    seconds a rate is computed from (the record's, or the sum of the records'), / that factor; SUMMARY, a line that
    sums the records up (an epoch's, the run's), its rates x the mean of their factors (with no records: the first
    factor); STAMPS, ((label)(time), strptime format or 'epoch'), the clock, each stamp moved toward the log's first
    by the clock's factor; ELAPSED, (label)(number), seconds on the clock since the run began, / the clock's factor.
    Its lines carry a clock where STAMPS or ELAPSED name one."""

    record: str | None
    rates: tuple[str, ...] = ()
    seconds: tuple[str, ...] = ()
    summary: str | None = None
    stamps: tuple[tuple[str, str], ...] = ()
    elapsed: tuple[str, ...] = ()

    @property
    def clocked(self) -> bool:
        return bool(self.stamps or self.elapsed)

    def __call__(self, log: Path, rates: Rates, clock: float) -> None:
        text = log.read_bytes().decode("utf-8", "surrogateescape")  # every other byte as it was
        lines = text.splitlines(keepends=True)
        record, summary = re.compile(self.record or r"(?!)"), re.compile(self.summary or r"(?!)")
        keys: dict[str, float] = {}
        for n, line in enumerate(lines):
            if found := record.search(line):
                keys.setdefault(found[1] if found.groups() else str(n), rates(len(keys)))
        mean = statistics.fmean(keys.values()) if keys else rates(0)
        anchors: dict[str, object] = {}

        def restamp(pattern: str, fmt: str) -> Callable[[re.Match], str]:
            def move(m: re.Match) -> str:
                stamp, anchors[pattern] = _moved(m[2], fmt, anchors.get(pattern), clock)
                return m[1] + stamp
            return move

        for n, line in enumerate(lines):
            found = record.search(line)
            factor = (keys[found[1] if found.groups() else str(n)] if found
                      else mean if summary.search(line) else None)
            if factor is not None:
                for pattern in self.rates:
                    line = re.sub(pattern, lambda m, f=factor: m[1] + _digits(float(m[2]) * f, m[2]), line)
                for pattern in self.seconds:
                    line = re.sub(pattern, lambda m, f=factor: m[1] + _digits(float(m[2]) / f, m[2]), line)
            if clock != 1:
                for pattern, fmt in self.stamps:
                    line = re.sub(pattern, restamp(pattern, fmt), line)
                for pattern in self.elapsed:
                    line = re.sub(pattern, lambda m: m[1] + _digits(float(m[2]) / clock, m[2]), line)
            lines[n] = line
        log.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))


@dataclass(frozen=True)
class Kitlog:
    """The harness's :::KITLOG records: each step's seconds / rates(i), its rate the global batch over them (as the
    harness computes it), run_stop's sums and rates likewise; with CLOCK, every time_ms after run_start's compressed by
    it (every record's time_ms is its clock)."""

    clocked = True

    def __call__(self, log: Path, rates: Rates, clock: float) -> None:
        harness(log, rates, clock)


def harness(log: Path, rates: Rates, clock: float) -> None:
    state: dict = {"i": 0, "seconds": 0.0}

    def forge(d: dict) -> dict:
        if d.get("event") == "run_start":
            state["ms"] = d["time_ms"]
        elif "ms" in state and "time_ms" in d:
            d["time_ms"] = round(state["ms"] + (d["time_ms"] - state["ms"]) / clock)
        if d.get("event") == "step":
            d["seconds"] = round(d["seconds"] / rates(state["i"]), 6)
            d["samples_per_sec"] = round(d["global_batch"] / d["seconds"], 3)
            state["i"] += 1
            state["seconds"] += d["seconds"]
            state["batch"] = d["global_batch"]
        elif d.get("event") == "run_stop":
            d["seconds"] = round(state["seconds"], 6)
            rate = round(state["batch"] * d["steps"] / d["seconds"], 3)
            d |= {k: rate for k in ("samples_per_sec", "throughput") if k in d}
        return d

    rewrite_kitlog(log, forge)


DLL = (r"(DLL )(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)", "%Y-%m-%d %H:%M:%S.%f")  # DLLogger's stamp


@dataclass(frozen=True)
class Run:
    """A format's genuine log as a run of a run directory: the H200 visit's (its path there, VISIT), or a published
    log (PUBLISHED, under published-logs/) or a real CPU run's (an absolute path under GENUINE_CPU) at the place of
    its publisher's CASE, 'framework/model/batch/precision/gpus' (publishedruns.recorded_program_run)."""

    forge: Fields | Kitlog
    log: str = ""
    case: str = ""
    published: str = ""

    def where(self, run_dir: Path) -> Path:
        if self.log:
            return run_dir / self.log
        framework, model, batch, precision, gpus = self.case.split("/")
        return run_dir / "logs" / IMPLS[(framework, model)].name / model / f"bz{batch}" / f"1n{gpus}g" / \
            f"{model}_b{batch}_{precision}_1.log"


RUNS = {
    "dle-pytorch": Run(Fields(r"- Epoch: \d+ Iteration: \d+ ", (r"(train\.(?:compute|total)_ips : )([\d.]+)",),
                              summary=r"- (?:Epoch: \d+  |Summary: )train\.loss ", stamps=(DLL,)),
                       log="logs/ngc-pytorch/resnet50/bz256/1n1g/resnet50_b256_amp_1.log"),
    "kitlog": Run(Kitlog(), log="logs/torch/resnet50/bz256/1n1g/resnet50_b256_amp-nhwc_1.log"),
    "dle-tf1": Run(Fields(r"- \(\d+, \d+\) total_ips : ", (r"((?:total_ips|train_throughput) : )([\d.]+)",),
                          summary=r"- \(\) train_throughput : ", stamps=(DLL,)),
                   case="tensorflow/resnet50/256/amp/1", published="perf-v100/tensorflow/tf_gpu1_amp_bs256.txt"),
    "dle-mxnet": Run(Fields(r"- Epoch: \d+ Iteration: \d+ ", (r"(train\.ips : |^\s+\d+\s+\|\s+)([\d.]+)",),
                            summary=r"- Epoch: \d+  train\.|- Summary: |^\s+\d+\s+\|\s+[\d.]+\s+\|$",  # its table
                            stamps=(DLL,)),
                     case="mxnet/resnet50/256/amp/1", published="perf-v100/mxnet/mxnet_gpu1_amp_bs256.txt"),
    "paddleclas": Run(Fields(r"ppcls INFO: epoch:\d+\s+train step:\d+ ", (r"(ips: )([\d.]+)",),
                             (r"(batch_cost: )([\d.]+)",),
                             stamps=((r"^(\[)(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)(?=\])", "%Y/%m/%d %H:%M:%S"),)),
                      case="paddle/resnet50/256/fp32/1",
                      published="perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"),
    "paddlenlp-bert": Run(Fields(r"^total step: \d+, ", (r"(ips: )([\d.]+)",), (r"(avg_batch_cost: )([\d.]+)",)),
                          case="paddle/bert/96/amp/1",
                          published="perf-models/Bert/logs/V100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C1_log"),
    "dle-bert-pytorch": Run(Fields(None, (r"(training_sequences_per_second : )([\d.]+)",),
                                   (r"(raw_train_time : )([\d.]+)",), summary=r" training_sequences_per_second : ",
                                   stamps=(DLL,), elapsed=(r"(e2e_train_time : )([\d.]+)",)),
                            case="torch/bert/96/amp/1",
                            published="perf-models/Bert/OtherReports/PyTorch/logs/V100_LOG/"
                                      "bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_gpu1.log"),
    "dle-transformer-pytorch": Run(Fields(r"^Transformer \| epoch \d+ \| step \d+ \|", (r"(tokens/s )([\d.]+)",),
                                          elapsed=(r"(walltime )([\d.]+)", r"(Epoch time: )([\d.]+)",
                                                   r"(done training in )([\d.]+)")),
                                   case="torch/transformer/5120/fp32/1",
                                   published="perf-models/Transformer/OtherReports/PyTorch/logs/V100_LOG/"
                                             "transformer_pytorch_bs5120_fp32_gpu1"),
    # PLSC @ 9bba9c90 run for real on a CPU (Paddle 1.8.5): 'INFO <asctime> entry.py:N] Pass:0 batch:B ... qps:Q', a
    # record every 10 batches (plsc/entry.py:1022-1027, its formatter entry.py:49-50); no seconds printed
    "plsc": Run(Fields(r"\] Pass:\d+ batch:(\d+) lr:", (r"( qps:)([\d.]+)",),
                       stamps=((r"^([A-Z]+ )(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})(?= \S+:\d+\] )",
                                "%Y-%m-%d %H:%M:%S,%f"),)),
                case="paddle/arcface/2/fp32/1", published=str(GENUINE_CPU / "plsc" / "arcface_b2_fp32_1.log")),
}


@dataclass(frozen=True)
class Claimed:
    """A format read only for published figures: the kit's own claim of its genuine log (LOG, as CLAIMS names it; a
    suite's claim: the suite's NAME and the CASE folder whose runs' median it publishes; a genuine CPU log no publisher
    printed a figure of: the claim its folder records, the figure its publisher's method gives)."""

    forge: Fields
    claims: Path
    log: str = ""
    suite: str = ""
    case: str = ""
    seconds: bool = False  # its figure is seconds per step, as printed: a forgery that raises the rates lowers it


CLAIMED = {
    "dle-bert-tf1": Claimed(Fields(r"- Iteration: \d+\s+throughput_train : ", (r"(throughput_train : )([\d.]+)",),
                                   stamps=(DLL, (r"^(\w\w\w )(\w\w\w [ \d]\d \d\d:\d\d:\d\d \d{4})(?=\[)",
                                                 "%b %d %H:%M:%S %Y"))),
                            CLAIMS / "perf-models.yaml", MODELS + "Bert/OtherReports/TensorFlow/logs/V100_LOG/"
                            "tf_bert_pretraining_lamb_base_fp32_bs96_gpu32.log"),
    "paddlenlp-transformer": Claimed(
        Fields(r"- step_idx: \d+, ", (r"((?:ips|avg_speed): )([\d.]+)",), (r"(batch_cost: )([\d.]+)",),
               stamps=((r"(\[)(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)(?=\])", "%Y-%m-%d %H:%M:%S,%f"),)),
        CLAIMS / "perf-models.yaml", MODELS + "Transformer/logs/V100_LOG/PaddleNLP_transformer_big_bs5120_fp32_DP_N1C8_log"),
    "paddleseg": Claimed(Fields(r"\[TRAIN\] epoch: \d+, iter: \d+/\d+, ", (r"(ips: )([\d.]+)",),
                                (r"(batch_cost: )([\d.]+)",),
                                stamps=((r"^()(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?= \[)", "%Y-%m-%d %H:%M:%S"),)),
                         CLAIMS / "perf-models.yaml", MODELS + "DeepLabV3P/logs/paddle/Deeplabv3_FP16_BS4-N1.log"),
    "mmseg": Claimed(Fields(r"- mmseg - INFO - Iter \[\d+/\d+\]\t", seconds=(r"(, time: )([\d.]+)",),
                            stamps=((r"^()(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)(?= - )", "%Y-%m-%d %H:%M:%S,%f"),)),
                     CLAIMS / "perf-models.yaml",
                     MODELS + "DeepLabV3P/OtherReports/PyTorch/logs/pytorch/deeplabv3p_c1_fp16.log"),
    "dle-gnmt-pytorch": Claimed(Fields(r"^\d+: TRAIN \[\d+\]\[\d+/\d+\]\t",
                                       (r"(Tok/s )(\d+)", r"(Tok/s \d+ \()(\d+)", r"(Training: )(\d+)"),
                                       (r"(\tTime )([\d.]+)", r"(\tTime [\d.]+ \()([\d.]+)"),
                                       summary=r"Performance: Epoch: \d+\tTraining: "),
                                CLAIMS / "lambda.yaml",
                                LAMBDA + "LambdaCloud_A100_40GB_PCIe_v1/PyTorch_gnmt_FP16/14-12-2022_22-59-37.txt"),
    "dle-ssd-pytorch": Claimed(Fields(None, (r"((?:avg|med|min|max)_img/sec : )([\d.]+)",
                                             r"((?:Average|Median) images/sec: )([\d.]+)"),
                                      (r"(total time: )([\d.]+)",), summary=r"_img/sec : |^Done benchmarking\. ",
                                      stamps=(DLL,), elapsed=(r"(- \((?:\d+,)?\) (?:total )?time : )([\d.]+)",)),
                               CLAIMS / "lambda.yaml",
                               LAMBDA + "LambdaCloud_A100_40GB_PCIe_v1/PyTorch_SSD_FP32/14-12-2022_22-52-58.txt"),
    "dle-transformerxl-pytorch": Claimed(
        Fields(r"^\| epoch\s+\d+ step\s+\d+ \|", (r"(tok/s\s+)([\d.]+)", r"(Training throughput: )([\d.]+)"),
               (r"(ms/batch )([\d.]+)",), summary=r"^Training throughput: ",
               elapsed=(r"(Training time: )([\d.]+)",)),
        CLAIMS / "lambda.yaml", LAMBDA + "H100_80GB_SXM5_v1/PyTorch_transformerxlbase_FP32/14-02-2023_05-42-24.txt"),
    "dle-tts-pytorch": Claimed(Fields(r"- \((\d+, \d+)\) train_(?:items_per_sec|iter_time) : ",
                                      (r"(train_items_per_sec : )([\d.]+)",),
                                      (r"((?:train_iter_time|train_epoch_time) : )([\d.]+)",),
                                      summary=r"- \((?:\d+,)?\) train_(?:items_per_sec|epoch_time) : ",
                                      stamps=(DLL,), elapsed=(r"(run_time : )([\d.]+)",)),
                               CLAIMS / "lambda.yaml",
                               LAMBDA + "Dell_4xH100_80GB_SXM5_v1/PyTorch_tacotron2_FP32/16-04-2024_18-16-26.txt"),
    "tf2-keras-timehistory": Claimed(
        Fields(r"\] TimeHistory: [\d.]+ seconds, ", (r"(seconds, )([\d.]+)(?= examples/second)",
                                                    r"('avg_exp_per_second': )([\d.]+)"),
               (r"(TimeHistory: )([\d.]+)(?= seconds)",), summary=r"'avg_exp_per_second': ",
               stamps=((r"^([IWE])(\d{4} \d\d:\d\d:\d\d\.\d{6})(?= )", "%m%d %H:%M:%S.%f"),
                       (r"((?:timestamp: |'train_finish_time': ))(\d+\.\d+)", "epoch"))),
        PUBLISHED / "expected.yaml", suite="dlperf-tf2-resnet50", case="1n1g"),
    # PaddlePaddle/models release/1.8 ResNet50 run for real on a CPU (tests/fixtures/genuine-cpu-logs/paddle-models-1.8):
    # 'INFO:utils.utility:[Pass 0, train batch N] \tloss ..., elapse S sec' (utils/utility.py print_info), every
    # batch; seconds only, no clock (its logger prints no time). No suite's case runs it (no recipe: no bundle holds
    # such a run), so the claim is the figure DLPerf's method gives of the log (its folder's claims.yaml)
    "paddle-models-1.8": Claimed(Fields(r"\[Pass \d+, train batch \d+\] ", seconds=(r"(, elapse )([\d.]+)(?= sec)",)),
                                 GENUINE_CPU / "paddle-models-1.8" / "claims.yaml", "r50_b4_fp32_1.log",
                                 seconds=True),
    # DeepLearningExamples TensorFlow RN50v1.5 @ b1ae8dd4 (dllogger 0.2.3) run for real on a CPU
    # (tests/fixtures/genuine-cpu-logs/nvlog-tf): ':::NVLOGv0.2.3 resnet <epoch seconds> (benchmark_hooks.py:60)
    # total_ips: R' every 10th step, 'Average total_ips: R' at the end (no suite's case runs it: its claim is the
    # program's own figure, its folder's claims.yaml)
    "nvlog-tf": Claimed(Fields(r"\(benchmark_hooks\.py:\d+\) total_ips: ", (r"((?:Average )?total_ips: )([\d.]+)",),
                               summary=r"\) Average total_ips: ",
                               stamps=((r"^(:::NVLOGv[\d.]+ \S+ )(\d+\.\d+)(?= \()", "epoch"),)),
                        GENUINE_CPU / "nvlog-tf" / "claims.yaml", "resnet50_b4_fp32_1.log"),
}
# formats of which the kit holds no genuine log (no published log in the fixtures, no run of the kit's: the stand-in
# of FleetX prints its lines with known speeds, tests/standin/README.md; FleetX and OneFlow-Benchmark at their pins
# cannot run here, tests/fixtures/genuine-cpu-logs/README.md says why): the forger has nothing to forge
NO_GENUINE_LOG = {"fleetx-vgg", "oneflow"}


@dataclass(frozen=True)
class Transform:
    rates: Rates
    clock: float = 1.0  # the clock compressed by this factor (1: untouched)


TRANSFORMS = {
    "every rate x1.2, the clock untouched": Transform(lambda i: 1.2),
    "2 of every 5 rates x1.6, the clock untouched": Transform(lambda i: 1.6 if i % 5 < 2 else 1.0),
    "every rate x1.09, the clock untouched": Transform(lambda i: 1.09),
    "every rate x1.3, the clock compressed to match": Transform(lambda i: 1.3, clock=1.3),
}
COMPRESSED = "every rate x1.3, the clock compressed to match"
# (format, transform) no rule refuses, with why: the forged log agrees with itself everywhere a rule looks (rule set
# v10 holds PaddleClas, DLE BERT and DLE Transformer to their clocks too: their other forgeries are refused)
HOLES = {(fmt, COMPRESSED): "its rates and its own clock agree; only the run's other clocks could tell (the GPU "
                            "sampler's busy time against the log's timed span, the command record's start and exit), "
                            "which no rule holds it to yet"
         for fmt in ("dle-pytorch", "kitlog", "dle-tf1", "dle-mxnet", "paddleclas", "dle-bert-pytorch",
                     "dle-transformer-pytorch")}
# PLSC's lines carry a clock (its logger's stamps) that no rule holds its rates to: every forgery of it passes. Its qps
# is the global batch over the seconds inside exe.run() alone (plsc/entry.py:986-1003), which it does not print, so
# its stamps (wall time, the reader's included) bound a genuine rate from below only; on the real CPU run
# (tests/fixtures/genuine-cpu-logs/plsc) they agree to 0.98-1.02x each interval (qps printed to 2 decimals), but no
# GPU log of PLSC is held to measure a band on (DLPerf's published logs are not in the fixtures)
HOLES |= {("plsc", name): "PLSC's qps is held to no clock (no rule reads its stamps): its seconds inside exe.run() "
                          "are not printed, so the stamps bound it from below only, and no GPU log of it is held to "
                          "measure a band on" for name in TRANSFORMS}


class NotRefused(AssertionError):
    """A forgery the kit let through (a hole's test fails with this, and with nothing else)."""


def cases(table: dict, holes: dict | None = None) -> list:
    return [pytest.param(fmt, name, id=f"{fmt}: {name}",
                         marks=[pytest.mark.xfail(strict=True, raises=NotRefused, reason=holes[(fmt, name)])]
                         if holes and (fmt, name) in holes else [])
            for fmt in table for name in TRANSFORMS]


# ---- the formats of a run directory

@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> Callable[[str], Path]:
    """The genuine run directory of a format (built once): the H200 visit's, or its published log's."""
    built: dict[str, Path] = {}

    def run_dir_of(fmt: str) -> Path:
        run = RUNS[fmt]
        key = "visit" if run.log else fmt
        if key not in built:
            run_dir = tmp_path_factory.mktemp(re.sub(r"\W", "-", key)) / "run"
            if run.log:
                shutil.copytree(VISIT, run_dir)
                recorded_clean(run_dir)  # DERIVED: its records predate model_code_state
                without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN
            else:
                run_dir.mkdir()
                recorded_program_run(run_dir, run.case, run.published)
            assert main(["report", str(run_dir)]) == 0
            built[key] = run_dir
        return built[key]

    return run_dir_of


def shape(log: Path) -> list[str]:
    """The log's lines, each number a '#': what a forgery that only moves numbers leaves as it was."""
    return re.sub(r"\d+", "#", log.read_bytes().decode("utf-8", "surrogateescape")).splitlines()


def figure_of(run_dir: Path, log: Path) -> float:
    """The figure results.json gives the run of LOG."""
    results = json.loads((run_dir / "results.json").read_text())
    rel = log.relative_to(run_dir / "logs").as_posix()
    (value,) = [r["value"] for g in results["groups"] for c in g["cases"] for r in c["runs"] if r["file"] == rel]
    return value


def not_held_to_a_clock(result, run: Run, run_dir: Path) -> bool:
    """verify's output names the run of the log as not held to a clock."""
    named = f"{run.where(run_dir).relative_to(run_dir / 'logs').parent.as_posix()}/{run.case.split('/')[3]} run 1 ("
    return any("not held to a clock" in line and named in line for line in result.lines())


@pytest.mark.parametrize("fmt", RUNS)
def test_each_genuine_run_verifies_and_its_figure_is_held_to_its_clock_or_said_not_to_be(genuine, tmp_path, fmt):
    run_dir, run = genuine(fmt), RUNS[fmt]
    result = verify(bd.make_bundle(run_dir, tmp_path / "genuine.tgz", submitter="t", system_name="t"))
    assert result.ok, result.violations
    (clock,) = [f for f in result.findings if f.rule.name == "program_figure_agrees_with_its_clock"]
    if fmt == "kitlog":  # a harness log: held by steps_agree_with_their_clock
        (steps,) = [f for f in result.findings if f.rule.name == "steps_agree_with_their_clock"]
        assert steps.checked >= 1
    elif fmt in CLOCKED_FORMATS_V3:
        assert clock.checked == 1
    else:
        assert clock.checked == 0 and not_held_to_a_clock(result, run, run_dir), result.lines()


@pytest.mark.parametrize("fmt, name", cases(RUNS, HOLES))
def test_a_consistent_forgery_of_a_run_is_refused_naming_its_log(genuine, tmp_path, fmt, name):
    """Refused naming the forged log; where the format's lines carry no clock, refused or named in verify's output
    as not held to a clock."""
    source, run, transform = genuine(fmt), RUNS[fmt], TRANSFORMS[name]
    run_dir = tmp_path / "run"
    shutil.copytree(source, run_dir)
    log = run.where(run_dir)
    run.forge(log, transform.rates, transform.clock)
    assert log.read_bytes() != run.where(source).read_bytes() and shape(log) == shape(run.where(source))
    assert main(["report", str(run_dir)]) == 0  # the report and results of the forged log: derived files agree
    assert figure_of(run_dir, log) > 1.05 * figure_of(source, run.where(source))  # the forgery moved the figure
    result = verify(bd.make_bundle(run_dir, tmp_path / "forged.tgz", submitter="t", system_name="t"))
    refused = not result.ok and any(str(log.relative_to(run_dir)) in str(v.file) for v in result.violations)
    if not (refused or not run.forge.clocked and not_held_to_a_clock(result, run, run_dir)):
        raise NotRefused("\n".join(result.lines()))


# ---- the formats read only for published figures

def claim_of(claimed: Claimed, into: Path) -> tuple[Path, list[Path]]:
    """The kit's own claim of the format's genuine log, in a claims file of that claim alone whose log is a copy under
    INTO (a suite's claim: its CASE's median alone, over copies of its runs): (the claims file, the logs)."""
    data = yaml.safe_load(claimed.claims.read_text())
    if claimed.suite:
        (entry,) = [s for s in data["suites"] if s["name"] == claimed.suite]
        shutil.copytree(claimed.claims.parent / entry.get("dir", entry["name"]) / claimed.case,
                        into / "runs" / claimed.case)
        entry = {k: v for k, v in entry.items() if k != "published_speedup"} | {
            "dir": "runs", "published_median": {claimed.case: entry["published_median"][claimed.case]}}
        data, logs = {"suites": [entry]}, sorted((into / "runs" / claimed.case).iterdir())
    else:
        (entry,) = [e for e in data["logs"] if e.get("file") == claimed.log]
        logs = [into / Path(claimed.log).name]
        shutil.copyfile(claimed.claims.parent / claimed.log, logs[0])
        data = {"logs": [entry | {"file": logs[0].name}]}
    (into / "claims.yaml").write_text(yaml.safe_dump(data))
    return into / "claims.yaml", logs


@pytest.mark.parametrize("fmt", CLAIMED)
def test_each_genuine_published_log_derives_its_claim(tmp_path, fmt):
    claims, _ = claim_of(CLAIMED[fmt], tmp_path)
    (verdict,) = check_claims(claims)
    assert verdict.status == MATCH, verdict


@pytest.mark.parametrize("fmt, name", cases(CLAIMED))
def test_a_consistent_forgery_of_a_published_log_no_longer_derives_its_claim(tmp_path, fmt, name):
    claimed, transform = CLAIMED[fmt], TRANSFORMS[name]
    claims, logs = claim_of(claimed, tmp_path)
    for log in logs:
        before, lines = log.read_bytes(), shape(log)
        claimed.forge(log, transform.rates, transform.clock)
        assert log.read_bytes() != before and shape(log) == lines  # only its numbers moved
    (verdict,) = check_claims(claims)
    faster = verdict.published / verdict.recomputed if claimed.seconds else verdict.recomputed / verdict.published
    assert faster > 1.05, verdict  # the forgery moved the figure (a figure of seconds per step: down)
    if verdict.status != MISMATCH:
        raise NotRefused(verdict)


# ---- every format

def test_every_format_the_kit_reads_meets_the_forger_or_is_named_without_a_genuine_log(tmp_path):
    declared = [*RUNS, *CLAIMED, *NO_GENUINE_LOG]
    assert sorted(declared) == sorted(FORMATS)  # each once, and every one `kit formats` lists
    # every format a published program writes is forged as a run of a run directory, unless no suite can name its
    # program (PaddleSeg's HRNet-W18: a suite's model is none of hrnetw18) or the kit holds no genuine log of it
    for impl in IMPLS.values():
        if impl.log_format in CLAIMED:
            suite = tmp_path / f"{impl.name}.yaml"
            suite.write_text("schema_version: 1\nname: s\nhardware: gpu\ncases:\n"
                             f"  - {{framework: {impl.framework}, impl: reference, model: {impl.model}}}\n")
            with pytest.raises(ConfigError, match=f"model: '{impl.model}' is not one of"):
                load_suite(suite)
        else:
            assert impl.log_format in RUNS or impl.log_format in NO_GENUINE_LOG, impl.log_format
    # no claim the kit carries names a format of NO_GENUINE_LOG: it holds no published log of theirs
    named = {e.get("format") for path in [*CLAIMS.glob("*.yaml"), PUBLISHED / "expected.yaml"]
             for e in yaml.safe_load(path.read_text()).get("logs", [])}
    assert named and not named & NO_GENUINE_LOG
