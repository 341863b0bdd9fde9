-- SPDX-License-Identifier: MIT
-- templates/hist.space.lua: the parameter space of the histogram family.
--
-- bins[clamp(s, 0, nbins - 1)] += 1 for every int32 sample s; uint32
-- counts; the output is overwritten.  Three algorithms span the range:
-- global atomics (any nbins), one block's shared memory, and a thread-block
-- cluster's distributed shared memory (the Programming Guide's
-- clusterHist_kernel), which holds nbins up to cluster x one block's share.
--
-- Each kernel lists { parameter, {values}, "meaning", tag = "t" }: the tag
-- and the value spell the parameter in the variant's name (generator/tags.lua
-- says what each tag means).
local F = 4 -- bytes per counter
-- A prune reason: what an H100 measured (tuning-db/shipped/nvidia-h100-80gb-hbm3.json).
local function H100(reason)
  return "H100 (tuning-db/shipped/nvidia-h100-80gb-hbm3.json): " .. reason
end

local function log2(x)
  local n = 0
  while x > 1 do x = x // 2; n = n + 1 end
  return n
end

return {
  family = "hist",
  required = { "counter_bits", "copies", "banded" }, -- registry fields derive() must set

  -- Untuned calls use the first of these that fits nbins on the device;
  -- global atomics serve every nbins.
  -- global atomics serve every nbins, and the band kernel up to
  -- KT_HIST_MAX_BANDS bands (runtime/kt_variant.h).  Dispatch cannot see
  -- whether the input has runs of one bin, so each holds up on them: 32-bit
  -- shared counters need no merging (H100: 2685 GB/s sorted at 256 bins
  -- without), the others merge.
  defaults = { "hist_smem_t1024_r1_a0_m0_b32_u2", "hist_smem_t1024_r1_a0_m1_b16_u2", "hist_band_t1024_b16_m1_u2",
               "hist_global_t512_a1_m2_l1_u2" },

  kernels = {
    {
      algo = "global",
      template = "templates/hist_global.cu.tpl",
      doc = "every sample is an atomic add on the output in global memory",
      params = {
        { "threads", { 256, 512 }, "threads per block", tag = "t" },
        { "agg", { 0, 1 }, "1: lanes of a warp that hit the same bin add once (warp aggregation)", tag = "a" },
        { "merge", { 0, 1, 2 }, "1: runs of equal bins in a thread's int4, or in a whole warp's, add once; " ..
          "2: only the whole warp's", tag = "m" },
        { "l2fit", { 0, 1 }, "1: one pass per range of the touched bins (probed) that fits half the L2", tag = "l" },
        { "ipt", { 2 }, "int4 loads each thread has in flight per loop step", tag = "u" },
      },
      derive = function(v)
        v.smem_static, v.smem_dynamic = 0, 0
        v.counter_bits, v.copies, v.banded = 0, 1, 0
        v.cluster, v.min_cc = 1, 0
      end,
      constraints = {
        { "agg combines the lanes' samples one at a time, which merge 1 puts out of step",
          function(v) return v.agg == 0 or v.merge ~= 1 end },
        { "merge 2 leaves the rest to agg", function(v) return v.agg == 1 or v.merge ~= 2 end },
      },
      prune = {
        -- At every tuned problem the best 256-thread variant was within 1% of
        -- the best 512-thread one (3.135 against 3.140 ms at 262144 uniform
        -- bins, its best case; 3.599 against 3.586 at 16M), and every global
        -- variant is measured at every problem: make tune's time goes to the
        -- partition kernel instead.
        { H100("256 threads were within 1% of 512 at every tuned problem; kept: 512"),
          function(v) return v.threads == 512 end },
      },
    },
    {
      algo = "smem",
      template = "templates/hist_smem.cu.tpl",
      doc = "each block counts into its own copy of the bins in shared memory, then adds it to the output",
      params = {
        { "threads", { 256, 512, 1024 }, "threads per block", tag = "t" },
        { "rep", { 1, 2 }, "copies of the bins per block; warp w counts into copy w % rep", tag = "r" },
        { "agg", { 0, 1 }, "1: lanes of a warp that hit the same bin add once (warp aggregation)", tag = "a" },
        { "merge", { 0, 1 }, "1: runs of equal bins in a thread's int4, or in a whole warp's, add once", tag = "m" },
        { "cw", { 32, 16 }, "bits per shared-memory counter; 16 halves the memory, carrying into the output",
          tag = "b" },
        { "ipt", { 2 }, "int4 loads each thread has in flight per loop step", tag = "u" },
      },
      derive = function(v, t)
        -- rep copies of the counters; the size for nbins bins is
        -- kt_hist_smem_bytes (runtime/kt_variant.h), at launch time
        v.smem_static, v.smem_dynamic = 0, 0
        v.counter_bits, v.copies, v.banded = v.cw, v.rep, 0
        v.cluster, v.min_cc = 1, 0
      end,
      constraints = {
        { "rep copies need at least rep warps", function(v) return v.threads // 32 >= v.rep end },
        { "agg and merge both combine equal bins: one of them", function(v) return v.agg == 0 or v.merge == 0 end },
      },
    },
    {
      algo = "dsm",
      template = "templates/hist_dsm.cu.tpl",
      doc = "the bins are spread over the distributed shared memory of a thread-block cluster",
      params = {
        { "cluster", { 1, 2, 4, 8, 16 }, "blocks per cluster; the bins are split over them", tag = "c" },
        { "threads", { 256, 512, 1024 }, "threads per block", tag = "t" },
        { "layout", { "blocked", "cyclic" },
          "which block holds bin b: blocked = b / per_block (the Guide's), cyclic = b % cluster", tag = "" },
        { "cw", { 32, 16 }, "bits per shared-memory counter; 16 halves the memory, carrying into the output",
          tag = "b" },
        { "ipt", { 2 }, "int4 loads each thread has in flight per loop step", tag = "u" },
      },
      derive = function(v, t)
        v.log2_cluster = log2(v.cluster)
        v.smem_static, v.smem_dynamic = 0, 0
        v.counter_bits, v.copies, v.banded = v.cw, 1, 0
        v.min_cc = 90
      end,
      constraints = {
        { "cluster launch and distributed shared memory need sm_90", function(v, t) return t.cc >= 90 end },
        { "cluster size <= 16 (sizes above 8 are non-portable)", function(v, t) return v.cluster <= t.max_cluster end },
        { "cluster size is a power of two", function(v) return 1 << v.log2_cluster == v.cluster end },
        { "a cluster of 1 has one layout: keep blocked", function(v) return v.cluster > 1 or v.layout == "blocked" end },
        { "16 blocks of 1024 threads exceed what a GPC co-schedules",
          function(v) return v.cluster * v.threads <= 8192 end },
      },
      prune = {
        -- Every cluster variant lost: at 65536 bins the best, c1 with 1024
        -- threads, made 2339 GB/s against the shared-memory kernel's 2712; at
        -- 262144 the best made 249 against the band kernel's 1096, at 1M 183
        -- against 357.  Remote atomics cost what global ones do.  Kept: the
        -- most threads a cluster size allows, to tune on other GPUs.
        { H100("every cluster variant lost to the shared-memory, band or global kernel; kept: 1024 threads " ..
          "(512 in clusters of 16)"),
          function(v) return v.threads == (v.cluster == 16 and 512 or 1024) end },
      },
    },
    {
      algo = "band",
      template = "templates/hist_band.cu.tpl",
      doc = "each block counts one band of bins that fits its shared memory; the blocks of all bands " ..
        "read the same input together, so the repeated reads come from L2",
      params = {
        { "threads", { 512, 1024 }, "threads per block", tag = "t" },
        { "cw", { 32, 16 }, "bits per shared-memory counter; 16 halves the memory, carrying into the output",
          tag = "b" },
        { "merge", { 0, 1 }, "1: runs of equal bins in a thread's int4, or in a whole warp's, add once", tag = "m" },
        { "ipt", { 2 }, "int4 loads each thread has in flight per loop step", tag = "u" },
      },
      derive = function(v, t)
        -- a band fills the block's shared memory, whatever the device has
        v.smem_static, v.smem_dynamic = 0, 0
        v.counter_bits, v.copies, v.banded = v.cw, 1, 1
        v.cluster, v.min_cc = 1, 0
      end,
    },
    {
      algo = "part",
      template = "templates/hist_part.cu.tpl",
      doc = "past one block's shared memory: count the samples per bucket of bins that fit it, scatter each " ..
        "to its bucket's region of a workspace as a 16-bit offset, then count each region in shared memory",
      params = {
        { "threads", { 512, 1024 }, "threads per block of the count and scatter kernels", tag = "t" },
        { "ipt", { 2, 4 }, "int4 loads each thread has in flight per scatter tile (threads x ipt x 4 samples)",
          tag = "u" },
      },
      derive = function(v)
        -- 32-bit counters of a bucket's bins fill the block's shared memory,
        -- whatever the device has (kt_hist_part_width, runtime/kt_variant.h)
        v.smem_static, v.smem_dynamic = 0, 0
        v.counter_bits, v.copies, v.banded = 32, 1, 2
        v.cluster, v.min_cc = 1, 0
        v.stage = 2 * 2 * v.threads * v.ipt * 4 -- bytes of the scatter's staging area
      end,
      constraints = {
        { "the scatter's staging area and its three 4 KB tables fit a block's shared memory",
          function(v, t) return v.stage + 3 * 4096 + 132 <= t.smem_optin end },
      },
      prune = {
        -- bench/bench_hist_limits.cu (part), n = 2^28, 1M to 16M bins, six
        -- distributions: t1024_u2 made 475-615 GB/s; t512_u2 was within 2%
        -- of it, the u4 variants (one 1024-thread scatter block an SM, 61
        -- registers) 5-12% slower everywhere.
        { H100("t1024_u2 led or was within 2% in every cell of bench_hist_limits' part section; kept: it"),
          function(v) return v.threads == 1024 and v.ipt == 2 end },
      },
    },
  },

  constraints = {
    { "threads per block <= the target's limit (1024)", function(v, t) return v.threads <= t.max_threads end },
  },
}
