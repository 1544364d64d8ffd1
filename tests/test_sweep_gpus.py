"""`kit sweep` per GPU: a GPU suite's 1-GPU cases once per GPU of a multi-GPU host, each copy pinned to its GPU, and
the fleet table's rows per GPU ('h1/gpu3') with each GPU's own evidence.

The fleet is built from the real H200 recording (tests/fixtures/gpu-runs/h200-20261204/proof: one H200's suite run
directory, its logs, its NVML samples and its check-env capture), the GPU being the one boundary that may be replayed:
eight GPUs on two hosts, each GPU's run directory the recorded one with its measured steps paced by a factor within
1% (GPUs are not identical) and its samples named as that GPU; one GPU's samples rewritten as throttled (every busy
sample at 1410 MHz with NVML's HW-slowdown reason) and its steps 1/0.89 as long. Every figure and every telemetry summary
in the GPUs' run.json is computed from those logs and samples by the kit's own code (kit.run.records), and the fleet
table is read from the sweep's directory (kit.results.fleet.fleet_of) as `kit sweep` and `kit report` read it.

The pinning: its planning (kit.run.sweep.gpu_slices) and its commands (the SSH runner's remote lines, the container
runtime's flags) as the pure functions they are; and a real `kit sweep` over an SSH test host whose replayed
nvidia-smi lists two GPUs, DLE PyTorch's program a stand-in (no GPU here to train on): two copies at once, each in
its own run directory, the program's own environment pinned to its GPU. What no test here shows: CUDA itself
honouring the pin on a host of several GPUs (the device machines lent so far hold one).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path

import pytest
from nethosts import write_inventory
from test_gpu_visit_h200_20261204 import unpacked
from test_reference_native import model_code
from test_reference_runs import H200_SMI, STANDIN

from kit.cli import main
from kit.config.cases import Suite
from kit.config.inventory import HostConfig
from kit.config.suites import load_suite
from kit.core import rundir
from kit.core.catalogue import quantity_unit
from kit.core.layout import classify
from kit.results.fleet import fleet_of
from kit.run import records
from kit.run.command import command_for
from kit.run.plan import PlannedRun
from kit.run.ssh import SshRunner, ssh_site
from kit.run.sweep import gpu_slices, per_gpu
from kit.telemetry import REASONS

HOSTS, GPUS = ("h1", "h2"), 4
THROTTLED, SLOW, LOW_MHZ = ("h1", 3), 0.89, 1410
PACE = {("h1", 0): 1.0, ("h1", 1): 0.996, ("h1", 2): 1.004, ("h2", 0): 0.998, ("h2", 1): 1.002, ("h2", 2): 1.006,
        ("h2", 3): 0.994, THROTTLED: 1 / SLOW}  # each GPU's step time against the recorded one


def uuid_of(host: str, gpu: int) -> str:
    return f"GPU-1d2cf4ec-a51b-cfe7-8569-0a27bb89{HOSTS.index(host)}{gpu:03d}"


def paced_log(log: Path, pace: float) -> None:
    """Every measured step PACE times as long (its rate 1/PACE), and run_stop's sums of them, as the harness would
    have logged them."""
    lines, steps = [], []
    for line in log.read_text().splitlines(keepends=True):
        event = json.loads(line.split(" ", 1)[1]) if line.startswith(":::KITLOG ") else {}
        if event.get("event") == "step":
            event["seconds"] = round(event["seconds"] * pace, 6)
            event["samples_per_sec"] = round(event["global_batch"] / event["seconds"], 3)
            steps.append(event)
        elif event.get("event") == "run_stop":
            event["seconds"] = round(sum(s["seconds"] for s in steps), 6)
            rate = round(sum(s["global_batch"] for s in steps) / event["seconds"], 3)
            event["samples_per_sec"] = event["throughput"] = rate
        lines.append(":::KITLOG " + json.dumps(event) + "\n" if event else line)
    log.write_text("".join(lines))


def gpus_samples(path: Path, gpu: int, uuid: str, throttled: bool) -> None:
    """The samples as GPU `gpu`'s (header and every sample); throttled: every busy one at LOW_MHZ, HW slowdown set."""
    header, *samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    header["gpus"] = [{**g, "index": gpu, "uuid": uuid} for g in header["gpus"]]
    for sample in samples:
        sample["gpu"] = gpu
        if throttled and sample["util_gpu"]:
            sample["sm_mhz"], sample["reasons"] = LOW_MHZ, (sample["reasons"] or 0) | REASONS["hw_slowdown"]
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, *samples)))


