"""Auditor bundles of a REAL run (Paddle + PyTorch training on this CPU): make, sign, verify, tamper, break rules."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import redeclare_suite
from kitlogs import rewrite_kitlog

from kit.audit import bundle as bd
from kit.audit import rules as rl
from kit.audit.verify import verify, verify_tree
from kit.cli import main
from kit.config.suites import load_suite
from kit.core import runlock
from kit.images.deliver import record
from kit.results.html import HTML_NAME
from kit.run import bench, records

SUITE = """\
schema_version: 1
name: audit
description: two frameworks, one and two processes, for the bundle tests
hardware: cpu
defaults: {warmup_steps: 2, measure_steps: 10, repeats: 2, batch_size: 2, image_size: 32, num_classes: 10,
           timeout_s: 300}
cases:
  - framework: [torch, paddle]
    model: resnet50
    gpus_per_node: 2
    repeats: 1
  - framework: [torch, paddle]
    model: resnet50
"""


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("audit")
    (base / "audit.yaml").write_text(SUITE)
    run_dir, suite = records.start(base / "audit.yaml", base / "runs")
    result = bench.run_bench(run_dir, suite)
    assert not result.failed, [o.reason for o in result.failed]
    return run_dir


def fresh_copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs" / run_dir.name
    shutil.copytree(run_dir, target)
    return target


def unpacked(bundle: Path, into: Path) -> Path:
    return bd.unpack(bundle, into)


@pytest.fixture(scope="module")
def signer(tmp_path_factory) -> tuple[Path, Path]:
    keys = tmp_path_factory.mktemp("keys")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "auditor", "-f", str(keys / "id")],
                   check=True)
    allowed = keys / "allowed_signers"
    allowed.write_text(f"operator@lab namespaces=\"kit-bundle\" {(keys / 'id.pub').read_text().strip()}\n")
    return keys / "id", allowed


def test_bundle_of_a_real_run_verifies_and_carries_everything(real_run, tmp_path, capsys):
    run = fresh_copy(real_run, tmp_path)
    assert main(["bundle", str(run), "--submitter", "Kit Lab", "--system-name", "ci-box"]) == 0
    bundle = run.parent / f"{run.name}.bundle.tar.gz"
    assert bundle.is_file() and "signature: unsigned" in capsys.readouterr().out
    assert main(["verify", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "UNSIGNED" in out and "\nCONSISTENT, authenticity NOT checked: every file intact" in out
    assert "\nOK" not in out and "give --allowed-signers FILE" in out
    for rule in ("repeats_as_declared", "every_rank_logged", "results_recomputed", "report_recomputed",
                 "environment_consistent", "warmup_skipped", "measured_steps"):
        assert f"OK   {rule}:" in out, rule

    root = unpacked(bundle, tmp_path / "open")
    manifest = json.loads((root / "manifest.json").read_text())
    listed = set(manifest["files"])
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {"manifest.json"}
    assert listed == on_disk and manifest["schema_version"] == 1
    page = run / HTML_NAME  # a rendering of the files bundled: `kit report` makes it again (test_report_html.py)
    every_source = {f"run/{run.name}/{p.relative_to(run).as_posix()}" for p in run.rglob("*") if p.is_file()
                    and p.name != runlock.LOCK_NAME and p != page}  # who wrote the run last (pid, host): not the run's
    assert every_source <= listed, "every file of the run directory rides in the bundle"
    assert page.is_file() and f"run/{run.name}/{HTML_NAME}" not in listed
    assert f"run/{run.name}/{runlock.LOCK_NAME}" not in listed
    assert any("/launcher/" in f and "workerlog.1" in f for f in listed), "rank logs of the launcher too"
    for name, entry in manifest["files"].items():
        assert entry["sha256"] == bd.sha256_file(root / name)

    system = json.loads((root / "system.json").read_text())
    assert (system["submitter"], system["system_name"], system["number_of_nodes"]) == ("Kit Lab", "ci-box", "1")
    capture = json.loads((root / "run" / run.name / "env").glob("*/capture.json").__next__().read_text())
    assert system["host_processor_core_count"] == str(capture["cpu"]["cores"])
    assert system["operating_system"] == capture["os_release"]
    assert system["framework"].startswith("paddle 3.") and "torch 2." in system["framework"]
    from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

    valid, name, *_ = check_system_desc(str(root / "system.json"), "training", "4.1.0")
    assert valid and name == "ci-box"

    commands = json.loads((root / "commands.json").read_text())
    assert len(commands) == 6  # two repeats of each one-process case, one of each two-process case
    entry = commands["logs/paddle/resnet50/bz2/1n2g/resnet50_b2_fp32_1.log"]
    assert "paddle.distributed.launch" in entry["argv"] and entry["env"]["GLOO_SOCKET_IFNAME"] == "lo"
    provenance = json.loads((root / "provenance.json").read_text())
    assert provenance["rules_version"] == rl.newest() and len(provenance["kit_commit_at_run"]["commit"]) == 40


def test_any_single_byte_flip_fails_and_names_the_file(real_run, tmp_path, signer):
    key, allowed = signer
    run = fresh_copy(real_run, tmp_path)
    bundle = bd.make_bundle(run, sign_key=key, submitter="Lab", system_name="box")
    pristine = unpacked(bundle, tmp_path / "pristine")
    assert verify_tree(pristine, allowed).ok
    files = sorted(p.relative_to(pristine).as_posix() for p in pristine.rglob("*") if p.is_file())
    rng = random.Random(20261121)
    picks = files + [rng.choice(files) for _ in range(40)]  # every file once, then more at random
    for i, name in enumerate(picks):
        tree = tmp_path / f"m{i}" / pristine.name
        shutil.copytree(pristine, tree)
        data = bytearray((tree / name).read_bytes())
        if not data:
            continue
        at = rng.randrange(len(data))
        data[at] ^= rng.randrange(1, 256)
        (tree / name).write_bytes(bytes(data))
        result = verify_tree(tree, allowed)
        assert not result.ok, f"flip at byte {at} of {name} went unnoticed"
        assert name in {v.file for v in result.violations}, (name, [v.where for v in result.violations][:5])
        shutil.rmtree(tree.parent)

    raw = bytearray(bundle.read_bytes())  # the archive itself
    for at in (len(raw) // 3, len(raw) // 2, len(raw) - 5):
        broken = tmp_path / f"broken-{at}.tar.gz"
        mutated = bytearray(raw)
        mutated[at] ^= 0x5A
        broken.write_bytes(bytes(mutated))
        result = verify(broken, allowed)
        assert not result.ok and result.violations[0].file in (broken.name, *files), result.violations[0]


def test_edited_figures_are_caught_by_recomputation_even_with_a_rebuilt_manifest(real_run, tmp_path):
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), submitter="Lab", system_name="box")
    root = unpacked(bundle, tmp_path / "open")
    run = next((root / "run").iterdir())
    results = json.loads((run / "results.json").read_text())
    case = results["groups"][0]["cases"][0]
    case["runs"][0]["value"] *= 1.25  # a better figure than the log gives
    (run / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    report = (run / "report.md").read_text().splitlines()
    row = next(i for i, line in enumerate(report) if line.startswith("| 1 |"))
    report[row] = report[row].replace("| 1 |", "| 1 |", 1).replace(" | ", " | 9", 2)
    (run / "report.md").write_text("\n".join(report) + "\n")
    bd.write_manifest(root)  # the forger rebuilds the manifest; there was no signing key to redo
    result = verify_tree(root)
    assert not [v for v in result.violations if v.rule == "integrity"]
    by_rule = {v.rule: v for v in result.violations}
    assert set(by_rule) == {"results_recomputed", "report_recomputed"}
    assert by_rule["results_recomputed"].file == "results.json" and by_rule["results_recomputed"].line
    assert "groups[0].cases[0].runs[0].value" in by_rule["results_recomputed"].message
    assert by_rule["report_recomputed"].where == f"report.md:{row + 1}"


def test_signatures_standard_openssh(real_run, tmp_path, signer, capsys):
    key, allowed = signer
    signed = bd.make_bundle(fresh_copy(real_run, tmp_path), tmp_path / "signed.tar.gz", sign_key=key,
                            submitter="Lab", system_name="box")
    assert main(["verify", str(signed), "--allowed-signers", str(allowed)]) == 0
    out = capsys.readouterr().out
    assert "VALID - good signature by operator@lab" in out and "\nOK: every file intact" in out
    assert main(["verify", str(signed)]) == 0  # intact, signer not checked: said, not failed
    out = capsys.readouterr().out
    assert "UNCHECKED" in out and "\nCONSISTENT, authenticity NOT checked: every file intact" in out
    assert main(["verify", str(signed), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "CONSISTENT, authenticity NOT checked"
    root = unpacked(signed, tmp_path / "open")  # the same sig checks with ssh-keygen by hand
    done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "operator@lab", "-n",
                           "kit-bundle", "-s", str(root / "manifest.json.sig")],
                          stdin=open(root / "manifest.json", "rb"), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    other = tmp_path / "other_signers"
    other.write_text(f"someone@else {(stranger.with_suffix('.pub')).read_text().strip()}\n")
    assert main(["verify", str(signed), "--allowed-signers", str(other)]) == 1
    assert "[signature] manifest.json.sig: signed by a key that" in capsys.readouterr().out
    unsigned = bd.make_bundle(fresh_copy(real_run, tmp_path / "u"), submitter="Lab", system_name="box")
    assert main(["verify", str(unsigned), "--allowed-signers", str(allowed)]) == 1
    assert "missing, but --allowed-signers asks for a signed bundle" in capsys.readouterr().out


def test_missing_rank_log_fails_every_rank_logged(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    victim = run / "launcher/paddle/resnet50/bz2/1n2g/fp32/1/workerlog.1"
    assert '"rank_stop"' in victim.read_text()
    victim.unlink()  # a rank whose log never came back
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    assert [(v.rule, v.file) for v in result.violations] == [
        ("every_rank_logged", "logs/paddle/resnet50/bz2/1n2g/resnet50_b2_fp32_1.log")]
    assert "no log of rank(s) 1 of 2" in result.violations[0].message


def test_a_log_of_another_case_filed_under_this_one_fails_log_states_its_case(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    torch_log = run / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    torch_log.write_bytes((run / "logs/paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log").read_bytes())
    bench.write_report(run, load_suite(run / "suite.yaml"))  # a report rebuilt to agree with the swapped log
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    assert sorted((v.rule, v.file) for v in result.violations) == [  # a byte copy is also a repeat counted twice
        ("log_is_the_harness_own", "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log"),  # v4: its repeats differ
        ("log_states_its_case", "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"),
        ("only_declared_repeats", "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log")]
    v = next(v for v in result.violations if v.rule == "log_states_its_case")
    assert "run_start says framework 'paddle' (the case: 'torch')" in v.message
    assert '"event": "run_start"' in torch_log.read_text().splitlines()[v.line - 1]


def test_a_recorded_command_of_another_case_fails_log_states_its_case(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    meta = json.loads((run / "run.json").read_text())
    entry = meta["runs"]["logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log"]
    at = entry["argv"].index("--batch-size")
    entry["argv"][at + 1] = "16"
    (run / "run.json").write_text(json.dumps(meta, indent=2))
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    assert [(v.rule, v.file) for v in result.violations] == [("log_states_its_case", "run.json")]
    assert "run 2: run.json's command ran --batch-size '16' (the case: '2')" in result.violations[0].message


def test_extra_or_duplicated_repeats_never_enter_the_median(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    case = run / "logs/torch/resnet50/bz2/1n1g"
    best = max((1, 2), key=lambda r: records.figure_of(case / f"resnet50_b2_fp32_{r}.log", run / "logs"))
    for name in ("resnet50_b2_fp32_3.log", "resnet50_b2_fp32_03.log"):  # undeclared repeats, not in run.json
        (case / name).write_bytes((case / f"resnet50_b2_fp32_{best}.log").read_bytes())
    (case / "resnet50_b2_fp32_\u0664.log").write_bytes((case / f"resnet50_b2_fp32_{best}.log").read_bytes())
    bench.write_report(run, load_suite(run / "suite.yaml"))
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    found = sorted((v.rule, v.file.rsplit("/", 1)[-1], v.message.split(": ", 1)[1]) for v in result.violations)
    separate = [f for f in found if f[0] == "repeats_are_separate_runs"]
    assert [f for f in found if f[0] != "repeats_are_separate_runs"] == [
        ("only_declared_repeats", "resnet50_b2_fp32_03.log", "byte-identical to "
         f"logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_{best}.log (one run counted twice)"),
        ("only_declared_repeats", "resnet50_b2_fp32_03.log", "run 3 is not one of the suite's 2 declared repeat(s)"),
        ("only_declared_repeats", "resnet50_b2_fp32_03.log", "run.json records no such run (a log added after the run)"),
        ("only_declared_repeats", "resnet50_b2_fp32_3.log", "byte-identical to "
         f"logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_{best}.log (one run counted twice)"),
        ("only_declared_repeats", "resnet50_b2_fp32_3.log", "run 3 is not one of the suite's 2 declared repeat(s)"),
        ("only_declared_repeats", "resnet50_b2_fp32_3.log", "run.json records no such run (a log added after the run)"),
    ]
    assert {(file, message.split(" ran ")[1]) for _rule, file, message in separate} == {  # v3: they share a clock
        (name, "at the same time on their clocks (time_ms): one run's records, or two copies")
        for name in ("resnet50_b2_fp32_3.log", "resnet50_b2_fp32_03.log")}
    # the non-ASCII digit is no repeat number at all: not a run log, so it never enters a median
    from kit.core.layout import Stray, classify
    assert isinstance(classify(case / "resnet50_b2_fp32_\u0664.log", run / "logs"), Stray)


def test_a_json_key_given_twice_is_refused_not_last_wins(real_run, tmp_path, capsys):
    run = fresh_copy(real_run, tmp_path)
    log = run / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    lines = log.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"event": "step"' in line)
    lines[at] = lines[at].replace('"global_batch": 2,', '"global_batch": 2, "global_batch": 200,', 1)
    log.write_text("".join(lines))
    assert main(["extract", str(log)]) == 2
    assert f"resnet50_b2_fp32_1.log:{at + 1}: no figure: :::KITLOG line is not valid JSON (duplicate key " \
        "'global_batch'" \
        in capsys.readouterr().err
    folder = unpacked(bd.make_bundle(fresh_copy(real_run, tmp_path / "clean"), submitter="Lab", system_name="box"),
                      tmp_path / "unpacked")
    (run_json,) = folder.glob("run/*/run.json")
    meta = run_json.read_text()
    run_json.write_text(meta.replace('"suite": "audit",', '"suite": "audit", "suite": "local",', 1))
    result = verify(folder)  # a forger's bundle: run.json edited after bundling
    assert any("duplicate key 'suite'" in v.message for v in result.violations + result.integrity), result
    (run / "run.json").write_text(meta.replace('"suite": "audit",', '"suite": "audit", "suite": "local",', 1))
    with pytest.raises(bd.BundleError, match="run.json: not JSON \\(duplicate key 'suite'"):
        bd.make_bundle(run, submitter="Lab", system_name="box")


def test_step_records_that_contradict_their_own_clock_fail(real_run, tmp_path):
    def halved(d):  # its rates and run_stop too: the grammar holds, the clock does not
        if d["event"] == "step":
            d["seconds"] = round(d["seconds"] / 2, 6)
            d["samples_per_sec"] = round(d["global_batch"] / d["seconds"], 3)
        if d["event"] == "run_stop":
            d["seconds"] = round(d["seconds"] / 2, 6)
            d["samples_per_sec"] = d["throughput"] = round(d["samples_per_sec"] * 2, 3)
        yield d

    steps: list[dict] = []

    def fastest_ten_times(d):  # every measured step line replaced by a copy of the fastest one
        if d["event"] != "step":
            yield d
        elif not steps:
            steps.extend(json.loads(line[len(":::KITLOG "):]) for line in log.read_text().splitlines()
                         if '"event": "step"' in line)
            yield from [min(steps, key=lambda e: e["seconds"])] * len(steps)

    def long_ago(d):
        yield {**d, "time_ms": d["time_ms"] - 400 * 86400 * 1000} if "time_ms" in d else d

    for edit, rule, message in ((halved, "steps_agree_with_their_clock", "less than 97%"),
                                (fastest_ten_times, "every_log_read", " is due"),  # which: the fastest's number
                                (long_ago, "steps_agree_with_their_clock", "lies outside the run's window in run.json")):
        run = fresh_copy(real_run, tmp_path / edit.__name__)
        log = run / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
        rewrite_kitlog(log, edit)
        bench.write_report(run, load_suite(run / "suite.yaml"))
        result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
        found = [v for v in result.violations if v.rule == rule]
        assert found and any(message in v.message for v in found), (edit.__name__, result.violations)
        if edit is fastest_ten_times:
            assert any(re.search(r"a step that says step (\d+) where step (?!\1\b)\d+ is due", v.message)
                       for v in found), found
        assert {v.file for v in found} == {"logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"}


def test_one_field_is_no_memory_bomb_and_no_message_echoes_a_huge_value(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    log = run / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"

    def bomb(d):
        yield {**d, "ranks": 20_000_000, "data": "x" * 15_000_000} if d["event"] == "run_start" else d

    rewrite_kitlog(log, bomb)
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 500, grown_mib  # set(range(20_000_000)) alone took ~2 GB
    ranks = [v for v in result.violations if v.rule == "every_log_read"]  # the grammar: one rank_stop, of ranks 1
    assert len(ranks) == 1 and "a step that says ranks 1 (run_start: 20000000)" in ranks[0].message
    assert result.violations and max(len(v.message) for v in result.violations) < 600
    assert sum(len(line) for line in result.lines()) < 20_000


def test_fewer_repeats_than_declared_fails_with_the_suite_line(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    gone = "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log"
    (run / gone).unlink()
    meta = json.loads((run / "run.json").read_text())  # and run.json edited to say it never ran (else: incomplete)
    del meta["runs"][gone]
    meta["planned_runs"] = [p for p in meta["planned_runs"] if p["log"] != gone]
    (run / "run.json").write_text(json.dumps(meta))
    bench.write_report(run, load_suite(run / "suite.yaml"))  # the run's own report, one repeat short
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    assert [v.rule for v in result.violations] == ["repeats_as_declared"]
    v = result.violations[0]
    suite_lines = (run / "suite.yaml").read_text().splitlines()
    assert v.file == "suite.yaml" and suite_lines[v.line - 1].lstrip().startswith("- framework:")
    assert "torch/resnet50/bz2/1n1g/fp32: 1 run(s) with a figure, the suite declares 2 repeats" in v.message


def test_unbounded_references_are_shown_not_checked_and_bounded_ones_need_the_unit(real_run, tmp_path):
    """Seed 003's way: a figure from another program is shown beside the median (null bounds), never a violation,
    even in a unit the run does not measure; a bounded reference in another unit is one."""
    run = fresh_copy(real_run, tmp_path)

    def declare(text: str) -> None:  # as if the run had started with these references
        redeclare_suite(run, text)
        bench.write_report(run, load_suite(run / "suite.yaml"))

    refs = """
    references:
      - {framework: torch, gpus_per_node: 1, value: 1000000, lower: null, upper: null, unit: samples/s, source: shown}
      - {framework: paddle, gpus_per_node: 1, value: 4.9, lower: null, upper: null, unit: steps/s, source: other unit}
