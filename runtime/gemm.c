/* SPDX-License-Identifier: MIT */
/* runtime/gemm.c: the gemm family (tensor-core matmul) in the runtime:
 * kt_matmul_ex and kt_matmul_ex_choice, their argument checks, which
 * variants can serve a call, the problem key and the selection rule.
 *
 * kt_matmul_ex takes every input type, op, leading dimension, alignment and
 * batch.  KT_F32 (exact) is kt_matmul, the matmul family's tuned FP32
 * kernels, for one product or a batch of entries that each fill the GPU
 * (entry by entry, an op-T operand transposed into scratch first), and
 * this family's CUDA-core kernel (algo simt) for a batch of smaller
 * entries, in one launch (below: "FP32 batches").  The other types are
 * this family's: a wgmma variant of the call's type where the GPU is
 * Hopper (sm_90; the kernels are sm_90a machine code), which repacks what
 * TMA cannot read in place, or an mma.sync variant of the call's type
 * (sm_80 on, any alignment), else the CUDA-core kernel, which serves all.
 *
 * Selection: tuned problems are keyed by shape, input type and op pair
 * ("4096x4096x4096 bf16 nn"), each ranking the variants of its type timed
 * on that layout.  A call takes the tuned problem of its type and op pair
 * nearest its M x N x K (least sum of squared log-ratios; another op pair
 * of the type, then another type, only when its own was not tuned), and
 * within its ranking the fastest variant that serves the call's type;
 * else the defaults.  Where the call is not the tuned problem itself, the
 * ranking is first re-ordered by a cost model (below) that scales each
 * variant's tuned time by how its tiles fill the GPU at either shape.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"
#include "kt_kernels.h"
#include "registry.h"

_Static_assert((int)KT_F32 == (int)KT_GEMM_F32 && (int)KT_TF32 == (int)KT_GEMM_TF32 && (int)KT_BF16 == (int)KT_GEMM_BF16 &&
                   (int)KT_F16 == (int)KT_GEMM_F16,
               "kt_dtype and the launchers' type codes agree");
_Static_assert((int)KT_OP_N == (int)KT_GEMM_OP_N && (int)KT_OP_T == (int)KT_GEMM_OP_T, "kt_op and the launchers' op codes agree");

static const char *const type_names[] = {"f32", "tf32", "bf16", "f16"};

const char *kt_gemm_type_name(int type)
{
  return type >= 0 && type < 4 ? type_names[type] : "?";
}

/* ---- which variants serve a call ---------------------------------------- */

int kt_gemm_serves(const kt_variant *v, const kt_device_info *d, int type)
{
  if (v->family != KT_FAMILY_GEMM || !kt_variant_runs_on(v, d))
    return 0;
  if (strcmp(v->algo, "simt") == 0)
    return 1;
  /* The tensor-core kernels serve one type each; wgmma is sm_90a code
   * (Hopper only), mma.sync runs wherever its target's code does. */
  const char *t = kt_variant_param(v, "type");
  return (d->cc == 90 || strcmp(v->algo, "wgmma") != 0) && t && strcmp(t, kt_gemm_type_name(type)) == 0;
}

/* ---- the family's entry ------------------------------------------------ */

/* A problem is a shape and a layout (dim[3], kt_gemm_layout): the key
 * "4096x4096x4096 bf16 nt" (op(A), op(B): n or t).  The database keeps m,
 * n and k in its size columns and the layout in the key alone. */
static void gemm_key(const kt_problem *p, char *buf, size_t len)
{
  const long long l = p->dim[3];
  snprintf(buf, len, "%lldx%lldx%lld %s %c%c", p->m, p->n, p->k, kt_gemm_type_name((int)(l / 4)), "nt"[(l >> 1) & 1],
           "nt"[l & 1]);
}

static int gemm_parse(const char *s, kt_problem *out)
{
  long long m, n, k;
  char type[8], ops[3];
  int used = 0, t = -1;
  if (!s || sscanf(s, "%lldx%lldx%lld %7s %2[nt]%n", &m, &n, &k, type, ops, &used) != 5 || s[used] != '\0' ||
      strlen(ops) != 2 || m <= 0 || n <= 0 || k <= 0 || m > KT_MATMUL_MAX_DIM || n > KT_MATMUL_MAX_DIM ||
      k > KT_MATMUL_MAX_DIM)
    return KT_ERR_BAD_OPTION;
  for (int i = 0; i < 4; ++i)
    if (strcmp(type, type_names[i]) == 0)
      t = i;
  if (t < 0)
    return KT_ERR_BAD_OPTION;
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_GEMM;
  out->m = m, out->n = n, out->k = k;
  out->dim[3] = kt_gemm_layout(t, ops[0] == 't', ops[1] == 't');
  return KT_OK;
}

/* Variants worth timing on p: the tensor-core ones of p's type; the
 * CUDA-core kernel for FP32, which no tensor-core variant serves, and for
 * the other types on problems of at most KT_GEMM_SIMT_TC_MACS
 * multiply-adds, where a launch of its small tiles can beat the
 * tensor-core kernels' fixed costs (pipeline fill, tensor maps, repacks).
 * Above that it is far too slow to be worth the tuning time (mma.sync
 * runs on every supported GPU, sm_80 on). */
