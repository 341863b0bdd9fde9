@ -- templates/matmul.cu.tpl: the matmul family, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1.  The space
@ -- (templates/matmul.space.lua) sets `algo` and the values used below.
#include "kt_variant.h"
#if KT_ABI_VERSION != 2
#error "this file was generated for kt_variant.h ABI 2: run make generate"
#endif

@ if algo == "tiled" then
/*
 * The CUDA C Programming Guide's shared-memory matrix multiply.
 *
 * Each block computes one BS x BS tile of C, one element per thread.  It
 * walks along K in steps of BS: the block stages a BS x BS tile of A and one
 * of B in shared memory, so each element loaded from global memory is used
 * BS times.  Unlike the Guide's version, edge tiles are predicated: loads
 * outside A or B read as zero (so the inner product needs no test) and
 * threads outside C store nothing.  That makes any M, N, K valid.
 */
constexpr int BS = $(bs);  // BLOCK_SIZE
constexpr int PAD = $(pad); // floats of padding per shared-memory row

extern "C" __global__ void __launch_bounds__(BS * BS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_n)
{
  __shared__ float As[BS][BS + PAD];
  __shared__ float Bs[BS][BS + PAD];

  // A 1-D grid of tiles, row by row: grids of any size fit in gridDim.x.
  const int tile_m = blockIdx.x / tiles_n, tile_n = blockIdx.x % tiles_n;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = tile_m * BS + ty;
  const int col = tile_n * BS + tx;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * lda + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * ldb + col] : 0.0f;
    // Both tiles must be complete before any thread reads them ...
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k)
      acc += As[ty][k] * Bs[k][tx];
    // ... and fully read before the next step overwrites them.
    __syncthreads();
  }
  if (row < M && col < N) {
    float *c = &C[(size_t)row * ldc + col];
    // beta == 0 must not read C: it may hold NaN.
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long tiles_m = (a->M + BS - 1) / BS, tiles_n = (a->N + BS - 1) / BS;
  if (tiles_m * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n));
  cfg.blockDim = dim3(BS, BS);
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_n);
}
@ elseif algo == "rb" then
/*
 * Register-blocked matrix multiply.
 *
 * A block computes a BM x BN tile of C with THREADS threads; each thread
 * keeps a TM x TN tile of accumulators in registers, so every value it reads
 * from shared memory feeds TM or TN multiply-adds instead of one.
 *
 * Per step along K the block stages a BM x BK slice of A and a BK x BN slice
 * of B in shared memory.  A is stored transposed (As[k][m]), so that the TM
 * values of A a thread needs at step k are contiguous and come in as float4,
 * like the TN values of B.  Two buffers alternate: while the block computes
 * on one, the next slices are already in flight from global memory into
 * registers, and go to the other buffer afterwards.
 *
 * A thread's TM rows are not contiguous: they are TM/4 groups of 4, one in
 * each BM/(TM/4) band of the tile (likewise for columns).  Then the 16
 * threads that share a row of the block read 16 consecutive float4 of B,
 * which is the conflict-free pattern for 128-bit shared-memory loads, and
 * the epilogue writes C in 256-byte runs.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile
constexpr int TM = $(tm), TN = $(tn);            // thread tile
constexpr int VEC = $(vec);                      // floats per global load
constexpr int GROUP = $(group);                  // tile rows per band of the launch order
constexpr int THREADS = (BM / TM) * (BN / TN);
constexpr int GM = TM / 4, GN = TN / 4;          // float4 groups per thread tile
constexpr int LDA_S = BM + $(pad_a);             // row stride of the transposed A tile
constexpr int A_LOADS = BM * BK / VEC / THREADS; // A vectors each thread loads per step
constexpr int B_LOADS = BK * BN / VEC / THREADS; // B vectors each thread loads per step
static_assert(A_LOADS * VEC * THREADS == BM * BK, "A tile splits evenly over threads");
static_assert(B_LOADS * VEC * THREADS == BK * BN, "B tile splits evenly over threads");

// Global -> registers: the A slice rows row0.., columns k0.., zero outside A.
static __device__ __forceinline__ void load_a(float (&ra)[A_LOADS][VEC], const float *__restrict__ A,
                                              long long lda, int M, int K, int row0, int k0)
{
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int r = row0 + c / (BK / VEC), k = k0 + (c % (BK / VEC)) * VEC;
@ if vec == 4 then
    if (r < M && k + 4 <= K) {
      const float4 x = __ldg(reinterpret_cast<const float4 *>(A + (size_t)r * lda + k));
      ra[i][0] = x.x; ra[i][1] = x.y; ra[i][2] = x.z; ra[i][3] = x.w;
    } else {
#pragma unroll
      for (int v = 0; v < 4; ++v)
        ra[i][v] = (r < M && k + v < K) ? __ldg(A + (size_t)r * lda + k + v) : 0.0f;
    }
@ else
    ra[i][0] = (r < M && k < K) ? __ldg(A + (size_t)r * lda + k) : 0.0f;
@ end
  }
}

// Global -> registers: the B slice rows k0.., columns col0.., zero outside B.
static __device__ __forceinline__ void load_b(float (&rb)[B_LOADS][VEC], const float *__restrict__ B,
                                              long long ldb, int N, int K, int col0, int k0)
{
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int k = k0 + c / (BN / VEC), n = col0 + (c % (BN / VEC)) * VEC;
@ if vec == 4 then
    if (k < K && n + 4 <= N) {
      const float4 x = __ldg(reinterpret_cast<const float4 *>(B + (size_t)k * ldb + n));
      rb[i][0] = x.x; rb[i][1] = x.y; rb[i][2] = x.z; rb[i][3] = x.w;
    } else {
#pragma unroll
      for (int v = 0; v < 4; ++v)
        rb[i][v] = (k < K && n + v < N) ? __ldg(B + (size_t)k * ldb + n + v) : 0.0f;
    }
@ else
    rb[i][0] = (k < K && n < N) ? __ldg(B + (size_t)k * ldb + n) : 0.0f;
@ end
  }
}

// Registers -> shared memory: A transposed into As[k][m], B as is into Bs[k][n].
static __device__ __forceinline__ void store_tiles(float *As, float *Bs, const float (&ra)[A_LOADS][VEC],
                                                   const float (&rb)[B_LOADS][VEC])
{
#pragma unroll
  for (int i = 0; i < A_LOADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int r = c / (BK / VEC), k = (c % (BK / VEC)) * VEC;
#pragma unroll
    for (int v = 0; v < VEC; ++v)
      As[(k + v) * LDA_S + r] = ra[i][v];
  }
#pragma unroll
  for (int i = 0; i < B_LOADS; ++i) {
    const int c = threadIdx.x + i * THREADS;
    const int k = c / (BN / VEC), n = (c % (BN / VEC)) * VEC;
@ if vec == 4 then
    *reinterpret_cast<float4 *>(&Bs[k * BN + n]) = make_float4(rb[i][0], rb[i][1], rb[i][2], rb[i][3]);
@ else
    Bs[k * BN + n] = rb[i][0];
@ end
  }
}

@ if split > 1 then
/*
 * Split-K: when M x N has too few tiles to fill the GPU but K is long, the
 * K range is cut into gridDim.y chunks of k_chunk.  Each block writes its
 * partial tile to a workspace W[z][M][N]; a second kernel adds the chunks
 * in order z = 0, 1, ... and applies alpha and beta.  The order is fixed,
 * so the result is the same on every run (no atomics).
 */
