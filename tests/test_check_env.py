"""check_env on real SSH hosts; nvidia-smi is the one boundary replayed from recorded real outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from nethosts import install_nvidia_smi, write_inventory

from kit.cli import main

REPO = Path(__file__).resolve().parent.parent
FAB = Path(sys.executable).parent / "fab"
SMI = REPO / "tests" / "fixtures" / "nvidia-smi"


@contextmanager
def gpus(ssh_hosts, per_host: dict[str, tuple[str, str]]):
    """Put an nvidia-smi stub (xml fixture, topo fixture) on the PATH of the named hosts."""
    stubs = []
    try:
        for host in ssh_hosts.hosts:
            if host.name in per_host:
                xml, topo = per_host[host.name]
                stubs.append(install_nvidia_smi(host, SMI / xml, SMI / topo))
        yield
    finally:
        for stub in stubs:
            stub.unlink(missing_ok=True)


def inventory(ssh_hosts, tmp_path: Path) -> Path:
    return write_inventory(ssh_hosts, tmp_path, gpus=8)


def only_env_dir(runs: Path) -> Path:
    (run_dir,) = list(runs.iterdir())
    return run_dir / "env"


A100 = ("a100-sxm4-v12.xml", "topo-m_2xA100_2xmlx5_della.txt")
T4_BUSY = ("tesla-t4.xml", "topo-m_2xA100_2xmlx5_della.txt")


def test_fab_check_env_captures_both_hosts_and_agrees(ssh_hosts, tmp_path):
    runs = tmp_path / "runs"
    with gpus(ssh_hosts, {"h1": A100, "h2": A100}):
        out = subprocess.run([str(FAB), "-H", "h1,h2", "check_env", "--hosts-file", str(inventory(ssh_hosts, tmp_path)),
                              "--runs-dir", str(runs)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "check-env: consistent (2 host(s))" in out.stdout
    env = only_env_dir(runs)
    for host in ("h1", "h2"):
        assert (env / host / "nvidia-smi-q.txt").read_bytes() == (SMI / A100[0]).read_bytes()
        assert (env / host / "nvidia-smi-topo.txt").read_bytes() == (SMI / A100[1]).read_bytes()
        capture = json.loads((env / host / "capture.json").read_text())
        assert capture["host"] == host and capture["smi"]["driver_version"] == "535.54.03"
        assert capture["cpu"]["logical_cpus"] >= 1 and capture["nic"] == "eth0"
    verdict = json.loads((env / "verdict.json").read_text())
    assert verdict["ok"] is True and verdict["problems"] == []


def test_a_different_gpu_model_and_a_busy_gpu_are_refused_naming_the_host(ssh_hosts, tmp_path, capsys):
    runs = tmp_path / "runs"
    with gpus(ssh_hosts, {"h1": A100, "h2": A100, "h3": T4_BUSY}):
        rc = main(["check-env", "--hosts", "h1,h2,h3", "--hosts-file", str(inventory(ssh_hosts, tmp_path)),
                   "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    assert rc == 1 and "REFUSED" in out
    assert "h3" in out and "Tesla T4" in out and "A100" in out
    assert "pid 5762" in out  # the recorded T4 output has a python process on its GPU
    verdict = json.loads((only_env_dir(runs) / "verdict.json").read_text())
    assert verdict["ok"] is False and "h3" in verdict["busy"]


def test_hosts_without_gpus_are_reported_as_such(ssh_hosts, tmp_path, capsys):
    runs = tmp_path / "runs"
    rc = main(["check-env", "--hosts", "h1,h2", "--hosts-file", str(inventory(ssh_hosts, tmp_path)),
               "--runs-dir", str(runs)])
    out = capsys.readouterr().out
    assert rc == 0, out
    verdict = json.loads((only_env_dir(runs) / "verdict.json").read_text())
    assert sorted(verdict["no_gpu"]) == ["h1", "h2"]
    assert not (only_env_dir(runs) / "h1" / "nvidia-smi-q.txt").exists()
    rc = main(["check-env", "--hosts", "h1,h2", "--hosts-file", str(inventory(ssh_hosts, tmp_path)),
               "--runs-dir", str(tmp_path / "runs2"), "--require-gpu"])
    assert rc == 1


def test_cudnn_parity_of_the_frameworks_a_suite_compares(ssh_hosts, tmp_path, capsys):
    from kit.config.suites import load_suite
    from kit.images.parity import cudnn_of, parity_warning
    from kit.images.spec import load_pins

    pins = load_pins()
    # seed 003: frameworks compared must share the cuDNN minor; 7.0.2 against 7.1.4 is a difference, 8.2 vs 8.2.1 not
    assert parity_warning({"paddle": ("p", "8.2"), "torch": ("t", "8.2.1")}) is None
    said = parity_warning({"paddle": ("paddle/x", "7.1.4"), "torch": ("pytorch/x", "7.0.2"), "mxnet": ("m", None)})
    assert said.startswith("cuDNN differs across the frameworks compared: paddle 7.1.4 (paddle/x), torch 7.0.2 "
                           "(pytorch/x); not pinned: mxnet. Seed 003: a cuDNN minor version moved ResNet50")
    assert cudnn_of(load_suite("local")) == {}  # a CPU suite: no GPU images to compare
    h100 = cudnn_of(load_suite("h100"))
    assert h100["paddle"] == ("paddle/h100", pins.get("paddle/h100").versions.get("cudnn"))
    rc = main(["check-env", "--hosts", "h1,h2", "--hosts-file", str(inventory(ssh_hosts, tmp_path)),
               "--runs-dir", str(tmp_path / "runs"), "--suite", "h100"])
    out = capsys.readouterr().out
    assert rc == 0 and "  cuDNN: " in out
    line = next(ln for ln in out.splitlines() if ln.startswith("  cuDNN: "))
    warning = parity_warning(h100)
    assert line == f"  cuDNN: {warning}" if warning else line.startswith("  cuDNN: the same minor version: paddle ")