"""
    declare(SUITE + refs.lstrip("\n"))
    report = (run / "report.md").read_text()
    assert "| 1e+06 samples/s |  ..  | 0.000 | shown (unbounded) | shown |" in report
    assert "| 4.9 steps/s |  ..  |  | not comparable (images/s) | other unit |" in report
    assert verify(bd.make_bundle(run, submitter="Lab", system_name="box")).violations == []

    bounded = refs.replace("value: 4.9, lower: null", "value: 4.9, lower: -0.5")
    declare(SUITE + bounded.lstrip("\n"))
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box", force=True))
    assert [(v.rule, v.message) for v in result.violations] == [
        ("references_hold", "paddle/resnet50/bz2/1n1g/fp32: reference in steps/s, measured in images/s")]


def test_kit_report_on_a_run_keeps_the_report_verify_recomputes(real_run, tmp_path, monkeypatch, capsys):
    """`kit report RUN` (`make report`) rewrites the run's own report (its cases' rules, its suite's references);
    another method reads logs/ only and reports outside the run."""
    run = fresh_copy(real_run, tmp_path)
    bench.write_report(run, load_suite(run / "suite.yaml"))  # as the bench left it, here (results.json names it)

    def written() -> tuple[bytes, bytes]:
        return (run / "report.md").read_bytes(), (run / "results.json").read_bytes()

    own = written()
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(run)]) == 0
    assert written() == own
    assert main(["report", str(run), "--skip", "3"]) == 0
    assert written() == own
    elsewhere = json.loads((tmp_path / "reports" / run.name / "results.json").read_text())
    assert {g["framework"] for g in elsewhere["groups"]} == {"paddle", "torch"}  # logs/, not hosts/
    capsys.readouterr()
    assert verify(bd.make_bundle(run, submitter="Lab", system_name="box")).violations == []


NLP_SUITE = """\
schema_version: 1
name: nlp
description: seed 003's NLP models, timed over whole epochs, for the bundle tests
hardware: cpu
defaults: {warmup_steps: 1, repeats: 1, timeout_s: 300, size: tiny, seq_len: 32, corpus_size: 12,
           measure_epochs: 2}