@ end
extern "C" __global__ void __launch_bounds__(THREADS$(occ > 0 and (", " .. occ) or ""))
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_m, int tiles_n$(split > 1 and ", int k_chunk, float *__restrict__ W" or ""))
{
  extern __shared__ float4 smem4[];
  float *const smem = reinterpret_cast<float *>(smem4);
  float *const As = smem;                  // [2][BK][LDA_S]
  float *const Bs = smem + 2 * BK * LDA_S; // [2][BK][BN]

  /* Launch order: the 1-D grid is cut into bands of GROUP tile rows and each
   * band is walked column by column.  Blocks that run at the same time then
   * share the same few B columns and A rows, which stay in L2. */
  const int per_band = GROUP * tiles_n;
  const int first_m = (int)(blockIdx.x / per_band) * GROUP;
  const int band_rows = min(GROUP, tiles_m - first_m);
  const int local = blockIdx.x % per_band;
  const int row0 = (first_m + local % band_rows) * BM;
  const int col0 = (local / band_rows) * BN;

  const int tx = threadIdx.x % (BN / TN), ty = threadIdx.x / (BN / TN);

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;

  float ra[A_LOADS][VEC], rb[B_LOADS][VEC];
@ if split > 1 then
  // This block's chunk of K: [k_begin, K), K lowered to the chunk's end.
  const int k_begin = blockIdx.y * k_chunk;
  K = min(K, k_begin + k_chunk);
@ else
  const int k_begin = 0;
@ end
  const int steps = (K - k_begin + BK - 1) / BK;
  load_a(ra, A, lda, M, K, row0, k_begin);
  load_b(rb, B, ldb, N, K, col0, k_begin);
  store_tiles(As, Bs, ra, rb);
  __syncthreads();

  for (int s = 0; s < steps; ++s) {
    const float *as = As + (s & 1) * BK * LDA_S;
    const float *bs = Bs + (s & 1) * BK * BN;
    // The next slices travel from global memory while this one is used.
    if (s + 1 < steps) {
      load_a(ra, A, lda, M, K, row0, k_begin + (s + 1) * BK);
      load_b(rb, B, ldb, N, K, col0, k_begin + (s + 1) * BK);
    }
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int g = 0; g < GM; ++g) {
        const float4 x = *reinterpret_cast<const float4 *>(&as[k * LDA_S + g * (BM / GM) + ty * 4]);
        a[g * 4 + 0] = x.x; a[g * 4 + 1] = x.y; a[g * 4 + 2] = x.z; a[g * 4 + 3] = x.w;
      }
#pragma unroll
      for (int g = 0; g < GN; ++g) {
        const float4 x = *reinterpret_cast<const float4 *>(&bs[k * BN + g * (BN / GN) + tx * 4]);
        b[g * 4 + 0] = x.x; b[g * 4 + 1] = x.y; b[g * 4 + 2] = x.z; b[g * 4 + 3] = x.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    /* One barrier per step is enough: the buffer written here was last read
     * in step s - 1, and every thread passed the barrier that ended it. */
    if (s + 1 < steps)
      store_tiles(As + ((s + 1) & 1) * BK * LDA_S, Bs + ((s + 1) & 1) * BK * BN, ra, rb);
    __syncthreads();
  }

@ if split > 1 then
  if (gridDim.y > 1) {
    // Partial tile to the workspace, row stride N; the reduction finishes it.
    float *w = W + (size_t)blockIdx.y * M * N;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int r = row0 + (i / 4) * (BM / GM) + ty * 4 + i % 4;
      if (r >= M)
        continue;
#pragma unroll
      for (int g = 0; g < GN; ++g) {
        const int c = col0 + g * (BN / GN) + tx * 4;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (c + j < N)
            w[(size_t)r * N + c + j] = acc[i][g * 4 + j];
      }
    }
    return;
  }
