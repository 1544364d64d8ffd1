"""The generic forger: an operator with the signing key edits a genuine run consistently -- each log as its own sums
require, then the report and results written again from the logs, bundled anew -- in each way that would move a
figure, and kit verify must refuse it. A log family joins by declaring where its rates and its clock are (FAMILIES);
a transformation joins TRANSFORMS once, and every family meets it.

Genuine runs: the H200 visit's DLE run (tests/fixtures/gpu-runs/h200-20261128/dle): its published program's
DLLogger log (dle-pytorch) and its harness logs (kitlog, GPU-sampled), each forged alone.
A forgery no rule can refuse is a hole named here as such (xfail, strict: closing it fails the test until the
expectation moves): a re-run is what catches it (kit reproduce, tests/test_reproduce.py).
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kitlogs import recorded_clean, rewrite_kitlog, without_the_nan_repeat

from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.cli import main

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "dle"
CASE = Path("logs") / "{}" / "resnet50" / "bz256" / "1n1g"
Rates = Callable[[int], float]  # the i-th timed record's rate factor


def dle_pytorch(run_dir: Path, rates: Rates, clock: float) -> Path:
    """DLLogger's 'DLL <stamp> - Epoch: E Iteration: I  ... train.total_ips : X img/s' lines: each line's rates
    (compute and total) x rates(i), its stamp's distance from the first one divided by CLOCK."""
    log = run_dir / str(CASE).format("ngc-pytorch") / "resnet50_b256_amp_1.log"
    stamp = re.compile(r"^DLL (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)")
    lines, first, index = log.read_text().splitlines(keepends=True), None, 0
    for n, line in enumerate(lines):
        found = stamp.match(line)
        if not found or "Iteration:" not in line:
            continue
        when = dt.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S.%f")
        first = first or when
        line = "DLL " + (first + (when - first) / clock).strftime("%Y-%m-%d %H:%M:%S.%f") + line[found.end():]
        factor = rates(index)
        lines[n] = re.sub(r"(_ips : )([\d.]+)", lambda m, factor=factor: f"{m[1]}{float(m[2]) * factor:.2f}", line)
        index += 1
    log.write_text("".join(lines))
    return log


def harness(run_dir: Path, rates: Rates, clock: float) -> Path:
    """The harness's kitlog: each step's seconds / rates(i), its rate the global batch over them (as the harness
    computes it), run_stop's sums and rates likewise; with CLOCK, every time_ms after run_start's compressed by it."""
    log = run_dir / str(CASE).format("torch") / "resnet50_b256_amp-nhwc_1.log"
    state: dict = {"i": 0, "seconds": 0.0}

    def forge(d: dict) -> dict:
        if d.get("event") == "run_start":
            state["ms"] = d["time_ms"]
        elif "ms" in state and "time_ms" in d:
            d["time_ms"] = round(state["ms"] + (d["time_ms"] - state["ms"]) / clock)
        if d.get("event") == "step":
            d["seconds"] = round(d["seconds"] / rates(state["i"]), 6)
            d["samples_per_sec"] = round(d["global_batch"] / d["seconds"], 3)
            state["i"] += 1
            state["seconds"] += d["seconds"]
            state["batch"] = d["global_batch"]
        elif d.get("event") == "run_stop":
            d["seconds"] = round(state["seconds"], 6)
            rate = round(state["batch"] * d["steps"] / d["seconds"], 3)
            d |= {k: rate for k in ("samples_per_sec", "throughput") if k in d}
        return d

    rewrite_kitlog(log, forge)
    return log


@dataclass(frozen=True)
class Transform:
    rates: Rates
    clock: float = 1.0  # the clock compressed by this factor (1: untouched)


TRANSFORMS = {
    "every rate x1.2, the clock untouched": Transform(lambda i: 1.2),
    "2 of every 5 rates x1.6, the clock untouched": Transform(lambda i: 1.6 if i % 5 < 2 else 1.0),
    "every rate x1.09, the clock untouched": Transform(lambda i: 1.09),
    "every rate x1.3, the clock compressed to match": Transform(lambda i: 1.3, clock=1.3),
}
FAMILIES = {"dle-pytorch": dle_pytorch, "harness": harness}
# (family, transform) no rule refuses: the forged log agrees with itself everywhere; only its run's other clocks could
# tell (the GPU sampler's busy time against the log's timed span, the command record's start and exit), which no
# rule holds it to yet
HOLES = {(family, "every rate x1.3, the clock compressed to match") for family in FAMILIES}


@pytest.fixture(scope="module")
def genuine(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("genuine") / "run"
    shutil.copytree(VISIT, run_dir)
    recorded_clean(run_dir)  # DERIVED: its records predate model_code_state
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN
    assert main(["report", str(run_dir)]) == 0
    assert verify(bd.make_bundle(run_dir, run_dir.parent / "genuine.tgz", submitter="t", system_name="t")).ok
    return run_dir


@pytest.mark.parametrize("family, name", [
    pytest.param(family, name, marks=[pytest.mark.xfail(strict=True, reason="a consistent forgery no rule refuses")]
                 if (family, name) in HOLES else [])
    for family in FAMILIES for name in TRANSFORMS])
def test_a_consistent_forgery_is_refused(genuine, tmp_path, family, name):
    run_dir = tmp_path / "run"
    shutil.copytree(genuine, run_dir)
    transform = TRANSFORMS[name]
    log = FAMILIES[family](run_dir, transform.rates, transform.clock)
    assert log.read_text() != (genuine / log.relative_to(run_dir)).read_text()
    assert main(["report", str(run_dir)]) == 0  # the report and results of the forged log: derived files agree
    result = verify(bd.make_bundle(run_dir, tmp_path / "forged.tgz", submitter="t", system_name="t"))
    named = {v.file for v in result.violations}
    assert not result.ok and any(str(log.relative_to(run_dir)) in str(f) for f in named), result.violations