cases:
  - {framework: [torch, paddle], model: bert, batch_size: 4}
  - {framework: torch, model: transformer, batch_size: 256}
"""


def test_a_real_nlp_run_verifies_clean(tmp_path):
    """BERT and Transformer runs (whole epochs, sequences/s and tokens/s, "tokens" counts in every line) bundle and
    verify with no violation: two epochs declared, two measured; no count taken for a secret."""
    (tmp_path / "nlp.yaml").write_text(NLP_SUITE)
    run_dir, suite = records.start(tmp_path / "nlp.yaml", tmp_path / "runs")
    result = bench.run_bench(run_dir, suite)
    assert not result.failed, [o.reason for o in result.failed]
    assert {o.unit for o in result.outcomes} == {"sequences/s", "tokens/s"}
    verdict = verify(bd.make_bundle(run_dir, submitter="Lab", system_name="box"))
    assert verdict.violations == []
    checked = {f.rule.name: f.checked for f in verdict.findings}
    assert checked["measured_steps"] == 3 and checked["results_recomputed"] >= 3
    corpus = next(f for f in verdict.findings if f.rule.name == "nlp_steps_are_the_corpus")
    assert corpus.checked == 3 and not corpus.note, "every NLP run's corpus recomputed by the harness's own code"

    # a forger doubles the Transformer's tokens through every line, consistently (steps, epochs, run_stop and the
    # corpus record; each rate its count over its seconds) and writes the report again: the log's own sums hold
    (log,) = (run_dir / "logs" / "torch" / "transformer").rglob("*.log")

    def doubled(d: dict) -> dict:
        if "tokens" in d:
            d["tokens"] *= 2
            rate = round(d["tokens"] / d["seconds"], 3)
            d |= {k: rate for k in ("tokens_per_sec", "throughput") if k in d}
        if d.get("event") == "corpus":
            d["tokens_per_epoch"] *= 2
        return d

    rewrite_kitlog(log, doubled)
    assert main(["report", str(run_dir)]) == 0
    forged = bd.make_bundle(run_dir, run_dir.parent / "forged.tgz", submitter="Lab", system_name="box")
    assert verify(forged, rules_version="v8").violations == [], "the sums hold: v8 took it"
    said = [(v.rule, v.line, v.message) for v in verify(forged).violations]
    assert {rule for rule, _, _ in said} == {"nlp_steps_are_the_corpus"}, said
    assert re.fullmatch(r"torch/transformer/bz256/1n1g/fp32 run 1: the corpus record says tokens_per_epoch (\d+) "
                        r"where the corpus has (\d+)", said[0][2]) and said[0][1] == 3, said
    assert re.fullmatch(r".* run 1: epoch 1 step 1: (\d+) sequences, (\d+) tokens where the corpus's batch 1 has "
                        r"\1, (\d+)", said[1][2]), said


def test_mixed_image_ids_fail_same_image_everywhere(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    good, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    record(run, "kit/cpu:abc", good, spec_key="cpu", hosts={"h1": good, "h2": other})
    result = verify(bd.make_bundle(run, submitter="Lab", system_name="box"))
    assert [v.rule for v in result.violations] == ["same_image_everywhere"]
    v = result.violations[0]
    assert v.file == "images.json" and v.line and "h2 sha256:bbbbbbbbbbbb" in v.message and "h1" not in v.message


def test_published_claims_ride_along_and_the_false_one_is_flagged(real_run, tmp_path, published):
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), claims=published / "expected.yaml",
                            submitter="Lab", system_name="box")
    result = verify(bundle)
    flagged = [v for v in result.violations if v.rule == "published_claims_derive"]
    assert result.violations == flagged and len(flagged) == 1
    assert flagged[0].file == "claims/expected.yaml" and "derives: false" in flagged[0].message
    claims = next(f for f in result.findings if f.rule.name == "published_claims_derive")
    assert claims.checked > 20


def _claims_of(tmp_path: Path, published: Path, entry: str) -> Path:
    """A claims folder with DLE TF1's one-GPU log (a whole job's figure) and one claim on it."""
    folder = tmp_path / "claims"
    folder.mkdir(parents=True)
    shutil.copyfile(published / "perf-v100/tensorflow/tf_gpu1_fp32_bs256.txt", folder / "tf1.txt")
    (folder / "claims.yaml").write_text(f"logs:\n  - {entry}\n")
    return folder / "claims.yaml"


def test_v3_refuses_a_bundles_claim_scaled_past_its_logs_ranks_or_listing_a_log_twice(real_run, tmp_path,
                                                                                     published):
    """scale: 1000 on a one-rank log, and x.log with ./x.log (its run counted twice in the mean): v2 took both."""
    run = fresh_copy(real_run, tmp_path)
    for i, (entry, said) in enumerate((
            ("{file: tf1.txt, method: {skip: 5, scale: 1000}, published: 415786, rel_tol: 0.00002}",
             "method scale 1000 exceeds 1: a per-step figure of this format counts every rank already"),
            ("{files: [tf1.txt, ./tf1.txt], method: {skip: 5}, published: 415.786, rel_tol: 0.00002}",
             "claims cannot be read: files: './tf1.txt' is 'tf1.txt' again"))):
        claims = _claims_of(tmp_path / str(i), published, entry)
        bundle = bd.make_bundle(run, tmp_path / f"{i}.bundle.tar.gz", claims=claims, submitter="Lab",
                                system_name="box")
        result = verify(bundle)
        assert [(v.rule, v.file, v.line) for v in result.violations] == [
            ("published_claims_derive", "claims/claims.yaml", 2)], result.violations
        assert said in result.violations[0].message
        assert verify(bundle, rules_version="v2").violations == []


def test_v3_refuses_a_suite_renamed_to_a_builtin_suites_name(real_run, tmp_path):
    """`kit bench` refuses to start such a suite; renamed afterwards (and run.json's fingerprint with it), verify
    refuses it from v3, naming suite.yaml's name line; v2 did not."""
    run = fresh_copy(real_run, tmp_path)
    redeclare_suite(run, SUITE.replace("name: audit", "name: local"))
    bench.write_report(run, load_suite(run / "suite.yaml"))
    bundle = bd.make_bundle(run, submitter="Lab", system_name="box")
    result = verify(bundle)
    assert [(v.rule, v.file, v.line) for v in result.violations] == [
        ("suite_is_the_builtin_it_names", "suite.yaml", 2)], result.violations
    assert "name 'local' is the built-in suite local.yaml" in result.violations[0].message
    assert verify(bundle, rules_version="v2").violations == []
    with pytest.raises(records.RunDirError, match="is the built-in suite"):  # the same check as kit bench's
        records.start(run / "suite.yaml", tmp_path / "runs2")


def test_secrets_are_redacted_in_the_bundle_never_in_the_run(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    env_dump = run / "launcher/paddle/resnet50/bz2/1n2g/fp32/1/backup_env.0.json"
    original = env_dump.read_text()
    env_dump.write_text(original.rstrip()[:-1] + ', "HF_TOKEN": "hf_abcdef123", "WANDB_API_KEY": "k-99"}\n')
    bundle = bd.make_bundle(run, submitter="Lab", system_name="box")
    assert "hf_abcdef123" in env_dump.read_text()
    root = unpacked(bundle, tmp_path / "open")
    copied = (root / "run" / run.name / env_dump.relative_to(run)).read_text()
    assert "hf_abcdef123" not in copied and "k-99" not in copied
    assert '"HF_TOKEN": "<redacted>"' in copied and '"WANDB_API_KEY": "<redacted>"' in copied
    provenance = json.loads((root / "provenance.json").read_text())
    assert sorted(r["key"] for r in provenance["redactions"]) == ["HF_TOKEN", "WANDB_API_KEY"]
    with tarfile.open(bundle) as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert b"hf_abcdef123" not in everything
    assert verify(bundle).ok


def test_bad_input_is_refused_clearly(tmp_path, capsys):
    assert main(["bundle", str(tmp_path)]) == 2
    assert "not a run directory (needs run.json and logs/)" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "nope.tar.gz")]) == 2
    assert "no such bundle" in capsys.readouterr().err
    os.mkfifo(tmp_path / "pipe.tar.gz")
    for special in (tmp_path / "pipe.tar.gz", Path("/dev/zero")):  # a pipe used to hang, /dev/zero to be read
        assert main(["verify", str(special)]) == 2
        assert capsys.readouterr().err == f"kit verify: {special}: not a regular file or folder (a pipe, socket " \
                                          "or device), so not a bundle\n"
    (tmp_path / "truncated.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert main(["verify", str(tmp_path / "truncated.tar.gz")]) == 1
    assert "[integrity] truncated.tar.gz: corrupt or truncated archive" in capsys.readouterr().out
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        link = tarfile.TarInfo("kit-bundle-x/run/x/report.md")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    assert main(["verify", str(evil)]) == 1
    assert "refused member 'kit-bundle-x/run/x/report.md'" in capsys.readouterr().out


def test_what_is_no_bundle_at_all_is_the_auditor_s_bad_input(real_run, tmp_path, signer, capsys):
    """Exit 2 and one line (exit 1 is for a bundle that fails): not gzip, a tarball or folder of something else,
    a public key given as the allowed signers."""
    (tmp_path / "notes.tar.gz").write_text("just text\n")
    source = tmp_path / "src"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "setup.py").write_text("print('a source tarball')\n")
    with tarfile.open(tmp_path / "source.tar.gz", "w:gz") as tar:
        tar.add(source / "pkg", arcname="pkg-1.0")
    for given, why in ((tmp_path / "notes.tar.gz", "not a gzip file"),
                       (tmp_path / "source.tar.gz", "no top folder holds manifest.json, provenance.json, run"),
                       (source, "no manifest.json, provenance.json, run at its top")):
        assert main(["verify", str(given)]) == 2, given
        assert capsys.readouterr().err == (f"kit verify: {given}: not a bundle ({why}): give the .tar.gz `kit "
                                           "bundle` wrote, or its unpacked folder\n")
    key, allowed = signer
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), sign_key=key, submitter="Lab", system_name="box")
    pub = Path(f"{key}.pub")
    assert main(["verify", str(bundle), "--allowed-signers", str(pub)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kit verify: {pub}:1: a public key (ssh-ed25519 ...), not an allowed-signers line: put "
                          "its principal first, e.g. 'auditor@example.org ssh-ed25519 AAAA...'") and err.count("\n") == 1
    assert main(["verify", str(bundle), "--allowed-signers", str(allowed)]) == 0


def _forge(root: Path, key: Path, **provenance) -> None:
    """What an operator with the signing key can do: edit provenance.json, rebuild the manifest, re-sign it."""
    prov = json.loads((root / "provenance.json").read_text())
    prov.update(provenance)
    (root / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
    bd.write_manifest(root)
    (root / "manifest.json.sig").unlink(missing_ok=True)
    bd.sign(root / "manifest.json", key)


def test_derived_files_edited_under_a_good_signature_fail(real_run, tmp_path, signer):
    key, allowed = signer
    root = unpacked(bd.make_bundle(fresh_copy(real_run, tmp_path), sign_key=key, submitter="Lab",
                                   system_name="box"), tmp_path / "open")
    assert verify_tree(root, allowed).ok
    run = next((root / "run").iterdir())
    csv_text = (run / "results.csv").read_text()
    rows = csv_text.splitlines()
    header, first = rows[0].split(","), rows[1].split(",")
    at = header.index("median")
    first[at] = str(float(first[at]) * 10)
    (run / "results.csv").write_text("\n".join([rows[0], ",".join(first), *rows[2:]]) + "\n")
    _forge(root, key)
    result = verify_tree(root, allowed)
    assert [(v.rule, v.file, v.line) for v in result.violations] == [("derived_files_recomputed", "results.csv", 2)]
    (run / "results.csv").write_text(csv_text)
    commands = json.loads((root / "commands.json").read_text())
    entry = next(iter(commands.values()))
    entry["argv"][entry["argv"].index("--batch-size") + 1] = "64"
    (root / "commands.json").write_text(json.dumps(commands, indent=2, sort_keys=True) + "\n")
    _forge(root, key)
    result = verify_tree(root, allowed)
    assert [(v.rule, v.file) for v in result.violations] == [("derived_files_recomputed", "commands.json")]
    assert "'64'" in result.violations[0].message


def test_the_auditors_kit_decides_the_rules_not_the_bundle(real_run, tmp_path, signer, capsys):
    key, allowed = signer
    root = unpacked(bd.make_bundle(fresh_copy(real_run, tmp_path), sign_key=key, submitter="Lab",
                                   system_name="box"), tmp_path / "open")
    no_rules = tmp_path / "x"
    no_rules.mkdir()
    (no_rules / "none.yaml").write_text("schema_version: 1\nrules: []\n")
    run = next((root / "run").iterdir())
    results = json.loads((run / "results.json").read_text())
    for group in results["groups"]:
        for case in group["cases"]:
            case["median"] *= 10  # inflated tenfold
    (run / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    _forge(root, key, rules_version=os.path.relpath(no_rules, bd_rules_dir()))
    result = verify_tree(root, allowed)
    assert result.signature.state == "valid" and not result.ok
    rules = {v.rule for v in result.violations}
    assert {"integrity", "results_recomputed"} <= rules
    where = next(v for v in result.violations if v.rule == "integrity")
    assert where.where == "provenance.json" and "is not a rule set of this kit" in where.message
    for hostile in ("../../../tmp/x", 1, "v1/../v1", ["v1"], {"v1": 1}):  # a list or mapping: unhashable
        _forge(root, key, rules_version=hostile)
        assert "integrity" in {v.rule for v in verify_tree(root, allowed).violations}, hostile
    assert main(["verify", str(root), "--rules", "../../../tmp/x"]) == 2
    assert "no rule set '../../../tmp/x' in this kit; known: v1, v2" in capsys.readouterr().err


def bd_rules_dir() -> Path:
    from kit.audit.rules.engine import RULES_DIR

    return RULES_DIR


def test_claims_are_read_only_from_inside_the_bundle(real_run, tmp_path, signer, published):
    key, allowed = signer
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), claims=published / "expected.yaml", sign_key=key,
                            submitter="Lab", system_name="box")
    root = unpacked(bundle, tmp_path / "open")
    outside = tmp_path / "secret.yaml"
    outside.write_text("claims: []\n")
    for hostile in ("/etc/passwd", "../../../../etc/hostname", str(outside), "claims/none.yaml"):
        _forge(root, key, claims=hostile)
        result = verify_tree(root, allowed)
        flagged = [v for v in result.violations if v.where == "provenance.json"]
        assert flagged and "claims" in flagged[0].message, hostile
        finding = next(f for f in result.findings if f.rule.name == "published_claims_derive")
        assert finding.checked == 0, hostile  # nothing was read from it
    (root / "claims" / "link.yaml").symlink_to(outside)
    _forge(root, key, claims="claims/link.yaml")
    result = verify_tree(root, allowed)  # a link in the folder: refused before anything is read
    assert [(v.rule, v.file) for v in result.integrity] == [("integrity", "claims/link.yaml")]
    assert not result.findings


def _forge_claims(root: Path, key: Path, edit) -> None:
    claims = root / "claims" / "expected.yaml"
    claims.write_text(edit(claims.read_text()))
    _forge(root, key)


def test_allowed_signers_typos_are_shown_and_every_principal_of_the_key_is_tried(real_run, tmp_path, signer):
    key, allowed = signer
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), sign_key=key, submitter="Lab", system_name="box")
    public = (key.parent / "id.pub").read_text().strip()
    typo = tmp_path / "typo_signers"
    typo.write_text(f'operator@lab namespacs="kit-bundle" {public}\n')
    result = verify(bundle, typo)
    assert result.signature.state == "invalid"
    assert "does not allow (ssh-keygen: " in result.signature.detail and "bad options" in result.signature.detail
    two = tmp_path / "two_principals"
    two.write_text(f'git-bot@lab namespaces="git" {public}\noperator@lab namespaces="kit-bundle" {public}\n')
    result = verify(bundle, two)
    assert result.signature.state == "valid" and result.ok, result.signature.detail
    assert "good signature by operator@lab" in result.signature.detail