@ end
  // Epilogue: C = alpha * acc + beta * C, never reading C when beta == 0.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + (i / 4) * (BM / GM) + ty * 4 + i % 4;
    if (r >= M)
      continue;
    float *crow = C + (size_t)r * ldc;
#pragma unroll
    for (int g = 0; g < GN; ++g) {
      const int c = col0 + g * (BN / GN) + tx * 4;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[j] = alpha * acc[i][g * 4 + j];
@ if vec == 4 then
      if (c + 4 <= N) {
        float4 *p = reinterpret_cast<float4 *>(crow + c);
        if (beta != 0.0f) {
          const float4 o = *p;
          v[0] += beta * o.x; v[1] += beta * o.y; v[2] += beta * o.z; v[3] += beta * o.w;
        }
        *p = make_float4(v[0], v[1], v[2], v[3]);
        continue;
      }
@ end
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c + j < N)
          crow[c + j] = beta == 0.0f ? v[j] : v[j] + beta * crow[c + j];
    }
  }
}

@ if split > 1 then
// Split-K reduction: C = alpha * sum_z W[z] + beta * C, z in order.
extern "C" __global__ void __launch_bounds__(256)
$(name)_reduce(int M, int N, int splits, float alpha, const float *__restrict__ W, float beta,
               float *__restrict__ C, long long ldc)
{
  const size_t mn = (size_t)M * N;
  for (size_t e = (size_t)blockIdx.x * 256 + threadIdx.x; e < mn; e += (size_t)gridDim.x * 256) {
    float sum = 0.0f;
    for (int z = 0; z < splits; ++z)
      sum += W[z * mn + e];
    float *c = C + (e / N) * ldc + e % N;
    *c = beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
  }
}

