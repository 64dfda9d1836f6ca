#!/usr/bin/env bash
# On a machine with a GPU: is a kernel cache prewarmed without a GPU for that
# GPU's model found entirely (0 compiles) by `attnbwd check` on the GPU?
#
#   bench/prewarm_check.sh [CACHE_DIR]
#
# CACHE_DIR: a cache prewarmed elsewhere, e.g. on a machine without a GPU with
#   attnbwd prewarm --gpu h100 --cache-dir DIR sol066_workload sol072_workload
# (copied, then used). Without it the prewarm is made here with the driver
# hidden (ATTNBWD_LIBCUDA=/nonexistent/...), as on a machine without a GPU:
# --gpu $GPU_MODEL --arch sm_90 (GPU_MODEL=h100 unless set; h200 for an H200).
# Then `attnbwd -v check` runs both public suites on the GPU, and the counts
# come from the library's own log lines ("attnbwd: compiled ..." and
# "attnbwd: disk hit ..."), one per kernel built. Prints, e.g.:
#   check on "NVIDIA H100 80GB HBM3" (from the device, 132 SMs): 32 kernels, 0 compiled, 32 found in the cache
# SUITES overrides the suites (a quick run). Exits 0 when nothing was compiled and every case passed. Files under $OUT
# when set (prewarm.txt, check.txt, check.log, summary.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${ATTNBWD_BIN:-build/attnbwd}
GPU_MODEL=${GPU_MODEL:-h100}
SUITES=${SUITES:-"sol066_workload sol072_workload"}
if [ ! -x "$BIN" ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$(nproc)" --target attnbwd_cli >/dev/null
fi
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
work=$(mktemp -d)
cache=$work/cache
if [ $# -ge 1 ]; then
  cp -r "$1" "$cache"
  echo "== the cache made elsewhere: $1 ($(ls "$cache" | grep -c '\.atbc$') entries)"
  : >"$out/prewarm.txt"
else
  echo "== prewarming without a GPU for --gpu $GPU_MODEL"
  ATTNBWD_LIBCUDA=/nonexistent/libcuda.so.1 "$BIN" prewarm -q --gpu "$GPU_MODEL" --arch sm_90 \
    --cache-dir "$cache" $SUITES | tee "$out/prewarm.txt"
fi
echo "== attnbwd check on the GPU"
status=0
"$BIN" -v check --cache-dir "$cache" $SUITES >"$out/check.txt" 2>"$out/check.log" || status=$?
compiled=$(grep -c '^attnbwd: compiled ' "$out/check.log" || true)
found=$(grep -c '^attnbwd: disk hit ' "$out/check.log" || true)
model=$(grep -m1 -o 'GPU model .*: tuning table' "$out/check.log" | sed 's/^GPU model //; s/: tuning table$//' || true)
table=$(grep -m1 -o 'tuning table .*' "$out/check.log" | sed 's/^tuning table //' || true)
{
  echo "check on ${model:-an unknown GPU}: $((compiled + found)) kernels, $compiled compiled, $found found in the cache"
  echo "tuning table: ${table:-?}"
  grep -E '[0-9]+ passed' "$out/check.txt" || echo "(no pass/fail line: check exited $status)"
  if [ "$compiled" -gt 0 ]; then
    echo "compiled on the GPU (the entries' heads, and this build's, say what differs):"
    grep '^attnbwd: compiled ' "$out/check.log" | head -5
    first=$(ls "$cache"/*.atbc | head -1)
    echo "-- an entry's head: $(basename "$first")"
    tail -c +49 "$first" | head -n 11
    "$BIN" info --cache-dir "$cache" | grep -E 'library|nvrtc|target arch|gpu model|tuning table'
  fi
} | tee "$out/summary.txt"
rm -rf "$work"
[ "$compiled" -eq 0 ] && [ "$status" -eq 0 ]
