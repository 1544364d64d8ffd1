#!/usr/bin/env bash
# make gpu-check: the one-GPU check on a machine that has PyTorch with CUDA (Paddle not needed).
# The kit's other dependencies come from .whl/ when they are not importable (see README: "On your own GPU box").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
CHECK=gpu-check
source bench/kit_deps.sh
exec "$PY" bench/gpu_check.py --runs-dir "${RUNS_DIR:-runs}" "$@"
