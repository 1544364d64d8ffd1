"""What the GPU checks share (bench/gpu_proof.py, bench/gpu_check.py, bench/loader_gpu_check.py): a time budget,
subprocesses under timeouts, each stage's measurements, and verdicts against targets by the kit's own noise rule
(kit.results.stats.ratio_check / ratio_target / figure_target: a target is met or missed only when the interval of
the figure or ratio lies wholly on one side of it; otherwise the verdict says inconclusive, or untested with one run).

Stages (each returns Rows for the summary table and writes what it measured under its output folder):
    interleave_stage  real JPEGs against synthetic data in windows of one process (bench/loader_interleave.py)
    suite_stage       kit check-env + kit bench --suite S + kit bundle + kit verify + the torchvision yardstick,
                      one process per repeat
    loader_stage      real JPEGs through a harness loader against synthetic data, interleaved train.py runs
    program_stage     kit bench of a suite pairing a published program with the harness at the same settings
"""

from __future__ import annotations

import json
import os
import shutil
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
from kit.core.layout import split_tag  # noqa: E402
from kit.hosts.capture.model import capture_from_dir  # noqa: E402
from kit.results import stats  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from yardstick import MODELS as YARDSTICK_MODELS  # noqa: E402  (the models torchvision builds, one copy)

HARNESS = REPO / "scripts" / "harness" / "train.py"
YARDSTICK = REPO / "bench" / "yardstick.py"
MAKE_TREE = REPO / "data_prep" / "make_synthetic_imagenet.py"
YARDSTICK_PROCESS_S = 19  # one yardstick process of one window, start included (as a harness process: 14-24 s)
YARDSTICK_ROUNDS_KEPT = 2  # rounds of yardstick processes kit bench leaves the stage time for (a third if it can)
BUNDLE_S = 20  # kit bundle + kit verify of a one-GPU run
GRACE_S = 20  # after SIGINT at a timeout, before SIGKILL: the kit ends a run cleanly and writes what it has
RATIO_TARGET = 0.97  # harness / torchvision yardstick, same setting
LOADER_TARGET = 0.90  # real JPEGs through the gpu loader / synthetic
LOADER_ALONE_TARGET = 1.5  # the gpu loader alone / the synthetic training rate
INTERLEAVE = REPO / "bench" / "loader_interleave.py"
PROGRAM_TARGET = 0.95  # harness / the published program, same setting
# ResNet50 amp-nhwc bs256 on one GPU, images/s, by the GPU's name in the kit's capture (H200: 10% above the H100)
FIGURE_TARGETS = {"H100": 4500.0, "H200": 4950.0}
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
        said = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return f"exit {self.returncode}: {said[-1]}" if said else f"exit {self.returncode} (its output is above)"


