-- The entry point of code generation: shape -> tile choices -> kernel.
-- C calls plan(shape, arch, override) once per kernel it builds. Adding a
-- problem means one script beside this one and one line in `problems`.
local render = require "render"

local problems = {
  softmax_dropout_bwd = "softmax_dropout",
}

local M = {}

local function problem_module(shape)
  local name = problems[shape.problem]
  if not name then error("no generator for problem '" .. tostring(shape.problem) .. "'", 0) end
  return require(name)
end

-- Tiles for a shape: the heuristic, then the override's pairs on top.
-- Returns tiles or nil, why.
function M.tiles(shape, override)
  local mod = problem_module(shape)
  local tiles = mod.heuristic(shape)
  if override and override ~= "" then
    for k, v in pairs(render.parse_tiles(override)) do
      if tiles[k] == nil then return nil, "unknown tile '" .. k .. "' for " .. shape.problem end
      tiles[k] = v
    end
  end
  local why = mod.validate(shape, tiles)
  if why then return nil, "tiles " .. render.tiles_string(tiles) .. ": " .. why end
  return tiles
end

-- The kernel table C reads: name, source, tiles, grid, block, shared_bytes.
-- Returns it, or nil and why the tiles were refused.
function M.plan(shape, arch, override)
  local tiles, why = M.tiles(shape, override)
  if not tiles then return nil, why end
  local k = problem_module(shape).plan(shape, tiles, arch)
  k.tiles = render.tiles_string(tiles)
  return k
end

function M.candidates(shape)
  return problem_module(shape).candidates(shape)
end

return M
