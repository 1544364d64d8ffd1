"""NGC DeepLearningExamples TensorFlow 1 and MXNet ResNet50 on SSH hosts, end to end from `fab ... run_multinode`,
launched as published: TensorFlow as ONE `mpirun` on rank 0 over all hosts (Debian's openmpi-bin, reaching h2
over SSH; h2 starts nothing itself), MXNet's benchmark.py on one host (its runner's mpirun: the real one too).

The programs are STAND-INS (tests/standin/, see its README) replaying real published logs; everything around them
is the kit's real path: staging, the kit's launcher and sidecar, mpirun, gather, the publisher's reduction, report.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nethosts import write_inventory

from kit.config.reference import Cluster, RefJob, build, implementation, methods
from kit.core.yamlio import load_yaml
from kit.results.extract import Method

REPO = Path(__file__).resolve().parent.parent
FAB = REPO / ".venv" / "bin" / "fab"
STANDIN = Path(__file__).resolve().parent / "standin"
TF_CODE = "DeepLearningExamples/TensorFlow/Classification/ConvNets"
MXNET_CODE = "DeepLearningExamples/MxNet/Classification/RN50v1.5"
TF_LOG = "perf-v100/tensorflow/tf_gpu32_fp32_bs256.txt"
MXNET_LOG = "perf-v100/mxnet/mxnet_gpu1_fp32_bs128.txt"
# what Open MPI 4's `mpirun -tag-output -timestamp-output` puts before each line of a rank, as in the published log
STAMP = r"\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}"
SUITE = """\
schema_version: 1
name: ngc
hardware: gpu
defaults: {{repeats: 1, timeout_s: 120}}
cases:
  - framework: {framework}
    impl: reference
    model: resnet50
    precision: fp32
    batch_size: {batch}
    nodes: {nodes}
    gpus_per_node: 1
    references: [{{value: {published}, lower: -0.01, upper: 0.01, unit: samples/s, source: "{source}"}}]
"""


def expected(published: Path, log: str) -> dict:
    (entry,) = [e for e in load_yaml(published / "expected.yaml")["logs"] if e["file"] == log]
    return entry


def tagged(text: str, rank: int, stream: str = "stdout", stamp: str = "") -> list[str]:
    """What rank `rank` wrote to `stream`, line by line, from mpirun-tagged output (tags and times removed)."""
    return re.findall(rf"^{stamp}\[1,{rank}\]<{stream}>:(.*)$", text, re.MULTILINE)


def assert_whole_lines(text: str) -> None:
    """No line that mpirun got in pieces: Open MPI tags every chunk it reads from a rank, so a rank writing a
    line's text and its newline apart (Python's print() under PYTHONUNBUFFERED=1) leaves a tag at a line's end."""
    broken = [line for line in text.splitlines() if re.search(r"\[1,\d+\]<std(?:out|err)>:$", line)]
    assert not broken, f"{len(broken)} line(s) split by mpirun's tagging (PYTHONUNBUFFERED set?): {broken[:3]}"


def model_code(tmp_path: Path, code: str, standin: Path, replay: Path) -> Path:
    """A model-code root holding the stand-in at the path its recipe runs from, beside the log it replays."""
    root = tmp_path / "models"
    (root / code).mkdir(parents=True)
    for program in (p for p in standin.iterdir() if p.is_file()):
        shutil.copy(program, root / code / program.name)  # with its mode: DLE's `runner` is executable
    shutil.copy(replay, root / code / "replay.log")
    return root


