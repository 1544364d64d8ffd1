"""What the GPU checks share (bench/gpu_proof.py, bench/gpu_check.py, bench/loader_gpu_check.py): a time budget,
subprocesses under timeouts, each stage's measurements, and verdicts against targets by the kit's own noise rule
(kit.results.stats.ratio_check / ratio_target / figure_target: a target is met or missed only when the interval of
the figure or ratio lies wholly on one side of it; otherwise the verdict says inconclusive, or untested with one run).

Stages (each returns Rows for the summary table and writes what it measured under its output folder):
    interleave_stage  real JPEGs against synthetic data in windows of one process (bench/loader_interleave.py),
                      beside the GPU sampler
    suite_stage       kit check-env + kit bench --suite S + kit bundle + kit verify + the torchvision yardstick,
                      one process per repeat
    loader_stage      real JPEGs through a harness loader against synthetic data, interleaved train.py runs
    program_stage     kit bench of a suite pairing a published program with the harness at the same settings
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kit.config.suites import load_suite  # noqa: E402
from kit.core.inputs import InputError  # noqa: E402
from kit.core.layout import split_tag  # noqa: E402
from kit.results import stats  # noqa: E402
from kit.telemetry.reader import read as read_telemetry  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_results import (  # noqa: E402, F401  (the rows and the run directory's figures; gs.Row etc.)
    FIGURE_TARGETS,
    Row,
    completion_note,
    figure_row,
    gpu_name,
    keep,
    kitlog_figure,
    log_figures,
    new_run_dir,
    ratio_row,
    repeat_of,
    run_figures,
    table,
    telemetry_row,
    verdict_line,
)
from yardstick import MODELS as YARDSTICK_MODELS  # noqa: E402  (the models torchvision builds, one copy)

HARNESS = REPO / "scripts" / "harness" / "train.py"
YARDSTICK = REPO / "bench" / "yardstick.py"
MAKE_TREE = REPO / "data_prep" / "make_synthetic_imagenet.py"
YARDSTICK_PROCESS_S = 19  # one yardstick process of one window, start included (as a harness process: 14-24 s)
YARDSTICK_ROUNDS_KEPT = 2  # rounds of yardstick processes kit bench leaves the stage time for (a third if it can)
BUNDLE_S = 20  # kit bundle + kit verify of a one-GPU run
GRACE_S = 20  # after SIGINT at a timeout, before SIGKILL: the kit ends a run cleanly and writes what it has
STOP_GRACE_S = 3  # the same when this process itself is stopped (Ctrl-C, SIGTERM): the machine may go soon
RATIO_TARGET = 0.97  # harness / torchvision yardstick, same setting
LOADER_TARGET = 0.90  # real JPEGs through the gpu loader / synthetic
LOADER_ALONE_TARGET = 1.5  # the gpu loader alone / the synthetic training rate
INTERLEAVE = REPO / "bench" / "loader_interleave.py"
SAMPLER = REPO / "scripts" / "telemetry" / "gpu_sampler.py"
SAMPLER_INTERVAL_MS = 200  # the kit's rate beside a run
PROGRAM_TARGET = 0.95  # harness / the published program, same setting
PROGRAM_SECTION = "### The kit's harness ÷ the published program, same setting"  # kit.results.program_ratio
LOADER_CLASSES = 8


@dataclass
class Budget:
    """Seconds for the whole check, counted from its start."""

    total_s: float
    start: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.total_s - self.elapsed()


@dataclass
class Done:
    argv: list[str]
    returncode: int | None  # None: killed at its timeout
    seconds: float
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self) -> str:
        if self.returncode is None:
            return f"timed out after {self.seconds:.0f} s"
        said = last_error(self.stderr) or last_error(self.stdout)
        return f"exit {self.returncode}: {said}" if said else f"exit {self.returncode} (its output is above)"


EXCEPTION_LINE = re.compile(r"([A-Za-z_]\w*\.)*[A-Za-z_]\w*(: .*)?")  # "ValueError: ...", "torch.OutOfMemoryError"


def last_error(text: str) -> str:
    """What a process said of its end: the exception line of its last Python traceback where it printed one (a
    library's noise after it, such as nvImageCodec's "[nvjpeg2k_ext] Failed to load", passed over), else its last
    line; '' when it said nothing."""
    lines = text.strip().splitlines()
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last):")]
    if tracebacks:
        after = lines[tracebacks[-1] + 1:]
        raised = [line for line in after if line[:1] not in " \t" and EXCEPTION_LINE.fullmatch(line.rstrip())]
        if raised:
            return raised[-1].rstrip()
    return lines[-1] if lines else ""


def run(argv: list[str], timeout_s: float, *, capture: bool = False, env: dict | None = None,
        cwd: Path = REPO, files: tuple[Path, Path] | None = None) -> Done:
    """ARGV in its own process group, under TIMEOUT_S: then SIGINT to the group (the kit stops as on Ctrl-C and
    keeps what it has), SIGKILL GRACE_S later. Output is captured (capture), written as it comes to FILES (stdout,
    stderr: what a process stopped midway wrote is kept; Done holds it too), or goes to this process's own."""
    print(f"$ {' '.join(argv)}   (timeout {timeout_s:.0f} s)", flush=True)
    if files:
        for file in files:
            file.parent.mkdir(parents=True, exist_ok=True)
        with open(files[0], "w") as out, open(files[1], "w") as err:
            done = _run(argv, timeout_s, env, cwd, out, err)
        return Done(argv, done.returncode, done.seconds, files[0].read_text(errors="replace"),
                    files[1].read_text(errors="replace"))
    return _run(argv, timeout_s, env, cwd, subprocess.PIPE if capture else None, subprocess.PIPE if capture else None)


