"""bench/testprofile.py, the plugin `make test-profile` runs: each test's wall and its process tree's CPU seconds,
per worker, read back into a table -- on a real pytest session of two tests (one burning CPU in a child process,
one sleeping)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import testprofile  # noqa: E402

TESTS = '''
import subprocess, sys, time

def test_burns():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: pass"], check=True)

def test_sleeps():
    time.sleep(0.6)
'''


def test_a_session_records_each_tests_wall_and_its_childrens_cpu_and_the_table_reads_them(tmp_path):
    (tmp_path / "test_two.py").write_text(TESTS)
    out = tmp_path / "rows"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not as an xdist worker
    env |= {testprofile.ENV_DIR: str(out), "PYTHONPATH": str(REPO / "bench")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "testprofile", "-p", "no:cacheprovider",
                           str(tmp_path / "test_two.py")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"].rsplit("::", 1)[1]: r for r in testprofile.read_rows(out)}
    assert sorted(rows) == ["test_burns", "test_sleeps"] and [p.name for p in out.iterdir()] == ["rows-main.json"]
    assert rows["test_burns"]["cpu"] >= 0.5  # the child's CPU, counted once it was waited for
    assert rows["test_sleeps"]["wall"] >= 0.6 and rows["test_sleeps"]["cpu"] < 0.3
    text = testprofile.table(list(rows.values()))
    assert text.startswith("2 tests: ") and "| test_two.py | 2 |" in text
    assert "| test_two.py::test_burns | " in text and "| test_two.py::test_sleeps | " in text


def test_no_rows_is_one_line(tmp_path):
    import pytest

    with pytest.raises(SystemExit, match="no rows-\\*.json in"):
        testprofile.read_rows(tmp_path)
