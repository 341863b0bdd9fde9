/* SPDX-License-Identifier: MIT */
/* tests/test_gemm_gpu.c: every gemm (tensor-core matmul) variant, for its
 * input types, every op pair, batches and padding, against a double
 * reference from the rounded inputs (tuner/gemm.h), and kt_matmul_ex
 * through dispatch; CPU-side argument checks live in test_api.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm.h"
#include "gpu_test.h"
#include "matmul.h"

TestSuite(gemm_gpu, .init = gpu_or_skip);

static uint64_t fresh_seed(void)
{
  return (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
}

static int variant_serves_type(const kt_variant *v, int type)
{
  return kt_gemm_serves(v, &gpu, type);
}

Test(gemm_gpu, every_variant_is_correct_for_every_type_op_pair_and_batch_on_odd_shapes)
{
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_GEMM || !kt_variant_runs_on(v, &gpu))
      continue;
    for (int type = KT_F32; type <= KT_F16; ++type) {
      if (!variant_serves_type(v, type))
        continue;
      for (int ops = 0; ops < 4; ++ops) {
        /* One op pair with a long K, which the variants that split K split;
         * batches with A, B, both or neither shared by their entries. */
        const int kmax = ops == 1 ? 1300 : 300;
        const int M = 1 + (int)(kt_rng_next(&r) % 260), N = 1 + (int)(kt_rng_next(&r) % 260),
                  K = 1 + (int)(kt_rng_next(&r) % kmax), pad = (int)(kt_rng_next(&r) % 9);
        const kt_tune_gemm_case cs =
            kt_tune_gemm_case_of(type, ops >> 1, ops & 1, M, N, K, 1 + ops % 3, pad, ops ? 1.0f : -1.5f,
                                 ops % 2 ? 0.0f : 0.5f, (int)(kt_rng_next(&r) % 4));
        kt_check c;
        kt_tune_gemm_check(v, &gpu, &cs, kt_rng_next(&r), &c);
        cr_expect(c.ok, "%s (%s, op %c%c): %s", v->name, kt_gemm_type_name(type), "NT"[cs.op_a], "NT"[cs.op_b],
                  c.reason);
        ++checked;
      }
    }
  }
  cr_assert_gt(checked, 0);
}

/* Sizes whose rows TMA can address (multiples of 8 elements, 16 bytes for
 * the 16-bit types) take the in-place paths: BF16 and FP16 read every op
 * pair MN- or K-major where it is; TF32 reads one MN-major operand through
 * registers, running op N, N (and op T, N where M <= N: 64 x 256, 520 x
 * 1300 and the last two) as the transpose, and repacks the other.  Edges
 * off every tile, K off the 64-element slice, batches (each batched shape
 * with A, then B, shared by its entries for two of every three op pairs:
 * stride 0, read in place where aligned).  520 x 1300 x 5 has
 * more tiles than a persistent grid has blocks (150 of 128 x 256 on 132
 * SMs), so its blocks loop over tiles and across batch entries.  40 x
 * 1304 x 100 puts rows 16 bytes into a 32-byte sector (TF32's lda of 400
 * bytes, the 16-bit ldb of 2608), read in place in a call of less than a
 * wave (kt_gemm_sector_repack; the next test repacks them).  The last
 * two have few tiles and a long K, which the variants that split K split
 * 8 to 15 ways (and the batch's tiles reduce apart) and 21 to 42 ways.
 * The mma.sync variants take their 16-byte copies here (the odd shapes
 * above take the narrower ones). */
