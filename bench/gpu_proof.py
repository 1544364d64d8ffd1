#!/usr/bin/env python3
"""The kit's GPU claims in one visit of 8.5 minutes (510 s) to one GPU (bench/gpu_proof.sh runs this).

    bash bench/gpu_proof.sh [--out DIR] [--work DIR] [--budget-s 510] [--margin-s 60] [--stages 1,2,3,4,5,6]
                            [--decoders torchvision,nvimgcodec] [--device gpu|cpu] ...

It prints its plan first (each stage, its budget, what it runs, what it drops when time runs short, and the stages
that will not run at this budget: those are not started), then runs the stages in this order; each runs under its
own timeout and is skipped with a message when the time left cannot hold it:
  1 loader    the new claim first: ResNet50 amp-nhwc bs256, synthetic and real-JPEG windows interleaved in ONE
              process (bench/loader_interleave.py: the harness's own backend and timed loop), beside the GPU
              sampler (scripts/telemetry/gpu_sampler.py); each decoder of --decoders in turn, its own share and
              verdict: torchvision first, then nvimgcodec (where it imports) in the time torchvision leaves, at the
              default budget little or none: a decoder that got no pair is inconclusive, out of time (never
              failed), and the second command, on the warm machine, measures it (~4 min; stage 1 alone gets 200 s):
                  bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec
              Then the loader alone. Targets: real / synthetic >= 0.90, the loader alone >= 1.5x synthetic
              training, each window one run of the noise rule. The row's detail: the loader's counters, the decode
              process's seconds per phase, the JPEG engines' mean utilisation (where the samples have it).
  2 suite     kit check-env --local --require-gpu; kit bench --suite gpu-proof (ResNet50 bs256 tf32 and amp-nhwc,
              VGG16 amp-nhwc bs128; 3 interleaved repeats; SIGINT at its share of the stage: its finished runs stay
              in a partial results.json, read as a whole one; without results.json the figures come from the logs);
              kit bundle + kit verify; the telemetry kit bench sampled beside each run; the torchvision yardstick
              (bench/yardstick.py) at each setting, ONE PROCESS PER REPEAT (each process's one window one run of the
              noise rule, as each harness process is). Targets: harness / yardstick >= 0.97; ResNet50 amp-nhwc
              >= 4500 images/s on an H100, 4950 on an H200 (the GPU named by the kit's capture).
Stages 3-7 run "if time is left": only where the budget holds them beyond the planned stages and the margin, so
NOT at the default budget (the plan says "will not run at this budget"); asked alone (--stages 3) they run:
  3 program   kit bench --suite gpu-proof-dle: NVIDIA DLE's PyTorch ResNet50 v1.5 (.models/, at its pin) beside
              the harness, AMP NHWC bs256 synthetic, 2 repeats each; target harness / program >= 0.95.
  4 telemetry the GPU sampler's own cost to a run (bench/sampler_overhead.py, few pairs).
  5 compiled  torch.compile, harness compiled / yardstick compiled, ResNet50 amp-nhwc bs256, one process each (a
              figure, its noise untested).
  6 host      the gpu loader's host work on this machine's CPU (bench/decode_overlap.py --stages step: decode
              stood in, a small-op thread beside it / alone, target >= 0.97) and what a thread wake-up costs there.
  7 hardware  kit yardstick on the GPU: GEMM per math mode (fp32, tf32, bf16, fp16), memory copy, host link (and
              the all-reduce bus with 2+ GPUs), each against its datasheet peak (kit/claims/gpu-datasheets.yaml) and
              the kit's recordings of that GPU model; met where the measure reaches its healthy floor.
Last, no GPU time: the kit's best ResNet50 figure / MLPerf Training v4.0's per-GPU figure for that GPU (MLPERF_V40).
Verdicts use the kit's noise rule (kit.results.stats): met or missed only when the interval lies wholly on one side
of the target; otherwise inconclusive (said, with why).
What comes back: the stages write under --work (a scratch folder, not under the output folder); after every stage,
at SIGTERM/SIGINT and at the end, OUT (the output folder, $OUT when set) gets, each written whole then renamed:
gpu-proof.tar.gz (the work: logs, run.json, captures, telemetry, windows.jsonl, nvidia-smi's outputs; plots and
HTML dropped as rebuilt, then the largest files while it is over 15 MiB; its MANIFEST.json lists what it holds and
what was dropped), results.json (the rows: stage, what, figure, target, verdict, detail; the plan; the timings)
and summary.md (one table: stage, figure, target, verdict); gpu_proof.sh adds console.log. Four files, no folder:
within the GPU machine's 8 files of 16 MiB, 2 folders deep. Exit 0: every target met; 1: a target missed or a
stage failed; 2: this machine cannot run the check; 3: nothing missed, but something inconclusive, untested or
skipped; 128 + the signal's number (143, 130) when stopped by SIGTERM or SIGINT, after packing what it had.
Budgets (STAGES) come from the per-process costs the H200 visit recorded (tests/fixtures/gpu-runs/h200-20261128):
the planned stages with the preflight leave --margin-s (60 s) of the 510 s unplanned, for overruns (a stopped
process's grace, a stage's wrap-up).
--device cpu is a dry run of the script on a CPU (with a stand-in nvidia-smi and small suites: tests/test_gpu_proof.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_stages as gs  # noqa: E402

from kit.core.files import write_text  # noqa: E402  (atomic: a temporary beside it, one rename)


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
               "JPEG tree (~10 s) + one process (~25 s start and cuDNN autotuning) beside the GPU sampler: "
               "each decoder in turn, its own share and verdict",
               "fewer pairs, then the loader-alone windows; a decoder left no time for a pair is inconclusive, "
               "out of time"),
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
    "7": Stage("hardware", 45, 25, "kit yardstick --device gpu (~20 s): GEMM per math mode, memory copy, host link "
               "(all-reduce with 2+ GPUs), 5 windows each, against the datasheet and the kit's recordings",
               "skipped", planned=False),
}
LOADER_ALONE_S = 200  # stage 1's timeout when it is the only planned stage (the second command on a warm machine)
SECOND_COMMAND = "bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec"  # ~4 min, start and preflight included
DECODERS = ("torchvision", "nvimgcodec")
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
# What the GPU machine sends back from OUT: at most 8 files of 16 MiB, none more than 2 folders down. OUT holds
# these four (and a temporary while one is rewritten); the work is packed into PACK, kept under PACK_LIMIT.
PACK, RESULTS, SUMMARY, CONSOLE = "gpu-proof.tar.gz", "results.json", "summary.md", "console.log"
PACK_LIMIT = 15 * 2**20  # under the 16 MiB a returned file may hold
REBUILT = (".png", ".svg", ".pdf", ".html")  # plots and pages, made again from what is kept (kit report)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_proof.sh", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                   help="output folder (default $OUT, else bench/out/gpu-proof-<time>)")
    p.add_argument("--work", type=Path, default=None,
                   help="scratch folder the stages write to, packed into OUT/gpu-proof.tar.gz after every stage "
                        "(default: a new gpu-proof-work-<time> in the temporary folder; not under OUT)")
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
    p.add_argument("--decoders", default=",".join(DECODERS),
                   help=f"stage 1's decoders, in turn (default {','.join(DECODERS)}: the later ones in the time "
                        "the earlier ones leave)")
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
    a.decoders = [d.strip() for d in a.decoders.split(",") if d.strip()]
    if not a.decoders or set(a.decoders) - set(DECODERS) or len(set(a.decoders)) < len(a.decoders):
        p.error(f"--decoders: pick from {', '.join(DECODERS)}, each once, got {','.join(a.decoders) or 'none'}")
    stamp = f"{dt.datetime.now():%Y%m%d-%H%M%S}"
    a.out = (a.out or gs.REPO / "bench" / "out" / f"gpu-proof-{stamp}").absolute()
    a.work = (a.work or Path(tempfile.gettempdir()) / f"gpu-proof-work-{stamp}").absolute()
    if a.work.resolve().is_relative_to(a.out.resolve()) or a.out.resolve().is_relative_to(a.work.resolve()):
        p.error(f"--work {a.work} and the output folder {a.out}: neither may be inside the other")
    return a


def plan(a: argparse.Namespace) -> str:
    """What will run, each stage's budget, what it drops when short, and the stages that will not run at this
    budget: printed and kept before anything runs."""
    planned = [k for k in a.stages if STAGES[k].planned]
    spent = PREFLIGHT_S + sum(cap(a, k) for k in planned)
    lines = [f"gpu-proof plan: budget {a.budget_s:.0f} s = preflight {PREFLIGHT_S} s + planned stages "
             f"{spent - PREFLIGHT_S:.0f} s + {a.budget_s - spent:.0f} s unplanned (margin kept: {a.margin_s:.0f} s)"]
    if a.budget_s - spent < a.margin_s:
        lines.append(f"  (the planned stages overrun the margin by {a.margin_s - (a.budget_s - spent):.0f} s: the "
                     "last ones get less, down to their least, or are skipped)")
    not_run = schedule(a)
    for key in a.stages:
        st = STAGES[key]
        if not_run[key]:
            lines.append(f"  {key} {st.title:<9}    —    {not_run[key]}")
            continue
        when = (f"if short: {st.short}; skipped under {st.least:.0f} s" if st.planned else
                f"only if time is left ({st.least:.0f} s beyond the margin), else {st.short}")
        runs = f"{st.runs} ({decoder_plan(a, key)})" if key == "1" else st.runs
        lines.append(f"  {key} {st.title:<9} {cap(a, key):>4.0f} s  runs: {runs}; {when}")
    lines.append("  then, no GPU time: the kit's best ResNet50 figure / MLPerf v4.0's per-GPU figure")
    return "\n".join(lines)


def decoder_plan(a: argparse.Namespace, key: str) -> str:
    """Stage 1's decoders in the plan: the first with its pairs, the later ones in the time it leaves."""
    first, *later = a.decoders
    said = f"{first}: up to {a.loader_pairs} synthetic/real window pairs, then 3 windows of the loader alone"
    if later:
        said += (f"; then {', '.join(later)} in the time {first} leaves: at {cap(a, key):.0f} s little or none "
                 f"(a decoder with no pair: inconclusive, out of time; then, on the warm machine: "
                 f"{SECOND_COMMAND}, ~4 min)")
    return said


