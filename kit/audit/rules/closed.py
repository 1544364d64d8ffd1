"""The closed world of a harness log (rule set v3; @2 in v4 closes it field by field, tests/test_fuzz.py): every
record that could feed a figure is one the harness writes,
and each agrees with its run_start, its case, its neighbours and the host it names; repeats are runs of their own.
Pure; registered in kit.audit.rules.predicates.PREDICATES like every predicate.

What a harness log may hold (scripts/harness/train.py): one run_start, then input_rate, compile, warmup_end, step,
corpus and epoch records, one run_stop, and a rank_stop per rank; nothing else is a :::KITLOG or :::MLLOG record.
The figure is read from these same step (epoch) records, by the same reader (kit.results.parsers.harnesslog), whose
grammar refuses any other record, byte or order, so no record outside the checked ones can reach it.
"""

from __future__ import annotations

import statistics

from kit.audit.evidence import Evidence, finite
from kit.audit.rules.findings import Finding
from kit.audit.rules.predicates import predicate
from kit.core.catalogue import contract, harness

EVENTS = ("run_start", "input_rate", "compile", "warmup_end", "step", "corpus", "epoch", "run_stop", "rank_stop")
STEP_FIELDS = ("framework", "model", "precision", "ranks", "layout", "mode")  # what a step repeats of run_start
SAME_SECONDS = 1e-6  # two repeats whose step seconds all agree this closely are one run's clock, copied
MAX_PROBLEMS = 5  # per log: the first ones, then a count


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def expected_start(case) -> dict:
    """The run_start fields a case fixes beyond the contract's checked keys (harness_log_states_its_case@3 compares
    those): the global batch."""
    return {"global_batch": case.batch_size * case.processes}


# the gpu loader's batched decoders by where they decode (scripts/harness/loader_gpu.py: each decoder's name)
GPU_DECODERS = {"gpu": ("torchvision.io.decode_jpeg", "nvidia.nvimgcodec.Decoder", "paddle.vision.ops.decode_jpeg"),
                "cpu": ("pillow",)}
SAME_IN_REPEATS = ("params", "optimizer", "data", "math", "amp_effective", "channels_last", "device_name")
RATE_TOLERANCE = 1e-3  # a step's samples_per_sec against global_batch / seconds (both rounded as written)


NO_AUTOCAST = tuple(p for p, m in contract.MATH.items() if m.autocast is None)  # fp32, tf32 (the contract's table)
NO_TF32 = tuple(p for p, m in contract.MATH.items() if not m.tf32)  # fp32


def _math_problems(start: dict) -> list[str]:
    """What run_start says of its math against its precision and device, as the contract's MATH table means them
    (scripts/harness/precision.py sets them): no autocast where the mode has none; a held mode's autocast on a GPU
    (on a CPU none: AMP runs FP32 there); no TF32 where the mode allows none; the layout's channels_last and
    amp_effective agree with the rest."""
    out = []
    precision, device, math = start.get("precision"), start.get("device"), start.get("math")
    if isinstance(math, dict):
        autocast, mode = math.get("autocast"), contract.MATH.get(precision)
        want = (mode.autocast if device == "gpu" else None) if mode is not None and mode.held else autocast
        if "autocast" in math and autocast != want:
            out.append(f"math autocast {autocast!r} on a {precision} run on {device} ({want!r})")
        if precision in NO_TF32 and any(math.get(k) is True for k in ("tf32_matmul", "tf32_conv")):
            out.append(f"math allows TF32 on an {precision} run")
        if "amp_effective" in start and "autocast" in math and start["amp_effective"] != (autocast is not None):
            out.append(f"amp_effective {start['amp_effective']!r} with autocast {autocast!r}")
    elif "amp_effective" in start and precision in NO_AUTOCAST and start["amp_effective"] is not False:
        out.append(f"amp_effective {start['amp_effective']!r} on a {precision} run")
    if "channels_last" in start and "layout" in start and start["channels_last"] != (start["layout"] == "nhwc"):
        out.append(f"channels_last {start['channels_last']!r} with layout {start['layout']!r}")
    return out


