/* SPDX-License-Identifier: MIT */
/* runtime/matmul.c: the matmul family in the runtime: kt_matmul and
 * kt_matmul_choice, their argument checks, which variants can serve a call,
 * the problem key and the selection rule.
 *
 * Selection.  A call at a tuned shape gets the fastest measured variant
 * that can serve it (a float4 winner cannot serve a misaligned call).  Any
 * other call gets the variant whose time a cost model predicts to be least
 * (see "the cost model" below): every variant measured at some tuned
 * problem is a candidate, its time at the call's shape predicted from its
 * own measurements, weighted towards the tuned shapes nearest the call.
 * "Nearest" compares shapes by ratios: the distance is
 *   (ln M - ln Mt)^2 + (ln N - ln Nt)^2 + (ln K - ln Kt)^2.
 * With nothing tuned, the defaults.  A call at an untuned shape is
 * remembered as a miss (misses.c) where the decision is made, never on a
 * decision cache hit.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"
#include "kt_kernels.h"
#include "kt_matmul_split.h"
#include "registry.h"

/* Largest M, N or K: INT_MAX less room for a tile's overshoot. */

/* ---- the family's entry ------------------------------------------------ */

static void matmul_key(const kt_problem *p, char *buf, size_t len)
{
  snprintf(buf, len, "%lldx%lldx%lld", p->m, p->n, p->k);
}

static int matmul_parse(const char *s, kt_problem *out)
{
  long long m, n, k;
  int used = 0;
  if (!s || sscanf(s, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 || s[used] != '\0' || m <= 0 || n <= 0 || k <= 0 ||
      m > KT_MATMUL_MAX_DIM || n > KT_MATMUL_MAX_DIM || k > KT_MATMUL_MAX_DIM)
    return KT_ERR_BAD_OPTION;
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_MATMUL;
  out->m = m;
  out->n = n;
  out->k = k;
  return KT_OK;
}

static int matmul_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  return v->family == KT_FAMILY_MATMUL && kt_variant_runs_on(v, d) && kt_matmul_serves_shape(v, p->m, p->n, p->k);
}

static double ln_pos(long long x)
{
  return log((double)(x > 0 ? x : 1));
}

static void matmul_prepare(kt_tuned *t)
{
  for (int i = 0; i < 3; ++i)
    t->log_shape[i] = ln_pos(t->problem.dim[i]);
}

static void *model_build(const kt_tuned *t, int n, const kt_device_info *d);
static void model_release(void *state);

const kt_family_ops kt_matmul_ops = {
    .id = KT_FAMILY_MATMUL,
    .name = "matmul",
    .long_name = "matmul",
    .ndims = 3,
    .dims = {"m", "n", "k"},
    .key = matmul_key,
    .parse = matmul_parse,
    .fits = matmul_fits,
    .prepare = matmul_prepare,
    .build = model_build,
    .release = model_release,
};

/* ---- which variants serve a call ---------------------------------------- */

/* A variant's alignment binds B only: every kernel copies A four bytes at
 * a time (it lands transposed in shared memory), so any lda and any 4-byte
 * aligned A serve, and the float4 kernels store a float4 of C only where
 * its address allows.  For any other B a float4 kernel stages B first
 * (kt_matmul_stage_rows): kt_matmul_serves says whether v reads this B in
 * place, kt_matmul_serves_staged whether it serves the call at all. */
int kt_matmul_serves(const kt_variant *v, const kt_device_info *d, const void *B, long long ldb)
{
  return v->family == KT_FAMILY_MATMUL && kt_variant_runs_on(v, d) && !kt_matmul_stages(v, B, ldb);
}

/* Alignments are 1 or 4 (the space's vec): kt_matmul_b_in_place is the 4. */
int kt_matmul_stages(const kt_variant *v, const void *B, long long ldb)
{
  return v->align > 1 && !kt_matmul_b_in_place(B, ldb);
}

int kt_matmul_serves_staged(const kt_variant *v, const kt_device_info *d, const void *B, long long ldb, long long N,
                            long long K)
{
  if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, d))
    return 0;
  return !kt_matmul_stages(v, B, ldb) || kt_matmul_stage_rows(K, N) >= 1;
}

/* "RxC" of a tt parameter: its first or second number; 0 if absent. */
static int tile_dim(const kt_variant *v, int second)
{
  const char *tt = kt_variant_param(v, "tt");
  const char *x = tt ? strchr(tt, 'x') : NULL;
  return !tt ? 0 : second ? (x ? atoi(x + 1) : 0) : atoi(tt);
}

/* Every kernel computes any M, N, K, but six are built for one corner
 * of the shapes and reread an operand or loop past it
 * (templates/matmul.space.lua): the few-row kernel serves M <= TM, the
 * few-column kernel N <= TN, the short-K kernel K <= 4 BK, the
 * matrix-times-vector kernel N = 1 with a row long enough to give every
 * lane of its warps along K a 16-byte piece (K >= 128 KW; shorter rows
 * leave warps idle, and the few-column kernel serves them), and the
 * vector-times-matrix kernel M = 1 with N > FEW_COLUMNS.  Up to that N, a
 * lane per column leaves most of its lanes idle and a cluster's few blocks
 * alone on the GPU, and the few-column kernel, built for it, was as fast or
 * faster on all 17 such shapes of two vector suites (H100, bench/reference/
 * matmul_random/README.md, run 11).  The sixth are the warp tiles built
 * for a long K over a few dozen rows: two warps of 8x8 threads (32x128
 * blocks, cuBLAS's tile there) and 12x8 threads (48x128 blocks of two
 * warps, 96x128 of four).  They serve M <= BM, where one row of blocks
 * reads B once: the 32x128 tile won there by up to 1.3 times
 * (20x8920x13415 with B off 16 bytes), and over more rows its blocks
 * reread B, so that, tuned for every shape, dispatch sent it to 69 to 294
 * rows where it lost by 18 to 34% (run 34); the 96x128 tile won 11 of 45
 * shapes of 65 to 96 rows by up to 1.37 times, the 48x128 tile 3 of 26 of
 * 33 to 48 rows by up to 1.21, and neither any of a random suite (run
 * 36).  Outside, neither the tuner times them nor dispatch picks them. */
#define FEW_COLUMNS 16 /* the few-column kernel's corner: N <= 16 (staging B stops there too) */
int kt_matmul_serves_shape(const kt_variant *v, long long M, long long N, long long K)
{
  if (strcmp(v->algo, "skinny") == 0)
    return M <= tile_dim(v, 0);
  if (strcmp(v->algo, "vecmat") == 0)
    return M <= tile_dim(v, 0) && N > FEW_COLUMNS;
  if (strcmp(v->algo, "gemv") == 0)
    return N <= tile_dim(v, 1);
  if (strcmp(v->algo, "matvec") == 0)
    return N <= tile_dim(v, 1) && K >= 128LL * kt_variant_param_int(v, "kwarps", 1);
  if (strcmp(v->algo, "wt") == 0 && (tile_dim(v, 0) == 12 || (v->threads == 64 && tile_dim(v, 0) == 8)))
    return M <= kt_variant_param_int(v, "bm", 0);
  if (strcmp(v->algo, "direct") == 0) {
    const char *bk = kt_variant_param(v, "bk");
    return bk && K <= 4LL * atoi(bk);
  }
  return 1;
}

/* The call as the dispatcher's serves() callback sees it. */
typedef struct matmul_call {
  const void *B, *C; /* A and lda never matter (kt_matmul_serves) */
  long long ldb, ldc;
  long long M, N, K;
} matmul_call;

/* The call's shape, as dispatch takes it: kt_matmul_serves_shape, and the
 * matrix-times-vector kernel only for a contiguous vector (ldb 1).  Its
 * lanes take the vector's four values for each piece of A from L1; ldb
 * floats apart they are a sector each, too many for L1, and every row
 * reads them again from L2 (H100, 1626x1x11730 with ldb 20: 0.47 of
 * cuBLAS, bench/reference/matmul_random/README.md, run 10).  It computes a
 * strided vector correctly all the same. */
