"""A GPU run's telemetry from its raw samples to the report, results.json and verify, on the real H200 visit
(tests/fixtures/gpu-runs/h200-20261128): its DLE run directory, each run given the samples the sampler took while
it ran. Those per-run files are DERIVED: cut, unchanged, from the visit's one continuous recording (both sources,
telemetry/) at each run's span (a harness log's first and last line, 8 s of process start before; DLE's DLLogger
lines, 5 s before), the NVML recording for the harness's runs and nvidia-smi's for DLE's."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from kitlogs import made_by_this_kit, recorded_clean, without_the_nan_repeat

from kit.audit import bundle as bd
from kit.audit.verify import verify
from kit.cli import main
from kit.core.layout import telemetry_name
from kit.results.gpu_telemetry import run_telemetry, telemetry_warnings
from kit.run.records import run_gpu_telemetry

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
CASE = Path("logs") / "torch" / "resnet50" / "bz256" / "1n1g"
DLE = Path("logs") / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g"


def span(log: Path) -> tuple[float, float]:
    """The seconds a run's process lived, as the sampler beside it would have seen them."""
    if "ngc-pytorch" in log.parts:
        times = [dt.datetime.strptime(line[4:30], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()
                 for line in log.read_text().splitlines() if line.startswith("DLL 20")]
        return times[0] - 5, times[-1] + 0.5
    times = [json.loads(line.split(":::KITLOG ", 1)[1])["time_ms"] / 1000 for line in log.read_text().splitlines()
             if ":::KITLOG " in line]
    return times[0] - 8, times[-1] + 0.5


def cut_nvml(start: float, end: float, dest: Path) -> None:
    lines = (VISIT / "telemetry" / "nvml-100ms.jsonl").read_text().splitlines()
    header = json.loads(lines[0]) | {"started": start}
    kept = [line for line in lines[1:] if start <= json.loads(line)["t"] <= end]
    dest.write_text("\n".join([json.dumps(header), *kept]) + "\n")


def cut_smi(start: float, end: float, dest: Path) -> None:
    comment, header, *rows = (VISIT / "telemetry" / "smi-100ms.csv").read_text().splitlines()
    def when(row: str) -> float:  # that machine's clock was UTC
        return dt.datetime.strptime(row[:23], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()
    kept = [row for row in rows if start <= when(row) <= end]
    first = comment.split(" started ")[0] + f" started {when(kept[0]) - 0.02:.3f} host vm"
    dest.write_text("\n".join([first, header, *kept]) + "\n")


@pytest.fixture
def sampled_run(tmp_path) -> Path:
    """The real DLE run directory, each run with its derived samples beside its log, and its report made again."""
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    recorded_clean(run_dir)  # its DLE records predate model_code_state (kitlogs.recorded_clean: DERIVED)
    without_the_nan_repeat(run_dir)  # DERIVED: its program repeat 2 trained on NaN and gives no figure
    made_by_this_kit(run_dir)  # DERIVED: judged as a run of this kit
    for log in sorted((run_dir / "logs").rglob("*.log")):
        start, end = span(log)
        (cut_smi if "ngc-pytorch" in log.parts else cut_nvml)(start, end, log.with_name(telemetry_name(log.name)))
    assert main(["report", str(run_dir)]) == 0
    return run_dir


def test_the_harness_runs_telemetry_over_their_measured_steps(sampled_run):
    tele = run_telemetry(sampled_run / CASE / "resnet50_b256_amp-nhwc_1.log", sampled_run / "logs", sampled_run)
    assert tele["window"] == "measured steps" and tele["images"] == 25600 and tele["energy_source"] == "counter"
    assert tele["j_per_image"] == pytest.approx(0.1155, abs=0.0005)
    assert tele["images_per_s_per_w"] == pytest.approx(1 / tele["j_per_image"], rel=1e-3)
    (host,) = tele["hosts"].values()
    assert host["file"] == (CASE / "resnet50_b256_amp-nhwc_1.gpu-telemetry").as_posix()
    assert host["gpus"] == ["NVIDIA H200"] and host["source"] == "nvml" and host["limit_w"] == 700.0
    assert host["sm_mhz_median"] == 1980.0 and host["coverage"] == 1.0 and 600 < host["power_mean_w"] < 700
    assert tele["throttled"] == {"sw_power_cap": pytest.approx(4 / 44, abs=0.001)}  # the ramp's first samples
    assert telemetry_warnings(tele) == ["throttled (sw_power_cap) 9% of the window"]


def test_a_published_programs_run_over_its_whole_time_from_nvidia_smi(sampled_run):
    tele = run_telemetry(sampled_run / DLE / "resnet50_b256_amp_1.log", sampled_run / "logs", sampled_run)
    assert tele["window"] == "whole run" and tele["images"] == 0 and tele["j_per_image"] is None
    (host,) = tele["hosts"].values()
    assert host["source"] == "smi" and host["energy_source"] == "integrated" and host["energy_j"] > 1000


def test_results_json_and_the_report_carry_the_telemetry(sampled_run):
    results = json.loads((sampled_run / "results.json").read_text())
    runs = {r["file"]: r for g in results["groups"] for c in g["cases"] for r in c["runs"]}
    assert all("telemetry" in r for r in runs.values())
    report = (sampled_run / "report.md").read_text()
    assert "What the GPUs did (a harness run over its measured steps" in report
    row = next(line for line in report.splitlines() if line.startswith("| 1n1g | 1 | NVIDIA H200 | measured steps"))
    assert "| measured steps: 4.47 s, 44 samples |" in row
    assert "| 1980 of 1980 MHz |" in row and "| 0.1155 (counter) |" in row and "sw_power_cap 9%" in row
    assert "- 1n1g run 1: throttled (sw_power_cap) 9% of the window" in report
    assert (sampled_run / "telemetry.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # clocks, power, steps over time
    import csv
    rows = {(r["framework"], r["precision"]): r for r in csv.DictReader((sampled_run / "results.csv").open())}
    harness = rows[("torch", "amp-nhwc")]
    assert float(harness["j_per_image"]) == pytest.approx(0.1159, abs=0.0001)  # the median of 0.1155 and 0.1163
    assert float(harness["sm_mhz_median"]) == 1980.0 and 0.06 < float(harness["throttled_share"]) < 0.07
    # a program over its timed steps by its own log's clock (report layout 2): its images, its J/image
    assert float(rows[("ngc-pytorch", "amp")]["j_per_image"]) == pytest.approx(0.111, abs=0.001)


def test_a_run_without_samples_reports_as_before(tmp_path):
    """A CPU run, or any run from before the sampler: no telemetry key, no table (older bundles still verify)."""
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "dle", run_dir)
    assert main(["report", str(run_dir)]) == 2  # program repeat 2 trained on NaN: no figure (test_gpu_run_h200)
    recorded = {g["framework"]: g for g in json.loads((VISIT / "dle" / "results.json").read_text())["groups"]}
    now = {g["framework"]: g for g in json.loads((run_dir / "results.json").read_text())["groups"]}
    named = json.dumps(recorded["torch"]).replace('"unit": "samples/s"', '"unit": "images/s"')  # as layout 3 names it
    assert now["torch"] == json.loads(named)
    assert [r["value"] for r in now["ngc-pytorch"]["cases"][0]["runs"]] == [
        recorded["ngc-pytorch"]["cases"][0]["runs"][0]["value"]]
    assert "What the GPUs did" not in (run_dir / "report.md").read_text()
    assert not (run_dir / "telemetry.png").exists()


def sampled(run_dir: Path) -> None:
    """run.json as kit bench writes it for a GPU run now: its GPUs were sampled, and each run's entry keeps what
    they did (records.record_run's own run_gpu_telemetry, on the samples beside each log)."""
    meta = json.loads((run_dir / "run.json").read_text())
    meta["gpu_telemetry"] = {"sampler": "scripts/telemetry/gpu_sampler.py", "interval_ms": 100}
    for log_rel, entry in meta["runs"].items():
        entry.update(run_gpu_telemetry(run_dir, log_rel))
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2) + "\n")