def _device_problems(start: dict, hardware: str | None, captures: dict, strict: bool = False) -> list[str]:
    """The log's device against the suite's hardware and the capture of the host it names (strict: a CPU's name
    too)."""
    out = []
    device, name, host = start.get("device"), start.get("device_name"), start.get("host")
    if hardware == "cpu" and device != "cpu":
        out.append(f"device {device!r} on a cpu suite")
    elif hardware not in (None, "cpu") and device != "gpu":
        out.append(f"device {device!r} on a {hardware} suite (a GPU suite)")
    if captures and host not in captures:
        out.append(f"host {host!r} is none of the hosts the run captured ({', '.join(sorted(captures))})")
        return out
    capture = captures.get(host, (None,))[0] if captures else None
    if capture is not None and device == "gpu":
        names = {g.product_name for g in capture.smi.gpus} if capture.has_gpu else set()
        if not names:
            out.append(f"device gpu, but host {host!r} has no GPU in its capture")
        elif name not in names:
            out.append(f"device_name {name!r}, but host {host!r} has {', '.join(sorted(map(str, names)))}")
    elif strict and capture is not None and device == "cpu" and capture.cpu.model_name and \
            name != capture.cpu.model_name:
        out.append(f"device_name {name!r}, but host {host!r} is a {capture.cpu.model_name!r}")
    return out


def _records(ev: Evidence, path) -> tuple[list[tuple[int, str]], list]:
    """(line, problem) for every record that is not one the harness writes, and the :::KITLOG events (the one
    reader's, kit.results.parsers.harnesslog, whose grammar already refused any other line of a log with a figure)."""
    found = ev.events(path)
    return [(e.line, f"an unknown record {e.data.get('event')!r}") for e in found
            if e.data.get("event") not in EVENTS], found


def _step_problems(found: list, start: dict, strict: bool = False) -> list[tuple[int, str]]:
    """Each step (epoch) record: its own clock and batch, agreeing with run_start and with the record before
    (strict: its samples_per_sec is its batch over its seconds)."""
    out: list[tuple[int, str]] = []
    steps = [e for e in found if e.data.get("event") == "step"]
    epochs = [e for e in found if e.data.get("event") == "epoch"]
    first = (start.get("warmup_steps") or 0) + 1
    for index, e in enumerate(steps):
        d = e.data
        if not finite(d.get("time_ms")) or not finite(d.get("seconds")) or d["seconds"] <= 0:
            out.append((e.line, "a step without its own clock (time_ms and seconds > 0)"))
        if d.get("global_batch") != start.get("global_batch") and d.get("timing") != "epochs":
            out.append((e.line, f"a step of global_batch {d.get('global_batch')!r} (run_start: "
                                f"{start.get('global_batch')!r})"))
        differ = [f"{k} {d[k]!r}" for k in STEP_FIELDS if k in d and k in start and d[k] != start[k]]
        if differ:
            out.append((e.line, "a step that says " + ", ".join(differ) + " (run_start differs)"))
        if strict and finite(d.get("samples_per_sec")) and finite(d.get("seconds")) and d["seconds"] > 0 \
                and _int(d.get("global_batch")) and \
                abs(d["samples_per_sec"] - d["global_batch"] / d["seconds"]) > \
                RATE_TOLERANCE * d["samples_per_sec"] + 0.002:
            out.append((e.line, f"a step of {d['samples_per_sec']!r} samples/s where its batch over its seconds is "
                                f"{d['global_batch'] / d['seconds']:.3f}"))
        if d.get("timing") != "epochs" and d.get("step") != first + index:
            out.append((e.line, f"step {d.get('step')!r} where step {first + index} is due"))
        if index and finite(d.get("time_ms")) and finite(steps[index - 1].data.get("time_ms")) \
                and d["time_ms"] < steps[index - 1].data["time_ms"]:
            out.append((e.line, "a step earlier on the clock than the step before it"))
    if not epochs and _int(start.get("measure_steps")) and len(steps) != start["measure_steps"]:
        out.append((steps[-1].line if steps else 1, f"{len(steps)} step records for measure_steps "
                                                    f"{start['measure_steps']}"))
    for e in epochs:
        if not finite(e.data.get("time_ms")) or not finite(e.data.get("seconds")) or e.data["seconds"] <= 0:
            out.append((e.line, "an epoch without its own clock (time_ms and seconds > 0)"))
    if epochs and _int(start.get("measure_epochs")) and len(epochs) != start["measure_epochs"]:
        out.append((epochs[-1].line, f"{len(epochs)} epoch records for measure_epochs {start['measure_epochs']}"))
    return out


