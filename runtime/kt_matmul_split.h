/* SPDX-License-Identifier: MIT */
/* runtime/kt_matmul_split.h: how many chunks a warp-tiled matmul kernel
 * splits K into, shared by its launcher (templates/matmul_wt.cu.tpl) and
 * dispatch's cost model (runtime/matmul.c), so that the model predicts the
 * launch that runs.  Apart from kt_variant.h, which every kernel
 * includes, as only these two use it.  Like kt_variant.h it enters no
 * variant's source hash (ktgen hashes the templates' .cuh includes only):
 * a change here keeps what was measured, so re-tune after one. */
#ifndef KT_MATMUL_SPLIT_H
#define KT_MATMUL_SPLIT_H

#include "kt_variant.h"

/* The split a warp-tiled kernel launches with: of 1 to kt_matmul_splits'
 * chunks (as many as fill a wave of resident blocks, SPLIT at most), the
 * number whose busiest SM finishes first.  An SM that holds q of the
 * blocks, `per_sm` resident at a time, is counted busy for max(q, per_sm /
 * 2 x rounds) blocks' time: a block alone, or with fewer than half the
 * blocks that fit beside it, leaves its SM waiting on memory, and more
 * share the SM's time.  A block's time is its chunk's K plus
 * KT_MATMUL_FIXED_K.  Filling the wave alone overshot where the tiles
 * were few and large: 36 tiles of 128 x 128 (2 resident) in 4 chunks put
 * two blocks on 12 of 132 SMs, which then took twice as long as the rest;
 * 3 chunks ran 1.19 to 1.39 times as fast.  Counting a lone block as
 * keeping its SM busy (the cost model's SATURATE) went too far the other
 * way: 64 x 128 tiles (4 resident) cut to one block an SM lost 9 to 12%,
 * and 16- and 32-row tiles (8 resident) up to 32% (H100, bench/reference/
 * matmul_random/README.md, run 17).  Ties go to fewer chunks: less
 * workspace.  The launchers split with it and the runtime's cost model
 * predicts with it.  Returns the chunks and their K in *k_chunk, as
 * kt_matmul_splits does. */
#define KT_MATMUL_FIXED_K 32.0 /* a block's fixed cost, in K steps of its multiply-adds */
static inline long long kt_matmul_splits_balanced(long long M, long long N, long long K, int BM, int BN, int BK,
                                                  int split, long long sm, int per_sm, long long *k_chunk)
{
  const long long most = kt_matmul_splits(M, N, K, BM, BN, BK, split, sm * per_sm, k_chunk);
  const long long tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), steps = (K + BK - 1) / BK;
  const double busy_floor = per_sm / 2.0;
  long long best = 1;
  double best_cost = -1.0;
  for (long long s = 1; s <= most && sm > 0 && per_sm > 0; ++s) {
    const long long chunk = (steps + s - 1) / s, chunks = (steps + chunk - 1) / chunk;
    const long long q = (tiles * chunks + sm - 1) / sm, rounds = (q + per_sm - 1) / per_sm;
    const double busy = (double)q > busy_floor * (double)rounds ? (double)q : busy_floor * (double)rounds;
    const double cost = busy * ((double)chunk * BK + KT_MATMUL_FIXED_K);
    if (best_cost < 0.0 || cost < best_cost)
      best = chunks, best_cost = cost;
  }
  *k_chunk = (steps + best - 1) / best * BK;
  return (K + *k_chunk - 1) / *k_chunk;
}

#endif
