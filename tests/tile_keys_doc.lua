-- docs/tile-keys.md from the registry of problem 2's tile keys
-- (lua/edit_attention_keys.lua), so that the document cannot go stale.
--   attnbwd lua --arch sm_90 tests/tile_keys_doc.lua > docs/tile-keys.md
--   attnbwd lua --arch sm_90 tests/tile_keys_doc.lua --check docs/tile-keys.md
local keys = require "edit_attention_keys"

local function list(t, empty)
  if not t or #t == 0 then return empty end
  local out = {}
  for i, v in ipairs(t) do out[i] = tostring(v) end
  return table.concat(out, ", ")
end

local function explored(k)
  if type(k.explore) == "function" then return "by shape" end
  return list(k.explore, "no")
end

local function document()
  local lines = {
    "# Problem 2's tile keys",
    "",
    "Generated from `lua/edit_attention_keys.lua` by `tests/tile_keys_doc.lua` (ctest `test_tile_keys_doc`",
    "fails where this file differs); edit the registry, then",
    "`build/attnbwd lua --arch sm_90 tests/tile_keys_doc.lua > docs/tile-keys.md`.",
    "",
    "A tiles string (`\"key=value ...\"`, `attnbwd_get_kernel_tiles`, `attnbwd.compile`) lays its pairs over the",
    "heuristic's; the defaults below are the heuristic's before it fits the device's shared memory (no ring,",
    "then bj=32, then fused=0). *Ordered*: the value a deterministic context (`ATTNBWD_DETERMINISTIC=1`)",
    "takes, where the others sum outputs by float atomics. *Explored*: the values `explore` lays over the",
    "heuristic's tiles one key at a time (lua/edit_attention_keys.lua's EXTRA adds combinations).",
    "What was measured for each: `docs/experiments.md`.",
    "",
    "| key | values | default | what it does | kernels | limits | ordered | explored |",
    "|---|---|---|---|---|---|---|---|",
  }
  for _, k in ipairs(keys.KEYS) do
    local default = k.default_doc or tostring(k.default)
    lines[#lines + 1] = string.format("| `%s` | %s | %s | %s | %s | %s | %s | %s |", k.name, list(k.values),
                                      default, k.doc, list(k.kernels, "-"), list(k.limits, "-"),
                                      k.ordered ~= nil and tostring(k.ordered) or "all", explored(k))
  end
  return table.concat(lines, "\n") .. "\n"
end

local text = document()
if arg[1] == "--check" then
  local f = assert(io.open(arg[2], "rb"))
  local have = f:read("a")
  f:close()
  if have ~= text then
    error(arg[2] .. " differs from the registry (lua/edit_attention_keys.lua); regenerate it: "
          .. "build/attnbwd lua --arch sm_90 tests/tile_keys_doc.lua > " .. arg[2], 0)
  end
  print(arg[2] .. ": " .. #keys.KEYS .. " keys, as the registry says")
else
  io.write(text)
end
