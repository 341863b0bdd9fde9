/* SPDX-License-Identifier: MIT */
/* ktune.h: autotuned CUDA kernels, dispatched to the winner for this GPU.
 *
 *   kt_context *ctx;
 *   if (kt_open(&ctx, NULL) != KT_OK) ...;
 *   kt_matmul(ctx, M, N, K, 1.0f, dA, K, dB, N, 0.0f, dC, N, stream);
 *   kt_close(ctx);
 *
 * Every function returns KT_OK (0) or a KT_ERR_* code; kt_strerror() says
 * what it means.  The library never exits and never prints: diagnostics go
 * to the optional log callback in kt_options.  Pointers passed to kt_matmul
 * and kt_histogram are device pointers; work is queued on `stream` and the
 * call returns without waiting for it.
 */
#ifndef KTUNE_H
#define KTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KT_API __attribute__((visibility("default")))
#else
#define KT_API
#endif

/* The version of this header.  These three lines are the one place it is
 * written: the Makefile reads them (libktune.so.MAJOR.MINOR.PATCH, ktune.pc),
 * so keep each a plain number.  MAJOR changes when the ABI does. */
#define KT_VERSION_MAJOR 0
#define KT_VERSION_MINOR 1
#define KT_VERSION_PATCH 0
#define KT_VERSION_STR_(x) #x
#define KT_VERSION_XSTR_(x) KT_VERSION_STR_(x)
#define KT_VERSION_STRING \
  KT_VERSION_XSTR_(KT_VERSION_MAJOR) "." KT_VERSION_XSTR_(KT_VERSION_MINOR) "." KT_VERSION_XSTR_(KT_VERSION_PATCH)

/* The version of the library linked, "MAJOR.MINOR.PATCH" (KT_VERSION_STRING
 * when it was built); static storage.  Thread-safe. */
KT_API const char *kt_version(void);

/* A CUDA stream; the same type as cudaStream_t.  NULL is the default stream. */
typedef struct CUstream_st *kt_stream;

/* Status codes and their messages, in one table. */
#define KT_STATUS_TABLE(X)                                                                        \
  X(KT_OK, 0, "success")                                                                          \
  X(KT_ERR_NULL_POINTER, 1, "a required pointer argument is NULL")                                \
  X(KT_ERR_BAD_SIZE, 2, "a size argument is out of range (M, N, K >= 0; nbins, batch >= 1)")      \
  X(KT_ERR_BAD_LD, 3, "a leading dimension is smaller than the row it strides over")              \
  X(KT_ERR_OVERFLOW, 4, "the problem is too large: its byte count or index range overflows")      \
  X(KT_ERR_NOT_DEVICE_POINTER, 5, "a pointer is not device memory of the context's GPU")          \
  X(KT_ERR_MISALIGNED, 6, "a pointer is not aligned to its element size")                         \
  X(KT_ERR_BAD_CONTEXT, 7, "the context is NULL or has been closed")                              \
  X(KT_ERR_NO_DEVICE, 8, "no CUDA device is available (no GPU, or no driver)")                    \
  X(KT_ERR_BAD_DEVICE, 9, "the requested device does not exist")                                  \
  X(KT_ERR_UNSUPPORTED_DEVICE, 10, "the device is older than the kernels were built for")         \
  X(KT_ERR_NO_VARIANT, 11, "no built kernel variant can serve this call on this device")          \
  X(KT_ERR_LAUNCH, 12, "a kernel launch failed")                                                  \
  X(KT_ERR_CUDA, 13, "a CUDA runtime call failed")                                                \
  X(KT_ERR_NO_MEMORY, 14, "out of host memory")                                                   \
  X(KT_ERR_DB_OPEN, 15, "the tuning database cannot be opened or read")                           \
  X(KT_ERR_DB_FOREIGN, 16, "the file is not a ktune tuning database")                             \
  X(KT_ERR_DB_VERSION, 17, "the tuning database has a newer schema than this ktune")              \
  X(KT_ERR_DB_WRITE, 18, "writing the tuning database failed")                                    \
  X(KT_ERR_BAD_OPTION, 19, "an option or argument is invalid")                                    \
  X(KT_ERR_UNKNOWN_VARIANT, 20, "no variant of that name exists in this build")                   \
  X(KT_ERR_DB_DAMAGED, 21, "the tuning database is damaged (it fails SQLite's or ktune's check)") \
  X(KT_ERR_DB_MISSING, 22, "the tuning database does not exist")                                  \
  X(KT_ERR_BAD_STRIDE, 23, "a batch stride is negative or makes two outputs overlap")             \
  X(KT_ERR_BAD_TYPE, 24, "an input type or an op is not one of kt_dtype or kt_op")                \
  X(KT_ERR_DEVICE_MEMORY, 25, "out of GPU memory: the call's scratch could not be allocated")

