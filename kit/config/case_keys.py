"""What a suite's case may say: its keys with their types, defaults, choices and bounds, and the models and modes
they range over (the harness's catalogue and contract table, scripts/harness/, read through kit.core.catalogue)."""

from __future__ import annotations

from typing import Any

from kit.config import programs
from kit.core.catalogue import contract, harness

FRAMEWORKS = ("paddle", "torch", "tensorflow", "mxnet")
HARNESS_FRAMEWORKS = ("paddle", "torch")
# the harness's models and what each supports: its catalogue (scripts/harness/catalogue.py), read here
MODELS = harness.NAMES
NLP_MODELS = harness.NLP  # seed 003: timed over whole epochs of a variable-length corpus
IMAGENET_MODELS = harness.IMAGENET  # the harness reads ImageNet lists for these
SEED003_MODELS = harness.SEED003
HARNESS_PRECISIONS = ("fp32", "tf32", "amp", "bf16")  # exact math modes (scripts/harness/train.py sets them)
# and the published programs' own modes (FleetX's auto-parallel, seed 000): programs.check says which takes which
PRECISIONS = HARNESS_PRECISIONS + tuple(sorted({m for i in programs.IMPLS.values() for m in i.modes}))
LAYOUTS = ("nchw", "nhwc")
MODES = ("eager", "compiled")
NHWC_MODELS = harness.NHWC  # the harness builds these channels-last; seed 003's are NCHW only
AUTOCAST = ("amp", "bf16")
COMPILABLE = tuple(m.name for m in harness.CATALOGUE if m.compilable)  # fixed shapes, one network per step
DATA_MODES = ("synthetic", "imagenet")
LOADERS = ("cpu", "gpu", "dali")  # the harness's JPEG pipelines (scripts/harness/loader_*.py)
IMPLS = ("harness", "reference")
HARDWARE = ("cpu", "gpu")

# key -> (types, default); a None default means required
CASE_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {
    "framework": ((str,), None),
    "model": ((str,), None),
    "batch_size": ((int,), None),
    "precision": ((str,), "fp32"),
    "nodes": ((int,), 1),
    "gpus_per_node": ((int,), 1),
    "warmup_steps": ((int,), 20),
    "measure_steps": ((int,), 100),
    "repeats": ((int,), 5),
    "data": ((str,), "synthetic"),
    "image_size": ((int,), None),
    "num_classes": ((int,), None),
    "layout": ((str,), None),  # None: nhwc for NHWC_MODELS under amp/bf16 on a GPU suite, else nchw (harness only)
    "mode": ((str,), "eager"),  # harness only
    "loader": ((str,), None),  # harness on ImageNet only; None: default_loader (gpu on a GPU suite, else cpu)
    "impl": ((str,), None),
    "timeout_s": ((int, float), 1800),
    "image": ((str,), None),  # a docker/pins.yaml image key (paddle/seed000) or generation (seed001); None: the default
    "size": ((str,), "full"),  # seed 003's models: the published configuration (full) or the harness's tiny one
    "seq_len": ((int,), None),  # bert / transformer: max sequence length (None: the harness's default)
    "corpus_size": ((int,), None),  # bert / transformer: sequences / sentence pairs per epoch (None: its default)
    "measure_epochs": ((int,), 1),  # bert / transformer: whole epochs measured
}
SEED003_ONLY = ("size", "seq_len", "corpus_size", "measure_epochs")
CHOICES = {"framework": FRAMEWORKS, "model": MODELS, "precision": PRECISIONS, "data": DATA_MODES, "impl": IMPLS,
           "size": ("full", "tiny"), "layout": LAYOUTS, "mode": MODES, "loader": LOADERS}
# a contract key (scripts/harness/contract.py) with no meaning to the suite beyond its flag: its kind, train.py's
# default and choices; the Case keeps it in `extra`
CONTRACT_ONLY = tuple(st.key for st in contract.SETTINGS if st.key not in CASE_KEYS)
CASE_KEYS |= {st.key: ((st.kind,), st.default) for st in contract.SETTINGS if st.key in CONTRACT_ONLY}
CHOICES |= {st.key: st.choices for st in contract.SETTINGS if st.key in CONTRACT_ONLY and st.choices}
HARNESS_ONLY = ("layout", "mode", "loader")
MINIMUM = {"batch_size": 1, "nodes": 1, "gpus_per_node": 1, "warmup_steps": 0, "measure_steps": 1, "repeats": 1,
           "image_size": 8, "num_classes": 1, "timeout_s": 1, "seq_len": 8, "corpus_size": 1, "measure_epochs": 1}
MAXIMUM = {"batch_size": 65536, "nodes": 1024, "gpus_per_node": 256, "warmup_steps": 1_000_000,
           "measure_steps": 10_000_000, "repeats": 1000, "image_size": 4096, "num_classes": 10_000_000,
           "timeout_s": 7 * 24 * 3600, "seq_len": 8192, "corpus_size": 100_000_000, "measure_epochs": 1000}
MAX_RUNS = 10_000  # cases x repeats of one suite
# the NLP models have neither (0), CycleGAN no classes (0)
DEFAULT_IMAGE_SIZE = {m.name: m.image_size for m in harness.CATALOGUE}
DEFAULT_NUM_CLASSES = {m.name: m.num_classes for m in harness.CATALOGUE}
SELECTOR_KEYS = ("framework", "model", "precision", "batch_size", "nodes", "gpus_per_node", "impl", "layout", "mode",
                 "loader")
REFERENCE_KEYS = ("value", "lower", "upper", "unit", "source", "math", "batch", "container", "date")


def default_loader(hardware: str) -> str:
    """JPEGs decoded where the model trains: nvJPEG on a GPU suite, Pillow in CPU threads elsewhere."""
    return "gpu" if hardware == "gpu" else "cpu"


def default_layout(model: str, precision: str, hardware: str) -> str:
    """What each publisher runs: channels-last for the convnets under autocast on GPUs (DLE, PaddleClas)."""
    return "nhwc" if hardware == "gpu" and precision in AUTOCAST and model in NHWC_MODELS else "nchw"

