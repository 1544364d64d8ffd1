"""Adding a case key is one row in the contract table (scripts/harness/contract.py): on a copy of the kit with a
toy key added there, a real CPU run takes it from the suite to train.py's command line, the log's run_start,
run.json and the report. Verify compares it from the case check's version the row names (checked=N, the next after
the highest): rule sets keep their meaning, so a newly checked key comes with a new set, the newest plus one change
(kit/audit/rules/vM/changes.yaml) naming the case check's version N. A second toy row with bounds, a log-name tag
and `selects` is bounded in the suite (file:line:key), named in the log's name and selects a reference."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from kit.core.catalogue import contract

ROOT = Path(__file__).resolve().parents[1]
NEXT = len(list((ROOT / "kit" / "audit" / "rules").glob("v[0-9]*"))) + 1  # the rule set after the kit's newest
CHECK = max(s.checked for s in contract.SETTINGS) + 1  # the case check's next version
TOY_ROW = f'    Setting("toy_level", "--toy-level", "toy_level", int, 3, checked={CHECK}, recorded=True),\n'
RANK = max(s.tag_rank for s in contract.SETTINGS) + 1  # its word goes after the others in the log's name
WIDE_ROW = (f'    Setting("toy_width", "--toy-width", "toy_width", int, 1, minimum=1, maximum=9, tag="w{{}}", '
            f'tag_rank={RANK}, selects=True),\n')
SUITE = """\
schema_version: 1
name: toy
description: one case with the toy key
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10,
           timeout_s: 300}
cases:
  - framework: torch
    model: resnet50
    toy_level: 5
    toy_width: 7
    references:
      - {toy_width: 7, value: 1.0, lower: null, upper: null, unit: images/s, source: toy}
"""
BAD = SUITE.replace("    toy_width: 7\n", "    toy_width: 12\n")  # above the row's maximum
# runs inside the copy: the run, its bundle verified, then the log forged to say another toy level, re-bundled
RUN = """\
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from kitlogs import rewrite_kitlog
from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.config.suites import load_suite
from kit.core.yamlio import ConfigError
from kit.run import bench, records

base = Path(sys.argv[1])
try:
    load_suite(base / "bad.yaml")
    bad = ""
except ConfigError as exc:
    bad = str(exc)
run_dir, suite = records.start(base / "toy.yaml", base / "runs")
result = bench.run_bench(run_dir, suite)
assert not result.failed, [o.reason for o in result.failed]
clean = verify(bd.make_bundle(run_dir, submitter="Lab", system_name="box", out=base / "clean.tar.gz"))
log = next((run_dir / "logs").rglob("*_1.log"))
rewrite_kitlog(log, lambda d: d | {"toy_level": 4} if d.get("event") == "run_start" else d)
bench.write_report(run_dir, load_suite(run_dir / "suite.yaml"))
forged = verify(bd.make_bundle(run_dir, submitter="Lab", system_name="box", out=base / "forged.tar.gz"))
(case,) = load_suite(run_dir / "suite.yaml").cases
print(json.dumps({"run_dir": str(run_dir), "log": str(log), "rules": clean.rules_version, "bad": bad,
                  "reference": case.reference.source if case.reference else None,
                  "clean": [[v.rule, v.message] for v in clean.violations],
                  "forged": [[v.rule, v.file, v.message] for v in forged.violations]}))
"""


def copy_with_toy_key(into: Path) -> Path:
    """The kit and its scripts (and what a local run reads of the rest) copied, the toy row added to the table."""
    for part in ("kit", "scripts", "docker", "data_prep"):
        shutil.copytree(ROOT / part, into / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "requirements.lock", into / "requirements.lock")
    contract = into / "scripts" / "harness" / "contract.py"
    text = contract.read_text()
    end = text.index("\n)\nBY_KEY")
    contract.write_text(text[:end + 1] + TOY_ROW + WIDE_ROW + text[end + 1:])
    rules = into / "kit" / "audit" / "rules"
    (rules / f"v{NEXT}").mkdir()
    (rules / f"v{NEXT}" / "changes.yaml").write_text(
        f"schema_version: 1\nbase: v{NEXT - 1}\nwhy: the toy key is compared\nreplace:\n"
        f"  - {{name: log_states_its_case, predicate: harness_log_states_its_case@{CHECK}}}\n")
    return into


def test_a_key_added_to_the_contract_flows_from_suite_to_verify(tmp_path):
    kit = copy_with_toy_key(tmp_path / "kit-copy")
    assert (ROOT / "scripts/harness/contract.py").read_text().count("toy_level") == 0  # the product has none
    base = tmp_path / "work"
    base.mkdir()
    (base / "toy.yaml").write_text(SUITE)
    (base / "bad.yaml").write_text(BAD)
    env = {**os.environ, "PYTHONPATH": str(kit)}
    done = subprocess.run([sys.executable, "-c", RUN, str(base), str(ROOT / "tests")], cwd=kit, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    run_dir, log = Path(out["run_dir"]), Path(out["log"])
    assert "toy" not in str(log.relative_to(run_dir))  # no part of the run's names: a plain setting
    assert log.name == "resnet50_b2_fp32-w7_1.log"  # the tagged key is: its word after the precision
    line = BAD.splitlines().index("    toy_width: 12") + 1
    assert out["bad"].endswith(f"bad.yaml:{line}: toy_width: must be >= 1 and <= 9, got 12"), out["bad"]
    assert out["reference"] == "toy"  # it selects the suite's reference

    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["toy_level"] == 5  # run.json keeps the case's value (recorded) ...
    assert entry["ran"]["toy_level"] == 5  # ... and what the log says ran
    argv = entry["argv"]
    assert argv[argv.index("--toy-level") + 1] == "5"  # the command line carries it, train.py took it
    assert out["clean"] == []  # verify passes the honest run
    assert out["rules"] == f"v{NEXT}"  # the new set is the newest, so the default

    report = (run_dir / "report.md").read_text()
    head = next(line for line in report.splitlines() if line.startswith("| case | math the framework had"))
    assert "| toy_level |" in head

    forged = [v for v in out["forged"] if v[0] == "log_states_its_case"]
    assert forged and "toy_level" in forged[0][2], out["forged"]
    assert "4" in forged[0][2] and "5" in forged[0][2]