def test_run_json_keeps_each_runs_telemetry_and_v5_holds_it_to_the_samples(sampled_run, tmp_path):
    sampled(sampled_run)
    meta = json.loads((sampled_run / "run.json").read_text())
    results = json.loads((sampled_run / "results.json").read_text())
    harness = next(g for g in results["groups"] if g["framework"] == "torch")
    kept = meta["runs"][(CASE / "resnet50_b256_amp-nhwc_2.log").as_posix()]["telemetry"]
    assert kept == harness["cases"][0]["runs"][1]["telemetry"]  # the figures results.json carries, at run time
    assert kept["j_per_image"] == 0.1163 and kept["window"] == "measured steps"
    assert main(["bundle", str(sampled_run), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(tmp_path / "b.tgz").ok
    text = (sampled_run / "run.json").read_text()
    assert text.count('"j_per_image": 0.1163,') == 1
    (sampled_run / "run.json").write_text(text.replace('"j_per_image": 0.1163,', '"j_per_image": 0.1063,'))
    line = 1 + text[:text.index('"j_per_image": 0.1163,')].count("\n")
    assert main(["bundle", str(sampled_run), "--out", str(tmp_path / "c.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 1
    said = [(v.rule, v.where, v.line, v.message) for v in verify(tmp_path / "c.tgz").violations]
    assert said == [("gpu_telemetry_holds", f"run.json:{line}", line, "torch/resnet50/bz256/1n1g/amp-nhwc run 2: run.json's "
                     "telemetry.j_per_image is 0.1063, its samples give 0.1163")], said
    assert verify(tmp_path / "c.tgz", rules_version="v4").ok  # v4 did not read run.json's copy


def test_the_sampled_run_verifies_and_an_edited_sample_fails(sampled_run, tmp_path):
    sampled(sampled_run)
    bundle = tmp_path / "b.tgz"
    assert main(["bundle", str(sampled_run), "--out", str(bundle), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(bundle).ok
    samples = sampled_run / CASE / "resnet50_b256_amp-nhwc_2.gpu-telemetry"
    lines = samples.read_text().splitlines()
    before = json.loads(lines[19])["energy_mj"]
    edited = json.loads(lines[20]) | {"energy_mj": before - 1}  # before the measured window: no figure changes
    samples.write_text("\n".join([*lines[:20], json.dumps(edited), *lines[21:]]) + "\n")
    assert main(["bundle", str(sampled_run), "--out", str(tmp_path / "c.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 1
    said = [(v.rule, v.where, v.message) for v in verify(tmp_path / "c.tgz").violations]
    assert said == [("gpu_telemetry_holds", (CASE / samples.name).as_posix(),
                     f"torch/resnet50/bz256/1n1g/amp-nhwc run 2 (local): sample 20 of GPU 0: the energy counter went "
                     f"back ({float(before - 1)} < {float(before)} mJ)")], said


def test_kit_compare_shows_energy_per_image_beside_the_ratio(sampled_run, tmp_path, capsys):
    assert main(["compare", str(VISIT / "dle"), str(sampled_run)]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert table[0] == "| case | unit | A | B | ratio | J/image A | J/image B | verdict | why |"
    row = next(line for line in table if "torch" in line and "amp-nhwc" in line)
    assert "| 1.000 | - | 0.1159 |" in row  # A had no samples; B's median of 0.1155 and 0.1163
    assert main(["compare", str(VISIT / "dle"), str(VISIT / "dle")]) == 0
    assert "J/image" not in capsys.readouterr().out  # neither side sampled: the table as before


def test_a_cpu_suite_says_it_has_no_gpu_to_sample():
    from kit.audit.verify import verify_tree

    golden = Path(__file__).resolve().parent / "fixtures" / "golden-bundles" / "cpu-loader"  # a real CPU run
    (finding,) = [f for f in verify_tree(golden).findings if f.rule.name == "gpu_telemetry_holds"]
    assert (finding.checked, finding.violations) == (0, [])
    assert finding.note == "a CPU suite: no GPU to sample (each run's host load is run.json's host_load)"


def test_another_machine_s_samples_are_refused_by_their_identity(sampled_run, tmp_path):
    """Another GPU's samples (an H100's name, UUID and limit, power and energy x0.55) beside the H200 run, run.json's
    copies and the report written again to agree: rule set v6 compares them with the host's capture
    (gpu_telemetry_holds@3); v5 judged them only against themselves and passed them."""
    samples = sampled_run / CASE / "resnet50_b256_amp-nhwc_1.gpu-telemetry"

    def forge(gpu: dict) -> None:
        header, *rows = samples.read_text().splitlines()
        other = json.loads(header)
        other["gpus"][0] |= gpu
        rows = [json.dumps(json.loads(r) | {k: round(json.loads(r)[k] * 0.55, 3) for k in ("power_w", "energy_mj")}
                           | {"limit_w": other["gpus"][0]["limit_w"]}) for r in rows]
        samples.write_text("\n".join([json.dumps(other), *rows]) + "\n")
        sampled(sampled_run)
        assert main(["report", str(sampled_run)]) == 0

    forge({"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-1111-2222-3333-444444444444", "limit_w": 385.0})
    bundle = bd.make_bundle(sampled_run, tmp_path / "b.tgz", submitter="t", system_name="t")
    said = [v.message for v in verify(bundle).violations]
    assert said == ["torch/resnet50/bz256/1n1g/amp-nhwc run 1 (local): GPU 0 (GPU-00000000-1111-2222-3333-"
                    "444444444444) is none of host 'vm''s GPUs"], said
    assert verify(bundle, rules_version="v5").ok  # the hole was real
    forge({"uuid": "GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658"})  # the H200's UUID, still named H100
    said = [v.message for v in verify(bd.make_bundle(sampled_run, tmp_path / "c.tgz", submitter="t",
                                                     system_name="t")).violations]
    assert said == ["torch/resnet50/bz256/1n1g/amp-nhwc run 1 (local): GPU 0 is named 'NVIDIA H100 80GB HBM3', host "
                    "'vm' captured it as 'NVIDIA H200'",
                    "torch/resnet50/bz256/1n1g/amp-nhwc run 1 (local): GPU 0's samples say power limit 385 W, host "
                    "'vm' captured 700 W"], said


def test_samples_clocked_above_the_captured_maximum_are_refused(sampled_run, tmp_path):
    """The clocks' range (gpu_telemetry_holds@3): a maximum SM clock the capture does not show, or SM clocks above
    the captured 1980 MHz (every genuine sample of the visit is at most that), run.json and the report agreeing."""
    samples = sampled_run / CASE / "resnet50_b256_amp-nhwc_1.gpu-telemetry"
    header, *rows = samples.read_text().splitlines()

    def forge(max_sm: float, add_mhz: float, name: str) -> list[str]:
        gpus = json.loads(header)
        gpus["gpus"][0]["max_sm_mhz"] = max_sm
        faster = [json.dumps(json.loads(r) | {"sm_mhz": json.loads(r)["sm_mhz"] + add_mhz}) for r in rows]
        samples.write_text("\n".join([json.dumps(gpus), *faster]) + "\n")
        sampled(sampled_run)
        assert main(["report", str(sampled_run)]) == 0
        bundle = bd.make_bundle(sampled_run, tmp_path / name, submitter="t", system_name="t")
        assert verify(bundle, rules_version="v5").ok
        return [v.message for v in verify(bundle).violations]

    assert forge(2100.0, 100.0, "a.tgz") == ["torch/resnet50/bz256/1n1g/amp-nhwc run 1 (local): GPU 0's samples state a "
                                             "maximum SM clock of 2100 MHz, host 'vm' captured 1980 MHz"]
    said = forge(1980.0, 100.0, "b.tgz")
    assert len(said) == 1 and said[0].startswith("torch/resnet50/bz256/1n1g/amp-nhwc run 1 (local): GPU 0's SM clock "
                                                 "2080 MHz at t=") and said[0].endswith(
        " is above the 1980 MHz maximum host 'vm' captured"), said


def test_the_jpeg_engines_utilisation_is_carried_where_the_samples_have_it(sampled_run, tmp_path):
    """DERIVED: harness run 1's samples with util_jpeg, as the sampler writes it now, its values copied from the
    sample's util_gpu (a series, not a JPEG measurement: no recording has one yet); run 2's samples as recorded,
    without it. Run 1's figures gain util_jpeg_mean (results.json, run.json's copy, the report's GPU busy cell); run
    2's stay as before, without the key, so a run directory sampled before still verifies."""
    samples = sampled_run / CASE / "resnet50_b256_amp-nhwc_1.gpu-telemetry"
    header, *lines = samples.read_text().splitlines()
    samples.write_text("\n".join([header, *(json.dumps((s := json.loads(line)) | {"util_jpeg": s["util_gpu"]})
                                            for line in lines)]) + "\n")
    assert main(["report", str(sampled_run)]) == 0
    results = json.loads((sampled_run / "results.json").read_text())
    runs = {r["file"]: r["telemetry"] for g in results["groups"] for c in g["cases"] for r in c["runs"]}
    first = runs[(CASE / "resnet50_b256_amp-nhwc_1.log").relative_to("logs").as_posix()]
    second = runs[(CASE / "resnet50_b256_amp-nhwc_2.log").relative_to("logs").as_posix()]
    (host,) = first["hosts"].values()
    assert first["util_jpeg_mean"] == host["util_jpeg_mean"] == first["util_gpu_mean"] > 90
    assert "util_jpeg_mean" not in second and "util_jpeg_mean" not in second["hosts"]["local"]
    report = (sampled_run / "report.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| 1n1g | ")]
    busy = f"{first['util_gpu_mean']:.0f}"
    assert sum(f"| {busy} (JPEG {busy}) |" in row for row in rows) == 1
    assert sum("(JPEG" in row for row in rows) == 1
    sampled(sampled_run)
    meta = json.loads((sampled_run / "run.json").read_text())
    assert meta["runs"][(CASE / "resnet50_b256_amp-nhwc_1.log").as_posix()]["telemetry"] == first
    assert main(["bundle", str(sampled_run), "--out", str(tmp_path / "b.tgz"), "--force", "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(tmp_path / "b.tgz").ok
