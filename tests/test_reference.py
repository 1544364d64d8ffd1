"""kit.reference: the published programs' command lines, checked against what the published logs recorded.

The fixture logs (PaddlePaddle/Perf @ e7a07c4d, perf-v100/) record their commands in three ways:
argv lists (NGC PyTorch 32 GPUs: multiproc.py prints each child's argv), launcher configurations
(PaddleClas multi-GPU: paddle.distributed.launch prints its parsed arguments) and parsed parameters
(DLLogger 'PARAMETER' lines of DLE PyTorch/TF1/MXNet; PaddleClas's config dump). For the last two,
the builder's argv is parsed the way the program parses it and must give the recorded values.
The parsers below are written from the upstream sources named beside them.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kit.config import reference
from kit.config.reference import Cluster, RefJob, build
from kit.core.yamlio import load_yaml
from kit.results.extract import Method
from kit.run import records
from kit.run.command import SAMPLE_INTERVAL_MS

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "scripts"
PATCH = SCRIPTS / "plsc" / "exit_at_batch_150.patch"


def launcher_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ref_launch", SCRIPTS / "reference" / "launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dll_parameters(path: Path) -> dict[str, str]:
    """The first DLLogger 'PARAMETER key : value  key : value ...' line (mpirun's [1,0]<stdout>: prefix removed)."""
    line = next(t for t in path.read_text().splitlines() if " - PARAMETER " in t)
    body = line.split(" - PARAMETER ", 1)[1].rstrip()
    return dict(item.split(" : ", 1) for item in re.split(r"  (?=\S+ : )", body))


def gpus_prec_batch(name: str) -> tuple[int, str, int]:
    m = re.search(r"gpu(\d+)_(fp32|amp|pure_fp16)_bs(\d+)", name) or re.search(
        r"bs(\d+)_(fp32|pure_fp16)_DP_N1C(\d+)", name)
    if "DP_N1C" in name:
        return int(m[3]), "fp32" if m[2] == "fp32" else "amp", int(m[1])
    return int(m[1]), "fp32" if m[2] == "fp32" else "amp", int(m[3])


def job_of(framework: str, name: str) -> RefJob:
    gpus, prec, batch = gpus_prec_batch(name)
    nodes = 4 if gpus == 32 else 1
    return RefJob(framework, "resnet50", prec, batch, gpus // nodes, nodes)


# ---- NGC PyTorch: DeepLearningExamples PyTorch/Classification/ConvNets ------------------------------------------

def multiproc_parse(args: list[str]) -> argparse.Namespace:
    """multiproc.py's parser (NVIDIA/DeepLearningExamples @ 11820597, PyTorch/Classification/ConvNets/multiproc.py)."""
    p = argparse.ArgumentParser()
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node_rank", type=int, default=0)
    p.add_argument("--nproc_per_node", type=int, default=1)
    p.add_argument("--master_addr", default="127.0.0.1", type=str)
    p.add_argument("--master_port", default=29500, type=int)
    p.add_argument("training_script", type=str)
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p.parse_args(args)


def dle_pytorch_parse(args: list[str]) -> argparse.Namespace:
    """main.py add_parser_arguments (NVIDIA/DeepLearningExamples @ 0107cf27), without --dynamic-loss-scale,
    which the release that wrote the 2023 logs does not have (its PARAMETER line lacks it)."""
    p = argparse.ArgumentParser()
    p.add_argument("data")
    for flags, kw in (
        (("--data-backend",), {"default": "dali-cpu"}), (("--interpolation",), {"default": "bilinear"}),
        (("--arch", "-a"), {"default": "resnet50"}), (("-j", "--workers"), {"default": 5, "type": int}),
        (("--prefetch",), {"default": 2, "type": int}), (("--epochs",), {"default": 90, "type": int}),
        (("--run-epochs",), {"default": -1, "type": int}),
        (("--early-stopping-patience",), {"default": -1, "type": int}),
        (("--image-size",), {"default": None, "type": int}), (("-b", "--batch-size"), {"default": 256, "type": int}),
        (("--optimizer-batch-size",), {"default": -1, "type": int}),
        (("--lr", "--learning-rate"), {"default": 0.1, "type": float}), (("--lr-schedule",), {"default": "step"}),
        (("--end-lr",), {"default": 0, "type": float}), (("--warmup",), {"default": 0, "type": int}),
        (("--label-smoothing",), {"default": 0.0, "type": float}), (("--mixup",), {"default": 0.0, "type": float}),
        (("--optimizer",), {"default": "sgd"}), (("--momentum",), {"default": 0.9, "type": float}),
        (("--weight-decay", "--wd"), {"default": 1e-4, "type": float}),
        (("--bn-weight-decay",), {"action": "store_true"}), (("--rmsprop-alpha",), {"default": 0.9, "type": float}),
        (("--rmsprop-eps",), {"default": 1e-3, "type": float}), (("--nesterov",), {"action": "store_true"}),
        (("--print-freq", "-p"), {"default": 10, "type": int}), (("--resume",), {"default": None}),
        (("--static-loss-scale",), {"default": 1, "type": float}), (("--prof",), {"default": -1, "type": int}),
        (("--amp",), {"action": "store_true"}), (("--seed",), {"default": None, "type": int}),
        (("--gather-checkpoints",), {"default": "0", "type": int}),
        (("--raport-file",), {"default": "experiment_raport.json"}), (("--evaluate",), {"action": "store_true"}),
        (("--training-only",), {"action": "store_true"}),
        (("--no-checkpoints",), {"action": "store_false", "dest": "save_checkpoints"}),
        (("--jit",), {"default": "no"}), (("--checkpoint-filename",), {"default": "checkpoint.pth.tar"}),
        (("--workspace",), {"default": "./"}), (("--memory-format",), {"default": "nchw"}),
        (("--use-ema",), {"default": None, "type": float}), (("--augmentation",), {"default": None}),
        (("--gpu-affinity",), {"default": "none"}), (("--topk",), {"default": 5, "type": int}),
    ):
        p.add_argument(*flags, **kw)
    return p.parse_args(args)


@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_ngc_pytorch_32_gpus_argv_equals_the_list_multiproc_printed(published, precision):
    log = published / f"perf-v100/pytorch/pytorch_gpu32_{precision}_bs256.txt"
    printed = [ast.literal_eval(line[line.index("['"):]) for line in log.read_text().splitlines() if "['/opt" in line]
    assert len(printed) == 32 and all(p == printed[0] for p in printed)  # 4 nodes x 8 children
    hosts = ("10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4")
    for rank in range(4):
        cmd = build(job_of("torch", log.name), Cluster(rank, hosts, 29500))
        assert cmd.argv[:2] == ["python", "./multiproc.py"]
        assert cmd.cwd == "/opt/models/DeepLearningExamples/PyTorch/Classification/ConvNets"
        mp = multiproc_parse(cmd.argv[2:])
        assert (mp.nnodes, mp.nproc_per_node, mp.node_rank, mp.master_addr) == (4, 8, rank, hosts[0])
        # multiproc.py starts [sys.executable, "-u", training_script, *training_script_args]
        assert ["/opt/conda/bin/python", "-u", mp.training_script, *mp.training_script_args] == printed[0]


@pytest.mark.parametrize("name", ["pytorch_gpu1_fp32_bs256.txt", "pytorch_gpu1_amp_bs256.txt",
                                  "pytorch_gpu8_fp32_bs256.txt", "pytorch_gpu8_amp_bs256.txt"])
def test_ngc_pytorch_1_and_8_gpus_parse_to_the_logged_parameters(published, name):
    recorded = dll_parameters(published / "perf-v100/pytorch" / name)
    cmd = build(job_of("torch", name))
    if cmd.argv[1] == "./multiproc.py":
        mp = multiproc_parse(cmd.argv[2:])
        assert mp.training_script == "./main.py"
        main_args, world = mp.training_script_args, mp.nproc_per_node * mp.nnodes
    else:
        assert cmd.argv[:2] == ["python", "./main.py"]
        main_args, world = cmd.argv[2:], 1
    parsed = vars(dle_pytorch_parse(main_args))
    runtime = {"distributed": str(world > 1), "local_rank": "0", "gpu": "0", "world_size": str(world)}
    assert set(recorded) == set(parsed) | set(runtime)
    assert {k: str(v) for k, v in parsed.items()} | runtime == recorded


# ---- NGC TensorFlow 1: DeepLearningExamples TensorFlow/Classification/ConvNets ----------------------------------

def dle_tf1_parse(args: list[str]) -> dict[str, object]:
    """utils/cmdline_helper.py parse_cmdline, the ArgumentParserUtil release (NVIDIA/DeepLearningExamples;
    its options, in this order, are exactly the logs' PARAMETER keys)."""
    p = argparse.ArgumentParser()
    for flags, kw in (
        (("--arch",), {"default": "resnet50"}), (("--mode",), {"default": "train_and_evaluate"}),
        (("--export_dir",), {"default": None}), (("--to_predict",), {"default": None}),
        (("--batch_size",), {"type": int, "required": True}), (("--num_iter",), {"type": int, "default": 1}),
        (("--run_iter",), {"type": int, "default": -1}), (("--iter_unit",), {"default": "epoch"}),
        (("--warmup_steps",), {"default": 50, "type": int}), (("--model_dir",), {"default": None}),
        (("--results_dir",), {"default": "."}), (("--log_filename",), {"default": "log.json"}),
        (("--display_every",), {"default": 10, "type": int}), (("--seed",), {"type": int, "default": None}),
        (("--gpu_memory_fraction",), {"type": float, "default": 0.7}), (("--gpu_id",), {"type": int, "default": 0}),
        (("--finetune_checkpoint",), {"default": None}), (("--use_final_conv",), {"action": "store_true"}),
        (("--quant_delay",), {"type": int, "default": 0}), (("--quantize",), {"action": "store_true"}),
        (("--use_qdq",), {"action": "store_true"}), (("--symmetric",), {"action": "store_true"}),
        (("--data_dir",), {"default": None}), (("--data_idx_dir",), {"default": None}),
        (("--dali",), {"action": "store_true"}), (("--synthetic_data_size",), {"default": 224, "type": int}),
        (("--lr_init",), {"default": 0.1, "type": float}), (("--lr_warmup_epochs",), {"default": 5, "type": int}),
        (("--weight_decay",), {"default": 1e-4, "type": float}), (("--weight_init",), {"default": "fan_out"}),
        (("--momentum",), {"default": 0.9, "type": float}), (("--label_smoothing",), {"type": float, "default": 0.0}),
        (("--mixup",), {"type": float, "default": 0.0}),
        (("--cosine_lr", "--use_cosine", "--use_cosine_lr--cosine"), {"action": "store_true"}),
        (("--xla", "--use_xla"), {"action": "store_true"}), (("--data_format",), {"default": "NHWC"}),
        (("--amp", "--use_tf_amp"), {"action": "store_true", "dest": "amp"}), (("--cpu",), {"action": "store_true"}),
        (("--static_loss_scale", "--loss_scale"), {"default": -1}),
        (("--use_static_loss_scaling",), {"action": "store_true"}),
    ):
        p.add_argument(*flags, **kw)
    flags, unknown = p.parse_known_args(args)
    assert unknown == []  # parse_cmdline raises on unknown arguments
    return vars(flags)


@pytest.mark.parametrize("name", ["tf_gpu1_fp32_bs256.txt", "tf_gpu1_amp_bs256.txt", "tf_gpu8_fp32_bs256.txt",
                                  "tf_gpu8_amp_bs256.txt"])
def test_ngc_tensorflow_1_and_8_gpus_parse_to_the_logged_parameters(published, name):
    log = published / "perf-v100/tensorflow" / name
    recorded = dll_parameters(log)
    cmd = build(job_of("tensorflow", name))
    assert cmd.cwd == "/opt/models/DeepLearningExamples/TensorFlow/Classification/ConvNets"
    if job_of("tensorflow", name).gpus == 1:
        assert cmd.argv[:2] == ["python", "./main.py"]
        flags = cmd.argv[2:]
    else:  # tf_test_all.sh: mpiexec, one process per GPU; the log prints 'Num GPUs 8'
        assert cmd.argv[:8] == ["mpiexec", "--allow-run-as-root", "--bind-to", "socket", "-np", "8", "python3",
                                "main.py"]
        flags = cmd.argv[8:]
    assert f"Num GPUs {job_of('tensorflow', name).gpus}\n" in log.read_text()
    parsed = {k: str(v) for k, v in dle_tf1_parse(flags).items()}
    assert list(parsed) == list(recorded) and parsed == recorded


def test_ngc_tensorflow_32_gpu_logs_record_no_command(published):
    """Why the 4-node TF1 line is not checked against a log: those logs have throughput lines only."""
    for prec in ("fp32", "amp"):
        text = (published / f"perf-v100/tensorflow/tf_gpu32_{prec}_bs256.txt").read_text()
        assert "PARAMETER" not in text and "main.py" not in text and "total_ips" in text


def test_ngc_tensorflow_4_nodes_is_one_mpirun_on_rank_0():
    hosts = ("10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4")
    job = RefJob("tensorflow", "resnet50", "amp", 256, 8, 4)
    first = build(job, Cluster(0, hosts, 29500, "eth0"))
    assert first.argv[:11] == ["mpirun", "--allow-run-as-root", "-tag-output", "--bind-to", "none",
                               "-timestamp-output", "-np", "32", "-H",
                               "10.1.0.1:8,10.1.0.2:8,10.1.0.3:8,10.1.0.4:8", "-x"]
    assert first.argv[first.argv.index("main.py") + 1:][-4:] == [
        "--use_tf_amp", "--use_static_loss_scaling", "--lr_init=0.01", "--loss_scale=128"]  # tf_test_dist_all.sh
    assert first.env["NCCL_SOCKET_IFNAME"] == "eth0" and "NCCL_SOCKET_IFNAME" in first.argv
    for rank in (1, 2, 3):
        other = build(job, Cluster(rank, hosts, 29500))
        assert other.argv == [] and "rank 0's mpirun" in other.note and other.shell().startswith("# ")


# ---- NGC MXNet: DeepLearningExamples MxNet/Classification/RN50v1.5 ---------------------------------------------

def mxnet_train_argv(benchmark_argv: list[str]) -> list[str]:
    """benchmark.py -> runner -> train.py, as NVIDIA/DeepLearningExamples @ 1bd98ac3 (MxNet/Classification/
    RN50v1.5/benchmark.py and runner) pass the arguments on (one -n, one -b)."""
    b = argparse.ArgumentParser()
    b.add_argument("-o", "--output", required=True)
    b.add_argument("-n", "--ngpus", type=lambda x: list(map(int, x.split(","))), required=True)
    b.add_argument("-b", "--batch-sizes", type=lambda x: list(map(int, x.split(","))), required=True)
    b.add_argument("-i", "--benchmark-iters", type=int, default=100)
    b.add_argument("-e", "--epochs", type=int, default=1)
    b.add_argument("-w", "--warmup", type=int, default=0)
    b.add_argument("--timeout", default="inf")
    b.add_argument("--mode", default="train_val")
    bench_args, other = b.parse_known_args(benchmark_argv)
    (n,), (bs,) = bench_args.ngpus, bench_args.batch_sizes
    runner_argv = ["-n", str(n), "-b", str(bs), "--benchmark-iters", str(bench_args.benchmark_iters),
                   "-e", str(bench_args.epochs), "--dllogger-log", f"{bench_args.output}-{n},{bs}",
                   "--mode", bench_args.mode, "--no-metrics", *other]
    r = argparse.ArgumentParser()
    r.add_argument("-n", "--ngpus", type=int, default=1)
    r.add_argument("-b", "--batch-size", type=int, default=192)
    r.add_argument("-e", "--num-epochs", type=int, default=90)
    r.add_argument("-l", "--lr", type=float, default=0.256)
    r.add_argument("--data-root", type=Path, default=Path("/data/imagenet/train-val-recordio-passthrough"))
    r.add_argument("--dtype", default="float16")
    r.add_argument("--kv-store", default="horovod")
    r.add_argument("--data-backend", default="dali-gpu")
    r.add_argument("--launcher", default="horovod")
    opts, rest = r.parse_known_args(runner_argv)
    n_ch = str(4 - int(opts.data_backend == "mxnet")) if opts.dtype == "float16" else "3"
    opts.batch_size *= opts.ngpus
    opts.lr *= opts.batch_size / 256
    cmd = ["--data-train", str(opts.data_root / "train.rec"), "--data-train-idx", str(opts.data_root / "train.idx"),
           "--data-val", str(opts.data_root / "val.rec"), "--data-val-idx", str(opts.data_root / "val.idx"),
           "--dtype", opts.dtype, "--image-shape", n_ch + ",224,224"]
    if opts.dtype == "float16":
        cmd += "--fuse-bn-relu 1 --fuse-bn-add-relu 1 --input-layout NCHW --conv-layout NHWC".split()
        cmd += "--batchnorm-layout NHWC --pooling-layout NHWC".split()
    cmd += ["--kv-store", opts.kv_store, "--data-backend", opts.data_backend, "--lr", str(opts.lr),
            "--gpus", ",".join(map(str, range(opts.ngpus))), "--batch-size", str(opts.batch_size),
            "--num-epochs", str(opts.num_epochs)]
    return cmd + rest


@pytest.mark.parametrize("name", ["mxnet_gpu1_fp32_bs128.txt", "mxnet_gpu8_fp32_bs128.txt",
                                  "mxnet_gpu1_amp_bs256.txt", "mxnet_gpu8_amp_bs256.txt"])
def test_ngc_mxnet_benchmark_line_reaches_train_py_with_the_logged_parameters(published, name):
    recorded = dll_parameters(published / "perf-v100/mxnet" / name)
    cmd = build(job_of("mxnet", name))
    assert cmd.argv[:2] == ["python", "benchmark.py"] and cmd.cwd.endswith("/MxNet/Classification/RN50v1.5")
    train = mxnet_train_argv(cmd.argv[2:])
    seen = {}
    i = 0
    while i < len(train):  # train.py: every option takes a value except --no-metrics; the last one wins
        if train[i] == "--no-metrics":
            seen["no_metrics"], i = "True", i + 1
            continue
        seen[train[i][2:].replace("-", "_")], i = train[i + 1], i + 2
    listed = {"gpus", "image_shape"}  # train.py parses 'a,b,c' into a list: the log prints [a, b, c]
    for key, value in seen.items():
        want = f"[{', '.join(value.split(','))}]" if key in listed else value
        assert recorded[key] == want, key
    assert {"batch_size", "lr", "dtype", "num_epochs", "benchmark_iters", "dllogger_log", "num_examples", "mode",
            "gpus", "image_shape", "data_train"} <= set(seen)


def test_ngc_mxnet_refuses_several_nodes():
    with pytest.raises(reference.ReferenceError, match="one node only"):
        build(RefJob("mxnet", "resnet50", "fp32", 128, 8, 2), Cluster(0, ("a", "b")))


# ---- PaddleClas ----------------------------------------------------------------------------------------------

def paddle_launch_parse(args: list[str], monkeypatch) -> argparse.Namespace:
    """The installed Paddle's own launcher parser (paddle.distributed.launch.context.args_envs)."""
    from paddle.distributed.launch.context.args_envs import parse_args

    monkeypatch.setattr(sys, "argv", ["launch", *args])
    monkeypatch.delenv("PADDLE_TRAINER_ID", raising=False)
    known, unknown = parse_args()
    assert unknown == []
    return known


def launch_configuration(text: str) -> dict[str, str]:
    """'LAUNCH INFO <time> key: value' lines of the first '-- Configuration --' block."""
    lines = text.split("Configuration  ----------------------\n", 1)[1].splitlines()
    block = lines[:next(i for i, line in enumerate(lines) if "----------" in line)]
    return dict(re.match(r"LAUNCH INFO \S+ \S+ (\w+): ?(.*)$", line).groups() for line in block)


def ppcls_config(text: str) -> dict[str, str]:
    """PaddleClas's printed config ('ppcls INFO: ' + 4 spaces per level + 'key : value') -> {'A.B.c': value}."""
    out, stack = {}, []
    for line in text.splitlines():
        m = re.search(r"ppcls INFO: ( *)(\w+) : ?(.*)$", line)
        if not m:
            continue
        depth = len(m[1]) // 4
        stack[depth:] = [m[2]]
        out.setdefault(".".join(stack), m[3].strip())
    return out


@pytest.mark.parametrize("precision", ["fp32", "pure_fp16"])
def test_paddleclas_8_gpus_launch_configuration(published, monkeypatch, precision):
    text = (published / f"perf-v100/paddle/PaddleClas_ResNet50_bs256_{precision}_DP_N1C8_log").read_text()
    config = launch_configuration(text)
    cmd = build(job_of("paddle", f"bs256_{precision}_DP_N1C8"))
    assert cmd.argv[:3] == ["python", "-m", "paddle.distributed.launch"] and cmd.cwd == "/opt/models/PaddleClas"
    parsed = paddle_launch_parse(cmd.argv[3:], monkeypatch)
    assert parsed.training_script == config["training_script"] == "ppcls/static/train.py"
    assert parsed.training_script_args == ast.literal_eval(config["training_script_args"])
    for key in ("devices", "nnodes", "master", "rank", "log_dir", "nproc_per_node", "job_id", "start_port"):
        assert str(getattr(parsed, key)) == config[key], key


@pytest.mark.parametrize("precision", ["fp32", "pure_fp16"])
def test_paddleclas_32_gpus_argv_and_cluster_environment(published, precision):
    text = (published / f"perf-v100/paddle/paddle_gpu32_{precision}_bs256.txt").read_text()
    new_view = launch_configuration(text)  # Paddle's launcher took --gpus for a script and fell back to legacy
    legacy = dict(re.findall(r"^(gpus|training_script|training_script_args): (.*)$", text, re.M)[-3:])
    endpoints = ast.literal_eval(text.splitlines()[1])
    hosts = tuple(e.split(":")[0] for e in endpoints)
    cmd = build(job_of("paddle", f"gpu32_{precision}_bs256"), Cluster(0, hosts, 60001))
    assert cmd.argv[:3] == ["python", "-m", "paddle.distributed.launch"]
    assert cmd.argv[3:] == ["--gpus", new_view["training_script"],
                            *ast.literal_eval(new_view["training_script_args"])]
    assert cmd.argv[3:5] == ["--gpus", legacy["gpus"]] and cmd.argv[5] == legacy["training_script"]
    assert cmd.argv[6:] == ast.literal_eval(legacy["training_script_args"])
    assert cmd.env["PADDLE_TRAINER_ENDPOINTS"].split(",") == endpoints  # 'args reset by env PADDLE_TRAINER_ENDPOINTS'
    assert f"Host ip reset to {cmd.env['POD_IP']}\n" in text
    current = re.search(r"PADDLE_CURRENT_ENDPOINT\s+(\S+)", text)[1]
    trainers = re.search(r"PADDLE_TRAINERS_NUM\s+(\d+)", text)[1]
    assert current == f"{cmd.env['POD_IP']}:{cmd.env['PADDLE_PORT']}"
    assert int(trainers) == len(hosts) * int(cmd.env["TRAINER_PORTS_NUM"])


@pytest.mark.parametrize("name", ["PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log", "PaddleClas_ResNet50_bs256_pure_fp16_DP_N1C1_log",
                                  "PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log", "PaddleClas_ResNet50_bs256_pure_fp16_DP_N1C8_log",
                                  "paddle_gpu32_fp32_bs256.txt", "paddle_gpu32_pure_fp16_bs256.txt"])
def test_paddleclas_overrides_and_config_file_are_the_logged_config(published, name):
    text = (published / "perf-v100/paddle" / name).read_text()
    job = job_of("paddle", name)
    cmd = build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))))
    if job.gpus == 1:  # no launcher: the 1-GPU logs have no LAUNCH lines
        assert cmd.argv[:2] == ["python", "ppcls/static/train.py"] and "LAUNCH INFO" not in text
    args = cmd.argv[cmd.argv.index("ppcls/static/train.py") + 1:]
    config = ppcls_config(text)
    overrides = [args[i + 1] for i in range(len(args)) if args[i] == "-o"]
    assert overrides and len(overrides) == args.count("-o")
    for item in overrides:
        key, value = item.split("=", 1)
        assert config[key] == value, item
    amp_file = args[1].endswith("ResNet50_amp_O2_ultra.yaml")
    assert (config.get("AMP.level"), config.get("Arch.data_format")) == (("O2", "NHWC") if amp_file else (None, None))
    assert amp_file == (job.precision == "amp")