def run(argv: list[str], timeout_s: float, *, capture: bool = False, env: dict | None = None,
        cwd: Path = REPO) -> Done:
    """ARGV in its own process group, under TIMEOUT_S: then SIGINT to the group (the kit stops as on Ctrl-C and
    keeps what it has), SIGKILL GRACE_S later. Output is captured (capture) or goes to this process's own."""
    print(f"$ {' '.join(argv)}   (timeout {timeout_s:.0f} s)", flush=True)
    pipe = subprocess.PIPE if capture else None
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(timeout_s, 1))
        return Done(argv, proc.returncode, time.monotonic() - start, out or "", err or "")
    except subprocess.TimeoutExpired:
        _signal(proc, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            out, err = proc.communicate()
        print(f"timed out after {timeout_s:.0f} s: {argv[0]} ... stopped", flush=True)
        return Done(argv, None, time.monotonic() - start, out or "", err or "")
    except BaseException:  # Ctrl-C here: nothing is left running
        _signal(proc, signal.SIGKILL)
        proc.wait()
        raise


def _signal(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def kit_env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def kit(args: list[str], timeout_s: float, capture: bool = False) -> Done:
    return run([sys.executable, "-m", "kit", *args], timeout_s, capture=capture, env=kit_env())


@dataclass
class Row:
    """One line of the summary table."""

    stage: str
    what: str
    figure: str
    target: str
    verdict: str  # stats.MET | MISSED | INCONCLUSIVE | UNTESTED, or failed | skipped | no target
    detail: str = ""

    @property
    def bad(self) -> bool:
        return self.verdict in (stats.MISSED, "failed")


def table(rows: list[Row]) -> str:
    lines = ["| stage | what | figure | target | verdict | detail |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r.stage} | {r.what} | {r.figure} | {r.target} | {r.verdict} | {r.detail} |" for r in rows]
    return "\n".join(lines)


def ratio_row(stage: str, what: str, base: list[float], mine: list[float], target: float,
              names: tuple[str, str]) -> Row:
    """median(mine) / median(base) against TARGET; failed when a side has no figure."""
    if not base or not mine:
        missing = " and ".join(n for n, v in zip(names, (base, mine), strict=True) if not v)
        return Row(stage, what, "—", f">= {target}", "failed", f"no {missing} figure")
    check = stats.ratio_check(base, mine)
    verdict = stats.ratio_target(check, target)
    interval = f"95% interval [{check.low:.3f}, {check.high:.3f}]" if check.verdict != stats.UNTESTED else ""
    detail = "; ".join(filter(None, [f"{names[1]} {stats.median(mine):.1f} / {names[0]} {stats.median(base):.1f}",
                                     f"runs {len(mine)} / {len(base)}", interval,
                                     check.why(names[0], names[1], advice=False)]))
    return Row(stage, what, f"{check.ratio:.3f}", f">= {target}", verdict, detail)


def figure_row(stage: str, what: str, values: list[float], gpu: str | None) -> Row:
    """The harness's ResNet50 amp-nhwc figure against the target of the GPU the kit's capture names."""
    if not gpu:
        return Row(stage, what, _median(values), "—", "failed", "the kit's capture names no GPU on this host")
    target = next((t for key, t in FIGURE_TARGETS.items() if key in gpu), None)
    if target is None:
        return Row(stage, what, _median(values), "—", "no target",
                   f"targets are set for {', '.join(FIGURE_TARGETS)}; this is {gpu}")
    if not values:
        return Row(stage, what, "—", f">= {target:.0f}", "failed", f"no harness figure ({gpu})")
    verdict, low, high = stats.figure_target(values, target)
    interval = f"95% interval [{low:.1f}, {high:.1f}]" if verdict != stats.UNTESTED else "one run"
    return Row(stage, what, _median(values), f">= {target:.0f}", verdict, f"{gpu}; runs {len(values)}; {interval}")


def _median(values: list[float]) -> str:
    return f"{stats.median(values):.1f}" if values else "—"


# ---------------------------------------------------------------------------------------------------------------
# what a run directory holds

def new_run_dir(runs_dir: Path, before: set[Path]) -> Path | None:
    made = sorted((p for p in runs_dir.iterdir() if p.is_dir() and p not in before), key=lambda p: p.stat().st_mtime)
    return made[-1] if made else None


def run_figures(run_dir: Path) -> dict[tuple[str, str, int, str], list[float]]:
    """(framework folder, model, batch, tag) -> the figures of its runs (1-GPU cases), from results.json, which kit
    bench writes after every run (a partial one after an interrupt: its finished runs); where there is none, from
    the harness logs' run_stop lines (the kit reads the step lines: the two agree within 0.001% on the H200's)."""
    path = run_dir / "results.json"
    if not path.is_file():
        return log_figures(run_dir)
    out = {}
    for group in json.loads(path.read_text())["groups"]:
        for case in group["cases"]:
            if case["case"] == "1n1g":
                key = (group["framework"], group["model"], group["batch_per_device"], group["precision"])
                out[key] = [r["value"] for r in case["runs"] if r.get("value")]
    return out


def log_figures(run_dir: Path) -> dict[tuple[str, str, int, str], list[float]]:
    """run_figures from the harness logs alone (logs/<framework>/<model>/bz<B>/1n1g/<model>_b<B>_<tag>_<n>.log),
    for a run directory without results.json: each whole log's successful run_stop figure, in repeat order."""
    out: dict[tuple[str, str, int, str], list[float]] = {}
    for log in sorted((run_dir / "logs").glob("*/*/bz*/1n1g/*.log"), key=lambda p: (p.parent, repeat_of(p))):
        framework, model, bz = log.parts[-5:-2]
        prefix = f"{model}_b{bz[2:]}_"
        if not log.name.startswith(prefix) or repeat_of(log) is None:
            continue  # not a harness log of this layout (a program's own files)
        tag = log.stem[len(prefix):].rsplit("_", 1)[0]
        figure = kitlog_figure(log.read_text(errors="replace"))
        if figure:
            out.setdefault((framework, model, int(bz[2:]), tag), []).append(figure)
    return out


def repeat_of(log: Path) -> int | None:
    tail = log.stem.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


def kitlog_figure(text: str) -> float | None:
    """The samples_per_sec of a harness log's successful run_stop line, or None."""
    for line in reversed(text.splitlines()):
        if ":::KITLOG " in line and '"run_stop"' in line:
            stop = json.loads(line.split(":::KITLOG ", 1)[1])
            return stop.get("samples_per_sec") if stop.get("status") == "success" else None
    return None


def completion_note(run_dir: Path) -> str:
    """'' for a whole run; else what its figures are: a partial results.json's finished runs and the missing ones,
    or the logs' (no results.json)."""
    path = run_dir / "results.json"
    if not path.is_file():
        return "no results.json: figures re-derived from the run's logs"
    done = json.loads(path.read_text()).get("completion") or {}
    if done.get("state") != "partial":
        return ""
    missing = [f"{m['case']} #{m['repeat']}" for m in done.get("missing", [])]
    return (f"partial run: {len(done.get('finished', []))} of {done.get('planned')} runs finished"
            + (f"; missing {', '.join(missing)}" if missing else ""))


def telemetry_row(stage: str, run_dir: Path) -> Row:
    """Every run of the suite sampled beside it (results.json telemetry), each harness run's measured window covered;
    the detail: the J/image and SM clock of each case's runs."""
    path = run_dir / "results.json"
    runs = [(g, r) for g in json.loads(path.read_text())["groups"] for c in g["cases"] for r in c["runs"]] \
        if path.is_file() else []
    what = "GPU telemetry of every run (scripts/telemetry/gpu_sampler.py)"
    meta = run_dir / "run.json"
    if meta.is_file() and "gpu_telemetry" not in json.loads(meta.read_text()):
        return Row(stage, what, "—", "every run sampled", "no target", "a CPU suite: no GPU to sample")
    if not runs:
        return Row(stage, what, "—", "every run sampled", "failed", "no run gave a figure")
    missing = [r["file"] for _g, r in runs if not (r.get("telemetry") or {}).get("hosts")]
    hosts = [(g, r, h) for g, r in runs for h in (r.get("telemetry") or {}).get("hosts", {}).values()]
    bare = sorted({f"{r['file']}: {h['why'] or 'no samples'}" for _g, r, h in hosts if not h["source"]})
    thin = sorted(r["file"] for _g, r, h in hosts if h["source"] and (h["coverage"] or 0) < 0.8)
    said = sorted({f"{g['model']} {g['precision']}: {r['telemetry']['j_per_image']:.4f} J/image at "
                   f"{h['sm_mhz_median']:.0f} MHz" for g, r, h in hosts
                   if r["telemetry"].get("j_per_image") and h.get("sm_mhz_median")})
    bad = ([f"unsampled: {', '.join(missing)}"] if missing else []) + bare
    bad += [f"window not covered: {', '.join(thin)}"] if thin else []
    return Row(stage, what, f"{len(runs) - len(missing)}/{len(runs)}", "every run sampled",
               "failed" if bad else stats.MET, "; ".join(bad or said))


def gpu_name(run_dir: Path) -> str | None:
    """The first GPU's product name in the kit's own capture of the run's hosts (env/<host>/), re-parsed from the
    raw nvidia-smi output it kept."""
    for host_dir in sorted((run_dir / "env").glob("*/")):
        try:
            capture = capture_from_dir(host_dir.name, host_dir)
        except Exception as exc:  # noqa: BLE001  (a broken capture is reported, not fatal to the check)
            print(f"gpu-check: the capture of {host_dir.name} cannot be read: {exc}", flush=True)
            continue
        if capture.smi and capture.smi.gpus:
            return capture.smi.gpus[0].product_name
    return None


def keep(src: Path, dest: Path) -> None:
    """Copy a file or a folder into the output folder (links kept as links)."""
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    elif src.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def verdict_line(out: Path, stage: str, rows: list[Row]) -> None:
    bad = [r for r in rows if r.bad]
    worst = "FAILED" if bad else ("passed" if all(r.verdict in (stats.MET, "no target") for r in rows) else "unsure")
    text = f"{stage}: {worst}: " + "; ".join(f"{r.what} {r.figure} ({r.verdict})" for r in rows)
    (out / "verdict.txt").write_text(text + "\n")
    print(text, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# stage 1: the suite, bundled and verified, beside the torchvision yardstick

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
    bench = kit(["bench", "--suite", suite, "--runs-dir", str(runs_dir)],
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

def interleave_stage(out: Path, limit_s: float, *, listing: Path, device: str, name: str,
                     extra: list[str]) -> list[Row]:
    """bench/loader_interleave.py over LISTING under LIMIT_S (its own budget 10 s less, so it ends its windows
    itself): its window lines in OUT/windows.jsonl, the harness's log in OUT/harness.log, its stderr in
    OUT/interleave.stderr.log; the rows of interleave_rows."""
    out.mkdir(parents=True, exist_ok=True)
    done = run([sys.executable, str(INTERLEAVE), "--list", str(listing), "--device", device,
                "--budget-s", f"{max(limit_s - 10, 5):.0f}", "--log", str(out / "harness.log"), *extra],
               limit_s, capture=True)
    (out / "windows.jsonl").write_text(done.stdout)
    (out / "interleave.stderr.log").write_text(done.stderr)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    rows = interleave_rows(name, lines, "" if done.ok else done.why())
    verdict_line(out, name, rows)
    return rows


def interleave_rows(name: str, lines: list[dict], failure: str = "") -> list[Row]:
    """Per decoder: real / synthetic over its paired windows (target LOADER_TARGET), and the loader alone /
    synthetic training (LOADER_ALONE_TARGET), by the noise rule with each window one run; the loader's counters
    in the detail; a skipped decoder's row says why. FAILURE: why the process ended badly ('' when it did not)."""
    start = next((x for x in lines if x["kind"] == "start"), None)
    if start is None:
        return [Row(name, "real JPEGs / synthetic, windows of one process", "—", f">= {LOADER_TARGET}", "failed",
                    failure or "no window")]
    shape = f"{start['model']} bs{start['batch_size']} {start['precision']}-{start['layout']}"
    rows = []
    decoders = list(dict.fromkeys(x["decoder"] for x in lines if "decoder" in x))
    skipped_ones = {x["decoder"] for x in lines if x["kind"] == "skipped"}
    for decoder in sorted(decoders, key=lambda d: d in skipped_ones):  # the measured ones first
        mine = [x for x in lines if x.get("decoder") == decoder]
        what = f"{shape}: real JPEGs ({decoder}) / synthetic, windows of one process"
        skipped = next((x for x in mine if x["kind"] == "skipped"), None)
        if skipped:
            rows.append(Row(name, what, "—", f">= {LOADER_TARGET}", "skipped", skipped["why"]))
            continue
        figures = {kind: [x["images_per_sec"] for x in mine if x["kind"] == kind]
                   for kind in ("synthetic", "real", "loader")}
        row = ratio_row(name, what, figures["synthetic"], figures["real"], LOADER_TARGET, ("synthetic", "real"))
        counts = next((x for x in mine if x["kind"] == "counters"), None)
        if counts is None:
            row.detail += "; no counters (the process ended first)"
        else:
            row.detail += (f"; {counts['decode_calls']} decode calls for {counts['decoded_batches']} batches decoded "
                           f"({counts['batches']} taken), {counts['refused_batches']} refused")
        if failure and row.verdict == "failed":
            row.detail += f"; {failure}"
        rows.append(row)
        if figures["loader"]:
            rows.append(ratio_row(name, f"{shape}: the loader alone ({decoder}) / synthetic training",
                                  figures["synthetic"], figures["loader"], LOADER_ALONE_TARGET,
                                  ("synthetic", "loader alone")))
    return rows


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
    bench = kit(["bench", "--suite", suite, "--runs-dir", str(runs_dir), *(["--force"] if force else [])], limit_s)
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
