"""A program's code "at the pin" without its history (issue 58): the listings of the pinned trees
(scripts/reference/trees/<key>.txt) recompute git's tree hash of every path the kit runs, equal to docker/pins.yaml's
and to ../shared/programs/programs.yaml's (read there from git); an unpacked archive is judged by its files against
them, so a changed, missing or added file names itself, in the pre-flight, the launcher's record and
bench/prepare_models.py alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED

from kit.audit.rules import programs as program_rules
from kit.config import programs
from kit.config.cases import Case
from kit.core.catalogue import load
from kit.core.yamlio import ConfigError
from kit.images.spec import current_pins, load_pins
from kit.run import plan

code_state = load("code_state", "reference")
ARCHIVES = SHARED / "programs"
PREPARE = REPO / "bench" / "prepare_models.py"
TREES = REPO / "scripts" / "reference" / "trees"
KEYS = {"PaddleClas": "paddleclas", "PLSC": "plsc", "FleetX": "fleetx", "DeepLearningExamples": "dle",
        "dllogger": "dllogger"}


def published_programs() -> list[dict]:
    return yaml.safe_load((ARCHIVES / "programs.yaml").read_text())


def pinned_commit(key: str) -> str:
    code = current_pins().model_code
    if key in code:
        return code[key].commit
    (package,) = {p for impl in programs.IMPLS.values() for p in impl.packages if p.folder == key}
    return package.commit


@pytest.mark.parametrize("entry", published_programs(), ids=lambda e: e["name"])
def test_each_listing_recomputes_the_tree_hashes_git_gave_for_the_pin(entry):
    listing = plan.pinned_listing(KEYS[entry["name"]])
    assert listing.commit == entry["commit"] == pinned_commit(KEYS[entry["name"]])
    assert listing.paths == tuple(entry["trees"])
    assert {path: code_state.tree_id(listing, path) for path in listing.paths} == entry["trees"]
    pins = current_pins().model_code.get(KEYS[entry["name"]])
    assert pins is None or dict(pins.trees) == entry["trees"]


def test_every_listing_is_one_of_a_pin():
    assert sorted(p.stem for p in TREES.glob("*.txt")) == sorted(KEYS.values())


def prepared(tmp_path: Path, name: str, framework_model: str) -> Path:
    """bench/prepare_models.py's copy of FRAMEWORK/MODEL's code from the archives; the folder of NAME's."""
    needs = {"paddle/resnet50": ["PaddleClas"], "torch/resnet50": ["DeepLearningExamples", "dllogger"]}
    sources = [a for n in needs[framework_model] for a in ("--from", f"{KEYS[n]}={next(ARCHIVES.glob(f'{n}-*'))}")]
    done = subprocess.run([sys.executable, str(PREPARE), "--dest", str(tmp_path / "models"), *sources,
                           framework_model], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("each the pinned one") == len(needs[framework_model]), done.stdout
    return tmp_path / "models" / name


def paddleclas_case() -> Case:
    from kit.config.suites import load_suite

    return next(c for c in load_suite("v100").cases if c.impl == "reference" and c.framework == "paddle"
                and c.model == "resnet50" and c.nodes == 1)


def test_an_unpacked_archive_is_at_the_pin_and_each_change_names_its_file(tmp_path):
    top = prepared(tmp_path, "PaddleClas", "paddle/resnet50")
    case, pin = paddleclas_case(), pinned_commit("paddleclas")
    assert plan.local_mismatches(_suite_of(case), str(tmp_path / "models")) == []
    (top / "ppcls" / "__pycache__").mkdir(exist_ok=True)
    (top / "ppcls" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"cache")  # any run writes these
    (top / "output").mkdir()  # outside the pinned paths: not the program's code
    assert plan.local_mismatches(_suite_of(case), str(tmp_path / "models")) == []

    with open(top / "ppcls" / "static" / "train.py", "a") as f:
        f.write("# changed\n")
    (top / "tools" / "eval.py").unlink()
    (top / "ppcls" / "extra.py").write_text("")
    os.chmod(top / "requirements.txt", 0o755)
    (found,) = plan.local_mismatches(_suite_of(case), str(tmp_path / "models"))
    for said in ("ppcls/static/train.py, requirements.txt modified", "tools/eval.py deleted",
                 "ppcls/extra.py untracked", f"its files differ from the tree of the pin {pin[:7]}"):
        assert said in found["reason"], found["reason"]
    again = subprocess.run([sys.executable, str(PREPARE), "--dest", str(tmp_path / "models"), "--from",
                            f"paddleclas={next(ARCHIVES.glob('PaddleClas-*.tar.gz'))}", "paddle/resnet50"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "ppcls/static/train.py, requirements.txt modified" in again.stderr


def _suite_of(case: Case):
    from kit.config.cases import Suite

    return Suite("t", Path("t.yaml"), "", "gpu", [case])


def test_a_listing_of_another_commit_is_no_pass(tmp_path):
    top = prepared(tmp_path, "dllogger", "torch/resnet50")
    listing = plan.pinned_listing("dllogger")
    other = code_state.Listing("0" * 40, listing.paths, dict(listing))
    st = code_state.files_state(str(top), other)
    assert st["clean"] and code_state.differences(st, listing.commit) == [
        "its files were judged against 0000000, not the pin"]


def test_the_launcher_records_an_archive_copy_at_the_pin_and_verify_reads_it_so(tmp_path):
    """scripts/reference/launch.py with --listing records the copy's files as at the pin (model_code_commit the
    pin) and the rule kit verify applies to that record passes it; a changed file makes both say which."""
    top = prepared(tmp_path, "dllogger", "torch/resnet50")
    record = tmp_path / "run.cmd.json"

    def launch() -> dict:
        argv = [sys.executable, "-c", "pass"]
        subprocess.run([sys.executable, str(REPO / "scripts" / "reference" / "launch.py"), "--record", str(record),
                        "--meta", json.dumps({"argv": argv}), "--cwd", str(top), "--listing",
                        str(TREES / "dllogger.txt"), "--", *argv], check=True, timeout=120)
        return json.loads(record.read_text())

    meta = launch()
    pin = pinned_commit("dllogger")
    assert meta["model_code_commit"] == pin and meta["model_code_state"]["files_of"] == pin
    assert code_state.differences(meta["model_code_state"], pin) == []
    (top / "dllogger" / "logger.py").write_text("changed\n")
    meta = launch()
    assert meta["model_code_commit"] is None
    assert code_state.differences(meta["model_code_state"], pin)[0] == "dllogger/logger.py modified"
    assert program_rules.code_state is code_state  # verify judges records with this same module


def test_a_bad_listing_stops_the_launcher_before_the_program(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("# commit " + "a" * 40 + "\n# paths x\n100644 blob short\tx\n")
    argv = [sys.executable, "-c", "open('ran', 'w')"]
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "reference" / "launch.py"), "--record",
                           str(tmp_path / "r.json"), "--meta", json.dumps({"argv": argv}), "--cwd", str(tmp_path),
                           "--listing", str(bad), "--", *argv], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 2 and "line 3: expected 'MODE blob SHA<TAB>PATH'" in done.stderr
    assert not (tmp_path / "ran").exists()


def test_pins_yaml_trees_must_be_paths_and_full_hashes(tmp_path):
    text = (REPO / "docker" / "pins.yaml").read_text()
    bad = tmp_path / "pins.yaml"
    bad.write_text(text.replace("      ppcls: b2f95be8ba06f87693ec4e848785209c2fc0f34d", "      ppcls: b2f95be"))
    with pytest.raises(ConfigError) as err:
        load_pins(bad)
    assert "model_code.paddleclas.trees" in str(err.value)
    bad.write_text(text.replace("      ppcls: b2f95be8ba06f87693ec4e848785209c2fc0f34d",
                                "      ../ppcls: b2f95be8ba06f87693ec4e848785209c2fc0f34d"))
    with pytest.raises(ConfigError) as err:
        load_pins(bad)
    assert "'../ppcls' is not a relative path" in str(err.value)


def test_a_copy_inside_another_checkout_is_judged_by_its_files_not_that_checkout(tmp_path):
    """bench/prepare_models.py's default folder is .models/ inside the kit's own checkout (ignored there): git finds
    the kit's checkout around an unpacked archive, whose commit says nothing of the program's."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("/models/\n")
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "kit"],
                   check=True)
    top = prepared(tmp_path, "dllogger", "torch/resnet50")
    st = code_state.state(str(top), str(top), pinned_commit("dllogger"), plan.pinned_listing("dllogger"))
    assert st["files_of"] == st["commit"] == pinned_commit("dllogger") and st["clean"]


def test_a_hosts_copy_is_judged_by_the_files_its_check_lists(tmp_path):
    """The needs script an SSH or Slurm host runs (kit.run.needs) lists an unpacked archive's files with git
    hash-object, no repository needed: at the pin it passes; a changed, an executable and an added file are named,
    as this machine's pre-flight names them."""
    from kit.run.needs import needs_script, read_needs

    prepared(tmp_path, "PaddleClas", "paddle/resnet50")
    case, root = paddleclas_case(), str(tmp_path / "models")

    def host() -> tuple[list[str], list[dict]]:
        out = subprocess.run(["sh", "-c", needs_script([(case.key, case)], None, root)], capture_output=True,
                             text=True, check=True, timeout=300).stdout
        return read_needs([(case.key, case)], out)

    assert host() == ([], [])
    top = tmp_path / "models" / "PaddleClas"
    (top / "ppcls" / "static" / "train.py").write_text("changed\n")
    os.chmod(top / "tools" / "train.py", 0o755)
    (top / "ppcls" / "new file.py").write_text("")
    problems, (found,) = host()
    assert problems == [] and found["reason"] == plan.local_mismatches(_suite_of(case), root)[0]["reason"]
    assert "ppcls/static/train.py, tools/train.py modified; ppcls/new file.py untracked" in found["reason"]
