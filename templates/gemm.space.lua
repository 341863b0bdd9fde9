-- templates/gemm.space.lua: the parameter space of the gemm family.
--
-- C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] on tensor cores: inputs
-- BF16, FP16 or FP32 rounded to TF32, FP32 accumulation and C, either op,
-- strided batches (kt_gemm_args, runtime/kt_variant.h).  A variant
-- serves one input type (wgmma, mma) or all of them (simt, the fallback).
-- Each kernel lists { parameter, {values}, "meaning", tag = "t" } (tags:
-- generator/tags.lua); constraints drop what cannot be built, each with
-- the reason `make generate --explain` prints.
-- A prune reason: what an H100 measured (issue 15).
local function H100(reason)
  return "H100 (bench/reference/gemm_tiles/README.md): " .. reason
end

-- The CUDA-core kernel's tiles (simt), square and flat, as short x long side.
local SIMT_TILES = {
  ["16x16"] = true, ["32x32"] = true, ["64x64"] = true, ["128x128"] = true,
  ["4x256"] = true, ["8x128"] = true, ["16x128"] = true, ["32x128"] = true,
}

local TYPES = {
  -- ptx: wgmma's operand type; tma: the tensor map's element type;
  -- es: bytes per element; ki: K of one wgmma instruction (32 bytes).
  bf16 = { id = 2, ptx = "bf16", tma = "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", es = 2, ki = 16 },
  f16 = { id = 3, ptx = "f16", tma = "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", es = 2, ki = 16 },
  tf32 = { id = 1, ptx = "tf32", tma = "CU_TENSOR_MAP_DATA_TYPE_FLOAT32", es = 4, ki = 8 },
}

