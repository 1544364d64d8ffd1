#!/usr/bin/env python3
"""Run PaddlePaddle/models release/1.8 image classification (ResNet50, DLPerf's resnet50v1.5 line) for real on this CPU
and keep its whole log, with a record of how it ran.

    .venv/bin/python bench/genuine_cpu_logs/run_paddle_models18.py --venv /work/oldpaddle/venv-plsc \
        --work /work/oldpaddle/pm18-run [--git /work/.mirror/PaddlePaddle+models/repo] [--commit b71cf632...] \
        [--batch-size 4] [--image-size 224] [--max-iter 120] [--cpu 1]

The code is PaddleCV/image_classification of PaddlePaddle/models at COMMIT (release/1.8's head), taken from a git
directory of that repository with `git archive` and kept only if every file's blob is the commit's (the record's
`code`). The data are real JPEG files make_jpegs.py writes in the layout its reader wants (<data>/train_list.txt).
What runs is DLPerf's PaddlePaddle/resnet50v1.5/scripts/single_node_train.sh line for fp32 (Oneflow-Inc/DLPerf), with
`--use_gpu=False` (the program's own flag), the batch, image size and max_iter given here, the dataset's size as
--total_images and one reader thread, as `python -u train.py ...` in one process pinned to one core: CPU_NUM=1
(Paddle's count of CPU places, which the reader divides the batch by), OMP_NUM_THREADS=1, MKL_NUM_THREADS=1. DLPerf
starts it under `python3 -m paddle.distributed.launch`, which for one device sets the variables train.py reads to
their one-trainer defaults (PADDLE_TRAINER_ID 0, PADDLE_TRAINERS_NUM 1); no launcher runs here. Nothing of the
program's is edited and no shim is loaded. The log (<work>/out/r50_b<B>_fp32_1.log, DLPerf's name) and its record
(<work>/out/r50_b<B>_fp32_1.cmd.json) land in <work>/out/.
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

HERE = Path(__file__).resolve().parent
GIT = Path("/work/.mirror/PaddlePaddle+models/repo")
# release/1.8's head (2020-12-19); its image_classification is the tag v1.8.0's (1bf72647, 2020-05-19)
COMMIT = "b71cf6322ad8bd293c052cbbe45f7a382fcb73ae"
SUBDIR = "PaddleCV/image_classification"


def dlperf_args(data: Path, images: int, batch: int, size: int, max_iter: int) -> list[str]:
    """DLPerf's single_node_train.sh (fp32, one GPU: total_bz = BATCH_SIZE) as train.py arguments, on the CPU."""
    return ["--use_gpu=False", "--data_format=NCHW", f"--data_dir={data}", f"--total_images={images}",
            "--class_dim=1000", "--validate=False", "--model=ResNet50", f"--batch_size={batch}", "--print_step=1",
            "--save_step=10000", "--reader_thread=1", "--lr_strategy=cosine_decay", "--lr=0.001",
            "--momentum_rate=0.875", "--image_shape", "3", str(size), str(size), f"--max_iter={max_iter}",
            "--model_save_dir=output/", "--l2_decay=0.000030518", "--warm_up_epochs=1", "--use_mixup=False",
            "--use_label_smoothing=True", "--use_dali=False", "--label_smoothing_epsilon=0.1"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venv", type=Path, required=True, help="Python 3.7 venv with Paddle 1.8.5 (and opencv-python)")
    p.add_argument("--work", type=Path, required=True, help="a folder outside the repository (made fresh)")
    p.add_argument("--git", type=Path, default=GIT, help="a git directory of PaddlePaddle/models")
    p.add_argument("--commit", default=COMMIT)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--max-iter", type=int, default=120, help="DLPerf's: 120")
    p.add_argument("--cpu", default="1", help="the core(s) the program is pinned to (taskset -c)")
    args = p.parse_args()

    work = args.work.resolve()
    if work.exists():
        shutil.rmtree(work)
    models, data, out = work / "models", work / "data", work / "out"
    for folder in (models, out):
        folder.mkdir(parents=True)
    commit = subprocess.run(["git", f"--git-dir={args.git}", "rev-parse", f"{args.commit}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    files = checkout(args.git, commit, SUBDIR, models)
    python = args.venv.resolve() / "bin" / "python"
    images = args.batch_size * (args.max_iter + 8)  # one pass longer than max_iter: train.py returns inside pass 0
    jpegs = [str(python), str(HERE / "make_jpegs.py"), str(data), "--images", str(images),
             "--size", str(round(args.image_size * 256 / 224)), "--classes", "1000", "--seed", "0"]
    subprocess.run(jpegs, check=True)

    cwd = models / SUBDIR
    argv = ["python", "-u", "train.py", *dlperf_args(data, images, args.batch_size, args.image_size, args.max_iter)]
    env = program_environ(args.venv, CPU_NUM="1")
    log = out / f"r50_b{args.batch_size}_fp32_1.log"
    versions = subprocess.run([str(python), "-c", "import sys, paddle, numpy, cv2, PIL; print(sys.version.split()[0],"
                               " paddle.__version__, paddle.version.commit, numpy.__version__, cv2.__version__,"
                               " PIL.__version__)"], check=True, capture_output=True, text=True).stdout.split()
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "?")
    print("$ cd", cwd, "&&", "taskset -c", args.cpu, " ".join(argv), flush=True)
    code, started, finished = run_pinned(argv, cwd, env, log, args.cpu)
    record = {
        "program": "PaddlePaddle/models PaddleCV/image_classification train.py (ResNet50)",
        "code": {"repository": "https://github.com/PaddlePaddle/models", "commit": commit, "path": SUBDIR,
                 "files": len(files), "state": "each file the commit's blob (git hash-object)"},
        "recipe": "Oneflow-Inc/DLPerf PaddlePaddle/resnet50v1.5/scripts/single_node_train.sh (fp32), on the CPU",
        "cwd": str(cwd), "argv": ["taskset", "-c", args.cpu, *argv], "environ": env,
        "data": {"generator": " ".join(["python", "bench/genuine_cpu_logs/make_jpegs.py", *jpegs[2:]]),
                 "images": images, "train_list": str(data / "train_list.txt")},
        "software": dict(zip(("python", "paddle", "paddle_commit", "numpy", "opencv", "pillow"), versions,
                             strict=True)),
        "host": {"node": platform.node(), "cpu": cpu_model, "kernel": platform.release()},
        "started_utc": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(timespec="seconds"),
        "finished_utc": dt.datetime.fromtimestamp(finished, dt.UTC).isoformat(timespec="seconds"),
        "exit_code": code,
    }
    log.with_suffix(".cmd.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"exit {code} after {finished - started:.0f} s: {log}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