static int gemm_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  if (v->family != KT_FAMILY_GEMM || !kt_variant_runs_on(v, d))
    return 0;
  const int type = (int)(p->dim[3] / 4);
  if (strcmp(v->algo, "simt") == 0)
    return d->cc < 80 || type == KT_F32 || (double)p->m * (double)p->n * (double)p->k <= (double)KT_GEMM_SIMT_TC_MACS;
  return kt_gemm_serves(v, d, type);
}

static void gemm_prepare(kt_tuned *t)
{
  kt_problem p;
  if (gemm_parse(t->key, &p) == KT_OK)
    t->problem.dim[3] = p.dim[3];
  t->log_shape[0] = log((double)t->problem.m);
  t->log_shape[1] = log((double)t->problem.n);
  t->log_shape[2] = log((double)t->problem.k);
}

const kt_family_ops kt_gemm_ops = {
    .id = KT_FAMILY_GEMM,
    .name = "gemm",
    .long_name = "tensor-matmul",
    .ndims = 4,
    .dims = {"m", "n", "k", "layout"},
    .key = gemm_key,
    .parse = gemm_parse,
    .fits = gemm_fits,
    .prepare = gemm_prepare,
};

/* ---- the selection rule ------------------------------------------------- */

const kt_tuned *kt_gemm_nearest(const kt_tuned *t, int n, long long M, long long N, long long K, long long layout)
{
  const double lm = log((double)M), ln = log((double)N), lk = log((double)K);
  const kt_tuned *best = NULL;
  double bd = INFINITY;
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_GEMM)
      continue;
    const long long l = t[i].problem.dim[3];
    /* Another layout only when none of this one is tuned: another op
     * pair of the type first, then another type. */
    const double far = l == layout ? 0.0 : l / 4 == layout / 4 ? 1e6 : 1e12;
    const double a = lm - t[i].log_shape[0], b = ln - t[i].log_shape[1], c = lk - t[i].log_shape[2];
    const double d = far + a * a + b * b + c * c;
    if (d < bd) {
      bd = d;
      best = &t[i];
    }
  }
  return best;
}

/*
 * The cost model.  A tensor-core variant's time goes with its waves of
 * blocks (tiles x batch x chunks of K, OCC blocks per SM sharing it) times
 * the time of one block: its k slices plus a fixed cost of about FILL
 * slices (pipeline fill, epilogue), times its tile's area over OCC.  A
 * persistent variant (OCC blocks per SM looping over the tiles) pays the
 * fill once and, per tile, only the OVERLAP of the epilogue that its next
 * tile's loads do not hide.  Split K adds a slice for the second kernel's
 * sum.  At an untuned shape a variant is expected to take its time at the
 * nearest tuned problem scaled by its cost at the call over its cost there;
 * this puts small tiles and split K first where big tiles would leave SMs
 * idle, and keeps the measured order where both shapes fill the GPU alike.
 *
 * A wgmma block (one an SM) pays its TMA pipeline's fill and its epilogue
 * through shared memory with nothing beside it to hide them: FILL_WGMMA
 * slices a tile, OVERLAP_WGMMA a tile when persistent.  Its launcher also
 * repacks what TMA cannot read in place (kt_gemm_wgmma_choose), at about
 * REPACK_MS whatever its size (the repack's launch and the multiply's wait
 * for it; kt_gemm_sector_repack's measure), which mma.sync, reading any
 * alignment, never pays.  Both operands go in one launch (gemm_pack): the
 * second adds nothing that the drawn calls could tell (priced at 0, 0.5, 1
 * and 2 us, 0 did best on the calls that fit and those that judge, 0.959
 * and 0.935 against 0.952 and 0.926; session 68, H100).  An mma.sync
 * slice is 64 bytes of K (its BK), not 128.  Fitted to every variant's time
 * on 192 drawn tensor-core calls (bench_gemm's sweep, seeds 0, 6402, 101,
 * 202; H100, session 65) and on twelve aligned shapes with K of 64 or 128
 * that wgmma wins (as the bench suite's), and judged on 192 others (seeds
 * 303, 404, 505, 606): dispatch / oracle 0.936 and 0.919 on the drawn calls,
 * 0.994 on the aligned shapes, where one FILL of 3 for all (and mma.sync
 * unpriced) reached 0.885, 0.885 and 0.994.  Priced the old way, mma.sync
 * looked 1.3 to 2 times faster than wgmma wherever the calls it won on were
 * (short K, odd rows that wgmma repacks), also at aligned short K, where it
 * is 1.1 to 1.4 times slower.
 *
 * mma.sync reads any alignment, but a 16-bit operand at an odd address or
 * stride is copied element by element through registers, outside the
 * asynchronous pipeline; its share of each slice then costs 1 +
 * MMA_BY_ELEMENT times as much.  Unpriced, the model sent large calls of
 * short K and odd rows to the 64x64 mma.sync tiles where the wgmma tiles
 * (the odd operand repacked) were 1.5 to 2.3 times faster (BF16 op N, T
 * 1219x4785x285, lda 285: 63 against 27 us).  Over run 68's sweeps
 * (H100), 0.5, 1, 2 and 3 reached 0.962, 0.964, 0.962 and 0.959 of the
 * oracle on the seeds that fit and 0.942, 0.949, 0.947 and 0.947 on those
 * that judge, against 0.959 and 0.935 unpriced; copies of 4 or 8 bytes
 * (cp.async) priced at a quarter or more made both worse. */