static int dispatch_serves_shape(const kt_variant *v, const matmul_call *m)
{
  return kt_matmul_serves_shape(v, m->M, m->N, m->K) && (m->ldb == 1 || strcmp(v->algo, "matvec") != 0);
}

static int serves_call(const kt_variant *v, const kt_device_info *d, const void *call)
{
  const matmul_call *m = call;
  return kt_matmul_serves(v, d, m->B, m->ldb) && dispatch_serves_shape(v, m);
}

/* The same, B staged where v cannot read it in place: what the cost
 * model, which prices the staging, may choose from. */
static int serves_call_staged(const kt_variant *v, const kt_device_info *d, const matmul_call *m)
{
  return kt_matmul_serves_staged(v, d, m->B, m->ldb, m->N, m->K) && dispatch_serves_shape(v, m);
}

/* ---- the selection rule ------------------------------------------------- */

static double sq(double x)
{
  return x * x;
}

/* Runs on every call: a handful of tuned problems, three logarithms for
 * the call itself, the rest precomputed at load (matmul_prepare). */
const kt_tuned *kt_matmul_nearest(const kt_tuned *t, int n, long long M, long long N, long long K)
{
  const kt_tuned *best = NULL;
  double bd = INFINITY;
  const double lm = ln_pos(M), ln = ln_pos(N), lk = ln_pos(K);
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_MATMUL)
      continue;
    const double d = sq(lm - t[i].log_shape[0]) + sq(ln - t[i].log_shape[1]) + sq(lk - t[i].log_shape[2]);
    if (d < bd) {
      bd = d;
      best = &t[i];
    }
  }
  return best;
}

/* ---- the cost model ------------------------------------------------------ */