# ---- PLSC ArcFace (DLPerf) -----------------------------------------------------------------------------------

# Oneflow-Inc/DLPerf @ 2791b8ed, PaddlePaddle/PLSC/README.md: "修改PLSC/plsc/entry.py，在Line:984下加入代码"
# (add below line 984 of plsc/entry.py @ 9bba9c90f542a5e1d8e6d461fcd1f6af40da0918):
DLPERF_LINE, DLPERF_ANCHOR = 984, "local_train_info = [[], [], [], []]"
DLPERF_ADDED = ["if batch_id==150:", "exit()"]
# The code index holds plsc/entry.py of PaddlePaddle/PLSC at a commit near 9bba9c90 (not 9bba9c90 itself,
# which could not be read): there the training loop's first lines are these, 2 lines later than DLPerf's 984.
STORED_START = 986
STORED_LINES = [
    "            local_train_info = [[], [], [], []]",
    "            for batch_id, data in enumerate(self.input_field.loader):",
    "                nsamples += global_batch_size",
    "                t1 = time.time()",
]


def entry_py(start: int, lines: list[str]) -> str:
    """A stand-in plsc/entry.py with `lines` at line `start` (filler elsewhere; only those lines are known)."""
    return "".join(f"# line {i}\n" for i in range(1, start)) + "\n".join(lines) + "\n# after\n"


