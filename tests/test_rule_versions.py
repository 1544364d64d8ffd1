"""Rule sets keep their meaning: each names predicate versions (name@N), and the golden bundles (real runs, some
edited; tests/make_golden_bundles.py makes them) give exactly their recorded findings under every rule set."""

from __future__ import annotations

import dataclasses
import json
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from kit.audit import rules as rl
from kit.audit.rules import engine, predicates
from kit.audit.verify import verify_tree
from kit.config import suites
from kit.core.catalogue import contract
from kit.core.yamlio import ConfigError, load_yaml

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "golden-bundles"
NAMES = sorted(p.name.removesuffix(".expected.json") for p in GOLDEN.glob("*.expected.json"))


def expected(name: str) -> dict[str, list[dict]]:
    return json.loads((GOLDEN / f"{name}.expected.json").read_text())


def test_golden_bundles_are_small_text_and_each_has_its_findings():
    assert NAMES == ["cpu-loader", "cpu-loader-says-gpu", "cpu-loader-says-gpu-batch-4", "fuzz-batch-4"]
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == NAMES
    files = [p for p in GOLDEN.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < 1024 * 1024
    for path in files:
        path.read_text(encoding="utf-8")  # text only: no JPEG of the run's data rides along


@pytest.mark.parametrize("name", NAMES)
def test_a_golden_bundle_gives_exactly_its_findings_under_every_rule_set(name):
    want = expected(name)
    assert sorted(want, key=lambda v: int(v[1:])) == rl.versions(), "every rule set this kit carries has its findings"
    root = GOLDEN / name
    for version in rl.versions():
        result = verify_tree(root, rules_version=version)
        assert not result.integrity and result.signature.state == "unsigned", version
        assert [v.to_dict() for v in result.violations] == want[version], version
        assert {f.rule.name for f in result.findings} == {r.name for r in rl.load_rules(version)}
    newest = rl.versions()[-1]
    assert [v.to_dict() for v in verify_tree(root).violations] == want[newest], f"{newest} is verify's default"


def test_the_goldens_hold_a_verdict_v1_and_v2_disagree_on_and_ones_both_fail():
    said_gpu = expected("cpu-loader-says-gpu")
    assert said_gpu["v1"] == [] and [v["rule"] for v in said_gpu["v2"]] == ["log_states_its_case"]
    assert "loader 'gpu' (the case: 'cpu')" in said_gpu["v2"][0]["message"]
    assert expected("cpu-loader") == {v: [] for v in rl.versions()}
    both = expected("cpu-loader-says-gpu-batch-4")
    assert both["v1"][0]["message"].endswith("run_start says local_batch 4 (the case: 2)")
    assert both["v2"][0]["message"].endswith("local_batch 4 (the case: 2); loader 'gpu' (the case: 'cpu')")
    fuzz = expected("fuzz-batch-4")
    assert fuzz["v1"] == fuzz["v2"] and [v["line"] for v in fuzz["v1"]] == [2]


def test_the_newest_set_is_the_default_and_the_goldens_name_the_set_they_were_made_under():
    sets = sorted(p.name for p in (Path(rl.__file__).parent).glob("v[0-9]*"))
    assert rl.versions() == [f"v{i}" for i in range(1, len(sets) + 1)] and rl.newest() == rl.versions()[-1]
    assert rl.load_rules() == rl.load_rules(rl.newest())
    provenance = json.loads((GOLDEN / "cpu-loader" / "provenance.json").read_text())
    assert provenance["rules_version"] == "v3"


def test_every_rule_set_names_only_registered_predicate_versions():
    for version in rl.versions():
        for path in sorted((engine.RULES_DIR / version).glob("*.yaml")):
            data = load_yaml(path)
            for entry in [e for key in ("rules", "replace", "add") for e in data.get(key) or []
                          if "predicate" in e]:
                ref = entry["predicate"]
                assert engine.PREDICATE_REF.fullmatch(ref) and "@" in ref, f"{path}: {ref} names no version"
                assert ref in rl.PREDICATES, f"{path}: {ref} is not registered"
        assert all(r.predicate in rl.PREDICATES for r in rl.load_rules(version))
    v1 = {r.name: r.predicate for r in rl.load_rules("v1")}
    v2 = {r.name: r.predicate for r in rl.load_rules("v2")}
    assert v1.keys() == v2.keys()
    assert {n: (v1[n], v2[n]) for n in v1 if v1[n] != v2[n]} == {
        "log_states_its_case": ("harness_log_states_its_case@1", "harness_log_states_its_case@2")}
    v3 = {r.name: r.predicate for r in rl.load_rules("v3")}  # v3: the closed world of a harness log
    assert {n: v3[n] for n in v3 if v2.get(n) != v3[n]} == {
        "log_states_its_case": "harness_log_states_its_case@3", "steps_agree_with_their_clock":
        "steps_agree_with_their_clock@2", "log_is_the_harness_own": "harness_log_closed@1",
        "repeats_are_separate_runs": "repeats_are_separate_runs@1",
        "suite_is_the_builtin_it_names": "suite_is_the_builtin_it_names@1", "code_that_ran_recorded":
        "code_that_ran_recorded@1", "only_declared_repeats": "repeats_exactly_declared@2",
        "published_claims_derive": "claims_derive@2"}
    v4 = {r.name: r.predicate for r in rl.load_rules("v4")}  # v4: closed field by field, programs too, GPU samples
    assert {n: (v3.get(n), v4[n]) for n in v4 if v3.get(n) != v4[n]} == {
        "program_code_at_pin": ("program_code_pinned@1", "program_code_pinned@2"),
        "environment_consistent": ("environment_consistent@1", "environment_consistent@2"),
        "log_is_the_harness_own": ("harness_log_closed@1", "harness_log_closed@2"),
        "gpu_telemetry_holds": (None, "gpu_telemetry_holds@1"),
        "program_log_states_its_job": (None, "program_log_states_its_job@1")}
    v5 = {r.name: r.predicate for r in rl.load_rules("v5")}  # v5: run.json's telemetry figures too
    assert {n: (v4.get(n), v5[n]) for n in v5 if v4.get(n) != v5[n]} == {
        "gpu_telemetry_holds": ("gpu_telemetry_holds@1", "gpu_telemetry_holds@2")}
    assert (rl.PREDICATES["gpu_telemetry_holds@1"].fixed, rl.PREDICATES["gpu_telemetry_holds@2"].fixed) == (
        {"run_json_copy": False}, {"run_json_copy": True})
    v6 = {r.name: r.predicate for r in rl.load_rules("v6")}  # v6: one reader's refusals named; samples by the files
    assert {n: (v5.get(n), v6[n]) for n in v6 if v5.get(n) != v6[n]} == {
        "gpu_telemetry_holds": ("gpu_telemetry_holds@2", "gpu_telemetry_holds@3"),
        "every_log_read": (None, "logs_read@1"),
        "program_figure_agrees_with_its_clock": (None, "program_figure_agrees_with_its_clock@1"),
        "repeats_are_separate_runs": ("repeats_are_separate_runs@1", "repeats_are_separate_runs@2"),
        "program_code_at_pin": ("program_code_pinned@2", "program_code_pinned@3"),
        "program_as_published": ("program_command_is_recipe@1", "program_command_is_recipe@2")}
    assert rl.PREDICATES["gpu_telemetry_holds@3"].fixed == {"run_json_copy": True, "by_files": True, "identity": True}
    assert [rl.PREDICATES[f"program_code_pinned@{n}"].fixed for n in (1, 2, 3, 4)] == [
        {"clean": False, "forced_passes": True, "older_named": False},
        {"clean": True, "forced_passes": True, "older_named": False},
        {"clean": True, "forced_passes": False, "older_named": False},
        {"clean": True, "forced_passes": False, "older_named": True}]
    # claims_derive@2 bounds a method's scale by its log's ranks and refuses a log listed twice; @1 (v1, v2) did not
    assert (rl.PREDICATES["claims_derive@1"].fixed, rl.PREDICATES["claims_derive@2"].fixed) == (
        {"strict": False}, {"strict": True})
    v9 = {r.name: r.predicate for r in rl.load_rules("v9")}  # v10: three more formats held to their clocks
    v10 = {r.name: r.predicate for r in rl.load_rules("v10")}
    assert {n: (v9.get(n), v10[n]) for n in v10 if v9.get(n) != v10[n]} == {
        "program_figure_agrees_with_its_clock": ("program_figure_agrees_with_its_clock@2",
                                                 "program_figure_agrees_with_its_clock@3")}
    clock = [rl.PREDICATES[f"program_figure_agrees_with_its_clock@{n}"].fixed for n in (1, 2, 3)]
    assert clock[:2] == [{"by_figure": False}, {"by_figure": True}]
    assert clock[2] == {"by_figure": True, "formats": (
        "dle-pytorch", "dle-mxnet", "dle-tf1", "tf2-keras-timehistory", "paddleclas", "dle-bert-pytorch",
        "dle-transformer-pytorch")}
    v11 = {r.name: r.predicate for r in rl.load_rules("v11")}  # v11: failed repeats and pre-v4 records named
    assert {n: (v10.get(n), v11[n]) for n in v11 if v10.get(n) != v11[n]} == {
        "repeats_as_declared": ("repeats_at_least@1", "repeats_at_least@2"),
        "every_log_read": ("logs_read@1", "logs_read@2"),
        "program_code_at_pin": ("program_code_pinned@3", "program_code_pinned@4")}
    assert [rl.PREDICATES[f"repeats_at_least@{n}"].fixed for n in (1, 2)] == [
        {"failed_named": False}, {"failed_named": True}]


def test_each_version_compares_its_own_frozen_case_keys():
    (case,) = suites.load_suite(next(GOLDEN.glob("cpu-loader/run/*/suite.yaml"))).cases  # ImageNet, loader cpu
    assert case.loader == "cpu"
    v1_keys = ("framework", "model", "batch_size", "precision", "image_size", "layout", "mode")  # frozen here
    assert predicates.case_keys(1) == v1_keys and predicates.case_keys(2) == (*v1_keys[:5], "loader", *v1_keys[5:])
    assert predicates.PREDICATES["harness_log_states_its_case@1"].fixed == {"keys": predicates.case_keys(1)}
    assert predicates.PREDICATES["harness_log_states_its_case@2"].fixed == {"keys": predicates.case_keys(2)}
    # v1: what it compared before 61ae5b2 added the loader
    assert set(predicates._declared_start(case, predicates.case_keys(1))) == {
        "framework", "model", "precision", "local_batch", "ranks", "image_size", "layout", "mode"}
    assert predicates._declared_start(case, predicates.case_keys(2)) == {
        **predicates._declared_start(case, predicates.case_keys(1)), "loader": case.loader}
    assert "--loader" not in predicates._declared_flags(case, predicates.case_keys(1))
    assert predicates._declared_flags(case, predicates.case_keys(2))["--loader"] == case.loader
    # the newest version compares every key the contract marks checked; a key newly checked names a new version
    assert set(predicates.case_keys(max(contract.CHECK_VERSIONS))) == {st.key for st in contract.SETTINGS
                                                                       if st.checked}


def test_a_checked_version_that_skips_one_is_refused():
    """checked=N is a version of the case check, not a rule set's number: a new key checked from 5 where the last is
    3 would register @4, identical to @3."""
    assert contract.CHECK_VERSIONS == (1, 2, 3)
    skipping = [*contract.SETTINGS, dataclasses.replace(contract.BY_KEY["loader"], key="toy", checked=5)]
    with pytest.raises(ValueError, match=r"checked= values \(1, 2, 3, 5\) skip a version: .* the next being 4"):
        contract.check_versions(skipping)
    assert contract.check_versions([*contract.SETTINGS, dataclasses.replace(contract.BY_KEY["loader"], key="toy",
                                                                             checked=4)]) == (1, 2, 3, 4)


def write_rules(tmp_path: Path, predicate: str, args: str = "") -> Path:
    path = tmp_path / "v9" / "training.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"schema_version: 1\nrules:\n  - name: r\n    predicate: {predicate}\n{args}")
    return path


@pytest.mark.parametrize(("ref", "args", "says"), [
    ("harness_log_states_its_case@4", "",
     "training.yaml:4: predicate: unknown predicate harness_log_states_its_case@4; known: "
     "harness_log_states_its_case@1, harness_log_states_its_case@2, harness_log_states_its_case@3"),
    ("window_clean@latest", "", "training.yaml:4: predicate: 'window_clean@latest' is not a predicate reference"),
    ("window_clean@0", "", "training.yaml:4: predicate: 'window_clean@0' is not a predicate reference"),
    ("harness_log_states_its_case@1", "    args: {keys: [loader]}\n",
     "training.yaml:5: args.keys: harness_log_states_its_case@1 takes no argument 'keys'"),
])
def test_a_bad_predicate_reference_names_file_line_and_key(tmp_path, ref, args, says):
    with pytest.raises(ConfigError) as caught:
        engine._load_file(write_rules(tmp_path, ref, args))
    assert says in str(caught.value)


@pytest.fixture
def rule_sets(tmp_path, monkeypatch) -> Path:
    """A copy of the kit's rule sets, read by the engine in place of its own."""
    copy = tmp_path / "rules"
    for version in rl.versions():
        shutil.copytree(engine.RULES_DIR / version, copy / version)
    monkeypatch.setattr(engine, "RULES_DIR", copy)
    return copy


def test_every_set_after_v1_is_its_base_plus_its_changes():
    for version in rl.versions()[1:]:
        assert [p.name for p in (engine.RULES_DIR / version).iterdir()] == [engine.CHANGES], version
        base = yaml.safe_load((engine.RULES_DIR / version / engine.CHANGES).read_text())["base"]
        assert int(base[1:]) == int(version[1:]) - 1, version


def test_a_toy_rule_set_is_the_last_one_plus_what_it_replaces_adds_and_removes(rule_sets):
    newest = rl.newest()
    toy = f"v{int(newest[1:]) + 1}"
    (rule_sets / toy).mkdir()
    (rule_sets / toy / engine.CHANGES).write_text(textwrap.dedent(f"""\
        schema_version: 1
        base: {newest}
        why: a toy set
        replace:
          - name: log_states_its_case
            predicate: harness_log_states_its_case@1
          - name: repeats_as_declared
            description: now said otherwise
        add:
          - name: at_least_two_repeats
            after: repeats_as_declared
            predicate: repeats_at_least
            args: {{minimum: 2}}
        remove: [every_log_read]
        """))
    assert rl.versions()[-1] == toy and rl.newest() == toy
    before = {r.name: r for r in rl.load_rules(newest)}
    after = rl.load_rules(toy)
    names = [r.name for r in after]
    assert set(names) == set(before) - {"every_log_read"} | {"at_least_two_repeats"}
    assert names.index("at_least_two_repeats") == names.index("repeats_as_declared") + 1
    by_name = {r.name: r for r in after}
    assert by_name["log_states_its_case"].predicate == "harness_log_states_its_case@1"
    assert by_name["log_states_its_case"].description == before["log_states_its_case"].description
    assert (by_name["repeats_as_declared"].predicate, by_name["repeats_as_declared"].description) == (
        before["repeats_as_declared"].predicate, "now said otherwise")
    assert (by_name["at_least_two_repeats"].predicate, by_name["at_least_two_repeats"].args) == (
        "repeats_at_least@1", {"minimum": 2})
    unchanged = [n for n in names if n not in ("log_states_its_case", "repeats_as_declared", "at_least_two_repeats")]
    assert all(by_name[n].predicate == before[n].predicate and by_name[n].args == before[n].args for n in unchanged)
    assert [r.name for r in rl.load_rules(newest)] == list(before)  # the base unchanged


@pytest.mark.parametrize(("body", "says"), [
    ("base: v99\nwhy: x\n", "changes.yaml:2: base: base 'v99' is not an older rule set of this kit"),
    ("base: v1\nwhy: x\nreplace:\n  - {name: no_such_rule, description: y}\n",
     "changes.yaml:5: name: replace: 'no_such_rule' is no rule of v1 (add it instead)"),
    ("base: v1\nwhy: x\nadd:\n  - {name: repeats_as_declared, predicate: repeats_at_least}\n",
     "changes.yaml:5: name: add: 'repeats_as_declared' is already a rule of v1 (replace it instead)"),
    ("base: v1\nwhy: x\nadd:\n  - {name: new, after: nowhere, predicate: repeats_at_least}\n",
     "changes.yaml:5: after: add: after 'nowhere', which is no rule here"),
    ("base: v1\nwhy: x\nremove: [nothing]\n", "changes.yaml:4: remove[1]: 'nothing' is no rule of v1"),
    ("base: v1\nwhy: x\nrules: []\n", "changes.yaml:4: rules: unknown key; known: schema_version, base, why"),
    ("base: v1\nwhy: x\nreplace:\n  - {name: repeats_as_declared, predicat: x}\n",
     "changes.yaml:5: predicat: unknown key; known: name, predicate, args, description"),
    ("base: v1\nreplace: []\n", "changes.yaml:1: why: missing required key"),
])
def test_a_bad_change_names_file_line_and_key(rule_sets, body, says):
    newest = rl.newest()
    toy = f"v{int(newest[1:]) + 1}"
    (rule_sets / toy).mkdir()
    (rule_sets / toy / engine.CHANGES).write_text("schema_version: 1\n" + body)
    with pytest.raises(ConfigError) as caught:
        rl.load_rules(toy)
    assert says in str(caught.value), str(caught.value)


def test_a_bare_name_is_version_1_and_a_rule_carries_its_identity(tmp_path):
    (rule,) = engine._load_file(write_rules(tmp_path, "repeats_at_least", "    args: {minimum: 2}\n"))
    assert (rule.predicate, rule.args) == ("repeats_at_least@1", {"minimum": 2})


def test_kit_verify_rules_v1_gives_v1s_verdict(capsys):
    from kit.cli import main

    said_gpu = str(GOLDEN / "cpu-loader-says-gpu")
    assert main(["verify", said_gpu, "--rules", "v1"]) == 0
    assert "OK   log_states_its_case: 1 checked" in capsys.readouterr().out
    assert main(["verify", said_gpu]) == 1
    out = capsys.readouterr().out
    assert "FAIL log_states_its_case: 1 checked" in out and "loader 'gpu' (the case: 'cpu')" in out
    assert main(["verify", said_gpu, "--rules", "v99"]) == 2
    assert "no rule set 'v99' in this kit; known: v1, v2, v3" in capsys.readouterr().err
    assert main(["verify", said_gpu, "--json", "--rules", "v1"]) == 0
    predicates_used = {r["rule"]: r["predicate"] for r in json.loads(capsys.readouterr().out)["rules"]}
    assert predicates_used["log_states_its_case"] == "harness_log_states_its_case@1"


def test_verify_s_first_line_names_the_rule_set_applied_and_the_one_the_bundle_was_made_under():
    root = GOLDEN / "cpu-loader"  # made under v3
    newest = verify_tree(root)
    assert newest.lines()[0] == f"kit verify {root}: rule set {rl.newest()}; the bundle was made under 'v3': another " \
                                "rule set judges it"
    assert (newest.to_dict()["rules_version"], newest.to_dict()["made_under"]) == (rl.newest(), "v3")
    assert verify_tree(root, rules_version="v3").lines()[0].endswith(
        "rule set v3 (the one the bundle was made under)")
