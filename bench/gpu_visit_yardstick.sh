#!/usr/bin/env bash
# One GPU visit for the hardware yardstick (issue 61), ~3 minutes: gpu_proof's stage 7 (kit yardstick against the
# datasheet and the kit's recording), the yardstick again (held to the first run of this host), GEMM at n 4096 and
# 16384, and the yardstick on a GPU another process keeps busy with its own GEMMs (a GPU giving less than it should:
# it must say "suspect"). What returns, in $OUT: proof/ (gpu_proof's four files), visit.log, visit.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/out/gpu-visit-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/proof"
exec > >(tee "$out/visit.log") 2>&1
PY=${PYTHON:-python3}
CHECK=gpu-visit
source bench/kit_deps.sh
work=/tmp/gpu-visit-work
runs=$work/7-hardware/runs
keep=/tmp/gpu-visit-keep
mkdir -p "$keep"
OUT="$out/proof" bash bench/gpu_proof.sh --stages 7 --work "$work"
echo "gpu_proof rc=$?"
step() { local name=$1; shift; echo "== $name: kit yardstick $*"; "$PY" -m kit yardstick "$@" >"$keep/$name.out" \
  2>"$keep/$name.err"; echo "$name rc=$?"; cat "$keep/$name.out"; tail -3 "$keep/$name.err"; }
step again --device gpu --runs-dir "$runs" --json
step gemm4096 --device gpu --only gemm --gemm-n 4096 --runs-dir "$runs"
step gemm16384 --device gpu --only gemm --gemm-n 16384 --runs-dir "$runs"
"$PY" - <<'PY' &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + 45
while time.monotonic() < end:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
PY
busy=$!
sleep 10
nvidia-smi --query-gpu=utilization.gpu,power.draw,clocks.sm --format=csv >"$keep/busy-smi.csv" 2>&1
step busy --device gpu --runs-dir "$runs" --no-record --json
kill "$busy" 2>/dev/null; wait "$busy" 2>/dev/null
nvidia-smi -q >"$keep/nvidia-smi-q.txt" 2>&1
cp -r "$runs" "$keep/yardstick-runs"
tar czf "$out/visit.tar.gz" -C "$keep" .
ls -la "$out" "$out/proof"
