"""scripts/telemetry/gpu_sampler.py, the sampler beside every GPU run, against the GPU boundary replayed: the
STAND-IN pynvml (tests/standin/pynvml) and the STAND-IN nvidia-smi (tests/standin/nvidia-smi), which replay the
real samples recorded on an H200 (tests/fixtures/gpu-runs/h200-20261128/telemetry/). Everything else is real: the
run it wraps, its signals, its exit status."""

from __future__ import annotations

import json
import os
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


def test_where_only_the_driver_is_there_it_keeps_nvidia_smis_own_csv(tmp_path):
    out = tmp_path / "x.gpu-telemetry"
    done = sampler(out, "--", "sleep", "2", environ=env(smi=True))
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("# telemetry 1 source smi interval_ms 200 started ")  # the default
    recorded = [line for line in (RECORDED / "smi-100ms.csv").read_text().splitlines() if not line.startswith("#")]
    assert lines[1] == recorded[0]  # every field the sampler asks for, as this driver names them
    assert 3 <= len(lines) - 2 <= 25  # ~20 rows in 2 s; fewer where a loaded host starts nvidia-smi late
    assert lines[2].split(", ")[1:] == recorded[1].split(", ")[1:]  # the values replayed, stamped now


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
    environ = env(STANDIN_SMI_LOOP=str(old))
    environ["PATH"] = f"{counting.parent}{os.pathsep}{environ['PATH']}"
    done = sampler(out, "--", "sleep", "1.5", environ=environ)
    assert done.returncode == 0, done.stderr
    header = out.read_text().splitlines()[1]
    assert "power.draw.instant" not in header and header.endswith("clocks_throttle_reasons.active")
    assert "name" not in header.split(", ")  # the recording has no name
    # one probe for all, one more per field it lacks (name, power.draw.instant, the new reasons' name), then the loop
    probes = [c for c in calls.read_text().splitlines() if "--loop-ms" not in c]
    if worded != "otherwise":
        assert len(probes) == 4, probes
    else:  # the field it lacks not named: one probe for all, each of the 15 fields alone, the renamed one's old name
        assert len(probes) == 1 + 15 + 1, probes


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
    assert max(gaps) >= 0.9  # the hold
    assert min(gaps) >= 0.03, gaps  # 50 ms apart, give or take the host: none of the ~20 missed taken at once


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
