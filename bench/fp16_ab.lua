-- attnbwd lua bench/fp16_ab.lua A B KERNEL: problem 2 in fp16, two tile
-- choices laid over each public workload's shipped fp16 choice (the GPU's
-- table entry, else the heuristic; "-": as shipped, else "key=value ..."
-- over it): whole calls (attnbwd.time_tiles in turn, cold L2, median of 50,
-- two rounds), the launch whose name ends in KERNEL alone (median of 20,
-- best of two), and B checked against the fp64 reference. GPU only.
-- FP16_AB_ONLY=",12,15,": those workloads only (from 1). For example
--   bench/fp16_ab.lua att_f16=0 - attention_wg    the pass on TF32's products against fp16's
--   bench/fp16_ab.lua - "gq_f16=1 gq_tma=0" grad_query
local attnbwd = require "attnbwd"
local over_a, over_b, kernel = arg[1], arg[2], arg[3]
if not (over_a and over_b and kernel) then
  io.stderr:write("usage: attnbwd lua bench/fp16_ab.lua A B KERNEL (A, B: - or \"key=value ...\")\n")
  os.exit(2)
end
print("device " .. (attnbwd.info().device or ""))
-- The pairs of `tiles` that differ from `base`'s, in tiles' order (a choice's departures from the heuristic).
local function departures(tiles, base)
  local from, out = {}, {}
  for k, v in base:gmatch("(%S+)=(%S+)") do from[k] = v end
  for k, v in tiles:gmatch("(%S+)=(%S+)") do
    if from[k] ~= v then out[#out + 1] = k .. "=" .. v end
  end
  return #out > 0 and table.concat(out, " ") or "-"
end
local function over(shipped, o) return o == "-" and shipped or shipped .. " " .. o end
local only = os.getenv("FP16_AB_ONLY")
local sums, n = { 0, 0, 0, 0 }, 0
local function alone(c, tiles)
  local best
  for _ = 1, 2 do
    local _, lines = attnbwd.time(c, tiles, 20, true)
    for name, t in (lines or ""):gmatch("(%S+)%s+([%d.]+) us") do
      if name:sub(-#kernel) == kernel and (not best or tonumber(t) < best) then best = tonumber(t) end
    end
  end
  return best or 0 / 0
end
for idx, c in ipairs(attnbwd.suite("sol072_workload")) do
  if not only or only:find("," .. idx .. ",", 1, true) then
    c.precision = "fp16"
    local shipped = attnbwd.compile(c).tiles -- the library's choice on this GPU, every key
    local a, b = over(shipped, over_a), over(shipped, over_b)
    local r = attnbwd.time_tiles(c, { a, b }, 50, 2)
    local a0, a1 = alone(c, a), alone(c, b)
    local k = attnbwd.check(c, b, 1000 + idx)
    print(string.format("#%-2d B=%-3d T=%-5d call %8.1f -> %8.1f (%+5.1f%%)  %s %8.2f -> %8.2f (%+5.1f%%)  "
                        .. "check %s err %.3g match %.5f  [%s]", idx, c.batch, c.seq_len, r[1], r[2],
                        100 * (r[2] / r[1] - 1), kernel, a0, a1, 100 * (a1 / a0 - 1), k.pass and "PASS" or "FAIL",
                        k.max_abs_err, k.match, departures(shipped, attnbwd.candidates(c)[1])))
    io.stdout:flush()
    sums[1], sums[2] = sums[1] + math.log(r[1]), sums[2] + math.log(r[2])
    sums[3], sums[4], n = sums[3] + math.log(a0), sums[4] + math.log(a1), n + 1
  end
end
if n > 0 then
  print(string.format("geomean over %d: call %.1f -> %.1f, %s %.2f -> %.2f", n, math.exp(sums[1] / n),
                      math.exp(sums[2] / n), kernel, math.exp(sums[3] / n), math.exp(sums[4] / n)))
end
