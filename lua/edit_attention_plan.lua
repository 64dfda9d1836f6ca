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
-- (templates/gemm_tc.cu), or with wg = 1 (TF32 on sm_90) wgmma, TMA-fed or
-- not (templates/gemm_tma.cu, gemm_wg.cu), after a rounded transpose of B,
-- where the model says that is faster.
-- fused = 0: the first, correct-first sequence (ten batched 64x64 products and
-- separate softmax-backward and bias kernels), kept to compare against.
--
-- Matrix products on tensor cores (TF32, or fp16 operands; fp32 accumulation)
-- or exact fp32. Each launch names its arguments: "in:NAME" / "out:NAME" (the
-- fields of attnbwd_edit_attention_args), "ws:BYTES" (workspace offset),
-- "f32:NAME" (a scalar of the args, or "one"), "i64:N", "i32:N".
local render = require "render"
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"
local products_of = require "edit_attention_products"
local gs_of = require "edit_attention_gs"

local M = {}

local H, D, HID, QKV, POS, COL_SPLIT = limits.H, limits.D, limits.HID, limits.QKV, limits.POS, limits.COL_SPLIT
local SMS = limits.SMS
local ceil_div, smem_limit, min_blocks, att_on_wg = limits.ceil_div, limits.smem_limit, limits.min_blocks, limits.att_on_wg
local pdl_arch = limits.pdl_arch
local attention_smem, attention_wg_smem = limits.attention_smem, limits.attention_wg_smem
local GEMM_BK, GEMM_CONFIGS = tiles.GEMM_BK, tiles.GEMM_CONFIGS
local gemm_smem, wg_smem, tma_smem, tma_threads = tiles.gemm_smem, tiles.wg_smem, tiles.tma_smem, tiles.tma_threads

-- A plan being built: its workspace (named regions, each 256-byte aligned),
-- its launches in order and its source parts. Both plans below use one.
-- The threads of a row of gS in bias_grads (T's columns in fours, whole
-- warps): templates/bias_rows.cu's bias_row_threads.
local function bias_row_threads(T) return ceil_div(ceil_div(T, 4), 32) * 32 end