def gpu_run(recorded: Path, into: Path, host: str, gpu: int) -> None:
    """One GPU's run directory: the recorded one, paced and renamed (module doc); run.json's figures and telemetry
    recomputed from its logs and samples by the kit (records.measure_of, records.run_gpu_telemetry)."""
    shutil.copytree(recorded, into)
    for log in (into / "logs").rglob("*.log"):
        paced_log(log, PACE[(host, gpu)])
    for samples in (into / "logs").rglob("*.gpu-telemetry"):
        gpus_samples(samples, gpu, uuid_of(host, gpu), (host, gpu) == THROTTLED)
    meta = rundir.read_run_meta(into)
    for log_rel, entry in meta["runs"].items():
        figure = records.measure_of(into / log_rel, into / "logs")
        model = classify(into / log_rel, into / "logs").group.model
        entry |= {"figure": figure.value, "unit": quantity_unit(model, figure.unit)}  # as kit.run.runner.judge
        entry.update(records.run_gpu_telemetry(into, log_rel))
    rundir.save_run_meta(into, meta)


def host_capture(recorded: Path, host: str) -> dict:
    """The recorded H200's capture as a host of GPUS such GPUs (each its index, UUID and PCI bus id)."""
    capture = json.loads((recorded / "env" / "vm" / "capture.json").read_text())
    (gpu,) = capture["smi"]["gpus"]
    capture["host"] = host
    capture["smi"]["gpus"] = [{**copy.deepcopy(gpu), "index": i, "uuid": uuid_of(host, i),
                               "pci_bus_id": f"00000000:{0x18 + i:02X}:00.0"} for i in range(GPUS)]
    return capture


@pytest.fixture(scope="module")
def gpu_sweep(tmp_path_factory) -> Path:
    """A sweep's directory of eight GPUs on two hosts from the recorded H200 (module doc)."""
    tmp = tmp_path_factory.mktemp("gpu-sweep")
    recorded = unpacked("proof", tmp) / "2-suite" / "run"
    sweep = tmp / "sweep"
    sweep.mkdir()
    shutil.copyfile(recorded / "suite.yaml", sweep / "suite.yaml")
    rows = {}
    for host in HOSTS:
        (sweep / "env" / host).mkdir(parents=True)
        (sweep / "env" / host / "capture.json").write_text(json.dumps(host_capture(recorded, host), indent=2))
        for gpu in range(GPUS):
            gpu_run(recorded, rundir.sweep_slice_dir(sweep, host, gpu), host, gpu)
            rows[rundir.slice_name(host, gpu)] = {"status": "ok", "reason": "", "seconds": 60.0}
    rundir.save_sweep(sweep, {"suite": load_suite(sweep / "suite.yaml").name, "hosts": list(HOSTS),
                              "started": "2026-12-05T04:00:00+00:00", "finished": "2026-12-05T04:05:00+00:00",
                              "rows": rows})
    return sweep


