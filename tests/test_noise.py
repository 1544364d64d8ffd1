"""Noise (issue 31 E): a figure from a busy host says so, and a ratio the runs' spread cannot support is inconclusive.

The sampler is tested against real processes: CPU burners outside the run's process tree (other processes) and
inside it (the run's own work); the busy/own comparison is made within one test, so a noisy CI host moves both.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from kitlogs import harness_log

from kit.cli import main
from kit.core.rundir import RunRecord
from kit.results import noise, stats
from kit.results.exporters import to_markdown
from kit.results.extract import HARNESS_METHOD
from kit.results.report import build_report
from kit.run import hostload
from kit.run.hostload import HostLoad

FIXTURES = Path(__file__).parent / "fixtures"
# burns SECONDS of its own CPU time (not of the clock): what a burner burns does not depend on the host's load
BURN = "import time\nwhile time.process_time() < {seconds}: pass\n"
NOISY, TIGHT, TIGHT_LOW, TIGHT_NEAR = [41.2, 1.81, 2.19], [7.4, 7.5, 7.6], [2.0, 2.05, 2.1], [7.45, 7.55, 7.65]


def _burners(count: int, seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BURN.format(seconds=seconds)]) for _ in range(count)]


def _burner_count() -> int:
    return min(psutil.cpu_count() or 1, 16)


# ----- the sampler -----

def test_sampler_counts_other_processes_and_not_the_runs_own_tree():
    n, cores = _burner_count(), psutil.cpu_count()
    expected = n / cores  # the share n busy processes can take of the machine
    # busy: the "run" sleeps while n other processes burn
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with HostLoad(pid=sleeper.pid) as load:
            for b in _burners(n, 1.5):
                b.wait()
        busy = load.result()
    finally:
        sleeper.kill()
        sleeper.wait()
    # own: the run itself burns, with n - 1 children it waits for (their time reaches it when reaped)
    kid = f"subprocess.Popen([sys.executable, '-c', {BURN.format(seconds=1.5)!r}])"
    run_code = ("import subprocess, sys\nsys.stdin.readline()\n"  # starts once the window is open
                f"kids = [{kid} for _ in range({n - 1})]\n"
                + BURN.format(seconds=1.5) + "[k.wait() for k in kids]\nprint('done', flush=True)\n"
                "import time; time.sleep(60)\n")
    run = subprocess.Popen([sys.executable, "-c", run_code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        before = sum(psutil.Process(run.pid).cpu_times()[:4])
        with HostLoad(pid=run.pid) as load:
            run.stdin.write("go\n")
            run.stdin.flush()
            assert run.stdout.readline() == "done\n"
        own = load.result()
        # what the run's tree burnt in the window, itself and its reaped children, as the kernel counted it
        tree = sum(psutil.Process(run.pid).cpu_times()[:4]) - before
    finally:
        run.kill()
        run.wait()
    for record in (busy, own):
        assert record["cores"] == cores and record["samples"] >= 2 and record["seconds"] >= 1.4
        assert set(record) >= {"load_before", "load_during_max", "cpu_busy_share", "own_cpu_share",
                               "other_cpu_share", "other_cpu_seconds"}
    assert busy["other_cpu_share"] >= 0.6 * expected and busy["own_cpu_share"] < 0.05, busy
    # the run's own tree is counted as its own: what it burnt, whatever share a loaded host left it
    said = own["own_cpu_share"] * own["seconds"] * cores
    assert tree > 0.5 and said == pytest.approx(tree, rel=0.35, abs=0.2), (own, tree)
    # "other" is the machine's busy time less the run's own, so with own held to the tree it is held too; no bound
    # on it here: a host loaded by others (a test beside, load 6.5 on 2 cores) fills the run's window with theirs
    assert noise.is_busy(busy)


@pytest.mark.skipif((psutil.cpu_count() or 1) < 2 or not hasattr(psutil.Process, "cpu_affinity"),
                    reason="needs two CPUs and CPU affinity")
def test_a_run_pinned_to_some_cpus_counts_other_processes_on_those_cpus_only():
    def busy(cpu: int) -> float:  # busy seconds of one CPU so far, by psutil directly
        return sum(getattr(psutil.cpu_times(percpu=True)[cpu], f) for f in hostload.BUSY_FIELDS)

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        psutil.Process(sleeper.pid).cpu_affinity([0])
        for cpu in (1, 0):  # a burner beside the run's CPU, then on it
            t0, busy0, beside0 = time.monotonic(), busy(0), busy(1)
            with HostLoad(pid=sleeper.pid) as load:
                (burner,) = _burners(1, 1.5)
                psutil.Process(burner.pid).cpu_affinity([cpu])
                burner.wait()
            wall, busy0, beside0 = time.monotonic() - t0, busy(0) - busy0, busy(1) - beside0
            record = load.result()
            assert record["cores"] == 1 and record["cpus"] == [0]
            assert record["machine_cores"] == psutil.cpu_count(), record
            # the record follows CPU 0 alone, whatever else the machine runs
            assert record["cpu_busy_share"] == pytest.approx(min(busy0 / wall, 1.0), abs=0.1), (record, busy0, wall)
            if cpu == 1:
                assert beside0 / wall >= 0.6, "the burner did not run beside"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert record["other_cpu_share"] >= 0.6, record  # the burner on the run's own CPU
    line = noise.busy_warning(BUSY | {"cores": 1, "cpus": [0], "machine_cores": 2})
    assert line.startswith("host busy: load 3.8 on 2 cores during this run")  # the load is the machine's


def test_a_sampler_that_cannot_start_says_why_and_never_raises():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with HostLoad(pid=dead.pid) as load:
        pass
    assert set(load.result()) == {"error"} and "NoSuchProcess" in load.result()["error"]


def test_container_cgroup_cpu_files_v1_and_v2(tmp_path, monkeypatch):
    proc, cgroup = tmp_path / "proc", tmp_path / "cgroup"
    monkeypatch.setattr(hostload, "PROC_ROOT", proc)
    monkeypatch.setattr(hostload, "CGROUP_ROOT", cgroup)
    v1 = cgroup / "cpu,cpuacct/docker/0123456789abcdef"
    v1.mkdir(parents=True)
    (v1 / "cpuacct.usage").write_text("2500000000\n")
    service = cgroup / "cpu,cpuacct/system.slice/containerd.service"
    service.mkdir(parents=True)
    (service / "cpuacct.usage").write_text("99000000000\n")
    v2 = cgroup / "unified/system.slice/docker-fedcba9876543210.scope"
    v2.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 1250000\nuser_usec 1000000\n")
    for pid, text in ((1, "4:memory:/docker/0123456789abcdef\n3:cpu,cpuacct:/docker/0123456789abcdef\n0::/\n"),
                      (2, "0::/system.slice/docker-fedcba9876543210.scope\n"),
                      (3, "3:cpu,cpuacct:/user.slice\n0::/user.slice\n"),
                      (5, "3:cpu,cpuacct:/system.slice/containerd.service\n")):  # the runtime, not a container
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(text)
    assert hostload._container_cpu_file(1) == v1 / "cpuacct.usage"
    assert hostload._container_cpu_file(2) == v2 / "cpu.stat"
    assert [hostload._container_cpu_file(pid) for pid in (3, 4, 5)] == [None, None, None]
    assert hostload._read_cpu_file(v1 / "cpuacct.usage") == 2.5
    assert hostload._read_cpu_file(v2 / "cpu.stat") == 1.25


def test_containers_started_during_the_run_are_the_runs_and_older_ones_are_not(tmp_path, monkeypatch):
    old, new = tmp_path / "old/cpuacct.usage", tmp_path / "new/cpuacct.usage"
    for f, ns in ((old, 100e9), (new, 1.5e9)):  # 100 s since an older container began; the new one's 1.5 s
        f.parent.mkdir()
        f.write_text(f"{int(ns)}\n")
    cgroups = {}
    monkeypatch.setattr(hostload, "_container_cpu_file", cgroups.get)
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    cgroups[older.pid] = old
    try:
        with HostLoad(pid=sleeper.pid, containers=True, interval=3600) as load:  # sampled by hand below
            (burner,) = _burners(1, 1.5)  # stands for the container's process: not the run's child
            cgroups[burner.pid] = new
            load._sample()
            burner.wait()
    finally:
        for proc in (older, sleeper):
            proc.kill()
            proc.wait()
    record = load.result()
    capacity = record["seconds"] * record["cores"]
    assert record["containers"] == 1 and record["own_cpu_share"] == pytest.approx(1.5 / capacity, abs=0.02), record


def test_gpus_other_processes_held_come_from_check_envs_capture(tmp_path):
    from kit.hosts.capture import capture_from_probes

    raw = {"cpuinfo": (0, "processor\t: 0\nmodel name\t: AMD EPYC\n"), "meminfo": (0, "MemTotal: 1024 kB\n"),
           "os-release": (0, 'PRETTY_NAME="Debian GNU/Linux 12"\n'), "kernel": (0, "6.1.0\n"),
           "has-nvidia-smi": (0, ""), "nvidia-smi-q": (0, (FIXTURES / "nvidia-smi/tesla-t4.xml").read_text())}
    capture = capture_from_probes("h3", raw)
    (tmp_path / "env/h3").mkdir(parents=True)
    (tmp_path / "env/h3/capture.json").write_text(json.dumps(capture.to_dict()))
    busy = hostload.gpus_busy(tmp_path / "env")
    assert len(busy) == 2 and all(b.startswith("h3: ") for b in busy) and any("pid 5762" in b for b in busy)
    assert hostload.gpus_busy(tmp_path / "nothing") == [] and hostload.gpus_busy(None) == []
    with HostLoad(env_dir=tmp_path / "env") as load:
        pass
    record = load.result()
    assert record["gpus_busy"] == busy and noise.is_busy(record)
    assert "(GPUs held by other processes: h3: " in noise.busy_warning(record)


# ----- the warnings: console (one run) and report (run.json) -----

BUSY = {"cores": 2, "seconds": 20.0, "samples": 40, "load_before": 0.1, "load_during_max": 3.8,
        "cpu_busy_share": 1.0, "own_cpu_share": 0.38, "other_cpu_share": 0.62, "other_cpu_seconds": 24.8}
QUIET = BUSY | {"load_during_max": 2.1, "own_cpu_share": 0.97, "other_cpu_share": 0.02, "other_cpu_seconds": 0.8}


def _meta(*loads) -> RunRecord:
    runs = {}
    for i, load in enumerate(loads, 1):
        entry = {"case": "torch/arcface/bz16/1n1g/fp32", "repeat": i, "status": "ok"}
        runs[f"logs/torch/arcface/bz16/1n1g/arcface_b16_fp32_{i}.log"] = entry | ({"host_load": load} if load else {})
    return RunRecord(None, {"schema_version": 2, "runs": runs})


def test_busy_warning_for_one_run():
    assert noise.busy_warning(BUSY) == ("host busy: load 3.8 on 2 cores during this run (other processes used 62% "
                                        "of the CPU): figures may be low; re-run on a quiet host")
    assert noise.busy_warning(QUIET) is None and noise.busy_warning(None) is None
    assert noise.busy_warning({"error": "NoSuchProcess"}) is None
    assert noise.is_busy(QUIET | {"other_cpu_share": 0.11}) and not noise.is_busy(QUIET | {"other_cpu_share": 0.1})


def test_report_lines_from_run_json():
    lines = noise.host_load_lines(_meta(QUIET, BUSY, BUSY, None))
    assert lines == [
        "**host busy** in 2 of 3 runs: load 3.8 on 2 cores during runs torch/arcface/bz16/1n1g/fp32 #2, "
        "torch/arcface/bz16/1n1g/fp32 #3 (other processes used 62% of the CPU): figures may be low; re-run on a "
        "quiet host. (busy: other processes used more than 10% of the machine's CPU time during a run, or a GPU ran "
        "another process when check-env captured the host.)"]
    assert noise.host_load_lines(_meta(QUIET, QUIET)) == [
        "Host load during the runs: other processes used at most 2% of the CPU, load at most 2.1 on 2 cores; no "
        "run's host was busy (busy: other processes used more than 10% of the machine's CPU time during a run, or a "
        "GPU ran another process when check-env captured the host)."]
    many = noise.host_load_lines(_meta(*[BUSY] * 7))
    assert "#5 and 2 more (other processes" in many[0]
    assert noise.host_load_lines(_meta(QUIET, {"error": "x"}))[1] == (
        "The host's load could not be sampled in 1 of 2 runs (see run.json host_load).")
    assert noise.host_load_lines(_meta(None)) == [] and noise.host_load_lines(RunRecord(None, {})) == []


def test_the_progress_line_of_kit_bench_warns_of_a_busy_host_and_an_input_bound_figure(tmp_path):
    from rich.console import Console

    from kit.cli.bench import _bench_with_progress
    from kit.config.suites import load_suite
    (tmp_path / "arcface.yaml").write_text("schema_version: 1\nname: arcface-one\nhardware: cpu\ndefaults: "
                                          "{batch_size: 16, repeats: 1}\ncases:\n  - {framework: torch, model: arcface}\n")
    suite = load_suite(tmp_path / "arcface.yaml")
    log_rel = Path("logs/torch/arcface/bz16/1n1g/arcface_b16_fp32_1.log")
    run = SimpleNamespace(label="torch/arcface/bz16/1n1g/fp32 #1", log_rel=log_rel, case=suite.cases[0], repeat=1)
    outcome = SimpleNamespace(status="ok", value=2.19, unit="samples/s", seconds=20.0, reason="")

    def run_bench(run_dir, suite, progress, **_):
        progress("start", run, None, 0, 1)
        ran = {"loader": "cpu", "input_rate": 2.3}
        (run_dir / "run.json").write_text(json.dumps({"runs": {str(log_rel): {"host_load": BUSY, "ran": ran}}}))
        progress("end", run, outcome, 1, 1)
        return "result"

    out = io.StringIO()
    console = Console(file=out, width=300, color_system=None)
    assert _bench_with_progress(SimpleNamespace(run_bench=run_bench), tmp_path, suite, console, None) == "result"
    lines = out.getvalue().splitlines()
    at = next(i for i, line in enumerate(lines) if "ok     torch/arcface/bz16/1n1g/fp32 #1: 2.19 samples/s" in line)
    assert lines[at + 1] == ("  warning host busy: load 3.8 on 2 cores during this run (other processes used 62% of "
                             "the CPU): figures may be low; re-run on a quiet host")
    assert lines[at + 2] == ("  warning input-bound? 2.2 images/s is 95% of what its cpu loader delivers alone (2.3): "
                             "the figure may measure the input pipeline")


TINY = """\
schema_version: 1
name: tiny
description: one framework, tiny ResNet50
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10}
cases:
  - framework: torch
    model: resnet50
