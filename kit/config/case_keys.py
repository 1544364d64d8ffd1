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
HARNESS_PRECISIONS = tuple(contract.MATH)  # exact math modes (contract.MATH; scripts/harness/train.py sets them)
# and the published programs' own modes (FleetX's auto-parallel, seed 000): programs.check says which takes which
PRECISIONS = HARNESS_PRECISIONS + tuple(sorted({m for i in programs.IMPLS.values() for m in i.modes}))
LAYOUTS = contract.BY_KEY["layout"].choices
MODES = contract.BY_KEY["mode"].choices
NHWC_MODELS = harness.NHWC  # the harness builds these channels-last; seed 003's are NCHW only
AUTOCAST = tuple(p for p, m in contract.MATH.items() if m.autocast)
COMPILABLE = tuple(m.name for m in harness.CATALOGUE if m.compilable)  # fixed shapes, one network per step
DATA_MODES = ("synthetic", "imagenet")
LOADERS = contract.BY_KEY["loader"].choices  # the harness's JPEG pipelines (scripts/harness/loader_*.py)
IMPLS = ("harness", "reference")
HARDWARE = ("cpu", "gpu")

# The case keys: the contract's rows (scripts/harness/contract.py: kind, default, choices, bounds, ...) and the kit's
# own, which train.py never sees (where a case runs, how often, by what). key -> (types, default); None: required, or
# resolved per case (contract.MODEL, contract.SUITE)
KIT_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {
    "nodes": ((int,), 1),
    "gpus_per_node": ((int,), 1),
    "repeats": ((int,), 5),
    "impl": ((str,), None),
    "timeout_s": ((int, float), 1800),
    "image": ((str,), None),  # a docker/pins.yaml image key (paddle/seed000) or generation (seed001); None: the default
}
# the order a case's list values expand in (the first varies slowest) and its dict lists its keys; a contract key not
# named here follows in the contract's order
ORDER = ("framework", "model", "batch_size", "precision", "nodes", "gpus_per_node", "warmup_steps", "measure_steps",
         "repeats", "data", "image_size", "num_classes", "layout", "mode", "loader", "impl", "timeout_s", "image",
         "size", "seq_len", "corpus_size", "measure_epochs")
_ROWS = {st.key: ((st.kind,), None if st.resolve else st.default) for st in contract.SETTINGS} | KIT_KEYS
CASE_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {k: _ROWS[k] for k in ORDER} | _ROWS
REQUIRED = tuple(st.key for st in contract.SETTINGS if st.required)
RESOLVED_BY_MODEL = tuple(st.key for st in contract.SETTINGS if st.resolve == contract.MODEL)  # catalogue's row
_SEED003_SCOPES = (contract.NLP, contract.SEED003)  # the keys only seed 003's models (or its NLP ones) take
SEED003_ONLY = tuple(k for k in CASE_KEYS if k in contract.BY_KEY and contract.BY_KEY[k].scope in _SEED003_SCOPES)
# the suite's choices where the contract leaves them open (any framework, model or data train.py could be given) or
# wider (the published programs' precisions), then the contract's
CHOICES = {"framework": FRAMEWORKS, "model": MODELS, "precision": PRECISIONS, "data": DATA_MODES, "impl": IMPLS}
CHOICES |= {st.key: st.choices for st in contract.SETTINGS if st.choices and st.key not in CHOICES}
HARNESS_ONLY = ("layout", "mode", "loader")
MINIMUM = {"nodes": 1, "gpus_per_node": 1, "repeats": 1, "timeout_s": 1}
MAXIMUM = {"nodes": 1024, "gpus_per_node": 256, "repeats": 1000, "timeout_s": 7 * 24 * 3600}
MINIMUM |= {st.key: st.minimum for st in contract.SETTINGS if st.minimum is not None}
MAXIMUM |= {st.key: st.maximum for st in contract.SETTINGS if st.maximum is not None}
MAX_RUNS = 10_000  # cases x repeats of one suite
# the fewest measured steps a harness case of an image model may declare, and the fewest warm-up steps any harness case
# may: kit verify's measured_steps and warmup_skipped rules ask as many (a test holds the newest rule set to them)
MIN_MEASURED_STEPS = 10
MIN_WARMUP_STEPS = 1
# the NLP models have neither (0), CycleGAN no classes (0)
DEFAULT_IMAGE_SIZE = {m.name: m.image_size for m in harness.CATALOGUE}
DEFAULT_NUM_CLASSES = {m.name: m.num_classes for m in harness.CATALOGUE}
SELECTOR_KEYS = tuple(k for k in CASE_KEYS if k in ("nodes", "gpus_per_node", "impl")
                      or k in contract.BY_KEY and contract.BY_KEY[k].selects)
REFERENCE_KEYS = ("value", "lower", "upper", "unit", "source", "math", "batch", "container", "date")


def default_loader(hardware: str) -> str:
    """JPEGs decoded where the model trains: nvJPEG on a GPU suite, Pillow in CPU threads elsewhere."""
    return "gpu" if hardware == "gpu" else "cpu"


def default_layout(model: str, precision: str, hardware: str) -> str:
    """What each publisher runs: channels-last for the convnets under autocast on GPUs (DLE, PaddleClas)."""
    return "nhwc" if hardware == "gpu" and precision in AUTOCAST and model in NHWC_MODELS else "nchw"

