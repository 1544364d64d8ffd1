"""The seeds' programs on SSH hosts, end to end from `fab -H h1,h2 run_multinode`: staging (sha256-checked),
the kit's launcher, the publisher's launch line on every rank, gather, the publisher's reduction, report.

The program itself is a STAND-IN (tests/standin/, see its README): it joins the real process group over the
test hosts' network and replays a real published log; everything around it is the kit's real path."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nethosts import write_inventory

from kit.config.suites import load_suite
from kit.run.command import SAMPLE_INTERVAL_MS
from kit.run.plan import pinned_commit

REPO = Path(__file__).resolve().parent.parent
FAB = REPO / ".venv" / "bin" / "fab"
H200_SMI = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "nvidia-smi"  # samples' GPU
STANDIN = Path(__file__).resolve().parent / "standin"
CONVNETS = "DeepLearningExamples/PyTorch/Classification/ConvNets"
SUITE = """\
schema_version: 1
name: ngc
hardware: gpu
defaults: {repeats: 1, timeout_s: 240}
cases:
  - framework: torch
    impl: reference
    model: resnet50
    batch_size: 256
    nodes: 2
    gpus_per_node: 1
    references: [{value: 10523.32, lower: -0.01, upper: 0.01, unit: samples/s, source: "Perf V100 32 GPUs FP32"}]
"""


def models_tree(tmp_path: Path, published: Path) -> Path:
    """A model-code root holding the stand-in at the path the DLE PyTorch recipe runs from."""
    root = tmp_path / "models"
    code = root / CONVNETS
    code.mkdir(parents=True)
    for name in ("multiproc.py", "main.py"):
        shutil.copy(STANDIN / "dle_pytorch" / name, code / name)
    shutil.copy(published / "perf-v100/pytorch/pytorch_gpu32_fp32_bs256.txt", code / "replay.log")
    return root


@pytest.fixture(autouse=True)
def stubs_removed(request):
    """The stubs setup() puts on the hosts' PATH leave with the test: the hosts are the session's, and a replayed
    nvidia-smi left on h2 made a later test's check_env find GPUs on h2 and none on h1 (test_reproduce_hosts)."""
    yield
    if "ssh_hosts" in request.fixturenames:
        for host in request.getfixturevalue("ssh_hosts").hosts[:2]:
            for name in ("python", "nvidia-smi"):
                (host.bin_dir / name).unlink(missing_ok=True)


def setup(ssh_hosts, tmp_path: Path, published: Path, model_code: Path | None, gpus: bool = False
          ) -> tuple[Path, Path]:
    for host in ssh_hosts.hosts[:2]:  # the publisher's bare `python` on every host: this venv's
        target = host.bin_dir / "python"
        target.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        target.chmod(0o755)
        if gpus:  # the GPU boundary replayed: the STAND-IN nvidia-smi (one H200's outputs and samples)
            smi = host.bin_dir / "nvidia-smi"
            smi.write_text(f"#!/bin/sh\nSTANDIN_SMI_DIR={H200_SMI} exec "
                           f"{STANDIN / 'nvidia-smi' / 'nvidia-smi'} \"$@\"\n")
            smi.chmod(0o755)
    (tmp_path / "data" / "folder" / "train").mkdir(parents=True, exist_ok=True)  # what DLE PyTorch reads
    keys = {"model_code": str(model_code)} if model_code else {}
    inventory = write_inventory(ssh_hosts, tmp_path, ssh={"connect_timeout": 3}, gpus=1, python=sys.executable,
                                **keys)
    (tmp_path / "ngc.yaml").write_text(SUITE)
    return inventory, tmp_path / "ngc.yaml"


