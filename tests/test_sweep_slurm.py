"""`kit sweep --scheduler slurm` on the real Slurm test cluster (tests/slurmhosts.py: slurmd on h2 and h3): each node
its own job pinned to it, all at once, into one sweep laid out as the SSH sweep's. One unit with test_slurm.py
(conftest SHARED_UNITS): the cluster's ports are fixed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_slurm import REPO, nothing_left, slurm_yaml
from test_sweep import kitlog_events, write_suite

from kit.cli import main
from kit.core import rundir

FOLDER = "torch/resnet50/bz2/1n1g/fp32/1"
NODES = ("h2", "h3")


def kit_sweep(tmp_path: Path, repeats: int, *more: str) -> list[str]:
    return ["sweep", "--scheduler", "slurm", "--suite", str(write_suite(tmp_path, repeats)), "--hosts-file",
            str(slurm_yaml(tmp_path)), "--runs-dir", str(tmp_path / "runs"), *more]


def the_sweep(tmp_path: Path) -> Path:
    (run_dir,) = list((tmp_path / "runs").iterdir())
    return run_dir


def wait_for_step(tmp_path: Path, node: str, training: bool, timeout_s: float = 180) -> None:
    """Until the node's first run's step has started (its stdout.log on the shared directory), and with training,
    until it logs a measured step."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = list((tmp_path / "shared" / "runs").glob(f"*/{node}/{FOLDER}/stdout.log"))
        if logs and (not training or '"event": "step"' in logs[0].read_text(errors="replace")):
            return
        time.sleep(0.2)
    raise AssertionError(f"no step of {node} started{' training' if training else ''}")


