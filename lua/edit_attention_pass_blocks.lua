-- How problem 2's attention pass on wgmma (templates/attention_wg_kernel.cu)
-- divides its work among blocks where att_kb asks the model: the blocks of
-- att_kb=2 and 3, and the items a block takes one after another.
local limits = require "edit_attention_limits"
local tiles = require "projection_tiles"

local M = {}

local H, ceil_div = limits.H, limits.ceil_div


-- att_kb=3: the attention pass's blocks of two key blocks (a step of 32
-- rows: one unit of time) for the first pair_heads (b, h), and of one key
-- block (a step of 64 rows, each warpgroup staging its own: ROWS_STEP units,
-- att_kb=1's passes taking 1.25-1.49x att_kb=2's time a step where measured)
-- for those heads' odd last key block and every key
-- block of the others; each block also BLOCK_SETUP for its prologue.
local ROWS_STEP, BLOCK_SETUP = 1.33, 1
function M.mixed_blocks(B, T, pair_heads)
  local nj = ceil_div(T, 64)
  return pair_heads * (nj // 2 + nj % 2) + (B * H - pair_heads) * nj
end
-- The pass's items where a block takes two key blocks (att_kb=2): pairs of
-- 64-key blocks, for every (b, h); its grid is these over the items a block.
function M.pair_items(B, T)
  return ceil_div(ceil_div(T, 64), 2) * B * H
end
-- att_items=0: the items a block of two key blocks takes one after another
-- with the least modelled time, in steps of 32 rows: waves of blocks, each
-- ITEM_SETUP (the fixed cost that the pass's times on the H200 fit at one
-- item a block, about three steps) and per item its steps, and beyond the
-- first item ITEM_SWITCH (its sums stored, v rounded; a guess). The fit
-- overstates what a next item hides (docs/experiments.md, att_items).
local ITEM_SETUP, ITEM_SWITCH = 3, 0.7
function M.items(B, T)
  local steps, ni = ceil_div(T, 32), M.pair_items(B, T)
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
function M.pair_heads(B, T)
  local nj = ceil_div(T, 64)
  local pair_time, rows_time = BLOCK_SETUP + ceil_div(T, 32), BLOCK_SETUP + ROWS_STEP * ceil_div(T, 64)
  local best, best_time
  for heads = B * H, 0, -1 do
    local pairs = heads * (nj // 2)
    local time = tiles.makespan(pairs, pair_time, M.mixed_blocks(B, T, heads) - pairs, rows_time)
    if not best_time or time < best_time - 1e-9 then best, best_time = heads, time end
  end
  return best
end

return M
