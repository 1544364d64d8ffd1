"""bench/testprofile.py, the plugin `make test-profile` runs: each test's wall and its process tree's CPU seconds,
per worker, read back into a table -- on a real pytest session of two tests (one burning CPU in a child process,
one sleeping)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
    with pytest.raises(SystemExit, match="no rows-\\*.json in"):
        testprofile.read_rows(tmp_path)


def _record(pid: int, ppid: int, comm: str, user_ticks: int, system_ticks: int = 0) -> bytes:
    def comp_t(ticks: int) -> int:  # 13-bit mantissa, base-8 exponent, as the kernel encodes it
        exp = 0
        while ticks > 0x1FFF:
            ticks, exp = ticks >> 3, exp + 1
        return (exp << 13) | ticks

    return testprofile.ACCT_V3.pack(0, 3, 0, 0, 0, 0, pid, ppid, 0, 0.0, comp_t(user_ticks), comp_t(system_ticks),
                                    0, 0, 0, 0, 0, 0, comm.encode())


def test_process_accounting_counts_each_process_where_it_ran_pids_reused(tmp_path):
    """Records in the kernel's order (a process's when it ends: children before parents): a python under a test
    host's sshd is counted there, the same pid reused later under the suite's tree is counted there."""
    assert testprofile.ACCT_V3.size == 64  # sizeof(struct acct_v3)
    records = [
        _record(300, 200, "python", 20000),  # 200 s: the comp_t's exponent
        _record(200, 100, "bash", 1),
        _record(100, 1, "sshd", 2, 1),
        _record(300, 50, "python", 250, 50),  # pid 300 again, now under the suite's own process
        _record(50, 1, "python", 100),
    ]
    path = tmp_path / "pacct"
    path.write_bytes(b"".join(records) + b"\0" * 10)  # a record being written as it is read: left out
    procs = testprofile.read_pacct(path)
    assert [(p["pid"], p["comm"], p["cpu"]) for p in procs] == [
        (300, "python", 200.0), (200, "bash", 0.01), (100, "sshd", 0.03), (300, "python", 3.0), (50, "python", 1.0)]
    text = testprofile.pacct_table(procs)
    assert text.startswith("process accounting: 5 processes ended, 204 s of CPU")
    assert "| under sshd | python | 1 | 200.0 |" in text and "| the suite's tree | python | 2 | 4.0 |" in text
    assert "| the suite's tree | sshd | 1 | 0.0 |" in text
    path.write_bytes(testprofile.ACCT_V3.pack(0, 2, *[0] * 7, 0.0, *[0] * 8, b"x"))
    with pytest.raises(SystemExit, match="not acct v3"):
        testprofile.read_pacct(path)
