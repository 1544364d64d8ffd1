"""A GPU run's telemetry as results carry it: harness_window() (the measured window of a harness log, read as the
kit reads its figure), run_telemetry() (each host's samples summarised over it: kit.telemetry.summarize) and
telemetry_warnings() (what the report says beside the figure)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from kit.core.inputs import InputError
from kit.core.layout import RunLog, classify, run_folder, telemetry_name
from kit.core.rundir import host_captures, read_sidecar
from kit.results import stats
from kit.results.extract import pick_rank
from kit.results.parsers import PER_STEP, ParseError, parse_log
from kit.results.parsers.kitlog import events
from kit.telemetry import Telemetry, WindowSummary, read, summarize


def harness_window(log_path: str | Path) -> tuple[float, float, int]:
    """(start_s, end_s, images) of a harness log's measured steps, in epoch seconds: from the first measured step's
    start (its time_ms - seconds) to the last one's end (its time_ms), and the images they trained (their
    global_batch). The log is parsed as for its figure first (the one reader, kit.results.parsers.harnesslog: a
    failed, unfinished or ungrammatical run raises ParseError), so its step records are exactly the measured steps."""
    parsed = parse_log(log_path, "kitlog")
    lines = {r.line for r in parsed.records if r.kind == PER_STEP}
    measured = [e.data for e in events(log_path) if e.line in lines and e.data.get("event") == "step"]
    if not measured:
        raise ParseError(log_path, "no timed step records (an epoch-timed run has no per-step window)")
    first, last = measured[0], measured[-1]
    return first["time_ms"] / 1000 - first["seconds"], last["time_ms"] / 1000, sum(e["global_batch"] for e in measured)


ZONE_STEP_S = 900  # time zones differ from UTC by whole quarter hours


def program_window(log: Path, logs_root: Path, figure, times: list[float]) -> tuple[float, float, int] | None:
    """(start_s, end_s, images) of a published program's figure in epoch seconds: from the record before its first
    used record (else that record) to its last, as the log's clock stamps them, and the global batch times the steps
    between them. A log's clock is its host's local time: it is moved to UTC by the whole quarter hours that put
    the log's first stamp nearest the run's recorded start (its command record's `started`, else the first sample).
    None where the records carry no time or step, or the window lies outside the samples."""
    try:
        records = parse_log(log, figure.format).records
    except ParseError:
        return None
    series = pick_rank([r for r in records if r.metric == figure.metric and r.kind == figure.kind
                        and r.timestamp is not None and r.step is not None], None, [])
    used = [r for r in series if figure.first_line <= r.line <= figure.last_line] if figure.first_line else []
    if len(used) < 2 or not times:
        return None
    before = [r for r in series if r.line < used[0].line and r.epoch == used[0].epoch]
    first = before[-1] if before else used[0]
    steps = sum(b.step - a.step for a, b in zip([first, *used], used, strict=False)
                if b.step > a.step and a.epoch == b.epoch)
    started = _started(Path(log)) or min(times)
    stamps = [r.timestamp for r in records if r.timestamp is not None]
    shift = round((min(stamps) - started) / ZONE_STEP_S) * ZONE_STEP_S
    start, end = first.timestamp - shift, used[-1].timestamp - shift
    if not (end > start and min(times) <= end and start <= max(times)):
        return None
    run = classify(Path(log), Path(logs_root))
    return start, end, steps * run.group.batch * run.gpus if isinstance(run, RunLog) else 0


def _started(log: Path) -> float | None:
    """The epoch second the run's command record (scripts/reference/launch.py) says it started, or None."""
    try:
        started = read_sidecar(log).get("started")
        return dt.datetime.fromisoformat(started).timestamp() if isinstance(started, str) else None
    except (InputError, ValueError, TypeError):
        return None


def captured_gpu_names(root: Path) -> dict[str, str]:
    """{GPU UUID: product name} from every host's nvidia-smi capture of the run (env/<host>/capture.json)."""
    gpus = [g for c in host_captures(root).values() if isinstance(c.get("smi"), dict)
            for g in c["smi"].get("gpus") or []]
    return {g["uuid"]: g["product_name"] for g in gpus if isinstance(g, dict)
            and isinstance(g.get("uuid"), str) and isinstance(g.get("product_name"), str)}


# ---- a run's GPU telemetry, as results.json and the report carry it ---------------------------------------------

THROTTLES = ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
THROTTLED_SHARE = 0.05  # a run throttled longer than this share of its window is flagged
BUSY_SHARE = 80.0  # mean GPU utilisation (%) below this: the GPU waited (input, launches or communication)
HOSTS_APART = 0.05  # hosts of one run whose SM clocks or power limits differ by more than this are flagged


def telemetry_files(log: Path, logs_root: Path) -> dict[str, Path]:
    """A run's samples by where they were taken: each gathered host's (hosts/<host>/<run folder>/, SSH and Slurm
    runs), else the one beside the log (a local run; for a gathered run, rank 0's copy)."""
    log, logs_root = Path(log), Path(logs_root)
    found = {}
    if logs_root.name == "logs" and (logs_root.parent / "hosts").is_dir():
        folder = run_folder(log.relative_to(logs_root))
        for host_dir in sorted(p for p in (logs_root.parent / "hosts").iterdir() if p.is_dir()):
            if (path := host_dir / folder / telemetry_name(log.name)).is_file():
                found[host_dir.name] = path
    beside = log.with_name(telemetry_name(log.name))
    if not found and beside.is_file():
        found["local"] = beside
    return found


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def _host_figures(path: Path, root: Path, tel: Telemetry, summary: WindowSummary, names: dict[str, str]) -> dict:
    return {
        "file": path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path),
        "source": tel.source, "gpus": [g.name or names.get(g.uuid or "") or g.uuid or f"GPU {g.index}"
                                       for g in tel.gpus],
        "samples": summary.samples, "coverage": _r(summary.coverage, 3), "why": summary.why or tel.why,
        "sm_mhz_median": _r(summary.sm_mhz_median, 1), "sm_ratio_min": _r(summary.sm_ratio_min, 3),
        "max_sm_mhz": _r(summary.max_sm_mhz, 1), "power_mean_w": _r(summary.power_mean_w, 1),
        "power_peak_w": _r(summary.power_peak_w, 1), "limit_w": _r(summary.limit_w, 1),
        "energy_j": _r(summary.energy_j, 3), "energy_source": summary.energy_source,
        "temp_peak_c": _r(summary.temp_peak_c, 1), "util_gpu_mean": _r(summary.util_gpu_mean, 1),
        "reasons": {k: _r(v, 3) for k, v in summary.reasons.items() if v},
    } | _jpeg(summary.util_jpeg_mean)


