/* SPDX-License-Identifier: MIT */
/* runtime/kt_variant.h: the contract between generated kernels and the runtime.
 *
 * Every generated .cu exports one launcher, kt_launch_<name>, with the
 * family's common signature: it takes the family's argument struct (below)
 * and a stream, sizes the grid, the dynamic shared memory and any cluster
 * itself, and returns the cudaError_t of the launch as an int.  It never
 * prints and never exits.  The generated registry (generated/registry.c)
 * lists every variant with what the runtime must check before choosing it.
 *
 * Bump KT_ABI_VERSION whenever a struct here changes: generated files carry
 * a guard and refuse to compile against another version.
 */
#ifndef KT_VARIANT_H
#define KT_VARIANT_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#define KT_ABI_VERSION 7

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kt_family { KT_FAMILY_MATMUL = 0, KT_FAMILY_HIST = 1, KT_FAMILY_GEMM = 2 } kt_family;

/* C = alpha * A * B + beta * C, row-major fp32; C is not read when beta == 0.
 * A is M x K with row stride lda, B is K x N (ldb), C is M x N (ldc). */
typedef struct kt_matmul_args {
  int M, N, K;
  float alpha, beta;
  const float *A;
  const float *B;
  float *C;
  long long lda, ldb, ldc;
  int sm_count; /* multiprocessors on the device, for grid sizing */
  void *pool;   /* cudaMemPool_t for scratch (split-K); NULL = the device's default */
} kt_matmul_args;

/* bins[b] = number of samples s with clamp(s, 0, nbins - 1) == b; bins is
 * overwritten.  n may be 0. */
typedef struct kt_hist_args {
  const int *samples;
  unsigned long long n;
  unsigned int *bins;
  int nbins;
  int sm_count;    /* multiprocessors, for the persistent grid */
  int smem_per_sm; /* shared memory per multiprocessor, bytes */
  int smem_optin;  /* most dynamic shared memory one block may opt in to */
  void *pool;      /* cudaMemPool_t for scratch (the partition kernel's); NULL = the device's default */
} kt_hist_args;

/* Dynamic shared memory of one histogram block that holds its share of
 * nbins bins (the bins are split over `cluster` blocks), in `copies` copies
 * of counters of `counter_bits` bits packed into 32-bit words.  The one
 * formula: the launchers size their launches with it and the runtime
 * decides with it whether a variant fits a device. */
static inline long long kt_hist_smem_bytes(long long nbins, int cluster, int copies, int counter_bits)
{
  const long long per_block = (nbins + cluster - 1) / cluster;
  return (long long)copies * ((per_block * counter_bits + 31) / 32) * 4;
}

/* The band kernel (templates/hist_band.cu.tpl) splits nbins bins into as
 * few bands as fit smem_optin bytes of counters of counter_bits bits, and
 * reads every sample once per band (from L2 after the first).  Past
 * KT_HIST_MAX_BANDS bands those reads cost more than global atomics (H100,
 * bench/reference/README.md), so it serves no more; returns the number of
 * bands, or 0 when nbins needs more.  The one formula, for the launcher and
 * the runtime. */
#define KT_HIST_MAX_BANDS 16
static inline long long kt_hist_bands(long long nbins, long long smem_optin, int counter_bits)
{
  const long long fit = smem_optin / 4 * (32 / counter_bits);
  const long long bands = fit > 0 ? (nbins + fit - 1) / fit : KT_HIST_MAX_BANDS + 1;
  return bands <= KT_HIST_MAX_BANDS ? bands : 0;
}

/* The partition kernel (templates/hist_part.cu.tpl) cuts the bins into
 * buckets of kt_hist_part_width bins, as many 32-bit counters as one block's
 * shared memory holds (multiples of 1024, at most 65536: a sample is stored
 * as its 16-bit offset in its bucket), at most KT_HIST_PART_MAX_BUCKETS of
 * them (one a thread of a 1024-thread block, in shared memory).  When all
 * the bins fit one bucket the shared-memory kernel counts them in one pass,
 * so the partition serves only more.  kt_hist_part_buckets returns the
 * number of buckets, or 0 where it does not serve.  The one formula, for the
 * launcher and the runtime. */
