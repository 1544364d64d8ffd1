"""One writer per run directory: a second kit process is refused naming the holder; concurrent starts never collide;
a resume never runs a suite edited since the run started."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kit.audit import bundle as bd
from kit.core import runlock
from kit.run import records

SUITE = ("schema_version: 1\nname: lk\nhardware: cpu\ndefaults: {repeats: 1, warmup_steps: 1, measure_steps: 10}\n"
         "cases:\n  - {framework: torch, model: resnet50, batch_size: 2, image_size: 32, num_classes: 10}\n")
HOLD = "import sys, time; from kit.core import runlock; runlock.acquire(sys.argv[1]); print('held', flush=True); " \
       "time.sleep(60)"


def kit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kit", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    (tmp_path / "lk.yaml").write_text(SUITE)
    path, _suite = records.start(tmp_path / "lk.yaml", tmp_path / "runs")
    meta = {"suite_sha256": hashlib.sha256((path / "suite.yaml").read_bytes()).hexdigest(), "runs": {}}
    (path / "run.json").write_text(json.dumps(meta))
    (path / "logs").mkdir()
    runlock.release(path)
    return path


def test_a_second_writer_is_refused_in_one_line_naming_the_holder(run_dir):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert runlock.is_busy(run_dir)
        for args in (("bench", "--resume", str(run_dir)), ("bundle", str(run_dir), "--out", str(run_dir) + ".tgz")):
            done = kit(*args)
            assert done.returncode == 2, (args, done.stderr)
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and f"pid {holder.pid} on " in lines[0], (args, done.stderr)
        assert not list((run_dir / "logs").iterdir()) and not Path(str(run_dir) + ".tgz").exists()
    finally:
        holder.kill()
        holder.wait()
    assert not runlock.is_busy(run_dir)  # the kernel drops a dead holder's lock: no stale file blocks
    runlock.acquire(run_dir)
    runlock.release(run_dir)
    assert runlock.LOCK_NAME not in {p.name for p in bd.run_files(run_dir)[0]}  # never bundled


def test_benches_started_together_each_get_their_own_directory(tmp_path):
    code = "import sys; from pathlib import Path; from kit.run.records import new_run_dir; " \
           "print(new_run_dir(Path(sys.argv[1]), 'same'))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "runs")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(8)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outs]
    made = {out.strip() for out, _ in outs}
    assert len(made) == 8 and all(Path(m).is_dir() for m in made)


def test_resume_refuses_a_suite_edited_after_the_run_started(run_dir):
    (run_dir / "suite.yaml").write_text(SUITE.replace("repeats: 1", "repeats: 9"))
    done = kit("bench", "--resume", str(run_dir))
    assert done.returncode == 2
    assert "suite.yaml was edited after the run started" in done.stderr and done.stderr.count("\n") == 1
    assert not list((run_dir / "logs").iterdir())  # nothing ran


def test_a_suite_named_like_a_built_in_one_must_be_it(tmp_path):
    from kit.config import suites

    builtin = suites.suite_path("local").read_text()
    (tmp_path / "copy.yaml").write_text(builtin)  # the same suite under another path: fine
    run_dir, suite = records.start(tmp_path / "copy.yaml", tmp_path / "runs")
    assert suite.name == "local"
    runlock.release(run_dir)
    posing = builtin.replace("repeats: ", "repeats: 1 #", 1) if "repeats: " in builtin else builtin + "#"
    posing = posing.replace("image_size: ", "image_size: 8 #", 1)
    (tmp_path / "posing.yaml").write_text(posing)
    assert [c.to_dict() for c in suites.load_suite(tmp_path / "posing.yaml").cases] != \
        [c.to_dict() for c in suites.load_suite("local").cases]
    with pytest.raises(records.RunDirError, match="name 'local' is the built-in suite .*local.yaml, and this file "
                                                  "runs other cases; give it a name of its own"):
        records.start(tmp_path / "posing.yaml", tmp_path / "runs2")
    assert not (tmp_path / "runs2").exists()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_kit_bundle_stopped_by_a_signal_cleans_up_as_ctrl_c_does(tmp_path, sig):
    import base64
    import signal

    run = tmp_path / "runs" / "big-1"
    log = run / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    log.parent.mkdir(parents=True)
    (run / "run.json").write_text('{"runs": {}}\n')
    (run / "results.json").write_text('{"groups": []}\n')  # a finished run's (bundle refuses an unfinished one)
    with log.open("wb") as f:  # incompressible, so packing it takes seconds
        for _ in range(48):
            f.write(base64.b64encode(os.urandom(3 * 2**20)) + b"\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "kit", "bundle", str(run), "--out", str(out / "b.tar.gz")],
                            env={**os.environ, "TMPDIR": str(tmp)}, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob("*.partial")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(out.glob("*.partial")), "the bundle never started writing"
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert f"terminated ({sig})" in err
    assert list(out.iterdir()) == [] and list(tmp.iterdir()) == []  # no .partial, no kit-bundle-* copy


@pytest.mark.parametrize("planted", ["link", "dangling link", "fifo", "folder"])
def test_a_lock_file_that_is_a_link_or_not_a_file_is_refused_and_nothing_written_through(run_dir, tmp_path, planted):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock = run_dir / runlock.LOCK_NAME
    lock.unlink(missing_ok=True)
    if planted == "link":
        lock.symlink_to(target)
    elif planted == "dangling link":
        lock.symlink_to(tmp_path / "made-through-the-link")
    elif planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    with pytest.raises(runlock.LockFileError, match=f"^{lock}: the run's lock file is "):
        runlock.acquire(run_dir)
    with pytest.raises(runlock.LockFileError):
        runlock.is_busy(run_dir)
    done = kit("bench", "--resume", str(run_dir))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and str(lock) in done.stderr, done.stderr
    assert target.read_text() == "keep me\n" and not (tmp_path / "made-through-the-link").exists()
    assert not list((run_dir / "logs").iterdir())  # nothing ran


def test_resume_refuses_while_a_process_of_the_run_outlives_its_kit_bench(run_dir):
    from kit.run.records import RUN_ENV

    # what a launcher's worker in a session of its own looks like after its kit bench was killed: it carries the run
    log = run_dir / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    log.parent.mkdir(parents=True)
    log.write_text("a live log\n")
    orphan = subprocess.Popen([sys.executable, "-c", "import sys, time; print('up', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True, start_new_session=True,
                              env={**os.environ, RUN_ENV: str(run_dir.resolve())})
    try:
        assert orphan.stdout.readline().strip() == "up"
        done = kit("bench", "--resume", str(run_dir))
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and f"pid {orphan.pid} (" in done.stderr, done.stderr
        assert "still run" in done.stderr and "then resume" in done.stderr
        assert log.read_text() == "a live log\n" and not (run_dir / "attempts").exists()  # its log not moved
    finally:
        orphan.kill()
        orphan.wait()
    done = kit("bench", "--resume", str(run_dir))  # gone: the resume trains
    assert done.returncode == 0, done.stderr
    assert json.loads((run_dir / "run.json").read_text())["runs"][str(log.relative_to(run_dir))]["status"] == "ok"
    assert (run_dir / "attempts").is_dir()


def test_report_and_compare_of_a_run_in_progress_say_so(tmp_path):
    import shutil

    (golden,) = (Path(__file__).parent / "fixtures/golden-bundles/cpu-loader/run").iterdir()
    run = tmp_path / golden.name  # a real finished run, now resumed by a kit bench (it holds the lock)
    shutil.copytree(golden, run)
    assert kit("report", str(run)).returncode == 0  # its report as this kit writes it (the golden's: layout 1)
    def files() -> dict:
        return {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != runlock.LOCK_NAME}

    before = files()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = kit("report", str(run))  # its own report.md: refused, not rewritten under the bench
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(f"kit: {run} is still in progress (kit pid {holder.pid} on ")
        assert "report it then, or give --out elsewhere for a snapshot" in done.stderr
        assert files() == before
        done = kit("report", str(run), "--out", str(tmp_path / "snap"))  # a snapshot elsewhere: said so
        assert done.returncode == 0, done.stderr
        assert f"kit: warning: {run} is still in progress (kit pid {holder.pid} on " in done.stderr
        assert "**Run in progress**: " in (tmp_path / "snap/report.md").read_text()
        done = kit("compare", str(run), str(run / "results.json"))
        assert done.returncode == 0, done.stderr
        for side in ("A", "B"):
            said = f"{side} ({run}) is still in progress (kit pid {holder.pid} on "
            assert f"kit: warning: {said}" in done.stderr and f"**Run in progress**: {said}" in done.stdout
    finally:
        holder.kill()
        holder.wait()
    done = kit("report", str(run))  # ended: the run's own report again, the same as before
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert (run / "report.md").read_bytes() == before["report.md"]
    done = kit("compare", str(run), str(run))
    assert "in progress" not in done.stdout + done.stderr