#define FILL 3.0
#define OVERLAP 1.0
#define FILL_WGMMA 6.0
#define OVERLAP_WGMMA 2.0
#define REPACK_MS 0.002
#define MMA_BY_ELEMENT 1.0

/* What the model reads of a variant, from its parameters.  An untuned call
 * prices every ranked variant twice, so the registry's values are parsed
 * once per process (pthread_once), not by name at every call; without the
 * table's memory they are parsed per call. */
typedef struct geometry {
  int bm, bn, occ, split, persist, cluster, wgmma, mma;
  int slice_bytes; /* K a slice, in bytes: mma.sync's BK; else 128 */
} geometry;

static geometry *geometries;
static pthread_once_t geometries_once = PTHREAD_ONCE_INIT;
/* The registry's CUDA-core variants, of every target (untuned FP32 batches
 * pick among them); NULL without the memory, then the registry is scanned. */
static int *simt, nsimt;

/* Bytes an element of a tensor-core variant's input type (4 for TF32). */
static int gemm_type_bytes(const kt_variant *v)
{
  const char *t = kt_variant_param(v, "type");
  return t && strcmp(t, "tf32") != 0 ? 2 : 4;
}

static geometry parse_geometry(const kt_variant *v)
{
  /* The CUDA-core kernel and mma.sync: the blocks an SM holds as their
   * space estimates them, neither split nor persistent. */
  if (strcmp(v->algo, "simt") == 0 || strcmp(v->algo, "mma") == 0)
    return (geometry){.bm = kt_variant_param_int(v, "bm", 0),
                      .bn = kt_variant_param_int(v, "bn", 0),
                      .occ = v->blocks_per_sm > 0 ? v->blocks_per_sm : 1,
                      .cluster = 1,
                      .mma = strcmp(v->algo, "mma") == 0,
                      .slice_bytes = strcmp(v->algo, "mma") == 0
                                         ? kt_variant_param_int(v, "bk", 0) * gemm_type_bytes(v)
                                         : 128};
  return (geometry){kt_variant_param_int(v, "bm", 0),      kt_variant_param_int(v, "bn", 0),
                    kt_variant_param_int(v, "occ", 0),     kt_variant_param_int(v, "split", 0),
                    kt_variant_param_int(v, "persist", 0), v->cluster > 1 ? v->cluster : 1,
                    strcmp(v->algo, "wgmma") == 0,           0,
                    128};
}

static void build_geometries(void)
{
  simt = malloc((size_t)(kt_registry_count > 0 ? kt_registry_count : 1) * sizeof *simt);
  for (int i = 0; simt && i < kt_registry_count; ++i)
    if (kt_registry[i].family == KT_FAMILY_GEMM && strcmp(kt_registry[i].algo, "simt") == 0)
      simt[nsimt++] = i;
  geometry *g = malloc((size_t)(kt_registry_count > 0 ? kt_registry_count : 1) * sizeof *g);
  if (!g)
    return;
  for (int i = 0; i < kt_registry_count; ++i)
    g[i] = parse_geometry(&kt_registry[i]);
  geometries = g;
}

static geometry geometry_of(const kt_variant *v)
{
  pthread_once(&geometries_once, build_geometries);
  const ptrdiff_t i = v - kt_registry;
  if (geometries && i >= 0 && i < kt_registry_count)
    return geometries[i];
  return parse_geometry(v);
}

/* The model's cost of v on M x N x K x batch of `type`, or 0 where v has
 * no such model.  The Hopper TF32 kernel runs some calls as the transpose
 * (`tf32_swap`: kt_gemm_wgmma_choose), its tiles then covering N x M. */
static double cost(const kt_variant *v, const kt_device_info *d, int type, int tf32_swap, long long M, long long N,
                   long long K, long long batch, int gran_a, int gran_b)
{
  const geometry g = geometry_of(v);
  const int bm = g.bm, bn = g.bn, occ = g.occ, split = g.split;
  if (bm <= 0 || bn <= 0 || occ <= 0 || d->sm_count <= 0)
    return 0;
  if (type == KT_GEMM_TF32 && g.wgmma && tf32_swap) {
    const long long m = M;
    M = N, N = m;
  }
  const long long bk = (g.slice_bytes > 0 ? g.slice_bytes : 128) / kt_gemm_elem_bytes(type);
  /* A cluster's blocks take CLUSTER tile rows together, past M or not. */
  const long long rows = (M + (long long)bm * g.cluster - 1) / ((long long)bm * g.cluster) * g.cluster;
  const long long blocks = rows * ((N + bn - 1) / bn) * batch;
  const long long ktiles = (K + bk - 1) / bk;
  const int splits = kt_gemm_splits(blocks, ktiles > INT_MAX ? INT_MAX : (int)ktiles, d->sm_count, occ, split);
  const long long slots = (long long)d->sm_count * occ;
  const double waves = (double)((blocks * splits + slots - 1) / slots);
  const double slices = (double)((ktiles + splits - 1) / splits) + (splits > 1 ? 1.0 : 0.0);
  const double fill = g.wgmma ? FILL_WGMMA : FILL, overlap = g.wgmma ? OVERLAP_WGMMA : OVERLAP;
  /* mma.sync's slices, where an operand is copied element by element
   * (kt_gemm_copy_granularity 2), by that operand's share of a slice. */
  const double slow = g.mma ? 1.0 + MMA_BY_ELEMENT * (bm * (gran_a == 2) + bn * (gran_b == 2)) / (bm + bn) : 1.0;
  const double time = g.persist ? waves * (slices * slow + overlap) + fill : waves * (slices * slow + fill);
  return time * bm * bn / occ;
}

