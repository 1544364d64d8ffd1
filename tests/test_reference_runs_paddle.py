"""PaddleClas ResNet50 and FleetX VGG16 on SSH hosts, end to end from `fab -H h1,h2 run_multinode`, launched as
published through the REAL `paddle.distributed.launch` (this venv's Paddle, a CPU build) on every host:
PaddleClas with `--gpus` and the cluster in the environment (PADDLE_TRAINER_ENDPOINTS, POD_IP, ...), FleetX with
`--master --nnodes --rank` running the kit's driver scripts/fleetx/vgg16_benchmark.py.

The programs' own code is a STAND-IN (tests/standin/, see its README): each worker joins the real collective group
of its rank (gloo) and prints its lines (PaddleClas: replayed from a real published log; FleetX: FleetX's format
with known speeds). Everything around them is the kit's real path: staging, the kit's launcher and sidecar, Paddle's
launcher and its workerlog.N (PADDLE_LOG_DIR), gather, the publisher's reduction or the kit's, report.

The test hosts have no GPU and Paddle here is a CPU build: the hosts' `python` (the publisher's bare `python`, this
venv's) shows the launcher one device, CUDA_VISIBLE_DEVICES=0, for the `--gpus 0` the published command names.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nethosts import write_inventory

from kit.config.reference import Cluster, RefJob, build, implementation, methods
from kit.core.catalogue import load
from kit.core.yamlio import load_yaml
from kit.results.extract import Method

REPO = Path(__file__).resolve().parent.parent
FAB = REPO / ".venv" / "bin" / "fab"
STANDIN = Path(__file__).resolve().parent / "standin"
saved_programs = load("saved_programs", "reference")
PADDLECLAS_LOG = "perf-v100/paddle/paddle_gpu32_fp32_bs256.txt"  # rank 0's output of the 4-node, 32-GPU run
SUITE = """\
schema_version: 1
name: paddle
hardware: gpu
defaults: {{repeats: 1, timeout_s: 120}}
cases:
  - framework: paddle
    impl: reference
    model: {model}
    precision: fp32
    batch_size: {batch}
    nodes: 2
    gpus_per_node: 1
{references}"""


@pytest.fixture
def paddle_hosts(ssh_hosts):
    """h1 and h2 with the publisher's bare `python` (this venv's) that shows Paddle's launcher GPU 0, as a host with
    one GPU would. Afterwards the plain wrapper of the other reference tests (no device variable) is put back."""
    hosts = ssh_hosts.hosts[:2]
    for host in hosts:
        wrapper = host.bin_dir / "python"
        wrapper.write_text(f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 exec {sys.executable} \"$@\"\n")
        wrapper.chmod(0o755)
    yield ssh_hosts
    for host in hosts:
        (host.bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")


def run_multinode(net, tmp_path: Path, suite: str, root: Path, ok: bool = True):
    """(the run directory, its one run's entry); with `ok` False, what the refused command said."""
    data = tmp_path / "data" / "paddle"  # the hosts' data in PaddleClas's format (data_prep), what both read
    (data / "train" / "n01440764").mkdir(parents=True, exist_ok=True)
    (data / "train_list.txt").write_text("train/n01440764/n01440764_1.JPEG 0\ntrain/n01440764/n01440764_2.JPEG 0\n")
    fleetx = tmp_path / "data" / "fleetx"  # FleetX's own: train.txt, paths under train/, .jpeg (data_prep fleetx)
    (fleetx / "train" / "n01440764").mkdir(parents=True, exist_ok=True)
    (fleetx / "train.txt").write_text("n01440764/n01440764_1.jpeg 0\nn01440764/n01440764_2.jpeg 0\n")
    inventory = write_inventory(net, tmp_path, ssh={"connect_timeout": 3}, gpus=1, python=sys.executable,
                                model_code=str(root))
    (tmp_path / "paddle.yaml").write_text(suite)
    out = subprocess.run([str(FAB), "-H", "h1,h2", "run_multinode", "--suite", str(tmp_path / "paddle.yaml"),
                          "--hosts-file", str(inventory), "--force", "--runs-dir", str(tmp_path / "runs")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    if not ok:
        assert out.returncode == 2 and "nothing started" in out.stderr, (out.stdout + out.stderr)[-4000:]
        assert not list((tmp_path / "runs").rglob("*.log"))
        shutil.rmtree(tmp_path / "runs")
        return out.stdout + out.stderr
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    return run_dir, entry


def standin_speeds() -> list[float]:
    """The steps/s the FleetX stand-in's trainer prints (its SPEEDS), read from its source (no Paddle here)."""
    source = STANDIN / "fleetx" / "fleetx" / "applications" / "trainer.py"
    (value,) = [node.value for node in ast.parse(source.read_text()).body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["SPEEDS"]]
    return eval(compile(ast.Expression(value), str(source), "eval"), {})


def said(stdout: str, who: str) -> list[dict]:
    return [json.loads(line.split(" ", 2)[2]) for line in stdout.splitlines() if line.startswith(f"stand-in {who} ")]


def test_reference_paddleclas_on_two_hosts_through_paddle_launch(paddle_hosts, tmp_path, published):
    net = paddle_hosts
    h1, h2 = net.hosts[:2]
    data = tmp_path / "data" / "paddle"
    (want,) = [e for e in load_yaml(published / "expected.yaml")["logs"] if e["file"] == PADDLECLAS_LOG]
    job = RefJob("paddle", "resnet50", "fp32", 256, 1, 2)
    pub, _kit = methods(implementation("paddle", "resnet50"), job)
    assert pub == Method.from_mapping({**want["method"], "scale": 2})  # that log's rule, per card x this job's GPUs
    text = (published / PADDLECLAS_LOG).read_text()
    ips = [float(v) for v in re.findall(r"ips: ([\d.]+) samples/sec", text)]
    figure = sum(ips[10:]) / len(ips[10:]) * 2  # the publisher's method: the mean per-card ips after 10, x GPUs
    assert figure == pytest.approx(want["published"] / want["gpus"] * 2, rel=want["rel_tol"])

    root = tmp_path / "models"
    code = root / "PaddleClas" / "ppcls" / "static"
    code.mkdir(parents=True)
    shutil.copy(STANDIN / "paddleclas" / "train.py", code / "train.py")
    shutil.copy(published / PADDLECLAS_LOG, code / "replay.log")
    per_card = want["published"] / want["gpus"]
    references = (f"    references: [{{value: {per_card * 2:.3f}, lower: -0.01, upper: 0.01, unit: samples/s, source: "
                  f"\"Perf V100 FP32 32 GPUs {want['published']} samples/s, per card x 2\"}}]\n")
    run_dir, entry = run_multinode(net, tmp_path, SUITE.format(model="resnet50", batch=256, references=references),
                                   root)

    assert entry["status"] == "ok", entry
    assert entry["figure"] == pytest.approx(figure, rel=1e-9)
    folder = "paddleclas/resnet50/bz256/2n1g/fp32/1"
    ports = set()
    for rank, host in enumerate((h1, h2)):
        here = run_dir / "hosts" / host.name / folder
        stdout = (here / "stdout.log").read_text()
        (me,) = said(stdout, "ppcls/static/train.py")  # its local rank 0's workerlog, printed by the launcher
        sidecar = json.loads((here / "resnet50_b256_fp32_1.cmd.json").read_text())
        ports.add(port := int(sidecar["env"]["PADDLE_PORT"]))
        recipe = build(job, Cluster(rank, (h1.address, h2.address), port, host.nic), code_root=str(root),
                       data_dir=str(data))
        assert (me["rank"], me["world"], me["rank_sum"]) == (rank, 2, 1)  # the gloo group's all_reduce: 0 + 1
        assert me["argv"] == recipe.argv[recipe.argv.index("ppcls/static/train.py") + 1:]
        assert me["cwd"] == sidecar["ran_in"] == sidecar["scratch"]["path"]  # a mirror of the checkout, removed
        assert not Path(me["cwd"]).exists() and sidecar["cwd"] == str(root / "PaddleClas")
        assert me["data"] == {"image_root": f"{data}/", "cls_label_path": f"{data}/train_list.txt", "labels": 2}
        env = me["env"]
        assert (env["PADDLE_TRAINER_ID"], env["PADDLE_TRAINERS_NUM"], env["POD_IP"]) == (str(rank), "2", host.address)
        assert env["PADDLE_MASTER"].split(":")[0] == h1.address  # the launcher's master: rank 0's host
        assert [e.split(":")[0] for e in env["PADDLE_TRAINER_ENDPOINTS"].split(",")] == [h1.address, h2.address]
        assert env["PADDLE_CURRENT_ENDPOINT"].split(":")[0] == host.address and env["FLAGS_selected_gpus"] == "0"
        assert "args reset by env PADDLE_TRAINER_ENDPOINTS" in stdout and f"Host ip reset to {host.address}" in stdout
        assert "A new field (enable_addto) detected!" in stdout
        assert ("ppcls INFO: epoch:1   train step:60" in stdout) == (rank == 0)  # PaddleClas logs on rank 0 only
        assert sidecar["rank"] == rank and sidecar["impl"] == "paddleclas" and sidecar["argv"] == recipe.argv
        assert sidecar["env"] == recipe.env  # the published cluster environment, this host's part
        assert (sidecar["env"]["PADDLE_TRAINER_ID"], sidecar["env"]["POD_IP"]) == (str(rank), host.address)
        assert sidecar["env"]["PADDLE_TRAINER_ENDPOINTS"] == f"{h1.address}:{port},{h2.address}:{port}"
        assert sidecar["data"] == {"mode": "imagenet", "format": "paddle", "path": str(data), "synthetic": None}
        # Paddle's launcher writes every rank's workerlog.N where PADDLE_LOG_DIR says: the run folder's launcher/
        assert env["PADDLE_LOG_DIR"].endswith(f"/{host.name}/{folder}/launcher")
        logs = sorted(p.name for p in (here / "launcher").glob("workerlog.*"))
        assert logs == ["workerlog.0"], sorted(p.name for p in here.rglob("*"))  # this host's one rank
        assert said((here / "launcher" / "workerlog.0").read_text(), "ppcls/static/train.py") == [me]
    assert len(ports) == 1  # one cluster: every host was given the same endpoints
    rank0 = (run_dir / "hosts" / "h1" / folder / "stdout.log").read_bytes()
    assert (run_dir / "logs" / "paddleclas/resnet50/bz256/2n1g/resnet50_b256_fp32_1.log").read_bytes() == rank0
    report = (run_dir / "report.md").read_text()
    assert f"| paddleclas/resnet50/bz256/2n1g/fp32 | {figure:.2f} | {per_card * 2:.3f} samples/s |" in report
    assert "| 1.000 | within | Perf V100 FP32 32 GPUs 10984.436 samples/s, per card x 2 |" in report
    assert f"| paddleclas/resnet50/bz256/2n1g/resnet50_b256_fp32_1 | paddle data at {data} |" in report


def test_reference_fleetx_vgg16_on_two_hosts_through_paddle_launch_master(paddle_hosts, tmp_path,
                                                                          vgg16_saved_program):
    """Refused on every host while its saved program is not staged (FleetX would download it); staged, every rank
    loads it from the staged folder, checked by the driver."""
    net = paddle_hosts
    h1, h2 = net.hosts[:2]
    data = tmp_path / "data" / "fleetx"
    job = RefJob("paddle", "vgg16", "fp32", 32, 1, 2)
    pub, kit = methods(implementation("paddle", "vgg16"), job)
    # seed 000's rule: skip 20 steps, the mean of the next 100, steps/s x global batch; the kit's: samples / time
    assert pub == Method(skip=20, count=100, scale=32 * 2)
    assert kit == Method(skip=20, reduce="harmonic_mean", scale=32 * 2)
    measured = standin_speeds()[20:120]
    figure = sum(measured) / len(measured) * 32 * 2
    assert figure == pytest.approx(3 * 64)

    root = tmp_path / "models"
    shutil.copytree(STANDIN / "fleetx" / "fleetx", root / "FleetX" / "python" / "fleetx")
    refused = run_multinode(net, tmp_path, SUITE.format(model="vgg16", batch=32, references=""), root, ok=False)
    staged = root / "saved-programs" / "fleetx" / "applications" / "vgg16_nchw"
    for host in ("h1", "h2"):
        assert re.search(rf"{host}.*FleetX VGG16 \(fleet collective\): its saved program vgg16_nchw is not staged "
                         rf"\({re.escape(str(staged))}\.json is missing; the program would download it from "
                         r"https://fleet\.bj\.bcebos\.com/models/0\.0\.5/vgg16_nchw\.tar\.gz", refused), refused
    archive, sha256 = vgg16_saved_program
    saved_programs.stage(archive, root / "saved-programs", "fleetx/applications", "vgg16_nchw",
                         implementation("paddle", "vgg16").saved_programs[0].reads, sha256, "this test")
    run_dir, entry = run_multinode(net, tmp_path, SUITE.format(model="vgg16", batch=32, references=""), root)

    assert entry["status"] == "ok", entry
    assert entry["figure"] == pytest.approx(figure, rel=1e-6)
    folder = "fleetx/vgg16/bz32/2n1g/fp32/1"
    for rank, host in enumerate((h1, h2)):
        here = run_dir / "hosts" / host.name / folder
        stdout = (here / "stdout.log").read_text()
        (me,) = said(stdout, "fleetx")
        driver = tmp_path / "work" / host.name / "kit-scripts" / "fleetx" / "vgg16_benchmark.py"
        assert driver.read_bytes() == (REPO / "scripts" / "fleetx" / "vgg16_benchmark.py").read_bytes()
        assert (me["rank"], me["world"], me["rank_sum"]) == (rank, 2, 1)  # the gloo group's all_reduce: 0 + 1
        assert (me["worker_index"], me["worker_num"]) == (rank, 2)  # fleet.init's view, in the driver
        assert me["argv"] == [str(driver), "--batch-size", "32", "--data-dir", str(data)]
        sidecar = json.loads((here / "vgg16_b32_fp32_1.cmd.json").read_text())
        assert me["cwd"] == sidecar["ran_in"] == sidecar["scratch"]["path"]  # a mirror of FleetX/python, removed
        assert not Path(me["cwd"]).exists() and sidecar["cwd"] == str(root / "FleetX" / "python")
        assert (me["epochs"], me["batch_size"], me["data_dir"], me["data"]) == (10, 32, str(data),
                                                                                 ["train", "train.txt"])
        assert "all_reduce" in me["collective_ops"]  # fleet's collective optimizer transpiled the driver's program
        assert me["saved_program"] == {"path": str(staged), "loss_name": "softmax_with_cross_entropy_0.tmp_1"}
        assert (f"vgg16_benchmark.py: FleetX's saved program vgg16_nchw from {staged} (vgg16_nchw.tar.gz, sha256 "
                f"{sha256} from this test)") in stdout
        env = me["env"]
        assert (env["PADDLE_TRAINER_ID"], env["PADDLE_TRAINERS_NUM"], env["POD_IP"]) == (str(rank), "2", host.address)
        assert env["PADDLE_MASTER"].split(":")[0] == h1.address and env["PYTHONPATH"] == "."
        assert [e.split(":")[0] for e in env["PADDLE_TRAINER_ENDPOINTS"].split(",")] == [h1.address, h2.address]
        assert len(re.findall(r"^epoch id: \d+, step(1[1-9]|2[0-2]), train_loss: ", stdout, re.MULTILINE)) == 120
        assert re.search(r"^vgg16_benchmark\.py: Paddle 3\.[\d.]+ has no ExecutionStrategy", stdout, re.MULTILINE)
        argv = sidecar["argv"]
        assert sidecar["rank"] == rank and sidecar["impl"] == "fleetx"
        assert argv[:5] == ["python", "-m", "paddle.distributed.launch", "--gpus", "0"]
        port = argv[argv.index("--master") + 1].split(":")[1]
        recipe = build(job, Cluster(rank, (h1.address, h2.address), int(port), host.nic), code_root=str(root),
                       scripts_dir=str(driver.parent.parent), data_dir=str(data))
        assert argv == recipe.argv and argv[5:11] == ["--master", f"{h1.address}:{port}", "--nnodes", "2", "--rank",
                                                      str(rank)]
        assert sidecar["env"] == recipe.env == {"PYTHONPATH": ".", "POD_IP": host.address, "NCCL_SOCKET_IFNAME": "eth0"}
        assert sidecar["data"] == {"mode": "imagenet", "format": "fleetx", "path": str(data), "synthetic": None}
        assert env["PADDLE_LOG_DIR"].endswith(f"/{host.name}/{folder}/launcher")
        logs = sorted(p.name for p in (here / "launcher").glob("workerlog.*"))
        assert logs == ["workerlog.0"], sorted(p.name for p in here.rglob("*"))  # this host's one rank
        assert said((here / "launcher" / "workerlog.0").read_text(), "fleetx") == [me]
    report = (run_dir / "report.md").read_text()
    section = report.split("## fleetx · vgg16 · batch 32 · fp32\n", 1)[1]  # FleetX publishes no figure: no reference
    assert section.lstrip().startswith("Method per run: skip 20, count 100, mean, scale 64.\n"
                                       "images/s, median of 1 run(s)")  # seed 000's rule: steps/s x global batch
    assert f"| 2n1g | 1 | {figure:.2f} | {figure:.2f} | {figure:.2f} | 0.00% |" in section  # one case: no scaling
    assert "node_num" not in section
    assert f"| fleetx/vgg16/bz32/2n1g/vgg16_b32_fp32_1 | fleetx data at {data} |" in report


@pytest.mark.parametrize("precision", ["fp32", "amp", "auto"])
def test_fleetx_driver_strategy_per_mode_in_real_paddle(tmp_path, precision, vgg16_saved_program):
    """One worker of the kit's FleetX driver, as its recipe builds the command (no launcher on one GPU), on this
    venv's Paddle: the published strategy for fp32/amp, seed 000's auto-parallel mode (auto alone, DALI) for auto;
    its saved program from the folder --saved-programs names."""
    job = RefJob("paddle", "vgg16", precision, 2, 1, 1)
    cmd = build(job, scripts_dir=str(REPO / "scripts"), data_dir=str(tmp_path))
    env = {**cmd.env, "PYTHONPATH": str(STANDIN / "fleetx"), "PATH": "/usr/bin:/bin"}
    archive, sha256 = vgg16_saved_program
    saved_programs.stage(archive, tmp_path / "staged", "fleetx/applications", "vgg16_nchw",
                         implementation("paddle", "vgg16").saved_programs[0].reads, sha256, "this test")
    argv = [sys.executable if a == "python" else a for a in cmd.argv]
    argv += ["--epochs", "1", "--saved-programs", str(tmp_path / "staged")]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (me,) = said(out.stdout, "fleetx")
    auto = precision == "auto"
    assert me["strategy"] == {"auto": auto, "amp": precision == "amp", "fuse_bn_act_ops": not auto}
    assert me["dali"] == {"loader": auto, "fit": auto}
    assert me["saved_program"]["path"] == str(tmp_path / "staged" / "fleetx" / "applications" / "vgg16_nchw")
    assert len(re.findall(r"^epoch id: 0, step\d+, ", out.stdout, re.MULTILINE)) == 12