return {
  family = "gemm",
  required = { "align" },

  -- Untuned calls use the first of these that serves the call (the input
  -- type decides); the last, on the CUDA cores, serves every input anywhere.
  defaults = { "gemm_wgmma_bf16_128x256_wg2_s4_g8_o1_k1_p1_c1", "gemm_wgmma_f16_128x256_wg2_s4_g8_o1_k1_p1_c1",
               "gemm_wgmma_tf32_128x256_wg2_s4_g8_o1_k1_p1_c1",
               -- before sm_90: mma.sync
               "gemm_mma_bf16_128x128x32_wp2x2_s3_g8", "gemm_mma_f16_128x128x32_wp2x2_s3_g8",
               "gemm_mma_tf32_128x128x16_wp2x2_s4_g8", "gemm_simt_64x64" },

  kernels = {
    {
      algo = "wgmma",
      template = "templates/gemm_wgmma.cu.tpl",
      doc = "Hopper: wgmma from shared memory, TMA loads through an mbarrier pipeline, a producer warpgroup " ..
        "and WG consumer warpgroups (setmaxnreg), optionally persistent, the epilogue through shared memory; " ..
        "16-bit types read every op pair in place (wgmma's transpose); TF32 reads one MN-major operand from " ..
        "registers (op N, N runs as the transpose, C^T = B^T A^T) and repacks the other K-major first",
      params = {
        { "type", { "bf16", "f16", "tf32" }, "input type; FP32 accumulation", tag = "" },
        { "bm", { 64, 128 }, "BM: rows of C per block", tag = "" },
        { "bn", { 64, 128, 256 }, "BN: columns of C per block (wgmma's N)", join = "x" },
        { "wg", { 1, 2 }, "consumer warpgroups; each owns BM / wg rows", tag = "wg" },
        { "stages", { 3, 4, 5, 6, 7, 8 }, "K slices in shared memory, filled by TMA while the consumers work",
          tag = "s" },
        { "group", { 8 }, "block rows per band of the launch order (L2 reuse of B)", tag = "g" },
        { "occ", { 1, 2 }, "blocks per SM: 2 overlaps one block's prologue and epilogue with the other's loop",
          tag = "o" },
        { "split", { 1, 16, 128 }, "most chunks K is split into where the tiles fill less than half a wave " ..
          "(partial sums in a workspace, added in order by a second kernel)", tag = "k" },
        { "persist", { 0, 1 }, "1: OCC blocks per SM loop over the tiles, loading the next tile while the " ..
          "last one is stored; 0: a block per tile", tag = "p" },
        { "cluster", { 1, 2 }, "blocks per cluster, along M: they share B's slices, each block loading " ..
          "1 / CLUSTER of them into every block's shared memory (TMA multicast)", tag = "c" },
      },
      derive = function(v, t)
        local ty = TYPES[v.type]
        v.type_id, v.ptx_type, v.tma_type, v.es, v.ki = ty.id, ty.ptx, ty.tma, ty.es, ty.ki
        v.bk = 128 // v.es -- one 128-byte swizzle row of K per slice row
        v.threads = 128 * (v.wg + 1)
        v.stage_bytes = (v.bm + v.bn) * v.bk * v.es
        v.smem_static = v.wg * 64 * 40 * 4 -- each consumer's epilogue chunk, 64 x 32 floats (+ 8 a row)
        v.smem_dynamic = v.stages * v.stage_bytes + 2 * v.stages * 8 + 1024 -- + barriers, + alignment slack
        -- The stages that fit beside the other blocks of the SM (1 KB of
        -- each block's share is the system's), at most 8: 64x128 blocks
        -- (24 KB a stage) ran 1.09x faster with 8 than with 6 (geomean of
        -- the suite shapes, up to 1.21x at 4096^3; H200), the larger tiles
        -- fit no more than 6 (128x128) or 4 (128x256).
        v.fit_stages = math.min(8, (t.smem_per_sm // v.occ - 1024 - v.smem_static - 1024 - 16 * 8) // v.stage_bytes)
        -- Registers per thread of one block's share of the SM.  With two
        -- consumers, setmaxnreg moves registers from the producer (which
        -- needs few) to the consumers, whose accumulators take
        -- (BM / wg) * BN / 128 per thread; with one, every thread has
        -- enough without it.
        -- ptxas compiles the whole kernel within the launch bounds' count
        -- (regs_launch), whatever setmaxnreg gives the consumers later.
        -- setmaxnreg moves registers only within what the block was
        -- launched with (regs_launch for each thread): a consumer that asks
        -- for more than the producer gave up waits forever.
        local share = t.regs_per_sm // v.occ
        v.setmaxnreg = v.wg > 1
        v.regs_producer = 40
        v.regs_launch = math.min(255, share // v.threads // 8 * 8)
        if v.setmaxnreg then
          local pool = v.regs_launch * v.threads
          v.regs_consumer = math.min(240, ((pool // 128 - v.regs_producer) // v.wg) // 8 * 8)
        else
          v.regs_consumer = v.regs_launch
        end
        v.acc_regs = (v.bm // v.wg) * v.bn // 128
        v.min_cc, v.align, v.blocks_per_sm = 90, 1, v.occ
      end,
      constraints = {
        -- A per-architecture build must drop these variants on any other
        -- target: sm_90a code runs on sm_90 alone, and there is no PTX to JIT.
        { "wgmma, TMA and setmaxnreg exist only as sm_90a machine code (no PTX runs elsewhere)",
          function(v, t) return t.arch == "sm_90a" or t.cc == 90 end },
        { "as many stages as fit the block's share of shared memory (at most 8)",
          function(v) return v.stages == v.fit_stages end },
        { "the OCC blocks' shared memory fits one SM",
          function(v, t) return v.occ * (v.smem_static + v.smem_dynamic + 1024) <= t.smem_per_sm end },
        { "each consumer owns one m64 tile (BM 64 with one consumer, 128 with two): the shape the epilogue " ..
          "and the register split are laid out for", function(v) return v.bm // v.wg == 64 end },
        { "BN 256 with BM 128 only: a 64x256 block's one consumer would hold 128 accumulators beside a " ..
          "producer with nothing to give (no setmaxnreg with one consumer)",
          function(v) return v.bn <= 128 or v.bm == 128 end },
        { "split K runs a block per tile and chunk: its tiles fill less than half a wave, so there is " ..
          "nothing to loop over", function(v) return v.split == 1 or v.persist == 0 end },
        { "a TMA box holds at most 256 rows", function(v) return v.bm <= 256 and v.bn <= 256 end },
        { "split K runs without clusters: a block per tile and chunk, each with a workspace slot of its own",
          function(v) return v.split == 1 or v.cluster == 1 end },
        { "each block of a cluster multicasts whole TMA chunks of B (128 bytes of columns when B is MN-major)",
          function(v) return (v.bn // v.cluster) % (128 // v.es) == 0 end },
        { "the accumulators leave a consumer 40 registers for addresses and the epilogue",
          function(v) return v.acc_regs + 40 <= math.min(v.regs_consumer, v.regs_launch) end },
      },
      -- What cannot win.  Measured on an H100 (issue 15; ktune tune at 1000^3,
      -- 1024^3, 4096x4096x256, 4096^3 and 8192x128x8192, bf16, f16 and tf32
      -- nn): 128x256 won the large shapes, 128x128 and 64x128 (one block
      -- per SM, then 6 stages) the small ones and 8192x128x8192; the rest lost.
      prune = {
        { H100("two blocks per SM: 64x128 with 4 stages each lost to one block with 6 at every shape " ..
          "(4096x4096x256 bf16 46.3 us against 128x256's 41.5; 1024^3 11.6 against 10.5)"),
          function(v) return v.occ == 1 end },
        { H100("split K only for 64x128, up to 128 ways (chunks of at least 8 slices, summed by a second " ..
          "kernel over the whole GPU): at 64x64x65536 it took 19.1 us bf16 against 33 for 128x128 split 16 " ..
          "ways (and 2 TFLOP/s, unsplit, before there was a split); split 128x128 and 128x256 lost wherever " ..
          "they split (1000^3 bf16: 1.89x 128x128 unsplit), and elsewhere they are the unsplit variant"),
          function(v) return (v.split == 1 and (v.bm == 128 or v.cluster > 1)) or (v.split == 128 and v.bm == 64) end },
        { "H200 (bench/reference/gemm_tiles/README.md): clusters of 2 only for 64-row tiles, unsplit, a block " ..
          "per tile: 64x128 with 8 stages beat unclustered 64x128 at 1000^3 BF16 and FP16 (1.10-1.13x) and " ..
          "512^3 TF32 (1.16x), and lost or tied at the others (0.78-1.00x) but 8192^3, where 128x256 beats " ..
          "both; clustered 128x128 and 128x256 took 0.92-1.21 of their unclustered twins' time and won no " ..
          "suite shape; a persistent clustered 64x128 only tied the one a block per tile, and the model (a " ..
          "persistent grid pays its fill once) would send untuned calls to it",
          function(v) return v.cluster == 1 or (v.bm == 64 and v.persist == 0) end },
        { "H200 (bench/reference/gemm_tiles/README.md): BN 64 only with BM 64: 64x64 won 512^3 (1.05-1.15x " ..
          "over the best wider tile), 64x64x65536 (1.04-1.06x) and 128x128x64 (1.03-1.28x); 128x64 won by more " ..
          "than 1% only at 128x128x64 FP16 and 512^3 TF32, where 64x64 is within 2% of it",
          function(v) return v.bn >= 128 or v.bm == 64 end },
      },
    },
    {
      algo = "mma",
      template = "templates/gemm_mma.cu.tpl",
      doc = "sm_80 and newer: mma.sync fed by ldmatrix from XOR-swizzled shared memory, a cp.async multistage " ..
        "pipeline; 16-bit MN-major operands through ldmatrix.trans, TF32 MN-major ones by 32-bit reads; " ..
        "any alignment (narrower copies), edges zero-filled",
      params = {
        { "type", { "bf16", "f16", "tf32" }, "input type; FP32 accumulation", tag = "" },
        { "bm", { 64, 128 }, "BM: rows of C per block", tag = "" },
        { "bn", { 64, 128, 256 }, "BN: columns of C per block", join = "x" },
        { "bk", { 16, 32, 64 }, "BK: K per stage (64 or 128 bytes of each row)", join = "x" },
        { "warps", { "2x2", "2x4", "4x2" }, "warps along M x along N; each owns BM / WM x BN / WN", tag = "wp" },
        { "stages", { 3, 4 }, "K slices in shared memory, STAGES - 1 of them in flight (cp.async)", tag = "s" },
        { "group", { 8 }, "block rows per band of the launch order (L2 reuse of B)", tag = "g" },
      },
      derive = function(v, t)
        local ty = TYPES[v.type]
        v.type_id, v.ptx_type, v.es, v.ki = ty.id, ty.ptx, ty.es, ty.ki
        v.wm, v.wn = v.warps:match("^(%d+)x(%d+)$")
        v.wm, v.wn = tonumber(v.wm), tonumber(v.wn)
        v.threads = 32 * v.wm * v.wn
        v.wtm, v.wtn = v.bm // v.wm, v.bn // v.wn -- the warp tile
        v.acc_regs = v.wtm * v.wtn // 32
        v.smem_static = 0
        v.smem_dynamic = v.stages * (v.bm + v.bn) * v.bk * v.es
        v.cluster, v.min_cc, v.align = 1, 80, 1
        -- Registers: the accumulators, the fragments of one k step, ~40 more.
        local regs = v.acc_regs + v.wtm // 4 + v.wtn // 8 + 40
        v.blocks_per_sm = math.max(1, math.min(t.smem_per_sm // v.smem_dynamic, t.regs_per_sm // (regs * v.threads),
          t.max_threads_per_sm // v.threads))
      end,
      constraints = {
        { "a slice row is 64 or 128 bytes: 4 or 8 16-byte chunks, the two XOR swizzles (and 2 mma K steps or 4)",
          function(v) return v.bk * v.es == 64 or v.bk * v.es == 128 end },
        { "warp tiles are whole m16 tiles and pairs of n8 tiles (one ldmatrix.x4 loads two n8 B fragments)",
          function(v) return v.wtm % 16 == 0 and v.wtn % 16 == 0 end },
        { "an MN-major tile row (BM or BN elements) spans the 8 chunks its swizzle permutes",
          function(v) return v.bm * v.es >= 128 and v.bn * v.es >= 128 end },
        { "each thread copies whole 16-byte chunks of both tiles",
          function(v) return (v.bm * v.bk * v.es // 16) % v.threads == 0 and (v.bn * v.bk * v.es // 16) % v.threads == 0 end },
        { "at most 128 accumulators per thread (a 64 x 64 warp tile): the fragments and addresses need the rest of 255",
          function(v) return v.acc_regs <= 128 end },
      },
      prune = {
        { "H100 (bench/reference/gemm_mma/README.md): 2x2 warps of 64x64 (128x128 blocks, the fastest mma at " ..
          "4096^3) or of 32x32 (64x64 blocks, the fastest at 1024^3); 128x256 of 2x4 warps, 64x128 and " ..
          "128-byte slice rows lost to them",
          function(v) return v.warps == "2x2" and v.bm == v.bn and v.bm <= 128 and v.bk * v.es == 64 end },
        { "H100 (bench/reference/gemm_mma/README.md): 3 stages for 16-bit 128x128 blocks (won 3 of 4 BF16 " ..
          "op pairs at 4096^3, all at 1024^3), else 4 (TF32 128x128x16 s4 beat 128x128x32 s3)",
          function(v) return v.stages == ((v.es == 2 and v.bm == 128) and 3 or 4) end },
      },
    },
    {
      algo = "simt",
      template = "templates/gemm_simt.cu.tpl",
      doc = "the CUDA cores: the Programming Guide's tiled kernel, register-tiled, over any type, op, " ..
        "alignment and batch, FP32 FMA (exact FP32 batches, and every type before sm_80)",
      params = {
        { "bm", { 4, 8, 16, 32, 64, 128, 256 }, "BM: rows of C per block", tag = "" },
        { "bn", { 4, 8, 16, 32, 64, 128, 256 }, "BN: columns of C per block (16x16: the Guide's tile, one " ..
          "output per thread)", join = "x" },
      },
      constraints = {
        { "a square tile of 16 to 128, or a flat one for entries of a few rows (or columns), which a square " ..
          "tile would mostly pad: 4x256, 8x128, 16x128, 32x128 or their transposes",
          function(v) return SIMT_TILES[math.min(v.bm, v.bn) .. "x" .. math.max(v.bm, v.bn)] end },
      },
      derive = function(v, t)
        v.threads = 256
        -- A thread's TM x TN outputs: the square tiles' (BS / 16)^2; a flat
        -- tile's short side a row (or column) a thread, 4 to 8 of the long.
        local short, long = math.min(v.bm, v.bn), math.max(v.bm, v.bn)
        local across = v.bm == v.bn and v.bm // 16 or math.max(1, short // 16)
        local along = v.bm == v.bn and across or long * short // (v.threads * across)
        v.tm, v.tn = v.bm <= v.bn and across or along, v.bm <= v.bn and along or across
        -- K per staged slice.  Square tiles: 4 elements of each operand a
        -- thread, so that each thread has 8 loads in flight.  With one of
        -- each (BS 16, BK 16) the small tiles' batches read at 600-800
        -- GB/s, bound by the loads in flight (H100, session 50).  Flat
        -- tiles: 16 of the long side's operand a thread where the short
        -- side is 16 or less, else 8 (4x256's short-side slice is smaller
        -- than the block, so some threads read none of it).  A slice
        -- costs a round trip to memory and a barrier whatever its depth,
        -- and the flat tiles serve the calls bound by those: at 8 loads,
        -- 4 x 256 ran a batch of 1 x 30 x 954 products five times slower
        -- than 16 x 16 with its 64-deep slices (H100, session 51).
        v.bk = v.bm == v.bn and 4 * v.threads // v.bm or (short <= 16 and 16 or 8) * v.threads // long
        -- Blocks an SM at least (launch bounds): two where a thread holds
        -- 24 values or more (its outputs and a slice's loads), so that one
        -- block multiplies while the other waits at its barrier (128x128
        -- then fits its 64 accumulators in 128 registers a thread); four
        -- otherwise (64 registers), whose loads in flight set their speed.
        local loads = math.max(1, v.bm * v.bk // v.threads) + math.max(1, v.bn * v.bk // v.threads)
        v.min_blocks = v.tm * v.tn + loads >= 24 and 2 or 4
        v.smem_static = 2 * v.bk * (v.bm + 4 + v.bn + 4) * 4
        v.smem_dynamic = 0
        v.cluster, v.min_cc, v.align = 1, 0, 1
        -- Registers: the accumulators, a slice's loads, a k step's two
        -- fragments, ~40 more.
        local regs = v.tm * v.tn + loads + v.tm + v.tn + 40
        v.blocks_per_sm = math.max(1, math.min(32, t.max_threads_per_sm // v.threads,
          t.regs_per_sm // (regs * v.threads), t.smem_per_sm // v.smem_static))
      end,
    },
  },

  constraints = {
    { "threads per block <= the target's limit (1024)", function(v, t) return v.threads <= t.max_threads end },
    { "shared memory per block <= the target's opt-in limit",
      function(v, t) return v.smem_static + v.smem_dynamic <= t.smem_optin end },
  },
}