def _run(argv: list[str], timeout_s: float, env: dict | None, cwd: Path, stdout, stderr) -> Done:
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1))
        return Done(argv, proc.returncode, time.monotonic() - start, out or "", err or "")
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            out, err = _after_kill(proc)
        print(f"timed out after {timeout_s:.0f} s: {argv[0]} ... stopped", flush=True)
        return Done(argv, None, time.monotonic() - start, out or "", err or "")
    except BaseException:  # Ctrl-C or SIGTERM here: SIGINT (the kit keeps what it has), then nothing left running
        _signal(proc, signal.SIGINT)
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        _signal(proc, signal.SIGKILL)
        proc.wait()
        raise


def _after_kill(proc: subprocess.Popen) -> tuple[str, str]:
    """What a killed PROC wrote; not waiting past GRACE_S for a pipe that something it started (in a session of its
    own, outside its group) still holds open."""
    try:
        return proc.communicate(timeout=GRACE_S)
    except subprocess.TimeoutExpired as held:
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe:
                pipe.close()
        print(f"{proc.args[0]}: something it started still holds its output open; not read further", flush=True)
        return tuple((got or b"").decode(errors="replace") for got in (held.output, held.stderr))


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def kit_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def kit(args: list[str], timeout_s: float, capture: bool = False) -> Done:
    return run([sys.executable, "-m", "kit", *args], timeout_s, capture=capture, env=kit_env())


# ---------------------------------------------------------------------------------------------------------------
# stage 2: the suite, bundled and verified, beside the torchvision yardstick

def yardstick_settings(suite_name: str) -> list[tuple[str, int, str, int, int, int]]:
    """(model, batch, tag, image size, warm-up, measured steps) of the suite's 1-GPU synthetic harness cases that
    torchvision has (ResNet50, VGG16)."""
    suite = load_suite(suite_name)
    return [(c.model, c.batch_size, c.tag, c.image_size, c.warmup_steps, c.measure_steps) for c in suite.cases
            if c.impl == "harness" and c.model in YARDSTICK_MODELS and c.data == "synthetic" and c.processes == 1]


def yardstick(setting: tuple, device: str, timeout_s: float, log: Path | None = None,
              extra: tuple[str, ...] = ()) -> dict:
    """One yardstick process, one timed window after its warm-up: its JSON (images_per_sec: one run of the noise
    rule), or the error; its output kept in LOG."""
    model, batch, tag, size, warmup, measure = setting
    parts = split_tag(tag)
    argv = [sys.executable, str(YARDSTICK), "--model", model, "--batch-size", str(batch), "--image-size", str(size),
            "--precision", parts["precision"], "--layout", parts.get("layout", "nchw"),
            "--mode", parts.get("mode", "eager"), "--warmup-steps", str(max(warmup, 1)),
            "--measure-steps", str(measure), "--device", device, "--json", *extra]
    done = run(argv, timeout_s, capture=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(done.stdout + done.stderr)
    if not done.ok:
        return {"model": model, "batch_size": batch, "tag": tag, "error": done.why()}
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "tag": tag, "seconds": round(done.seconds, 1)}


