#!/usr/bin/env python3
"""Every GPU claim of the kit in one visit of 8.5 minutes (510 s) to one GPU (bench/gpu_proof.sh runs this).

    bash bench/gpu_proof.sh [--out DIR] [--budget-s 510] [--margin-s 60] [--stages 1,2,3,4,5,6] [--device gpu|cpu] ...

It prints its plan first (each stage, its budget, what it runs, what it drops when time runs short), then runs the
stages in this order; each runs under its own timeout, is skipped with a message when the time left cannot hold it,
and copies what it made (logs included) to its folder under the output folder ($OUT when set) the moment it ends:
  1 loader    the new claim first: ResNet50 amp-nhwc bs256, synthetic and real-JPEG windows interleaved in ONE
              process (bench/loader_interleave.py: the harness's own backend and timed loop; the gpu loader with
              decoder torchvision, then nvimgcodec where it imports), then the loader alone. Targets: real /
              synthetic >= 0.90, the loader alone >= 1.5x synthetic training, each window one run of the noise rule.
  2 suite     kit check-env --local --require-gpu; kit bench --suite gpu-proof (ResNet50 bs256 tf32 and amp-nhwc,
              VGG16 amp-nhwc bs128; 3 interleaved repeats; SIGINT at its share of the stage: its finished runs stay
              in a partial results.json, read as a whole one; without results.json the figures come from the logs);
              kit bundle + kit verify; the telemetry kit bench sampled beside each run; the torchvision yardstick
              (bench/yardstick.py) at each setting, ONE PROCESS PER REPEAT (each process's one window one run of the
              noise rule, as each harness process is). Targets: harness / yardstick >= 0.97; ResNet50 amp-nhwc
              >= 4500 images/s on an H100, 4950 on an H200 (the GPU named by the kit's capture).
  3 program   if time is left: kit bench --suite gpu-proof-dle: NVIDIA DLE's PyTorch ResNet50 v1.5 (.models/, at its
              pin) beside the harness, AMP NHWC bs256 synthetic, 2 repeats each; target harness / program >= 0.95.
  4 telemetry if time is left: the GPU sampler's own cost to a run (bench/sampler_overhead.py, few pairs).
  5 compiled  if time is left: torch.compile, harness compiled / yardstick compiled, ResNet50 amp-nhwc bs256, one
              process each (a figure, its noise untested).
  6 host      if time is left: the gpu loader's host work on this machine's CPU (bench/decode_overlap.py --stages
              step: decode stood in, a small-op thread beside it / alone, target >= 0.97) and what a thread
              wake-up costs there: the CPU evidence of the real-data issue, on the GPU host's own CPU.
Last, no GPU time: the kit's best ResNet50 figure / MLPerf Training v4.0's per-GPU figure for that GPU (MLPERF_V40).
Verdicts use the kit's noise rule (kit.results.stats): met or missed only when the interval lies wholly on one side
of the target; otherwise inconclusive (said, with why). Ends with one table (stage, figure, target, verdict), also in
OUT/summary.md (rewritten as each stage ends). Exit 0: every target met; 1: a target missed or a stage failed; 2:
this machine cannot run the check; 3: nothing missed, but something inconclusive, untested or skipped.
Budgets (STAGES) come from the per-process costs the H200 visit recorded (tests/fixtures/gpu-runs/h200-20261128):
the planned stages with the preflight leave --margin-s (60 s) of the 510 s unplanned, for overruns (a stopped
process's grace, a stage's wrap-up); the "if time is left" stages run only on what the planned ones left unused.
--device cpu is a dry run of the script on a CPU (with a stand-in nvidia-smi and small suites: tests/test_gpu_proof.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_stages as gs  # noqa: E402


@dataclass(frozen=True)
class Stage:
    title: str
    budget: float  # planned seconds, its timeout (less where the later planned stages need their least)
    least: float  # under this much time left it is skipped
    runs: str  # what it runs, for the plan
    short: str  # what it drops when its time runs short, for the plan
    planned: bool = True  # False: runs only on time the planned stages left unused


# Per-process costs recorded on the H200 (2026-11-28, tests/fixtures/gpu-runs/h200-20261128): a harness process
# 14-24 s (the first, cold, 36 s), a yardstick process ~25 s for 3 windows (~19 s for one), DLE's 29-32 s; 16
# generator processes make the 4096 JPEGs in ~10 s; kit check-env ~5 s, bundle + verify ~15 s.
STAGES = {
    "1": Stage("loader", 85, 45,
               "JPEG tree (~10 s) + one process (~25 s start and cuDNN autotuning): up to 6 synthetic/real window "
               "pairs with torchvision's nvJPEG, 4 with nvimgcodec, 3 windows of the loader alone each",
               "fewer pairs (nvimgcodec's first: it gets 40% of what is left), then the loader-alone windows"),
    "2": Stage("suite", 350, 200,
               "kit check-env (~5 s); kit bench: 9 harness processes (~170 s); bundle + verify (~15 s); the "
               "yardstick: 3 rounds of one process per setting (~19 s each, 2 rounds = 114 s kept for them)",
               "kit bench gets SIGINT at its share (finished runs kept, the report partial), then the yardstick's "
               "third round"),
    "3": Stage("program", 110, 100, "kit bench --suite gpu-proof-dle: DLE 2 x ~31 s + harness 2 x ~19 s",
               "skipped (harness / DLE 0.989 was measured on the H200 visit)", planned=False),
    "4": Stage("telemetry", 60, 45, "bench/sampler_overhead.py --device gpu: 3 pairs beside one sampler, up to 5 "
               "beside ten (ResNet50 bs16 64 px: launch-bound, the sampler's worst case)", "skipped", planned=False),
    "5": Stage("compiled", 200, 150, "train.py --mode compiled, then yardstick --mode compiled (~60 s of "
               "compiling each)", "skipped, or the yardstick's process", planned=False),
    "6": Stage("host", 60, 30, "bench/decode_overlap.py --stages step on this host's CPU: the gpu loader's host "
               "work beside a small-op thread (decode stood in), and what a thread wake-up costs here",
               "skipped", planned=False),
}
PREFLIGHT_S = 15  # nvidia-smi's outputs saved and PyTorch's CUDA probed before the first stage
MARGIN_S = 60  # never planned into: a stopped process's grace (gpu_stages.GRACE_S) and each stage's wrap-up
BUDGET_S = 510
DLE_FILES = ("DeepLearningExamples/PyTorch/Classification/ConvNets/main.py", "dllogger/dllogger/__init__.py")
# MLPerf Training v4.0, closed, NVIDIA's 8-GPU ResNet50 (MXNet, NGC 24.04): images/s per GPU, by the GPU's name
# in the kit's capture. Derived with the kit's own reader (tests/test_gpu_proof.py re-derives both from the logs
# kept in tests/fixtures/mlperf-v4.0/): kit extract --skip 1 --reduce median on result_0..4.txt of
# mlcommons/training_results_v4.0 (6fe9543) NVIDIA/results/h200_ngc24.04_mxnet/resnet (8x H200-SXM5-141GB:
# 7946-7954) and eos_ngc24.04_mxnet/resnet (Eos, 8x H100-SXM5-80GB: 7160-7173), each / 8
MLPERF_V40 = {"H200": 7950.0, "H100": 7160.0}
MLPERF_GPUS = 8
COMPILED_TAG, COMPILED_STEPS = "amp-nhwc-compiled", (10, 20)  # stage 5: ResNet50 at the loader stage's shape


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_proof.sh", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                   help="output folder (default $OUT, else bench/out/gpu-proof-<time>)")
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S})")
    p.add_argument("--margin-s", type=float, default=MARGIN_S,
                   help=f"seconds of the budget no stage plans into (default {MARGIN_S})")
    p.add_argument("--stages", default=",".join(STAGES), help=f"which stages (default {','.join(STAGES)})")
    p.add_argument("--stage-cap-s", type=float, default=None, help="each stage's longest time (default: its budget)")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: a dry run of this script")
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/gpu-proof-runs"))
    p.add_argument("--suite", default="gpu-proof", help="stage 2's suite (name or YAML)")
    p.add_argument("--yardstick-repeats", type=int, default=3, help="yardstick processes per setting")
    p.add_argument("--images", type=int, default=4096, help="stage 1's JPEGs")
    p.add_argument("--loader-pairs", type=int, default=6, help="window pairs per decoder, at most")
    p.add_argument("--loader-batch", type=int, default=256)
    p.add_argument("--loader-image-size", type=int, default=224)
    p.add_argument("--loader-steps", default="4,20", metavar="WARMUP,MEASURE", help="each window's steps")
    p.add_argument("--jpeg-dir", type=Path, default=Path("/tmp/gpu-proof-jpegs"))
    p.add_argument("--program-suite", default="gpu-proof-dle", help="stage 3's suite (name or YAML)")
    p.add_argument("--model-code", type=Path, default=Path(os.environ.get("KIT_MODEL_CODE") or gs.REPO / ".models"))
    p.add_argument("--telemetry-pairs", default="3,5", metavar="PAIRS,MAX", help="stage 4's pairs")
    p.add_argument("--host-pairs", default="6,12", metavar="PAIRS,MAX", help="stage 6's pairs")
    p.add_argument("--host-images", type=int, default=1024, help="stage 6's small JPEGs")
    a = p.parse_args(argv)
    a.stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    if not a.stages or set(a.stages) - set(STAGES):
        p.error(f"--stages: pick from {', '.join(STAGES)}, got {','.join(a.stages) or 'none'}")
    a.stages = sorted(set(a.stages), key=list(STAGES).index)  # always in the plan's order
    try:
        a.loader_warmup, a.loader_measure = (int(x) for x in a.loader_steps.split(","))
        a.telemetry_pairs, a.telemetry_max = (int(x) for x in a.telemetry_pairs.split(","))
    except ValueError:
        p.error("--loader-steps and --telemetry-pairs: two integers, comma-separated")
    if min(a.yardstick_repeats, a.loader_pairs, a.images, a.loader_measure) < 1 or a.budget_s < 1:
        p.error("--yardstick-repeats, --loader-pairs, --images, the measured steps and --budget-s must be >= 1")
    a.out = a.out or gs.REPO / "bench" / "out" / f"gpu-proof-{dt.datetime.now():%Y%m%d-%H%M%S}"
    return a


def plan(a: argparse.Namespace) -> str:
    """What will run, each stage's budget, what it drops when short: printed and kept before anything runs."""
    planned = [k for k in a.stages if STAGES[k].planned]
    spent = PREFLIGHT_S + sum(cap(a, k) for k in planned)
    lines = [f"gpu-proof plan: budget {a.budget_s:.0f} s = preflight {PREFLIGHT_S} s + planned stages "
             f"{spent - PREFLIGHT_S:.0f} s + {a.budget_s - spent:.0f} s unplanned (margin kept: {a.margin_s:.0f} s)"]
    if a.budget_s - spent < a.margin_s:
        lines.append(f"  (the planned stages overrun the margin by {a.margin_s - (a.budget_s - spent):.0f} s: the "
                     "last ones get less, down to their least, or are skipped)")
    for key in a.stages:
        st = STAGES[key]
        when = (f"if short: {st.short}; skipped under {st.least:.0f} s" if st.planned else
                f"only if time is left ({st.least:.0f} s beyond the margin), else {st.short}")
        lines.append(f"  {key} {st.title:<9} {cap(a, key):>4.0f} s  runs: {st.runs}; {when}")
    lines.append("  then, no GPU time: the kit's best ResNet50 figure / MLPerf v4.0's per-GPU figure")
    return "\n".join(lines)