/*
 * The time of variant v at M x N x K is modelled as
 *   t = launches * T_LAUNCH + memory + reduction + c_v * compute
 * compute:   on the busiest multiprocessor, the blocks it runs times what
 *            one block costs: BM x BN x (its K chunk, padded to whole BK
 *            steps, + FIXED_K), FIXED_K standing for the block's fixed
 *            work (filling the pipeline, the epilogue's stores) in units
 *            of its multiply-adds.  A round of fewer blocks than fit an SM
 *            costs as much as the blocks that keep it busy.  For warp
 *            tiles, enough that warps x outputs per thread (the independent
 *            multiply-adds a warp has in flight) reach SATURATE, at most the
 *            SM's blocks: a lone block of 8x8-output threads nearly fills
 *            an SM, blocks of 4x4 need four times as many warps.  For the
 *            few-row, few-column and matrix-times-vector kernels, whose
 *            warps count as blocks, WARPS_BUSY of the SM's; for the other
 *            kernels, half the SM's blocks.  The short-K kernel
 *            (direct) has no pipeline: it multiplies only the K it holds
 *            (no padding), but every BK chunk first waits for its panels'
 *            copy, DIRECT_CHUNK_K steps' worth; so its cost grows with K
 *            faster than a pipelined kernel's, which the padded count (32
 *            steps at K 8 or 16, 64 at K 58, for BK 32) hid, making it look
 *            cheap at a mid K.  The few-row and few-column kernels
 *            (streaming) skip their reads past K and wait on the rest, so
 *            they count their busiest chunk's own K, not padded, but at
 *            least one step of reads (a round trip to memory).  Replayed
 *            offline over an H100's make tune and every variant timed on
 *            three random suites and two vector-like ones (bench/reference/
 *            matmul_random/README.md, run 8), dispatch reached 0.974 of the
 *            best against 0.969 (mean of the suites' geometric means), and
 *            0.84 and 0.87 at the worst shape of the default seed and seed
 *            99 against 0.61 and 0.71: the padded count (K up to whole
 *            128-deep steps: 512 for 394, 640 for 523) had sent
 *            15720x2x394 and 7626x1x523 to warp tiles at 0.61 and 0.71 of
 *            the few-column kernel.  The Guide's tiled kernel (tiled),
 *            which copies each BS-deep chunk and waits at a barrier before
 *            its multiply-adds, is priced the same way: with the padded
 *            count and FIXED_K alone, its time grew with K at half the
 *            rate it measured (tiled_bs8 4.2 us at 16x16x16, 18.5 at
 *            16x16x256, H100), so it looked cheap at a mid K (18x19x75 went
 *            to it at 0.74 of the best, 7.8 us against 5.8).  Replayed over
 *            each GPU's shipped file and suites, dispatch went from 0.9838
 *            to 0.9842 of the best (H100, run 26's), 0.9794 to 0.9801 (its
 *            held-out seeds), 0.9823 to 0.9839 (H200, run 20), 0.9811 to
 *            0.9800 (its held-out seeds), and on three suites of 17 to 64
 *            rows from 0.9829 to 0.9858, their worst shape from 0.74 to
 *            0.83; waits of 16 to 64 steps per chunk give figures within
 *            0.0015 of each other, so the tiled kernel takes the short-K
 *            kernel's (bench/reference/matmul_random/README.md, run 28).
 *            A streaming kernel's blocks are not counted whole on the
 *            busiest SM but spread evenly over the SMs: its time is its
 *            reads', and an SM that runs one block more than another
 *            does not hold up the others' reads.  Counted whole, a call
 *            with a few more blocks than the tuned problem near it could
 *            cross from 2 to 3 blocks an SM and look half again as slow:
 *            the few-column kernel's 4x4 tile with one warp along K
 *            (5661x1x881: 0.75 of the best went to its 8-warp twin, now
 *            1.00), the vector-times-matrix kernel at 1x1474x5786 and
 *            1x4759x4492 (0.90 and 0.91 went to split-K warp tiles, now
 *            1.00 and 0.96; H100).  Replayed over both GPUs' run 35 files
 *            and suites, dispatch went from 0.9811 to 0.9825 of the best
 *            (H100) and 0.9806 to 0.9826 (H200); over run 34's H100 file
 *            and its twelve suites 0.9773 to 0.9786 (their worst shape
 *            0.58 to 0.75), over run 33's H200 file and six suites 0.9858
 *            to 0.9861 (bench/reference/matmul_random/README.md, run 36).
 * memory:    A and B read and C written once, at MEMORY_BW: what no
 *            choice of tile saves (it decides calls with a tiny K or a
 *            size of 1); and B read again by every row of blocks after
 *            the first, at B_REREAD_BW (L2's bandwidth, about).  Without
 *            it a call of a few dozen rows went to 16- and 32-row tiles
 *            that read B two to six times, where one row of taller blocks
 *            reads it once (71x2424x6946: a 16x128 tile in clusters of 4
 *            at 0.72 of a 96x128 tile split through a workspace).
 *            Replayed with the H100's file of run 37, over bands of
 *            33-64 and 65-100 rows (two measured before the term was
 *            tried, two after) dispatch went from 0.9670 to 0.9720 of
 *            the best (their worst shape 0.72 to 0.79), over run 36's
 *            band of 16-100 rows from 0.9698 to 0.9802 and its other
 *            eight suites from 0.9830 to 0.9825; with run 36's file and
 *            its ten suites 0.9816 to 0.9822, the H200's run 35 file and
 *            suites 0.9826 to 0.9827, run 34's (H100) 0.9786 to 0.9775,
 *            run 33's (H200) 0.9861 to 0.9863 (bench/reference/
 *            matmul_random/README.md, run 37).  Twice
 *            the bandwidth gave 0.9714 on the bands, half 0.9707; counting
 *            A's rereads by every column of blocks too lost up to 0.0024.
 * reduction: split-K's workspace traffic (each chunk's partial tile
 *            written and read, C written) at WORKSPACE_BW, plus
 *            WORKSPACE_MS for the workspace's stream-ordered allocation
 *            and release around the two kernels: a time of its own, not
 *            scaled by c_v, so that c_v carries across shapes where the
 *            workspace is large, small or absent.  (Calibrating, at least
 *            a quarter of a measured time is the blocks' own.)
 * MEMORY_BW is fitted, not the data sheet's: L2 serves part of it.
 * c_v, what one unit costs variant v, is calibrated on v's own measured
 * times: a weighted geometric mean over the tuned problems where v was
 * measured, problem j weighted by exp(-d_j^2 / (2 SIGMA^2)), d_j its
 * distance to the call.  So what v measured near the call decides, and the
 * model carries it across changes of waves, edges and K splits.
 *
 * FIXED_K and SIGMA were chosen by leaving each tuned shape of an H100's
 * make tune out in turn and predicting it from the rest: the predicted
 * winner reached 0.974 (aligned calls) and 0.958 (4-byte variants only) of
 * the measured best as a geometric mean, against 0.938 and 0.937 with the
 * reduction in model units, no fixed cost and SIGMA 0.75.  The memory term
 * was fitted on every variant timed at the 96 shapes of two random suites
 * (bench_matmul_random seeds 4242 and 9001) over that make tune's results:
 * dispatch reached 0.959 and 0.968 of the best there (0.941 and 0.967
 * without it), and 0.970 on the bench's default seed, which took no part
 * in the fit (0.962 without).  DIRECT_CHUNK_K: what the short-K kernels
 * measured on the tuned shapes of K 4, 16 and 64 (4096x4096, 16384x16384)
 * once their memory traffic is taken out, a block's time growing by about
 * 16 steps per chunk beyond its multiply-adds; replaying dispatch offline
 * over the same make tune and every variant timed by bench_matmul_random
 * (default seed) it took the worst shape, 7180x258x58, from 0.76 of the
 * best to 0.98 and the geometric mean from 0.973 to 0.978, with seeds
 * 4242 and 9001 at or above their previous figures (0.958 to 0.961,
 * 0.975); anywhere from 8 to 32 steps gives the same figures within 0.001.
 * FIXED_K is also the warp tiles' launchers' (KT_MATMUL_FIXED_K,
 * kt_matmul_split.h): they choose their K split with it, so a change to it
 * moves their launches and, entering no source hash, wants a fresh tune.
 * SATURATE replaced "half the SM's blocks" when clusters of 8 joined the
 * space (bench/reference/matmul_random/README.md, run 6): replayed offline
 * over that make tune and every variant timed on five seeds (default, 77,
 * 4242, 31337, 2718), dispatch reached 0.965 of the best as a geometric
 * mean against 0.957, and 0.84 and 0.91 at the worst shape of the default
 * seed and seed 4242 against 0.75 and 0.78; "half" had priced a lone 8x8
 * block at two blocks' time, so 64x128 tiles on one block per SM and
 * 8-block clusters looked faster than they are (1661x269x3387 went to
 * 128x64 tiles in clusters of 8 at 0.84 of its best, 7766x159x1018 to
 * 64x128 tiles at 0.78).  128 to 192 gave figures within 0.003.
 * WARPS_BUSY: the few-row and few-column kernels are bound by their reads
 * in flight, so an SM's round costs the same until most of its resident
 * warps are busy.  At half, a lone 4x4 few-column block (32 rows; two fit
 * an SM) counted as keeping its SM busy: on 4096 rows, 128 such blocks,
 * one an SM, tie the 1x4 tile's 512 (8 rows, three fit an SM), so the
 * model took the 4x4 to cost as much per unit as the 1x4 and tied them
 * again on 15720x2x394, where both fill their SMs and the 1x4 ran at 0.81
 * of the 4x4 (H200).  Three quarters took 15720x2x394 and 7648x3x129 to the 4x4
 * and, replayed over the shipped files and every variant timed on run
 * 15's six suites, dispatch from 0.9659 to 0.9708 of the best (H200) and
 * 0.9680 to 0.9715 (H100); over runs 12 and 13's suites, from 0.9683 to
 * 0.9739 and 0.9723 to 0.9748; over the suites of seeds other than the
 * bench's default alone, 0.9653 to 0.9671 and 0.9663 to 0.9685.  Over all
 * the suites 0.625 to 0.875 beat half; the vector-times-matrix kernel,
 * whose warps are not counted as blocks, lost with it (bench/reference/
 * matmul_random/README.md, run 17).
 * STREAM_FIXED_STEPS: a block of the few-row, few-column and
 * vector-times-matrix kernels (a warp, for the first two) ends by adding
 * its partial sums through shared memory and storing them, which costs
 * about what a round of its reads does, where FIXED_K prices it at a
 * quarter of the few-column kernel's step of 128 k: so its variants with
 * all 8 warps along K, each summing a step or two, looked too cheap, and
 * 48x12x9607 went to a split-K warp tile at 0.76 of the few-column
 * kernel in clusters of 4 (H100; now 1.00).  At least half a step:
 * replayed over both GPUs' shipped files and every suite measured with
 * them (bench/reference/matmul_random/README.md, runs 30 and 31),
 * dispatch went from 0.9817 to 0.9835 of the best (H100, run 30's four
 * suites), 0.9777 to 0.9812 (its three held-out ones; seed 123457 from
 * 0.9841 to 0.9912, its worst shape 0.76 to 0.95), 0.9822 to 0.9846
 * (H200, run 31's held-out), the rest within 0.0001; a whole step gained
 * more on the H100's held-out suites (0.9854) and lost 0.0016 on the
 * H200's bands, two steps lost on both GPUs' bands.  It does not reach
 * the N = 1 calls that the few-column kernel serves with 8 warps along K
 * where 2 are faster (9747x1x945, 2391x1x753: 0.79, 0.80, H100).
 * WORKSPACE_MS: without it, calls of a few microseconds went to split-K
 * where a single kernel (or a cluster split) was faster: 7x312x509 (seed
 * 4242) at 0.83 of the best, 363x13x379 (9001) at 0.83, 19x1x9725 (4242)
 * at 0.81.  1 us (1 to 3 us give figures within about 0.002) took them to
 * 1.00, 0.98 and 0.93, and the geometric means of seeds 4242 and 9001 from
 * 0.961 to 0.966 and 0.975 to 0.979 (the older runs of both: 0.966 to
 * 0.974, 0.978 to 0.981, minimum 0.79 to 0.85, 0.84 to 0.89); the default
 * seed lost 0.002 (0.978 to 0.976), where 41x12x9026 went from one split-K
 * twin to the other (64x32 to 32x64 tiles, 0.91 of the best).
 * T_CLUSTER_MS: a warp tile launched in clusters (K split across the
 * cluster's blocks, summed through distributed shared memory) takes about
 * a microsecond more than its unclustered twin where both have almost
 * nothing to do: the median of the 160 differences at the five tuned
 * problems of 16 or 256 rows and columns and K of 4 or 16 is 1.3 us on an
 * H100 and 1.0 on an H200 (the shipped files; clusters of 2, 4 and 8).
 * Unpriced, that time went into the twin's efficiency where it was
 * calibrated, on a large problem mostly, so that on small calls near none
 * a clustered tile looked up to a third cheaper than it is: 2226x127x11,
 * 185x1518x21 and 105x3993x12 went to 64x128 tiles in clusters of 2 at
 * 0.76 to 0.83 of the best (H100).  Replayed over 28 H100 suites (20 of
 * them of seeds measured once, after the rest of the model was set),
 * dispatch went from 0.9790 to 0.9801 of the best on 19 of them and
 * 0.9774 to 0.9785 on the other 9, and on the H200's 9 suites 0.9856 to
 * 0.9861; 1.25 us gave figures within 0.0008.  Applied to the few-row,
 * few-column and vector-times-matrix kernels' clusters as well, where a
 * cluster is how they split K at every size, it gained more on the H100
 * (0.9815) and lost on the H200 (0.9836): left out there
 * (bench/reference/matmul_random/README.md, run 32).
 *
 * Clusters and the SMs: a cluster's blocks share a GPC, so clusters of 4
 * or 8 blocks fill only the SMs of whole groups of 4 or 8 in each GPC (an
 * H100 SXM: 120 of its 132; a probe launching 16 clusters of 8, one block
 * an SM, touched 120 SMs and put two blocks on 8 of them).  A clustered
 * variant's blocks are spread over kt_cluster_sms, which the driver gives
 * for the GPU at hand (kt_device_clusters).  CLUSTER_EXTRA: a block of a
 * clustered warp tile beside another on its SM, which SATURATE counts as
 * free while the SM is not yet busy, costs half a block: the 32x64 tile in
 * clusters of 8 took 1.13 times its 64x32 twin at 513x16x1045 (136 blocks
 * against 72) where it took 0.88 to 0.96 of it at the tuned shapes of 256
 * rows (one block an SM both), and dispatch sent the call to it at 0.89
 * of the best.  Replayed over the 19 H100 suites with every variant timed
 * and the shipped file, the SMs alone took dispatch from 0.9811 to 0.9817
 * of the best, the extra cost alone (on 132 SMs) to 0.9785; together to
 * 0.9830, and from 0.9816 to 0.9834 and 0.9803 to 0.9822 with sessions
 * 57's and 58's fresh tunes; on four suites of seeds measured after it
 * was chosen (58001, 58002), from 0.9830 to 0.9860, their worst random
 * shapes from 0.870 and 0.829 to 0.925 and 0.895.  The extra cost for
 * every warp tile lost on the band of 16 to 100 rows (0.9713 to 0.9633);
 * 0.4 to 0.6 give figures within 0.0005 (bench/reference/matmul_random/
 * README.md, run 58).
 *
 * Row alignment.  The tuner times a problem with ldb = ldc = N, so a tuned
 * N that is not a multiple of 4 measured the variants that serve any
 * alignment on unaligned rows, where the warp tiles of 4-byte copies lose
 * more than the short-K kernel does (bench/reference/matmul_random/
 * README.md, run 3).  A call whose B or C is not float4-aligned therefore
 * calibrates mostly on such problems, an aligned call mostly on the
 * others: the weight of a problem of the other alignment is cut by
 * exp(ALIGN_LOGW), so that it still counts where nothing else is near.
 */
