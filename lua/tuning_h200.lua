-- Tuning table shipped for the NVIDIA H200. attnbwd_get_kernel consults it
-- before the heuristic when the device's name is exactly `gpu`; a table in the
-- cache folder (tuning.lua) wins over it.
--
-- Problem 1: the fastest tiles `attnbwd explore sol066_workload` measured for
-- each public workload on 2026-12-03 (cold L2, median of 20, every candidate
-- checked against the fp64 reference first; the cache-policy choice
-- `streaming` included). bench.py ran with exactly these (docs/benchmarks.md).
-- (explore's medians come from another harness than bench.py's; compare times
-- of one method only.)
return {
  gpu = "NVIDIA H200",
  entries = {
    ["softmax_dropout_bwd B=1 H=32 T=512 dropout=0"] = "block=256 head_fastest=0 in_registers=1 split=0 streaming=0 threads_per_row=32 unroll=4 vec=4", -- 29.12 us; heuristic 29.57 us
    ["softmax_dropout_bwd B=1 H=16 T=919 dropout=0"] = "block=256 head_fastest=0 in_registers=1 split=1 streaming=1 threads_per_row=256 unroll=4 vec=4", -- 44.98 us; heuristic 48.46 us
    ["softmax_dropout_bwd B=2 H=16 T=541 dropout=1"] = "block=256 head_fastest=0 in_registers=1 split=0 streaming=0 threads_per_row=128 unroll=4 vec=1", -- 36.77 us; heuristic 49.34 us
    ["softmax_dropout_bwd B=2 H=8 T=293 dropout=1"] = "block=256 head_fastest=0 in_registers=1 split=1 streaming=0 threads_per_row=128 unroll=4 vec=4", -- 9.97 us; heuristic 12.02 us
    ["softmax_dropout_bwd B=2 H=4 T=256 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=1 threads_per_row=64 unroll=4 vec=4", -- 6.16 us; heuristic 6.34 us
    ["softmax_dropout_bwd B=1 H=2 T=2048 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=1 threads_per_row=256 unroll=4 vec=4", -- 32.83 us; heuristic 32.88 us
    ["softmax_dropout_bwd B=4 H=4 T=4096 dropout=1"] = "block=512 head_fastest=1 in_registers=1 split=0 streaming=0 threads_per_row=512 unroll=4 vec=4", -- 818.29 us; heuristic 818.29 us
    ["softmax_dropout_bwd B=4 H=16 T=256 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=1 threads_per_row=64 unroll=4 vec=4", -- 18.24 us; heuristic 18.94 us
    ["softmax_dropout_bwd B=8 H=8 T=131 dropout=0"] = "block=256 head_fastest=0 in_registers=1 split=1 streaming=0 threads_per_row=32 unroll=4 vec=4", -- 7.90 us; heuristic 8.14 us
    ["softmax_dropout_bwd B=64 H=2 T=128 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=1 threads_per_row=32 unroll=4 vec=4", -- 11.49 us; heuristic 11.98 us
    ["softmax_dropout_bwd B=64 H=8 T=128 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=0 threads_per_row=32 unroll=4 vec=4", -- 31.50 us; heuristic 31.89 us
    ["softmax_dropout_bwd B=16 H=8 T=2048 dropout=1"] = "block=512 head_fastest=1 in_registers=1 split=0 streaming=0 threads_per_row=256 unroll=4 vec=4", -- 1620.61 us; heuristic 1622.13 us
    ["softmax_dropout_bwd B=8 H=4 T=613 dropout=1"] = "block=256 head_fastest=0 in_registers=1 split=0 streaming=0 threads_per_row=128 unroll=4 vec=1", -- 45.60 us; heuristic 59.30 us
    ["softmax_dropout_bwd B=32 H=8 T=256 dropout=1"] = "block=512 head_fastest=0 in_registers=1 split=0 streaming=0 threads_per_row=32 unroll=4 vec=4", -- 57.54 us; heuristic 58.22 us
    ["softmax_dropout_bwd B=8 H=16 T=373 dropout=1"] = "block=256 head_fastest=0 in_registers=1 split=1 streaming=0 threads_per_row=128 unroll=4 vec=4", -- 62.99 us; heuristic 73.31 us
    ["softmax_dropout_bwd B=4 H=8 T=512 dropout=1"] = "block=256 head_fastest=1 in_registers=1 split=0 streaming=0 threads_per_row=64 unroll=4 vec=4", -- 31.84 us; heuristic 31.84 us
    -- Problem 2 (2026-12-04, thirteenth session): of 18 tile choices timed on
    -- all 16 public workloads in two sweeps (`bench/ab.lua time`, the GPU at
    -- its power cap, identical choices up to 13% apart), only grad_hidden and
    -- grad_qkv_weight in launches of their own (pair=0) won by more than the
    -- noise, on the same two workloads in both sweeps and in the eleventh
    -- session's A/B: B=4,T=288 188.4 / 199.7 / 193.5 us against 197.5 / 211.0 /
    -- 197.2, B=2,T=449 196.4 / 196.5 / 199.8 against 204.7 / 204.4 / 204.6.
    -- (Twenty-second session: with ga_tma=1 as well, below.)
    ["edit_attention_bwd B=4 H=16 T=288 dropout=1 precision=0"] = "pair=0 ga_tma=1 splitk_red=2 side_start=2",
    -- Fourteenth session, with the call replayed from a CUDA graph: the side
    -- lanes after gA (side_start=1) won on these in three A/B runs (four
    -- serpentine rounds each, us, against the default): B=1,T=373 102.0 /
    -- 102.0 / 102.5 against 113.8 / 113.5 / 114.4; B=1,T=853 231.6 / 217.9 /
    -- 217.8 against 237.4 / 226.2 / 226.3; B=16,T=211 396.4 / 392.5 / 392.6
    -- against 413.4 / 406.8 / 407.2; B=8,T=448 449.4 / 446.5 / 453.7 against
    -- 481.7 / 452.9 / 459.9; B=16,T=691 1774 / 1745 / 1843 against 1889 / 1830
    -- / 2041; B=2,T=449 (with pair=1, the heuristic's) 188.5 / 189.5 / 189.5
    -- against pair=0's 191.9 / 194.8 / 194.4. It lost on B=4 (T=288, 640) by
    -- 5-7%, and was level on the rest. (Twenty-ninth session: more choices
    -- at B=1,T=373, B=1,T=853 and B=2,T=449, measured at the end.)
    ["edit_attention_bwd B=1 H=16 T=373 dropout=1 precision=0"] = "side_start=1 pair_dsm=1 gs_round=1",
    ["edit_attention_bwd B=1 H=16 T=853 dropout=1 precision=0"] = "side_start=1 pair_kv=1 gs_round=1 splitk_red=2",
    ["edit_attention_bwd B=8 H=16 T=448 dropout=1 precision=0"] = "side_start=1",
    -- And grad_hidden with grad_qkv_weight in one launch (pair=1, the
    -- heuristic's only where B*T <= 4096) won on these two in three runs:
    -- B=64,T=128 with side_start=1 725.8 / 738.5 / 756.7 against 765.7 / 775.3 /
    -- 794.3; B=32,T=773 4268 / 4220 / 4234 against 4355 / 4340 / 4293.
    -- (Fifteenth session: B=64,T=128 with two key blocks a block of the
    -- attention pass too, att_kb=2: 699.2 against 715.6 us in the A/B, its pass
    -- alone 110 against 124 us.)
    -- The pair's k and v parts beside gQ (pair_kv=1): B=16,T=176 310.5 against
    -- 324.1 us, B=2,T=352 134.8 against 141.7 in the A/B; slower or level on
    -- the other nine paired workloads (B=8,T=448 +6%).
    ["edit_attention_bwd B=16 H=16 T=176 dropout=1 precision=0"] = "pair_kv=1 splitk_red=1",
    ["edit_attention_bwd B=2 H=16 T=352 dropout=1 precision=0"] = "pair_kv=1",
    -- Twenty-second session (2026-12-05): the side lanes after gA's
    -- transposed B (side_start=2), where lane 0 starts with that transpose:
    -- in the timeline of B=2,T=768 the side lanes' transposes made it take
    -- 14.5 us (5 alone) and grad_out_weight took the SMs before gA, which
    -- ran 51.7 us (24 alone). There, in two A/B runs: 280.4 against 287.8 us,
    -- and (both with ga_tma=1) 281.0 against 290.7. (B=4,T=288 -3.4%,
    -- B=32,T=293 -1.8%, B=64,T=128 -1.5% against its side_start=1 in one run
    -- only, within what runs differ by, or not repeated: no entries until a
    -- second run says the same.)
    -- And gA TMA-fed (ga_tma=1: 128x128 tiles, which then make the row dots,
    -- ga_rowdot) at B=4,T=288, where the model picks the wgmma product and a
    -- rowdot launch: 181.1 against 185.8 us and 180.4 against 183.1 in two
    -- A/B runs (with pair=0, its entry above). (B=2,T=768: +1% in both.)
    -- Twenty-ninth session (2026-12-05): 22 single choices laid over this
    -- table (three sweeps of all 16, `AB_REPS=3 bench/ab.lua time`), then
    -- the winners and their pairs in A/Bs with the entry before first and
    -- last, twice (us; "before" = first / last). New or changed entries:
    -- B=1,T=853 (side_start=1 before) +pair_kv=1 gs_round=1 179.9 / 179.9
    -- against 197.9 / 197.8 and 197.9 / 197.8 (-9.1%; pair_kv alone -6.8%);
    -- B=1,T=1024 (no entry before) ga_tma=1 side_start=1 gs_round=1 211.8 /
    -- 212.8 against 218.9 / 218.2 and 218.6 / 218.9 (-3.0%); B=32,T=293 pair=2
    -- 1011.1 / 1008.9 against 1037.3 / 1049.6 and 1038.2 / 1050.2 (-3%);
    -- B=1,T=373 +pair_dsm=1 gs_round=1 92.2 / 92.1 against 93.9 / 93.8 and
    -- 94.0 / 94.2 (-1.9%); B=2,T=449 +att_kb=2 185.9 / 186.9 against 189.6 /
    -- 189.8 and 189.7 / 189.4 (-1.9%, -1.4%; -1.7% in each sweep). bench.py
    -- with them: 407.2 us against 411.1 (docs/benchmarks.md).
    -- Thirtieth session (2026-12-05): B=32,T=293 (NJ = 5) with each head's
    -- last key block in a block of its own (att_kb=3) instead of beside a
    -- warpgroup that only stages: 996.0 / 983.6 against 1014.0 / 1028.3 and
    -- 1006.9 / 1013.2 (A/B, the entry first and last, twice; -2.1 to -2.5%);
    -- on an H100 1074.1 / 1071.4 against 1097.0 / 1090.7 and 1094.0 /
    -- 1100.8. (Level or slower at the other odd NJ: B=8,T=448, B=16,T=691,
    -- B=32,T=773; B=4,T=640 -0.7 to -1.1%.)
    ["edit_attention_bwd B=32 H=16 T=293 dropout=1 precision=0"] = "pair=2 att_kb=3",
    -- Thirty-third session (2026-12-06): the edit-bias batch sums by gQ's
    -- float reductions (gq_red), gQ's blocks of two batch rows (gq_pair), in
    -- 64-row blocks of three stages (gq_stages=3), and the transposes with
    -- 4-byte accesses (tr_vec=0), laid over this table: two A/B runs of the
    -- 16 (the entry first and last; bench/ab_entries.lua's rule), % against
    -- the entry's mean, run 1 / run 2. They replace these five entries:
    -- B=32,T=773 -4.9/-5.7, B=16,T=691 -4.8/-5.1, B=2,T=449 -4.1/-3.8,
    -- B=64,T=128 -3.3/-2.6, B=16,T=211 -1.9/-2.3. gq_red lost 1.4-12% at B = 2
    -- to 8 (gQ on the chain). bench.py with them: 405.1 and 405.3 us
    -- (docs/benchmarks.md).
    -- Thirty-fifth session (build/s/h200_sweep.sh: 15 choices laid over
    -- this table, two A/B runs of four rounds in shuffled pairs with the
    -- entry first and last; then each workload's best singles and their
    -- pairs, two runs more; % against the entry's mean, run 1 / run 2):
    -- B=64,T=256 pair=2 (-2.9/-4.4; pairs' runs -2.5/-2.5), B=2,T=768
    -- att_kb=3 (-3.0/-3.5), B=1,T=1024 att_kb=3 (-1.7/-2.2); B=32,T=773
    -- gs_round=1 with pair=2 (-2.7/-3.6, two runs at that workload alone).
    -- bench.py with them: 402.8 us (403.1 and 403.7 with the first three).
    -- Thirty-sixth session (build/s/h200_sweep36.sh: 15 more choices, the
    -- same two stages): B=1,T=853 splitk_red=2 (-5.7/-6.2; second stage
    -- -5.7/-6.0), B=16,T=176 splitk_red=1 (-2.8/-3.3), B=4,T=288
    -- splitk_red=2 side_start=2 (second stage -2.5/-2.0), B=2,T=449
    -- pair_dsm=1 zero_early=0 (second stage -2.7/-2.0), B=64,T=128
    -- side_start=2 (-1.6/-2.0). splitk_red's sums by float atomics: the last
    -- bits of the split products' outputs vary from run to run there (the
    -- plan's unordered_outputs; ATTNBWD_DETERMINISTIC=1 takes them out).
    -- bench.py with them: 396.7 us; the final tree 395.4 (docs/benchmarks.md).
    ["edit_attention_bwd B=64 H=16 T=256 dropout=1 precision=0"] = "pair=2",
    ["edit_attention_bwd B=2 H=16 T=768 dropout=1 precision=0"] = "side_start=2 att_kb=3",
    ["edit_attention_bwd B=1 H=16 T=1024 dropout=1 precision=0"] = "ga_tma=1 side_start=1 gs_round=1 att_kb=3",
    ["edit_attention_bwd B=32 H=16 T=773 dropout=1 precision=0"] = "gq_red=1 gq_pair=1 gs_round=1 pair=2",
    ["edit_attention_bwd B=16 H=16 T=691 dropout=1 precision=0"] = "side_start=1 gq_red=2 gq_pair=1 gq_bn=64 gq_stages=3",
    ["edit_attention_bwd B=2 H=16 T=449 dropout=1 precision=0"] = "side_start=1 att_kb=2 tr_vec=0 pair_dsm=1 zero_early=0",
    ["edit_attention_bwd B=64 H=16 T=128 dropout=1 precision=0"] = "side_start=2 pair=1 att_kb=2 gq_red=2 gq_pair=1",
    ["edit_attention_bwd B=16 H=16 T=211 dropout=1 precision=0"] = "side_start=1 gq_red=2 gq_pair=1",
  },
}
