-- Problem 2, region-aware self-attention with edit bias, backward: the
-- kernels of one (B, T) and the order they run in (spec:
-- docs/spec/edit_attention_bwd.md).
--
-- fused = 1 (the default):
--   gA = grad_output @ out_weight                  grad_out_weight = grad_output^T @ attention_output
--   D = rowsum(Pd*gPd) = gA_h . attention_output_h  (one dot product per row)
--   one pass over P and Pd per (b, h, bj keys) (templates/attention_fused.cu):
--     gPd, gS, gK and gV into grad_qkv; with gs_store = 1 (the default) it writes
--     gS to the workspace, then the edit-bias sums (fixed order) and
--     gQ = scale gS k (a batched product) follow; gs_store = 0 adds gQ and the
--     bias into their outputs with float atomics inside the pass instead
--   grad_hidden_states = grad_qkv @ qkv_weight     grad_qkv_weight = grad_qkv^T @ hidden_states
--   the two bias gradients as column sums
-- The projection products run on tensor cores with tiles and a split of K
-- chosen here for each product's M, N, K: mma.sync (templates/gemm_tc.cu), or
-- with wg = 1 (TF32 on sm_90) wgmma (templates/gemm_wg.cu) after a rounded
-- transpose of B, where the model says that is faster.
-- fused = 0: the first, correct-first sequence (ten batched 64x64 products and
-- separate softmax-backward and bias kernels), kept to compare against.
--
-- Matrix products on tensor cores (TF32, or fp16 operands; fp32 accumulation)
-- or exact fp32. Each launch names its arguments: "in:NAME" / "out:NAME" (the
-- fields of attnbwd_edit_attention_args), "ws:BYTES" (workspace offset),
-- "f32:NAME" (a scalar of the args, or "one"), "i64:N", "i32:N".
local render = require "render"

local M = {}

local H, D, HID, QKV, POS = 16, 64, 1024, 3072, 1024
local COL_SPLIT = 64

local function ceil_div(a, b) return (a + b - 1) // b end

local SMS = 132 -- the H200's SMs: the tiles below are sized for its waves

-- Shared memory one block may use (bytes) on an architecture, after opting in
-- past 48 KiB: what the kernels must fit. nil arch: the H100/H200's.
local function smem_limit(arch)
  local n = tonumber((arch or "sm_90"):match("^sm_(%d+)"))
  if not n then return 227 * 1024 end
  if n == 86 or n == 89 or n == 120 then return 99 * 1024 end
  if n == 80 or n == 87 then return 163 * 1024 end
  if n >= 90 then return 227 * 1024 end
  return 48 * 1024
end

-- Dynamic shared memory of the attention pass (templates/attention_fused.cu's
-- SMEM_FLOATS); its static arrays take 8 * bj + 32 bytes more. p_stages > 0:
-- a ring of that many P and Pd tiles instead of the one Pd tile.
local function attention_smem(bj, gs_store, p_stages)
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
-- buffers, the rows and their barrier.
local function attention_wg_smem(p_stages, att_tma, att_kb)
  local ring = p_stages * 2 * 32 * 68 + (att_tma == 1 and p_stages * 2 or 0) -- a warpgroup's ring and barriers
  local floats
  if att_kb == 1 then
    floats = 2 * 64 * 32 + 4 * (2 * 32 * 32 + 2 * 64 * 32) + 2 * ring + 2 * 8 * 128 * 4 + 2 * 2
  else
    floats = 2 * 2 * 64 * 32 + 3 * (2 * 32 * 32 + 2 * 64 * 32) + 2 * ring + 4 * 32 * 32 + 2
  end
  return floats * 4 + 1024
end

-- wg_att = 1 takes effect where the wgmma pass applies (TF32 products on
-- wgmma, gS stored, 64 keys per block, a ring of two P tiles); elsewhere the
-- mma.sync pass runs.
local function att_on_wg(t)
  return t.wg_att == 1 and t.wg == 1 and t.gs_store == 1 and t.bj == 64 and t.p_stages == 2
end

-- Hopper's warpgroup MMA (wgmma) needs the arch-specific target sm_90a, so
-- only the sm_90 devices (H100, H200) get it; nil arch: the H200's.
local function wgmma_arch(arch) return arch == nil or arch == "sm_90" end

-- Programmatic dependent launch (griddepcontrol) came with sm_90; nil arch: the H200.
local function pdl_arch(arch)
  local n = tonumber((arch or "sm_90"):match("^sm_(%d+)"))
  return n ~= nil and n >= 90
end