def yardstick_rounds(out: Path, settings: list[tuple], rounds: int, device: str, budget: Budget,
                     stop: float) -> list[dict]:
    """ROUNDS rounds of one yardstick process per setting (round 1 of each, then round 2...), while the stage's
    time (STOP, on BUDGET's clock) holds a process; a setting whose process failed is not started again (the same
    error would repeat). Per setting: its runs' figures ("repeats", one per process) and each process's JSON, in
    OUT/yardstick.json as each ends; each process's output in OUT/yardstick/."""
    sticks = [{"model": m, "batch_size": b, "tag": t, "repeats": [], "processes": []} for m, b, t, *_ in settings]
    for round_ in range(1, rounds + 1):
        for setting, stick in zip(settings, sticks, strict=True):
            left = stop - budget.elapsed()
            if "error" in stick:
                continue
            if left < YARDSTICK_PROCESS_S:
                stick.setdefault("skipped", []).append(f"round {round_}: {left:.0f} s of the stage left")
                continue
            got = yardstick(setting, device, left, out / "yardstick" / f"{setting[0]}_{setting[2]}_{round_}.log")
            stick["processes"].append(got)
            if "error" in got:
                stick["error"] = got["error"]
            else:
                stick["repeats"].append(got["images_per_sec"])
            (out / "yardstick.json").write_text(json.dumps(sticks, indent=1) + "\n")
    return sticks


def suite_stage(out: Path, budget: Budget, limit_s: float, *, suite: str, runs_dir: Path, device: str = "gpu",
                yardstick_repeats: int = 3, yardstick_on: bool = True, check_env: bool = True,
                name: str = "1 suite") -> list[Row]:
    """kit check-env, kit bench --suite SUITE (SIGINT at its share of the stage: it keeps its finished runs in a
    partial results.json), bundle + verify, then the yardstick at each of its settings, one process per repeat
    (each process's one window is one run of the noise rule, as each harness run is); the run directory, report,
    results, bundle and the yardstick's JSON and output are copied to OUT as each is made."""
    out.mkdir(parents=True, exist_ok=True)
    stop = budget.elapsed() + limit_s
    rows: list[Row] = []
    settings = yardstick_settings(suite) if yardstick_on else []
    # the yardstick's share of the stage: YARDSTICK_ROUNDS_KEPT rounds of one process per setting; a third round
    # runs where kit bench and the bundle left the time
    stick_s = YARDSTICK_PROCESS_S * len(settings) * min(yardstick_repeats, YARDSTICK_ROUNDS_KEPT)
    if check_env:
        env = kit(["check-env", "--local", "--require-gpu", "--runs-dir", str(out / "check-env")], min(120, limit_s))
        if not env.ok:
            rows.append(Row(name, "pre-flight (kit check-env --local --require-gpu)", "—", "passes", "failed",
                            env.why()))
    runs_dir.mkdir(parents=True, exist_ok=True)
    before = set(runs_dir.iterdir())
    bench = kit(["bench", "--suite", suite, "--runs-dir", str(runs_dir), "--no-yardstick"],
                stop - budget.elapsed() - stick_s - BUNDLE_S)
    run_dir = new_run_dir(runs_dir, before)
    if run_dir is None:
        rows.append(Row(name, f"kit bench --suite {suite}", "—", "a run directory", "failed", bench.why()))
        verdict_line(out, name, rows)
        return rows
    keep(run_dir, out / "run")
    for file in ("report.md", "results.json"):
        keep(run_dir / file, out / file)
    partial = completion_note(run_dir)
    if not bench.ok or partial:
        rows.append(Row(name, f"kit bench --suite {suite}", "—", "every run gives a figure", "failed",
                        "; ".join(filter(None, [None if bench.ok else bench.why(), partial]))))
    bundle = runs_dir / f"{run_dir.name}.bundle.tar.gz"
    made = kit(["bundle", str(run_dir), "--out", str(bundle), "--force", "--submitter", "gpu-proof",
                "--system-name", "gpu-proof"], min(120, max(stop - budget.elapsed() - stick_s, 30)))
    verified = kit(["verify", str(bundle)], min(120, max(stop - budget.elapsed() - stick_s, 30)),
                   capture=True) if made.ok else made
    keep(bundle, out / bundle.name)
    (out / "verify.txt").write_text(verified.stdout + verified.stderr)
    rows.append(Row(name, "kit bundle + kit verify", "consistent" if verified.ok else "—", "consistent",
                    stats.MET if verified.ok else "failed", "" if verified.ok else verified.why()))

    figures = run_figures(run_dir)
    rows.append(telemetry_row(name, run_dir))
    sticks = yardstick_rounds(out, settings, yardstick_repeats, device, budget, stop)
    for setting, stick in zip(settings, sticks, strict=True):
        model, batch, tag = setting[:3]
        mine = figures.get(("torch", model, batch, tag), [])
        row = ratio_row(name, f"{model} bs{batch} {tag}: harness / torchvision", stick["repeats"], mine,
                        RATIO_TARGET, ("yardstick", "harness"))
        row.detail += "; yardstick: one process a run" if stick["repeats"] else ""
        if "error" in stick:
            row.verdict, row.detail = "failed", f"yardstick: {stick['error']}"
        elif stick.get("skipped"):
            row.detail += f"; skipped {', '.join(stick['skipped'])}"
        rows.append(row)
    amp_nhwc = [v for (fw, model, _b, tag), v in figures.items() if (fw, model, tag) == ("torch", "resnet50",
                                                                                           "amp-nhwc")]
    if amp_nhwc or any(s[0] == "resnet50" and s[2] == "amp-nhwc" for s in settings):
        rows.append(figure_row(name, "resnet50 amp-nhwc: harness images/s", amp_nhwc[0] if amp_nhwc else [],
                               gpu_name(run_dir)))
    verdict_line(out, name, rows)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# real JPEGs against synthetic data: windows of one process (interleave_stage), or train.py runs (loader_stage)