Test(gemm_gpu, every_variant_is_correct_in_place_for_every_op_pair)
{
  kt_rng r = {fresh_seed()};
  static const int shapes[][5] = {{200, 136, 72, 0, 2},  {64, 256, 128, 8, 1}, {328, 264, 200, 16, 3},
                                  {8, 8, 8, 0, 1},       {520, 1300, 8, 8, 5}, {40, 1304, 100, 0, 1},
                                  {96, 136, 4100, 8, 2}, {16, 24, 12000, 0, 1}};
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_GEMM || strcmp(v->algo, "simt") == 0 || !kt_variant_runs_on(v, &gpu))
      continue;
    for (int type = KT_TF32; type <= KT_F16; ++type) {
      if (!variant_serves_type(v, type))
        continue;
      for (int ops = 0; ops < 4; ++ops)
        for (int s = 0; s < nshapes; ++s) {
          const kt_tune_gemm_case cs =
              kt_tune_gemm_case_of(type, ops >> 1, ops & 1, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][4],
                                   shapes[s][3], s && s < nshapes - 2 ? 1.0f : 0.5f,
                                   s % 2 || s >= nshapes - 2 ? -1.0f : 0.0f, shapes[s][4] > 1 ? (s + ops) % 3 : 0);
          kt_check c;
          kt_tune_gemm_check(v, &gpu, &cs, kt_rng_next(&r), &c);
          cr_expect(c.ok, "%s (%s, op %c%c, %dx%dx%d): %s", v->name, kt_gemm_type_name(type), "NT"[cs.op_a],
                    "NT"[cs.op_b], cs.M, cs.N, cs.K, c.reason);
          ++checked;
        }
    }
  }
  if (checked == 0)
    cr_skip_test("no tensor-core variant runs on this GPU");
}

/* Rows 16 bytes into a 32-byte sector, in calls of more than a wave of
 * tiles (132 to 264 blocks on 132 SMs), where the Hopper launchers repack
 * the operand of the larger tile side (kt_gemm_sector_repack): TF32 40 x
 * 16896 x 100 (lda of 400 bytes: op(A) is the swapped kernel's B, 40
 * rows), 16-bit 16896 x 40 x 104 (ldb of 80 bytes: op(B) is the kernel's
 * B; its lda of 208 bytes is the kernel's A, 16896 rows, whose repack
 * would not pay: read in place).  The repacked rows are K rounded up to
 * 128 bytes. */
Test(gemm_gpu, operands_sixteen_bytes_into_a_sector_are_repacked_and_correct)
{
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_GEMM || strcmp(v->algo, "wgmma") != 0 || !kt_variant_runs_on(v, &gpu))
      continue;
    for (int type = KT_TF32; type <= KT_F16; ++type) {
      if (!variant_serves_type(v, type))
        continue;
      const int tf32 = type == KT_TF32;
      const kt_tune_gemm_case cs =
          kt_tune_gemm_case_of(type, 0, 0, tf32 ? 40 : 16896, tf32 ? 16896 : 40, tf32 ? 100 : 104, 1, 0, 1.0f, 0.5f, 0);
      kt_check c;
      kt_tune_gemm_check(v, &gpu, &cs, kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s (%s, %dx%dx%d): %s", v->name, kt_gemm_type_name(type), cs.M, cs.N, cs.K, c.reason);
      ++checked;
    }
  }
  if (checked == 0)
    cr_skip_test("no Hopper tensor-core variant runs on this GPU");
}

