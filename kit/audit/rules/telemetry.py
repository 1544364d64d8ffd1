"""What a GPU run's samples must hold (rule set v4): every run of a run whose run.json says its GPUs were sampled
has its samples file (scripts/telemetry/gpu_sampler.py's, raw; or the file's own reason why it has none), each file
reads, its clocks run forward, its energy counter never goes back, it covers the measured window of a harness run,
and the counter's energy agrees with the power integrated over that window. The figures themselves (J/image,
clocks, throttling) are recomputed with results.json (results_recomputed); from v5 (gpu_telemetry_holds@2) also
run.json's own copy of each run's figures (its runs' `telemetry`, written as each run ended). Pure; registered in
kit.audit.rules.predicates.PREDICATES like every predicate."""

from __future__ import annotations

from dataclasses import replace

from kit.audit.evidence import Evidence
from kit.audit.rules.derived import json_differences, json_line
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.core.yamlio import LineDict
from kit.results.gpu_telemetry import harness_window, run_telemetry, telemetry_files
from kit.results.parsers import ParseError
from kit.telemetry import TelemetryError, read, summarize
from kit.telemetry.window import INTEGRATED

MIN_COVERAGE = 0.8  # of a harness run's measured window
ENERGY_AGREEMENT = 0.25  # counter vs integrated power (power.draw averages over ~1 s: 10% off on a ramp, measured)


@predicate(versions={1: {"run_json_copy": False}, 2: {"run_json_copy": True},
                     3: {"run_json_copy": True, "by_files": True, "identity": True}})
def gpu_telemetry_holds(ev: Evidence, out: Finding, run_json_copy: bool = False, by_files: bool = False,
                        identity: bool = False) -> None:
    """Each run of a sampled GPU run (run.json gpu_telemetry) has samples that read, run forward in time, keep a
    rising energy counter, cover at least MIN_COVERAGE of a harness run's measured window, and whose counter agrees
    with the power integrated over it within ENERGY_AGREEMENT; with RUN_JSON_COPY, the figures run.json keeps for a
    run are the ones its samples give. BY_FILES (@3): a run is sampled when any of its runs left samples, whatever
    run.json says (the report's J/image is computed from any samples file beside a log). IDENTITY (@3): the samples
    are of a host the run captured, of its GPUs (UUID and name) at its power limit."""
    logs_root = ev.root / "logs"
    sampled = ev.meta.get("gpu_telemetry") or (by_files and any(telemetry_files(log.path, logs_root)
                                                                 for _key, log, _figure in ev.runs()))
    if not sampled:
        cpu = ev.suite is not None and ev.suite.hardware == "cpu"
        out.note = ("a CPU suite: no GPU to sample (each run's host load is run.json's host_load)" if cpu
                    else "run.json records no GPU sampler (a run from before the sampler)")
        return
    without = 0
    for key, log, _figure in ev.runs():
        out.checked += 1
        if run_json_copy:
            _run_json_copy_holds(ev, out, key, log)
        files = telemetry_files(log.path, logs_root)
        if not files:
            out.fail(f"{key} run {log.run}: no GPU samples (its run's GPUs were sampled: "
                     f"{'run.json says so' if ev.meta.get('gpu_telemetry') else 'other runs left samples'})",
                     ev.rel(log.path))
            continue
        for host, path in files.items():
            where = ev.rel(path)
            try:
                tel = read(path)
            except TelemetryError as exc:
                out.fail(f"{key} run {log.run} ({host}): {exc.key + ': ' if exc.key else ''}{exc.reason}", where,
                         exc.line)
                continue
            if tel.source is None:
                without += 1  # the sampler said why it had none (no driver, no GPU): a recorded reason
                continue
            for problem in _ordered(tel) + (_identity(tel, host, ev.captures) if identity else []):
                out.fail(f"{key} run {log.run} ({host}): {problem}", where)
            try:
                start, end, images = harness_window(log.path)
            except ParseError:
                continue  # a published program's run: no measured window of the kit's to cover
            whole = summarize(tel, start, end, images)
            if whole.coverage < MIN_COVERAGE:
                out.fail(f"{key} run {log.run} ({host}): the samples cover {whole.coverage:.0%} of the measured "
                         f"window (at least {MIN_COVERAGE:.0%})", where)
            elif whole.energy_source != INTEGRATED and whole.energy_j:
                integrated = summarize(_without_counter(tel), start, end, images).energy_j
                if integrated and abs(integrated / whole.energy_j - 1) > ENERGY_AGREEMENT:
                    out.fail(f"{key} run {log.run} ({host}): the energy counter gives {whole.energy_j:.1f} J over "
                             f"the measured window, the power integrated {integrated:.1f} J", where)
    if without:
        out.note = f"{without} samples file(s) say why their host had no GPU telemetry"


