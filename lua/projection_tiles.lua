-- The projection products' tiles: for each product's M, N, K, the tile
-- configuration and split of K with the least modelled time, on mma.sync
-- (templates/gemm_tc.cu), wgmma (templates/gemm_wg.cu) or TMA-fed wgmma
-- (templates/gemm_tma.cu, TF32 or fp16), and for two products in one launch
-- (templates/gemm_tma_pair_kernel.cu). The rates are the H200's, measured
-- (fp16's TMA rates are estimates until measured).
local limits = require "edit_attention_limits"
local ceil_div, SMS = limits.ceil_div, limits.SMS

local M = {}

-- Tensor-core product tiles: block tile, warps, pipeline depth, the blocks
-- expected to share an SM (registers and shared memory allow) and the FLOP/s
-- per SM the model gives the tile (1.5e12 scaled by its measured efficiency).
-- Four warps of 64 x 64 outputs each read half the shared memory per MMA that
-- 64 x 32 warp tiles do (eight warps of those measured ~88 TFLOP/s on the H200).
local GEMM_CONFIGS = {
  { bm = 128, bn = 128, warps_m = 2, warps_n = 2, stages = 3, per_sm = 2, rate = 1.5e12 },
  { bm = 128, bn = 64, warps_m = 2, warps_n = 2, stages = 4, per_sm = 2, rate = 1.2e12 },
  { bm = 64, bn = 64, warps_m = 2, warps_n = 2, stages = 4, per_sm = 3, rate = 0.9e12 },
}
local GEMM_BK = 32
M.GEMM_CONFIGS, M.GEMM_BK = GEMM_CONFIGS, GEMM_BK
local SPLITS = { 1, 2, 3, 4, 6, 8, 12, 16 }

function M.gemm_smem(c, ta, tb)
  local a = ta and GEMM_BK * (c.bm + 8) or c.bm * (GEMM_BK + 4)
  local b = tb and c.bn * (GEMM_BK + 4) or GEMM_BK * (c.bn + 8)
  return c.stages * (a + b) * 4
end

-- K in s slices of whole k tiles (bk k each, GEMM_BK where nil): the slice
-- length, or nil where s slices of it do not come out as s (or, split, are
-- shorter than four k tiles).
local function k_slice(k, s, bk)
  bk = bk or GEMM_BK
  local kslice = ceil_div(ceil_div(k, s), bk) * bk
  if ceil_div(k, kslice) == s and (s == 1 or kslice >= 4 * bk) then return kslice end
end
-- What a K split of s slices adds: the partial products written and read
-- back, the output written, and the reduce's launch; or (red: the slices
-- added into the output by float atomics, splitk_red=2, its zeros written
-- off the chain) the adds at L2, at a rate guessed until measured.
local RED_RATE = 4e12
local function split_cost(m, n, s, red)
  if s == 1 then return 0 end
  if red then return s * m * n * 4 / RED_RATE end
  return (2 * s + 1) * m * n * 4 / 3e12 + 3e-6
end

-- The tiles and K split of one product with the least modelled time among
-- `configs` whose shared memory (smem(c) bytes) fits `limit`: waves of blocks,
-- each SM running `per_sm` of them at `rate` FLOP/s together, plus the traffic
-- of the partial products when K is split (split_cost's, red as there).
local function choose(configs, smem, m, n, k, limit, red, bk)
  local best
  for _, c in ipairs(configs) do
    for _, s in ipairs(limit and smem(c) > limit and {} or SPLITS) do
      local kslice = k_slice(k, s, bk)
      if kslice then
        local blocks = ceil_div(m, c.bm) * ceil_div(n, c.bn) * s
        local waves = ceil_div(blocks, SMS * c.per_sm)
        local time = waves * 2 * c.bm * c.bn * kslice / (c.rate / c.per_sm) + split_cost(m, n, s, red)
        if not best or time < best.time then best = { config = c, splits = s, kslice = kslice, time = time } end
      end
    end
  end
  return best
end

-- mma.sync tiles for op(A) [m, k] @ op(B) [k, n] (TA, TB: stored transposed).
function M.choose_gemm(m, n, k, ta, tb, limit)
  return choose(GEMM_CONFIGS, function(c) return M.gemm_smem(c, ta, tb) end, m, n, k, limit, nil)
end

-- wgmma product tiles (templates/gemm_wg.cu): BM/64 warpgroups, BN columns,
-- STAGES k tiles of 32 in shared memory. `rate`: FLOP/s per SM in the units
-- of choose_gemm's model, from bench/gemm_lab.cu on the H200 (B=64,T=128 and
-- B=32,T=773 products): 128x256 reached 229-283 TFLOP/s, the others 193-236,
-- where the mma.sync 128x128 tile the model rates at 198 reached 135-185.
local WG_CONFIGS = {
  { bm = 128, bn = 256, stages = 4, per_sm = 1, rate = 2.4e12 },
  { bm = 64, bn = 256, stages = 5, per_sm = 1, rate = 1.95e12 },
  { bm = 128, bn = 128, stages = 6, per_sm = 1, rate = 1.95e12 },
  { bm = 256, bn = 128, stages = 4, per_sm = 1, rate = 1.95e12 },
}
function M.wg_smem(c, ta)
  local a = ta and GEMM_BK * (c.bm + 8) or c.bm * (GEMM_BK + 4)
  return c.stages * (a + c.bn * GEMM_BK) * 4 + 1024 -- 1 KiB to align the swizzled tiles
