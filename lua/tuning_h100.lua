-- Tuning table shipped for the NVIDIA H100 (SXM, 80 GB HBM3): problem 2's
-- entries of the H200 table (lua/tuning_h200.lua) that also win on the H100.
-- Measured 2026-12-05 (twenty-seventh session, docs/benchmarks.md): two A/B
-- runs of the heuristic's tiles against the H200 entries on all 16 public
-- workloads (`AB_REPS=3 build/attnbwd lua bench/ab.lua time sol072_workload -
-- "+ga_bm=0"`, whole calls, cold L2): geomean 470.1 -> 457.7 and 470.6 ->
-- 457.6 us. Every entry but one won by 1.6-13.2% in both runs (B=1,T=373
-- 116.1 -> 103.5 us); side_start=1 at B=8,T=448 lost by 1.4% and 1.3%, so it
-- is left out. The four workloads without an entry moved by at most 0.6%.
-- Problem 1's H200 entries were not measured on the H100: none here.
-- bench.py with this table (twenty-eighth session): 457.6 us against
-- torch.compile TF32's 800.9 in the same run, all 16 passing.
local lost_on_h100 = {
  ["edit_attention_bwd B=8 H=16 T=448 dropout=1 precision=0"] = true,
}
local entries = {}
for key, tiles in pairs(require("tuning_h200").entries) do
  if key:match("^edit_attention_bwd ") and not lost_on_h100[key] then entries[key] = tiles end
end
return {
  gpu = "NVIDIA H100 80GB HBM3",
  entries = entries,
}
