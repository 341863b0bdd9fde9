-- SPDX-License-Identifier: MIT
-- templates/matmul.space.lua: the parameter space of the matmul family.
--
-- C = alpha * A * B + beta * C, row-major fp32, any M, N, K >= 1.
-- Each kernel lists { parameter, {values}, "meaning", tag = "t" }: the tag
-- and the value spell the parameter in the variant's name (generator/tags.lua
-- says what each tag means), or join = "x" adds it to the previous one's
-- (64x128x16).  derive() computes
-- what follows from them; constraints drop what cannot be built, and prune
-- what measurements showed cannot win, each with the reason that
-- `make generate --explain` prints.
local F = 4 -- bytes per float
-- A prune reason: what an H100 measured (bench/reference/README.md).
local function H100(reason)
  return "H100 (bench/reference/README.md): " .. reason .. "; the rest lost by 2% or more"
end
-- A prune reason from the H100 run that added the small tiles (issue 11).
local function SUITE(reason)
  return "H100 (bench/reference/matmul_random/README.md): " .. reason
end
-- A prune reason from the H100 run of the vector-like shapes (issue 11).
local function VEC(reason)
  return "H100 (bench/reference/matmul_random/README.md, run 8): " .. reason
end
local THREAD_TILE = { ["4x4"] = { 4, 4 }, ["8x8"] = { 8, 8 }, ["8x16"] = { 8, 16 }, ["12x8"] = { 12, 8 } }
local DIRECT_TILE = { ["4x4"] = { 4, 4 }, ["8x4"] = { 8, 4 } }
local SKINNY_TILE = { ["4x1"] = { 4, 1 }, ["4x4"] = { 4, 4 }, ["8x4"] = { 8, 4 }, ["16x2"] = { 16, 2 },
                      ["32x1"] = { 32, 1 }, ["16x4"] = { 16, 4 }, ["32x4"] = { 32, 4 } }
-- The few-column tiles of 32 columns (1x32, 2x32) serve N of 17 to 32, which
-- before them went to the vector-times-matrix kernel (a lane per column,
-- half the lanes idle) or to warp tiles: they won 23 shapes of run 28's
-- suites (H100; 1x17x10286 from 0.70 of cuBLAS to 0.86), 2x32 one of them.
local GEMV_TILE = { ["1x4"] = { 1, 4 }, ["4x4"] = { 4, 4 }, ["2x8"] = { 2, 8 }, ["1x16"] = { 1, 16 },
                    ["4x8"] = { 4, 8 }, ["8x8"] = { 8, 8 }, ["4x16"] = { 4, 16 }, ["1x32"] = { 1, 32 },
                    ["2x32"] = { 2, 32 } }
local MATVEC_TILE = { ["2x1"] = { 2, 1 }, ["4x1"] = { 4, 1 }, ["8x1"] = { 8, 1 } }
local VECMAT_TILE = { ["1x1"] = { 1, 1 }, ["1x2"] = { 1, 2 }, ["1x4"] = { 1, 4 } }

-- The memory-bound kernels' loads of the operand they read once (B in the
-- few-row and vector-times-matrix kernels, A in the few-column and
-- matrix-times-vector kernels): as before, or past L1 (ld_stream in
-- templates/matmul_stream.cuh).  The parameter came after those kernels
-- were tuned: at 0 it is silent (generator/tags.lua), so their variants
-- keep their names, sources and source hashes, and what was measured for
-- them, on every GPU, stays valid; the variants with 1 are new.  Run 27 of
-- bench/reference/matmul_random/README.md measured the loads on an H100:
-- 1661x1x3387 from 0.85 of cuBLAS to 0.99, 4051x1x8125 from 0.90 to 1.09;
-- run 29 kept them for A (the few-column and matrix-times-vector kernels)
-- and pruned them for B (see the prune rules).
local STREAM = { "stream", { 0, 1 }, "1: the operand read once is loaded with ld.global.nc.L1::no_allocate.L2::256B " ..
  "(not kept in L1, L2 fetching 256 bytes a miss); 0: as before the parameter (__ldg or a plain load)", tag = "ls",
  legacy = 0 }
-- The template's spelling of such a load, by the value of stream: $(ld)(p)
-- for __ldg(p), $(ld_open)x[i]$(ld_close) for a plain load x[i].
local function stream_loads(v, four)
  v.ld = v.stream == 1 and (four and "ld_stream4" or "ld_stream") or "__ldg"
  v.ld_open, v.ld_close = v.stream == 1 and "ld_stream(&" or "", v.stream == 1 and ")" or ""
end

-- The constraint of every kernel with a cluster parameter.
local CLUSTERS_NEED_SM90 = { "clusters need sm_90 (distributed shared memory)",
  function(v, t) return v.cluster == 1 or t.cc >= 90 end }

