"""PLSC ArcFace (DLPerf's recipe) on two SSH hosts, end to end from `fab -H h1,h2 run_multinode`: staging, the kit's
launcher making the patched work copy (scripts/plsc/exit_at_batch_150.patch + the train.py driver), the REAL
`paddle.distributed.launch` (Paddle's CPU build) given DLPerf's legacy flags on every host, gather, DLPerf's
reduction, report.

PLSC's code is a STAND-IN (tests/standin/plsc/, see ../standin/README.md): PLSC's plsc/entry.py with the patch's
context lines at their real line numbers, which joins the real Paddle collective group of its trainer and prints
PLSC's own `Pass:0 batch:N ... qps:` lines with known speeds; everything around it is the kit's real path.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nethosts import write_inventory

from kit.config.reference import Cluster, RefJob, build
from kit.results.extract import Method, compute_figure
from kit.results.parsers import parse_log

REPO = Path(__file__).resolve().parent.parent
FAB = REPO / ".venv" / "bin" / "fab"
STANDIN = Path(__file__).resolve().parent / "standin" / "plsc"
PATCH = REPO / "scripts" / "plsc" / "exit_at_batch_150.patch"
CASE = "plsc/arcface/bz128/2n1g/fp32"
LOG_STEM = "arcface_b128_fp32_1"
QPS = re.compile(r"^INFO \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} entry\.py:\d+\] Pass:0 batch:(\d+) "
                 r"lr:0\.10000000 loss:[\d.]+ qps:([\d.]+)$")
# the stand-in's known speeds (tests/standin/plsc/plsc/entry.py qps()) for trainer 0 at batches 100..140, the
# records DLPerf's extract_paddle_logs.py averages on 2 nodes: [50//10*2 : 150//10*2] of the 15 it logs
DLPERF_WINDOW = [2114.62, 2121.93, 2100.00, 2107.31, 2114.62]
FIGURE = 2111.70  # round(np.mean(DLPERF_WINDOW), 2)
SUITE = """\
schema_version: 1
name: dlperf-plsc
hardware: cpu
defaults: {repeats: 1, timeout_s: 120}
cases:
  - framework: paddle
    impl: reference
    model: arcface
    precision: fp32
    batch_size: 128
    nodes: 2
    gpus_per_node: 1
    references: [{value: 2111.70, lower: -0.01, upper: 0.01, unit: samples/s,
                  source: "not published (DLPerf ran 2n8g): the stand-in's known speeds"}]