def test_plsc_patch_hunk_is_dlperfs_change_at_its_published_line():
    (path, hunks), = launcher_module().parse_patch(PATCH.read_text()).items()
    (start, old, new), = hunks
    assert path == "plsc/entry.py" and start == DLPERF_LINE and old[0].strip() == DLPERF_ANCHOR
    assert old == STORED_LINES  # the context is the loop as read, with DLPerf's line number
    added = [line for line in new if line not in old]
    assert [a.strip() for a in added] == DLPERF_ADDED
    assert new.index(added[0]) == 2 and added[0].startswith(" " * 16)  # first statement of the batch loop
    loop = "class Entry:\n    def train(self):\n        for pass_id in range(1):\n" + "\n".join(new) + "\n"
    compile(loop, "plsc/entry.py", "exec")  # valid Python where it lands


def test_plsc_patch_applies_cleanly_at_984_and_is_refused_elsewhere(tmp_path):
    launch = launcher_module()
    (_, hunks), = launch.parse_patch(PATCH.read_text()).items()
    tree = tmp_path / "PLSC"
    (tree / "plsc").mkdir(parents=True)
    original = entry_py(DLPERF_LINE, STORED_LINES)
    (tree / "plsc" / "entry.py").write_text(original)
    ours = launch.apply_hunks(original, hunks, "plsc/entry.py")
    check = subprocess.run(["git", "apply", "--check", "-v", str(PATCH)], cwd=tree, capture_output=True, text=True)
    assert check.returncode == 0 and "offset" not in check.stderr, check.stderr
    subprocess.run(["git", "apply", str(PATCH)], cwd=tree, check=True)
    assert (tree / "plsc" / "entry.py").read_text() == ours
    assert ours.splitlines()[DLPERF_LINE + 1:DLPERF_LINE + 3] == [" " * 16 + "if batch_id==150:", " " * 20 + "exit()"]
    shifted = entry_py(STORED_START, STORED_LINES)  # the stored version's line numbers: strict refusal
    with pytest.raises(launch.PatchError, match=r"plsc/entry.py:984: expected '            local_train_info"):
        launch.apply_hunks(shifted, hunks, "plsc/entry.py")


