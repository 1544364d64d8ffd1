"""What a published program's log says about its own job (its echo of its parameters), per log format. Pure.

    said = echo("dle-pytorch", text)     # [Said(field="batch", key="PARAMETER batch_size", raw="256", value=256, ..)]
    ECHOES["dle-pytorch"].states         # what that format's echo states, for people

Read only as the real logs print it (../shared/fixtures/published-logs, tests/fixtures/gpu-runs):
- DLE PyTorch, TensorFlow 1, MXNet: DLLogger's 'DLL <time> - PARAMETER key : value  key : value ...' line (its
  items two blanks apart; mpirun's tag before it where ranks are tagged); DLE PyTorch spells its synthetic backend
  'syntetic'; DLE MXNet's 'amp' is False in its float16 runs ('dtype' is its precision), its 'batch_size' is its
  node's (per GPU x its 'gpus' list);
- PaddleClas: its config, one 'ppcls INFO: ' line per key, nested four blanks a level; an 'AMP' section only in
  its AMP runs (level O2: pure FP16);
- PaddleNLP BERT, DLE PyTorch BERT, DLE PyTorch Transformer: their argparse Namespace(...) (DLE BERT's inside
  DLLogger's 'PARAMETER Config : ["Namespace(...)"]'); DLE BERT's precision is 'fp16' ('amp' is False in both),
  its train_batch_size the per-GPU batch of one step (printed after run_pretraining.py divides it back);
- PaddleSeg: its config in YAML (a top-level 'batch_size: 8', the model's backbone type) and a 'use AMP to train'
  line in its AMP runs only.
Rule set v4 compares each statement with the case (kit.audit.rules.programs.program_log_states_its_job); a format
whose `reads` is None is not read (ECHOES says why).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from kit.results.parsers.lines import split_rank_fragments

# the fields a statement may be about, in the case's terms
BATCH, NODE_BATCH, WORLD, GPUS, PRECISION, MODEL, DATA, LAYOUT = (
    "batch", "node_batch", "world", "gpus_per_node", "precision", "model", "data", "layout")


@dataclass(frozen=True)
class Said:
    """One thing a log states about its job: the field, the log's own key and words, what they mean, where."""

    field: str
    key: str  # as the log names it: 'PARAMETER batch_size', 'DataLoader.Train.sampler.batch_size'
    raw: str  # as it printed it
    value: object  # in the case's terms: 256, 'amp', 'resnet50', 'synthetic' | 'real', 'nhwc'
    line: int  # 1-based


@dataclass(frozen=True)
class Echo:
    states: str  # what the format's echo states (or why it is not read)
    reads: Callable[[str], list[Said]] | None = None  # text -> statements; None: not read
    fields: tuple[str, ...] = ()  # what every log that echoes states
    # whether a log of this many nodes must hold the echo (the real logs that do not are named where it is False)
    required: Callable[[int], bool] = lambda nodes: True


_DLL_PARAMETER = re.compile(r"DLL \d{4}-\d\d-\d\d[ T][\d:.]+ - +PARAMETER +(.*)")
_DLL_ITEM = re.compile(r"(\S+) : (.*?)(?=  +\S+ : |\s*$)")


def dll_parameters(text: str) -> list[tuple[int, str, str]]:
    """(line, key, value) of every item of every DLLogger PARAMETER line (each rank's, where mpirun tagged them)."""
    out = []
    for number, physical in enumerate(text.splitlines(), 1):
        if "PARAMETER" not in physical:
            continue
        for _rank, line in split_rank_fragments(physical):
            m = _DLL_PARAMETER.search(line)
            if m:
                out += [(number, k, v.strip()) for k, v in _DLL_ITEM.findall(m.group(1))]
    return out


def _precision(raw: str) -> str:  # True/False; PaddleNLP's older 32-GPU script printed use_amp=1
    return {"True": "amp", "1": "amp", "False": "fp32", "0": "fp32"}.get(raw, raw)


def _real_or_synthetic(backend: str) -> str:
    return "synthetic" if backend in ("syntetic", "synthetic") else "real"  # DLE PyTorch: 'syntetic'


def _int(raw: str) -> int | str:
    return int(raw) if raw.isdigit() else raw


def _dll_said(items: list[tuple[int, str, str]], fields: dict[str, tuple[str, Callable[[str], object]]]
              ) -> list[Said]:
    return [Said(fields[k][0], f"PARAMETER {k}", v, fields[k][1](v), n) for n, k, v in items if k in fields]


