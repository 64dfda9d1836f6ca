-- Problem 1, masked softmax with attention dropout, backward: the tile choices
-- for a shape and the rendered kernel (templates/softmax_dropout_bwd.cu).
--
-- The kernel is memory-bound: each row of T elements is read once and written
-- once. The choices trade loads in flight per thread against registers:
--   vec              elements per load: the widest of 4, 2, 1 that divides T
--                    (rows start at row*T, so T's alignment bounds the width)
--   threads_per_row  threads sharing a row (power of two, up to 1024)
--   block            threads per block
--   in_registers     1: the row stays in registers between the sum and the
--                    write; 0: two passes over the row (very long rows)
--   head_fastest     1: the heads of one (b, i) are neighbours in the grid, so
--                    the shared mask row is read once from DRAM
--   unroll           vectors in flight per thread in two-pass mode
--   split            1 when T % 4 != 0: each row as up to 3 scalars, 16-byte
--                    vectors from its first aligned element, up to 3 scalars
--                    (vec is then 4); 0: every load is vec wide
--   streaming        1: the big tensors are loaded and stored with .cs
--                    (evict first: each byte is touched once); 0: default
--                    caching, which explore measures 7-10% faster on the
--                    two largest public workloads
local render = require "render"

local M = {}

local MAX_TPR = 1024
local REG_ELEMS = 32 -- floats of a row per thread that stay in registers

local function pow2_at_least(n)
  local p = 1
  while p < n do p = p * 2 end
  return p
end

local function vec_for(T)
  if T % 4 == 0 then return 4 elseif T % 2 == 0 then return 2 end
  return 1
end

local function ceil_div(a, b) return (a + b - 1) // b end

-- The heuristic, fitted to `attnbwd explore` on an H200 (docs/benchmarks.md):
-- about two 16-byte loads per tensor per thread (8 floats) when T allows
-- vec=4, about 8 scalar elements per thread otherwise: many threads with
-- little each beat fewer threads with long unrolled rows. Rows in memory
-- order, except vec=4 rows, where neighbouring heads share the mask in L2.
function M.heuristic(shape)
  local T = shape.seq_len
  local vec = vec_for(T)
  -- Rows of 16 or more elements that T % 4 leaves unaligned still get 16-byte
  -- loads, split around their first aligned element.
  local split = (vec < 4 and T >= 16) and 1 or 0
  if split == 1 then vec = 4 end
  local nvec = T // vec
  local per_thread = vec == 4 and 2 or (vec == 2 and 4 or 8)
  local tpr = math.min(MAX_TPR, pow2_at_least(ceil_div(nvec, per_thread)))
  if split == 1 then tpr = math.max(tpr, 4) end -- lanes 0..2 carry the up to 3 edge scalars
  local in_registers = ceil_div(nvec, tpr) * vec <= REG_ELEMS and 1 or 0
  if in_registers == 0 then
    tpr = 512
    if split == 1 then split, vec = 0, vec_for(T) end -- two passes keep plain loads
  end
  return {
    vec = vec,
    threads_per_row = tpr,
    block = math.max(256, tpr),
    in_registers = in_registers,
    head_fastest = (T % 4 == 0 and shape.heads > 1) and 1 or 0,
    unroll = 4,
    split = split,
    streaming = 0,
  }
end

-- nil when the tiles can build a correct kernel for the shape, else why not.
function M.validate(shape, t)
  local T = shape.seq_len
  local function pow2(n) return math.type(n) == "integer" and n > 0 and n & (n - 1) == 0 end
  if not (t.vec == 1 or t.vec == 2 or t.vec == 4) then return "vec must be 1, 2 or 4" end
  if t.split ~= 0 and t.split ~= 1 then return "split must be 0 or 1" end
  if t.split == 1 then
    if t.vec ~= 4 or t.in_registers ~= 1 then return "split=1 needs vec=4 and in_registers=1" end
    if T % 4 == 0 then return "split=1 is for T % 4 != 0" end
    if T < 4 then return "split=1 needs T >= 4" end
    if t.threads_per_row < 4 then return "split=1 needs threads_per_row >= 4 (for the edge scalars)" end
  elseif T % t.vec ~= 0 then
    return string.format("vec=%d does not divide T=%d", t.vec, T)
  end
  if not pow2(t.threads_per_row) or t.threads_per_row > MAX_TPR then
    return "threads_per_row must be a power of two <= 1024"
  end
  if not pow2(t.block) or t.block < 32 or t.block > 1024 or t.block < t.threads_per_row then
    return "block must be a power of two in [32, 1024] and >= threads_per_row"
  end
  if t.in_registers ~= 0 and t.in_registers ~= 1 then return "in_registers must be 0 or 1" end
  if t.in_registers == 1 and ceil_div(T // t.vec, t.threads_per_row) * t.vec > 4 * REG_ELEMS then
    return "in_registers=1 would hold more than 128 floats per thread"
  end
  if t.head_fastest ~= 0 and t.head_fastest ~= 1 then return "head_fastest must be 0 or 1" end
  if not (t.unroll == 1 or t.unroll == 2 or t.unroll == 4 or t.unroll == 8) then
    return "unroll must be 1, 2, 4 or 8"
  end
  if t.streaming ~= 0 and t.streaming ~= 1 then return "streaming must be 0 or 1" end
  return nil
end

-- Candidate tiles for exploration: the heuristic first, then its neighbours
-- (half and twice the threads per row, two block sizes, both row orders),
-- every one valid.
function M.candidates(shape)
  local base = M.heuristic(shape)
  local seen, out = {}, {}
  local function add(t)
    if M.validate(shape, t) then return end
    local key = render.tiles_string(t)
    if not seen[key] then seen[key] = true; out[#out + 1] = t end
  end
  add(base)
  -- The base with f times its threads per row, the given block, row order and cache policy.
  local function neighbour(f, block, hf, streaming)
    local tpr = math.max(1, math.floor(base.threads_per_row * f))
    local t = { vec = base.vec, threads_per_row = tpr, block = math.max(block, tpr),
                in_registers = base.in_registers, head_fastest = hf, unroll = base.unroll,
                split = base.split, streaming = streaming }
    if ceil_div(shape.seq_len // base.vec, tpr) * base.vec > REG_ELEMS then t.in_registers = 0 end
    return t
  end
  for _, f in ipairs({ 1, 0.5, 2 }) do
    for _, block in ipairs({ 256, 512 }) do
      for _, hf in ipairs({ base.head_fastest, 1 - base.head_fastest }) do
        add(neighbour(f, block, hf, base.streaming))
      end
    end
  end
  for _, f in ipairs({ 1, 0.5, 2 }) do -- the other cache policy, at the base's block and row order
    add(neighbour(f, base.block, base.head_fastest, 1 - base.streaming))
  end
  if base.split == 1 then -- the plain kernel of scalar (or pair) loads, for comparison
    local vec = vec_for(shape.seq_len)
    local tpr = math.min(MAX_TPR, pow2_at_least(ceil_div(shape.seq_len // vec, 8 // vec)))
    add({ vec = vec, threads_per_row = tpr, block = math.max(256, tpr), in_registers = 1, head_fastest = 0,
          unroll = 4, split = 0, streaming = base.streaming })
  end
  return out
end

function M.plan(shape, t, arch)
  local B, H, T = shape.batch, shape.heads, shape.seq_len
  local rows = B * H * T
  local rows_per_block = t.block // t.threads_per_row
  local name = string.format("softmax_dropout_bwd_B%d_H%d_T%d_d%d_v%d%s_r%d_b%d_%s%s_u%d%s", B, H, T,
    shape.dropout, t.vec, t.split == 1 and "s" or "", t.threads_per_row, t.block,
    t.in_registers == 1 and "reg" or "two", t.head_fastest == 1 and "_hf" or "", t.unroll,
    t.streaming == 1 and "" or "_cached")
  local source = render.render("softmax_dropout_bwd.cu", {
    B = B, H = H, T = T, VEC = t.vec, THREADS_PER_ROW = t.threads_per_row, BLOCK = t.block,
    DROPOUT = shape.dropout, IN_REGISTERS = t.in_registers, HEAD_FASTEST = t.head_fastest,
    UNROLL = t.unroll, SPLIT = t.split, STREAMING = t.streaming, KERNEL_NAME = name,
  })
  return {
    name = name,
    source = "// attnbwd " .. arch .. " " .. render.tiles_string(t) .. "\n" .. source,
    grid = { ceil_div(rows, rows_per_block), 1, 1 },
    block = { t.block, 1, 1 },
    shared_bytes = 0,
    -- Byte alignment the fp32 pointers need (the masks need a quarter of it).
    align = (t.vec == 4) and 16 or 4 * t.vec,
  }
end

return M
