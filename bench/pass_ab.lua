-- attnbwd lua bench/pass_ab.lua SUITE KERNEL VARIANT...: one kernel of the
-- plan (its name ends in KERNEL) timed alone per variant, cold L2, best of
-- AB_REPS medians of AB_ITERS; AB_SHAPES as in ab.lua. The results need not
-- be right: for timing kernel experiments before they compute anything.
local attnbwd = require "attnbwd"
local suite, kernel = arg[1], arg[2]
local variants = { table.unpack(arg, 3) }
if not suite or not kernel or #variants == 0 then
  io.stderr:write("usage: attnbwd lua bench/pass_ab.lua SUITE KERNEL VARIANT...\n")
  os.exit(2)
end
local only
if os.getenv("AB_SHAPES") then
  only = {}
  for n in os.getenv("AB_SHAPES"):gmatch("%d+") do only[tonumber(n)] = true end
end
local reps, iters = tonumber(os.getenv("AB_REPS") or "2"), tonumber(os.getenv("AB_ITERS") or "20")
local logsum, timed = {}, 0
for idx, case in ipairs(attnbwd.suite(suite)) do
  if not only or only[idx] then
    local line = string.format("#%-2d B=%-3d T=%-5d", idx, case.batch, case.seq_len)
    local best = {}
    for _ = 1, reps do
      for i, v in ipairs(variants) do
        local _, lines = attnbwd.time(case, v ~= "-" and v or nil, iters)
        local us
        for name, t in (lines or ""):gmatch("(%S+)%s+([%d.]+) us") do
          if name:sub(-#kernel) == kernel then us = tonumber(t) end
        end
        if us and (not best[i] or us < best[i]) then best[i] = us end
      end
    end
    timed = timed + 1
    for i = 1, #variants do
      logsum[i] = (logsum[i] or 0) + math.log(best[i] or 1)
      line = line .. string.format(" %10.1f", best[i] or -1)
    end
    print(line)
    io.stdout:flush()
  end
end
local line = string.format("%-22s", "geomean")
for i = 1, #variants do line = line .. string.format(" %10.1f", math.exp(logsum[i] / timed)) end
print(line)
