"""The log text bench/scale.py's generated run holds (see its docstring): the harness's :::KITLOG lines with a real
run's launcher and warning lines around them, and rank 0's output of each published program, its real log or its
print statements as the stand-ins print them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from kit.config import reference
from kit.config.cases import Case
from kit.core.catalogue import corpus_batches, harness

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = REPO.parent / "shared" / "fixtures" / "published-logs"
GPU_NAME = "Tesla T4"  # the GPU of scale.SMI, the hosts' capture: the logs name the GPU their host has
sys.path.append(str(REPO / "scripts" / "harness"))
from train import UNIT, counted  # noqa: E402  (the harness: what its NLP figures count)

# ------------------------------------------------------------------------------------------------ real text

# a real run's lines around the harness's own (kit bench on this repo's CPU runs: tests/test_multinode.py)
PY_WARN = ("/opt/kit/venv/lib/python3.11/site-packages/paddle/utils/cpp_extension/extension_utils.py:712: "
           "UserWarning: No ccache found. Please be aware that recompiling all source files may be required. You can "
           "download and install ccache from: https://github.com/ccache/ccache/blob/master/doc/INSTALL.md\n"
           "  warnings.warn(warning_message)\n")
PADDLE_FLAGS = ("======================= Modified FLAGS detected =======================\n"
                "FLAGS(name='FLAGS_fraction_of_gpu_memory_to_use', current_value=0.0, default_value=0.92000001668930"
                "05)\nFLAGS(name='FLAGS_enable_pir_in_executor', current_value=True, default_value=False)\n"
                "=======================================================================\n")


def launch_header(nodes: int, gpus: int, rank: int, host_ip: str, master: str, log_dir: str, script: str) -> str:
    """paddle.distributed.launch's configuration block (as a real run printed it)."""
    keys = [("auto_cluster_config", "0"), ("auto_parallel_config", "None"), ("devices", "None"),
            ("elastic_level", "-1"), ("elastic_timeout", "30"), ("enable_gpu_log", "True"), ("gloo_port", "6767"),
            ("host", host_ip), ("ips", "None"), ("job_id", "default"), ("legacy", "False"), ("log_dir", log_dir),
            ("log_level", "INFO"), ("log_overwrite", "False"), ("master", master), ("max_restart", "3"),
            ("nnodes", str(nodes)), ("nproc_per_node", str(gpus)), ("rank", str(rank)),
            ("run_mode", "collective"), ("server_num", "None"), ("servers", ""), ("sort_ip", "False"),
            ("start_port", "6070"), ("trainer_num", "None"), ("trainers", ""), ("training_script", script),
            ("with_gloo", "1")]
    t = "LAUNCH INFO 2026-11-24 08:15:21,068 "
    out = [PY_WARN.rstrip("\n"), f"LAUNCH WARNING 2026-11-24 08:15:21,060 Host ip reset to {host_ip}",
           t + "-----------  Configuration  ----------------------"]
    out += [f"{t}{k}: {v}" for k, v in keys]
    out += [t + "--------------------------------------------------",
            f"{t}Job: default, mode collective, replicas {nodes}[{nodes}:{nodes}], elastic False",
            t + "Waiting peer start..."]
    for i in range(3):
        out.append(f"[2026-11-24 08:15:2{i},915] [    INFO] _client.py:1025 - HTTP Request: GET "
                   f"http://{master}/default/info \"HTTP/1.0 200 OK\"")
    out += [f"{t}Run Pod: pod{rank}, replicas {gpus}, status ready",
            f"{t}Watching Pod: pod{rank}, replicas {gpus}, status running"]
    return "\n".join(out) + "\n"


LAUNCH_END = "LAUNCH INFO 2026-11-24 08:17:30,686 Pod completed\nLAUNCH INFO 2026-11-24 08:17:30,686 Exit code 0\n"

# per GPU samples/s of the harness (V100-like), by model and precision; bert: sequences/s, transformer: tokens/s
HARNESS_SPEED = {("resnet50", "fp32"): 380.0, ("resnet50", "amp"): 1150.0, ("vgg16", "fp32"): 230.0,
                 ("vgg16", "amp"): 610.0, ("arcface", "fp32"): 390.0, ("arcface", "amp"): 1000.0,
                 ("cyclegan", "fp32"): 7.0, ("se_resnext50", "fp32"): 165.0, ("deeplabv3p", "fp32"): 11.0,
                 ("bert", "fp32"): 130.0, ("transformer", "fp32"): 19000.0}