"""


def test_kit_bench_records_each_runs_host_load_and_warns_when_others_burn_the_cpu(tmp_path):
    (tmp_path / "tiny.yaml").write_text(TINY)
    runs = tmp_path / "runs"
    burners = _burners(_burner_count(), 120)  # other processes: the bench below is not their parent
    try:
        time.sleep(0.3)
        bench = subprocess.run([sys.executable, "-m", "kit", "bench", "--suite", str(tmp_path / "tiny.yaml"),
                                "--runs-dir", str(runs)], capture_output=True, text=True, timeout=300)
    finally:
        for b in burners:
            os.kill(b.pid, signal.SIGKILL)
            b.wait()
    assert bench.returncode == 0, bench.stderr
    (meta_file,) = runs.glob("*/run.json")
    (entry,) = json.loads(meta_file.read_text())["runs"].values()
    load = entry["host_load"]
    assert load["cores"] == psutil.cpu_count() and load["samples"] >= 1 and noise.is_busy(load), load
    assert "warning host busy: load " in bench.stderr and "re-run on a quiet host" in bench.stderr


# ----- the one noise rule for ratios -----

def test_the_ratio_rule_on_crafted_figures():
    noisy = stats.ratio_check(NOISY, TIGHT)  # paddle / torch of the issue: torch CV 150%
    assert noisy.verdict == "inconclusive" and noisy.conclusive is False and noisy.noisy
    assert noisy.ratio == pytest.approx(7.5 / 2.19) and noisy.cv_a == pytest.approx(1.502, abs=1e-3)
    assert noisy.why("torch", "paddle") == ("CV of torch 150% > 10%; 95% interval of the ratio [0.0935, inf] "
                                            "includes 1 (more repeats, on a quiet host)")
    far = stats.ratio_check(TIGHT_LOW, TIGHT)
    assert far.verdict == "conclusive" and far.why() == "" and 3.2 < far.low < far.ratio < far.high < 4.2
    near = stats.ratio_check(TIGHT, TIGHT_NEAR)  # tight, but 0.7% apart: the interval holds 1
    assert near.verdict == "inconclusive" and not near.noisy and near.low < 1 < near.high
    assert near.why() == (f"95% interval of the ratio [{near.low:.3g}, {near.high:.3g}] includes 1 "
                          "(more repeats, on a quiet host)")
    one = stats.ratio_check([7.5], TIGHT)
    assert one.verdict == "untested" and one.conclusive is None and one.why().startswith("one run on a side")
    with pytest.raises(stats.StatsError):
        stats.ratio_check([0.0, 1.0], TIGHT)


def _kitlog_tree(root: Path, cases: dict) -> Path:
    """Harness-format logs whose figures are exactly the given values: {(framework, model): values}."""
    for (fw, model), values in cases.items():
        folder = root / "logs" / fw / model / "bz16" / "1n1g"
        folder.mkdir(parents=True)
        for i, v in enumerate(values, 1):
            (folder / f"{model}_b16_fp32_{i}.log").write_text(harness_log(fw, model, [16 / v], 16))
    return root / "logs"


def test_the_side_by_side_table_marks_an_inconclusive_ratio(tmp_path):
    logs = _kitlog_tree(tmp_path, {("torch", "arcface"): NOISY, ("paddle", "arcface"): TIGHT,
                                   ("torch", "resnet50"): TIGHT_LOW, ("paddle", "resnet50"): TIGHT,
                                   ("torch", "vgg16"): [2.0], ("paddle", "vgg16"): TIGHT})
    lines = to_markdown(build_report(logs, HARNESS_METHOD)).splitlines()
    assert "| arcface | images/s | 16 | fp32 | 1n1g | 7.50 (1.3%) | 2.19 (150.2%) | 3.425 inconclusive |" in lines
    assert "| resnet50 | images/s | 16 | fp32 | 1n1g | 7.50 (1.3%) | 2.05 (2.4%) | 3.659 |" in lines
    assert "| vgg16 | images/s | 16 | fp32 | 1n1g | 7.50 (1.3%) | 2.00 (0.0%) | 3.750 (1 run) |" in lines
    assert ("A ratio is inconclusive when either side's runs have a CV above 10% or the 95% interval of the ratio "
            "includes 1 (the two cannot be told apart); do not quote it before a re-run with more repeats, on a "
            "quiet host:") in lines
    assert ("- arcface · batch 16 · fp32 · 1n1g: CV of torch 150% > 10%; 95% interval of the ratio [0.0935, inf] "
            "includes 1") in lines
    assert "- vgg16 · batch 16 · fp32 · 1n1g: one run on a side, its spread unknown" in lines
    assert not any(line.startswith("- resnet50") for line in lines)


def _results(cases: dict) -> dict:
    groups = {}
    for (fw, model), values in cases.items():
        g = groups.setdefault((fw, model), {"framework": fw, "model": model, "batch_per_device": 16,
                                            "precision": "fp32", "unit": "samples/s", "cases": []})
        g["cases"].append({"case": "1n1g", "nodes": 1, "gpus_per_node": 1,
                           "runs": [{"run": i + 1, "value": v} for i, v in enumerate(values)]})
    return {"schema_version": 1, "groups": list(groups.values()), "failures": []}


def test_kit_compare_marks_a_noisy_change_inconclusive(tmp_path, capsys):
    steady = [100, 101, 102, 103, 104, 105, 106]
    a = {("torch", "resnet50"): steady, ("torch", "vgg16"): steady, ("torch", "arcface"): TIGHT}
    b = {("torch", "resnet50"): [60, 61, 62, 63, 64, 65, 30],  # Mann-Whitney: slower (p=0.00058), but CV 21%
         ("torch", "vgg16"): [v * 0.6 for v in steady],  # slower, steadily
         ("torch", "arcface"): NOISY}  # the torch runs: asv's test already cannot tell, CV 150%
    for name, data in (("A", a), ("B", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(_results(data)))
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--fail-on-slower"]) == 1  # vgg16
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.startswith("| torch")}
    assert rows["torch · resnet50 · batch 16 · fp32 · 1n1g"].endswith(
        "| 0.602 | inconclusive | slower beyond factor 1.1, but CV of B 21% > 10% (more repeats, on a quiet host); "
        "Mann-Whitney p=0.00058 |")
    assert "| 0.600 | slower | Mann-Whitney p=0.00058 |" in rows["torch · vgg16 · batch 16 · fp32 · 1n1g"]
    assert rows["torch · arcface · batch 16 · fp32 · 1n1g"].endswith(
        "| no significant change | beyond factor 1.1, not significant: 99% CIs of the medians overlap; spread: "
        "CV of B 150% > 10% (more repeats, on a quiet host) |")
    assert ("Note: 1 case(s) inconclusive: beyond the factor and significant by asv's test, but the runs spread too "
            "much to say which is faster (see why). Re-run with more repeats, on a quiet host before quoting them."
            ) in out.splitlines()
    assert out.splitlines()[-1].startswith("Summary: 0 faster, 1 slower, 1 inconclusive, 1 unchanged")
    # an inconclusive slowdown alone does not fail --fail-on-slower
    del b[("torch", "vgg16")], a[("torch", "vgg16")]
    (tmp_path / "A/results.json").write_text(json.dumps(_results(a)))
    (tmp_path / "B/results.json").write_text(json.dumps(_results(b)))
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--fail-on-slower"]) == 0
