"""kit yardstick: the hardware's own figures held to the datasheet, the kit's recordings, the host's earlier runs and
its peers. On this CPU the micro-benchmarks run for real (scripts/yardstick/hardware.py through `kit yardstick`);
the GPU's are the H200 visit's recordings (tests/fixtures/gpu-runs/h200-20261204-yardstick: the GPU alone, and the
same GPU while another process kept it busy with its own GEMMs), judged again here as the GPU judged them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO

from kit.cli.main import main
from kit.core.inputs import InputError
from kit.core.yamlio import ConfigError
from kit.results import yardstick as ys

VISIT = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261204-yardstick"
RECORDING = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261204" / "proof" / "hardware.json"
HARDWARE = REPO / "scripts" / "yardstick" / "hardware.py"
SMALL = ["--repeats", "3", "--gemm-n", "256", "--copy-mib", "16", "--window-s", "0.02"]


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into


@pytest.fixture(scope="module")
def visit(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("visit")
    unpack(VISIT / "visit.tar.gz", root / "visit")
    unpack(VISIT / "busy" / "runs.tar.gz", root / "busy")
    return root


@pytest.mark.parametrize("name, sheet", [
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA H100 80GB HBM3", "H100 SXM5"),
    ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"), ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"), ("Tesla V100-SXM2-32GB", "V100 SXM2"),
    ("Tesla V100-PCIE-16GB", "V100 PCIe"), ("NVIDIA B200", "B200 (HGX)"), ("NVIDIA GeForce RTX 4090", None)])
def test_each_gpu_name_finds_its_own_datasheet(name, sheet):
    found = ys.load_datasheets().sheet_for(name)
    assert (found.name if found else None) == sheet


def test_every_datasheet_names_its_source_and_gives_dense_peaks():
    sheets = ys.load_datasheets()
    assert {s.name.split()[0] for s in sheets.gpus} == {"V100", "A100", "H100", "H200", "B200"}
    for sheet in sheets.gpus:
        assert sheet.source.startswith("https://") and "nvidia.com" in sheet.source, sheet.name
        assert {"gemm/fp32", "memory/copy"} <= set(sheet.peaks), sheet.name
        # a tensor-core GEMM beats FP32 many times over; the datasheets' "with sparsity" figures are halved here
        tensor = [sheet.peaks[k] for k in ("gemm/tf32", "gemm/bf16", "gemm/fp16") if k in sheet.peaks]
        assert all(3 < t / sheet.peaks["gemm/fp32"] < 35 for t in tensor), sheet.name
    h200 = sheets.sheet_for("NVIDIA H200")
    assert h200.peaks == {"gemm/fp32": 67, "gemm/tf32": 494.5, "gemm/bf16": 989.5, "gemm/fp16": 989.5,
                          "memory/copy": 4800, "host/h2d": 64, "host/d2h": 64, "allreduce/nccl": 450}
    assert RECORDING in sheets.recorded and all(p.is_file() for p in sheets.recorded)


@pytest.mark.parametrize("old, new, said", [
    ("gemm/fp32: 75,", "gemm/fp32: -75,", "B200 (HGX): gemm/fp32: a peak is measure/mode: a positive number"),
    ("match: 'B200'", "match: 'B200('", "match: not a regular expression"),
    ("  memory: 0.70", "  memory: 1.5", "healthy.memory: a floor per measure"),
    ("    source: https://www.nvidia.com/en-us/data-center/hgx/\n", "", "source: missing required key"),
])
def test_a_bad_datasheet_file_is_named_by_file_line_and_key(tmp_path, old, new, said):
    text = ys.DATASHEETS.read_text()
    assert text.count(old) == 1
    line = text[:text.index(old)].count("\n") + 1
    bad = tmp_path / "gpu-datasheets.yaml"
    bad.write_text(text.replace(old, new))
    with pytest.raises(ConfigError) as err:
        ys.load_datasheets(bad)
    if not new:  # a missing key is named at its entry's first line
        line = text[:text.index("  - name: B200")].count("\n") + 1
    assert str(err.value).startswith(f"{bad}:{line}: {said}"), (str(err.value), line)


def structured(answer: dict) -> dict:
    """What a judgement decides, apart from its wording: the verdict, each measure's figure, fraction and ratios."""
    return {"verdict": answer["verdict"], "rows": [(r["key"], r["size"], r["median"], r["fraction"], r["floor"],
                                                    [(a["label"], a["ratio"]) for a in r["against"]],
                                                    bool(r["findings"])) for r in answer["rows"]]}


