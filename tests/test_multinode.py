"""`fab -H h1,h2 run_multinode` on real SSH hosts (network namespaces): one job, all hosts at once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import redeclare_suite
from nethosts import write_inventory

from kit.cli import main

REPO = Path(__file__).resolve().parent.parent
FAB = Path(sys.executable).parent / "fab"

TWO_NODE_SUITE = """\
schema_version: 1
name: two
description: Paddle ResNet50 over two hosts (gloo)
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10, timeout_s: 240}
cases:
  - {framework: paddle, model: resnet50, nodes: 2, gpus_per_node: 1}
"""


def hosts_yaml(ssh_hosts, tmp_path: Path, extra: list[dict] | None = None) -> Path:
    return write_inventory(ssh_hosts, tmp_path, extra or (), ssh={"connect_timeout": 3}, gpus=0, python=sys.executable)


def write_suite(tmp_path: Path, text: str = TWO_NODE_SUITE) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(text)
    return path


def harness_on(ssh_hosts, name: str) -> list[str]:
    """A process listing on the host (over its namespace): the harness processes still alive."""
    out = ssh_hosts.run(name, ["ps", "-eo", "pid,args"])
    assert out.returncode == 0 and "PID" in out.stdout, (name, out.returncode, out.stdout[-500:], out.stderr[-500:])
    return [line for line in out.stdout.splitlines() if "harness/" in line and "train.py" in line]


def wait_for_training(work_dir: Path, timeout_s: float = 180) -> None:
    """Until a run under a host's work_dir logs its first measured step (AssertionError after timeout_s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = list(work_dir.rglob("stdout.log"))
        if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"no run under {work_dir} started training")


def left_on(ssh_hosts, name: str, wrapper_s: float = 15) -> list[str]:
    """What of a stopped run is left on the host: its training processes must be gone when the kit returns (listed
    at once); the kit's wrapper shell (`bash -c`, its command line carries train.py's) ends right after them, once
    it sees its child gone: on a loaded host that took a moment past the kit's return, so it gets WRAPPER_S."""
    left = harness_on(ssh_hosts, name)
    trained = [line for line in left if not line.split(None, 1)[1].startswith(("bash -c", "sh -c"))]
    deadline = time.monotonic() + wrapper_s
    while left and not trained and time.monotonic() < deadline:
        time.sleep(0.2)
        left = harness_on(ssh_hosts, name)
    return trained or left