/* The largest status code. */
#define KT_STATUS_LAST KT_ERR_DEVICE_MEMORY

typedef enum kt_status {
#define KT_STATUS_ENUM(name, value, msg) name = value,
  KT_STATUS_TABLE(KT_STATUS_ENUM)
#undef KT_STATUS_ENUM
} kt_status;

/* The message for a status code; never NULL.  Thread-safe. */
KT_API const char *kt_strerror(int status);

typedef struct kt_context kt_context;

enum kt_log_level { KT_LOG_ERROR = 0, KT_LOG_WARN = 1, KT_LOG_INFO = 2, KT_LOG_DEBUG = 3 };
typedef void (*kt_log_fn)(int level, const char *message, void *user);

typedef struct kt_options {
  int device;                 /* CUDA device ordinal; -1 = the current device */
  const char *db_path;        /* the user database: NULL = $KTUNE_DB, else the user's
                                 data folder ($XDG_DATA_HOME or ~/.local/share)/ktune/ktune.db */
  kt_log_fn log;              /* NULL = stderr if $KTUNE_LOG is warn, info or debug, else silent */
  void *log_user;             /* passed to log */
  int log_level;              /* messages up to this level are logged */
  const char *system_db_path; /* shipped results under the user's: NULL = $KTUNE_SYSTEM_DB,
                                 else the installed ones; "" = none */
} kt_options;

/* The options that kt_open(ctx, NULL) uses.  Thread-safe. */
KT_API kt_options kt_default_options(void);

/* Open a context on a device and load its tuned winners (once; no SQL on the
 * hot path).  A missing, unreadable or foreign database is not an error: the
 * context logs a warning and uses the default variants.  The caller owns
 * *ctx and frees it with kt_close.  Thread-safe. */
KT_API int kt_open(kt_context **ctx, const kt_options *opts);

/* Free a context.  Not to be called while another thread uses ctx.  NULL is a no-op.
 * Like a freed pointer, a closed context is not to be used again: calls on
 * it answer KT_ERR_BAD_CONTEXT only until a new context takes its address.
 * It first adds the problems the context served, or was asked about by a
 * *_choice call, without a tuned entry of their own to "<user
 * database>.misses", for `ktune tune` to tune (KTUNE_MISSES=off: none are
 * kept; nor where the user database was refused); a failure there is only
 * logged. */
KT_API void kt_close(kt_context *ctx);

/* C = alpha * A * B + beta * C, row-major fp32 device pointers: A is M x K
 * with row stride lda >= K, B is K x N (ldb >= N), C is M x N (ldc >= N).
 * Any 4-byte aligned pointers and any leading dimensions.  M, N and K may
 * be 0, as in BLAS: where M or N is 0, C is empty and the call returns
 * once its arguments are checked; where K == 0 or alpha == 0 there is no
 * product to add, and C = beta C, A and B not read (an Inf or NaN in them
 * does not reach C).  With beta == 0, C is not read (a NaN in it does not
 * stay); C must not overlap A or B.  The call may take scratch
 * from the device's memory pool, in stream order (a split K, or an aligned
 * copy of B).  Safe to call from several threads on one context. */