def cap(a: argparse.Namespace, key: str) -> float:
    return a.stage_cap_s or STAGES[key].budget


def stage_limit(a: argparse.Namespace, budget: gs.Budget, key: str, later: list[str]) -> float | None:
    """This stage's timeout, or None when the time left (less the margin) cannot hold its least. A planned stage
    leaves the later planned ones their least; one run "if time is left" takes what there is, up to its budget."""
    st = STAGES[key]
    usable = budget.left() - a.margin_s
    if usable < st.least:
        return None
    reserve = sum(STAGES[k].least for k in later if STAGES[k].planned) if st.planned else 0
    return max(st.least, min(cap(a, key), usable - reserve))


def save_nvidia_smi(out: Path) -> None:
    """What this machine's nvidia-smi says, raw, for the record (and tests/fixtures)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, args in (("q-x.xml", ["-q", "-x"]), ("q.txt", ["-q"]), ("topo-m.txt", ["topo", "-m"]),
                       ("plain.txt", [])):
        try:
            done = subprocess.run(["nvidia-smi", *args], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            (out / f"{name}.error").write_text(f"nvidia-smi {' '.join(args)}: {exc}\n")
            continue
        (out / name).write_bytes(done.stdout)
        if done.returncode:
            (out / f"{name}.error").write_bytes(f"exit {done.returncode}\n".encode() + done.stderr)


def probe(code: str) -> str | None:
    """None when this Python runs CODE; else the last line it said (or that it hung)."""
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return f"`{sys.executable} -c {code!r}` did not end in 120 s"
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]


def machine_problem(a: argparse.Namespace) -> str | None:
    """Why this machine cannot run the check, or None."""
    if a.device == "cpu":
        return None
    return None if probe("import torch; assert torch.cuda.is_available()") is None else (
        f"{sys.executable}: PyTorch sees no CUDA device")


def program_problem(a: argparse.Namespace) -> str | None:
    """Why stage 3 cannot run here (DLE's code, or a module it imports, missing), or None."""
    missing = [f for f in DLE_FILES if not (a.model_code / f).is_file()] if a.device == "gpu" else []
    if missing:
        return (f"no {a.model_code / missing[0]}: make gpu-prep on a machine with the sources, and carry .models "
                "with the checkout")
    if a.device == "gpu":
        if failed := probe("import torch, torchvision, pynvml"):
            return f"DLE imports torch, torchvision and pynvml: {failed}"
    return None


def program_env(a: argparse.Namespace) -> bool:
    """KIT_MODEL_CODE and a bare `python` (DLE's recipe starts `python ./main.py`) for the kit bench of stage 3;
    True when the checkouts' commits cannot be read (no git), so the run needs --force (run.json records it)."""
    os.environ["KIT_MODEL_CODE"] = str(a.model_code.resolve())
    if not shutil.which("python"):
        bin_dir = Path("/tmp/kit-bin")
        bin_dir.mkdir(exist_ok=True)
        link = bin_dir / "python"
        link.unlink(missing_ok=True)
        link.symlink_to(sys.executable)
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    if shutil.which("git") is None:
        print("gpu-proof: no git here to read the checkouts' commits: stage 3 runs with --force (recorded)")
        return True
    return os.environ.get("GPU_PROOF_FORCE") == "1"


def loader_rows(a: argparse.Namespace, out: Path, budget: gs.Budget, limit_s: float) -> list[gs.Row]:
    """Stage 1: the JPEG tree, then bench/loader_interleave.py's windows in what the stage has left."""
    name = "1 loader"
    cores = len(os.sched_getaffinity(0))
    began = budget.elapsed()
    try:
        listing = gs.jpeg_tree(a.jpeg_dir, a.images, cores, timeout_s=limit_s / 2)
    except RuntimeError as exc:
        return [gs.Row(name, "JPEG tree", "—", "made", "failed", str(exc))]
    extra = ["--batch-size", str(a.loader_batch), "--image-size", str(a.loader_image_size), "--workers", str(cores),
             "--pairs", str(a.loader_pairs), "--window-warmup", str(a.loader_warmup),
             "--window-steps", str(a.loader_measure)]
    return gs.interleave_stage(out, limit_s - (budget.elapsed() - began), listing=listing, device=a.device,
                               name=name, extra=extra)


def telemetry_rows(a: argparse.Namespace, out: Path, limit_s: float) -> list[gs.Row]:
    """Stage 4: bench/sampler_overhead.py in its slot; its verdict line, or how far it got."""
    name, what = "4 telemetry", "the GPU sampler's cost to a run at the kit's rate"
    out.mkdir(parents=True, exist_ok=True)
    done = gs.run([sys.executable, str(gs.REPO / "bench" / "sampler_overhead.py"), "--device", a.device,
                   "--pairs", str(a.telemetry_pairs), "--max-pairs", str(a.telemetry_max)], limit_s, capture=True)
    (out / "sampler_overhead.log").write_text(done.stdout + done.stderr)
    said = re.search(r"sampler overhead at \d+ ms: (-?[\d.]+)% of the figure, 95% interval \[(-?[\d.]+)%, "
                     r"(-?[\d.]+)%\].*target <= 1%: (\w+)", done.stdout)
    pairs = sum(line.startswith('{"pair"') for line in done.stdout.splitlines())
    if said:
        verdict = {"met": gs.stats.MET, "missed": gs.stats.MISSED}.get(said[4], gs.stats.INCONCLUSIVE)
        rows = [gs.Row(name, what, f"{said[1]}%", "<= 1%", verdict,
                       f"95% interval [{said[2]}%, {said[3]}%]; {pairs} pairs (bench/sampler_overhead.py)")]
    else:
        rows = unfinished(name, what, "<= 1%", done, limit_s, f" after {pairs} pairs")
    gs.verdict_line(out, name, rows)
    return rows


def unfinished(name: str, what: str, target: str, done: gs.Done, limit_s: float, progress: str = "") -> list[gs.Row]:
    """The row of a bench script that gave no verdict: stopped at its slot's end (how far it got), or failed."""
    if done.returncode is None:
        return [gs.Row(name, what, "—", target, gs.stats.INCONCLUSIVE,
                       f"stopped at its slot's end ({limit_s:.0f} s){progress}, before a verdict")]
    return [gs.Row(name, what, "—", target, "failed", done.why())]


def host_rows(a: argparse.Namespace, out: Path, limit_s: float) -> list[gs.Row]:
    """Stage 6: bench/decode_overlap.py's step and wake stages on this host's CPU; its figures, or how far it got."""
    name, what = "6 host", "the gpu loader's host work: a small-op thread's steps/s beside it / alone (this CPU)"
    out.mkdir(parents=True, exist_ok=True)
    pairs, most = a.host_pairs.split(",")
    done = gs.run([sys.executable, str(gs.REPO / "bench" / "decode_overlap.py"), "--stages", "step", "--json",
                   "--images", str(a.host_images), "--pairs", pairs, "--max-pairs", most, "--tree",
                   str(a.jpeg_dir.with_name(a.jpeg_dir.name + "-host"))], limit_s, capture=True)
    (out / "decode_overlap.log").write_text(done.stdout + done.stderr)
    try:
        got = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        got = None
    if got:
        step, host = got["ratios"]["3 step"], got["host"]
        rows = [gs.Row(name, what, f"{step['ratio']:.4f}", ">= 0.97", got["verdicts"]["3 step"],
                       f"95% interval [{step['low']:.4f}, {step['high']:.4f}], {step['pairs']} pairs; a wake-up "
                       f"costs {host['wakeup_us']:.0f} us here, the loader {host['step_loss_us']:.0f} us a batch "
                       f"({host['step_loss_wakeups']:.1f} wake-ups); it waited {host['step_waits_per_batch']:.1f} "
                       "times a batch more than alone; the decode process used "
                       f"{host['decode_cpu_us_per_batch']:.0f} us of CPU a batch")]
    else:
        rows = unfinished(name, what, ">= 0.97", done, limit_s)
    gs.verdict_line(out, name, rows)
    return rows


def compiled_rows(a: argparse.Namespace, out: Path, budget: gs.Budget, limit_s: float) -> list[gs.Row]:
    """Stage 5: one harness process and one yardstick process in --mode compiled (on a CPU, backend aot_eager: no
    code generation), harness / yardstick (untested: one run a side) and the harness's figure for the MLPerf row."""
    name = "5 compiled"
    out.mkdir(parents=True, exist_ok=True)
    stop = budget.elapsed() + limit_s
    model, batch, tag, size, (warmup, measure) = "resnet50", a.loader_batch, COMPILED_TAG, a.loader_image_size, \
        COMPILED_STEPS
    backend = ["--compile-backend", "aot_eager"] if a.device == "cpu" else []
    mine = gs.harness(["--framework", "torch", "--model", model, "--precision", "amp", "--layout", "nhwc",
                       "--mode", "compiled", "--batch-size", str(batch), "--image-size", str(size),
                       "--warmup-steps", str(warmup), "--measure-steps", str(measure), "--device", a.device,
                       *backend], limit_s / 2, out / "harness-compiled.log")
    left = stop - budget.elapsed()
    setting = (model, batch, tag, size, warmup, measure)
    stick = (gs.yardstick(setting, a.device, left, out / "yardstick-compiled.log", tuple(backend))
             if left >= gs.YARDSTICK_PROCESS_S else {"error": f"skipped: {left:.0f} s of the stage left"})
    (out / "figures.json").write_text(json.dumps({"harness": vars(mine), "yardstick": stick}, indent=1) + "\n")
    row = gs.ratio_row(name, f"{model} bs{batch} {tag}: harness / torchvision", [stick["images_per_sec"]]
                       if "images_per_sec" in stick else [], [mine.figure] if mine.figure else [], gs.RATIO_TARGET,
                       ("yardstick", "harness"))
    if row.verdict == "failed":
        row.detail += f": {mine.error or stick.get('error', '')}"
    rows = [row]
    gs.verdict_line(out, name, rows)
    return rows


def mlperf_row(measured: dict[str, float], gpu: str | None) -> gs.Row:
    """The kit's best ResNet50 figure of this visit / MLPerf v4.0's per-GPU figure for this GPU (no target)."""
    what = "the kit's best ResNet50 figure / MLPerf v4.0 per GPU (8-GPU result / 8)"
    per_gpu = next((v for key, v in MLPERF_V40.items() if gpu and key in gpu), None)
    if not measured or per_gpu is None:
        why = "no ResNet50 figure measured" if not measured else f"MLPerf v4.0 figures kept for "\
              f"{', '.join(MLPERF_V40)}; this is {gpu or 'an unnamed GPU'}"
        return gs.Row("mlperf", what, "—", "—", "no target", why)
    label, best = max(measured.items(), key=lambda kv: kv[1])
    return gs.Row("mlperf", what, f"{best / per_gpu:.3f}", "—", "no target",
                  f"{label} {best:.1f} / {per_gpu:.0f} ({gpu}; MLPerf's real ImageNet through DALI, "
                  "batch 3200 over 8 GPUs, MXNet)")


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    budget = gs.Budget(a.budget_s)
    a.out.mkdir(parents=True, exist_ok=True)
    text = plan(a)
    print(f"gpu-proof: output folder {a.out}\n{text}", flush=True)
    (a.out / "plan.txt").write_text(text + "\n")
    save_nvidia_smi(a.out / "nvidia-smi")
    if problem := machine_problem(a):
        print(f"gpu-proof: {problem}", file=sys.stderr)
        (a.out / "summary.md").write_text(f"gpu-proof: not run: {problem}\n")
        return 2
    rows: list[gs.Row] = []
    times: list[str] = []
    measured: dict[str, float] = {}  # ResNet50 figures of this visit, for the MLPerf row
    gpu: str | None = None
    for i, key in enumerate(a.stages):
        st = STAGES[key]
        folder = a.out / f"{key}-{st.title}"
        limit = stage_limit(a, budget, key, a.stages[i + 1:])
        if limit is None:
            left = budget.left() - a.margin_s
            rows.append(gs.Row(f"{key} {st.title}", "the stage", "—", "—", "skipped",
                               f"{max(left, 0):.0f} s left beyond the margin, it needs {st.least:.0f} s"))
            print(f"gpu-proof: stage {key} ({st.title}) skipped: {max(left, 0):.0f} s left beyond the "
                  f"{a.margin_s:.0f} s margin, it needs {st.least:.0f} s", flush=True)
            write_summary(a, rows, times)
            continue
        print(f"\n===== stage {key}: {st.title} (up to {limit:.0f} s; {budget.left():.0f} s left) =====", flush=True)
        began = time.monotonic()
        if key == "1":
            got = loader_rows(a, folder, budget, limit)
        elif key == "2":
            got = gs.suite_stage(folder, budget, limit, suite=a.suite, runs_dir=a.runs_dir, device=a.device,
                                 yardstick_repeats=a.yardstick_repeats, name=f"{key} {st.title}")
            run_dir = folder / "run"
            gpu = gs.gpu_name(run_dir) if run_dir.is_dir() else gpu
            figures = gs.run_figures(run_dir) if run_dir.is_dir() else {}
            measured |= {f"harness {t} bs{b}": gs.stats.median(v) for (fw, m, b, t), v in figures.items()
                         if fw == "torch" and m == "resnet50" and v}
        elif key == "3":
            if problem := program_problem(a):
                got = [gs.Row(f"{key} {st.title}", "DLE's ResNet50 beside the harness", "—",
                              f">= {gs.PROGRAM_TARGET}", "failed", problem)]
                folder.mkdir(parents=True, exist_ok=True)
                gs.verdict_line(folder, f"{key} {st.title}", got)
            else:
                got = gs.program_stage(folder, budget, limit, suite=a.program_suite, runs_dir=a.runs_dir,
                                       program="DLE", force=program_env(a))
        elif key == "4":
            got = telemetry_rows(a, folder, limit)
        elif key == "6":
            got = host_rows(a, folder, limit)
        else:
            got = compiled_rows(a, folder, budget, limit)
            harness = json.loads((folder / "figures.json").read_text())["harness"]
            if harness["figure"]:
                measured[f"harness {COMPILED_TAG} bs{a.loader_batch}"] = harness["figure"]
        rows += got
        times.append(f"stage {key} ({st.title}): {time.monotonic() - began:.0f} s")
        write_summary(a, rows, times)
    rows.append(mlperf_row(measured, gpu))
    write_summary(a, rows, times)
    print("\n" + (a.out / "summary.md").read_text(), flush=True)
    if any(r.bad for r in rows):
        return 1
    return 0 if all(r.verdict in (gs.stats.MET, "no target") for r in rows) else 3


def write_summary(a: argparse.Namespace, rows: list[gs.Row], times: list[str]) -> None:
    device = "a dry run on the CPU (stand-in GPU outputs)" if a.device == "cpu" else "the GPU"
    text = [f"# gpu-proof: {device}", "", gs.table(rows), "", *times,
            f"total: {sum(float(t.rsplit(': ', 1)[1].split()[0]) for t in times):.0f} s of the stages; "
            f"budget {a.budget_s:.0f} s (margin {a.margin_s:.0f} s)"]
    (a.out / "summary.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    sys.exit(main())
