"""Through a real Slurm (tests/slurmhosts.py): the seeds' programs as job steps, and each rank in a container.

- PaddleClas ResNet50 2n1g: one step, one task per node, the REAL `paddle.distributed.launch` on each node (this
  venv's CPU Paddle) starting a STAND-IN of PaddleClas's train.py (tests/standin/, see its README) that joins the
  real gloo group of its rank and replays a real published log. Before the step, one check step on every node
  finds the data and the model code (and its commit against docker/pins.yaml).
- container: docker: each node's task `docker run`s its rank in the pinned cpu image, on the node's own engine
  (the test cluster's TaskProlog points DOCKER_HOST at it); real Paddle training across both nodes.
- container: pyxis on a Slurm without the pyxis plugin (Debian's): a one-line refusal, nothing started.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from test_multinode import TWO_NODE_SUITE
from test_reference_runs_paddle import PADDLECLAS_LOG, STANDIN, SUITE, said
from test_slurm import LONG, nothing_left

from kit.cli import main
from kit.core.yamlio import load_yaml
from kit.run.plan import pinned_commit

FOLDER = "paddleclas/resnet50/bz256/2n1g/fp32/1"


def hosts_yaml(tmp_path: Path, **keys) -> Path:
    section = {"partition": "debug", "shared_dir": str(tmp_path / "shared"), "python": sys.executable,
               "nic": "eth0", "pending_timeout": 60, **keys}
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "slurm": section}))
    return path


def cluster(tmp_path: Path, suite: str, *more: str) -> list[str]:
    (tmp_path / "suite.yaml").write_text(suite)
    return ["cluster", "--scheduler", "slurm", "--suite", str(tmp_path / "suite.yaml"), "--hosts-file",
            str(tmp_path / "hosts.yaml"), "--runs-dir", str(tmp_path / "runs"), *more]


def publisher_python(tmp_path: Path, monkeypatch) -> None:
    """The publisher's bare `python` on the nodes' PATH (srun passes this environment to every task): this venv's,
    showing Paddle's launcher one device as a 1-GPU node would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 exec {sys.executable} \"$@\"\n")
    (bin_dir / "python").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:"
                               "/usr/sbin:/usr/bin:/sbin:/bin")