KT_API int kt_matmul(kt_context *ctx, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc, kt_stream stream);

/* Input types of kt_matmul_ex.  The product is accumulated in FP32 and C is
 * FP32 whatever the inputs. */
typedef enum kt_dtype {
  KT_F32 = 0,  /* float, multiplied exactly as FP32 (CUDA cores) */
  KT_TF32 = 1, /* float, cut to TF32 (10 mantissa bits) and multiplied on tensor cores: rounded to
                  nearest where ktune repacks the operand, truncated where the tensor cores read
                  it in place (which depends on the layout and alignment) */
  KT_BF16 = 2, /* bfloat16 values (16 bits each: __nv_bfloat16) */
  KT_F16 = 3   /* IEEE half values (16 bits each: __half) */
} kt_dtype;

/* op(X): KT_OP_N uses X as stored, KT_OP_T its transpose. */
typedef enum kt_op { KT_OP_N = 0, KT_OP_T = 1 } kt_op;

/* One (batched) matrix product for kt_matmul_ex:
 *   C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b],  b = 0 .. batch-1,
 * row-major with element (not byte) leading dimensions and batch strides.
 * op(A) is M x K: A is stored M x K (op N, lda >= K) or K x M (op T,
 * lda >= M); op(B) is K x N: B is stored K x N (op N, ldb >= N) or N x K
 * (op T, ldb >= K); C is M x N (ldc >= N).  X[b] starts stride_x elements
 * after X[b-1]; every stride is >= 0 (KT_ERR_BAD_STRIDE, even where batch
 * is 1); A's and B's may be 0 (one operand for the whole
 * batch), C's must keep the outputs apart: each entry after the last
 * element of the one before, or side by side in the rows of one wider C
 * (stride_c >= N and (batch - 1) * stride_c + N <= ldc).  As in BLAS (and
 * kt_matmul): where M or N is 0 nothing runs; where K == 0 or alpha == 0,
 * C = beta C and A and B are not read.  With beta == 0, C is not read.  C
 * must not overlap A or B. */
typedef struct kt_matmul_desc {
  kt_dtype type; /* of A and B */
  kt_op op_a, op_b;
  int64_t M, N, K; /* each >= 0 */
  int64_t batch;   /* >= 1; 0 in a zeroed desc is taken as 1 */
  float alpha, beta;
  const void *A;
  int64_t lda, stride_a;
  const void *B;
  int64_t ldb, stride_b;
  float *C;
  int64_t ldc, stride_c;
} kt_matmul_desc;

/* The product a kt_matmul_desc describes.  KT_F32 is exact FP32 on the CUDA
 * cores: one product, or a batch whose every entry fills the GPU by
 * itself, is kt_matmul entry by entry (an op-T operand transposed into
 * scratch first; a K longer than the scratch holds goes a panel of K at a
 * time, each adding to C); a batch of smaller entries (or a transpose for
 * which the device's pool has no room) runs in one launch of a CUDA-core
 * kernel of the tensor-core family.  The other types run on
 * tensor cores where the GPU has them (sm_80 on: mma.sync; Hopper: also
 * wgmma) and on the CUDA cores otherwise; every type, op, leading
 * dimension, alignment and batch is served.  Bad arguments are refused
 * before anything is launched (KT_ERR_BAD_TYPE, _BAD_SIZE, _BAD_LD,
 * _BAD_STRIDE, _MISALIGNED, _OVERFLOW, ...).  The call may take scratch
 * for repacked or transposed operands from the device's memory pool (at
 * most 256 MiB an operand), stream-ordered.  desc is only read during the
 * call.  Safe to call from several threads on one context. */
KT_API int kt_matmul_ex(kt_context *ctx, const kt_matmul_desc *desc, kt_stream stream);

