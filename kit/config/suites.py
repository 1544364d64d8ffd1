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

import re
from pathlib import Path

from kit.config.case_entries import expand_entry, reject_unknown
from kit.config.case_keys import CASE_KEYS, HARDWARE, MAX_RUNS
from kit.config.cases import Case, Suite
from kit.core.files import SCHEMA_VERSIONS
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require

SCHEMA_VERSION = SCHEMA_VERSIONS["suite"]
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")
SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"  # the data: kit/suites/*.yaml


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
    reject_unknown(data, known, path)
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
    reject_unknown(defaults, set(CASE_KEYS) - {"framework", "model"}, path)
    entries = require(data, "cases", list, path)
    if not entries:
        raise ConfigError(path, "no cases", data.line_of("cases"), "cases")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    runs = 0
    for i, entry in enumerate(entries):
        if not isinstance(entry, LineDict):
            raise ConfigError(path, f"case {i + 1} must be a mapping", data.line_of("cases"), "cases")
        for case in expand_entry(entry, defaults, path, hardware):
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


def posing_as_builtin(suite: Suite) -> Path | None:
    """The built-in suite file that SUITE is named like yet differs from (cases or hardware): its report would be
    titled as that suite. None where the name is no built-in's, or the suite is that built-in (a run's copy too)."""
    if suite.name not in available() or suite.path.resolve() == suite_path(suite.name).resolve():
        return None
    builtin = load_suite(suite.name)
    if [c.to_dict() for c in suite.cases] != [c.to_dict() for c in builtin.cases] \
            or suite.hardware != builtin.hardware:
        return builtin.path
    return None
