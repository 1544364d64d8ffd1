"""Benchmark suites: kit/suites/<name>.yaml -> validated, expanded Cases (errors name file:line:key).

A suite file:
    schema_version: 1
    name: v100
    description: ...
    hardware: gpu | cpu
    defaults: {warmup_steps: 20, measure_steps: 100, repeats: 5, ...}   # any case key
    cases:
      - {framework: [paddle, torch], model: resnet50, precision: [fp32, amp], batch_size: 256,
         gpus_per_node: [1, 8], nodes: 1, impl: harness,
         references: [{gpus_per_node: 1, precision: fp32, framework: paddle,
                       value: 393.561, lower: -0.05, upper: 0.05, unit: samples/s, source: ...}]}
`image:` (in defaults or a case) names the docker/pins.yaml image the case runs in: a key (paddle/seed000) or a
generation / seed environment (seed001: the framework's image of it); none: the framework's image of the suite's
generation (kit.images.spec.Pins.for_case). An unknown image is an error at file:line:image.
A list value is expanded (the cartesian product of every list-valued key). A reference is
(value, lower, upper, unit) as in ReFrame: lower/upper are relative bounds (-0.05 = 5 % below),
null for unbounded; its other keys select the expanded cases it applies to.

impl: harness runs the kit's own harness (paddle, torch); impl: reference runs the program the seed's
table came from, with the publisher's flags (kit.config.programs; launched by kit.run.reference: PaddleClas,
FleetX VGG16, PLSC ArcFace, NGC DeepLearningExamples PyTorch/TensorFlow 1/MXNet).
Default: harness for paddle/torch, else reference.
A reference case logs under logs/<implementation>/... (ngc-pytorch, paddleclas, ...) and runs the
publisher's own step counts: warmup_steps, measure_steps, image_size, num_classes, layout and mode shape
harness cases only. `data` of a reference case: imagenet (its default: what the publisher ran on) reads
<host data_dir>/<the program's format>/ (paddle, folder, tfrecord, recordio: data_prep/); synthetic is the
program's own synthetic-data mode, where it has one (kit.config.programs).

Precision says what math ran (the harness sets it and logs what the framework had): fp32 (no TF32 anywhere), tf32
(TF32 allowed), amp (FP16 autocast + loss scaling), bf16 (BF16 autocast, no scaler). layout: nchw | nhwc, default
nhwc for the convnets under amp/bf16 on a GPU suite (as NVIDIA DLE and PaddleClas run them), nchw otherwise;
mode: eager | compiled (torch.compile / paddle.jit.to_static). A case's name carries the precision and, where they
differ from nchw / eager, its layout and mode (`amp-nhwc`, `amp-nhwc-compiled`): the tag of its log files.
A reference's `math` says what its publisher's framework really ran when that differs from the published name
(a seed's "FP32" on A100: tf32, the frameworks' default there).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kit.config import programs
from kit.config.imagekeys import image_key, pinned_keys
from kit.core.catalogue import contract, harness
from kit.core.files import SCHEMA_VERSIONS
from kit.core.layout import case_key, case_name, run_log_path, variant_tag
from kit.core.yamlio import ConfigError, LineDict, kind_name, load_yaml, optional, require

SCHEMA_VERSION = SCHEMA_VERSIONS["suite"]
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"  # the data: kit/suites/*.yaml
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


def same_unit(unit: str) -> str:
    """A throughput unit by what it counts: images/s is samples/s (an image is the sample of an image model)."""
    return {"images/s": "samples/s", "img/s": "samples/s"}.get(unit, unit)


@dataclass(frozen=True)
class Reference:
    value: float
    lower: float | None
    upper: float | None
    unit: str
    source: str = ""
    math: str | None = None  # what the publisher's framework ran when it differs from the published precision
    batch: int | None = None  # the publisher's per-GPU batch, where it differs from the case's
    container: str = ""  # the publisher's software: container image or framework release
    date: str = ""  # of the publisher's log or table (YYYY-MM-DD)

    def bounds(self) -> tuple[float | None, float | None]:
        low = None if self.lower is None else self.value * (1 + self.lower)
        high = None if self.upper is None else self.value * (1 + self.upper)
        return low, high

    @property
    def bounded(self) -> bool:
        """False for a figure shown beside the median only (both bounds null: nothing to check, as in ReFrame)."""
        return self.lower is not None or self.upper is not None

    def measures(self, unit: str) -> bool:
        """Whether a median in `unit` compares with this figure."""
        return same_unit(self.unit) == same_unit(unit)

    def holds(self, measured: float) -> bool:
        low, high = self.bounds()
        return (low is None or measured >= low) and (high is None or measured <= high)

    def to_dict(self) -> dict:
        data = {"value": self.value, "lower": self.lower, "upper": self.upper, "unit": self.unit, "source": self.source}
        extra = {"math": self.math, "batch": self.batch, "container": self.container, "date": self.date}
        return data | {k: v for k, v in extra.items() if v}

    def described(self) -> str:
        """The source with what differs from the case: 'Lambda ... (batch 1280, NGC 23.10, 2024-02-05)'."""
        said = [f"batch {self.batch}" if self.batch else "", self.container, self.date]
        said = [s for s in said if s]
        return self.source + (f" ({', '.join(said)})" if said else "")


@dataclass(frozen=True)
class Case:
    framework: str
    model: str
    batch_size: int
    precision: str
    nodes: int
    gpus_per_node: int
    warmup_steps: int
    measure_steps: int
    repeats: int
    data: str
    image_size: int
    num_classes: int
    layout: str | None  # nchw | nhwc; None: a published program's own
    mode: str | None  # eager | compiled; None: a published program's own
    impl: str  # harness | reference
    timeout_s: float
    line: int = 0
    references: tuple[Reference, ...] = ()  # at most one bounded (checked); the others shown beside the median
    loader: str | None = None  # cpu | gpu | dali: the harness's JPEG pipeline (data: imagenet); None: none or its own
    loader_named: bool = False  # a loader other than the suite's default: the case's names carry it
    image: str | None = None  # the pins image it names (`image:`); None: the default (Pins.for_case)
    size: str = "full"  # seed 003's models: full (published) or tiny
    seq_len: int | None = None  # bert / transformer
    corpus_size: int | None = None  # bert / transformer
    measure_epochs: int = 1  # bert / transformer
    extra: tuple[tuple[str, Any], ...] = ()  # the CONTRACT_ONLY keys' values

    def __getattr__(self, name: str) -> Any:  # a CONTRACT_ONLY key, as an attribute like the others
        for key, value in object.__getattribute__(self, "extra"):
            if key == name:
                return value
        raise AttributeError(name)

    @property
    def case_dir(self) -> str:
        return case_name(self.nodes, self.gpus_per_node)

    @property
    def channels_last(self) -> bool:
        return self.layout == "nhwc"

    @property
    def tag(self) -> str:
        """The precision segment of the case's key and log names: precision[-nhwc][-compiled][-<loader>load]."""
        return variant_tag(self.precision, self.layout, self.mode, self.loader if self.loader_named else None)

    @property
    def reference(self) -> Reference | None:
        """The bounded reference the median is checked against, else the first shown one."""
        bounded = [r for r in self.references if r.bounded]
        return (bounded or list(self.references) or [None])[0]

    @property
    def runner(self) -> str:
        """Old name of impl (harness | reference), kept for callers not yet migrated."""
        return self.impl

    @property
    def log_framework(self) -> str:
        """The framework folder of the logs: the framework, or the reference implementation's name."""
        if self.impl == "harness":
            return self.framework
        return programs.implementation(self.framework, self.model).name

    def ref_job(self) -> programs.RefJob:
        return programs.RefJob(self.framework, self.model, self.precision, self.batch_size, self.gpus_per_node,
                                self.nodes, self.data)

    @property
    def processes(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.processes

    @property
    def key(self) -> str:
        return case_key(self.log_framework, self.model, self.batch_size, self.case_dir, self.tag)

    def log_path(self, repeat: int) -> Path:
        """Relative to runs/<id>/logs/; repeats count from 1."""
        return run_log_path(self.log_framework, self.model, self.batch_size, self.nodes, self.gpus_per_node,
                            self.tag, repeat)

    def to_dict(self) -> dict:
        data = {k: getattr(self, k) for k in CASE_KEYS
                if (k != "image" or self.image) and (k not in SEED003_ONLY or getattr(self, k) != CASE_KEYS[k][1])}
        data["reference"] = self.reference.to_dict() if self.reference else None
        if len(self.references) > 1:
            data["references"] = [r.to_dict() for r in self.references]
        data["implementation"] = self.log_framework if self.impl == "reference" else None
        return data


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    description: str
    hardware: str
    cases: list[Case] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "description": self.description,
                "hardware": self.hardware, "cases": [c.to_dict() for c in self.cases]}