local function new_plan(shape, t)
  local p = { prefix = string.format("edit_attention_bwd_B%d_T%d_p%d", shape.batch, shape.seq_len, t.precision),
              ws = {}, ws_bytes = 0, launches = {}, parts = {}, lane = 0, waiting = {}, started = {}, events = {},
              n_events = 0 }
  function p.reserve(name, floats)
    p.ws[name] = p.ws_bytes
    p.ws_bytes = p.ws_bytes + ((floats * 4 + 255) // 256) * 256
  end
  -- The argument for a region of the workspace, `plus` floats into it.
  function p.wsp(name, plus) return "ws:" .. (p.ws[name] + (plus or 0) * 4) end
  function p.render(template, values) p.parts[#p.parts + 1] = render.render(template, values) end
  -- pdl (t.pdl = 1 or 2): a launch that follows another on its lane, with no
  -- event to wait for, may be placed on the SMs before that one ends (its
  -- kernel waits for it first: tc::pdl_enter), which hides the launch gap.
  function p.kernel(name, grid, args, block, smem)
    local waits = p.waiting[p.lane]
    p.launches[#p.launches + 1] = { name = p.prefix .. "_" .. name, grid = grid, block = block or { 256, 1, 1 },
                                    shared_bytes = smem or 0, args = args, lane = p.lane, waits = waits,
                                    pdl = t.pdl > 0 and p.started[p.lane] and not waits }
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
  -- gsinv: gS's inverse scales where it is fp16 (gs_half), else "i64:0".
  function p.bias_sums(gs, rows, gsinv)
    rows = rows or POS
    local ct = bias_row_threads(shape.seq_len)
    p.kernel("bias_grads", { ceil_div(rows, 256 // ct), H, 1 },
             { gs, "in:edit_region_mask", "out:grad_edit_region_bias", p.wsp("biaspart"), "i32:" .. rows,
               gsinv or "i64:0" })
    p.kernel("bias_final", { H, 1, 1 }, { p.wsp("biaspart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
  end
  function p.finish(arch, align)
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

-- att_kb=3: the attention pass's blocks of two key blocks (a step of 32
-- rows: one unit of time) for the first pair_heads (b, h), and of one key
-- block (a step of 64 rows, each warpgroup staging its own: ROWS_STEP units,
-- att_kb=1's passes taking 1.25-1.49x att_kb=2's time a step where measured)
-- for those heads' odd last key block and every key
-- block of the others; each block also BLOCK_SETUP for its prologue.
local ROWS_STEP, BLOCK_SETUP = 1.33, 1
function M.attention_mixed_blocks(B, T, pair_heads)
  local nj = ceil_div(T, 64)
  return pair_heads * (nj // 2 + nj % 2) + (B * H - pair_heads) * nj
end
-- The pass's items where a block takes two key blocks (att_kb=2): pairs of
-- 64-key blocks, for every (b, h); its grid is these over the items a block.
function M.attention_pair_items(B, T)
  return ceil_div(ceil_div(T, 64), 2) * B * H
end
-- att_items=0: the items a block of two key blocks takes one after another
-- with the least modelled time, in steps of 32 rows: waves of blocks, each
-- ITEM_SETUP (the fixed cost that the pass's times on the H200 fit at one
-- item a block, about three steps) and per item its steps, and beyond the
-- first item ITEM_SWITCH (its sums stored, v rounded; a guess). The fit
-- overstates what a next item hides (docs/experiments.md, att_items).
local ITEM_SETUP, ITEM_SWITCH = 3, 0.7
function M.attention_items(B, T)
  local steps, ni = ceil_div(T, 32), M.attention_pair_items(B, T)
  local best, best_time
  for _, n in ipairs { 1, 2, 3, 4, 6, 8 } do
    local time = ceil_div(ceil_div(ni, n), limits.SMS) * (ITEM_SETUP + n * steps + (n - 1) * ITEM_SWITCH)
    if not best_time or time < best_time - 1e-9 then best, best_time = n, time end
  end
  return best
end
-- The pair_heads whose blocks end soonest (projection_tiles.makespan, as if
-- the pairs ran first): every head's key blocks in pairs, but where the last
-- wave fills better with some heads' in blocks of one (B=4,T=640: 52 of 64;
-- the pass alone 8% faster there on an H100, the call 1%).
function M.attention_pair_heads(B, T)
  local nj = ceil_div(T, 64)
  local pair_time, rows_time = BLOCK_SETUP + ceil_div(T, 32), BLOCK_SETUP + ROWS_STEP * ceil_div(T, 64)
  local best, best_time
  for heads = B * H, 0, -1 do
    local pairs = heads * (nj // 2)
    local time = tiles.makespan(pairs, pair_time, M.attention_mixed_blocks(B, T, heads) - pairs, rows_time)
    if not best_time or time < best_time - 1e-9 then best, best_time = heads, time end
  end
  return best
end

local function plan_fused(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local p = new_plan(shape, t)
  local wsp = p.wsp
  local mode = ({ [0] = 1, [1] = 0, [2] = 2 })[t.precision]
  local NJ = ceil_div(T, t.bj)

  local products, pair, pair_kv = products_of.choose(shape, t, arch)
  if not products then return nil, pair end

  -- Workspace: gA [BT,1024], grad_qkv [BT,3072], D [B,16,T], within/cross
  -- partials, gS, bias partials, column-sum partials; per product its
  -- split-K partial products and its B transposed (wgmma): products may run
  -- side by side, so none shares a region with another.
  local gm = gs_of.modes(shape, t)
  local gs_ld, gs_half, gs_round, gs_direct, gs_rows = gm.gs_ld, gm.gs_half, gm.gs_round, gm.gs_direct, gm.gs_rows
  local gq_wg, gq_tma, gq_red = gm.gq_wg, gm.gq_tma, gm.gq_red
  p.reserve("gA", BT * HID)
  p.reserve("gqkv", BT * QKV)
  p.reserve("rowdot", B * H * T)
  p.reserve("wcpart", B * H * NJ * 2)
  local gs_floats = gs_half and ceil_div(B * H * T * gs_ld, 2) or B * H * T * gs_ld
  p.reserve("gs", t.gs_store == 1 and not gs_direct and gs_floats or 0)
  local gs = gs_direct and "out:grad_edit_region_bias" or wsp("gs")
  p.reserve("gan", gs_half and B * H * T or 0)
  p.reserve("gsinv", gs_half and B * H * NJ or 0)
  local gan = gs_half and wsp("gan") or "i64:0"
  local gsinv = gs_half and wsp("gsinv") or "i64:0"
  p.reserve("biaspart", H * POS * 2)
  p.reserve("colpart_out", COL_SPLIT * HID)
  p.reserve("colpart_qkv", COL_SPLIT * QKV)
  -- splitk_red>=1: a split TMA-fed product adds its K slices into its output
  -- (zeroed by a launch before it) with float atomics as each block ends,
  -- instead of writing them apart for a reduce launch; not gA, whose reduce
  -- also makes the row dots. Its last bits then vary from run to run.
  local function adds_slices(g)
    return t.splitk_red >= 1 and g.choice.tma == true and g.choice.splits > 1 and not g.choice.cluster and not g.rowdot
  end
  -- Whether a product's K slices go through the workspace to a reduce launch.
  local function apart(g) return g.choice.splits > 1 and not g.choice.cluster and not adds_slices(g) end
  local gattn = products[1]
  -- ga_rowdot=1: gA, TMA-fed and unsplit, makes the row dots from its
  -- accumulators (templates/gemm_tma.cu's ROWDOT_T): no rowdot launch after it.
  local function makes_rowdots(g)
    return t.ga_rowdot == 1 and g.rowdot and g.choice.tma == true and g.choice.splits == 1 and not g.ta and
           not g.c_t and not gs_half and tma_smem(g.choice.config, g.ta, true) <= smem_limit(arch)
  end
  local zero_early = t.zero_early == 1 and t.gs_store == 1 and T < POS
  local red_out0 = gq_red and t.gq_red == 2 and (zero_early or T == POS)
  local red_zeroed = gq_red and not red_out0 -- gq_red=1: gQ adds into the whole output, zeroed first
  -- att_wc (B = 1, gS in place, rows past T zeroed early or none), or
  -- gq_red: the wgmma pass sums gS * m_i*m_j and gS * (m_i != m_j) per key
  -- block into wcpart, which within_cross adds; the columns past its last key
  -- block are zeroed at the start (bias_zero_cols; gq_red=1: the whole output):
  -- no bias_grads launch reads gS back.
  local pass_wc = (t.att_wc == 1 and gs_direct and (zero_early or T == POS)) or gq_red
  local ghid = products[3]
  for _, g in ipairs(products) do
    if apart(g) then p.reserve("splitk_" .. g.name, g.choice.splits * g.m * g.n) end
    if g.choice.wg and not g.b_direct then p.reserve("tB_" .. g.name, g.n * g.kp) end
  end
  local function bind(spec) return spec:match("^ws:(%a+)$") and wsp(spec:sub(4)) or spec end

  local att_wg = att_on_wg(t) -- the attention pass on wgmma (templates/attention_wg.cu)
  local att_tma = att_wg and t.att_tma == 1 -- P and Pd into it by the TMA
  local pair_heads = att_wg and t.att_kb == 3 and M.attention_pair_heads(B, T) or nil
  -- att_kb=2: items (pair, head) a block takes one after another (att_items; fp32 gS).
  local items = 1
  if att_wg and t.att_kb == 2 and not gs_half then
    items = t.att_items ~= 0 and t.att_items or M.attention_items(B, T)
  end
  local any_wg = gq_wg or att_wg
  for _, g in ipairs(products) do any_wg = any_wg or g.choice.wg end
  if t.pdl == 2 then p.parts[#p.parts + 1] = "#define ATTNBWD_PDL_EARLY 1" end
  p.render("tc_common.cu", {})
  if t.gs_store == 1 then p.render("bias_rows.cu", {}) end
  p.render("gemm_tc.cu", {})
  -- tma.cu: the TMA's and the cluster's helpers; the attention pass names
  -- the mbarrier helpers even where P_TMA leaves them unused.
  if any_wg then
    p.render("gemm_wg.cu", {})
    if t.tma == 1 or att_wg then p.render("tma.cu", {}) end
    if t.tma == 1 then p.render("gemm_tma.cu", {}) end
    p.render("transpose.cu", { PREFIX = p.prefix, VEC = t.tr_vec })
  end
  -- A wgmma product's B [K, N] -> its region [N, kp], zero-padded and
  -- rounded (templates/transpose.cu); nothing for an mma.sync product.
  -- Whether it launched one: B is transposed for wgmma only, and not where read as it lies.
  local function transpose_b(g)
    if not g.choice.wg or g.b_direct then return false end
    p.kernel("transpose", { ceil_div(g.kp, 64), ceil_div(g.n, 64), 1 },
             { bind(g.b), wsp("tB_" .. g.name), "i64:" .. g.k, "i32:" .. g.n, "i64:" .. g.kp })
    return true
  end
  -- A product whose A's column sums are a bias gradient makes them itself
  -- (gemm_bias: TMA-fed TA products, templates/gemm_tma.cu), one row of sums
  -- per K slice, added in slice order by colsum_final: with gemm_bias=2
  -- always, 1 where its K is split or it is paired (pair > 0: the sums' own
  -- pass would otherwise be the call's last kernel on its lane).
  local function makes_sums(g, paired)
    return g.bias and g.ta and (t.gemm_bias == 2 or t.gemm_bias == 1 and (g.choice.splits > 1 or paired))
  end
  -- A TMA-fed product's template values (templates/gemm_tma.cu) and its
  -- arguments (A's map, B's map, output, column sums), and whether it makes
  -- its A's column sums.
  local function tma_product(g, paired)
    local c, split = g.choice.config, apart(g)
    local sums = makes_sums(g, paired)
    local values = { M = g.m, N = g.n, K = g.k, LDC = g.ldc, TA = g.ta, BM = c.bm, BN = c.bn, STAGES = c.stages,
                     RAW = c.raw, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits, COLSUM = sums and true or false,
                     A_TRUNC = t.gh_trunc == 1 and g.a == "ws:gqkv" and not g.ta,
                     B_ROUND = g.b_direct or false, C_T = g.c_t or false, SPLIT_LD = g.c_t and g.m or g.n,
                     CLUSTER = g.choice.cluster and g.choice.splits or 1, RED = adds_slices(g), CLUSTER_DIMS = "" }
    -- Tensor maps "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:pointer" (runtime/launch_edit_attention.c).
    local map_a = g.ta and string.format("tmap:%d:%d:%d:%d:%d:0:", g.k, g.m, g.lda, GEMM_BK, c.bm)
                  or string.format("tmap:%d:%d:%d:%d:%d:1:", g.m, g.k, g.lda, c.bm, GEMM_BK)
    local map_b = g.b_direct and string.format("tmap:%d:%d:%d:%d:%d:1:", g.n, g.k, g.ldb, c.bn, GEMM_BK) .. bind(g.b)
                  or string.format("tmap:%d:%d:%d:%d:%d:1:", g.n, g.kp, g.kp, c.bn, GEMM_BK) .. wsp("tB_" .. g.name)
    local out = split and wsp("splitk_" .. g.name) or bind(g.c)
    local colsum = not sums and "i64:0" or g.choice.splits > 1 and wsp(g.bias_part) or g.bias -- a row per slice
    return values, { map_a .. bind(g.a), map_b, out, colsum }, sums
  end
  -- After a product on its lane: the reduce of its K slices, its column sums' last step.
  local function finish_product(g, sums)
    local kname, split = p.prefix .. "_" .. g.name, apart(g)
    if split and g.rowdot then -- gA: the row dots come with the reduce (no rowdot launch)
      p.render("splitk_reduce_rowdot_kernel.cu", { NAME = kname .. "_reduce", T = shape.seq_len, BT = BT,
                                                   SPLITS = g.choice.splits, NORMS = gs_half and 1 or 0 })
      p.kernel(g.name .. "_reduce", { ceil_div(BT * H * 32, 256), 1, 1 },
               { wsp("splitk_" .. g.name), bind(g.c), "in:attention_output", wsp("rowdot"), gan })
    elseif split then
      p.render("splitk_reduce_kernel.cu", {
        NAME = kname .. "_reduce", GEMM = g.name, NELEM = g.m * g.n, SPLITS = g.choice.splits })
      p.kernel(g.name .. "_reduce", { ceil_div(g.m * g.n // 4, 256), 1, 1 },
               { wsp("splitk_" .. g.name), bind(g.c), "f32:one" })
    end
    if sums and g.choice.splits > 1 then p.colsum_final(g.bias_part, g.bias, g.m, g.choice.splits) end
  end
  -- The zeros a product adding its K slices (adds_slices) adds them into.
  local function zero_output(g)
    if adds_slices(g) then
      p.kernel("zero", { ceil_div(g.m * g.n // 4, 256), 1, 1 },
               { bind(g.c), "i64:" .. g.m, "i32:" .. g.n, "i64:" .. g.ldc })
    end
  end
  -- One product in its own launch; true where it made its column sums.
  local function gemm(g)
    local c, kname = g.choice.config, p.prefix .. "_" .. g.name
    local grid = { ceil_div(g.n, c.bn), ceil_div(g.m, c.bm), g.choice.splits }
    local out = apart(g) and wsp("splitk_" .. g.name) or bind(g.c)
    local sums = false
    if g.choice.tma then
      local values, args
      values, args, sums = tma_product(g)
      values.NAME, values.COMMENT = kname, g.comment .. (g.b_direct and "" or "; B transposed")
      if makes_rowdots(g) then -- attention_output's 128-row boxes of 32 columns, swizzled
        values.T = T
        p.render("gemm_tma_rowdot_kernel.cu", values)
        p.kernel(g.name, grid, { args[1], args[2], args[3], "f32:one",
                                 string.format("tmap:%d:%d:%d:%d:%d:1:in:attention_output", BT, HID, HID, c.bm, GEMM_BK),
                                 wsp("rowdot") },
                 { tma_threads(c), 1, 1 }, tma_smem(c, g.ta, true))
      else
        p.render("gemm_tma_kernel.cu", values)
        p.kernel(g.name, grid, { args[1], args[2], args[3], "f32:one", args[4] }, { tma_threads(c), 1, 1 },
                 tma_smem(c, g.ta, false))
      end
    elseif g.choice.wg then
      p.render("gemm_wg_kernel.cu", {
        NAME = kname, COMMENT = g.comment .. "; B transposed", M = g.m, N = g.n, K = g.k, LDA = g.lda,
        LDB = g.kp, LDC = g.ldc, TA = g.ta, BM = c.bm, BN = c.bn, STAGES = c.stages, KSPLIT = g.choice.kslice,
        SPLITS = g.choice.splits,
      })
      p.kernel(g.name, grid, { bind(g.a), wsp("tB_" .. g.name), out, "f32:one" }, { c.bm // 64 * 128, 1, 1 },
               wg_smem(c, g.ta))
    else
      local values = {
        NAME = kname, COMMENT = g.comment, M = g.m, N = g.n, K = g.k, LDA = g.lda, LDB = g.ldb, LDC = g.ldc,
        TA = g.ta, TB = g.tb, MODE = mode, BM = c.bm, BN = c.bn, BK = GEMM_BK, WARPS_M = c.warps_m,
        WARPS_N = c.warps_n, STAGES = c.stages, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits,
      }
      p.render("gemm_tc_kernel.cu", values)
      p.kernel(g.name, grid, { bind(g.a), bind(g.b), out, "f32:one" }, { c.warps_m * c.warps_n * 32, 1, 1 },
               gemm_smem(c, g.ta, g.tb))
    end
    finish_product(g, sums)
    return sums
  end
  -- Two TMA-fed products in one launch (pair > 0), g1's blocks first, then
  -- each one's reduce and sums on the lane; returns whether each made its sums.
  -- part (pair_kv): nil for all of both; "kv" or "q" for the blocks of that
  -- part (the caller then finishes the products after both parts).
  local function gemm_pair(g1, g2, part)
    local name = g1.name .. "_and_" .. g2.name .. (part and "_" .. part or "")
    local v1, a1, s1 = tma_product(g1, true)
    local v2, a2, s2 = tma_product(g2, true)
    local values = { NAME = p.prefix .. "_" .. name, NAME1 = g1.name, NAME2 = g2.name, COMMENT1 = g1.comment,
                     COMMENT2 = g2.comment }
    for k, v in pairs(v1) do values[k .. "1"] = v end
    for k, v in pairs(v2) do values[k .. "2"] = v end
    -- pair_dsm: clusters of the split products' slices (one size a launch);
    -- each product's blocks then padded to whole clusters.
    values.CLUSTER = math.max(v1.CLUSTER, v2.CLUSTER)
    values.CLUSTER_DIMS = values.CLUSTER > 1 and string.format("__cluster_dims__(%d, 1, 1)", values.CLUSTER) or ""
    -- Each product's blocks: K slices [S0, S0 + NS) x tile rows [Y0, Y0 + NY).
    local blocks = 0
    for i, g in ipairs { g1, g2 } do
      local c = g.choice
      local s0, ns, y0, ny = 0, c.splits, 0, ceil_div(g.m, c.config.bm)
      if part and g.name == "grad_hidden" then -- K slices of 1024: q, k, v
        if part == "kv" then s0, ns = 1, 2 else s0, ns = 0, 1 end
      elseif part then -- grad_qkv_weight's rows: q's the first 1024
        local q_rows = HID // c.config.bm
        if part == "kv" then y0, ny = q_rows, ny - q_rows else ny = q_rows end
      end
      values["S0" .. i], values["NS" .. i], values["Y0" .. i], values["NY" .. i] = s0, ns, y0, ny
      blocks = blocks + ceil_div(ceil_div(g.n, c.config.bn) * ny * ns, values.CLUSTER) * values.CLUSTER
    end
    p.render("gemm_tma_pair_kernel.cu", values)
    p.kernel(name, { blocks, 1, 1 }, { a1[1], a1[2], a1[3], a1[4], a2[1], a2[2], a2[3], a2[4], "f32:one" },
             { tma_threads(g1.choice.config), 1, 1 }, math.max(g1.choice.smem, g2.choice.smem))
    if not part then
      finish_product(g1, s1)
      finish_product(g2, s2)
    end
    return s1, s2
  end

  -- Three lanes. Lane 0 (the stream of greatest priority) is the chain
  -- every output waits on: gA, the attention pass, gQ, grad_hidden. What needs only the
  -- inputs (grad_out_weight, grad_out_bias, the transposed weights) runs on
  -- lanes 1 and 2 beside it, and what needs only gS or grad_qkv (the bias
  -- sums, grad_qkv_weight, grad_qkv_bias) beside the rest of the chain. Most
  -- of these kernels fill a fraction of the GPU on small shapes; side by side
  -- they fill it together. Launches are issued in the order the chain needs.
  local gow, gqw = products[2], products[4]
  -- side_start=2: the side lanes start once gA's B (out_weight) is
  -- transposed, lane 0's first launch: it then has the GPU to itself, and gA
  -- follows it before the side lanes' products (else as side_start=0).
  local after_ga_b = transpose_b(gattn) and t.side_start == 2
  if after_ga_b then p.signal("ga_b") end
  gemm(gattn)
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
  transpose_b(ghid)
  zero_output(ghid)
  if ghid.choice.wg then p.signal("ghid_b") end
  transpose_b(gow)
  zero_output(gow)
  if not gemm(gow) then p.colsum("in:grad_output", "out:grad_out_bias", BT, HID, "colpart_out") end
  p.on(2)
  side_lane_start()
  transpose_b(gqw)
  zero_output(gqw)
  if pair then p.signal("gqw_b") end
  if red_zeroed then -- all of grad_edit_region_bias, which gQ adds into
    p.kernel("zero", { ceil_div(H * POS * POS // 4, 256), 1, 1 },
             { "out:grad_edit_region_bias", "i64:" .. H * POS, "i32:" .. POS, "i64:" .. POS })
  elseif zero_early then -- grad_edit_region_bias's rows past T, while the products run
    p.kernel("bias_zero_rows", { ceil_div((POS - T) * POS // 4, 256), H, 1 }, { "out:grad_edit_region_bias" })
  end
  if pass_wc and not red_zeroed and 64 * NJ < POS then -- the pass writes rows < T up to its last key block's end
    p.kernel("bias_zero_cols", { ceil_div(T * (POS - 64 * NJ) // 4, 256), H, 1 }, { "out:grad_edit_region_bias" })
  end
  if zero_early or gq_red then p.signal("bias_zero") end
  p.on(0)
  if gattn.choice.splits == 1 and not makes_rowdots(gattn) then -- else gA or its reduce made them
    p.kernel("rowdot", { ceil_div(BT * H, 32), 1, 1 }, { wsp("gA"), "in:attention_output", wsp("rowdot"), gan }) -- 32 units a block
  end
  if t.gs_store == 0 then -- the red.add targets start at zero
    p.kernel("zero", { ceil_div(H * POS * POS // 4, 256), 1, 1 },
           { "out:grad_edit_region_bias", "i64:" .. H * POS, "i32:" .. POS, "i64:" .. POS })
    p.kernel("zero", { ceil_div(BT * HID // 4, 256), 1, 1 }, { wsp("gqkv"), "i64:" .. BT, "i32:" .. HID, "i64:" .. QKV })
  end

  if att_wg then
    -- With att_tma, P and Pd through tensor maps over [B*16*T/4, 4T]: four rows
    -- of P per map row, since T floats are not a multiple of 16 bytes at odd T;
    -- boxes of 8 x 68, not swizzled (templates/attention_wg.cu).
    local p_map = string.format("tmap:%d:%d:%d:8:68:0:", B * H * T // 4, 4 * T, 4 * T)
    local probs = att_tma and p_map .. "in:attention_probs" or "in:attention_probs"
    local dropped = att_tma and p_map .. "in:attention_probs_dropped" or "in:attention_probs_dropped"
    -- gA and q rows through tensor maps too: boxes of 32 rows x 32 floats, swizzled.
    local ga_map = string.format("tmap:%d:%d:%d:32:32:1:", BT, HID, HID) .. wsp("gA")
    local q_map = string.format("tmap:%d:%d:%d:32:32:1:", B * H * T, D, D) .. "in:query"
    local grid = t.att_kb == 3 and { M.attention_mixed_blocks(B, T, pair_heads), 1, 1 } or
                 t.att_kb == 2 and { ceil_div(M.attention_pair_items(B, T), items), 1, 1 } or { NJ, B * H, 1 }
    p.kernel("attention_wg", grid,
           { ga_map, wsp("rowdot"), q_map, "in:value", probs, dropped,
             "in:attention_mask", wsp("gqkv"), gs, "f32:scale", gan, gsinv, "f32:dropout_p",
             "in:edit_region_mask", wsp("wcpart"), red_out0 and "out:grad_edit_region_bias" or "i64:0" }, nil,
           attention_wg_smem(t.p_stages, att_tma and 1 or 0, t.att_kb, items > 1 and 1 or 0))
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
  -- The within/cross gradients from the pass's partials (gs_store=0, att_wc), a head a block, in key-block order.
  local function within_cross()
    p.kernel("within_cross", { H, 1, 1 }, { wsp("wcpart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
  end
  if t.gs_store == 0 then
    within_cross()
    p.signal("grad_qkv")
  else
    p.on(1)
    p.wait("attention")
    if pass_wc then
      within_cross()
    else
      if zero_early then p.wait("bias_zero") end -- long done; orders the two writers of the output
      p.bias_sums(gs_direct and "i64:0" or gs, zero_early and T or POS, gsinv) -- gs_direct: read in place
    end
    p.on(0)
    -- gQ [b,h] = scale * gS [T,T] @ k [T,64], straight into grad_qkv[:, h*64 : h*64+64].
    local kname = p.prefix .. "_grad_query"
    if gq_tma then
      -- gq_bn rows of one head's gS a tile, as many blocks as tiles or SMs
      -- (templates/grad_query_tma.cu); stages and k's slots fill the shared memory.
      local bm = t.gq_bn
      local stages, raw = bm == 128 and 7 or 10, 4
      local n_tiles = B * H * ceil_div(T, bm)
      p.render("grad_query_tma.cu", { NAME = kname, T = T, Z = B * H, GS_ROWS = gs_rows, BM = bm, STAGES = stages, RAW = raw,
                                      A_ROUND = not gs_round })
      local smem = (stages * (bm + D) * GEMM_BK + raw * GEMM_BK * D) * 4 + (3 * stages + 2 * raw) * 8 + 1024
      p.kernel("grad_query", { math.min(n_tiles, SMS), 1, 1 },
               { string.format("tmap:%d:%d:%d:%d:%d:1:", B * H * gs_rows, T, gs_ld, bm, GEMM_BK) .. gs,
                 string.format("tmap:%d:%d:%d:%d:%d:0:", B * H * T, D, D, GEMM_BK, D) .. "in:key",
                 wsp("gqkv"), "f32:scale" }, { tma_threads({ bm = bm }), 1, 1 }, smem)
    elseif gq_wg then
      local w = { bm = 64, bn = t.gq_bn, stages = t.gq_stages }
      -- gq_pair=1 (with gq_red, B > 1): two batch rows a block, one warpgroup
      -- each, their gS tiles summed before one reduction: half of gq_red's
      -- reductions. Twice the shared memory a block: fewer stages where
      -- gq_stages' would not fit.
      local pairs = gq_red and t.gq_pair == 1 and B > 1 and 2 or 1
      -- (gs_half: the inverse scales of the K blocks follow the stages.)
      local function gq_smem() return (wg_smem(w, true) - 1024) * pairs + 1024 + (gs_half and 4 * NJ or 0) end
      while pairs == 2 and w.stages > 3 and gq_smem() > smem_limit(arch) do w.stages = w.stages - 1 end
      -- Two pair blocks an SM where their shared memory allows (64-row blocks
      -- of three stages, gq_stages=3): then each thread must keep to 128
      -- registers (ptxas: 138 unasked, 128 asked, no spills).
      p.render("gemm_wg_batched_kernel.cu", {
        NAME = kname, COMMENT = "gQ^T = scale * k_h^T @ gS^T per (b, h), stored as gQ into grad_qkv[:, 0:1024]",
        M = D, N = T, K = T, LDA = D, LDB = gs_ld, LDC = QKV, BM = w.bm, BN = w.bn, STAGES = w.stages,
        KSPLIT = ceil_div(T, GEMM_BK) * GEMM_BK, INNER = H, SA1 = H * T * D, SA0 = T * D,
        SB1 = H * gs_rows * gs_ld, SB0 = gs_rows * gs_ld, SC1 = T * QKV, SC0 = D,
        B_T = gs_half and "unsigned short" or "float", NKB = NJ,
        B_RAW = not gs_round, RED_LD = gq_red and POS or 0, OUTER = ceil_div(B, pairs), RED_FROM = red_out0 and 1 or 0,
        PAIR = pairs, NB = B, MIN_BLOCKS = pairs == 2 and min_blocks(gq_smem(), arch) or 1,
      })
      if red_zeroed then p.wait("bias_zero") end -- the output it adds into is zeroed
      p.kernel("grad_query", { ceil_div(T, w.bn), 1, ceil_div(B, pairs) * H },
               { "in:key", gs, wsp("gqkv"), "f32:scale", gsinv, gq_red and "out:grad_edit_region_bias" or "i64:0" },
               { w.bm // 64 * 128 * pairs, 1, 1 }, gq_smem())
    else
      local c = GEMM_CONFIGS[3]
      p.render("gemm_tc_batched_kernel.cu", {
        NAME = kname, COMMENT = "gQ = scale * gS @ k_h per (b, h), into grad_qkv[:, 0:1024]",
        M = T, N = D, K = T, LDA = gs_ld, LDB = D, LDC = QKV, TA = false, TB = false, MODE = mode,
        BM = c.bm, BN = c.bn, BK = GEMM_BK, WARPS_M = c.warps_m, WARPS_N = c.warps_n, STAGES = c.stages,
        KSPLIT = ceil_div(T, GEMM_BK) * GEMM_BK, INNER = H,
        SA1 = H * T * gs_ld, SA0 = T * gs_ld, SB1 = H * T * D, SB0 = T * D, SC1 = T * QKV, SC0 = D,
      })
      p.kernel("grad_query", { 1, ceil_div(T, c.bm), B * H }, { gs, "in:key", wsp("gqkv"), "f32:scale" },
               { c.warps_m * c.warps_n * 32, 1, 1 }, gemm_smem(c, false, false))
    end
    p.signal("grad_qkv")
  end
  -- grad_qkv_bias in a pass of its own on lane 1, where grad_qkv_weight does not make it.
  local function qkv_bias_pass()
    p.on(1)
    p.wait("grad_qkv")
    p.colsum(wsp("gqkv"), "out:grad_qkv_bias", BT, QKV, "colpart_qkv")
  end
  if pair then -- on the chain, after gQ: grad_qkv is complete
    if not makes_sums(gqw, true) then qkv_bias_pass() end
    local g1, g2 = ghid, gqw
    if pair.swapped then g1, g2 = gqw, ghid end
    if pair_kv then -- the k and v parts beside gQ, as soon as the pass has written gK and gV
      p.on(2)
      p.wait("attention")
      p.wait("ghid_b")
      gemm_pair(g1, g2, "kv")
      p.signal("pair_kv")
    end
    p.on(0)
    p.wait("ghid_b")
    p.wait("gqw_b")
    if pair_kv then -- the q part, then both products finished
      local s1, s2 = gemm_pair(g1, g2, "q")
      p.wait("pair_kv")
      finish_product(g1, s1)
      finish_product(g2, s2)
    else
      gemm_pair(g1, g2)
    end
  else
    p.on(2)
    p.wait("grad_qkv")
    if not gemm(gqw) then qkv_bias_pass() end
    p.on(0)
    if ghid.choice.wg then p.wait("ghid_b") end
    gemm(ghid)
  end

  -- Two attention blocks per SM where two fit; the kernel then keeps to 128
  -- registers.
  local att_bytes = attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32
  p.render("attention_fused.cu", { B = B, T = T, BJ = t.bj, MODE = mode, PREFIX = p.prefix,
                                   STORE_GS = t.gs_store, GS_LD = gs_ld, KV_SPLIT = t.kv_split, P_STAGES = t.p_stages,
                                   MIN_BLOCKS = min_blocks(att_bytes, arch),
                                   SYNC_PASS = not att_wg, ROW_NORMS = gs_half and 1 or 0 })
  if att_wg then
    local values = { B = B, T = T, PREFIX = p.prefix, GS_LD = gs_ld, GS_ROWS = gs_rows, P_STAGES = t.p_stages,
                     P_TMA = att_tma and 1 or 0, GS_HALF = gs_half and 1 or 0,
                     GS_ROUND = gs_round and 1 or 0, WC = pass_wc and 1 or 0, OUT0 = red_out0 and 1 or 0,
                     ITEMS = items }
    p.render("attention_wg.cu", values)
    if t.att_kb ~= 2 then p.render("attention_wg_rows.cu", values) end
    if t.att_kb ~= 1 then p.render("attention_wg_keys.cu", values) end
    values.KB, values.PAIR_HEADS = t.att_kb, pair_heads or 0
    p.render("attention_wg_kernel.cu", values)
  end
  if t.gs_store == 1 then
    p.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = p.prefix, GS_LD = gs_ld, GS_HALF = gs_half and 1 or 0,
                                        IN_PLACE = gs_direct and 1 or 0 })
  end
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 1 })
  local plan = p.finish(arch, 16) -- cp.async reads 16 bytes at a time
  if any_wg then plan.compile_arch = (arch or "sm_90") .. "a" end
  -- The outputs (bits by the spec's order) that come out of float sums in
  -- no fixed order, whose last bits may differ between runs: the products
  -- whose K slices are added by atomics (splitk_red); with gs_store=0, gQ
  -- added into grad_qkv (so grad_hidden_states, grad_qkv_weight and
  -- grad_qkv_bias) and gS into grad_edit_region_bias; with gq_red, that last.
  local unordered = 0
  for _, x in ipairs { { ghid, 0 }, { gqw, 1 }, { gow, 3 } } do
    if adds_slices(x[1]) then unordered = unordered | 1 << x[2] end
  end
  if t.gs_store == 0 then unordered = unordered | 1 << 0 | 1 << 1 | 1 << 2 | 1 << 5 end
  if gq_red then unordered = unordered | 1 << 5 end
  plan.unordered_outputs = unordered
  return plan
end

local function plan_sequence(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local p = new_plan(shape, t)
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
      LDC = g.ldc, TA = g.ta, TB = g.tb, MODE = ({ [0] = 1, [1] = 0, [2] = 2 })[t.precision], INNER = g.inner or 1,
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

  p.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = p.prefix, GS_LD = T, GS_HALF = 0, IN_PLACE = 0 })
  p.render("grad_scores.cu", { PREFIX = p.prefix })
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 0 }) -- pointers 4-byte aligned
  return p.finish(arch, 4)
end

function M.plan(shape, t, arch)
  if t.fused == 1 then return plan_fused(shape, t, arch) end
  return plan_sequence(shape, t, arch)
end

return M