def test_the_throttled_gpu_is_named_with_its_clock_and_slowdown_and_the_others_are_within_noise(gpu_sweep):
    fleet = fleet_of(gpu_sweep)
    worst, *others = fleet["hosts"]
    assert (worst["host"], worst["gpu"], worst["status"], worst["differs"]) == ("h1/gpu3", 3, "ok", True)
    assert all(round(c["ratio"], 2) == 0.89 and c["noise"] == "differs" for c in worst["cases"].values()), worst
    evidence = {e["what"]: (e["host"], e["peers"]) for e in worst["evidence"]}
    # the recording's own power capping (up to half of a VGG16 window) is every GPU's: no evidence
    assert evidence["GPU throttled during the runs"] == (
        "hw_slowdown 100% of the window, sw_power_cap 50% of the window", ["sw_power_cap 50% of the window"])
    assert evidence["GPU SM clock during the runs (MHz, median)"] == (str(LOW_MHZ), ["1980"])
    assert [e["what"] for e in worst["evidence"]][:2] == ["GPU throttled during the runs",
                                                          "GPU SM clock during the runs (MHz, median)"]
    assert sorted(r["host"] for r in others) == [f"{h}/gpu{g}" for h in HOSTS for g in range(GPUS)
                                                 if (h, g) != THROTTLED]
    assert all(r["status"] == "ok" and not r["differs"] and r["evidence"] == [] for r in others), others
    assert all(c["noise"] in ("within noise", "the fleet's median") for r in others for c in r["cases"].values())
    verdict = fleet["verdict"]
    assert verdict.startswith("7 of 8 GPUs within noise of the fleet's median (\u00b1"), verdict
    assert verdict.endswith(
        "; h1/gpu3 \u221211%: GPU throttled during the runs hw_slowdown 100% of the window, sw_power_cap 50% of the "
        "window against sw_power_cap 50% of the window on its peers, GPU SM clock during the runs (MHz, median) 1410 "
        "against 1980 on its peers"), verdict


def test_a_sweeps_report_names_each_gpu_and_its_own_run_directory(gpu_sweep, capsys):
    assert main(["report", str(gpu_sweep)]) == 0  # kit report of a sweep: the fleet table, rewritten
    out = capsys.readouterr().out.splitlines()
    fleet = rundir.read_results(gpu_sweep)["fleet"]
    assert out[0] == fleet["verdict"] and out[1].split()[0] == "h1/gpu3"
    report = (gpu_sweep / "report.md").read_text()
    assert f"**{fleet['verdict']}**" in report and "Evidence for h1/gpu3 (what differs from its peers):" in report
    assert "| h1/gpu3 | torch/resnet50/bz256/1n1g/tf32 | 1936.48 images/s | 3 | 0.891 (\u221211%) | differs | ok |" \
        in report
    assert list(rundir.sweep_parts(gpu_sweep)) == [f"{h}/gpu{g}" for h in HOSTS for g in range(GPUS)]
    assert rundir.sweep_slices(gpu_sweep, "h2") == {g: gpu_sweep / "hosts" / "h2" / f"gpu{g}" for g in range(GPUS)}
    # each GPU's run directory is one as any run leaves: kit report reads it unchanged
    assert main(["report", str(rundir.sweep_slice_dir(gpu_sweep, "h1", 3))]) == 0


# ---- planning and pinning, as pure functions (a real pinned run needs a GPU) -----------------------------------

def gpu_suite(tmp_path: Path, cases: str, hardware: str = "gpu") -> Suite:
    path = tmp_path / "s.yaml"
    path.write_text(f"schema_version: 1\nname: s\nhardware: {hardware}\ndefaults: {{repeats: 1}}\ncases:\n{cases}")
    return load_suite(path)


ONE_GPU = "  - {framework: torch, model: resnet50, batch_size: 256, nodes: 1, gpus_per_node: 1}\n"
EIGHT_GPUS = "  - {framework: torch, model: resnet50, batch_size: 256, nodes: 1, gpus_per_node: 8}\n"


def test_one_copy_per_gpu_only_for_one_gpu_cases_of_a_gpu_suite_on_a_host_of_several(tmp_path):
    eight = {"smi": {"gpus": [{"product_name": "H200"}] * 8}}
    assert gpu_slices(gpu_suite(tmp_path, ONE_GPU + EIGHT_GPUS), eight) == list(range(8))
    assert gpu_slices(gpu_suite(tmp_path, ONE_GPU), {"smi": {"gpus": [{"product_name": "H200"}]}}) == []
    assert gpu_slices(gpu_suite(tmp_path, EIGHT_GPUS), eight) == []  # no 1-GPU case: the host as one
    assert gpu_slices(gpu_suite(tmp_path, ONE_GPU, "cpu"), eight) == []  # CPU suites: as before
    assert gpu_slices(gpu_suite(tmp_path, ONE_GPU), {"smi": None}) == gpu_slices(gpu_suite(tmp_path, ONE_GPU),
                                                                                   None) == []
    assert [per_gpu(c) for c in gpu_suite(tmp_path, ONE_GPU + EIGHT_GPUS).cases] == [True, False]