def default_loader(hardware: str) -> str:
    """JPEGs decoded where the model trains: nvJPEG on a GPU suite, Pillow in CPU threads elsewhere."""
    return "gpu" if hardware == "gpu" else "cpu"


def default_layout(model: str, precision: str, hardware: str) -> str:
    """What each publisher runs: channels-last for the convnets under autocast on GPUs (DLE, PaddleClas)."""
    return "nhwc" if hardware == "gpu" and precision in AUTOCAST and model in NHWC_MODELS else "nchw"


def available() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


def suite_path(name_or_path: str | Path) -> Path:
    """A bare name is a built-in suite (kit/suites/<name>.yaml); anything else is a file path."""
    text = str(name_or_path)
    if "/" not in text and not text.endswith((".yaml", ".yml")):
        path = SUITES_DIR / f"{text}.yaml"
        if not path.is_file():
            raise ConfigError(text, f"no built-in suite of that name; known: {', '.join(available())} (or give a path)")
        return path
    return Path(text)


def load_suite(name_or_path: str | Path) -> Suite:
    path = suite_path(name_or_path)
    data = load_yaml(path)
    if not isinstance(data, LineDict):
        raise ConfigError(path, "top level must be a mapping (schema_version, name, cases, ...)", 1)
    known = {"schema_version", "name", "description", "hardware", "defaults", "cases"}
    _reject_unknown(data, known, path)
    version = require(data, "schema_version", int, path)
    if version != SCHEMA_VERSION:
        raise ConfigError(path, f"unsupported schema_version {version} (this kit reads {SCHEMA_VERSION})",
                          data.line_of("schema_version"), "schema_version")
    name = require(data, "name", str, path)
    if not PLAIN_NAME.fullmatch(name):
        raise ConfigError(path, f"{name!r}: a suite name names run directories, so it must be a plain name "
                          "(letters, digits, '.', '_', '-'; not starting with '.' or '-')", data.line_of("name"),
                          "name")
    hardware = optional(data, "hardware", str, path, "gpu")
    if hardware not in HARDWARE:
        raise ConfigError(path, f"must be one of {', '.join(HARDWARE)}", data.line_of("hardware"), "hardware")
    defaults = optional(data, "defaults", dict, path, LineDict())
    _reject_unknown(defaults, set(CASE_KEYS) - {"framework", "model"}, path)
    entries = require(data, "cases", list, path)
    if not entries:
        raise ConfigError(path, "no cases", data.line_of("cases"), "cases")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    runs = 0
    for i, entry in enumerate(entries):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, f"case {i + 1} must be a mapping", data.line_of("cases"), "cases")
        for case in _expand(entry, defaults, path, hardware):
            runs += case.repeats
            if runs > MAX_RUNS:
                raise ConfigError(path, f"more than {MAX_RUNS} runs (cases x repeats) by this entry", entry.line,
                                  "cases")
            if case.key in seen:
                raise ConfigError(path, f"case {case.key} also comes from the entry at line {seen[case.key]}",
                                  entry.line)
            seen[case.key] = entry.line
            cases.append(case)
    return Suite(name, path, optional(data, "description", str, path, ""), hardware, cases)


