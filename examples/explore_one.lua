-- Explore the tiles of one shape with the attnbwd Lua API (docs/lua-api.md):
--   build/attnbwd lua examples/explore_one.lua 2,16,541,0.1
-- Without a GPU (add --arch sm_90) it still lists and compiles every
-- candidate; with one it also checks each against the fp64 reference and
-- times it, and prints the fastest.
local attnbwd = require "attnbwd"

local spec = arg[1] or "2,16,541,0.1"
local b, h, t, p = spec:match("^(%d+),(%d+),(%d+),?([%d.]*)$")
assert(b, "usage: attnbwd lua examples/explore_one.lua B,H,T[,p]")
p = tonumber(p) or 0
local case = { problem = "softmax_dropout_bwd", batch = tonumber(b), heads = tonumber(h),
               seq_len = tonumber(t), p_dropout = p, name = spec }

local info = attnbwd.info()
print(string.format("attnbwd %s, arch %s, device %s", info.version, info.arch,
                    info.device ~= "" and info.device or "none"))
local best
for i, tiles in ipairs(attnbwd.candidates(case)) do
  local k = attnbwd.compile(case, tiles)
  local line = string.format("%2d %-72s %6d bytes (%s)", i, tiles, k.cubin_bytes, k.origin)
  if info.gpu then
    local r, err = attnbwd.try_check(case, tiles)
    if r and r.pass then
      local us = attnbwd.time(case, tiles, 20)
      line = line .. string.format("  %8.2f us", us)
      if not best or us < best.us then best = { tiles = tiles, us = us } end
    else
      line = line .. "  rejected: " .. (err or r.message)
    end
  end
  print(line)
end
if best then
  print(string.format("fastest: %s (%.2f us); tuning key %q", best.tiles, best.us, attnbwd.tuning_key(case)))
elseif not info.gpu then
  print("no GPU (" .. info.why_no_gpu .. "): compiled only")
end