/* How the wgmma launcher lays out call x (kt_gemm_wgmma_choose, the sector
 * rule aside). */
static kt_gemm_wgmma_layout wgmma_layout(const kt_matmul_desc *x)
{
  const int es = kt_gemm_elem_bytes((int)x->type);
  const long long na = x->stride_a == 0 ? 1 : x->batch, nb = x->stride_b == 0 ? 1 : x->batch;
  const int ala = kt_gemm_tma_addressable(x->A, x->lda, x->stride_a, na, es);
  const int alb = kt_gemm_tma_addressable(x->B, x->ldb, x->stride_b, nb, es);
  return kt_gemm_wgmma_choose(es, (int)x->op_a, (int)x->op_b, x->M, x->N, ala, alb);
}

/* t, its ranking re-ordered by the model's estimate at the call, into out;
 * variants without a model, or with no time, keep their place after those
 * with one.  Returns out, or t where the call is t's problem (its shape,
 * one entry, and as many operands for wgmma to repack). */
static const kt_tuned *rerank(const kt_tuned *t, const kt_device_info *d, const kt_matmul_desc *x, kt_tuned *out)
{
  if (!t)
    return t;
  const long long l = t->problem.dim[3];
  /* The tuned problem as the tuner laid it out: natural leading
   * dimensions, aligned pointers, one entry. */
  kt_matmul_desc tp;
  memset(&tp, 0, sizeof tp);
  tp.type = (kt_dtype)(l / 4), tp.op_a = (kt_op)((l >> 1) & 1), tp.op_b = (kt_op)(l & 1);
  tp.M = t->problem.m, tp.N = t->problem.n, tp.K = t->problem.k, tp.batch = 1;
  tp.A = tp.B = (const void *)(uintptr_t)256, tp.C = (float *)(uintptr_t)256;
  tp.lda = tp.op_a == KT_OP_N ? tp.K : tp.M, tp.ldb = tp.op_b == KT_OP_N ? tp.N : tp.K, tp.ldc = tp.N;
  /* How many operands wgmma repacks, and whether TF32 runs swapped, at
   * each. */
  const kt_gemm_wgmma_layout lay_at = wgmma_layout(&tp), lay_here = wgmma_layout(x);
  const int repacks_at = lay_at.pack_a + lay_at.pack_b, repacks_here = lay_here.pack_a + lay_here.pack_b;
  /* The tuned shape itself, its operands repacked as they were: as measured. */
  if (t->problem.m == x->M && t->problem.n == x->N && t->problem.k == x->K && x->batch == 1 &&
      repacks_here == repacks_at)
    return t;
  /* The head and t's ranked entries, not the whole arrays (8 KB). */
  memcpy(out, t, offsetof(kt_tuned, ranked));
  memcpy(out->ranked, t->ranked, (size_t)t->count * sizeof *t->ranked);
  memcpy(out->ms, t->ms, (size_t)t->count * sizeof *t->ms);
  double est[KT_MAX_RANKED];
  const double repack_at = repacks_at ? REPACK_MS : 0.0, repack_here = repacks_here ? REPACK_MS : 0.0;
  /* How mma.sync copies each operand at the call (the tuned problem's are
   * aligned: 16 bytes). */
  const int es = kt_gemm_elem_bytes((int)x->type);
  const int gran_a = kt_gemm_copy_granularity(x->A, x->lda, x->stride_a, x->batch, es),
            gran_b = kt_gemm_copy_granularity(x->B, x->ldb, x->stride_b, x->batch, es);
  for (int i = 0; i < t->count; ++i) {
    const double at = cost(t->ranked[i], d, (int)tp.type, lay_at.swap, tp.M, tp.N, tp.K, 1, 16, 16);
    const double here = cost(t->ranked[i], d, (int)x->type, lay_here.swap, x->M, x->N, x->K, x->batch, gran_a, gran_b);
    const double ms = t->ms[i];
    if (!(at > 0 && here > 0 && ms > 0)) {
      est[i] = INFINITY;
      continue;
    }
    /* A wgmma variant's repacks are priced apart from its tiles' time (at
     * least a fifth of its tuned time is the tiles'). */
    const int wg = geometry_of(t->ranked[i]).wgmma;
    const double fixed_at = wg ? repack_at : 0.0, fixed_here = wg ? repack_here : 0.0;
    est[i] = fmax(ms - fixed_at, 0.2 * ms) * here / at + fixed_here;
  }
  /* Insertion sort, stable: equal estimates keep the measured order. */
  for (int i = 1; i < out->count; ++i)
    for (int j = i; j > 0 && est[j] < est[j - 1]; --j) {
      const double e = est[j];
      est[j] = est[j - 1], est[j - 1] = e;
      const kt_variant *v = out->ranked[j];
      out->ranked[j] = out->ranked[j - 1], out->ranked[j - 1] = v;
      const double ms = out->ms[j];
      out->ms[j] = out->ms[j - 1], out->ms[j - 1] = ms;
    }
  return out;
}

