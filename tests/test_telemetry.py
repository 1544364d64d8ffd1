"""kit.telemetry on the REAL recordings of the H200 visit (tests/fixtures/gpu-runs/h200-20261128/, README.md there):
gpu_sampler.py's NVML and nvidia-smi files, taken at the same time at 100 ms while the dle/ run's harness runs
trained. Files marked DERIVED below are real lines edited in a temporary folder; each says what was changed."""

from __future__ import annotations

import dataclasses
import json
import math
from bisect import bisect_left
from pathlib import Path

import pytest
from kitlogs import rewrite_kitlog

from kit.results.gpu_telemetry import harness_window
from kit.results.parsers import PER_STEP, ParseError, parse_log
from kit.telemetry import (
    MIN_SAMPLES,
    REASONS,
    Telemetry,
    TelemetryError,
    read,
    reason_names,
    summarize,
)

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
NVML = VISIT / "telemetry" / "nvml-100ms.jsonl"
SMI = VISIT / "telemetry" / "smi-100ms.csv"
HARNESS = VISIT / "dle" / "logs" / "torch" / "resnet50" / "bz256" / "1n1g"
DLE = VISIT / "dle" / "logs" / "ngc-pytorch" / "resnet50" / "bz256" / "1n1g"
RUNS = ("resnet50_b256_amp-nhwc_1.log", "resnet50_b256_amp-nhwc_2.log")
UUID = "GPU-45d3aa2e-1d0d-9dc5-8f29-be7c48cb8658"


@pytest.fixture(scope="module")
def nvml() -> Telemetry:
    return read(NVML)


@pytest.fixture(scope="module")
def smi() -> Telemetry:
    return read(SMI)


# ---- reading ----------------------------------------------------------------------------------------------------

def test_the_nvml_recording_reads(nvml):
    assert (nvml.source, nvml.host, nvml.interval_s, nvml.started, nvml.why) == ("nvml", "vm", 0.1, 1795843984.28, None)
    (gpu,) = nvml.gpus
    assert (gpu.index, gpu.name, gpu.uuid, gpu.max_sm_mhz, gpu.max_mem_mhz, gpu.limit_w) == (
        0, "NVIDIA H200", UUID, 1980, 3201, 700)
    assert len(nvml.samples) == 1386  # the header and 1386 sample lines, 138.5 s
    first = nvml.samples[0]
    assert (first.t, first.gpu, first.sm_mhz, first.power_w, first.energy_mj, first.temp_c, first.reasons) == (
        1795843984.283, 0, 345, 78.003, 2530801, 33, REASONS["gpu_idle"])
    times = [s.t for s in nvml.samples]
    energy = [s.energy_mj for s in nvml.samples]
    assert times == sorted(times) and energy == sorted(energy)  # NVML's counter only grows


def test_the_nvidia_smi_recording_reads_on_the_epoch_clock(smi):
    """nvidia-smi wrote wall time without a zone; anchored by the header's started (1795843984.707, 05:33:04.707
    UTC) and the first row (05:33:04.738): this host ran on UTC, so the offset is 0."""
    assert (smi.source, smi.host, smi.interval_s, smi.started) == ("smi", "vm", 0.1, 1795843984.707)
    (gpu,) = smi.gpus
    assert (gpu.index, gpu.name, gpu.uuid, gpu.max_sm_mhz, gpu.limit_w) == (0, None, UUID, 1980, 700)
    assert len(smi.samples) == 1348
    first = smi.samples[0]
    assert first.t == pytest.approx(1795843984.738, abs=1e-6)
    assert (first.sm_mhz, first.mem_mhz, first.power_w, first.power_instant_w, first.limit_w, first.energy_mj,
            first.reasons) == (345, 3201, 78.04, 78.99, 700, None, 1)  # power_w is power.draw
    assert all(s.energy_mj is None for s in smi.samples)


