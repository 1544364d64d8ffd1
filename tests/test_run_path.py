"""The run path: one command builder for every runner, the judging of a run, and the Runner interface
being enough for a new runner (one written here, in the test, starts two ranks of a real two-node
torch job on this machine without touching planning, commands, gather or records)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kit.config.expansion import FROZEN_KEY, freeze
from kit.config.suites import load_suite
from kit.core.rundir import read_run_meta
from kit.run import records
from kit.run.bench import run_each, write_report
from kit.run.command import CPU_OPENMP, Container, Mount, Site, command_for
from kit.run.plan import PlannedRun, plan_for_nodes
from kit.run.runner import HostStatus, Runner, judge, master_port, stop_tree

SUITE = """\
schema_version: 1
name: pair
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10, timeout_s: 240}
cases:
  - {framework: torch, model: resnet50, nodes: 2, gpus_per_node: 1}
  - {framework: torch, impl: reference, model: resnet50, nodes: 2, gpus_per_node: 8, batch_size: 256}
  - {framework: tensorflow, model: resnet50, nodes: 2, gpus_per_node: 8, batch_size: 256}
"""


def suite(tmp_path: Path):
    path = tmp_path / "pair.yaml"
    path.write_text(SUITE)
    return load_suite(path)


def sites(n: int, **extra) -> list[Site]:
    return [Site(name=f"n{i}", address=f"10.9.0.{i}", python="/usr/bin/python3", **extra) for i in range(1, n + 1)]


def test_one_builder_gives_every_rank_its_launcher_line(tmp_path):
    harness, ngc_torch, ngc_tf = suite(tmp_path).cases
    ranks = [command_for(harness, 1, r, sites(2), 31000, "cpu") for r in (0, 1)]
    for rank, cmd in enumerate(ranks):
        argv = cmd.launched.argv
        assert argv[:3] == ["/usr/bin/python3", "-m", "torch.distributed.run"]
        assert argv[argv.index("--node_rank") + 1] == str(rank) and argv[argv.index("--master_addr") + 1] == "10.9.0.1"
        assert cmd.program == cmd.launched and cmd.reference is None
    ref = command_for(ngc_torch, 1, 1, sites(2, sidecar="/w/x.cmd.json"), 31000, "gpu")
    assert ref.launched.argv[1].endswith("scripts/reference/launch.py")
    assert ref.launched.argv[ref.launched.argv.index("--") + 1:] == ref.reference.argv == ref.program.argv
    assert "--node_rank" in ref.program.argv and ref.launched.argv[ref.launched.argv.index("--record") + 1] == "/w/x.cmd.json"
    tf = [command_for(ngc_tf, 1, r, sites(2, sidecar="/w/x.cmd.json"), 31000, "gpu") for r in (0, 1)]
    assert tf[0].launched.argv and tf[1].starts_nothing  # rank 0's mpirun starts host 2's ranks


def test_a_site_with_an_image_runs_the_same_program_in_its_container(tmp_path):
    harness = suite(tmp_path).cases[0]
    box = Container("kit/pytorch:v100-x", (Mount("/w", "/w"),), workdir="/w")
    native = command_for(harness, 1, 0, sites(2), 31000, "gpu")
    boxed = command_for(harness, 1, 0, sites(2, container=box), 31000, "gpu", run_id="r1")
    argv = boxed.launched.argv
    assert argv[:3] == ["docker", "run", "--rm"] and "kit/pytorch:v100-x" in argv
    inner = argv[argv.index("kit/pytorch:v100-x") + 1:]
    in_image = {"/usr/bin/python3": "python"}
    expected = ["/opt/kit/harness/train.py" if a.endswith("harness/train.py") else in_image.get(a, a)
                for a in native.launched.argv]
    assert inner == expected  # the same program, with the image's interpreter and harness
    assert "--env" in argv and "HOME=/tmp" in argv and "--label" in argv and "io.kit.run=r1" in argv


def test_a_cpu_rank_on_a_remote_host_waits_passively_in_its_container_too(tmp_path):
    """A remote host's cores are not known where its command is built: no thread count, but its OpenMP threads wait
    passively (spinning, a container's ranks ran 0.38 images/s beside the other tests' runs, 141 s for 11 steps)."""
    harness = suite(tmp_path).cases[0]
    box = Container("kit/cpu:x", (Mount("/w", "/w"),), workdir="/w")
    native = command_for(harness, 1, 0, sites(2), 31000, "cpu").launched
    boxed = command_for(harness, 1, 0, sites(2, container=box), 31000, "cpu", run_id="r1").launched.argv
    assert CPU_OPENMP.items() <= native.env.items() and "OMP_NUM_THREADS" not in native.env
    assert all(f"{k}={v}" in boxed and boxed[boxed.index(f"{k}={v}") - 1] == "--env" for k, v in CPU_OPENMP.items())
    assert not CPU_OPENMP.keys() & command_for(harness, 1, 0, sites(2), 31000, "gpu").launched.env.keys()


def test_judge_names_what_happened(tmp_path):
    run = PlannedRun(suite(tmp_path).cases[0], 1)
    log = tmp_path / run.log_rel
    timed_out = judge(run, tmp_path, [HostStatus("a", error="timeout"), HostStatus("b")], True, 3.0)
    assert timed_out.status == "timeout" and "every host" in timed_out.reason
    alone = judge(run, tmp_path, [HostStatus("local", error="timeout")], False, 3.0)
    assert alone.status == "timeout" and "killed" in alone.reason
    lost = judge(run, tmp_path, [HostStatus("a", exit_code=0), HostStatus("b", error="EOFError: lost")], True, 3.0)
    assert lost.status == "failed" and lost.reason == "b: EOFError: lost; no log from rank 0"
    log.parent.mkdir(parents=True)
    log.write_text("no throughput here\n")
    failed = judge(run, tmp_path, [HostStatus("local", exit_code=1, error="exit 1")], True, 3.0)
    assert failed.status == "failed" and failed.reason.startswith("exit 1: ") and failed.value is None


class ProcessPerRank(Runner):
    """A runner of the kind a batch scheduler gives: one task per node (here a local process per rank),
    each told its rank; rank 0's output is the run's log. Only the Runner methods are written."""

    def __init__(self, run_dir: Path, nodes: int):
        self.run_dir, self.nodes = run_dir, nodes
        self.procs: list[subprocess.Popen] = []
        self.status: list[HostStatus] = []

    def start(self, run: PlannedRun) -> None:
        port = master_port()
        rank_sites = [Site(name=f"task{r}", python=sys.executable, loopback=True) for r in range(self.nodes)]
        self.status = []
        for rank in range(self.nodes):
            cmd = command_for(run.case, run.repeat, rank, rank_sites, port, "cpu").launched
            out = self.run_dir / (run.log_rel if rank == 0 else Path(f"task{rank}.log"))
            out.parent.mkdir(parents=True, exist_ok=True)
            env = {**cmd.env, **CPU_OPENMP, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
            cpus = sorted(os.sched_getaffinity(0))
            own_cpu = {cpus[rank % len(cpus)]}  # each task its node's CPU: the harness's threads follow it

            def on_its_cpu(cpu: set[int] = own_cpu) -> None:
                os.sched_setaffinity(0, cpu)

            with open(out, "wb") as sink:
                self.procs.append(subprocess.Popen(cmd.argv, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                                   start_new_session=True, preexec_fn=on_its_cpu))
            self.status.append(HostStatus(f"task{rank}", command=cmd.shell()))

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for proc, status in zip(self.procs, self.status, strict=True):
            try:
                status.exit_code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                status.error = "timeout"
                return False
            status.error = f"exit {status.exit_code}" if status.exit_code else ""
        return True

    def stop(self) -> None:
        for proc in self.procs:
            stop_tree(proc)

    def statuses(self) -> list[HostStatus]:
        return self.status


def test_a_new_runner_needs_only_the_runner_interface(tmp_path):
    """The toy runner goes through the one bench loop (kit.run.bench.run_each) with no loop of its own: its run is
    recorded with every task's end, and the run directory says what every runner's does (planned, finished)."""
    run_dir, loaded = records.start(suite(tmp_path).path, tmp_path / "runs")
    (run,) = plan_for_nodes(loaded, 2, lambda case: case.impl == "harness")
    meta = records.open_run_meta(run_dir, loaded, **{FROZEN_KEY: freeze(loaded)})
    records.note_planned(meta, [run])
    (outcome,) = run_each(run_dir, loaded, ProcessPerRank(run_dir, 2), [run], meta)
    assert "partial: 1 of 1 runs finished; missing: none" in (run_dir / "report.md").read_text()
    records.finish_run_meta(run_dir, meta)
    write_report(run_dir, loaded, plots=False)
    assert outcome.status == "ok", (outcome.reason, (run_dir / run.log_rel).read_text()[-2000:])
    assert outcome.value == records.figure_of(run_dir / run.log_rel, run_dir / "logs") > 0
    assert [h.host for h in outcome.hosts] == ["task0", "task1"] and all(h.exit_code == 0 for h in outcome.hosts)
    assert records.is_done(run_dir, run)
    entry = read_run_meta(run_dir)["runs"][str(run.log_rel)]
    assert entry["status"] == "ok" and sorted(entry["hosts"]) == ["task0", "task1"] and "host_load" not in entry
    assert "complete: all 1 planned runs finished." in (run_dir / "report.md").read_text()


REPLAYED = [  # (published log, its folder in a run, the figure published for it, rel_tol): expected.yaml
    ("perf-v100/pytorch/pytorch_gpu8_amp_bs256.txt", "ngc-pytorch/resnet50/bz256/1n8g/resnet50_b256_amp_1.log",
     5889.05, 2e-5),
    ("perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C8_log",
     "paddleclas/resnet50/bz256/1n8g/resnet50_b256_fp32_1.log", 3019.361, 1e-3),
    ("perf-v100/mxnet/mxnet_gpu8_amp_bs256.txt", "ngc-mxnet/resnet50/bz256/1n8g/resnet50_b256_amp_1.log", 10336, 1e-5),
]


def test_a_published_programs_log_is_reduced_by_its_recipe_everywhere(tmp_path, published):
    import pytest

    from kit.run import bench

    run_dir = tmp_path / "run"
    for source, rel, _figure, _tol in REPLAYED:
        (run_dir / "logs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / "logs" / rel).write_bytes((published / source).read_bytes())
    (run_dir / "suite.yaml").write_text(
        "schema_version: 1\nname: replay\nhardware: gpu\ndefaults: {repeats: 1, batch_size: 256, gpus_per_node: 8}\n"
        "cases:\n  - {framework: torch, impl: reference, model: resnet50, precision: amp}\n"
        "  - {framework: paddle, impl: reference, model: resnet50, precision: fp32}\n"
        "  - {framework: mxnet, model: resnet50, precision: amp}\n")
    loaded = load_suite(run_dir / "suite.yaml")
    report = bench.compose_report(run_dir, loaded)
    medians = {g.key.case_key(c.name): c.median for g in report.groups for c in g.cases}
    for case, (_source, rel, figure, tol) in zip(loaded.cases, REPLAYED, strict=True):
        assert case.log_path(1).as_posix() == rel
        assert medians[case.key] == pytest.approx(figure, rel=tol), case.key  # the publisher's figure
        assert records.figure_of(run_dir / "logs" / rel, run_dir / "logs") == medians[case.key]
        assert records.is_done(run_dir, PlannedRun(case, 1))
    assert not report.failures


def test_each_program_case_is_paired_with_the_harness_case_of_its_setting_or_refused_with_why(tmp_path):
    """The one harness ÷ program table: what the table paired by tag alone (ngc-pytorch amp with torch amp,
    PaddleClas with paddle) is a ratio only where every setting, layout and mode included, is the same; every
    other program case is listed with why it is not compared."""
    from types import SimpleNamespace as NS

    from kit.config.programs import ran_as
    from kit.core.layout import GroupKey
    from kit.results.program_ratio import HEADING, NOT_COMPARED, program_ratio_section

    path = tmp_path / "s.yaml"
    path.write_text(
        "schema_version: 1\nname: s\nhardware: gpu\n"
        "defaults: {repeats: 1, batch_size: 256, gpus_per_node: 8, data: imagenet}\ncases:\n"
        "  - {framework: torch, model: resnet50, impl: harness, precision: [amp, fp32], layout: nchw}\n"
        "  - {framework: torch, model: resnet50, impl: reference, precision: amp}\n"
        "  - {framework: torch, model: resnet50, impl: reference, precision: amp, batch_size: 128, data: synthetic}\n"
        "  - {framework: tensorflow, model: resnet50, impl: reference, precision: amp}\n"
        "  - {framework: paddle, model: resnet50, impl: harness, precision: fp32}\n"
        "  - {framework: paddle, model: resnet50, impl: reference, precision: fp32}\n")
    suite = load_suite(path)

    def group(framework, batch, precision, median):
        return NS(key=GroupKey(framework, "resnet50", batch, precision), cases=[NS(name="1n8g", median=median)])

    programs = [group("ngc-pytorch", 256, "amp", 5889.05), group("ngc-pytorch", 128, "amp", 3000.0),
                group("ngc-tensorflow", 256, "amp", 9405.36), group("paddleclas", 256, "fp32", 1400.0)]
    harness = [group("torch", 256, "amp", 5300.0), group("torch", 256, "fp32", 2000.0),
               group("paddle", 256, "fp32", 1500.0)]
    text = program_ratio_section(NS(groups=programs + harness), suite, ran_as)
    paddleclas = next(c for c in suite.cases if c.impl == "reference" and c.framework == "paddle")
    paired, refused = text.split(NOT_COMPARED)
    assert HEADING in paired
    assert [line for line in paired.splitlines() if line.startswith("| torch ")] == [
        "| torch resnet50, batch 256/GPU, 1n8g, amp, nchw, eager, imagenet data (harness loader: gpu) | "
        "torch/resnet50/bz256/1n8g/amp | 5300.00 | ngc-pytorch/resnet50/bz256/1n8g/amp | 5889.05 | 0.900 |"]
    rows = dict(line[2:].split(" ", 1) for line in refused.splitlines() if line.startswith("- "))
    assert {key: why.split(": ", 1)[1] for key, why in rows.items()} == {
        "ngc-pytorch/resnet50/bz128/1n8g/amp": (
            "no harness case of its setting has a figure (nhwc, eager: DLE PyTorch main.py runs eager (no --jit); "
            "DLE's synthetic AMP benchmark: --memory-format nhwc (configs.yml)); the nearest, "
            "torch/resnet50/bz256/1n8g/amp, differs in batch size 256 (program: 128), data imagenet (program: "
            "synthetic), layout nchw (program: nhwc)"),
        "ngc-tensorflow/resnet50/bz256/1n8g/amp": ran_as(next(c for c in suite.cases if c.framework == "tensorflow").ref_job()).why,
        "paddleclas/resnet50/bz256/1n8g/fp32": (  # no compiled Paddle case here: eager is other work
            f"no harness case of its setting has a figure (nchw, static: {ran_as(paddleclas.ref_job()).why}); the "
            "nearest, paddle/resnet50/bz256/1n8g/fp32, differs in mode eager (program: static)"),
    }
    assert rows["ngc-tensorflow/resnet50/bz256/1n8g/amp"].startswith("(9405.36): ") and "XLA" in refused
    assert not [line for line in text.splitlines() if line.startswith(("| ngc-", "| paddleclas"))]  # no key-led row
    # no harness figure at all: every program case is listed, no ratio table
    alone = program_ratio_section(NS(groups=programs), suite, ran_as)
    assert HEADING not in alone and alone.count("\n- ") == 4
    assert program_ratio_section(NS(groups=harness), suite, ran_as) == ""