#define T_LAUNCH_MS 0.003         /* one kernel launch */
#define T_CLUSTER_MS 0.001        /* more for a warp tile launched in clusters */
#define WORKSPACE_BW 3.0e9        /* bytes per ms of split-K workspace traffic (an H100's HBM3) */
#define WORKSPACE_MS 0.001        /* split-K's workspace taken from the pool and given back */
#define MEMORY_BW 4.0e9           /* bytes per ms of A, B and C traffic (HBM3 and L2) */
#define B_REREAD_BW 1.0e10        /* bytes per ms of B read again by each row of blocks after the first */
#define FIXED_K KT_MATMUL_FIXED_K /* a block's fixed cost, in K steps of its multiply-adds */
#define SATURATE 160.0            /* warps x outputs per thread that keep an SM busy */
#define CLUSTER_EXTRA 0.5         /* a clustered warp tile's block beside another on its SM, in blocks */
#define WARPS_BUSY 0.75           /* share of its resident warps that keep an SM busy: few-row, few-column kernels */
#define STREAM_FIXED_STEPS 0.5    /* the least fixed cost of a streaming kernel's block, in steps of its reads */
#define DIRECT_CHUNK_K 16.0       /* the short-K kernel's wait for each chunk's panels, in K steps */
#define SIGMA 1.25                /* in natural-log units of each size */
#define ALIGN_LOGW 3.0            /* log-weight lost by a tuned problem of the other row alignment */
#define CACHE_SLOTS 256           /* decisions remembered per context */

/* Staging B for a float4 variant that cannot read it in place (the
 * variant's launcher, templates/matmul_common.cuh): a kernel of its own and
 * a workspace from the pool, K x N floats read and K x N rounded up to 4
 * written.  Never scaled by c_v: the tuner times no staging, so no c_v
 * holds it.  On an H100 this was the measured cost within a microsecond
 * (4 us for a small B, 16 us for 2048 x 2048).
 *
 * Dispatch stages only where K >= STAGE_MIN_K and N > FEW_COLUMNS.  Below
 * that K a float4 kernel's time is its stores of C, which on an unaligned
 * C go out a float at a time, and the model, calibrated on aligned calls,
 * predicted them up to twice too fast (H100, bench_matmul_random seeds
 * default and 77, replayed: 3531x1737x5, 850x8546x3 and 4845x6387x22 went
 * to staged warp tiles at 0.45 to 0.74 of the best, which the short-K
 * kernel was); N <= FEW_COLUMNS is the few-column kernel's corner
 * (8575x7x9574 at 0.59).  Both serve any alignment as they are.  Above
 * them, staging won at 1.07 to 1.30 times the best in-place variant on 6
 * of those 96 shapes, all with M over 1000. */
#define STAGE_MIN_K 32
/* A float4 kernel stores a row of C a float4 at a time only where the row
 * starts 16-byte aligned (store4 in templates/matmul_wt.cu.tpl); on the
 * other rows each lane stores its four columns one float at a time, and a
 * warp's store writes 8 bytes into each of 16 sectors.  The tuner times float4
 * kernels only at rows whose C takes float4 (where B is unaligned only the
 * 4-byte kernels are timed), so their calibration never sees those stores.
 * They bound the kernel's time from below (its multiply-adds go on under
 * them) at C_SCALAR_BW.  Measured on an H100 at short K,
 * where the stores are all the time (bench/reference/matmul_random, runs
 * 18-20, best float4 variant of each shape): 0.3 to 0.7e9 bytes per ms for
 * the 128x256 and 128x128 tiles, 1.0 to 1.3e9 for the 4x4 thread tiles.
 * Without the bound, 2882x1145x35 (ldc odd) went to a 128x256 float4 tile
 * predicted at 0.0175 ms that took 0.037, twice the 4-byte tiles' 0.018
 * (held-out seed 123457, H100 and H200).  The warp tiles of epi 1 pass such
 * rows through shared memory and store them whole (write_rows in the
 * template), at about the aligned rows' speed: they are not bound. */
#define C_SCALAR_BW 0.6e9 /* bytes per ms of C stored a float at a time */

/* Of every 4 rows r of C (at C + r ldc; the pattern repeats), how many
 * start 16-byte unaligned: 0 to 4. */
static int scalar_rows_of_4(const void *C, long long ldc)
{
  const long long first = (long long)(((uintptr_t)C >> 2) & 3u); /* C's float offset from 16 bytes */
  int unaligned = 0;
  for (long long r = 0; r < 4; ++r)
    unaligned += (first + r * (ldc % 4)) % 4 != 0;
  return unaligned;
}

static double stage_ms(long long N, long long K)
{
  return T_LAUNCH_MS + WORKSPACE_MS + (double)K * (double)(N + kt_matmul_stage_ld(N)) * 4.0 / WORKSPACE_BW;
}

typedef struct geom {
  int bm, bn, bk, split, cl, bps;
  int sms;          /* SMs its blocks spread over: fewer where its clusters cannot fill a GPC (kt_cluster_sms) */
  int unpipelined;  /* the short-K and the Guide's tiled kernels: exact K, a wait per chunk */
  int streaming;    /* the few-row and few-column kernels: a chunk's real K */
  int in_wave;      /* splits K within one wave (kt_matmul_splits_in_wave) */
  int whole_rows;   /* a warp tile that stores unaligned rows of C whole (epi 1): no C_SCALAR_BW bound */
  double sat;       /* blocks that keep an SM busy (see SATURATE) */
  double extra;     /* what each block after an SM's first in a round adds (CLUSTER_EXTRA) */
  double launch_ms; /* the launch's fixed time beyond T_LAUNCH_MS: T_CLUSTER_MS for a clustered warp tile */
} geom;

