#!/usr/bin/env bash
# One GPU, for a user with time (an estimated five minutes on an H100): NVIDIA DeepLearningExamples' own PyTorch
# ResNet50 v1.5 (its code at the commit docker/pins.yaml pins) run natively by `kit bench --suite dle-native`, beside
# the kit's harness with the same settings (AMP, NHWC, batch 256, synthetic data, 3 runs each); harness ÷ program by
# the kit's noise rule, target >= 0.95. It is stage 3 of bench/gpu_proof.sh with the full suite (same code).
#
# The machine needs python3 with PyTorch (CUDA) and torchvision, and pynvml (PyPI nvidia-ml-py, in .whl/; DLE's
# gpu_affinity imports it); no network. The model code travels with the working tree in .models/ (ignored by git),
# and the wheels in .whl/: `make gpu-prep` makes both on a machine that reaches the sources (KIT_MODEL_CODE=DIR
# reads another root). Runs go to $RUNS_DIR (default /tmp/dle-native-runs), results to $OUT (default bench/out/).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CHECK=dle-native-check
source bench/kit_deps.sh
exec "$PY" bench/gpu_proof.py --stages 3 --program-suite dle-native --budget-s 1200 --stage-cap-s 1200 \
  --runs-dir "${RUNS_DIR:-/tmp/dle-native-runs}" "$@"
