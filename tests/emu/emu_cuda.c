/* emu_cuda.c -- the CUDA driver API subset of libcuda.so.1.
 *
 * cuda.h is deliberately not included: it #defines plain names to their
 * versioned twins (cuEventDestroy -> cuEventDestroy_v2, per-thread-stream
 * _ptsz variants), and a tracer may dlsym either spelling, so both are
 * defined here by hand with ABI-identical types (CUresult is an int-sized
 * enum, handles are pointers).  Every function is thread-safe; none is
 * async-signal-safe except the event and stream queries. */
#include "emu_core.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result;
typedef struct CUstream_st *cu_stream;
typedef struct CUevent_st *cu_event;
typedef struct emu_ctx *cu_context;

#define CU_SUCCESS 0
#define CU_INVALID_VALUE 1
#define CU_INVALID_DEVICE 101
#define CU_INVALID_CONTEXT 201
#define CU_INVALID_HANDLE 400
#define CU_NOT_FOUND 500
#define CU_NOT_READY 600
#define CU_OUT_OF_MEMORY 2

/* One primary context per emulated device; CUcontext points into here. */
struct emu_ctx {
  int device;
};
static struct emu_ctx emu_ctxs[64];

/* Filled once at load, before any thread can ask: emu_ctx_of is then a pure
 * read, safe from every thread (TSan flagged the former write-on-read). */
__attribute__((constructor)) static void emu_ctx_init(void)
{
  for (int i = 0; i < 64; i++)
    emu_ctxs[i].device = i;
}

static cu_context emu_ctx_of(int dev)
{
  return &emu_ctxs[dev];
}

EMU_API cu_result cuInit(unsigned flags)
{
  (void)flags;
  return CU_SUCCESS;
}

EMU_API cu_result cuDriverGetVersion(int *v)
{
  if (!v)
    return CU_INVALID_VALUE;
  *v = 13000;
  return CU_SUCCESS;
}

EMU_API cu_result cuDeviceGetCount(int *n)
{
  if (!n)
    return CU_INVALID_VALUE;
  *n = emu_device_count();
  return CU_SUCCESS;
}

EMU_API cu_result cuDeviceGet(int *dev, int ordinal)
{
  if (!dev)
    return CU_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= emu_device_count())
    return CU_INVALID_DEVICE;
  *dev = ordinal;
  return CU_SUCCESS;
}

EMU_API cu_result cuCtxGetCurrent(cu_context *pctx)
{
  if (!pctx)
    return CU_INVALID_VALUE;
  *pctx = emu_ctx_of(emu_get_device());
  return CU_SUCCESS;
}

EMU_API cu_result cuCtxSetCurrent(cu_context ctx)
{
  if (!ctx)
    return CU_SUCCESS;   /* "unbind": the emulator keeps the device */
  if (ctx < emu_ctxs || ctx >= emu_ctxs + 64)
    return CU_INVALID_CONTEXT;
  return emu_set_device(ctx->device) == 0 ? CU_SUCCESS : CU_INVALID_CONTEXT;
}

EMU_API cu_result cuCtxGetDevice(int *dev)
{
  if (!dev)
    return CU_INVALID_VALUE;
  *dev = emu_get_device();
  return CU_SUCCESS;
}

