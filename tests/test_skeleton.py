"""The project skeleton: Makefile targets, `fab` tasks, system-package script."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import invoke
import pytest
from invoke.exceptions import Exit

import kit

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PACKAGES = ("python3-venv openssh-server docker.io iproute2 debootstrap docker-registry rsync openmpi-bin "
                   "slurmctld slurmd slurmdbd slurm-client munge mariadb-server mariadb-client podman catatonit "
                   "chromium chromium-driver")


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("cwd", REPO)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.mark.parametrize("argv", [["make"], ["make", "help"]])
def test_make_help_is_default_and_lists_targets(argv: list[str]) -> None:
    proc = run(argv)
    assert proc.returncode == 0, proc.stderr
    listed = {}
    for line in proc.stdout.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, desc = line.strip().partition(" ")
            listed[name] = desc.strip()
    for target in ["help", "setup", "test", "lint", "report", "bench-parse", "crosscheck", "clean"]:
        assert listed.get(target), f"'{target}' missing or undocumented in:\n{proc.stdout}"


def test_make_report_without_runs_fails_clearly(tmp_path: Path) -> None:
    proc = run(["make", "-s", "report", f"RUNS_DIR={tmp_path}", f"VENV={sys.prefix}"])
    assert proc.returncode != 0
    assert f"report: no run directory under {tmp_path}/; pass one: make report RUN=<dir>" in (proc.stderr)


def test_fab_list_shows_tasks_with_docstrings() -> None:
    proc = run([sys.executable, "-m", "fabric", "--list"])
    assert proc.returncode == 0, proc.stderr
    lines = [line.split() for line in proc.stdout.splitlines()]
    docs = {words[0]: " ".join(words[1:]) for words in lines if words}
    assert docs["report"] == "Report a run directory (kit report)."
    assert docs["crosscheck"] == "Re-derive published figures (kit crosscheck)."
    assert docs["extract"] == "Extract a log's throughput (kit extract)."


@pytest.fixture
def fake_cli(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Replace kit.cli with a recorder whose exit code is the last argv element if numeric."""
    calls: list[list[str]] = []

    def main(argv: list[str] | None = None) -> int:
        calls.append(list(argv or []))
        return int(argv[-1]) if argv and argv[-1].isdigit() else 0

    module = types.ModuleType("kit.cli")
    module.main = main
    monkeypatch.setitem(sys.modules, "kit.cli", module)
    monkeypatch.setattr(kit, "cli", module, raising=False)
    return calls


def test_tasks_build_the_kit_command_lines(fake_cli: list[list[str]]) -> None:
    from kit import tasks

    c = invoke.Context()
    tasks.report(c, "runs/r1")
    tasks.report(c, "runs/r1", out="out/r1")
    tasks.crosscheck(c, "claims.yaml")
    tasks.extract(c, "a.log")
    tasks.extract(c, "a.log", fmt="paddleclas")
    assert fake_cli == [
        ["report", "runs/r1"],
        ["report", "runs/r1", "--out", "out/r1"],
        ["crosscheck", "claims.yaml"],
        ["extract", "a.log", "--format", "auto"],
        ["extract", "a.log", "--format", "paddleclas"],
    ]


def test_tasks_turn_a_nonzero_exit_code_into_invoke_exit(fake_cli: list[list[str]]) -> None:
    from kit import tasks

    with pytest.raises(Exit) as excinfo:
        tasks.crosscheck(invoke.Context(), "3")
    assert excinfo.value.code == 3


def test_fabfile_reexports_exactly_the_kit_tasks() -> None:
    from kit import tasks

    spec = importlib.util.spec_from_file_location("fabfile", REPO / "fabfile.py")
    fabfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fabfile)

    assert fabfile.__all__ == tasks.__all__
    for name in tasks.__all__:
        assert getattr(fabfile, name) is getattr(tasks, name)


def test_install_system_deps_lists_packages() -> None:
    proc = run(["scripts/install_system_deps.sh", "--list"])
    assert proc.returncode == 0
    assert proc.stdout.strip() == SYSTEM_PACKAGES


def _as_unprivileged(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    assert setpriv, "setpriv (util-linux) is needed to drop root for this test"
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


def test_not_root_refuses_and_setup_says_what_to_install() -> None:
    # a world-readable copy, so an unprivileged user can run it wherever the repo lives
    work = Path(tempfile.mkdtemp(prefix="kit-skeleton-"))
    try:
        work.chmod(0o755)
        (work / "scripts").mkdir(mode=0o755)
        shutil.copy2(REPO / "Makefile", work / "Makefile")
        shutil.copy2(REPO / "scripts" / "install_system_deps.sh", work / "scripts")
        env = {**os.environ, "HOME": str(work)}

        proc = run(_as_unprivileged(["scripts/install_system_deps.sh"]), cwd=work, env=env)
        assert proc.returncode == 1
        assert "install_system_deps.sh: must run as root; run: sudo " in proc.stderr

        proc = run(_as_unprivileged(["make", "-s", "system-deps"]), cwd=work, env=env)
        assert proc.returncode == 0, proc.stderr
        assert f"    {SYSTEM_PACKAGES}" in proc.stdout.splitlines()
        assert "install them with:  sudo scripts/install_system_deps.sh" in proc.stdout
        assert f"sudo apt-get install -y {SYSTEM_PACKAGES}" in proc.stdout
    finally:
        shutil.rmtree(work)


def test_fab_runs_the_real_cli_and_passes_its_exit_code_on(published: Path) -> None:
    log = published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log"
    proc = run([sys.executable, "-m", "fabric", "extract", "--log", str(log)])
    assert proc.returncode == 0, proc.stderr
    assert "format: paddleclas (auto)" in proc.stdout
    float(proc.stdout.splitlines()[-1])  # the figure is on the last line

    # crosscheck: fab exits with whatever `kit crosscheck` exits with, and prints the same
    claims = str(published / "expected.yaml")
    direct = run([sys.executable, "-m", "kit", "crosscheck", claims])
    via_fab = run([sys.executable, "-m", "fabric", "crosscheck", "--claims", claims])
    assert via_fab.returncode == direct.returncode
    assert via_fab.stdout == direct.stdout
    missing = run([sys.executable, "-m", "fabric", "crosscheck", "--claims", "/nonexistent.yaml"])
    assert missing.returncode not in (0, None)
    assert missing.returncode == run([sys.executable, "-m", "kit", "crosscheck", "/nonexistent.yaml"]).returncode