def test_the_h200_judged_again_as_the_gpu_judged_it(visit):
    """The visit's second run (held to the first of that host and to the kit's recording of 12-04) and the busy
    GPU's run (held to the recording): recomputed from the kept results, equal to what the GPU machine printed."""
    kept = visit / "visit" / "yardstick-runs"
    again = ys.to_dict(ys_judged(kept / "yardstick" / "vm" / "20261204T175743Z.json", kept))
    assert structured(again) == structured(json.loads((visit / "visit" / "again.out").read_text()))
    assert again["verdict"] == "healthy"
    assert {r["key"]: r["fraction"] for r in again["rows"]} == {
        "gemm/fp32": 0.7643, "gemm/tf32": 0.69, "gemm/bf16": 0.6750, "gemm/fp16": 0.6596, "memory/copy": 0.8836,
        "host/h2d": 0.86, "host/d2h": 0.8597}
    assert all(0.96 < a["ratio"] < 1.01 for r in again["rows"] for a in r["against"])

    busy_dir = visit / "busy" / "yardstick-busy"
    busy = ys.to_dict(ys_judged(busy_dir / "yardstick" / "vm" / "20261204T180112Z.json", busy_dir))
    assert structured(busy) == structured(json.loads((visit / "busy" / "yardstick-busy.json").read_text()))
    assert busy["verdict"] == "suspect"
    suspect = {r["key"] for r in busy["rows"] if r["findings"]}
    assert suspect == {"gemm/fp32", "gemm/tf32", "gemm/bf16", "gemm/fp16", "memory/copy"}  # the host link is not
    assert busy["line"].startswith("GPU NVIDIA H200: hardware suspect -- GEMM fp32/tf32/bf16/fp16, memory under "
                                   "what a healthy one gives (30%..39% of datasheet; 0.43..0.46 of the kit's "
                                   "recording h200-20261204)")


def ys_judged(path: Path, runs_dir: Path):
    from kit.cli.yardstick import judged
    return judged(path, runs_dir)


def test_the_gpu_proof_stage_recorded_on_the_h200_reads_back():
    rows = {r["what"]: r for r in json.loads((VISIT / "proof" / "results.json").read_text())["rows"]}
    assert rows["kit yardstick's verdict"]["figure"] == "healthy" and rows["kit yardstick's verdict"]["verdict"] == \
        "met"
    assert rows["memory copy"]["figure"] == "4238.28 GB/s" and rows["memory copy"]["target"] == ">= 70% of 4800"
    measured = [r for r in rows.values() if r["stage"] == "7 hardware"]
    assert len(measured) == 8 and all(r["verdict"] == "met" for r in measured)


