/* SPDX-License-Identifier: MIT */
/* runtime/resident.c: how many blocks of a variant one SM holds at once.
 *
 * Dispatch's cost model (runtime/matmul.c) prices a round of blocks on an
 * SM by how many of them run side by side.  The space can only estimate
 * that before compiling (kt_variant.blocks_per_sm, from a guess at the
 * registers its parameters need); once the kernels are compiled, the build
 * links what ptxas gave each one (kt_kernel_regs, generator/kernel_regs.lua),
 * and the count follows from those and the device's limits, by the rules of
 * CUDA's occupancy calculator (cuda_occupancy.h): registers go to warps in
 * units of 256, separately in each of the SM's four sub-partitions; shared
 * memory to blocks in units of 128 bytes, plus what the system keeps per
 * block.
 */
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"

#define REG_UNIT 256     /* registers are allocated to a warp in these units */
#define SUB_PARTITIONS 4 /* of an SM's register file, sm_70 and later */
#define SMEM_UNIT 128    /* shared memory is allocated to a block in these units */

static int by_name_target(const void *key, const void *elem)
{
  const kt_kernel_regs_entry *a = key, *b = elem;
  const int c = strcmp(a->name, b->name);
  return c ? c : (a->target > b->target) - (a->target < b->target);
}

/* ptxas's entry for v's kernel on v's target, or NULL. */
static const kt_kernel_regs_entry *compiled(const kt_variant *v)
{
  const kt_kernel_regs_entry key = {v->name, v->target, 0, 0};
  return kt_kernel_regs_count > 0
             ? bsearch(&key, kt_kernel_regs, (size_t)kt_kernel_regs_count, sizeof *kt_kernel_regs, by_name_target)
             : NULL;
}

static int round_up(long long x, int unit)
{
  return (int)((x + unit - 1) / unit * unit);
}

int kt_resident_blocks(const kt_variant *v, const kt_device_info *d)
{
  const kt_kernel_regs_entry *e = v ? compiled(v) : NULL;
  if (!e || !d || v->threads < 1 || d->regs_per_sm < 1 || d->max_threads_per_sm < 1 || d->max_blocks_per_sm < 1 ||
      d->smem_per_sm < 1)
    return v ? v->blocks_per_sm : 0;
  const int warps = (v->threads + 31) / 32;
  int n = d->max_threads_per_sm / (32 * warps);
  if (n > d->max_blocks_per_sm)
    n = d->max_blocks_per_sm;
  /* Registers: whole warps per sub-partition, a block's warps anywhere. */
  const int per_warp = round_up((long long)e->regs * 32, REG_UNIT);
  if (per_warp > 0) {
    const int by_regs = d->regs_per_sm / SUB_PARTITIONS / per_warp * SUB_PARTITIONS / warps;
    if (by_regs < n)
      n = by_regs;
  }
  /* Shared memory: ptxas's static part (the registry's, where it says
   * more), the launch's dynamic part, the system's share. */
  const long long smem_static = e->smem > v->smem_static ? e->smem : v->smem_static;
  const long long per_block = round_up(smem_static + v->smem_dynamic, SMEM_UNIT) + d->smem_reserved;
  if (per_block > 0 && d->smem_per_sm / per_block < n)
    n = (int)(d->smem_per_sm / per_block);
  return n;
}
