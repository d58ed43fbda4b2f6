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
typedef struct CUgraph_st *cu_graph;
typedef struct CUgraphExec_st *cu_graph_exec;
typedef struct CUgraphNode_st *cu_node;
typedef unsigned long long cu_devptr;   /* CUdeviceptr (v2) */

#define CU_SUCCESS 0
#define CU_INVALID_VALUE 1
#define CU_INVALID_DEVICE 101
#define CU_INVALID_CONTEXT 201
#define CU_INVALID_HANDLE 400
#define CU_NOT_FOUND 500
#define CU_NOT_READY 600
#define CU_OUT_OF_MEMORY 2

/* The capture-interaction check of a potentially unsafe call (emu_core.h);
 * EMU_E_* values are CUresult values (same numbers as cuda.h). */
#define EMU_UNSAFE()                       \
  do {                                     \
    int u_ = emu_unsafe_call();            \
    if (u_ != EMU_OK)                      \
      return u_;                           \
  } while (0)

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

/* Primary contexts: one per device, always there; "active" as CUDA 12
 * defines it (emu_ctx_is_active).  PyTorch asks before it touches a device
 * (c10::cuda::hasPrimaryContext), so that a guard never creates one. */
EMU_API cu_result cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
  if (!flags || !active)
    return CU_INVALID_VALUE;
  if (dev < 0 || dev >= emu_device_count())
    return CU_INVALID_DEVICE;
  *flags = 0;
  *active = emu_ctx_is_active(dev);
  return CU_SUCCESS;
}

EMU_API cu_result cuDevicePrimaryCtxRetain(cu_context *pctx, int dev)
{
  if (!pctx)
    return CU_INVALID_VALUE;
  if (dev < 0 || dev >= emu_device_count())
    return CU_INVALID_DEVICE;
  emu_ctx_set_active(dev, 1);
  *pctx = emu_ctx_of(dev);
  return CU_SUCCESS;
}

