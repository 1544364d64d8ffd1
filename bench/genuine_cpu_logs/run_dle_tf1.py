#!/usr/bin/env python3
"""Run DeepLearningExamples TensorFlow/Classification/RN50v1.5 (older NGC TensorFlow ResNet-50, dllogger 0.2.3: the
':::NVLOG' lines of the kit's nvlog-tf format) for real on this CPU and keep its whole log, with a record of how it ran.

    .venv/bin/python bench/genuine_cpu_logs/run_dle_tf1.py --venv /work/oldpaddle/venv-tf1 \
        --work /work/oldpaddle/dle-tf1-run [--git /work/.mirror/NVIDIA+DeepLearningExamples/repo] \
        [--commit b1ae8dd4...] [--batch-size 4] [--warmup 20] [--iterations 220] [--cpu 1]

The code is TensorFlow/Classification/RN50v1.5 of NVIDIA/DeepLearningExamples at COMMIT (the parser's), taken from a
git directory of that repository with `git archive`, each file checked against the commit's blob. What runs is the
line its own scripts/benchmarking/benchmark.py builds for one GPU (`python main.py --mode=training_benchmark
--batch_size=B --warmup_steps=W --num_iter=N --precision=fp32 --iter_unit=batch --data_dir=D --results_dir=R`) with
no --data_dir (main.py's synthetic input, runtime/runner.py:436 'Using Synthetic Data ...') and
`--data_format=NHWC` (the program's own flag; its default NCHW is the GPU layout), in one process pinned to one core
(OMP_NUM_THREADS=1, MKL_NUM_THREADS=1). The program asks for '/gpu:0' (model/resnet_v1_5.py:131,135) under
`allow_soft_placement = True` (runtime/runner.py:219): a CPU build of TensorFlow places those ops on the CPU itself.
Nothing of the program's is edited and nothing is loaded beside it. Its venv: TensorFlow 1.15.5 (PyPI, CPU) and
Horovod 0.22.1 built from PyPI's source against it with MPI (runtime/runner.py:81 calls hvd.init() on every run);
bench/genuine_cpu_logs/README.md. The log (<work>/out/resnet50_b<B>_fp32_1.log) and its record (.cmd.json) land in
<work>/out/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pinned import checkout, program_environ, run_pinned  # noqa: E402

GIT = Path("/work/.mirror/NVIDIA+DeepLearningExamples/repo")
COMMIT = "b1ae8dd47c0e1474741431ad7f0d7a14d6bd6210"  # 2019-03-18: kit/results/parsers/nvlog_tf.py's
SUBDIR = "TensorFlow/Classification/RN50v1.5"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", type=Path, required=True, help="Python 3.7 venv with TensorFlow 1.15.5 and Horovod")
    p.add_argument("--work", type=Path, required=True, help="a folder outside the repository (made fresh)")
    p.add_argument("--git", type=Path, default=GIT, help="a git directory of NVIDIA/DeepLearningExamples")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--warmup", type=int, default=20, help="--warmup_steps (benchmark.py's default: 3; its DGX-1 "
                                                          "scripts: 200)")
    p.add_argument("--iterations", type=int, default=220, help="--num_iter (batches)")
    p.add_argument("--cpu", default="1", help="the core(s) the program is pinned to (taskset -c)")
    args = p.parse_args()

    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    code, results, out = work / "code", work / "results", work / "out"
    for folder in (code, results, out):
        folder.mkdir(parents=True)
    commit = subprocess.run(["git", f"--git-dir={args.git}", "rev-parse", f"{args.commit}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    files = checkout(args.git, commit, SUBDIR, code)
    python = args.venv.resolve() / "bin" / "python"
    cwd = code / SUBDIR
    argv = ["python", "-u", "main.py", "--mode=training_benchmark", f"--batch_size={args.batch_size}",
            f"--warmup_steps={args.warmup}", f"--num_iter={args.iterations}", "--precision=fp32", "--iter_unit=batch",
            f"--results_dir={results}", "--data_format=NHWC"]
    env = program_environ(args.venv)
    log = out / f"resnet50_b{args.batch_size}_fp32_1.log"
    versions = subprocess.run(
        [str(python), "-c", "import sys, numpy, tensorflow as tf, horovod; print(sys.version.split()[0], "
         "tf.__version__, tf.version.GIT_VERSION, horovod.__version__, numpy.__version__)"],
        check=True, capture_output=True, text=True).stdout.split()
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "?")
    print("$ cd", cwd, "&&", "taskset -c", args.cpu, " ".join(argv), flush=True)
    status, started, finished = run_pinned(argv, cwd, env, log, args.cpu)
    record = {
        "program": "NVIDIA/DeepLearningExamples TensorFlow/Classification/RN50v1.5 main.py (training_benchmark)",
        "code": {"repository": "https://github.com/NVIDIA/DeepLearningExamples", "commit": commit, "path": SUBDIR,
                 "files": len(files), "state": "each file the commit's blob (git hash-object)"},
        "recipe": "scripts/benchmarking/benchmark.py's one-GPU training line, synthetic data, NHWC, on the CPU",
        "cwd": str(cwd), "argv": ["taskset", "-c", args.cpu, *argv], "environ": env,
        "software": dict(zip(("python", "tensorflow", "tensorflow_git", "horovod", "numpy"), versions, strict=True)),
        "host": {"node": platform.node(), "cpu": cpu_model, "kernel": platform.release()},
        "started_utc": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.fromtimestamp(finished, dt.UTC).isoformat(timespec="seconds"),
        "exit_code": status,
    }
    log.with_suffix(".cmd.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"exit {status} after {finished - started:.0f} s: {log}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
