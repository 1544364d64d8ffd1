"""Runs recorded by earlier kits stay usable: `kit bundle` writes what is derived (report, results, plots) again from
the logs in a copy, judges the raw records by the rule set current when the run was made (run.json rules_version,
else its start time), and says both; the run directory is only read. Held for every GPU recording the kit ships."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from conftest import SHARED

from kit.audit.rules.engine import INTRODUCED, newest, rules_of_run, versions
from kit.cli import main
from kit.config.cases import Suite
from kit.config.expansion import FROZEN_KEY, as_expanded_then
from kit.config.suites import load_suite
from kit.core.files import CURRENT_RULES
from kit.run import records

H100 = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"
H200_DLE = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "dle"


def digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_rule_set_has_its_date_and_runs_record_the_newest():
    assert sorted(INTRODUCED, key=lambda v: int(v[1:])) == versions()
    assert CURRENT_RULES == newest()


@pytest.mark.parametrize("meta,version,said", [
    ({"rules_version": "v4", "started": "2026-11-24T00:00:00+00:00"}, "v4", "records"),
    ({"rules_version": "v99"}, None, "does not carry"),
    ({"rules_version": ["v1"]}, None, "does not carry"),
    ({"started": "2026-11-26T17:52:29+00:00"}, "v1", "current when the run started"),
    ({"started": "2026-11-28T05:33:36+00:00"}, "v3", "current when the run started"),
    ({"started": "2026-11-28T05:43:58+00:00"}, "v4", "current when the run started"),
    ({"started": "2026-11-20T00:00:00+00:00"}, None, "no set and no start time"),
    ({"started": "yesterday"}, None, "no set and no start time"),
    ({"started": "2026-11-28T05:33:36"}, None, "no set and no start time"),  # no zone: not an instant
    ({}, None, "no set and no start time"),
])
def test_the_rule_set_of_a_run(meta, version, said):
    got, why = rules_of_run(meta)
    assert got == (version or newest()) and said in why


def test_a_suite_expanded_before_the_nhwc_default_reads_as_it_ran(tmp_path):
    suite = load_suite(H100 / "suite.yaml")
    assert "nhwc" in {c.layout for c in suite.cases}
    then = as_expanded_then(suite, {"started": "2026-11-26T17:52:29+00:00"})
    assert isinstance(then, Suite) and {c.layout for c in then.cases} == {"nchw"}
    assert [c.key for c in then.cases] == ["torch/resnet50/bz256/1n1g/fp32", "torch/resnet50/bz256/1n1g/amp",
                                            "torch/vgg16/bz128/1n1g/amp", "torch/arcface/bz128/1n1g/fp32"]
    for meta in ({"started": "2026-11-26T19:16:26+00:00"}, {"started": "2026-11-25T00:00:00+00:00", FROZEN_KEY: {}},
                 {"started": "2026-11-25T00:00:00+00:00", "rules_version": "v8"}, {"started": None}, {}):
        assert as_expanded_then(suite, meta) is suite


def test_a_new_run_records_the_rule_set_it_is_judged_by(tmp_path):
    shutil.copy(H100 / "suite.yaml", tmp_path / "suite.yaml")
    meta = records.open_run_meta(tmp_path, load_suite(tmp_path / "suite.yaml"))
    assert meta["rules_version"] == CURRENT_RULES


def test_the_h100_recording_bundles_and_verifies_with_this_kit(tmp_path, capsys):
    run = tmp_path / H100.name
    shutil.copytree(H100, run)
    before = digests(run)
    bundle = tmp_path / "h100.tgz"
    assert main(["bundle", str(run), "--out", str(bundle), "--submitter", "t", "--system-name", "t"]) == 0
    said = capsys.readouterr().err
    assert "report.md differed from what this kit writes from the run's logs" in said
    assert "judged by rule set v1, the set current when the run started (2026-11-26T17:52:29+00:00)" in said
    assert digests(run) == before  # only read
    assert sorted(p.name for p in tmp_path.iterdir()) == [H100.name, "h100.tgz"]  # the copy beside it gone
    for rules in ([], ["--rules", "v1"]):
        assert main(["verify", str(bundle), *rules]) == 0
        assert "CONSISTENT" in capsys.readouterr().out


def test_the_h200_recording_bundles_and_names_its_nan_repeat_as_the_only_violation(tmp_path, capsys):
    """Its DLE run 2 trained on a NaN loss: the case has 1 of its 2 declared repeats with a figure. A rule that let
    a NaN repeat drop out would let an operator drop the slowest repeat by writing 'loss: nan' into it."""
    run = tmp_path / H200_DLE.name
    shutil.copytree(H200_DLE, run)
    before = digests(run)
    assert main(["bundle", str(run), "--out", str(tmp_path / "b.tgz"), "--submitter", "t", "--system-name", "t"]) == 1
    said = capsys.readouterr().err
    assert "report.md, results.csv, results.json differed" in said and "judged by rule set v3" in said
    assert [line.strip() for line in said.splitlines() if line.startswith("  [")] == [
        "[repeats_as_declared] suite.yaml:17: case ngc-pytorch/resnet50/bz256/1n1g/amp: 1 run(s) with a figure, "
        "the suite declares 2 repeats"]
    assert digests(run) == before
