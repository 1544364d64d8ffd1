"""A suite as a run expanded it, for run.json `expanded_suite` (kit.run.frozen) and for verify, which recomputes the
report from the cases the run expanded (kit.audit.evidence) and holds them to suite.yaml's expansion."""

from __future__ import annotations

import datetime as dt
from dataclasses import fields, replace
from pathlib import Path

from kit.config.cases import Case, Reference, Suite
from kit.core.inputs import aware_instant

FROZEN_KEY = "expanded_suite"
# 65bb517 made nhwc the layout of the convnets under autocast on GPU suites: suites before it had no layout and
# ran every case nchw
NHWC_DEFAULT_SINCE = dt.datetime(2026, 11, 26, 19, 16, 26, tzinfo=dt.UTC)


def as_expanded_then(suite: Suite, meta: dict) -> Suite:
    """SUITE (suite.yaml as this kit expands it) as the kit that made the run expanded it, for a run.json without
    expanded_suite (runs before 2026-12-01; one recording rules_version is a later kit's): a run started before
    NHWC_DEFAULT_SINCE ran every case nchw."""
    started = aware_instant(meta.get("started"))
    if FROZEN_KEY in meta or "rules_version" in meta or started is None or started >= NHWC_DEFAULT_SINCE:
        return suite
    return replace(suite, cases=[replace(c, layout="nchw") for c in suite.cases])


def freeze(suite: Suite) -> dict:
    """The suite as expanded, for run.json: every field of every case (references and extra keys as lists)."""
    def case(c: Case) -> dict:
        data = {f.name: getattr(c, f.name) for f in fields(Case)}
        data["references"] = [{f.name: getattr(r, f.name) for f in fields(Reference)} for r in c.references]
        data["extra"] = [list(pair) for pair in c.extra]
        return data
    return {"name": suite.name, "description": suite.description, "hardware": suite.hardware,
            "cases": [case(c) for c in suite.cases]}


def thaw(frozen: dict, path: Path) -> Suite:
    """The Suite freeze() recorded (path: the run's suite.yaml); KeyError/TypeError/ValueError when it does not read
    as this kit's cases."""
    known = {f.name for f in fields(Case)}
    cases = []
    for data in frozen["cases"]:
        values = {k: v for k, v in data.items() if k in known}
        values["references"] = tuple(Reference(**r) for r in data.get("references", []))
        values["extra"] = tuple((k, _tuple(v)) for k, v in data.get("extra", []))
        cases.append(Case(**values))
    return Suite(str(frozen["name"]), Path(path), str(frozen.get("description", "")), str(frozen["hardware"]), cases)


def _tuple(value):
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value