"""


@pytest.fixture
def python3_on_hosts(ssh_hosts):
    """The publisher's bare `python3` on h1 and h2 (this venv's, where Paddle is); removed afterwards (the hosts
    are shared by the session's tests)."""
    made = []
    for host in ssh_hosts.hosts[:2]:
        made.append(host.bin_dir / "python3")
        made[-1].write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        made[-1].chmod(0o755)
    yield ssh_hosts
    for path in made:
        path.unlink(missing_ok=True)


def models_tree(tmp_path: Path) -> Path:
    """A model-code root whose PLSC/ holds the stand-in where DLPerf's recipe runs from (the checkout's root)."""
    root = tmp_path / "models"
    shutil.copytree(STANDIN, root / "PLSC", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def run_multinode(ssh_hosts, tmp_path: Path, models: Path) -> tuple[subprocess.CompletedProcess, Path]:
    inventory = write_inventory(ssh_hosts, tmp_path, ssh={"connect_timeout": 3}, gpus=0, python=sys.executable,
                                model_code=str(models))
    suite = tmp_path / "plsc.yaml"
    suite.write_text(SUITE)
    runs = tmp_path / "runs"
    out = subprocess.run([str(FAB), "-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file",
                          str(inventory), "--force", "--runs-dir", str(runs)],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    (run_dir,) = list(runs.iterdir())
    return out, run_dir


def test_reference_plsc_arcface_on_two_hosts_from_fab_run_multinode(python3_on_hosts, tmp_path):
    hosts = python3_on_hosts.hosts[:2]
    out, run_dir = run_multinode(python3_on_hosts, tmp_path, models_tree(tmp_path))
    assert out.returncode in (0, 1), (out.stdout + out.stderr)[-4000:]
    argv = ["train.py", "--loss-type", "dist_arcface", "--batch-size", "128"]
    digest = hashlib.sha256(PATCH.read_bytes()).hexdigest()
    for rank, host in enumerate(hosts):
        folder = run_dir / "hosts" / host.name / CASE / "1"
        stdout = (folder / "stdout.log").read_text()
        work = tmp_path / "work" / host.name / "runs" / run_dir.name / host.name / CASE / "1" / "plsc-patched"
        # the kit's record of the run, beside the log: the recipe's argv, the patched copy and the patch's sha256
        sidecar = json.loads((folder / f"{LOG_STEM}.cmd.json").read_text())
        recipe = build(RefJob("paddle", "arcface", "fp32", 128, 1, 2), Cluster(rank, tuple(h.address for h in hosts)),
                       code_root=str(tmp_path / "models"))
        assert (sidecar["rank"], sidecar["impl"], sidecar["argv"]) == (rank, "plsc", recipe.argv), sidecar
        assert sidecar["argv"][3:6] == [f"--cluster_node_ips={hosts[0].address},{hosts[1].address}",
                                        f"--node_ip={host.address}", "--selected_gpus=0"]
        assert (sidecar["work_copy"], sidecar["ran_in"], sidecar["patch"]) == (
            "plsc-patched", str(work), "plsc/exit_at_batch_150.patch")
        assert sidecar["patch_sha256"] == digest and sidecar["cwd"] == str(tmp_path / "models" / "PLSC")
        # the real launcher kept DLPerf's 2-node cluster from the PaddleCloud variables the recipe adds
        port = sidecar["env"]["PADDLE_PORT"]
        assert sidecar["env"] == {**recipe.env, "PADDLE_PORT": port, "NCCL_SOCKET_IFNAME": host.nic}
        endpoints = f"{hosts[0].address}:{port},{hosts[1].address}:{port}"
        said = [json.loads(line.removeprefix("stand-in plsc/entry.py ")) for line in stdout.splitlines()
                if line.startswith("stand-in plsc/entry.py ")]
        assert len(said) == 1, stdout[-3000:]
        s = said[0]
        assert (s["trainer_id"], s["num_trainers"], s["rank"], s["world"], s["rank_sum"]) == (rank, 2, rank, 2, 1)
        assert s["env"]["PADDLE_TRAINER_ID"] == str(rank) and s["env"]["PADDLE_TRAINERS_NUM"] == "2"
        assert s["env"]["PADDLE_TRAINER_ENDPOINTS"] == endpoints and s["env"]["POD_IP"] == host.address
        assert s["env"]["PADDLE_CURRENT_ENDPOINT"] == f"{host.address}:{port}"
        assert s["env"]["PADDLE_DISTRI_BACKEND"] == "gloo"  # Paddle's launcher, CPU build
        assert s["argv"] == argv and s["cwd"] == str(work)
        assert (s["loss_type"], s["batch_size"], s["global_batch_size"], s["epochs"], s["with_test"]) == (
            "dist_arcface", 128, 256, 1, False)
        assert (s["num_classes"], s["log_period"], s["model_save_dir"]) == (85742, 10, str(work / "checkpoints"))
        sample = s["sample"]
        assert (sample["shape"], sample["dtype"], sample["xmap"]) == ([3, 112, 112], "float64",
                                                                      {"process_num": 8, "buffer_size": 5000})
        assert 0 <= sample["label"] < 85742
        # the patch took effect in the work copy: the stand-in's loader goes on to batch 399, the patched line
        # stops it at batch 150 (records 0..140 every 10), before its pass ends; the checkout stays as it was
        found = [m.groups() for m in map(QPS.match, stdout.splitlines()) if m]
        assert [int(b) for b, _ in found] == list(range(0, 150, 10)), stdout[-3000:]
        assert "End pass" not in stdout
        copy = folder / "plsc-patched"
        lines = (copy / "plsc" / "entry.py").read_text().splitlines()
        assert lines[983:987] == ["            local_train_info = [[], [], [], []]",
                                  "            for batch_id, data in enumerate(self.input_field.loader):",
                                  "                if batch_id==150:", "                    exit()"]
        assert (copy / "train.py").read_bytes() == (REPO / "scripts/plsc/train.py").read_bytes()
        assert "exit()" not in (tmp_path / "models" / "PLSC" / "plsc" / "entry.py").read_text()
        # each trainer's own log, written by the launcher in the work copy (its legacy mode's --log_dir=log)
        assert [m.group(1) for m in map(QPS.match, (copy / "log" / "workerlog.0").read_text().splitlines())
                if m][-1] == "140"
        if rank == 0:
            assert [float(v) for _, v in found[10:30]] == DLPERF_WINDOW
    # rank 0's log is the run's, in DLPerf's layout
    log = run_dir / "logs" / "plsc/arcface/bz128/2n1g" / f"{LOG_STEM}.log"
    assert log.read_text() == (run_dir / "hosts" / "h1" / CASE / "1" / "stdout.log").read_text()
    parsed = parse_log(log, "plsc")
    assert [r.step for r in parsed.records] == list(range(0, 150, 10))
    # DLPerf's mean of the records its slice [10:30] finds (numpy: the 5 there are), 2 decimals
    assert compute_figure(parsed, Method(skip=10, count=5, round=2)).value == FIGURE
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    assert entry["status"] == "ok" and entry["figure"] == FIGURE, entry
    report = (run_dir / "report.md").read_text()
    assert f"| {CASE} | {FIGURE:.2f} | {FIGURE:g} samples/s |" in report and "| within |" in report, report


def test_reference_plsc_refused_where_the_patch_context_differs(python3_on_hosts, tmp_path):
    models = models_tree(tmp_path)
    entry = models / "PLSC" / "plsc" / "entry.py"
    entry.write_text("# a checkout two lines longer than PLSC at the pin\n\n" + entry.read_text())
    t0 = time.monotonic()
    out, run_dir = run_multinode(python3_on_hosts, tmp_path, models)
    assert time.monotonic() - t0 < 60, "a refused patch must end the run at once"
    assert out.returncode == 1, (out.stdout + out.stderr)[-4000:]
    (run,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    # each host's launch.py refuses at once; the first refusal stops the run on every host, so a host may
    # (rarely) be stopped before its own launch.py has said it
    refused = [host for host in ("h1", "h2") if f"{host}: exit 2" in run["reason"]]
    assert run["status"] == "failed" and refused, run
    for host in refused:
        folder = run_dir / "hosts" / host / CASE / "1"
        said = (folder / "stdout.log").read_text()
        assert ("launch.py: plsc/entry.py:984: expected '            local_train_info = [[], [], [], []]', "
                "found '            self.train_pass_id = pass_id' (wrong checkout?)") in said, said
        assert "stand-in plsc/entry.py" not in said and not (folder / f"{LOG_STEM}.cmd.json").exists()
    assert "exit()" not in entry.read_text()