end

-- wgmma tiles for op(A) [m, k] @ B [k, n], B read transposed.
function M.choose_wg(m, n, k, ta, limit)
  local best = choose(WG_CONFIGS, function(c) return M.wg_smem(c, ta) end, m, n, k, limit, nil)
  if best then best.wg = true end
  return best
end

-- TMA-fed wgmma tiles (templates/gemm_tma.cu): a producer warpgroup and BM/64
-- consumer warpgroups, STAGES k tiles of 32, RAW raw tiles of a TA operand.
-- `rate` from bench/gemm_lab.cu on the H200 (docs/benchmarks.md).
-- 128x256 reached 256-324 TFLOP/s there (the wgmma tiles above: 227-283),
-- 128x128 165-194.
local TMA_CONFIGS = {
  { bm = 128, bn = 256, stages = 4, raw = 2, per_sm = 1, rate = 2.7e12 },
  { bm = 128, bn = 128, stages = 6, raw = 2, per_sm = 1, rate = 1.6e12 },
}
-- Threads of a TMA-fed product's block: tc::gemm_tma_threads (a producer
-- warpgroup and BM/64 consumer warpgroups).
function M.tma_threads(c) return c.bm // 64 * 128 + 128 end
-- fp16 operands (templates/gemm_tma.cu, precision fp16): k tiles of 64,
-- fp16 tiles of A and B a stage (the bytes of TF32's 32-k tiles), and RAW
-- raw fp32 k tiles of A (TA or not), which the producer converts. `rate`:
-- TF32's scaled by 1.4, a guess until measured: fp16 wgmma's peak is twice
-- TF32's, but A's fp32 reads and its conversion stay as they were.
local TMA_F16_CONFIGS = {
  { bm = 128, bn = 256, stages = 3, raw = 2, per_sm = 1, rate = 3.8e12, f16 = true },
  { bm = 128, bn = 128, stages = 4, raw = 2, per_sm = 1, rate = 2.2e12, f16 = true },
}
M.F16_BK = 64
-- rowdot (gA's row dots, gemm_tma's ROWDOT_T): a barrier a head, and a
-- head of attention_output (bm x 64 floats) beyond the stages. An fp16
-- config (c.f16): stages of fp16 tiles and raw fp32 tiles of 64 k, which
-- take the row dots' first heads (no region of their own).
function M.tma_smem(c, ta, rowdot)
  if c.f16 then
    return (c.stages * (c.bm + c.bn) * 32 + c.raw * c.bm * 64) * 4 + (3 * c.stages + c.raw) * 8 + 1024 +
           (rowdot and c.bn // 64 * 8 or 0)
  end
  return (c.stages * (c.bm + c.bn) + (ta and c.raw * c.bm or 0)) * GEMM_BK * 4 + (3 * c.stages + c.raw) * 8 + 1024 +
         (rowdot and c.bm * 64 * 4 + c.bn // 64 * 8 or 0)
end
-- f16: fp16 operands (TMA_F16_CONFIGS, k tiles of 64).
function M.choose_tma(m, n, k, ta, limit, red, f16)
  local best = choose(f16 and TMA_F16_CONFIGS or TMA_CONFIGS, function(c) return M.tma_smem(c, ta) end, m, n, k,
                      limit, red, f16 and M.F16_BK or nil)
  if best then best.wg, best.tma = true, true end
  return best
end

-- grad_hidden and grad_qkv_weight in one launch (pair > 0,
-- templates/gemm_tma_pair_kernel.cu): the tiles and K splits of both with the
-- least modelled time for the two together. Blocks of the product with the
-- longer ones go first; each block takes the SM that frees first (one block
-- an SM), and takes PAIR_BLOCK_SETUP beyond its tile's work (its prologue and
-- its tile's stores); split products add their reduce (split_cost), as
-- choose() does. wide_only (pair=2): 128x256 tiles only. Returns the choices of g1
-- and g2 (swapped: g2's blocks go first), or nil where none fits. splits1:
-- g1's K splits to choose from (pair_kv: 3, at the q | k | v boundaries).
-- dsm (pair_dsm=1): a split product's slices are added across the cluster of
-- their tile's blocks (gemm_tma's CLUSTER): no reduce, but each block longer
-- by parking its tile in shared memory, two cluster barriers and reading
-- (s - 1) / s of a tile from the others (DSMEM_RATE a block, a guess until
-- measured); where both products are split, by the same s (one cluster size a
-- launch). Such a choice has `cluster` set. red: the splits costed as added
-- by float atomics (split_cost). f16: fp16 operands (TMA_F16_CONFIGS).
local PAIR_BLOCK_SETUP, PAIR_SPLITS, PAIR_MAX_BLOCKS = 3e-6, { 1, 2, 3, 4 }, 8 * SMS
local DSMEM_SETUP, DSMEM_RATE = 1e-6, 60e9
local function pair_makespan(n1, t1, n2, t2)
  -- The SMs as groups of equal load, least first: each step gives the least
  -- loaded group (or as many of its SMs as blocks are left) one block each.
  local groups = { { load = 0, count = SMS } }
  local function place(n, t)
    while n > 0 do
      local g = table.remove(groups, 1)
      local k = math.min(n, g.count)
      n = n - k
      if g.count > k then table.insert(groups, 1, { load = g.load, count = g.count - k }) end
      local load, i = g.load + t, 1
      while groups[i] and groups[i].load < load do i = i + 1 end
      if groups[i] and groups[i].load == load then groups[i].count = groups[i].count + k
      else table.insert(groups, i, { load = load, count = k }) end
    end
  end
  place(n1, t1)
  place(n2, t2)
  return groups[#groups].load
end
M.makespan = pair_makespan -- also the attention pass's blocks of two sizes (att_kb=3)
function M.choose_pair(g1, g2, limit, wide_only, splits1, dsm, red, f16)
  local best
  local function options(g, splits)
    local out = {}
    for _, c in ipairs(f16 and TMA_F16_CONFIGS or TMA_CONFIGS) do
      if not (limit and M.tma_smem(c, g.ta) > limit) and not (wide_only and c.bn ~= 256) then
        for _, s in ipairs(splits or PAIR_SPLITS) do
          local kslice = k_slice(g.k, s, f16 and M.F16_BK or nil)
          if kslice then
            local cluster = dsm and s > 1
            local o = { config = c, splits = s, kslice = kslice, wg = true, tma = true, cluster = cluster or nil,
                        blocks = ceil_div(g.m, c.bm) * ceil_div(g.n, c.bn) * s,
                        block_time = PAIR_BLOCK_SETUP + 2 * c.bm * c.bn * kslice / c.rate,
                        reduce = split_cost(g.m, g.n, s, red), smem = M.tma_smem(c, g.ta) }
            if cluster then
              o.reduce = 0
              o.block_time = o.block_time + DSMEM_SETUP + c.bm * c.bn * 4 * (s - 1) / s / DSMEM_RATE
            end
            out[#out + 1] = o
          end
        end
      end
    end
    return out
  end
  local second = options(g2)
  for _, a in ipairs(options(g1, splits1)) do
    for _, b in ipairs(second) do
      if a.blocks + b.blocks <= PAIR_MAX_BLOCKS and not (a.cluster and b.cluster and a.splits ~= b.splits) then
        local x, y = a, b
        if y.block_time > x.block_time then x, y = y, x end
        local time = pair_makespan(x.blocks, x.block_time, y.blocks, y.block_time) + a.reduce + b.reduce
        if not best or time < best.time then best = { time = time, a, b, swapped = x ~= a } end
      end
    end
  end
  return best
end

return M