/* A kernel's geometry in the model's terms.  The few-row kernel's tile
 * is TM x 32 TN, and its K chunks are one per warp of every block of a
 * cluster (a warp's chunk counts as a block); the few-column kernel's
 * tile is (8 / KW) TM x TN rows x columns, K split over its KW warps along
 * K (counted as blocks) and its cluster.  The matrix-times-vector kernel
 * is priced as a few-column one whose lanes read 4 k at a time: its warps
 * along K take turns rather than chunks, but each sums a KW-th of K.  The
 * vector-times-matrix kernel's tile is 1 x 32 TN and a step the 8 KI rows
 * its warps read at once; it splits K through a cluster, or through a
 * workspace as the warp tiles do but within one wave.
 *
 * Blocks an SM holds: as compiled, on d (kt_resident_blocks), which is
 * also what the warp tiles' launchers split K by (they ask the device);
 * the space's estimate only where this build has no ptxas count.  That
 * estimate was off by up to a factor of two: it took the few-column 1x16
 * tile for 184 registers a thread, one block an SM, where ptxas gave it
 * 118, two blocks, so the model priced its cluster-of-4 twin, whose 164
 * blocks then needed two rounds, above the unclustered one and sent
 * 41x12x9026 to the latter at 0.75 of the former (H100).  Replayed over
 * the shipped files and every variant timed on run 15's six suites,
 * dispatch went from 0.9715 to 0.9748 of the best (H100) and 0.9707 to
 * 0.9778 (H200); on run 13's, 0.9748 to 0.9760 (H100) and 0.9744 to
 * 0.9757 (H200); on run 12's, 0.9735 to 0.9748 (H200)
 * (bench/reference/matmul_random/README.md, run 19). */
static geom geometry(const kt_variant *v, const kt_device_info *d)
{
  geom g;
  const int bs = kt_variant_param_int(v, "bs", 0); /* the Guide's square tiles */
  g.bm = kt_variant_param_int(v, "bm", bs);
  g.bn = kt_variant_param_int(v, "bn", bs);
  g.bk = kt_variant_param_int(v, "bk", bs);
  g.split = kt_variant_param_int(v, "split", 1);
  g.cl = v->cluster;
  g.sms = kt_cluster_sms(d, v->cluster);
  if (g.sms < 1)
    g.sms = 1;
  g.bps = kt_resident_blocks(v, d);
  if (g.bps < 1)
    g.bps = 1;
  g.unpipelined = strcmp(v->algo, "direct") == 0 || strcmp(v->algo, "tiled") == 0;
  g.streaming = g.in_wave = 0;
  g.whole_rows = kt_variant_param_int(v, "epi", 0) == 1;
  const int clustered_tile = v->cluster > 1 && strcmp(v->algo, "wt") == 0;
  g.launch_ms = clustered_tile ? T_CLUSTER_MS : 0.0;
  g.extra = clustered_tile ? CLUSTER_EXTRA : 0.0;
  double busy_share = 0.5; /* of the SM's blocks that keep it busy, where not a warp tile (below) */
  if (strcmp(v->algo, "skinny") == 0) {
    const int warps = v->threads / 32;
    g.bm = tile_dim(v, 0), g.bn = 32 * tile_dim(v, 1), g.bk = 32;
    g.cl = v->cluster * warps, g.bps *= warps;
    g.streaming = 1, busy_share = WARPS_BUSY;
  } else if (strcmp(v->algo, "gemv") == 0 || strcmp(v->algo, "matvec") == 0) {
    const int kw = kt_variant_param_int(v, "kwarps", 1), vec = strcmp(v->algo, "matvec") == 0 ? 4 : 1;
    g.bm = kw > 0 ? v->threads / 32 / kw * tile_dim(v, 0) : 0;
    g.bn = tile_dim(v, 1), g.bk = 32 * vec * kt_variant_param_int(v, "depth", 4);
    g.cl = v->cluster * kw, g.bps *= kw;
    g.streaming = 1, busy_share = WARPS_BUSY;
  } else if (strcmp(v->algo, "vecmat") == 0) {
    g.bm = tile_dim(v, 0), g.bn = 32 * tile_dim(v, 1);
    g.bk = v->threads / 32 * kt_variant_param_int(v, "depth", 8);
    g.streaming = g.in_wave = 1;
  }
  if (g.bm <= 0 || g.bn <= 0 || g.bk <= 0 || v->threads < 32) {
    g.bm = g.bn = g.bk = 0, g.sat = 0; /* unknown: never predicted */
    return g;
  }
  /* Warp tiles: by their multiply-adds in flight.  The others (the Guide's
   * one output per thread, the short-K kernel's wait for each chunk, the
   * few-row and few-column kernels' warps counted as blocks here) wait on
   * memory more than on their multiply-adds: half the SM's blocks, and
   * WARPS_BUSY of them for the kernels whose warps are counted as blocks. */
  const double outputs = (double)g.bm * g.bn / v->threads; /* per thread */
  g.sat = strcmp(v->algo, "wt") == 0 ? fmin((double)g.bps, SATURATE / (v->threads / 32 * outputs)) : busy_share * g.bps;
  return g;
}

/* Model units of g at m x n x k on sm SMs; its launches, and the time in
 * ms of its memory traffic and split-K reduction. */
static double units(const geom *g, double m, double n, double k, int sm, int *launches, double *traffic_ms)
{
  const long long M = (long long)m, N = (long long)n, K = (long long)k;
  const long long tile_rows = (M + g->bm - 1) / g->bm, tiles = tile_rows * ((N + g->bn - 1) / g->bn);
  long long chunk = (K + g->bk - 1) / g->bk * g->bk, splits = 1;
  if (g->split > 1)
    splits = g->in_wave
                 ? kt_matmul_splits_in_wave(M, N, K, g->bm, g->bn, g->bk, g->split, (long long)sm * g->bps, &chunk)
                 : kt_matmul_splits_balanced(M, N, K, g->bm, g->bn, g->bk, g->split, sm, g->bps, &chunk);
  else if (g->cl > 1) {
    splits = g->cl;
    chunk = ((K + g->bk - 1) / g->bk + g->cl - 1) / g->cl * g->bk;
  }
  /* K steps a block spends, before its fixed cost: the padded chunk of a
   * kernel that multiplies whole slices; where reads past K are skipped
   * and the time is the reads', the busiest chunk's own K, but at least
   * one step (a round trip to memory) */
  const long long own = chunk < K ? chunk : K;
  const double steps = g->unpipelined ? (double)K + DIRECT_CHUNK_K * (double)((K + g->bk - 1) / g->bk)
                       : g->streaming ? (double)(own > g->bk ? own : g->bk)
                                      : (double)chunk;
  const double blocks = (double)tiles * (double)splits;
  /* Blocks on the busiest SM: whole blocks, except for the streaming
   * kernels, whose blocks share the GPU's reads (see above). */
  const double q = g->streaming ? blocks / g->sms : ceil(blocks / g->sms), rounds = ceil(q / g->bps);
  const double busy = fmax(q, g->sat * rounds + g->extra * (q - rounds));
  const double fixed = g->streaming ? fmax(FIXED_K, STREAM_FIXED_STEPS * g->bk) : FIXED_K;
  const double u = busy * (double)g->bm * g->bn * (steps + fixed);
  *launches = 1;
  *traffic_ms = (m * n + m * k + k * n) * 4.0 / MEMORY_BW + (double)(tile_rows - 1) * k * n * 4.0 / B_REREAD_BW;
  if (splits > 1 && g->split > 1) {
    *traffic_ms += (2.0 * (double)splits + 1.0) * (double)M * (double)N * 4.0 / WORKSPACE_BW + WORKSPACE_MS;
    *launches = 2;
  }
  return u;
}

typedef struct model {
  int nprob, nvar, sm;
  const kt_tuned *prob;
  double (*lshape)[3];
  const kt_variant **var;
  geom *g;
  double *eff; /* [nvar][nprob]: ln c_v from problem j; NAN if v was not measured there */
  struct {
    uint64_t key; /* 0 = empty */
    int variant;  /* registry index */
  } cache[CACHE_SLOTS];
} model;

static void model_release(void *state)
{
  model *m = state;
  if (!m)
    return;
  free(m->lshape);
  free(m->var);
  free(m->g);
  free(m->eff);
  free(m);
}

