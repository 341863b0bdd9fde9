/* SPDX-License-Identifier: MIT */
/* runtime/kt_launch.h: what the generated launchers share.
 *
 * Included by the generated .cu files only; not part of the library's API.
 */
#ifndef KT_LAUNCH_H
#define KT_LAUNCH_H

#include <stddef.h>
#include <cuda_runtime.h>
#include "kt_variant.h"

#define KT_LAUNCH_MAX_DEVICES 64

/* What one kernel has set up on each device: per_sm[d] is 0 until
 * kt_launch_prepare has run on device d, then the blocks per SM it found
 * (at least 1).  Each launcher keeps one, static, so zero-initialised. */
typedef struct kt_launch_once {
  int per_sm[KT_LAUNCH_MAX_DEVICES];
} kt_launch_once;

/*
 * A kernel's attributes belong to a device, not to the process:
 * cudaFuncSetAttribute applies to the current device only, and how many
 * blocks fit an SM depends on the device.  Done once per process, they
 * would be missing on every other GPU, where a kernel that needs over 48 KB
 * of dynamic shared memory then fails to launch.  So the work is done, and
 * its answer cached, once per device: the current one, below 64.
 *
 * For `kernel`, on the current device, the first time only:
 *   smem_optin > 0       allow that many bytes of dynamic shared memory
 *                        (cudaFuncAttributeMaxDynamicSharedMemorySize);
 *   nonportable_cluster  allow clusters of more than 8 blocks;
 *   threads > 0          ask how many blocks of `threads` threads fit an SM
 *                        by threads and registers (no dynamic shared memory).
 * Sets *per_sm (unless NULL) to that answer, at least 1 (1 when threads is
 * 0).  Returns cudaSuccess or the first error; an error caches nothing, so
 * the next call tries again.  Thread-safe: two first calls on one device may
 * both do the work, which sets the same attributes and finds the same
 * answer, so relaxed atomics on the cached value are enough.
 */
static inline cudaError_t kt_launch_prepare(kt_launch_once *once, const void *kernel, size_t smem_optin,
                                            int nonportable_cluster, int threads, int *per_sm)
{
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess)
    return err;
  if (dev < 0 || dev >= KT_LAUNCH_MAX_DEVICES)
    return cudaErrorInvalidDevice;
  int n = __atomic_load_n(&once->per_sm[dev], __ATOMIC_RELAXED);
  if (n == 0) {
    if (nonportable_cluster) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (err != cudaSuccess)
        return err;
    }
    if (smem_optin > 0) {
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_optin);
      if (err != cudaSuccess)
        return err;
    }
    n = 1;
    if (threads > 0) {
      err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0);
      if (err != cudaSuccess)
        return err;
      if (n < 1)
        n = 1;
    }
    __atomic_store_n(&once->per_sm[dev], n, __ATOMIC_RELAXED);
  }
  if (per_sm)
    *per_sm = n;
  return cudaSuccess;
}

/*
 * Launch `kernel` and return this launch's status alone.  cudaLaunchKernelEx
 * returns it; a <<<>>> launch followed by cudaGetLastError would also
 * return, and clear, an error that the application's own calls had left
 * pending, and report a launch that was queued as failed.
 */
template <typename... P, typename... A>
static inline cudaError_t kt_launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                           cudaStream_t stream, A... args)
{
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

#endif