def kitlog(data: dict) -> str:
    return ":::KITLOG " + json.dumps({"kit": 1, **data}) + "\n"


def seed003_fields(case: Case) -> dict:
    """What run_start states of seed 003's models: their size, and the NLP models' sequence length, corpus and
    epochs (the case's, else the model's default)."""
    model = harness.MODELS[case.model]
    if model.family != "seed003":
        return {}
    nlp = {"seq_len": case.seq_len or model.seq_len, "corpus_size": case.corpus_size or model.corpus_size,
           "measure_epochs": case.measure_epochs} if model.epochs else {}
    return {"size": case.size, **nlp}


def harness_rank0(case: Case, repeat: int, host: str) -> str:
    """Rank 0's output of the harness: run_start, warmup_end, one step line per measured step, run_stop, rank_stop."""
    ranks = case.processes
    gb = case.batch_size * ranks
    per_gpu = HARNESS_SPEED[(case.model, case.precision)] * (0.93 if ranks > 8 else 1.0)
    t0 = 1795508126886 + repeat * 600_000
    out = [PY_WARN, PADDLE_FLAGS if case.framework == "paddle" else ""]
    out.append(kitlog({"event": "run_start", "time_ms": t0, "framework": case.framework,
                       "framework_version": "2.6.2" if case.framework == "paddle" else "2.3.1",
                       "model": case.model, "params": 25557032, "num_classes": case.num_classes,
                       "precision": case.precision, "amp_effective": case.precision == "amp", "device": "gpu",
                       "device_name": GPU_NAME, "ranks": ranks, "local_batch": case.batch_size,
                       "global_batch": gb, "image_size": case.image_size, "data": case.data,
                       "channels_last": case.channels_last, "threads": 8, "warmup_steps": case.warmup_steps,
                       "measure_steps": case.measure_steps, "lr": 0.1,
                       "optimizer": harness.MODELS[case.model].optimizer,
                       "momentum": 0.9, "weight_decay": 0.0001, "seed": 0, "host": host, "python": "3.11.7",
                       **seed003_fields(case)}))
    if case.model in ("bert", "transformer"):
        return "".join(out) + epoch_timed(case, repeat, host, t0, per_gpu)
    warm = case.warmup_steps * case.batch_size / per_gpu * 1.4
    t = t0 + int(warm * 1000)
    out.append(kitlog({"event": "warmup_end", "time_ms": t, "steps": case.warmup_steps, "seconds": round(warm, 6)}))
    total = 0.0
    for i in range(case.measure_steps):
        sps = gb / (case.batch_size / per_gpu) * (1.0 + 0.01 * ((i * 7 + repeat) % 5 - 2))
        sec = gb / sps
        total += sec
        t += int(sec * 1000)
        out.append(kitlog({"event": "step", "time_ms": t, "step": case.warmup_steps + i + 1, "global_batch": gb,
                           "seconds": round(sec, 6), "samples_per_sec": round(sps, 3), "ranks": ranks,
                           "framework": case.framework, "model": case.model, "precision": case.precision,
                           "loss": round(6.9 - 0.001 * i, 5)}))
    thr = round(gb * case.measure_steps / total, 3)
    out.append(kitlog({"event": "run_stop", "time_ms": t + 2, "status": "success", "steps": case.measure_steps,
                       "seconds": round(total, 6), "samples_per_sec": thr, "ranks": ranks,
                       "framework": case.framework, "model": case.model, "precision": case.precision,
                       "unit": UNIT.get(case.model, "images/s"), "throughput": thr, "peak_memory_mb": 14721.9,
                       "peak_memory_kind": "max_memory_allocated"}))
    out.append(rank_stop(0, ranks, 0, host, case.measure_steps, t + 9))
    return "".join(out)