static int serves_call(const kt_variant *v, const kt_device_info *d, const void *call)
{
  return kt_gemm_serves(v, d, *(const int *)call);
}

/*
 * FP32 batches.  kt_matmul serves one product at a time, so a batch of
 * small products would pay a launch per entry and fill the GPU with none
 * of them; the CUDA-core kernel of this family (algo simt) runs every entry
 * in one launch.  An entry that fills the GPU by itself with kt_matmul's
 * large tiles (F32_ENTRY_TILES of 128 x 128 a SM) over a K of
 * F32_ENTRY_MIN_K or more goes to kt_matmul, entry by entry, whose kernels
 * are the faster per product.
 *
 * Untuned (no FP32 problem of this family in the database: `make tune`
 * tunes none), the CUDA-core tile is the one of least modelled time: the
 * blocks on the busiest SM (at least SIMT_SAT of those it holds, which
 * keep it busy) times a block's padded multiply-adds (BM BN K) over its
 * tile's rate (simt_rate).  Where M or N is far below a tile, the padding
 * decides; where the batch holds few blocks, the waves.  Tuned, the
 * family's rule (the nearest tuned FP32 problem, re-ranked by the cost
 * model) decides.
 */
#define F32_ENTRY_TILES 1.0
#define F32_ENTRY_MIN_K 256
#define SIMT_SAT 0.5

static int f32_entrywise(const kt_matmul_desc *x, const kt_device_info *d)
{
  const double tiles = (double)((x->M + 127) / 128) * (double)((x->N + 127) / 128);
  return x->batch == 1 || (tiles >= F32_ENTRY_TILES * d->sm_count && x->K >= F32_ENTRY_MIN_K);
}

/* Multiply-adds per unit time of a CUDA-core tile at full occupancy,
 * relative to 128 x 128's, by its outputs a thread (256 threads a block)
 * and its shape: the geometric mean of what the tiles of each class
 * reached, per padded multiply-add, on the seven batches of two seeded
 * suites whose entries fill every tile (M, N >= 200, K >= 40; H100,
 * session 52, the kernel that fetches a slice every step:
 * bench/reference/gemm_tiles/README.md, "The CUDA-core tiles' next slice
 * fetched without a branch").  A thread with more outputs reads each
 * staged element more times from registers; a flat tile's thread reads
 * more of its wide operand's elements per output than a square one of as
 * many outputs.  Replayed on those suites' times, the pick reached 0.971
 * and 0.968 of the fastest tile (session 51's rates 0.964 and 0.952), and
 * on session 51's two runs of the same seeds, with the kernel before,
 * 0.974 and 0.965 (0.968 and 0.945). */
static double simt_rate(int bm, int bn)
{
  const int outputs = bm * bn / 256;
  if (bm == bn)
    return outputs >= 64 ? 1.0 : outputs >= 16 ? 0.76 : outputs >= 4 ? 0.43 : 0.15;
  return outputs >= 16 ? 0.66 : outputs >= 8 ? 0.34 : 0.25;
}

static const kt_variant *f32_simt_pick(const kt_device_info *d, const kt_matmul_desc *x, kt_choice *out)
{
  const kt_variant *best = NULL;
  double best_cost = INFINITY;
  pthread_once(&geometries_once, build_geometries);
  for (int i = 0; i < (simt ? nsimt : kt_registry_count); ++i) {
    const kt_variant *v = &kt_registry[simt ? simt[i] : i];
    if (strcmp(v->algo, "simt") != 0 || !kt_gemm_serves(v, d, KT_F32))
      continue;
    const geometry g = geometry_of(v);
    const int bm = g.bm, bn = g.bn, per_sm = kt_resident_blocks(v, d);
    if (bm <= 0 || bn <= 0)
      continue;
    const double blocks = (double)((x->M + bm - 1) / bm) * (double)((x->N + bn - 1) / bn) * (double)x->batch;
    const double busiest =
        fmax(ceil(blocks / (d->sm_count > 0 ? d->sm_count : 1)), SIMT_SAT * (per_sm > 0 ? per_sm : 1));
    const double cost = busiest * bm * bn * (double)x->K / simt_rate(bm, bn);
    if (cost < best_cost)
      best = v, best_cost = cost;
  }
  if (best && out) {
    char why[256];
    snprintf(why, sizeof why,
             "untuned FP32: one launch for %lld entr%s on the CUDA cores, the tile of least modelled time (no "
             "FP32 problem tuned)",
             (long long)x->batch, x->batch == 1 ? "y" : "ies");
    kt_dispatch_fill_choice(out, best, NULL, why);
  }
  return best;
}

