-- The entry point of code generation: shape -> tile choices -> kernel.
-- C calls tuned(shape) for each kernel it builds (the disk cache's key names
-- the entry), and plan(shape, arch, override) where the disk cache does not
-- hold the kernel. Adding a problem means one script beside this one and one
-- line in `problems`.
local render = require "render"

local problems = {
  softmax_dropout_bwd = "softmax_dropout",
  edit_attention_bwd = "edit_attention",
}

local M = {}

-- Tuning tables: { gpu = "NVIDIA H200", entries = { [key] = "tiles" },
-- fp16_too = { ["B=2 H=16 T=352 dropout=1"] = note, ... } }, fp16_too
-- optional: the problem-2 shapes where fp16 (precision=2) takes the table's
-- TF32 entry (precision=0), which beat fp16's own tiles there. The
-- user's (the cache folder's tuning.lua) applies on the GPU model it names
-- and wins over the shipped one; which shipped table (lua/tuning_h200.lua,
-- lua/tuning_h100.lua) a model gets, if any, the library decides by its
-- family and SM count (runtime/gpu_model.c).
local tuning = { gpu = "", tables = {} }
-- A deterministic context (options.deterministic): no output summed by float
-- atomics. A problem's `deterministic(tiles, named)` takes such choices out of
-- the tiles (a table entry's, the heuristic's), and refuses them where the
-- caller's override named them (named: its pairs).
local deterministic = false

-- gpu: the model name; user_text: the user's table or nil; det: deterministic;
-- shipped: the module of the shipped table for this model, or nil.
function M.configure(gpu, user_text, det, shipped)
  deterministic = det and true or false
  tuning.gpu = gpu or ""
  tuning.tables = {}
  if user_text then
    local chunk = load(user_text, "=cache tuning.lua", "t", {})
    local ok, t = pcall(chunk or error)
    if ok and type(t) == "table" and t.gpu == tuning.gpu then tuning.tables[#tuning.tables + 1] = t end
  end
  if shipped then tuning.tables[#tuning.tables + 1] = require(shipped) end
end

-- Problem 2's keys name the precision too: tiles tuned for one precision
-- must not be laid over a request for another.
function M.tuning_key(shape)
  local key = string.format("%s B=%d H=%d T=%d dropout=%d", shape.problem, shape.batch, shape.heads,
                            shape.seq_len, shape.dropout)
  if shape.problem == "edit_attention_bwd" then key = key .. " precision=" .. shape.precision end
  return key
end

-- The tuning tables' entry for a shape on this context's GPU model, or nil.
-- With the shape, the arch and the scripts, it is all a plan without an
-- override depends on: the disk cache keys kernels by it.
function M.tuned(shape)
  local key = M.tuning_key(shape)
  local short = key:match("^edit_attention_bwd (.*) precision=2$") -- fp16_too's key of an fp16 shape
  for _, t in ipairs(tuning.tables) do
    if type(t.entries) == "table" then
      if type(t.entries[key]) == "string" then return t.entries[key] end
      if short and type(t.fp16_too) == "table" and t.fp16_too[short] ~= nil then
        local tf32 = t.entries[key:gsub("precision=2$", "precision=0")]
        if type(tf32) == "string" then return tf32 end
      end
    end
  end
end
local tuned = M.tuned

local function problem_module(shape)
  local name = problems[shape.problem]
  if not name then error("no generator for problem '" .. tostring(shape.problem) .. "'", 0) end
  return require(name)
end

-- Tiles for a shape: the heuristic, then the override's pairs on top; with
-- no override, a tuning table's entry for this GPU model, if it is valid.
-- arch ("sm_90"; nil when unknown) lets a script fit the device's limits.
-- from_table: the override is a tuning table's entry, not the caller's.
-- Returns tiles or nil, why.
function M.tiles(shape, override, arch, from_table)
  local mod = problem_module(shape)
  local tiles = mod.heuristic(shape, arch)
  if not override then
    local entry = tuned(shape)
    if entry then
      local t = M.tiles(shape, entry, arch, true)
      if t then return t end -- an entry that no longer fits falls back to the heuristic
    end
  end
  local given = {}
  if override and override ~= "" then
    given = render.parse_tiles(override)
    for k, v in pairs(given) do
      if tiles[k] == nil then return nil, "unknown tile '" .. k .. "' for " .. shape.problem end
      tiles[k] = v
    end
    -- A vec that divides T, given without `split` (tables written before it
    -- existed), means plain loads.
    if given.vec and given.split == nil and tiles.split ~= nil and shape.seq_len % given.vec == 0 then
      tiles.split = 0
    end
  end
  if deterministic and mod.deterministic then
    local why = mod.deterministic(tiles, not from_table and given or {})
    if why then return nil, "tiles " .. render.tiles_string(tiles) .. ": " .. why end
  end
  local why = mod.validate(shape, tiles, arch)
  if why then return nil, "tiles " .. render.tiles_string(tiles) .. ": " .. why end
  return tiles
end

-- The kernel table C reads: name, source, tiles, grid, block, shared_bytes;
-- optionally align, launches and workspace_bytes (a plan of several kernels),
-- and compile_arch (arch .. "a", for instructions such as wgmma that only the
-- arch-specific target has). Returns it, or nil and why the tiles were refused
-- (by the problem's validate, or by its plan where only planning can tell).
function M.plan(shape, arch, override)
  local tiles, why = M.tiles(shape, override, arch)
  if not tiles then return nil, why end
  local text = render.tiles_string(tiles)
  -- Planned from the string itself, so that the kernel is a function of what
  -- the disk cache's manifest records, not of the table behind it.
  local k, refused = problem_module(shape).plan(shape, render.parse_tiles(text), arch)
  if not k then return nil, "tiles " .. text .. ": " .. refused end
  k.tiles = text
  return k
end

function M.candidates(shape)
  return problem_module(shape).candidates(shape)
end

return M