def epoch_timed(case: Case, repeat: int, host: str, t0: int, speed: float) -> str:
    """Seed 003's NLP rule as the harness logs it (scripts/harness/train.py timed_epochs): warm-up, then whole
    epochs of a fixed corpus, each step line marked "timing": "epochs", one epoch line each, run_stop. Each step the
    next batch (sequences, tokens) of the synthetic corpus the harness makes of the case (kit.core.catalogue.
    corpus_batches, the harness's own code: rule set v9 recomputes it)."""
    ranks, unit = case.processes, UNIT[case.model]
    fields = seed003_fields(case)
    corpus = corpus_batches(case.model, fields["size"], fields["corpus_size"], case.batch_size, fields["seq_len"],
                            0, ranks)
    batches = len(corpus)
    common = {"ranks": ranks, "framework": case.framework, "model": case.model, "precision": case.precision}
    out = [kitlog({"event": "corpus", "time_ms": t0 + 10, "batches_per_epoch": batches,
                   "sequences_per_epoch": sum(s for s, _ in corpus), "tokens_per_epoch": sum(t for _, t in corpus),
                   "seq_len": case.seq_len, "corpus_size": case.corpus_size})]
    t = t0 + 15_000
    out.append(kitlog({"event": "warmup_end", "time_ms": t, "steps": case.warmup_steps, "seconds": 15.0}))
    step, total = case.warmup_steps, {"seconds": 0.0, "sequences": 0, "tokens": 0, "steps": 0}
    for epoch in range(1, case.measure_epochs + 1):
        secs = 0.0
        for i, (seqs_step, toks_step) in enumerate(corpus):
            step += 1
            sec = counted(unit, seqs_step, toks_step) / (speed * ranks) * (1.0 + 0.01 * ((i * 7 + repeat) % 5 - 2))
            secs += sec
            t += int(sec * 1000)
            out.append(kitlog({"event": "step", "time_ms": t, "step": step, "epoch": epoch, "timing": "epochs",
                               "global_batch": seqs_step, "tokens": toks_step, "seconds": round(sec, 6),
                               "samples_per_sec": round(seqs_step / sec, 3),
                               "tokens_per_sec": round(toks_step / sec, 3), **common,
                               "loss": round(7.5 - 0.001 * i, 5)}))
        seqs, toks = sum(s for s, _ in corpus), sum(t for _, t in corpus)
        out.append(kitlog({"event": "epoch", "time_ms": t + 1, "epoch": epoch, "steps": batches, "sequences": seqs,
                           "tokens": toks, "seconds": round(secs, 6), "unit": unit,
                           "throughput": round(counted(unit, seqs, toks) / secs, 3), **common}))
        total = {"seconds": total["seconds"] + secs, "sequences": total["sequences"] + seqs,
                 "tokens": total["tokens"] + toks, "steps": total["steps"] + batches}
    sec = total["seconds"]
    out.append(kitlog({"event": "run_stop", "time_ms": t + 2, "status": "success", "steps": total["steps"],
                       "epochs": case.measure_epochs, "sequences": total["sequences"], "tokens": total["tokens"],
                       "seconds": round(sec, 6), "samples_per_sec": round(total["sequences"] / sec, 3),
                       "sequences_per_sec": round(total["sequences"] / sec, 3),
                       "tokens_per_sec": round(total["tokens"] / sec, 3), **common, "unit": unit,
                       "throughput": round(counted(unit, total["sequences"], total["tokens"]) / sec, 3),
                       "peak_memory_mb": 14721.9, "peak_memory_kind": "max_memory_allocated"}))
    out.append(rank_stop(0, ranks, 0, host, total["steps"], t + 9))
    return "".join(out)


def rank_stop(rank: int, ranks: int, local: int, host: str, steps: int, t: int) -> str:
    return kitlog({"event": "rank_stop", "time_ms": t, "status": "success", "rank": rank, "ranks": ranks,
                   "local_rank": local, "host": host, "steps": steps, "peak_memory_mb": 14717.3,
                   "peak_memory_kind": "max_memory_allocated"})


def harness_other(framework: str, rank: int, ranks: int, local: int, host: str, steps: int) -> str:
    """A rank > 0 of the harness: the framework's start-up lines, then its rank_stop line only."""
    head = PY_WARN + (PADDLE_FLAGS if framework == "paddle" else "")
    return head + rank_stop(rank, ranks, local, host, steps, 1795508129650 + rank)


def published(name: str) -> str:
    return (PUBLISHED / name).read_text(errors="replace")


