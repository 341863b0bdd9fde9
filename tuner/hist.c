/* tuner/hist.c: what the tuner knows about the histogram family
 * (kt_tune_hist_): its inputs, its exact CPU reference and its check
 * (hist.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "hist.h"

void kt_tune_hist_samples(int *out, size_t n, long long nbins, const char *dist, kt_rng *r)
{
  const int skewed = dist && strcmp(dist, "skewed") == 0;
  const long long hot = nbins / 100 > 0 ? nbins / 100 : 1;
  const long long spread = nbins / hot; /* hot bins are spread over the range */
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = kt_rng_next(r);
    const unsigned sel = (unsigned)(x & 1023);
    const uint64_t y = x >> 10;
    long long s;
    if (sel == 0)
      s = -1 - (long long)(y % 1000); /* below the range: counts in bin 0 */
    else if (sel == 1)
      s = nbins + (long long)(y % 1000); /* above: counts in bin nbins - 1 */
    else if (skewed && (y % 10) < 8)
      s = (long long)((y / 10) % hot) * spread;
    else
      s = (long long)((y / 10) % (uint64_t)nbins);
    out[i] = (int)s;
  }
}

void kt_tune_hist_reference(const int *samples, size_t n, long long nbins, unsigned *bins)
{
  memset(bins, 0, sizeof(unsigned) * (size_t)nbins);
  for (size_t i = 0; i < n; ++i) {
    const int s = samples[i];
    bins[s < 0 ? 0 : s >= nbins ? nbins - 1 : s]++;
  }
}

void kt_tune_hist_check(const kt_variant *v, const kt_device_info *dev, long long nbins, size_t n, int offset,
                        const char *dist, uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  int *s = malloc(sizeof(int) * (n + 1));
  unsigned *ref = malloc(sizeof(unsigned) * (size_t)nbins), *got = malloc(sizeof(unsigned) * (size_t)nbins);
  int *ds = NULL;
  unsigned *dbins = NULL;
  if (!s || !ref || !got) {
    snprintf(out->reason, sizeof out->reason, "out of host memory");
    goto done;
  }
  kt_tune_hist_samples(s, n, nbins, dist, &r);
  kt_tune_hist_reference(s, n, nbins, ref);
  if (kt_measure_cuda_failed(out, cudaMalloc((void **)&ds, sizeof(int) * (n + 4)), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMalloc((void **)&dbins, sizeof(unsigned) * (size_t)nbins), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMemcpy(ds + offset, s, sizeof(int) * n, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemset(dbins, 0xab, sizeof(unsigned) * (size_t)nbins), "cudaMemset"))
    goto done;
  kt_hist_args a = {ds + offset, n, dbins, (int)nbins, dev->sm_count, dev->smem_per_sm, dev->smem_optin};
  if (kt_measure_cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch") ||
      kt_measure_cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      kt_measure_cuda_failed(out, cudaMemcpy(got, dbins, sizeof(unsigned) * (size_t)nbins, cudaMemcpyDeviceToHost),
                             "cudaMemcpy"))
    goto done;
  long long wrong = 0, first = -1;
  for (long long b = 0; b < nbins; ++b)
    if (got[b] != ref[b]) {
      if (first < 0)
        first = b;
      wrong++;
    }
  out->worst = (double)wrong;
  out->ok = wrong == 0;
  if (!out->ok)
    snprintf(out->reason, sizeof out->reason, "%lld of %lld bins wrong (bin %lld: %u, expected %u) n=%zu offset %d %s",
             wrong, nbins, first, got[first], ref[first], n, offset, dist);
done:
  cudaFree(ds);
  cudaFree(dbins);
  free(s);
  free(ref);
  free(got);
}
