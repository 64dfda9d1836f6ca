-- Problem 2, region-aware self-attention with edit bias, backward: the
-- kernels of one (B, T) and the order they run in (spec:
-- docs/spec/edit_attention_bwd.md). A correct-first sequence:
--   gA = grad_output @ out_weight                  grad_out_weight = grad_output^T @ attention_output
--   gPd = gA_h @ v_h^T              (per b, h)     gS = Pd*gPd - P*rowsum(Pd*gPd), masked keys 0
--   bias gradients from gS (summed over b)         gQ = scale gS @ k, gK = scale gS^T @ q, gV = Pd^T @ gA_h
--   grad_hidden_states = grad_qkv @ qkv_weight     grad_qkv_weight = grad_qkv^T @ hidden_states
--   the two bias gradients as column sums
-- Matrix products on tensor cores (TF32, or fp16 operands; fp32 accumulation)
-- or exact fp32; every reduction in a
-- fixed order. Each launch names its arguments: "in:NAME" / "out:NAME" (the
-- fields of attnbwd_edit_attention_args), "ws:BYTES" (workspace offset),
-- "f32:NAME" (a scalar of the args, or "one"), "i64:N", "i32:N".
local render = require "render"

local M = {}

local H, D, HID, QKV, POS = 16, 64, 1024, 3072, 1024
local COL_SPLIT = 64

local function ceil_div(a, b) return (a + b - 1) // b end

function M.heuristic(shape)
  return { precision = shape.precision, col_split = COL_SPLIT }
end

function M.validate(shape, t)
  if shape.seq_len > POS then
    return string.format("T=%d: longer than the 1024 positions of edit_region_bias (not supported yet)", shape.seq_len)
  end
  if t.precision ~= 0 and t.precision ~= 1 and t.precision ~= 2 then
    return "precision " .. tostring(t.precision) .. ": 0 (tf32), 1 (fp32) or 2 (fp16)"
  end
  if t.col_split ~= COL_SPLIT then return "col_split must be " .. COL_SPLIT end
  return nil
end

function M.candidates(shape) return { M.heuristic(shape) } end

function M.plan(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local prefix = string.format("edit_attention_bwd_B%d_T%d_p%d", B, T, t.precision)
  local f = 4 -- bytes per float
  -- Workspace: gA [BT,1024], gS [B,16,T,T], grad_qkv [BT,3072], column partials, bias partials.
  local ws = {}
  local off = 0
  local function reserve(name, floats)
    ws[name] = off
    off = off + ((floats * f + 255) // 256) * 256
  end
  reserve("gA", BT * HID)
  reserve("gS", B * H * T * T)
  reserve("gqkv", BT * QKV)
  reserve("colpart", COL_SPLIT * QKV)
  reserve("biaspart", H * POS * 4 * 2)

  local parts = { render.render("gemm_common.cu", {}) }
  local launches = {}
  local function gemm(name, g)
    local kname = prefix .. "_" .. name
    parts[#parts + 1] = render.render("gemm_kernel.cu", {
      NAME = kname, COMMENT = g.comment, M = g.m, N = g.n, K = g.k, LDA = g.lda, LDB = g.ldb, LDC = g.ldc,
      TA = g.ta, TB = g.tb, MODE = ({ [0] = 1, [1] = 0, [2] = 2 })[t.precision], INNER = g.inner or 1,
      SA1 = g.sa1 or 0, SA0 = g.sa0 or 0, SB1 = g.sb1 or 0, SB0 = g.sb0 or 0, SC1 = g.sc1 or 0, SC0 = g.sc0 or 0,
    })
    launches[#launches + 1] = {
      name = kname, grid = { ceil_div(g.n, 64), ceil_div(g.m, 64), g.batches or 1 }, block = { 128, 1, 1 },
      shared_bytes = 0, args = { g.a, g.b, g.c, g.alpha or "f32:one" },
    }
  end
  local function kernel(name, grid, args)
    launches[#launches + 1] = { name = prefix .. "_" .. name, grid = grid, block = { 256, 1, 1 }, shared_bytes = 0,
                                args = args }
  end
  local function wsp(name, plus) return "ws:" .. (ws[name] + (plus or 0) * f) end

  gemm("grad_attn_out", { comment = "gA [BT,1024] = grad_output [BT,1024] @ out_weight [1024,1024]",
    m = BT, n = HID, k = HID, lda = HID, ldb = HID, ldc = HID, ta = false, tb = false,
    a = "in:grad_output", b = "in:out_weight", c = wsp("gA") })
  gemm("grad_out_weight", { comment = "grad_out_weight [1024,1024] = grad_output^T @ attention_output",
    m = HID, n = HID, k = BT, lda = HID, ldb = HID, ldc = HID, ta = true, tb = false,
    a = "in:grad_output", b = "in:attention_output", c = "out:grad_out_weight" })
  kernel("colsum_partial", { ceil_div(HID, 256), COL_SPLIT, 1 },
         { "in:grad_output", wsp("colpart"), "i64:" .. BT, "i32:" .. HID })
  kernel("colsum_final", { ceil_div(HID, 256), 1, 1 }, { wsp("colpart"), "out:grad_out_bias", "i32:" .. HID })
  gemm("grad_probs", { comment = "gPd [b,h][T,T] = gA_h [T,64] @ v_h^T",
    m = T, n = T, k = D, lda = HID, ldb = D, ldc = T, ta = false, tb = true, inner = H, batches = B * H,
    sa1 = T * HID, sa0 = D, sb1 = H * T * D, sb0 = T * D, sc1 = H * T * T, sc0 = T * T,
    a = wsp("gA"), b = "in:value", c = wsp("gS") })
  kernel("grad_scores", { B * H * T, 1, 1 },
         { wsp("gS"), "in:attention_probs", "in:attention_probs_dropped", "in:attention_mask" })
  kernel("bias_grads", { POS // 256, POS, H }, { wsp("gS"), "in:edit_region_mask", "out:grad_edit_region_bias",
                                                  wsp("biaspart") })
  kernel("bias_final", { H, 1, 1 }, { wsp("biaspart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
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
  kernel("colsum_partial", { ceil_div(QKV, 256), COL_SPLIT, 1 },
         { wsp("gqkv"), wsp("colpart"), "i64:" .. BT, "i32:" .. QKV })
  kernel("colsum_final", { ceil_div(QKV, 256), 1, 1 }, { wsp("colpart"), "out:grad_qkv_bias", "i32:" .. QKV })

  parts[#parts + 1] = render.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = prefix, COL_SPLIT = COL_SPLIT })
  local first = launches[1]
  return {
    name = first.name, grid = first.grid, block = first.block, shared_bytes = 0,
    source = "// attnbwd " .. arch .. " " .. render.tiles_string(t) .. "\n" .. table.concat(parts, "\n"),
    launches = launches,
    workspace_bytes = off,
    align = 4,
  }
end

return M