def test_a_signed_bundles_claims_name_only_its_members_and_never_set_the_tolerance(real_run, tmp_path, signer,
                                                                                   published):
    key, allowed = signer
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path), claims=published / "expected.yaml", sign_key=key,
                            submitter="Lab", system_name="box")
    root = unpacked(bundle, tmp_path / "open")
    pristine = (root / "claims" / "expected.yaml").read_text()
    first_file = re.search(r"file: ([^,]+),", pristine).group(1)
    for hostile in ("/etc/hostname", "../../../../etc/hostname", "../manifest.json"):
        _forge_claims(root, key, lambda text, h=hostile: text.replace(f"file: {first_file},", f"file: {h},", 1))
        result = verify_tree(root, allowed)
        flagged = [v for v in result.violations if v.rule == "published_claims_derive"]
        assert len(flagged) == 1, (hostile, flagged)
        assert ("a claim inside a bundle names a relative path within it" in flagged[0].message
                or "lies outside the bundle's claims" in flagged[0].message), (hostile, flagged)
        assert flagged[0].file == "claims/expected.yaml" and flagged[0].line, hostile
    # a bundle that loosens every tolerance cannot make a wrong figure derive: the verifier's ceiling holds
    wrong = re.sub(r"published: ([0-9.]+)", lambda m: f"published: {float(m.group(1)) * 3:g}", pristine, count=1)
    for loose in ("1e9", ".inf", ".nan"):
        _forge_claims(root, key, lambda text, lo=loose: re.sub(r"rel_tol: [0-9.e-]+", f"rel_tol: {lo}", wrong))
        result = verify_tree(root, allowed)
        flagged = [v for v in result.violations if v.rule == "published_claims_derive"]
        assert flagged and not result.ok, loose
    _forge_claims(root, key, lambda text: pristine)
    assert [v.rule for v in verify_tree(root, allowed).violations] == ["published_claims_derive"]  # derives: false
    tight = verify(root, allowed, claims_rel_tol=1e-12)  # the auditor's flag can tighten every claim
    assert len([v for v in tight.violations if v.rule == "published_claims_derive"]) > 1


