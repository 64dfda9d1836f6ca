-- Merges the tables of a sweep's stages (bench/ab_entries.lua's) into one
-- tuning table, for <cache folder>/tuning.lua:
--   attnbwd lua bench/merge_tuning.lua OUT STAGE1 [LATER...]
-- A later table's verdict replaces the earlier ones' for every workload it
-- timed (its `timed` keys): its entry where it has one, and none where it
-- timed the workload and found no winner, so that a first-stage win the
-- second stage did not confirm is dropped (docs/benchmarks.md, thirty-sixth
-- session: at B=64,T=256 a copy of the entry "won" the first stage by 3%).
-- A table that cannot be read is an error; OUT is written only when all are.
local out = arg[1]
if not out or not arg[2] then
  io.stderr:write("usage: attnbwd lua bench/merge_tuning.lua OUT STAGE1 [LATER...]\n")
  os.exit(2)
end
local entries, gpu = {}, nil
for i = 2, #arg do
  local ok, t = pcall(dofile, arg[i])
  if not ok or type(t) ~= "table" or type(t.entries) ~= "table" then
    io.stderr:write(string.format("merge_tuning.lua: %s is not a tuning table (%s)\n", arg[i], tostring(t)))
    os.exit(1)
  end
  if gpu and t.gpu ~= gpu then
    io.stderr:write(string.format("merge_tuning.lua: %s is for %s, the first table for %s\n", arg[i], t.gpu, gpu))
    os.exit(1)
  end
  gpu = t.gpu
  for _, k in ipairs(t.timed or {}) do entries[k] = nil end
  for k, v in pairs(t.entries) do entries[k] = v end
end
local ks = {}
for k in pairs(entries) do ks[#ks + 1] = k end
table.sort(ks)
local f = assert(io.open(out, "w"))
f:write(string.format("-- bench/merge_tuning.lua from %s\nreturn { gpu = %q, entries = {\n",
                      table.concat({ table.unpack(arg, 2) }, ", "), gpu))
for _, k in ipairs(ks) do f:write(string.format("  [%q] = %q,\n", k, entries[k])) end
f:write("} }\n")
f:close()
print(#ks .. " entries in " .. out)
