/* emu_test.h -- helpers shared by the emulator's tests (header-only).
 *
 * Thread-safety: the fork driver is called from the main thread of a test
 * before any CUDA/NCCL call (children must not inherit worker threads).
 * Signal-safety: none.
 *
 * Exit codes: 0 pass, 1 fail, 77 skip; assertions are tests/nt_test.h's
 * (NT_RET_CHECK and NT_RET_FAIL: a rank function returns 1). */
#ifndef EMU_TEST_H
#define EMU_TEST_H

#include <cuda_runtime_api.h>
#include <errno.h>
#include <math.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../nt_test.h"

/* The NCCL call returns ncclSuccess (T_NCCL), or want (T_NCCL_IS); the
 * CUDA call cudaSuccess (T_CUDA).  Else NT_RET_FAIL. */
#define T_NCCL(call)                                                           \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess)                                                     \
      NT_RET_FAIL("%s -> %d (%s)", #call, (int)r_, ncclGetErrorString(r_));         \
  } while (0)

#define T_CUDA(call)                                                           \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      NT_RET_FAIL("%s -> %d (%s)", #call, (int)e_, cudaGetErrorString(e_));         \
  } while (0)

#define T_NCCL_IS(call, want)                                                  \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != (want))                                                          \
      NT_RET_FAIL("%s returned %d (%s), want %d", #call, (int)r_, ncclGetErrorString(r_), (int)(want)); \
  } while (0)

static inline double t_now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void t_sleep_ms(int ms)
{
  struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

typedef int (*t_rank_fn)(int rank, int nranks, ncclUniqueId id, void *arg);

/* Fork `nranks` processes sharing one unique id; each runs fn and exits
 * with its result.  Returns 0 when every rank exited 0, else 1 (after
 * killing the rest when `timeout_s` passes). */
static inline int t_fork_ranks(int nranks, t_rank_fn fn, void *arg, double timeout_s)
{
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "FAIL: ncclGetUniqueId\n");
    return 1;
  }
  fflush(NULL);
  pid_t pids[64];
  for (int r = 0; r < nranks; r++) {
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("fork");
      return 1;
    }
    if (pids[r] == 0) {
      int rc = fn(r, nranks, id, arg);
      fflush(NULL);
      _exit(rc);
    }
  }
  int fails = 0, left = nranks;
  double deadline = t_now() + timeout_s;
  while (left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      left--;
      int r = 0;
      while (r < nranks && pids[r] != p)
        r++;
      if (r < nranks)
        pids[r] = 0;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rank %d: %s %d\n", r, WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        fails++;
      }
      continue;
    }
    if (t_now() > deadline) {
      fprintf(stderr, "FAIL: timeout after %.0f s, killing ranks\n", timeout_s);
      for (int r = 0; r < nranks; r++)
        if (pids[r] > 0)
          kill(pids[r], SIGKILL);
      while (waitpid(-1, NULL, 0) > 0)
        ;
      return 1;
    }
    t_sleep_ms(10);
  }
  return fails ? 1 : 0;
}

/* ---- data types: encode by search, decode by formula, independent of the
 * emulator's own conversion code. */

static inline size_t t_dsize(ncclDataType_t t)
{
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  default: return 8;
  }
}

