-- attnbwd lua bench/time_one.lua SUITE INDEX [ITERS [TILES [PRECISION]]]: times
-- one workload of a suite (INDEX from 1) with the library's tiles or TILES
-- ("-": the library's), problem 2 in PRECISION (tf32, fp16, fp32; default
-- the suite's): a small program to run under a profiler, e.g.
--   ncu --clock-control none --set full -k regex:attention_wg -c 1 \
--       build/attnbwd lua bench/time_one.lua sol072_workload 16 3 - fp16
local attnbwd = require "attnbwd"
local suite, index, iters, tiles, precision = arg[1], tonumber(arg[2]), tonumber(arg[3] or "1"), arg[4], arg[5]
if not suite or not index then
  io.stderr:write("usage: attnbwd lua bench/time_one.lua SUITE INDEX [ITERS [TILES [PRECISION]]]\n")
  os.exit(2)
end
if tiles == "-" then tiles = nil end
local cases = attnbwd.suite(suite)
local case = cases[index]
if not case then
  io.stderr:write(string.format("%s has %d workloads; no workload %d\n", suite, #cases, index))
  os.exit(2)
end
if precision then case.precision = precision end
print(string.format("%s #%d: %.2f us (median of %d)", suite, index, attnbwd.time(case, tiles, iters), iters))