/* The emulator never destroys a primary context: a release keeps it. */
EMU_API cu_result cuDevicePrimaryCtxRelease_v2(int dev)
{
  return dev >= 0 && dev < emu_device_count() ? CU_SUCCESS : CU_INVALID_DEVICE;
}
EMU_API cu_result cuDevicePrimaryCtxRelease(int dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

EMU_API cu_result cuDevicePrimaryCtxSetFlags_v2(int dev, unsigned flags)
{
  (void)flags;
  return dev >= 0 && dev < emu_device_count() ? CU_SUCCESS : CU_INVALID_DEVICE;
}
EMU_API cu_result cuDevicePrimaryCtxSetFlags(int dev, unsigned flags) { return cuDevicePrimaryCtxSetFlags_v2(dev, flags); }

/* One context per thread at a time: push makes CTX current, pop hands back
 * the current one (the emulator's stack has depth one, which is what a
 * primary-context client uses). */
EMU_API cu_result cuCtxPushCurrent_v2(cu_context ctx);
EMU_API cu_result cuCtxPushCurrent(cu_context ctx) { return cuCtxPushCurrent_v2(ctx); }
EMU_API cu_result cuCtxPopCurrent_v2(cu_context *pctx)
{
  if (pctx)
    *pctx = emu_ctx_of(emu_get_device());
  return CU_SUCCESS;
}
EMU_API cu_result cuCtxPopCurrent(cu_context *pctx) { return cuCtxPopCurrent_v2(pctx); }

EMU_API cu_result cuCtxSetCurrent(cu_context ctx)
{
  if (!ctx)
    return CU_SUCCESS;   /* "unbind": the emulator keeps the device */
  if (ctx < emu_ctxs || ctx >= emu_ctxs + 64)
    return CU_INVALID_CONTEXT;
  return emu_set_device(ctx->device) == 0 ? CU_SUCCESS : CU_INVALID_CONTEXT;
}

EMU_API cu_result cuCtxPushCurrent_v2(cu_context ctx) { return cuCtxSetCurrent(ctx); }

EMU_API cu_result cuCtxGetDevice(int *dev)
{
  if (!dev)
    return CU_INVALID_VALUE;
  *dev = emu_get_device();
  return CU_SUCCESS;
}

EMU_API cu_result cuCtxSynchronize(void)
{
  EMU_UNSAFE();
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
  EMU_UNSAFE();
  int rc = emu_capture_stream_use(s);
  if (rc != EMU_OK)
    return rc;
  emu_stream_sync(s);
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamSynchronize_ptsz(cu_stream s) { return cuStreamSynchronize(s); }

EMU_API cu_result cuStreamQuery(cu_stream s)
{
  EMU_UNSAFE();
  int rc = emu_capture_stream_use(s);
  if (rc != EMU_OK)
    return rc;
  return emu_stream_query(s) ? CU_SUCCESS : CU_NOT_READY;
}
EMU_API cu_result cuStreamQuery_ptsz(cu_stream s) { return cuStreamQuery(s); }

EMU_API cu_result cuStreamWaitEvent(cu_stream s, cu_event ev, unsigned flags)
{
  (void)flags;
  if (!ev)
    return CU_INVALID_HANDLE;
  return emu_stream_wait_event(s, ev);
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
  return emu_event_record(ev, s);
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

/* An event last recorded inside a capture: CUDA_ERROR_CAPTURED_EVENT in
 * every mode ("the operation is not permitted on an event which was last
 * recorded in a capturing stream", cuda.h). */
EMU_API cu_result cuEventQuery(cu_event ev)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  EMU_UNSAFE();
  int q = emu_event_query(ev);
  return q < 0 ? EMU_E_CAPTURED_EVENT : q ? CU_SUCCESS : CU_NOT_READY;
}

EMU_API cu_result cuEventSynchronize(cu_event ev)
{
  if (!ev)
    return CU_INVALID_HANDLE;
  EMU_UNSAFE();
  if (emu_event_query(ev) < 0)
    return EMU_E_CAPTURED_EVENT;
  emu_event_sync(ev);
  return CU_SUCCESS;
}

/* ---- memory (device memory is host memory) ------------------------------ */

EMU_API cu_result cuMemAlloc_v2(cu_devptr *p, size_t size)
{
  EMU_UNSAFE();
  if (!p || size == 0)
    return CU_INVALID_VALUE;   /* "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE" */
  void *m = NULL;
  if (posix_memalign(&m, 256, size) != 0)
    return CU_OUT_OF_MEMORY;
  *p = (cu_devptr)(uintptr_t)m;
  return CU_SUCCESS;
}

/* Synchronizes the device first, as cudaFree: no worker still uses it. */
EMU_API cu_result cuMemFree_v2(cu_devptr p)
{
  EMU_UNSAFE();
  if (p) {
    emu_device_sync(emu_get_device());
    free((void *)(uintptr_t)p);
  }
  return CU_SUCCESS;
}

EMU_API cu_result cuMemcpy(cu_devptr dst, cu_devptr src, size_t n)
{
  EMU_UNSAFE();
  return emu_copy_sync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 0, 0);
}

EMU_API cu_result cuMemcpy_ptds(cu_devptr dst, cu_devptr src, size_t n) { return cuMemcpy(dst, src, n); }

EMU_API cu_result cuMemcpyAsync(cu_devptr dst, cu_devptr src, size_t n, cu_stream s)
{
  return emu_copy_async((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, 0, 0, s);
}

EMU_API cu_result cuMemcpyAsync_ptsz(cu_devptr dst, cu_devptr src, size_t n, cu_stream s)
{
  return cuMemcpyAsync(dst, src, n, s);
}

EMU_API cu_result cuMemsetD8_v2(cu_devptr dst, unsigned char v, size_t n)
{
  EMU_UNSAFE();
  return emu_copy_sync((void *)(uintptr_t)dst, NULL, n, v, 1);
}

EMU_API cu_result cuMemsetD8_v2_ptds(cu_devptr dst, unsigned char v, size_t n) { return cuMemsetD8_v2(dst, v, n); }

EMU_API cu_result cuMemsetD8Async(cu_devptr dst, unsigned char v, size_t n, cu_stream s)
{
  return emu_copy_async((void *)(uintptr_t)dst, NULL, n, v, 1, s);
}

EMU_API cu_result cuMemsetD8Async_ptsz(cu_devptr dst, unsigned char v, size_t n, cu_stream s)
{
  return cuMemsetD8Async(dst, v, n, s);
}

/* ---- stream capture and graphs (emu_graph.c has the rules) -------------- */

/* The CUDA 10.0 entry point has no mode argument: global, the default. */
EMU_API cu_result cuStreamBeginCapture(cu_stream s) { return emu_capture_begin(s, EMU_MODE_GLOBAL); }
EMU_API cu_result cuStreamBeginCapture_ptsz(cu_stream s) { return cuStreamBeginCapture(s); }
EMU_API cu_result cuStreamBeginCapture_v2(cu_stream s, int mode) { return emu_capture_begin(s, mode); }
EMU_API cu_result cuStreamBeginCapture_v2_ptsz(cu_stream s, int mode) { return cuStreamBeginCapture_v2(s, mode); }

EMU_API cu_result cuStreamEndCapture(cu_stream s, cu_graph *g) { return emu_capture_end(s, g); }
EMU_API cu_result cuStreamEndCapture_ptsz(cu_stream s, cu_graph *g) { return cuStreamEndCapture(s, g); }

EMU_API cu_result cuStreamIsCapturing(cu_stream s, int *status)
{
  return emu_capture_info(s, status, NULL, NULL, NULL, NULL);
}

EMU_API cu_result cuStreamIsCapturing_ptsz(cu_stream s, int *status) { return cuStreamIsCapturing(s, status); }

EMU_API cu_result cuStreamGetCaptureInfo_v3(cu_stream s, int *status, unsigned long long *id, cu_graph *graph,
                                            const cu_node **deps, const void **edges, size_t *ndeps)
{
  if (edges && !deps)
    return CU_INVALID_VALUE;
  uint64_t cid = 0;
  struct CUgraphNode_st *const *d = NULL;
  size_t nd = 0;
  int rc = emu_capture_info(s, status, &cid, graph, &d, &nd);
  if (rc != EMU_OK)
    return rc;
  if (id)
    *id = cid;
  if (deps)
    *deps = (const cu_node *)d;
  if (edges)
    *edges = NULL;
  if (ndeps)
    *ndeps = nd;
  return CU_SUCCESS;
}

EMU_API cu_result cuStreamGetCaptureInfo_v3_ptsz(cu_stream s, int *status, unsigned long long *id, cu_graph *graph,
                                                 const cu_node **deps, const void **edges, size_t *ndeps)
{
  return cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, edges, ndeps);
}

EMU_API cu_result cuStreamGetCaptureInfo_v2(cu_stream s, int *status, unsigned long long *id, cu_graph *graph,
                                            const cu_node **deps, size_t *ndeps)
{
  return cuStreamGetCaptureInfo_v3(s, status, id, graph, deps, NULL, ndeps);
}

EMU_API cu_result cuStreamGetCaptureInfo_v2_ptsz(cu_stream s, int *status, unsigned long long *id, cu_graph *graph,
                                                 const cu_node **deps, size_t *ndeps)
{
  return cuStreamGetCaptureInfo_v2(s, status, id, graph, deps, ndeps);
}

EMU_API cu_result cuStreamGetCaptureInfo(cu_stream s, int *status, unsigned long long *id)
{
  return cuStreamGetCaptureInfo_v3(s, status, id, NULL, NULL, NULL, NULL);
}

EMU_API cu_result cuStreamGetCaptureInfo_ptsz(cu_stream s, int *status, unsigned long long *id)
{
  return cuStreamGetCaptureInfo(s, status, id);
}

EMU_API cu_result cuThreadExchangeStreamCaptureMode(int *mode) { return emu_capture_mode_exchange(mode); }

EMU_API cu_result cuGraphInstantiateWithFlags(cu_graph_exec *x, cu_graph g, unsigned long long flags)
{
  return emu_graph_instantiate(x, g, flags);
}

/* The pre-12.0 ABI: (exec, graph, error node, log buffer, buffer size). */
EMU_API cu_result cuGraphInstantiate_v2(cu_graph_exec *x, cu_graph g, cu_node *err, char *log, size_t len)
{
  if (err)
    *err = NULL;
  if (log && len)
    log[0] = 0;
  return emu_graph_instantiate(x, g, 0);
}

EMU_API cu_result cuGraphInstantiate(cu_graph_exec *x, cu_graph g, cu_node *err, char *log, size_t len)
{
  return cuGraphInstantiate_v2(x, g, err, log, len);
}

EMU_API cu_result cuGraphLaunch(cu_graph_exec x, cu_stream s) { return emu_graph_launch(x, s); }
EMU_API cu_result cuGraphLaunch_ptsz(cu_graph_exec x, cu_stream s) { return cuGraphLaunch(x, s); }

EMU_API cu_result cuGraphExecDestroy(cu_graph_exec x)
{
  if (!x)
    return CU_INVALID_VALUE;
  emu_graph_exec_destroy(x);
  return CU_SUCCESS;
}

EMU_API cu_result cuGraphDestroy(cu_graph g)
{
  if (!g)
    return CU_INVALID_VALUE;
  emu_graph_put(g);
  return CU_SUCCESS;
}

/* CUgraphExecUpdateResultInfo: result, errorNode, errorFromNode. */
struct emu_update_info {
  int result;
  cu_node error_node, error_from;
};

EMU_API cu_result cuGraphExecUpdate_v2(cu_graph_exec x, cu_graph g, struct emu_update_info *info)
{
  int result = 0;
  cu_node err = NULL;
  int rc = emu_graph_exec_update(x, g, &result, &err);
  if (info) {
    info->result = result;
    info->error_node = err;
    info->error_from = NULL;
  }
  return rc;
}

/* The CUDA 10.2 ABI: (exec, graph, error node out, result out). */
EMU_API cu_result cuGraphExecUpdate(cu_graph_exec x, cu_graph g, cu_node *err_out, int *result_out)
{
  int result = 0;
  cu_node err = NULL;
  int rc = emu_graph_exec_update(x, g, &result, &err);
  if (err_out)
    *err_out = err;
  if (result_out)
    *result_out = result;
  return rc;
}

EMU_API cu_result cuGraphGetNodes(cu_graph g, cu_node *nodes, size_t *n) { return emu_graph_nodes(g, nodes, n); }

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
  { EMU_E_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
  { EMU_E_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
  { EMU_E_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
  { EMU_E_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
    "operation failed due to a previous error during capture" },
  { EMU_E_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences" },
  { EMU_E_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "the capture was not initiated in this stream" },
  { EMU_E_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "the capture sequence contains a fork that was not joined to the primary stream" },
  { EMU_E_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream" },
  { EMU_E_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
    "operation would make the legacy stream depend on a capturing blocking stream" },
  { EMU_E_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
  { EMU_E_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
    "attempt to terminate a thread-local capture sequence from another thread" },
  { EMU_E_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
    "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update" },
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
 * per-thread-stream and versioned spellings the way the driver does, and a
 * function the emulator models over a stub of cuda_exports.def (a newer
 * spelling that is only a stub must not hide a modelled older one). */
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
  void *f = NULL, *stub = NULL;
  char buf[256];
  static const char *const suffixes[] = { "_v3", "_v2", "" };
  for (size_t i = 0; self && !f && i < 3; i++) {
    void *g = NULL;
    if (flags & 2) {   /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
      snprintf(buf, sizeof buf, "%s%s_ptsz", symbol, suffixes[i]);
      g = dlsym(self, buf);
    }
    if (!g) {
      snprintf(buf, sizeof buf, "%s%s", symbol, suffixes[i]);
      g = dlsym(self, buf);
    }
    if (g && emu_is_stub(g)) {
      if (!stub)
        stub = g;
    } else if (g) {
      f = g;
    }
  }
  if (!f)
    f = stub;
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