-- Blocks of v an SM holds by its threads, its static shared memory (plus
-- the 1 KB the hardware reserves per block) and its registers (v.regs a
-- thread, allocated 8 at a time): the kernels without dynamic shared memory.
local function blocks_per_sm(v, t)
  return math.min(t.max_threads_per_sm // v.threads, t.smem_per_sm // (v.smem_static + 1024),
    t.regs_per_sm // (v.threads * (math.ceil(v.regs / 8) * 8)))
end

local S = {
  family = "matmul",
  required = { "align" }, -- registry fields derive() must set, beside the common ones

  -- Untuned calls use the first of these that serves the call: float4
  -- copies when pointers and leading dimensions allow, else 4-byte copies;
  -- the last, the Programming Guide's kernel, serves every input anywhere.
  defaults = { "matmul_wt_128x128x16_tt8x8_w4_s3_v4_g8_o0_k1_c1", "matmul_wt_128x128x8_tt8x8_w4_s3_v1_g8_o2_k1_c1",
               "matmul_tiled_bs16_pad0" },

  kernels = {
    {
      algo = "tiled",
      template = "templates/matmul_tiled.cu.tpl",
      doc = "CUDA C Programming Guide shared-memory tiled kernel, one output per thread",
      params = {
        { "bs", { 8, 16, 32 }, "BLOCK_SIZE: edge of the square tile; one output per thread", tag = "bs" },
        { "pad", { 0, 1 }, "floats of padding at the end of each shared-memory row", tag = "pad" },
      },
      derive = function(v, t)
        v.threads = v.bs * v.bs
        v.blocks_per_sm = math.min(32, t.max_threads_per_sm // v.threads)
        v.smem_static = 2 * v.bs * (v.bs + v.pad) * F
        v.smem_dynamic = 0
        v.cluster, v.min_cc, v.align = 1, 0, 1
      end,
    },
    {
      algo = "wt",
      template = "templates/matmul_wt.cu.tpl",
      doc = "warp-tiled kernel: block tile BM x BN x BK split into warp tiles, thread tile TM x TN as 4x4 blocks, " ..
        "global -> shared memory by cp.async, STAGES slices deep, A transposed on the way, fragments double-buffered",
      params = {
        { "bm", { 16, 32, 48, 64, 96, 128 }, "BM: rows of C per block", tag = "" },
        { "bn", { 32, 64, 128, 256 }, "BN: columns of C per block", join = "x" },
        { "bk", { 8, 16 }, "BK: depth of the K slice in one pipeline stage", join = "x" },
        { "tt", { "4x4", "8x8", "8x16", "12x8" }, "TM x TN: rows x columns of C per thread (register tile)", tag = "tt" },
        { "wtm", { 4 }, "lanes of a warp along M (32 / wtm along N): 4 x 8 lanes read 64 bytes of A and 128 of B " ..
          "per k; 8 x 4 measured slower on an H100", tag = "w" },
        { "stages", { 2, 3, 4 }, "K slices in shared memory: one being used, the rest in flight (cp.async)",
          tag = "s" },
        { "vec", { 1, 4 }, "floats per copy of B and per store of C; 4 needs 16-byte aligned pointers and ldX % 4 == 0",
          tag = "v" },
        { "group", { 8 }, "block rows per band of the launch order (L2 reuse of B)", tag = "g" },
        { "occ", { 0, 1, 2, 3, 4 }, "blocks per SM the compiler must fit (caps registers); 0 = no hint", tag = "o" },
        { "split", { 1, 4, 16, 256 }, "most chunks K is split into, summed through a workspace (deterministic): " ..
          "as many as finish first within four waves of blocks, each at least 128 deep; 1 = none", tag = "k" },
        { "cluster", { 1, 2, 4, 8 }, "blocks per cluster that split K and sum through distributed shared memory; 1 = none",
          tag = "c" },
        { "epi", { 0, 1 }, "C's stores: 1 = a float4 at a time where every row of C is 16-byte aligned, else each " ..
          "warp's rows through shared memory so that a warp stores 32 consecutive floats of a row; 0 = as before " ..
          "the parameter (a float4 where a row allows it with float4 copies, else 4 floats 16 bytes apart per lane)",
          tag = "e", legacy = 0 },
      },
      derive = function(v, t)
        v.tm, v.tn = THREAD_TILE[v.tt][1], THREAD_TILE[v.tt][2]
        -- Order of the TM x TN multiply-adds (see outer_product in the
        -- template): serpentine measured 1-4% faster for 8x8 thread tiles
        -- on an H100 and 3-5% slower for 8x16; row by row otherwise.
        v.fo = v.tt == "8x8" and 1 or 0
        v.wtn = 32 // v.wtm
        v.wm, v.wn = v.wtm * v.tm, v.wtn * v.tn -- warp tile
        v.warps = (v.bm // v.wm) * (v.bn // v.wn) -- 0 when a warp tile is larger than the block's
        v.threads = math.max(32 * v.warps, 32)
        -- Column groups of the B slice a thread copies per row: 1 where the
        -- block has at least as many threads as a row has copies.
        v.b_groups = math.max(1, (v.bn // v.vec) // v.threads)
        v.pad_a = 4 -- keeps 16-byte rows; spreads the transposed 4-byte copies over the banks
        v.smem_static = 0
        v.smem_dynamic = v.stages * v.bk * ((v.bm + v.pad_a) + v.bn) * F
        if v.cluster > 1 then -- the partial tile is parked in the same shared memory
          v.smem_dynamic = math.max(v.smem_dynamic, v.bm * (v.bn + 4) * F)
        end
        if v.epi == 1 then -- so are the warps' rows of C on their way out (write_rows)
          v.smem_dynamic = math.max(v.smem_dynamic, v.warps * v.wtm * v.wn * F)
        end
        -- Registers a thread needs: accumulators, two sets of fragments, and
        -- about 32 for addresses, indices and the copy state.
        v.regs = v.tm * v.tn + 2 * (v.tm + v.tn) + 32
        -- Blocks per SM that registers, threads and shared memory allow.
        local by_regs = t.regs_per_sm // (v.threads * (math.ceil(v.regs / 8) * 8))
        local by_threads = t.max_threads_per_sm // v.threads
        local by_smem = t.smem_per_sm // (v.smem_dynamic + 1024)
        v.fit = math.min(by_regs, by_threads, by_smem)
        v.blocks_per_sm = v.occ > 0 and v.occ or v.fit -- for dispatch's cost model
        v.min_cc, v.align = v.cluster > 1 and 90 or 80, v.vec
      end,
      constraints = {
        -- What can be built at all.
        -- needs: the parameters a verdict follows from; what breaks one
        -- rules out the product's rest that shares them (most of it).
        { "warp tiles cover the block tile", function(v) return v.bm % v.wm == 0 and v.bn % v.wn == 0 end,
          needs = { "bm", "bn", "tt", "wtm" } },
        { "64, 128 or 256 threads per block",
          function(v) return v.threads == 64 or v.threads == 128 or v.threads == 256 end,
          needs = { "bm", "bn", "tt", "wtm" } },
        { "each thread copies one column of the A slice, a whole number of times",
          function(v) return v.threads % v.bk == 0 and (v.bm * v.bk) % v.threads == 0 end,
          needs = { "bm", "bn", "bk", "tt", "wtm" } },
        { "each thread copies one column group of the B slice a whole number of times, or whole rows' worth " ..
          "of them where a row has more copies than the block has threads",
          function(v)
            local row = v.bn // v.vec
            return (v.threads % row == 0 and (v.bk * row) % v.threads == 0) or row % v.threads == 0
          end, needs = { "bm", "bn", "bk", "tt", "wtm", "vec" } },
        { "at most 32 copies of A per thread and slice (one bit each in the row mask)",
          function(v) return v.bm * v.bk // v.threads <= 32 end, needs = { "bm", "bn", "bk", "tt", "wtm" } },
        { "warps read at most 128 bytes of A or B per k (one shared-memory wavefront)",
          function(v) return v.wtm * 16 <= 128 and v.wtn * 16 <= 128 end, needs = { "wtm" } },
        { "at least one block fits an SM", function(v) return v.fit >= 1 end },
        { "the occupancy hint is 0 or the most blocks that registers (estimated), threads and shared memory " ..
          "allow: a lower hint changes nothing, a higher one makes registers spill",
          function(v) return v.occ == 0 or v.occ == v.fit end },
        { "cluster split-K needs sm_90 (clusters and distributed shared memory)",
          function(v, t) return v.cluster == 1 or t.cc >= 90 end },
        { "one way of splitting K at a time", function(v) return v.cluster == 1 or v.split == 1 end,
          needs = { "split", "cluster" } },
        { "whole-row stores (epi 1) are the warp tiles' own epilogue: a cluster's blocks store C from their " ..
          "reduction instead", function(v) return v.epi == 0 or v.cluster == 1 end },
        { "cluster split-K: the tile's rows split evenly over the cluster",
          function(v) return v.bm % v.cluster == 0 end },
      },
      -- What can win.  Measured on an H100 (bench/reference/README.md, "How
      -- the matmul space was narrowed"): the pairings, depths and hints left
      -- out lost to these by 2% or more.
      prune = {
        { SUITE("whole-row stores of C (epi 1) for 4-byte copies of B, and for float4 copies that split K " ..
          "through a workspace, whose chunks go out in whole rows too (run 35: seven suites, every variant " ..
          "timed: 4845x6387x22 with ldc odd from 0.91 of cuBLAS to 1.34, 15475x125x243 from 0.81 to 0.90); the " ..
          "float4 tiles that store C themselves won no shape with them (the suites' unaligned C comes with an " ..
          "unaligned B, which the 4-byte tiles read in place)"),
          function(v) return v.epi == 0 or v.vec == 1 or v.split > 1 end },
        -- The blocks of 64 threads (two warps): this rule decides which are
        -- kept; the rules below that would drop them let them pass.
        { SUITE("blocks of 64 threads (run 34: every one of them with BK 8 or 16 and 3 stages timed on six " ..
          "suites, three of them bands of few rows, few columns, and 100-1000 of both): 16x64 and 32x32 of 4x4 " ..
          "threads unsplit or split up to 256 ways, 5-15% faster than the 128-thread small tiles on small " ..
          "problems; BK 8 for 4-byte copies of B, 16 for float4; no clusters (they won a few shapes by 1-4%), " ..
          "no 64x64 of 8x8 threads (won none). 32x128 of 8x8 threads, cuBLAS's tile for long K over a few " ..
          "dozen rows, won that class by up to 1.3 times (20x8920x13415 with B off 16 bytes: 0.78 to 1.01 of " ..
          "cuBLAS), but tuned, dispatch also sent it where it lost by 18-34% (the float4 one to hundreds of " ..
          "rows, 294x8276x13102; the 4-byte one to 69x5231x224, 78x6783x8006): on six suites that took no part " ..
          "in choosing, dispatch was faster without it. Run 36: its 4-byte copies split 16 or 256 ways are " ..
          "back, serving only calls of at most 32 rows (kt_matmul_serves_shape), where one row of blocks reads " ..
          "B once; all its losses were on more rows"),
          function(v)
            if v.threads ~= 64 then return true end
            if v.stages ~= 3 or v.occ ~= 0 or v.cluster ~= 1 or v.bk ~= (v.vec == 1 and 8 or 16) then return false end
            if v.tt == "8x8" then
              return v.bm == 32 and v.bn == 128 and v.vec == 1 and (v.split == 16 or v.split == 256)
            end
            -- 48x128 of 12x8 threads (run 36): M <= 48 the same way.
            if v.tt == "12x8" then return v.bm == 48 and v.bn == 128 and (v.split == 16 or v.split == 256) end
            return v.tt == "4x4" and (v.bm == 16 or v.bm == 32) and (v.split == 1 or v.split == 256)
          end },
        { H100("block and thread tiles pair as 32x64, 32x128 and 64x64 with 4x4 (many threads for small problems), " ..
          "64x128, 128x64 and 128x128 with 8x8, 128x256 with 8x16 (one block per SM)"),
          function(v)
            if v.threads == 64 then return true end
            -- 96x128 of 12x8 threads, for 65-96 rows (run 36; kt_matmul_serves_shape: M <= 96).
            if v.tt == "12x8" then return v.bm == 96 and v.bn == 128 end
            if v.tt == "4x4" then return v.bm * v.bn <= 64 * 64 or (v.bm == 32 and v.bn == 128) end
            if v.tt == "8x8" then return v.bm >= 64 and v.bn <= 128 and v.bm * v.bn >= 64 * 128 end
            return v.bm == 128 and v.bn == 256
          end },
        { H100("BK 16, or 8 for 128x256 blocks and for 4-byte copies of B (v1)"),
          function(v) return v.bk == (v.bn == 256 and v.bm == 128 and 8 or 16) or v.vec == 1 end },
        { H100("4-byte copies of B (unaligned calls): BK 8, 3 stages; the workspace split only as deep as " ..
          "the aligned ones' (below)"),
          function(v) return v.vec == 4 or (v.bk == 8 and v.stages == 3) end },
        { H100("2 to 4 stages for 128x128 blocks; 3 or 4 for the others; 3 when K is split or for 4x4 threads"),
          function(v)
            if v.split > 1 or v.cluster > 1 or v.tm * v.tn == 16 then return v.stages == 3 end
            return v.stages >= 3 or (v.bm == 128 and v.bn == 128)
          end },
        { H100("the occupancy hint for 128x256 blocks (one per SM), 8x8 blocks of 128 threads and 4x4 blocks " ..
          "of 256 threads; both ways for 128x128 blocks; none for 32x64 blocks"),
          function(v)
            if v.bm == 128 and v.bn == 128 then return true end
            if v.bn == 256 or (v.tm * v.tn == 64 and v.threads == 128) then return v.occ > 0 end
            if v.tm * v.tn == 16 then return (v.occ > 0) == (v.threads == 256) end
            return true
          end },
        { H100("workspace split-K: 4 chunks for 128x128 and 64x128 blocks (long K on few tiles), " ..
          "256 for blocks of 64x64 or fewer outputs (K much longer than M and N); 16 for the 4-chunk tiles " ..
          "with float4 copies, since chunks are no more than fill a wave (bench/reference/matmul_random, run 5); " ..
          "4 and 16 also for 128x64 blocks with float4 copies, cuBLAS's tile at 1684x192x6886 (split 6 ways), " ..
          "where they reached 0.89 of cuBLAS against 0.75 before (run 21); 256 also for 64x128 and 128x64 blocks " ..
          "with 4-byte copies, for long K over a small C with B's rows off 16 bytes, where the 4x4-thread tiles " ..
          "split 256 ways reached 0.72 to 0.77 of cuBLAS (113x618x13843: 0.77 to 0.97; run 32)"),
          function(v)
            if v.split == 1 or v.threads == 64 or v.tt == "12x8" then return true end
            local wide = v.bn == 128 or (v.bm == 128 and v.bn == 64 and v.vec == 4)
            if v.split == 4 then return wide and v.bm >= 64 and (v.occ == 0 or v.threads == 128) end
            if v.split == 16 then return wide and v.bm >= 64 and (v.occ == 0 or v.threads == 128) and v.vec == 4 end
            local tile = v.bm .. "x" .. v.bn
            return (v.bm * v.bn <= 64 * 64 and v.bn <= 128) or (v.vec == 1 and (tile == "64x128" or tile == "128x64"))
          end },
        { SUITE("clusters of 8 (run 6: five seeds, every variant timed) for 32x64, 64x32 and 128x64 blocks, " ..
          "16x128 blocks with 4-byte copies and 128x128 with float4; the other 8-block clusters won no shape"),
          function(v)
            if v.cluster ~= 8 then return true end
            local tile = v.bm .. "x" .. v.bn
            return tile == "32x64" or tile == "64x32" or tile == "128x64" or (tile == "16x128" and v.vec == 1) or
              (tile == "128x128" and v.vec == 4)
          end },
        { SUITE("12x8 thread tiles (48x128 blocks of two warps, 96x128 of four) as run 36 timed them on bands of " ..
          "33-64 and 65-100 rows: unclustered, 3 stages, no occupancy hint (K split through a workspace); the " ..
          "rest not tried"),
          function(v) return v.tt ~= "12x8" or (v.cluster == 1 and v.occ == 0 and v.stages == 3) end },
        { H100("cluster split-K for blocks up to 128x128"),
          function(v) return v.cluster == 1 or v.bm * v.bn <= 128 * 128 end },
        { H100("128x128 blocks in clusters with the occupancy hint (caps registers at 128 for the reduction)"),
          function(v) return v.cluster == 1 or v.bm * v.bn < 128 * 128 or v.occ > 0 end },
        { H100("4-byte copies (v1) for 128x128, 128x256 and 64x64 blocks, and the small tiles of skinny products; " ..
          "for 64x128 blocks alone or in clusters of 2, which won 610x15178x129 (B off 16 bytes: 0.95 of cuBLAS, " ..
          "0.83 for the float4 tile with B staged), 43x15489x7373 and 4124x97x649 (bench/reference/matmul_random, " ..
          "run 21; 128x64 blocks with 4-byte copies won none of its six suites, but split 256 ways they won long " ..
          "K over a small C, run 32)"),
          function(v)
            return v.vec == 4 or v.threads == 64 or (v.bm == 128 and v.bn >= 128) or (v.bm == 64 and v.bn == 64) or
              v.tt == "12x8" or
              v.bm * v.bn <= 32 * 64 or (v.bm == 64 and v.bn == 128 and v.cluster <= 2) or
              (v.bm == 128 and v.bn == 64 and v.split == 256)
          end },
        -- The tiles of 16 rows or 32 columns: what won neither a shape of
        -- the tuning set nor one of the random suite (bench_matmul_random,
        -- default seed) when every variant was timed.
        { SUITE("16x256 blocks in clusters of 4 only (256x256x4096); clusters of 2 for 16x128 blocks with " ..
          "float4 copies and for 32x64 blocks with 4-byte copies lost everywhere by 1% or more"),
          function(v)
            if v.bm == 16 and v.bn == 256 then return v.cluster == 4 end
            if v.cluster == 2 then return not ((v.bm == 16 and v.vec == 4) or (v.bm == 32 and v.vec == 1)) end
            return true
          end },
        { SUITE("no workspace split for 32x128 blocks of 4x4 threads, nor for 64x64 blocks with 4-byte copies " ..
          "(lost by 8% or more)"),
          function(v)
            return v.split == 1 or v.threads == 64 or
              not ((v.bm == 32 and v.bn == 128) or (v.bm == 64 and v.bn == 64 and v.vec == 1))
          end },
      },
    },
    {
      algo = "direct",
      template = "templates/matmul_direct.cu.tpl",
      doc = "short-K kernel: block tile BM x BN, A and B panels BK deep copied once per chunk through registers " ..
        "(any alignment), no pipeline; lanes along N so every store of C is a coalesced row; serves K <= 4 BK",
      params = {
        { "bm", { 32, 64 }, "BM: rows of C per block", tag = "" },
        { "bn", { 128 }, "BN: columns of C per block", join = "x" },
        { "bk", { 16, 32 }, "BK: K per chunk in shared memory (one chunk for the K it is meant for)", join = "x" },
        { "tt", { "4x4", "8x4" }, "TM x TN: rows x columns of C per thread; columns 32 apart (coalesced stores)",
          tag = "tt" },
      },
      derive = function(v, t)
        v.tm, v.tn = DIRECT_TILE[v.tt][1], DIRECT_TILE[v.tt][2]
        v.threads = (v.bm // v.tm) * (v.bn // v.tn)
        v.smem_static = v.bk * ((v.bm + 4) + v.bn) * F
        v.smem_dynamic = 0
        v.regs = v.tm * v.tn + v.tm + v.tn + 32
        v.blocks_per_sm = math.min(t.max_threads_per_sm // v.threads,
          t.regs_per_sm // (v.threads * (math.ceil(v.regs / 8) * 8)), t.smem_per_sm // (v.smem_static + 1024))
        v.cluster, v.min_cc, v.align = 1, 0, 1
      end,
      constraints = {
        { "a warp is 32 consecutive columns of one thread row (BN / TN a multiple of 32)",
          function(v) return (v.bn // v.tn) % 32 == 0 end },
        { "the thread tile divides the block tile", function(v) return v.bm % v.tm == 0 end },
        { "at least one block fits an SM", function(v) return v.blocks_per_sm >= 1 end },
      },
      prune = {
        { SUITE("short-K tiles 32x128x16 with 4x4 threads and 64x128 with 8x4, BK 16 or 32: each won a shape " ..
          "of the suites (K 1 to 26), the others none"),
          function(v)
            return (v.bm == 32 and v.bk == 16 and v.tt == "4x4") or (v.bm == 64 and v.tt == "8x4")
          end },
      },
    },
    {
      algo = "skinny",
      template = "templates/matmul_skinny.cu.tpl",
      doc = "few-row kernel (M <= TM): B read once in coalesced 4-byte rows, A through each warp's shared memory, " ..
        "K split over the warps and a cluster's blocks, partial tiles added in a fixed order; serves M <= TM",
      params = {
        { "tt", { "4x1", "4x4", "8x4", "16x2", "32x1", "16x4", "32x4" },
          "TM x TN: rows of C per block x columns per lane (32 apart)",
          tag = "tt" },
        { "threads", { 256 }, "threads per block: 8 warps, each summing its own chunk of K", tag = "t" },
        { "depth", { 8, 16 }, "KI: rows of B each lane has in flight (TN reads each) before their multiply-adds",
          tag = "d" },
        { "cluster", { 1, 2, 4, 8, 16 }, "blocks per cluster along K (more chunks; partials added through " ..
          "distributed shared memory; over 8 needs the non-portable opt-in); 1 = none", tag = "c" },
        STREAM,
      },
      derive = function(v, t)
        v.tm, v.tn = SKINNY_TILE[v.tt][1], SKINNY_TILE[v.tt][2]
        stream_loads(v)
        -- The transposed A piece is written one float4 per lane: a row
        -- stride of an odd number of float4 puts a quarter-warp's 8 stores
        -- on 8 distinct 16-byte bank groups.
        v.lda_s = 4 * ((v.tm // 4) % 2 == 0 and v.tm // 4 + 1 or v.tm // 4)
        local warps = v.threads // 32
        v.smem_static = math.max(warps * 32 * v.lda_s, v.tm * 32 * v.tn) * F -- A pieces, then the partial tile
        v.smem_dynamic = 0
        -- Registers: the sums, KI k of B in flight, two steps of A, about 32 more.
        v.regs = v.tm * v.tn + v.depth * v.tn + 2 * v.tm + 32
        v.blocks_per_sm = blocks_per_sm(v, t)
        v.min_cc, v.align = v.cluster > 1 and 90 or 80, 1
      end,
      constraints = {
        { "at least one block fits an SM", function(v) return v.blocks_per_sm >= 1 end },
        { "the cluster's blocks finish whole rows of the tile (32 TN columns divide the threads)",
          function(v) return v.threads % (32 * v.tn) == 0 end },
        CLUSTERS_NEED_SM90,
      },
      prune = {
        { VEC("reads 16 rows of B deep, tiles 4x1, 4x4, 8x4 and 16x2, clusters of 1, 4, 8 and 16: the rest " ..
          "lost 1.3% (geomean) and 7% at most"),
          function(v)
            local tile = v.tm * 100 + v.tn
            return v.depth == 16 and (tile == 401 or tile == 404 or tile == 804 or tile == 1602) and v.cluster ~= 2
          end },
        { "H100 (bench/reference/matmul_random/README.md, run 29): B loaded past L1 (stream = 1) ran this kernel " ..
          "4% slower (geomean over its tuned shapes)",
          function(v) return v.stream == 0 end },
      },
    },
    {
      algo = "gemv",
      template = "templates/matmul_gemv.cu.tpl",
      doc = "few-column kernel (N <= TN): A read once in coalesced 4-byte rows, B's rows as float4s where aligned, " ..
        "KS x (TM + TN) reads in flight per lane and no barrier in the loop; lanes, KW warps and a cluster's " ..
        "blocks split K, sums added in a fixed order; serves N <= TN",
      params = {
        { "tt", { "1x4", "4x4", "2x8", "1x16", "4x8", "8x8", "4x16", "1x32", "2x32" },
          "TM x TN: rows of C per warp x columns of C per block; a lane reads TN values of B per TM of A",
          tag = "tt" },
        { "threads", { 256 }, "threads per block: 8 warps", tag = "t" },
        { "kwarps", { 1, 2, 8 }, "KW: warps of a block along K (8 / KW along rows); more serve fewer rows", tag = "q" },
        { "depth", { 2, 4, 8 }, "KS: k per lane in one step, whose KS x (TM + TN) reads are in flight at once",
          tag = "d" },
        { "cluster", { 1, 4, 8 }, "blocks per cluster along K (more chunks; partials added through " ..
          "distributed shared memory); 1 = none", tag = "c" },
        STREAM,
      },
      derive = function(v, t)
        v.tm, v.tn = GEMV_TILE[v.tt][1], GEMV_TILE[v.tt][2]
        stream_loads(v)
        v.smem_static = (v.threads // 32) * v.tm * v.tn * F -- the partial rows
        v.smem_dynamic = 0
        -- Registers: two steps of reads (the loop is unrolled twice), the sums, about 32 more.
        v.regs = 2 * v.depth * (v.tm + v.tn) + v.tm * v.tn + 32
        v.blocks_per_sm = blocks_per_sm(v, t)
        v.min_cc, v.align = v.cluster > 1 and 90 or 80, 1
      end,
      constraints = {
        CLUSTERS_NEED_SM90,
        { "the reads in flight fit the registers without spilling (2 KS (TM + TN) + TM TN + 32 <= 255)",
          function(v) return v.regs <= 255 end },
      },
      prune = {
        { VEC("4 k per lane; one or two warps along K alone, or all 8 in clusters of 1, 4 or 8: the rest lost " ..
          "0.5% (geomean) and 6% at most"),
          -- A tile whose 4 k per lane would not fit the registers (4x16,
          -- 1x32, 2x32) takes 2; 4x16 stays in the space only so that
          -- `--no-prune` can time it again.
          function(v)
            local ks = 2 * 4 * (v.tm + v.tn) + v.tm * v.tn + 32 <= 255 and 4 or 2
            return v.depth == ks and ((v.kwarps < 8 and v.cluster == 1) or v.kwarps == 8)
          end },
        { "H200 (bench/reference/matmul_random/README.md, run 15): 4 rows of 8 columns but not 8 of 8 nor 4 of 16 " ..
          "(2 k per lane): 4x8 won every shape of N 5 and 8 with M of 3000 or more (4291x8x6996 58.9 us, 2x8 76.4, " ..
          "8x8 68.4; at 8x8x4096 2x8 split over a cluster did), where 4x16 lost to the warp tiles at N 12 and 16 " ..
          "by 2% to 33%",
          function(v) return v.tt ~= "8x8" and v.tt ~= "4x16" end },
      },
    },
    {
      algo = "matvec",
      template = "templates/matmul_matvec.cu.tpl",
      doc = "matrix times a vector (N = 1): A read once in 16-byte pieces from each row's first 16-byte boundary " ..
        "(any lda, any alignment), K interleaved over the warps along K so that a block sweeps each row in one " ..
        "contiguous run; sums added in a fixed order; serves N = 1 with K >= 128 KW",
      params = {
        { "tt", { "2x1", "4x1", "8x1" }, "TM x TN: rows of C per warp x columns (1)", tag = "tt" },
        { "threads", { 256 }, "threads per block: 8 warps", tag = "t" },
        { "kwarps", { 8 }, "KW: warps of a block along K (8 / KW along rows), interleaved piece by piece",
          tag = "q" },
        { "depth", { 1, 2 }, "DEP: 16-byte pieces of each of its TM rows a lane reads in one step, all in flight " ..
          "before their multiply-adds", tag = "d" },
        STREAM,
      },
      derive = function(v, t)
        v.tm, v.tn = MATVEC_TILE[v.tt][1], MATVEC_TILE[v.tt][2]
        stream_loads(v, true)
        v.smem_static = (v.threads // 32) * v.tm * F -- the warps' row sums
        v.smem_dynamic = 0
        -- Registers: the pieces in flight, the rows' starts, heads and sums, about 32 more.
        v.regs = 4 * v.depth * v.tm + 5 * v.tm + 32
        v.blocks_per_sm = blocks_per_sm(v, t)
        v.cluster, v.min_cc, v.align = 1, 80, 1
      end,
      constraints = {
        { "the reads in flight fit the registers without spilling (4 DEP TM + 5 TM + 32 <= 255)",
          function(v) return v.regs <= 255 end },
      },
    },
    {
      algo = "vecmat",
      template = "templates/matmul_vecmat.cu.tpl",
      doc = "a row vector times a matrix (M = 1): B read once in coalesced 4-byte rows (any ldb, any alignment), " ..
        "nothing of A kept on chip, the block's warps taking rows in turns; K split through a cluster, or through " ..
        "a workspace into as many chunks as fill one wave; sums added in a fixed order; serves M = 1",
      params = {
        { "tt", { "1x1", "1x2", "1x4" }, "TM x TN: rows of C (1) x columns per lane (32 apart)", tag = "tt" },
        { "threads", { 256 }, "threads per block: 8 warps, taking the rows of B in turns", tag = "t" },
        { "depth", { 8, 16 }, "KI: rows of B each lane has in flight (TN reads each) before their multiply-adds",
          tag = "d" },
        { "split", { 1, 64 }, "most chunks K is split into through a workspace (fewer where fewer fill one " ..
          "wave of blocks); 1 = none", tag = "k" },
        { "cluster", { 1, 8, 16 }, "blocks per cluster along K (the chunks' sums added through distributed " ..
          "shared memory; over 8 needs the non-portable opt-in); 1 = none", tag = "c" },
        STREAM,
      },
      derive = function(v, t)
        v.tm, v.tn = VECMAT_TILE[v.tt][1], VECMAT_TILE[v.tt][2]
        stream_loads(v)
        -- The warps' column sums, and the block's for the cluster to read.
        v.smem_static = ((v.threads // 32) + (v.cluster > 1 and 1 or 0)) * 32 * v.tn * F
        v.smem_dynamic = 0
        -- Registers: the reads in flight and A's values for them, the sums, about 32 more.
        v.regs = v.depth * (v.tn + 1) + v.tn + 32
        v.blocks_per_sm = blocks_per_sm(v, t)
        v.min_cc, v.align = v.cluster > 1 and 90 or 80, 1
      end,
      constraints = {
        { "the reads in flight fit the registers without spilling (KI (TN + 1) + TN + 32 <= 255)",
          function(v) return v.regs <= 255 end },
        { "K is split one way: through a workspace or through a cluster, not both, nor neither",
          function(v) return (v.split > 1) ~= (v.cluster > 1) end },
        CLUSTERS_NEED_SM90,
      },
      prune = {
        { "H100 (bench/reference/matmul_random/README.md, run 29): B loaded past L1 (stream = 1) won only where B " ..
          "is large (1x4096x4096, up to 1.22x), and dispatch, calibrating these variants' cost there, sent calls " ..
          "of a short K to them at 0.53 to 0.71 of the best (1x7244x339, 1x5936x161, 1x780x79)",
          function(v) return v.stream == 0 end },
      },
    },
  },

  -- Family-wide constraints, checked for every kernel.
  constraints = {
    { "threads per block <= the target's limit (1024)", function(v, t) return v.threads <= t.max_threads end },
    { "shared memory per block <= the target's opt-in limit",
      function(v, t) return v.smem_static + v.smem_dynamic <= t.smem_optin end },
    { "static shared memory <= 48 KB (larger needs dynamic)", function(v) return v.smem_static <= 48 * 1024 end },
  },
}
return S