def test_an_nvidia_smi_file_of_another_zone_reads_the_same_times(tmp_path, smi):
    """DERIVED: the real CSV with every wall time moved 5 h 30 min ahead (a host on UTC+05:30), the header's epoch
    start unchanged: the same epoch times come out."""
    from datetime import datetime, timedelta

    lines = SMI.read_text().splitlines(keepends=True)
    moved = lines[:2]
    for line in lines[2:]:
        stamp, rest = line.split(",", 1)
        wall = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f") + timedelta(hours=5, minutes=30)
        moved.append(wall.strftime("%Y/%m/%d %H:%M:%S.%f")[:-3] + "," + rest)
    path = tmp_path / "ist.csv"
    path.write_text("".join(moved))
    assert [s.t for s in read(path).samples] == pytest.approx([s.t for s in smi.samples], abs=1e-6)


def _nearest(samples, t):
    times = [s.t for s in samples]
    i = bisect_left(times, t)
    return min((samples[j] for j in (i - 1, i) if 0 <= j < len(samples)), key=lambda s: abs(s.t - t))


def test_both_sources_agree_on_the_same_moments(nvml, smi):
    """Each nvidia-smi row against the NVML sample nearest it, over the whole visit (idle, loader profile, harness
    and DLE runs): always within an interval; the clocks equal but where one read a clock change before the other;
    power (both NVML's power usage) within a few W but on the steepest ramps."""
    pairs = [(s, _nearest(nvml.samples, s.t)) for s in smi.samples]
    assert max(abs(a.t - b.t) for a, b in pairs) < nvml.interval_s
    assert sum(a.sm_mhz == b.sm_mhz for a, b in pairs) / len(pairs) > 0.98  # 1328 of 1348
    assert sum(a.mem_mhz == b.mem_mhz for a, b in pairs) == len(pairs)
    power = sorted(abs(a.power_w - b.power_w) for a, b in pairs)
    assert power[len(power) // 2] < 0.1 and sum(p <= 5 for p in power) / len(power) > 0.95
    assert sum(a.reasons == b.reasons for a, b in pairs) / len(pairs) > 0.98  # 1341 of 1348
    assert sum(abs(a.temp_c - b.temp_c) <= 1 for a, b in pairs) / len(pairs) > 0.99  # 1342 of 1348
    # the harness windows: run 1's 44 rows all agree within 1 W; run 2's first 4 lie on the ramp into training,
    # where the ~30 ms between the two readings is 12 to 59 W (one clock 1965 against 1980); later one row 5 W apart
    same = [sum(a.sm_mhz == b.sm_mhz and abs(a.power_w - b.power_w) <= 3 for a, b in pairs if start <= a.t <= end)
            for start, end in WINDOWS.values()]
    assert same == [44, 39]


# ---- the measured windows of the real harness runs ---------------------------------------------------------------

# run -> (start_s, end_s) of its measured steps: run 1 05:33:56.096-05:34:00.566 UTC, run 2 05:34:44.817-05:34:49.275
WINDOWS = {RUNS[0]: (1795844036.095673, 1795844040.566), RUNS[1]: (1795844084.816972, 1795844089.275)}
# run -> (mean power W, J/image from NVML's counter, samples with sw_power_cap of the 44 in the window)
FIGURES = {RUNS[0]: (658.4, 0.1155, 4), RUNS[1]: (663.6, 0.1163, 2)}


@pytest.mark.parametrize("run", RUNS)
def test_a_harness_logs_measured_window(run):
    """From the first measured step's start to the last one's end; 100 steps of 256 images past 20 warm-up steps.
    The step lines' seconds sum to the run's own figure (5740.56 / 5757.58 images/s); the window also holds the
    moments between steps, so images / window is a little lower."""
    start, end, images = harness_window(HARNESS / run)
    assert (start, end) == pytest.approx(WINDOWS[run], abs=1e-6)
    assert images == 100 * 256
    stop = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in (HARNESS / run).read_text().splitlines()
            if '"run_stop"' in line][0]
    assert images / (end - start) == pytest.approx(stop["samples_per_sec"], rel=0.005)


