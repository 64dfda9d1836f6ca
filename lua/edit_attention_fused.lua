-- What the fused plan (lua/edit_attention_plan.lua) decides before it
-- launches anything, for one shape and tile choice: the precision's mode,
-- the projection products and their paths, how gS is kept, which kernels
-- zero or sum what, the attention pass's form, and the workspace. The
-- files that launch each part read these as fields of one context.
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"
local builder = require "edit_attention_builder"
local products_of = require "edit_attention_products"
local gs_of = require "edit_attention_gs"
local pass_blocks = require "edit_attention_pass_blocks"

local M = {}

local H, HID, QKV, POS, COL_SPLIT = limits.H, limits.HID, limits.QKV, limits.POS, limits.COL_SPLIT
local ceil_div, smem_limit, att_on_wg = limits.ceil_div, limits.smem_limit, limits.att_on_wg
local tma_smem = tiles.tma_smem

-- The template's MODE for a precision (0 tf32, 1 fp32, 2 fp16).
M.MODE = { [0] = 1, [1] = 0, [2] = 2 }

-- Workspace: gA [BT,1024], grad_qkv [BT,3072], D [B,16,T], within/cross
-- partials, gS, bias partials, column-sum partials; per product its
-- split-K partial products and its B transposed (wgmma): products may run
-- side by side, so none shares a region with another.
local function reserve_workspace(f)
  local p, B, T, BT, t = f.p, f.B, f.T, f.BT, f.t
  p.reserve("gA", BT * HID)
  p.reserve("gqkv", BT * QKV)
  p.reserve("rowdot", B * H * T)
  p.reserve("wcpart", B * H * f.NJ * 2)
  local gs_floats = (f.gs_half or f.gs_f16) and ceil_div(B * H * T * f.gs_ld, 2) or B * H * T * f.gs_ld
  p.reserve("gs", t.gs_store == 1 and not f.gs_direct and gs_floats or 0)
  f.gs = f.gs_direct and "out:grad_edit_region_bias" or p.wsp("gs")
  p.reserve("gan", f.gs_half and B * H * T or 0)
  p.reserve("gsinv", f.gs_half and B * H * f.NJ or 0)
  f.gan = f.gs_half and p.wsp("gan") or "null"
  f.gsinv = f.gs_half and p.wsp("gsinv") or "null"
  p.reserve("biaspart", H * POS * 2)
  p.reserve("colpart_out", COL_SPLIT * HID)
  p.reserve("colpart_qkv", COL_SPLIT * QKV)
end