def reference_text(case: Case) -> str:
    """Rank 0's output of a published program (its real log, or its print statements as the stand-ins print them)."""
    impl = reference.implementation(case.framework, case.model).name
    g, p = case.processes, case.precision
    if impl == "paddleclas":
        if case.nodes > 1:
            return published(f"perf-v100/paddle/paddle_gpu32_{'pure_fp16' if p == 'amp' else 'fp32'}_bs256.txt")
        return published(f"perf-v100/paddle/PaddleClas_ResNet50_bs256_{'pure_fp16' if p == 'amp' else 'fp32'}"
                         f"_DP_N1C{case.gpus_per_node}_log")
    if impl == "ngc-pytorch":
        return published(f"perf-v100/pytorch/pytorch_gpu{32 if case.nodes > 1 else g}_{p}_bs256.txt")
    if impl == "ngc-tensorflow":
        return published(f"perf-v100/tensorflow/tf_gpu{32 if case.nodes > 1 else g}_{p}_bs256.txt")
    if impl == "ngc-mxnet":
        return published(f"perf-v100/mxnet/mxnet_gpu{g}_{'amp_bs256' if p == 'amp' else 'fp32_bs128'}.txt")
    if impl in ("ngc-pytorch-bert", "ngc-pytorch-transformer"):  # one node; FP32 BERT on 1 GPU: its 8-GPU log
        half = "fp16" if p == "amp" else "fp32"
        if impl == "ngc-pytorch-bert":
            gpus = 8 if p == "fp32" else case.gpus_per_node
            return published(f"perf-models/Bert/OtherReports/PyTorch/logs/V100_LOG/bert_base_lamb_pretraining."
                             f"pyt_bert_pretraining_phase1_{half}_bs96_gpu{gpus}.log")
        return published(f"perf-models/Transformer/OtherReports/PyTorch/logs/V100_LOG/transformer_pytorch_bs5120_"
                         f"{half}_gpu{case.gpus_per_node}")
    if impl == "fleetx":  # FleetX's fit(): one line per step from start_step + 1 (tests/standin/fleetx)
        speeds = [1.25] * 20 + [2.0, 4.0] * 50  # steps/s; the published figure where the suite has one
        if case.reference:
            speed = case.reference.value / (case.batch_size * case.processes)
            speeds = [speed * 0.6] * 10 + [speed] * 110
        lines, total = [], 0.0
        for i, speed in enumerate(speeds):
            total += 1 / speed
            step = 11 + i
            lines.append(f"epoch id: 0, step{step}, train_loss: {6.907755:f}, total time cost = {total:f}, "
                         f"step per second: {(step - 10) / total:f}, speed: {speed:f}")
        return "".join(line + "\n" for line in lines)
    # plsc: PLSC's logger line every 10 batches up to DLPerf's exit at batch 150 (tests/standin/plsc)
    ref = case.reference.value if case.reference else 2100.0
    lines = [f"INFO 2022-06-02 16:17:{10 + b // 10:02d},158 entry.py:1001] Pass:0 batch:{b} lr:0.10000000 "
             f"loss:{46.5 - b * 0.01:.6f} qps:{(412.5 if b == 0 else ref):.2f}" for b in range(0, 151, 10)
             for _trainer in range(case.nodes)]  # DLPerf's reduction reads one line per node's trainer 0
    return "".join(line + "\n" for line in lines)


def as_its_case(text: str, case: Case) -> str:
    """A replayed DLE log's PARAMETER line with the generated case's batch and world size, as the program prints its
    own arguments (rule set v4 compares them: kit.results.parsers.echo; tests/standin/dle_pytorch does the same)."""
    said = {"batch_size": str(case.batch_size), "world_size": str(case.processes)}

    def one(line: re.Match) -> str:
        return re.sub(r"(?<=  )(batch_size|world_size) : \S+", lambda m: f"{m[1]} : {said[m[1]]}", line[0])
    if reference.implementation(case.framework, case.model).log_format not in ("dle-pytorch", "dle-tf1"):
        return text
    return re.sub(r"PARAMETER [^\n]*", one, text)


def tf_ranks(text: str, ranks: int) -> str:
    """mpirun -tag-output: every rank's lines tagged [1,r]; ranks > 0 print Horovod's start-up line."""
    extra = [f"Mon Jun 13 17:41:0{r % 10} 2022[1,{r}]<stdout>:Horovod rank {r} of {ranks} started on local rank "
             f"{r % 8}\n" for r in range(1, ranks)]
    return "".join(extra) + text