EMU_API cu_result cuCtxSynchronize(void)
{
  emu_device_sync(emu_get_device());
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamGetCtx(cu_stream s, cu_context *pctx)
{
  if (!pctx)
    return CU_INVALID_VALUE;
  *pctx = emu_ctx_of(emu_stream_resolve(s)->device);
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamGetCtx_ptsz(cu_stream s, cu_context *pctx) { return cuStreamGetCtx(s, pctx); }

EMU_API cu_result cuStreamGetCtx_v2(cu_stream s, cu_context *pctx, void **green)
{
  if (green)
    *green = NULL;
  return cuStreamGetCtx(s, pctx);
}

EMU_API cu_result cuStreamGetCtx_v2_ptsz(cu_stream s, cu_context *pctx, void **green)
{
  return cuStreamGetCtx_v2(s, pctx, green);
}

/* Graph capture is not emulated: no stream is ever capturing. */
EMU_API cu_result cuStreamIsCapturing(cu_stream s, int *status)
{
  (void)s;
  if (!status)
    return CU_INVALID_VALUE;
  *status = 0;   /* CU_STREAM_CAPTURE_STATUS_NONE */
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamIsCapturing_ptsz(cu_stream s, int *status) { return cuStreamIsCapturing(s, status); }

EMU_API cu_result cuStreamCreate(cu_stream *ps, unsigned flags)
{
  if (!ps)
    return CU_INVALID_VALUE;
  return emu_stream_create(ps, flags) == 0 ? CU_SUCCESS : CU_OUT_OF_MEMORY;
}

EMU_API cu_result cuStreamDestroy(cu_stream s)
{
  emu_stream_destroy(s);
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamDestroy_v2(cu_stream s) { return cuStreamDestroy(s); }

EMU_API cu_result cuStreamSynchronize(cu_stream s)
{
  emu_stream_sync(s);
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamSynchronize_ptsz(cu_stream s) { return cuStreamSynchronize(s); }

EMU_API cu_result cuStreamQuery(cu_stream s) { return emu_stream_query(s) ? CU_SUCCESS : CU_NOT_READY; }
EMU_API cu_result cuStreamQuery_ptsz(cu_stream s) { return cuStreamQuery(s); }

EMU_API cu_result cuStreamWaitEvent(cu_stream s, cu_event ev, unsigned flags)
{
  (void)flags;
  if (!ev)
    return CU_INVALID_HANDLE;
  emu_stream_wait_event(s, ev);
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamWaitEvent_ptsz(cu_stream s, cu_event ev, unsigned flags)
{
  return cuStreamWaitEvent(s, ev, flags);
}

EMU_API cu_result cuEventCreate(cu_event *pev, unsigned flags)
{
  if (!pev)
    return CU_INVALID_VALUE;
  *pev = emu_event_create(flags);
  return *pev ? CU_SUCCESS : CU_OUT_OF_MEMORY;
}

EMU_API cu_result cuEventRecord(cu_event ev, cu_stream s)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  emu_event_record(ev, s);
  return CU_SUCCESS;
}

EMU_API cu_result cuEventRecord_ptsz(cu_event ev, cu_stream s) { return cuEventRecord(ev, s); }

EMU_API cu_result cuEventRecordWithFlags(cu_event ev, cu_stream s, unsigned flags)
{
  (void)flags;
  return cuEventRecord(ev, s);
}

EMU_API cu_result cuEventRecordWithFlags_ptsz(cu_event ev, cu_stream s, unsigned flags)
{
  return cuEventRecordWithFlags(ev, s, flags);
}

EMU_API cu_result cuEventQuery(cu_event ev)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  return emu_event_query(ev) ? CU_SUCCESS : CU_NOT_READY;
}

EMU_API cu_result cuEventSynchronize(cu_event ev)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  emu_event_sync(ev);
  return CU_SUCCESS;
}

EMU_API cu_result cuEventDestroy(cu_event ev)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  emu_event_destroy(ev);
  return CU_SUCCESS;
}

EMU_API cu_result cuEventDestroy_v2(cu_event ev) { return cuEventDestroy(ev); }

EMU_API cu_result cuEventElapsedTime(float *ms, cu_event a, cu_event b)
{
  if (!ms || !a || !b)
    return CU_INVALID_VALUE;
  int rc = emu_event_elapsed(a, b, ms);
  return rc == 0 ? CU_SUCCESS : rc == -EAGAIN ? CU_NOT_READY : CU_INVALID_HANDLE;
}

EMU_API cu_result cuEventElapsedTime_v2(float *ms, cu_event a, cu_event b) { return cuEventElapsedTime(ms, a, b); }

static const struct {
  int code;
  const char *name, *text;
} emu_cu_errors[] = {
  { CU_SUCCESS, "CUDA_SUCCESS", "no error" },
  { CU_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
  { CU_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
  { CU_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
  { CU_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
  { CU_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
  { CU_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
  { CU_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
};

EMU_API cu_result cuGetErrorString(cu_result e, const char **str)
{
  if (!str)
    return CU_INVALID_VALUE;
  for (size_t i = 0; i < sizeof emu_cu_errors / sizeof emu_cu_errors[0]; i++)
    if (emu_cu_errors[i].code == e) {
      *str = emu_cu_errors[i].text;
      return CU_SUCCESS;
    }
  *str = NULL;
  return CU_INVALID_VALUE;
}

EMU_API cu_result cuGetErrorName(cu_result e, const char **str)
{
  if (!str)
    return CU_INVALID_VALUE;
  for (size_t i = 0; i < sizeof emu_cu_errors / sizeof emu_cu_errors[0]; i++)
    if (emu_cu_errors[i].code == e) {
      *str = emu_cu_errors[i].name;
      return CU_SUCCESS;
    }
  *str = NULL;
  return CU_INVALID_VALUE;
}

/* cuGetProcAddress: look the name up in this library, preferring the
 * per-thread-stream and versioned spellings the way the driver does. */
EMU_API cu_result cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, unsigned long long flags,
                                      int *status)
{
  (void)ver;
  if (!symbol || !pfn)
    return CU_INVALID_VALUE;
  Dl_info info;
  void *self = NULL;
  if (dladdr((void *)cuInit, &info) && info.dli_fname)
    self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  void *f = NULL;
  char buf[256];
  static const char *const suffixes[] = { "_v3", "_v2", "" };
  for (size_t i = 0; self && !f && i < 3; i++) {
    if (flags & 2) {   /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
      snprintf(buf, sizeof buf, "%s%s_ptsz", symbol, suffixes[i]);
      f = dlsym(self, buf);
    }
    if (!f) {
      snprintf(buf, sizeof buf, "%s%s", symbol, suffixes[i]);
      f = dlsym(self, buf);
    }
  }
  if (self)
    dlclose(self);
  *pfn = f;
  if (status)
    *status = f ? 0 : 1;   /* SUCCESS / SYMBOL_NOT_FOUND */
  return f ? CU_SUCCESS : CU_NOT_FOUND;
}

EMU_API cu_result cuGetProcAddress(const char *symbol, void **pfn, int ver, unsigned long long flags)
{
  return cuGetProcAddress_v2(symbol, pfn, ver, flags, NULL);
}