def _run_json_copy_holds(ev: Evidence, out: Finding, key: str, log) -> None:
    """run.json's `telemetry` of this run (where it keeps one) is what the samples give, field by field."""
    rel = ev.rel(log.path)
    entry = (ev.meta.get("runs") or {}).get(rel)
    if not isinstance(entry, dict) or "telemetry" not in entry:
        return
    try:
        want = run_telemetry(log.path, ev.root / "logs", ev.root)
    except TelemetryError:
        return  # the samples' own fault, named below
    if want is None:
        return  # no samples: named below
    lines = ev.lines_of("run.json")
    for path, have, wanted in list(json_differences(entry["telemetry"], want))[:3]:
        out.fail(f"{key} run {log.run}: run.json's telemetry.{path} is {have!r}, its samples give {wanted!r}",
                 "run.json", _line_of_entry(lines, rel, path))


def _line_of_entry(lines: LineDict | None, rel: str, path: str) -> int | None:
    """The line of runs[REL].telemetry.PATH in run.json (REL holds dots: walked by hand)."""
    runs = (lines or {}).get("runs")
    if not isinstance(runs, LineDict):
        return None
    return json_line(runs.get(rel), f"telemetry.{path}") or runs.line_of(rel)


LIMIT_SLACK_W = 1.0  # nvidia-smi prints the limit to 2 decimals, NVML in mW
# one clock step; the H200 visit's 1386 NVML and 1348 nvidia-smi samples reach the max (1980, 3201 MHz), never above
CLOCK_SLACK_MHZ = 15


def _identity(tel, gathered_from: str, captures: dict) -> list[str]:
    """The samples name a host the run captured (the one they were gathered from), and each GPU they name is one
    of that host's by UUID, with its name, power limit (every sample's limit too) and clocks' range (every sample's
    clocks within the captured maxima)."""
    if not captures:
        return []
    host = tel.host if gathered_from == "local" else gathered_from
    if gathered_from != "local" and tel.host not in (None, gathered_from):
        return [f"the samples name host {str(tel.host)[:40]!r}, gathered from {gathered_from!r}"]
    capture = captures.get(host, (None,))[0]
    if host not in captures:
        return [f"the samples name host {str(host)[:40]!r}, none of the hosts the run captured "
                f"({', '.join(sorted(captures))})"]
    if capture is None or not capture.has_gpu:
        return [f"samples of GPUs on host {host!r}, whose capture shows none"]
    by_uuid = {g.uuid: g for g in capture.smi.gpus if g.uuid}
    problems, limits = [], {}
    for gpu in tel.gpus:
        cap = by_uuid.get(gpu.uuid)
        if cap is None:
            problems.append(f"GPU {gpu.index} ({str(gpu.uuid)[:48]}) is none of host {host!r}'s GPUs")
            continue
        if gpu.name is not None and gpu.name != cap.product_name:
            problems.append(f"GPU {gpu.index} is named {gpu.name[:40]!r}, host {host!r} captured it as "
                            f"{cap.product_name!r}")
        limits[gpu.index] = cap.power_limit_w
        problems += _clock_range(tel, gpu, cap, host)
    off = next((s for s in tel.samples if s.limit_w is not None and limits.get(s.gpu) is not None
                and abs(s.limit_w - limits[s.gpu]) > LIMIT_SLACK_W), None)
    if off is not None:
        problems.append(f"GPU {off.gpu}'s samples say power limit {off.limit_w:g} W, host {host!r} captured "
                        f"{limits[off.gpu]:g} W")
    return problems


def _clock_range(tel, gpu, cap, host: str) -> list[str]:
    """The GPU's maximum clocks as its samples state them are the captured ones, and no sample's clock is above
    them (by more than CLOCK_SLACK_MHZ)."""
    problems = []
    for what, stated, captured, field in (("SM", gpu.max_sm_mhz, cap.max_sm_clock_mhz, "sm_mhz"),
                                          ("memory", gpu.max_mem_mhz, cap.max_mem_clock_mhz, "mem_mhz")):
        if captured is None:
            continue
        if stated is not None and abs(stated - captured) > CLOCK_SLACK_MHZ:
            problems.append(f"GPU {gpu.index}'s samples state a maximum {what} clock of {stated:g} MHz, host "
                            f"{host!r} captured {captured:g} MHz")
            continue
        high = next((s for s in tel.samples if s.gpu == gpu.index and getattr(s, field) is not None
                     and getattr(s, field) > captured + CLOCK_SLACK_MHZ), None)
        if high is not None:
            problems.append(f"GPU {gpu.index}'s {what} clock {getattr(high, field):g} MHz at t={high.t:.3f} is above "
                            f"the {captured:g} MHz maximum host {host!r} captured")
    return problems


def _ordered(tel) -> list[str]:
    """Each GPU's samples run forward in time and its energy counter never goes back."""
    problems, last = [], {}
    for i, s in enumerate(tel.samples, 1):
        t, energy = last.get(s.gpu, (None, None))
        if t is not None and s.t <= t:
            problems.append(f"sample {i} of GPU {s.gpu} is not after the one before it ({s.t:.3f} <= {t:.3f})")
        if energy is not None and s.energy_mj is not None and s.energy_mj < energy:
            problems.append(f"sample {i} of GPU {s.gpu}: the energy counter went back ({s.energy_mj} < {energy} mJ)")
        last[s.gpu] = (s.t, s.energy_mj if s.energy_mj is not None else energy)
    return problems[:5]


def _without_counter(tel):
    return replace(tel, samples=tuple(replace(s, energy_mj=None) for s in tel.samples))
