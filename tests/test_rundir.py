"""run.json, results.json, the programs' command records and the hosts' captures have one reader each
(kit/core/rundir.py): no other module of the kit opens them by name or globs for the records (the audit's evidence
aside, which judges a bundle's copies rule by rule), and a run.json of the wrong shape is one error naming the file
and the key."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import REPO, SHARED

from kit.core.inputs import InputError
from kit.core.rundir import read_run_meta, save_run_meta

# where the records are named on purpose: their reader, the table of schema versions, the audit's own evidence,
# rules and reproduction check (each judges a bundle's copy on its own terms)
ALLOWED = {"kit/core/rundir.py", "kit/core/files.py", "kit/audit/evidence.py", "kit/audit/pair.py"}
AUDIT_RULES = "kit/audit/rules/"
NAMES = ("run.json", "results.json", "capture.json")


def path_uses(tree: ast.AST) -> list[int]:
    """Lines where run.json, results.json or a host's capture.json is made into a path (joined with /, passed to
    Path(), joinpath() or open()), or command records or captures are globbed for (in a glob's pattern)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = (node.left, node.right)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("Path", "joinpath", "open"):
            parts = tuple(node.args)
        elif isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("glob", "rglob"):
            found += [node.lineno] if any(k in ast.unparse(node) for k in ("SIDECAR_SUFFIX", ".cmd.json", "capture.json")
                                          ) else []
            continue
        else:
            continue
        found += [node.lineno for p in parts if isinstance(p, ast.Constant) and p.value in NAMES]
    return found


def test_no_module_but_the_reader_opens_run_json():
    offenders = []
    for path in sorted((REPO / "kit").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel in ALLOWED or rel.startswith(AUDIT_RULES):
            continue
        offenders += [f"{rel}:{line}" for line in path_uses(ast.parse(path.read_text()))]
    assert offenders == [], f"read or write these records through kit.core.rundir: {offenders}"
    # the scan finds what it looks for
    assert path_uses(ast.parse('p = run_dir / "run.json"\nq = Path(d, "results.json")\nr = d.joinpath("run.json")\n'
                               'for s in logs.rglob("*" + SIDECAR_SUFFIX): pass\nc = env / h / "capture.json"\n'
                               'e = env.glob("*/capture.json")')) == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("text, said", [
    ('{"runs": []}', "run.json: runs: expected an object, found a list"),
    ('{"runs": {"logs/a.log": "ok"}}', "run.json: runs.logs/a.log: expected an object, found a string"),
    ('{"planned_runs": {"a": 1}}', "run.json: planned_runs: expected a list, found an object"),
    ('{"planned_runs": [1]}', "run.json: planned_runs.0: expected an object, found an integer"),
    ('{"expanded_suite": "x"}', "run.json: expanded_suite: expected an object, found a string"),
    ('{"runs": {"logs/a.log": {"repeat": "1"}}}', "run.json: runs.logs/a.log.repeat: expected an integer, found a string"),
    ('{"runs": {"logs/a.log": {"figure": true}}}', "run.json: runs.logs/a.log.figure: expected a number, found true or false"),
    ('{"schema_version": 2, "runs": {"a": {"wall_seconds": null}}}',
     "run.json: runs.a.wall_seconds: expected a number, found null"),
    ('{"planned_runs": [{"case": "c", "repeat": 1.5, "log": "l"}]}',
     "run.json: planned_runs.0.repeat: expected an integer, found a number"),
    ('{"skipped_cases": [{"case": "c", "reason": 3}]}', "run.json: skipped_cases.0.reason: expected a string"),
    ('{"warnings": "one"}', "run.json: warnings: expected a list, found a string"),
    ('{"schema_version": 3}', "run.json: schema_version: schema_version 3 was written by a later kit; this kit reads up to 2"),
    ('{"schema_version": "2"}', "run.json: schema_version: expected a positive integer, found '2'"),
    ('[1, 2]', "run.json: expected a JSON object"),
    ('{"runs": {', "run.json: not JSON"),
])
def test_a_run_json_of_the_wrong_shape_is_one_error_naming_file_and_key(tmp_path, text, said):
    (tmp_path / "run.json").write_text(text)
    with pytest.raises(InputError) as caught:
        read_run_meta(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path}/{said}")


def test_missing_written_and_read_back(tmp_path):
    assert read_run_meta(tmp_path, missing_ok=True) == {}
    with pytest.raises(InputError, match="run.json: no such file"):
        read_run_meta(tmp_path)
    save_run_meta(tmp_path, {"runs": {"logs/a.log": {"status": "ok"}}, "planned_runs": []})
    meta = read_run_meta(tmp_path)
    assert meta["runs"] == {"logs/a.log": {"status": "ok"}}
    assert json.loads(Path(tmp_path, "run.json").read_text())["schema_version"] == 2
    assert not list(tmp_path.glob(".run.json.*"))  # written through a temporary name, renamed


def test_a_writer_that_breaks_the_shape_fails_before_the_file_changes(tmp_path):
    save_run_meta(tmp_path, {"runs": {}})
    before = (tmp_path / "run.json").read_bytes()
    with pytest.raises(InputError, match=r"runs.logs/a.log.repeat: expected an integer, found a string"):
        save_run_meta(tmp_path, {"runs": {"logs/a.log": {"repeat": "2"}}})
    assert (tmp_path / "run.json").read_bytes() == before


VERSION_1 = {  # run.json as kits before schema version 2 wrote it (the H200 visit of 11-28, trimmed)
    "schema_version": 1, "kit_version": "0.1.0", "suite": "gpu-proof", "started": "2026-11-28T02:10:51+00:00",
    "runs": {"logs/torch/resnet50/bz256/1n1g/resnet50_b256_amp-nhwc_1.log": {
        "case": "torch/resnet50/bz256/1n1g/amp-nhwc", "repeat": 1, "status": "ok", "samples_per_sec": 5650.8,
        "wall_seconds": 61.2, "reason": "", "host_load": {"other_cpu_share": 0.01}},
        "logs/torch/resnet50/bz256/1n1g/resnet50_b256_amp-nhwc_2.log": {
        "case": "torch/resnet50/bz256/1n1g/amp-nhwc", "repeat": 2, "status": "failed", "samples_per_sec": None,
        "wall_seconds": 12.0, "reason": "loss is nan"}},
    "planned_runs": [{"case": "torch/resnet50/bz256/1n1g/amp-nhwc", "repeat": 1,
                      "log": "logs/torch/resnet50/bz256/1n1g/resnet50_b256_amp-nhwc_1.log"}],
    "skipped_cases": [{"case": "paddle/resnet50/bz256/1n1g/amp", "reason": "no paddle here"}],
    "finished": "2026-11-28T02:20:00+00:00"}


@pytest.mark.parametrize("version", [None, 1])
def test_a_version_1_run_json_reads_migrated_with_each_figure_named_figure(tmp_path, version):
    from kit.core.rundir import read_run

    written = {k: v for k, v in VERSION_1.items() if k != "schema_version" or version}  # the first kits: none
    (tmp_path / "run.json").write_text(json.dumps(written))
    run = read_run(tmp_path)
    first, second = run.runs.values()
    assert (first.figure, first.unit, first.ok, first.name) == (5650.8, None, True, "torch/resnet50/bz256/1n1g/amp-nhwc #1")
    assert (second.figure, second.ok, second.reason) == (None, False, "loss is nan")
    assert "samples_per_sec" not in first.fields and first.host_load == {"other_cpu_share": 0.01}
    assert run.fields["schema_version"] == 2 and run.started == "2026-11-28T02:10:51+00:00"
    assert [(p.case, p.repeat) for p in run.planned] == [("torch/resnet50/bz256/1n1g/amp-nhwc", 1)]
    assert run.skipped == [("paddle/resnet50/bz256/1n1g/amp", "no paddle here")]
    assert run.finished and run.host == {} and run.warnings == []
    assert json.loads((tmp_path / "run.json").read_text()) == written  # read, never rewritten


def test_every_run_json_the_kit_ships_reads_in_todays_shape():
    from kit.core.rundir import read_run

    found = sorted({p.parent for top in (REPO / "tests" / "fixtures", SHARED / "fixtures" / "gpu-runs")
                    for p in top.rglob("run.json")})
    assert len(found) >= 9  # the fuzz, golden and GPU recordings, and ../shared's H100 run
    for run_dir in found:
        run = read_run(run_dir)
        assert run.fields["schema_version"] == 2 and all("samples_per_sec" not in e.fields for e in run.runs.values())


def test_a_missing_run_json_is_an_empty_record_where_allowed(tmp_path):
    from kit.core.rundir import read_run

    run = read_run(tmp_path, missing_ok=True)
    assert not run.exists and run.runs == {} and run.planned is None and run.hosts == []


def test_command_records_read_one_by_one_or_all_the_readable_ones(tmp_path):
    from kit.core.rundir import read_results, read_sidecar, sidecars

    logs = tmp_path / "logs" / "paddleclas" / "resnet50" / "bz4" / "1n1g"
    logs.mkdir(parents=True)
    (logs / "resnet50_b4_fp32_1.cmd.json").write_text('{"impl": "paddleclas", "started": "2026-12-04T03:00:00"}')
    (logs / "resnet50_b4_fp32_2.cmd.json").write_text('{"impl": ')  # a record cut short
    (tmp_path / "hosts" / "h1").mkdir(parents=True)
    (tmp_path / "hosts" / "h1" / "resnet50_b4_fp32_1.cmd.json").write_text('{"host": "h1"}')
    assert read_sidecar(logs / "resnet50_b4_fp32_1.log")["impl"] == "paddleclas"
    with pytest.raises(InputError, match="resnet50_b4_fp32_2.cmd.json: not JSON"):
        read_sidecar(logs / "resnet50_b4_fp32_2.log")
    assert [(p.name, r) for p, r in sidecars(tmp_path)] == [
        ("resnet50_b4_fp32_1.cmd.json", {"host": "h1"}),
        ("resnet50_b4_fp32_1.cmd.json", {"impl": "paddleclas", "started": "2026-12-04T03:00:00"})]
    (logs / "resnet50_b4_fp32_3.cmd.json").write_text('{"impl": "paddleclas", "batch_size": "4", "argv": []}')
    with pytest.raises(InputError, match=r"resnet50_b4_fp32_3.cmd.json: batch_size: expected an integer, found a string"):
        read_sidecar(logs / "resnet50_b4_fp32_3.log")
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(InputError, match="results.json: expected a JSON object"):
        read_results(tmp_path)


def test_a_capture_of_the_wrong_shape_is_left_out_and_never_written(tmp_path):
    from kit.core.rundir import host_captures, save_capture

    good = {"host": "h1", "smi": None, "topology": None, "cpu": {"model_name": "x"}, "memory_bytes": 2**30,
            "os_release": "Debian", "kernel": "6.1", "ib_devices": []}
    for host in ("h1", "h2", "h3"):
        (tmp_path / "env" / host).mkdir(parents=True)
    save_capture(tmp_path / "env" / "h1", good)
    (tmp_path / "env" / "h2" / "capture.json").write_text(json.dumps(good | {"host": "h2", "memory_bytes": "2G"}))
    assert host_captures(tmp_path) == {"h1": good}
    with pytest.raises(InputError, match=r"h3/capture.json: smi.gpus: expected a list, found an object"):
        save_capture(tmp_path / "env" / "h3", good | {"smi": {"gpus": {}}})
    assert not (tmp_path / "env" / "h3" / "capture.json").exists()
