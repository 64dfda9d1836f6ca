-- Problem 2's four projection products (gA, grad_out_weight, grad_hidden,
-- grad_qkv_weight): their shapes and operands, and for each the path and
-- tiles the model of lua/projection_tiles.lua rates fastest under the tile
-- choice (mma.sync, wgmma, TMA-fed wgmma; grad_hidden and grad_qkv_weight
-- in one launch where `pair` asks). In fp16 (precision 2) wg=1 means the
-- TMA-fed fp16 products of templates/gemm_tma.cu (tma=1; else
-- mma.sync), their B transposed into fp16 (K padded to a multiple of 8).
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"

local M = {}

local HID, QKV, ceil_div, smem_limit = limits.HID, limits.QKV, limits.ceil_div, limits.smem_limit

-- A transposed B's rows (K) padded for 16-byte strides: 4 floats, or (f16) 8 halves.
function M.padded_k(k, f16)
  local q = f16 and 8 or 4
  return ceil_div(k, q) * q
end

-- Returns products (each with its choice, and kp: K padded for its
-- transposed B), pair (choose_pair's two choices, or false) and pair_kv;
-- or nil and why no tiles fit.
function M.choose(shape, t, arch)
  local BT = shape.batch * shape.seq_len
  local f16 = t.precision == 2
  local products = {
    { name = "grad_attn_out", comment = "gA [BT,1024] = grad_output [BT,1024] @ out_weight [1024,1024]",
      m = BT, n = HID, k = HID, lda = HID, ldb = HID, ldc = HID, ta = false, tb = false,
      a = "in:grad_output", b = "in:out_weight", c = "ws:gA", rowdot = true },
    { name = "grad_out_weight", comment = "grad_out_weight [1024,1024] = grad_output^T @ attention_output",
      m = HID, n = HID, k = BT, lda = HID, ldb = HID, ldc = HID, ta = true, tb = false,
      a = "in:grad_output", b = "in:attention_output", c = "out:grad_out_weight",
      bias = "out:grad_out_bias", bias_part = "colpart_out" },
    { name = "grad_hidden", comment = "grad_hidden_states [BT,1024] = grad_qkv [BT,3072] @ qkv_weight [3072,1024]",
      m = BT, n = HID, k = QKV, lda = QKV, ldb = HID, ldc = HID, ta = false, tb = false,
      a = "ws:gqkv", b = "in:qkv_weight", c = "out:grad_hidden_states", b_early = true },
    { name = "grad_qkv_weight", comment = "grad_qkv_weight [3072,1024] = grad_qkv^T @ hidden_states",
      m = QKV, n = HID, k = BT, lda = QKV, ldb = HID, ldc = HID, ta = true, tb = false,
      a = "ws:gqkv", b = "in:hidden_states", c = "out:grad_qkv_weight", b_early = true,
      bias = "out:grad_qkv_bias", bias_part = "colpart_qkv" },
  }
  -- ga_tma=2 (TMA-fed products): gA as gA^T [1024, BT] = out_weight^T @
  -- grad_output^T, out_weight A stored [K, M] (the producer transposes it)
  -- and grad_output B as it lies, rounded in place (B_ROUND), the result
  -- stored transposed as gA (C_T): no transpose of out_weight on the chain.
  if t.ga_tma == 2 and not f16 and t.tma == 1 and t.wg == 1 and tiles.choose_tma(HID, BT, HID, true, smem_limit(arch)) then
    products[1] = { name = "grad_attn_out", m = HID, n = BT, k = HID, lda = HID, ldb = HID, ldc = HID, ta = true,
      tb = false, a = "in:out_weight", b = "in:grad_output", c = "ws:gA", rowdot = true, b_direct = true, c_t = true,
      comment = "gA^T [1024,BT] = out_weight^T @ grad_output^T, stored as gA [BT,1024]; grad_output as it lies" }
  end
  -- Each product on mma.sync, or (wg = 1) on wgmma with B transposed into
  -- the workspace as [N, K] (K padded to a multiple of 4 with zeros, rounded
  -- to TF32): whichever the model says is faster, the transpose included.
  for _, g in ipairs(products) do
    g.choice = tiles.choose_gemm(g.m, g.n, g.k, g.ta, g.tb, smem_limit(arch))
    if t.wg == 1 and not g.tb then
      local w = not f16 and tiles.choose_wg(g.m, g.n, g.k, g.ta, smem_limit(arch)) -- gemm_wg.cu is TF32's
      -- splitk_red=2: splits costed as added by atomics (not gA's: its reduce makes the row dots)
      local fed = t.tma == 1 and
                  tiles.choose_tma(g.m, g.n, g.k, g.ta, smem_limit(arch), t.splitk_red == 2 and not g.rowdot, f16)
      if fed and (not w or fed.time < w.time) then w = fed end
      -- The transpose, as measured with tr_vec=1 (8.1 us at 4 MB, 13.7 at 12,
      -- 27.8 at 32: 2.86 TB/s after 5.3 us); a quarter of it
      -- where it runs on a side lane long before the product (qkv_weight for
      -- grad_hidden, hidden_states for grad_qkv_weight, both at the start):
      -- it only takes bandwidth from the others then.
      -- fp16: 4 bytes read and 2 written an element.
      local transpose = g.n * g.k * (f16 and 6 or 8) / 2.86e12 + 5.3e-6
      if w then w.time = w.time + (g.b_early and 0.25 or 1) * transpose end
      -- ga_tma=1: gA TMA-fed even where the model rates mma.sync faster (2: as gA^T, above).
      local forced = g.rowdot and t.ga_tma >= 1 and fed
      if forced or (w and (not g.choice or w.time < g.choice.time)) then
        g.choice, g.kp = forced or w, M.padded_k(g.k, f16)
      end
    end
    if not g.choice then
      return nil, string.format("no tiles of %s's paths fit %d bytes of shared memory", g.name, smem_limit(arch))
    end
  end
  -- pair > 0: grad_hidden and grad_qkv_weight, both TMA-fed, in one launch
  -- (their tiles and splits chosen together: tiles.choose_pair).
  -- pair_kv=1: the pair in two launches, its k and v parts (grad_hidden's K
  -- slices 2 and 3 of 1024, grad_qkv_weight's rows 1024..3071) beside gQ as
  -- soon as the pass has written gK and gV, its q part after gQ.
  local pair_kv = t.pair_kv == 1 and t.pair > 0 and t.tma == 1 and t.wg == 1 and t.gs_store == 1
  local pair = t.pair > 0 and t.tma == 1 and t.wg == 1 and
               tiles.choose_pair(products[3], products[4], smem_limit(arch), t.pair == 2, pair_kv and { 3 } or nil,
                                 t.pair_dsm == 1 and not pair_kv, t.splitk_red == 2, f16)
  if pair_kv and not (pair and pair[1].kslice == HID) then pair_kv = false end
  if pair then
    for i, g in ipairs { products[3], products[4] } do g.choice, g.kp = pair[i], M.padded_k(g.k, f16) end
  end
  return products, pair, pair_kv
end

return M