/* A small FP32 batch (one launch of a CUDA-core tile) with B shared by its entries. */
Test(gemm_gpu, matmul_ex_f32_nn_batch_with_a_shared_b_is_exact_fp32)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  const int M = 37, N = 41, K = 29, batch = 3;
  const size_t per = (size_t)M * K + 5;
  float *A, *B, *C;
  cr_assert_eq(cudaMalloc((void **)&A, per * batch * 4), cudaSuccess);
  cr_assert_eq(cudaMalloc((void **)&B, (size_t)K * N * 4), cudaSuccess);
  cr_assert_eq(cudaMalloc((void **)&C, (size_t)M * N * batch * 4), cudaSuccess);
  float *h = malloc(per * batch * 4);
  kt_rng r = {fresh_seed()};
  for (size_t i = 0; i < per * batch; ++i)
    h[i] = kt_rng_float(&r);
  cudaMemcpy(A, h, per * batch * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(B, h, (size_t)K * N * 4, cudaMemcpyHostToDevice);
  const kt_matmul_desc d = {.type = KT_F32, .M = M, .N = N, .K = K, .batch = batch, .alpha = 1.0f, .A = A,
                            .lda = K, .stride_a = (int64_t)per, .B = B, .ldb = N, .stride_b = 0, .C = C, .ldc = N,
                            .stride_c = (int64_t)M * N};
  cr_assert_eq(kt_matmul_ex(ctx, &d, NULL), KT_OK);
  float *got = malloc((size_t)M * N * batch * 4);
  cudaMemcpy(got, C, (size_t)M * N * batch * 4, cudaMemcpyDeviceToHost);
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double ref = 0, mag = 0;
        for (int k = 0; k < K; ++k) {
          const double p = (double)h[b * per + (size_t)i * K + k] * h[(size_t)k * N + j];
          ref += p, mag += fabs(p);
        }
        cr_expect_leq(fabs(got[(size_t)b * M * N + (size_t)i * N + j] - ref),
                      kt_tune_gemm_bound(KT_F32, K, 1.0, mag, 0.0), "C[%d](%d, %d)", b, i, j);
      }
  free(h);
  free(got);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  kt_close(ctx);
}

/* KT_F32 with an op T (runtime/gemm.c), exact FP32 within the bound, on
 * odd shapes with NaN in every padding element, through kt_matmul_ex.  For
 * each op pair with a T:
 *   - one product: the op-T operands transposed into scratch, then
 *     kt_matmul's tuned kernels;
 *   - a batch whose entries each fill the GPU (a 128 x 128 tile for every
 *     SM, K >= 256): the same, entry by entry, with A, B, both or neither
 *     shared by the entries (a shared operand is transposed once);
 *   - a batch of small entries: one launch of a CUDA-core tile.
 * And op T, N and T, T with an op-T A of 100000 rows, whose scratch (256
 * MiB at most) takes 668 of K at a time: K 700 goes in two panels, the
 * second adding to C. */
Test(gemm_gpu, matmul_ex_f32_with_an_op_t_multiplies_exactly)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  kt_rng r = {fresh_seed()};
  /* Tiles of 128 on a side that give every SM one: an odd size past them. */
  int side = 1;
  while (side * side < gpu.sm_count)
    ++side;
  for (int i = 0; i < 11; ++i) {
    const int kind = i < 9 ? i / 3 : 3, ops = i < 9 ? 1 + i % 3 : 2 + i % 2; /* kind 3: the panels */
    int M = 1 + (int)(kt_rng_next(&r) % 300), N = 1 + (int)(kt_rng_next(&r) % 300),
        K = 1 + (int)(kt_rng_next(&r) % 600), batch = kind == 0 || kind == 3 ? 1 : 2 + (int)(kt_rng_next(&r) % 2);
    if (kind == 1)
      M = side * 128 - 3, N = side * 128 - 5, K = 256 + (int)(kt_rng_next(&r) % 40);
    if (kind == 3)
      M = 100000, N = 3, K = 700;
    const int shared = kind == 0 || kind == 3 ? 0 : (int)(kt_rng_next(&r) % 4);
    const kt_tune_gemm_case cs =
        kt_tune_gemm_case_of(KT_F32, ops >> 1, ops & 1, M, N, K, batch, kind == 1 ? 0 : (int)(kt_rng_next(&r) % 9),
                             i % 4 ? 1.0f : -0.75f, i % 2 ? 0.5f : 0.0f, shared);
    kt_check c;
    kt_tune_gemm_check_call(ctx, &cs, kt_rng_next(&r), &c);
    cr_expect(c.ok, "op %c%c %dx%dx%d batch %d shared %d: %s", "NT"[cs.op_a], "NT"[cs.op_b], M, N, K, batch, shared,
              c.reason);
    /* What ran, as kt_matmul_ex_choice says for the same shape, batch and
     * sharing (stand-in pointers: it reads their alignment only). */
    const float *p = (const float *)(uintptr_t)4096;
    const long long sa = (long long)M * K, sb = (long long)K * N;
    const kt_matmul_desc d = {.type = KT_F32,
                              .op_a = (kt_op)cs.op_a,
                              .op_b = (kt_op)cs.op_b,
                              .M = M,
                              .N = N,
                              .K = K,
                              .batch = batch,
                              .alpha = 1.0f,
                              .A = p,
                              .lda = cs.op_a ? M : K,
                              .stride_a = shared & 1 ? 0 : sa,
                              .B = p,
                              .ldb = cs.op_b ? K : N,
                              .stride_b = shared & 2 ? 0 : sb,
                              .C = (float *)p,
                              .ldc = N,
                              .stride_c = (long long)M * N};
    kt_choice ch;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    const char *want = kind == 2 ? "gemm_simt_" : "matmul_";
    cr_expect(strncmp(ch.variant, want, strlen(want)) == 0, "op %c%c %dx%dx%d batch %d ran %s", "NT"[cs.op_a],
              "NT"[cs.op_b], M, N, K, batch, ch.variant);
    if (kind != 2)
      cr_expect(strstr(ch.reason, kind == 3 ? "transposed into scratch first, in panels of 668 of K"
                                            : "transposed into scratch first") != NULL,
                "reason: %s", ch.reason);
  }
  kt_close(ctx);
}