#define KT_HIST_PART_MAX_BUCKETS 1024
static inline long long kt_hist_part_width(long long smem_optin)
{
  const long long w = (smem_optin - 256) / 4 / 1024 * 1024; /* 256: the kernel's static shared memory */
  if (w < 2 * KT_HIST_PART_MAX_BUCKETS) /* the counters' space first holds two tables of the buckets */
    return 0;
  return w < 65536 ? w : 65536;
}
static inline long long kt_hist_part_buckets(long long nbins, long long smem_optin)
{
  const long long w = kt_hist_part_width(smem_optin);
  if (w <= 0 || nbins <= w)
    return 0;
  const long long nb = (nbins + w - 1) / w;
  return nb <= KT_HIST_PART_MAX_BUCKETS ? nb : 0;
}
/* It holds its workspace (2 bytes a sample) for at most this many samples
 * at a time, and counts longer inputs a piece at a time. */
#define KT_HIST_PART_PIECE (1ll << 27)

/* Workspace split-K: K is cut into at most `split` chunks of whole BK
 * steps, and no more than it takes for the tiles' blocks to fill `slots`
 * (a number of waves, each the GPU's SMs times the kernel's blocks per
 * SM, that the caller picks), each at least min_chunk_k long
 * (KT_MATMUL_MIN_CHUNK_K for the vector-times-matrix kernel,
 * KT_MATMUL_SPLIT_MIN_CHUNK_K for the warp tiles), with a workspace of
 * at most KT_MATMUL_MAX_WORKSPACE bytes of partial tiles.
 * Returns the number of chunks (1: no workspace) and the K of each in
 * *k_chunk (the last may be shorter).  The cap that the launchers'
 * splits (kt_matmul_splits_balanced in kt_matmul_split.h, and
 * kt_matmul_splits_in_wave below) choose within; the runtime's cost model
 * predicts with the same functions. */
#define KT_MATMUL_MAX_WORKSPACE (256ll << 20)
#define KT_MATMUL_MIN_CHUNK_K 128
static inline long long kt_matmul_splits(long long M, long long N, long long K, int BM, int BN, int BK, int split,
                                         long long slots, long long min_chunk_k, long long *k_chunk)
{
  const long long tile_bytes = M * N * 4, steps = (K + BK - 1) / BK;
  const long long tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  long long splits = split;
  if ((slots + tiles - 1) / tiles < splits)
    splits = (slots + tiles - 1) / tiles;
  if (K / min_chunk_k < splits)
    splits = K / min_chunk_k;
  if (KT_MATMUL_MAX_WORKSPACE / tile_bytes < splits)
    splits = KT_MATMUL_MAX_WORKSPACE / tile_bytes;
  if (splits > steps)
    splits = steps;
  if (splits < 1)
    splits = 1;
  *k_chunk = (steps + splits - 1) / splits * BK;
  return (K + *k_chunk - 1) / *k_chunk;
}

/* The same split for a kernel whose chunks are all its parallelism (the
 * vector-times-matrix kernel, a block per chunk of a few column tiles):
 * no more chunks than keep its blocks within one wave of `slots`, since
 * a block past the wave would run alone after it, doubling the time. */
static inline long long kt_matmul_splits_in_wave(long long M, long long N, long long K, int BM, int BN, int BK,
                                                 int split, long long slots, long long *k_chunk)
{
  const long long tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  const long long fill = tiles > 0 && slots / tiles > 1 ? slots / tiles : 1;
  return kt_matmul_splits(M, N, K, BM, BN, BK, fill < split ? (int)fill : split, slots, KT_MATMUL_MIN_CHUNK_K,
                          k_chunk);
}

/* Staging B for the float4 matmul kernels.  A kernel that copies B 16
 * bytes at a time (VEC 4) needs B 16-byte aligned with ldb a multiple of
 * 4.  Given any other B, its launcher first copies B into an aligned
 * scratch of kt_matmul_stage_ld(N) floats a row, kt_matmul_stage_rows(K, N)
 * rows of K at a time (a panel of at most KT_MATMUL_MAX_STAGE bytes; a K
 * longer than one panel is multiplied a panel at a time, each after the
 * first adding to C), and multiplies from there.  Returns 0 where one row
 * of B alone is over the limit: then the kernel does not serve the call.
 * The one formula: the launchers stage with it, dispatch's cost model
 * (runtime/matmul.c) prices it. */
