/* SPDX-License-Identifier: MIT */
/* tests/test_resident.c: blocks of a variant that one SM holds
 * (runtime/resident.c), from the registers ptxas gave the build's kernels
 * (build/kernel_regs.c); on described devices, no GPU.
 *
 *   make build/tests/test_resident && build/tests/test_resident
 */
#include "kt_test.h"

TestSuite(resident);

/* The entry of ptxas's table for the first kernel of this target whose
 * name starts with `prefix` and whose static shared memory is at most
 * `smem` bytes. */
static const kt_kernel_regs_entry *entry_for(const char *prefix, int target, int smem)
{
  for (int i = 0; i < kt_kernel_regs_count; ++i)
    if (kt_kernel_regs[i].target == target && kt_kernel_regs[i].smem <= smem &&
        strncmp(kt_kernel_regs[i].name, prefix, strlen(prefix)) == 0)
      return &kt_kernel_regs[i];
  return NULL;
}

/* A variant that names e's kernel, with the launch shape the test gives. */
static kt_variant variant_of(const kt_kernel_regs_entry *e, int threads, int smem_dynamic)
{
  kt_variant v;
  memset(&v, 0, sizeof v);
  v.name = e->name;
  v.family = KT_FAMILY_MATMUL;
  v.target = e->target;
  v.threads = threads;
  v.smem_dynamic = smem_dynamic;
  v.blocks_per_sm = 99; /* the estimate: never what a compiled count gives below */
  return v;
}

/* Registers by 256 a warp, the unit resident.c allocates in. */
static int regs_per_warp(const kt_kernel_regs_entry *e)
{
  return (e->regs * 32 + 255) / 256 * 256;
}

Test(resident, the_table_is_sorted_and_holds_every_matmul_kernel_of_the_build)
{
  cr_assert_gt(kt_kernel_regs_count, 0, "the build linked no ptxas counts");
  for (int i = 1; i < kt_kernel_regs_count; ++i) {
    const int c = strcmp(kt_kernel_regs[i - 1].name, kt_kernel_regs[i].name);
    cr_assert(c < 0 || (c == 0 && kt_kernel_regs[i - 1].target < kt_kernel_regs[i].target),
              "entries %d and %d out of order: %s/%d, %s/%d", i - 1, i, kt_kernel_regs[i - 1].name,
              kt_kernel_regs[i - 1].target, kt_kernel_regs[i].name, kt_kernel_regs[i].target);
  }
  for (int i = 0; i < kt_kernel_regs_count; ++i)
    cr_assert(kt_kernel_regs[i].regs >= 1 && kt_kernel_regs[i].regs <= 255, "%s: %d registers", kt_kernel_regs[i].name,
              kt_kernel_regs[i].regs);
  /* Every matmul kernel is a plain extern "C" entry named as its variant,
   * so ptxas reported each one, for each target it was built for. */
  int matmul = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_MATMUL)
      continue;
    ++matmul;
    int found = 0;
    for (int j = 0; j < kt_kernel_regs_count && !found; ++j)
      found = kt_kernel_regs[j].target == v->target && strcmp(kt_kernel_regs[j].name, v->name) == 0;
    cr_assert(found, "no ptxas count for %s (sm_%d)", v->name, v->target);
  }
  cr_assert_gt(matmul, 0);
}

Test(resident, a_kernel_without_a_ptxas_count_keeps_the_space_estimate)
{
  const kt_device_info d = kt_test_device("NVIDIA H100", 90, 1);
  kt_variant v;
  memset(&v, 0, sizeof v);
  v.name = "matmul_no_such_kernel";
  v.target = 90;
  v.threads = 256;
  v.blocks_per_sm = 3;
  cr_assert_eq(kt_resident_blocks(&v, &d), 3);
  v.blocks_per_sm = 0;
  cr_assert_eq(kt_resident_blocks(&v, &d), 0);
}

Test(resident, a_device_of_unknown_limits_keeps_the_space_estimate)
{
  const kt_kernel_regs_entry *e = entry_for("matmul_", 90, 1 << 20);
  cr_assert_not_null(e);
  const kt_variant v = variant_of(e, 256, 0);
  kt_device_info d = kt_test_device("NVIDIA H100", 90, 1);
  d.regs_per_sm = 0;
  cr_assert_eq(kt_resident_blocks(&v, &d), 99);
  cr_assert_eq(kt_resident_blocks(&v, NULL), 99);
}

