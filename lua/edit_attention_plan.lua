-- Problem 2, region-aware self-attention with edit bias, backward: the
-- kernels of one (B, T) and tile choice (lua/edit_attention.lua), and the
-- order they run in (spec: docs/spec/edit_attention_bwd.md).
--
-- fused = 1 (the default):
--   gA = grad_output @ out_weight                  grad_out_weight = grad_output^T @ attention_output
--   D = rowsum(Pd*gPd) = gA_h . attention_output_h  (one dot product per row)
--   one pass over P and Pd per (b, h, bj keys) (templates/attention_fused.cu):
--     gPd, gS, gK and gV into grad_qkv; with gs_store = 1 (the default) it writes
--     gS to the workspace, then the edit-bias sums (fixed order) and
--     gQ = scale gS k (a batched product) follow; gs_store = 0 adds gQ and the
--     bias into their outputs with float atomics inside the pass instead
--   grad_hidden_states = grad_qkv @ qkv_weight     grad_qkv_weight = grad_qkv^T @ hidden_states
--   the two bias gradients as column sums
-- The projection products run on tensor cores with tiles and a split of K
-- chosen for each product's M, N, K (lua/projection_tiles.lua): mma.sync
-- (templates/gemm_tc.cu), or with wg = 1 (TF32 or fp16 on sm_90) wgmma, TMA-fed or
-- not (templates/gemm_tma.cu, gemm_wg.cu), after a rounded transpose of B,
-- where the model says that is faster.
-- fused = 0: the first, correct-first sequence (ten batched 64x64 products and
-- separate softmax-backward and bias kernels), kept to compare against.
--
-- Matrix products on tensor cores (TF32, or fp16 operands; fp32 accumulation)
-- or exact fp32. A plan's workspace, lanes and launch arguments:
-- lua/edit_attention_builder.lua. The fused plan's parts: what it decides
-- (lua/edit_attention_fused.lua), the projection products
-- (lua/edit_attention_gemm.lua), the attention pass
-- (lua/edit_attention_pass.lua), gQ (lua/edit_attention_gq.lua), the bias
-- sums (lua/edit_attention_bias.lua); this file orders them on the lanes.
local limits = require "edit_attention_limits"
local builder = require "edit_attention_builder"
local fused = require "edit_attention_fused"
local gemms = require "edit_attention_gemm"
local pass = require "edit_attention_pass"
local gq = require "edit_attention_gq"
local bias = require "edit_attention_bias"

local M = {}

local H, D, HID, QKV, POS, COL_SPLIT = limits.H, limits.D, limits.HID, limits.QKV, limits.POS, limits.COL_SPLIT
local ceil_div = limits.ceil_div

