#!/usr/bin/env python3
"""The one-GPU check (`make gpu-check`): what a lent GPU machine shows in about six minutes.

    python bench/gpu_check.py [--runs-dir DIR] [--suite gpu1] [--no-yardstick]

1. `kit check-env --local`: this machine's GPUs, driver, topology (the probes every pre-flight runs).
2. `kit bench --suite gpu1`: ResNet50 v1.5 bs256 in fp32, tf32, amp (nchw, nhwc, nhwc compiled), VGG16 amp-nhwc,
   ArcFace fp32, BERT-base amp on one GPU (kit/suites/gpu1.yaml), then `kit bundle` + `kit verify`.
3. The yardstick: torchvision's own ResNet50 / VGG16 (bench/yardstick.py), same step, batch, precision, layout and
   mode, and harness / yardstick per setting.
Targets (exit 1 when one is missed): harness / yardstick >= 0.97 for every setting; on an H100, the harness's
ResNet50 amp-nhwc >= 4500 images/s. Needs PyTorch with CUDA; Paddle is not needed (gpu1 is torch only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from kit.core.layout import split_tag  # noqa: E402

RATIO_TARGET = 0.97
H100_AMP_NHWC_TARGET = 4500.0
# (model, batch, case tag) of gpu1 that the yardstick measures too
YARDSTICK = [("resnet50", 256, "fp32"), ("resnet50", 256, "tf32"), ("resnet50", 256, "amp"),
             ("resnet50", 256, "amp-nhwc"), ("resnet50", 256, "amp-nhwc-compiled"), ("vgg16", 128, "amp-nhwc")]


def kit(*args: str, capture: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    print(f"$ kit {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "kit", *args], cwd=REPO, env=env, text=True,
                          capture_output=capture)


def new_run_dir(runs_dir: Path, before: set[Path]) -> Path:
    made = sorted((p for p in runs_dir.iterdir() if p.is_dir() and p not in before), key=lambda p: p.stat().st_mtime)
    if not made:
        raise SystemExit(f"gpu-check: kit bench made no run directory under {runs_dir}")
    return made[-1]


def harness_figures(run_dir: Path) -> dict[tuple[str, int, str], dict]:
    """(model, batch, tag) -> {median, peak_memory_mb} from the run's results.json (1n1g cases)."""
    results = json.loads((run_dir / "results.json").read_text())
    out = {}
    for group in results["groups"]:
        for case in group["cases"]:
            if case["case"] == "1n1g":
                out[(group["model"], group["batch_per_device"], group["precision"])] = case
    return out


def yardstick(model: str, batch: int, tag: str, warmup: int, measure: int) -> dict:
    parts = split_tag(tag)
    argv = [sys.executable, str(REPO / "bench" / "yardstick.py"), "--model", model, "--batch-size", str(batch),
            "--precision", parts["precision"], "--layout", parts.get("layout", "nchw"),
            "--mode", parts.get("mode", "eager"), "--warmup-steps", str(warmup),
            "--measure-steps", str(measure), "--device", "gpu", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument("--suite", default="gpu1")
    parser.add_argument("--no-yardstick", action="store_true")
    args = parser.parse_args()
    start = time.monotonic()
    failures = []
    if kit("check-env", "--local", "--require-gpu", "--runs-dir", str(args.runs_dir)).returncode != 0:
        failures.append("check-env refused this machine")
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    before = set(args.runs_dir.iterdir())
    if kit("bench", "--suite", args.suite, "--runs-dir", str(args.runs_dir)).returncode != 0:
        failures.append("kit bench: a run gave no figure")
    run_dir = new_run_dir(args.runs_dir, before)
    bundle = args.runs_dir / f"{run_dir.name}.bundle.tar.gz"
    if kit("bundle", str(run_dir), "--out", str(bundle), "--force", "--submitter", "gpu-check",
           "--system-name", "gpu-check").returncode != 0:
        failures.append("kit bundle failed")
    elif kit("verify", str(bundle)).returncode != 0:
        failures.append("kit verify found violations")
    print((run_dir / "report.md").read_text() if (run_dir / "report.md").is_file() else "no report.md")

    figures = harness_figures(run_dir) if (run_dir / "results.json").is_file() else {}
    device = ""
    print("| model, batch | setting | harness images/s | yardstick images/s | harness / yardstick | peak MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for model, batch, tag in YARDSTICK:
        mine = figures.get((model, batch, tag))
        stick = {} if args.no_yardstick else yardstick(model, batch, tag, 20, 60)
        device = stick.get("device_name") or device
        ratio = mine["median"] / stick["images_per_sec"] if mine and stick.get("images_per_sec") else None
        if ratio is not None and ratio < RATIO_TARGET:
            failures.append(f"{model} {tag}: harness / yardstick {ratio:.3f} < {RATIO_TARGET}")
        if mine is None:
            failures.append(f"{model} {tag}: no harness figure")
        print(f"| {model}, {batch} | {tag} | {mine['median']:.1f} | " if mine else f"| {model}, {batch} | {tag} | — | ",
              end="")
        print(f"{stick['images_per_sec']:.1f} | " if stick.get("images_per_sec") else f"{stick.get('error', '—')} | ",
              end="")
        print(f"{ratio:.3f} | " if ratio else "— | ", end="")
        print(f"{mine.get('peak_memory_mb') or '—'} |" if mine else "— |")
    amp_nhwc = figures.get(("resnet50", 256, "amp-nhwc"))
    if "H100" in device and amp_nhwc and amp_nhwc["median"] < H100_AMP_NHWC_TARGET:
        failures.append(f"ResNet50 amp-nhwc {amp_nhwc['median']:.1f} images/s < {H100_AMP_NHWC_TARGET} on an H100")
    print(f"gpu-check: {time.monotonic() - start:.0f} s, run {run_dir}")
    for failure in failures:
        print(f"gpu-check: FAILED: {failure}")
    print("gpu-check: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
