/* SPDX-License-Identifier: MIT */
/* tests/test_split.c: how many chunks a warp-tiled kernel splits K into
 * (kt_matmul_splits_balanced, runtime/kt_matmul_split.h), the count its
 * launcher runs and dispatch's cost model predicts.  Host arithmetic only.
 *
 *   make build/tests/test_split && build/tests/test_split
 */
#include "kt_test.h"
#include "kt_matmul_split.h"

TestSuite(split);

#define SMS 132 /* an H100's or H200's SMs, as measured */

static long long chunks_of(long long M, long long N, long long K, int BM, int BN, int BK, int split, int per_sm,
                           long long *k_chunk)
{
  return kt_matmul_splits_balanced(M, N, K, BM, BN, BK, split, SMS, per_sm, k_chunk);
}

/* Whatever the count, the chunks are whole BK steps that cover K, each at
 * least KT_MATMUL_SPLIT_MIN_CHUNK_K deep where K is split, no more than
 * `split`, and their partial tiles fit the workspace's bound. */
Test(split, chunks_cover_k_in_whole_steps_within_the_bounds)
{
  const long long shapes[][3] = {{294, 8276, 13102}, {1684, 192, 6886}, {128, 8192, 8192}, {17, 4022, 11740},
                                 {4096, 4096, 4096}, {16363, 60, 417},   {1, 1, 1},        {64, 64, 65536},
                                 {8192, 8192, 300},  {3, 5, 129}};
  const int tiles[][4] = {{64, 128, 16, 16}, {128, 64, 16, 4}, {128, 128, 16, 16}, {32, 64, 8, 256}, {16, 128, 8, 256}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; ++t)
      for (int per_sm = 1; per_sm <= 8; ++per_sm) {
        const long long M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
        const int BM = tiles[t][0], BN = tiles[t][1], BK = tiles[t][2], split = tiles[t][3];
        long long k_chunk = 0;
        const long long c = chunks_of(M, N, K, BM, BN, BK, split, per_sm, &k_chunk);
        cr_assert(c >= 1 && c <= split, "%lldx%lldx%lld: %lld chunks of at most %d", M, N, K, c, split);
        cr_assert(k_chunk > 0 && k_chunk % BK == 0, "%lldx%lldx%lld: a chunk of %lld, BK %d", M, N, K, k_chunk, BK);
        cr_assert(c * k_chunk >= K && (c - 1) * k_chunk < K, "%lld chunks of %lld for K %lld", c, k_chunk, K);
        if (c > 1) {
          cr_assert(K / c >= KT_MATMUL_SPLIT_MIN_CHUNK_K, "%lld chunks of a K of %lld", c, K);
          cr_assert(c * M * N * 4 <= KT_MATMUL_MAX_WORKSPACE, "%lld chunks of %lldx%lld", c, M, N);
        }
      }
}

/* 128x8192x8192 and its transpose on 128x128 tiles, 2 an SM: 64 tiles.
 * Four chunks fill one wave of 264 exactly and ran fastest of 1 to 16
 * (0.36 ms; 3 and 5 chunks, 0.47 and 0.45, leave a second round). */
Test(split, long_k_on_few_tiles_fills_one_wave)
{
  long long k_chunk;
  cr_assert_eq(chunks_of(128, 8192, 8192, 128, 128, 16, 16, 2, &k_chunk), 4);
  cr_assert_eq(k_chunk, 2048);
  cr_assert_eq(chunks_of(8192, 128, 8192, 128, 128, 16, 16, 2, &k_chunk), 4);
}

/* Tiles that fill several waves alone are not split: 4096^3 on 128x128
 * tiles makes 1024 of them.  At a short K the workspace costs more than
 * the chunks save: 16363x60x417 on 32x64 tiles (8 an SM, as compiled for
 * sm_90) ran 1.28 times as fast in one chunk as in two, 1.31 as in three
 * (H100). */
Test(split, many_tiles_or_a_short_k_split_little)
{
  long long k_chunk;
  cr_assert_eq(chunks_of(4096, 4096, 4096, 128, 128, 16, 16, 2, &k_chunk), 1);
  cr_assert_eq(k_chunk, 4096);
  cr_assert_eq(chunks_of(16363, 60, 417, 32, 64, 16, 256, 8, &k_chunk), 1);
}

/* Small tiles may fill more than one wave: 294x8276x13102 on 64x128 tiles,
 * 4 an SM, makes 325 tiles, so one wave (528 blocks) allowed 2 chunks at
 * most (1.74 ms), where 6 took 1.53 and 8 1.45 (H100, every count forced;
 * cuBLAS 1.43-1.50).  Four waves allow 7, and only the last round of an
 * SM runs short of blocks. */
Test(split, small_tiles_split_past_one_wave)
{
  long long k_chunk;
  const long long c = chunks_of(294, 8276, 13102, 64, 128, 16, 16, 4, &k_chunk);
  cr_assert(c >= 5 && c <= 7, "294x8276x13102 on 64x128 tiles: %lld chunks", c);
  /* 17x4022x11740 on 32x64 tiles with 4-byte copies, 9 an SM as compiled
   * for sm_90 (56 registers): 63 tiles, so four waves allow 76 chunks, but
   * K is split only while a chunk pays: 12 and 16 took 0.131 ms, 8 0.135,
   * 4 0.149. */
  const long long d = chunks_of(17, 4022, 11740, 32, 64, 8, 256, 9, &k_chunk);
  cr_assert(d >= 8 && d <= 16, "17x4022x11740 on 32x64 tiles: %lld chunks", d);
}

/* One or two tiles over a long K split into chunks shallower than the
 * vector-times-matrix kernel's least (KT_MATMUL_MIN_CHUNK_K, 128): 24x61x1953
 * on a 32x64 tile of 4x4 threads ran 13.7 us in the 15 chunks of 128 that
 * the old least allowed and 10.1 us in 128 chunks (H100); 23x59x2855 13.5
 * against 10.3. */
Test(split, few_tiles_over_a_long_k_split_past_chunks_of_128)
{
  long long k_chunk;
  const long long c = chunks_of(24, 61, 1953, 32, 64, 8, 256, 8, &k_chunk);
  cr_assert(c > 1953 / KT_MATMUL_MIN_CHUNK_K, "24x61x1953 on a 32x64 tile: %lld chunks of %lld", c, k_chunk);
  cr_assert(k_chunk < KT_MATMUL_MIN_CHUNK_K && k_chunk >= KT_MATMUL_SPLIT_MIN_CHUNK_K);
  const long long d = chunks_of(23, 59, 2855, 32, 64, 8, 256, 8, &k_chunk);
  cr_assert(d > 2855 / KT_MATMUL_MIN_CHUNK_K, "23x59x2855 on a 32x64 tile: %lld chunks of %lld", d, k_chunk);
}