def interleave_stage(out: Path, limit_s: float, *, listing: Path, device: str, name: str, extra: list[str],
                     decoders: list[str]) -> list[Row]:
    """bench/loader_interleave.py over LISTING for DECODERS (in that order) under LIMIT_S (its own budget 10 s less,
    so it ends its windows itself), beside the GPU sampler (scripts/telemetry/gpu_sampler.py, its samples in
    OUT/gpu.telemetry): its window lines in OUT/windows.jsonl, the harness's log in OUT/harness.log, its stderr in
    OUT/interleave.stderr.log, each written as it comes; the rows of interleave_rows."""
    out.mkdir(parents=True, exist_ok=True)
    telemetry = out / "gpu.telemetry"
    done = run([sys.executable, str(SAMPLER), "--out", str(telemetry), "--interval-ms", str(SAMPLER_INTERVAL_MS),
                "--", sys.executable, str(INTERLEAVE), "--list", str(listing), "--device", device,
                "--decoders", ",".join(decoders), "--budget-s", f"{max(limit_s - 10, 5):.0f}",
                "--log", str(out / "harness.log"), *extra],
               limit_s, files=(out / "windows.jsonl", out / "interleave.stderr.log"))
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rows = interleave_rows(name, lines, "" if done.ok else done.why(), decoders=decoders,
                           timed_out=done.returncode is None, telemetry=telemetry)
    verdict_line(out, name, rows)
    return rows


