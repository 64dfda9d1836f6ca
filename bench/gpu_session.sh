#!/usr/bin/env bash
# One call on a lent GPU machine, over a build made elsewhere (the machine has
# no Lua, cJSON or cmocka: bench/stage_devlibs.sh copies them into the build).
#   bench/gpu_session.sh check   GPU tests, `attnbwd check --time`, get_kernel latency
#   bench/gpu_session.sh edit    problem 2: `attnbwd check --time` per kernel, then its GPU test
#   bench/gpu_session.sh explore `attnbwd explore` over the public suite and the holdout shapes
#   bench/gpu_session.sh bench   bench/bench.py against PyTorch eager and torch.compile
#   bench/gpu_session.sh pending what is still to be measured: gq_red's and gq_pair's cases and A/B, tr_vec=0
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
    # What is still to be measured (2026-12-05, end of the thirty-second session): on an H200, for its table
    # (gq_red and gq_pair ran on H100s only: their cases pass there, H100 entries; docs/benchmarks.md):
    # 1. gq_red=1 and 2, and gq_pair=1 over each (gQ's blocks take two batch rows, one warpgroup each, and add
    #    their gS tiles' sum by one reduction): their GPU cases; gQ alone against the default (the reductions'
    #    cost; on the H100 gq_pair=1 halved gq_red's extra time at B=32,T=293).
    # 2. One whole-call A/B of the 16, twice, the entry first and last: gq_red=1, gq_red=2, gq_red=2 gs_round=1,
    #    tr_vec=0, and gq_red=1 / 2 with gq_pair=1 (expected as on the H100: -3 to -5% at B=32,T=773,
    #    B=64,T=128, B=16,T=211; gq_red's losses at B = 2 to 8 smaller with gq_pair=1 but still losses).
    # 3. bench/ab_entries.lua: the entries the two runs support, as $ATTNBWD_CACHE_DIR/tuning.lua (and in
    #    $OUT), which bench.py's calls then use (`bench` mode, a call of its own).
    # About 5 minutes on an H200 (the CPU reference of the GPU cases is a minute of it).
    ATTNBWD_TEST_PRECISION=tf32 ATTNBWD_TEST_MATCH=gq_red timeout 240 build/tests/test_gpu_edit 2>&1 |
      tee "$OUT/gq_red_cases.txt"
    echo "test_gpu_edit exit: ${PIPESTATUS[0]}" | tee -a "$OUT/gq_red_cases.txt"
    AB_SHAPES=15,16,7,3,4,6,10 AB_REPS=2 build/attnbwd -q lua bench/ab.lua time:grad_query sol072_workload \
      "+ga_bm=0" "+gq_red=1" "+gq_red=2" "+gq_red=1 gq_pair=1" "+gq_red=2 gq_pair=1" 2>&1 | tee "$OUT/gq_red_alone.txt"
    variants=("+gq_red=1" "+gq_red=2" "+gq_red=2 gs_round=1" "+tr_vec=0" "+gq_red=1 gq_pair=1" "+gq_red=2 gq_pair=1")
    for r in 1 2; do
      AB_REPS=3 build/attnbwd -q lua bench/ab.lua time sol072_workload "+ga_bm=0" "${variants[@]}" "+ga_bm=0" 2>&1 |
        tee "$OUT/ab_$r.txt"
    done
    build/attnbwd -q lua bench/ab_entries.lua "$OUT/ab_1.txt" "$OUT/ab_2.txt" "$OUT/tuning.lua" "${variants[@]}" |
      tee "$OUT/entries.txt"
    cp "$OUT/tuning.lua" "$ATTNBWD_CACHE_DIR/tuning.lua"
    ;;
esac