-- The fused plan's source parts before its kernels: the common helpers and
-- the product paths it takes.
local function render_common(f)
  local p, t = f.p, f.t
  if t.pdl == 2 then p.parts[#p.parts + 1] = "#define ATTNBWD_PDL_EARLY 1" end
  p.render("tc_common.cu", {})
  if t.gs_store == 1 then p.render("bias_rows.cu", {}) end
  p.render("gemm_tc.cu", {})
  -- tma.cu: the TMA's and the cluster's helpers; the attention pass names
  -- the mbarrier helpers even where P_TMA leaves them unused.
  if f.any_wg then
    p.render("gemm_wg.cu", {})
    if t.tma == 1 or f.att_wg then p.render("tma.cu", {}) end
    if t.tma == 1 then p.render("gemm_tma.cu", {}) end
    if f.mode == 2 then -- fp16: its products (TMA-fed or mma.sync), B transposed into fp16
      p.render("transpose_f16.cu", { PREFIX = p.prefix })
    else
      p.render("transpose.cu", { PREFIX = p.prefix, VEC = t.tr_vec })
    end
  end
end

-- Three lanes. Lane 0 (the stream of greatest priority) is the chain
-- every output waits on: gA, the attention pass, gQ, grad_hidden. What needs only the
-- inputs (grad_out_weight, grad_out_bias, the transposed weights) runs on
-- lanes 1 and 2 beside it, and what needs only gS or grad_qkv (the bias
-- sums, grad_qkv_weight, grad_qkv_bias) beside the rest of the chain. Most
-- of these kernels fill a fraction of the GPU on small shapes; side by side
-- they fill it together. Launches are issued in the order the chain needs.
-- This part: gA on the chain, and on the side lanes what needs only the inputs.
local function schedule_inputs(f)
  local p, t, BT = f.p, f.t, f.BT
  local gattn, gow, ghid, gqw = f.gattn, f.gow, f.ghid, f.gqw
  -- side_start=2: the side lanes start once gA's B (out_weight) is
  -- transposed, lane 0's first launch: it then has the GPU to itself, and gA
  -- follows it before the side lanes' products (else as side_start=0).
  local after_ga_b = gemms.transpose_b(f, gattn) and t.side_start == 2
  if after_ga_b then p.signal("ga_b") end
  gemms.gemm(f, gattn)
  -- side_start=1: the side lanes start once gA (and its reduce) is done, so
  -- that gA's blocks find the SMs free instead of behind theirs.
  if t.side_start == 1 then p.signal("grad_attn_out") end
  local function side_lane_start()
    if t.side_start == 1 then p.wait("grad_attn_out") elseif after_ga_b then p.wait("ga_b") end
  end
  p.on(1)
  side_lane_start()
  -- The outputs that split products add into (adds_slices) zeroed on the side
  -- lanes, before the signals grad_hidden waits on (not on the chain) and
  -- long before grad_qkv_weight's wait for gQ.
  gemms.transpose_b(f, ghid)
  gemms.zero_output(f, ghid)
  if ghid.choice.wg then p.signal("ghid_b") end
  gemms.transpose_b(f, gow)
  gemms.zero_output(f, gow)
  if not gemms.gemm(f, gow) then p.colsum("in:grad_output", "out:grad_out_bias", BT, HID, "colpart_out") end
  p.on(2)
  side_lane_start()
  gemms.transpose_b(f, gqw)
  gemms.zero_output(f, gqw)
  if f.pair then p.signal("gqw_b") end
  bias.zero_early(f)
  p.on(0)
end

-- The chain from the row dots to gQ, and the bias sums beside it.
local function schedule_attention(f)
  local p, t, BT, wsp = f.p, f.t, f.BT, f.p.wsp
  if f.gattn.choice.splits == 1 and not f.makes_rowdots(f.gattn) then -- else gA or its reduce made them
    p.kernel("rowdot", { ceil_div(BT * H, 32), 1, 1 }, { wsp("gA"), "in:attention_output", wsp("rowdot"), f.gan }) -- 32 units a block
  end
  bias.zero_for_pass(f)
  pass.launch(f)
  if t.gs_store == 0 then
    bias.within_cross(f)
  else
    bias.after_pass(f)
    p.on(0)
    gq.launch(f)
  end
  p.signal("grad_qkv")
end

-- grad_hidden and grad_qkv_weight from grad_qkv, paired in one launch or
-- each in its own, and grad_qkv_bias where neither makes it.
local function schedule_outputs(f)
  local p, ghid, gqw, pair, pair_kv = f.p, f.ghid, f.gqw, f.pair, f.pair_kv
  -- grad_qkv_bias in a pass of its own on lane 1, where grad_qkv_weight does not make it.
  local function qkv_bias_pass()
    p.on(1)
    p.wait("grad_qkv")
    p.colsum(p.wsp("gqkv"), "out:grad_qkv_bias", f.BT, QKV, "colpart_qkv")
  end
  if pair then -- on the chain, after gQ: grad_qkv is complete
    if not f.makes_sums(gqw, true) then qkv_bias_pass() end
    local g1, g2 = ghid, gqw
    if pair.swapped then g1, g2 = gqw, ghid end
    if pair_kv then -- the k and v parts beside gQ, as soon as the pass has written gK and gV
      p.on(2)
      p.wait("attention")
      p.wait("ghid_b")
      gemms.gemm_pair(f, g1, g2, "kv")
      p.signal("pair_kv")
    end
    p.on(0)
    p.wait("ghid_b")
    p.wait("gqw_b")
    if pair_kv then -- the q part, then both products finished
      local s1, s2 = gemms.gemm_pair(f, g1, g2, "q")
      p.wait("pair_kv")
      gemms.finish_product(f, g1, s1)
      gemms.finish_product(f, g2, s2)
    else
      gemms.gemm_pair(f, g1, g2)
    end
  else
    p.on(2)
    p.wait("grad_qkv")
    if not gemms.gemm(f, gqw) then qkv_bias_pass() end
    p.on(0)
    if ghid.choice.wg then p.wait("ghid_b") end
    gemms.gemm(f, ghid)
  end
end

local function plan_fused(shape, t, arch)
  local f, why = fused.context(shape, t, arch)
  if not f then return nil, why end
  local p = f.p
  render_common(f)
  schedule_inputs(f)
  schedule_attention(f)
  schedule_outputs(f)
  pass.render(f)
  bias.render(f)
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 1 })
  local plan = p.finish(arch, 16) -- cp.async reads 16 bytes at a time
  if f.any_wg then plan.compile_arch = (arch or "sm_90") .. "a" end
  plan.unordered_outputs = fused.unordered_outputs(f)
  return plan
end

