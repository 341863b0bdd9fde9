-- templates/matmul.space.lua: the parameter space of the matmul family.
--
-- C = alpha * A * B + beta * C, row-major fp32, any M, N, K >= 1.
-- Each kernel lists { parameter, {values}, "meaning" }; derive() computes
-- what follows from them; constraints drop what cannot build or cannot win,
-- each with the reason that `make generate --explain` prints.
local F = 4 -- bytes per float

return {
  family = "matmul",
  template = "templates/matmul.cu.tpl",

  -- Untuned calls use the first of these that serves the call.  The last,
  -- the Programming Guide's kernel, serves every input.
  defaults = { "matmul_rb_128x128x8_t8x8_v4_g8_o0_s1", "matmul_rb_128x128x8_t8x8_v1_g8_o0_s1", "matmul_bs16_pad0" },

  kernels = {
    {
      algo = "tiled",
      doc = "CUDA C Programming Guide shared-memory tiled kernel, one output per thread",
      params = {
        { "bs", { 8, 16, 32 }, "BLOCK_SIZE: edge of the square tile; one output per thread" },
        { "pad", { 0, 1 }, "floats of padding at the end of each shared-memory row" },
      },
      derive = function(v)
        v.threads = v.bs * v.bs
        v.smem_static = 2 * v.bs * (v.bs + v.pad) * F
        v.smem_dynamic = 0
        v.cluster, v.min_cc, v.align = 1, 0, 1
      end,
      name = function(v) return ("matmul_bs%d_pad%d"):format(v.bs, v.pad) end,
    },
    {
      algo = "rb",
      doc = "register-blocked kernel: block tile BM x BN x BK, thread tile TM x TN, " ..
        "A transposed in shared memory, double-buffered tiles",
      params = {
        { "bm", { 32, 64, 128 }, "BM: rows of C per block" },
        { "bn", { 32, 64, 128 }, "BN: columns of C per block" },
        { "bk", { 8, 16 }, "BK: depth of the K slice staged in shared memory per step" },
        { "tm", { 4, 8 }, "TM: rows of C per thread (register tile)" },
        { "tn", { 4, 8 }, "TN: columns of C per thread (register tile)" },
        { "vec", { 1, 4 }, "floats per global load; 4 needs 16-byte aligned pointers and ldX % 4 == 0" },
        { "group", { 8 }, "block rows per band of the launch order (L2 reuse of B)" },
        { "occ", { 0, 2 }, "blocks per SM the compiler must fit (caps registers); 0 = no hint" },
        { "split", { 1, 4, 16, 128 }, "most chunks K is split into (deterministic split-K); 1 = none" },
      },
      derive = function(v)
        v.threads = (v.bm // v.tm) * (v.bn // v.tn)
        -- Pad the transposed A tile by 4 floats: keeps 16-byte rows and
        -- moves the two K-halves of a transposed store to other banks.
        v.pad_a = 4
        v.smem_static = 0
        v.smem_dynamic = 2 * v.bk * ((v.bm + v.pad_a) + v.bn) * F
        v.a_loads = v.bm * v.bk // v.vec // v.threads
        v.b_loads = v.bk * v.bn // v.vec // v.threads
        v.cluster, v.min_cc, v.align = 1, 0, v.vec
      end,
      name = function(v)
        return ("matmul_rb_%dx%dx%d_t%dx%d_v%d_g%d_o%d_s%d"):format(
          v.bm, v.bn, v.bk, v.tm, v.tn, v.vec, v.group, v.occ, v.split)
      end,
      constraints = {
        { "at least 128 threads per block, to hide memory latency", function(v) return v.threads >= 128 end },
        { "every thread loads a whole number of A-tile vectors",
          function(v) return (v.bm * v.bk // v.vec) % v.threads == 0 and v.a_loads >= 1 end },
        { "every thread loads a whole number of B-tile vectors",
          function(v) return (v.bk * v.bn // v.vec) % v.threads == 0 and v.b_loads >= 1 end },
        { "thread tile of at most 64 accumulators, so registers do not spill",
          function(v) return v.tm * v.tn <= 64 end },
        { "the occupancy hint leaves room for the accumulators plus ~48 registers, else it spills",
          function(v, t) return v.occ == 0 or t.regs_per_sm // (v.threads * v.occ) >= v.tm * v.tn + 48 end },
        { "the occupancy hint fits the SM's threads", function(v, t) return v.threads * v.occ <= t.max_threads_per_sm end },
        { "at most 48 KB of shared memory: the rb launcher does not opt in to more",
          function(v) return v.smem_dynamic <= 48 * 1024 end },
        { "32-wide tiles (for problems too small to fill the GPU) use float4 loads and no occupancy hint",
          function(v) return (v.bm > 32 and v.bn > 32) or (v.vec == 4 and v.occ == 0) end },
        { "split-K only for tiles up to 64x128: larger tiles are for shapes that fill the GPU anyway",
          function(v) return v.split == 1 or v.bm * v.bn <= 64 * 128 end },
        { "split-K variants use float4 loads and no occupancy hint (they are for long K, not for spread)",
          function(v) return v.split == 1 or (v.vec == 4 and v.occ == 0) end },
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