@pytest.mark.parametrize("run", RUNS)
def test_the_h200_during_a_harness_run_from_nvml(nvml, run):
    power, j_per_image, capped = FIGURES[run]
    start, end, images = harness_window(HARNESS / run)
    w = summarize(nvml, start, end, images)
    assert w.why is None and (w.gpus, w.samples, w.coverage) == ((0,), 44, 1.0)
    assert (w.sm_mhz_median, w.sm_mhz_min, w.max_sm_mhz, w.sm_ratio_median) == (1980, 1965, 1980, 1.0)
    assert w.sm_ratio_min == pytest.approx(1965 / 1980)
    assert w.power_mean_w == pytest.approx(power, abs=0.1)
    assert w.power_mean_w < w.power_peak_w < w.limit_w == 700
    assert w.energy_source == "counter"
    assert w.j_per_image == pytest.approx(j_per_image, abs=5e-5)
    assert w.energy_j == pytest.approx(w.j_per_image * images)
    assert w.images_per_s_per_w == pytest.approx(1 / w.j_per_image)  # images/s over the window's average W
    assert w.energy_j / w.seconds == pytest.approx(power, rel=0.01)  # the counter's average power, the samples' mean
    assert w.temp_peak_c == 53 and w.util_gpu_mean > 93
    # real: NVML reported its software power cap (and SM 1965 MHz) on a few samples at the window's start
    assert w.reasons["sw_power_cap"] == pytest.approx(capped / 44)
    assert {k for k, v in w.reasons.items() if v} == {"sw_power_cap"}


@pytest.mark.parametrize("run", RUNS)
def test_energy_from_the_counter_and_integrated_agree(nvml, smi, run):
    """The same window four ways: NVML's counter; NVML's power integrated (DERIVED: the samples with their
    energy_mj removed); nvidia-smi's power.draw.instant integrated (it has no counter), and its power.draw. All
    within 1%: the harness warmed up for 20 steps, so the power is steady through the window."""
    start, end, images = harness_window(HARNESS / run)
    counter = summarize(nvml, start, end, images)
    without = dataclasses.replace(nvml, samples=tuple(dataclasses.replace(s, energy_mj=None) for s in nvml.samples))
    integrated = summarize(without, start, end, images)
    from_smi = summarize(smi, start, end, images)
    averaged = summarize(_without_instant(smi), start, end, images)  # DERIVED: power.draw integrated
    assert (counter.energy_source, integrated.energy_source, from_smi.energy_source) == (
        "counter", "integrated", "integrated")
    assert integrated.j_per_image == pytest.approx(counter.j_per_image, rel=0.01)
    assert from_smi.j_per_image == pytest.approx(counter.j_per_image, rel=0.01)
    assert averaged.j_per_image == pytest.approx(counter.j_per_image, rel=0.01)  # steady after 20 warm-up steps
    assert (from_smi.samples, from_smi.sm_mhz_median, from_smi.sm_mhz_min) == (44, 1980, 1965)
    assert from_smi.power_mean_w == pytest.approx(counter.power_mean_w, abs=1)


def _without_instant(t: Telemetry) -> Telemetry:
    return dataclasses.replace(t, samples=tuple(dataclasses.replace(s, power_instant_w=None) for s in t.samples))


def dle_window(log: Path) -> tuple[float, float, int]:
    """A DLE run's iterations as the kit reads them (kit.results.parsers, DLLogger's wall-clock times, this host's
    on UTC): from the first iteration's end to the last one's, and the 256 images of each iteration between."""
    its = [r for r in parse_log(log).records if r.kind == PER_STEP and r.metric == "train.total_ips"]
    assert len(its) == 99
    return its[0].timestamp, its[-1].timestamp, 256 * (len(its) - 1)


