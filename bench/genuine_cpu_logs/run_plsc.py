#!/usr/bin/env python3
"""Run PLSC ArcFace at its pin for real on this CPU, as the kit's recipe launches it, and keep its whole log.

    .venv/bin/python bench/genuine_cpu_logs/run_plsc.py --venv /work/oldpaddle/venv-plsc \
        --work /work/oldpaddle/plsc-run [--batch-size 2] [--cpu 1] [--archive ../shared/programs/PLSC-....tar.gz]

What runs is the kit's own line for a one-GPU PLSC case (kit.config.reference.build, kit.run.command.launch_argv):
scripts/reference/launch.py records the run (<stem>.cmd.json: the model code's state against the pinned tree, the
environment), copies the checkout to ./plsc-patched, applies DLPerf's exit-at-batch-150 patch, adds the kit's
scripts/plsc/train.py and becomes `python3 train.py --loss-type arcface --batch-size B` there. Here `python3` is the
venv's (Python 3.7, Paddle 1.8.5 CPU: bench/genuine_cpu_logs/README.md), one process pinned to one core.

The ONE thing that is not the recipe: PLSC puts its executor and loader on `fluid.CUDAPlace(...)`
(plsc/entry.py:948-949), which ends a CPU build of Paddle; cuda_place_on_cpu/sitecustomize.py (on the program's
PYTHONPATH, recorded in the sidecar's environment, announced in the log's first line) answers it with CPUPlace.
No file of PLSC's is edited beyond the recipe's patch.

The checkout is the archive of PLSC at its pin (../shared/programs), unpacked by bench/prepare_models.py, which keeps
it only if its files are the pinned tree's. The log and its sidecar land in <work>/out/.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kit.config.reference import ONE_HOST, RefJob, build  # noqa: E402
from kit.core.layout import sidecar_name  # noqa: E402
from kit.run.command import launch_argv  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pinned import program_environ, run_pinned  # noqa: E402

HERE = Path(__file__).resolve().parent
SHIM = HERE / "cuda_place_on_cpu"
ARCHIVE = REPO.parent / "shared" / "programs" / "PLSC-9bba9c90f542.tar.gz"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", type=Path, required=True, help="Python 3.7 venv with plsc-requirements.txt")
    p.add_argument("--work", type=Path, required=True, help="a folder outside the repository (made fresh)")
    p.add_argument("--archive", type=Path, default=ARCHIVE)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--cpu", default="1", help="the core(s) the program is pinned to (taskset -c)")
    args = p.parse_args()

    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    models, run, out = work / "models", work / "run", work / "out"
    for folder in (run, out):
        folder.mkdir(parents=True)
    subprocess.run([sys.executable, str(REPO / "bench" / "prepare_models.py"), "--dest", str(models),
                    "--from", f"plsc={args.archive.resolve()}", "paddle/arcface"], check=True)

    job = RefJob("paddle", "arcface", "fp32", args.batch_size, 1, 1, data="synthetic", device="cpu")
    cmd = build(job, code_root=str(models), scripts_dir=str(REPO / "scripts"))
    log = out / f"{job.model}_b{job.batch_size}_{job.precision}_1.log"
    argv = launch_argv(sys.executable, str(REPO / "scripts"), cmd, job, ONE_HOST, str(out / sidecar_name(log.name)))
    env = program_environ(args.venv, PYTHONPATH=str(SHIM))  # `python3` is the venv's
    print("$ cd", run, "&&", "taskset -c", args.cpu, " ".join(argv[:3]), "...", " ".join(cmd.argv), flush=True)
    code, started, finished = run_pinned(argv, run, env, log, args.cpu)
    print(f"exit {code} after {finished - started:.0f} s: {log}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