@predicate(versions={1: {"strict": False}, 2: {"strict": True}})
def harness_log_closed(ev: Evidence, out: Finding, strict: bool) -> None:
    """A harness log holds only the harness's records; its run_start states the case's global batch, sizes, steps
    or epochs, no loader-only timing, the suite's kind of device on a host the run captured (with that host's GPU);
    every step or epoch record carries its own clock and batch, agreeing with run_start and the record before.
    From @2: its math agrees with its precision and device (and channels_last with its layout), a CPU's name with
    the host's capture, no image read outside the data root, each step's rate with its batch and seconds, and the
    case's repeats state the same model, optimizer, data and math."""
    hardware = ev.suite.hardware if ev.suite else None
    seen: dict[str, dict[str, tuple[object, str, int]]] = {}  # case -> field -> (value, first log, its line)
    for key, log, _figure in ev.runs():
        case = ev.cases.get(key)
        if case is None or case.impl != "harness":
            continue
        out.checked += 1
        rel = ev.rel(log.path)
        problems, found = _records(ev, log.path)
        starts = [e for e in found if e.data.get("event") == "run_start"]
        stops = [e for e in found if e.data.get("event") == "run_stop"]
        if len(starts) != 1 or len(stops) != 1:
            problems.append((1, f"{len(starts)} run_start and {len(stops)} run_stop records (one each)"))
        if starts:
            start = starts[0].data
            wrong = [f"{k} {start.get(k)!r} (the case: {v!r})" for k, v in expected_start(case).items()
                     if start.get(k) != v]
            if start.get("loader_only", False) is not False:  # older logs state none: they trained
                wrong.append(f"loader_only {start.get('loader_only')!r}: the loader was timed alone, no training")
            if start.get("allow_outside_root", False) is not False:  # no case gives train.py that flag
                wrong.append(f"allow_outside_root {start.get('allow_outside_root')!r}: it read "
                             f"{start.get('outside_root')!r} image(s) outside its data root")
            if _int(start.get("local_batch")) and _int(start.get("ranks")) and \
                    start.get("global_batch") != start["local_batch"] * start["ranks"]:
                wrong.append(f"global_batch {start.get('global_batch')!r} is not local_batch x ranks")
            wrong += _device_problems(start, hardware, ev.captures, strict)
            if strict:
                wrong += _math_problems(start)
                if stops:
                    problems += [(stops[-1].line, "run_stop says " + why)
                                 for why in _decode_problems(start, stops[-1].data)]
                model = harness.MODELS.get(start.get("model"))
                if model is not None and start.get("optimizer") not in (None, model.optimizer):
                    wrong.append(f"optimizer {start.get('optimizer')!r} ({model.name}'s is {model.optimizer!r})")
                if _int(start.get("outside_root")) and start["outside_root"] > 0 and \
                        start.get("allow_outside_root", False) is False:
                    wrong.append(f"it read {start['outside_root']} image(s) outside its data root")
                argv = ((ev.meta.get("runs") or {}).get(rel) or {}).get("argv") or []
                if "--data" in argv[:-1] and start.get("data") != argv[argv.index("--data") + 1]:
                    wrong.append(f"data {start.get('data')!r} where run.json's command gave "
                                 f"{argv[argv.index('--data') + 1]!r}")
                for field in SAME_IN_REPEATS:
                    first = seen.setdefault(key, {}).setdefault(field, (start.get(field), rel, starts[0].line))
                    if start.get(field) != first[0]:
                        wrong.append(f"{field} {start.get(field)!r} where {first[1]}:{first[2]} says {first[0]!r}")
            if wrong:
                problems.append((starts[0].line, "run_start says " + "; ".join(wrong)))
            problems += _step_problems(found, start, strict)
        for line, message in sorted(problems)[:MAX_PROBLEMS]:
            out.fail(f"{key} run {log.run}: {message}", rel, line)
        if len(problems) > MAX_PROBLEMS:
            out.fail(f"{key} run {log.run}: {len(problems) - MAX_PROBLEMS} more record(s) of the same kind", rel)


