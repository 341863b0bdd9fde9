/* SPDX-License-Identifier: MIT */
/* runtime/kt_matmul_split.h: how many chunks a warp-tiled matmul kernel
 * splits K into, shared by its launcher (templates/matmul_wt.cu.tpl) and
 * dispatch's cost model (runtime/matmul.c), so that the model predicts the
 * launch that runs.  Kept out of kt_variant.h, which every kernel
 * includes, since only these two use it.  Like kt_variant.h it enters no
 * variant's source hash (ktgen hashes the templates' .cuh includes only):
 * a change here keeps what was measured, so tune again after one. */
#ifndef KT_MATMUL_SPLIT_H
#define KT_MATMUL_SPLIT_H

#include "kt_variant.h"

/* The split a warp-tiled kernel launches with: of 1 to kt_matmul_splits'
 * chunks (as many as fill KT_MATMUL_SPLIT_WAVES waves of resident blocks,
 * SPLIT at most, each at least KT_MATMUL_SPLIT_MIN_CHUNK_K deep, within
 * KT_MATMUL_MAX_WORKSPACE), the count that finishes first, its cost
 * counted in an SM's multiply-adds:
 * - the busiest SM's blocks: with tiles x chunks blocks over `sm` SMs, the
 *   busiest holds q = ceil(tiles x chunks / sm), `per_sm` resident at a
 *   time, in rounds = ceil(q / per_sm).  Its full rounds keep it busy; its
 *   last round, with fewer blocks beside each other than fit, waits on
 *   memory for at least KT_MATMUL_SPLIT_BUSY x per_sm blocks' time: busy
 *   for max(q, per_sm x (rounds - 1 + KT_MATMUL_SPLIT_BUSY)) blocks, each
 *   BM x BN x (its chunk's K + KT_MATMUL_FIXED_K);
 * - with more than one chunk, the workspace: each chunk's partial tile
 *   written and read and C written, (2 chunks + 1) x M x N floats shared
 *   by the SMs (the count of the cost model's reduction term; the one
 *   chunk's own C write is not counted, a slight lean towards fewer
 *   chunks), each float worth KT_MATMUL_SPLIT_FLOAT multiply-adds, and the
 *   reduction's launch, KT_MATMUL_SPLIT_LAUNCH.
 * Ties go to fewer chunks.  Measured (H100, every count from 1 to 16
 * forced at seven long-K shapes; bench/reference/matmul_random/README.md,
 * run 22):
 * - filling the wave alone overshot where the tiles were few and large (36
 *   tiles of 128 x 128, 2 resident, in 4 chunks put two blocks on 12 of
 *   132 SMs, which then took twice as long as the rest) and where a short
 *   K made the workspace dear (16363x60x417 on 32 x 64 tiles: one chunk
 *   1.28 times as fast as two; a float at 32 multiply-adds still chose two);
 * - a cap of one wave, with the busy floor over all rounds together, cut
 *   294x8276x13102's 64 x 128 tiles (4 resident) to 2 chunks, 1.76 ms,
 *   where 8 take 1.45: more chunks than one wave holds pay where the
 *   blocks are small, and only the last round runs short of blocks;
 * - a lone block counted as busy (the cost model's SATURATE) cut 64 x 128
 *   tiles and those of 4x4 threads to too few blocks (run 17).
 * Over those 17 pairs of shape and tile this rule's counts run within 0.98
 * of the best count's time (geometric mean; 0.95 at 294x8276x13102), the
 * one-wave rule's within 0.95 (0.83 there).  The launchers split with it
 * and the runtime's cost model predicts the same split.  Returns the
 * chunks and their K in *k_chunk, as kt_matmul_splits does. */
#define KT_MATMUL_FIXED_K 32.0       /* a block's fixed cost, in K steps of its multiply-adds */
#define KT_MATMUL_SPLIT_WAVES 4      /* most waves of resident blocks the chunks may fill */
#define KT_MATMUL_SPLIT_BUSY 0.8     /* share of the blocks that fit an SM that keep its last round busy */
#define KT_MATMUL_SPLIT_FLOAT 64.0   /* an SM's multiply-adds while its share of one workspace float moves */
#define KT_MATMUL_SPLIT_LAUNCH 2.0e5 /* an SM's multiply-adds in the reduction's launch (about 1 us) */
/* The least K of a chunk.  At 128 (KT_MATMUL_MIN_CHUNK_K, still the
 * vector-times-matrix kernel's least) the cap bound where a long K meets
 * one or two tiles: 24x61x1953 on a 32x64 tile ran 13.7 us in the 15
 * chunks it allowed, 10.1 in 128 (H100); over 330 pairs of random shape
 * (M, N to 2048, K 256 to 16384) and split tile, every count forced, the
 * rule ran 1.198x the best count's time, 1.028x at 16 (H200;
 * bench/reference/matmul_random/README.md, runs 44 and 45). */
#define KT_MATMUL_SPLIT_MIN_CHUNK_K 16
static inline long long kt_matmul_splits_balanced(long long M, long long N, long long K, int BM, int BN, int BK,
                                                  int split, long long sm, int per_sm, long long *k_chunk)
{
  const long long most = kt_matmul_splits(M, N, K, BM, BN, BK, split, KT_MATMUL_SPLIT_WAVES * sm * per_sm,
                                          KT_MATMUL_SPLIT_MIN_CHUNK_K, k_chunk);
  const long long tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), steps = (K + BK - 1) / BK;
  long long best = 1;
  double best_cost = -1.0;
  for (long long s = 1; s <= most && sm > 0 && per_sm > 0; ++s) {
    const long long chunk = (steps + s - 1) / s, chunks = (steps + chunk - 1) / chunk;
    const long long q = (tiles * chunks + sm - 1) / sm, rounds = (q + per_sm - 1) / per_sm;
    const double least = (double)per_sm * ((double)(rounds - 1) + KT_MATMUL_SPLIT_BUSY);
    const double busy = (double)q > least ? (double)q : least;
    double cost = busy * BM * BN * ((double)chunk * BK + KT_MATMUL_FIXED_K);
    if (chunks > 1)
      cost += (2.0 * chunks + 1.0) * (double)M * (double)N / (double)sm * KT_MATMUL_SPLIT_FLOAT + KT_MATMUL_SPLIT_LAUNCH;
    if (best_cost < 0.0 || cost < best_cost)
      best = chunks, best_cost = cost;
  }
  *k_chunk = (steps + best - 1) / best * BK;
  return (K + *k_chunk - 1) / *k_chunk;
}

#endif