def test_a_slurm_sweep_runs_each_node_its_own_job_at_once(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    start = time.monotonic()
    rc = main(kit_sweep(tmp_path, 2))
    print(f"Slurm sweep of two nodes: {time.monotonic() - start:.1f} s", file=sys.stderr)
    out = capsys.readouterr().out
    run_dir = the_sweep(tmp_path)
    fleet = rundir.read_results(run_dir)["fleet"]
    assert rc in (0, 1) and fleet["verdict"].startswith(("2 of 2 hosts within", "1 of 2 hosts within")), out
    assert fleet["verdict"] in out and fleet["verdict"] in (run_dir / "report.md").read_text()
    sweep = rundir.read_sweep(run_dir)
    assert sweep["scheduler"] == "slurm" and sweep["hosts"] == list(NODES)
    assert {n: r["status"] for n, r in sweep["rows"].items()} == {"h2": "ok", "h3": "ok"}, sweep["rows"]
    assert sorted(h["host"] for h in fleet["hosts"]) == list(NODES) and all(h["status"] == "ok" for h in fleet["hosts"])
    spans, jobs = {}, set()
    for node in NODES:
        part = rundir.sweep_host_dir(run_dir, node)
        record = rundir.read_run(part)
        assert record.hosts == [node] and record.finished
        assert [(e.repeat, e.status) for e in record.runs.values()] == [(1, "ok"), (2, "ok")]
        for entry in record.runs.values():  # a step of the node's own job, on that node alone
            slurm = entry.fields["slurm"]
            assert slurm["nodes"] == {node: {"exit_code": 0, "lost": None}} and slurm["step_state"] == "COMPLETED"
            assert slurm["sacct"]["nodes"] == node, slurm["sacct"]
            jobs.add(slurm["job_id"])
        capture = json.loads(rundir.capture_path(run_dir / "env", node).read_text())  # its job's check-env step
        assert capture["host"] == node
        events = [kitlog_events(log) for log in sorted((part / "logs").rglob("*.log"))]
        assert [e[0]["host"] for e in events] == [node, node]  # the harness ran on that node (its hostname)
        spans[node] = (events[0][0]["time_ms"], events[-1][-1]["time_ms"])
        assert f"[hosts/{node}/report.md]" in (run_dir / "report.md").read_text()
    assert len(jobs) == 2  # one job a node
    # each node's first run started before the other's last run ended: the nodes ran at once
    assert all(start < end for _n, (start, _) in spans.items() for _o, (_, end) in spans.items()), spans
    nothing_left(slurm_cluster)


def test_a_node_killed_mid_sweep_is_a_row_saying_so_and_resume_redoes_only_its_runs(slurm_cluster, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert slurm_cluster.kill_node_during("h3", lambda: main(kit_sweep(tmp_path, 1)), lambda: wait_for_step(
        tmp_path, "h3", training=False)) == 1  # killed as its run's step starts: before it could finish it
    run_dir = the_sweep(tmp_path)
    rows = rundir.read_sweep(run_dir)["rows"]
    assert rows["h2"]["status"] == "ok" and rows["h3"]["status"] == "unreachable", rows
    assert rows["h3"]["reason"].startswith("lost mid-sweep (Slurm lists it down"), rows
    assert "#1: failed: h3: node lost (Slurm lists it" in rows["h3"]["reason"], rows
    fleet = rundir.read_results(run_dir)["fleet"]
    assert fleet["hosts"][0]["host"] == "h3" and "h3 unreachable: lost mid-sweep" in fleet["verdict"]
    h2_runs = {log: e.fields for log, e in rundir.read_run(rundir.sweep_host_dir(run_dir, "h2")).runs.items()}
    assert [e["status"] for e in h2_runs.values()] == ["ok"]
    nothing_left(slurm_cluster)
    # resume: h3's run again, h2's left as it was
    assert main(["sweep", "--resume", str(run_dir), "--hosts-file", str(tmp_path / "hosts.yaml")]) == 0
    again = {log: e.fields for log, e in rundir.read_run(rundir.sweep_host_dir(run_dir, "h2")).runs.items()}
    assert again == h2_runs
    h3 = rundir.read_run(rundir.sweep_host_dir(run_dir, "h3"))
    assert [e.status for e in h3.runs.values()] == ["ok"]
    assert {n: r["status"] for n, r in rundir.read_sweep(run_dir)["rows"].items()} == {"h2": "ok", "h3": "ok"}
    nothing_left(slurm_cluster)


def test_ctrl_c_cancels_every_nodes_job(slurm_cluster, tmp_path):
    argv = kit_sweep(tmp_path, 1)
    suite = Path(argv[argv.index("--suite") + 1])
    suite.write_text(suite.read_text().replace("measure_steps: 10", "measure_steps: 1000000"))
    proc = subprocess.Popen([sys.executable, "-m", "kit", *argv], cwd=REPO,
                            env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        for node in NODES:
            wait_for_step(tmp_path, node, training=True)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=150)
    finally:
        proc.kill()
    assert proc.returncode == 130, out[-3000:]
    said = next(line for line in out.splitlines() if line.startswith("kit sweep: interrupted; scancel of job "))
    assert said.count("(RUNNING) on h") == 2 and "Continue with: kit sweep --resume" in said, said
    nothing_left(slurm_cluster)


def test_bad_input_is_one_line_and_a_drained_node_a_row_saying_why(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    no_slurm = tmp_path / "ssh-only.yaml"
    no_slurm.write_text("schema_version: 1\nhosts:\n  - {name: a, address: 10.0.0.1, user: u}\n")
    argv = kit_sweep(tmp_path, 1)
    for more, said in (
            (["--hosts-file", str(no_slurm)], f"kit: {no_slurm}: no slurm: section (partition, shared_dir, ...); "
                                              "--scheduler slurm needs it"),
            (["--nodes", "h2,h9"], "kit: --nodes h2,h9: h9 not a node of partition debug (sinfo lists: h2, h3)"),
            (["--hosts", "h2"], "kit: --hosts names SSH hosts of the inventory; with --scheduler slurm name nodes "
                                "with --nodes")):
        assert main([*argv, *more]) == 2
        err = capsys.readouterr().err
        assert err == said + "\n", err
    assert not (tmp_path / "runs").exists()  # nothing started
    drained = slurm_cluster.run(["scontrol", "update", "nodename=h3", "state=drain", "reason=fan replaced"])
    assert drained.returncode == 0, drained.stderr
    try:
        assert main([*argv, "--nodes", "h3"]) == 1
    finally:
        slurm_cluster.run(["scontrol", "update", "nodename=h3", "state=resume"])
    run_dir = the_sweep(tmp_path)
    assert rundir.read_sweep(run_dir)["rows"]["h3"]["status"] == "unavailable"
    assert rundir.read_sweep(run_dir)["rows"]["h3"]["reason"] == \
        "Slurm lists it drain: fan replaced; no job asked of it"
    assert "h3 unavailable: Slurm lists it drain: fan replaced" in rundir.read_results(run_dir)["fleet"]["verdict"]
    assert slurm_cluster.jobs() == []
    slurm_cluster.wait_idle(["h3"])


def test_which_node_states_take_no_new_job():
    from kit.run.slurm_cli import unusable

    for state in ("idle", "mix", "alloc", "idle~", "comp", "resv"):
        assert unusable(state, "none") is None, state
    assert unusable("down*", "Not responding") == "Slurm lists it down*: Not responding"
    assert unusable("idle*", "none") == "Slurm lists it idle*"  # the controller no longer hears from it
    assert unusable("drain", "fan replaced") == "Slurm lists it drain: fan replaced"
    assert all(unusable(state, "") for state in ("drng", "fail", "maint$", "down~", "inval"))
