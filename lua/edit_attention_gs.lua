-- How problem 2's plan keeps gS, the attention pass's output, for a tile
-- choice: its row stride and rows a head, fp16 or fp32, rounded or not, in
-- the workspace or (B = 1) in grad_edit_region_bias itself, and how gQ and
-- the edit-bias sums read it.
local limits = require "edit_attention_limits"

local M = {}

local POS, ceil_div, att_on_wg = limits.POS, limits.ceil_div, limits.att_on_wg

function M.modes(shape, t)
  local B, T = shape.batch, shape.seq_len
  local gs_ld = ceil_div(T, 4) * 4 -- gS rows, padded for 16-byte loads
  -- gs_half: gS in fp16 (half the floats), 1/f per (b, h, key block) in gsinv,
  -- |gA_i|^2 per row in gan (for f: templates/attention_wg.cu's gs_exponent).
  local gs_half = t.gs_half == 1 and att_on_wg(t) and t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1
  -- gs_round: gS stored rounded to TF32 by the wgmma pass, where gQ runs on wgmma too (fp32 gS).
  local gs_round = t.gs_round == 1 and att_on_wg(t) and t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1 and
                   not gs_half
  -- gs_direct (B = 1): gS is grad_edit_region_bias itself; the wgmma pass
  -- writes it there ([16, 1024, 1024]: its rows 1024 floats apart, its
  -- heads 1024 rows), gQ reads it there, and the bias sums only add its
  -- within/cross products and write the columns past the pass's last key
  -- block: no gS in the workspace, and no copy of it.
  local gs_direct = t.gs_direct == 1 and B == 1 and att_on_wg(t) and t.wg_gq == 1 and t.wg == 1 and
                    t.gs_store == 1 and not gs_half
  if gs_direct then gs_ld = POS end
  local gs_rows = gs_direct and POS or T -- gS's rows per (b, h)
  -- gQ on wgmma (wg_gq = 1), as gQ^T = k^T gS^T: the keys [T, 64] are A
  -- stored transposed (through registers), gS's rows B, rounded in place;
  -- or (gq_tma) TMA-fed and persistent, where gS is fp32.
  local gq_wg = t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1 -- TF32's gQ, in fp16 too
  local gq_tma = gq_wg and t.gq_tma == 1 and t.tma == 1 and not gs_half
  -- gq_red=1: gQ's batched wgmma product (not gq_tma) adds each gS tile it
  -- reads into grad_edit_region_bias, zeroed whole at the start, by float
  -- reductions, its blocks head by head so that the rows they add into stay
  -- in L2; the wgmma pass makes the within/cross sums (as att_wc does at
  -- B = 1): no bias_grads launch reads gS back. That output's last bits then
  -- vary from run to run. gS in the workspace (not gs_direct's B = 1).
  -- gq_red=2 (red_out0 below): the pass stores batch row 0's gS into the
  -- output instead, gQ adds rows 1.., and only the rows and columns the pass
  -- does not write are zeroed, beside: gQ waits on no zeroing (and stays a
  -- programmatic launch after the pass).
  local gq_red = t.gq_red >= 1 and gq_wg and not gq_tma and not gs_half and not gs_direct and att_on_wg(t)
  -- gs_f16 (tile gq_f16=1, fp16 with the pass on fp16 operands): gS in the
  -- workspace in fp16, as the pass rounds it for gK's product, with no
  -- scale (fp16's operands, as autocast's), and gQ on fp16 wgmma reading it
  -- as stored (templates/grad_query_wg16.cu): half of gS's bytes written and
  -- read (by gQ, and by the bias sums where gQ does not add them, gq_red).
  -- Its rows 16-byte aligned.
  local gs_f16 = t.gq_f16 == 1 and limits.att_f16_on(t, gs_half) and gq_wg and not gq_tma and not gs_direct
  if gs_f16 then gs_ld, gs_round = ceil_div(T, 8) * 8, false end
  return { gs_ld = gs_ld, gs_half = gs_half, gs_round = gs_round, gs_direct = gs_direct, gs_rows = gs_rows,
           gq_wg = gq_wg, gq_tma = gq_tma, gq_red = gq_red, gs_f16 = gs_f16 }
end

return M
