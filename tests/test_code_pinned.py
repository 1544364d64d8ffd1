""""At the pin" is the whole checkout (scripts/reference/code_state.py): the pinned commit exists there, HEAD is it,
the index and the work tree match it, no untracked or index-hidden file, and the program's folder is inside it. Each
departure, made in a REAL git checkout pinned (docker/pins.yaml's entry, patched for the test) to its own commit, is
refused by the local plan and by the needs script an SSH or Slurm host runs, with a message naming host, checkout
and what differs; --force runs it and run.json says why; launch.py records the state; rule set v4 fails a record
not clean at its pin, v3 does not look."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from test_reference_native import CONVNETS, NOBODY, SUITE, native_host  # noqa: F401 (native_host: a fixture)
from test_reference_runs import setup

from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.cli import main
from kit.config import suites
from kit.config.hosts import load_hosts
from kit.images.spec import current_pins
from kit.run.command import SCRIPTS
from kit.run.needs import needs_script, read_needs, settle
from kit.run.plan import code_state, local_mismatches, plan, plan_for_nodes
from kit.run.ssh import RunError, SshRunner

KEY = "ngc-pytorch/resnet50/bz2/1n1g/amp"
MAIN = f"{CONVNETS.split('/', 1)[1]}/main.py"  # relative to the checkout's top
LAUNCH = SCRIPTS / "reference" / "launch.py"


def git(top: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(top), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def pinned(native_host, tmp_path, monkeypatch):  # noqa: F811
    """DLE's checkout as a real git repository, docker/pins.yaml's `dle` pinned to its one commit; dllogger found on
    the host's PYTHONPATH (not a checkout under the root: the pre-flight judges DLE's alone)."""
    top = native_host / "DeepLearningExamples"
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    git(top, "add", "-A")
    git(top, "commit", "-qm", "the pin")
    pin = git(top, "rev-parse", "HEAD")
    pins = current_pins()
    monkeypatch.setitem(pins.model_code, "dle", replace(pins.model_code["dle"], commit=pin))
    site = tmp_path / "site"
    site.mkdir()
    shutil.move(native_host / "dllogger" / "dllogger", site / "dllogger")
    shutil.rmtree(native_host / "dllogger")
    monkeypatch.setenv("PYTHONPATH", str(site))
    (tmp_path / "program.yaml").write_text("".join(line for line in SUITE.splitlines(keepends=True)
                                                   if "impl: harness" not in line))
    return NS(root=native_host, top=top, where=native_host / CONVNETS, pin=pin,
              suite=suites.load_suite(tmp_path / "program.yaml"))


def modify(p):
    with open(p.top / MAIN, "a") as f:
        f.write("# edited after the pin\n")


def stage(p):
    modify(p)
    git(p.top, "add", MAIN)


def delete(p):
    (p.where / "replay.log").unlink()


def untracked(p):
    (p.where / "image_classification").mkdir()
    (p.where / "image_classification" / "extra.py").write_text("print('imported too')\n")


def hide(p):  # assume-unchanged: git status no longer looks at the edited file
    modify(p)
    git(p.top, "update-index", "--assume-unchanged", MAIN)


def move_head(p):
    modify(p)
    git(p.top, "commit", "-qam", "after the pin")


def nested(p):  # the program's folder is a checkout of its own, at a commit of its own
    subprocess.run(["git", "init", "-q", str(p.where)], check=True)
    git(p.where, "add", "-A")
    git(p.where, "commit", "-qm", "elsewhere")


DEPARTURES = {
    "modified": (modify, lambda p: f"{MAIN} modified; HEAD {p.pin[:7]} is the pin"),
    "staged": (stage, lambda p: f"{MAIN} modified; HEAD {p.pin[:7]} is the pin"),
    "deleted": (delete, lambda p: f"{CONVNETS.split('/', 1)[1]}/replay.log deleted; HEAD {p.pin[:7]} is the pin"),
    "untracked": (untracked, lambda p: f"{CONVNETS.split('/', 1)[1]}/image_classification/extra.py untracked; "
                                       f"HEAD {p.pin[:7]} is the pin"),
    "hidden": (hide, lambda p: f"{MAIN} hidden from git status (assume-unchanged/skip-worktree); HEAD {p.pin[:7]} "
                               "is the pin"),
    "moved": (move_head, lambda p: f"HEAD {git(p.top, 'rev-parse', 'HEAD')[:7]} is not the pin"),
    "nested": (nested, lambda p: f"{p.where} belongs to the checkout {p.where}, not {p.top}; HEAD "
                                 f"{git(p.where, 'rev-parse', 'HEAD')[:7]} is not the pin"),
}


def host_check(p, root: Path | None = None) -> tuple[list[str], list[dict]]:
    """What an SSH or Slurm host's needs script says of this checkout, read back as the runners do."""
    (case,) = p.suite.cases
    out = subprocess.run(["sh", "-c", needs_script([(KEY, case)], None, str(root or p.root))], capture_output=True,
                         text=True, check=True).stdout
    return read_needs([(KEY, case)], out)