_DLE_PYTORCH = {
    "batch_size": (BATCH, _int), "arch": (MODEL, str), "world_size": (WORLD, _int), "amp": (PRECISION, _precision),
    "data_backend": (DATA, _real_or_synthetic), "memory_format": (LAYOUT, str),
}
_DLE_TF1 = {
    "batch_size": (BATCH, _int), "arch": (MODEL, str), "amp": (PRECISION, _precision),
    "data_dir": (DATA, lambda v: "synthetic" if v == "None" else "real"),  # main.py: no --data_dir is synthetic
}
_MXNET_DTYPE = {"float16": "amp", "float32": "fp32"}
_MXNET_ARCH = {"resnetv15": "resnet"}  # with num_layers: resnetv15 + 50 is ResNet50 v1.5


def dle_pytorch(text: str) -> list[Said]:
    return _dll_said(dll_parameters(text), _DLE_PYTORCH)


def dle_tf1(text: str) -> list[Said]:
    return _dll_said(dll_parameters(text), _DLE_TF1)


def dle_mxnet(text: str) -> list[Said]:
    items = dll_parameters(text)
    out = _dll_said(items, {"batch_size": (NODE_BATCH, _int), "dtype": (PRECISION, lambda v: _MXNET_DTYPE.get(v, v)),
                            "data_backend": (DATA, _real_or_synthetic),
                            "gpus": (GPUS, lambda v: len(re.findall(r"\d+", v)))})
    arch = {n: v for n, k, v in items if k == "arch"}
    for n, k, v in items:
        if k == "num_layers" and n in arch:
            out.append(Said(MODEL, "PARAMETER arch, num_layers", f"{arch[n]} {v}",
                            f"{_MXNET_ARCH.get(arch[n], arch[n])}{v}", n))
    return out


_PPCLS = re.compile(r"ppcls INFO: ( *)(\S[^:]*?) : ?(.*?)\s*$")


def paddleclas_config(text: str) -> list[tuple[int, str, str]]:
    """(line, dotted key, value) of each key of the config PaddleClas prints (its sections' keys: value '')."""
    out: list[tuple[int, str, str]] = []
    path: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if "ppcls INFO: " not in line:
            continue
        m = _PPCLS.search(line)
        if m is None or len(m.group(1)) % 4:
            continue
        depth = len(m.group(1)) // 4
        if depth > len(path):  # not a key of this config (a step line's 'lr: 0.1, loss: ...' never matches)
            continue
        path[depth:] = [m.group(2)]
        out.append((number, ".".join(path), m.group(3)))
    return out


def paddleclas(text: str) -> list[Said]:
    config = paddleclas_config(text)
    if not config:
        return []
    out = []
    for n, key, v in config:
        if key == "DataLoader.Train.sampler.batch_size":
            out.append(Said(BATCH, key, v, _int(v), n))
        elif key == "Arch.name":
            out.append(Said(MODEL, key, v, v.lower(), n))
    amp = [(n, v) for n, k, v in config if k == "AMP.level"]
    if amp:
        out += [Said(PRECISION, "AMP.level", v, "amp", n) for n, v in amp]
    else:  # an FP32 run's config has no AMP section
        out.append(Said(PRECISION, "AMP", "no AMP section", "fp32", config[0][0]))
    return out


_NAMESPACE = re.compile(r"Namespace\(.*\)")