def _decode_problems(start: dict, stop: dict) -> list[str]:
    """The gpu loader's decoder against where it decoded, and run_stop's decode counts (logs that state them): at
    most one batched call a batch, no refused batch in a run that succeeded."""
    out = []
    if start.get("loader") == "gpu" and start.get("decoder") not in GPU_DECODERS.get(start.get("decode_device"), ()):
        out.append(f"decoder {start.get('decoder')!r} decoding on {start.get('decode_device')!r}")
    if "decode_calls" in stop or "decoded_batches" in stop or "refused_batches" in stop:
        calls, batches, refused = (stop.get(k) for k in ("decode_calls", "decoded_batches", "refused_batches"))
        if not all(_int(v) and v >= 0 for v in (calls, batches, refused)) or start.get("loader") != "gpu":
            out.append(f"decode counts {calls!r}/{batches!r}/{refused!r} (calls/batches/refused) from loader "
                       f"{start.get('loader')!r}")
        elif calls > batches or (refused and stop.get("status") == "success"):
            out.append(f"{calls} decode calls for {batches} batches, {refused} refused, in a run that succeeded")
    return out


def _window(found: list) -> tuple[float, float] | None:
    times = [e.data["time_ms"] for e in found if e.data.get("event") in ("run_start", "run_stop")
             and finite(e.data.get("time_ms"))]
    return (min(times), max(times)) if len(times) >= 2 else None


# two repeats whose step seconds one straight line maps onto each other this closely (RMS of the residual, in s, or
# as a share of the mean step) are one run's clock, copied: moved, shifted (+5 us a step) or scaled. Measured on every
# pair of genuine repeats the kit holds (tests/fixtures: the H200 visit's ResNet50/VGG16 tf32 and amp, 20-100 steps;
# the fuzz run's CPU pair): 5.5e-05 s at least (4.7e-04 of the mean step); a copy, 3e-07 s (the 6 decimals written)
AFFINE_COPY_S, AFFINE_COPY_SHARE = 2e-6, 5e-5
# a line through fewer steps fits genuine noise too closely by chance (1 in 12 for 3 steps, under 1e-6 from 8)
AFFINE_MIN_STEPS = 8


def affine_residual(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """The RMS of b less the least-squares line through (a, b) (a constant a: b less its mean)."""
    try:
        slope, intercept = statistics.linear_regression(a, b)
    except statistics.StatisticsError:
        slope, intercept = 0.0, statistics.fmean(b)
    return statistics.fmean((y - slope * x - intercept) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5


@predicate(versions={1: {"affine": False}, 2: {"affine": True}})
def repeats_are_separate_runs(ev: Evidence, out: Finding, affine: bool) -> None:
    """A case's repeats are runs of their own processes: their clocks (run_start .. run_stop) never overlap, and no
    two have the same step (epoch) seconds; AFFINE (@2): nor seconds one straight line maps onto another's within
    AFFINE_COPY_S (or AFFINE_COPY_SHARE of the mean step): a copy shifted or scaled."""
    by_case: dict[str, list] = {}
    for key, log, _figure in ev.runs():
        case = ev.cases.get(key)
        if case is not None and case.impl == "harness":
            by_case.setdefault(key, []).append(log)
    for key, logs in sorted(by_case.items()):
        out.checked += 1
        seen: list[tuple[object, tuple[float, float] | None, tuple[float, ...]]] = []
        for log in logs:
            found = ev.events(log.path)
            window = _window(found)
            seconds = tuple(e.data.get("seconds") for e in found if e.data.get("event") in ("step", "epoch")
                            and finite(e.data.get("seconds")))
            for other, other_window, other_seconds in seen:
                if window and other_window and window[0] <= other_window[1] and other_window[0] <= window[1]:
                    out.fail(f"{key}: runs {other.run} and {log.run} ran at the same time on their clocks "
                             "(time_ms): one run's records, or two copies", ev.rel(log.path))
                elif seconds and len(seconds) == len(other_seconds) and all(
                        abs(a - b) <= SAME_SECONDS for a, b in zip(seconds, other_seconds, strict=True)):
                    out.fail(f"{key}: runs {other.run} and {log.run} have the same {len(seconds)} step seconds: "
                             "one run's clock, copied", ev.rel(log.path))
                elif affine and len(seconds) >= AFFINE_MIN_STEPS and len(seconds) == len(other_seconds) and (
                        residual := affine_residual(other_seconds, seconds)) <= max(
                        AFFINE_COPY_S, AFFINE_COPY_SHARE * sum(seconds) / len(seconds)):
                    out.fail(f"{key}: runs {other.run} and {log.run} have step seconds one straight line maps onto "
                             f"each other within {residual:.1e} s (genuine repeats: 5.5e-05 s or more): one run's "
                             "clock, copied and shifted or scaled", ev.rel(log.path))
            seen.append((log, window, seconds))