/* bins[b] = count of samples s with clamp(s, 0, nbins - 1) == b, for the n
 * int32 device samples; bins (nbins uint32 on the device) is overwritten.
 * n may be 0 (bins are zeroed) and at most 2^32 - 1; nbins at most
 * INT_MAX (KT_ERR_OVERFLOW past it).  samples and bins must not overlap.
 * Past one block's shared memory it may take scratch (2 bytes a sample, at
 * most 257 MiB) from the device's memory pool, as kt_matmul_ex does.  Safe
 * to call from several threads on one context. */
KT_API int kt_histogram(kt_context *ctx, const int32_t *samples, uint64_t n, uint32_t *bins, int64_t nbins,
                        kt_stream stream);

/* Why a call would use the variant it uses.  The *_choice functions below
 * clear it first: where they refuse the call (any code but KT_OK), every
 * string in it is "". */
typedef struct kt_choice {
  char variant[96]; /* registry name, as in generated/<family>/<variant>.cu */
  int tuned;        /* 1: a tuned winner; 0: the untuned default */
  char matched[96]; /* the tuned problem it came from, "" when untuned */
  char reason[256]; /* one line, for people */
  char source[320]; /* the database and layer the ranking came from; "" when untuned */
} kt_choice;

/* Which variant kt_matmul would run for these arguments, and why; checks the
 * arguments as kt_matmul does but launches nothing.  Where M, N or K is 0
 * the variant is "" (nothing is multiplied; the reason says so); alpha,
 * which it is not given, runs none either where it is 0.  Thread-safe. */
KT_API int kt_matmul_choice(kt_context *ctx, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                            const float *B, int64_t ldb, const float *C, int64_t ldc, kt_choice *out);

/* Which variant kt_matmul_ex would run for desc (where KT_F32 goes to
 * kt_matmul: its choice for batch entry 0, for an op T its first panel
 * from scratch), and why ("" where M, N, K or alpha is 0: nothing is
 * multiplied);
 * checks desc as kt_matmul_ex does but launches nothing.  Thread-safe. */
KT_API int kt_matmul_ex_choice(kt_context *ctx, const kt_matmul_desc *desc, kt_choice *out);

/* Which variant kt_histogram would run, and why.  Thread-safe. */
KT_API int kt_histogram_choice(kt_context *ctx, const int32_t *samples, uint64_t n, const uint32_t *bins, int64_t nbins,
                               kt_choice *out);

/* A one-line description of the context's device ("NVIDIA H100 80GB HBM3,
 * sm_90, 132 SMs").  Valid until kt_close; "(no context)" for NULL or a
 * closed context.  Thread-safe. */
KT_API const char *kt_device_name(const kt_context *ctx);

/* Number of tuned problems loaded for this device (for inspection); 0
 * also for NULL or a closed context.  Thread-safe. */
KT_API int kt_tuned_count(const kt_context *ctx);

/* On-line tuning of kt_matmul (FP32, op N, N), off by default.  With
 * `candidates` from 2 to 8, the first calls of a shape that the database
 * has not tuned run, in turn, up to that many of the dispatch model's picks
 * predicted within 1.25x of its first (its pick, the best of each other
 * kernel kind, then its next best), each timed three times with CUDA
 * events on the call's stream (read by later calls, never waited on; a
 * call being captured into a graph is not timed), and the fastest then
 * serves the shape for the rest of the context's life.  Every candidate
 * is a tuned variant, checked before it was ranked, that serves the call:
 * results stay within the documented bound whichever runs.  0 stops
 * racing.  kt_open starts it from $KTUNE_ONLINE: off (the default), on (4
 * candidates) or 2..8.  kt_matmul_choice reports a race.
 * KT_ERR_BAD_OPTION for any other count.  Thread-safe. */
KT_API int kt_online(kt_context *ctx, int candidates);

#ifdef __cplusplus
}
#endif

#endif