#define KT_MATMUL_MAX_STAGE (256ll << 20)
static inline int kt_matmul_b_in_place(const void *B, long long ldb)
{
  return ldb % 4 == 0 && ((size_t)B & 15) == 0;
}
static inline long long kt_matmul_stage_ld(long long N)
{
  return (N + 3) / 4 * 4;
}
static inline long long kt_matmul_stage_rows(long long K, long long N)
{
  const long long fit = KT_MATMUL_MAX_STAGE / (kt_matmul_stage_ld(N) * 4);
  return fit < K ? fit : K;
}

/* The gemm family (tensor cores): C[b] = alpha * op(A[b]) * op(B[b]) + beta *
 * C[b] for b < batch, row-major, FP32 C; C is not read when beta == 0.
 * type and ops take ktune.h's values (kt_dtype, kt_op): A and B hold floats
 * for KT_F32 and KT_TF32, 16-bit values for KT_BF16 and KT_F16.  op N: A is
 * M x K (lda), B is K x N (ldb); op T: A is stored K x M, B N x K.  Element
 * (not byte) leading dimensions and batch strides. */
enum { KT_GEMM_F32 = 0, KT_GEMM_TF32 = 1, KT_GEMM_BF16 = 2, KT_GEMM_F16 = 3 }; /* = kt_dtype */
enum { KT_GEMM_OP_N = 0, KT_GEMM_OP_T = 1 };                                     /* = kt_op */
typedef struct kt_gemm_args {
  int type, op_a, op_b;
  int M, N, K, batch;
  float alpha, beta;
  const void *A;
  const void *B;
  float *C;
  long long lda, ldb, ldc;
  long long stride_a, stride_b, stride_c;
  int sm_count; /* multiprocessors on the device */
  void *pool;   /* cudaMemPool_t for scratch (operands repacked for TMA); NULL = the device's default */
} kt_gemm_args;

/* Does the Hopper TF32 kernel (wgmma) compute this call as its transpose,
 * C^T = op(B)^T * op(A)^T?  wgmma reads TF32 from shared memory K-major only,
 * but takes its first operand from registers in any layout.  So an MN-major
 * op(B) (op N) becomes that first operand by swapping the roles: always when
 * op(A) is K-major (op N); when op(A) is MN-major too (op T), one of the two
 * must be repacked K-major, and the swap keeps B in place when A is the
 * smaller (M <= N).  The launcher swaps only where B can be read in place
 * (16-byte aligned); dispatch's cost model (runtime/gemm.c) prices the
 * swapped tiles with the same rule. */
static inline int kt_gemm_tf32_swaps(int op_a, int op_b, long long M, long long N)
{
  return op_b == KT_GEMM_OP_N && (op_a == KT_GEMM_OP_N || M <= N);
}

/* Can TMA read an operand where it lies: a 16-byte aligned start, row
 * stride and (for more than one entry) batch stride, each under 2^40
 * bytes?  es: bytes per element.  Where it cannot, the Hopper kernels read
 * the operand from K-major scratch (kt_gemm_wgmma_choose). */
static inline int kt_gemm_tma_addressable(const void *p, long long ld, long long stride, long long entries, int es)
{
  return (unsigned long long)p % 16 == 0 && ld * es % 16 == 0 && ld * es < (1LL << 40) &&
         (entries == 1 || (stride * es % 16 == 0 && stride > 0 && stride * es < (1LL << 40)));
}

/* The widest copy (bytes) the mma.sync kernels make of an operand: what
 * its base, row stride and (for more than one entry) batch stride all
 * allow: 16, 8 or 4 (cp.async), or 2 (16-bit elements at an odd address
 * or stride, copied through registers, element by element, without the
 * asynchronous pipeline).  es: bytes per element.  Dispatch's cost model
 * (runtime/gemm.c) decides here; the launcher (templates/gemm_mma.cu.tpl,
 * `granularity`) applies the same rule in its own copy until a GPU run has
 * checked it on this one. */
static inline int kt_gemm_copy_granularity(const void *p, long long ld, long long stride, long long entries, int es)
{
  const unsigned long long x = (unsigned long long)p | (unsigned long long)(ld * es) |
                               (entries > 1 ? (unsigned long long)(stride * es) : 0ull);
  return x % 16 == 0 ? 16 : x % 8 == 0 ? 8 : x % 4 == 0 ? 4 : 2;
}