/* BF16 of a small integer (exact), and kt_matmul_ex of d on one GPU with
 * A's and B's stored elements set from small integers (so every sum is
 * exact in FP32), reporting C's first mismatch. */
static uint16_t bf16_of(int v)
{
  const float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* With leave_free > 0, the call first runs with all but leave_free bytes
 * of the GPU's memory taken (a wgmma variant's scratch, more than that,
 * cannot be had) and must fail with KT_ERR_DEVICE_MEMORY; then, the memory
 * given back, as above. */
static void run_exact_bf16_leaving(kt_matmul_desc d, size_t a_elems, size_t b_elems, const char *what,
                                   size_t leave_free)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  uint16_t *hA = malloc(a_elems * 2), *hB = malloc(b_elems * 2);
  float *hC = malloc((size_t)d.M * d.ldc * 4);
  cr_assert(hA && hB && hC);
  for (size_t i = 0; i < a_elems; ++i)
    hA[i] = bf16_of((int)(i % 7) - 3);
  for (size_t i = 0; i < b_elems; ++i)
    hB[i] = bf16_of((int)(i % 5) - 2);
  void *A, *B, *C;
  cr_assert_eq(cudaMalloc(&A, a_elems * 2), cudaSuccess);
  cr_assert_eq(cudaMalloc(&B, b_elems * 2), cudaSuccess);
  cr_assert_eq(cudaMalloc(&C, (size_t)d.M * d.ldc * 4), cudaSuccess);
  cudaMemcpy(A, hA, a_elems * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(B, hB, b_elems * 2, cudaMemcpyHostToDevice);
  d.A = A, d.B = B, d.C = C;
  if (leave_free > 0) {
    kt_choice ch;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert(strncmp(ch.variant, "gemm_wgmma_", 11) == 0, "%s: %s needs no scratch here", what, ch.variant);
    size_t free_bytes = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free_bytes, &total));
    cr_assert_gt(free_bytes, leave_free);
    void *hog = NULL;
    CUDA_OK(cudaMalloc(&hog, free_bytes - leave_free));
    const int full = kt_matmul_ex(ctx, &d, NULL);
    const cudaError_t sync = cudaDeviceSynchronize();
    cudaFree(hog);
    cr_expect_eq(full, KT_ERR_DEVICE_MEMORY, "%s, the GPU's memory taken: %s", what, kt_strerror(full));
    cr_expect_eq(sync, cudaSuccess, "%s: %s", what, cudaGetErrorString(sync));
  }
  const int rc = kt_matmul_ex(ctx, &d, NULL);
  cr_expect_eq(rc, KT_OK, "%s: %s", what, kt_strerror(rc));
  cr_assert_eq(cudaMemcpy(hC, C, (size_t)d.M * d.ldc * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int ok = rc == KT_OK;
  for (int64_t i = 0; i < d.M && ok; ++i)
    for (int64_t j = 0; j < d.N; ++j) {
      float want = 0;
      for (int64_t k = 0; k < d.K; ++k) {
        const int64_t ia = d.op_a == KT_OP_N ? i * d.lda + k : k * d.lda + i;
        const int64_t ib = d.op_b == KT_OP_N ? k * d.ldb + j : j * d.ldb + k;
        want += (float)((int)(ia % 7) - 3) * (float)((int)(ib % 5) - 2);
      }
      if (hC[i * d.ldc + j] != want) {
        cr_expect_eq(hC[i * d.ldc + j], want, "%s: C(%lld, %lld)", what, (long long)i, (long long)j);
        ok = 0;
        break;
      }
    }
  free(hA);
  free(hB);
  free(hC);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  kt_close(ctx);
}

static void run_exact_bf16(kt_matmul_desc d, size_t a_elems, size_t b_elems, const char *what)
{
  run_exact_bf16_leaving(d, a_elems, b_elems, what, 0);
}

/* An operand that TMA cannot read in place (odd ldb) is repacked first, in
 * tiles of 64 rows: 4194305 rows are 65537 tiles, more than a grid holds
 * along y (65535), which the repack's grid once was.  It failed the call
 * (KT_ERR_LAUNCH) then; its grid is flat now, one block a tile. */
Test(gemm_gpu, an_operand_repacked_in_more_rows_than_one_grid_holds)
{
  const int64_t M = 8, N = 4194305, K = 8;
  const kt_matmul_desc d = {
      .type = KT_BF16, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1.0f, .lda = K, .ldb = N, .ldc = N};
  run_exact_bf16(d, (size_t)(M * K), (size_t)(K * N), "N 4194305, odd ldb");
}

/* Rows 2^40 bytes apart are past what a TMA map can stride: the operand is
 * repacked (it was handed to TMA, whose encoding failed the call). */
Test(gemm_gpu, a_leading_dimension_past_tma_strides_is_repacked)
{
  /* One row of A: only its K elements exist, whatever lda says. */
  const int64_t N = 64, K = 64, lda = (int64_t)1 << 39;
  const kt_matmul_desc d = {
      .type = KT_BF16, .M = 1, .N = N, .K = K, .batch = 1, .alpha = 1.0f, .lda = lda, .ldb = N, .ldc = N};
  run_exact_bf16(d, (size_t)K, (size_t)(K * N), "M 1, lda 2^39");
}

/* An operand repacked into scratch that the GPU's memory cannot hold (B of
 * odd ldb, 4194305 x 64 BF16: 512 MiB, with 256 MiB left free): the call
 * fails with KT_ERR_DEVICE_MEMORY before it launches anything (it read as
 * a failed launch, KT_ERR_LAUNCH, before), and succeeds once the memory is
 * back. */
Test(gemm_gpu, a_scratch_the_gpu_cannot_hold_is_out_of_device_memory)
{
  const int64_t M = 8, N = 4194305, K = 64;
  const kt_matmul_desc d = {
      .type = KT_BF16, .M = M, .N = N, .K = K, .batch = 1, .alpha = 1.0f, .lda = K, .ldb = N, .ldc = N};
  run_exact_bf16_leaving(d, (size_t)(M * K), (size_t)(K * N), "N 4194305, odd ldb", (size_t)256 << 20);
}