static void *model_build(const kt_tuned *t, int n, const kt_device_info *d)
{
  if (n <= 0)
    return NULL;
  model *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->nprob = n;
  m->prob = t;
  m->sm = d->sm_count > 0 ? d->sm_count : 1;
  m->lshape = calloc((size_t)n, sizeof *m->lshape);
  m->var = calloc((size_t)kt_registry_count, sizeof *m->var);
  m->g = calloc((size_t)kt_registry_count, sizeof *m->g);
  m->eff = malloc(sizeof *m->eff * (size_t)n * (size_t)kt_registry_count);
  if (!m->lshape || !m->var || !m->g || !m->eff) {
    model_release(m);
    return NULL;
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < 3; ++i)
      m->lshape[j][i] = t[j].log_shape[i];
  for (int i = 0; i < n * kt_registry_count; ++i)
    m->eff[i] = NAN;
  for (int j = 0; j < n; ++j)
    for (int r = 0; r < t[j].count; ++r) {
      const kt_variant *v = t[j].ranked[r];
      int x = 0;
      while (x < m->nvar && m->var[x] != v)
        ++x;
      if (x == m->nvar) {
        const geom g = geometry(v, d);
        if (g.bm == 0)
          continue;
        m->var[m->nvar] = v;
        m->g[m->nvar++] = g;
      }
      int launches;
      double traffic;
      const kt_problem *p = &t[j].problem;
      const double u = units(&m->g[x], (double)p->m, (double)p->n, (double)p->k, m->sm, &launches, &traffic);
      const double busy = fmax(t[j].ms[r] - launches * T_LAUNCH_MS - m->g[x].launch_ms - traffic, 0.25 * t[j].ms[r]);
      m->eff[(size_t)x * n + j] = log(busy / u);
    }
  return m;
}

static uint64_t cache_key(long long M, long long N, long long K, int align_class)
{
  uint64_t h = 1469598103934665603ull;
  const uint64_t x[4] = {(uint64_t)M, (uint64_t)N, (uint64_t)K, (uint64_t)align_class};
  for (int i = 0; i < 4; ++i)
    h = (h ^ x[i]) * 1099511628211ull;
  return h | 1; /* never 0, the empty key */
}

/* The best predictions, for on-line tuning: up to n variants (registry
 * indices, fastest first) with their predicted times, and the best of
 * each kernel kind (the variants' algo: warp tiles, few-column, ...). */
#define RACE_KINDS 8
typedef struct top_list {
  int n, count, kinds;
  int variant[KT_RACE_MAX];
  double ms[KT_RACE_MAX];
  const char *kind[RACE_KINDS];
  int kind_variant[RACE_KINDS];
  double kind_ms[RACE_KINDS];
} top_list;

static void top_add(top_list *t, const kt_variant *v, double ms)
{
  const int variant = (int)(v - kt_registry);
  int k = 0;
  while (k < t->kinds && strcmp(t->kind[k], v->algo) != 0)
    ++k;
  if (k == t->kinds && k < RACE_KINDS)
    t->kind[t->kinds++] = v->algo, t->kind_ms[k] = INFINITY;
  if (k < t->kinds && ms < t->kind_ms[k])
    t->kind_variant[k] = variant, t->kind_ms[k] = ms;
  if (t->n <= 0 || (t->count == t->n && !(ms < t->ms[t->n - 1])))
    return; /* not among the n best: ties keep the earlier */
  int i = t->count < t->n ? t->count++ : t->n - 1;
  for (; i > 0 && ms < t->ms[i - 1]; --i)
    t->variant[i] = t->variant[i - 1], t->ms[i] = t->ms[i - 1];
  t->variant[i] = variant, t->ms[i] = ms;
}

/* The predicted best variant that serves the call, B staged where a
 * variant must (priced by stage_ms), C's stores bound by its scalar_rows
 * of every 4 (scalar_rows_of_4), or NULL; out gets why, top (when not
 * NULL) the best predictions. */
static const kt_variant *predict(const model *m, const kt_device_info *d, long long M, long long N, long long K,
                                 int wide, int scalar_rows, const matmul_call *call, kt_choice *out, top_list *top)
{
  /* Each tuned problem's weight, exp(lw - lwmax), over every problem the
   * database holds (a user's tunes add the shapes it called); on the
   * stack up to 256 of them. */
  double stack_w[256];
  const int np = m->nprob;
  double *w = np <= (int)(sizeof stack_w / sizeof stack_w[0]) ? stack_w : malloc(sizeof *w * (size_t)np);
  if (!w)
    return NULL; /* the nearest tuned problem's ranking serves */
  double lwmax = -INFINITY;
  const double lm = ln_pos(M), ln = ln_pos(N), lk = ln_pos(K);
  int near = 0;
  for (int j = 0; j < np; ++j) {
    const double dd = sq(lm - m->lshape[j][0]) + sq(ln - m->lshape[j][1]) + sq(lk - m->lshape[j][2]);
    w[j] = -dd / (2 * SIGMA * SIGMA);
    if ((m->prob[j].problem.n % 4 != 0) == wide) /* a tuned row alignment unlike the call's */
      w[j] -= ALIGN_LOGW;
    if (w[j] > lwmax) {
      lwmax = w[j];
      near = j;
    }
  }
  for (int j = 0; j < np; ++j)
    w[j] = exp(w[j] - lwmax);
  const kt_variant *best = NULL, *second = NULL;
  double best_ms = INFINITY, second_ms = INFINITY;
  const double staging = stage_ms(N, K);
  const int may_stage = K >= STAGE_MIN_K && N > FEW_COLUMNS;
  double best_stage = 0;
  const double c_scalar = scalar_rows / 4.0 * (double)M * (double)N * 4.0 / C_SCALAR_BW;
  for (int x = 0; x < m->nvar; ++x) {
    const int staged = kt_matmul_stages(m->var[x], call->B, call->ldb);
    if (staged ? !may_stage || !serves_call_staged(m->var[x], d, call) : !serves_call(m->var[x], d, call))
      continue;
    const double stage = staged ? staging : 0.0;
    double num = 0, den = 0;
    for (int j = 0; j < np; ++j) {
      const double e = m->eff[(size_t)x * m->nprob + j];
      if (e != e) /* NAN: not measured there */
        continue;
      num += w[j] * e;
      den += w[j];
    }
    if (!(den > 1e-12))
      continue;
    int launches;
    double traffic;
    const double u = units(&m->g[x], (double)M, (double)N, (double)K, m->sm, &launches, &traffic);
    /* A split through a workspace writes C in its reduction, a float per
     * lane in coalesced rows, and a warp tile of epi 1 passes unaligned
     * rows through shared memory: only a float4 kernel that stores C a
     * float at a time itself is bound. */
    const double c_bound = m->var[x]->align > 1 && launches == 1 && !m->g[x].whole_rows ? c_scalar : 0.0;
    const double pred =
        launches * T_LAUNCH_MS + m->g[x].launch_ms + traffic + fmax(exp(num / den) * u, c_bound) + stage;
    if (top)
      top_add(top, m->var[x], pred);
    if (pred < best_ms) {
      second = best, second_ms = best_ms;
      best = m->var[x], best_ms = pred, best_stage = stage;
    } else if (pred < second_ms) {
      second = m->var[x], second_ms = pred;
    }
  }
  if (best && out) {
    char why[256];
    int k = snprintf(why, sizeof why, "predicted %.4g ms by the cost model, calibrated nearest %s", best_ms,
                     m->prob[near].key);
    if (best_stage > 0 && k > 0 && (size_t)k < sizeof why)
      k += snprintf(why + k, sizeof why - (size_t)k, "; B staged into an aligned copy first (%.3g ms of it)",
                    best_stage);
    const int cluster_sms = kt_cluster_sms(d, best->cluster);
    if (cluster_sms < d->sm_count && k > 0 && (size_t)k < sizeof why)
      k += snprintf(why + k, sizeof why - (size_t)k, "; its clusters of %d on %d of the %d SMs", best->cluster,
                    cluster_sms, d->sm_count);
    if (second && k > 0 && (size_t)k < sizeof why)
      snprintf(why + k, sizeof why - (size_t)k, "; next %s at %.4g ms", second->name, second_ms);
    kt_dispatch_fill_choice(out, best, &m->prob[near], why);
  }
  if (w != stack_w)
    free(w);
  return best;
}

