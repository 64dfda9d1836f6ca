-- A/B of tile choices on whole calls, all variants in one process:
--   attnbwd lua bench/ab.lua MODE SUITE VARIANT...
-- MODE: compile (no GPU needed with --arch), check (fp64 reference), time
-- (best of AB_REPS medians of AB_ITERS launches, cold L2, the variants taken
-- in turn so that drift hits them alike; problem 2: inputs drawn once a
-- workload for all the variants, the median of AB_REPS medians (rounded up
-- to even), in pairs of rounds of a shuffled order and its reverse, a new
-- shuffle every pair and run (AB_SEED=N repeats a run's, 0 keeps the order):
-- attnbwd.time_tiles).
-- VARIANT: "-" for the heuristic's tiles, else "key=value ..." laid over
-- them, or "+key=value ..." laid over the workload's entry in the shipped H200
-- tuning table (AB_TABLE=tuning_h100 for the H100's; the heuristic's tiles
-- where it has none), as "-" runs. AB_SHAPES="1,5" limits the suite to those
-- workloads (from 1). With two variants, the last column is
-- the second's time against the first's. MODE time:KERNEL times instead the
-- plan's kernel whose name ends in KERNEL, alone (problem 2), the same way:
-- its results need not be right, for timing a kernel experiment before it
-- computes anything. MODE time:* prints every kernel's time alone instead (the
-- first rep's lines), one block a variant.
local attnbwd = require "attnbwd"
local mode, suite = arg[1], arg[2]
local variants = { table.unpack(arg, 3) }
local kernel = mode and mode:match("^time:(.+)$")
if kernel then mode = "time" end
if not (mode == "compile" or mode == "check" or mode == "time") or not suite or #variants == 0 then
  io.stderr:write("usage: attnbwd lua bench/ab.lua compile|check|time|time:KERNEL SUITE VARIANT... "
                  .. "(VARIANT: - or \"key=value ...\")\n")
  os.exit(2)
end
local only
if os.getenv("AB_SHAPES") then
  only = {}
  for n in os.getenv("AB_SHAPES"):gmatch("%d+") do only[tonumber(n)] = true end
end
local reps, iters = tonumber(os.getenv("AB_REPS") or "2"), tonumber(os.getenv("AB_ITERS") or "20")
-- The rounds' order (attnbwd.time_tiles): shuffled, a new seed each run unless AB_SEED says (0: in order).
local seed = math.tointeger(tonumber(os.getenv("AB_SEED") or "")) or os.time()
local shipped = require(os.getenv("AB_TABLE") or "tuning_h200").entries
local function tiles_of(v, case)
  if v == "-" then return nil end
  if v:sub(1, 1) ~= "+" then return v end
  local entry = shipped[attnbwd.tuning_key(case)]
  return ((entry or "") .. " " .. v:sub(2)):match("^%s*(.-)%s*$")
end

local logsum, timed = {}, 0
for idx, case in ipairs(attnbwd.suite(suite)) do
  if not only or only[idx] then
    local line = string.format("#%-2d B=%-3d T=%-5d", idx, case.batch, case.seq_len)
    if mode == "compile" then
      for _, v in ipairs(variants) do
        local r = attnbwd.compile(case, tiles_of(v, case))
        line = line .. string.format(" [%s %s %.1fs]", v, r.origin, r.seconds)
      end
    elseif mode == "check" then
      for _, v in ipairs(variants) do
        local r = attnbwd.check(case, tiles_of(v, case))
        line = line .. string.format(" [%s %s err %.3g match %.6f nonfinite %s]", v, r.pass and "PASS" or "FAIL",
                                     r.max_abs_err, r.match, tostring(r.nonfinite))
      end
    else
      local best = {}
      if not kernel and case.problem == "edit_attention_bwd" then -- inputs drawn once for all the variants
        local mapped = {}
        for i, v in ipairs(variants) do mapped[i] = tiles_of(v, case) or "-" end
        best = attnbwd.time_tiles(case, mapped, iters, reps, seed ~= 0 and seed + idx or 0)
      else
        for rep = 1, reps do
          for i, v in ipairs(variants) do
            local us, lines = attnbwd.time(case, tiles_of(v, case), iters, kernel ~= nil) -- alone: only for time:KERNEL
            if kernel == "*" then
              if rep == 1 then print(line .. " " .. v .. ": " .. string.format("%.1f us", us) .. "\n" .. (lines or "")) end
            elseif kernel then -- its line of the per-kernel times ("name us share")
              us = nil
              for name, t in (lines or ""):gmatch("(%S+)%s+([%d.]+) us") do
                if name:sub(-#kernel) == kernel then us = tonumber(t) end
              end
              if not us then error("no kernel ending in '" .. kernel .. "' in the plan of #" .. idx) end
            end
            if not best[i] or us < best[i] then best[i] = us end
          end
        end
      end
      timed = timed + 1
      for i = 1, #variants do
        logsum[i] = (logsum[i] or 0) + math.log(best[i])
        line = line .. string.format(" %10.1f", best[i])
      end
      if #variants == 2 then line = line .. string.format("  %+6.1f%%", 100 * (best[2] / best[1] - 1)) end
    end
    print(line)
    io.stdout:flush()
  end
end
if mode == "time" and timed > 0 then
  local line = string.format("%-22s", "geomean")
  for i = 1, #variants do line = line .. string.format(" %10.1f", math.exp(logsum[i] / timed)) end
  print(line)
  print("AB_SEED=" .. seed)
end