def _jpeg(util_jpeg_mean: float | None) -> dict:
    """{'util_jpeg_mean': %} where samples give the JPEG engines' utilisation, else nothing: the figures of samples
    taken before the sampler read it stay as they were recorded (run.json keeps them; the audit recomputes them)."""
    return {} if util_jpeg_mean is None else {"util_jpeg_mean": _r(util_jpeg_mean, 1)}


def run_telemetry(log: Path, logs_root: Path, root: Path, layout: int = 1, figure=None) -> dict | None:
    """What the GPUs of a run did, from its samples (None: the run has none, as every CPU run): over the measured
    window of a harness log; a published program's (FIGURE: its figure) over the whole sampled time in layout 1, over
    its figure's records as its own clock stamps them from layout 2 (program_window), where it stamps them; each
    host's figures and the run's (energy summed over hosts, per image of the window). Layout 2 names a GPU its
    samples give only a UUID of as the run's nvidia-smi capture does. TelemetryError for a samples file that cannot
    be read (file, line, field)."""
    files = telemetry_files(log, logs_root)
    if not files:
        return None
    read_ = {host: read(path) for host, path in files.items()}
    times = [s.t for tel in read_.values() for s in tel.samples]
    try:
        start, end, images = harness_window(log)
        window = "measured steps"
    except ParseError:
        timed = program_window(log, logs_root, figure, times) if layout > 1 and figure is not None else None
        if timed is not None:
            start, end, images = timed
            window = "timed steps"
        else:
            start, end, images = (min(times), max(times), 0) if len(times) > 1 else (0.0, 1.0, 0)
            window = "whole run"
    names = captured_gpu_names(root) if layout > 1 else {}
    hosts = {}
    summaries = {}
    for host, tel in read_.items():
        summaries[host] = summarize(tel, start, end, images) if end > start else None
        hosts[host] = _host_figures(files[host], root, tel, summaries[host], names)
    energies = [s.energy_j for s in summaries.values() if s is not None]
    energy = sum(energies) if energies and len(energies) == len(summaries) and None not in energies else None
    sources = {s.energy_source for s in summaries.values() if s is not None}
    throttled = {name: max((h["reasons"].get(name, 0.0) for h in hosts.values()), default=0.0) for name in THROTTLES}
    busy = [h["util_gpu_mean"] for h in hosts.values() if h["util_gpu_mean"] is not None]
    jpeg = [h["util_jpeg_mean"] for h in hosts.values() if h.get("util_jpeg_mean") is not None]
    return {
        "window": window, "seconds": _r(end - start, 3), "images": images,
        "energy_j": _r(energy, 3),
        "energy_source": (sources.pop() if len(sources) == 1 else "mixed") if energy else None,
        "j_per_image": _r(energy / images, 5) if energy and images else None,
        "images_per_s_per_w": _r(images / energy, 4) if energy and images else None,
        "throttled": {k: v for k, v in throttled.items() if v},
        "util_gpu_mean": _r(sum(busy) / len(busy), 1) if busy else None,
        **_jpeg(sum(jpeg) / len(jpeg) if jpeg else None),
        "hosts": hosts,
    }