static const kt_variant *choose(const kt_context *c, const kt_matmul_desc *x, kt_choice *out)
{
  int nt = 0;
  const kt_tuned *tuned = kt_context_tuned(c, KT_FAMILY_GEMM, &nt);
  const long long layout = kt_gemm_layout(x->type, x->op_a, x->op_b);
  const kt_tuned *t = kt_gemm_nearest(tuned, nt, x->M, x->N, x->K, layout);
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = KT_FAMILY_GEMM;
  p.m = x->M, p.n = x->N, p.k = x->K, p.dim[3] = layout;
  kt_context_miss(c, t, &p); /* unless t is this very problem */
  const int type = (int)x->type;
  kt_tuned reranked;
  const kt_device_info *d = kt_context_device(c);
  if (type == KT_F32 && (!t || t->problem.dim[3] / 4 != KT_F32)) {
    const kt_variant *v = f32_simt_pick(d, x, out);
    if (v)
      return v;
  }
  return kt_dispatch_choose(d, KT_FAMILY_GEMM, rerank(t, d, x, &reranked), serves_call, &type, out);
}

/* ---- argument checks ----------------------------------------------------- */

/* Elements an operand of rows x cols (row stride ld) spans over the batch,
 * into *out; KT_ERR_OVERFLOW when that or its bytes do not fit int64. */
static int span(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride, int es, int64_t *out)
{
  int64_t a, b;
  if (__builtin_mul_overflow(rows - 1, ld, &a) || __builtin_add_overflow(a, cols, &a) ||
      __builtin_mul_overflow(batch - 1, stride, &b) || __builtin_add_overflow(a, b, out) ||
      __builtin_mul_overflow(*out, (int64_t)es, &a))
    return KT_ERR_OVERFLOW;
  return KT_OK;
}

/* The checks of kt_matmul_ex, on a copy of desc with batch 0 made 1. */
static int check(const kt_matmul_desc *x)
{
  if (!x->A || !x->B || !x->C)
    return KT_ERR_NULL_POINTER;
  if ((unsigned)x->type > (unsigned)KT_F16 || (unsigned)x->op_a > (unsigned)KT_OP_T ||
      (unsigned)x->op_b > (unsigned)KT_OP_T)
    return KT_ERR_BAD_TYPE;
  if (x->M < 0 || x->N < 0 || x->K < 0 || x->batch < 1)
    return KT_ERR_BAD_SIZE;
  if (x->M > KT_MATMUL_MAX_DIM || x->N > KT_MATMUL_MAX_DIM || x->K > KT_MATMUL_MAX_DIM || x->batch > INT_MAX)
    return KT_ERR_OVERFLOW;
  /* Stored shapes: op N stores op(X) as is, op T its transpose. */
  const int64_t ar = x->op_a == KT_OP_N ? x->M : x->K, ac = x->op_a == KT_OP_N ? x->K : x->M;
  const int64_t br = x->op_b == KT_OP_N ? x->K : x->N, bc = x->op_b == KT_OP_N ? x->N : x->K;
  if (x->lda < ac || x->ldb < bc || x->ldc < x->N)
    return KT_ERR_BAD_LD;
  if (x->stride_a < 0 || x->stride_b < 0 || x->stride_c < 0)
    return KT_ERR_BAD_STRIDE;
  const int es = kt_gemm_elem_bytes((int)x->type);
  int64_t e;
  int rc = span(ar, ac, x->lda, x->batch, x->stride_a, es, &e);
  if (rc == KT_OK)
    rc = span(br, bc, x->ldb, x->batch, x->stride_b, es, &e);
  if (rc == KT_OK)
    rc = span(x->M, x->N, x->ldc, x->batch, x->stride_c, 4, &e);
  if (rc != KT_OK)
    return rc;
  /* Outputs of one batch must not overlap: entry b + 1 starts past the
   * last element of entry b (which span has found to fit 64 bits), or the
   * entries lie side by side within the rows of one wider C (each N apart
   * or more, the last ending within ldc: C of M x batch N with stride_c N,
   * one head per entry). */
  if (x->batch > 1 && x->stride_c < (x->M - 1) * x->ldc + x->N &&
      !(x->stride_c >= x->N && (x->batch - 1) * x->stride_c + x->N <= x->ldc))
    return KT_ERR_BAD_STRIDE;
  if (((uintptr_t)x->A | (uintptr_t)x->B) % (uintptr_t)es || (uintptr_t)x->C % 4)
    return KT_ERR_MISALIGNED;
  return KT_OK;
}

/* KT_F32 with op N, N: the matmul family's exact FP32 kernels. */
static int is_plain_f32(const kt_matmul_desc *x)
{
  return x->type == KT_F32 && x->op_a == KT_OP_N && x->op_b == KT_OP_N;
}