def test_verify_json_says_ok_only_for_a_good_signature_and_limits_are_finite(real_run, tmp_path, signer, capsys):
    key, allowed = signer
    unsigned = bd.make_bundle(fresh_copy(real_run, tmp_path / "u"), submitter="Lab", system_name="box")
    assert main(["verify", str(unsigned), "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["ok"] is False and said["consistent"] is True and said["verdict"].startswith("CONSISTENT")
    signed = bd.make_bundle(fresh_copy(real_run, tmp_path / "s"), sign_key=key, submitter="Lab", system_name="box")
    assert main(["verify", str(signed), "--json", "--allowed-signers", str(allowed)]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["ok"] is True and said["verdict"] == "OK"
    for flag, value in (("--max-ratio", "nan"), ("--max-ratio", "-5"), ("--max-ratio", "inf"),
                        ("--claims-rel-tol", "nan"), ("--max-unpacked-bytes", "0")):
        assert main(["verify", str(signed), flag, value]) == 2, (flag, value)
        err = capsys.readouterr().err
        assert err.startswith("kit verify: ") and "must be a finite number > 0" in err and err.count("\n") == 1


def test_bundle_output_never_replaces_what_it_should_not(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    results = (run / "results.json").read_bytes()
    with pytest.raises(bd.BundleError, match="inside the run directory"):
        bd.make_bundle(run, run / "results.json", force=True)
    with pytest.raises(bd.BundleError, match="inside the run directory"):
        bd.make_bundle(run, run / "new.tar.gz")
    assert (run / "results.json").read_bytes() == results and not (run / "new.tar.gz").exists()
    target = tmp_path / "kept.txt"
    target.write_text("mine\n")
    (tmp_path / "link.tar.gz").symlink_to(target)
    (tmp_path / "dir.tar.gz").mkdir()
    for out in (tmp_path / "link.tar.gz", tmp_path / "dir.tar.gz", Path("/dev/null")):
        with pytest.raises(bd.BundleError, match="not a regular file"):
            bd.make_bundle(run, out, force=True)
    assert target.read_text() == "mine\n" and (tmp_path / "link.tar.gz").is_symlink()
    existing = tmp_path / "b.tar.gz"
    existing.write_text("an older bundle\n")
    with pytest.raises(bd.BundleError, match="--force"):
        bd.make_bundle(run, existing)
    assert existing.read_text() == "an older bundle\n"
    assert verify(bd.make_bundle(run, existing, force=True)).ok
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


BOMB_SCRIPT = """
import json, resource, sys, time
from pathlib import Path
from kit.audit.verify import verify

bomb, limits = Path(sys.argv[1]), json.loads(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
result = verify(bomb, **limits)
seconds = time.monotonic() - start
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"seconds": seconds, "grown_kib": grown, "violations": [v.message for v in result.violations]}))
"""


class _Repeated:
    """A file-like of `total` bytes of one repeated log line, made as it is read (the test stays small)."""

    def __init__(self, line: bytes, total: int):
        self.line, self.total, self.at = line, total, 0

    def read(self, n: int) -> bytes:
        n = min(n, self.total - self.at)
        start = self.at % len(self.line)
        self.at += n
        return (self.line * (n // len(self.line) + 2))[start:start + n]


def test_a_decompression_bomb_is_refused_while_decompressing(tmp_path, capsys):
    import gzip
    import sys
    import time

    size = 300 * 2**20  # 300 MiB of one log line, under 1 MiB gzipped
    bomb = tmp_path / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=6) as tar:
        info = tarfile.TarInfo("kit-bundle-x/run/x/logs/huge.log")
        info.size = size
        tar.addfile(info, _Repeated(b":::MLLOG {\"key\": \"train_loss\", \"value\": 1.0}\n", size))
    assert bomb.stat().st_size * 250 < size
    start = time.monotonic()
    with gzip.open(bomb) as stream:  # what decompressing the whole archive costs, the yardstick
        while stream.read(1 << 20):
            pass
    full = time.monotonic() - start

    def refused(**limits) -> dict:
        done = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, str(bomb), json.dumps(limits)],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    by_ratio = refused(max_ratio=20)  # deflate packs a log line ~340:1; 20 shows the stop comes early
    by_size = refused(max_ratio=10**6, max_unpacked_bytes=16 * 2**20)
    [ratio] = by_ratio["violations"]
    assert "more than 20 times" in ratio and "--max-ratio" in ratio
    [limit] = by_size["violations"]
    assert f"more than {16 * 2**20} bytes" in limit and "--max-unpacked-bytes" in limit
    for outcome in (by_ratio, by_size):
        assert outcome["seconds"] < 0.6 * full + 0.5, (outcome, full)  # stopped early, nothing extracted
        assert outcome["grown_kib"] * 1024 < size // 10, outcome  # memory far below the unpacked size

    assert main(["verify", str(bomb)]) == 1
    out = capsys.readouterr().out
    assert "[integrity] bomb.tar.gz: unpacks to more than 250 times its" in out and "--max-ratio" in out
    assert main(["verify", str(bomb), "--max-ratio", "100000", "--max-unpacked-bytes", str(2**20)]) == 1
    assert f"more than {2**20} bytes" in capsys.readouterr().out


SECRETS = {  # line of a log -> the secret value in it
    "curl -H 'Authorization: Bearer tok-8f3a91c2d7e6b5a4' https://api.example.com/v1": "tok-8f3a91c2d7e6b5a4",
    "pulling from https://alice:Pa55-in-url@registry.example.com/kit/cpu": "Pa55-in-url",
    "mysql -h db -u bench -pMyS3cretPw results < schema.sql": "MyS3cretPw",
    "DB_PASS=dbpass-4a7e19 starting exporter": "dbpass-4a7e19",
    "git clone https://ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78@github.com/x/y": "ghp_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78",
    "aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE": "AKIAIOSFODNN7EXAMPLE",
    "notify xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx done":
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
}


def test_token_urls_and_passwords_never_reach_the_bundle(real_run, tmp_path):
    run = fresh_copy(real_run, tmp_path)
    worker = run / "launcher/paddle/resnet50/bz2/1n2g/fp32/1/workerlog.0"
    worker.write_text(worker.read_text().rstrip("\n") + "\n" + "\n".join(SECRETS) + "\n")
    before = worker.read_bytes()
    bundle = bd.make_bundle(run, submitter="Lab", system_name="box")
    assert worker.read_bytes() == before
    with tarfile.open(bundle) as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    for line, secret in SECRETS.items():
        assert secret.encode() not in everything, line
    root = unpacked(bundle, tmp_path / "open")
    provenance = json.loads((root / "provenance.json").read_text())
    first = len(before.decode().splitlines()) - len(SECRETS) + 1
    lines = {r["line"] for r in provenance["redactions"] if r["file"].endswith("/workerlog.0")}
    assert lines == set(range(first, first + len(SECRETS))), provenance["redactions"]
    assert verify(bundle).ok


def test_links_are_never_followed_out_of_the_run(real_run, tmp_path, capsys):
    run = fresh_copy(real_run, tmp_path)
    outside = tmp_path / "shadow"
    outside.write_text("root:$6$not-for-auditors\n")
    out = tmp_path / "b.tar.gz"
    for link, target in (("logs/x.log", outside), ("env/extra", tmp_path), ("notes.txt", Path("/etc/shadow"))):
        (run / link).symlink_to(target)
        with pytest.raises(bd.BundleError, match=re.escape(f"{run.resolve() / link}: a link to {target}, outside")):
            bd.make_bundle(run, out, submitter="Lab", system_name="box")
        assert main(["bundle", str(run), "-o", str(out)]) == 2
        assert "remove it or copy the file in" in capsys.readouterr().err
        assert not out.exists() and not list(tmp_path.glob(".*.partial"))
        (run / link).unlink()

    log = "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    (run / "latest.log").symlink_to(log)  # inside the run: recorded as a link, its target packed once
    (run / "logs/current").symlink_to("torch")
    bundle = bd.make_bundle(run, out, submitter="Lab", system_name="box")
    root = unpacked(bundle, tmp_path / "open")
    provenance = json.loads((root / "provenance.json").read_text())
    assert provenance["links"] == {"latest.log": log, "logs/current": "logs/torch"}
    listed = json.loads((root / "manifest.json").read_text())["files"]
    assert f"run/{run.name}/{log}" in listed and not [f for f in listed if "latest" in f or "current" in f]
    assert verify(bundle).ok
    # the folder form refuses links as the archive form does: nothing is read through one
    secret = tmp_path / "secret.json"
    secret.write_text('{"not": "for the verifier"}')
    (root / "run" / run.name / "env" / "outside.json").symlink_to(secret)
    (root / "run" / run.name / "elsewhere").symlink_to(tmp_path)
    result = verify(root)
    assert sorted(v.file for v in result.integrity) == [f"run/{run.name}/elsewhere", f"run/{run.name}/env/outside.json"]
    assert all("a link" in v.message for v in result.integrity) and not result.findings


def test_a_signature_stripped_bundle_verifies_only_as_consistent(real_run, tmp_path, signer, capsys):
    key, allowed = signer
    root = unpacked(bd.make_bundle(fresh_copy(real_run, tmp_path), sign_key=key, submitter="Lab",
                                   system_name="box"), tmp_path / "open")
    (root / "manifest.json.sig").unlink()
    assert main(["verify", str(root)]) == 0
    last = capsys.readouterr().out.splitlines()
    assert last[-2].startswith("CONSISTENT, authenticity NOT checked: ") and "nothing shows who made it" in last[-1]
    assert main(["verify", str(root), "--allowed-signers", str(allowed)]) == 1
    assert "NOT OK: 1 violation(s)" in capsys.readouterr().out


def test_a_renamed_copy_of_a_run_passes_its_own_bundle_check(real_run, tmp_path, capsys):
    renamed = tmp_path / "runs" / "renamed-copy"
    shutil.copytree(real_run, renamed)
    assert main(["bundle", str(renamed), "--submitter", "Lab", "--system-name", "box"]) == 0, capsys.readouterr()
    title = (renamed / "report.md").read_text().splitlines()[0]
    assert title == f"# audit benchmark: {real_run.name}"  # the name it was run under, kept
    (renamed / "report.md").write_text((renamed / "report.md").read_text().replace(title, "# v100 benchmark: x", 1))
    result = verify(bd.make_bundle(renamed, tmp_path / "edited.tar.gz", submitter="Lab", system_name="box"))
    assert [(v.rule, v.file, v.line) for v in result.violations] == [("report_recomputed", "report.md", 1)]


def test_messages_name_what_the_user_gave(real_run, tmp_path, capsys):
    run = fresh_copy(real_run, tmp_path)
    shutil.rmtree(run / "env")
    assert main(["bundle", str(run), "--submitter", "Lab", "--system-name", "box"]) == 2
    assert capsys.readouterr().err == (f"kit bundle: {run / 'env'}: no environment captures (probes.json + raw "
                                       "outputs) to describe the system from; runs made by kit bench/multinode "
                                       "write them\n")
    bundle = bd.make_bundle(fresh_copy(real_run, tmp_path / "b"), submitter="Lab", system_name="box")
    empty = tmp_path / "empty_signers"
    empty.write_text("# nobody yet\n")
    for signers, said in (("/dev/null", "/dev/null: not a regular file (a pipe, socket or device)"),
                          (tmp_path, f"{tmp_path}: is a directory"), (tmp_path / "none", "none: no such file"),
                          (empty, "empty_signers: names no signer")):
        assert main(["verify", str(bundle), "--allowed-signers", str(signers)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err
