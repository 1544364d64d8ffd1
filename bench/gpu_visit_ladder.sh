#!/usr/bin/env bash
# One GPU visit, ~3 minutes: kit bench of the gpu-proof-dle suite (NVIDIA DLE's PyTorch ResNet50 v1.5 beside the
# kit's harness, AMP NHWC bs256, 2 repeats each) with kit yardstick measured on the GPU before the runs, then kit
# standing (the ladder: the harness against DLE in the same run), kit bundle and kit verify. Carry .whl and .models
# (bench/prepare_models.py from ../shared/programs). What returns, in $OUT: ladder.log, run.tar.gz, report.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out/gpu-ladder-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
exec > >(tee "$out/ladder.log") 2>&1
PY=${PYTHON:-python3}
CHECK=gpu-ladder
source bench/kit_deps.sh
export KIT_MODEL_CODE=$PWD/.models
if ! command -v python >/dev/null; then  # DLE's recipe starts a bare `python`
  mkdir -p /tmp/kit-bin && ln -sf "$(command -v "$PY")" /tmp/kit-bin/python && export PATH=/tmp/kit-bin:$PATH
fi
runs=/tmp/gpu-ladder/runs
mkdir -p "$runs"
"$PY" -m kit bench --suite gpu-proof-dle --runs-dir "$runs"
code=$?
echo "bench rc=$code"
if [ "$code" = 2 ]; then  # refused before any run (a checkout it cannot judge): once more, recorded as forced
  "$PY" -m kit bench --suite gpu-proof-dle --runs-dir "$runs" --force; echo "bench --force rc=$?"
fi
run=$(ls -d "$runs"/*/ | tail -1)
"$PY" -m kit standing "$run"; echo "standing rc=$?"
"$PY" -m kit standing "$run" --json >"$run/standing.json"
"$PY" -m kit bundle "$run" --out /tmp/gpu-ladder/run.bundle.tar.gz --submitter kit-tests --system-name h200-visit
echo "bundle rc=$?"
"$PY" -m kit verify /tmp/gpu-ladder/run.bundle.tar.gz; echo "verify rc=$?"
cp "$run/report.md" "$out/report.md"
mv "$run/standing.json" /tmp/gpu-ladder/standing.json
find "$runs" \( -name '*.png' -o -name '*.html' \) -delete
tar czf "$out/run.tar.gz" -C /tmp/gpu-ladder runs standing.json run.bundle.tar.gz
ls -la "$out"