def telemetry_warnings(tele: dict | None, input_rate: float | None = None, figure: float | None = None,
                       nodes: int = 1) -> list[str]:
    """What a run's telemetry says beside its figure: throttling over THROTTLED_SHARE of the window, a GPU busy
    less than BUSY_SHARE (with what the other records point to), hosts whose clocks or power limits differ by
    more than HOSTS_APART."""
    if not tele:
        return []
    out = [f"throttled ({name}) {share:.0%} of the window" for name, share in sorted(tele["throttled"].items())
           if share > THROTTLED_SHARE]
    busy = tele.get("util_gpu_mean")
    if busy is not None and busy < BUSY_SHARE:
        if input_rate and figure and figure >= 0.9 * input_rate:
            cause = f"input-bound: the loader alone gives {input_rate:.0f} images/s"
        elif nodes > 1:
            cause = "communication- or launch-bound (several nodes)"
        else:
            cause = "launch- or input-bound (no loader probe says which)"
        out.append(f"GPU busy {busy:.0f}% of the window: {cause}")
    for key, what in (("sm_mhz_median", "SM clocks"), ("limit_w", "power limits")):
        values = [h[key] for h in tele["hosts"].values() if h.get(key)]
        if len(values) > 1 and max(values) > (1 + HOSTS_APART) * min(values):
            out.append(f"hosts' {what} differ: {min(values):g} to {max(values):g}")
    return out


