"""Adding a published program is its module in kit/config/programs/ (listed in _ALL), its log format in
kit/results/parsers/ (listed in _ALL) and its checkout pinned in docker/pins.yaml model_code: on a copy of the kit
with a TOY program added through exactly those three places, a real `kit bench` runs it natively from a real git
checkout at its pin, reads its figure with its own reduction, and the bundle verifies under the newest rules (its
command is rebuilt from the toy recipe, its checkout judged against the toy pin). The toy program is a program of
this test, not a stand-in for a published one: it never reaches a report outside the temp folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEWEST = f"v{len(list((ROOT / 'kit' / 'audit' / 'rules').glob('v[0-9]*')))}"
PROGRAM_MODULE = '''"""TOY: a program of tests/test_program_new.py."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, RefJob
from kit.results.extract import Method


class ToyVGG(Program):
    impl = Impl("toy-vgg", "torch", "vgg16", "ToyVGG (a test's program)", "toy", "ToyVGG", "", "toy-vgg",
                "tests/test_program_new.py", synthetic="random samples, always")

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        return ["python", "train_toy.py", "--batch-size", str(job.batch_size), "--steps", "12"], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        return Method(skip=2), Method(skip=2, reduce="harmonic_mean")

    def synthetic(self, argv: list[str]) -> list[str]:
        return argv


PROGRAM = ToyVGG()
'''
PARSER_MODULE = '''"""TOY: the log format of tests/test_program_new.py's program: 'toy-vgg step 3 samples/s 123.4'."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from kit.results.parsers.base import LogFormat
from kit.results.parsers.records import NUMBER, PER_STEP, Record, to_float

_STEP = re.compile(r"toy-vgg step (?P<step>\\d+) samples/s (?P<value>" + NUMBER + r")$")


class ToyVGGLog(LogFormat):
    name = "toy-vgg"
    description = "ToyVGG: 'toy-vgg step 3 samples/s 123.4'"
    needle = re.compile(r"toy-vgg step ")
    detectors = (re.compile(r"toy-vgg step \\d+ samples/s "),)
    detect_literals = ("toy-vgg step ",)
    default_metric = "samples/s"

    def parse_line(self, line: str, lineno: int, rank: int | None, path: str | Path) -> Iterator[Record]:
        m = _STEP.search(line)
        if m:
            yield Record(to_float(m["value"], path, lineno), "samples/s", "samples/s", PER_STEP, lineno,
                         int(m["step"]), None, None, rank)
'''
TRAIN = '''import argparse, time
p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int)
p.add_argument("--steps", type=int)
a = p.parse_args()
for step in range(1, a.steps + 1):
    began = time.perf_counter()
    time.sleep(0.02)
    print(f"toy-vgg step {step} samples/s {a.batch_size / (time.perf_counter() - began):.3f}", flush=True)
'''
SUITE = """\
schema_version: 1
name: toy-program
hardware: cpu
defaults: {batch_size: 4, precision: fp32, repeats: 1, timeout_s: 300}
cases:
  - {framework: torch, model: vgg16, impl: reference, data: synthetic}
"""
RUN = """\
import json, sys
from pathlib import Path
from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.run import bench, records

base = Path(sys.argv[1])
run_dir, suite = records.start(base / "toy.yaml", base / "runs")
result = bench.run_bench(run_dir, suite)
verdict = verify(bd.make_bundle(run_dir, submitter="Lab", system_name="box", out=base / "toy.tar.gz"))
print(json.dumps({"run_dir": str(run_dir), "failed": [o.reason for o in result.failed],
                  "rules": verdict.rules_version, "violations": [[v.rule, v.message] for v in verdict.violations]}))
"""


def _insert_after(path: Path, anchor: str, text: str) -> None:
    body = path.read_text()
    assert anchor in body, (path, anchor)
    path.write_text(body.replace(anchor, anchor + text, 1))


def copy_with_toy_program(into: Path, commit: str) -> Path:
    """The kit copied, the toy program added in its three places: module, log format, pin."""
    for part in ("kit", "scripts", "docker", "data_prep"):
        shutil.copytree(ROOT / part, into / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "requirements.lock", into / "requirements.lock")
    programs = into / "kit" / "config" / "programs"
    (programs / "toy_vgg.py").write_text(PROGRAM_MODULE)
    _insert_after(programs / "__init__.py", "    plsc,\n)", "\nfrom kit.config.programs import toy_vgg")
    _insert_after(programs / "__init__.py", "    dle_transformer_pytorch.PROGRAM,\n", "    toy_vgg.PROGRAM,\n")
    parsers = into / "kit" / "results" / "parsers"
    (parsers / "toy_vgg.py").write_text(PARSER_MODULE)
    _insert_after(parsers / "__init__.py", "from kit.results.parsers.tf2_keras import TF2KerasTimeHistory\n",
                  "from kit.results.parsers.toy_vgg import ToyVGGLog\n")
    _insert_after(parsers / "__init__.py", "    *LAMBDA_DLE_FORMATS,", "\n    ToyVGGLog(),")
    _insert_after(into / "docker" / "pins.yaml", "model_code:\n",
                  f"  toy:\n    repo: https://example.invalid/ToyVGG\n    commit: {commit}\n"
                  "    path: /opt/models/ToyVGG\n    source: tests/test_program_new.py\n")
    return into


def toy_checkout(models: Path) -> str:
    """A real git checkout of the toy program under a model-code root; its commit."""
    code = models / "ToyVGG"
    code.mkdir(parents=True)
    (code / "train_toy.py").write_text(TRAIN)
    git = ["git", "-C", str(code), "-c", "user.name=toy", "-c", "user.email=toy@example.invalid"]
    for argv in (["init", "-q"], ["add", "train_toy.py"], ["commit", "-qm", "toy"]):
        subprocess.run([*git, *argv], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def test_a_program_added_in_its_three_places_runs_reports_and_verifies(tmp_path):
    models = tmp_path / "models"
    kit = copy_with_toy_program(tmp_path / "kit-copy", toy_checkout(models))
    assert not (ROOT / "kit" / "config" / "programs" / "toy_vgg.py").exists()  # the product has none
    base = tmp_path / "work"
    base.mkdir()
    (base / "toy.yaml").write_text(SUITE)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)  # the recipe's bare `python`
    env = {**os.environ, "PYTHONPATH": str(kit), "KIT_MODEL_CODE": str(models),
           "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", RUN, str(base)], cwd=kit, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["failed"] == [], out
    run_dir = Path(out["run_dir"])
    (log,) = (run_dir / "logs" / "toy-vgg" / "vgg16").rglob("*.log")
    rates = [float(line.split()[-1]) for line in log.read_text().splitlines() if line.startswith("toy-vgg step ")]
    assert len(rates) == 12
    (group,) = json.loads((run_dir / "results.json").read_text())["groups"]
    (run,) = group["cases"][0]["runs"]
    assert (group["framework"], run["format"], run["records_used"]) == ("toy-vgg", "toy-vgg", 10)
    kept = rates[2:]  # the toy module's publisher method: skip 2, the mean
    assert abs(run["value"] - sum(kept) / len(kept)) <= 1e-3, (run, kept)
    assert out["rules"] == NEWEST and out["violations"] == [], out  # its recipe rebuilt, its checkout at the toy pin