constexpr int SPLIT = $(split);               // most K chunks
constexpr size_t MAX_WORKSPACE = 256u << 20; // bytes of partial tiles at most

@ end
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long tiles_m = (a->M + BM - 1) / BM, tiles_n = (a->N + BN - 1) / BN;
  if (tiles_m * tiles_n > 0x7fffffffLL || tiles_n * GROUP > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = $(smem_dynamic);
  cfg.stream = stream;
@ if split > 1 then
  /* As many chunks as SPLIT allows with whole BK steps each and a workspace
   * of at most MAX_WORKSPACE; one chunk needs no workspace at all. */
  const size_t tile_bytes = (size_t)a->M * a->N * sizeof(float);
  long long splits = SPLIT;
  if ((long long)(MAX_WORKSPACE / tile_bytes) < splits)
    splits = (long long)(MAX_WORKSPACE / tile_bytes);
  const long long steps = (a->K + BK - 1) / BK;
  if (splits > steps)
    splits = steps;
  if (splits < 1)
    splits = 1;
  const int k_chunk = (int)((steps + splits - 1) / splits) * BK;
  splits = (a->K + k_chunk - 1) / k_chunk;
  cfg.gridDim.y = (unsigned)splits;
  float *W = nullptr;
  cudaError_t e;
  if (splits > 1) {
    e = a->pool ? cudaMallocFromPoolAsync((void **)&W, splits * tile_bytes, (cudaMemPool_t)a->pool, stream)
                : cudaMallocAsync((void **)&W, splits * tile_bytes, stream);
    if (e != cudaSuccess)
      return (int)e;
  }
  e = cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda, a->B, a->ldb,
                         a->beta, a->C, a->ldc, (int)tiles_m, (int)tiles_n, k_chunk, W);
  if (e == cudaSuccess && splits > 1) {
    cudaLaunchConfig_t red = {};
    const size_t mn = (size_t)a->M * a->N;
    red.gridDim = dim3((unsigned)(mn / 256 + 1 < (size_t)a->sm_count * 8 ? mn / 256 + 1 : (size_t)a->sm_count * 8));
    red.blockDim = dim3(256);
    red.stream = stream;
    e = cudaLaunchKernelEx(&red, $(name)_reduce, a->M, a->N, (int)splits, a->alpha, (const float *)W, a->beta,
                           a->C, a->ldc);
  }
  if (W) {
    const cudaError_t f = cudaFreeAsync(W, stream);
    if (e == cudaSuccess)
      e = f;
  }
  return (int)e;
@ else
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_m, (int)tiles_n);
@ end
}
@ else
@   error("matmul template has no algorithm '" .. algo .. "'")
@ end
