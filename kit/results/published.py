"""PURE: the published figures the kit holds, as neighbours a run's case can stand beside.

    figures = published_figures()          # Lambda's re-derived claims, MLPerf v4.0 per GPU, in one list
    nearest(figures, "resnet50", "NVIDIA H200", "amp", gpus=1)   # same GPU model first, then its generation

Each figure names the raw log it re-derives from (kit/claims/*.yaml, checked by `kit crosscheck`) and, where that
log echoes its parameters (kit.results.parsers.echo), the settings it ran with: per-GPU batch, precision, layout,
data. A suite's own references (its `references:` entries) are added by the caller: they are a publisher's number
with the source the suite gives, not a log the kit re-derives here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from kit.core.inputs import read_input
from kit.results.crosscheck import load_claims
from kit.results.parsers.echo import BATCH, DATA, LAYOUT, WORLD, echo

CLAIMS = Path(__file__).resolve().parents[1] / "claims"
LAMBDA = CLAIMS / "lambda.yaml"
MLPERF = CLAIMS / "mlperf-v4.0.yaml"
# Lambda's model folders (PyTorch_<model>_<precision>) that are a model of the kit; its BERT rows are SQuAD
# fine-tuning, not the kit's pre-training, so they are no neighbours
LAMBDA_MODELS = {"resnet50": "resnet50"}
LAMBDA_PRECISIONS = {"FP32": "fp32", "FP16": "amp", "AMP": "amp"}
_LAMBDA_RUN = re.compile(r"results/(?P<system>[^/]+)/PyTorch_(?P<model>[A-Za-z0-9_]+?)_(?P<prec>FP32|FP16|AMP)/")
_LAMBDA_GPU = re.compile(r"(?P<family>[AHV]\d00)_(?P<memory>\d+GB)_(?P<form>PCIe5?|SXM\d)")
LAMBDA_REPO = "https://github.com/lambdal/deeplearning-benchmark/blob/aa5addb6a53675a649a80036dad548f1c27cbcc4"
MLPERF_REPO = "https://github.com/mlcommons/training_results_v4.0/blob/6fe9543"
_MLPERF_LOG = re.compile(r"(?P<system>[a-z0-9]+_ngc[\d.]+_mxnet)_resnet_(?P<result>result_\d+\.txt)")
_MLPERF_GPU = {"h200": ("H200", "SXM", "H200-SXM5-141GB"), "eos": ("H100", "SXM", "H100-SXM5-80GB (Eos)")}
GENERATION = {"V100": "Volta", "A100": "Ampere", "H100": "Hopper", "H200": "Hopper", "B200": "Blackwell"}
# each SKU's default power limit (W), the figure a card's own limit is read against
SKU_POWER_W = {("H200", "SXM"): 700, ("H100", "SXM"): 700, ("H100", "PCIe"): 350, ("A100", "SXM"): 400,
               ("A100", "PCIe"): 300, ("V100", "SXM"): 300, ("V100", "PCIe"): 250}


@dataclass(frozen=True)
class Gpu:
    """A GPU model as the kit compares them: its family (H100), its form (SXM or PCIe) and how it was named."""

    family: str | None
    form: str
    name: str

    @property
    def generation(self) -> str | None:
        return GENERATION.get(self.family or "")

    @property
    def sku_power_w(self) -> int | None:
        return SKU_POWER_W.get((self.family or "", self.form))

    def same_model(self, other: Gpu) -> bool:
        return self.family is not None and (self.family, self.form) == (other.family, other.form)


def gpu_of(name: str | None) -> Gpu:
    """'NVIDIA H100 80GB HBM3' -> H100 SXM; 'NVIDIA H100 PCIe' -> H100 PCIe (nvidia-smi names the PCIe cards so)."""
    text = name or ""
    family = re.search(r"\b([ABHV]\d{2,3})\b", text.replace("-", " ").replace("_", " "))
    return Gpu(family[1] if family else None, "PCIe" if "pcie" in text.lower() else "SXM", text or "an unnamed GPU")


@dataclass(frozen=True)
class Published:
    """One published figure: who, on what, with which settings, its value for the whole job and per GPU."""

    publisher: str
    system: str
    gpu: Gpu
    gpus: int
    model: str
    precision: str  # as the kit names it: fp32 (published FP32), amp (published FP16/AMP)
    value: float  # the job's, in unit
    unit: str
    framework: str
    log: str | None  # the raw log it re-derives from (None: a number without a log the kit holds)
    claims: str | None  # the claims file that re-derives it (kit crosscheck)
    batch_per_gpu: int | None = None
    settings: dict = field(default_factory=dict)  # what its log echoes: layout, data, ...
    note: str = ""

    @property
    def per_gpu(self) -> float:
        return self.value / self.gpus

    @property
    def url(self) -> str | None:
        """Where the raw log behind the figure is published (the repository at the commit the kit copied it from)."""
        if not self.log:
            return None
        log = Path(self.log)
        if "lambda" in log.parts:
            rel = log.parts[log.parts.index("lambda") + 1:]
            return f"{LAMBDA_REPO}/{'/'.join(rel)}"
        if self.publisher.startswith("MLPerf") and (run := _MLPERF_LOG.fullmatch(log.name)):
            return f"{MLPERF_REPO}/NVIDIA/results/{run['system']}/resnet/{run['result']}"
        return None


def _lambda_entry(entry, path: Path) -> Published | None:
    run = _LAMBDA_RUN.search(entry.get("file") or "")
    if not run or run["model"] not in LAMBDA_MODELS:
        return None
    sku = _LAMBDA_GPU.search(run["system"])
    family, form = (sku["family"], "PCIe" if sku["form"].startswith("PCIe") else "SXM") if sku else (None, "SXM")
    gpus = int(entry.get("gpus") or 1)
    batch = entry.get("batch")
    log = (path.parent / entry["file"]).resolve()
    said = {s.field: s.value for s in _echo_of(log, entry.get("format") or "")}
    return Published(
        "Lambda", run["system"], Gpu(family, form, run["system"]), gpus, LAMBDA_MODELS[run["model"]],
        LAMBDA_PRECISIONS[run["prec"]], float(entry["published"]), "images/s", "PyTorch (NVIDIA DLE)", str(log),
        str(path), batch // gpus if isinstance(batch, int) else said.get(BATCH),
        {k: said[k] for k in (LAYOUT, DATA, WORLD) if k in said},
        f"published {run['prec']}: train.compute_ips of DLE's Summary line, the run's mean with its warm-up")


def _echo_of(log: Path, log_format: str) -> list:
    try:
        return echo(log_format, read_input(log, "published log").decode(errors="replace"))
    except (OSError, ValueError):
        return []


def _mlperf_entry(entry, path: Path) -> Published:
    name = Path(entry["file"]).name
    family, form, system = _MLPERF_GPU[name.split("_")[0]]
    gpus = int(entry["gpus"])
    return Published(
        "MLPerf Training v4.0 (NVIDIA)", system, Gpu(family, form, system), gpus, "resnet50", "amp",
        float(entry["published"]), "images/s", "MXNet (NGC 24.04)", str((path.parent / entry["file"]).resolve()),
        str(path), int(entry["batch"]) // gpus, {LAYOUT: "nhwc", DATA: "real"},
        "MLPerf publishes a time to train: this is the median epoch throughput its log records (real ImageNet "
        "through DALI)")


@functools.lru_cache(maxsize=4)
def published_figures(lambda_claims: Path = LAMBDA, mlperf_claims: Path = MLPERF) -> tuple[Published, ...]:
    """Every published figure the kit re-derives that is a model of the kit's (read once a process: a bench writes
    its report after every run)."""
    out: list[Published] = []
    for path, read in ((lambda_claims, _lambda_entry), (mlperf_claims, _mlperf_entry)):
        _, _, logs = load_claims(path)
        out += [p for entry in logs if (p := read(entry, path)) is not None]
    return tuple(out)


def nearest(figures: tuple[Published, ...] | list[Published], model: str, gpu: Gpu, precision: str, gpus: int,
            count: int = 3) -> list[Published]:
    """The COUNT figures of MODEL nearest a case: the same GPU model first, then the same generation, then any;
    within that the same precision family, then the same number of GPUs, then the larger figure (a publisher's
    best). MLPerf's figure of the same GPU model is always kept (a last row beyond COUNT where it is not among)."""
    family = "amp" if precision in ("amp", "bf16") else "fp32"  # tf32 is FP32 storage with TF32 math

    def rank(p: Published) -> tuple:
        return (not p.gpu.same_model(gpu), p.gpu.generation != gpu.generation or gpu.generation is None,
                p.precision != family, p.gpus != gpus, -p.per_gpu)

    same = sorted((p for p in figures if p.model == model), key=rank)
    chosen = same[:count]
    mlperf = [p for p in same if p.publisher.startswith("MLPerf") and p.gpu.same_model(gpu) and p not in chosen]
    return chosen + mlperf[:1]