static inline int t_is_float(ncclDataType_t t)
{
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

static inline double t_small_decode(unsigned v, int e, int m, int fn)
{
  unsigned s = (v >> (e + m)) & 1, ex = (v >> m) & ((1u << e) - 1), man = v & ((1u << m) - 1);
  int bias = (1 << (e - 1)) - 1;
  double r;
  if (ex == 0)
    r = ldexp(man, 1 - bias - m);
  else if (!fn && ex == (1u << e) - 1)
    r = man ? NAN : INFINITY;
  else if (fn && ex == (1u << e) - 1 && man == (1u << m) - 1)
    r = NAN;
  else
    r = ldexp(man + (1u << m), (int)ex - bias - m);
  return s ? -r : r;
}

static inline double t_get(const void *buf, size_t i, ncclDataType_t t)
{
  const unsigned char *p = (const unsigned char *)buf + i * t_dsize(t);
  switch (t) {
  case ncclInt8: return *(const int8_t *)p;
  case ncclUint8: return *p;
  case ncclInt32: { int32_t v; memcpy(&v, p, 4); return v; }
  case ncclUint32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case ncclInt64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
  case ncclUint64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
  case ncclFloat32: { float v; memcpy(&v, p, 4); return v; }
  case ncclFloat64: { double v; memcpy(&v, p, 8); return v; }
  case ncclFloat16: { uint16_t v; memcpy(&v, p, 2); return t_small_decode(v, 5, 10, 0); }
  case ncclBfloat16: { uint16_t v; memcpy(&v, p, 2); return t_small_decode(v, 8, 7, 0); }
  case ncclFloat8e4m3: return t_small_decode(*p, 4, 3, 1);
  case ncclFloat8e5m2: return t_small_decode(*p, 5, 2, 0);
  default: return NAN;
  }
}

/* Store an exactly representable value (integers in range for the type). */
static inline int t_put(void *buf, size_t i, ncclDataType_t t, double x)
{
  unsigned char *p = (unsigned char *)buf + i * t_dsize(t);
  switch (t) {
  case ncclInt8: case ncclUint8: case ncclInt32: case ncclUint32: case ncclInt64: case ncclUint64: {
    uint64_t v = (uint64_t)(int64_t)x;   /* wraps like the device would */
    memcpy(p, &v, t_dsize(t));
    return 0;
  }
  case ncclFloat32: { float v = (float)x; memcpy(p, &v, 4); return 0; }
  case ncclFloat64: memcpy(p, &x, 8); return 0;
  default: {
    /* Memoize small integers: the search below is slow. */
    static int memo[12][1024];
    int key = (int)x;
    if ((double)key == x && key >= 0 && key < 1024 && memo[t][key]) {
      unsigned c = (unsigned)memo[t][key] - 1;
      if (t_dsize(t) == 2) {
        uint16_t h = (uint16_t)c;
        memcpy(p, &h, 2);
      } else {
        *p = (unsigned char)c;
      }
      return 0;
    }
    unsigned ncodes = t_dsize(t) == 2 ? 65536u : 256u;
    for (unsigned c = 0; c < ncodes; c++) {
      double d;
      if (t == ncclFloat16) d = t_small_decode(c, 5, 10, 0);
      else if (t == ncclBfloat16) d = t_small_decode(c, 8, 7, 0);
      else if (t == ncclFloat8e4m3) d = t_small_decode(c, 4, 3, 1);
      else d = t_small_decode(c, 5, 2, 0);
      if (d == x && !(x == 0 && signbit(d))) {
        if ((double)key == x && key >= 0 && key < 1024)
          memo[t][key] = (int)c + 1;
        if (t_dsize(t) == 2) {
          uint16_t h = (uint16_t)c;
          memcpy(p, &h, 2);
        } else {
          *p = (unsigned char)c;
        }
        return 0;
      }
    }
    return -1;
  }
  }
}

/* Relative tolerance of a type for results that may have been rounded. */
static inline double t_tol(ncclDataType_t t)
{
  switch (t) {
  case ncclFloat8e5m2: return 0.26;
  case ncclFloat8e4m3: return 0.13;
  case ncclBfloat16: return 0.01;
  case ncclFloat16: return 0.001;
  case ncclFloat32: return 1e-6;
  case ncclFloat64: return 1e-12;
  default: return 0;
  }
}

/* Integer results wrap to the type's width: compare in that arithmetic. */
static inline double t_wrap(double x, ncclDataType_t t)
{
  unsigned char b[8];
  if (t_is_float(t))
    return x;
  t_put(b, 0, t, x);
  return t_get(b, 0, t);
}

static inline int t_close(double got, double want, ncclDataType_t t)
{
  want = t_wrap(want, t);
  if (got == want)
    return 1;
  return fabs(got - want) <= t_tol(t) * fabs(want);
}

static const char *const t_dtype_names[] = { "int8", "uint8", "int32", "uint32", "int64", "uint64",
                                             "float16", "float32", "float64", "bfloat16", "e4m3", "e5m2" };

#endif
