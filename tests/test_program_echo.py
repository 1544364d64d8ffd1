"""What a published program's log says about its own job (kit.results.parsers.echo), read from the REAL logs of each
format, and rule set v4's program_log_states_its_job: consistent forgeries of the real H200 DLE PyTorch run (its
echo edited, alone or with the raport that repeats it) fail v4 naming file, line and key, and pass v3."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import SHARED
from kitlogs import recorded_clean, without_the_nan_repeat
from publishedruns import program_run

from kit.audit import bundle as bd
from kit.audit.evidence import Evidence
from kit.audit.rules.engine import evaluate, load_rules
from kit.audit.verify import verify
from kit.config.programs import IMPLS
from kit.config.suites import load_suite
from kit.results.parsers.echo import ECHOES, echo
from kit.run import bench

PUBLISHED = SHARED / "fixtures" / "published-logs"
PERF = PUBLISHED / "perf-v100"
MODELS = PUBLISHED / "perf-models"
H200_DLE = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "dle"
FOLDER = "logs/ngc-pytorch/resnet50/bz256/1n1g"
LOG = f"{FOLDER}/resnet50_b256_amp_1.log"
CASE = "ngc-pytorch/resnet50/bz256/1n1g/amp"


def stated(log_format: str, path: Path) -> dict[str, tuple[object, int]]:
    return {s.field: (s.value, s.line) for s in echo(log_format, path.read_text(errors="replace"))}


@pytest.mark.parametrize("log_format,path,want", [
    ("dle-pytorch", H200_DLE / LOG, {"batch": (256, 10), "precision": ("amp", 10), "model": ("resnet50", 10),
                                     "world": (1, 10), "data": ("synthetic", 10), "layout": ("nhwc", 10)}),
    ("dle-pytorch", PERF / "pytorch/pytorch_gpu8_fp32_bs256.txt",
     {"batch": (256, 3), "precision": ("fp32", 3), "model": ("resnet50", 3), "world": (8, 3), "data": ("real", 3),
      "layout": ("nchw", 3)}),
    ("dle-pytorch", PERF / "pytorch/pytorch_gpu32_amp_bs256.txt",  # mpirun-tagged: rank 0's line
     {"batch": (256, 54), "precision": ("amp", 54), "model": ("resnet50", 54), "world": (32, 54),
      "data": ("real", 54), "layout": ("nchw", 54)}),
    ("dle-tf1", PERF / "tensorflow/tf_gpu8_amp_bs256.txt",
     {"batch": (256, 1), "precision": ("amp", 1), "model": ("resnet50", 1), "data": ("real", 1)}),
    ("dle-tf1", PERF / "tensorflow/tf_gpu32_fp32_bs256.txt", {}),  # the published 32-GPU logs print none
    ("dle-mxnet", PERF / "mxnet/mxnet_gpu8_amp_bs256.txt",  # 'amp : False', 'dtype : float16'; the node's batch
     {"node_batch": (2048, 1), "precision": ("amp", 1), "model": ("resnet50", 1), "gpus_per_node": (8, 1),
      "data": ("real", 1)}),
    ("dle-mxnet", PERF / "mxnet/mxnet_gpu1_fp32_bs128.txt",
     {"node_batch": (128, 1), "precision": ("fp32", 1), "model": ("resnet50", 1), "gpus_per_node": (1, 1),
      "data": ("real", 1)}),
    ("paddleclas", PERF / "paddle/PaddleClas_ResNet50_bs256_pure_fp16_DP_N1C8_log",
     {"batch": (256, 120), "model": ("resnet50", 71), "precision": ("amp", 68)}),
    ("paddleclas", PERF / "paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log",  # no AMP section: the config's start
     {"batch": (256, 76), "model": ("resnet50", 32), "precision": ("fp32", 15)}),
    ("paddleclas", PERF / "paddle/paddle_gpu32_pure_fp16_bs256.txt",  # 2022: sections in another order
     {"batch": (256, 183), "model": ("resnet50", 130), "precision": ("amp", 122)}),
    ("paddlenlp-bert", MODELS / "Bert/logs/A100_LOG/PaddleNLP_bert_base_seqlen128_bs96_fp16_DP_N1C8_log",
     {"batch": (96, 1), "precision": ("amp", 1), "model": ("bert", 1)}),
    ("dle-bert-pytorch", MODELS / "Bert/OtherReports/PyTorch/logs/V100_LOG/"
     "bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_gpu8.log",  # 'amp=False, ..., fp16=True'
     {"batch": (96, 38), "precision": ("amp", 38), "model": ("bert", 38)}),
    ("dle-transformer-pytorch", MODELS / "Transformer/OtherReports/PyTorch/logs/V100_LOG/"
     "transformer_pytorch_bs5120_fp32_gpu8",
     {"batch": (5120, 27), "precision": ("fp32", 27), "model": ("transformer", 27), "world": (8, 27)}),
    ("paddleseg", MODELS / "HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp16_DP_N1C8_log",  # 2 model prints
     {"batch": (8, 53), "precision": ("amp", 153), "model": ("hrnetw18", 114)}),
    ("paddleseg", MODELS / "HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_fp32_DP_N1C1_log",  # no AMP line
     {"batch": (8, 21), "precision": ("fp32", 21), "model": ("hrnetw18", 81)}),
])
def test_echo_reads_what_each_formats_real_log_says(log_format, path, want):
    assert stated(log_format, path) == want


def test_every_program_format_says_what_its_echo_states_or_why_it_is_not_read():
    for impl in IMPLS.values():
        spec = ECHOES[impl.log_format]
        assert spec.reads or spec.states.startswith("not read"), impl.log_format
        assert bool(spec.reads) == bool(spec.fields), impl.log_format


def bundle_of(run_dir: Path, out: Path) -> Path:
    return bd.make_bundle(run_dir, out, submitter="Lab", system_name="box")


def echo_violations(result) -> list[str]:
    return [f"{v.where}: {v.message}" for v in result.violations if v.rule == "program_log_states_its_job"]


def test_the_genuine_h200_dle_run_states_its_job(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(H200_DLE, run_dir)
    recorded_clean(run_dir)  # its records predate model_code_state (kitlogs.recorded_clean: DERIVED)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN (no figure)
    result = verify(bundle_of(run_dir, tmp_path / "b.tgz"))
    assert result.ok, result.violations
    [finding] = [f for f in result.findings if f.rule.name == "program_log_states_its_job"]
    assert finding.checked == 1 and not finding.violations


def parameter(key: str, value: str):
    """An edit of the log's PARAMETER line (and of the raport's JSON PARAMETER record, which repeats it)."""
    def edit(text: str) -> str:
        line = re.compile(rf"(PARAMETER .*?\b{key} : )\S+")
        return line.sub(lambda m: m.group(1) + value, text, count=1)
    return edit


def no_parameter_line(text: str) -> str:
    return "".join(x for x in text.splitlines(keepends=True) if " - PARAMETER data : " not in x)


@pytest.mark.parametrize("edit,said", [
    (parameter("batch_size", "128"), "PARAMETER batch_size 128 (the case: 256)"),
    (parameter("amp", "False"), "PARAMETER amp False (the case: amp)"),
    (parameter("arch", "resnet18"), "PARAMETER arch resnet18 (the case: resnet50)"),
    (parameter("world_size", "8"), "PARAMETER world_size 8 (the case: 1 GPUs)"),
    (parameter("data_backend", "dali-gpu"), "PARAMETER data_backend dali-gpu (the case: synthetic data)"),
    (parameter("memory_format", "nchw"), "PARAMETER memory_format nchw (the case: nhwc)"),
])
def test_a_forged_echo_fails_v4_naming_file_line_and_key_and_passes_v3(tmp_path, edit, said):
    run_dir = tmp_path / "run"
    shutil.copytree(H200_DLE, run_dir)
    recorded_clean(run_dir)  # its records predate model_code_state (kitlogs.recorded_clean: DERIVED)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN (no figure)
    log = run_dir / LOG
    log.write_text(edit(log.read_text()))
    bundle = bundle_of(run_dir, tmp_path / "b.tgz")
    assert echo_violations(verify(bundle)) == [f"{LOG}:10: {CASE}: {said}"]
    assert verify(bundle, rules_version="v3").ok
    # the forger edits the raport too (DLLogger's JSON PARAMETER record of the same run): still the log's echo
    raport = run_dir / FOLDER / "outputs" / "benchmark.json"
    raport.write_text(re.sub(r'"batch_size": 256', '"batch_size": 128', raport.read_text()))
    assert echo_violations(verify(bundle_of(run_dir, tmp_path / "c.tgz"))) == [f"{LOG}:10: {CASE}: {said}"]


def test_a_dle_log_without_its_echo_fails_v4_and_passes_v3(tmp_path):
    """The PARAMETER line removed, and the results written again from the logs (the step lines moved up)."""
    run_dir = tmp_path / "run"
    shutil.copytree(H200_DLE, run_dir)
    recorded_clean(run_dir)  # its records predate model_code_state (kitlogs.recorded_clean: DERIVED)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN (no figure)
    log = run_dir / LOG
    log.write_text(no_parameter_line(log.read_text()))
    bench.write_report(run_dir, load_suite(run_dir / "suite.yaml"))  # results.json's line numbers follow the log
    bundle = bundle_of(run_dir, tmp_path / "b.tgz")
    assert echo_violations(verify(bundle)) == [
        f"{LOG}: {CASE}: the log states nothing of its job, where "
        f"NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch) prints {ECHOES['dle-pytorch'].states}"]
    assert verify(bundle, rules_version="v3").ok


# ---- the other formats: a run directory of one real published log at its case's place, with the command record
# this kit's recipe writes for that case (publishedruns.program_run); the rule alone judges it (the log's figure is its
# publisher's)


def judged(run_dir: Path) -> list[str]:
    rule = [r for r in load_rules("v4") if r.name == "program_log_states_its_job"]
    [finding] = evaluate(rule, Evidence(run_dir))
    assert finding.checked == 1
    return [f"{v.where}: {v.message}" for v in finding.violations]


def replace(old: str, new: str):
    return lambda text: text.replace(old, new, 1)


PT8 = "perf-v100/pytorch/pytorch_gpu8_fp32_bs256.txt"
TF8 = "perf-v100/tensorflow/tf_gpu8_amp_bs256.txt"
MX8 = "perf-v100/mxnet/mxnet_gpu8_amp_bs256.txt"
CLAS8 = "perf-v100/paddle/PaddleClas_ResNet50_bs256_pure_fp16_DP_N1C8_log"
BERT8 = ("perf-models/Bert/OtherReports/PyTorch/logs/V100_LOG/"
         "bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_fp16_bs96_gpu8.log")
TRANS8 = "perf-models/Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_fp32_gpu8"


@pytest.mark.parametrize("case,published,edit,said", [
    ("torch/resnet50/256/fp32/8", PT8, None, None),
    ("torch/resnet50/256/fp32/8", PT8, replace("world_size : 8", "world_size : 1"),
     "3: ngc-pytorch/resnet50/bz256/1n8g/fp32: PARAMETER world_size 1 (the case: 8 GPUs)"),
    ("tensorflow/resnet50/256/amp/8", TF8, None, None),
    ("tensorflow/resnet50/256/amp/8", TF8, replace("amp : True", "amp : False"),
     "1: ngc-tensorflow/resnet50/bz256/1n8g/amp: PARAMETER amp False (the case: amp)"),
    ("tensorflow/resnet50/256/amp/8", TF8, replace("data_dir : ./data/tfrecords/train", "data_dir : None"),
     "1: ngc-tensorflow/resnet50/bz256/1n8g/amp: PARAMETER data_dir None (the case: real data)"),
    ("mxnet/resnet50/256/amp/8", MX8, None, None),
    ("mxnet/resnet50/256/amp/8", MX8, replace("batch_size : 2048", "batch_size : 1024"),
     "1: ngc-mxnet/resnet50/bz256/1n8g/amp: PARAMETER batch_size 1024 (the case: 2048: 256 x 8)"),
    ("mxnet/resnet50/256/amp/8", MX8, replace("dtype : float16", "dtype : float32"),
     "1: ngc-mxnet/resnet50/bz256/1n8g/amp: PARAMETER dtype float32 (the case: amp)"),
    ("paddle/resnet50/256/amp/8", CLAS8, None, None),
    ("paddle/resnet50/256/amp/8", CLAS8, replace("name : ResNet50\n", "name : ResNet18\n"),
     "71: paddleclas/resnet50/bz256/1n8g/amp: Arch.name ResNet18 (the case: resnet50)"),
    ("paddle/resnet50/256/amp/8", CLAS8, replace("            batch_size : 256\n", "            batch_size : 128\n"),
     "120: paddleclas/resnet50/bz256/1n8g/amp: DataLoader.Train.sampler.batch_size 128 (the case: 256)"),
    ("paddle/resnet50/256/fp32/8", "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log", None, None),
    ("torch/bert/96/amp/8", BERT8, None, None),
    ("torch/bert/96/amp/8", BERT8, replace("train_batch_size=96", "train_batch_size=48"),
     "38: ngc-pytorch-bert/bert/bz96/1n8g/amp: Namespace train_batch_size 48 (the case: 96)"),
    ("torch/transformer/5120/fp32/8", TRANS8, None, None),
    ("torch/transformer/5120/fp32/8", TRANS8, replace("distributed_world_size=8", "distributed_world_size=1"),
     "27: ngc-pytorch-transformer/transformer/bz5120/1n8g/fp32: Namespace distributed_world_size 1 (the case: "
     "8 GPUs)"),
])
def test_each_echoing_formats_real_log_passes_and_its_forged_echo_fails(tmp_path, case, published, edit, said):
    """PaddleNLP BERT and PaddleSeg are read above only: a suite cannot name them until docker/pins.yaml pins their
    code (kit.config.programs.check), so no run of theirs reaches verify."""
    run_dir, rel = program_run(tmp_path, case, published, edit or (lambda t: t))
    assert judged(run_dir) == ([f"{rel}:{said}"] if said else [])


def test_a_paddleclas_fp32_case_whose_log_has_an_amp_section_fails(tmp_path):
    """The AMP run's real log at an FP32 case's place: its AMP section and level say so."""
    run_dir, rel = program_run(tmp_path, "paddle/resnet50/256/fp32/8", CLAS8)
    assert judged(run_dir) == [f"{rel}:68: paddleclas/resnet50/bz256/1n8g/fp32: AMP.level O2 (the case: fp32)"]


def test_a_dle_echo_without_one_of_its_keys_fails_v4(tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(H200_DLE, run_dir)
    recorded_clean(run_dir)  # its records predate model_code_state (kitlogs.recorded_clean: DERIVED)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN (no figure)
    log = run_dir / LOG
    log.write_text(log.read_text().replace("  batch_size : 256  ", "  ", 1))
    assert echo_violations(verify(bundle_of(run_dir, tmp_path / "b.tgz"))) == [
        f"{LOG}: {CASE}: the log's echo states no batch, where NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch) "
        f"prints {ECHOES['dle-pytorch'].states}"]
