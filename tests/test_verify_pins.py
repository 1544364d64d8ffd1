"""scripts/verify_pins.py: the self-check every image runs as its last build step (standalone, no kit imports)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "verify_pins.py"
VENV_PY = REPO / ".venv" / "bin" / "python"


def _load():
    spec = importlib.util.spec_from_file_location("verify_pins_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


vp = _load()


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_PY), str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.fixture(scope="module")
def venv_versions() -> tuple[str, str]:
    """(python version, installed PyYAML version) of the venv interpreter the script runs under."""
    assert VENV_PY.is_file(), VENV_PY
    out = subprocess.run(
        [
            str(VENV_PY),
            "-c",
            "import platform, importlib.metadata as m; print(platform.python_version()); print(m.version('PyYAML'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(out) == 2
    return out[0], out[1]


def test_script_has_no_kit_imports():
    text = SCRIPT.read_text()
    assert "import kit" not in text and "from kit" not in text


# ---- decoding the libraries' integers ---------------------------------------------------------


@pytest.mark.parametrize(
    "raw,text",
    [(8005, "8.0.5"), (7605, "7.6.5"), (90100, "9.1.0"), (8907, "8.9.7"), (8200, "8.2.0"), ("8005", "8.0.5")],
)
def test_decode_cudnn(raw, text):
    assert vp.decode_cudnn(raw) == text


@pytest.mark.parametrize("raw,text", [(2803, "2.8.3"), (21903, "2.19.3"), (21505, "2.15.5"), (2708, "2.7.8")])
def test_decode_nccl(raw, text):
    assert vp.decode_nccl(raw) == text


@pytest.mark.parametrize(
    "raw,text", [(11010, "11.1"), (12030, "12.3"), (11080, "11.8"), (10020, "10.2"), (11020, "11.2")]
)
def test_decode_cudart(raw, text):
    assert vp.decode_cudart(raw) == text


# ---- compare ----------------------------------------------------------------------------------


def test_compare_numeric_on_common_components():
    assert vp.compare("11.1.1", "11.1") == (True, "compared to 11.1")
    assert vp.compare("3.11", "3.11.2") == (True, "compared to 3.11")
    assert vp.compare("8.0.5", "8.0.5") == (True, "exact")


def test_compare_numeric_mismatch():
    ok, how = vp.compare("8.0.5", "8.0.4")
    assert ok is False and how == "exact"
    assert vp.compare("11.2", "11.20")[0] is False  # components are numbers, not prefixes of text
    assert vp.compare("12.0", "11.8.0")[0] is False


def test_compare_non_numeric_is_exact():
    assert vp.compare("1.8.0a0+1606899", "1.8.0a0+1606899") == (True, "exact")
    assert vp.compare("1.8.0a0+1606899", "1.8.0a0+1606898")[0] is False
    assert vp.compare("1.8.0a0+1606899", "1.8.0")[0] is False
    assert vp.compare("1.8.0", "1.8.0a0+1606899")[0] is False
    assert vp.compare("2.13.0+cpu", "2.13.0") == (False, "exact")
    assert vp.compare("2.13.0+cpu", "2.13.0+cpu") == (True, "exact")


def test_compare_strips_whitespace_and_accepts_non_strings():
    assert vp.compare(" 11.2 ", "11.2\n") == (True, "exact")
    assert vp.compare("11.2", 11.2) == (True, "exact")


# ---- dist_matches -----------------------------------------------------------------------------


def test_dist_matches():
    assert vp.dist_matches("2.13.0", "2.13.0+cpu") is True
    assert vp.dist_matches("2.13.0+cpu", "2.13.0") is False
    assert vp.dist_matches("2.5.0.post112", "2.5.0.post112") is True
    assert vp.dist_matches("2.13.0", "2.13.0") is True
    assert vp.dist_matches("2.13.0", "2.13.1") is False
    assert vp.dist_matches("2.13.0", "2.13.0.post1") is False
    assert vp.dist_matches("2.5.0", "2.5.0.post112") is False


# ---- main() as the image build runs it --------------------------------------------------------


def test_main_all_pins_hold(venv_versions):
    py, pyyaml = venv_versions
    proc = run("--expect", f"python={py}", "--dist", f"pyyaml=={pyyaml}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "verify_pins: all 2 pins hold"
    assert lines[0] == (
        f"verify_pins: ok       version python: pinned {py}, the image reports {py}; exact (platform.python_version())"
    )
    assert lines[1] == (
        f"verify_pins: ok       dist pyyaml: pinned {pyyaml}, the image reports {pyyaml}; "
        "pip == (installed distribution)"
    )
    assert proc.stderr == ""


def test_main_major_minor_python_pin_holds(venv_versions):
    py, _ = venv_versions
    major_minor = ".".join(py.split(".")[:2])
    proc = run("--expect", f"python={major_minor}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"compared to {major_minor}" in proc.stdout
    assert "verify_pins: all 1 pins hold" in proc.stdout


def test_main_wrong_python_exits_1(venv_versions):
    py, pyyaml = venv_versions
    proc = run("--expect", "python=3.9.1", "--dist", f"pyyaml=={pyyaml}")
    assert proc.returncode == 1
    both = proc.stdout + proc.stderr
    assert f"MISMATCH version python: pinned 3.9.1, the image reports {py}" in both
    assert "ok       dist pyyaml" in proc.stdout
    assert "verify_pins: 1 of 2 pins do not hold in this image" in proc.stderr
    assert "all 2 pins hold" not in both


def test_main_wrong_dist_exits_1(venv_versions):
    _, pyyaml = venv_versions
    proc = run("--dist", "pyyaml==0.0.1")
    assert proc.returncode == 1
    assert f"MISMATCH dist pyyaml: pinned 0.0.1, the image reports {pyyaml}" in proc.stdout


def test_main_missing_dist_is_a_mismatch():
    proc = run("--dist", "no-such-distribution-kit==1.0")
    assert proc.returncode == 1
    assert (
        "MISMATCH dist no-such-distribution-kit: pinned 1.0, the image reports (unreadable); unreadable: not installed"
    ) in proc.stdout


def test_main_unreadable_library_is_a_mismatch():
    # no MXNet in the kit's venv: the pin cannot be checked, so it does not hold
    proc = run("--expect", "mxnet=1.9.1")
    assert proc.returncode == 1
    assert "MISMATCH version mxnet: pinned 1.9.1, the image reports (unreadable); unreadable: " in proc.stdout


def test_main_unknown_expect_key_is_usage_error():
    proc = run("--expect", "cudart=11.2")
    assert proc.returncode == 2
    assert "--expect cudart: unknown key" in proc.stderr
    assert "torch" in proc.stderr  # the known keys are listed
    assert "MISMATCH" not in proc.stdout


def test_main_nothing_to_check_is_usage_error():
    proc = run()
    assert proc.returncode == 2
    assert "nothing to check" in proc.stderr


@pytest.mark.parametrize(
    "args", [["--expect", "python"], ["--dist", "pyyaml=6.0"], ["--git", "/opt/x"], ["--expect", "=3.11"]]
)
def test_main_malformed_pairs_are_usage_errors(args):
    proc = run(*args)
    assert proc.returncode == 2
    assert "expected" in proc.stderr


def test_main_record(tmp_path: Path, venv_versions):
    py, pyyaml = venv_versions
    record = tmp_path / "verified.json"
    proc = run("--expect", "python=3.9.1", "--dist", f"pyyaml=={pyyaml}", "--record", str(record))
    assert proc.returncode == 1
    data = json.loads(record.read_text())
    assert data["ok"] is False
    assert data["python"] == py
    assert data["checks"] == [
        {
            "kind": "version",
            "key": "python",
            "pinned": "3.9.1",
            "reported": py,
            "ok": False,
            "how": "exact (platform.python_version())",
        },
        {
            "kind": "dist",
            "key": "pyyaml",
            "pinned": pyyaml,
            "reported": pyyaml,
            "ok": True,
            "how": "pip == (installed distribution)",
        },
    ]


def test_main_record_ok(tmp_path: Path, venv_versions):
    py, _ = venv_versions
    record = tmp_path / "verified.json"
    proc = run("--expect", f"python={py}", "--record", str(record))
    assert proc.returncode == 0
    data = json.loads(record.read_text())
    assert data["ok"] is True
    assert [(c["kind"], c["key"], c["ok"]) for c in data["checks"]] == [("version", "python", True)]


def test_main_in_process_returns_exit_code(capsys: pytest.CaptureFixture[str]):
    py = platform.python_version()
    assert vp.main(["--expect", f"python={py}"]) == 0
    assert capsys.readouterr().out.endswith("verify_pins: all 1 pins hold\n")
    assert vp.main(["--expect", "python=2.7"]) == 1
    assert f"MISMATCH version python: pinned 2.7, the image reports {py}" in capsys.readouterr().out


def test_in_process_versions_agree_with_venv(venv_versions):
    # the in-process test above reads this interpreter; make sure it is the venv's
    if Path(sys.executable).resolve() == VENV_PY.resolve():
        assert venv_versions == (platform.python_version(), importlib.metadata.version("PyYAML"))


# ---- --git: the model code's checked-out commit -----------------------------------------------


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=kit test",
            "-c",
            "user.email=kit@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str]:
    """A real git repository with one commit: (path, commit)."""
    path = tmp_path / "model"
    path.mkdir()
    git(path, "init", "-q")
    (path / "main.py").write_text("print('model')\n")
    git(path, "add", "main.py")
    git(path, "commit", "-q", "-m", "first")
    commit = git(path, "rev-parse", "HEAD")
    assert len(commit) == 40
    return path, commit


def test_git_detached_right_commit_passes(repo):
    path, commit = repo
    git(path, "checkout", "-q", "--detach", "HEAD")
    assert (path / ".git" / "HEAD").read_text().strip() == commit
    assert vp.git_head(str(path)) == commit
    proc = run("--git", f"{path}={commit}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ok       git {path}: pinned {commit}, the image reports {commit}; exact ({path}/.git/HEAD)" in proc.stdout
    assert "verify_pins: all 1 pins hold" in proc.stdout


def test_git_detached_wrong_commit_fails(repo, tmp_path: Path):
    path, commit = repo
    git(path, "checkout", "-q", "--detach", "HEAD")
    wrong = "0123456789abcdef0123456789abcdef01234567"
    assert wrong != commit
    record = tmp_path / "r.json"
    proc = run("--git", f"{path}={wrong}", "--record", str(record))
    assert proc.returncode == 1
    assert f"MISMATCH git {path}: pinned {wrong}, the image reports {commit}" in proc.stdout
    data = json.loads(record.read_text())
    assert data["ok"] is False
    assert data["checks"][0]["kind"] == "git" and data["checks"][0]["reported"] == commit


def test_git_on_a_branch_resolves_to_the_commit(repo):
    path, commit = repo
    assert (path / ".git" / "HEAD").read_text().strip() == "ref: refs/heads/main"
    assert vp.git_head(str(path)) == commit
    proc = run("--git", f"{path}={commit}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_git_second_commit_moves_head(repo):
    path, first = repo
    (path / "main.py").write_text("print('model v2')\n")
    git(path, "commit", "-q", "-am", "second")
    second = git(path, "rev-parse", "HEAD")
    assert second != first
    assert vp.git_head(str(path)) == second
    proc = run("--git", f"{path}={first}")
    assert proc.returncode == 1
    assert f"pinned {first}, the image reports {second}" in proc.stdout
    git(path, "checkout", "-q", "--detach", first)
    assert vp.git_head(str(path)) == first


def test_git_not_a_repository_is_unreadable(tmp_path: Path):
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(vp.Unreadable, match="cannot read"):
        vp.git_head(str(plain))
    proc = run("--git", f"{plain}={'a' * 40}")
    assert proc.returncode == 1
    assert f"MISMATCH git {plain}: pinned {'a' * 40}, the image reports (unreadable)" in proc.stdout
