-- Problem 2's projection products launched (lua/edit_attention_plan.lua):
-- each in its own launch on mma.sync, wgmma or TMA-fed wgmma, or two
-- TMA-fed ones in one; B transposed first where wgmma reads it so, the
-- reduce of split K slices and the column sums' last step after. Each
-- function takes the plan's context (lua/edit_attention_fused.lua).
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"

local M = {}

local H, HID, ceil_div = limits.H, limits.HID, limits.ceil_div
local GEMM_BK = tiles.GEMM_BK
local gemm_smem, wg_smem, tma_smem, tma_threads = tiles.gemm_smem, tiles.wg_smem, tiles.tma_smem, tiles.tma_threads

-- A wgmma product's B [K, N] -> its region [N, kp], zero-padded and
-- rounded (templates/transpose.cu); nothing for an mma.sync product.
-- Whether it launched one: B is transposed for wgmma only, and not where read as it lies.
local function transpose_b(f, g)
  local p, wsp, bind = f.p, f.p.wsp, f.p.bind
  if not g.choice.wg or g.b_direct then return false end
  p.kernel(g.choice.config.f16 and "transpose_f16" or "transpose", { ceil_div(g.kp, 64), ceil_div(g.n, 64), 1 },
           { bind(g.b), wsp("tB_" .. g.name), "i64:" .. g.k, "i32:" .. g.n, "i64:" .. g.kp })
  return true
end
-- A TMA-fed product's template values (templates/gemm_tma.cu) and its
-- arguments (A's map, B's map, output, column sums), and whether it makes
-- its A's column sums.
local function tma_product(f, g, paired)
  local wsp, bind = f.p.wsp, f.p.bind
  local c, split = g.choice.config, f.apart(g)
  local sums = f.makes_sums(g, paired)
  local values = { M = g.m, N = g.n, K = g.k, LDC = g.ldc, TA = g.ta, BM = c.bm, BN = c.bn, STAGES = c.stages,
                   RAW = c.raw, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits, COLSUM = sums and true or false,
                   A_TRUNC = g.a == "ws:gqkv" and not g.ta and not c.f16, -- grad_hidden: A to the tensor cores as stored
                   B_ROUND = g.b_direct or false, C_T = g.c_t or false, SPLIT_LD = g.c_t and g.m or g.n,
                   CLUSTER = g.choice.cluster and g.choice.splits or 1, RED = f.adds_slices(g), CLUSTER_DIMS = "",
                   OPERANDS = c.f16 and "f16" or "tf32" }
  -- Tensor maps "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:pointer" (runtime/launch_edit_attention.c).
  local map_a = g.ta and string.format("tmap:%d:%d:%d:%d:%d:0:", g.k, g.m, g.lda, GEMM_BK, c.bm)
                or string.format("tmap:%d:%d:%d:%d:%d:1:", g.m, g.k, g.lda, c.bm, GEMM_BK)
  -- fp16 B (OPERANDS f16): each pair of halves one float to the TMA, a box of 32 of them 64 k.
  local bcols = c.f16 and g.kp // 2 or g.kp
  local map_b = g.b_direct and string.format("tmap:%d:%d:%d:%d:%d:1:", g.n, g.k, g.ldb, c.bn, GEMM_BK) .. bind(g.b)
                or string.format("tmap:%d:%d:%d:%d:%d:1:", g.n, bcols, bcols, c.bn, 32) .. wsp("tB_" .. g.name)
  local out = split and wsp("splitk_" .. g.name) or bind(g.c)
  local colsum = not sums and "null" or g.choice.splits > 1 and wsp(g.bias_part) or g.bias -- a row per slice
  return values, { map_a .. bind(g.a), map_b, out, colsum }, sums