def test_the_dle_run_that_trained_on_nan_has_no_window():
    """Its repeat 2 trained on a NaN loss from iteration 49 on: no figure, so no window to judge its energy over."""
    with pytest.raises(ParseError, match=r":66: no figure: the run trained on a non-finite loss \(train.loss : nan\)"):
        dle_window(DLE / "resnet50_b256_amp_2.log")


@pytest.mark.parametrize("run,power,j_per_image", [("resnet50_b256_amp_1.log", 643.0, 0.1109)])
def test_the_h200_during_a_dle_run(nvml, smi, run, power, j_per_image):
    """DLE warms up for one iteration, so its window starts on the ramp into training. NVML's counter: ~630 W,
    0.11 J/image, 4-7% below the harness's 0.1155 and 0.1163 (more images/s for less power). The samples' power
    (NVML's power usage, an average over about a second) lags the ramp: its mean reads 60 W below the counter's,
    and so would its integral; nvidia-smi's power.draw.instant integrated is within 2% of the counter, its
    power.draw integrated (DERIVED: the instant power removed) about 10% low."""
    start, end, images = dle_window(DLE / run)
    w = summarize(nvml, start, end, images)
    assert (w.samples, w.coverage, w.sm_mhz_median, w.sm_mhz_min, w.temp_peak_c) == (44, 1.0, 1980, 1980, 52)
    assert w.energy_source == "counter" and w.energy_j / w.seconds == pytest.approx(power, abs=0.1)
    assert w.j_per_image == pytest.approx(j_per_image, abs=5e-5)
    assert w.power_mean_w < power - 50
    harness = summarize(nvml, *harness_window(HARNESS / RUNS[int(run[-5]) - 1]))
    assert 0.92 < w.j_per_image / harness.j_per_image < 0.97  # 0.960 (0.933 for repeat 2, which trained on NaN)
    instant = summarize(smi, start, end, images)
    assert instant.energy_source == "integrated"
    assert instant.j_per_image == pytest.approx(w.j_per_image, rel=0.02)
    assert summarize(_without_instant(smi), start, end, images).j_per_image / w.j_per_image < 0.92


def test_a_throttled_window(nvml):
    """DERIVED: run 1's real samples, the reason bits replaced: software power cap and software thermal slowdown on
    the last 11 of the window's 44 samples, none on the rest."""
    start, end, images = WINDOWS[RUNS[0]] + (25600,)
    inside = [i for i, s in enumerate(nvml.samples) if start <= s.t <= end]
    capped = set(inside[-11:])
    bits = REASONS["sw_power_cap"] | REASONS["sw_thermal_slowdown"]
    derived = dataclasses.replace(nvml, samples=tuple(
        dataclasses.replace(s, reasons=bits if i in capped else 0) for i, s in enumerate(nvml.samples)))
    w = summarize(derived, start, end, images)
    assert reason_names(bits) == ["sw_power_cap", "sw_thermal_slowdown"]
    assert w.reasons == {name: 0.25 if name in ("sw_power_cap", "sw_thermal_slowdown") else 0.0 for name in REASONS}


def test_too_few_samples_give_no_figures(nvml):
    start = WINDOWS[RUNS[0]][0]
    w = summarize(nvml, start, start + 0.15, 256)
    assert w.samples < MIN_SAMPLES and w.why.startswith(f"GPU 0: {w.samples} sample(s) in the 0.15 s window")
    assert (w.sm_mhz_median, w.power_mean_w, w.energy_j, w.j_per_image, w.reasons) == (None, None, None, None, {})


