#!/usr/bin/env bash
# One call on a lent GPU machine, over a build made elsewhere (the machine has
# no Lua, cJSON or cmocka: bench/stage_devlibs.sh copies them into the build).
#   bench/gpu_session.sh check   GPU tests, `attnbwd check --time`, get_kernel latency
#   bench/gpu_session.sh edit    problem 2: `attnbwd check --time` per kernel, then its GPU test
#   bench/gpu_session.sh explore `attnbwd explore` over the public suite and the holdout shapes
#   bench/gpu_session.sh bench   bench/bench.py against PyTorch eager and torch.compile
#   bench/gpu_session.sh pending the newest tile choices (built without a GPU, first run 2026-12-05):
#                                each one's GPU cases under a timeout of its own, then the passing ones
#                                against the default in one A/B of whole calls, and gQ alone
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
    # A kernel never run could hang: its cases get a timeout, and a choice whose cases fail or hang stays
    # out of the A/B.
    # Each choice's own cases (ATTNBWD_TEST_SKIP leaves out those of another choice it is combined with),
    # then gs_direct's with gq_tma, verdict by verdict.
    ok=""
    for spec in "pair_dsm|pair_dsm|" "gs_direct|gs_direct|gq_tma" "gq_tma|gq_tma|gs_direct" \
                "gs_direct+gq_tma|gs_direct=1 gq_tma|" "ga_tma|ga_tma|" "splitk_red|splitk_red|"; do
      IFS='|' read -r v match skip <<< "$spec"
      ATTNBWD_TEST_MATCH=$match ATTNBWD_TEST_SKIP=$skip timeout 100 build/tests/test_gpu_edit > "$OUT/tests_$v.txt" 2>&1
      rc=$?
      echo "$v: test_gpu_edit exit $rc"; grep -E " PASS | FAIL | ERROR " "$OUT/tests_$v.txt" | cut -c1-150
      [ $rc = 0 ] && ok="$ok $v"
    done
    echo "passed:$ok" | tee "$OUT/pending_passed.txt"
    has() { for w in "$@"; do [[ " $ok " == *" $w "* ]] || return 1; done; }
    variants=()
    has pair_dsm && variants+=("+pair_dsm=1" "+pair=1 pair_dsm=1")
    has gs_direct && variants+=("+gs_direct=1")
    has pair_dsm gs_direct && variants+=("+pair_dsm=1 gs_direct=1")
    has gs_direct gq_tma gs_direct+gq_tma && variants+=("+gs_direct=1 gq_tma=1")
    has gq_tma && variants+=("+gq_tma=1" "+gq_tma=1 gs_round=1")
    has ga_tma && variants+=("+ga_tma=2")
    has pair_dsm gq_tma ga_tma && variants+=("+pair_dsm=1 gq_tma=1 gs_round=1 ga_tma=2")
    has splitk_red && variants+=("+splitk_red=1" "+splitk_red=2")
    if [ ${#variants[@]} -gt 0 ]; then
      AB_REPS=2 timeout 200 build/attnbwd lua bench/ab.lua time sol072_workload - "${variants[@]}" > "$OUT/ab_call.txt" 2>&1
      echo "A/B of whole calls: exit $?"; tail -22 "$OUT/ab_call.txt"
    fi
    if has gq_tma; then
      gq=("+gs_round=1" "+gq_tma=1" "+gq_tma=1 gs_round=1")
      AB_REPS=2 timeout 60 build/attnbwd lua bench/ab.lua time:grad_query sol072_workload - "${gq[@]}" > "$OUT/ab_gq.txt" 2>&1
      echo "A/B of gQ alone: exit $?"; tail -18 "$OUT/ab_gq.txt"
    fi
    ;;
esac
