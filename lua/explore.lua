-- `attnbwd explore`, written on the Lua API (docs/lua-api.md): for each case,
-- every candidate tile choice is built, checked against the fp64 reference
-- (a failing one is rejected) and timed on the GPU; the fastest wins. A user
-- script can `require "explore"` and call explore_case itself.
local attnbwd = require "attnbwd"
local render = require "render" -- tile text <-> table (keys in order: one choice, one text)
local parse, text = render.parse_tiles, render.tiles_string

local M = {}

-- The combination of two winning candidates: b's choices that differ from
-- the heuristic's h laid over a, or nil where b changes a key a changed too
-- (or adds nothing to it).
function M.combine(h, a, b)
  local ta, tb, th = parse(a), parse(b), parse(h)
  local merged, added = parse(a), false
  for k, v in pairs(tb) do
    if v ~= th[k] then
      if ta[k] ~= th[k] and ta[k] ~= v then return nil end
      if ta[k] ~= v then merged[k], added = v, true end
    end
  end
  return added and text(merged) or nil
end

-- Returns { key=, tiles=, best_us=, heuristic_us=, rejected= } or nil, why.
-- After the candidates, those faster than the heuristic by more than
-- opts.margin (default 0.01: 1%) are combined, fastest first: each one's
-- choices laid over the best so far (M.combine), checked and timed, and
-- kept where that is faster than the best by more than the margin; at most
-- opts.combine (default 4) combinations: single choices often win more
-- together (docs/experiments.md's tuning table entries).
function M.explore_case(case, opts)
  opts = opts or {}
  local iters, seed, say = opts.iters or 20, opts.seed or 1, opts.print or print
  local margin, max_combos = opts.margin or 0.01, opts.combine or 4
  local cands, why = attnbwd.try_candidates(case)
  if not cands then return nil, why end
  say(string.format("%s: %d candidates", case.name, #cands))
  local w = { key = attnbwd.tuning_key(case), best_us = math.huge, rejected = 0 }
  local timed = {} -- { tiles, us } of the candidates that passed
  local function try(tiles, n, label)
    local r, err = attnbwd.try_check(case, tiles, seed + n - 1)
    local us
    if r and r.pass then us, err = attnbwd.try_time(case, tiles, iters) end
    if not us then
      w.rejected = w.rejected + 1
      say(string.format("  %-72s rejected: %s", tiles, err or r.message))
    else
      say(string.format("  %-72s %9.2f us%s", tiles, us, label or ""))
    end
    return us
  end
  for i, tiles in ipairs(cands) do
    local us = try(tiles, i, i == 1 and "  (heuristic)" or nil)
    if us then
      timed[#timed + 1] = { tiles = tiles, us = us }
      if i == 1 then w.heuristic_us = us end
      if us < w.best_us then w.best_us, w.tiles = us, tiles end
    end
  end
  if not w.tiles then return nil, "no candidate passed the check" end
  if w.heuristic_us then
    local winners = {}
    for _, c in ipairs(timed) do
      if c.tiles ~= w.tiles and c.us < w.heuristic_us * (1 - margin) then winners[#winners + 1] = c end
    end
    table.sort(winners, function(x, y) return x.us < y.us end)
    local n = 0
    for _, c in ipairs(winners) do
      if n >= max_combos then break end
      local tiles = M.combine(cands[1], w.tiles, c.tiles)
      if tiles then
        n = n + 1
        local us = try(tiles, #cands + n, "  (combined)")
        if us and us < w.best_us * (1 - margin) then w.best_us, w.tiles = us, tiles end
      end
    end
  end
  if w.heuristic_us then
    say(string.format("  winner %s: %.2f us; heuristic %.2f us (%.3f of the best)", w.tiles, w.best_us,
                      w.heuristic_us, w.best_us / w.heuristic_us))
  end
  return w
end

-- The winners as a tuning table (lua/tuning_h200.lua's format).
function M.table_text(gpu, winners)
  local lines = {
    "-- Tuning table written by `attnbwd explore`: the fastest tiles measured",
    "-- for each shape on this GPU model (cold L2, median).",
    "return {", string.format("  gpu = %q,", gpu), "  entries = {",
  }
  for _, w in ipairs(winners) do
    lines[#lines + 1] = string.format("    [%q] = %q, -- %.2f us; heuristic %.2f us", w.key, w.tiles, w.best_us,
                                      w.heuristic_us or 0 / 0)
  end
  lines[#lines + 1] = "  },"
  lines[#lines + 1] = "}"
  return table.concat(lines, "\n") .. "\n"
end

local USAGE = [[
usage: attnbwd explore [OPTIONS] SUITE...

For every case of each SUITE, builds each candidate tile choice of the
problem's Lua script, rejects those that fail the fp64 check, times the rest
(cold L2, median of --iters), then combines the candidates more than 1%
faster than the heuristic's, fastest first, each laid over the best so far
and kept where that is 1% faster again, and reports the fastest against the
heuristic's.

options:
  --iters N   timed launches per candidate (default 20)
  --combine N at most N combinations per case (default 4; 0: none)
  --seed N    seed of the check's random inputs (default 1)
  --out FILE  write the winners as a Lua tuning table for this GPU; copy it to
              <cache folder>/tuning.lua for attnbwd_get_kernel to use it

example:
  attnbwd explore --out tuning.lua sol066_workload
]]

function M.main(argv)
  local opts, suites, out = { iters = 20, seed = 1, combine = 4 }, {}, nil
  local i = 1
  while i <= #argv do
    local a = argv[i]
    if a == "-h" or a == "--help" then io.write(USAGE); return 0
    elseif a == "--iters" or a == "--seed" or a == "--combine" or a == "--out" then
      local v = argv[i + 1]
      if not v then io.stderr:write("attnbwd explore: ", a, " needs a value\n"); return 2 end
      if a == "--out" then out = v
      else
        local n = math.tointeger(tonumber(v))
        if not n or n < (a == "--iters" and 1 or 0) then
          io.stderr:write("attnbwd explore: ", a, ": '", v, "' is not a valid count\n")
          return 2
        end
        opts[a:sub(3)] = n
      end
      i = i + 1
    elseif a:sub(1, 1) == "-" then io.stderr:write("attnbwd explore: unknown option '", a, "'\n"); return 2
    else suites[#suites + 1] = a end
    i = i + 1
  end
  if #suites == 0 then io.stderr:write("attnbwd explore: no suite given\n"); return 2 end
  local info = attnbwd.info()
  if not info.gpu then io.stderr:write("attnbwd explore: no GPU: ", info.why_no_gpu, "\n"); return 1 end
  local winners, log_ratio, n_ratio, failed = {}, 0, 0, 0
  for _, s in ipairs(suites) do
    local cases, why = attnbwd.try_suite(s)
    if not cases then io.stderr:write("attnbwd explore: ", why, "\n"); return 1 end
    for _, c in ipairs(cases) do
      local w, err = M.explore_case(c, opts)
      if w then
        winners[#winners + 1] = w
        if w.heuristic_us then log_ratio, n_ratio = log_ratio + math.log(w.best_us / w.heuristic_us), n_ratio + 1 end
      else
        failed = failed + 1
        print(string.format("  %s: %s", c.name, err))
      end
      io.stdout:flush()
    end
  end
  if n_ratio > 0 then
    print(string.format("heuristic against the explored best over %d cases: geometric mean %.3f of the best's speed",
                        n_ratio, math.exp(log_ratio / n_ratio)))
  end
  if out then
    local f = assert(io.open(out, "w"))
    f:write(M.table_text(info.device, winners))
    f:close()
    print("wrote " .. out)
  end
  return failed == 0 and 0 or 1
end

return M