/* How the Hopper (wgmma) launcher reads each operand of a call, given which
 * operands TMA can read in place (ala, alb: kt_gemm_tma_addressable, less
 * any that kt_gemm_sector_repack sends to scratch):
 *   - ta, tb: the kernel reads its A, B MN-major (16-bit types: in shared
 *     memory; TF32: A through registers, tb never);
 *   - swap: TF32 run as its transpose (kt_gemm_tf32_swaps), the kernel's
 *     A being op(B)^T and its B op(A);
 *   - pack_a, pack_b: the kernel's A, B come from K-major scratch.
 * 16-bit types repack only what TMA cannot address; TF32 also an MN-major
 * operand beyond the one it reads through registers.  The launcher and
 * dispatch's cost model (runtime/gemm.c) both decide here. */
typedef struct {
  int ta, tb, swap, pack_a, pack_b;
} kt_gemm_wgmma_layout;
static inline kt_gemm_wgmma_layout kt_gemm_wgmma_choose(int es, int op_a, int op_b, long long M, long long N, int ala,
                                                        int alb)
{
  const int kma = op_a == KT_GEMM_OP_N, kmb = op_b == KT_GEMM_OP_T;
  kt_gemm_wgmma_layout l = {0, 0, 0, 0, 0};
  if (es == 2) {
    l.ta = ala && !kma, l.tb = alb && !kmb;
  } else {
    l.swap = alb && !kmb && kt_gemm_tf32_swaps(op_a, op_b, M, N);
    l.ta = l.swap || (ala && !kma);
  }
  l.pack_a = l.swap ? !(ala && kma) : !(ala && (kma || l.ta));
  l.pack_b = l.swap ? 0 : !(alb && (kmb || l.tb));
  return l;
}

/* Row strides that start 16 bytes into a 32-byte sector.  The Hopper
 * kernels load each operand in TMA rows of 128 bytes; on such a stride a
 * row touches five sectors instead of four, and the operand moves 25% more
 * from L2 to the SMs.  Measured on an H100 (bench/reference/gemm_tiles/
 * README.md, "Row strides that are not multiples of 32 bytes", sessions 62
 * and 63), in place, against strides of 128 bytes:
 *   - square tiles (128x128), either operand: 16 to 31% slower, however
 *     many waves of tiles the call runs;
 *   - the operand of the larger side of 128x256 tiles (two thirds of each
 *     k slice): 17 to 31% where the call runs two or more full waves, 3 to
 *     12% where it runs about one and a tail (the tail's few blocks leave
 *     L2 to spare);
 *   - the operand of the smaller side: 0 to 4%.
 * A repack also costs about 2 us whatever its size (its launch, and the
 * multiply's wait for it): in calls of less than one wave, of 10 to 25 us
 * (BF16 around 1000^3), repacking either side of any tiles lost 0 to 26%
 * where reading in place lost 0 to 23%.
 *
 * Should the launcher repack such an operand, read in place, into rows of
 * a multiple of 128 bytes?  Where the repack costs less than the sectors'
 * estimated share of the multiply: KT_GEMM_SECTOR_COST for square tiles,
 * that times the share of the waves that are full for the larger side of
 * other tiles, nothing for the smaller side, and nothing in a call of less
 * than one full wave (where the fixed cost, which the estimates below leave
 * out, decides).  Both times are estimated per element of K, so K cancels:
 *   - the repack reads and writes `rows` rows (times their batch entries):
 *     2 x ES bytes per element at the repack's rate (2.6 to 2.9 TB/s on an
 *     H100);
 *   - the multiply runs `blocks` tiles of tile x other products (times
 *     `kshare` of K each: split K), in waves of sm_count x occ, at an SM's
 *     share of the tensor cores' rate (about 3.0 TFLOP/s per SM for TF32
 *     and 5.8 for 16-bit inputs at 4096^3 on an H100).
 * One element's repack takes KT_GEMM_REPACK_PER_MAC times one product's
 * share of an SM, for both input widths (4.3 TF32, 4.2 16-bit: the tensor
 * cores' rate doubles as the bytes halve).  Those estimates matched the
 * measured repacks to a few percent; the sectors' share is the coarse part.
 * A GPU of more bandwidth per multiply (an H200) repacks less often than
 * would pay, never more.  The launchers use it; the host tests call it. */