-- How each product's K slices and row dots come out.
local function product_rules(f)
  local t, arch = f.t, f.arch
  -- splitk_red>=1: a split TMA-fed product adds its K slices into its output
  -- (zeroed by a launch before it) with float atomics as each block ends,
  -- instead of writing them apart for a reduce launch; not gA, whose reduce
  -- also makes the row dots. Its last bits then vary from run to run.
  function f.adds_slices(g)
    return t.splitk_red >= 1 and g.choice.tma == true and g.choice.splits > 1 and not g.choice.cluster and not g.rowdot
  end
  -- Whether a product's K slices go through the workspace to a reduce launch.
  function f.apart(g) return g.choice.splits > 1 and not g.choice.cluster and not f.adds_slices(g) end
  -- gA, TMA-fed and unsplit, makes the row dots from its accumulators
  -- (templates/gemm_tma.cu's ROWDOT_T): no rowdot launch after it. fp16's
  -- gA only with ga_dots=1.
  function f.makes_rowdots(g)
    return g.rowdot and g.choice.tma == true and g.choice.splits == 1 and not g.ta and
           (not g.choice.config.f16 or t.ga_dots == 1) and
           not g.c_t and not f.gs_half and tma_smem(g.choice.config, g.ta, true) <= smem_limit(arch)
  end
  -- A product whose A's column sums are a bias gradient makes them itself
  -- (gemm_bias: TMA-fed TA products, templates/gemm_tma.cu), one row of sums
  -- per K slice, added in slice order by colsum_final: with gemm_bias=2
  -- always, 1 where its K is split or it is paired (pair > 0: the sums' own
  -- pass would otherwise be the call's last kernel on its lane).
  function f.makes_sums(g, paired)
    return g.bias and g.ta and (t.gemm_bias == 2 or t.gemm_bias == 1 and (g.choice.splits > 1 or paired))
  end
end

-- Who zeroes grad_edit_region_bias and who sums gS into it.
local function bias_rules(f)
  local t, T, gq_red = f.t, f.T, f.gq_red
  f.zero_early = t.zero_early == 1 and t.gs_store == 1 and T < POS
  f.red_out0 = gq_red and t.gq_red == 2 and (f.zero_early or T == POS)
  f.red_zeroed = gq_red and not f.red_out0 -- gq_red=1: gQ adds into the whole output, zeroed first
  -- att_wc (B = 1, gS in place, rows past T zeroed early or none), or
  -- gq_red: the wgmma pass sums gS * m_i*m_j and gS * (m_i != m_j) per key
  -- block into wcpart, which within_cross adds; the columns past its last key
  -- block are zeroed at the start (bias_zero_cols; gq_red=1: the whole output):
  -- no bias_grads launch reads gS back.
  f.pass_wc = (t.att_wc == 1 and f.gs_direct and (f.zero_early or T == POS)) or gq_red
end

-- The attention pass's form.
local function pass_rules(f)
  local t, B, T = f.t, f.B, f.T
  f.att_wg = att_on_wg(t) -- the attention pass on wgmma (templates/attention_wg.cu)
  f.att_tma = f.att_wg and t.att_tma == 1 -- P and Pd into it by the TMA
  f.att_f16 = limits.att_f16_on(t, f.gs_half) -- its products on fp16 operands
  f.pair_heads = f.att_wg and t.att_kb == 3 and pass_blocks.pair_heads(B, T) or nil
  -- att_kb=2: items (pair, head) a block takes one after another (att_items; fp32 gS).
  f.items = 1
  if f.att_wg and t.att_kb == 2 and not f.gs_half then
    f.items = t.att_items ~= 0 and t.att_items or pass_blocks.items(B, T)
  end
  f.any_wg = f.gq_wg or f.att_wg
  for _, g in ipairs(f.products) do f.any_wg = f.any_wg or g.choice.wg end
end

-- The context of one fused plan, or nil and why no tiles fit.
function M.context(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local products, pair, pair_kv = products_of.choose(shape, t, arch)
  if not products then return nil, pair end
  local f = { shape = shape, t = t, arch = arch, B = B, T = T, BT = B * T, NJ = ceil_div(T, t.bj),
              mode = M.MODE[t.precision], p = builder.new(shape, t),
              products = products, pair = pair, pair_kv = pair_kv,
              gattn = products[1], gow = products[2], ghid = products[3], gqw = products[4] }
  for k, v in pairs(gs_of.modes(shape, t)) do f[k] = v end
  reserve_workspace(f)
  product_rules(f)
  bias_rules(f)
  for _, g in ipairs(products) do
    if f.apart(g) then f.p.reserve("splitk_" .. g.name, g.choice.splits * g.m * g.n) end
    if g.choice.wg and not g.b_direct then -- fp16 B: two halves a float
      f.p.reserve("tB_" .. g.name, g.choice.config.f16 and g.n * g.kp // 2 or g.n * g.kp)
    end
  end
  pass_rules(f)
  return f
end

-- The outputs (bits by the spec's order) that come out of float sums in
-- no fixed order, whose last bits may differ between runs: the products
-- whose K slices are added by atomics (splitk_red); with gs_store=0, gQ
-- added into grad_qkv (so grad_hidden_states, grad_qkv_weight and
-- grad_qkv_bias) and gS into grad_edit_region_bias; with gq_red, that last.
function M.unordered_outputs(f)
  local unordered = 0
  for _, x in ipairs { { f.ghid, 0 }, { f.gqw, 1 }, { f.gow, 3 } } do
    if f.adds_slices(x[1]) then unordered = unordered | 1 << x[2] end
  end
  if f.t.gs_store == 0 then unordered = unordered | 1 << 0 | 1 << 1 | 1 << 2 | 1 << 5 end
  if f.gq_red then unordered = unordered | 1 << 5 end
  return unordered
end

return M