RENAMED = {"channels_last": "layout: nhwc | nchw"}


def _reject_unknown(entry: LineDict, known: set[str], path: Path) -> None:
    for key in entry:
        if key in RENAMED and key not in known:
            raise ConfigError(path, f"renamed: use {RENAMED[key]}", entry.line_of(key), str(key))
        if key not in known:
            raise ConfigError(path, f"unknown key; known: {', '.join(sorted(known))}", entry.line_of(key), str(key))


def _values(entry: LineDict, key: str, path: Path) -> list:
    """The entry's value(s) for key, each checked for type, choices and minimum."""
    types, _ = CASE_KEYS[key]
    raw = entry[key]
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise ConfigError(path, "empty list", entry.line_of(key), key)
    for v in values:
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            raise ConfigError(path, f"expected {kind_name(types)} (or a list of them), got {v!r}", entry.line_of(key),
                              key)
        if key in CHOICES and v not in CHOICES[key]:
            raise ConfigError(path, f"{v!r} is not one of {', '.join(CHOICES[key])}", entry.line_of(key), key)
        if key in MINIMUM and not MINIMUM[key] <= v <= MAXIMUM[key]:  # NaN fails both
            raise ConfigError(path, f"must be >= {MINIMUM[key]} and <= {MAXIMUM[key]}, got {v}", entry.line_of(key),
                              key)
    if len(set(values)) != len(values):
        raise ConfigError(path, "a value is listed twice", entry.line_of(key), key)
    return values


