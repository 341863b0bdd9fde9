/* SPDX-License-Identifier: MIT */
/* tests/test_sector.c: which operands the Hopper launchers repack because
 * their row stride starts 16 bytes into a 32-byte sector
 * (kt_gemm_sector_repack, runtime/kt_variant.h), and how they read each
 * operand otherwise (kt_gemm_wgmma_choose); how wide the mma.sync
 * kernels' copies are (kt_gemm_copy_granularity).  Host arithmetic only; the
 * GPU side (results on such strides, repacked or not) is test_gemm's.
 *
 *   make build/tests/test_sector && build/tests/test_sector
 */
#include "kt_test.h"
#include <math.h>

#include "kt_variant.h"

TestSuite(sector);

#define SMS 132 /* an H100's or H200's SMs */

/* A row of n floats padded to 128 bytes, then 16 bytes more (the bench's
 * "+16"). */
static long long straddling(long long n)
{
  return (n * 4 + 127) / 128 * 128 + 16;
}

/* Tiles of tile x other for an M x N call whose kernel A has M rows. */
static long long tiles_of(long long M, long long N, int bm, int bn)
{
  return ((M + bm - 1) / bm) * ((N + bn - 1) / bn);
}

/* Only a stride 16 bytes past a multiple of 32 is repacked: not one of 32,
 * 48 or 64 past 128 (measured to cost 0 to 3%), whatever else pays. */
Test(sector, only_a_stride_sixteen_bytes_into_a_sector_is_repacked)
{
  for (long long s = 0; s <= 4096; s += 4)
    for (long long base = 0; base <= (1LL << 36); base += (1LL << 36)) {
      const long long stride = base + s;
      const int r = kt_gemm_sector_repack(stride, 64, 256, 128, 8 * SMS, SMS, 1, 1.0);
      cr_assert_eq(r, stride % 32 == 16, "stride %lld bytes: %d", stride, r);
    }
}

/* The operand of the smaller tile side carries a third of each k slice
 * (0 to 4% measured): never repacked, however much it would pay.  Of
 * square tiles, either operand is. */
Test(sector, the_operand_of_the_smaller_tile_side_is_read_in_place)
{
  const int sides[][2] = {{128, 256}, {64, 128}, {64, 256}};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; ++i) {
    const int small = sides[i][0], large = sides[i][1];
    cr_assert_not(kt_gemm_sector_repack(16, 1, small, large, 1000 * SMS, SMS, 2, 1.0));
    cr_assert(kt_gemm_sector_repack(16, 1, large, small, 1000 * SMS, SMS, 2, 1.0));
    cr_assert(kt_gemm_sector_repack(16, 1, small, small, 1000 * SMS, SMS, 2, 1.0));
  }
}

/* More rows to repack never make the repack pay where fewer did not; more
 * of the multiply (blocks, K share) never make it pay less. */
Test(sector, the_repack_pays_less_as_rows_grow_and_more_as_the_multiply_does)
{
  const int tiles[][3] = {{256, 128, 1}, {128, 128, 1}, {128, 128, 2}, {64, 64, 2}};
  const long long blocks[] = {1, 60, 131, 132, 133, 264, 300, 1000, 5000};
  const double kshare[] = {0.125, 0.5, 1.0};
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; ++t)
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; ++b)
      for (size_t k = 0; k < sizeof kshare / sizeof kshare[0]; ++k) {
        const int side = tiles[t][0], other = tiles[t][1], occ = tiles[t][2];
        int was = 1;
        for (long long rows = 1; rows <= 1 << 20; rows += 1 + rows / 8) {
          const int r = kt_gemm_sector_repack(48, rows, side, other, blocks[b], SMS, occ, kshare[k]);
          cr_assert(r <= was, "%dx%d, %lld blocks: %lld rows repacked after fewer were not", side, other, blocks[b],
                    rows);
          was = r;
          if (r) {
            cr_assert(kt_gemm_sector_repack(48, rows, side, other, 2 * blocks[b], SMS, occ, kshare[k]));
            if (kshare[k] < 1)
              cr_assert(kt_gemm_sector_repack(48, rows, side, other, blocks[b], SMS, occ, 1.0));
          }
        }
      }
}