def interleave_rows(name: str, lines: list[dict], failure: str = "", *, decoders: list[str] | None = None,
                    timed_out: bool = False, telemetry: Path | None = None) -> list[Row]:
    """Per decoder, each its own verdict: real / synthetic over its paired windows (target LOADER_TARGET), and the
    loader alone / synthetic training (LOADER_ALONE_TARGET), by the noise rule with each window one run; the
    loader's counters, the decode process's seconds per phase (where its counters have them) and the JPEG engines'
    mean utilisation over its real-JPEG windows (TELEMETRY, where its samples have util_jpeg) in the detail. A
    decoder skipped says why; one that got no pair is inconclusive, out of time (never failed for that); one that
    raised is failed, naming the exception. DECODERS: those asked (one that never started gets its row too);
    FAILURE: why the process ended badly ('' when it did not); TIMED_OUT: it was stopped at the stage's end."""
    start = next((x for x in lines if x["kind"] == "start"), None)
    if start is None:
        why = failure or "no window"
        return [Row(name, "real JPEGs / synthetic, windows of one process", "—", f">= {LOADER_TARGET}",
                    stats.INCONCLUSIVE if timed_out else "failed",
                    f"out of time: {why}, before the first window" if timed_out else why)]
    shape = f"{start['model']} bs{start['batch_size']} {start['precision']}-{start['layout']}"
    rows = []
    said = list(dict.fromkeys(x["decoder"] for x in lines if "decoder" in x))
    skipped_ones = {x["decoder"] for x in lines if x["kind"] == "skipped"}
    order = sorted(said, key=lambda d: d in skipped_ones) + [d for d in decoders or [] if d not in said]
    for decoder in order:  # the measured ones first, then those skipped, then those never reached
        mine = [x for x in lines if x.get("decoder") == decoder]
        what = f"{shape}: real JPEGs ({decoder}) / synthetic, windows of one process"
        alone = f"{shape}: the loader alone ({decoder}) / synthetic training"
        skipped = next((x for x in mine if x["kind"] == "skipped"), None)
        if skipped:
            rows.append(Row(name, what, "—", f">= {LOADER_TARGET}", "skipped", skipped["why"]))
            continue
        raised = next((x for x in mine if x["kind"] == "failed"), None)
        short = next((x for x in mine if x["kind"] == "out_of_time"), None)
        figures = {kind: [x["images_per_sec"] for x in mine if x["kind"] == kind]
                   for kind in ("synthetic", "real", "loader")}
        paired = min(len(figures["synthetic"]), len(figures["real"]))
        if raised:
            row = Row(name, what, "—", f">= {LOADER_TARGET}", "failed", raised["why"])
        elif not paired and (short or timed_out or not failure):
            why = short["why"] if short else ("the stage's timeout came first" if timed_out else
                                              "no pair of windows in its share of the stage")
            row = Row(name, what, "—", f">= {LOADER_TARGET}", stats.INCONCLUSIVE, f"out of time: {why}")
        else:
            row = ratio_row(name, what, figures["synthetic"], figures["real"], LOADER_TARGET, ("synthetic", "real"))
            if failure and row.verdict == "failed":
                row.detail += f"; {failure}"
        counts = next((x for x in mine if x["kind"] == "counters"), None)
        if counts is not None:
            row.detail += (f"; {counts['decode_calls']} decode calls for {counts['decoded_batches']} batches decoded "
                           f"({counts['batches']} taken), {counts['refused_batches']} refused")
            row.detail += phase_note(counts)
        elif paired:
            row.detail += "; no counters (the process ended first)"
        if paired and telemetry is not None:
            spans = [(x["t"] - x["seconds"], x["t"]) for x in mine if x["kind"] in ("real", "loader") and "t" in x]
            row.detail += f"; {jpeg_utilisation(telemetry, spans)}"
        rows.append(row)
        if figures["loader"]:
            rows.append(ratio_row(name, alone, figures["synthetic"], figures["loader"], LOADER_ALONE_TARGET,
                                  ("synthetic", "loader alone")))
        elif row.verdict == "failed":
            rows.append(Row(name, alone, "—", f">= {LOADER_ALONE_TARGET}", "failed", row.detail.split("; ")[0]))
        else:
            rows.append(Row(name, alone, "—", f">= {LOADER_ALONE_TARGET}", stats.INCONCLUSIVE,
                            "no loader-alone window: the stage's time ran out before it"
                            if paired or not failure else failure))
    return rows


PHASES = {"read": "read", "decode": "decode", "crop_resize": "crop/resize", "copy_back": "copy back",
          "slot_wait": "waiting for a slot"}


def phase_note(counts: dict) -> str:
    """The decode process's seconds per phase from a counters line ('' where it has none)."""
    phases = counts.get("phases_s")
    if not isinstance(phases, dict) or not phases:
        return ""
    said = ", ".join(f"{PHASES.get(k, k)} {v:.2f} s" for k, v in phases.items() if isinstance(v, (int, float)))
    whole = counts.get("process_s")
    return f"; decode process: {said}" + (f" of {whole:.2f} s" if isinstance(whole, (int, float)) else "")