def _expand(entry: LineDict, defaults: LineDict, path: Path, hardware: str = "gpu") -> list[Case]:
    _reject_unknown(entry, set(CASE_KEYS) | {"references"}, path)
    merged: dict[str, list] = {}
    for key, (_, default) in CASE_KEYS.items():
        if key in entry:
            merged[key] = _values(entry, key, path)
        elif key in defaults:
            merged[key] = _values(defaults, key, path)
        elif default is not None:
            merged[key] = [default]
        elif key in ("framework", "model", "batch_size"):
            raise ConfigError(path, "missing required key", entry.line, key)
        else:
            merged[key] = [None]
    combos = math.prod(len(v) for v in merged.values())
    if combos > MAX_RUNS:
        raise ConfigError(path, f"this entry's lists expand to {combos} cases, more than {MAX_RUNS}", entry.line,
                          "cases")
    cases = []
    for combo in itertools.product(*merged.values()):
        values = dict(zip(merged, combo, strict=True))
        values["image_size"] = values["image_size"] or DEFAULT_IMAGE_SIZE[values["model"]]
        values["num_classes"] = values["num_classes"] or DEFAULT_NUM_CLASSES[values["model"]]
        impl = values["impl"] or ("harness" if values["framework"] in HARNESS_FRAMEWORKS else "reference")
        where = "impl" if "impl" in entry else "framework"
        if impl == "harness" and values["framework"] not in HARNESS_FRAMEWORKS:
            raise ConfigError(path, f"the kit's harness runs {', '.join(HARNESS_FRAMEWORKS)}, not "
                              f"{values['framework']} (use impl: reference)", entry.line_of(where), where)
        values["impl"] = impl
        if impl == "harness" and values["precision"] not in HARNESS_PRECISIONS:
            owners = ", ".join(i.short for i in programs.IMPLS.values() if values["precision"] in i.modes)
            raise ConfigError(path, f"precision {values['precision']} is a published program's mode ({owners}); "
                              f"the harness runs {', '.join(HARNESS_PRECISIONS)}",
                              entry.line_of("precision") or entry.line, "precision")
        _check_model_keys(values, entry, path)
        _resolve_layout_mode(values, entry, defaults, path, hardware)
        if impl == "reference" and "data" not in entry and "data" not in defaults:
            values["data"] = programs.default_data(values["framework"], values["model"])
        values["timeout_s"] = float(values["timeout_s"])
        if values["image"] is not None:
            _check_image(values["framework"], values["image"], entry if "image" in entry else defaults, path)
        extra = tuple((key, values.pop(key)) for key in CONTRACT_ONLY)
        case = Case(**values, extra=extra, line=entry.line)
        if impl == "reference":
            try:
                programs.check(case.ref_job())
            except programs.ReferenceError as exc:
                raise ConfigError(path, str(exc), entry.line_of(where), where) from None
        cases.append(case)
    return _attach_references(entry, cases, path)


def _check_image(framework: str, image: str, entry: LineDict, path: Path) -> None:
    """`image:` must name an image of docker/pins.yaml that the case's framework runs in (kit.images.spec)."""
    try:
        image_key(framework, image, pinned_keys())
    except KeyError as exc:
        raise ConfigError(path, str(exc.args[0]), entry.line_of("image"), "image") from None


def _check_model_keys(values: dict, entry: LineDict, path: Path) -> None:
    """Keys that only some models take (seed 003's size and NLP corpus keys, ImageNet data) on another model."""
    model = values["model"]
    if values["impl"] == "harness" and values["data"] == "imagenet" and model not in IMAGENET_MODELS:
        raise ConfigError(path, f"the harness reads ImageNet for {', '.join(IMAGENET_MODELS)} only, not {model}",
                          entry.line_of("data") or entry.line, "data")
    for key in SEED003_ONLY:
        takes = model in NLP_MODELS if key in ("seq_len", "corpus_size", "measure_epochs") else model in SEED003_MODELS
        if takes or values[key] == CASE_KEYS[key][1]:
            continue
        raise ConfigError(path, f"{key} does not apply to {model}", entry.line_of(key) or entry.line, key)


