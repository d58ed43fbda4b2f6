/* emu_cudart.c -- the CUDA runtime subset of libcudart.so.13, built on the
 * stream/event model of libcuda.so.1 (emu_core.h).  Compiled against the
 * real cuda_runtime_api.h so every prototype is checked; every symbol gets
 * the version node libcudart.so.13 from libcudart.map, as in the real
 * library.  Thread-safety: all functions are thread-safe; the "last error"
 * is per thread, as in CUDA.  None is async-signal-safe. */
#include "emu_core.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

static __thread cudaError_t emu_last_err __attribute__((tls_model("initial-exec")));

static cudaError_t emu_ret(cudaError_t e)
{
  if (e != cudaSuccess && e != cudaErrorNotReady)
    emu_last_err = e;
  return e;
}

EMU_API cudaError_t cudaGetDeviceCount(int *count)
{
  if (!count)
    return emu_ret(cudaErrorInvalidValue);
  *count = emu_device_count();
  return cudaSuccess;
}

EMU_API cudaError_t cudaSetDevice(int device)
{
  return emu_set_device(device) == 0 ? cudaSuccess : emu_ret(cudaErrorInvalidDevice);
}

EMU_API cudaError_t cudaGetDevice(int *device)
{
  if (!device)
    return emu_ret(cudaErrorInvalidValue);
  *device = emu_get_device();
  return cudaSuccess;
}

EMU_API cudaError_t cudaDriverGetVersion(int *v)
{
  if (!v)
    return emu_ret(cudaErrorInvalidValue);
  *v = 13000;
  return cudaSuccess;
}

EMU_API cudaError_t cudaRuntimeGetVersion(int *v) { return cudaDriverGetVersion(v); }

/* Device memory is host memory: every rank is a process on this machine. */
EMU_API cudaError_t cudaMalloc(void **p, size_t size)
{
  if (!p)
    return emu_ret(cudaErrorInvalidValue);
  *p = NULL;
  if (size == 0)
    return cudaSuccess;
  if (posix_memalign(p, 256, size) != 0) {
    *p = NULL;
    return emu_ret(cudaErrorMemoryAllocation);
  }
  return cudaSuccess;
}

/* cudaFree synchronizes the device, as the real one does: a buffer is never
 * released under a stream worker still using it. */
EMU_API cudaError_t cudaFree(void *p)
{
  if (p) {
    emu_device_sync(emu_get_device());
    free(p);
  }
  return cudaSuccess;
}

EMU_API cudaError_t cudaMallocHost(void **p, size_t size) { return cudaMalloc(p, size); }

EMU_API cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
  (void)flags;
  return cudaMalloc(p, size);
}

EMU_API cudaError_t cudaFreeHost(void *p)
{
  free(p);
  return cudaSuccess;
}

struct emu_copy {
  struct emu_work w;
  void *dst;
  const void *src;
  size_t n;
  int value;
  int is_set;
};

static void emu_copy_run(struct emu_work *w)
{
  struct emu_copy *c = (struct emu_copy *)w;
  if (c->is_set)
    memset(c->dst, c->value, c->n);
  else if (c->n)
    memmove(c->dst, c->src, c->n);
  free(c);
}

static cudaError_t emu_copy_async(void *dst, const void *src, size_t n, int value, int is_set, cudaStream_t s)
{
  if (n && (!dst || (!is_set && !src)))
    return emu_ret(cudaErrorInvalidValue);
  struct emu_copy *c = calloc(1, sizeof *c);
  if (!c)
    return emu_ret(cudaErrorMemoryAllocation);
  c->w.run = emu_copy_run;
  c->dst = dst;
  c->src = src;
  c->n = n;
  c->value = value;
  c->is_set = is_set;
  emu_stream_enqueue(s, &c->w);
  return cudaSuccess;
}

/* Synchronous copies are ordered on the legacy default stream: they wait
 * for it and for every blocking stream of the device, then copy. */
EMU_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
  (void)kind;
  if (n && (!dst || !src))
    return emu_ret(cudaErrorInvalidValue);
  emu_stream_sync(NULL);
  if (n)
    memmove(dst, src, n);
  return cudaSuccess;
}

EMU_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                    cudaStream_t s)
{
  (void)kind;
  return emu_copy_async(dst, src, n, 0, 0, s);
}

EMU_API cudaError_t cudaMemset(void *p, int value, size_t n) { return emu_copy_async(p, NULL, n, value, 1, NULL); }

EMU_API cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
  return emu_copy_async(p, NULL, n, value, 1, s);
}

