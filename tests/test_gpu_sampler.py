"""scripts/telemetry/gpu_sampler.py, the sampler beside every GPU run, against the GPU boundary replayed: the
STAND-IN pynvml (tests/standin/pynvml) and the STAND-IN nvidia-smi (tests/standin/nvidia-smi), which replay the
real samples recorded on an H200 (tests/fixtures/gpu-runs/h200-20261128/telemetry/). Everything else is real: the
run it wraps, its signals, its exit status."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLER = REPO / "scripts" / "telemetry" / "gpu_sampler.py"
STANDIN = REPO / "tests" / "standin"
RECORDED = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261128" / "telemetry"
# the JPEG engines' utilisation the same H200's `nvidia-smi -q -x` recorded: what both stand-ins answer for it, as
# neither loop recording has it (tests/standin/README.md)
SNAPSHOT_JPEG = re.search(r"<jpeg_util>(\d+) %</jpeg_util>", (RECORDED.parent / "nvidia-smi" / "q-x.xml").read_text())


def env(nvml: bool = False, smi: bool = False, **extra: str) -> dict:
    path = os.pathsep.join([*([str(STANDIN / "nvidia-smi")] if smi else []), "/usr/bin", "/bin"])
    out = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), **extra}
    if nvml:
        out["PYTHONPATH"] = str(STANDIN / "pynvml")
    return out


def sampler(out: Path, *args: str, environ: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SAMPLER), "--out", str(out), *args], env=environ,
                          capture_output=True, text=True, timeout=timeout)


def test_beside_a_run_with_nvml_it_samples_from_start_to_end_and_ends_as_the_run_did(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--interval-ms", "50", "--", "sh", "-c", "echo training; sleep 1; exit 3",
                   environ=env(nvml=True))
    assert done.returncode == 3 and done.stdout == "training\n"
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    header, samples = lines[0], lines[1:]
    assert header["source"] == "nvml" and header["interval_ms"] == 50 and header["driver"] == "580.159.04"
    assert header["gpus"] == [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658",
                               "max_sm_mhz": 1980, "max_mem_mhz": 3201, "limit_w": 700.0}]
    assert 12 <= len(samples) <= 30  # ~1 s at 50 ms
    recorded = json.loads((RECORDED / "nvml-100ms.jsonl").read_text().splitlines()[1])
    first = samples[0]
    assert {k: first[k] for k in ("gpu", "sm_mhz", "power_w", "limit_w", "temp_c", "reasons")} == {
        k: recorded[k] for k in ("gpu", "sm_mhz", "power_w", "limit_w", "temp_c", "reasons")}
    times = [s["t"] for s in samples]
    assert times == sorted(times) and 0.8 <= times[-1] - times[0] <= 1.5


def with_jpeg(line: str, value: str) -> str:
    """A recorded header row or row with utilization.jpeg's VALUE where the sampler asks for it: after
    utilization.memory, the 12th field."""
    cells = line.split(", ")
    return ", ".join([*cells[:12], value, *cells[12:]])


def test_where_only_the_driver_is_there_it_keeps_nvidia_smis_own_csv(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--", "sleep", "2", environ=env(smi=True))
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# telemetry 1 source smi interval_ms 200 started ")  # the default
    recorded = [line for line in (RECORDED / "smi-100ms.csv").read_text().splitlines() if not line.startswith("#")]
    assert recorded[0].split(", ")[11] == "utilization.memory [%]"
    # every field the sampler asks for, as this driver names them; utilization.jpeg too, which its help lists
    assert lines[1] == with_jpeg(recorded[0], "utilization.jpeg [%]")
    assert 3 <= len(lines) - 2 <= 25  # ~20 rows in 2 s; fewer where a loaded host starts nvidia-smi late
    assert lines[2].split(", ")[1:] == with_jpeg(recorded[1], SNAPSHOT_JPEG[1]).split(", ")[1:]  # replayed, now


@pytest.mark.parametrize("worded", ["as nvidia-smi words it", "otherwise"])
def test_fields_a_driver_lacks_are_left_out_and_old_names_used(tmp_path, worded):
    recorded = [line for line in (RECORDED / "smi-100ms.csv").read_text().splitlines() if not line.startswith("#")]
    cols = [h.strip() for h in recorded[0].split(",")]
    keep = [i for i, h in enumerate(cols) if not h.startswith("power.draw.instant")]
    old = tmp_path / "old-driver.csv"  # derived from the real recording: an older driver's names and fields
    old.write_text("\n".join(", ".join(line.split(", ")[i] for i in keep) for line in recorded[:50])
                   .replace("clocks_event_reasons.active", "clocks_throttle_reasons.active") + "\n")
    calls = tmp_path / "calls"
    counting = tmp_path / "bin" / "nvidia-smi"  # the stand-in, each call written down
    counting.parent.mkdir()
    smi = STANDIN / "nvidia-smi" / "nvidia-smi"
    counting.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {smi} "$@"\n' if worded != "otherwise" else
                        f'#!/bin/sh\necho "$*" >> {calls}\ncase "$*" in *--loop-ms*) exec {smi} "$@" ;; esac\n'
                        f'out=$({smi} "$@"); rc=$?\n'  # a probe's refusal of a field, reworded
                        f'echo "$out" | sed \'s/^Field "\\(.*\\)" is not a valid field to query./"\\1": not a valid '
                        f'field/\'; exit $rc\n')
    counting.chmod(0o755)
    out = tmp_path / "x.gpu-telemetry"
    environ = env(STANDIN_SMI_LOOP=str(old), STANDIN_SMI_HELP=str(old_help(tmp_path)))
    environ["PATH"] = f"{counting.parent}{os.pathsep}{environ['PATH']}"
    done = sampler(out, "--", "sleep", "1.5", environ=environ)
    assert done.returncode == 0, done.stderr
    header = out.read_text().splitlines()[1]
    assert "power.draw.instant" not in header and header.endswith("clocks_throttle_reasons.active")
    assert "name" not in header.split(", ")  # the recording has no name
    assert "utilization.jpeg" not in header  # its help lists none: left out, no error
    # one probe for all, one more per field it lacks (name, power.draw.instant, utilization.jpeg, the new reasons'
    # name), then the loop
    probes = [c for c in calls.read_text().splitlines() if "--loop-ms" not in c]
    if worded != "otherwise":
        assert len(probes) == 5, probes
    else:  # the field it lacks not named: one probe for all, each of the 16 fields alone, the renamed one's old name
        assert len(probes) == 1 + 16 + 1, probes
    from kit.telemetry import read

    samples = read(out).samples
    assert samples and all(s.util_jpeg is None for s in samples) and all(s.reasons == 1 for s in samples)


def test_the_smi_source_records_the_jpeg_engines_utilisation_as_util_jpeg(tmp_path):
    """DERIVED: the real recording from its first busy row on (the harness training), so that utilization.gpu
    varies beside utilization.jpeg and the two cannot be mistaken for one another."""
    from kit.telemetry import read

    recorded = [line for line in (RECORDED / "smi-100ms.csv").read_text().splitlines() if not line.startswith("#")]
    busy = next(i for i, row in enumerate(recorded[1:], 1) if int(row.split(", ")[10]) >= 90)
    assert recorded[0].split(", ")[10] == "utilization.gpu [%]"
    loop = tmp_path / "busy.csv"
    loop.write_text("\n".join([recorded[0], *recorded[busy:busy + 60]]) + "\n")
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--source", "smi", "--interval-ms", "50", "--", "sleep", "1.5",
                   environ=env(smi=True, STANDIN_SMI_LOOP=str(loop)))
    assert done.returncode == 0, done.stderr
    samples = read(out).samples
    assert len(samples) >= 3
    assert [s.util_jpeg for s in samples] == [float(SNAPSHOT_JPEG[1])] * len(samples)
    replayed = [float(row.split(", ")[10]) for row in recorded[busy:busy + len(samples)]]
    assert [s.util_gpu for s in samples] == replayed and replayed[0] >= 90


def old_help(tmp_path: Path) -> Path:
    """DERIVED from the driver's real --help-query-gpu: its utilization.jpeg entry (the name, two lines, a blank line)
    removed, as the help of a driver that has no such field."""
    lines = (RECORDED / "help-query-gpu.txt").read_text().splitlines(keepends=True)
    at = lines.index('"utilization.jpeg"\n')
    assert lines[at + 3] == "\n"
    path = tmp_path / "old-help.txt"
    path.write_text("".join(lines[:at] + lines[at + 4:]))
    assert "utilization.jpeg" not in path.read_text()
    return path


def test_a_driver_without_utilization_jpeg_is_sampled_as_before_without_it(tmp_path):
    from kit.telemetry import read

    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--source", "smi", "--", "sleep", "1", environ=env(smi=True, STANDIN_SMI_HELP=str(old_help(
        tmp_path))))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    recorded = [line for line in (RECORDED / "smi-100ms.csv").read_text().splitlines() if not line.startswith("#")]
    lines = out.read_text().splitlines()
    assert lines[1] == recorded[0]  # the fields the recording holds, no utilization.jpeg, no error
    samples = read(out).samples
    assert samples and all(s.util_jpeg is None for s in samples)


@pytest.mark.parametrize("supported", [True, False])
def test_the_nvml_source_records_the_jpeg_engines_utilisation_where_nvml_has_it(tmp_path, supported):
    """nvmlDeviceGetJpgUtilization's [percent, sampling period] as util_jpeg; NVMLError_NotSupported (a GPU without
    the engine, MIG): null, as any field NVML refuses, and the sampling goes on."""
    from kit.telemetry import read

    out = tmp_path / "x.gpu-telemetry"
    refused = {} if supported else {"STANDIN_NVML_NOT_SUPPORTED": "nvmlDeviceGetJpgUtilization"}
    done = sampler(out, "--source", "nvml", "--interval-ms", "50", "--seconds", "0.6",
                   environ=env(nvml=True, **refused))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    header, *samples = (json.loads(line) for line in out.read_text().splitlines())
    assert header["source"] == "nvml" and len(samples) >= 5
    want = int(SNAPSHOT_JPEG[1]) if supported else None
    assert [s["util_jpeg"] for s in samples] == [want] * len(samples)
    assert [s.util_jpeg for s in read(out).samples] == [None if want is None else float(want)] * len(samples)


def test_without_any_source_the_run_still_runs_and_the_file_says_why(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--", "sh", "-c", "exit 0", environ=env())
    assert done.returncode == 0 and "no GPU telemetry here" in done.stderr
    said = json.loads(out.read_text())
    assert said["source"] is None and any(w.startswith("nvml: ModuleNotFoundError") for w in said["why"])
    assert any(w.startswith("smi: FileNotFoundError") for w in said["why"])


def test_a_stop_signal_reaches_the_run_and_the_sampler_ends_by_it(tmp_path):
    out, mark = tmp_path / "x.gpu-telemetry", tmp_path / "got-term"
    run = f"trap 'touch {mark}; exit 143' TERM; sleep 30 & wait"
    proc = subprocess.Popen([sys.executable, str(SAMPLER), "--out", str(out), "--", "sh", "-c", run],
                            env=env(nvml=True))
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143  # the run's own exit status, passed through
    assert mark.exists()
    assert len(out.read_text().splitlines()) >= 5


def test_bad_arguments_are_refused(tmp_path):
    done = sampler(tmp_path / "x", "--interval-ms", "5", environ=env())
    assert done.returncode == 2 and "--interval-ms: 10 to 60000" in done.stderr
    done = sampler(tmp_path / "x", "--", environ=env())
    assert done.returncode == 2 and "nothing to run after --" in done.stderr


def test_a_run_ended_by_a_signal_ends_the_sampler_by_the_same_signal(tmp_path):
    done = sampler(tmp_path / "x.gpu-telemetry", "--", "sh", "-c", "kill -TERM $$", environ=env(nvml=True))
    assert done.returncode == -signal.SIGTERM


def test_a_slurm_gpu_step_samples_each_node_into_its_own_folder(tmp_path):
    """The Slurm path builds its step script with the same command builder: on a GPU run each node's line starts
    the sampler (the node's Python, the scripts staged into the shared directory) writing beside its stdout.log.
    (The test cluster's nodes have no GPUs to allocate: the script is checked, not run.)"""
    from kit.config.inventory import SlurmConfig
    from kit.config.suites import load_suite
    from kit.run.plan import plan_for_nodes
    from kit.run.slurm import SlurmRunner

    suite = tmp_path / "s.yaml"
    suite.write_text("schema_version: 1\nname: s\nhardware: gpu\ncases:\n"
                     "  - {framework: torch, model: resnet50, batch_size: 64, nodes: 2, gpus_per_node: 2}\n")
    runs = plan_for_nodes(load_suite(suite), 2)
    cfg = SlurmConfig(partition="p", shared_dir=str(tmp_path / "shared"), gpus_per_node=2, container="native")
    runner = SlurmRunner(cfg, tmp_path / "runs" / "r1", "gpu")
    runner.nodes = [runner._node(n, f"10.0.0.{i}") for i, n in enumerate(("n1", "n2"), 1)]
    script = runner.step_script(runs[0], 29500)
    for node in ("n1", "n2"):
        line = runner._lines[node]
        workdir = runner.workdir(runner.nodes[0 if node == "n1" else 1], runs[0])
        sampler = f"{tmp_path}/shared/kit-scripts/telemetry/gpu_sampler.py"
        assert f"{sampler} --out {workdir}/resnet50_b64_fp32_1.gpu-telemetry" in line, line
        assert "--gpus 0,1 -- python3 -m torch.distributed.run" in line, line
    assert script.count("gpu_sampler.py") == 2
    runner.stage(runs)
    assert (tmp_path / "shared" / "kit-scripts" / "telemetry" / "gpu_sampler.py").read_bytes() == SAMPLER.read_bytes()


def test_a_run_shorter_than_nvidia_smis_start_still_gets_a_row(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--", "true", environ=env(smi=True))
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) >= 3  # our header, nvidia-smi's, one row


UUID = "GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658"  # the recorded H200's


def test_the_runs_gpus_count_among_cuda_visible_devices_as_cuda_counts_them():
    sys.path.insert(0, str(SAMPLER.parent))
    try:
        from gpu_sampler import visible_gpus
    finally:
        sys.path.remove(str(SAMPLER.parent))
    assert visible_gpus([0, 1], {}) == [0, 1] and visible_gpus([], {}) == []
    assert visible_gpus([0, 1], {"CUDA_VISIBLE_DEVICES": "2,3"}) == [2, 3]  # a Slurm task's allocated pair
    assert visible_gpus([1], {"CUDA_VISIBLE_DEVICES": "6, 4"}) == [4]
    assert visible_gpus([], {"CUDA_VISIBLE_DEVICES": f"{UUID},1"}) == [UUID, 1]
    assert visible_gpus([], {"CUDA_VISIBLE_DEVICES": "3,nonsense,1"}) == [3]  # CUDA stops at its first bad entry
    for listed, gpus, why in (("", [], "the run sees no GPU"), ("-1", [0], "the run sees no GPU"),
                              ("2", [0, 1], "no GPU 1 among CUDA_VISIBLE_DEVICES='2'")):
        try:
            visible_gpus(gpus, {"CUDA_VISIBLE_DEVICES": listed})
        except ValueError as exc:
            assert why in str(exc)
        else:
            raise AssertionError(f"{listed!r} {gpus} accepted")


def test_a_run_given_its_gpu_by_uuid_is_sampled_on_that_gpu_by_either_source(tmp_path):
    for source, environ in (("nvml", env(nvml=True, CUDA_VISIBLE_DEVICES=UUID)),
                            ("smi", env(smi=True, CUDA_VISIBLE_DEVICES=UUID))):
        out = tmp_path / f"{source}.gpu-telemetry"
        done = sampler(out, "--source", source, "--gpus", "0", "--", "sleep", "1", environ=environ)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        text = out.read_text()
        if source == "nvml":
            header, *samples = (json.loads(line) for line in text.splitlines())
            assert [g["uuid"] for g in header["gpus"]] == [UUID] and {s["gpu"] for s in samples} == {0}
        else:
            assert len(text.splitlines()) >= 3 and all(UUID in row for row in text.splitlines()[2:])


def test_a_gpu_the_host_has_not_is_said_and_the_run_still_runs(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--", "sh", "-c", "exit 4", environ=env(nvml=True, smi=True, CUDA_VISIBLE_DEVICES="1"))
    assert done.returncode == 4
    (said,) = (json.loads(line) for line in out.read_text().splitlines())
    assert said["source"] is None
    assert said["why"] == ["nvml: ValueError: no GPU 1 here (NVML sees 1)",
                           "smi: RuntimeError: " + said["why"][1].split(": ", 2)[2]]
    assert "exit 6: No devices were found" in said["why"][1]


def test_a_sampler_held_up_resumes_at_its_interval_without_a_burst(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    proc = subprocess.Popen([sys.executable, str(SAMPLER), "--out", str(out), "--interval-ms", "50"],
                            env=env(nvml=True))
    try:
        deadline = time.monotonic() + 30
        while len(out.read_text().splitlines() if out.exists() else []) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)  # held up, as on a loaded host
        time.sleep(1.0)
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    times = [json.loads(line)["t"] for line in out.read_text().splitlines()[1:]]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    hold = gaps.index(max(gaps))
    assert gaps[hold] >= 0.9, gaps  # the hold
    after = times[hold + 1:]  # on its 50 ms grid from the first sample after the hold: a late one does not add one;
    assert len(after) <= (after[-1] - after[0]) / 0.05 + 2, gaps  # the ~20 missed taken at once would


def test_a_stop_of_the_whole_process_group_keeps_the_samples_taken(tmp_path):
    """kit's stop sends TERM to the run's process group, nvidia-smi's loop included: what it sampled stays."""
    out = tmp_path / "x.gpu-telemetry"
    proc = subprocess.Popen([sys.executable, str(SAMPLER), "--out", str(out), "--source", "smi", "--", "sleep", "60"],
                            env=env(smi=True), start_new_session=True)
    deadline = time.monotonic() + 30
    while len(out.read_text().splitlines() if out.exists() else []) < 5:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# telemetry 1 source smi ") and len(lines) >= 5, lines[:3]


def test_an_nvidia_ml_py_without_the_jpeg_call_samples_the_rest(monkeypatch):
    """An older nvidia-ml-py has no nvmlDeviceGetJpgUtilization: util_jpeg null, every other field as before. (The
    stand-in pynvml, in this process, less that one function.)"""
    import importlib.util
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(SAMPLER.parent))
    from gpu_sampler import nvml_sample

    spec = importlib.util.spec_from_file_location("standin_pynvml", STANDIN / "pynvml" / "pynvml.py")
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    standin.nvmlInit()
    moment = standin._now()
    monkeypatch.setattr(standin, "_now", lambda: dict(moment))  # both samples of the same recorded moment
    older = SimpleNamespace(**{k: getattr(standin, k) for k in dir(standin) if k != "nvmlDeviceGetJpgUtilization"})
    handle = standin.nvmlDeviceGetHandleByIndex(0)
    with_call, without = nvml_sample(standin, 0, handle), nvml_sample(older, 0, handle)
    assert with_call["util_jpeg"] == int(SNAPSHOT_JPEG[1]) and without["util_jpeg"] is None
    assert {k: v for k, v in without.items() if k not in ("t", "util_jpeg")} == {
        k: v for k, v in with_call.items() if k not in ("t", "util_jpeg")}