end
-- After a product on its lane: the reduce of its K slices, its column sums' last step.
local function finish_product(f, g, sums)
  local p, wsp, bind = f.p, f.p.wsp, f.p.bind
  local kname, split = p.prefix .. "_" .. g.name, f.apart(g)
  if split and g.rowdot then -- gA: the row dots come with the reduce (no rowdot launch)
    p.render("splitk_reduce_rowdot_kernel.cu", { NAME = kname .. "_reduce", T = f.T, BT = f.BT,
                                                 SPLITS = g.choice.splits, NORMS = f.gs_half and 1 or 0 })
    p.kernel(g.name .. "_reduce", { ceil_div(f.BT * H * 32, 256), 1, 1 },
             { wsp("splitk_" .. g.name), bind(g.c), "in:attention_output", wsp("rowdot"), f.gan })
  elseif split then
    p.render("splitk_reduce_kernel.cu", {
      NAME = kname .. "_reduce", GEMM = g.name, NELEM = g.m * g.n, SPLITS = g.choice.splits })
    p.kernel(g.name .. "_reduce", { ceil_div(g.m * g.n // 4, 256), 1, 1 },
             { wsp("splitk_" .. g.name), bind(g.c), "f32:one" })
  end
  if sums and g.choice.splits > 1 then p.colsum_final(g.bias_part, g.bias, g.m, g.choice.splits) end
end
-- The zeros a product adding its K slices (adds_slices) adds them into.
local function zero_output(f, g)
  local p, bind = f.p, f.p.bind
  if f.adds_slices(g) then
    p.kernel("zero", { ceil_div(g.m * g.n // 4, 256), 1, 1 },
             { bind(g.c), "i64:" .. g.m, "i32:" .. g.n, "i64:" .. g.ldc })
  end
end
-- One product in its own launch; true where it made its column sums.
local function gemm(f, g)
  local p, wsp, bind = f.p, f.p.wsp, f.p.bind
  local c, kname = g.choice.config, p.prefix .. "_" .. g.name
  local grid = { ceil_div(g.n, c.bn), ceil_div(g.m, c.bm), g.choice.splits }
  local out = f.apart(g) and wsp("splitk_" .. g.name) or bind(g.c)
  local sums = false
  if g.choice.tma then
    local values, args
    values, args, sums = tma_product(f, g)
    values.NAME, values.COMMENT = kname, g.comment .. (g.b_direct and "" or "; B transposed")
    if f.makes_rowdots(g) then -- attention_output's 128-row boxes of 32 columns, swizzled
      values.T, values.RAW = f.T, c.f16 and c.raw or 0 -- TF32's gA reads A as stored: no raw tiles
      p.render("gemm_tma_rowdot_kernel.cu", values)
      p.kernel(g.name, grid, { args[1], args[2], args[3], "f32:one",
                               string.format("tmap:%d:%d:%d:%d:%d:1:in:attention_output", f.BT, HID, HID, c.bm, GEMM_BK),
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
      TA = g.ta, TB = g.tb, MODE = f.mode, BM = c.bm, BN = c.bn, BK = GEMM_BK, WARPS_M = c.warps_m,
      WARPS_N = c.warps_n, STAGES = c.stages, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits,
    }
    p.render("gemm_tc_kernel.cu", values)
    p.kernel(g.name, grid, { bind(g.a), bind(g.b), out, "f32:one" }, { c.warps_m * c.warps_n * 32, 1, 1 },
             gemm_smem(c, g.ta, g.tb))
  end
  finish_product(f, g, sums)
  return sums
end
-- Two TMA-fed products in one launch (pair > 0), g1's blocks first, then
-- each one's reduce and sums on the lane; returns whether each made its sums.
-- part (pair_kv): nil for all of both; "kv" or "q" for the blocks of that
-- part (the caller then finishes the products after both parts).
local function gemm_pair(f, g1, g2, part)
  local p = f.p
  local name = g1.name .. "_and_" .. g2.name .. (part and "_" .. part or "")
  local v1, a1, s1 = tma_product(f, g1, true)
  local v2, a2, s2 = tma_product(f, g2, true)
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
    finish_product(f, g1, s1)
    finish_product(f, g2, s2)
  end
  return s1, s2
end

M.transpose_b, M.zero_output, M.finish_product = transpose_b, zero_output, finish_product
M.gemm, M.gemm_pair = gemm, gemm_pair

return M
