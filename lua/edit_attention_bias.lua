-- Problem 2's edit-bias gradients in the fused plan (lua/edit_attention_plan.lua):
-- who zeroes grad_edit_region_bias before the attention pass and gQ write
-- or add into it, and the within/cross sums after the pass. Each function
-- takes the plan's context (lua/edit_attention_fused.lua).
local limits = require "edit_attention_limits"

local M = {}

local H, HID, QKV, POS, ceil_div = limits.H, limits.HID, limits.QKV, limits.POS, limits.ceil_div

-- All of grad_edit_region_bias zeroed, for what adds into it.
local function zero_all(p)
  p.kernel("zero", { ceil_div(H * POS * POS // 4, 256), 1, 1 },
           { "out:grad_edit_region_bias", "i64:" .. H * POS, "i32:" .. POS, "i64:" .. POS })
end

-- On a side lane, while the products run: the parts of grad_edit_region_bias
-- that neither the pass nor gQ writes, then the signal bias_zero.
function M.zero_early(f)
  local p, T = f.p, f.T
  if f.red_zeroed then -- all of grad_edit_region_bias, which gQ adds into
    zero_all(p)
  elseif f.zero_early then -- grad_edit_region_bias's rows past T, while the products run
    p.kernel("bias_zero_rows", { ceil_div((POS - T) * POS // 4, 256), H, 1 }, { "out:grad_edit_region_bias" })
  end
  if f.pass_wc and not f.red_zeroed and 64 * f.NJ < POS then -- the pass writes rows < T up to its last key block's end
    p.kernel("bias_zero_cols", { ceil_div(T * (POS - 64 * f.NJ) // 4, 256), H, 1 }, { "out:grad_edit_region_bias" })
  end
  if f.zero_early or f.gq_red then p.signal("bias_zero") end
end

-- gs_store=0: the outputs the pass adds into (red.add) start at zero.
function M.zero_for_pass(f)
  if f.t.gs_store ~= 0 then return end
  local p, BT = f.p, f.BT
  zero_all(p)
  p.kernel("zero", { ceil_div(BT * HID // 4, 256), 1, 1 }, { p.wsp("gqkv"), "i64:" .. BT, "i32:" .. HID, "i64:" .. QKV })
end

-- The within/cross gradients from the pass's partials (gs_store=0, att_wc), a head a block, in key-block order.
function M.within_cross(f)
  f.p.kernel("within_cross", { H, 1, 1 }, { f.p.wsp("wcpart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
end

-- gs_store=1, on lane 1 after the pass: the within/cross sums, or the bias
-- sums that read gS back.
function M.after_pass(f)
  local p = f.p
  p.on(1)
  p.wait("attention")
  if f.pass_wc then
    M.within_cross(f)
  else
    if f.zero_early then p.wait("bias_zero") end -- long done; orders the two writers of the output
    p.bias_sums(f.gs_direct and "null" or f.gs, f.zero_early and f.T or POS, f.gsinv) -- gs_direct: read in place
  end
end

-- The bias kernels' template (templates/edit_attention_bwd.cu), where gS is stored.
function M.render(f)
  local p, t = f.p, f.t
  if t.gs_store == 1 then
    p.render("edit_attention_bwd.cu", { B = f.B, T = f.T, PREFIX = p.prefix, GS_LD = f.gs_ld,
                                        GS_HALF = f.gs_half and 1 or 0, GS_F16 = f.gs_f16 and 1 or 0, IN_PLACE = f.gs_direct and 1 or 0 })
  end
end

return M
