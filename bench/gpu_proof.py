#!/usr/bin/env python3
"""Every GPU claim of the kit in one visit of about 8.5 minutes (520 s) to one GPU (bench/gpu_proof.sh runs this).

    bash bench/gpu_proof.sh [--out DIR] [--budget-s 520] [--stages 1,2,3] [--device gpu|cpu] ...

Stages, in order of value; each runs under its own timeout, is skipped with a message when the time left cannot
hold it, and copies what it made to its folder under the output folder ($OUT when set) the moment it ends:
  1 suite    kit check-env --local --require-gpu; kit bench --suite gpu-proof (ResNet50 bs256 tf32 and amp-nhwc;
             VGG16 amp-nhwc bs128; 3 interleaved repeats); kit bundle + kit verify; the torchvision yardstick
             (bench/yardstick.py) at each setting, 3 timed windows. Targets: harness / yardstick >= 0.97;
             ResNet50 amp-nhwc >= 4500 images/s on an H100, 4950 on an H200 (the GPU named by the kit's capture).
  2 loader   ResNet50 amp-nhwc bs256 on real JPEGs through the gpu loader (nvJPEG, decoding beside the step) and
             on synthetic data, 3 interleaved train.py runs each; target real / synthetic >= 0.90.
  3 program  kit bench --suite gpu-proof-dle: NVIDIA DLE's own PyTorch ResNet50 v1.5 (.models/, at its pin) beside
             the harness, AMP NHWC bs256 synthetic, 2 repeats each; target harness / program >= 0.95.
Verdicts use the kit's noise rule (kit.results.stats): met or missed only when the interval lies wholly on one side
of the target; otherwise inconclusive (said, with why). Ends with one table (stage, figure, target, verdict), also in
OUT/summary.md. Exit 0: every target met; 1: a target missed or a stage failed; 2: this machine cannot run the
check; 3: nothing missed, but something inconclusive, untested or skipped.
Trimmed against the separate checks (make gpu-check, make gpu-check-loader, bench/dle_native_check.sh, which share
this code): ResNet50 fp32 without TF32 and amp NCHW, torch.compile, VGG16 NCHW, ArcFace, BERT; 10 + 20 steps; 4096
JPEGs; no cpu-loader or loader-only runs (the input_rate probe of each gpu-loader run gives the loader alone); DLE
twice, not three times. Each harness process costs ~18 s before its timed steps on an H100 (start + cuDNN
autotuning, from the recorded run), so processes, not steps, are what was cut.
--device cpu is a dry run of the script on a CPU (with a stand-in nvidia-smi and small suites: tests/test_gpu_proof.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_stages as gs  # noqa: E402

# (stage, the least time it can do anything useful in, its cap) in seconds, from the first run on an H200
# (2026-11-28): stage 1's 9 harness processes took 182 s (the first 36 s, the others 14-24 s), its 3 yardstick
# processes ~25 s each; stage 2's train.py runs 15-26 s each; stage 3's harness runs 16-28 s
STAGES = {"1": ("suite", 120, 300), "2": ("loader", 60, 110), "3": ("program", 60, 110)}
BUDGET_S = 520
DLE_FILES = ("DeepLearningExamples/PyTorch/Classification/ConvNets/main.py", "dllogger/dllogger/__init__.py")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_proof.sh", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
                   help="output folder (default $OUT, else bench/out/gpu-proof-<time>)")
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help=f"seconds for everything (default {BUDGET_S})")
    p.add_argument("--stages", default="1,2,3", help="which stages, comma-separated (default 1,2,3)")
    p.add_argument("--stage-cap-s", type=float, default=None,
                   help="each stage's longest time (default: 300, 110, 110 s, sized for the 520 s budget)")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="cpu: a dry run of this script")
    p.add_argument("--runs-dir", type=Path, default=Path("/tmp/gpu-proof-runs"))
    p.add_argument("--suite", default="gpu-proof", help="stage 1's suite (name or YAML)")
    p.add_argument("--yardstick-repeats", type=int, default=3)
    p.add_argument("--images", type=int, default=4096, help="stage 2's JPEGs")
    p.add_argument("--loader-repeats", type=int, default=3)
    p.add_argument("--loader-batch", type=int, default=256)
    p.add_argument("--loader-image-size", type=int, default=224)
    p.add_argument("--loader-steps", default="10,20", metavar="WARMUP,MEASURE")
    p.add_argument("--jpeg-dir", type=Path, default=Path("/tmp/gpu-proof-jpegs"))
    p.add_argument("--program-suite", default="gpu-proof-dle", help="stage 3's suite (name or YAML)")
    p.add_argument("--model-code", type=Path, default=Path(os.environ.get("KIT_MODEL_CODE") or gs.REPO / ".models"))
    a = p.parse_args(argv)
    a.stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    if not a.stages or set(a.stages) - set(STAGES):
        p.error(f"--stages: pick from {', '.join(STAGES)}, got {','.join(a.stages) or 'none'}")
    try:
        a.loader_warmup, a.loader_measure = (int(x) for x in a.loader_steps.split(","))
    except ValueError:
        p.error(f"--loader-steps: WARMUP,MEASURE, got {a.loader_steps!r}")
    if min(a.yardstick_repeats, a.loader_repeats, a.images, a.loader_measure) < 1 or a.budget_s < 1:
        p.error("--yardstick-repeats, --loader-repeats, --images, the measured steps and --budget-s must be >= 1")
    a.out = a.out or gs.REPO / "bench" / "out" / f"gpu-proof-{dt.datetime.now():%Y%m%d-%H%M%S}"
    return a


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


def stage_limit(budget: gs.Budget, key: str, later: list[str], cap_s: float | None = None) -> float:
    """This stage's timeout: its cap, less what the later stages need at least, never below its own least."""
    _, least, cap = STAGES[key]
    cap = cap_s or cap
    reserve = sum(STAGES[k][1] for k in later)
    return min(budget.left(), max(least, min(cap, budget.left() - reserve)))


