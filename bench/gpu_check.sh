#!/usr/bin/env bash
# make gpu-check: the one-GPU check on a machine that has PyTorch with CUDA (Paddle not needed).
# The kit's other dependencies come from .whl/ when they are not importable (see README: "On your own GPU box").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
if ! "$PY" -c 'import fabric, docker, mlperf_logging' 2>/dev/null; then
  if compgen -G '.whl/*.whl' >/dev/null; then
    site=${KIT_SITE:-/tmp/kit-site}
    "$PY" -m pip install -q --no-index --no-deps --target "$site" .whl/*.whl
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "gpu-check: the kit's dependencies are not importable by $PY and there is no .whl/ folder" >&2
    echo "  (make setup, or bring the wheels: README, 'On your own GPU box')" >&2
    exit 2
  fi
fi
exec "$PY" bench/gpu_check.py --runs-dir "${RUNS_DIR:-runs}" "$@"