def _resolve_layout_mode(values: dict, entry: LineDict, defaults: LineDict, path: Path, hardware: str) -> None:
    """Harness cases: the layout default (default_layout) and the models that can take nhwc; published programs
    run their own (None), so a layout or mode given for one is an error."""
    if values["impl"] == "reference":
        for key in HARNESS_ONLY:
            if key in entry:
                raise ConfigError(path, f"{key} is the published program's own (impl: reference); it applies to "
                                  "harness cases only", entry.line_of(key), key)
            values[key] = None
        return
    if values["mode"] == "compiled" and values["model"] not in COMPILABLE:
        where = entry if "mode" in entry else defaults
        raise ConfigError(path, f"mode compiled: {values['model']} runs eager only (compiled: "
                          f"{', '.join(COMPILABLE)})", where.line_of("mode") or entry.line, "mode")
    if values["model"] in NLP_MODELS:  # token sequences: no image layout
        if "layout" in entry:
            raise ConfigError(path, f"layout does not apply to {values['model']}", entry.line_of("layout"), "layout")
        values["layout"] = None
        return
    _resolve_loader(values, entry, path, hardware)
    values["layout"] = values["layout"] or default_layout(values["model"], values["precision"], hardware)
    if values["layout"] == "nhwc" and values["model"] not in NHWC_MODELS:
        where = entry if "layout" in entry else defaults
        raise ConfigError(path, f"layout nhwc: the harness builds {values['model']} NCHW only (nhwc: "
                          f"{', '.join(NHWC_MODELS)})", where.line_of("layout") or entry.line, "layout")


def _resolve_loader(values: dict, entry: LineDict, path: Path, hardware: str) -> None:
    """A harness case reading ImageNet decodes with its `loader` (default_loader); synthetic data has none."""
    if values["data"] != "imagenet":
        if "loader" in entry:
            raise ConfigError(path, "loader applies to data: imagenet (synthetic data is made on the device)",
                              entry.line_of("loader"), "loader")
        values["loader"] = None
        return
    loader = values["loader"] or default_loader(hardware)
    if loader == "dali" and hardware != "gpu":
        raise ConfigError(path, "loader dali decodes on a GPU; this is a CPU suite (loader: cpu or gpu)",
                          entry.line_of("loader") or entry.line, "loader")
    values["loader"] = loader
    values["loader_named"] = loader != default_loader(hardware)


def _attach_references(entry: LineDict, cases: list[Case], path: Path) -> list[Case]:
    refs = optional(entry, "references", list, path, [])
    for ref in refs:
        if not isinstance(ref, LineDict):
            raise ConfigError(path, "each reference must be a mapping", entry.line_of("references"), "references")
        _reject_unknown(ref, set(SELECTOR_KEYS) | set(REFERENCE_KEYS), path)
        reference = Reference(
            value=float(require(ref, "value", (int, float), path)),
            lower=_bound(ref, "lower", path),
            upper=_bound(ref, "upper", path),
            unit=require(ref, "unit", str, path),
            source=optional(ref, "source", str, path, ""),
            math=optional(ref, "math", str, path, None),
            batch=optional(ref, "batch", int, path, None),
            container=optional(ref, "container", str, path, ""),
            date=optional(ref, "date", str, path, ""),
        )
        if reference.batch is not None and reference.batch < 1:
            raise ConfigError(path, "must be >= 1", ref.line_of("batch"), "batch")
        if reference.date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", reference.date):
            raise ConfigError(path, f"expected YYYY-MM-DD, got {reference.date!r}", ref.line_of("date"), "date")
        if reference.math is not None and reference.math not in HARNESS_PRECISIONS:
            raise ConfigError(path, f"{reference.math!r} is not one of {', '.join(HARNESS_PRECISIONS)}",
                              ref.line_of("math"), "math")
        if reference.value <= 0:
            raise ConfigError(path, "must be > 0", ref.line_of("value"), "value")
        selector = {k: ref[k] for k in SELECTOR_KEYS if k in ref}
        hits = [i for i, c in enumerate(cases) if all(getattr(c, k) == v for k, v in selector.items())]
        if not hits:
            raise ConfigError(path, f"reference selects no case of this entry ({selector})", ref.line)
        for i in hits:
            if reference.bounded and any(r.bounded for r in cases[i].references):
                raise ConfigError(path, f"case {cases[i].key} has two bounded references (one is checked; make the "
                                  "others shown: lower and upper null)", ref.line)
            cases[i] = replace(cases[i], references=cases[i].references + (reference,))
    return cases


def _bound(ref: LineDict, key: str, path: Path) -> float | None:
    value = ref.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(path, f"expected a relative bound such as -0.05 (or null), got {value!r}",
                          ref.line_of(key), key)
    if (key == "lower" and value > 0) or (key == "upper" and value < 0):
        raise ConfigError(path, f"{key} bound must be {'<= 0' if key == 'lower' else '>= 0'} (relative)",
                          ref.line_of(key), key)
    return float(value)
