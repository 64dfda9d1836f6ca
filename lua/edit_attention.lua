-- Problem 2, region-aware self-attention with edit bias, backward: the tile
-- choices of one (B, T): the heuristic, their validation, the deterministic
-- context's, the candidates explore tries, all from the registry of keys
-- (lua/edit_attention_keys.lua). The kernels and their order for a choice:
-- lua/edit_attention_plan.lua; the projection products' tiles:
-- lua/edit_attention_products.lua and lua/projection_tiles.lua; device
-- limits: lua/edit_attention_limits.lua.
local render = require "render"
local limits = require "edit_attention_limits"
local plans = require "edit_attention_plan"
local keys = require "edit_attention_keys"

local M = {}

local POS = limits.POS
local smem_limit, att_on_wg = limits.smem_limit, limits.att_on_wg
local attention_smem, attention_wg_smem = limits.attention_smem, limits.attention_wg_smem
local wgmma_arch, pdl_arch = limits.wgmma_arch, limits.pdl_arch

function M.heuristic(shape, arch)
  local t = keys.defaults(shape, arch)
  -- A device with less shared memory: no ring, then smaller key blocks, else the first sequence.
  local limit = smem_limit(arch)
  local function fits() return attention_smem(t.bj, 1, t.p_stages) + 8 * t.bj + 32 <= limit end
  if not fits() then t.p_stages = 0 end
  if not fits() then t.bj = 32 end
  if not fits() then t.fused, t.kv_split, t.p_stages = 0, 0, 0 end
  return t
end

-- A deterministic context's tiles (lua/plan.lua): the choices that sum some
-- outputs by float atomics in no fixed order (the plan's unordered_outputs)
-- set to their ordered value, or refused where the caller's override named them.
function M.deterministic(t, named)
  for _, c in ipairs(keys.ordered()) do
    local key, value = c[1], c[2]
    if t[key] ~= value then
      if named[key] ~= nil then
        return string.format("%s=%d sums outputs by float atomics, their last bits varying from run to run; this "
                             .. "context is deterministic (options.deterministic, ATTNBWD_DETERMINISTIC=1): %s=%d",
                             key, t[key], key, value)
      end
      t[key] = value
    end
  end
end

function M.validate(shape, t, arch)
  if shape.seq_len > POS then
    return string.format("T=%d: longer than the 1024 positions of edit_region_bias (not supported yet)", shape.seq_len)
  end
  local bad = keys.check_values(t)
  if bad then return bad end
  if t.precision ~= shape.precision then -- e.g. a tuning entry of another precision: never the wrong kernel
    return string.format("precision=%d, but the shape asks for precision %d", t.precision,
                         shape.precision)
  end
  if t.kv_split == 1 and t.fused ~= 1 then return "kv_split=1 (gV and gK on separate warps) is for fused=1" end
  if t.p_stages ~= 0 and t.fused ~= 1 then return "p_stages is for fused=1" end
  if t.pdl ~= 0 and not pdl_arch(arch) then
    return "pdl=" .. t.pdl .. " (programmatic dependent launch) needs sm_90 or newer; " .. arch .. " has none"
  end
  if t.wg == 1 and (t.precision == 1 or t.fused ~= 1) then
    return "wg=1 (wgmma products) is for precision 0 (tf32) or 2 (fp16) with fused=1"
  end
  if t.wg == 1 and not wgmma_arch(arch) then return "wg=1 needs sm_90 (wgmma); " .. arch .. " has none" end
  local n = limits.arch_number(arch)
  if n and n < 80 then
    return arch .. ": the tensor-core instructions (mma.sync m16n8k8 TF32, m16n8k16 fp16) need sm_80 or newer"
  end
  if att_on_wg(t) then
    local multi = t.att_kb == 2 and t.att_items ~= 1 and 1 or 0 -- v of two items in shared memory
    local bytes = attention_wg_smem(t.p_stages, t.att_tma, t.att_kb, multi, t.att_f16 == 1 and t.precision == 2)
    if bytes > smem_limit(arch) then
      return string.format("the attention pass on wgmma needs %d bytes of shared memory; %s allows %d",
                           bytes, arch or "sm_90", smem_limit(arch))
    end
  elseif t.fused == 1 and attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32 > smem_limit(arch) then
    return string.format("the attention pass needs %d bytes of shared memory; %s allows %d "
                         .. "(try bj=32, fewer p_stages or fused=0)",
                         attention_smem(t.bj, t.gs_store, t.p_stages), arch or "sm_90", smem_limit(arch))
  end
  return nil
end

-- The heuristic's choice first (explore reports the others against it),
-- then each of the registry's variations laid over it that validates.
function M.candidates(shape)
  local render_key = render.tiles_string
  local first = M.heuristic(shape)
  local out, seen = { first }, { [render_key(first)] = true }
  for _, over in ipairs(keys.variations(shape, first)) do
    local t = M.heuristic(shape)
    for k, v in pairs(over) do t[k] = v end
    if not seen[render_key(t)] and not M.validate(shape, t) then
      seen[render_key(t)] = true
      out[#out + 1] = t
    end
  end
  return out
end

function M.plan(shape, t, arch) return plans.plan(shape, t, arch) end

return M
