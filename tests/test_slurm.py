"""`kit cluster --scheduler slurm` against a real Slurm (tests/slurmhosts.py): slurmctld + two slurmd nodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import redeclare_suite
from test_multinode import TWO_NODE_SUITE, write_suite

from kit.cli import main
from kit.config.hosts import load_hosts
from kit.core.yamlio import ConfigError
from kit.run.slurm import STOP_WAIT_S

REPO = Path(__file__).resolve().parent.parent
LOG = "logs/paddle/resnet50/bz2/2n1g/resnet50_b2_fp32_1.log"
FOLDER = "paddle/resnet50/bz2/2n1g/fp32/1"
LONG = TWO_NODE_SUITE.replace("measure_steps: 10", "measure_steps: 1000000")


def slurm_yaml(tmp_path: Path, **keys) -> Path:
    section = {"partition": "debug", "shared_dir": str(tmp_path / "shared"), "python": sys.executable,
               "nic": "eth0", "pending_timeout": 60, **keys}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "slurm": section}))
    return path


def kit_cluster(tmp_path: Path, suite: str = TWO_NODE_SUITE, *more: str) -> list[str]:
    return ["cluster", "--scheduler", "slurm", "--suite", str(write_suite(tmp_path, suite)),
            "--hosts-file", str(slurm_yaml(tmp_path)), "--runs-dir", str(tmp_path / "runs"), *more]


def harness_on(cluster, node: str) -> list[str]:
    out = cluster.net.run(node, ["ps", "-eo", "pid,args"]).stdout
    return [line for line in out.splitlines() if "train.py" in line or "slurmstepd" in line]


def nothing_left(cluster) -> None:
    """No job or step in squeue, no task (or slurmstepd) on either node, within the runner's own wait for a
    cancelled step (STOP_WAIT_S: scancel, KillWait, slurmstepd's end; a loaded 2-core host took over 30 s once)."""
    end = time.monotonic() + STOP_WAIT_S
    while (cluster.jobs() or harness_on(cluster, "h2") or harness_on(cluster, "h3")) and time.monotonic() < end:
        time.sleep(0.5)
    assert cluster.jobs() == [], "Slurm still lists the job"
    for node in ("h2", "h3"):
        assert harness_on(cluster, node) == [], f"processes left on {node}"


def wait_training(tmp_path: Path, node: str = "h2", timeout: float = 180) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        logs = list((tmp_path / "shared" / "runs").glob(f"*/{node}/{FOLDER}/stdout.log"))
        if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise AssertionError("the job step never started training")


def entry_of(tmp_path: Path) -> tuple[Path, dict]:
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    return run_dir, entry


def test_slurm_paddle_data_parallel_across_two_nodes(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    start = time.monotonic()
    assert main(kit_cluster(tmp_path)) == 0
    print(f"2-node Slurm run wall time: {time.monotonic() - start:.1f} s")
    run_dir, entry = entry_of(tmp_path)
    assert entry["status"] == "ok" and set(entry["hosts"]) == {"h2", "h3"}
    record = entry["slurm"]
    assert record["step"] == f"{record['job_id']}.1" and record["step_state"] == "COMPLETED"  # step 0: check_env
    assert record["nodes"] == {"h2": {"exit_code": 0, "lost": None}, "h3": {"exit_code": 0, "lost": None}}
    assert record["sacct"]["state"] == "COMPLETED" and record["sacct"]["exit_code"] == "0:0"  # slurmdbd's record
    assert record["sacct"]["nodes"] == "h[2-3]"
    start_line = next(json.loads(line.split(" ", 1)[1]) for line in (run_dir / LOG).read_text().splitlines()
                      if line.startswith(":::KITLOG") and '"run_start"' in line)
    assert start_line["ranks"] == 2 and start_line["global_batch"] == 4 and start_line["host"] == "h2"
    for node in ("h2", "h3"):
        assert (run_dir / "hosts" / node / FOLDER / "stdout.log").is_file()
        assert "train.py" in entry["hosts"][node]["command"]
    assert (run_dir / "slurm" / FOLDER / "step.sh").is_file()
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["scheduler"] == "slurm" and "finished" in meta and meta["expanded_suite"]["cases"][0]["nodes"] == 2
    assert [p["log"] for p in meta["planned_runs"]] == list(meta["runs"])  # completion recorded as kit bench's
    assert (run_dir / "report.md").read_text().splitlines()[2] == "complete: all 1 planned runs finished."
    # check_env's probes ran on each node in one step: raw outputs, captures and the verdict as for SSH hosts
    assert json.loads((run_dir / "env" / "verdict.json").read_text())["ok"] is True
    for node in ("h2", "h3"):
        capture = json.loads((run_dir / "env" / node / "capture.json").read_text())
        assert capture["host"] == node and capture["nic"] == "eth0"  # its operstate probe answered
        assert (run_dir / "env" / node / "cpuinfo.txt").read_text() == Path("/proc/cpuinfo").read_text()
        assert json.loads((run_dir / "env" / node / "probes.json").read_text())["kernel"]["exit"] == 0
    nothing_left(slurm_cluster)


def test_slurm_case_past_its_time_limit_is_cancelled(slurm_cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert main(kit_cluster(tmp_path, LONG.replace("timeout_s: 240", "timeout_s: 30"))) == 1
    run_dir, entry = entry_of(tmp_path)
    assert entry["status"] == "timeout" and entry["slurm"]["step_state"] == "TIMEOUT", entry
    assert json.loads((run_dir / "results.json").read_text())["completion"]["state"] == "complete"  # ended, failed
    assert entry["slurm"]["sacct"]["state"] == "CANCELLED"  # the kit's timeout came first: it scancelled the step
    nothing_left(slurm_cluster)
    # what rank 0 printed before the cancel is kept (on a loaded host 30 s may end it before its first step: the
    # steps kept are held where the test waits for them, below)
    assert (run_dir / "hosts" / "h2" / FOLDER / "stdout.log").read_text().strip()
    assert (run_dir / "hosts" / "h3" / FOLDER / "stdout.log").is_file()


def test_slurm_node_killed_mid_job_fails_the_run_naming_it_and_resume_redoes_it(slurm_cluster, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert slurm_cluster.kill_node_during("h3", lambda: main(kit_cluster(tmp_path, LONG)),
                                          lambda: wait_training(tmp_path)) == 1
    run_dir, entry = entry_of(tmp_path)
    assert entry["status"] == "failed" and "h3: node lost" in entry["reason"], entry
    assert entry["slurm"]["step_state"] == "NODE_FAIL" and entry["slurm"]["nodes"]["h3"]["lost"]
    assert entry["slurm"]["sacct"]["state"] in ("NODE_FAIL", "CANCELLED", "FAILED"), entry["slurm"]["sacct"]
    assert '"event": "step"' in (run_dir / "hosts" / "h2" / FOLDER / "stdout.log").read_text()  # kept
    nothing_left(slurm_cluster)
    resume = ["cluster", "--scheduler", "slurm", "--resume", str(run_dir), "--hosts-file", str(tmp_path / "hosts.yaml")]
    (run_dir / "suite.yaml").write_text(TWO_NODE_SUITE)  # a short step count for the redo
    assert main(resume) == 2  # an edited suite is refused at resume ...
    redeclare_suite(run_dir, TWO_NODE_SUITE)  # ... unless run.json declares it anew
    assert main(resume) == 0
    _run_dir, entry = entry_of(tmp_path)
    assert entry["status"] == "ok"
    assert list((run_dir / "attempts").rglob("*.log.1")) and list((run_dir / "attempts" / "hosts").rglob("stdout.log"))


def test_slurm_ctrl_c_cancels_the_job(slurm_cluster, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "kit", *kit_cluster(tmp_path, LONG)], cwd=REPO,
                            env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        wait_training(tmp_path)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=150)
    finally:
        proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert "--resume" in out
    nothing_left(slurm_cluster)


def test_slurm_ctrl_c_while_the_allocation_pends_cancels_it_and_says_so(slurm_cluster, tmp_path):
    """Another job holds both nodes: the kit's salloc pends; Ctrl-C then scancels the pending job (salloc, in a
    session of its own, never hears the Ctrl-C) and the kit names it."""
    held = slurm_cluster.run(["salloc", "--no-shell", "-N", "2", "-p", "debug", "-J", "holder"])
    assert held.returncode == 0, held.stderr
    proc = subprocess.Popen([sys.executable, "-m", "kit", *kit_cluster(tmp_path)], cwd=REPO,
                            env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 60
        while not (pending := [j for j in slurm_cluster.jobs() if j.endswith(" PENDING")]):
            assert time.monotonic() < end, slurm_cluster.jobs()
            time.sleep(0.5)
        (job,) = [j.split()[0] for j in pending]
        time.sleep(1.5)  # the kit has read salloc's "Pending job allocation N"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
        slurm_cluster.run(["scancel", "--name", "holder"])
    assert proc.returncode == 130, out[-3000:]
    assert f"job {job} (PENDING) for 2 node(s) of partition debug: scancel {job} (Ctrl-C)" in out, out[-3000:]
    nothing_left(slurm_cluster)


def test_kill_9_of_kit_cancels_the_slurm_job(slurm_cluster, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "kit", *kit_cluster(tmp_path, LONG)], cwd=REPO,
                            env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_training(tmp_path)
        assert slurm_cluster.jobs()
    finally:
        proc.kill()  # kill -9: kit cancels nothing itself; its guard scancels the job
        proc.wait()
    nothing_left(slurm_cluster)


def test_slurm_errors_are_one_line(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    args = kit_cluster(tmp_path)
    slurm_yaml(tmp_path, partition="gpu")
    assert main(args) == 2
    assert "slurm.partition 'gpu': Slurm has no such partition (sinfo lists: debug)" in capsys.readouterr().err
    # a node held by another job: the 2-node job pends past the limit, with squeue's reason
    slurm_yaml(tmp_path, pending_timeout=4)
    holder = slurm_cluster.run(["salloc", "--no-shell", "-N", "1", "-w", "h3", "-J", "holder"])
    assert holder.returncode == 0, holder.stderr
    try:
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "still pending after 4 s (squeue reason: Resources); cancelled" in err, err
    finally:
        slurm_cluster.run(["scancel", "-n", "holder"])
    nothing_left(slurm_cluster)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(args) == 2
    assert "no Slurm on this machine: salloc, srun, squeue" in capsys.readouterr().err


def test_slurm_section_errors_name_file_line_key(tmp_path):
    path = slurm_yaml(tmp_path)
    for bad, line, message in (("container: rkt", 3,
                                "slurm.container: 'rkt': one of auto, native, docker, podman, pyxis"),
                               ("time_limit: 0", 3, "slurm.time_limit: must be more than 0"),
                               ("queue: x", 3, "queue: unknown key; known: account")):
        path.write_text(f"schema_version: 1\nslurm:\n  {bad}\n  partition: debug\n  shared_dir: /srv/kit\n")
        with pytest.raises(ConfigError) as err:
            load_hosts(path)
        assert f"{path}:{line}: {message}" in str(err.value)
    path.write_text("schema_version: 1\nslurm:\n  partition: debug\n")
    with pytest.raises(ConfigError, match=r":2: slurm.shared_dir: missing required key"):
        load_hosts(path)


def test_slurm_dry_run_lists_each_rank_and_starts_nothing(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    suite = TWO_NODE_SUITE + ("  - {framework: tensorflow, impl: reference, model: resnet50, nodes: 2, "
                              "gpus_per_node: 1, batch_size: 256, data: synthetic}\n")
    assert main(kit_cluster(tmp_path, suite, "--dry-run")) == 0
    out = capsys.readouterr().out
    h2, h3 = (slurm_cluster.net.host(n).address for n in ("h2", "h3"))
    assert "of Slurm partition debug; nothing is started." in out
    assert "each run one step (srun --jobid J -N n --ntasks-per-node 1 bash step.sh" in out
    assert f"2-node cases: h2 ({h2}, native, 0 GPUs), h3 ({h3}, native, 0 GPUs)" in out
    for node in ("h2", "h3"):
        line = next(ln for ln in out.splitlines() if ln.startswith(f"  {node}: "))
        assert "paddle.distributed.launch" in line and f"--master {h2}:" in line
    assert "skipped: one mpirun over the nodes starts TensorFlow's ranks itself" in out
    assert out.rstrip().endswith("1 case(s) would run, 1 skipped.")
    assert slurm_cluster.jobs() == [] and not (tmp_path / "runs").exists()
    fab = subprocess.run([str(REPO / ".venv" / "bin" / "fab"), "cluster", "--scheduler", "slurm", "--dry-run",
                          "--suite", str(tmp_path / "two.yaml"), "--hosts-file", str(tmp_path / "hosts.yaml"),
                          "--runs-dir", str(tmp_path / "runs")], cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)), timeout=120)
    assert fab.returncode == 0, fab.stderr
    assert fab.stdout == out  # `fab cluster` is `kit cluster`
