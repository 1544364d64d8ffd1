"""run.json, results.json, the programs' command records and the hosts' captures have one reader each
(kit/core/rundir.py): no other module of the kit opens them by name or globs for the records (the audit's evidence
aside, which judges a bundle's copies rule by rule), and a run.json of the wrong shape is one error naming the file
and the key."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from conftest import REPO

from kit.core.inputs import InputError
from kit.core.rundir import read_run_meta, run_entries, save_run_meta

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
    ('{"runs": []}', "run.json: runs: expected an object, found list"),
    ('{"runs": {"logs/a.log": "ok"}}', "run.json: runs.logs/a.log: expected an object, found str"),
    ('{"planned_runs": {"a": 1}}', "run.json: planned_runs: expected a list, found dict"),
    ('{"planned_runs": [1]}', "run.json: planned_runs.0: expected an object, found int"),
    ('{"expanded_suite": "x"}', "run.json: expanded_suite: expected an object, found str"),
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
    assert run_entries(meta) == {"logs/a.log": {"status": "ok"}}
    assert json.loads(Path(tmp_path, "run.json").read_text())["schema_version"] == 1
    assert not list(tmp_path.glob(".run.json.*"))  # written through a temporary name, renamed


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
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(InputError, match="results.json: expected a JSON object"):
        read_results(tmp_path)
