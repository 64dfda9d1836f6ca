#!/usr/bin/env bash
# One call on a lent GPU machine, over a build made elsewhere (the machine has
# no Lua, cJSON or cmocka: bench/stage_devlibs.sh copies them into the build).
#   bench/gpu_session.sh check   GPU tests, `attnbwd check --time`, get_kernel latency
#   bench/gpu_session.sh edit    problem 2: `attnbwd check --time` per kernel, then its GPU test
#   bench/gpu_session.sh explore `attnbwd explore` over the public suite and the holdout shapes
#   bench/gpu_session.sh bench   bench/bench.py against PyTorch eager and torch.compile
#   bench/gpu_session.sh pending what is still to be measured: bench.py of this tree on an H100
# Results go to $OUT (or /tmp/attnbwd-out); the disk cache is $ATTNBWD_CACHE_DIR (or /tmp/attnbwd-cache).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/attnbwd-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/build/devlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export ATTNBWD_CACHE_DIR=${ATTNBWD_CACHE_DIR:-/tmp/attnbwd-cache}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
case "${1:-check}" in
  check)
    build/attnbwd info | tee "$OUT/info.txt"
    build/attnbwd_latency 2>&1 | tee "$OUT/latency.txt"
    build/tests/test_gpu_softmax 2>&1 | tee "$OUT/gpu_test.txt"
    echo "test_gpu_softmax exit: ${PIPESTATUS[0]}" | tee -a "$OUT/gpu_test.txt"
    build/attnbwd check --time sol066_workload 2>&1 | tee "$OUT/check.txt"
    ;;
  edit)
    build/attnbwd prewarm -q sol072_workload 2>&1 | tail -2 | tee "$OUT/edit_prewarm.txt"
    build/attnbwd check --time --iters 20 sol072_workload 2>&1 | tee "$OUT/edit_check.txt"
    build/tests/test_gpu_edit 2>&1 | tee "$OUT/edit_gpu_test.txt"
    echo "test_gpu_edit exit: ${PIPESTATUS[0]}" | tee -a "$OUT/edit_gpu_test.txt"
    ;;
  explore)
    shift
    [ $# -gt 0 ] || set -- sol066_workload heuristic_holdout
    build/attnbwd explore --out "$OUT/tuning.lua" "$@" 2>&1 | tee "$OUT/explore.txt"
    ;;
  bench)
    shift
    python3 bench/bench.py --lib build/libattnbwd.so suites/sol066_workload.jsonl \
      --json "$OUT/bench.json" --png "$OUT/bench.png" "$@" 2>&1 | tee "$OUT/bench.txt"
    ;;
  pending)
    # What is still to be measured (2026-12-06, end of the thirty-fifth session): on an H100, bench.py of this
    # tree (its table's 441.8 us came before the H200's new entries at B=1,T=1024 and B=32,T=773 came to it;
    # the H100's A/Bs had them -1.4% and -1.2 to -1.6% there). About 2 minutes.
    python3 bench/bench.py --lib build/libattnbwd.so suites/sol072_workload.jsonl --tools ours,compile_tf32 \
      --delay-cycles 60000000 --json "$OUT/bench.json" --png "$OUT/bench.png" 2>&1 | tee "$OUT/bench.txt"
    ;;
esac