#define KT_GEMM_SECTOR_COST 0.2
#define KT_GEMM_REPACK_PER_MAC 4.3
static inline int kt_gemm_sector_repack(long long stride_bytes, long long rows, int tile, int other, long long blocks,
                                        int sm_count, int occ, double kshare)
{
  if (stride_bytes % 32 != 16 || tile < other || rows < 1 || blocks < 1 || sm_count < 1 || occ < 1 || !(kshare > 0))
    return 0;
  const long long slots = (long long)sm_count * occ, waves = (blocks + slots - 1) / slots, full = blocks / slots;
  if (full < 1)
    return 0;
  const double share = tile == other ? KT_GEMM_SECTOR_COST : KT_GEMM_SECTOR_COST * (double)full / (double)waves;
  return KT_GEMM_REPACK_PER_MAC * (double)rows < share * (double)waves * kshare * occ * (double)tile * other;
}

/* Into how many chunks a gemm kernel that may split K `split` ways splits
 * it (1: not at all), for `blocks` tiles (times the batch) of `ktiles` k
 * slices, `occ` blocks per SM: only where the blocks fall short of half a
 * wave, so that the chunks fill it, and each chunk keeps at least
 * KT_GEMM_MIN_CHUNK k slices, to pay for the split path's fixed cost (the
 * workspace's round trip, the second kernel); then as evenly as whole
 * slices allow, no chunk empty.  The launchers and dispatch's cost model
 * (runtime/gemm.c) both use it. */
#define KT_GEMM_MIN_CHUNK 8
static inline int kt_gemm_splits(long long blocks, int ktiles, int sm_count, int occ, int split)
{
  if (split <= 1 || blocks < 1 || blocks * 2 > (long long)sm_count * occ)
    return 1;
  long long s = (long long)sm_count * occ / blocks;
  if (s > split)
    s = split;
  if (s > ktiles / KT_GEMM_MIN_CHUNK)
    s = ktiles / KT_GEMM_MIN_CHUNK;
  if (s < 1)
    return 1;
  const long long per = (ktiles + s - 1) / s;
  return (int)((ktiles + per - 1) / per);
}

typedef int (*kt_launch_fn)(const void *args, cudaStream_t stream);

typedef struct kt_param {
  const char *key;
  const char *value;
} kt_param;

/* A target the build compiled kernels for (ARCHS).  A GPU runs the code of
 * every target of compute capability cc or older (the SASS of its own
 * major version, the PTX, which every build embeds, of any), or, when
 * exact (sm_90a), only a GPU of exactly cc.  A build has one target per cc. */
typedef struct kt_target {
  const char *name; /* "sm_90" */
  int cc;           /* compute capability x 10 */
  int exact;
} kt_target;

/* One entry per variant and target: a variant built for sm_80 and sm_90 has
 * two, with one launcher (its object holds the code of both) and the facts
 * that each target's space derived (blocks per SM, the defaults' ranks...),
 * and its source hash for that target, which keys its measurements.  A GPU
 * uses the entries of one target, kt_device_target's; a name is unique
 * among them. */
typedef struct kt_variant {
  const char *name; /* file, kernel symbol, registry and database key */
  kt_family family;
  const char *algo;       /* the kernel within its family's template */
  int target;             /* cc of the build target these facts are for */
  const kt_param *params; /* parameter values, in the space's order */
  int nparams;
  int threads;             /* per block */
  int cluster;             /* blocks per cluster; 1 = no cluster launch */
  int min_cc;              /* minimum compute capability x 10 */
  int smem_static;         /* bytes per block */
  int smem_dynamic;        /* bytes per block, fixed part */
  int align;               /* matmul: B, C, ldb and ldc must be multiples of
                              this many floats (A is read 4 bytes at a time) */
  int counter_bits;        /* hist: bits per shared-memory counter; 0 = none */
  int copies;              /* hist: copies of the bins a block holds */
  int banded;              /* hist: 1 splits the bins into bands that fit
                              (kt_hist_bands); 2 partitions the samples into
                              buckets of bins that fit (kt_hist_part_buckets) */
  int blocks_per_sm;       /* the space's estimate of blocks resident on one
                              multiprocessor of the target; 0 = unknown */
  int default_rank;        /* 0, or preference among the untuned defaults */
  const char *source_hash; /* FNV-1a 64 of the source a build for this target
                              alone generates, less licence line and guard */
  kt_launch_fn launch;
} kt_variant;

#ifdef __cplusplus
}
#endif

#endif