def _cell(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def telemetry_markdown(cases, input_rate=lambda run: None, layout: int = 1) -> str:
    """The report's table of what the GPUs did in each run of a group's CASES (kit.results.report.CaseResult) that
    was sampled, then the warnings; "" when none was. input_rate(run): the loader's own rate, where probed."""
    rows, warnings = [], []
    for case in cases:
        for run in case.runs:
            tele = run.telemetry
            if tele is None:
                continue
            hosts = tele["hosts"].values()
            clocks = [h["sm_mhz_median"] for h in hosts if h["sm_mhz_median"]]
            top = [h["max_sm_mhz"] for h in hosts if h["max_sm_mhz"]]
            power = sum(h["power_mean_w"] for h in hosts if h["power_mean_w"])
            limit = sum(h["limit_w"] for h in hosts if h["limit_w"])
            gpus = ", ".join(sorted({g for h in hosts for g in h["gpus"]})) or "no GPU sampled"
            why = "; ".join(sorted({h["why"] for h in hosts if h["why"]}))
            clock = f"{min(clocks):.0f} of {max(top):.0f} MHz" if clocks and top else ""
            throttled = ", ".join(f"{k} {v:.0%}" for k, v in sorted(tele["throttled"].items()))
            source = tele["energy_source"]
            energy = _cell(tele["j_per_image"], ".4f") + (f" ({source})" if source else "")
            hottest = max((h["temp_peak_c"] for h in hosts if h["temp_peak_c"]), default=None)
            samples = sum(h["samples"] or 0 for h in hosts)
            jpeg = tele.get("util_jpeg_mean")
            busy = _cell(tele["util_gpu_mean"], ".0f") + (f" (JPEG {jpeg:.0f})" if jpeg is not None else "")
            window = f"{tele['window']}: {tele['seconds']:g} s, {samples} samples"
            rows.append(f"| {case.name} | {run.log.run} | {gpus} | {window} | {clock} "
                        f"| {f'{power:.0f} / {limit:.0f} W' if power else ''} | {energy} "
                        f"| {_cell(tele['images_per_s_per_w'], '.2f')} | {_cell(hottest, '.0f')} "
                        f"| {busy} | {throttled or 'none'} | {why} |")
            warnings += [f"- {case.name} run {run.log.run}: {w}" for w in telemetry_warnings(
                tele, input_rate(run), run.figure.value, case.nodes)]
    if not rows:
        return ""
    program = "over its timed steps by its log's clock (else its whole run)" if layout > 1 else "over its whole run"
    head = ["", f"What the GPUs did (a harness run over its measured steps, a published program {program}; "
            "SM clock: the median, of the GPUs' maximum; J/image from NVML's energy counter, "
            "else the power integrated):", "",
            "| case | run | GPUs | window | SM clock | power mean / limit | J/image | images/s per W | peak °C "
            "| GPU busy % | throttled | note |",
            "| ---- | --- | ---- | ------ | -------- | ------------------ | ------- | -------------- | ------- "
            "| ---------- | --------- | ---- |"]
    return "\n".join(head + rows + ([""] + warnings if warnings else [])) + "\n"


TELEMETRY_COLUMNS = ("j_per_image", "images_per_s_per_w", "sm_mhz_median", "power_mean_w", "throttled_share")


def telemetry_cells(case) -> list[str]:
    """results.csv's telemetry cells of CASE (kit.results.report.CaseResult), its sampled runs' median of each:
    J/image, images/s per W, SM clock, power (hosts summed), the largest share of the window under a throttle
    reason; '' where no run gives one."""
    teles = [r.telemetry for r in case.runs if r.telemetry]

    def med(values: list) -> str:
        values = [v for v in values if v is not None]
        return repr(stats.median(values)) if values else ""

    hosts = [list(t["hosts"].values()) for t in teles]
    return [med([t["j_per_image"] for t in teles]), med([t["images_per_s_per_w"] for t in teles]),
            med([min((x["sm_mhz_median"] for x in h if x["sm_mhz_median"]), default=None) for h in hosts]),
            med([sum(x["power_mean_w"] for x in h if x["power_mean_w"]) or None for h in hosts]),
            med([max(t["throttled"].values(), default=0.0) for t in teles])]
