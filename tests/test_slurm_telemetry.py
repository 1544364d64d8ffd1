"""A GPU suite through a real Slurm (tests/slurmhosts.py), each node's GPU sampled beside its rank, end to end.

Real: slurmctld, slurmd, slurmdbd, munge, salloc/srun/sacct (the test cluster: two nodes, each with one GPU as a
Slurm GRES, so the job asks --gpus-per-node=1 and Slurm hands each task CUDA_VISIBLE_DEVICES); `kit cluster
--scheduler slurm` (staging the sampler to the shared directory, check_env's probes as one step, the nodes'
check step, the run as one step over both nodes, gather, results.json, report.md); the GPU sampler
(scripts/telemetry/gpu_sampler.py) on each node, beside its rank; the REAL `paddle.distributed.launch` (this venv's
CPU Paddle) on each node; `kit bundle` and `kit verify`'s rules (kit.audit).
STAND-INs: the GPU itself, replayed: nvidia-smi (tests/standin/nvidia-smi: one H200's recorded outputs for
check_env and its recorded 100 ms loop for the sampler, so verify finds the sampled GPU in the capture), put on the nodes' PATH (srun passes the submitting
environment to every task); PaddleClas's train.py (tests/standin/, see its README), which joins the real gloo group
of its rank and replays a real published log.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from test_reference_runs_paddle import PADDLECLAS_LOG, STANDIN, SUITE, said
from test_slurm import nothing_left
from test_slurm_programs import FOLDER, cluster, hosts_yaml, the_run

from kit.cli import main
from kit.core.yamlio import load_yaml
from kit.results.gpu_telemetry import run_telemetry
from kit.run.command import SAMPLE_INTERVAL_MS

CASE = "paddleclas/resnet50/bz256/2n1g/fp32"
SAMPLES = "resnet50_b256_fp32_1.gpu-telemetry"
H200_SMI = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "nvidia-smi"  # the GPU sampled


def gpu_nodes_path(tmp_path: Path, monkeypatch) -> Path:
    """The publisher's bare `python` (this venv's; the device it sees is Slurm's CUDA_VISIBLE_DEVICES) and the
    STAND-IN nvidia-smi on the nodes' PATH; each nvidia-smi call notes its node and CUDA_VISIBLE_DEVICES in the
    returned file."""
    bin_dir, seen = tmp_path / "bin", tmp_path / "smi-calls"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        f"echo \"${{SLURMD_NODENAME:-none}} ${{CUDA_VISIBLE_DEVICES-unset}} $*\" >> {seen}\n"
        f"STANDIN_SMI_DIR={H200_SMI} exec {STANDIN / 'nvidia-smi' / 'nvidia-smi'} \"$@\"\n")
    for tool in ("python", "nvidia-smi"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/sbin:/usr/local/bin:"
                               "/usr/sbin:/usr/bin:/sbin:/bin")
    return seen


def test_slurm_gpu_run_samples_each_node_and_verifies(slurm_cluster, tmp_path, monkeypatch, published):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    seen = gpu_nodes_path(tmp_path, monkeypatch)
    root, data = tmp_path / "models", tmp_path / "data"
    code = root / "PaddleClas" / "ppcls" / "static"
    code.mkdir(parents=True)
    shutil.copy(STANDIN / "paddleclas" / "train.py", code / "train.py")
    shutil.copy(published / PADDLECLAS_LOG, code / "replay.log")
    (data / "paddle" / "train" / "n01440764").mkdir(parents=True)
    (data / "paddle" / "train_list.txt").write_text("train/n01440764/n01440764_1.JPEG 0\n"
                                                    "train/n01440764/n01440764_2.JPEG 0\n")
    (want,) = [e for e in load_yaml(published / "expected.yaml")["logs"] if e["file"] == PADDLECLAS_LOG]
    per_card = want["published"] / want["gpus"]
    suite = SUITE.format(model="resnet50", batch=256, references=(
        f"    references: [{{value: {per_card * 2:.3f}, lower: -0.01, upper: 0.01, unit: samples/s, "
        f"source: \"Perf V100 FP32 32 GPUs, per card x 2\"}}]\n"))
    assert "hardware: gpu" in suite and "gpus_per_node: 1" in suite
    hosts_yaml(tmp_path, model_code=str(root), data_dir=str(data), gpus_per_node=1)

    # --force: the stand-in tree is no checkout of the pin (check_env passes: each node's nvidia-smi answers)
    assert main(cluster(tmp_path, suite, "--force")) == 0
    run_dir, meta, entry = the_run(tmp_path, per_card * 2)
    assert entry["slurm"]["step_state"] == "COMPLETED" and entry["slurm"]["srun_exit"] == 0, entry["slurm"]
    assert meta["gpu_telemetry"] == {"sampler": "scripts/telemetry/gpu_sampler.py", "interval_ms": SAMPLE_INTERVAL_MS}
    staged = tmp_path / "shared" / "kit-scripts" / "telemetry" / "gpu_sampler.py"
    repo = Path(__file__).resolve().parent.parent
    assert staged.read_bytes() == (repo / "scripts/telemetry/gpu_sampler.py").read_bytes()
    for rank, node in enumerate(("h2", "h3")):
        here = run_dir / "hosts" / node / FOLDER
        (me,) = said((here / "stdout.log").read_text(), "ppcls/static/train.py")
        assert (me["rank"], me["world"], me["rank_sum"]) == (rank, 2, 1)  # the gloo group's all_reduce: 0 + 1
        assert me["env"]["FLAGS_selected_gpus"] == "0"  # Paddle's launcher: the device Slurm's task was given
        assert (here / SAMPLES).read_text().startswith(f"# telemetry 1 source smi interval_ms {SAMPLE_INTERVAL_MS} "), node
        assert "telemetry/gpu_sampler.py --out " in entry["hosts"][node]["command"]  # the rank ran beside it
        assert (here / "exit_code").read_text().strip() == "0"
    # each node's sampler asked its (stand-in) nvidia-smi inside the step, which Slurm gave the node's one GPU
    loops = sorted({tuple(line.split()[:2]) for line in seen.read_text().splitlines() if "--query-gpu=" in line})
    assert loops == [("h2", "0"), ("h3", "0")], seen.read_text()

    (group,) = json.loads((run_dir / "results.json").read_text())["groups"]
    tele = group["cases"][0]["runs"][0]["telemetry"]
    assert sorted(tele["hosts"]) == ["h2", "h3"], tele
    assert all(h["source"] == "smi" and h["samples"] >= 3 for h in tele["hosts"].values()), tele
    assert {h["file"] for h in tele["hosts"].values()} == {f"hosts/{n}/{FOLDER}/{SAMPLES}" for n in ("h2", "h3")}
    # run.json kept the same figures as the run ended; the report names each GPU as the node's capture does, where
    # the samples (this driver's nvidia-smi fields) give only its UUID
    kept = json.loads(json.dumps(entry["telemetry"]))
    assert {n: h.pop("gpus") for n, h in kept["hosts"].items()} == {n: ["GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658"]
                                                                     for n in ("h2", "h3")}
    assert {n: h.pop("gpus") for n, h in tele["hosts"].items()} == {n: ["NVIDIA H200"] for n in ("h2", "h3")}
    # run.json keeps the run's whole sampled time (as verify recomputes it); the report, a program's timed steps by
    # its log's clock, moved to the run's start by whole quarter hours: the replayed log's 2023 stamps land inside
    # this run's few seconds of samples or not by the time of day the test runs, so each is held to its own rule
    (log,) = meta["runs"]
    whole = json.loads(json.dumps(run_telemetry(run_dir / log, run_dir / "logs", run_dir)))
    for host in whole["hosts"].values():
        host.pop("gpus")
    assert kept == whole and kept["window"] == "whole run"
    assert kept == tele if tele["window"] == "whole run" else tele["window"] == "timed steps", (tele, kept)
    report = (run_dir / "report.md").read_text()
    assert f"| {CASE} |" in report
    row = next(line for line in report.splitlines() if line.startswith("| 2n1g | 1 | NVIDIA H200 |"))
    samples = sum(h["samples"] for h in tele["hosts"].values())
    assert f"| {tele['window']}: {tele['seconds']:g} s, {samples} samples |" in row
    nothing_left(slurm_cluster)
    for node in ("h2", "h3"):  # each sampler and its nvidia-smi loop ended with the step
        left = slurm_cluster.net.run(node, ["ps", "-eo", "args="]).stdout
        assert "gpu_sampler.py" not in left and "query_gpu.py" not in left, (node, left)
    audit_samples(run_dir, tmp_path)


def audit_samples(run_dir: Path, tmp_path: Path) -> None:
    """kit verify of the run's bundle: clean as run, both nodes' samples checked; one node's edited sample named."""
    from kit.audit import bundle as bd
    from kit.audit.verify import verify, verify_tree

    clean = verify(bd.make_bundle(run_dir, tmp_path / "clean.tar.gz", submitter="Lab", system_name="box"))
    # the stand-in PaddleClas tree is no checkout of the pin, run with --force: rule set v6 fails that on each node
    forced = "it ran forced off the pin (kit bench --force, run.json model_code_forced)"
    assert [(v.rule, v.message.split(": ", 1)[0], forced in v.message) for v in clean.violations] == [
        ("program_code_at_pin", f"{CASE} ({node})", True) for node in ("h2", "h3")], clean.violations
    sampled = next(f for f in clean.findings if f.rule.name == "gpu_telemetry_holds")
    assert sampled.checked == 1 and sampled.violations == [], sampled

    root = bd.unpack(bd.make_bundle(run_dir, tmp_path / "forged.tar.gz", submitter="Lab", system_name="box"),
                     tmp_path / "forged")
    run = next((root / "run").iterdir())
    samples = run / "hosts" / "h3" / FOLDER / SAMPLES
    lines = samples.read_text().splitlines()
    rows = [i for i, line in enumerate(lines) if line[:1].isdigit()]  # nvidia-smi's rows, the header above them
    k = len(rows) // 2
    stamp, earlier = lines[rows[k]].split(",", 1)[0], lines[rows[k - 2]].split(",", 1)[0]
    lines[rows[k]] = earlier + lines[rows[k]][len(stamp):]  # h3's sample k+1 now taken before sample k
    samples.write_text("\n".join(lines) + "\n")
    bd.write_manifest(root)
    said_now = [(v.rule, v.where, v.message) for v in verify_tree(root).violations if forced not in v.message]
    where = samples.relative_to(run).as_posix()
    held = [s for s in said_now if s[0] == "gpu_telemetry_holds" and s[1] == where]
    assert len(held) == 1, said_now
    # else at most h3's figures and the run's energy (both hosts' summed) in results.json, and the same in run.json,
    # recomputed from its samples (the moved sample can change the integrated energy)
    run_energy = ("runs[0].telemetry.energy_j:", "runs[0].telemetry.j_per_image:", "runs[0].telemetry.images_per_s_per_w:")
    assert all("telemetry.hosts.h3." in message or "run.json's telemetry." in message
               or any(key in message for key in run_energy) for _, at, message in said_now if at != where), said_now
    assert held[0][2].startswith(f"{CASE} run 1 (h3): sample {k + 1} of GPU 0 is not after the one before it ("), \
        said_now
