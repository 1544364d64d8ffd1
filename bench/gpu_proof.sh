#!/usr/bin/env bash
# Every GPU claim of the kit in one visit of about 8.5 minutes to one GPU: bench/gpu_proof.py (its --help says what
# and how). No make, no network: the kit's dependencies come from .whl/ and DLE's code from .models/ (make gpu-prep
# makes both on a machine with PyPI; carry both with the checkout). The console is kept in the output folder.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
CHECK=gpu-proof
source bench/kit_deps.sh
out=${OUT:-bench/out/gpu-proof-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
set +e
"$PY" bench/gpu_proof.py --out "$out" "$@" 2>&1 | tee "$out/console.log"
exit "${PIPESTATUS[0]}"
