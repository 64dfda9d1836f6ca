-- A plan of problem 2 being built (lua/edit_attention_plan.lua): its
-- workspace (named regions, each 256-byte aligned), its launches in order on
-- their lanes with the events between them, and its source parts. Each
-- launch names its arguments: "in:NAME" / "out:NAME" (the fields of
-- attnbwd_edit_attention_args), "ws:BYTES" (workspace offset), "null" (a
-- null pointer), "f32:NAME" (a scalar of the args, or "one"), "i64:N",
-- "i32:N", "tmap:...:ARG" (a tensor map over ARG,
-- runtime/launch_edit_attention.c). The kernels' parameter lists are their
-- templates'; p.finish checks every launch's arguments against them
-- (lua/kernel_signatures.lua).
local render = require "render"
local signatures = require "kernel_signatures"
local limits = require "edit_attention_limits"

local M = {}

local H, POS, COL_SPLIT, ceil_div = limits.H, limits.POS, limits.COL_SPLIT, limits.ceil_div

-- The threads of a row of gS in bias_grads (T's columns in fours, whole
-- warps): templates/bias_rows.cu's bias_row_threads.
local function bias_row_threads(T) return ceil_div(ceil_div(T, 4), 32) * 32 end

function M.new(shape, t)
  local p = { prefix = string.format("edit_attention_bwd_B%d_T%d_p%d", shape.batch, shape.seq_len, t.precision),
              ws = {}, ws_bytes = 0, launches = {}, parts = {}, lane = 0, waiting = {}, started = {}, events = {},
              n_events = 0, signatures = signatures.reader(), calls = {} }
  function p.reserve(name, floats)
    p.ws[name] = p.ws_bytes
    p.ws_bytes = p.ws_bytes + ((floats * 4 + 255) // 256) * 256
  end
  -- The argument for a region of the workspace, `plus` floats into it.
  function p.wsp(name, plus) return "ws:" .. (p.ws[name] + (plus or 0) * 4) end
  -- An operand spelled "ws:NAME" (a region by name) as its offset; any other as it is.
  function p.bind(spec) return spec:match("^ws:(%a+)$") and p.wsp(spec:sub(4)) or spec end
  function p.render(template, values)
    local text = render.render(template, values)
    signatures.read(p.signatures, text, template)
    p.parts[#p.parts + 1] = text
  end
  -- pdl (t.pdl = 1 or 2): a launch that follows another on its lane, with no
  -- event to wait for, may be placed on the SMs before that one ends (its
  -- kernel waits for it first: tc::pdl_enter), which hides the launch gap.
  function p.kernel(name, grid, args, block, smem)
    local waits = p.waiting[p.lane]
    p.launches[#p.launches + 1] = { name = p.prefix .. "_" .. name, grid = grid, block = block or { 256, 1, 1 },
                                    shared_bytes = smem or 0, args = args, lane = p.lane, waits = waits,
                                    pdl = t.pdl > 0 and p.started[p.lane] and not waits }
    -- Where the call is ("lua/FILE.lua:LINE: "), for p.finish's check.
    p.calls[#p.launches] = { name = name, where = select(2, pcall(error, "", 3)) }
    p.waiting[p.lane] = nil
    p.started[p.lane] = true
  end
  -- Lanes: launches that follow p.on(n) run on lane n (0: the chain every
  -- output waits on; each lane a stream of its own, forked from the caller's
  -- and joined back, runtime/launch_edit_attention.c). p.signal
  -- names the point after the last launch; p.wait makes the next launch on
  -- the current lane start after that point.
  function p.on(lane) p.lane = lane end
  function p.signal(name)
    local last = p.launches[#p.launches]
    assert(last.lane == p.lane, "signal " .. name .. ": the last launch is on another lane")
    if not last.signal then
      last.signal, p.n_events = p.n_events, p.n_events + 1
    end
    p.events[name] = last.signal
  end
  function p.wait(name)
    local w = p.waiting[p.lane] or {}
    w[#w + 1] = assert(p.events[name], "wait on " .. name .. " before it is signalled")
    p.waiting[p.lane] = w
  end
  -- out [cols] = the sums of the nparts rows of partial sums in region part, in order.
  function p.colsum_final(part, out, cols, nparts)
    p.kernel("colsum_final", { ceil_div(cols, 256), 1, 1 }, { p.wsp(part), out, "i32:" .. cols, "i32:" .. nparts })
  end
  -- Column sums of x [rows, cols] into out, in two fixed-order steps (templates/colsum.cu).
  function p.colsum(x, out, rows, cols, part)
    part = part or "colpart"
    p.kernel("colsum_partial", { ceil_div(cols, 256), COL_SPLIT, 1 },
             { x, p.wsp(part), "i64:" .. rows, "i32:" .. cols })
    p.colsum_final(part, out, cols, COL_SPLIT)
  end
  -- The edit-bias gradients from gS (templates/edit_attention_bwd.cu): one
  -- bias_grads block per 256 // ct rows of a head (ct threads a row: its T
  -- columns in fours, whole warps), then one bias_final block per head.
  -- rows: 1024, or T where bias_zero_rows writes the rest.
  -- gsinv: gS's inverse scales where it is fp16 (gs_half), else "null".
  function p.bias_sums(gs, rows, gsinv)
    rows = rows or POS
    local ct = bias_row_threads(shape.seq_len)
    p.kernel("bias_grads", { ceil_div(rows, 256 // ct), H, 1 },
             { gs, "in:edit_region_mask", "out:grad_edit_region_bias", p.wsp("biaspart"), "i32:" .. rows,
               gsinv or "null" })
    p.kernel("bias_final", { H, 1, 1 }, { p.wsp("biaspart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
  end
  function p.finish(arch, align)
    for i, l in ipairs(p.launches) do
      signatures.check(p.signatures, l.name, p.calls[i].name, l.args, p.calls[i].where)
    end
    local first = p.launches[1]
    return {
      name = first.name, grid = first.grid, block = first.block, shared_bytes = first.shared_bytes,
      source = "// attnbwd " .. arch .. " " .. render.tiles_string(t) .. "\n" .. table.concat(p.parts, "\n"),
      launches = p.launches,
      workspace_bytes = p.ws_bytes,
      align = align,
      -- Each lane's stream: lane 0 (the chain) at the greatest priority (2),
      -- lane 1 the least (0); lane 2 (grad_qkv_weight, the last kernel on
      -- most small workloads) at lane_pri: above 0, its blocks go before the
      -- bias sums'.
      lane_priority = { 2, 0, t.lane_pri },
    }
  end
  return p
end

return M