def jpeg_utilisation(path: Path, spans: list[tuple[float, float]]) -> str:
    """The JPEG engines' mean utilisation (the samples' util_jpeg, %) of the first sampled GPU over SPANS (seconds
    since the epoch), read by the kit's telemetry reader from a gpu_sampler.py file; else why it is not there."""
    try:
        telemetry = read_telemetry(path)
    except InputError as exc:
        return f"JPEG engine utilisation not recorded ({exc})"
    first = min((s.gpu for s in telemetry.samples), default=None)
    values = [s.util_jpeg for s in telemetry.samples if s.gpu == first and getattr(s, "util_jpeg", None) is not None
              and any(begin <= s.t <= end for begin, end in spans)]
    if not values:
        why = telemetry.why or (f"{telemetry.source} samples have no util_jpeg" if telemetry.samples else "no samples")
        return f"JPEG engine utilisation not recorded ({why})"
    return f"JPEG engines {sum(values) / len(values):.1f}% busy (mean of {len(values)} samples over its real-JPEG " \
           "windows)"


def jpeg_tree(root: Path, images: int, parts: int, timeout_s: float = 600) -> Path:
    """The train list of a cached tree of IMAGES photo-like JPEGs (~110 KB, 400x350, quality 90, all RGB) under
    ROOT, made by PARTS generator processes at once."""
    root = root / f"photo-rgb-{images}-parts{parts}"
    listing = root / "train_list.txt"
    if listing.is_file():
        return listing
    per_part = max(1, images // (parts * LOADER_CLASSES))

    def make(part: int) -> Done:
        return run([sys.executable, str(MAKE_TREE), str(root / f"part{part}"), "--classes", str(LOADER_CLASSES),
                    "--images-per-class", str(per_part), "--size", "400x350", "--content", "photo", "--all-rgb",
                    "--seed", str(part)], timeout_s, capture=True)

    with ThreadPoolExecutor(parts) as pool:
        failed = [d for d in pool.map(make, range(parts)) if not d.ok]
    if failed:
        raise RuntimeError(f"making the JPEG tree under {root}: {failed[0].why()}")
    lines = []
    for part in range(parts):
        lines += [f"part{part}/{line}" for line in (root / f"part{part}" / "train_list.txt").read_text().splitlines()]
    tmp = listing.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(listing)  # written last: a tree without it is made again
    return listing


@dataclass
class HarnessRun:
    figure: float | None
    input_rate: float | None = None
    decoder: str | None = None
    device_name: str | None = None
    error: str = ""


def harness(argv: list[str], timeout_s: float, log: Path | None = None) -> HarnessRun:
    """One train.py process; its run_stop figure and input_rate probe. Its output is kept in LOG."""
    done = run([sys.executable, str(HARNESS), *argv], timeout_s, capture=True)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(done.stdout + done.stderr)
    events = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in done.stdout.splitlines() if ":::KITLOG " in line]
    stops = [e for e in events if e["event"] == "run_stop" and e.get("status") == "success"]
    if not done.ok or not stops:
        return HarnessRun(None, error=done.why())
    rate = next((e for e in events if e["event"] == "input_rate"), {})
    start = next(e for e in events if e["event"] == "run_start")
    return HarnessRun(stops[-1]["samples_per_sec"], rate.get("images_per_sec"), start.get("decoder"),
                      start.get("device_name"))


def loader_stage(out: Path, budget: Budget, limit_s: float, *, runs: dict[str, list[str]], common: list[str],
                 repeats: int, listing: Path) -> dict[str, list[HarnessRun]]:
    """REPEATS rounds of one train.py run per entry of RUNS (name -> its extra flags), interleaved (round 1 of each,
    then round 2, ...); each run's output under OUT/logs/, the figures in OUT/figures.json."""
    out.mkdir(parents=True, exist_ok=True)
    stop = budget.elapsed() + limit_s
    got: dict[str, list[HarnessRun]] = {name: [] for name in runs}
    for repeat in range(1, repeats + 1):
        for name, extra in runs.items():
            left = stop - budget.elapsed()
            if left < 15:
                got[name].append(HarnessRun(None, error=f"skipped: {left:.0f} s left in the stage"))
                continue
            got[name].append(harness([*common, *extra], left, out / "logs" / f"{name.replace(' ', '-')}_{repeat}.log"))
            (out / "figures.json").write_text(json.dumps(
                {"list": str(listing), "common": common, "runs": {n: [vars(r) for r in rs] for n, rs in got.items()}},
                indent=1) + "\n")
    return got