local function plan_sequence(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local p = builder.new(shape, t)
  local wsp = p.wsp
  -- Workspace: gA [BT,1024], gS [B,16,T,T], grad_qkv [BT,3072], column partials, bias partials.
  p.reserve("gA", BT * HID)
  p.reserve("gS", B * H * T * T)
  p.reserve("gqkv", BT * QKV)
  p.reserve("colpart", COL_SPLIT * QKV)
  p.reserve("biaspart", H * POS * 2)

  if t.pdl == 2 then p.parts[#p.parts + 1] = "#define ATTNBWD_PDL_EARLY 1" end
  p.render("tc_common.cu", {})
  p.render("bias_rows.cu", {})
  p.render("gemm_common.cu", {})
  local function gemm(name, g)
    p.render("gemm_kernel.cu", {
      NAME = p.prefix .. "_" .. name, COMMENT = g.comment, M = g.m, N = g.n, K = g.k, LDA = g.lda, LDB = g.ldb,
      LDC = g.ldc, TA = g.ta, TB = g.tb, MODE = fused.MODE[t.precision], INNER = g.inner or 1,
      SA1 = g.sa1 or 0, SA0 = g.sa0 or 0, SB1 = g.sb1 or 0, SB0 = g.sb0 or 0, SC1 = g.sc1 or 0, SC0 = g.sc0 or 0,
    })
    p.kernel(name, { ceil_div(g.n, 64), ceil_div(g.m, 64), g.batches or 1 }, { g.a, g.b, g.c, g.alpha or "f32:one" },
             { 128, 1, 1 })
  end

  gemm("grad_attn_out", { comment = "gA [BT,1024] = grad_output [BT,1024] @ out_weight [1024,1024]",
    m = BT, n = HID, k = HID, lda = HID, ldb = HID, ldc = HID, ta = false, tb = false,
    a = "in:grad_output", b = "in:out_weight", c = wsp("gA") })
  gemm("grad_out_weight", { comment = "grad_out_weight [1024,1024] = grad_output^T @ attention_output",
    m = HID, n = HID, k = BT, lda = HID, ldb = HID, ldc = HID, ta = true, tb = false,
    a = "in:grad_output", b = "in:attention_output", c = "out:grad_out_weight" })
  p.colsum("in:grad_output", "out:grad_out_bias", BT, HID)
  gemm("grad_probs", { comment = "gPd [b,h][T,T] = gA_h [T,64] @ v_h^T",
    m = T, n = T, k = D, lda = HID, ldb = D, ldc = T, ta = false, tb = true, inner = H, batches = B * H,
    sa1 = T * HID, sa0 = D, sb1 = H * T * D, sb0 = T * D, sc1 = H * T * T, sc0 = T * T,
    a = wsp("gA"), b = "in:value", c = wsp("gS") })
  p.kernel("grad_scores", { B * H * T, 1, 1 },
         { wsp("gS"), "in:attention_probs", "in:attention_probs_dropped", "in:attention_mask" })
  p.bias_sums(wsp("gS"))
  gemm("grad_query", { comment = "gQ = scale * gS [T,T] @ k_h [T,64], into grad_qkv[:, 0:1024]",
    m = T, n = D, k = T, lda = T, ldb = D, ldc = QKV, ta = false, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = H * T * D, sb0 = T * D, sc1 = T * QKV, sc0 = D,
    a = wsp("gS"), b = "in:key", c = wsp("gqkv"), alpha = "f32:scale" })
  gemm("grad_key", { comment = "gK = scale * gS^T @ q_h, into grad_qkv[:, 1024:2048]",
    m = T, n = D, k = T, lda = T, ldb = D, ldc = QKV, ta = true, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = H * T * D, sb0 = T * D, sc1 = T * QKV, sc0 = D,
    a = wsp("gS"), b = "in:query", c = wsp("gqkv", HID), alpha = "f32:scale" })
  gemm("grad_value", { comment = "gV = Pd^T @ gA_h, into grad_qkv[:, 2048:3072]",
    m = T, n = D, k = T, lda = T, ldb = HID, ldc = QKV, ta = true, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = T * HID, sb0 = D, sc1 = T * QKV, sc0 = D,
    a = "in:attention_probs_dropped", b = wsp("gA"), c = wsp("gqkv", 2 * HID) })
  gemm("grad_hidden", { comment = "grad_hidden_states [BT,1024] = grad_qkv [BT,3072] @ qkv_weight [3072,1024]",
    m = BT, n = HID, k = QKV, lda = QKV, ldb = HID, ldc = HID, ta = false, tb = false,
    a = wsp("gqkv"), b = "in:qkv_weight", c = "out:grad_hidden_states" })
  gemm("grad_qkv_weight", { comment = "grad_qkv_weight [3072,1024] = grad_qkv^T @ hidden_states",
    m = QKV, n = HID, k = BT, lda = QKV, ldb = HID, ldc = HID, ta = true, tb = false,
    a = wsp("gqkv"), b = "in:hidden_states", c = "out:grad_qkv_weight" })
  p.colsum(wsp("gqkv"), "out:grad_qkv_bias", BT, QKV)

  p.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = p.prefix, GS_LD = T, GS_HALF = 0, GS_F16 = 0, IN_PLACE = 0 })
  p.render("grad_scores.cu", { PREFIX = p.prefix })
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 0 }) -- pointers 4-byte aligned
  return p.finish(arch, 4)
end

function M.plan(shape, t, arch)
  if t.fused == 1 then return plan_fused(shape, t, arch) end
  return plan_sequence(shape, t, arch)
end

return M