def test_a_gap_in_the_samples_lowers_the_coverage(nvml):
    """DERIVED: run 1's window with its samples between 1 and 2 s into it left out."""
    start, end = WINDOWS[RUNS[0]]
    kept = tuple(s for s in nvml.samples if not start + 1 < s.t < start + 2)
    w = summarize(dataclasses.replace(nvml, samples=kept), start, end, 25600)
    assert w.samples == 34 and w.coverage == pytest.approx(1 - 1.1 / (end - start), abs=0.03)  # a 1.1 s gap
    assert w.energy_source == "counter" and w.j_per_image == pytest.approx(FIGURES[RUNS[0]][1], abs=5e-5)


def test_a_window_past_the_recording_has_no_energy(nvml):
    last = nvml.samples[-1].t
    w = summarize(nvml, last - 5, last + 5, 1000)
    assert w.why is None and w.sm_mhz_median is not None and w.coverage == pytest.approx(0.5, abs=0.02)
    assert (w.energy_j, w.energy_source, w.j_per_image) == (None, None, None)


def test_two_gpus_sum_their_power_and_energy(nvml):
    """DERIVED: the real GPU 0 samples copied as a GPU 1 (its power halved)."""
    start, end = WINDOWS[RUNS[0]]
    twin = tuple(dataclasses.replace(s, gpu=1, power_w=s.power_w / 2, energy_mj=s.energy_mj / 2) for s in nvml.samples)
    two = dataclasses.replace(nvml, gpus=(*nvml.gpus, dataclasses.replace(nvml.gpus[0], index=1)),
                              samples=nvml.samples + twin)
    one, both = summarize(nvml, start, end, 25600), summarize(two, start, end, 25600)
    assert both.gpus == (0, 1) and both.samples == 88 and both.limit_w == 1400
    assert both.power_mean_w == pytest.approx(1.5 * one.power_mean_w)
    assert both.j_per_image == pytest.approx(1.5 * one.j_per_image)
    assert [p.gpus for p in both.per_gpu] == [(0,), (1,)] and both.per_gpu[0].energy_j == pytest.approx(one.energy_j)
    assert summarize(two, start, end, 25600, gpus=[1]).power_mean_w == pytest.approx(one.power_mean_w / 2)
    with pytest.raises(ValueError, match="has no GPU 3"):
        summarize(two, start, end, 25600, gpus=[3])


# ---- a host without a GPU, and bad input -------------------------------------------------------------------------

def test_a_host_without_gpu_telemetry(tmp_path):
    path = tmp_path / "cpu.gpu.jsonl"
    path.write_text(json.dumps({"telemetry": 1, "source": None, "why": [
        "nvml: ModuleNotFoundError: No module named 'pynvml'", "smi: FileNotFoundError: nvidia-smi is not on PATH"]})
                    + "\n")
    t = read(path)
    assert (t.source, t.samples, t.gpus) == (None, (), ())
    assert t.why == "nvml: ModuleNotFoundError: No module named 'pynvml'; smi: FileNotFoundError: nvidia-smi is not on PATH"
    w = summarize(t, 1.0, 2.0, 10)
    assert w.why == f"no GPU telemetry: {t.why}" and w.j_per_image is None


def _nvml_edit(lines: list[str]) -> list[str]:
    """DERIVED from the real NVML file's first three lines."""
    return NVML.read_text().splitlines()[:3] + lines


def _smi_edit(lines: list[str]) -> list[str]:
    """DERIVED from the real nvidia-smi file's header, its header row and first row."""
    return SMI.read_text().splitlines()[:3] + lines


REAL_NVML_LINE = NVML.read_text().splitlines()[1]
REAL_SMI_ROW = SMI.read_text().splitlines()[2]