static void note_miss(const kt_context *c, const kt_tuned *t, long long M, long long N, long long K)
{
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = KT_FAMILY_MATMUL;
  p.m = M, p.n = N, p.k = K;
  kt_context_miss(c, t, &p);
}

/* On-line tuning races the candidates predicted within this factor of the
 * model's best time: its pick, the best of each other kernel kind, then
 * its next best picks, kt_online's count in all.  The model's errors are
 * shared within a kind (its variants are calibrated on the same tuned
 * problems), so a race across kinds hedges them.  Replayed over the H100's
 * thirteen suites of every variant timed (`replay_dispatch --race 4`,
 * runs 36 and 37 in bench/reference/matmul_random/README.md), the fastest
 * of four such candidates reaches 0.995 of the oracle (geometric mean)
 * where the model's pick reaches 0.981, and the suites' worst shapes rise
 * from 0.79-0.94 to 0.85-0.97; the four best predictions alone give the
 * same mean but leave the few-column kernel out where the model ranks it
 * tenth (2x17x14071, 48x12x9607 at 0.84-0.87).  Leaving out candidates
 * predicted over 1.25x the first loses nothing. */
#define RACE_MARGIN 1.25

/* The race's candidates from the model's predictions (see RACE_MARGIN),
 * at most n; their count. */
static int race_candidates(const top_list *t, int n, int *variant, double *ms)
{
  if (t->count == 0 || n < 1)
    return 0;
  int c = 0;
  variant[c] = t->variant[0], ms[c++] = t->ms[0];
  const double limit = RACE_MARGIN * t->ms[0];
  int taken[RACE_KINDS] = {0};
  for (int k = 0; k < t->kinds; ++k)
    taken[k] = strcmp(t->kind[k], kt_registry[t->variant[0]].algo) == 0;
  while (c < n) { /* the other kinds' bests, fastest first */
    int best = -1;
    for (int k = 0; k < t->kinds; ++k)
      if (!taken[k] && t->kind_ms[k] <= limit && (best < 0 || t->kind_ms[k] < t->kind_ms[best]))
        best = k;
    if (best < 0)
      break;
    taken[best] = 1;
    variant[c] = t->kind_variant[best], ms[c++] = t->kind_ms[best];
  }
  for (int i = 1; i < t->count && c < n && t->ms[i] <= limit; ++i) {
    int dup = 0;
    for (int j = 0; j < c; ++j)
      dup |= variant[j] == t->variant[i];
    if (!dup)
      variant[c] = t->variant[i], ms[c++] = t->ms[i];
  }
  return c;
}

/* The race's pick for a call the model decides (kt_race_begin), its race
 * started from the model's best predictions if it has none (*started set);
 * NULL where there is no race to join (the table is full, or no
 * prediction), and the model decides alone. */
static const kt_variant *race_pick(kt_race *r, const model *m, const kt_device_info *d, long long M, long long N,
                                   long long K, int wide, int scalar_rows, const matmul_call *call, uint64_t key,
                                   kt_race_pick *p, int *started)
{
  int st = kt_race_begin(r, key, p);
  if (st == KT_RACE_UNKNOWN) {
    *started = 1;
    top_list top = {.n = kt_race_candidates(r)};
    int variant[KT_RACE_MAX];
    double ms[KT_RACE_MAX];
    if (!predict(m, d, M, N, K, wide, scalar_rows, call, NULL, &top))
      return NULL;
    st = kt_race_add(r, key, race_candidates(&top, top.n, variant, ms), variant, ms, p);
  }
  if (st != KT_RACE_RACING && st != KT_RACE_DECIDED)
    return NULL;
  const kt_variant *v = p->variant >= 0 && p->variant < kt_registry_count ? &kt_registry[p->variant] : NULL;
  if (!v || !serves_call_staged(v, d, call)) { /* not for this call after all: its sample is lost */
    kt_race_end(r, p, 0);
    memset(p, 0, sizeof *p);
    p->slot = -1;
    return NULL;
  }
  return v;
}

/* kt_matmul_choice's account of a race under way or decided. */
static const kt_variant *race_report(const kt_race_pick *p, const kt_tuned *t, kt_choice *out)
{
  const int i = p->decided ? p->variant : p->first;
  if (i < 0 || i >= kt_registry_count)
    return NULL;
  char why[sizeof out->reason];
  if (p->n == 1)
    snprintf(why, sizeof why,
             "on-line: no race, no other candidate predicted within %.2fx of the model's pick (%.4g ms)", RACE_MARGIN,
             p->first_predicted);
  else if (p->decided && p->ms < INFINITY)
    snprintf(why, sizeof why,
             "on-line: the fastest of %d candidates timed here (%.4g ms; predicted %.4g ms); the model's pick %s", p->n,
             p->ms, p->predicted, kt_registry[p->first].name);
  else if (p->decided)
    snprintf(why, sizeof why, "on-line: no candidate could be timed; the model's pick (%.4g ms)", p->first_predicted);
  else
    snprintf(why, sizeof why,
             "on-line: racing %d candidates, run in turn (%d of %d times taken); named: the model's pick (%.4g ms)",
             p->n, p->samples, p->n * KT_RACE_SAMPLES, p->first_predicted);
  kt_dispatch_fill_choice(out, &kt_registry[i], t, why);
  return &kt_registry[i];
}

/* At a tuned shape t, what was measured there is the answer, where the
 * measured variants read this B as they were timed: in place, or the
 * shape's rows were unaligned (only variants that read any B were timed).
 * A B that float4 variants would stage is left to the model, which prices
 * the staging. */
static int measured_here(const kt_tuned *t, long long M, long long N, long long K, int in_place)
{
  return t && t->problem.m == M && t->problem.n == N && t->problem.k == K && (in_place || t->problem.n % 4 != 0);
}

/* The variant for a call; with pick (kt_matmul, on-line tuning on and the
 * stream not being captured), a race may choose it, and pick says how to
 * time it. */
static const kt_variant *choose(const kt_context *c, long long M, long long N, long long K, const matmul_call *call,
                                kt_choice *out, kt_stream stream, kt_race_pick *pick)
{
  int nt = 0;
  const kt_tuned *tuned = kt_context_tuned(c, KT_FAMILY_MATMUL, &nt);
  const kt_device_info *d = kt_context_device(c);
  model *m = nt > 0 ? kt_context_state(c, KT_FAMILY_MATMUL) : NULL;
  /* The model's decisions depend on the shape, on whether float4 variants
   * read B in place, on the rows' alignment (which tuned problems
   * calibrate), on how many of C's rows take float4 stores and on whether B
   * is one contiguous column (dispatch_serves_shape); they are remembered
   * per context (relaxed atomics: a lost or torn slot only costs a
   * prediction, and a hit is checked against serves_call_staged()).  Looked
   * up first: a call the model decided once skips the search for its
   * nearest tuned problem (the model is built for one set of them, and a
   * shape it decided is no tuned shape of that set). */
  const int in_place = kt_matmul_b_in_place(call->B, call->ldb);
  const int wide = in_place && kt_matmul_b_in_place(call->C, call->ldc); /* C as float4 rows too */
  const int scalar_rows = scalar_rows_of_4(call->C, call->ldc);
  const uint64_t key = cache_key(M, N, K, wide | in_place << 1 | (call->ldb == 1) << 2 | scalar_rows << 3);
  const int slot = (int)(key >> 56) % CACHE_SLOTS;
  if (m && !out && __atomic_load_n(&m->cache[slot].key, __ATOMIC_ACQUIRE) == key) {
    const int i = __atomic_load_n(&m->cache[slot].variant, __ATOMIC_RELAXED);
    if (__atomic_load_n(&m->cache[slot].key, __ATOMIC_ACQUIRE) == key && i >= 0 && i < kt_registry_count &&
        serves_call_staged(&kt_registry[i], d, call))
      return &kt_registry[i];
  }
  const kt_tuned *t = kt_matmul_nearest(tuned, nt, M, N, K);
  if (measured_here(t, M, N, K, in_place))
    return kt_dispatch_choose(d, KT_FAMILY_MATMUL, t, serves_call, call, out);
  if (!t || !m) {
    note_miss(c, t, M, N, K);
    return kt_dispatch_choose(d, KT_FAMILY_MATMUL, t, serves_call, call, out);
  }
  /* The shape has no tuned entry: the model decides, and its decision is
   * remembered; with on-line tuning on, the shape's race decides (race_pick)
   * and only its winner is remembered.  A call being captured into a graph
   * is not raced: it takes a decided winner, else the model's pick for
   * itself alone, so that the calls after the capture still race; so does
   * a query (kt_matmul_choice, no pick), which launches nothing.  Misses
   * are noted where the model decides or a race starts (once a shape, as
   * without racing). */
  kt_race *r = kt_context_race(c);
  const kt_variant *v = NULL;
  kt_race_pick p;
  int remember = !r || pick, started = 0;
  if (r && out && kt_race_peek(r, key, &p) != KT_RACE_UNKNOWN && (v = race_report(&p, t, out)))
    return v;
  if (r && pick) {
    if (kt_context_may_time(c, stream)) {
      v = race_pick(r, m, d, M, N, K, wide, scalar_rows, call, key, pick, &started);
      if (started)
        note_miss(c, t, M, N, K);
      if (v && !pick->decided)
        return v;
    } else if (kt_race_peek(r, key, &p) == KT_RACE_DECIDED && p.variant >= 0 && p.variant < kt_registry_count &&
               serves_call_staged(&kt_registry[p.variant], d, call))
      v = &kt_registry[p.variant];
    else
      remember = 0;
  }
  if (!v) {
    if (!started)
      note_miss(c, t, M, N, K);
    v = predict(m, d, M, N, K, wide, scalar_rows, call, out, NULL);
  }
  if (!v)
    return kt_dispatch_choose(d, KT_FAMILY_MATMUL, t, serves_call, call, out);
  if (!remember)
    return v;
  __atomic_store_n(&m->cache[slot].key, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&m->cache[slot].variant, (int)(v - kt_registry), __ATOMIC_RELAXED);
  __atomic_store_n(&m->cache[slot].key, key, __ATOMIC_RELEASE);
  return v;
}

