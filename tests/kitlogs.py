"""The harness and its :::KITLOG lines in a test: running train.py, reading its records, rewriting a log's lines (a
forgery, or a log as a newer harness writes it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

MARK = ":::KITLOG "
REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "scripts" / "harness" / "train.py"


def harness(*args: str, env: dict | None = None, launcher: list[str] | None = None,
            timeout: int = 300) -> subprocess.CompletedProcess:
    """scripts/harness/train.py ARGS in this Python (after `launcher`, e.g. a distributed launcher's module), from
    the repository's top, the environment plus `env`."""
    return subprocess.run([sys.executable, *(launcher or []), str(TRAIN), *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ | (env or {}), cwd=REPO)


def kitlines(text: str) -> list[dict]:
    """The objects of the :::KITLOG lines of a harness's output."""
    return [json.loads(line.split(MARK, 1)[1]) for line in text.splitlines() if MARK in line]


def rewrite_kitlog(log: Path, edit: Callable[[dict], dict | Iterable[dict]]) -> None:
    """Each :::KITLOG line's object through edit: a dict replaces it, an iterable of dicts replaces it by those
    lines (none drops it); other lines stay as they are."""
    out = []
    for line in log.read_text().splitlines(keepends=True):
        if not line.startswith(MARK):
            out.append(line)
            continue
        new = edit(json.loads(line[len(MARK):]))
        out += [MARK + json.dumps(d) + "\n" for d in ([new] if isinstance(new, dict) else new)]
    log.write_text("".join(out))


def recorded_clean(run_dir) -> None:
    """DERIVED: each published program's command record under RUN_DIR given the model_code_state today's launcher
    writes of a checkout clean at the commit the record names (scripts/reference/code_state.py). For real runs
    recorded before the launcher wrote it (the H200 visit's DLE runs), whose commit was the pin."""
    import json
    from pathlib import Path

    for sidecar in Path(run_dir).rglob("*.cmd.json"):
        meta = json.loads(sidecar.read_text())
        meta.setdefault("model_code_state", {"commit": meta.get("model_code_commit"), "modified": [], "deleted": [],
                                             "untracked": [], "hidden": [], "clean": True})
        sidecar.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def made_by_this_kit(run_dir) -> None:
    """DERIVED: run.json of a recorded run stamped as this kit writes a run now: the rule set it is judged by
    (rules_version) and this kit's commit, so that kit bundle judges it by the newest rules and refuses, rather
    than rebuilds, a derived file that differs."""
    from kit.core.files import CURRENT_RULES
    from kit.core.revision import source_revision

    path = Path(run_dir) / "run.json"
    meta = json.loads(path.read_text())
    meta.update(rules_version=CURRENT_RULES, kit_commit=source_revision())
    path.write_text(json.dumps(meta, indent=2) + "\n")


def harness_log(framework: str, model: str, step_seconds: list[float], global_batch: int, precision: str = "fp32",
                start_ms: int = 1_795_000_000_000) -> str:
    """A log in the harness's grammar (kit.results.parsers.harnesslog) whose steps took STEP_SECONDS: run_start, no
    warm-up, the steps, run_stop and rank 0's rank_stop, for tests that need exact figures."""
    common = {"ranks": 1, "framework": framework, "model": model, "precision": precision, "layout": "nchw",
              "mode": "eager"}
    t = start_ms
    records = [{"kit": 1, "event": "run_start", "time_ms": t, **common, "local_batch": global_batch,
                "global_batch": global_batch, "data": "synthetic", "loader": "synthetic", "warmup_steps": 0,
                "measure_steps": len(step_seconds)}]
    for number, seconds in enumerate(step_seconds, 1):
        t += int(seconds * 1000) + 1
        records.append({"kit": 1, "event": "step", "time_ms": t, "step": number, "global_batch": global_batch,
                        "seconds": seconds, "samples_per_sec": round(global_batch / seconds, 3), **common,
                        "loss": 1.0})
    total = round(sum(step_seconds), 6)
    figure = round(global_batch * len(step_seconds) / total, 3)
    records.append({"kit": 1, "event": "run_stop", "time_ms": t, "status": "success", "steps": len(step_seconds),
                    "seconds": total, "samples_per_sec": figure, **common, "unit": "images/s", "throughput": figure})
    records.append({"kit": 1, "event": "rank_stop", "time_ms": t, "status": "success", "rank": 0, "ranks": 1,
                    "local_rank": 0, "host": "test", "steps": len(step_seconds)})
    return "".join(MARK + json.dumps(r) + "\n" for r in records)


def without_the_nan_repeat(run_dir) -> None:
    """DERIVED: the H200 visit's DLE run directory (tests/fixtures/gpu-runs/h200-20261128/dle) less its program
    repeat 2, which trained on a NaN loss for 51 of its counted iterations (the one reader gives it no figure): the
    reference case declared with one repeat, the suite renamed (it is no longer the built-in one) and its sha256 in
    run.json written again to match, its report written again."""
    import hashlib
    from pathlib import Path

    run_dir = Path(run_dir)
    case = run_dir / "logs" / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g"
    for name in ("resnet50_b256_amp_2.log", "resnet50_b256_amp_2.cmd.json"):
        (case / name).unlink()
    suite = run_dir / "suite.yaml"
    text = suite.read_text()
    assert "impl: reference}" in text
    text = text.replace("impl: reference}", "impl: reference, repeats: 1}").replace("name: gpu-proof-dle\n",
                                                                                    "name: gpu-proof-dle-less-nan\n")
    suite.write_text(text)  # renamed: no longer the built-in suite it was
    meta = json.loads((run_dir / "run.json").read_text())
    meta["suite"] = "gpu-proof-dle-less-nan"
    meta["suite_sha256"] = hashlib.sha256(suite.read_bytes()).hexdigest()
    del meta["runs"]["logs/ngc-pytorch/resnet50/bz256/1n1g/resnet50_b256_amp_2.log"]
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    from kit.config.suites import load_suite
    from kit.run import bench

    bench.write_report(run_dir, load_suite(suite))  # the report, results and results.csv of what is left
