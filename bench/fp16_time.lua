-- attnbwd lua bench/fp16_time.lua [SUITE]: problem 2 in TF32 (the default
-- precision), in fp16 with gQ and the attention pass on mma.sync
-- ("wg_att=0 wg_gq=0 pair=0"), and in fp16 with the heuristic's tiles (on
-- sm_90: the TMA-fed fp16 projection products, gQ on TF32's wgmma, the pass
-- on fp16's), us, cold L2, median of 50; the two fp16 choices timed in turn on
-- the same inputs (attnbwd.time_tiles), and the fp16 default's slowest kernel
-- timed alone. GPU only.
local attnbwd = require "attnbwd"
local cases = attnbwd.suite(arg[1] or "sol072_workload")
local sums, n = { 0, 0, 0 }, 0
print(string.format("%-40s %9s %9s %9s  %s", "workload", "tf32", "fp16 sync", "fp16", "fp16's slowest kernel"))
for _, c in ipairs(cases) do
  c.precision = "tf32"
  local t = { attnbwd.time(c, nil, 50, false) }
  c.precision = "fp16"
  local r = attnbwd.time_tiles(c, { "wg_att=0 wg_gq=0 pair=0", "-" }, 50, 2)
  t[2], t[3] = r[1], r[2]
  local _, lines = attnbwd.time(c, nil, 20, true)
  print(string.format("%-40s %9.1f %9.1f %9.1f  %s", c.name, t[1], t[2], t[3], lines and lines:match("[^\n]+") or "?"))
  io.stdout:flush()
  for i = 1, 3 do sums[i] = sums[i] + math.log(t[i]) end
  n = n + 1
end
print(string.format("%-40s %9.1f %9.1f %9.1f", "geomean", math.exp(sums[1] / n), math.exp(sums[2] / n),
                    math.exp(sums[3] / n)))