def test_fab_run_multinode_runs_one_job_on_both_hosts_at_once(ssh_hosts, tmp_path):
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    start = time.monotonic()
    out = subprocess.run(
        [str(FAB), "-H", "h1,h2", "run_multinode", "--suite", str(write_suite(tmp_path)),
         "--hosts-file", str(inventory), "--runs-dir", str(runs)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    wall = time.monotonic() - start
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    (run_dir,) = list(runs.iterdir())  # exactly one job although fab called the task once per host
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["status"] == "ok" and set(entry["hosts"]) == {"h1", "h2"}
    log = run_dir / "logs/paddle/resnet50/bz2/2n1g/resnet50_b2_fp32_1.log"
    start_line = next(json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines()
                      if line.startswith(":::KITLOG") and '"run_start"' in line)
    assert start_line["ranks"] == 2 and start_line["global_batch"] == 4 and start_line["host"] == "h1"
    for host in ("h1", "h2"):
        assert (run_dir / "hosts" / host / "paddle/resnet50/bz2/2n1g/fp32/1/stdout.log").is_file()
    assert (run_dir / "report.md").read_text().splitlines()[2] == "complete: all 1 planned runs finished."
    assert [p["log"] for p in meta["planned_runs"]] == list(meta["runs"]) and "finished" in meta  # as kit bench's
    assert meta["expanded_suite"]["cases"][0]["nodes"] == 2
    assert all("train.py" in entry["hosts"][h]["command"] for h in ("h1", "h2")), "each host's command is kept"
    # the auditor's view: rank 1's line is found in h2's gathered log; both hosts' captures re-parse and agree
    from kit.audit import rules
    from kit.audit.evidence import Evidence

    findings = {f.rule.name: f for f in rules.evaluate(rules.load_rules(), Evidence(run_dir))}
    assert findings["every_rank_logged"].checked == 1 and not findings["every_rank_logged"].violations
    assert findings["environment_consistent"].checked == 2 and not findings["environment_consistent"].violations
    assert not findings["results_recomputed"].violations and not findings["report_recomputed"].violations
    assert [v.rule for f in findings.values() for v in f.violations] == []
    # gloo needs both ranks up together: a serial start would have hung until the case timeout
    assert wall < 240
    print(f"2-host run wall time: {wall:.1f} s")


def test_unreachable_host_stops_everything_before_it_starts(ssh_hosts, tmp_path, capsys):
    ghost = {"name": "ghost", "address": ssh_hosts.hosts[0].address.rsplit(".", 1)[0] + ".99", "port": 22,
             "user": "root", "key_file": str(ssh_hosts.hosts[0].key_file), "gpus": 0,
             "work_dir": str(tmp_path / "work" / "ghost"), "data_dir": str(tmp_path / "data"), "runtime": "native"}
    inventory = hosts_yaml(ssh_hosts, tmp_path, [ghost])
    runs = tmp_path / "runs"
    rc = main(["multinode", "--hosts", "h1,ghost", "--suite", str(write_suite(tmp_path)),
               "--hosts-file", str(inventory), "--runs-dir", str(runs)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "ghost" in err and "nothing started" in err
    assert not runs.exists() or not list(runs.rglob("*.log"))


def test_hung_case_is_killed_on_every_host(ssh_hosts, tmp_path):
    text = TWO_NODE_SUITE.replace("measure_steps: 10", "measure_steps: 1000000").replace("timeout_s: 240",
                                                                                       "timeout_s: 25")
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    rc = main(["multinode", "--hosts", "h1,h2", "--suite", str(write_suite(tmp_path, text)),
               "--hosts-file", str(inventory), "--runs-dir", str(runs)])
    assert rc == 1
    (run_dir,) = list(runs.iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "timeout" and "every host" in entry["reason"]
    # no grace period here: the kill waits until every process of the tree is gone
    for host in ("h1", "h2"):
        assert left_on(ssh_hosts, host) == [], f"orphan harness processes on {host}"
        assert (run_dir / "hosts" / host / "paddle/resnet50/bz2/2n1g/fp32/1/stdout.log").is_file()


def test_host_dying_mid_case_stops_the_others_and_resume_reruns_it(ssh_hosts, tmp_path):
    text = TWO_NODE_SUITE.replace("measure_steps: 10", "measure_steps: 1000000")
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("rc", main(
        ["multinode", "--hosts", "h1,h2", "--suite", str(write_suite(tmp_path, text)),
         "--hosts-file", str(inventory), "--runs-dir", str(runs)])))
    worker.start()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait until training runs on both hosts
            logs = list((tmp_path / "work" / "h1").rglob("stdout.log"))
            if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the job never started training")
        ssh_hosts.stop_host("h2")
        worker.join(timeout=120)
        assert not worker.is_alive()
    finally:
        ssh_hosts.start_host("h2")
    assert result["rc"] == 1
    (run_dir,) = list(runs.iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "failed" and "h2" in entry["reason"]
    assert left_on(ssh_hosts, "h1") == [], "h1's processes were not stopped"
    # resume redoes only the failed run (with a short step count so the test stays quick)
    resume = ["multinode", "--hosts", "h1,h2", "--resume", str(run_dir), "--hosts-file", str(inventory)]
    (run_dir / "suite.yaml").write_text(TWO_NODE_SUITE)  # a short step count for the redo
    assert main(resume) == 2  # an edited suite is refused at resume ...
    redeclare_suite(run_dir, TWO_NODE_SUITE)  # ... unless run.json declares it anew
    assert main(resume) == 0
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "ok"
    assert list((run_dir / "attempts").rglob("*.log.1"))


def test_busy_gpu_found_by_check_env_refuses_the_job(ssh_hosts, tmp_path, capsys):
    from test_check_env import A100, T4_BUSY, gpus

    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    with gpus(ssh_hosts, {"h1": A100, "h2": T4_BUSY}):
        rc = main(["multinode", "--hosts", "h1,h2", "--suite", str(write_suite(tmp_path)),
                   "--hosts-file", str(inventory), "--runs-dir", str(runs)])
    err = capsys.readouterr().err
    assert rc == 2 and "check_env refuses" in err and "h2" in err and "pid 5762" in err
    (run_dir,) = list(runs.iterdir())
    assert not list(run_dir.rglob("*.log")), "nothing may run on refused hosts"
    assert json.loads((run_dir / "env" / "verdict.json").read_text())["busy"]["h2"]


def test_ctrl_c_stops_the_job_on_every_host(ssh_hosts, tmp_path):
    import os
    import signal

    text = TWO_NODE_SUITE.replace("measure_steps: 10", "measure_steps: 1000000")
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "kit", "multinode", "--hosts", "h1,h2", "--suite",
                             str(write_suite(tmp_path, text)), "--hosts-file", str(inventory), "--runs-dir",
                             str(tmp_path / "runs")], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        logs = list((tmp_path / "work" / "h1").rglob("stdout.log"))
        if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
            break
        time.sleep(0.5)
    else:
        proc.kill()
        raise AssertionError("the job never started training")
    assert harness_on(ssh_hosts, "h1") and harness_on(ssh_hosts, "h2")
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "every host's processes were stopped" in err and "--resume" in err
    for host in ("h1", "h2"):
        assert left_on(ssh_hosts, host) == [], f"Ctrl-C left harness processes on {host}"


def test_kill_9_of_kit_stops_the_job_on_every_host(ssh_hosts, tmp_path):
    text = TWO_NODE_SUITE.replace("measure_steps: 10", "measure_steps: 1000000")
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "kit", "multinode", "--hosts", "h1,h2", "--suite",
                             str(write_suite(tmp_path, text)), "--hosts-file", str(inventory), "--runs-dir",
                             str(tmp_path / "runs")], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            logs = list((tmp_path / "work" / "h1").rglob("stdout.log"))
            if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the job never started training")
        assert harness_on(ssh_hosts, "h1") and harness_on(ssh_hosts, "h2")
    finally:
        proc.kill()  # kill -9: kit stops nothing itself; its SSH connections close
        proc.wait()
    deadline = time.monotonic() + 60  # each host's watcher: TERM, KILL after the grace period
    while (left := harness_on(ssh_hosts, "h1") + harness_on(ssh_hosts, "h2")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], f"kill -9 of kit left harness processes: {left}"


def test_cluster_runs_single_node_cases_on_the_first_host_and_two_node_cases_on_two(ssh_hosts, tmp_path, capsys):
    text = TWO_NODE_SUITE.replace("nodes: 2, gpus_per_node: 1}", "nodes: [1, 2, 4], gpus_per_node: 1}")
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    assert main(["cluster", "--suite", str(write_suite(tmp_path, text)), "--hosts-file", str(inventory),
                 "--runs-dir", str(runs)]) == 0
    err = capsys.readouterr().err
    assert "not run: 4-node cases: the inventory has 3 host(s)" in err
    (run_dir,) = list(runs.iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    hosts_of = {entry["case"]: sorted(entry["hosts"]) for entry in meta["runs"].values()}
    assert hosts_of == {"paddle/resnet50/bz2/1n1g/fp32": ["h1"], "paddle/resnet50/bz2/2n1g/fp32": ["h1", "h2"]}
    report = (run_dir / "report.md").read_text()
    assert "| 1 | 1 |" in report and "| 2 | 2 |" in report
    # both host groups' runs planned in one run.json, finished once both ran
    assert sorted(p["case"] for p in meta["planned_runs"]) == sorted(hosts_of) and "finished" in meta
    assert report.splitlines()[2] == "complete: all 2 planned runs finished."
    # gather_logs brings every host's raw logs back, and rank 0's DLPerf log if it went missing
    lost = run_dir / "logs/paddle/resnet50/bz2/2n1g/resnet50_b2_fp32_1.log"
    lost.unlink()
    main(["report", str(run_dir)])
    assert (run_dir / "report.md").read_text().splitlines()[2].startswith(
        "incomplete: 1 of 2 planned runs have their log; run.json records 1 more as finished whose log is gone: "
        "paddle/resnet50/bz2/2n1g/fp32 #1")
    out = subprocess.run([str(FAB), "-H", "h1,h2", "gather_logs", "--run-dir", str(run_dir), "--hosts-file",
                          str(inventory)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"restored {lost}" in out.stdout and lost.is_file()
    assert (run_dir / "report.md").read_text().splitlines()[2] == "complete: all 2 planned runs finished."