def test_a_checkout_clean_at_its_pin_runs(pinned):
    cache = pinned.where / "__pycache__"  # what an earlier run's imports left: Python's cache, not code
    cache.mkdir()
    (cache / "main.cpython-311.pyc").write_bytes(b"\0")
    runs, skipped = plan(pinned.suite, str(pinned.root))
    assert [r.case.key for r in runs] == [KEY] and skipped == []
    assert host_check(pinned) == ([], [])
    st = code_state.state(str(pinned.where), str(pinned.top), pinned.pin)
    assert st == {"commit": pinned.pin, "modified": [], "deleted": [], "untracked": [], "hidden": [], "clean": True}


@pytest.mark.parametrize("departure", sorted(DEPARTURES))
def test_each_departure_from_the_pin_is_refused_here_and_on_a_host_with_what_differs(pinned, departure):
    make, said = DEPARTURES[departure]
    make(pinned)
    reason = f"{pinned.top}: {said(pinned)}; docker/pins.yaml pins {pinned.pin} (case {KEY})"
    _runs, skipped = plan(pinned.suite, str(pinned.root))
    assert skipped == [(pinned.suite.cases[0], f"{reason}; `kit bench --force` runs it (recorded)")]
    (here,) = local_mismatches(pinned.suite, str(pinned.root))
    assert here["reason"] == reason
    problems, there = host_check(pinned)  # the same probes through sh, as an SSH host or a Slurm node runs them
    assert problems == [] and there == [here]
    with pytest.raises(RunError) as refused:
        settle([], [{"host": "node1", **m} for m in there], False, lambda *a: None, RunError, "host")
    assert str(refused.value) == (f"not every host has what the runs need, nothing started: node1: {reason}; pass "
                                  "--force to run it anyway (the run records it)")
    assert settle([], [{"host": "node1", **m} for m in there], True, lambda *a: None, RunError, "host") == [
        {"host": "node1", **here}]


def test_ssh_hosts_refuse_an_edited_checkout_each_naming_itself(ssh_hosts, pinned, tmp_path, published):
    """The SSH runner's staging over two real SSH hosts: each runs the needs script on its side and finds the edit;
    --force returns it, reason and host, for run.json."""
    inventory, suite = setup(ssh_hosts, tmp_path, published, pinned.root)
    modify(pinned)
    inv = load_hosts(inventory)
    runner = SshRunner(inv, [inv.get("h1"), inv.get("h2")], tmp_path / "run", "gpu")
    runs = plan_for_nodes(suites.load_suite(suite), 2)
    reason = (f"{pinned.top}: {MAIN} modified; HEAD {pinned.pin[:7]} is the pin; docker/pins.yaml pins {pinned.pin} "
              "(case ngc-pytorch/resnet50/bz256/2n1g/fp32)")
    with pytest.raises(RunError) as refused:
        runner.stage(runs)
    for host in ("h1", "h2"):
        assert f"{host}: {reason}; pass --force to run it anyway (the run records it)" in str(refused.value)
    assert [(m["host"], m["reason"]) for m in runner.stage(runs, force=True)] == [("h1", reason), ("h2", reason)]


def test_a_sparse_checkout_of_the_programs_folder_is_at_its_pin(pinned, tmp_path, monkeypatch):
    """bench/prepare_models.py checks out the program's folder alone (sparse): the rest is skip-worktree and absent,
    as at the pin; a file of the rest put back, edited, is seen."""
    (pinned.top / "TensorFlow").mkdir()
    (pinned.top / "TensorFlow" / "other.py").write_text("print('not the program')\n")
    git(pinned.top, "add", "-A")
    git(pinned.top, "commit", "-qm", "a folder beside the program's")
    pin = git(pinned.top, "rev-parse", "HEAD")
    pins = current_pins()
    monkeypatch.setitem(pins.model_code, "dle", replace(pins.model_code["dle"], commit=pin))
    root = tmp_path / "sparse"
    top = root / "DeepLearningExamples"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(pinned.top), str(top)], check=True)
    git(top, "sparse-checkout", "set", CONVNETS.split("/", 1)[1])
    git(top, "checkout", "-q", "--detach", pin)
    assert not (top / "TensorFlow").exists() and "S TensorFlow/other.py" in git(top, "ls-files", "-v")
    assert local_mismatches(pinned.suite, str(root)) == [] and host_check(pinned, root) == ([], [])
    (top / "TensorFlow").mkdir()
    (top / "TensorFlow" / "other.py").write_text("print('edited')\n")
    (here,) = local_mismatches(pinned.suite, str(root))
    assert here["reason"] == (f"{top}: TensorFlow/other.py modified; HEAD {pin[:7]} is the pin; docker/pins.yaml "
                              f"pins {pin} (case {KEY})")
    assert host_check(pinned, root)[1] == [here]


