#!/usr/bin/env bash
# One GPU, an estimated five minutes on an H100 (not yet run on one): NVIDIA DeepLearningExamples' own PyTorch
# ResNet50 v1.5 (its code at the commit docker/pins.yaml pins) run natively by `kit bench --suite dle-native`, beside
# the kit's harness with the same settings (AMP, NHWC, batch 256, synthetic data, 3 runs each); prints both figures
# and harness ÷ program.
#
# The machine needs python3 with PyTorch (CUDA) and torchvision, and pynvml (PyPI nvidia-ml-py; DLE's gpu_affinity
# imports it); no network. The model code travels with the working tree in .models/ (ignored by git), made on a
# machine that can reach the sources:
#     python3 bench/prepare_models.py [--from dle=MIRROR --from dllogger=MIRROR]      # .models/{DeepLearningExamples,dllogger}
# (KIT_MODEL_CODE=DIR reads another root). The kit's own dependencies come from .whl/ when they are not importable
# (README, "On your own GPU box"). Runs go to $RUNS_DIR (default /tmp/dle-native-runs).
set -euo pipefail
cd "$(dirname "$0")/.."
export KIT_MODEL_CODE=${KIT_MODEL_CODE:-$PWD/.models}
RUNS_DIR=${RUNS_DIR:-/tmp/dle-native-runs}
PY=${PYTHON:-python3}

for need in DeepLearningExamples/PyTorch/Classification/ConvNets/main.py dllogger/dllogger/__init__.py; do
  if [ ! -f "$KIT_MODEL_CODE/$need" ]; then
    echo "dle-native-check: no $KIT_MODEL_CODE/$need: run bench/prepare_models.py where git reaches the sources" >&2
    exit 2
  fi
done
if ! "$PY" -c 'import torch, torchvision, pynvml' 2>/dev/null; then
  echo "dle-native-check: $PY cannot import torch, torchvision and pynvml (DLE needs all three)" >&2
  exit 2
fi
CHECK=dle-native-check
source bench/kit_deps.sh
if ! command -v python >/dev/null; then  # DLE's recipe starts `python ./main.py`, as its README does
  mkdir -p /tmp/kit-bin && ln -sf "$(command -v "$PY")" /tmp/kit-bin/python && export PATH="/tmp/kit-bin:$PATH"
fi
force=()
if ! command -v git >/dev/null; then
  echo "dle-native-check: no git here to read the checkouts' commits: running with --force (run.json records it)"
  force=(--force)
fi

mkdir -p "$RUNS_DIR"
before=$(ls "$RUNS_DIR")
set +e
"$PY" -m kit bench --suite dle-native --runs-dir "$RUNS_DIR" "${force[@]}"
rc=$?
set -e
run=$(comm -13 <(echo "$before") <(ls "$RUNS_DIR") | tail -n 1)
if [ -z "$run" ] || [ ! -f "$RUNS_DIR/$run/report.md" ]; then
  echo "dle-native-check: kit bench exited $rc and wrote no report" >&2
  exit 1
fi
echo
awk '/^### The kit.s harness ÷ the published program/ {on = 1} on && /^#/ && !/harness ÷/ {exit} on' \
  "$RUNS_DIR/$run/report.md"
if ! grep -q '^### The kit.s harness ÷ the published program' "$RUNS_DIR/$run/report.md"; then
  echo "dle-native-check: no harness ÷ program row (a case gave no figure: see $RUNS_DIR/$run/report.md)" >&2
  rc=1
fi
echo "run directory: $RUNS_DIR/$run"
exit "$rc"