def namespace(text: str) -> list[tuple[int, str, str]]:
    """(line, name, value as printed) of each argument of every argparse Namespace(...) printed in the log."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        m = _NAMESPACE.search(line) if "Namespace(" in line else None
        try:
            call = ast.parse(m.group(0), mode="eval").body if m else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # cut, or not Python's repr: not read
            continue
        if isinstance(call, ast.Call):
            out += [(number, kw.arg, ast.unparse(kw.value).strip("'\"")) for kw in call.keywords if kw.arg]
    return out


def _namespace_said(text: str, fields: dict[str, tuple[str, Callable[[str], object]]]) -> list[Said]:
    return [Said(fields[k][0], f"Namespace {k}", v, fields[k][1](v), n) for n, k, v in namespace(text) if k in fields]


def paddlenlp_bert(text: str) -> list[Said]:
    return _namespace_said(text, {"batch_size": (BATCH, _int), "use_amp": (PRECISION, _precision),
                                  "model_type": (MODEL, str)})


def dle_bert_pytorch(text: str) -> list[Said]:
    return _namespace_said(text, {"train_batch_size": (BATCH, _int), "fp16": (PRECISION, _precision),
                                  "config_file": (MODEL, lambda v: {"bert_config_base.json": "bert"}.get(v, v))})


def dle_transformer_pytorch(text: str) -> list[Said]:
    return _namespace_said(text, {
        "max_tokens": (BATCH, _int), "amp": (PRECISION, _precision), "distributed_world_size": (WORLD, _int),
        "arch": (MODEL, lambda v: {"transformer_wmt_en_de_big_t2t": "transformer"}.get(v, v))})


_SEG_BATCH = re.compile(r"^batch_size: (\S+)$", re.MULTILINE)
_SEG_BACKBONE = re.compile(r"^model:\n  backbone:\n(?:    .*\n)*?    type: (\S+)$", re.MULTILINE)
_SEG_AMP = re.compile(r"use AMP to train\. AMP level = (\S+)")
_SEG_MODELS = {"HRNet_W18": "hrnetw18"}


def _line_at(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def paddleseg(text: str) -> list[Said]:
    batch = _SEG_BATCH.search(text)
    if batch is None:
        return []
    out = [Said(BATCH, "batch_size", batch[1], _int(batch[1]), _line_at(text, batch.start()))]
    out += [Said(MODEL, "model.backbone.type", m[1], _SEG_MODELS.get(m[1], m[1]), _line_at(text, m.start(1)))
            for m in _SEG_BACKBONE.finditer(text)]
    amp = [Said(PRECISION, "use AMP to train", f"AMP level = {m[1]}", "amp", _line_at(text, m.start()))
           for m in _SEG_AMP.finditer(text)]
    return out + (amp or [Said(PRECISION, "use AMP to train", "no such line", "fp32", out[0].line)])


ECHOES: dict[str, Echo] = {
    "dle-pytorch": Echo("PARAMETER arch, batch_size (per GPU), amp, world_size, data_backend, memory_format",
                        dle_pytorch, (BATCH, MODEL, PRECISION, WORLD, DATA, LAYOUT)),
    # the published 32-GPU logs (tf_gpu32_*) print no PARAMETER line: required on one node only
    "dle-tf1": Echo("PARAMETER arch, batch_size (per GPU), amp, data_dir (None: synthetic)", dle_tf1,
                    (BATCH, MODEL, PRECISION, DATA), required=lambda nodes: nodes == 1),
    "dle-mxnet": Echo("PARAMETER arch + num_layers, batch_size (its node's), dtype (float16: AMP), gpus, "
                      "data_backend", dle_mxnet, (NODE_BATCH, MODEL, PRECISION, GPUS, DATA)),
    "paddleclas": Echo("its config: Arch.name, DataLoader.Train.sampler.batch_size (per GPU), an AMP section "
                       "(AMP runs only); no world size, and its data is always read", paddleclas,
                       (BATCH, MODEL, PRECISION)),
    "plsc": Echo("not read: no real PLSC log is in the fixtures to read an echo from"),
    "fleetx-vgg": Echo("not read: no real FleetX VGG16 log is in the fixtures"),
    # the next four: one node only (Program.one_node_only in kit/config/programs/), and every one-node log prints its echo
    "paddlenlp-bert": Echo("Namespace batch_size (per GPU), use_amp, model_type; no world size", paddlenlp_bert,
                           (BATCH, PRECISION, MODEL)),
    "paddleseg": Echo("its config's batch_size (per GPU) and model.backbone.type, a 'use AMP to train' line (AMP "
                      "runs only); no world size", paddleseg, (BATCH, MODEL, PRECISION)),
    "dle-bert-pytorch": Echo("PARAMETER Config's Namespace train_batch_size (per GPU and step), fp16, config_file; "
                             "its n_gpu is each process's", dle_bert_pytorch, (BATCH, PRECISION, MODEL)),
    "dle-transformer-pytorch": Echo("Namespace max_tokens (per GPU), amp, arch, distributed_world_size",
                                    dle_transformer_pytorch, (BATCH, PRECISION, MODEL, WORLD)),
}


def echo(log_format: str, text: str) -> list[Said]:
    """What the log says about its job in its format's echo; [] where it says nothing (or the format is not read)."""
    spec = ECHOES.get(log_format)
    return spec.reads(text) if spec and spec.reads else []