def test_plsc_commands_are_dlperfs_runner_sh():
    one = build(RefJob("paddle", "arcface", "fp32", 128, 1, 1), Cluster(0, ("10.11.0.2",)))
    assert one.argv == ["python3", "train.py", "--loss-type", "arcface", "--batch-size", "128"]
    eight = build(RefJob("paddle", "arcface", "fp32", 128, 8, 1), Cluster(0, ("10.11.0.2",)))
    assert eight.argv == ["python3", "-m", "paddle.distributed.launch", "--cluster_node_ips=10.11.0.2",
                          "--node_ip=10.11.0.2", "--selected_gpus=0,1,2,3,4,5,6,7", "train.py", "--loss-type",
                          "dist_arcface", "--batch-size", "128"]
    two = build(RefJob("paddle", "arcface", "fp32", 128, 8, 2), Cluster(1, ("10.11.0.2", "10.11.0.3")))
    assert two.argv[3:5] == ["--cluster_node_ips=10.11.0.2,10.11.0.3", "--node_ip=10.11.0.3"]
    assert (two.cwd, two.work_copy, two.patch, two.add) == (
        "/opt/models/PLSC", "plsc-patched", "plsc/exit_at_batch_150.patch", ("plsc/train.py",))
    assert two.shell().startswith("cd plsc-patched && PADDLE_PORT=29500 PADDLE_TRAINERS=10.11.0.2,10.11.0.3 ")
    assert two.env["PADDLE_TRAINER_ID"] == "1" and two.env["POD_IP"] == "10.11.0.3"  # the cluster Paddle >= 2 keeps
    # DLPerf extract_paddle_logs.py: qps records [50//10*n : 150//10*n], mean, 2 decimals
    assert two.publisher_method.to_dict() | {} == reference.Method(skip=10, round=2).to_dict()
    with pytest.raises(reference.ReferenceError, match="FP32 runs only"):
        build(RefJob("paddle", "arcface", "amp", 128, 1, 1))


# ---- FleetX VGG16 ---------------------------------------------------------------------------------------------

def test_fleetx_vgg16_command_and_steps_per_second_scale():
    cmd = build(RefJob("paddle", "vgg16", "amp", 64, 8, 1), scripts_dir="/opt/kit/scripts")
    assert cmd.argv == ["python", "-m", "paddle.distributed.launch", "--gpus", "0,1,2,3,4,5,6,7",
                        "/opt/kit/scripts/fleetx/vgg16_benchmark.py", "--batch-size", "64", "--amp"]
    assert cmd.cwd == "/opt/models/FleetX/python" and cmd.env == {"PYTHONPATH": "."}
    # seed 000: skip 20 steps, the mean of the next 100; steps/s x global batch
    assert cmd.publisher_method == Method(skip=20, count=100, scale=64 * 8)
    assert cmd.kit_method == Method(skip=20, reduce="harmonic_mean", scale=64 * 8)
    source = (SCRIPTS / "fleetx" / "vgg16_benchmark.py").read_text()
    for setting in ("fuse_elewise_add_act_ops = True", "fuse_bn_act_ops = True", "dist_strategy.amp = amp",
                    "enable_inplace = False", "num_iteration_per_drop_scope = 100", "dist_strategy.auto = True"):
        assert setting in source
    # seed 000's auto-parallel table: the driver's --auto (auto strategy alone, DALI), the same rule and scale
    auto = build(RefJob("paddle", "vgg16", "auto", 256, 8, 1), scripts_dir="/opt/kit/scripts")
    assert auto.argv[5:] == ["/opt/kit/scripts/fleetx/vgg16_benchmark.py", "--batch-size", "256", "--auto"]
    assert auto.publisher_method == Method(skip=20, count=100, scale=256 * 8)
    with pytest.raises(reference.ReferenceError, match="PaddleClas runs fp32, amp"):
        build(RefJob("paddle", "resnet50", "auto", 256, 8, 1))


# ---- every published figure, from its log, by the method the builder records ---------------------------------

def test_publisher_methods_reproduce_every_published_figure(published, tmp_path):
    frameworks = {"pytorch": "torch", "tensorflow": "tensorflow", "mxnet": "mxnet", "paddle": "paddle"}
    entries = [e for e in load_yaml(published / "expected.yaml")["logs"] if e["file"].startswith("perf-v100/")]
    assert len(entries) == 22
    for entry in entries:
        job = job_of(frameworks[entry["file"].split("/")[1]], entry["file"])
        cluster = Cluster(0, tuple(f"h{i}" for i in range(job.nodes)))
        cmd = build(job, cluster)
        assert cmd.impl.log_format == entry["format"]
        log = tmp_path / entry["file"].replace("/", "_")
        shutil.copyfile(published / entry["file"], log)
        records.sidecar_path(log).write_text(json.dumps(reference.record(cmd, job, cluster)))
        figures = records.reference_figures(log)
        want = entry["published"] if entry.get("derives", True) else entry["recomputed"]
        assert figures["publisher"] == pytest.approx(want, rel=entry.get("rel_tol", 0.0001)), entry["file"]
        assert figures["kit"] > 0


# ---- combinations, pins, secrets -----------------------------------------------------------------------------

def test_unknown_combinations_are_refused_with_the_list():
    with pytest.raises(reference.ReferenceError) as err:
        reference.implementation("torch", "vgg16")
    assert "torch/vgg16" in str(err.value) and "paddle/arcface (plsc)" in str(err.value)
    assert len(reference.combinations()) == 10
    with pytest.raises(reference.ReferenceError, match="need as many host addresses"):
        build(RefJob("torch", "resnet50", "fp32", 256, 8, 2), Cluster(0, ("a",)))


def test_code_paths_are_where_the_images_check_out_the_pins():
    from kit.images.spec import load_pins

    pins = load_pins()
    assert {name: m.path for name, m in pins.model_code.items()} == {
        name: f"{reference.CODE_ROOT}/{folder}" for name, folder in reference.CODE_DIRS.items()}


