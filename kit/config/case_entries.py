"""One `cases:` entry of a suite file -> its checked, expanded Cases with their references attached (errors name
file:line:key). A list value expands to the cartesian product of every list-valued key."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace
from pathlib import Path

from kit.config import programs
from kit.config.case_keys import (
    CASE_KEYS,
    CHOICES,
    COMPILABLE,
    HARNESS_FRAMEWORKS,
    HARNESS_ONLY,
    HARNESS_PRECISIONS,
    IMAGENET_MODELS,
    MAX_RUNS,
    MAXIMUM,
    MIN_MEASURED_STEPS,
    MIN_WARMUP_STEPS,
    MINIMUM,
    NHWC_MODELS,
    NLP_MODELS,
    REFERENCE_KEYS,
    REQUIRED,
    RESOLVED_BY_MODEL,
    SEED003_ONLY,
    SELECTOR_KEYS,
    default_layout,
    default_loader,
)
from kit.config.cases import EXTRA_KEYS, Case, Reference
from kit.config.imagekeys import image_key, pinned_keys
from kit.core.catalogue import contract, harness
from kit.core.yamlio import ConfigError, LineDict, kind_name, optional, require

RENAMED = {"channels_last": "layout: nhwc | nchw"}


def reject_unknown(entry: LineDict, known: set[str], path: Path) -> None:
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


def expand_entry(entry: LineDict, defaults: LineDict, path: Path, hardware: str = "gpu") -> list[Case]:
    reject_unknown(entry, set(CASE_KEYS) | {"references"}, path)
    merged: dict[str, list] = {}
    for key, (_, default) in CASE_KEYS.items():
        if key in entry:
            merged[key] = _values(entry, key, path)
        elif key in defaults:
            merged[key] = _values(defaults, key, path)
        elif default is not None:
            merged[key] = [default]
        elif key in REQUIRED:
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
        for key in RESOLVED_BY_MODEL:  # the catalogue's row (0: the model has none)
            values[key] = values[key] or getattr(harness.MODELS[values["model"]], key)
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
        _check_rule_bounds(values, entry, defaults, path)
        _resolve_layout_mode(values, entry, defaults, path, hardware)
        if impl == "reference" and "data" not in entry and "data" not in defaults:
            values["data"] = programs.default_data(values["framework"], values["model"])
        values["timeout_s"] = float(values["timeout_s"])
        if values["image"] is not None:
            _check_image(values["framework"], values["image"], entry if "image" in entry else defaults, path)
        extra = tuple((key, values.pop(key)) for key in EXTRA_KEYS)
        case = Case(**values, extra=extra, line=entry.line)
        if impl == "reference":
            try:
                programs.check(case.ref_job(hardware))
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
        if contract.BY_KEY[key].applies(harness.MODELS[model]) or values[key] == CASE_KEYS[key][1]:
            continue
        raise ConfigError(path, f"{key} does not apply to {model}", entry.line_of(key) or entry.line, key)


def _check_rule_bounds(values: dict, entry: LineDict, defaults: LineDict, path: Path) -> None:
    """A harness case warms up at least MIN_WARMUP_STEPS steps and (an image model's) measures at least
    MIN_MEASURED_STEPS: fewer would run, and never verify (the NLP models count epochs; a publisher's program its
    own steps)."""
    if values["impl"] != "harness":
        return
    bounds = [("warmup_steps", MIN_WARMUP_STEPS, "warm-up steps kit verify asks a harness run to skip")]
    if values["model"] not in NLP_MODELS:
        bounds.append(("measure_steps", MIN_MEASURED_STEPS, "measured steps kit verify asks of a harness run"))
    for key, least, what in bounds:
        if values[key] < least:
            given = entry if key in entry else defaults
            raise ConfigError(path, f"{values[key]} is fewer than the {least} {what} (case "
                              f"{values['framework']}/{values['model']})", given.line_of(key), key)


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
        reject_unknown(ref, set(SELECTOR_KEYS) | set(REFERENCE_KEYS), path)
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