/*
 * KT_F32 with an op T: each op-T operand is transposed into scratch
 * (runtime/kernels.cu; a row stride a multiple of 4 floats,
 * kt_matmul_stage_ld, 16-byte aligned from the pool), and
 * kt_matmul multiplies from there with its tuned kernels, rather than the
 * CUDA-core fallback serving it.  The transpose reads and writes the
 * operand once, a small part of the product's time past small sizes: op T,
 * N at 4096^3 moves 128 MB more than op N, N.
 *
 * The scratch holds a panel of K at a time, at most KT_MATMUL_MAX_STAGE
 * bytes an operand (kt_matmul stages B within the same limit); a longer K
 * is multiplied a panel at a time, each panel after the first adding to C
 * (beta 1), as kt_matmul's staging does.  Where a panel would be shallower
 * than T_MIN_PANEL (an op-T A of more than 512K rows, or B of more than
 * 512K columns), or the pool has no room for the scratch, the call goes to
 * the CUDA-core kernel instead, in one launch.  A batch runs entry by
 * entry, as op N, N does, through one scratch; an operand shared by every
 * entry (stride 0) and held in one panel is transposed once.
 */
#define T_MIN_PANEL 128

typedef struct f32_plan {
  int ta, tb;         /* which operands go through scratch */
  long long kp;       /* the panel depth */
  long long lda, ldb; /* the scratch's row strides */
  size_t a_bytes, b_bytes;
} f32_plan;

/* The plan of a KT_F32 call with an op T; 0 where it takes the fallback. */
static int f32_plan_of(const kt_matmul_desc *x, f32_plan *p)
{
  memset(p, 0, sizeof *p);
  p->ta = x->op_a == KT_OP_T, p->tb = x->op_b == KT_OP_T;
  long long kp = x->K;
  if (p->ta) {
    const long long fit = KT_MATMUL_MAX_STAGE / ((long long)x->M * 4) / 4 * 4;
    kp = fit < kp ? fit : kp;
  }
  if (p->tb) {
    const long long fit = KT_MATMUL_MAX_STAGE / (kt_matmul_stage_ld(x->N) * 4);
    kp = fit < kp ? fit : kp;
  }
  if (kp < (x->K < T_MIN_PANEL ? x->K : T_MIN_PANEL))
    return 0;
  p->kp = kp;
  p->lda = p->ta ? kt_matmul_stage_ld(kp) : x->lda;
  p->ldb = p->tb ? kt_matmul_stage_ld(x->N) : x->ldb;
  p->a_bytes = p->ta ? (size_t)(x->M * p->lda) * sizeof(float) : 0;
  p->b_bytes = p->tb ? (size_t)(kp * p->ldb) * sizeof(float) : 0;
  return 1;
}

/* Transpose into scratch what entry b's panel from k0 (kk deep) needs of
 * an op-T operand: op(A) M x kk from A stored K x M, op(B) kk x N from B
 * stored N x K. */
static int f32_transpose(const kt_context *c, const kt_matmul_desc *x, int b_side, long long b, long long k0,
                         long long kk, float *dst, long long ldd, kt_stream stream)
{
  const float *src = b_side ? x->B : x->A;
  const long long ld = b_side ? x->ldb : x->lda, stride = b_side ? x->stride_b : x->stride_a;
  kt_transpose_args t = {.src = src + b * stride + (b_side ? k0 : k0 * ld),
                         .lds = ld,
                         .rows = b_side ? x->N : kk,
                         .cols = b_side ? kk : x->M,
                         .dst = dst,
                         .ldd = ldd};
  return kt_context_run(c, "transpose", kt_transpose_f32, &t, stream);
}

/* KT_F32 with an op T through scratch and kt_matmul; *fallback set where
 * the plan or the scratch says to take the fallback instead (nothing run). */
static int f32_transposed(kt_context *c, const kt_matmul_desc *x, kt_stream stream, int *fallback)
{
  f32_plan p;
  *fallback = 0;
  if (!f32_plan_of(x, &p)) {
    *fallback = 1;
    return KT_OK;
  }
  const size_t a_room = (p.a_bytes + 255) / 256 * 256; /* B's scratch 256-byte aligned after A's */
  void *scratch = NULL;
  int status = 0;
  kt_scratch_args s = {kt_context_pool(c), a_room + p.b_bytes, &scratch, &status};
  int rc = kt_context_run(c, "scratch", kt_scratch_alloc, &s, stream);
  if (rc != KT_OK)
    return rc;
  if (!scratch) {
    *fallback = 1;
    return KT_OK;
  }
  float *sa = scratch, *sb = (float *)((char *)scratch + a_room);
  /* Transposed already and still valid: a shared operand in one panel. */
  int a_done = 0, b_done = 0;
  for (int64_t b = 0; b < x->batch && rc == KT_OK; ++b)
    for (long long k0 = 0; k0 < x->K && rc == KT_OK; k0 += p.kp) {
      const long long kk = x->K - k0 < p.kp ? x->K - k0 : p.kp;
      const float *A = (const float *)x->A + b * x->stride_a + k0,
                  *B = (const float *)x->B + b * x->stride_b + k0 * x->ldb;
      if (p.ta) {
        if (!a_done)
          rc = f32_transpose(c, x, 0, b, k0, kk, sa, p.lda, stream);
        a_done = x->stride_a == 0 && p.kp >= x->K;
        A = sa;
      }
      if (p.tb && rc == KT_OK) {
        if (!b_done)
          rc = f32_transpose(c, x, 1, b, k0, kk, sb, p.ldb, stream);
        b_done = x->stride_b == 0 && p.kp >= x->K;
        B = sb;
      }
      if (rc == KT_OK)
        rc = kt_matmul(c, x->M, x->N, kk, x->alpha, A, p.lda, B, p.ldb, k0 == 0 ? x->beta : 1.0f,
                       x->C + b * x->stride_c, x->ldc, stream);
    }
  const int f = kt_context_run(c, "scratch", kt_scratch_free, &s, stream);
  return rc != KT_OK ? rc : f;
}