def schedule(a: argparse.Namespace) -> dict[str, str]:
    """Per stage asked: '' when it runs at this budget, else why it will not (an "if time is left" stage that the
    planned stages leave no room for, beyond the margin, by their budgets): it is then not started at all."""
    planned = [k for k in a.stages if STAGES[k].planned]
    spare = a.budget_s - PREFLIGHT_S - sum(cap(a, k) for k in planned) - a.margin_s
    said = {}
    for key in a.stages:
        st = STAGES[key]
        if st.planned or spare >= st.least:
            said[key] = ""
            spare -= 0 if st.planned else cap(a, key)
        else:
            said[key] = (f"will not run at this budget: it needs {st.least:.0f} s beyond the margin, the planned "
                         f"stages leave {max(spare, 0):.0f} s (--budget-s {a.budget_s - spare + st.least:.0f} "
                         f"would hold it, or --stages {key} alone)")
    return said


def cap(a: argparse.Namespace, key: str) -> float:
    if a.stage_cap_s:
        return a.stage_cap_s
    alone = key == "1" and [k for k in a.stages if STAGES[k].planned] == ["1"]
    return LOADER_ALONE_S if alone else STAGES[key].budget


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
                               name=name, extra=extra, decoders=a.decoders)


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


def hardware_rows(a: argparse.Namespace, out: Path, limit_s: float) -> list[gs.Row]:
    """Stage 7: kit yardstick on this device, kept under OUT/runs/yardstick/; a row per measure (its fraction of the
    datasheet against the measure's healthy floor), and the verdict's line. On a CPU (the dry run) small sizes."""
    name = "7 hardware"
    out.mkdir(parents=True, exist_ok=True)
    small = ["--gemm-n", "256", "--copy-mib", "16", "--window-s", "0.02", "--repeats", "3"] if a.device == "cpu" else []
    done = gs.kit(["yardstick", "--device", a.device, "--json", "--runs-dir", str(out / "runs"), *small], limit_s,
                  capture=True)
    (out / "yardstick.log").write_text(done.stdout + done.stderr)
    try:
        got = json.loads(done.stdout)
    except json.JSONDecodeError:
        got = None
    if not got:
        rows = unfinished(name, "kit yardstick", "healthy", done, limit_s)
    else:
        rows = []
        for r in got["rows"]:
            measure, mode = r["key"].split("/")
            figure, target, verdict = f"{r['median']:g} {r['unit']}", "—", "no target"
            detail = [f"windows {r['low']:g}..{r['high']:g} ({r['size']})"]
            if r["fraction"] is not None:
                detail.insert(0, f"{r['fraction']:.1%} of the datasheet's {r['peak']:g}")
                if r["floor"] is not None:
                    target = f">= {r['floor']:.0%} of {r['peak']:g}"
                    verdict = gs.stats.MISSED if r["findings"] else gs.stats.MET
            detail += [f"{x['ratio']:.3f} of {x['label']}" for x in r["against"]]
            rows.append(gs.Row(name, f"{measure} {mode}", figure, target, verdict, "; ".join(detail)))
        rows.append(gs.Row(name, "kit yardstick's verdict", got["verdict"], "healthy",
                           gs.stats.MET if got["verdict"] == "healthy" else gs.stats.MISSED
                           if got["verdict"] == "suspect" else "no target", got["line"]))
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