/* A call of less than one full wave never repacks (a repack's fixed cost
 * outweighs the sectors' there, measured); past one, the larger side of
 * unequal tiles pays in its full waves' share, square tiles in every wave:
 * so a repack that pays for square tiles at 1.5 waves' worth of blocks
 * need not pay for the larger side of unequal ones. */
Test(sector, nothing_is_repacked_short_of_a_full_wave)
{
  for (long long blocks = 1; blocks < SMS; ++blocks) {
    cr_assert_not(kt_gemm_sector_repack(16, 1, 256, 128, blocks, SMS, 1, 1.0), "%lld blocks", blocks);
    cr_assert_not(kt_gemm_sector_repack(16, 1, 128, 128, blocks, SMS, 1, 1.0), "%lld blocks", blocks);
    cr_assert_not(kt_gemm_sector_repack(16, 1, 64, 64, blocks, SMS, 2, 1.0), "%lld blocks", blocks * 2);
  }
  cr_assert(kt_gemm_sector_repack(16, 1, 256, 128, SMS, SMS, 1, 1.0));
  cr_assert(kt_gemm_sector_repack(16, 1, 128, 128, SMS, SMS, 1, 1.0));
  /* 1.5 waves: square tiles count both, unequal ones the full one only */
  const long long blocks = SMS * 3 / 2,
                  rows = (long long)(KT_GEMM_SECTOR_COST * 2 * 128 * 128 / KT_GEMM_REPACK_PER_MAC) - 1;
  cr_assert(kt_gemm_sector_repack(16, rows, 128, 128, blocks, SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(16, rows, 128, 128 - 1, blocks, SMS, 1, 1.0));
}

/* The calls sessions 62 and 63 measured on an H100 (row strides 16 bytes
 * into a sector, in place and repacked; one block per SM) go the way that
 * was faster, where the two differed by more than the noise:
 *   - 128x256 TF32, op N, N's K-major A (the swapped kernel's 256-row
 *     operand): at 4096^3 (3.9 waves) it cost 22% in place and about 7%
 *     repacked; at 3512x2404x1552 (2.02 waves) and 2556x1672x1632 (1.06)
 *     4 and 5% in place, 12 and 15% repacked;
 *   - 128x128 TF32: at 2016x2092x7460 (2.06 waves) A cost 31% in place,
 *     14% repacked; at 3512x2404x1552 (4.03 waves) B cost 21% in place, 7%
 *     repacked; at 2120x2372x1368 (2.7 waves) B cost 20% in place, 21%
 *     repacked. */
Test(sector, the_measured_calls_go_the_way_that_was_faster)
{
  /* BF16 128x128, 600x1000x1000 (40 blocks), A 16 bytes into a sector:
   * 1.23 of the padded strides repacked, 0.98 to 1.0 in place (session 63) */
  cr_assert_not(kt_gemm_sector_repack(2048 + 16, 600, 128, 128, tiles_of(600, 1000, 128, 128), SMS, 1, 1.0));
  /* the swapped TF32 kernel's tiles cover N x M: its B is op(A) */
  cr_assert(kt_gemm_sector_repack(straddling(4096), 4096, 256, 128, tiles_of(4096, 4096, 128, 256), SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(straddling(1552), 3512, 256, 128, tiles_of(2404, 3512, 128, 256), SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(straddling(1632), 2556, 256, 128, tiles_of(1672, 2556, 128, 256), SMS, 1, 1.0));
  cr_assert(kt_gemm_sector_repack(straddling(7460), 2016, 128, 128, tiles_of(2092, 2016, 128, 128), SMS, 1, 1.0));
  cr_assert(kt_gemm_sector_repack(straddling(2404), 2404, 128, 128, tiles_of(2404, 3512, 128, 128), SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(straddling(2372), 2372, 128, 128, tiles_of(2372, 2120, 128, 128), SMS, 1, 1.0));
}

/* Nonsense in, no repack out (and no division by zero). */
Test(sector, degenerate_arguments_repack_nothing)
{
  cr_assert_not(kt_gemm_sector_repack(16, 0, 128, 128, 1000, SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(16, 100, 128, 128, 0, SMS, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(16, 100, 128, 128, 1000, 0, 1, 1.0));
  cr_assert_not(kt_gemm_sector_repack(16, 100, 128, 128, 1000, SMS, 0, 1.0));
  cr_assert_not(kt_gemm_sector_repack(16, 100, 128, 128, 1000, SMS, 1, 0.0));
  cr_assert_not(kt_gemm_sector_repack(16, 100, 128, 128, 1000, SMS, 1, NAN));
  cr_assert_not(kt_gemm_sector_repack(-16, 100, 128, 128, 1000, SMS, 1, 1.0));
}

/* ---- how the Hopper launcher reads each operand (kt_gemm_wgmma_choose) ---- */

TestSuite(wgmma_layout);

#define P16 ((const void *)(uintptr_t)256) /* a 16-byte aligned pointer */

Test(wgmma_layout, tma_addresses_16_byte_aligned_rows_and_batches_only)
{
  cr_assert(kt_gemm_tma_addressable(P16, 8, 0, 1, 2));                           /* 16-byte rows */
  cr_assert_not(kt_gemm_tma_addressable(P16, 7, 0, 1, 2));                       /* 14-byte rows */
  cr_assert(kt_gemm_tma_addressable(P16, 4, 0, 1, 4));                           /* FP32: 4 elements */
  cr_assert_not(kt_gemm_tma_addressable((const char *)P16 + 4, 4, 0, 1, 4));     /* base off 16 */
  cr_assert(kt_gemm_tma_addressable(P16, 8, 3, 1, 2));                           /* one entry: no stride */
  cr_assert_not(kt_gemm_tma_addressable(P16, 8, 3, 2, 2));                       /* batch stride of 6 bytes */
  cr_assert_not(kt_gemm_tma_addressable(P16, 8, 0, 2, 2));                       /* stride 0 is not an entry's */
  cr_assert(kt_gemm_tma_addressable(P16, 8, 64, 2, 2));
  cr_assert_not(kt_gemm_tma_addressable(P16, 1LL << 38, 0, 1, 4));             /* 2^40 bytes a row */
}

/* 16-bit types: wgmma reads either layout from shared memory, so only an
 * operand TMA cannot address is repacked, and an MN-major one read in place
 * is read transposed. */
Test(wgmma_layout, sixteen_bit_types_repack_only_what_tma_cannot_address)
{
  for (int op_a = 0; op_a < 2; ++op_a)
    for (int op_b = 0; op_b < 2; ++op_b)
      for (int ala = 0; ala < 2; ++ala)
        for (int alb = 0; alb < 2; ++alb) {
          const kt_gemm_wgmma_layout l = kt_gemm_wgmma_choose(2, op_a, op_b, 300, 200, ala, alb);
          cr_assert_eq(l.swap, 0);
          cr_assert_eq(l.pack_a, !ala, "op %d%d, addressable %d%d", op_a, op_b, ala, alb);
          cr_assert_eq(l.pack_b, !alb, "op %d%d, addressable %d%d", op_a, op_b, ala, alb);
          cr_assert_eq(l.ta, ala && op_a == KT_GEMM_OP_T);
          cr_assert_eq(l.tb, alb && op_b == KT_GEMM_OP_N);
        }
}

/* TF32: K-major in shared memory only, one MN-major operand through
 * registers (the kernel's A, swapped in where op(B) is that operand). */
Test(wgmma_layout, tf32_reads_one_mn_major_operand_through_registers)
{
  const int N = KT_GEMM_OP_N, T = KT_GEMM_OP_T;
  kt_gemm_wgmma_layout l = kt_gemm_wgmma_choose(4, N, N, 300, 200, 1, 1); /* op(B) MN-major: swapped */
  cr_assert(l.swap && l.ta && !l.pack_a && !l.pack_b);
  l = kt_gemm_wgmma_choose(4, N, T, 300, 200, 1, 1); /* both K-major */
  cr_assert(!l.swap && !l.ta && !l.pack_a && !l.pack_b);
  l = kt_gemm_wgmma_choose(4, T, T, 300, 200, 1, 1); /* op(A) MN-major through registers */
  cr_assert(!l.swap && l.ta && !l.pack_a && !l.pack_b);
  /* op T, N: both MN-major; the smaller side's operand is repacked. */
  l = kt_gemm_wgmma_choose(4, T, N, 200, 300, 1, 1);
  cr_assert(l.swap && l.ta && l.pack_a && !l.pack_b);
  l = kt_gemm_wgmma_choose(4, T, N, 300, 200, 1, 1);
  cr_assert(!l.swap && l.ta && !l.pack_a && l.pack_b);
  /* op N, N with a B that TMA cannot address: not swapped, B repacked. */
  l = kt_gemm_wgmma_choose(4, N, N, 300, 200, 1, 0);
  cr_assert(!l.swap && !l.ta && !l.pack_a && l.pack_b);
  /* op T, T with an A that TMA cannot address: A repacked K-major. */
  l = kt_gemm_wgmma_choose(4, T, T, 300, 200, 0, 1);
  cr_assert(!l.swap && !l.ta && l.pack_a && !l.pack_b);
  for (int op_a = 0; op_a < 2; ++op_a)
    for (int op_b = 0; op_b < 2; ++op_b)
      for (int ala = 0; ala < 2; ++ala)
        for (int alb = 0; alb < 2; ++alb) {
          l = kt_gemm_wgmma_choose(4, op_a, op_b, 300, 200, ala, alb);
          cr_assert_eq(l.tb, 0);
          cr_assert(!l.swap || !l.pack_b, "swapped, op(B) is read in place");
          cr_assert(ala || l.pack_a, "an A TMA cannot address is repacked");
          cr_assert(alb || l.pack_b, "a B TMA cannot address is repacked");
        }
}

TestSuite(mma_copy);

/* How the mma.sync kernels copy an operand (kt_gemm_copy_granularity): the
 * widest of 16, 8, 4 bytes (cp.async) that its base, row stride and, for
 * more than one entry, batch stride all allow; else 2 (16-bit, element by
 * element), which dispatch's cost model prices. */
Test(mma_copy, the_widest_copy_that_base_rows_and_batches_allow)
{
  const void *base = (const void *)(uintptr_t)4096;
  cr_expect_eq(kt_gemm_copy_granularity(base, 64, 0, 1, 2), 16);  /* 128-byte rows */
  cr_expect_eq(kt_gemm_copy_granularity(base, 68, 0, 1, 2), 8);   /* 136 */
  cr_expect_eq(kt_gemm_copy_granularity(base, 66, 0, 1, 2), 4);   /* 132 */
  cr_expect_eq(kt_gemm_copy_granularity(base, 285, 0, 1, 2), 2);  /* 570: odd halves */
  cr_expect_eq(kt_gemm_copy_granularity(base, 285, 0, 1, 4), 4);  /* TF32 never below 4 */
  cr_expect_eq(kt_gemm_copy_granularity((const char *)base + 2, 64, 0, 1, 2), 2); /* the base odd */
  cr_expect_eq(kt_gemm_copy_granularity((const char *)base + 8, 64, 0, 1, 2), 8);
  /* A batch stride counts only where there are two or more entries. */
  cr_expect_eq(kt_gemm_copy_granularity(base, 64, 64 * 33 + 1, 1, 2), 16);
  cr_expect_eq(kt_gemm_copy_granularity(base, 64, 64 * 33 + 1, 5, 2), 2);
  cr_expect_eq(kt_gemm_copy_granularity(base, 64, 64 * 33 + 2, 5, 2), 4);
  cr_expect_eq(kt_gemm_copy_granularity(base, 64, 0, 5, 2), 16); /* one entry shared by all */
}