@pytest.mark.parametrize("text,line,message", [
    (_nvml_edit([REAL_NVML_LINE[:70]]), 4, "not a whole JSON object"),  # cut mid-line (the sampler killed)
    (_nvml_edit([REAL_NVML_LINE.replace('"power_w": 78.003', '"power_w": "78 W"')]), 4,
     "power_w: '78 W' is not a number"),
    (_nvml_edit([REAL_NVML_LINE.replace('"sm_mhz": 345, ', '')]), 4, "sm_mhz: a sample without sm_mhz"),
    (_nvml_edit([REAL_NVML_LINE.replace('"gpu": 0', '"gpu": 2')]), 4, "gpu: a sample of GPU 2"),
    (_nvml_edit([REAL_NVML_LINE.replace('"reasons": 1}', '"reasons": 1, "util_jpeg": "0 %"}')]), 4,
     "util_jpeg: '0 %' is not a number"),
    (['{"telemetry": 1, "source": "dcgm", "interval_ms": 100}'], 1, "source: unknown source 'dcgm'"),
    (['{"telemetry": 2, "source": "nvml"}'], 1, "telemetry: telemetry schema 2; this kit reads 1"),
    (["timestamp, index, uuid"], 1, "not a gpu_sampler.py file (starts 'timestamp, index, uuid'"),
    ([""], 1, "not a gpu_sampler.py file (empty"),
    (_smi_edit([REAL_SMI_ROW[:60]]), 4, "3 fields where the header row names 14 (a cut line?)"),
    (_smi_edit([REAL_SMI_ROW.replace(", 345, ", ", 3x5, ")]), 4, "clocks.current.sm: '3x5' is not a number"),
    (_smi_edit([REAL_SMI_ROW.replace("05:33:04.738", "05:33:04")]), 4, "timestamp: '2026/11/28 05:33:04' is not"),
    (_smi_edit([REAL_SMI_ROW.replace("0x0000000000000001", "idle")]), 4,
     "clocks_event_reasons.active: 'idle' is not a hexadecimal bitmask"),
    (["# telemetry 1 source dcgm interval_ms 100 started 1 host vm"], 1, "source: unknown source 'dcgm'"),
    (_smi_edit([])[:2] + [REAL_SMI_ROW.replace("05:33:04.738", "05:36:04.738")], 3,
     "timestamp: the first row is +180 s from a whole zone offset"),
])
def test_bad_input_names_the_file_line_and_field(tmp_path, text, line, message):
    path = tmp_path / "bad.telemetry"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(TelemetryError) as caught:
        read(path)
    assert str(caught.value).startswith(f"{path}:{line}: {message}"), str(caught.value)


def test_a_recording_cut_mid_row_is_refused(tmp_path):
    """DERIVED: the real nvidia-smi file cut inside its last row's bitmask, which would still read as a number."""
    path = tmp_path / "cut.csv"
    path.write_text(SMI.read_text()[:-6])
    with pytest.raises(TelemetryError, match=rf"^{path}:1350: the last line has no newline: cut mid-line"):
        read(path)


def test_not_available_values_read_as_none(tmp_path):
    """DERIVED: a real row whose power and reasons the driver could not give."""
    path = tmp_path / "na.csv"
    row = REAL_SMI_ROW.replace("78.04, 78.99", "[N/A], [Not Supported]").replace("0x0000000000000001", "[N/A]")
    path.write_text("\n".join(_smi_edit([row])) + "\n")
    sample = read(path).samples[-1]
    assert (sample.power_w, sample.reasons, sample.sm_mhz) == (None, None, 345)


@pytest.mark.parametrize("dropped,power", [("power.draw.instant", [78.04, 78.05]), ("power.draw", [78.99, 77.64])])
def test_an_old_driver_names_its_reasons_throttle(tmp_path, dropped, power):
    """DERIVED: the real file with the pre-535 column name, and without one of its power columns: power_w is
    power.draw, or power.draw.instant where that is all there is."""
    lines = SMI.read_text().splitlines()[:6]
    names = [c.strip() for c in lines[1].split(",")]
    at = names.index(f"{dropped} [W]")
    lines[1] = lines[1].replace("clocks_event_reasons", "clocks_throttle_reasons")
    lines[1:] = [",".join(c for i, c in enumerate(row.split(",")) if i != at) for row in lines[1:]]
    path = tmp_path / "old.csv"
    path.write_text("\n".join(lines) + "\n")
    assert [(s.power_w, s.reasons) for s in read(path).samples[:2]] == [(power[0], 1), (power[1], 1)]