def test_a_busy_gpu_is_the_first_cause_of_its_runs_slow_figure(visit, tmp_path, capsys):
    """The same harness case on the H200 alone (5639 images/s) and beside another process's GEMMs (2548): kit
    standing with the yardstick measured beside each says the hardware is healthy, or names it first."""
    runs = visit / "busy"
    busy_run = next((runs / "runs-busy").iterdir())
    alone_run = next((runs / "runs-alone").iterdir())
    busy_stick = runs / "yardstick-busy" / "yardstick" / "vm" / "20261204T180112Z.json"
    alone_stick = runs / "yardstick-alone" / "yardstick" / "vm" / "20261204T175952Z.json"
    assert main(["standing", str(busy_run), "--yardstick", str(busy_stick), "--json"]) == 0
    busy = json.loads(capsys.readouterr().out)
    assert busy["hardware"]["verdict"] == "suspect"
    (case,) = busy["cases"]
    assert round(case["per_gpu"], 1) == 2547.6 and case["causes"][0].startswith(
        "the hardware itself (kit yardstick): GPU NVIDIA H200: hardware suspect")
    assert main(["standing", str(alone_run), "--yardstick", str(alone_stick)]) == 0
    text = capsys.readouterr().out
    assert "Hardware: GPU NVIDIA H200: GEMM 76% fp32 / 69% tf32 / 68% bf16 / 66% fp16, memory 88%, host link " \
           "85% h2d / 86% d2h of datasheet; 0.96..1.00 of the kit's recording h200-20261204: hardware healthy" in text
    assert "the hardware itself" not in text and "5639.2 images/s" in text

    # kept beside the run (RUN/../yardstick/<host>/, within the hour): found without being named
    beside = tmp_path / "runs"
    shutil.copytree(alone_run, beside / alone_run.name)
    (beside / "yardstick" / "vm").mkdir(parents=True)
    shutil.copy(alone_stick, beside / "yardstick" / "vm")
    assert main(["standing", str(beside / alone_run.name), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hardware"]["verdict"] == "healthy"
    # a yardstick of another device is not this run's: said, not used
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"device": "cpu", "cpu": "AMD EPYC", "measures": [
        {"measure": "gemm", "mode": "fp32", "unit": "GFLOP/s", "windows": [100.0], "median": 100.0}]}))
    assert main(["standing", str(busy_run), "--yardstick", str(cpu), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["hardware"] is None and answer["hardware_note"] == (
        "the yardstick given measured AMD EPYC, not this run's NVIDIA H200")
    assert not answer["cases"][0]["causes"][0].startswith("the hardware itself")


def test_this_cpu_measured_for_real_kept_and_held_to_its_earlier_runs(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["yardstick", "--device", "cpu", "--runs-dir", str(runs), "--json", *SMALL]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["verdict"] == "not judged" and first["datasheet"] is None
    assert "no earlier run of this host or a peer with the same CPU" in first["line"]
    assert {r["key"] for r in first["rows"]} == {"gemm/fp32", "gemm/bf16", "memory/copy"}
    for row in first["rows"]:
        assert row["low"] <= row["median"] <= row["high"] and row["peak"] is None  # a CPU: no GPU datasheet
    (host,) = (runs / "yardstick").iterdir()
    (kept,) = host.glob("*.json")
    # a GPU's recording kept under another host never stands beside a CPU
    shutil.copytree(RECORDING.parent, runs / "yardstick" / "gpu-node", ignore=lambda d, n: [
        x for x in n if x != "hardware.json"])
    (runs / "yardstick" / "gpu-node" / "hardware.json").rename(runs / "yardstick" / "gpu-node" / "20261201T000000Z.json")
    assert main(["yardstick", "--from", str(kept), "--runs-dir", str(runs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "not judged"  # nothing kept before it
    # a peer: another host with the same CPU; and this host's own second run
    peer = runs / "yardstick" / "node2"
    peer.mkdir()
    shutil.copy(kept, peer / "20261201T000000Z.json")
    code = main(["yardstick", "--device", "cpu", "--runs-dir", str(runs), "--json", *SMALL])
    second = json.loads(capsys.readouterr().out)
    labels = {a["label"] for r in second["rows"] for a in r["against"]}
    assert labels == {f"this host's run of {kept.stem}", "peer node2 (20261201T000000Z)"}
    assert (code, second["verdict"]) in ((0, "healthy"), (1, "suspect"))  # a shared, noisy machine: either is honest
    assert len(list(host.glob("*.json"))) == 2


def test_a_cpu_giving_a_third_of_what_it_gave_before_is_suspect(tmp_path, capsys):
    runs = tmp_path / "runs"
    assert main(["yardstick", "--device", "cpu", "--runs-dir", str(runs), "--no-record", "--json", *SMALL]) == 0
    assert not (runs / "yardstick").exists()  # --no-record keeps nothing
    done = subprocess.run([sys.executable, str(HARDWARE), "--device", "cpu", "--json", *SMALL], capture_output=True,
                          text=True, check=True, timeout=120)
    now = json.loads(done.stdout)
    before = json.loads(done.stdout)
    for row in before["measures"]:  # three times this run's BEST window: however a loaded host spreads them
        row["windows"] = [max(row["windows"]) * 3] * len(row["windows"])
        row["median"] = row["windows"][0]
    (runs / "yardstick" / now["host"]).mkdir(parents=True)
    (runs / "yardstick" / now["host"] / "20261201T000000Z.json").write_text(json.dumps(before))
    (runs / "yardstick" / now["host"] / "20261202T000000Z.json").write_text(json.dumps(now))
    capsys.readouterr()
    assert main(["yardstick", "--from", str(runs / "yardstick" / now["host"] / "20261202T000000Z.json"),
                 "--runs-dir", str(runs)]) == 1
    out = capsys.readouterr().out
    ratios = [m["median"] / (3 * max(m["windows"])) for m in now["measures"]]
    span = f"{min(ratios):.2f}" if f"{min(ratios):.2f}" == f"{max(ratios):.2f}" else \
        f"{min(ratios):.2f}..{max(ratios):.2f}"
    assert f"CPU {now['cpu']}: hardware suspect -- GEMM fp32/bf16, memory under what a healthy one gives ({span} of " \
           "this host's run of 20261201T000000Z)" in out
    assert max(ratios) <= 1 / 3


@pytest.mark.parametrize("edit, said", [
    (lambda d: d.pop("measures"), "measures: expected a non-empty list of measures"),
    (lambda d: d["measures"][0].update(measure="flops"), "measures[0].measure: expected one of gemm, memory"),
    (lambda d: d["measures"][1].update(windows=[1.0, -2.0]), "measures[1].windows: expected a list of positive"),
    (lambda d: d["measures"][0].update(median=99999.0), "measures[0].median: not the median of its windows"),
    (lambda d: d.update(device="tpu"), "device: expected 'gpu' or 'cpu'"),
    (lambda d: d.pop("gpu"), "gpu: a GPU result names its GPU"),
])
def test_a_hostile_result_is_refused_naming_its_key(tmp_path, capsys, edit, said):
    data = json.loads(RECORDING.read_text())
    edit(data)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        ys.read_yardstick(path)
    assert str(err.value) == f"{path}: {said}" or str(err.value).startswith(f"{path}: {said}"), str(err.value)
    assert main(["yardstick", "--from", str(path)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"kit: {path}: {said.split(':')[0]}")
    path.write_text(RECORDING.read_text()[:200])
    assert main(["yardstick", "--from", str(path)]) == 2
    assert "not JSON" in capsys.readouterr().err


def test_the_all_reduce_bus_runs_across_processes_on_this_cpu():
    """With 2+ GPUs the all-reduce uses NCCL; here two gloo processes prove the path and the bus-bandwidth count."""
    done = subprocess.run([sys.executable, str(HARDWARE), "--device", "cpu", "--only", "allreduce", "--ranks", "2",
                           "--repeats", "2", "--copy-mib", "8", "--window-s", "0.02", "--json"],
                          capture_output=True, text=True, check=True, timeout=120)
    (row,) = json.loads(done.stdout)["measures"]
    assert (row["measure"], row["mode"], row["ranks"], row["unit"]) == ("allreduce", "gloo", 2, "GB/s")
    assert len(row["windows"]) == 2 and row["median"] > 0
    refused = subprocess.run([sys.executable, str(HARDWARE), "--ranks", "1"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--ranks must be 2 or more" in refused.stderr


def test_a_gpu_suite_measures_its_gpu_first_and_the_report_says_what_it_found(visit, tmp_path, monkeypatch):
    """kit bench of a GPU suite runs kit yardstick before its runs (here the measuring replaced by the H200's kept
    result, the GPU being the one replayed boundary), keeps it as env/<host>/yardstick.json, and the report's answer
    (layout 4) says what it found, held to the datasheet alone: what the bundle carries, so verify recomputes it."""
    from kitlogs import made_by_this_kit, recorded_clean, without_the_nan_repeat

    from kit.audit.verify import verify
    from kit.core.inputs import KitError
    from kit.run import bench

    kept = json.loads((visit / "busy" / "yardstick-busy" / "yardstick" / "vm" / "20261204T180112Z.json").read_text())
    run_dir = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261128" / "dle", run_dir)
    meta = {"host": {"hostname": "vm"}}
    monkeypatch.setattr(bench, "measure_yardstick", lambda device, quiet: {**kept, "measured_as": device})
    bench.measure_hardware(run_dir, meta)
    saved = json.loads((run_dir / "env" / "vm" / "yardstick.json").read_text())
    assert saved["measured_as"] == "gpu" and saved["measures"] == kept["measures"] and "yardstick_error" not in meta

    def refuse(device, quiet):
        raise KitError("yardstick: hardware.py exited 2: torch sees no CUDA device")
    monkeypatch.setattr(bench, "measure_yardstick", refuse)
    bench.measure_hardware(run_dir, meta)  # kept once per run directory: a resumed run measures nothing again
    assert "yardstick_error" not in meta
    other = tmp_path / "other"
    (other / "env").mkdir(parents=True)
    bench.measure_hardware(other, meta)
    assert meta["yardstick_error"] == "yardstick: hardware.py exited 2: torch sees no CUDA device"
    assert not (other / "env" / "vm").exists()

    recorded_clean(run_dir)
    without_the_nan_repeat(run_dir)
    made_by_this_kit(run_dir)
    assert main(["report", str(run_dir)]) == 0
    report = (run_dir / "report.md").read_text()
    line = next(x for x in report.splitlines() if x.startswith("Hardware: "))
    assert line == ("Hardware: GPU NVIDIA H200: hardware suspect -- GEMM fp32/tf32/bf16/fp16, memory under what a "
                    "healthy one gives (30%..39% of datasheet): look at the GPU before the software")
    assert "- torch/resnet50/bz256/1n1g/amp-nhwc: (1) the hardware itself (kit yardstick): GPU NVIDIA H200: " \
           "hardware suspect" in report
    assert main(["bundle", str(run_dir), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(tmp_path / "b.tgz").ok


def test_the_h200_ladder_run_measured_its_gpu_first_and_verifies_again(tmp_path, capsys):
    """The visit's kit bench of gpu-proof-dle on the H200 (DLE's ResNet50 beside the harness; kit yardstick on the
    GPU before the runs): its bundle verifies with this kit, and kit standing reads the run as the GPU machine did --
    the harness 0.980 of DLE in the same run (rung 1, on par), MLPerf's record a ceiling, the GPU healthy."""
    from kit.audit.verify import verify

    unpack(VISIT / "ladder" / "run.tar.gz", tmp_path)
    assert verify(tmp_path / "run.bundle.tar.gz").ok
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "env" / "vm" / "yardstick.json").is_file()
    assert main(["standing", str(run), "--json"]) == 0
    now = json.loads(capsys.readouterr().out)
    then = json.loads((tmp_path / "standing.json").read_text())
    assert now["hardware"]["verdict"] == then["hardware"]["verdict"] == "healthy"
    harness = next(c for c in now["cases"] if c["case"] == "torch/resnet50/bz256/1n1g/amp-nhwc")
    recorded = next(c for c in then["cases"] if c["case"] == harness["case"])

    def portable(case: dict) -> dict:  # a published log's path is where the kit's checkout is: its name is the fact
        return case | {"neighbours": [n | {"log": n["log"] and Path(n["log"]).name} for n in case["neighbours"]]}
    assert portable(harness) == portable(recorded)
    first = harness["neighbours"][0]
    assert (first["rung"], first["verdict"], round(first["ratio"], 3)) == (1, "on par", 0.98)
    assert harness["headline"].endswith("0.67 of the record (MLPerf Training v4.0 (NVIDIA) H200-SXM5-141GB, 8 "
                                        "GPU(s), amp)")
    report = (VISIT / "ladder" / "report.md").read_text()
    assert "Hardware: GPU NVIDIA H200: GEMM 76% fp32 / 70% tf32 / 69% bf16 / 66% fp16, memory 88%, host link 81% " \
           "h2d / 85% d2h of datasheet: hardware healthy" in report


def test_check_env_measures_this_host_with_yardstick_and_keeps_it(tmp_path, capsys):
    runs = tmp_path / "runs"
    for _ in range(2):
        assert main(["check-env", "--local", "--yardstick", "--runs-dir", str(runs)]) in (0, 1)
    out = capsys.readouterr().out
    said = [line.strip() for line in out.splitlines() if line.strip().startswith("yardstick: CPU ")]
    assert len(said) == 2 and "not judged (no earlier run of this host" in said[0]
    assert "of this host's run of " in said[1]
    assert len(list((runs / "yardstick").glob("*/*.json"))) == 2
    assert main(["check-env", "--hosts", "h1", "--yardstick"]) == 2
    assert "--yardstick measures this host: give --local" in capsys.readouterr().err