def loader_rows(a: argparse.Namespace, out: Path, budget: gs.Budget, limit_s: float) -> list[gs.Row]:
    name = "2 loader"
    cores = len(os.sched_getaffinity(0))
    began = budget.elapsed()
    try:
        listing = gs.jpeg_tree(a.jpeg_dir, a.images, cores, timeout_s=limit_s / 2)
    except RuntimeError as exc:
        return [gs.Row(name, "JPEG tree", "—", "made", "failed", str(exc))]
    common = ["--framework", "torch", "--model", "resnet50", "--precision", "amp", "--layout", "nhwc",
              "--batch-size", str(a.loader_batch), "--image-size", str(a.loader_image_size),
              "--warmup-steps", str(a.loader_warmup), "--measure-steps", str(a.loader_measure),
              "--device", a.device]
    runs = {"synthetic": [], "gpu loader": ["--data", str(listing), "--workers", str(cores), "--loader", "gpu",
                                            "--input-probe-steps", str(a.loader_warmup)]}
    got = gs.loader_stage(out, budget, limit_s - (budget.elapsed() - began), runs=runs, common=common,
                          repeats=a.loader_repeats, listing=listing)
    synthetic, real = gs.figures_of(got["synthetic"]), gs.figures_of(got["gpu loader"])
    row = gs.ratio_row(name, f"resnet50 bs{a.loader_batch} amp-nhwc: real JPEGs (gpu loader) / synthetic", synthetic,
                       real, gs.LOADER_TARGET, ("synthetic", "gpu loader"))
    if row.verdict == "failed":
        row.detail += f": {gs.first_error(got['synthetic']) or gs.first_error(got['gpu loader'])}"
    probes = [r.input_rate for r in got["gpu loader"] if r.input_rate]
    decoder = next((r.decoder for r in got["gpu loader"] if r.decoder), None)
    if probes:
        row.detail += f"; loader alone {gs.stats.median(probes):.0f} images/s ({decoder})"
    if row.verdict != gs.stats.MET:  # where the loader's time went, where the stage has time for it
        left = limit_s - (budget.elapsed() - began)
        row.detail += "; " + (gs.loader_profile(listing, a.loader_batch, cores, a.device, out, min(left, 60))
                              if left >= 20 else f"no loader profile: {max(left, 0):.0f} s of the stage left")
    return [row]


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    budget = gs.Budget(a.budget_s)
    a.out.mkdir(parents=True, exist_ok=True)
    print(f"gpu-proof: output folder {a.out}; budget {a.budget_s:.0f} s; stages {','.join(a.stages)}", flush=True)
    save_nvidia_smi(a.out / "nvidia-smi")
    if problem := machine_problem(a):
        print(f"gpu-proof: {problem}", file=sys.stderr)
        (a.out / "summary.md").write_text(f"gpu-proof: not run: {problem}\n")
        return 2
    rows: list[gs.Row] = []
    times: list[str] = []
    for i, key in enumerate(a.stages):
        title, least, _ = STAGES[key]
        folder = a.out / f"{key}-{title}"
        left = budget.left()
        if left < least:
            rows.append(gs.Row(f"{key} {title}", "the stage", "—", "—", "skipped",
                               f"{left:.0f} s left of the budget, it needs about {least} s"))
            print(f"gpu-proof: stage {key} ({title}) skipped: {left:.0f} s left, it needs about {least} s", flush=True)
            write_summary(a, rows, times)
            continue
        limit = stage_limit(budget, key, a.stages[i + 1:], a.stage_cap_s)
        print(f"\n===== stage {key}: {title} (up to {limit:.0f} s; {left:.0f} s left) =====", flush=True)
        began = time.monotonic()
        if key == "1":
            got = gs.suite_stage(folder, budget, limit, suite=a.suite, runs_dir=a.runs_dir, device=a.device,
                                 yardstick_repeats=a.yardstick_repeats)
        elif key == "2":
            got = loader_rows(a, folder, budget, limit)
            gs.verdict_line(folder, f"{key} {title}", got)
        elif problem := program_problem(a):
            got = [gs.Row(f"{key} {title}", "DLE's ResNet50 beside the harness", "—", f">= {gs.PROGRAM_TARGET}",
                          "failed", problem)]
            folder.mkdir(parents=True, exist_ok=True)
            gs.verdict_line(folder, f"{key} {title}", got)
        else:
            got = gs.program_stage(folder, budget, limit, suite=a.program_suite, runs_dir=a.runs_dir,
                                   program="DLE", force=program_env(a))
        rows += got
        times.append(f"stage {key} ({title}): {time.monotonic() - began:.0f} s")
        write_summary(a, rows, times)
    print("\n" + (a.out / "summary.md").read_text(), flush=True)
    if any(r.bad for r in rows):
        return 1
    return 0 if all(r.verdict in (gs.stats.MET, "no target") for r in rows) else 3


def write_summary(a: argparse.Namespace, rows: list[gs.Row], times: list[str]) -> None:
    device = "a dry run on the CPU (stand-in GPU outputs)" if a.device == "cpu" else "the GPU"
    text = [f"# gpu-proof: {device}", "", gs.table(rows), "", *times,
            f"total: {sum(float(t.rsplit(': ', 1)[1].split()[0]) for t in times):.0f} s of {a.budget_s:.0f}"]
    (a.out / "summary.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    sys.exit(main())
