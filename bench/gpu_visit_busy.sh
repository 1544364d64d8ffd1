#!/usr/bin/env bash
# One GPU visit, ~2.5 minutes: the same ResNet50 amp-nhwc bs256 harness case twice through kit bench (GPU telemetry
# sampled), once on the GPU alone and once while another process keeps it busy with its own GEMMs -- a real slow GPU,
# recorded for kit standing's causes and the yardstick's verdict -- each followed by kit yardstick on the same GPU.
# What returns, in $OUT: busy.log and runs.tar.gz (both run directories and the yardstick runs).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out/gpu-busy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
exec > >(tee "$out/busy.log") 2>&1
PY=${PYTHON:-python3}
CHECK=gpu-busy
source bench/kit_deps.sh
keep=/tmp/gpu-busy
mkdir -p "$keep"
cat >"$keep/suite.yaml" <<'YAML'
schema_version: 1
name: gpu-busy
description: one ResNet50 amp-nhwc bs256 harness case on one GPU (bench/gpu_visit_busy.sh runs it alone and busy)
hardware: gpu
defaults: {warmup_steps: 10, measure_steps: 40, repeats: 2, data: synthetic, timeout_s: 120}
cases:
  - {framework: torch, model: resnet50, precision: amp, layout: nhwc, batch_size: 256}
YAML
neighbour() {
  "$PY" - "$1" <<'PY' &
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
PY
}
for kind in alone busy; do
  pid=
  if [ "$kind" = busy ]; then neighbour 150; pid=$!; sleep 8; fi
  echo "== $kind: kit bench"
  "$PY" -m kit bench --suite "$keep/suite.yaml" --runs-dir "$keep/runs-$kind"
  echo "$kind bench rc=$?"
  "$PY" -m kit yardstick --device gpu --runs-dir "$keep/yardstick-$kind" --json >"$keep/yardstick-$kind.json"
  echo "$kind yardstick rc=$?"
  [ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
  for run in "$keep/runs-$kind"/*/; do "$PY" -m kit standing "$run" || true; done
done
find "$keep" -name '*.png' -o -name '*.html' | xargs rm -f
tar czf "$out/runs.tar.gz" -C "$keep" .
ls -la "$out"; du -sh "$keep"
