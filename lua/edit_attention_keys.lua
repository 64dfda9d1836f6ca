-- Problem 2's tile keys, each declared once. From this table come the
-- heuristic's defaults (lua/edit_attention.lua), the validation of a tiles
-- string, the candidates `explore` tries, the deterministic context's
-- choices, and docs/tile-keys.md (tests/tile_keys_doc.lua writes it; ctest
-- fails where it is stale).
--
-- Each key:
--   name, values    what a tiles string may give it
--   default         a value, or a function (shape, arch, t) of the shape and
--                   the keys before it (default_doc says it in words); the
--                   heuristic takes these in order, then fits shared memory
--   doc             what it does, one line
--   kernels         the plan's kernels whose code or launch it changes
--   limits          the limits it takes part in (lua/edit_attention_limits.lua)
--   ordered         where some values sum outputs by float atomics in no fixed
--                   order: the value that does not (the deterministic
--                   context's); absent: every value gives the same bits every run
--   explore         the values explore lays over the heuristic's tiles, or a
--                   function (shape, first) giving them ({}: none)
local limits = require "edit_attention_limits"

local ceil_div, H, SMS = limits.ceil_div, limits.H, limits.SMS

-- wg: the products, gQ and the attention pass on wgmma by default in TF32
-- and fp16 (fp16's projection products on its TMA-fed fp16 path,
-- templates/gemm_tma.cu; its pass on fp16 operands, att_f16; its gQ on
-- fp16 operands too, gq_f16, or at B = 1 on TF32's wgmma): on an H100, fp16
-- with gQ and the pass on TF32's wgmma passes the 16 public workloads and
-- takes 400.4 us in geomean against 485.3 with them on mma.sync and 436.5
-- for TF32.
-- fp32 stays exact.
local function wg_default(shape, arch) return (shape.precision ~= 1 and limits.wgmma_arch(arch)) and 1 or 0 end
-- The default of the keys that take wg's value.
local function wg_value(_, _, t) return t.wg end
local function only_wg(values) return function(_, first) return first.wg == 1 and values or {} end end
local function only_b1(values) return function(shape) return shape.batch == 1 and values or {} end end

local M = {}

M.KEYS = {
  { name = "precision", values = { 0, 1, 2 }, default = function(shape) return shape.precision end, default_doc = "the shape's",
    doc = "tf32, exact fp32, fp16 operands (the shape's; fp32 accumulation always)",
    kernels = { "every product", "attention pass" }, explore = {} },
  { name = "fused", values = { 0, 1 }, default = 1,
    doc = "one pass over P and Pd, or the first, unfused sequence (where the pass does not fit shared memory)",
    kernels = { "every kernel" }, limits = { "attention pass shared memory" }, explore = { 0 } },
  { name = "bj", values = { 32, 64 }, default = 64, doc = "keys per attention block",
    kernels = { "attention pass" }, limits = { "attention pass shared memory" }, explore = { 32, 64 } },
  { name = "gs_store", values = { 0, 1 }, default = 1, ordered = 1,
    doc = "gS through the workspace, or gQ and the edit-bias sums as float atomics inside the pass",
    kernels = { "attention pass", "grad_query", "bias_grads" }, limits = { "attention pass shared memory" },
    explore = { 0 } },
  { name = "wg", values = { 0, 1 }, default = wg_default, default_doc = "1 for precision 0 and 2 on sm_90",
    doc = "the products on wgmma where the model says so (sm_90; fp16: its projection products TMA-fed)",
    kernels = { "every product", "transpose" }, explore = { 0 } },
  { name = "kv_split", values = { 0, 1 }, default = 1, doc = "gV and gK on separate warps of the mma.sync pass",
    kernels = { "attention_fused" }, explore = { 0 } },
  { name = "p_stages", values = { 0, 2, 3 }, default = 2,
    doc = "P and Pd through registers, or a ring of 2 or 3 buffers in shared memory",
    kernels = { "attention pass" }, limits = { "attention pass shared memory" }, explore = { 0, 2, 3 } },
  { name = "pdl", values = { 0, 1, 2 }, default = function(_, arch) return limits.pdl_arch(arch) and 1 or 0 end, default_doc = "1 on sm_90 and newer",
    doc = "programmatic dependent launch: none, placed as the kernel ahead ends, or placed early",
    kernels = { "every kernel" }, limits = { "sm_90" }, explore = { 0 } },
  { name = "wg_gq", values = { 0, 1 }, default = wg_value, default_doc = "wg's",
    doc = "gQ on wgmma where wg=1 and gs_store=1", kernels = { "grad_query" }, explore = only_wg { 0 } },
  { name = "wg_att", values = { 0, 1 }, default = wg_value, default_doc = "wg's",
    doc = "the attention pass on wgmma (in fp16 on fp16 operands: att_f16) where wg=1, gs_store=1, bj=64 and "
          .. "p_stages=2",
    kernels = { "attention pass" }, limits = { "attention pass shared memory" }, explore = only_wg { 0 } },
  { name = "zero_early", values = { 0, 1 }, default = 1,
    doc = "grad_edit_region_bias's rows past T written at the start, where gs_store=1",
    kernels = { "bias_zero_rows", "bias_grads" }, explore = { 0 } },
  { name = "tma", values = { 0, 1 }, default = wg_value, default_doc = "wg's",
    doc = "the wgmma products fed by the TMA, where wg=1", kernels = { "every product" },
    limits = { "product shared memory" }, explore = only_wg { 0 } },
  { name = "tr_vec", values = { 0, 1 }, default = 1,
    doc = "the transposes of B with 4-byte or 16-byte loads and stores, where wg=1", kernels = { "transpose" },
    explore = only_wg { 0 } },
  { name = "att_tma", values = { 0, 1 },
    default = function(shape, _, t) return (t.wg_att == 1 and shape.seq_len % 4 ~= 0) and 1 or 0 end,
    default_doc = "1 where wg_att=1 and T % 4 ~= 0",
    doc = "P and Pd copied by the TMA in the attention pass on wgmma (where T % 4 ~= 0 by default)",
    kernels = { "attention_wg" }, limits = { "attention pass shared memory" },
    explore = function(_, first) return first.wg == 1 and { 1 - first.att_tma } or {} end },
  { name = "lane_pri", values = { 0, 1, 2 }, default = 0,
    doc = "lane 2's priority, grad_qkv_weight's: level with lane 1, halfway, the greatest", kernels = {},
    explore = { 0, 1, 2 } },
  { name = "gq_bn", values = { 64, 128 },
    default = function(shape) -- 64 where 128 would give fewer blocks than two an SM
      return ceil_div(shape.seq_len, 128) * shape.batch * H < 2 * SMS and 64 or 128
    end, default_doc = "64 where B * 16 * ceil(T / 128) < 2 * 132, else 128",
    doc = "rows of gS a block of gQ on wgmma takes", kernels = { "grad_query" },
    explore = function(_, first) return first.wg == 1 and { 192 - first.gq_bn } or {} end },
  { name = "gq_stages", values = { 3, 4, 6, 8 }, default = 4,
    doc = "k tiles in shared memory for gQ on wgmma (that many less 2 load ahead; 3 with gq_pair=1 and gq_bn=64: "
          .. "two blocks an SM)", kernels = { "grad_query" }, limits = { "gQ shared memory" },
    explore = only_wg { 6, 8 } },
  { name = "gemm_bias", values = { 0, 1, 2 }, default = 1,
    doc = "the bias gradients' column sums in a pass of their own, inside the TMA-fed TA products where their K "
          .. "is split or they are paired, or inside them always",
    kernels = { "grad_out_weight", "grad_qkv_weight", "colsum_partial", "colsum_final" }, explore = { 0, 1, 2 } },
  { name = "pair", values = { 0, 1, 2 },
    default = function(shape, _, t)
      return t.tma == 1 and shape.batch * shape.seq_len <= 4096 and 1 or 0
    end,
    default_doc = "1 where tma=1 and B * T <= 4096",
    doc = "grad_hidden and grad_qkv_weight in one TMA-fed launch, where tma=1 (2: 128x256 tiles only)",
    kernels = { "grad_hidden", "grad_qkv_weight" }, limits = { "product shared memory" }, explore = { 0, 1, 2 } },
  { name = "ga_tma", values = { 0, 1, 2 }, default = 0,
    doc = "gA TMA-fed where the model rates it faster than mma.sync, wherever tma=1, or wherever tma=1 as gA^T "
          .. "with grad_output read as it lies (no transpose of out_weight)",
    kernels = { "grad_attn_out", "transpose", "rowdot" }, explore = { 1, 2 } },
  { name = "side_start", values = { 0, 1, 2 }, default = 0,
    doc = "the side lanes start with the call, once gA is done, or once gA's B is transposed (where it is)",
    kernels = {}, explore = { 1 } },
  { name = "att_kb", values = { 1, 2, 3 },
    default = function(shape) -- two key blocks a block where its blocks still fill the GPU twice over, or T >= 800
      local nj = ceil_div(shape.seq_len, 64)
      return ((nj >= 4 and shape.batch * 16 * ceil_div(nj, 2) >= 256) or shape.seq_len >= 800) and 2 or 1
    end, default_doc = "2 where NJ = ceil(T / 64) >= 4 and B * 16 * ceil(NJ / 2) >= 256, or T >= 800; else 1",
    doc = "key blocks a block of the attention pass on wgmma: one (its rows split between the two warpgroups), "
          .. "two (one a warpgroup, their rows staged once), or (3) blocks of two and, for a head's odd last key "
          .. "block and where they fill the last wave, of one",
    kernels = { "attention_wg" }, limits = { "attention pass shared memory" },
    explore = function(_, first) return first.wg == 1 and { 3 - first.att_kb, 3 } or {} end },
  { name = "pair_kv", values = { 0, 1 }, default = 0,
    doc = "the pair in one launch after gQ, or its k and v parts beside gQ and its q part after, where pair > 0",
    kernels = { "grad_hidden", "grad_qkv_weight" }, explore = { 1 } },
  { name = "gs_half", values = { 0, 1 }, default = 0,
    doc = "gS in the workspace as fp32, or as fp16 times a power of two per (b, h, 64 keys), where the attention "
          .. "pass and gQ run on wgmma",
    kernels = { "attention_wg", "grad_query", "bias_grads", "grad_attn_out" }, explore = only_wg { 1 } },
  { name = "pair_dsm", values = { 0, 1 }, default = 0,
    doc = "the pair's K slices added by a reduce launch, or across the cluster of their tile's blocks, where "
          .. "pair > 0 and pair_kv = 0", kernels = { "grad_hidden", "grad_qkv_weight" }, explore = { 1 } },
  { name = "gs_direct", values = { 0, 1 }, default = 1,
    doc = "gS in the workspace, or (B = 1) straight into grad_edit_region_bias, where the pass and gQ run on "
          .. "wgmma and gS is fp32", kernels = { "attention_wg", "grad_query", "bias_grads" }, explore = only_b1 { 0 } },
  { name = "gs_round", values = { 0, 1 }, default = 0,
    doc = "gS stored as computed, gQ's product rounding it to TF32, or stored rounded by the attention pass on "
          .. "wgmma (fp32 gS), gQ on wgmma reading it as stored", kernels = { "attention_wg", "grad_query" },
    explore = { 1 } },
  { name = "gq_tma", values = { 0, 1 }, default = 0,
    doc = "gQ's wgmma product with every thread copying, or TMA-fed and persistent, where tma=1, wg_gq=1 and gS "
          .. "is fp32", kernels = { "grad_query" }, limits = { "gQ shared memory" },
    explore = {} }, -- explore tries it with gs_round=1: M.EXTRA
  { name = "att_wc", values = { 0, 1 }, default = function(shape) return shape.batch == 1 and 1 or 0 end, default_doc = "1 at B = 1",
    doc = "the edit-bias within/cross sums by the bias sums' launch, or (B = 1, gS in place) by the attention "
          .. "pass on wgmma, with no bias_grads launch",
    kernels = { "attention_wg", "bias_grads", "within_cross", "bias_zero_cols" }, explore = only_b1 { 0 } },
  { name = "gq_red", values = { 0, 1, 2 }, default = 0, ordered = 0,
    doc = "the edit-bias sums over the batch by a launch reading gS back, or by gQ's batched wgmma product adding "
          .. "each gS tile it reads into grad_edit_region_bias by float reductions: into the output zeroed first "
          .. "(1), or (2) over batch row 0's gS, which the pass stores there",
    kernels = { "grad_query", "attention_wg", "bias_grads" }, explore = {} }, -- with gq_pair: M.EXTRA
  { name = "gq_pair", values = { 0, 1 }, default = 0,
    doc = "gq_red's gQ blocks of one batch row, or of two (one warpgroup each), their gS tiles summed before one "
          .. "reduction", kernels = { "grad_query" }, limits = { "gQ shared memory" }, explore = {} },
  { name = "att_items", values = { 0, 1, 2, 3, 4, 6, 8 }, default = 1,
    doc = "(pair of key blocks, head) items a block of the attention pass on wgmma takes one after another with "
          .. "att_kb=2: that many at most, or (0) as many as the model says", kernels = { "attention_wg" },
    limits = { "attention pass shared memory" }, explore = {} }, -- with att_kb=2: M.EXTRA
  { name = "splitk_red", values = { 0, 1, 2 }, default = 0, ordered = 0,
    doc = "a split TMA-fed product's K slices added by a reduce launch in slice order, or into its zeroed output "
          .. "by float atomics as its blocks end (2: its tiles and splits chosen for that)",
    kernels = { "grad_out_weight", "grad_hidden", "grad_qkv_weight" }, explore = { 0, 1, 2 } },
  -- On an H100 the pass alone 0.9-4.9% faster on all 16 public workloads in fp16, the calls 0.0-1.8%.
  { name = "att_f16", values = { 0, 1 },
    default = function(shape, _, t) return (shape.precision == 2 and t.wg_att == 1) and 1 or 0 end,
    default_doc = "1 for precision 2 where wg_att=1",
    doc = "the attention pass on wgmma with TF32's products, or (fp16 precision, gs_half=0) with fp16 operands",
    kernels = { "attention_wg" }, limits = { "attention pass shared memory" },
    explore = function(shape, first) return (first.wg == 1 and shape.precision == 2) and { 1 - first.att_f16 } or {} end },
  -- On an H100 the calls 0.7-9.8% faster in fp16 where gS is in the workspace (B >= 2), 369.0 us in
  -- geomean against 384.0 with gQ on TF32's wgmma.
  { name = "gq_f16", values = { 0, 1 },
    default = function(_, _, t) return t.att_f16 end,
    default_doc = "att_f16's value",
    doc = "gQ on TF32's wgmma from fp32 gS, or on fp16 operands from gS the pass stores in fp16, where att_f16=1 "
          .. "and gS is in the workspace",
    kernels = { "attention_wg", "grad_query", "bias_grads" },
    explore = function(_, first) return first.att_f16 == 1 and { 1 - first.gq_f16 } or {} end },
  -- Off until an A/B on a GPU: checked on the CPU only (tests/test_emu_f16.cpp's rowdot_case).
  { name = "ga_dots", values = { 0, 1 }, default = 0,
    doc = "fp16's TMA-fed unsplit gA: the row dots by a rowdot launch reading gA back, or (1) from its "
          .. "accumulators, as TF32's gA makes them",
    kernels = { "grad_attn_out", "rowdot" },
    explore = function(shape, first) return (first.wg == 1 and shape.precision == 2) and { 1 } or {} end },
}

-- Candidates of more than one key at once, laid over the heuristic's tiles
-- (shape, first: the heuristic's); each a list of tile tables, {} where none applies.
M.EXTRA = {
  function() return { { gq_tma = 1, gs_round = 1 } } end, -- gQ TMA-fed in its faster form
  function(shape) -- the batch's bias sums by gQ's reductions, in gQ blocks of one batch row or of two
    local out = {}
    if shape.batch > 1 then
      for _, red in ipairs { 1, 2 } do
        for _, pair in ipairs { 0, 1 } do out[#out + 1] = { gq_red = red, gq_pair = pair } end
      end
    end
    return out
  end,
  function() return { { att_kb = 2, att_items = 0 }, { att_kb = 2, att_items = 2 }, { att_kb = 2, att_items = 4 } } end,
  function(_, first) -- the other key-block sizes with gS through the workspace or by atomics, on either products
    local out = {}
    for _, wg in ipairs { first.wg, 0 } do
      for _, store in ipairs { 1, 0 } do
        for _, bj in ipairs { 32, 64 } do out[#out + 1] = { bj = bj, gs_store = store, wg = wg } end
      end
    end
    return out
  end,
  function() return { { bj = 32, kv_split = 0 }, { bj = 64, kv_split = 0 } } end,
  function() return { { fused = 0, wg = 0, kv_split = 0, p_stages = 0 } } end, -- the first sequence
}

M.BY_NAME = {}
for i, k in ipairs(M.KEYS) do
  k.index = i
  M.BY_NAME[k.name] = k
end

-- The heuristic's value of every key, in the registry's order.
function M.defaults(shape, arch)
  local t = {}
  for _, k in ipairs(M.KEYS) do
    local d = k.default
    if type(d) == "function" then t[k.name] = d(shape, arch, t) else t[k.name] = d end
  end
  return t
end

-- "a, b or c"
local function listed(values)
  local s = tostring(values[1])
  for i = 2, #values do s = s .. (i == #values and " or " or ", ") .. tostring(values[i]) end
  return s
end

-- nil, or why a key of t holds a value it may not.
function M.check_values(t)
  for _, k in ipairs(M.KEYS) do
    local ok = false
    for _, v in ipairs(k.values) do ok = ok or t[k.name] == v end
    if not ok then return string.format("%s must be %s (%s)", k.name, listed(k.values), k.doc) end
  end
end

-- The keys whose values sum outputs by float atomics, as { key, ordered value }.
function M.ordered()
  local out = {}
  for _, k in ipairs(M.KEYS) do
    if k.ordered ~= nil then out[#out + 1] = { k.name, k.ordered } end
  end
  return out
end

-- Every key's single-key candidates, then M.EXTRA's: a list of tile tables to
-- lay over the heuristic's (first).
function M.variations(shape, first)
  local out = {}
  for _, k in ipairs(M.KEYS) do
    local values = type(k.explore) == "function" and k.explore(shape, first) or k.explore or {}
    for _, v in ipairs(values) do out[#out + 1] = { [k.name] = v } end
  end
  for _, f in ipairs(M.EXTRA) do
    for _, over in ipairs(f(shape, first)) do out[#out + 1] = over end
  end
  return out
end

return M