def test_each_gpus_copy_starts_pinned_to_its_gpu_in_a_folder_of_its_own(tmp_path):
    sweep = tmp_path / "sweep-1"
    sweep.mkdir()
    rundir.save_sweep(sweep, {"suite": "s", "hosts": ["h1"], "rows": {}})
    case = gpu_suite(tmp_path, ONE_GPU).cases[0]
    native = HostConfig(name="h1", address="10.0.0.1", user="u", work_dir="/w", gpus=8, runtime="native")
    lines = {}
    for gpu in range(8):
        part = rundir.sweep_slice_dir(sweep, "h1", gpu)
        assert rundir.remote_run_id(part) == f"sweep-1-gpu{gpu}"
        ((_host, workdir, line),) = SshRunner(None, [native], part, "gpu", gpus=(gpu,)).commands(PlannedRun(case, 1),
                                                                                                   31000)
        assert workdir == f"/w/runs/sweep-1-gpu{gpu}/h1/torch/resnet50/bz256/1n1g/fp32/1"
        lines[gpu] = line
        # the sampler counts among the pinned GPUs: --gpus 0 is GPU `gpu` (NVML's index, nvidia-smi's order)
        assert f"CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES={gpu} " in line and " --gpus 0 -- " in line
    assert len({line.split("CUDA_VISIBLE_DEVICES=")[1].split()[0] for line in lines.values()}) == 8
    whole = SshRunner(None, [native], rundir.sweep_host_dir(sweep, "h1"), "gpu").commands(PlannedRun(case, 1), 1)
    assert "CUDA_VISIBLE_DEVICES" not in whole[0][2] and rundir.remote_run_id(rundir.sweep_host_dir(sweep, "h1")) \
        == "sweep-1"  # the host as one: unpinned, as before
    boxed = HostConfig(name="h1", address="10.0.0.1", user="u", work_dir="/w", gpus=8, runtime="docker")
    site = ssh_site(boxed, "/w/runs/sweep-1-gpu5/h1/x", "x.log", "kit/pytorch:x", gpus=(5,))
    launched = command_for(case, 1, 0, [site], 31000, "gpu", "sweep-1-gpu5").launched
    # the container gets GPU 5 alone (CUDA counts it 0 inside); the pin stays outside, where the sampler runs
    assert launched.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "5"}
    inside = launched.argv[launched.argv.index("--"):]
    assert inside[inside.index("--gpus") + 1] == '"device=5"' and not [a for a in inside if "CUDA_VISIBLE" in a]
    assert launched.argv[launched.argv.index("--out") - 1].endswith("gpu_sampler.py")
    assert launched.argv[launched.argv.index("--gpus") + 1] == "0"  # the sampler's: the pinned GPU's first
    with pytest.raises(ValueError, match="pinned to 2: \\[0, 1\\]"):
        SshRunner(None, [native], part, "gpu", gpus=(0, 1)).commands(PlannedRun(case, 1), 31000)



# ---- a real sweep over an SSH test host whose replayed nvidia-smi lists two GPUs -------------------------------

DLE_SUITE = """\
schema_version: 1
name: dle-gpus
hardware: gpu
defaults: {repeats: 1, timeout_s: 240}
cases:
  - {framework: torch, impl: reference, model: resnet50, batch_size: 256, precision: amp, nodes: 1, gpus_per_node: 1}
"""