class Stopped(Exception):
    """SIGTERM or SIGINT: the stage in progress is stopped, and what the run has is packed and written."""


def on_signal(signum: int, _frame) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):  # a second one (the same signal to the group, then to us) waits
        signal.signal(sig, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


@dataclass
class Run:
    """What the output folder says of the run so far."""

    rows: list[gs.Row] = dataclasses.field(default_factory=list)
    timings: list[dict] = dataclasses.field(default_factory=list)  # {"stage", "title", "seconds"} as each ends
    state: str = "running"  # then "done", or "stopped by SIGTERM during stage 2" ...
    exit: int | None = None
    current: str | None = None  # the stage in progress


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    budget = gs.Budget(a.budget_s)
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    text = plan(a)
    print(f"gpu-proof: output folder {a.out} (the work in {a.work}, packed into {a.out / PACK} after every stage)\n"
          f"{text}", flush=True)
    (a.work / "plan.txt").write_text(text + "\n")
    run = Run()
    before = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        checkpoint(a, run)
        save_nvidia_smi(a.work / "nvidia-smi")
        if problem := machine_problem(a):
            print(f"gpu-proof: {problem}", file=sys.stderr)
            run.state, run.exit = f"not run: {problem}", 2
            return 2
        stages(a, budget, run)
        run.state = "done"
        print("\n" + summary_text(a, run), flush=True)
        if any(r.bad for r in run.rows):
            run.exit = 1
        else:
            run.exit = 0 if all(r.verdict in (gs.stats.MET, "no target") for r in run.rows) else 3
        return run.exit
    except Stopped as stop:
        run.state = f"stopped by {stop}" + (f" during stage {run.current}" if run.current else "")
        run.exit = 128 + getattr(signal, str(stop))
        print(f"\ngpu-proof: {run.state}: packing what the run has into {a.out / PACK}", flush=True)
        return run.exit
    finally:
        for sig in before:  # the last pack is not cut short by a signal
            signal.signal(sig, signal.SIG_IGN)
        checkpoint(a, run)
        for sig, handler in before.items():
            signal.signal(sig, handler)


def stages(a: argparse.Namespace, budget: gs.Budget, run: Run) -> None:
    """The stages in order, each packed and summarised the moment it ends (or is stopped)."""
    measured: dict[str, float] = {}  # ResNet50 figures of this visit, for the MLPerf row
    gpu: str | None = None
    not_run = schedule(a)
    to_run = [k for k in a.stages if not not_run[k]]
    for i, key in enumerate(to_run):
        st = STAGES[key]
        folder = a.work / f"{key}-{st.title}"
        limit = stage_limit(a, budget, key, to_run[i + 1:])
        if limit is None:
            left = budget.left() - a.margin_s
            run.rows.append(gs.Row(f"{key} {st.title}", "the stage", "—", "—", "skipped",
                                   f"{max(left, 0):.0f} s left beyond the margin, it needs {st.least:.0f} s"))
            print(f"gpu-proof: stage {key} ({st.title}) skipped: {max(left, 0):.0f} s left beyond the "
                  f"{a.margin_s:.0f} s margin, it needs {st.least:.0f} s", flush=True)
            checkpoint(a, run)
            continue
        print(f"\n===== stage {key}: {st.title} (up to {limit:.0f} s; {budget.left():.0f} s left) =====", flush=True)
        began = time.monotonic()
        run.current = key
        runs_before = set(a.runs_dir.iterdir()) if a.runs_dir.is_dir() else set()
        try:
            got = stage(a, budget, key, folder, limit, measured)
        except Stopped:
            run.timings.append({"stage": key, "title": st.title, "seconds": round(time.monotonic() - began, 1)})
            keep_stopped_run(a.runs_dir, runs_before, folder)
            run.rows += stopped_rows(a, key, folder, time.monotonic() - began)
            raise
        if key == "2":
            run_dir = folder / "run"
            gpu = gs.gpu_name(run_dir) if run_dir.is_dir() else gpu
        run.current = None
        run.rows += got
        run.timings.append({"stage": key, "title": st.title, "seconds": round(time.monotonic() - began, 1)})
        checkpoint(a, run)
    run.rows.append(mlperf_row(measured, gpu))


def stage(a: argparse.Namespace, budget: gs.Budget, key: str, folder: Path, limit: float,
          measured: dict[str, float]) -> list[gs.Row]:
    """One stage's rows; the ResNet50 figures it measured added to MEASURED."""
    st = STAGES[key]
    if key == "1":
        return loader_rows(a, folder, budget, limit)
    if key == "2":
        got = gs.suite_stage(folder, budget, limit, suite=a.suite, runs_dir=a.runs_dir, device=a.device,
                             yardstick_repeats=a.yardstick_repeats, name=f"{key} {st.title}")
        run_dir = folder / "run"
        figures = gs.run_figures(run_dir) if run_dir.is_dir() else {}
        measured |= {f"harness {t} bs{b}": gs.stats.median(v) for (fw, m, b, t), v in figures.items()
                     if fw == "torch" and m == "resnet50" and v}
        return got
    if key == "3":
        if problem := program_problem(a):
            got = [gs.Row(f"{key} {st.title}", "DLE's ResNet50 beside the harness", "—",
                          f">= {gs.PROGRAM_TARGET}", "failed", problem)]
            folder.mkdir(parents=True, exist_ok=True)
            gs.verdict_line(folder, f"{key} {st.title}", got)
            return got
        return gs.program_stage(folder, budget, limit, suite=a.program_suite, runs_dir=a.runs_dir,
                                program="DLE", force=program_env(a))
    if key == "4":
        return telemetry_rows(a, folder, limit)
    if key == "6":
        return host_rows(a, folder, limit)
    if key == "7":
        return hardware_rows(a, folder, limit)
    got = compiled_rows(a, folder, budget, limit)
    harness = json.loads((folder / "figures.json").read_text())["harness"]
    if harness["figure"]:
        measured[f"harness {COMPILED_TAG} bs{a.loader_batch}"] = harness["figure"]
    return got


def keep_stopped_run(runs_dir: Path, before: set[Path], folder: Path) -> None:
    """The run directory a stopped stage's kit bench was writing (its finished runs, logs and captures), into the
    stage's FOLDER as run/ where the stage had not copied it yet: packed with the rest."""
    made = gs.new_run_dir(runs_dir, before) if runs_dir.is_dir() else None
    if made is not None and not (folder / "run").exists():
        try:
            gs.keep(made, folder / "run")
        except OSError as exc:  # shutil.Error too: a file that went as it was copied
            print(f"gpu-proof: keeping {made}: {exc}", file=sys.stderr, flush=True)


def stopped_rows(a: argparse.Namespace, key: str, folder: Path, seconds: float) -> list[gs.Row]:
    """The rows of a stage stopped by a signal: stage 1's from the windows it wrote so far; else one row."""
    st = STAGES[key]
    windows = folder / "windows.jsonl"
    if key == "1" and windows.is_file():
        lines = [json.loads(x) for x in windows.read_text().splitlines() if x.startswith("{") and x.endswith("}")]
        return gs.interleave_rows(f"{key} {st.title}", lines, "stopped by a signal", decoders=a.decoders,
                                  timed_out=True, telemetry=folder / "gpu.telemetry")
    return [gs.Row(f"{key} {st.title}", "the stage", "—", "—", "stopped",
                   f"stopped by a signal after {seconds:.0f} s: what it wrote so far is in {PACK}")]


def checkpoint(a: argparse.Namespace, run: Run) -> None:
    """The work packed, results.json and summary.md, each written whole then renamed into OUT: what comes back is
    whole at any moment. Never raises: a failure to pack is said, and the run goes on."""
    try:
        packed = pack(a.work, a.out / PACK)
    except OSError as exc:
        packed = {"error": f"packing {a.work} into {a.out / PACK}: {exc}"}
        print(f"gpu-proof: {packed['error']}", file=sys.stderr, flush=True)
    try:
        write_text(a.out / RESULTS, json.dumps(results(a, run, packed), indent=1) + "\n")
        write_text(a.out / SUMMARY, summary_text(a, run, packed))
    except OSError as exc:
        print(f"gpu-proof: writing {a.out}: {exc}", file=sys.stderr, flush=True)


def pack(work: Path, dest: Path, limit: int = PACK_LIMIT) -> dict:
    """WORK as DEST (a .tar.gz of folder gpu-proof/, MANIFEST.json first: each file kept, each dropped and why),
    written beside DEST then renamed. Dropped: plots and pages (REBUILT), then the largest files until the pack
    fits LIMIT bytes. What it holds, for results.json."""
    files = []
    for top, dirs, names in os.walk(work):
        dirs.sort()
        files += [Path(top) / n for n in sorted(names)]
    dropped = [{"path": str(f.relative_to(work)), "bytes": f.lstat().st_size, "why": "rebuilt (a plot or page)"}
               for f in files if f.suffix.lower() in REBUILT]
    kept = [f for f in files if f.suffix.lower() not in REBUILT]
    tmp = dest.with_name(dest.name + ".part")
    while True:
        manifest = {"pack": PACK, "made": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                    "work": str(work), "limit_bytes": limit,
                    "files": [{"path": str(f.relative_to(work)), "bytes": f.lstat().st_size} for f in kept],
                    "dropped": dropped}
        unreadable = []
        with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
            blob = (json.dumps(manifest, indent=1) + "\n").encode()
            info = tarfile.TarInfo("gpu-proof/MANIFEST.json")
            info.size, info.mtime = len(blob), int(time.time())
            tar.addfile(info, io.BytesIO(blob))
            for f in kept:
                try:
                    tar.add(f, f"gpu-proof/{f.relative_to(work)}", recursive=False)
                except (OSError, tarfile.TarError) as exc:  # a file that went, or changed size, as it was read
                    unreadable.append({"path": str(f.relative_to(work)), "why": f"unreadable: {exc}"})
        size = tmp.stat().st_size
        if size <= limit or not kept:
            break
        excess = size - limit  # compressed bytes: drop at least as many uncompressed ones, largest first
        kept.sort(key=lambda f: f.lstat().st_size)
        while kept and excess > 0:
            f = kept.pop()
            excess -= f.lstat().st_size
            dropped.append({"path": str(f.relative_to(work)), "bytes": f.lstat().st_size,
                            "why": f"over the pack's {limit / 2**20:.1f} MiB"})
        kept.sort()
    tmp.replace(dest)
    return {"file": dest.name, "bytes": size, "files": len(kept) - len(unreadable), "dropped": dropped + unreadable}


def results(a: argparse.Namespace, run: Run, packed: dict) -> dict:
    """results.json: the rows, the plan and the timings, machine-readable."""
    not_run = schedule(a)
    return {"gpu_proof": 1, "device": a.device, "state": run.state, "exit": run.exit, "budget_s": a.budget_s,
            "margin_s": a.margin_s, "decoders": a.decoders,
            "plan": {"text": plan(a).splitlines(),
                     "stages": [{"stage": k, "title": STAGES[k].title, "budget_s": cap(a, k),
                                 "planned": STAGES[k].planned, "runs": not not_run[k], "why_not": not_run[k]}
                                for k in a.stages]},
            "rows": [dataclasses.asdict(r) for r in run.rows], "timings": run.timings, "pack": packed}


def summary_text(a: argparse.Namespace, run: Run, packed: dict | None = None) -> str:
    device = "a dry run on the CPU (stand-in GPU outputs)" if a.device == "cpu" else "the GPU"
    text = [f"# gpu-proof: {device}", "", gs.table(run.rows), "",
            *[f"stage {t['stage']} ({t['title']}): {t['seconds']:.0f} s" for t in run.timings],
            f"total: {sum(t['seconds'] for t in run.timings):.0f} s of the stages; budget {a.budget_s:.0f} s "
            f"(margin {a.margin_s:.0f} s); {run.state}"]
    if any("out of time" in r.detail and "(nvimgcodec)" in r.what for r in run.rows):
        text.append(f"nvimgcodec had no time here: next, on the warm machine, {SECOND_COMMAND} (~4 min)")
    if packed and "error" in packed:
        text.append(f"not packed: {packed['error']}")
    elif packed:
        dropped = packed["dropped"]
        text.append(f"{packed['file']}: {packed['files']} files, {packed['bytes'] / 2**20:.1f} MiB (the work in "
                    f"{a.work})" + (f"; dropped {len(dropped)}, listed in its MANIFEST.json: "
                                     f"{', '.join(d['path'] for d in dropped[:5])}"
                                     + (" ..." if len(dropped) > 5 else "") if dropped else ""))
    return "\n".join(text) + "\n"


if __name__ == "__main__":
    sys.exit(main())