def test_a_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(TelemetryError, match=r"missing\.jsonl: no such file"):
        read(tmp_path / "missing.jsonl")


def test_a_harness_log_whose_steps_and_run_stop_disagree(tmp_path):
    """DERIVED: run 1's log less its last step line; and cut before its run_stop."""
    log = tmp_path / "short.log"
    log.write_text((HARNESS / RUNS[0]).read_text())
    rewrite_kitlog(log, lambda d: [] if d.get("event") == "step" and d["step"] == 120 else d)
    with pytest.raises(ParseError, match="a 'run_stop' record where train.py writes 'step'"):
        harness_window(log)
    log.write_text((HARNESS / RUNS[0]).read_text())
    rewrite_kitlog(log, lambda d: [] if d.get("event") in ("run_stop", "rank_stop") else d)
    with pytest.raises(ParseError, match="never stopped"):
        harness_window(log)


def test_every_sample_is_finite(nvml, smi):
    for t in (nvml, smi):
        assert all(math.isfinite(v) for s in t.samples for v in dataclasses.astuple(s) if v is not None)


# ---- the JPEG engines' utilisation (util_jpeg): sampled since a later sampler, absent from the visit's files ------

def test_files_sampled_before_util_jpeg_read_without_it(nvml, smi):
    """The visit's recordings (no util_jpeg key, no utilization.jpeg column) read as before: util_jpeg None."""
    run = RUNS[0]
    for t in (nvml, smi):
        assert t.samples and all(s.util_jpeg is None for s in t.samples)
        w = summarize(t, *harness_window(HARNESS / run))
        assert w.util_jpeg_mean is None and w.util_gpu_mean > 93


def test_util_jpeg_reads_from_either_source_and_is_averaged_over_the_window(tmp_path, nvml, smi):
    """DERIVED: the real files with the JPEG engines' utilisation added, its values copied from utilization.gpu (a
    series that varies over the window, not a JPEG measurement: no recording has one yet): appended as the sampler's
    last NVML key and as a last nvidia-smi column, so it is found by name. null and [N/A] read as None."""
    lines = NVML.read_text().splitlines()
    samples = [json.loads(line) for line in lines[1:]]
    samples[0]["util_jpeg"] = None  # NVML refused it on that sample
    for sample in samples[1:]:
        sample["util_jpeg"] = sample["util_gpu"]
    nvml_path = tmp_path / "jpeg.jsonl"
    nvml_path.write_text("\n".join([lines[0], *map(json.dumps, samples)]) + "\n")
    comment, head, *rows = SMI.read_text().splitlines()
    at = [c.strip() for c in head.split(",")].index("utilization.gpu [%]")
    rows = [f"{rows[0]}, [N/A]"] + [f"{row}, {row.split(', ')[at]}" for row in rows[1:]]
    smi_path = tmp_path / "jpeg.csv"
    smi_path.write_text("\n".join([comment, f"{head}, utilization.jpeg [%]", *rows]) + "\n")
    window = harness_window(HARNESS / RUNS[0])
    for before, path in ((nvml, nvml_path), (smi, smi_path)):
        t = read(path)
        assert t.samples[0].util_jpeg is None
        assert [s.util_jpeg for s in t.samples[1:]] == [s.util_gpu for s in t.samples[1:]]
        assert [dataclasses.replace(s, util_jpeg=None) for s in t.samples] == list(before.samples)  # nothing else
        w = summarize(t, *window)
        assert w.util_jpeg_mean == pytest.approx(w.util_gpu_mean) and w.util_jpeg_mean > 93
        assert w == dataclasses.replace(summarize(before, *window), util_jpeg_mean=w.util_jpeg_mean)
