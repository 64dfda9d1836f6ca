-- What problem 2's kernels need of a device, shared by the tile choices
-- (lua/edit_attention.lua) and the plan (lua/edit_attention_plan.lua): the
-- problem's fixed sizes, the shared memory an architecture allows and the
-- attention pass asks for, and which instructions an architecture has.
local attnbwd = require "attnbwd"

local M = {}

M.H, M.D, M.HID, M.QKV, M.POS = 16, 64, 1024, 3072, 1024
M.COL_SPLIT = 64 -- the bias column sums' row slices
M.SMS = 132 -- the H200's SMs: the tiles are sized for its waves
local D = M.D

function M.ceil_div(a, b) return (a + b - 1) // b end

-- An architecture's number ("sm_86" -> 86); nil arch: the H200's, 90; nil
-- where the name is not sm_NN.
function M.arch_number(arch) return tonumber((arch or "sm_90"):match("^sm_(%d+)")) end

-- Shared memory one block may use (bytes) on an architecture, after opting in
-- past 48 KiB: what the kernels must fit. nil arch: the H100/H200's, which
-- the library also holds every plan to (gen/gen.h's GEN_MAX_SHARED_BYTES).
function M.smem_limit(arch)
  local n = M.arch_number(arch)
  if not n then return attnbwd.max_shared_bytes end
  if n == 86 or n == 89 or n == 120 then return 99 * 1024 end
  if n == 80 or n == 87 then return 163 * 1024 end
  if n >= 90 then return attnbwd.max_shared_bytes end
  return 48 * 1024
end

-- Blocks an SM a kernel asks ptxas to allow for (__launch_bounds__' second
-- argument): 2 where two blocks of `bytes` shared memory (dynamic and static)
-- fit an SM, which has a block's limit and 1 KiB more and reserves 1 KiB a
-- block; else 1.
function M.min_blocks(bytes, arch)
  return 2 * (bytes + 1024) <= M.smem_limit(arch) + 1024 and 2 or 1
end

-- Dynamic shared memory of the attention pass (templates/attention_fused.cu's
-- SMEM_FLOATS); its static arrays take 8 * bj + 32 bytes more. p_stages > 0:
-- a ring of that many P and Pd tiles instead of the one Pd tile.
function M.attention_smem(bj, gs_store, p_stages)
  local tiles = p_stages > 0 and 1 + 2 * p_stages or 2 -- gS, then Pd or the rings
  local floats = bj * (D + 4) + 2 * 64 * (D + 8) + 2 * 64 * (D + 4) + tiles * 64 * (bj + 8) +
                 (gs_store == 1 and 0 or bj * (D + 8)) -- k_j only for gQ inside the kernel
  return floats * 4
end

-- Dynamic shared memory of the attention pass on wgmma (the SMEM_FLOATS of
-- templates/attention_wg_rows.cu, att_kb=1, or attention_wg_keys.cu, att_kb=2,
-- plus the 1 KiB its swizzled tiles may need to reach a 1024-byte boundary).
-- The ring's P tiles have rows of 68 floats; att_tma adds a barrier per slot.
-- att_kb=1: each warpgroup has two step buffers, its rows and their barrier;
-- att_kb=2: each has its own v_j and ring, and they share three step
-- buffers, the rows and their barrier (multi: v of two items, att_items);
-- att_kb=3 has blocks of both.
function M.attention_wg_smem(p_stages, att_tma, att_kb, multi, f16)
  local ring = p_stages * 2 * 32 * 68 + (att_tma == 1 and p_stages * 2 or 0) -- a warpgroup's ring and barriers
  local v_tile = 64 * 32 -- 64 keys x 64 d in fp16, or x 32 d in fp32
  -- f16: v's fp32 staging once, and its fp16 tiles (two with multi)
  local rows = 2 * v_tile + (f16 and v_tile or 0) + 4 * (2 * 32 * 32 + 2 * 64 * 32) + 2 * ring + 2 * 8 * 128 * 4 + 2 * 2
  local keys_v = f16 and 2 * 2 * v_tile + (multi == 1 and 2 or 1) * 2 * v_tile or (multi == 1 and 2 or 1) * 2 * 2 * v_tile
  local keys = keys_v + 3 * (2 * 32 * 32 + 2 * 64 * 32) + 2 * ring + 4 * 32 * 32 + 2
  local floats = att_kb == 1 and rows or att_kb == 2 and keys or math.max(rows, keys)
  return floats * 4 + 1024
end

-- wg_att = 1 takes effect where the wgmma pass applies (the products on
-- wgmma, which validation allows in TF32 and fp16 only; gS stored, 64 keys
-- per block, a ring of two P tiles); elsewhere the mma.sync pass runs. The
-- wgmma pass's products are TF32's, or fp16's where att_f16_on says.
function M.att_on_wg(t)
  return t.wg_att == 1 and t.wg == 1 and t.gs_store == 1 and t.bj == 64 and t.p_stages == 2
end

-- att_f16 = 1 takes effect where the wgmma pass runs in fp16 precision with
-- gS in fp32 (gs_half's scale reads v's fp32 tiles): its products then take
-- fp16 operands.
function M.att_f16_on(t, gs_half) return M.att_on_wg(t) and t.att_f16 == 1 and t.precision == 2 and not gs_half end

-- Hopper's warpgroup MMA (wgmma) needs the arch-specific target sm_90a, so
-- only the sm_90 devices (H100, H200) get it; nil arch: the H200's.
function M.wgmma_arch(arch) return arch == nil or arch == "sm_90" end

-- Programmatic dependent launch (griddepcontrol) came with sm_90; nil arch: the H200.
function M.pdl_arch(arch)
  local n = M.arch_number(arch)
  return n ~= nil and n >= 90
end

return M
