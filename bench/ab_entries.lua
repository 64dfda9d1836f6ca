-- The tuning entries that two A/B runs of bench/ab.lua support:
--   attnbwd lua bench/ab_entries.lua RUN1 RUN2 OUT VARIANT...
-- Each run (`ab.lua time SUITE "+precision=0" VARIANT... "+precision=0"`, its printed
-- lines in RUN1, RUN2) timed each workload's shipped entry first and last and
-- the VARIANTs ("+key=value ...", in that order) between. A variant becomes
-- the workload's entry where, in both runs, it is faster than both of the
-- entry's times and more than 1.5% faster than their mean (the rule since
-- the thirteenth session, docs/benchmarks.md; AB_GAIN=0.01 asks for 1%
-- instead, for runs of eight rounds or more); of several, the one fastest in
-- the two runs' mean. OUT: those entries as a tuning table for this GPU
-- (GPU_NAME, else the device's name), for <cache folder>/tuning.lua, where
-- they win over the shipped tables' (lua/plan.lua), and `timed`, the keys of
-- the workloads both runs timed. Prints one line a workload and the count of
-- new entries. AB_TABLE: as ab.lua's.
-- With OUT = --pairs, the second stage of a sweep instead: per workload the
-- variants faster than the entry's mean by more than 0.5% in both runs, best
-- three by their mean time (the rule's winner first where there is one), and
-- it prints "idx|variant|..." (the best two and the pairs of the three that
-- share no key) for each workload with two or more, or with a winner, to time
-- against the entry again (ab.lua with AB_SHAPES=idx): so the second stage
-- also confirms or drops every first-stage winner (bench/merge_tuning.lua).
local attnbwd = require "attnbwd"
local run1, run2, out = arg[1], arg[2], arg[3]
local variants = { table.unpack(arg, 4) }
if not out or #variants == 0 then
  io.stderr:write("usage: attnbwd lua bench/ab_entries.lua RUN1 RUN2 OUT|--pairs \"+key=value ...\"...\n")
  os.exit(2)
end

-- "#idx B=.. T=..  us us ..." -> times[idx] = { us, ... } (entry, variants, entry)
local function read(path)
  local times = {}
  for line in io.lines(path) do
    local idx, rest = line:match("^#(%d+)%s+B=%d+%s+T=%d+(.*)$")
    if idx then
      local row = {}
      for x in rest:gmatch("[%d.]+") do row[#row + 1] = tonumber(x) end
      if #row == #variants + 2 then times[tonumber(idx)] = row end
    end
  end
  return times
end

local r1, r2 = read(run1), read(run2)

local function keys(v)
  local k = {}
  for key in v:gmatch("([%w_]+)=") do k[key] = true end
  return k
end
local function disjoint(a, b)
  local ka = keys(a)
  for key in pairs(keys(b)) do if ka[key] then return false end end
  return true
end
-- The rule's verdict on one workload's two runs a and b: the winning
-- variant's index or nil, and each variant's "run 1/run 2" % against the
-- entry's mean.
local gain = tonumber(os.getenv("AB_GAIN") or "0.015")
local function verdict(a, b)
  local best, best_us, gains = nil, math.huge, {}
  for v = 1, #variants do
    local ga = a[v + 1] / ((a[1] + a[#a]) / 2) - 1
    local gb = b[v + 1] / ((b[1] + b[#b]) / 2) - 1
    gains[#gains + 1] = string.format("%+5.1f/%+5.1f", 100 * ga, 100 * gb)
    local wins = ga < -gain and gb < -gain and a[v + 1] < math.min(a[1], a[#a]) and b[v + 1] < math.min(b[1], b[#b])
    local us = (a[v + 1] + b[v + 1]) / 2
    if wins and us < best_us then best, best_us = v, us end
  end
  return best, gains
end

if out == "--pairs" then
  for idx = 1, #attnbwd.suite("sol072_workload") do
    local a, b, good = r1[idx], r2[idx], {}
    local winner = a and b and verdict(a, b)
    for v = 1, a and b and #variants or 0 do
      if a[v + 1] < 0.995 * (a[1] + a[#a]) / 2 and b[v + 1] < 0.995 * (b[1] + b[#b]) / 2 then
        good[#good + 1] = { v = variants[v], us = a[v + 1] + b[v + 1] + (v == winner and -math.huge or 0) }
      end
    end
    table.sort(good, function(x, y) return x.us < y.us end)
    local line = { idx, good[1] and good[1].v, good[2] and good[2].v }
    for i = 1, math.min(3, #good) do
      for j = i + 1, math.min(3, #good) do
        if disjoint(good[i].v, good[j].v) then line[#line + 1] = good[i].v .. " " .. good[j].v:sub(2) end
      end
    end
    if #good >= 2 or winner then print(table.concat(line, "|")) end
  end
  os.exit(0)
end

local gpu = os.getenv("GPU_NAME") or attnbwd.info().device
local shipped = require(os.getenv("AB_TABLE") or "tuning_h200").entries -- what ab.lua's "+..." lays the variants over
local entries, added, lines, timed = {}, 0, {}, {}
for idx, case in ipairs(attnbwd.suite("sol072_workload")) do
  local a, b = r1[idx], r2[idx]
  if a and b then
    timed[#timed + 1] = attnbwd.tuning_key(case)
    local best, gains = verdict(a, b)
    local key = attnbwd.tuning_key(case)
    if best then
      entries[key] = ((shipped[key] or "") .. " " .. variants[best]:gsub("^%+", "")):match("^%s*(.-)%s*$")
      added = added + 1
    end
    lines[#lines + 1] = string.format("#%-2d B=%-3d T=%-5d %s%s", idx, case.batch, case.seq_len,
                                      table.concat(gains, " "), best and ("  -> " .. entries[key]) or "")
  end
end
print("variants (% against the entry's mean, run 1/run 2): " .. table.concat(variants, ", "))
for _, l in ipairs(lines) do print(l) end
local f = assert(io.open(out, "w"))
f:write(string.format("-- bench/ab_entries.lua from %s and %s\nreturn { gpu = %q, entries = {\n", run1, run2, gpu))
local keys = {}
for k in pairs(entries) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do f:write(string.format("  [%q] = %q,\n", k, entries[k])) end
-- The workloads both runs timed, won or not: bench/merge_tuning.lua lets a
-- later stage's verdict on them replace an earlier stage's.
f:write("}, timed = {\n")
for _, k in ipairs(timed) do f:write(string.format("  %q,\n", k)) end
f:write("} }\n")
f:close()
print(string.format("%d new entries for %s in %s", added, gpu, out))
