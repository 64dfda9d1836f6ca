-- Tuning table shipped for the NVIDIA H200: the fastest tiles `attnbwd explore`
-- measured for each public workload (cold L2, median of 20; 2026-12-02, see
-- docs/benchmarks.md). attnbwd_get_kernel consults it before the heuristic when the
-- device's name is exactly `gpu`; a table in the cache folder (tuning.lua) wins over it.
-- Of the odd-T workloads, two keep their scalar-load winners (T = 541, 613),
-- which beat the split kernel (16-byte loads around each row's aligned middle)
-- that the heuristic picks; the other four run the split kernel, faster than
-- their scalar winners in bench.py (T = 131, 293, 373, 919: 9.0, 11.6, 73.5,
-- 48.1 us against 9.2, 12.4, 82.9, 51.9). The split kernel's tiles are not
-- explored yet. (explore's medians come from another harness than bench.py's;
-- compare times of one method only.)
return {
  gpu = "NVIDIA H200",
  entries = {
    ["softmax_dropout_bwd B=2 H=16 T=541 dropout=1"] =
      "block=256 head_fastest=0 in_registers=1 split=0 streaming=1 threads_per_row=128 unroll=4 vec=1", -- bench 46.4 us; split 47.6
    ["softmax_dropout_bwd B=8 H=4 T=613 dropout=1"] =
      "block=256 head_fastest=0 in_registers=1 split=0 streaming=1 threads_per_row=128 unroll=4 vec=1", -- bench 57.7 us; split 59.8
    ["softmax_dropout_bwd B=1 H=32 T=512 dropout=0"] =
      "block=256 head_fastest=1 in_registers=1 streaming=1 threads_per_row=32 unroll=4 vec=4", -- 29.97 us; heuristic of the time 29.97 us
    ["softmax_dropout_bwd B=2 H=4 T=256 dropout=1"] =
      "block=512 head_fastest=0 in_registers=1 streaming=1 threads_per_row=32 unroll=4 vec=4", -- 6.43 us; heuristic of the time 7.10 us
    ["softmax_dropout_bwd B=1 H=2 T=2048 dropout=1"] =
      "block=256 head_fastest=0 in_registers=1 streaming=1 threads_per_row=256 unroll=4 vec=4", -- 32.37 us; heuristic of the time 33.90 us
    ["softmax_dropout_bwd B=4 H=4 T=4096 dropout=1"] =
      "block=256 head_fastest=1 in_registers=1 streaming=1 threads_per_row=256 unroll=4 vec=4", -- 874.98 us; heuristic of the time 874.98 us
    ["softmax_dropout_bwd B=4 H=16 T=256 dropout=1"] =
      "block=256 head_fastest=1 in_registers=1 streaming=1 threads_per_row=32 unroll=4 vec=4", -- 18.75 us; heuristic of the time 19.30 us
    ["softmax_dropout_bwd B=64 H=2 T=128 dropout=1"] =
      "block=512 head_fastest=1 in_registers=1 streaming=1 threads_per_row=16 unroll=4 vec=4", -- 11.62 us; heuristic of the time 12.21 us
    ["softmax_dropout_bwd B=64 H=8 T=128 dropout=1"] =
      "block=256 head_fastest=1 in_registers=1 streaming=1 threads_per_row=16 unroll=4 vec=4", -- 32.51 us; heuristic of the time 34.86 us
    ["softmax_dropout_bwd B=16 H=8 T=2048 dropout=1"] =
      "block=256 head_fastest=0 in_registers=1 streaming=1 threads_per_row=256 unroll=4 vec=4", -- 1704.56 us; heuristic of the time 1742.67 us
    ["softmax_dropout_bwd B=32 H=8 T=256 dropout=1"] =
      "block=512 head_fastest=1 in_registers=1 streaming=1 threads_per_row=32 unroll=4 vec=4", -- 60.14 us; heuristic of the time 62.83 us
    ["softmax_dropout_bwd B=4 H=8 T=512 dropout=1"] =
      "block=256 head_fastest=1 in_registers=1 streaming=1 threads_per_row=64 unroll=4 vec=4", -- 31.89 us; heuristic of the time 33.31 us
    -- Problem 2: `attnbwd check --time` of the whole backward with bj=32 against the
    -- heuristic's bj=64 (2026-12-02, wgmma products; an entry where bj=32 won by 2% or more).
    ["edit_attention_bwd B=4 H=16 T=288 dropout=1"] = "bj=32", -- 331.98 us; heuristic 345.42 us
    ["edit_attention_bwd B=16 H=16 T=211 dropout=1"] = "bj=32", -- 629.12 us; heuristic 643.22 us
    ["edit_attention_bwd B=16 H=16 T=691 dropout=1"] = "bj=32", -- 2637.87 us; heuristic 2731.79 us
  },
}
