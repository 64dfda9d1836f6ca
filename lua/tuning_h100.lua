-- Tuning table shipped for the NVIDIA H100 (SXM, 80 GB HBM3): problem 2's
-- entries of the H200 table (lua/tuning_h200.lua) that also win on the H100,
-- and the H100's own where a choice wins on the H100 only (A/B runs of whole
-- calls, bench/ab.lua; what each measured: docs/experiments.md, "Tuning table
-- entries"). Problem 1's H200 entries are not measured here: none.
-- The H200 entries that lose on the H100.
local lost_on_h100 = {
  ["edit_attention_bwd B=8 H=16 T=448 dropout=1 precision=0"] = true,
}
-- The H100's own entries, where a choice wins on the H100 only.
local h100_only = {
  ["edit_attention_bwd B=4 H=16 T=640 dropout=1 precision=0"] = "gq_tma=1 gs_round=1",
  ["edit_attention_bwd B=4 H=16 T=288 dropout=1 precision=0"] = "pair=0 ga_tma=1 lane_pri=2",
  ["edit_attention_bwd B=2 H=16 T=768 dropout=1 precision=0"] = "side_start=2 ga_tma=1",
  ["edit_attention_bwd B=64 H=16 T=256 dropout=1 precision=0"] = "pair=1 gq_red=2 gq_pair=1 gq_bn=64 gq_stages=3",
  ["edit_attention_bwd B=16 H=16 T=691 dropout=1 precision=0"] = "side_start=1 gq_red=2 gq_pair=1 pair=1",
  ["edit_attention_bwd B=16 H=16 T=176 dropout=1 precision=0"] = "pair_kv=1 gq_red=1 gq_pair=1",
}
local entries = {}
for key, tiles in pairs(require("tuning_h200").entries) do
  if key:match("^edit_attention_bwd ") and not lost_on_h100[key] then entries[key] = tiles end
end
for key, tiles in pairs(h100_only) do entries[key] = tiles end
return {
  gpu = "NVIDIA H100 80GB HBM3",
  entries = entries,
}