static int load_desc(const kt_matmul_desc *desc, kt_matmul_desc *x)
{
  if (!desc)
    return KT_ERR_NULL_POINTER;
  *x = *desc;
  if (x->batch == 0)
    x->batch = 1;
  return check(x);
}

/* ---- the API ------------------------------------------------------------ */

int kt_matmul_ex_choice(kt_context *c, const kt_matmul_desc *desc, kt_choice *out)
{
  kt_matmul_desc x;
  int rc = kt_context_check(c);
  if (out)
    memset(out, 0, sizeof *out); /* empty strings where the call is refused */
  else if (rc == KT_OK)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = load_desc(desc, &x);
  if (rc != KT_OK)
    return rc;
  if (x.M == 0 || x.N == 0 || x.K == 0 || x.alpha == 0.0f) {
    kt_empty_choice(x.M == 0 || x.N == 0, out);
    return KT_OK;
  }
  const int entrywise = x.type == KT_F32 && f32_entrywise(&x, kt_context_device(c));
  if (entrywise && is_plain_f32(&x))
    return kt_matmul_choice(c, x.M, x.N, x.K, x.A, x.lda, x.B, x.ldb, x.C, x.ldc, out);
  f32_plan p;
  if (entrywise && f32_plan_of(&x, &p)) {
    /* kt_matmul's choice for the first panel, the scratch standing in for
     * the transposed operands (256-byte aligned from the pool; B's
     * alignment and ldb are what its choice reads). */
    const float *const scratch = (const float *)(uintptr_t)256;
    rc = kt_matmul_choice(c, x.M, x.N, p.kp, p.ta ? scratch : x.A, p.lda, p.tb ? scratch : x.B, p.ldb, x.C, x.ldc, out);
    if (rc == KT_OK) {
      /* In front, so that a long reason of kt_matmul's loses its end, not this. */
      char head[96];
      const char *which = p.ta && p.tb ? "A and B" : p.ta ? "A" : "B";
      if (p.kp < x.K)
        snprintf(head, sizeof head, "op T: %s transposed into scratch first, in panels of %lld of K; ", which, p.kp);
      else
        snprintf(head, sizeof head, "op T: %s transposed into scratch first; ", which);
      const size_t h = strlen(head), room = sizeof out->reason - 1 - h;
      memmove(out->reason + h, out->reason, room);
      out->reason[sizeof out->reason - 1] = '\0';
      memcpy(out->reason, head, h);
    }
    return rc;
  }
  return choose(c, &x, out) ? KT_OK : KT_ERR_NO_VARIANT;
}

int kt_matmul_ex(kt_context *c, const kt_matmul_desc *desc, kt_stream stream)
{
  kt_matmul_desc x;
  int rc = kt_context_check(c);
  if (rc == KT_OK)
    rc = load_desc(desc, &x);
  if (rc != KT_OK || x.M == 0 || x.N == 0) /* as BLAS: an empty C, nothing read or written */
    return rc;
  if (!kt_context_device_pointer(c, x.A) || !kt_context_device_pointer(c, x.B) ||
      !kt_context_device_pointer(c, x.C))
    return KT_ERR_NOT_DEVICE_POINTER;
  if (x.K == 0 || x.alpha == 0.0f) /* as BLAS: nothing to add, and A and B not read */
    return kt_scale_c(c, x.M, x.N, x.beta, x.C, x.ldc, x.batch, x.stride_c, stream);
  const int entrywise = x.type == KT_F32 && f32_entrywise(&x, kt_context_device(c));
  if (entrywise && is_plain_f32(&x)) {
    const float *A = x.A, *B = x.B;
    for (int64_t b = 0; b < x.batch && rc == KT_OK; ++b)
      rc = kt_matmul(c, x.M, x.N, x.K, x.alpha, A + b * x.stride_a, x.lda, B + b * x.stride_b, x.ldb, x.beta,
                     x.C + b * x.stride_c, x.ldc, stream);
    return rc;
  }
  if (entrywise) {
    int fallback = 0;
    rc = f32_transposed(c, &x, stream, &fallback);
    if (!fallback)
      return rc;
  }
  const kt_variant *v = choose(c, &x, NULL);
  if (!v)
    return KT_ERR_NO_VARIANT;
  const kt_device_info *d = kt_context_device(c);
  kt_gemm_args a = {(int)x.type, (int)x.op_a, (int)x.op_b, (int)x.M, (int)x.N, (int)x.K, (int)x.batch,
                    x.alpha, x.beta, x.A, x.B, x.C, x.lda, x.ldb, x.ldc, x.stride_a, x.stride_b, x.stride_c,
                    d->sm_count, kt_context_pool(c)};
  return kt_context_launch(c, v, &a, stream);
}