def two_gpus(into: Path) -> Path:
    """The H200's recorded `nvidia-smi` outputs with its -q -x made a host of two (DERIVED: its one <gpu> block
    twice, the second at the next PCI bus id with its own UUID and minor number); topo -m and -q as recorded."""
    into.mkdir()
    for name in ("topo-m.txt", "q.txt"):
        shutil.copy(H200_SMI / name, into / name)
    xml = (H200_SMI / "q-x.xml").read_text()
    start, end = xml.index("\t<gpu id="), xml.index("\t</gpu>") + len("\t</gpu>\n")
    second = (xml[start:end].replace("00000000:00:06.0", "00000000:00:07.0")
              .replace("GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658", "GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8659")
              .replace("<minor_number>0</minor_number>", "<minor_number>1</minor_number>"))
    two = xml[:end] + second + xml[end:]
    (into / "q-x.xml").write_text(two.replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>2</attached_gpus>"))
    return into


def test_a_real_sweep_runs_one_copy_pinned_to_each_gpu_of_the_host(ssh_hosts, tmp_path, published, capsys):
    """`kit sweep` over SSH test host h1, its GPU boundary replayed (the STAND-IN nvidia-smi printing two_gpus'
    outputs) and DLE PyTorch's program a STAND-IN (tests/standin/dle_pytorch, a one-GPU AMP log replayed): h1's one
    1-GPU case runs once per GPU, each copy in its own run directory and folder on the host, and the program itself
    ran under its GPU's CUDA_VISIBLE_DEVICES (the kit's launcher records the environment the program got)."""
    host = ssh_hosts.host("h1")
    smi_dir = two_gpus(tmp_path / "smi")
    root = model_code(tmp_path, published)  # DLE's ConvNets folder (the stand-in, a one-GPU AMP log) and dllogger
    (tmp_path / "data" / "folder" / "train").mkdir(parents=True)
    stubs = {"python": f"#!/bin/sh\nexec {sys.executable} \"$@\"\n",  # the publisher's bare `python`: this venv's
             "nvidia-smi": f"#!/bin/sh\nSTANDIN_SMI_DIR={smi_dir} exec {STANDIN / 'nvidia-smi' / 'nvidia-smi'} \"$@\"\n"}
    for name, text in stubs.items():
        (host.bin_dir / name).write_text(text)
        (host.bin_dir / name).chmod(0o755)
    inventory = write_inventory(ssh_hosts, tmp_path, ssh={"connect_timeout": 3}, gpus=2, python=sys.executable,
                                model_code=str(root))
    (tmp_path / "dle.yaml").write_text(DLE_SUITE)
    try:
        rc = main(["sweep", "--suite", str(tmp_path / "dle.yaml"), "--hosts", "h1", "--hosts-file", str(inventory),
                   "--runs-dir", str(tmp_path / "runs"), "--force"])  # --force: the stand-in tree is not the pin's
    finally:
        for name in stubs:
            (host.bin_dir / name).unlink()
    said = [line.split()[:2] for line in capsys.readouterr().err.splitlines() if line.startswith("  h1/gpu")]
    assert sorted(said[:2]) == [["h1/gpu0", "start"], ["h1/gpu1", "start"]]  # both GPUs' copies at once
    (sweep,) = list((tmp_path / "runs").iterdir())
    record = rundir.read_sweep(sweep)
    assert rc == 0 and {n: r["status"] for n, r in record["rows"].items()} == {"h1/gpu0": "ok", "h1/gpu1": "ok"}, \
        record
    assert list(rundir.sweep_parts(sweep)) == ["h1/gpu0", "h1/gpu1"]
    folder = "ngc-pytorch/resnet50/bz256/1n1g/amp/1"
    for gpu in (0, 1):
        part = rundir.sweep_slice_dir(sweep, "h1", gpu)
        (entry,) = rundir.read_run(part).runs.values()
        assert entry.ok and entry.figure > 0 and f"CUDA_VISIBLE_DEVICES={gpu} " in entry.fields["hosts"]["h1"]["command"]
        assert rundir.capture_gpus(rundir.host_captures(part)["h1"])[1]["pci_bus_id"] == "00000000:00:07.0"
        environ = rundir.read_sidecar(part / "hosts" / "h1" / folder / "resnet50_b256_amp_1.cmd.json")["environ"]
        assert (environ["CUDA_VISIBLE_DEVICES"], environ["CUDA_DEVICE_ORDER"]) == (str(gpu), "PCI_BUS_ID")
        assert (tmp_path / "work" / "h1" / "runs" / f"{sweep.name}-gpu{gpu}" / "h1" / folder / "stdout.log").is_file()
    fleet = rundir.read_results(sweep)["fleet"]
    assert sorted((r["host"], r["gpu"]) for r in fleet["hosts"]) == [("h1/gpu0", 0), ("h1/gpu1", 1)]
    assert fleet["verdict"].startswith("1 of 2 GPUs within noise") and "h1/gpu1 +0%: untested" in fleet["verdict"]
    assert "[hosts/h1/gpu1/report.md](hosts/h1/gpu1/report.md)" in (sweep / "report.md").read_text()