function M.heuristic(shape, arch)
  -- 64 keys per attention block, P and Pd through a ring of two shared-memory
  -- buffers: measured on the 16 public workloads (2026-12-03, docs/
  -- benchmarks.md), bj=64 within 2% of the best everywhere, the ring 2-10%
  -- faster where T % 4 == 0 and, with rows copied from the 16-byte boundary
  -- before them, 0-5% faster at odd T. pdl=1 (third session): faster on all
  -- 16, 2-10% on the small ones; pdl=2 and a_smem=1 were not; gQ on wgmma
  -- (wg_gq) is 5-19% faster alone on 12 of 16 (docs/benchmarks.md).
  local t = { precision = shape.precision, col_split = COL_SPLIT, fused = 1, bj = 64, gs_store = 1,
              wg = (shape.precision == 0 and wgmma_arch(arch)) and 1 or 0, kv_split = 1, p_stages = 2,
              pdl = pdl_arch(arch) and 1 or 0, a_smem = 0 }
  t.wg_gq = t.wg -- gQ on wgmma wherever the products may be
  t.wg_att = t.wg -- the attention pass too
  t.tma = t.wg -- and the projection products fed by the TMA
  -- Their B transposed with 16-byte loads and stores (tr_vec=1): each
  -- transpose 2-35% faster alone; the whole backward 1.2% and 0.4% faster in
  -- geomean in two A/B runs, slower in both at B=1,T=373 and B=32,T=773 (1-4%)
  -- (docs/benchmarks.md, 2026-12-03, seventh session).
  t.tr_vec = 1
  -- P and Pd into the wgmma attention pass by the TMA where T % 4 ~= 0: there
  -- its 16-byte copies start before each row (p_shift) and the TMA was 0.8-2.4%
  -- faster on 6 of the 7 such public workloads (B=1,T=373 within the noise);
  -- where T % 4 == 0 it was slower on all 9, 1.1-4.0% on six (docs/benchmarks.md,
  -- 2026-12-03, sixth session).
  t.att_tma = (t.wg == 1 and shape.seq_len % 4 ~= 0) and 1 or 0
  t.zero_early = 1 -- grad_edit_region_bias's rows past T written at the start
  t.lane_pri = 0
  -- lane0=1: lane 0 on the caller's stream, so that its first kernel waits
  -- for no fork event. Measured (2026-12-04, A/B of the 16): where B*T <= 1152
  -- -5.8% to +5.7% (faster at B=4,T=288, B=2,T=449, B=2,T=352; slower at
  -- B=1,T=373, B=1,T=853, B=1,T=1024), and lane 0's first kernel still
  -- started 5-12 us after the side lanes' first; 1-7% slower on 9 of the other
  -- 10. So lane 0 keeps its stream of the greatest priority.
  t.lane0 = 0
  t.gs_pad = 4 -- gS rows padded to a multiple of this many floats
  -- The bias gradients' column sums made inside the TA products that read
  -- the same matrix (grad_qkv_weight's A is grad_qkv, grad_out_weight's is
  -- grad_output), where they are TMA-fed: no colsum_partial pass over it.
  -- 1: only where the product's K is split (or, pair > 0, it shares a
  -- launch). Measured (2026-12-04, A/B of the 16): 1.4-3.7% faster on three of the five with split products, 0.6-2.2%
  -- slower on most of the others, whose products leave SMs idle for the pass
  -- beside them (docs/benchmarks.md).
  t.gemm_bias = 1
  -- With att_tma=1: P and Pd asked for by another thread than the rows (0: the same).
  t.p_issuer = 0
  -- Two key blocks a block of the attention pass (att_kb=2, templates/
  -- attention_wg_keys.cu) where its blocks still fill the GPU twice over
  -- (B * 16 * ceil(NJ / 2) >= 256) with at least four key blocks a head, or
  -- where T >= 800. Measured (2026-12-04, A/B of the 16 in two runs, whole
  -- calls): 1.8-3.9% faster on the 8 workloads this picks, level at B=8,T=448,
  -- and slower on all the others (B=1,T=373 +20%, its pass on 48 SMs;
  -- B=2,T=768 +3%, 1.45 waves; B=16,T=176, NJ = 3, +4%) (docs/benchmarks.md).
  local nj = ceil_div(shape.seq_len, 64)
  t.att_kb = ((nj >= 4 and shape.batch * 16 * ceil_div(nj, 2) >= 256) or shape.seq_len >= 800) and 2 or 1
  -- gQ's tiles (wg_gq): 64 rows of gS a block where 128 would give fewer
  -- blocks than two an SM (small B*T: a block then waits alone on its loads).
  t.gq_bn = ceil_div(shape.seq_len, 128) * shape.batch * H < 2 * SMS and 64 or 128
  -- grad_hidden and grad_qkv_weight in one launch where B*T is small (each
  -- product a wave or two of tiles, which ran one after the other): 1.8-4.4%
  -- faster on 8 of the 11 public workloads with B*T <= 4096, 2.5-3.2% slower on
  -- two, geomean -1.0% (2026-12-04, docs/benchmarks.md).
  -- pair=2 (128x256 tiles only) measured the same (geomean of those 11 254.4
  -- against 254.7 us).
  t.pair = t.tma == 1 and shape.batch * shape.seq_len <= 4096 and 1 or 0
  -- gA TMA-fed where the model rates mma.sync faster (B*T < 1152 here):
  -- 0.7% slower over those 11, 4% at B=1,T=373 and B=2,T=352.
  t.ga_tma = 0
  -- grad_hidden, where TMA-fed, reads grad_qkv (its A) as stored, truncated
  -- to TF32 by the tensor cores, instead of its producer rounding each tile
  -- in shared memory. Measured (2026-12-04, A/B of the 16): geomean 455.0 ->
  -- 446.7 us, 2.3-5.1% faster on 8 of the 9 with B*T >= 2560; the checks of the
  -- 16 and of nine awkward shapes pass with match 1.000000 and the same worst
  -- errors. Rounding grad_qkv where it is written instead (the pass's gK and
  -- gV, gQ's epilogue) was as fast but put grad_qkv_bias, the sum of those
  -- rounded values over B*T rows, up to 0.16 off (99.7% within atol): removed.
  t.gh_trunc = 1
  t.pair_kv = 0 -- the pair in one launch after gQ
  -- gs_half=1: gS through the workspace in fp16 (scaled per (b, h, 64 keys)
  -- so that it cannot overflow, templates/attention_wg.cu's gs_exponent), its
  -- write and two reads halved (3.7 GB -> 1.8 GB at B=32,T=773). Correct
  -- (test_gpu_edit, also with grad_output times 2^16), but slower: measured
  -- (2026-12-04, A/B of the 16, whole calls) geomean 427.1 against 419.5 us,
  -- faster only at B=1,T=1024 (-2.5%). Alone, the bias sums ran 16-22%
  -- faster, gQ 8-24% slower (it widens each fp16 tile in shared memory,
  -- and was not bound by its reads: 2.7 TB/s in fp32) and the pass 7-12%
  -- slower but at B=32,T=773 (its prologue's maxima, and converts; its
  -- 16-bit stores are as many as the 32-bit ones). So gS stays fp32
  -- (docs/benchmarks.md).
  t.gs_half = 0
  -- gs_round=1: the wgmma pass stores gS rounded to TF32 and gQ reads it as
  -- stored. Measured (2026-12-04, seventeenth session): gQ alone 1-11% faster
  -- (geomean of the 16: 42.8 -> 40.8 us), whole calls level (421.9 / 421.5
  -- and 421.5 / 421.5 us in two A/B runs): gQ shares the GPU with the side
  -- lanes' transposes and bias sums, and on the small calls saves under a
  -- microsecond. So gS stays as computed; explore flips it.
  t.gs_round = 0
  t.side_start = 0 -- the side lanes after gA: mixed per workload (docs/lua-api.md; lua/tuning_h200.lua sets it on six)
  -- A device with less shared memory: no ring, then smaller key blocks, else the first sequence.
  local limit = smem_limit(arch)
  local function fits() return attention_smem(t.bj, 1, t.p_stages) + 8 * t.bj + 32 <= limit end
  if not fits() then t.p_stages = 0 end
  if not fits() then t.bj = 32 end
  if not fits() then t.fused, t.kv_split, t.p_stages = 0, 0, 0 end
  return t
end

-- The tile keys that take one of a few values, in the order they are
-- checked, each with what its values mean (the message of a bad one).
local CHOICES = {
  { "precision", { 0, 1, 2 }, "tf32, exact fp32, fp16 operands" },
  { "col_split", { COL_SPLIT }, "the bias column sums' row slices, fixed" },
  { "fused", { 0, 1 }, "one pass over P and Pd, or the first sequence" },
  { "bj", { 32, 64 }, "keys per attention block" },
  { "gs_store", { 0, 1 }, "gS through the workspace, or float atomics inside the pass" },
  { "wg", { 0, 1 }, "the products on wgmma where the model says so" },
  { "kv_split", { 0, 1 }, "gV and gK on separate warps" },
  { "p_stages", { 0, 2, 3 }, "P and Pd through registers, or a ring of 2 or 3 buffers in shared memory" },
  { "pdl", { 0, 1, 2 }, "none, placed as the kernel ahead ends, or placed early" },
  { "a_smem", { 0, 1 }, "wgmma's A from registers or from shared memory" },
  { "wg_gq", { 0, 1 }, "gQ on wgmma where wg=1 and gs_store=1" },
  { "wg_att", { 0, 1 }, "the attention pass on wgmma where wg=1, gs_store=1, bj=64 and p_stages=2" },
  { "zero_early", { 0, 1 }, "grad_edit_region_bias's rows past T written at the start, where gs_store=1" },
  { "tma", { 0, 1 }, "the wgmma products fed by the TMA, where wg=1" },
  { "tr_vec", { 0, 1 }, "the transposes of B with 16-byte loads and stores, where wg=1" },
  { "att_tma", { 0, 1 }, "P and Pd copied by the TMA in the attention pass on wgmma, where wg_att=1" },
  { "lane0", { 0, 1 }, "lane 0 on a stream of ours of the greatest priority, or on the caller's stream" },
  { "lane_pri", { 0, 1, 2 }, "lane 2's priority, grad_qkv_weight's: level with lane 1, halfway, the greatest" },
  { "gq_bn", { 64, 128 }, "rows of gS a block of gQ on wgmma takes" },
  { "p_issuer", { 0, 1 }, "with att_tma=1, P and Pd asked of the TMA by the thread that asks for the rows, "
                          .. "or by another warp's" },
  { "gemm_bias", { 0, 1, 2 }, "the bias gradients' column sums in a pass of their own, inside the TMA-fed TA "
                              .. "products where their K is split or they are paired, or inside them always" },
  { "gs_pad", { 4, 8, 32 }, "gS rows padded to a multiple of that many floats: 16, 32 or 128 bytes" },
  { "pair", { 0, 1, 2 }, "grad_hidden and grad_qkv_weight in one launch of TMA-fed blocks, where tma=1 "
                         .. "(2: 128x256 tiles only)" },
  { "ga_tma", { 0, 1 }, "gA TMA-fed wherever tma=1, or where the model rates it faster than mma.sync" },
  { "gh_trunc", { 0, 1 }, "grad_hidden's TMA producer rounds its A (grad_qkv) to TF32, or the tensor cores "
                          .. "truncate it" },
  { "side_start", { 0, 1 }, "the side lanes start with the call, or once gA is done" },
  { "att_kb", { 1, 2 }, "key blocks a block of the attention pass on wgmma: one, its rows split between the "
                        .. "two warpgroups, or two, one a warpgroup, their rows staged once" },
  { "pair_kv", { 0, 1 }, "the pair in one launch after gQ, or its k and v parts beside gQ and its q part after, "
                         .. "where pair > 0" },
  { "gs_half", { 0, 1 }, "gS in the workspace as fp32, or as fp16 times a power of two per (b, h, 64 keys), "
                         .. "where the attention pass and gQ run on wgmma" },
  { "gs_round", { 0, 1 }, "gS stored as computed, gQ's product rounding it to TF32, or stored rounded by the "
                         .. "attention pass on wgmma (fp32 gS), gQ on wgmma reading it as stored" },
}

-- "a, b or c"
local function listed(values)
  local s = tostring(values[1])
  for i = 2, #values do s = s .. (i == #values and " or " or ", ") .. tostring(values[i]) end
  return s
end

function M.validate(shape, t, arch)
  if shape.seq_len > POS then
    return string.format("T=%d: longer than the 1024 positions of edit_region_bias (not supported yet)", shape.seq_len)
  end
  for _, c in ipairs(CHOICES) do
    local key, values, meaning = c[1], c[2], c[3]
    local ok = false
    for _, v in ipairs(values) do ok = ok or t[key] == v end
    if not ok then
      return string.format("%s must be %s (%s)", key, listed(values), meaning)
    end
  end
  if t.precision ~= shape.precision then -- e.g. a tuning entry of another precision: never the wrong kernel
    return string.format("precision=%d, but the shape asks for precision %d", t.precision,
                         shape.precision)
  end
  if t.kv_split == 1 and t.fused ~= 1 then return "kv_split=1 (gV and gK on separate warps) is for fused=1" end
  if t.p_stages ~= 0 and t.fused ~= 1 then return "p_stages is for fused=1" end
  if t.pdl ~= 0 and not pdl_arch(arch) then
    return "pdl=" .. t.pdl .. " (programmatic dependent launch) needs sm_90 or newer; " .. arch .. " has none"
  end
  if t.wg == 1 and (t.precision ~= 0 or t.fused ~= 1) then
    return "wg=1 (wgmma products) is for precision 0 (tf32) with fused=1"
  end
  if t.wg == 1 and not wgmma_arch(arch) then return "wg=1 needs sm_90 (wgmma); " .. arch .. " has none" end
  if t.a_smem == 1 and t.wg ~= 1 then return "a_smem=1 (wgmma's A from shared memory) is for wg=1" end
  local n = arch and tonumber(arch:match("^sm_(%d+)"))
  if n and n < 80 then
    return arch .. ": the tensor-core instructions (mma.sync m16n8k8 TF32, m16n8k16 fp16) need sm_80 or newer"
  end
  if att_on_wg(t) then
    if attention_wg_smem(t.p_stages, t.att_tma, t.att_kb) > smem_limit(arch) then
      return string.format("the attention pass on wgmma needs %d bytes of shared memory; %s allows %d",
                           attention_wg_smem(t.p_stages, t.att_tma, t.att_kb), arch or "sm_90", smem_limit(arch))
    end
  elseif t.fused == 1 and attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32 > smem_limit(arch) then
    return string.format("the attention pass needs %d bytes of shared memory; %s allows %d "
                         .. "(try bj=32, fewer p_stages or fused=0)",
                         attention_smem(t.bj, t.gs_store, t.p_stages), arch or "sm_90", smem_limit(arch))
  end
  return nil
end

-- The heuristic's choice first (explore reports the others against it), then
-- the other key-block sizes, the float-atomic variant, and the first sequence.
function M.candidates(shape)
  local render_key = render.tiles_string
  local first = M.heuristic(shape)
  local out, seen = { first }, { [render_key(first)] = true }
  local function add(t)
    if not seen[render_key(t)] then
      seen[render_key(t)] = true
      out[#out + 1] = t
    end
  end
  for _, wg in ipairs { first.wg, 0 } do
    for _, store in ipairs { 1, 0 } do
      for _, bj in ipairs { 32, 64 } do
        local t = M.heuristic(shape)
        t.bj, t.gs_store, t.wg = bj, store, wg
        add(t)
      end
    end
  end
  for _, bj in ipairs { 32, 64 } do -- gV and gK on every warp (the default before 2026-12-03)
    local t = M.heuristic(shape)
    t.bj, t.kv_split = bj, 0
    add(t)
  end
  for _, stages in ipairs { 0, 2, 3 } do -- P and Pd through a ring in shared memory
    for _, bj in ipairs { 32, 64 } do
      local t = M.heuristic(shape)
      t.bj, t.p_stages = bj, stages
      if not M.validate(shape, t) then add(t) end
    end
  end
  if first.wg == 1 then -- wgmma's A (stored [M, K]) from registers or from shared memory; gQ on mma.sync
    local t = M.heuristic(shape)
    t.wg_att = 0 -- the attention pass on mma.sync
    add(t)
    t = M.heuristic(shape)
    t.a_smem = 1 - t.a_smem
    add(t)
    t = M.heuristic(shape)
    t.wg_gq = 0
    add(t)
    t = M.heuristic(shape)
    t.gq_bn = 192 - t.gq_bn -- gQ's blocks of 64 or 128 rows
    add(t)
    t = M.heuristic(shape)
    t.tma = 0 -- the wgmma products with every thread copying (templates/gemm_wg.cu)
    add(t)
    t = M.heuristic(shape)
    t.tr_vec = 1 - t.tr_vec -- the transposes of B with 16-byte or 4-byte accesses
    add(t)
    t = M.heuristic(shape)
    t.att_tma = 1 - t.att_tma -- P and Pd by the TMA, or by every thread of the attention pass (cp.async)
    add(t)
    t = M.heuristic(shape)
    t.att_kb = 3 - t.att_kb -- one or two key blocks a block of the attention pass
    add(t)
    t = M.heuristic(shape)
    t.gs_half = 1 - t.gs_half -- gS through the workspace in fp32 or fp16
    add(t)
    if first.att_tma == 1 then
      t = M.heuristic(shape)
      t.p_issuer = 1 - t.p_issuer -- P's copies asked for beside the rows', by another warp
      add(t)
    end
  end
  local late = M.heuristic(shape) -- all of grad_edit_region_bias written after the attention pass
  late.zero_early = 0
  add(late)
  for _, level in ipairs { 0, 1, 2 } do -- lane 2's priority
    local pri = M.heuristic(shape)
    pri.lane_pri = level
    add(pri)
  end
  for _, pad in ipairs { 4, 8, 32 } do -- gS rows on 16-, 32- or 128-byte boundaries
    local t = M.heuristic(shape)
    t.gs_pad = pad
    add(t)
  end
  for _, pair in ipairs { 0, 1, 2 } do -- grad_hidden and grad_qkv_weight in one launch, or each in its own
    local t = M.heuristic(shape)
    t.pair = pair
    add(t)
  end
  local ga = M.heuristic(shape) -- gA on mma.sync where the model says so, or TMA-fed
  ga.ga_tma = 1 - ga.ga_tma
  add(ga)
  local side = M.heuristic(shape) -- the side lanes after gA
  side.side_start = 1 - side.side_start
  add(side)
  local rounded = M.heuristic(shape) -- gS stored rounded to TF32, gQ reading it as stored
  rounded.gs_round = 1
  add(rounded)
  local kv = M.heuristic(shape) -- the pair's k and v parts beside gQ (where it pairs)
  kv.pair_kv = 1 - kv.pair_kv
  if kv.pair > 0 then add(kv) end
  for _, where in ipairs { 0, 1, 2 } do -- the bias gradients' column sums: own passes, in split products, in TA products
    local t = M.heuristic(shape)
    t.gemm_bias = where
    add(t)
  end
  local serial = M.heuristic(shape) -- each kernel placed only after the one before it ends
  serial.pdl = 0
  add(serial)
  local legacy = M.heuristic(shape)
  legacy.fused, legacy.wg, legacy.kv_split, legacy.p_stages = 0, 0, 0, 0
  add(legacy)
  return out
end

-- Tensor-core product tiles: block tile, warps, pipeline depth, the blocks
-- expected to share an SM (registers and shared memory allow) and the FLOP/s
-- per SM the model gives the tile (1.5e12 scaled by its measured efficiency).
-- Four warps of 64 x 64 outputs each read half the shared memory per MMA that
-- 64 x 32 warp tiles do (eight warps of those measured ~88 TFLOP/s on the H200).
local GEMM_CONFIGS = {
  { bm = 128, bn = 128, warps_m = 2, warps_n = 2, stages = 3, per_sm = 2, rate = 1.5e12 },
  { bm = 128, bn = 64, warps_m = 2, warps_n = 2, stages = 4, per_sm = 2, rate = 1.2e12 },
  { bm = 64, bn = 64, warps_m = 2, warps_n = 2, stages = 4, per_sm = 3, rate = 0.9e12 },
}
local GEMM_BK = 32
local SPLITS = { 1, 2, 3, 4, 6, 8, 12, 16 }

local function gemm_smem(c, ta, tb)
  local a = ta and GEMM_BK * (c.bm + 8) or c.bm * (GEMM_BK + 4)
  local b = tb and c.bn * (GEMM_BK + 4) or GEMM_BK * (c.bn + 8)
  return c.stages * (a + b) * 4
end

-- K in s slices of whole k tiles: the slice length, or nil where s slices of
-- it do not come out as s (or, split, are shorter than four k tiles).
local function k_slice(k, s)
  local kslice = ceil_div(ceil_div(k, s), GEMM_BK) * GEMM_BK
  if ceil_div(k, kslice) == s and (s == 1 or kslice >= 4 * GEMM_BK) then return kslice end
end
-- What a K split of s slices adds: the partial products written and read
-- back, the output written, and the reduce's launch.
local function split_cost(m, n, s) return s > 1 and (2 * s + 1) * m * n * 4 / 3e12 + 3e-6 or 0 end

-- The tiles and K split of one product with the least modelled time among
-- `configs` whose shared memory (smem(c) bytes) fits `limit`: waves of blocks,
-- each SM running `per_sm` of them at `rate` FLOP/s together, plus the traffic
-- of the partial products when K is split.
local function choose(configs, smem, m, n, k, limit)
  local best
  for _, c in ipairs(configs) do
    for _, s in ipairs(limit and smem(c) > limit and {} or SPLITS) do
      local kslice = k_slice(k, s)
      if kslice then
        local blocks = ceil_div(m, c.bm) * ceil_div(n, c.bn) * s
        local waves = ceil_div(blocks, SMS * c.per_sm)
        local time = waves * 2 * c.bm * c.bn * kslice / (c.rate / c.per_sm) + split_cost(m, n, s)
        if not best or time < best.time then best = { config = c, splits = s, kslice = kslice, time = time } end
      end
    end
  end
  return best
end

-- mma.sync tiles for op(A) [m, k] @ op(B) [k, n] (TA, TB: stored transposed).
function M.choose_gemm(m, n, k, ta, tb, limit)
  return choose(GEMM_CONFIGS, function(c) return gemm_smem(c, ta, tb) end, m, n, k, limit)
end

-- wgmma product tiles (templates/gemm_wg.cu): BM/64 warpgroups, BN columns,
-- STAGES k tiles of 32 in shared memory. `rate`: FLOP/s per SM in the units
-- of choose_gemm's model, from bench/gemm_lab.cu on the H200 (B=64,T=128 and
-- B=32,T=773 products): 128x256 reached 229-283 TFLOP/s, the others 193-236,
-- where the mma.sync 128x128 tile the model rates at 198 reached 135-185.
local WG_CONFIGS = {
  { bm = 128, bn = 256, stages = 4, per_sm = 1, rate = 2.4e12 },
  { bm = 64, bn = 256, stages = 5, per_sm = 1, rate = 1.95e12 },
  { bm = 128, bn = 128, stages = 6, per_sm = 1, rate = 1.95e12 },
  { bm = 256, bn = 128, stages = 4, per_sm = 1, rate = 1.95e12 },
}
local function wg_smem(c, ta, a_sw)
  local a = ta and GEMM_BK * (c.bm + 8) or c.bm * (a_sw and GEMM_BK or GEMM_BK + 4)
  return c.stages * (a + c.bn * GEMM_BK) * 4 + 1024 -- 1 KiB to align the swizzled tiles
end

-- wgmma tiles for op(A) [m, k] @ B [k, n], B read transposed; a_sw: A from
-- shared memory (not TA).
function M.choose_wg(m, n, k, ta, limit, a_sw)
  local best = choose(WG_CONFIGS, function(c) return wg_smem(c, ta, a_sw) end, m, n, k, limit)
  if best then best.wg = true end
  return best
end

-- TMA-fed wgmma tiles (templates/gemm_tma.cu): a producer warpgroup and BM/64
-- consumer warpgroups, STAGES k tiles of 32, RAW raw tiles of a TA operand.
-- `rate` from bench/gemm_lab.cu on the H200 (docs/benchmarks.md).
-- 128x256 reached 256-324 TFLOP/s there (the wgmma tiles above: 227-283),
-- 128x128 165-194.
local TMA_CONFIGS = {
  { bm = 128, bn = 256, stages = 4, raw = 2, per_sm = 1, rate = 2.7e12 },
  { bm = 128, bn = 128, stages = 6, raw = 2, per_sm = 1, rate = 1.6e12 },
}
-- Threads of a TMA-fed product's block: tc::gemm_tma_threads (a producer
-- warpgroup and BM/64 consumer warpgroups).
local function tma_threads(c) return c.bm // 64 * 128 + 128 end
local function tma_smem(c, ta)
  return (c.stages * (c.bm + c.bn) + (ta and c.raw * c.bm or 0)) * GEMM_BK * 4 + (3 * c.stages + c.raw) * 8 + 1024
end
function M.choose_tma(m, n, k, ta, limit)
  local best = choose(TMA_CONFIGS, function(c) return tma_smem(c, ta) end, m, n, k, limit)
  if best then best.wg, best.tma = true, true end
  return best
end

-- grad_hidden and grad_qkv_weight in one launch (pair > 0,
-- templates/gemm_tma_pair_kernel.cu): the tiles and K splits of both with the
-- least modelled time for the two together. Blocks of the product with the
-- longer ones go first; each block takes the SM that frees first (one block
-- an SM), and takes PAIR_BLOCK_SETUP beyond its tile's work (its prologue and
-- its tile's stores); split products add their reduce (split_cost), as
-- choose() does. wide_only (pair=2): 128x256 tiles only. Returns the choices of g1
-- and g2 (swapped: g2's blocks go first), or nil where none fits. splits1:
-- g1's K splits to choose from (pair_kv: 3, at the q | k | v boundaries).
local PAIR_BLOCK_SETUP, PAIR_SPLITS, PAIR_MAX_BLOCKS = 3e-6, { 1, 2, 3, 4 }, 8 * SMS
local function pair_makespan(n1, t1, n2, t2)
  -- The SMs as groups of equal load, least first: each step gives the least
  -- loaded group (or as many of its SMs as blocks are left) one block each.
  local groups = { { load = 0, count = SMS } }
  local function place(n, t)
    while n > 0 do
      local g = table.remove(groups, 1)
      local k = math.min(n, g.count)
      n = n - k
      if g.count > k then table.insert(groups, 1, { load = g.load, count = g.count - k }) end
      local load, i = g.load + t, 1
      while groups[i] and groups[i].load < load do i = i + 1 end
      if groups[i] and groups[i].load == load then groups[i].count = groups[i].count + k
      else table.insert(groups, i, { load = load, count = k }) end
    end
  end
  place(n1, t1)
  place(n2, t2)
  return groups[#groups].load
end
function M.choose_pair(g1, g2, limit, wide_only, splits1)
  local best
  local function options(g, splits)
    local out = {}
    for _, c in ipairs(TMA_CONFIGS) do
      if not (limit and tma_smem(c, g.ta) > limit) and not (wide_only and c.bn ~= 256) then
        for _, s in ipairs(splits or PAIR_SPLITS) do
          local kslice = k_slice(g.k, s)
          if kslice then
            out[#out + 1] = { config = c, splits = s, kslice = kslice, wg = true, tma = true,
                              blocks = ceil_div(g.m, c.bm) * ceil_div(g.n, c.bn) * s,
                              block_time = PAIR_BLOCK_SETUP + 2 * c.bm * c.bn * kslice / c.rate,
                              reduce = split_cost(g.m, g.n, s), smem = tma_smem(c, g.ta) }
          end
        end
      end
    end
    return out
  end
  local second = options(g2)
  for _, a in ipairs(options(g1, splits1)) do
    for _, b in ipairs(second) do
      if a.blocks + b.blocks <= PAIR_MAX_BLOCKS then
        local x, y = a, b
        if y.block_time > x.block_time then x, y = y, x end
        local time = pair_makespan(x.blocks, x.block_time, y.blocks, y.block_time) + a.reduce + b.reduce
        if not best or time < best.time then best = { time = time, a, b, swapped = x ~= a } end
      end
    end
  end
  return best
end

-- A plan being built: its workspace (named regions, each 256-byte aligned),
-- its launches in order and its source parts. Both plans below use one.
local function new_plan(shape, t)
  local p = { prefix = string.format("edit_attention_bwd_B%d_T%d_p%d", shape.batch, shape.seq_len, t.precision),
              ws = {}, ws_bytes = 0, launches = {}, parts = {}, lane = 0, waiting = {}, started = {}, events = {},
              n_events = 0 }
  function p.reserve(name, floats)
    p.ws[name] = p.ws_bytes
    p.ws_bytes = p.ws_bytes + ((floats * 4 + 255) // 256) * 256
  end
  -- The argument for a region of the workspace, `plus` floats into it.
  function p.wsp(name, plus) return "ws:" .. (p.ws[name] + (plus or 0) * 4) end
  function p.render(template, values) p.parts[#p.parts + 1] = render.render(template, values) end
  -- pdl (t.pdl = 1 or 2): a launch that follows another on its lane, with no
  -- event to wait for, may be placed on the SMs before that one ends (its
  -- kernel waits for it first: tc::pdl_enter), which hides the launch gap.
  function p.kernel(name, grid, args, block, smem)
    local waits = p.waiting[p.lane]
    p.launches[#p.launches + 1] = { name = p.prefix .. "_" .. name, grid = grid, block = block or { 256, 1, 1 },
                                    shared_bytes = smem or 0, args = args, lane = p.lane, waits = waits,
                                    pdl = t.pdl > 0 and p.started[p.lane] and not waits }
    p.waiting[p.lane] = nil
    p.started[p.lane] = true
  end
  -- Lanes: launches that follow p.on(n) run on lane n (0: the chain every
  -- output waits on; each lane a stream of its own, forked from the caller's
  -- and joined back, runtime/launch_edit_attention.c). p.signal
  -- names the point after the last launch; p.wait makes the next launch on
  -- the current lane start after that point.
  function p.on(lane) p.lane = lane end
  function p.signal(name)
    local last = p.launches[#p.launches]
    assert(last.lane == p.lane, "signal " .. name .. ": the last launch is on another lane")
    if not last.signal then
      last.signal, p.n_events = p.n_events, p.n_events + 1
    end
    p.events[name] = last.signal
  end
  function p.wait(name)
    local w = p.waiting[p.lane] or {}
    w[#w + 1] = assert(p.events[name], "wait on " .. name .. " before it is signalled")
    p.waiting[p.lane] = w
  end
  -- out [cols] = the sums of the nparts rows of partial sums in region part, in order.
  function p.colsum_final(part, out, cols, nparts)
    p.kernel("colsum_final", { ceil_div(cols, 256), 1, 1 }, { p.wsp(part), out, "i32:" .. cols, "i32:" .. nparts })
  end
  -- Column sums of x [rows, cols] into out, in two fixed-order steps (templates/colsum.cu).
  function p.colsum(x, out, rows, cols, part)
    part = part or "colpart"
    p.kernel("colsum_partial", { ceil_div(cols, 256), COL_SPLIT, 1 },
             { x, p.wsp(part), "i64:" .. rows, "i32:" .. cols })
    p.colsum_final(part, out, cols, COL_SPLIT)
  end
  -- The edit-bias gradients from gS (templates/edit_attention_bwd.cu): one
  -- bias_grads block per 256 // ct rows of a head (ct threads a row: its T
  -- columns in fours, whole warps), then one bias_final block per head.
  -- rows: 1024, or T where bias_zero_rows writes the rest.
  -- gsinv: gS's inverse scales where it is fp16 (gs_half), else "i64:0".
  function p.bias_sums(gs, rows, gsinv)
    rows = rows or POS
    local ct = ceil_div(ceil_div(shape.seq_len, 4), 32) * 32
    p.kernel("bias_grads", { ceil_div(rows, 256 // ct), H, 1 },
             { gs, "in:edit_region_mask", "out:grad_edit_region_bias", p.wsp("biaspart"), "i32:" .. rows,
               gsinv or "i64:0" })
    p.kernel("bias_final", { H, 1, 1 }, { p.wsp("biaspart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
  end
  function p.finish(arch, align)
    local first = p.launches[1]
    return {
      name = first.name, grid = first.grid, block = first.block, shared_bytes = first.shared_bytes,
      source = "// attnbwd " .. arch .. " " .. render.tiles_string(t) .. "\n" .. table.concat(p.parts, "\n"),
      launches = p.launches,
      workspace_bytes = p.ws_bytes,
      align = align,
      -- Each lane's stream: lane 0 (the chain) at the greatest priority (2),
      -- or (lane0=1) on the caller's stream (-1); lane 1 the least (0); lane 2
      -- (grad_qkv_weight, the last kernel on most small workloads) at
      -- lane_pri: above 0, its blocks go before the bias sums'.
      lane_priority = { t.lane0 == 1 and -1 or 2, 0, t.lane_pri },
    }
  end
  return p
end

local function plan_fused(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local p = new_plan(shape, t)
  local wsp = p.wsp
  local mode = ({ [0] = 1, [1] = 0, [2] = 2 })[t.precision]
  local NJ = ceil_div(T, t.bj)

  local products = {
    { name = "grad_attn_out", comment = "gA [BT,1024] = grad_output [BT,1024] @ out_weight [1024,1024]",
      m = BT, n = HID, k = HID, lda = HID, ldb = HID, ldc = HID, ta = false, tb = false,
      a = "in:grad_output", b = "in:out_weight", c = "ws:gA", rowdot = true },
    { name = "grad_out_weight", comment = "grad_out_weight [1024,1024] = grad_output^T @ attention_output",
      m = HID, n = HID, k = BT, lda = HID, ldb = HID, ldc = HID, ta = true, tb = false,
      a = "in:grad_output", b = "in:attention_output", c = "out:grad_out_weight",
      bias = "out:grad_out_bias", bias_part = "colpart_out" },
    { name = "grad_hidden", comment = "grad_hidden_states [BT,1024] = grad_qkv [BT,3072] @ qkv_weight [3072,1024]",
      m = BT, n = HID, k = QKV, lda = QKV, ldb = HID, ldc = HID, ta = false, tb = false,
      a = "ws:gqkv", b = "in:qkv_weight", c = "out:grad_hidden_states", b_early = true },
    { name = "grad_qkv_weight", comment = "grad_qkv_weight [3072,1024] = grad_qkv^T @ hidden_states",
      m = QKV, n = HID, k = BT, lda = QKV, ldb = HID, ldc = HID, ta = true, tb = false,
      a = "ws:gqkv", b = "in:hidden_states", c = "out:grad_qkv_weight", b_early = true,
      bias = "out:grad_qkv_bias", bias_part = "colpart_qkv" },
  }
  -- Each product on mma.sync, or (wg = 1) on wgmma with B transposed into
  -- the workspace as [N, K] (K padded to a multiple of 4 with zeros, rounded
  -- to TF32): whichever the model says is faster, the transpose included.
  for _, g in ipairs(products) do
    g.choice = M.choose_gemm(g.m, g.n, g.k, g.ta, g.tb, smem_limit(arch))
    if t.wg == 1 and not g.tb then
      g.a_sw = t.a_smem == 1 and not g.ta
      local w = M.choose_wg(g.m, g.n, g.k, g.ta, smem_limit(arch), g.a_sw)
      local fed = t.tma == 1 and M.choose_tma(g.m, g.n, g.k, g.ta, smem_limit(arch))
      if fed and fed.time < w.time then w = fed end
      -- The transpose, as measured with tr_vec=1 (8.1 us at 4 MB, 13.7 at 12,
      -- 27.8 at 32: 2.86 TB/s after 5.3 us; it was 2.6 TB/s after 9 us); a quarter of it
      -- where it runs on a side lane long before the product (qkv_weight for
      -- grad_hidden, hidden_states for grad_qkv_weight, both at the start):
      -- it only takes bandwidth from the others then.
      local transpose = 2 * g.n * g.k * 4 / 2.86e12 + 5.3e-6
      w.time = w.time + (g.b_early and 0.25 or 1) * transpose
      -- ga_tma=1: gA TMA-fed even where the model rates mma.sync faster.
      local forced = g.rowdot and t.ga_tma == 1 and fed
      if forced or w.time < g.choice.time then g.choice, g.kp = forced or w, ceil_div(g.k, 4) * 4 end
    end
  end
  -- pair > 0: grad_hidden and grad_qkv_weight, both TMA-fed, in one launch
  -- (their tiles and splits chosen together: M.choose_pair).
  -- pair_kv=1: the pair in two launches, its k and v parts (grad_hidden's K
  -- slices 2 and 3 of 1024, grad_qkv_weight's rows 1024..3071) beside gQ as
  -- soon as the pass has written gK and gV, its q part after gQ.
  local pair_kv = t.pair_kv == 1 and t.pair > 0 and t.tma == 1 and t.wg == 1 and t.gs_store == 1
  local pair = t.pair > 0 and t.tma == 1 and t.wg == 1 and
               M.choose_pair(products[3], products[4], smem_limit(arch), t.pair == 2, pair_kv and { 3 } or nil)
  if pair_kv and not (pair and pair[1].kslice == HID) then pair_kv = false end
  if pair then
    for i, g in ipairs { products[3], products[4] } do g.choice, g.kp = pair[i], ceil_div(g.k, 4) * 4 end
  end

  -- Workspace: gA [BT,1024], grad_qkv [BT,3072], D [B,16,T], within/cross
  -- partials, gS, bias partials, column-sum partials; per product its
  -- split-K partial products and its B transposed (wgmma): products may run
  -- side by side, so none shares a region with another.
  local gs_ld = ceil_div(T, t.gs_pad) * t.gs_pad -- gS rows, padded for 16-byte loads (at least)
  -- gs_half: gS in fp16 (half the floats), 1/f per (b, h, key block) in gsinv,
  -- |gA_i|^2 per row in gan (for f: templates/attention_wg.cu's gs_exponent).
  local gs_half = t.gs_half == 1 and att_on_wg(t) and t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1
  -- gs_round: gS stored rounded to TF32 by the wgmma pass, where gQ runs on wgmma too (fp32 gS).
  local gs_round = t.gs_round == 1 and att_on_wg(t) and t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1 and
                   not gs_half
  p.reserve("gA", BT * HID)
  p.reserve("gqkv", BT * QKV)
  p.reserve("rowdot", B * H * T)
  p.reserve("wcpart", B * H * NJ * 2)
  p.reserve("gs", t.gs_store == 1 and (gs_half and ceil_div(B * H * T * gs_ld, 2) or B * H * T * gs_ld) or 0)
  p.reserve("gan", gs_half and B * H * T or 0)
  p.reserve("gsinv", gs_half and B * H * NJ or 0)
  local gan = gs_half and wsp("gan") or "i64:0"
  local gsinv = gs_half and wsp("gsinv") or "i64:0"
  p.reserve("biaspart", H * POS * 2)
  p.reserve("colpart_out", COL_SPLIT * HID)
  p.reserve("colpart_qkv", COL_SPLIT * QKV)
  for _, g in ipairs(products) do
    if g.choice.splits > 1 then p.reserve("splitk_" .. g.name, g.choice.splits * g.m * g.n) end
    if g.choice.wg then p.reserve("tB_" .. g.name, g.n * g.kp) end
  end
  local function bind(spec) return spec:match("^ws:(%a+)$") and wsp(spec:sub(4)) or spec end

  -- gQ on wgmma (wg_gq = 1), as gQ^T = k^T gS^T: the keys [T, 64] are A
  -- stored transposed (through registers), gS's rows B, rounded in place.
  local gq_wg = t.wg_gq == 1 and t.wg == 1 and t.gs_store == 1
  local att_wg = att_on_wg(t) -- the attention pass on wgmma (templates/attention_wg.cu)
  local att_tma = att_wg and t.att_tma == 1 -- P and Pd into it by the TMA
  local any_wg = gq_wg or att_wg
  for _, g in ipairs(products) do any_wg = any_wg or g.choice.wg end
  if t.pdl == 2 then p.parts[#p.parts + 1] = "#define ATTNBWD_PDL_EARLY 1" end
  p.render("tc_common.cu", {})
  p.render("gemm_tc.cu", {})
  if any_wg then
    p.render("gemm_wg.cu", {})
    -- the attention pass names the mbarrier helpers even where P_TMA leaves them unused
    if t.tma == 1 or att_wg then p.render("tma.cu", {}) end
    if t.tma == 1 then p.render("gemm_tma.cu", {}) end
    p.render("transpose.cu", { PREFIX = p.prefix, VEC = t.tr_vec })
  end
  -- A wgmma product's B [K, N] -> its region [N, kp], zero-padded and
  -- rounded (templates/transpose.cu); nothing for an mma.sync product.
  local function transpose_b(g)
    if not g.choice.wg then return end
    p.kernel("transpose", { ceil_div(g.kp, 64), ceil_div(g.n, 64), 1 },
             { bind(g.b), wsp("tB_" .. g.name), "i64:" .. g.k, "i32:" .. g.n, "i64:" .. g.kp })
  end
  -- A product whose A's column sums are a bias gradient makes them itself
  -- (gemm_bias: TMA-fed TA products, templates/gemm_tma.cu), one row of sums
  -- per K slice, added in slice order by colsum_final: with gemm_bias=2
  -- always, 1 where its K is split or it is paired (pair > 0: the sums' own
  -- pass would otherwise be the call's last kernel on its lane).
  local function makes_sums(g, paired)
    return g.bias and g.ta and (t.gemm_bias == 2 or t.gemm_bias == 1 and (g.choice.splits > 1 or paired))
  end
  -- A TMA-fed product's template values (templates/gemm_tma.cu) and its
  -- arguments (A's map, B's map, output, column sums), and whether it makes
  -- its A's column sums.
  local function tma_product(g, paired)
    local c, split = g.choice.config, g.choice.splits > 1
    local sums = makes_sums(g, paired)
    local values = { M = g.m, N = g.n, K = g.k, LDC = g.ldc, TA = g.ta, BM = c.bm, BN = c.bn, STAGES = c.stages,
                     RAW = c.raw, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits, COLSUM = sums and true or false,
                     A_TRUNC = t.gh_trunc == 1 and g.a == "ws:gqkv" and not g.ta }
    -- Tensor maps "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:pointer" (runtime/launch_edit_attention.c).
    local map_a = g.ta and string.format("tmap:%d:%d:%d:%d:%d:0:", g.k, g.m, g.lda, GEMM_BK, c.bm)
                  or string.format("tmap:%d:%d:%d:%d:%d:1:", g.m, g.k, g.lda, c.bm, GEMM_BK)
    local map_b = string.format("tmap:%d:%d:%d:%d:%d:1:", g.n, g.kp, g.kp, c.bn, GEMM_BK)
    local out = split and wsp("splitk_" .. g.name) or bind(g.c)
    local colsum = not sums and "i64:0" or split and wsp(g.bias_part) or g.bias
    return values, { map_a .. bind(g.a), map_b .. wsp("tB_" .. g.name), out, colsum }, sums
  end
  -- After a product on its lane: the reduce of its K slices, its column sums' last step.
  local function finish_product(g, sums)
    local kname, split = p.prefix .. "_" .. g.name, g.choice.splits > 1
    if split and g.rowdot then -- gA: the row dots come with the reduce (no rowdot launch)
      p.render("splitk_reduce_rowdot_kernel.cu", { NAME = kname .. "_reduce", T = shape.seq_len, BT = g.m,
                                                   SPLITS = g.choice.splits, NORMS = gs_half and 1 or 0 })
      p.kernel(g.name .. "_reduce", { ceil_div(g.m * H * 32, 256), 1, 1 },
               { wsp("splitk_" .. g.name), bind(g.c), "in:attention_output", wsp("rowdot"), gan })
    elseif split then
      p.render("splitk_reduce_kernel.cu", {
        NAME = kname .. "_reduce", GEMM = g.name, NELEM = g.m * g.n, SPLITS = g.choice.splits })
      p.kernel(g.name .. "_reduce", { ceil_div(g.m * g.n // 4, 256), 1, 1 },
               { wsp("splitk_" .. g.name), bind(g.c), "f32:one" })
    end
    if sums and split then p.colsum_final(g.bias_part, g.bias, g.m, g.choice.splits) end
  end
  -- One product in its own launch; true where it made its column sums.
  local function gemm(g)
    local c, kname = g.choice.config, p.prefix .. "_" .. g.name
    local grid = { ceil_div(g.n, c.bn), ceil_div(g.m, c.bm), g.choice.splits }
    local out = g.choice.splits > 1 and wsp("splitk_" .. g.name) or bind(g.c)
    local sums = false
    if g.choice.tma then
      local values, args
      values, args, sums = tma_product(g)
      values.NAME, values.COMMENT = kname, g.comment .. "; B transposed"
      p.render("gemm_tma_kernel.cu", values)
      p.kernel(g.name, grid, { args[1], args[2], args[3], "f32:one", args[4] },
               { tma_threads(c), 1, 1 }, tma_smem(c, g.ta))
    elseif g.choice.wg then
      p.render("gemm_wg_kernel.cu", {
        NAME = kname, COMMENT = g.comment .. "; B transposed", M = g.m, N = g.n, K = g.k, LDA = g.lda,
        LDB = g.kp, LDC = g.ldc, TA = g.ta, BM = c.bm, BN = c.bn, STAGES = c.stages, KSPLIT = g.choice.kslice,
        SPLITS = g.choice.splits, A_SW = g.a_sw,
      })
      p.kernel(g.name, grid, { bind(g.a), wsp("tB_" .. g.name), out, "f32:one" }, { c.bm // 64 * 128, 1, 1 },
               wg_smem(c, g.ta, g.a_sw))
    else
      p.render("gemm_tc_kernel.cu", {
        NAME = kname, COMMENT = g.comment, M = g.m, N = g.n, K = g.k, LDA = g.lda, LDB = g.ldb, LDC = g.ldc,
        TA = g.ta, TB = g.tb, MODE = mode, BM = c.bm, BN = c.bn, BK = GEMM_BK, WARPS_M = c.warps_m,
        WARPS_N = c.warps_n, STAGES = c.stages, KSPLIT = g.choice.kslice, SPLITS = g.choice.splits,
      })
      p.kernel(g.name, grid, { bind(g.a), bind(g.b), out, "f32:one" }, { c.warps_m * c.warps_n * 32, 1, 1 },
               gemm_smem(c, g.ta, g.tb))
    end
    finish_product(g, sums)
    return sums
  end
  -- Two TMA-fed products in one launch (pair > 0), g1's blocks first, then
  -- each one's reduce and sums on the lane; returns whether each made its sums.
  -- part (pair_kv): nil for all of both; "kv" or "q" for the blocks of that
  -- part (the caller then finishes the products after both parts).
  local function gemm_pair(g1, g2, part)
    local name = g1.name .. "_and_" .. g2.name .. (part and "_" .. part or "")
    local v1, a1, s1 = tma_product(g1, true)
    local v2, a2, s2 = tma_product(g2, true)
    local values = { NAME = p.prefix .. "_" .. name, NAME1 = g1.name, NAME2 = g2.name, COMMENT1 = g1.comment,
                     COMMENT2 = g2.comment }
    for k, v in pairs(v1) do values[k .. "1"] = v end
    for k, v in pairs(v2) do values[k .. "2"] = v end
    -- Each product's blocks: K slices [S0, S0 + NS) x tile rows [Y0, Y0 + NY).
    local blocks = 0
    for i, g in ipairs { g1, g2 } do
      local c = g.choice
      local s0, ns, y0, ny = 0, c.splits, 0, ceil_div(g.m, c.config.bm)
      if part and g.name == "grad_hidden" then -- K slices of 1024: q, k, v
        if part == "kv" then s0, ns = 1, 2 else s0, ns = 0, 1 end
      elseif part then -- grad_qkv_weight's rows: q's the first 1024
        local q_rows = HID // c.config.bm
        if part == "kv" then y0, ny = q_rows, ny - q_rows else ny = q_rows end
      end
      values["S0" .. i], values["NS" .. i], values["Y0" .. i], values["NY" .. i] = s0, ns, y0, ny
      blocks = blocks + ceil_div(g.n, c.config.bn) * ny * ns
    end
    p.render("gemm_tma_pair_kernel.cu", values)
    p.kernel(name, { blocks, 1, 1 },
             { a1[1], a1[2], a1[3], a1[4], a2[1], a2[2], a2[3], a2[4], "f32:one" },
             { tma_threads(g1.choice.config), 1, 1 }, math.max(g1.choice.smem, g2.choice.smem))
    if not part then
      finish_product(g1, s1)
      finish_product(g2, s2)
    end
    return s1, s2
  end

  -- Three lanes. Lane 0 (the stream of greatest priority) is the chain
  -- every output waits on: gA, the attention pass, gQ, grad_hidden. What needs only the
  -- inputs (grad_out_weight, grad_out_bias, the transposed weights) runs on
  -- lanes 1 and 2 beside it, and what needs only gS or grad_qkv (the bias
  -- sums, grad_qkv_weight, grad_qkv_bias) beside the rest of the chain. Most
  -- of these kernels fill a fraction of the GPU on small shapes; side by side
  -- they fill it together. Launches are issued in the order the chain needs.
  local gattn, gow, ghid, gqw = products[1], products[2], products[3], products[4]
  transpose_b(gattn)
  gemm(gattn)
  -- side_start=1: the side lanes start once gA (and its reduce) is done, so
  -- that gA's blocks find the SMs free instead of behind theirs.
  if t.side_start == 1 then p.signal("grad_attn_out") end
  p.on(1)
  if t.side_start == 1 then p.wait("grad_attn_out") end
  transpose_b(ghid)
  if ghid.choice.wg then p.signal("ghid_b") end
  transpose_b(gow)
  if not gemm(gow) then p.colsum("in:grad_output", "out:grad_out_bias", BT, HID, "colpart_out") end
  p.on(2)
  if t.side_start == 1 then p.wait("grad_attn_out") end
  transpose_b(gqw)
  if pair then p.signal("gqw_b") end
  local zero_early = t.zero_early == 1 and t.gs_store == 1 and T < POS
  if zero_early then -- grad_edit_region_bias's rows past T, while the products run
    p.kernel("bias_zero_rows", { ceil_div((POS - T) * POS // 4, 256), H, 1 }, { "out:grad_edit_region_bias" })
    p.signal("bias_zero")
  end
  p.on(0)
  if gattn.choice.splits == 1 then -- else gA's reduce made the row dots
    p.kernel("rowdot", { ceil_div(BT * H, 32), 1, 1 }, { wsp("gA"), "in:attention_output", wsp("rowdot"), gan }) -- 32 units a block
  end
  if t.gs_store == 0 then -- the red.add targets start at zero
    p.kernel("zero", { ceil_div(H * POS * POS // 4, 256), 1, 1 },
           { "out:grad_edit_region_bias", "i64:" .. H * POS, "i32:" .. POS, "i64:" .. POS })
    p.kernel("zero", { ceil_div(BT * HID // 4, 256), 1, 1 }, { wsp("gqkv"), "i64:" .. BT, "i32:" .. HID, "i64:" .. QKV })
  end

  if att_wg then
    -- With att_tma, P and Pd through tensor maps over [B*16*T/4, 4T]: four rows
    -- of P per map row, since T floats are not a multiple of 16 bytes at odd T;
    -- boxes of 8 x 68, not swizzled (templates/attention_wg.cu).
    local p_map = string.format("tmap:%d:%d:%d:8:68:0:", B * H * T // 4, 4 * T, 4 * T)
    local probs = att_tma and p_map .. "in:attention_probs" or "in:attention_probs"
    local dropped = att_tma and p_map .. "in:attention_probs_dropped" or "in:attention_probs_dropped"
    -- gA and q rows through tensor maps too: boxes of 32 rows x 32 floats, swizzled.
    local ga_map = string.format("tmap:%d:%d:%d:32:32:1:", BT, HID, HID) .. wsp("gA")
    local q_map = string.format("tmap:%d:%d:%d:32:32:1:", B * H * T, D, D) .. "in:query"
    p.kernel("attention_wg", { ceil_div(NJ, t.att_kb), B * H, 1 },
           { ga_map, wsp("rowdot"), q_map, "in:value", probs, dropped,
             "in:attention_mask", wsp("gqkv"), wsp("gs"), "f32:scale", gan, gsinv, "f32:dropout_p" }, nil,
           attention_wg_smem(t.p_stages, att_tma and 1 or 0, t.att_kb))
  else
    p.kernel("attention", { NJ, B * H, 1 },
           { wsp("gA"), wsp("rowdot"), "in:query", "in:key", "in:value", "in:attention_probs",
             "in:attention_probs_dropped", "in:attention_mask", "in:edit_region_mask", wsp("gqkv"),
             -- grad_edit_region_bias: summed into with gs_store=0 only (else unused: gs in its place)
             t.gs_store == 0 and "out:grad_edit_region_bias" or wsp("gs"), wsp("wcpart"), wsp("gs"), "f32:scale" },
           nil,
           attention_smem(t.bj, t.gs_store, t.p_stages))
  end
  p.signal("attention")
  if t.gs_store == 0 then
    p.kernel("within_cross", { H, 1, 1 }, { wsp("wcpart"), "out:grad_within_edit_bias", "out:grad_cross_edit_bias" })
    p.signal("grad_qkv")
  else
    p.on(1)
    p.wait("attention")
    if zero_early then p.wait("bias_zero") end -- long done; orders the two writers of the output
    p.bias_sums(wsp("gs"), zero_early and T or POS, gsinv)
    p.on(0)
    -- gQ [b,h] = scale * gS [T,T] @ k [T,64], straight into grad_qkv[:, h*64 : h*64+64].
    local kname = p.prefix .. "_grad_query"
    if gq_wg then
      local w = { bm = 64, bn = t.gq_bn, stages = 4 }
      p.render("gemm_wg_batched_kernel.cu", {
        NAME = kname, COMMENT = "gQ^T = scale * k_h^T @ gS^T per (b, h), stored as gQ into grad_qkv[:, 0:1024]",
        M = D, N = T, K = T, LDA = D, LDB = gs_ld, LDC = QKV, BM = w.bm, BN = w.bn, STAGES = w.stages,
        KSPLIT = ceil_div(T, GEMM_BK) * GEMM_BK, INNER = H, SA1 = H * T * D, SA0 = T * D, SB1 = H * T * gs_ld,
        SB0 = T * gs_ld, SC1 = T * QKV, SC0 = D, B_T = gs_half and "unsigned short" or "float", NKB = NJ,
        B_RAW = not gs_round,
      })
      -- gs_half: the inverse scales of the K blocks follow the stages.
      local smem = wg_smem(w, true) + (gs_half and 4 * NJ or 0)
      p.kernel("grad_query", { ceil_div(T, w.bn), 1, B * H },
               { "in:key", wsp("gs"), wsp("gqkv"), "f32:scale", gsinv }, { w.bm // 64 * 128, 1, 1 }, smem)
    else
      local c = GEMM_CONFIGS[3]
      p.render("gemm_tc_batched_kernel.cu", {
        NAME = kname, COMMENT = "gQ = scale * gS @ k_h per (b, h), into grad_qkv[:, 0:1024]",
        M = T, N = D, K = T, LDA = gs_ld, LDB = D, LDC = QKV, TA = false, TB = false, MODE = mode,
        BM = c.bm, BN = c.bn, BK = GEMM_BK, WARPS_M = c.warps_m, WARPS_N = c.warps_n, STAGES = c.stages,
        KSPLIT = ceil_div(T, GEMM_BK) * GEMM_BK, INNER = H,
        SA1 = H * T * gs_ld, SA0 = T * gs_ld, SB1 = H * T * D, SB0 = T * D, SC1 = T * QKV, SC0 = D,
      })
      p.kernel("grad_query", { 1, ceil_div(T, c.bm), B * H }, { wsp("gs"), "in:key", wsp("gqkv"), "f32:scale" },
               { c.warps_m * c.warps_n * 32, 1, 1 }, gemm_smem(c, false, false))
    end
    p.signal("grad_qkv")
  end
  -- grad_qkv_bias in a pass of its own on lane 1, where grad_qkv_weight does not make it.
  local function qkv_bias_pass()
    p.on(1)
    p.wait("grad_qkv")
    p.colsum(wsp("gqkv"), "out:grad_qkv_bias", BT, QKV, "colpart_qkv")
  end
  if pair then -- on the chain, after gQ: grad_qkv is complete
    if not makes_sums(gqw, true) then qkv_bias_pass() end
    local g1, g2 = ghid, gqw
    if pair.swapped then g1, g2 = gqw, ghid end
    if pair_kv then -- the k and v parts beside gQ, as soon as the pass has written gK and gV
      p.on(2)
      p.wait("attention")
      p.wait("ghid_b")
      gemm_pair(g1, g2, "kv")
      p.signal("pair_kv")
    end
    p.on(0)
    p.wait("ghid_b")
    p.wait("gqw_b")
    if pair_kv then -- the q part, then both products finished
      local s1, s2 = gemm_pair(g1, g2, "q")
      p.wait("pair_kv")
      finish_product(g1, s1)
      finish_product(g2, s2)
    else
      gemm_pair(g1, g2)
    end
  else
    p.on(2)
    p.wait("grad_qkv")
    if not gemm(gqw) then qkv_bias_pass() end
    p.on(0)
    if ghid.choice.wg then p.wait("ghid_b") end
    gemm(ghid)
  end

  -- Two attention blocks per SM where two fit (each also holds 1 KiB the
  -- system reserves); the kernel then keeps to 128 registers.
  local att_bytes = attention_smem(t.bj, t.gs_store, t.p_stages) + 8 * t.bj + 32 + 1024
  p.render("attention_fused.cu", { B = B, T = T, BJ = t.bj, MODE = mode, PREFIX = p.prefix,
                                   STORE_GS = t.gs_store, GS_LD = gs_ld, KV_SPLIT = t.kv_split, P_STAGES = t.p_stages,
                                   MIN_BLOCKS = 2 * att_bytes <= smem_limit(arch) + 1024 and 2 or 1,
                                   SYNC_PASS = not att_wg, ROW_NORMS = gs_half and 1 or 0 })
  if att_wg then
    local values = { B = B, T = T, PREFIX = p.prefix, GS_LD = gs_ld, P_STAGES = t.p_stages,
                     P_TMA = att_tma and 1 or 0, P_ISSUER = t.p_issuer, GS_HALF = gs_half and 1 or 0,
                     GS_ROUND = gs_round and 1 or 0 }
    p.render("attention_wg.cu", values)
    p.render(t.att_kb == 1 and "attention_wg_rows.cu" or "attention_wg_keys.cu", values)
  end
  if t.gs_store == 1 then
    p.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = p.prefix, GS_LD = gs_ld, GS_HALF = gs_half and 1 or 0 })
  end
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 1 })
  local plan = p.finish(arch, 16) -- cp.async reads 16 bytes at a time
  if any_wg then plan.compile_arch = (arch or "sm_90") .. "a" end
  return plan
end

local function plan_sequence(shape, t, arch)
  local B, T = shape.batch, shape.seq_len
  local BT = B * T
  local p = new_plan(shape, t)
  local wsp = p.wsp
  -- Workspace: gA [BT,1024], gS [B,16,T,T], grad_qkv [BT,3072], column partials, bias partials.
  p.reserve("gA", BT * HID)
  p.reserve("gS", B * H * T * T)
  p.reserve("gqkv", BT * QKV)
  p.reserve("colpart", COL_SPLIT * QKV)
  p.reserve("biaspart", H * POS * 2)

  if t.pdl == 2 then p.parts[#p.parts + 1] = "#define ATTNBWD_PDL_EARLY 1" end
  p.render("tc_common.cu", {})
  p.render("gemm_common.cu", {})
  local function gemm(name, g)
    p.render("gemm_kernel.cu", {
      NAME = p.prefix .. "_" .. name, COMMENT = g.comment, M = g.m, N = g.n, K = g.k, LDA = g.lda, LDB = g.ldb,
      LDC = g.ldc, TA = g.ta, TB = g.tb, MODE = ({ [0] = 1, [1] = 0, [2] = 2 })[t.precision], INNER = g.inner or 1,
      SA1 = g.sa1 or 0, SA0 = g.sa0 or 0, SB1 = g.sb1 or 0, SB0 = g.sb0 or 0, SC1 = g.sc1 or 0, SC0 = g.sc0 or 0,
    })
    p.kernel(name, { ceil_div(g.n, 64), ceil_div(g.m, 64), g.batches or 1 }, { g.a, g.b, g.c, g.alpha or "f32:one" },
             { 128, 1, 1 })
  end

  gemm("grad_attn_out", { comment = "gA [BT,1024] = grad_output [BT,1024] @ out_weight [1024,1024]",
    m = BT, n = HID, k = HID, lda = HID, ldb = HID, ldc = HID, ta = false, tb = false,
    a = "in:grad_output", b = "in:out_weight", c = wsp("gA") })
  gemm("grad_out_weight", { comment = "grad_out_weight [1024,1024] = grad_output^T @ attention_output",
    m = HID, n = HID, k = BT, lda = HID, ldb = HID, ldc = HID, ta = true, tb = false,
    a = "in:grad_output", b = "in:attention_output", c = "out:grad_out_weight" })
  p.colsum("in:grad_output", "out:grad_out_bias", BT, HID)
  gemm("grad_probs", { comment = "gPd [b,h][T,T] = gA_h [T,64] @ v_h^T",
    m = T, n = T, k = D, lda = HID, ldb = D, ldc = T, ta = false, tb = true, inner = H, batches = B * H,
    sa1 = T * HID, sa0 = D, sb1 = H * T * D, sb0 = T * D, sc1 = H * T * T, sc0 = T * T,
    a = wsp("gA"), b = "in:value", c = wsp("gS") })
  p.kernel("grad_scores", { B * H * T, 1, 1 },
         { wsp("gS"), "in:attention_probs", "in:attention_probs_dropped", "in:attention_mask" })
  p.bias_sums(wsp("gS"))
  gemm("grad_query", { comment = "gQ = scale * gS [T,T] @ k_h [T,64], into grad_qkv[:, 0:1024]",
    m = T, n = D, k = T, lda = T, ldb = D, ldc = QKV, ta = false, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = H * T * D, sb0 = T * D, sc1 = T * QKV, sc0 = D,
    a = wsp("gS"), b = "in:key", c = wsp("gqkv"), alpha = "f32:scale" })
  gemm("grad_key", { comment = "gK = scale * gS^T @ q_h, into grad_qkv[:, 1024:2048]",
    m = T, n = D, k = T, lda = T, ldb = D, ldc = QKV, ta = true, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = H * T * D, sb0 = T * D, sc1 = T * QKV, sc0 = D,
    a = wsp("gS"), b = "in:query", c = wsp("gqkv", HID), alpha = "f32:scale" })
  gemm("grad_value", { comment = "gV = Pd^T @ gA_h, into grad_qkv[:, 2048:3072]",
    m = T, n = D, k = T, lda = T, ldb = HID, ldc = QKV, ta = true, tb = false, inner = H, batches = B * H,
    sa1 = H * T * T, sa0 = T * T, sb1 = T * HID, sb0 = D, sc1 = T * QKV, sc0 = D,
    a = "in:attention_probs_dropped", b = wsp("gA"), c = wsp("gqkv", 2 * HID) })
  gemm("grad_hidden", { comment = "grad_hidden_states [BT,1024] = grad_qkv [BT,3072] @ qkv_weight [3072,1024]",
    m = BT, n = HID, k = QKV, lda = QKV, ldb = HID, ldc = HID, ta = false, tb = false,
    a = wsp("gqkv"), b = "in:qkv_weight", c = "out:grad_hidden_states" })
  gemm("grad_qkv_weight", { comment = "grad_qkv_weight [3072,1024] = grad_qkv^T @ hidden_states",
    m = QKV, n = HID, k = BT, lda = QKV, ldb = HID, ldc = HID, ta = true, tb = false,
    a = wsp("gqkv"), b = "in:hidden_states", c = "out:grad_qkv_weight" })
  p.colsum(wsp("gqkv"), "out:grad_qkv_bias", BT, QKV)

  p.render("edit_attention_bwd.cu", { B = B, T = T, PREFIX = p.prefix, GS_LD = T, GS_HALF = 0 })
  p.render("grad_scores.cu", { PREFIX = p.prefix })
  p.render("colsum.cu", { PREFIX = p.prefix, COL_SPLIT = COL_SPLIT, VEC = 0 }) -- pointers 4-byte aligned
  return p.finish(arch, 4)
end

function M.plan(shape, t, arch)
  if t.fused == 1 then return plan_fused(shape, t, arch) end
  return plan_sequence(shape, t, arch)
end

return M