def test_secret_looking_variables_are_redacted_everywhere():
    """One list of secret-looking names in the kit (kit.core.secrets: the command records, the bundle's redaction);
    the launcher, which runs on hosts without the kit, keeps an equal copy."""
    from kit.audit import redact as bundle_redaction
    from kit.core import secrets

    env = {"NCCL_SOCKET_IFNAME": "eth0", "HF_TOKEN": "t", "aws_secret_access_key": "s", "DB_PASSWORD": "p"}
    assert secrets.redact(env) == launcher_module().redact(env) == {
        "NCCL_SOCKET_IFNAME": "eth0", "HF_TOKEN": "<redacted>", "aws_secret_access_key": "<redacted>",
        "DB_PASSWORD": "<redacted>"}
    assert launcher_module().SECRET_MARKERS == secrets.SECRET_MARKERS
    assert bundle_redaction.SECRET_MARKERS is secrets.SECRET_MARKERS and reference.redact is secrets.redact


# ---- the launcher and the runners -------------------------------------------------------------------------------

def fake_checkout(root: Path, sub: str) -> Path:
    """A git checkout standing in for model code (the real programs need GPUs and their repositories)."""
    where = root / sub
    where.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root / sub.split("/")[0])], check=True)
    return where


def run_launcher(tmp_path, meta: dict, argv: list[str], *extra: str, env: dict | None = None):
    record = tmp_path / "logs" / "case" / "x_b1_fp32_1.cmd.json"
    line = [sys.executable, str(SCRIPTS / "reference" / "launch.py"), "--record", str(record), "--meta",
            json.dumps(meta), *extra, "--", *argv]
    done = subprocess.run(line, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
    return done, record


def test_launcher_records_then_becomes_the_program_in_the_model_directory(tmp_path):
    code = fake_checkout(tmp_path / "models", "DeepLearningExamples/PyTorch/Classification/ConvNets")
    argv = [sys.executable, "-c", "import os, sys; print(os.getcwd()); print(sys.argv)", "--arch", "resnet50"]
    env = {"PATH": "/usr/bin:/bin", "NCCL_SOCKET_IFNAME": "lo", "HF_TOKEN": "do-not-write"}
    done, record = run_launcher(tmp_path, {"argv": argv, "impl": "ngc-pytorch"}, argv, "--cwd", str(code), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(code) and "'--arch', 'resnet50'" in done.stdout
    meta = json.loads(record.read_text())
    assert meta["argv"] == argv and meta["ran_in"] == str(code) and meta["impl"] == "ngc-pytorch"
    assert meta["environ"]["HF_TOKEN"] == "<redacted>" and meta["environ"]["NCCL_SOCKET_IFNAME"] == "lo"
    assert "do-not-write" not in record.read_text() and meta["model_code_commit"] is None  # no commit yet


def test_launcher_patches_a_fresh_copy_and_refuses_a_mismatch(tmp_path):
    code = fake_checkout(tmp_path / "models", "PLSC")
    (code / "plsc").mkdir()
    (code / "plsc" / "entry.py").write_text(entry_py(DLPERF_LINE, STORED_LINES))
    argv = ["python3", "-c", "import os; print(os.getcwd()); print(open('plsc/entry.py').read().count('exit()'))"]
    extra = ("--cwd", str(code), "--work-copy", "plsc-patched", "--patch", str(PATCH),
             "--add", str(SCRIPTS / "plsc" / "train.py"))
    done, record = run_launcher(tmp_path, {"argv": argv}, argv, *extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path / "plsc-patched"), "1"]
    assert (tmp_path / "plsc-patched" / "train.py").read_text() == (SCRIPTS / "plsc" / "train.py").read_text()
    assert "exit()" not in (code / "plsc" / "entry.py").read_text()  # the checkout stays as pinned
    import hashlib
    assert json.loads(record.read_text())["patch_sha256"] == hashlib.sha256(PATCH.read_bytes()).hexdigest()
    (code / "plsc" / "entry.py").write_text(entry_py(STORED_START, STORED_LINES))
    done, _ = run_launcher(tmp_path, {"argv": argv}, argv, *extra)
    assert done.returncode == 2 and "plsc/entry.py:984: expected" in done.stderr and done.stdout == ""
    done, _ = run_launcher(tmp_path, {"argv": ["other"]}, argv, *extra)
    assert done.returncode == 2 and "differs from the record" in done.stderr


def test_local_runner_runs_a_reference_case_through_the_launcher(tmp_path, monkeypatch):
    from kit.config import suites
    from kit.run.local import LocalRunner
    from kit.run.plan import pinned_commit, plan
    from kit.run.runner import execute

    models = tmp_path / "models"
    convnets = fake_checkout(models, "DeepLearningExamples/PyTorch/Classification/ConvNets")
    (convnets / "main.py").write_text("import os, sys\nprint('cwd', os.getcwd())\nprint('argv', sys.argv[1:])\n")
    monkeypatch.setenv("KIT_MODEL_CODE", str(models))
    # the GPU is a replayed boundary here: the STAND-IN nvidia-smi (tests/standin) answers the GPU sampler
    standin_smi = Path(__file__).resolve().parent / "standin" / "nvidia-smi"
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{tmp_path / 'bin'}:{standin_smi}:/usr/bin:/bin")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)  # the publisher's `python`
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text("schema_version: 1\nname: s\nhardware: gpu\ncases:\n"
                          "  - {framework: torch, impl: reference, model: resnet50, batch_size: 256, repeats: 1}\n"
                          "  - {framework: tensorflow, model: resnet50, batch_size: 256, repeats: 1}\n")
    suite = suites.load_suite(suite_file)
    runs, skipped = plan(suite, str(models))  # a checkout with no commit is not the pinned one
    assert runs == [] and skipped[0][0].key == "ngc-pytorch/resnet50/bz256/1n1g/fp32"
    assert skipped[0][1] == (f"{models / 'DeepLearningExamples'}: not a git checkout (or git cannot read it); "
                             "docker/pins.yaml pins "
                             f"{pinned_commit(skipped[0][0])} (case ngc-pytorch/resnet50/bz256/1n1g/fp32); "
                             "`kit bench --force` runs it (recorded)")
    runs, skipped = plan(suite, str(models), force=True)
    assert [r.case.key for r in runs] == ["ngc-pytorch/resnet50/bz256/1n1g/fp32"]
    assert [c.key for c, _ in skipped] == ["ngc-tensorflow/resnet50/bz256/1n1g/fp32"]
    assert "model code not found at " + str(models / "DeepLearningExamples/TensorFlow") in skipped[0][1]
    runner = LocalRunner(tmp_path / "run", hardware="gpu")
    command = runner.command(runs[0]).launched
    log = tmp_path / "run" / runs[0].log_rel
    # a GPU run starts beside the GPU sampler, which writes the run's samples beside its log
    assert command.argv[1:4] == [str(SCRIPTS / "telemetry" / "gpu_sampler.py"), "--out",
                                 str(records.telemetry_path(log))]
    inner = command.argv[command.argv.index("--") + 1:]
    assert inner[1] == str(SCRIPTS / "reference" / "launch.py")
    assert inner[inner.index("--") + 1:] == build(runs[0].case.ref_job(), code_root=str(models)).argv
    execute(runner, runs[0], tmp_path / "run")
    samples = records.telemetry_path(log).read_text().splitlines()  # the stand-in's samples of the run's time
    assert samples[0].startswith(f"# telemetry 1 source smi interval_ms {SAMPLE_INTERVAL_MS} ") and len(samples) >= 3
    assert samples[1].startswith("timestamp, index, uuid, clocks.current.sm [MHz]")
    text = log.read_text()
    meta = json.loads(records.sidecar_path(log).read_text())
    scratch = meta["scratch"]["path"]  # main.py ran in a scratch mirror of its folder, outside the run
    assert f"\ncwd {scratch}\n" in text and "argv ['--arch', 'resnet50', '-b', '256', '--training-only'" in text
    assert meta["ran_in"] == scratch and not Path(scratch).is_relative_to(tmp_path / "run")
    assert log.name == "resnet50_b256_fp32_1.log" and records.sidecar_path(log).name == "resnet50_b256_fp32_1.cmd.json"
    assert meta["publisher_method"]["skip"] == 9 and meta["kit_method"]["reduce"] == "harmonic_mean"
    assert meta["log_format"] == "dle-pytorch"
    assert meta["command"].startswith(f"cd {convnets} && PYTHONPATH={models}/dllogger${{PYTHONPATH:+:$PYTHONPATH}} "
                                      "python ./main.py")


def test_local_runner_in_the_pinned_image_mounts_the_scripts(tmp_path):
    from kit.config import suites
    from kit.run.local import LocalRunner
    from kit.run.plan import PlannedRun

    suite = suites.load_suite("v100")
    case = next(c for c in suite.cases if c.key == "paddleclas/resnet50/bz256/1n8g/amp")
    runner = LocalRunner(tmp_path, images={"paddle": "kit/paddle:v100"})
    argv = runner.command(PlannedRun(case, 2), "gpu").launched.argv
    assert argv[:3] == ["docker", "run", "--rm"] and "--gpus" in argv
    assert f"type=bind,source={SCRIPTS},target=/opt/kit/scripts,readonly" in argv
    tail = argv[argv.index("kit/paddle:v100") + 1:]
    assert tail[:2] == ["python3", "/opt/kit/scripts/reference/launch.py"]
    assert tail[tail.index("--cwd") + 1] == "/opt/models/PaddleClas"
    assert tail[tail.index("--record") + 1].endswith("paddleclas/resnet50/bz256/1n8g/resnet50_b256_amp_2.cmd.json")


def test_job_commands_start_the_reference_program_on_each_host(tmp_path):
    from kit.config import suites
    from kit.config.inventory import HostConfig
    from kit.run.plan import PlannedRun
    from kit.run.ssh import SshRunner

    hosts = [HostConfig(name=f"n{i}", address=f"10.2.0.{i}", user="u", gpus=8, runtime="native",
                        model_code="/srv/models", nic="ib0") for i in (1, 2, 3, 4)]
    suite = suites.load_suite("v100")
    torch = next(c for c in suite.cases if c.key == "ngc-pytorch/resnet50/bz256/4n8g/fp32")
    plan = SshRunner(None, hosts, tmp_path / "run", suite.hardware).commands(PlannedRun(torch, 1), 31000)
    assert [h.name for h, _, _ in plan] == ["n1", "n2", "n3", "n4"]
    host, workdir, line = plan[2]
    assert "/var/tmp/kit/kit-scripts/reference/launch.py" in line and "--node_rank 2" in line
    assert "/srv/models/DeepLearningExamples/PyTorch/Classification/ConvNets" in line
    assert f"{workdir}/resnet50_b256_fp32_1.cmd.json" in line and "NCCL_SOCKET_IFNAME=ib0" in line
    assert "--collect benchmark.json" in line and "PADDLE_LOG_DIR" not in line
    tf = next(c for c in suite.cases if c.key == "ngc-tensorflow/resnet50/bz256/4n8g/amp")
    plan = SshRunner(None, hosts, tmp_path / "run", suite.hardware).commands(PlannedRun(tf, 1), 31000)
    assert [h.name for h, _, _ in plan] == ["n1"] and "10.2.0.4:8" in plan[0][2]
    assert "--collect /tmp/result/gpu32_amp_bs256" in plan[0][2]
    clas = next(c for c in suite.cases if c.key == "paddleclas/resnet50/bz256/4n8g/fp32")
    plan = SshRunner(None, hosts, tmp_path / "run", suite.hardware).commands(PlannedRun(clas, 1), 31000)
    assert all(f"PADDLE_LOG_DIR={workdir}/launcher" in line for _h, workdir, line in plan)  # every rank's workerlog


def test_dry_run_prints_every_case_per_host(tmp_path, capsys):
    from kit.cli import main
    from kit.config import suites

    assert main(["bench", "--suite", "v100", "--dry-run", "--runs-dir", str(tmp_path / "runs"),
                 "--hosts-file", str(tmp_path / "none.yaml")]) == 2  # a named hosts file must exist
    capsys.readouterr()
    assert main(["bench", "--suite", "v100", "--dry-run", "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "runs").exists()
    for case in suites.load_suite("v100").cases:
        assert f"\n{case.key} [" in out, case.key
    assert "node1..node4 are placeholders" in out
    assert "node3 (in the image): cd /opt/models/DeepLearningExamples/PyTorch/Classification/ConvNets && " \
           "PYTHONPATH=/opt/models/dllogger${PYTHONPATH:+:$PYTHONPATH} python " \
           "./multiproc.py --master_addr '<node1>' --master_port 29500 --nnodes 4 --nproc_per_node 8 " \
           "--node_rank 2 ./main.py --arch resnet50 --amp -b 256" in out
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("schema_version: 1\ndefaults: {gpus: 8, runtime: native, model_code: /srv/models}\nhosts:\n"
                     + "".join(f"  - {{name: n{i}, address: 192.0.2.{i}}}\n" for i in (1, 2, 3, 4)))
    assert main(["bench", "--suite", "v100", "--dry-run", "--hosts-file", str(hosts)]) == 0
    out = capsys.readouterr().out
    assert f"hosts from {hosts}" in out and "placeholders" not in out
    assert "  n2: cd /srv/models/PaddleClas && PADDLE_PORT=29500 PADDLE_TRAINERS=192.0.2.1,192.0.2.2," in out
    assert "  n1: cd /srv/models/DeepLearningExamples/TensorFlow/Classification/ConvNets && mpirun " in out


def test_dry_run_refuses_an_unknown_combination_with_file_line_key(tmp_path, capsys):
    from kit.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: bad\ncases:\n  - framework: torch\n    model: vgg16\n"
                   "    impl: reference\n    batch_size: 32\n")
    assert main(["bench", "--suite", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:6: impl: no reference implementation for torch/vgg16; there are: paddle/resnet50" in err


@pytest.mark.parametrize("framework,nodes,gpus,expected", [
    ("torch", 2, 8, ("benchmark.json",)), ("torch", 1, 1, ("benchmark.json",)),
    ("mxnet", 1, 8, ("benchmark_report_fp16.json",)), ("tensorflow", 1, 8, ("/tmp/result/gpu8_amp_bs256",)),
    ("paddle", 1, 8, ())])
def test_recipes_name_the_files_their_programs_write(framework, nodes, gpus, expected):
    job = RefJob(framework, "resnet50", "amp", 256, gpus, nodes)
    cmd = reference.build(job, reference.Cluster(0, tuple(f"10.0.0.{i}" for i in range(nodes))))
    assert cmd.outputs == expected


def test_launcher_collects_what_the_program_wrote_and_passes_its_exit_status(tmp_path):
    code = fake_checkout(tmp_path / "models", "DeepLearningExamples/MxNet/Classification/RN50v1.5")
    (code / "stale.json").write_text("{}")
    os.utime(code / "stale.json", (1, 1))
    (code / "link.json").symlink_to("/etc/hostname")
    results = tmp_path / "results"
    prog = (f"import pathlib, sys; pathlib.Path('report.json').write_text('{{\"ips\": 1}}'); "
            f"d = pathlib.Path({str(results)!r}) / 'gpu1'; d.mkdir(parents=True); (d / 'log.json').write_text('x');"
            " sys.exit(3)")
    argv = [sys.executable, "-c", prog]
    extra = ("--cwd", str(code), "--collect", "report.json", "--collect", "stale.json", "--collect", "link.json",
             "--collect", f"{results}/gpu1")
    done, record = run_launcher(tmp_path, {"argv": argv}, argv, *extra)
    assert done.returncode == 3, done.stderr
    meta = json.loads(record.read_text())
    assert meta["outputs"] == ["report.json", "gpu1/log.json"] and meta["exit_code"] == 3
    outputs = record.parent / "outputs"
    assert (outputs / "report.json").read_text() == '{"ips": 1}' and (outputs / "gpu1" / "log.json").is_file()
    assert not (outputs / "stale.json").exists() and not (outputs / "link.json").exists()


def test_launcher_passes_a_stop_signal_to_the_program_and_still_collects(tmp_path):
    import signal
    import time
    code = fake_checkout(tmp_path / "models", "DeepLearningExamples/PyTorch/Classification/ConvNets")
    prog = ("import pathlib, signal, sys, time\n"
            "def stop(*_):\n    pathlib.Path('benchmark.json').write_text('partial'); sys.exit(143)\n"
            "signal.signal(signal.SIGTERM, stop); print('ready', flush=True); time.sleep(60)\n")
    argv = [sys.executable, "-c", prog]
    record = tmp_path / "x.cmd.json"
    line = [sys.executable, str(SCRIPTS / "reference" / "launch.py"), "--record", str(record), "--meta",
            json.dumps({"argv": argv}), "--cwd", str(code), "--collect", "benchmark.json", "--", *argv]
    proc = subprocess.Popen(line, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143 and time.monotonic() - t0 < 10
    assert (tmp_path / "outputs" / "benchmark.json").read_text() == "partial"


def test_synthetic_data_is_each_programs_own_mode_and_refused_where_it_has_none(tmp_path):
    from kit.config import suites

    def argv(framework: str, data: str, gpus: int = 8) -> list[str]:
        job = RefJob(framework, "resnet50", "fp32", 256, gpus, 1, data)
        return reference.build(job, data_dir=reference.data_path("/data", job)).argv

    assert argv("torch", "imagenet")[-1] == "/data/folder"
    assert argv("torch", "synthetic")[-3:] == ["--data-backend", "syntetic", "/imagenet"]  # DLE's spelling
    assert "--data_dir=/data/tfrecord" in argv("tensorflow", "imagenet")
    assert not any(a.startswith("--data_dir") for a in argv("tensorflow", "synthetic"))
    assert argv("mxnet", "imagenet")[-2:] == ["--data-root", "/data/recordio"]
    assert argv("mxnet", "synthetic")[-2:] == ["--data-backend", "synthetic"] and "--data-root" not in argv(
        "mxnet", "synthetic")
    suite = tmp_path / "s.yaml"
    suite.write_text("schema_version: 1\nname: s\ncases:\n  - {framework: paddle, impl: reference, model: resnet50,"
                     " batch_size: 256}\n  - {framework: torch, impl: reference, model: resnet50, batch_size: 256}\n"
                     "  - {framework: torch, model: resnet50, batch_size: 256}\n")
    assert [c.data for c in suites.load_suite(suite).cases] == ["imagenet", "imagenet", "synthetic"]
    suite.write_text(suite.read_text().replace("model: resnet50,", "model: resnet50, data: synthetic,", 1))
    plsc = RefJob("paddle", "arcface", "fp32", 128, 8, 1)
    assert plsc.data == "synthetic" and reference.data_path("/data", plsc) is None  # DLPerf: random samples
    with pytest.raises(reference.ReferenceError, match="reads no dataset"):
        reference.build(RefJob("paddle", "arcface", "fp32", 128, 8, 1, "imagenet"))
    with pytest.raises(suites.ConfigError, match=r"s.yaml:4: impl: PaddleClas ResNet50 \(static graph\) has no "
                       r"synthetic-data mode .*programs with one: plsc, ngc-pytorch, ngc-tensorflow, ngc-mxnet"):
        suites.load_suite(suite)


def cluster_inventory(tmp_path, gpus_of_n3: int = 8) -> Path:
    (tmp_path / "kh").write_text("")
    (tmp_path / "key").write_text("")
    path = tmp_path / "hosts.yaml"
    path.write_text(f"schema_version: 1\nssh: {{known_hosts: {tmp_path / 'kh'}}}\n"
                    f"defaults: {{user: bench, gpus: 8, key_file: {tmp_path / 'key'}, data_dir: /data/in}}\n"
                    "hosts:\n  - {name: n1, address: 10.0.0.1, runtime: docker}\n"
                    "  - {name: n2, address: 10.0.0.2, runtime: native, model_code: /srv/models}\n"
                    f"  - {{name: n3, address: 10.0.0.3, gpus: {gpus_of_n3}}}\n  - {{name: n4, address: 10.0.0.4}}\n")
    return path


def test_cluster_dry_run_prints_every_case_on_every_host_of_its_group(tmp_path, capsys):
    from kit.cli import main

    assert main(["cluster", "--dry-run", "--suite", "v100", "--hosts-file", str(cluster_inventory(tmp_path))]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("kit cluster --dry-run: suite v100 (gpu), ") and out[0].endswith("nothing is started.")
    assert out[2] == "  1-node cases: n1 (10.0.0.1, docker, 8 GPUs)"
    assert out[4].startswith("  4-node cases: n1 (10.0.0.1, docker, 8 GPUs), n2 (10.0.0.2, native, 8 GPUs), n3")
    tf = out.index(next(line for line in out if line.startswith("ngc-tensorflow/resnet50/bz256/4n8g/fp32 [reference")))
    assert out[tf + 2] == ("  skipped: one mpirun over 4 hosts cannot start ranks in the other hosts' containers yet; "
                           "n1, n3, n4 have runtime docker (run it on native hosts)")
    pt = out.index(next(line for line in out if line.startswith("ngc-pytorch/resnet50/bz256/4n8g/amp [reference")))
    for rank, host in enumerate(("n1 (in the image)", "n2", "n3 (in the image)", "n4 (in the image)")):
        assert out[pt + 2 + rank].startswith(f"  {host}: cd ") and f"--node_rank {rank} " in out[pt + 2 + rank]
    assert "/srv/models/DeepLearningExamples" in out[pt + 3] and "/opt/models/" in out[pt + 2]
    assert out[-1].endswith(", 2 skipped.")  # TensorFlow's two 4-node cases


def test_cluster_dry_run_shows_one_mpirun_on_rank_0_for_native_hosts(tmp_path, capsys):
    from kit.cli import main

    inventory = cluster_inventory(tmp_path)
    inventory.write_text(inventory.read_text().replace("runtime: docker", "runtime: native").replace(
        "data_dir: /data/in", "data_dir: /data/in, runtime: native"))
    assert main(["cluster", "--dry-run", "--suite", "v100", "--hosts-file", str(inventory)]) == 0
    out = capsys.readouterr().out.splitlines()
    tf = out.index(next(line for line in out if line.startswith("ngc-tensorflow/resnet50/bz256/4n8g/fp32 [reference")))
    assert out[tf + 2].startswith("  n1: cd /opt/models/DeepLearningExamples/TensorFlow/Classification/ConvNets && "
                                  "mpirun --allow-run-as-root -tag-output")
    assert "-H 10.0.0.1:8,10.0.0.2:8,10.0.0.3:8,10.0.0.4:8" in out[tf + 2]
    assert out[tf + 3:tf + 6] == [f"  {n}: # nothing to start here: rank 0's mpirun starts this host's 8 ranks"
                                  for n in ("n2", "n3", "n4")]
    assert out[tf + 6] == "  data: /data/in/tfrecord" and out[-1].endswith(" 0 skipped.")


def test_cluster_plan_refuses_cases_a_host_has_too_few_gpus_for(tmp_path, capsys):
    from kit.cli import main

    inventory = cluster_inventory(tmp_path, gpus_of_n3=4)
    assert main(["cluster", "--dry-run", "--suite", "v100", "--hosts-file", str(inventory)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index(next(line for line in out if line.startswith("paddleclas/resnet50/bz256/4n8g/fp32 [reference")))
    assert out[at + 2] == "  skipped: needs 8 GPU(s) on each of its 4 host(s); n3 has 4 (inventory gpus:)"
    skipped = sum(1 for line in out if line.startswith("  skipped: "))
    assert skipped > 0 and out[-1].endswith(f", {skipped} skipped.")


def test_a_job_refuses_cases_its_hosts_have_too_few_gpus_for_before_connecting(tmp_path):
    from kit.config.hosts import load_hosts
    from kit.config.suites import load_suite
    from kit.run.multinode import MultinodeError, run_job

    inv = load_hosts(cluster_inventory(tmp_path, gpus_of_n3=0))
    with pytest.raises(MultinodeError, match=r"suite v100: no 4-node case fits these hosts: paddle/resnet50/bz256/"
                       r"4n8g/fp32: needs 8 GPU\(s\) on each of its 4 host\(s\); n3 has 0 \(inventory gpus:\)"):
        run_job(inv, ["n1", "n2", "n3", "n4"], load_suite("v100"), tmp_path / "run")  # 10.0.0.x: never reached


def test_make_bench_v100_dry_run_prints_the_cluster_plan(tmp_path):
    inventory = cluster_inventory(tmp_path)
    done = subprocess.run(["make", "-s", "bench-v100", "DRY_RUN=1", f"HOSTS={inventory}"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kit cluster --dry-run: suite v100 (gpu)") and lines[-1].endswith(" 2 skipped.")


# ---- PaddlePaddle/Perf's other models: BERT and Transformer (perf-models/) --------------------------------------

PM = "perf-models"


def perf_models_job(rel: str) -> RefJob:
    """The job a perf-models log ran, from its file name (DP_N1C<G> / gpu<G>, fp16 = AMP)."""
    name = Path(rel).name
    gpus = int(re.search(r"(?:N1C|gpu)(\d+)", name)[1])
    batch = int(re.search(r"bs(\d+)", name)[1])
    precision = "fp32" if "fp32" in name else "amp"
    framework, model = next(fm for prefix, fm in (("Bert/logs/", ("paddle", "bert")),
                                                   ("Bert/OtherReports/PyTorch/", ("torch", "bert")),
                                                   ("Transformer/OtherReports/PyTorch/", ("torch", "transformer")),
                                                   ("HRNetW18/logs/paddle/", ("paddle", "hrnetw18")))
                            if rel.startswith(prefix))
    return RefJob(framework, model, precision, batch, gpus, 1)


def namespace(text: str) -> dict:
    """The first 'Namespace(key=value, ...)' a program printed, as {key: python value}."""
    body = re.search(r"Namespace\((.*?)\)(?:\"\]|\s*$)", text, re.M)[1]
    call = ast.parse(f"f({body})", mode="eval").body
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


PADDLENLP_BERT_LOGS = [f"Bert/logs/{d}_LOG/PaddleNLP_bert_base_seqlen128_bs96_{p}_DP_N1C{g}_log"
                       for d in ("V100", "A100") for p in ("fp16", "fp32") for g in (1, 8)]


@pytest.mark.parametrize("rel", PADDLENLP_BERT_LOGS)
def test_paddlenlp_bert_argv_is_the_logged_command(published, rel):
    text = (published / PM / rel).read_text(errors="replace")
    job = perf_models_job(rel)
    assert (job.framework, job.model) == ("paddle", "bert")
    cmd = build(job, recipe_only=True)
    logged = next(line for line in text.splitlines() if "run_pretrain.py --" in line).strip()
    # the publisher ran from a folder one level below the checkout; the recipe runs the same file from the checkout
    logged = logged.replace("../examples/language_model/bert/static//run_pretrain.py",
                            "examples/language_model/bert/static/run_pretrain.py")
    assert cmd.argv == logged.split() and cmd.cwd == "/opt/models/PaddleNLP"
    ns = namespace(text)
    assert (ns["batch_size"], ns["gradient_merge_steps"], ns["max_steps"], ns["logging_steps"]) == (96, 88, 500, 10)
    assert ns["input_dir"] == "./data/wikicorpus_en_seqlen128" and ns["fuse_transformer"] is True
    assert bool(ns["use_amp"]) == (job.precision == "amp")


def test_paddlenlp_and_paddleseg_are_pinned_where_the_perf_readmes_check_them_out(published):
    """docker/pins.yaml's commits are the ones the Perf READMEs' 拉取代码 step checks out (byte copies here)."""
    from kit.images.spec import current_pins

    code = current_pins().model_code
    for key, readme in (("paddlenlp", "Bert/README.md"), ("paddlenlp", "Transformer/README.md"),
                        ("paddleseg", "HRNetW18/README.md")):
        folder = code[key].path.rsplit("/", 1)[1]
        assert f"cd {folder} && git checkout {code[key].commit}" in (published / PM / readme).read_text()
    job = RefJob("paddle", "bert", "amp", 96, 8)
    assert build(job).argv == build(job, recipe_only=True).argv and build(job).cwd == "/opt/models/PaddleNLP"
    with pytest.raises(reference.ReferenceError, match="32-GPU BERT log .2021. records no launch command"):
        build(RefJob("paddle", "bert", "amp", 96, 8, 4), Cluster(0, ("a", "b", "c", "d")), recipe_only=True)


NGC_BERT_LOGS = [f"Bert/OtherReports/PyTorch/logs/{d}_LOG/bert_base_lamb_pretraining.pyt_bert_pretraining_phase1_{n}.log"
                 for d, n in (("A100", "fp16_bs128_gpu1"), ("A100", "fp16_bs128_gpu8"), ("A100", "fp32_bs128_gpu1"),
                              ("V100", "fp16_bs96_gpu1"), ("V100", "fp16_bs96_gpu8"), ("V100", "fp32_bs96_gpu8"))]


@pytest.mark.parametrize("rel", NGC_BERT_LOGS)
def test_ngc_bert_argv_is_the_traced_command_and_gives_the_logged_config(published, rel):
    text = (published / PM / rel).read_text()
    job = perf_models_job(rel)
    cmd = build(job)  # DeepLearningExamples is pinned: a runnable recipe
    traced = next(line for line in text.splitlines() if line.startswith("+ python3 -m torch.distributed.launch"))
    assert cmd.argv == traced[2:].replace("/workspace/bert/run_pretraining.py", "run_pretraining.py").split()
    assert cmd.cwd == "/opt/models/DeepLearningExamples/PyTorch/LanguageModeling/BERT"
    ns = namespace(text)
    flags = dict(a[2:].split("=", 1) for a in cmd.argv if a.startswith("--") and "=" in a)
    accumulation = int(flags["gradient_accumulation_steps"])
    # run_pretraining.py divides --train_batch_size by the accumulation: the per-GPU batch the log names
    assert ns["train_batch_size"] == int(flags["train_batch_size"]) // accumulation == job.batch_size
    assert ns["gradient_accumulation_steps"] == accumulation and ns["fp16"] == (job.precision == "amp")
    assert int(flags["train_batch_size"]) * job.gpus == reference.BERT_SEQUENCES_PER_STEP


TRANSFORMER_LOGS = [f"Transformer/OtherReports/PyTorch/logs/{d}_LOG/transformer_pytorch_bs5120_{p}_gpu{g}"
                    for d in ("V100", "A100") for p in ("fp16", "fp32") for g in (1, 8)]


@pytest.mark.parametrize("rel", TRANSFORMER_LOGS)
def test_ngc_transformer_argv_is_the_logged_first_line(published, rel):
    text = (published / PM / rel).read_text()
    job = perf_models_job(rel)
    cmd = build(job)
    assert cmd.argv == text.splitlines()[0].split()
    assert cmd.cwd == "/opt/models/DeepLearningExamples/PyTorch/Translation/Transformer"
    ns = namespace(text)
    assert (ns["max_tokens"], ns["amp"], ns["fp16"], ns["distributed_world_size"]) == (
        5120, job.precision == "amp", False, job.gpus)


PADDLESEG_LOGS = [f"HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_bs8_{p}_DP_N1C{g}_log" for p in ("fp16", "fp32")
                  for g in (1, 8)]


@pytest.mark.parametrize("rel", PADDLESEG_LOGS)
def test_paddleseg_hrnetw18_argv_is_the_logged_command(published, rel, monkeypatch):
    text = (published / PM / rel).read_text()
    job = perf_models_job(rel)
    cmd = build(job, recipe_only=True)
    logged = next(line for line in text.splitlines() if line.startswith("python") and "tools/train.py --config" in line)
    assert cmd.argv == logged.split() and cmd.cwd == "/opt/models/PaddleSeg"
    if job.gpus > 1:  # the launcher's own view of it: 'LAUNCH INFO ... training_script(_args)'
        config = launch_configuration(text)
        parsed = paddle_launch_parse(cmd.argv[3:], monkeypatch)
        assert parsed.training_script == config["training_script"] == "tools/train.py"
        assert parsed.training_script_args == ast.literal_eval(config["training_script_args"])
        assert str(parsed.devices) == config["devices"]
    assert build(job).argv == cmd.argv  # pinned now (docker/pins.yaml model_code.paddleseg)


@pytest.mark.parametrize("rel", PADDLENLP_BERT_LOGS + NGC_BERT_LOGS + TRANSFORMER_LOGS + PADDLESEG_LOGS)
def test_perf_models_publisher_methods_give_the_published_figures(published, tmp_path, rel):
    claims = {e["file"].split(f"{PM}/", 1)[1]: e for e in load_yaml(REPO / "kit/claims/perf-models.yaml")["logs"]}
    entry = claims[rel]
    job = perf_models_job(rel)
    cluster = Cluster()
    cmd = build(job, cluster, recipe_only=True)
    assert cmd.impl.log_format == entry["format"] and entry.get("derives", True)
    log = tmp_path / Path(rel).name
    shutil.copyfile(published / PM / rel, log)
    records.sidecar_path(log).write_text(json.dumps(reference.record(cmd, job, cluster)))
    figures = records.reference_figures(log)
    # NGC BERT's README cells are the summary cut or rounded to varying digits: the recipe keeps the whole figure
    tolerance = 1e-5 if cmd.impl.name == "ngc-pytorch-bert" else entry["rel_tol"]
    assert figures["publisher"] == pytest.approx(entry["published"], rel=tolerance)
    assert figures["kit"] > 0


def test_every_kit_script_a_program_runs_is_its_own_and_staged_to_hosts():
    """A file of scripts/ that a program's command names (a driver; a patch its work copy applies) is in its
    Program.scripts, and so in what every host is given (SCRIPT_FILES); each exists."""
    from kit.config import programs
    from kit.config.suites import available, load_suite
    from kit.run.command import SCRIPT_FILES

    jobs = {c.ref_job() for name in available() for c in load_suite(name).cases if c.impl == "reference"}
    named: dict[str, set[str]] = {}
    for job in sorted(jobs, key=repr):
        cmd = build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))), scripts_dir="/S")
        prog = programs.program(cmd.impl)
        used = {a.removeprefix("/S/") for a in cmd.argv if a.startswith("/S/")}
        used |= {cmd.patch, *cmd.add} - {None} if cmd.work_copy else set()
        named.setdefault(cmd.impl.name, set()).update(used)
        assert used <= set(prog.scripts), (job, used - set(prog.scripts))
    assert named["fleetx"] == {"fleetx/vgg16_benchmark.py"} and named["plsc"] >= {"plsc/train.py"}
    for prog in programs.PROGRAMS.values():
        assert set(prog.scripts) <= set(SCRIPT_FILES) and all((SCRIPTS / s).is_file() for s in prog.scripts)