def loader_profile(listing: Path, batch: int, workers: int, device: str, out: Path, timeout_s: float) -> str:
    """bench/loader_profile.py on the stage's JPEGs, its JSON kept in OUT: where the loader's time went, in a few
    words for the summary."""
    done = run([sys.executable, str(REPO / "bench" / "loader_profile.py"), "--list", str(listing), "--batch-size",
                str(batch), "--workers", str(workers), "--batches", "6", "--device", device,
                "--json", str(out / "loader-profile.json")], timeout_s, capture=True)
    (out / "loader-profile.log").write_text(done.stdout + done.stderr)
    if not done.ok:
        return f"loader profile: {done.why()}"
    phases = {p["phase"]: p for p in json.loads((out / "loader-profile.json").read_text())}
    loader = phases["loader"]
    said = [f"profile: loader {loader['images_per_sec']:.0f} images/s (decode {loader['decode_s']:.2f} s, "
            f"crop/resize {loader['crop_resize_s']:.2f} s, waiting for items {loader['items_wait_s']:.2f} s; "
            f"{loader['refused_batches']} batch(es) nvJPEG refused)",
            f"workers alone {phases['workers']['images_per_sec']:.0f} images/s"]
    if "nvjpeg" in phases:
        said.append(f"batched nvJPEG alone {phases['nvjpeg']['images_per_sec']:.0f} images/s")
    return ", ".join(said)


def figures_of(runs: list[HarnessRun]) -> list[float]:
    return [r.figure for r in runs if r.figure]


def first_error(runs: list[HarnessRun]) -> str:
    return next((r.error for r in runs if r.error), "")


# ---------------------------------------------------------------------------------------------------------------
# stage 3: a published program beside the harness

def program_stage(out: Path, budget: Budget, limit_s: float, *, suite: str, runs_dir: Path, program: str,
                  force: bool) -> list[Row]:
    """kit bench --suite SUITE (a harness case and the published PROGRAM's case at the same settings), and
    harness / program by the noise rule; the run directory and report copied to OUT."""
    name = "3 program"
    out.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    before = set(runs_dir.iterdir())
    bench = kit(["bench", "--suite", suite, "--runs-dir", str(runs_dir), "--no-yardstick",
                 *(["--force"] if force else [])], limit_s)
    run_dir = new_run_dir(runs_dir, before)
    if run_dir is None:
        rows = [Row(name, f"kit bench --suite {suite}", "—", "a run directory", "failed", bench.why())]
        verdict_line(out, name, rows)
        return rows
    keep(run_dir, out / "run")
    for file in ("report.md", "results.json"):
        keep(run_dir / file, out / file)
    figures = run_figures(run_dir)
    cases = {c.key: c for c in load_suite(suite).cases}
    harness_case = next(c for c in cases.values() if c.impl == "harness")
    program_case = next(c for c in cases.values() if c.impl == "reference")
    mine = figures.get((harness_case.log_framework, harness_case.model, harness_case.batch_size, harness_case.tag), [])
    theirs = figures.get((program_case.log_framework, program_case.model, program_case.batch_size, program_case.tag),
                         [])
    row = ratio_row(name, f"{harness_case.model} bs{harness_case.batch_size} {harness_case.tag}: harness / {program}",
                    theirs, mine, PROGRAM_TARGET, (program, "harness"))
    report = run_dir / "report.md"
    if row.verdict != "failed" and (not report.is_file() or PROGRAM_SECTION not in report.read_text()):
        row.verdict = "failed"  # the kit's own pairing (kit.results.program_ratio) found them different work
        row.detail += "; the report pairs no harness case with the program at the same setting"
    if not bench.ok and row.verdict != "failed":
        row.detail += f"; kit bench {bench.why()}"
    rows = [row]
    verdict_line(out, name, rows)
    return rows