@pytest.fixture
def hosts_with_tools(ssh_hosts):
    """The publisher's bare `python` on every host (this venv's) and, on rank 0's host h1, the `ssh` its mpirun
    reaches the others with, as a cluster's admin sets it up: the cluster's key and known_hosts, strict host-key
    checking. The ssh is removed afterwards (the hosts are shared by the session's tests)."""
    if shutil.which("mpirun") is None:  # missing infrastructure fails, never skips
        pytest.fail("mpirun not found (Debian package openmpi-bin): scripts/install_system_deps.sh", pytrace=False)
    for host in ssh_hosts.hosts[:2]:
        (host.bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        (host.bin_dir / "python").chmod(0o755)
    ssh = ssh_hosts.hosts[0].bin_dir / "ssh"
    ssh.write_text(f"#!/bin/sh\nexec /usr/bin/ssh -i {ssh_hosts.key_file} -o IdentitiesOnly=yes "
                   f"-o UserKnownHostsFile={ssh_hosts.known_hosts} -o StrictHostKeyChecking=yes "
                   "-o BatchMode=yes -o ConnectTimeout=5 \"$@\"\n")
    ssh.chmod(0o755)
    yield ssh_hosts
    ssh.unlink(missing_ok=True)


def run_multinode(hosts: str, tmp_path: Path, net, suite: str, root: Path) -> tuple[Path, dict]:
    inventory = write_inventory(net, tmp_path, ssh={"connect_timeout": 3}, gpus=1, python=sys.executable,
                                model_code=str(root))
    (tmp_path / "ngc.yaml").write_text(suite)
    out = subprocess.run([str(FAB), "-H", hosts, "run_multinode", "--suite", str(tmp_path / "ngc.yaml"),
                          "--hosts-file", str(inventory), "--force", "--runs-dir", str(tmp_path / "runs")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    return run_dir, entry


def assert_reported(run_dir: Path, case: str, measured: float, published: float) -> None:
    """The report's row of the case in its published references: the figure of the replayed log next to the
    published one, within bounds (the standing at the report's head has a row of the case too)."""
    report = (run_dir / "report.md").read_text().split("### Against published references", 1)[1]
    rows = [r for r in report.splitlines() if r.startswith(f"| {case} |")]
    assert len(rows) == 1 and f"| {measured:.2f} | {published} samples/s |" in rows[0] and "| within |" in rows[0]


def test_reference_ngc_tensorflow_one_mpirun_on_rank_0_over_two_hosts(hosts_with_tools, tmp_path, published):
    net = hosts_with_tools
    h1, h2 = net.hosts[:2]
    want = expected(published, TF_LOG)
    job = RefJob(framework="tensorflow", model="resnet50", precision="fp32", batch_size=256, gpus_per_node=1,
                 nodes=2)
    assert methods(implementation("tensorflow", "resnet50"), job)[0] == Method.from_mapping(want["method"])
    root = model_code(tmp_path, TF_CODE, STANDIN / "dle_tf", published / TF_LOG)
    (tmp_path / "data" / "tfrecord").mkdir(parents=True)
    (tmp_path / "data" / "tfrecord" / "train-00000-of-01024").write_bytes(b"")
    suite = SUITE.format(framework="tensorflow", batch=256, nodes=2, published=want["published"],
                         source="Perf V100 32 GPUs FP32")
    run_dir, entry = run_multinode("h1,h2", tmp_path, net, suite, root)

    assert entry["status"] == "ok", entry
    assert entry["figure"] == pytest.approx(want["published"], rel=want["rel_tol"])  # its last summary
    assert list(entry["hosts"]) == ["h1"]  # h2 started nothing itself: rank 0's mpirun started its rank
    folder = "ngc-tensorflow/resnet50/bz256/2n1g/fp32/1"
    assert not (tmp_path / "work" / "h2" / "runs" / run_dir.name).exists()

    stdout = (run_dir / "hosts" / "h1" / folder / "stdout.log").read_text()
    assert (run_dir / "logs/ngc-tensorflow/resnet50/bz256/2n1g/resnet50_b256_fp32_1.log").read_text() == stdout
    assert_whole_lines(stdout)
    said = {}
    for rank, host in ((0, "h1"), (1, "h2")):  # each rank's lines, tagged and timed by the real mpirun
        lines = tagged(stdout, rank, stamp=STAMP)
        assert lines[0].startswith("stand-in main.py "), stdout[-3000:]
        said[rank] = json.loads(lines[0].removeprefix("stand-in main.py "))
        assert (said[rank]["rank"], said[rank]["world"], said[rank]["host"]) == (rank, 2, host)
        # every line it printed came through whole: its rank's lines of the published log, in order
        assert lines[1:] == tagged((published / TF_LOG).read_text(), rank, stamp=STAMP)
    assert len(tagged(stdout, 0, stamp=STAMP)) == 1 + 302
    assert said[0]["cwd"] == said[1]["cwd"] == str(root / TF_CODE) and said[0]["argv"] == said[1]["argv"]

    sidecar = json.loads((run_dir / "hosts" / "h1" / folder / "resnet50_b256_fp32_1.cmd.json").read_text())
    data = next(a.split("=", 1)[1] for a in sidecar["argv"] if a.startswith("--data_dir="))
    recipe = build(job, Cluster(0, (h1.address, h2.address), nic=h1.nic), code_root=str(root), data_dir=data)
    assert sidecar["argv"] == recipe.argv and sidecar["rank"] == 0 and sidecar["impl"] == "ngc-tensorflow"
    assert recipe.argv[:recipe.argv.index("-np")] == ["mpirun", "--allow-run-as-root", "-tag-output", "--bind-to",
                                                       "none", "-timestamp-output"]
    assert recipe.argv[recipe.argv.index("-H") + 1] == f"{h1.address}:1,{h2.address}:1"
    assert recipe.argv[recipe.argv.index("main.py") + 1:] == said[0]["argv"]
    assert sidecar["host"] == "h1" and sidecar["cwd"] == str(root / TF_CODE)
    if data == str(tmp_path / "data" / "tfrecord"):  # the kit's data directory, as both ranks saw it
        assert said[0]["data"] == said[1]["data"] == ["train-00000-of-01024"]

    assert_reported(run_dir, "ngc-tensorflow/resnet50/bz256/2n1g/fp32", entry["figure"], want["published"])


def test_reference_ngc_mxnet_benchmark_py_on_one_host(hosts_with_tools, tmp_path, published):
    net = hosts_with_tools
    h1 = net.hosts[0]
    want = expected(published, MXNET_LOG)
    job = RefJob(framework="mxnet", model="resnet50", precision="fp32", batch_size=128, gpus_per_node=1, nodes=1)
    assert methods(implementation("mxnet", "resnet50"), job)[0] == Method.from_mapping(want["method"])
    root = model_code(tmp_path, MXNET_CODE, STANDIN / "dle_mxnet", published / MXNET_LOG)
    (tmp_path / "data" / "recordio").mkdir(parents=True)
    for name in ("train.rec", "train.idx"):
        (tmp_path / "data" / "recordio" / name).write_bytes(b"")
    suite = SUITE.format(framework="mxnet", batch=128, nodes=1, published=want["published"],
                         source="Perf V100 1 GPU FP32")
    run_dir, entry = run_multinode("h1", tmp_path, net, suite, root)

    assert entry["status"] == "ok", entry
    assert entry["figure"] == pytest.approx(want["published"], rel=want["rel_tol"])
    folder = run_dir / "hosts" / "h1" / "ngc-mxnet/resnet50/bz128/1n1g/fp32/1"
    stdout = (folder / "stdout.log").read_text()
    assert (run_dir / "logs/ngc-mxnet/resnet50/bz128/1n1g/resnet50_b128_fp32_1.log").read_text() == stdout
    assert_whole_lines(stdout)
    bench = json.loads(re.search(r"^stand-in benchmark.py (.*)$", stdout, re.MULTILINE)[1])
    ranks = tagged(stdout, 0)
    train = json.loads(ranks[0].removeprefix("stand-in train.py "))
    sidecar = json.loads((folder / "resnet50_b128_fp32_1.cmd.json").read_text())
    scratch = sidecar["scratch"]["path"]  # a mirror of its folder outside the run, removed after it
    assert (train["rank"], train["world"], train["host"]) == (0, 1, "h1") and train["cwd"] == scratch
    assert sidecar["ran_in"] == scratch and not Path(scratch).exists()
    for flag, value in (("--batch-size", "128"), ("--num-epochs", "3"), ("--dtype", "float32"), ("--gpus", "0"),
                        ("--dllogger-log", "benchmark_report_fp32.json-1,128"), ("--num-examples", "32000")):
        assert train["argv"][train["argv"].index(flag) + 1] == value
    log = (published / MXNET_LOG).read_text()
    assert ranks[1:] == tagged(log, 0)  # every line train.py printed came through whole, as published
    assert tagged(stdout, 0, "stderr") == tagged(log, 0, "stderr")
    assert "\ntrain.ips\n           |    128    |\n------------------------\n     1     |   389.54  |\n" in stdout

    data = sidecar["argv"][sidecar["argv"].index("--data-root") + 1] if "--data-root" in sidecar["argv"] else None
    recipe = build(job, Cluster(0, (h1.address,), nic=h1.nic), code_root=str(root), data_dir=data)
    assert sidecar["argv"] == recipe.argv and sidecar["argv"][:2] == ["python", "benchmark.py"]
    assert bench["argv"] == recipe.argv[2:] and bench["cwd"] == scratch
    assert sidecar["rank"] == 0 and sidecar["host"] == "h1" and sidecar["impl"] == "ngc-mxnet"
    if data == str(tmp_path / "data" / "recordio"):  # the kit's data directory, as train.py saw it
        assert train["data"] == {f"{data}/train.rec": True, f"{data}/train.idx": True}
    # benchmark.py's -o report (DLE's format), written where it ran, collected beside the record; its per-run
    # DLLogger files (-o-N,B) were removed with the scratch folder; the checkout holds neither
    written = json.loads((folder / "outputs" / "benchmark_report_fp32.json").read_text())
    assert sidecar["outputs"] == ["benchmark_report_fp32.json"]
    assert [f["path"] for f in sidecar["scratch"]["removed"]] == ["benchmark_report_fp32.json-1,128"]
    assert list((root / MXNET_CODE).glob("benchmark_report*")) == []
    assert (written["model"], written["ngpus"], written["bs"], written["metric_keys"]) == ("", [1], [128],
                                                                                           ["train.ips"])
    assert f"{written['metrics']['1']['128']['train.ips']:.5g}" == "389.54"

    assert_reported(run_dir, "ngc-mxnet/resnet50/bz128/1n1g/fp32", entry["figure"], want["published"])