def test_a_pin_the_checkout_lacks_is_named(pinned, monkeypatch):
    other = "0123456789abcdef0123456789abcdef01234567"
    pins = current_pins()
    monkeypatch.setitem(pins.model_code, "dle", replace(pins.model_code["dle"], commit=other))
    (here,) = local_mismatches(pinned.suite, str(pinned.root))
    assert here["reason"] == (f"{pinned.top}: the pin is not in the checkout; HEAD {pinned.pin[:7]} is not the pin; "
                              f"docker/pins.yaml pins {other} (case {KEY})")
    assert host_check(pinned)[1] == [here]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the checkout to another user (chown) needs root; CI runs as "
                                              "root, so this runs there")
def test_another_users_checkout_is_judged_in_full_too(pinned):
    """safe.directory names the checkout's top: git reads a tree nobody's owns, and finds the edit in it."""
    modify(pinned)
    for folder, dirs, files in os.walk(pinned.root):
        for name in [".", *dirs, *files]:
            os.chown(Path(folder) / name, NOBODY, NOBODY, follow_symlinks=False)
    refused = subprocess.run(["git", "-C", str(pinned.where), "status"], capture_output=True, text=True)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr
    reason = f"{pinned.top}: {MAIN} modified; HEAD {pinned.pin[:7]} is the pin; docker/pins.yaml pins {pinned.pin}"
    (here,) = local_mismatches(pinned.suite, str(pinned.root))
    assert here["reason"].startswith(reason)
    assert host_check(pinned)[1] == [here]


def test_launch_records_the_state_it_found(pinned, tmp_path):
    modify(pinned)
    untracked(pinned)
    record = tmp_path / "rec" / "x.cmd.json"
    subprocess.run([sys.executable, str(LAUNCH), "--record", str(record), "--meta", json.dumps({"argv": ["true"]}),
                    "--cwd", str(pinned.where), "--checkout", str(pinned.top), "--", "true"], check=True)
    said = json.loads(record.read_text())
    assert said["model_code_commit"] == pinned.pin
    assert said["model_code_state"] == {
        "commit": pinned.pin, "clean": False, "modified": [MAIN], "deleted": [], "hidden": [],
        "untracked": [f"{CONVNETS.split('/', 1)[1]}/image_classification/extra.py"]}


def test_a_forced_dirty_run_is_recorded_and_v4_holds_it_to_its_record(pinned, tmp_path):
    """--force runs the edited checkout: run.json says why, the launcher what it found; a bundle verifies while
    run.json records the forcing, and without it v4 fails the record (its tree was not clean) where v3 passes."""
    modify(pinned)
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(tmp_path / "program.yaml"), "--runs-dir", str(runs)]) != 0
    shutil.rmtree(runs, ignore_errors=True)
    assert main(["bench", "--suite", str(tmp_path / "program.yaml"), "--runs-dir", str(runs), "--force"]) == 0
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    reason = f"{pinned.top}: {MAIN} modified; HEAD {pinned.pin[:7]} is the pin; docker/pins.yaml pins {pinned.pin}"
    assert meta["model_code_forced"] == [{"host": "local", "case": KEY, "path": str(pinned.where), "head": pinned.pin,
                                          "pin": pinned.pin, "reason": f"{reason} (case {KEY})"}]
    (sidecar,) = run_dir.glob("logs/ngc-pytorch/**/*.cmd.json")
    state = json.loads(sidecar.read_text())["model_code_state"]
    assert (state["commit"], state["clean"], state["modified"]) == (pinned.pin, False, [MAIN])

    def at_pin(version: str, name: str) -> list[str]:
        packed = bd.make_bundle(run_dir, tmp_path / f"{name}.tar.gz", submitter="Lab", system_name="box")
        return [v.message for v in verify(packed, rules_version=version).violations if v.rule == "program_code_at_pin"]

    assert at_pin("v4", "forced") == []
    assert at_pin("v6", "forced-v6") == [f"{KEY} (local): model code {MAIN} modified; HEAD {pinned.pin[:7]} is the pin "
                                      f"(docker/pins.yaml pins {pinned.pin}); it ran forced off the pin (kit bench "
                                      "--force, run.json model_code_forced): its figure is not the published "
                                      "program's"]
    report = (run_dir / "report.md").read_text()
    assert (f"**1 published-program run(s) ran forced off the pin** (kit bench --force, run.json model_code_forced): "
            f"their figures are not the published programs' at their pins, and kit verify fails them (rule set v6, "
            f"program_code_at_pin): {KEY} on local: {reason} (case {KEY}).") in report
    del meta["model_code_forced"]
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2))
    assert at_pin("v3", "v3") == []  # HEAD was the pin: all v3 asks
    assert at_pin("v4", "v4") == [f"{KEY} (local): model code {MAIN} modified; HEAD {pinned.pin[:7]} is the pin "
                                  f"(docker/pins.yaml pins {pinned.pin}), and run.json does not record the run as "
                                  "forced"]
