#!/usr/bin/env bash
# The kit's GPU claims that fit one visit of about 8.5 minutes to one GPU: bench/gpu_proof.py (its --help says what
# runs at which budget, and how). Stage 1 (real JPEGs / synthetic, torchvision then nvimgcodec in the time left) and
# stage 2 (the suite beside the torchvision yardstick) run at the default budget; stages 3-6 only at a larger one or
# asked alone (--stages 3). If nvimgcodec got no time, the second command, on the warm machine (~4 min):
#   bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec
# No make, no network: the kit's dependencies come from .whl/ (make gpu-prep makes it on a machine with PyPI; carry
# it with the checkout, and .models/ for stage 3). What returns: $OUT holds at most 4 files, none in a folder:
# console.log (this console), summary.md, results.json and gpu-proof.tar.gz (the stages' work, packed after every
# stage and at SIGTERM/SIGINT, which this script passes on to gpu_proof.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
CHECK=gpu-proof
out=${OUT:-bench/out/gpu-proof-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
# the console into $out/console.log as it comes; tee ignores the signals, so it keeps what gpu_proof.py says last
exec > >(trap '' INT TERM; exec tee "$out/console.log") 2>&1
source bench/kit_deps.sh
set +e
"$PY" bench/gpu_proof.py --out "$out" "$@" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM
trap 'kill -INT "$pid" 2>/dev/null' INT
status=
while [ -z "$status" ]; do  # a trapped signal ends a wait early: wait again until gpu_proof.py has ended
  wait "$pid"
  code=$?
  kill -0 "$pid" 2>/dev/null || status=$code
done
exit "$status"