int kt_matmul_race_candidates(const kt_context *c, long long M, long long N, long long K, const void *B, long long ldb,
                              const void *C, long long ldc, int n, int *variant)
{
  int nt = 0;
  const kt_tuned *tuned = kt_context_tuned(c, KT_FAMILY_MATMUL, &nt);
  const model *m = nt > 0 ? kt_context_state(c, KT_FAMILY_MATMUL) : NULL;
  const kt_tuned *t = kt_matmul_nearest(tuned, nt, M, N, K);
  const matmul_call call = {B, C, ldb, ldc, M, N, K};
  const int in_place = kt_matmul_b_in_place(B, ldb);
  if (!m || !t || n < 1 || measured_here(t, M, N, K, in_place))
    return 0; /* as choose(): the model does not decide this call */
  top_list top = {.n = n < KT_RACE_MAX ? n : KT_RACE_MAX};
  double ms[KT_RACE_MAX];
  if (!predict(m, kt_context_device(c), M, N, K, in_place && kt_matmul_b_in_place(C, ldc), scalar_rows_of_4(C, ldc),
               &call, NULL, &top))
    return 0;
  return race_candidates(&top, top.n, variant, ms);
}

/* ---- the API ------------------------------------------------------------ */

/* Elements spanned by rows x cols with row stride ld fit in a byte count. */
static int span_ok(long long rows, long long cols, long long ld)
{
  long long e;
  if (__builtin_mul_overflow(rows - 1, ld, &e) || __builtin_add_overflow(e, cols, &e))
    return 0;
  return e <= (LLONG_MAX / 4);
}

static int check(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                 const float *C, int64_t ldc)
{
  if (!A || !B || !C)
    return KT_ERR_NULL_POINTER;
  if (M < 0 || N < 0 || K < 0)
    return KT_ERR_BAD_SIZE;
  if (lda < K || ldb < N || ldc < N)
    return KT_ERR_BAD_LD;
  /* The kernels index rows with 64 bits but step through M, N and K in
   * 32-bit ints that may run a tile (at most 256) past the end: larger
   * sizes are refused, never computed wrongly. */
  if (M > KT_MATMUL_MAX_DIM || N > KT_MATMUL_MAX_DIM || K > KT_MATMUL_MAX_DIM || !span_ok(M, K, lda) ||
      !span_ok(K, N, ldb) || !span_ok(M, N, ldc))
    return KT_ERR_OVERFLOW;
  if (((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) & 3u)
    return KT_ERR_MISALIGNED;
  return KT_OK;
}

int kt_matmul_choice(kt_context *c, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                     int64_t ldb, const float *C, int64_t ldc, kt_choice *out)
{
  int rc = kt_context_check(c);
  if (out)
    memset(out, 0, sizeof *out); /* empty strings where the call is refused */
  else if (rc == KT_OK)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = check(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK)
    return rc;
  if (M == 0 || N == 0 || K == 0) {
    kt_empty_choice(M == 0 || N == 0, out);
    return KT_OK;
  }
  const matmul_call call = {B, C, ldb, ldc, M, N, K};
  return choose(c, M, N, K, &call, out, NULL, NULL) ? KT_OK : KT_ERR_NO_VARIANT;
}

void kt_empty_choice(int no_c, kt_choice *out)
{
  memset(out, 0, sizeof *out);
  snprintf(out->reason, sizeof out->reason, "%s",
           no_c ? "M = 0 or N = 0: C has no elements; nothing runs"
                : "K = 0 or alpha = 0: no product to add; C = beta C, by the runtime's own kernel");
}

int kt_scale_c(const kt_context *c, int64_t M, int64_t N, float beta, float *C, int64_t ldc, int64_t batch,
               int64_t stride_c, kt_stream stream)
{
  const kt_scale_args a = {C, M, N, ldc, batch, stride_c, beta};
  return kt_context_run(c, "scale", kt_scale_f32, &a, stream);
}

int kt_matmul(kt_context *c, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc, kt_stream stream)
{
  int rc = kt_context_check(c);
  if (rc == KT_OK)
    rc = check(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK || M == 0 || N == 0) /* as BLAS: an empty C, nothing read or written */
    return rc;
  if (!kt_context_device_pointer(c, A) || !kt_context_device_pointer(c, B) || !kt_context_device_pointer(c, C))
    return KT_ERR_NOT_DEVICE_POINTER;
  if (K == 0 || alpha == 0.0f) /* as BLAS: nothing to add, and A and B not read */
    return kt_scale_c(c, M, N, beta, C, ldc, 1, 0, stream);
  const matmul_call call = {B, C, ldb, ldc, M, N, K};
  kt_race_pick pick = {.slot = -1};
  const kt_variant *v = choose(c, M, N, K, &call, NULL, stream, &pick);
  if (!v)
    return KT_ERR_NO_VARIANT;
  const kt_device_info *d = kt_context_device(c);
  kt_matmul_args a = {(int)M, (int)N, (int)K, alpha, beta, A, B, C, lda, ldb, ldc, d->sm_count, kt_context_pool(c)};
  rc = kt_context_launch_raced(c, v, &a, stream, &pick); /* untimed where pick holds no slot */
  /* A race's candidate (or winner) that fails to launch where the model's
   * pick might have run (a cluster the GPU's slice cannot place, a split-K
   * workspace that the GPU's memory cannot hold): with
   * beta 0 the model's pick runs instead, C being written whole whatever
   * the failed launch left in it (a launcher that stages B a panel at a
   * time writes C before its last launch); else the call fails, as any
   * failed launch does. */
  if ((rc == KT_ERR_LAUNCH || rc == KT_ERR_DEVICE_MEMORY) && beta == 0.0f && pick.n > 0 && pick.first >= 0 &&
      pick.first < kt_registry_count && &kt_registry[pick.first] != v &&
      serves_call_staged(&kt_registry[pick.first], d, &call))
    rc = kt_context_launch(c, &kt_registry[pick.first], &a, stream);
  return rc;
}
