/* SPDX-License-Identifier: MIT */
/* runtime/device.c: the GPU's properties and its fingerprint. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"
#include "kt_kernels.h"
#include "registry.h"

void kt_device_fingerprint(kt_device_info *d)
{
  /* What makes tuning results transferable: the same chip (name and
   * compute capability) with the same number of SMs and the same memory.
   * Driver and runtime versions are recorded beside it, not in it. */
  snprintf(d->fingerprint, sizeof d->fingerprint, "%s|sm_%d|%d SMs|%llu MiB", d->name, d->cc, d->sm_count,
           d->mem_bytes >> 20);
}

void kt_device_chip(const kt_device_info *d, char *buf, size_t len)
{
  kt_device_info x = *d;
  kt_device_fingerprint(&x);
  char *bar = strrchr(x.fingerprint, '|');
  if (bar)
    bar[1] = '\0';
  snprintf(buf, len, "%s", x.fingerprint);
}

int kt_device_query(int ordinal, kt_device_info *out, char *err, size_t errlen)
{
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    snprintf(err, errlen, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device found");
    cudaGetLastError();
    return KT_ERR_NO_DEVICE;
  }
  if (ordinal < 0) {
    if ((e = cudaGetDevice(&ordinal)) != cudaSuccess) {
      snprintf(err, errlen, "cudaGetDevice: %s", cudaGetErrorString(e));
      cudaGetLastError(); /* reported here, not left for the application's next check */
      return KT_ERR_CUDA;
    }
  }
  if (ordinal >= count) {
    snprintf(err, errlen, "device %d requested, %d present", ordinal, count);
    return KT_ERR_BAD_DEVICE;
  }
  struct cudaDeviceProp p;
  if ((e = cudaGetDeviceProperties(&p, ordinal)) != cudaSuccess) {
    snprintf(err, errlen, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
    cudaGetLastError();
    return KT_ERR_CUDA;
  }
  memset(out, 0, sizeof *out);
  out->ordinal = ordinal;
  snprintf(out->name, sizeof out->name, "%s", p.name);
  out->cc = p.major * 10 + p.minor;
  out->sm_count = p.multiProcessorCount;
  out->smem_per_sm = (int)p.sharedMemPerMultiprocessor;
  out->smem_optin = (int)p.sharedMemPerBlockOptin;
  out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  out->max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
  out->regs_per_sm = p.regsPerMultiprocessor;
  out->smem_reserved = (int)p.reservedSharedMemPerBlock;
  int cl = 0;
  if (cudaDeviceGetAttribute(&cl, cudaDevAttrClusterLaunch, ordinal) != cudaSuccess)
    cl = 0;
  out->cluster_launch = cl;
  out->mem_bytes = p.totalGlobalMem;
  cudaDriverGetVersion(&out->driver_version);
  cudaRuntimeGetVersion(&out->runtime_version);
  cudaGetLastError();
  kt_device_fingerprint(out);
  return KT_OK;
}

void kt_device_clusters(kt_device_info *d)
{
  memset(d->cluster_sms, 0, sizeof d->cluster_sms);
  /* At one block an SM: more than half the SM's shared memory a block. */
  const int smem = d->smem_per_sm / 2 + 1;
  if (!d->cluster_launch || d->sm_count < 1 || smem > d->smem_optin)
    return;
  int was = -1;
  if (cudaGetDevice(&was) != cudaSuccess || (was != d->ordinal && cudaSetDevice(d->ordinal) != cudaSuccess)) {
    cudaGetLastError();
    return;
  }
  for (int i = 0; i < KT_CLUSTER_SIZES; ++i) {
    const int size = 2 << i;
    int n = 0;
    if (kt_cluster_capacity(size, (size_t)smem, &n) == 0 && n > 0 && (long long)n * size <= d->sm_count)
      d->cluster_sms[i] = n * size;
  }
  if (was != d->ordinal)
    cudaSetDevice(was);
  cudaGetLastError();
}

int kt_cluster_sms(const kt_device_info *d, int cluster)
{
  int i = 0;
  while (i < KT_CLUSTER_SIZES && (2 << i) < cluster)
    ++i;
  const int known = cluster > 1 && i < KT_CLUSTER_SIZES && (2 << i) == cluster && d->cluster_sms[i] > 0;
  return known ? d->cluster_sms[i] : d->sm_count;
}

/* The newest target wins: on an sm_90 GPU of an "sm_80 sm_90" build, the
 * sm_90 code (its own SASS, the cluster variants); on an sm_86 GPU, the
 * sm_80 SASS; on a GPU newer than every target, the newest one's PTX. */
int kt_device_target(const kt_device_info *d)
{
  int best = 0;
  for (int i = 0; i < kt_registry_target_count; ++i) {
    const kt_target *t = &kt_registry_targets[i];
    if ((t->exact ? t->cc == d->cc : t->cc <= d->cc) && t->cc > best)
      best = t->cc;
  }
  return best;
}

int kt_device_supported(const kt_device_info *d, char *err, size_t errlen)
{
  if (kt_device_target(d))
    return KT_OK;
  snprintf(err, errlen, "%s is sm_%d, but this build's kernels are for %s, none of which it can run: build ktune with "
           "ARCHS=sm_%d (or a list with it)", d->name, d->cc, kt_registry_target, d->cc);
  return KT_ERR_UNSUPPORTED_DEVICE;
}

/* Kernels that need scratch (split-K's partial tiles) allocate and free it
 * on their stream.  The device's default pool hands freed memory back to
 * the driver at every synchronisation, so each call would map it afresh;
 * this pool keeps it (release threshold: unlimited).  One per device, for
 * the whole process, shared by every context. */
#define KT_MAX_DEVICES 64
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaMemPool_t pools[KT_MAX_DEVICES];

void *kt_device_pool(int ordinal)
{
  if (ordinal < 0 || ordinal >= KT_MAX_DEVICES)
    return NULL;
  pthread_mutex_lock(&pool_lock);
  if (!pools[ordinal]) {
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = ordinal;
    cudaMemPool_t p;
    if (cudaMemPoolCreate(&p, &props) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep);
      pools[ordinal] = p;
    } else {
      cudaGetLastError();
    }
  }
  void *p = pools[ordinal];
  pthread_mutex_unlock(&pool_lock);
  return p;
}
