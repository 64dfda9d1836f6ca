-- Problem 2's gQ in the fused plan (lua/edit_attention_plan.lua), from gS
-- after the attention pass: TMA-fed and persistent (templates/grad_query_tma.cu),
-- a batched wgmma product (gQ^T = k^T gS^T) or a batched mma.sync one. It
-- takes the plan's context (lua/edit_attention_fused.lua).
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"

local M = {}

local H, D, QKV, POS, SMS = limits.H, limits.D, limits.QKV, limits.POS, limits.SMS
local ceil_div, smem_limit, min_blocks = limits.ceil_div, limits.smem_limit, limits.min_blocks
local GEMM_BK, GEMM_CONFIGS = tiles.GEMM_BK, tiles.GEMM_CONFIGS
local gemm_smem, wg_smem, tma_threads = tiles.gemm_smem, tiles.wg_smem, tiles.tma_threads

function M.launch(f)
  local p, t, B, T, NJ, arch, mode, wsp = f.p, f.t, f.B, f.T, f.NJ, f.arch, f.mode, f.p.wsp
  local gs, gsinv, gs_ld, gs_rows, gs_half, gs_round = f.gs, f.gsinv, f.gs_ld, f.gs_rows, f.gs_half, f.gs_round
  local gq_tma, gq_wg, gq_red, red_out0 = f.gq_tma, f.gq_wg, f.gq_red, f.red_out0
  -- gQ [b,h] = scale * gS [T,T] @ k [T,64], straight into grad_qkv[:, h*64 : h*64+64].
  local kname = p.prefix .. "_grad_query"
  -- gq_pair=1 (with gq_red, B > 1): two batch rows a block of either wgmma
  -- kernel, one warpgroup each, their gS tiles summed before one reduction:
  -- half of gq_red's reductions. Twice the shared memory a block: fewer
  -- stages where gq_stages' would not fit.
  local pairs = gq_red and t.gq_pair == 1 and B > 1 and 2 or 1
  if f.red_zeroed then p.wait("bias_zero") end -- gq_red=1: the output gQ adds into is zeroed
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
  elseif f.gs_f16 then
    -- gS in fp16, gq_bn queries a block of a warpgroup a matrix (templates/grad_query_wg16.cu); gq_red's
    -- bias sums as in the TF32 kernel below. A stage: per matrix gS's tile and the keys' 64 x 68 floats.
    local bn, stages = t.gq_bn, t.gq_stages
    local stage_bytes = pairs * (bn * 128 + 64 * 68 * 4)
    while stages > 3 and stages * stage_bytes + 1024 > smem_limit(arch) do stages = stages - 1 end
    local outer = ceil_div(B, pairs)
    p.render("grad_query_wg16.cu", { NAME = kname, T = T, LDB = gs_ld, LDC = QKV, GS_ROWS = gs_rows, BN = bn,
                                     STAGES = stages, RED_LD = gq_red and POS or 0, RED_FROM = red_out0 and 1 or 0,
                                     PAIR = pairs, OUTER = outer, NB = B })
    p.kernel("grad_query", { ceil_div(T, bn), 1, gq_red and outer * H or B * H },
             { "in:key", gs, wsp("gqkv"), "f32:scale", gq_red and "out:grad_edit_region_bias" or "null" },
             { 128 * pairs, 1, 1 }, stages * stage_bytes + 1024)
  elseif gq_wg then
    local w = { bm = 64, bn = t.gq_bn, stages = t.gq_stages }
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
    p.kernel("grad_query", { ceil_div(T, w.bn), 1, ceil_div(B, pairs) * H },
             { "in:key", gs, wsp("gqkv"), "f32:scale", gsinv, gq_red and "out:grad_edit_region_bias" or "null" },
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
end

return M