def fab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(FAB), *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_reference_ngc_pytorch_on_two_hosts_from_fab_run_multinode(ssh_hosts, tmp_path, published):
    inventory, suite = setup(ssh_hosts, tmp_path, published, models_tree(tmp_path, published), gpus=True)
    runs = tmp_path / "runs"
    out = fab("-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file", str(inventory), "--force",
              "--runs-dir", str(runs))
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    (run_dir,) = list(runs.iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert entry["status"] == "ok" and entry["figure"] == 10523.32  # the publisher's last summary
    pin = pinned_commit(next(iter(load_suite(run_dir / "suite.yaml").cases)))
    where = str(tmp_path / "models" / CONVNETS)
    key, top = "ngc-pytorch/resnet50/bz256/2n1g/fp32", tmp_path / "models" / "DeepLearningExamples"
    forced = meta["model_code_forced"]  # the stand-in tree is not the pin's files: run only with --force
    assert [(m["host"], m["case"], m["path"], m["head"], m["pin"]) for m in forced] == [
        (h, key, where, None, pin) for h in ("h1", "h2")]
    assert all(m["reason"].startswith(f"{top}: PyTorch/Classification/ConvNets/main.py") and m["reason"].endswith(
        f"not a checkout: its files differ from the tree of the pin {pin[:7]}; docker/pins.yaml pins {pin} (case "
        f"{key})") for m in forced), forced
    for rank, host in enumerate(("h1", "h2")):
        folder = run_dir / "hosts" / host / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1"
        said = [json.loads(line.split(" ", 2)[2]) for line in (folder / "stdout.log").read_text().splitlines()
                if line.startswith("stand-in main.py ")]
        assert [(s["rank"], s["world"], s["master"]) for s in said] == [(rank, 2, ssh_hosts.hosts[0].address)]
        sidecar = json.loads((folder / "resnet50_b256_fp32_1.cmd.json").read_text())
        # each host ran main.py in a scratch mirror of its folder, outside the run; rank 0 saved its checkpoint there
        scratch = sidecar["scratch"]
        assert said[0]["cwd"] == sidecar["ran_in"] == scratch["path"] and not Path(scratch["path"]).exists()
        assert scratch["removed"] == ([{"path": "checkpoint.pth.tar", "bytes": 65536}] if rank == 0 else [])
        assert said[0]["argv"][:2] == ["--arch", "resnet50"]
        assert said[0]["argv"][-1] == str(tmp_path / "data" / "folder")  # the host's data, in DLE's format
        assert sidecar["rank"] == rank and sidecar["impl"] == "ngc-pytorch" and "--node_rank" in sidecar["argv"]
        assert sidecar["data"] == {"mode": "imagenet", "format": "folder", "path": str(tmp_path / "data/folder"),
                                   "synthetic": None}
        staged = Path(tmp_path / "work" / host / "kit-scripts" / "reference" / "launch.py")
        assert staged.read_bytes() == (REPO / "scripts/reference/launch.py").read_bytes()
    # each host's GPU sampled beside its rank, gathered with its folder, in results.json and the report
    for host in ("h1", "h2"):
        samples = run_dir / "hosts" / host / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1/resnet50_b256_fp32_1.gpu-telemetry"
        assert samples.read_text().startswith(f"# telemetry 1 source smi interval_ms {SAMPLE_INTERVAL_MS} ")
    (group,) = json.loads((run_dir / "results.json").read_text())["groups"]
    tele = group["cases"][0]["runs"][0]["telemetry"]
    assert tele["window"] == "whole run" and sorted(tele["hosts"]) == ["h1", "h2"]
    assert all(h["source"] == "smi" and h["samples"] >= 3 for h in tele["hosts"].values())
    report = (run_dir / "report.md").read_text()
    assert "What the GPUs did (a harness run over its measured steps" in report
    assert "| ngc-pytorch/resnet50/bz256/2n1g/fp32 | 10523.32 | 10523.3 samples/s |" in report
    assert "within" in report
    assert "Method per run: last summary line, scale 1.\n" in report  # DLE PyTorch 32 GPUs: its own rule
    assert (f"| ngc-pytorch/resnet50/bz256/2n1g/resnet50_b256_fp32_1 | folder data at {tmp_path / 'data/folder'} |"
            in report)
    assert "removed after each run: 1 file(s), 65536 bytes (0.1 MiB) in 2 run(s); a bundle never holds them." in report
    assert [p for p in (*run_dir.rglob("*"), *tmp_path.glob("models/**/*"), *tmp_path.glob("work/**/*"))
            if p.name.endswith(".pth.tar")] == []
    audit_program_rules(run_dir, tmp_path)


CASE = "ngc-pytorch/resnet50/bz256/2n1g/fp32"
FORCED = "it ran forced off the pin (kit bench --force, run.json model_code_forced)"


def audit_program_rules(run_dir: Path, tmp_path: Path) -> None:
    """kit verify judges the published program's run from its records: clean as run, each forgery named."""
    from kit.audit import bundle as bd
    from kit.audit.verify import verify, verify_tree

    def program_violations(result) -> list[tuple[str, str]]:  # the replayed log's clock and the forcing aside
        return sorted((v.rule, v.message) for v in result.violations if v.rule.startswith("program_")
                      and v.rule != "program_figure_agrees_with_its_clock" and FORCED not in v.message)

    clean = verify(bd.make_bundle(run_dir, tmp_path / "clean.tar.gz", submitter="Lab", system_name="box"))
    # every rule holds: the harness's step counts are not asked of a published program, and the program's images/s
    # is the samples/s of the suite's reference; each host's (stand-in) GPU was captured and sampled
    # ... but the clock of what the stand-in replays: a 32-GPU log for this 2-GPU job (its rates 16x what its clock
    # shows); rule set v5 judged it only against itself
    # ... and the stand-in tree is no checkout of the pin, run with --force: rule set v6 fails a forced run on each
    # host where v5 passed it with a note
    said = sorted((v.rule, v.message) for v in clean.violations)
    # (rule set v9 says it twice: the figure's mean of its rates, and its records each beyond the band)
    assert [rule for rule, _ in said] == ["program_code_at_pin"] * 2 + ["program_figure_agrees_with_its_clock"] * 2, \
        said
    assert [message.split(": ", 1)[0] for _, message in said[:2]] == [f"{CASE} (h1)", f"{CASE} (h2)"]
    assert all(FORCED in message for _, message in said[:2]), said
    assert any("train.total_ips rates its figure counts is 16.00" in m for _, m in said[2:]), said  # 32 GPUs' for 2
    v5 = verify(tmp_path / "clean.tar.gz", rules_version="v5")
    assert v5.ok
    sampled = next(f for f in clean.findings if f.rule.name == "gpu_telemetry_holds")
    assert sampled.checked == 1 and sampled.violations == []
    pinned = next(f for f in v5.findings if f.rule.name == "program_code_at_pin")
    assert pinned.checked == 2 and pinned.note.startswith("2 run record(s) ran forced off the pin")
    # the summary doubled alone, its per-step records (which the clock holds) left as they were: a 2-node DLE run's
    # figure is its summary, which rule set v6 holds to their mean
    summarised = tmp_path / "summarised"
    shutil.copytree(run_dir, summarised)
    (log,) = (summarised / "logs" / CASE.rsplit("/", 1)[0]).glob("*_fp32_*.log")
    text = log.read_text()
    doubled = re.sub(r"(Summary: .*?train\.total_ips : )([\d.]+)", lambda m: f"{m[1]}{float(m[2]) * 2:.2f}", text)
    assert doubled != text
    log.write_text(doubled)
    from kit.cli import main

    assert main(["report", str(summarised)]) == 0
    said = [v.message for v in verify(bd.make_bundle(summarised, tmp_path / "summary.tar.gz", submitter="Lab",
                                                     system_name="box")).violations
            if v.rule == "program_figure_agrees_with_its_clock"]
    assert len(said) == 3 and re.search(r"its figure is its summary train\.total_ips, 2\.00\d\dx their mean", said[2])

    root = bd.unpack(bd.make_bundle(run_dir, tmp_path / "forged.tar.gz", submitter="Lab", system_name="box"),
                     tmp_path / "forged")
    run = next((root / "run").iterdir())
    folder = run / "hosts" / "h2" / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1"
    sidecar = folder / "resnet50_b256_fp32_1.cmd.json"
    meta = json.loads(sidecar.read_text())
    meta["argv"][meta["argv"].index("-b") + 1] = "128"  # h2 ran another batch than the case
    sidecar.write_text(json.dumps(meta))
    (folder / "stdout.log").unlink()
    meta = json.loads((run / "run.json").read_text())
    meta["model_code_forced"] = meta["model_code_forced"][:1]  # h2's forced run no longer said
    (run / "run.json").write_text(json.dumps(meta))
    bd.write_manifest(root)
    found = program_violations(verify_tree(root))
    case = CASE
    assert [rule for rule, _ in found] == ["program_as_published", "program_code_at_pin",
                                          "program_every_rank_logged"], found
    assert found[0][1].startswith(f"{case} (h2): argv [") and "is not the recipe's" in found[0][1]
    assert found[1][1].startswith(f"{case} (h2): ran model code of no git commit, docker/pins.yaml pins ")
    assert found[2][1] == f"{case} (h2): no stdout.log of this host's ranks"


def test_reference_case_refused_on_a_host_without_the_model_code(ssh_hosts, tmp_path, published):
    inventory, suite = setup(ssh_hosts, tmp_path, published, tmp_path / "nowhere")
    out = fab("-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file", str(inventory), "--force",
              "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 2, (out.stdout + out.stderr)[-3000:]
    err = out.stdout + out.stderr
    assert "nothing started" in err and f"h1: no model code at {tmp_path / 'nowhere' / CONVNETS}" in err
    assert "h2: no model code" in err
    assert f"h1: no folder data at {tmp_path / 'data' / 'folder'}" not in err  # it is there


def test_reference_case_refused_on_a_host_without_its_data(ssh_hosts, tmp_path, published):
    inventory, suite = setup(ssh_hosts, tmp_path, published, models_tree(tmp_path, published))
    (tmp_path / "data" / "folder" / "train").rmdir()
    (tmp_path / "data" / "folder").rmdir()
    out = fab("-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file", str(inventory), "--force",
              "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 2, (out.stdout + out.stderr)[-3000:]
    err = out.stdout + out.stderr
    for host in ("h1", "h2"):
        assert (f"{host}: no folder data at {tmp_path / 'data' / 'folder'} (case ngc-pytorch/resnet50/bz256/2n1g/"
                "fp32; data_prep/convert.py --to folder") in err
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert not (run_dir / "logs").exists() and not (run_dir / "run.json").exists()  # refused before any run


def test_reference_case_refused_where_the_model_code_is_not_at_the_pinned_commit(ssh_hosts, tmp_path, published):
    root = models_tree(tmp_path, published)
    dle = root / "DeepLearningExamples"
    git = ["git", "-C", str(dle), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(dle)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "not the pin"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    inventory, suite = setup(ssh_hosts, tmp_path, published, root)
    suite.write_text(SUITE.replace("hardware: gpu", "hardware: cpu"))  # check_env passes: only the pin refuses
    out = fab("-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file", str(inventory),
              "--runs-dir", str(tmp_path / "runs"))
    assert out.returncode == 2, (out.stdout + out.stderr)[-3000:]
    err = out.stdout + out.stderr
    pin = pinned_commit(load_suite(suite).cases[0])
    for host in ("h1", "h2"):
        assert (f"{host}: {dle}: the pin is not in the checkout; HEAD {head[:7]} is not the pin; docker/pins.yaml "
                f"pins {pin} (case ngc-pytorch/resnet50/bz256/2n1g/fp32); pass --force") in err
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert not (run_dir / "logs").exists() and not (run_dir / "run.json").exists()  # refused before any run


def test_reference_hung_rank_stops_every_process_on_every_host(ssh_hosts, tmp_path, published):
    root = models_tree(tmp_path, published)
    (root / CONVNETS / "hang_rank").write_text("1")  # rank 1 (on h2) hangs and ignores SIGTERM
    inventory, suite = setup(ssh_hosts, tmp_path, published, root)
    suite.write_text(SUITE.replace("timeout_s: 240", "timeout_s: 20"))
    runs = tmp_path / "runs"
    t0 = time.monotonic()
    out = fab("-H", "h1,h2", "run_multinode", "--suite", str(suite), "--hosts-file", str(inventory), "--force",
              "--runs-dir", str(runs))
    assert out.returncode != 0 and time.monotonic() - t0 < 150, (out.stdout + out.stderr)[-3000:]
    (run_dir,) = list(runs.iterdir())
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "timeout" and "every host" in entry["reason"], (entry["status"], entry["reason"], [
        (p.relative_to(run_dir).as_posix(), p.read_text()[-1500:]) for p in (run_dir / "hosts").rglob("stdout.log")])
    for host in ("h1", "h2"):
        left = ssh_hosts.run(host, ["ps", "-eo", "args="]).stdout
        assert "main.py" not in left and "multiproc.py" not in left and "launch.py" not in left, (host, left)
    hung = run_dir / "hosts" / "h2" / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1" / "stdout.log"
    assert "stand-in main.py: this rank hangs" in hung.read_text()  # the logs of the failed run are kept
    assert (run_dir / "hosts" / "h1" / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1" / "stdout.log").is_file()
    (root / CONVNETS / "hang_rank").unlink()  # the rank no longer hangs: --resume redoes only that run
    out = fab("-H", "h1,h2", "run_multinode", "--resume", str(run_dir), "--hosts-file", str(inventory), "--force")
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "ok" and entry["figure"] == 10523.32
    attempts = run_dir / "attempts"
    assert (attempts / "ngc-pytorch/resnet50/bz256/2n1g/resnet50_b256_fp32_1.log.1").is_file()
    assert (attempts / "ngc-pytorch/resnet50/bz256/2n1g/resnet50_b256_fp32_1.cmd.json.1").is_file()
    hung_then = attempts / "hosts" / "h2" / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1.1" / "stdout.log"
    assert "this rank hangs" in hung_then.read_text() and "this rank hangs" not in hung.read_text()
    remote = tmp_path / "work" / "h2" / "runs" / run_dir.name / "h2" / "ngc-pytorch/resnet50/bz256/2n1g/fp32"
    assert sorted(p.name.split("-")[0] for p in remote.iterdir()) == ["1", "1.attempt"]  # aside on the host too
