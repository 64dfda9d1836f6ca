-- explore's combination step (lua/explore.lua) on a stand-in for the
-- attnbwd module, no GPU: four tile keys, each single choice worth a fixed
-- time; the step must lay the winners over the best, skip a winner that
-- changes the best's key another way, leave out one inside the margin, and
-- reject a combination whose check fails. Run by tests/test_cli.c
-- (`attnbwd lua --arch sm_90 tests/explore_combine.lua`); any failed check raises.
local H = "a=0 b=0 c=0 d=0"
local singles = { "a=1 b=0 c=0 d=0", "a=0 b=1 c=0 d=0", "a=0 b=0 c=1 d=0", "a=2 b=0 c=0 d=0", "a=0 b=0 c=0 d=1" }
-- us: 100, less 5 for a=1, 4 for a=2, 3 for b=1, 0.5 for d=1 (inside 1%), more 2 for c=1
local function time_of(tiles)
  local t = {}
  for k, v in tiles:gmatch("(%w+)=(%d+)") do t[k] = tonumber(v) end
  return 100 - (t.a == 1 and 5 or 0) - (t.a == 2 and 4 or 0) - (t.b == 1 and 3 or 0) + (t.c == 1 and 2 or 0) -
         (t.d == 1 and 0.5 or 0)
end

local function fake(failing) -- the attnbwd functions explore_case calls; `failing`: a check that fails
  local seen = {}
  return {
    try_candidates = function() return { H, table.unpack(singles) } end,
    tuning_key = function() return "key" end,
    try_check = function(_, tiles)
      seen[#seen + 1] = tiles
      return { pass = tiles ~= failing, message = "check failed" }
    end,
    try_time = function(_, tiles) return time_of(tiles) end,
  }, seen
end

local function explore_with(mod)
  package.loaded.attnbwd, package.loaded.explore = mod, nil
  return require "explore"
end

local quiet = { print = function() end }

-- a=1 (95) is the best single; a=2 (96) changes a another way: skipped; b=1
-- (97) combines with it: 92, kept; d=1 (99.5) is inside the margin; c=1 slower.
local mod, seen = fake(nil)
local explore = explore_with(mod)
local w = assert(explore.explore_case({ name = "case" }, quiet))
assert(w.tiles == "a=1 b=1 c=0 d=0", w.tiles)
assert(w.best_us == 92 and w.heuristic_us == 100 and w.rejected == 0)
assert(#seen == #singles + 2, #seen) -- the six candidates and one combination
assert(seen[#seen] == "a=1 b=1 c=0 d=0")

-- The same with the combination's check failing: the best single stays, the combination is rejected.
mod, seen = fake("a=1 b=1 c=0 d=0")
explore = explore_with(mod)
w = assert(explore.explore_case({ name = "case" }, quiet))
assert(w.tiles == "a=1 b=0 c=0 d=0" and w.best_us == 95 and w.rejected == 1)

-- No combinations asked for: the best single.
mod = fake(nil)
explore = explore_with(mod)
w = assert(explore.explore_case({ name = "case" }, { print = quiet.print, combine = 0 }))
assert(w.tiles == "a=1 b=0 c=0 d=0")

-- combine itself: nothing to add, and a conflict, give nil.
assert(explore.combine(H, "a=1 b=0 c=0 d=0", "a=1 b=0 c=0 d=0") == nil)
assert(explore.combine(H, "a=1 b=0 c=0 d=0", "a=2 b=0 c=0 d=0") == nil)
assert(explore.combine(H, "a=1 b=0 c=0 d=0", "a=0 b=0 c=0 d=1") == "a=1 b=0 c=0 d=1")
print("explore_combine: ok")