Test(resident, the_count_is_for_the_variants_own_target)
{
  /* An sm_80 entry's name asked for as sm_90 is another kernel: unless the
   * build compiled that one too, the estimate stands. */
  const kt_kernel_regs_entry *e = entry_for("matmul_", 80, 1 << 20);
  if (!e)
    cr_skip_test("this build has no sm_80 kernels");
  kt_variant v = variant_of(e, 256, 0);
  v.target = 70;
  cr_assert_eq(kt_resident_blocks(&v, NULL), 99);
  const kt_device_info d = kt_test_device("NVIDIA A100", 80, 0);
  cr_assert_eq(kt_resident_blocks(&v, &d), 99);
}

/*
 * Registers go to warps in whole 256-register units, separately in each of
 * the SM's four sub-partitions.  A device whose sub-partitions hold three
 * and a half warps' worth each holds 12 warps, not 14: one block of 7
 * warps, where the SM's register file alone would take two.
 */
Test(resident, registers_are_counted_per_sub_partition_in_whole_warps)
{
  const kt_kernel_regs_entry *e = entry_for("matmul_", 90, 1 << 20);
  cr_assert_not_null(e);
  kt_device_info d = kt_test_device("NVIDIA H100", 90, 1);
  const int w = regs_per_warp(e);
  d.regs_per_sm = 4 * (3 * w + w / 2);
  const kt_variant seven = variant_of(e, 7 * 32, 0);
  const kt_variant six = variant_of(e, 6 * 32, 0);
  const kt_variant four = variant_of(e, 4 * 32, 0);
  cr_assert_eq(kt_resident_blocks(&seven, &d), 1);
  cr_assert_eq(kt_resident_blocks(&six, &d), 2);
  cr_assert_eq(kt_resident_blocks(&four, &d), 3);
}

Test(resident, threads_and_the_block_limit_cap_the_count)
{
  const kt_kernel_regs_entry *e = entry_for("matmul_", 90, 4096); /* shared memory never the limit here */
  cr_assert_not_null(e);
  kt_device_info d = kt_test_device("NVIDIA H100", 90, 1);
  d.regs_per_sm = 1 << 30; /* nor registers */
  const kt_variant big = variant_of(e, 1024, 0), small = variant_of(e, 32, 0);
  cr_assert_eq(kt_resident_blocks(&big, &d), 2);    /* 2048 threads an SM */
  cr_assert_eq(kt_resident_blocks(&small, &d), 32); /* 64 by threads, 32 blocks at most */
  d.max_blocks_per_sm = 16;
  cr_assert_eq(kt_resident_blocks(&small, &d), 16);
}

/* Shared memory goes to blocks in 128-byte units, plus the system's share
 * of each block: on an SM of exactly two blocks' worth, two fit; one byte
 * more a block takes a whole unit more, and only one fits, even where the
 * SM has room for two blocks of that size to the byte. */
Test(resident, shared_memory_counts_whole_units_and_the_reserve)
{
  const kt_kernel_regs_entry *e = entry_for("matmul_", 90, 1 << 20);
  cr_assert_not_null(e);
  kt_device_info d = kt_test_device("NVIDIA H100", 90, 1);
  d.regs_per_sm = 1 << 30;
  d.smem_reserved = 1024;
  const int block = (e->smem + 127) / 128 * 128 + 64 * 128; /* whole units, static part included */
  const kt_variant fits = variant_of(e, 32, block - e->smem);
  const kt_variant over = variant_of(e, 32, block - e->smem + 1);
  d.smem_per_sm = 2 * (block + d.smem_reserved);
  cr_assert_eq(kt_resident_blocks(&fits, &d), 2);
  cr_assert_eq(kt_resident_blocks(&over, &d), 1);
  d.smem_per_sm = 2 * (block + 1 + d.smem_reserved);
  cr_assert_eq(kt_resident_blocks(&over, &d), 1);
  d.smem_per_sm = block + d.smem_reserved - 1;
  cr_assert_eq(kt_resident_blocks(&fits, &d), 0);
}
