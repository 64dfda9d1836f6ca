-- Problem 2's attention pass in the fused plan (lua/edit_attention_plan.lua):
-- one pass over P and Pd per (b, h, key block) that makes gPd, gS, gK and
-- gV, on mma.sync (templates/attention_fused.cu) or wgmma
-- (templates/attention_wg*.cu). Each function takes the plan's context
-- (lua/edit_attention_fused.lua).
local limits = require "edit_attention_limits"
local blocks = require "edit_attention_pass_blocks"

local M = {}

local H, D, HID = limits.H, limits.D, limits.HID
local ceil_div, min_blocks = limits.ceil_div, limits.min_blocks
local attention_smem, attention_wg_smem = limits.attention_smem, limits.attention_wg_smem

-- The pass's launch, then the signal attention.
function M.launch(f)
  local p, t, B, T, BT, NJ = f.p, f.t, f.B, f.T, f.BT, f.NJ
  local wsp, gs, gan, gsinv, att_tma, items = p.wsp, f.gs, f.gan, f.gsinv, f.att_tma, f.items
  if f.att_wg then
    -- With att_tma, P and Pd through tensor maps over [B*16*T/4, 4T]: four rows
    -- of P per map row, since T floats are not a multiple of 16 bytes at odd T;
    -- boxes of 8 x 68, not swizzled (templates/attention_wg.cu).
    local p_map = string.format("tmap:%d:%d:%d:8:68:0:", B * H * T // 4, 4 * T, 4 * T)
    local probs = att_tma and p_map .. "in:attention_probs" or "in:attention_probs"
    local dropped = att_tma and p_map .. "in:attention_probs_dropped" or "in:attention_probs_dropped"
    -- gA and q rows through tensor maps too: boxes of 32 rows x 32 floats, swizzled.
    local ga_map = string.format("tmap:%d:%d:%d:32:32:1:", BT, HID, HID) .. wsp("gA")
    local q_map = string.format("tmap:%d:%d:%d:32:32:1:", B * H * T, D, D) .. "in:query"
    local grid = t.att_kb == 3 and { blocks.mixed_blocks(B, T, f.pair_heads), 1, 1 } or
                 t.att_kb == 2 and { ceil_div(blocks.pair_items(B, T), items), 1, 1 } or { NJ, B * H, 1 }
    p.kernel("attention_wg", grid,
           { ga_map, wsp("rowdot"), q_map, "in:value", probs, dropped,
             "in:attention_mask", wsp("gqkv"), gs, "f32:scale", gan, gsinv, "f32:dropout_p",
             "in:edit_region_mask", wsp("wcpart"), f.red_out0 and "out:grad_edit_region_bias" or "null" }, nil,
           attention_wg_smem(t.p_stages, att_tma and 1 or 0, t.att_kb, items > 1 and 1 or 0, f.att_f16))
  else
    p.kernel("attention", { NJ, B * H, 1 },
           { wsp("gA"), wsp("rowdot"), "in:query", "in:key", "in:value", "in:attention_probs",
             "in:attention_probs_dropped", "in:attention_mask", "in:edit_region_mask", wsp("gqkv"),
             -- grad_edit_region_bias: summed into with gs_store=0 only (else unused: gs in its place)
             t.gs_store == 0 and "out:grad_edit_region_bias" or gs, wsp("wcpart"), gs, "f32:scale" },
           nil,
           attention_smem(t.bj, t.gs_store, t.p_stages))
  end
  p.signal("attention")
end

-- The pass's templates.
function M.render(f)
  local p, t, B, T, arch, mode = f.p, f.t, f.B, f.T, f.arch, f.mode
  local gs_ld, gs_rows, gs_half, gs_round, att_wg = f.gs_ld, f.gs_rows, f.gs_half, f.gs_round, f.att_wg
  -- Two attention blocks per SM where two fit; the kernel then keeps to 128
  -- registers.
  local att_bytes = attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32
  p.render("attention_fused.cu", { B = B, T = T, BJ = t.bj, MODE = mode, PREFIX = p.prefix,
                                   STORE_GS = t.gs_store, GS_LD = gs_ld, KV_SPLIT = t.kv_split, P_STAGES = t.p_stages,
                                   MIN_BLOCKS = min_blocks(att_bytes, arch),
                                   SYNC_PASS = not att_wg, ROW_NORMS = gs_half and 1 or 0 })
  if att_wg then
    local values = { B = B, T = T, PREFIX = p.prefix, GS_LD = gs_ld, GS_ROWS = gs_rows, P_STAGES = t.p_stages,
                     P_TMA = f.att_tma and 1 or 0, GS_HALF = gs_half and 1 or 0, GS_F16 = f.gs_f16 and 1 or 0,
                     GS_ROUND = gs_round and 1 or 0, WC = f.pass_wc and 1 or 0, OUT0 = f.red_out0 and 1 or 0,
                     ITEMS = f.items, F16 = f.att_f16 and 1 or 0 }
    p.render("attention_wg.cu", values)
    if t.att_kb ~= 2 then p.render("attention_wg_rows.cu", values) end
    if t.att_kb ~= 1 then p.render("attention_wg_keys.cu", values) end
    values.KB, values.PAIR_HEADS = t.att_kb, f.pair_heads or 0
    p.render("attention_wg_kernel.cu", values)
  end
end

return M