def the_run(tmp_path: Path, figure: float) -> tuple[Path, dict, dict]:
    """(run directory, run.json, its one run's entry) of the one run under tmp_path/runs, which gave FIGURE."""
    (run_dir,) = list((tmp_path / "runs").iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["status"] == "ok", entry
    assert entry["figure"] == pytest.approx(figure, rel=0.01)
    return run_dir, meta, entry


def test_slurm_reference_paddleclas_across_two_nodes(slurm_cluster, tmp_path, monkeypatch, published, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    publisher_python(tmp_path, monkeypatch)
    root, data = tmp_path / "models", tmp_path / "data"
    code = root / "PaddleClas" / "ppcls" / "static"
    code.mkdir(parents=True)
    shutil.copy(STANDIN / "paddleclas" / "train.py", code / "train.py")
    shutil.copy(published / PADDLECLAS_LOG, code / "replay.log")
    (want,) = [e for e in load_yaml(published / "expected.yaml")["logs"] if e["file"] == PADDLECLAS_LOG]
    per_card = want["published"] / want["gpus"]
    suite = SUITE.format(model="resnet50", batch=256, references=(
        f"    references: [{{value: {per_card * 2:.3f}, lower: -0.01, upper: 0.01, unit: samples/s, "
        f"source: \"Perf V100 FP32 32 GPUs, per card x 2\"}}]\n"))
    hosts_yaml(tmp_path, model_code=str(root), data_dir=str(data), gpus_per_node=0)
    suite = suite.replace("hardware: gpu", "hardware: cpu")  # the test nodes have no GPU (gpus_per_node: 0)

    # no data on the nodes: the check step refuses the run naming each node, nothing started
    assert main(cluster(tmp_path, suite, "--force")) == 2
    err = capsys.readouterr().err
    for node in ("h2", "h3"):
        assert f"{node}: no paddle data at {data}/paddle (case paddleclas/resnet50/bz256/2n1g/fp32" in err, err
    nothing_left(slurm_cluster)
    shutil.rmtree(tmp_path / "runs")

    (data / "paddle" / "train" / "n01440764").mkdir(parents=True)
    (data / "paddle" / "train_list.txt").write_text("train/n01440764/n01440764_1.JPEG 0\n"
                                                    "train/n01440764/n01440764_2.JPEG 0\n")
    # the stand-in is no checkout of the pin: refused without --force, naming the commit
    assert main(cluster(tmp_path, suite)) == 2
    assert f"docker/pins.yaml pins {pinned_commit(load_suite_case(tmp_path))}" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "runs")

    assert main(cluster(tmp_path, suite, "--force")) == 0
    run_dir, meta, entry = the_run(tmp_path, per_card * 2)
    assert [m["host"] for m in meta["model_code_forced"]] == ["h2", "h3"]
    assert all("not a checkout: its files differ from the tree of the pin" in m["reason"]  # each node's own check
               for m in meta["model_code_forced"])
    assert entry["slurm"]["step_state"] == "COMPLETED" and entry["slurm"]["container"] == "native"
    addresses = [slurm_cluster.net.host(n).address for n in ("h2", "h3")]
    for rank, node in enumerate(("h2", "h3")):
        here = run_dir / "hosts" / node / FOLDER
        (me,) = said((here / "stdout.log").read_text(), "ppcls/static/train.py")
        assert (me["rank"], me["world"], me["rank_sum"]) == (rank, 2, 1)  # the gloo group's all_reduce: 0 + 1
        sidecar = json.loads((here / "resnet50_b256_fp32_1.cmd.json").read_text())
        assert me["cwd"] == sidecar["scratch"]["path"] and not Path(me["cwd"]).exists()  # a mirror, removed
        assert me["data"]["cls_label_path"] == f"{data}/paddle/train_list.txt"
        env = me["env"]
        assert [e.split(":")[0] for e in env["PADDLE_TRAINER_ENDPOINTS"].split(",")] == addresses
        assert env["POD_IP"] == addresses[rank] and env["PADDLE_LOG_DIR"].endswith(f"/{node}/{FOLDER}/launcher")
        assert sorted(p.name for p in (here / "launcher").glob("workerlog.*")) == ["workerlog.0"]
        assert sidecar["rank"] == rank and sidecar["impl"] == "paddleclas"
        assert sidecar["data"]["path"] == f"{data}/paddle"
    staged = tmp_path / "shared" / "kit-scripts" / "reference" / "launch.py"
    assert staged.read_bytes() == (Path(__file__).resolve().parent.parent / "scripts/reference/launch.py").read_bytes()
    assert (run_dir / "logs" / "paddleclas/resnet50/bz256/2n1g/resnet50_b256_fp32_1.log").is_file()
    assert "| paddleclas/resnet50/bz256/2n1g/fp32 |" in (run_dir / "report.md").read_text()
    nothing_left(slurm_cluster)


def load_suite_case(tmp_path: Path):
    from kit.config.suites import load_suite

    return next(iter(load_suite(tmp_path / "suite.yaml").cases))


def test_slurm_docker_container_per_node(slurm_cluster, cpu_image, cpu_image_seed, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    for node in ("h2", "h3"):  # each node's own engine, holding the image (how it got there is test_images')
        slurm_cluster.start_docker(node, seed=cpu_image_seed)
    hosts_yaml(tmp_path, container="docker", images={"paddle": cpu_image.ref})
    assert main(cluster(tmp_path, TWO_NODE_SUITE)) == 0
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "ok", entry
    record = entry["slurm"]
    assert record["container"] == "docker" and record["image"] == cpu_image.ref
    for node in ("h2", "h3"):
        assert record["nodes"][node]["image_id"] == cpu_image.id  # the node's engine holds the pinned image
        assert entry["hosts"][node]["command"].count("docker run") == 1
        assert cpu_image.ref in entry["hosts"][node]["command"]
        listed = slurm_cluster.net.run(node, ["docker", "ps", "-aq", "--filter", f"label=io.kit.run={run_dir.name}"])
        assert listed.stdout.strip() == ""  # no container left
    log = (run_dir / "logs/paddle/resnet50/bz2/2n1g/resnet50_b2_fp32_1.log").read_text()
    start = next(json.loads(line.split(" ", 1)[1]) for line in log.splitlines()
                 if line.startswith(":::KITLOG") and '"run_start"' in line)
    assert start["ranks"] == 2 and start["host"] == "h2"
    nothing_left(slurm_cluster)

    # past the case timeout: the step is cancelled and no container is left on either node's engine
    shutil.rmtree(tmp_path / "runs")
    assert main(cluster(tmp_path, LONG.replace("timeout_s: 240", "timeout_s: 30"))) == 1
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "timeout" and entry["slurm"]["step_state"] == "TIMEOUT", entry
    nothing_left(slurm_cluster)
    for node in ("h2", "h3"):
        listed = slurm_cluster.net.run(node, ["docker", "ps", "-aq", "--filter", f"label=io.kit.run={run_dir.name}"])
        assert listed.returncode == 0 and listed.stdout.strip() == "", node


def test_slurm_pyxis_without_the_plugin_is_refused(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    hosts_yaml(tmp_path, container="pyxis", images="kit/cpu:any")
    assert main(cluster(tmp_path, TWO_NODE_SUITE)) == 2
    assert ("slurm.container is pyxis, but this srun has no --container-image (the pyxis plugin is not installed "
            "on this cluster)") in capsys.readouterr().err
    assert slurm_cluster.jobs() == []
