-- Template rendering: a template is CUDA source with {{NAME}} holes; every
-- hole must have a value, so a typo in a template or a script fails loudly
-- here instead of reaching NVRTC as a stray brace.
local attnbwd = require "attnbwd"

local M = {}

local function text_of(v)
  if type(v) == "boolean" then return v and "1" or "0" end
  if math.type(v) == "float" then
    local i = math.tointeger(v)
    if i then return tostring(i) end
    return string.format("%.17g", v)
  end
  return tostring(v)
end

-- Fills the template `name` (a file under templates/) from `values`.
function M.render(name, values)
  local text = attnbwd.template(name)
  local missing = {}
  local out = text:gsub("{{([%w_]+)}}", function(hole)
    local v = values[hole]
    if v == nil then
      missing[#missing + 1] = hole
      return ""
    end
    return text_of(v)
  end)
  if #missing > 0 then
    error(string.format("templates/%s: no value for hole(s) %s", name, table.concat(missing, ", ")), 2)
  end
  return out
end

-- "key=value ..." sorted by key: the readable form of a tile choice.
function M.tiles_string(tiles)
  local keys = {}
  for k in pairs(tiles) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. text_of(tiles[k]) end
  return table.concat(parts, " ")
end

-- The inverse of tiles_string: numbers become integers where they can.
function M.parse_tiles(text)
  local tiles = {}
  for k, v in text:gmatch("([%w_]+)=([^%s]+)") do
    tiles[k] = math.tointeger(tonumber(v)) or tonumber(v) or v
  end
  return tiles
end

return M