EMU_API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
  if (!s)
    return emu_ret(cudaErrorInvalidValue);
  return emu_stream_create(s, 0) == 0 ? cudaSuccess : emu_ret(cudaErrorMemoryAllocation);
}

EMU_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
  if (!s)
    return emu_ret(cudaErrorInvalidValue);
  return emu_stream_create(s, flags) == 0 ? cudaSuccess : emu_ret(cudaErrorMemoryAllocation);
}

EMU_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
  (void)priority;
  return cudaStreamCreateWithFlags(s, flags);
}

EMU_API cudaError_t cudaStreamDestroy(cudaStream_t s)
{
  emu_stream_destroy(s);
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
  emu_stream_sync(s);
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamQuery(cudaStream_t s) { return emu_stream_query(s) ? cudaSuccess : cudaErrorNotReady; }

EMU_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
  (void)flags;
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  emu_stream_wait_event(s, ev);
  return cudaSuccess;
}

EMU_API cudaError_t cudaDeviceSynchronize(void)
{
  emu_device_sync(emu_get_device());
  return cudaSuccess;
}

EMU_API cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidValue);
  *ev = emu_event_create(0);
  return *ev ? cudaSuccess : emu_ret(cudaErrorMemoryAllocation);
}

EMU_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidValue);
  *ev = emu_event_create(flags);
  return *ev ? cudaSuccess : emu_ret(cudaErrorMemoryAllocation);
}

EMU_API cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  emu_event_record(ev, s);
  return cudaSuccess;
}

EMU_API cudaError_t cudaEventQuery(cudaEvent_t ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  return emu_event_query(ev) ? cudaSuccess : cudaErrorNotReady;
}

EMU_API cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  emu_event_sync(ev);
  return cudaSuccess;
}

EMU_API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
  if (!ms || !a || !b)
    return emu_ret(cudaErrorInvalidValue);
  int rc = emu_event_elapsed(a, b, ms);
  if (rc == -EAGAIN)
    return cudaErrorNotReady;
  return rc == 0 ? cudaSuccess : emu_ret(cudaErrorInvalidResourceHandle);
}

EMU_API cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  emu_event_destroy(ev);
  return cudaSuccess;
}

EMU_API cudaError_t cudaGetLastError(void)
{
  cudaError_t e = emu_last_err;
  emu_last_err = cudaSuccess;
  return e;
}

EMU_API cudaError_t cudaPeekAtLastError(void) { return emu_last_err; }

static const struct {
  cudaError_t code;
  const char *name, *text;
} emu_rt_errors[] = {
  { cudaSuccess, "cudaSuccess", "no error" },
  { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
  { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
  { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
  { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
  { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
  { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
  { cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};

EMU_API const char *cudaGetErrorString(cudaError_t e)
{
  for (size_t i = 0; i < sizeof emu_rt_errors / sizeof emu_rt_errors[0]; i++)
    if (emu_rt_errors[i].code == e)
      return emu_rt_errors[i].text;
  return "unrecognized error code";
}

EMU_API const char *cudaGetErrorName(cudaError_t e)
{
  for (size_t i = 0; i < sizeof emu_rt_errors / sizeof emu_rt_errors[0]; i++)
    if (emu_rt_errors[i].code == e)
      return emu_rt_errors[i].name;
  return "cudaErrorUnknown";
}

/* Per-thread-default-stream spellings (programs built with
 * --default-stream per-thread call these).  The emulator maps the
 * per-thread stream onto the legacy one, so they are plain forwards. */
EMU_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s);
EMU_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return cudaStreamSynchronize(s); }
EMU_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s);
EMU_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return cudaStreamQuery(s); }
EMU_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t ev, unsigned int flags);
EMU_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
  return cudaStreamWaitEvent(s, ev, flags);
}
EMU_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t ev, cudaStream_t s);
EMU_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t ev, cudaStream_t s) { return cudaEventRecord(ev, s); }
EMU_API cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st);
EMU_API cudaError_t cudaMemcpyAsync_ptsz(void *d, const void *s, size_t n, enum cudaMemcpyKind k, cudaStream_t st)
{
  return cudaMemcpyAsync(d, s, n, k, st);
}
EMU_API cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s);
EMU_API cudaError_t cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s) { return cudaMemsetAsync(p, v, n, s); }
EMU_API cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
EMU_API cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { return cudaMemcpy(d, s, n, k); }
EMU_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n);
EMU_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n) { return cudaMemset(p, v, n); }
