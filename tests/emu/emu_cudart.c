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

/* The model's EMU_E_* values are CUDA's error numbers. */
_Static_assert((int)EMU_E_INVALID_VALUE == (int)cudaErrorInvalidValue && (int)EMU_E_NOMEM == (int)cudaErrorMemoryAllocation &&
               (int)EMU_E_INVALID_HANDLE == (int)cudaErrorInvalidResourceHandle && (int)EMU_E_ILLEGAL_STATE == (int)cudaErrorIllegalState &&
               (int)EMU_E_NOT_READY == (int)cudaErrorNotReady && (int)EMU_E_NOT_SUPPORTED == (int)cudaErrorNotSupported &&
               (int)EMU_E_CAPTURE_UNSUPPORTED == (int)cudaErrorStreamCaptureUnsupported &&
               (int)EMU_E_CAPTURE_INVALIDATED == (int)cudaErrorStreamCaptureInvalidated &&
               (int)EMU_E_CAPTURE_MERGE == (int)cudaErrorStreamCaptureMerge &&
               (int)EMU_E_CAPTURE_UNMATCHED == (int)cudaErrorStreamCaptureUnmatched &&
               (int)EMU_E_CAPTURE_UNJOINED == (int)cudaErrorStreamCaptureUnjoined &&
               (int)EMU_E_CAPTURE_ISOLATION == (int)cudaErrorStreamCaptureIsolation &&
               (int)EMU_E_CAPTURE_IMPLICIT == (int)cudaErrorStreamCaptureImplicit &&
               (int)EMU_E_CAPTURED_EVENT == (int)cudaErrorCapturedEvent &&
               (int)EMU_E_CAPTURE_WRONG_THREAD == (int)cudaErrorStreamCaptureWrongThread &&
               (int)EMU_E_GRAPH_EXEC_UPDATE_FAILURE == (int)cudaErrorGraphExecUpdateFailure,
               "EMU_E_* must be cudaError_t values");
_Static_assert((int)EMU_MODE_GLOBAL == (int)cudaStreamCaptureModeGlobal && (int)EMU_MODE_THREAD_LOCAL == (int)cudaStreamCaptureModeThreadLocal &&
               (int)EMU_MODE_RELAXED == (int)cudaStreamCaptureModeRelaxed, "capture modes");
_Static_assert((int)EMU_NODE_KERNEL == (int)cudaGraphNodeTypeKernel && (int)EMU_NODE_MEMCPY == (int)cudaGraphNodeTypeMemcpy &&
               (int)EMU_NODE_MEMSET == (int)cudaGraphNodeTypeMemset && (int)EMU_NODE_GRAPH == (int)cudaGraphNodeTypeGraph &&
               (int)EMU_NODE_EMPTY == (int)cudaGraphNodeTypeEmpty && (int)EMU_NODE_EVENT_RECORD == (int)cudaGraphNodeTypeEventRecord,
               "node types");

static cudaError_t emu_rc(int e) { return e == EMU_OK ? cudaSuccess : emu_ret((cudaError_t)e); }

/* The capture-interaction check of a potentially unsafe call (emu_core.h). */
#define EMU_UNSAFE()                       \
  do {                                     \
    int u_ = emu_unsafe_call();            \
    if (u_ != EMU_OK)                      \
      return emu_rc(u_);                   \
  } while (0)

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
  EMU_UNSAFE();
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
  EMU_UNSAFE();
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

/* Synchronous copies and sets are potentially unsafe calls; they are
 * ordered on the legacy default stream. */
EMU_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
  (void)kind;
  EMU_UNSAFE();
  return emu_rc(emu_copy_sync(dst, src, n, 0, 0));
}

EMU_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                    cudaStream_t s)
{
  (void)kind;
  return emu_rc(emu_copy_async(dst, src, n, 0, 0, s));
}

/* Asynchronous on the legacy stream (device memory), as the real one. */
EMU_API cudaError_t cudaMemset(void *p, int value, size_t n)
{
  EMU_UNSAFE();
  return emu_rc(emu_copy_async(p, NULL, n, value, 1, NULL));
}

EMU_API cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s)
{
  return emu_rc(emu_copy_async(p, NULL, n, value, 1, s));
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
  EMU_UNSAFE();
  int rc = emu_capture_stream_use(s);
  if (rc != EMU_OK)
    return emu_rc(rc);
  emu_stream_sync(s);
  return cudaSuccess;
}

EMU_API cudaError_t cudaStreamQuery(cudaStream_t s)
{
  EMU_UNSAFE();
  int rc = emu_capture_stream_use(s);
  if (rc != EMU_OK)
    return emu_rc(rc);
  return emu_stream_query(s) ? cudaSuccess : cudaErrorNotReady;
}

EMU_API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
  (void)flags;
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  return emu_rc(emu_stream_wait_event(s, ev));
}

EMU_API cudaError_t cudaDeviceSynchronize(void)
{
  EMU_UNSAFE();
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
  return emu_rc(emu_event_record(ev, s));
}

EMU_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t ev, cudaStream_t s, unsigned int flags)
{
  (void)flags;
  return cudaEventRecord(ev, s);
}

/* An event last recorded inside a capture cannot be queried or waited
 * for, in any mode (cudaErrorCapturedEvent, driver_types.h). */
EMU_API cudaError_t cudaEventQuery(cudaEvent_t ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  EMU_UNSAFE();
  int q = emu_event_query(ev);
  return q < 0 ? emu_ret(cudaErrorCapturedEvent) : q ? cudaSuccess : cudaErrorNotReady;
}

EMU_API cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
  if (!ev)
    return emu_ret(cudaErrorInvalidResourceHandle);
  EMU_UNSAFE();
  if (emu_event_query(ev) < 0)
    return emu_ret(cudaErrorCapturedEvent);
  emu_event_sync(ev);
  return cudaSuccess;
}

/* ---- stream capture and graphs (emu_graph.c has the rules) -------------- */

EMU_API cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
  return emu_rc(emu_capture_begin(s, (int)mode));
}

EMU_API cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
  return emu_rc(emu_capture_end(s, g));
}

EMU_API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
  int v = 0;
  int rc = st ? emu_capture_info(s, &v, NULL, NULL, NULL, NULL) : EMU_E_INVALID_VALUE;
  if (rc == EMU_OK)
    *st = (enum cudaStreamCaptureStatus)v;
  return emu_rc(rc);
}

EMU_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                             cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                             const cudaGraphEdgeData **edges, size_t *ndeps)
{
  if (edges && !deps)
    return emu_ret(cudaErrorInvalidValue);   /* "If edgeData_out is non-NULL then dependencies_out must be as well" */
  int v = 0;
  uint64_t cid = 0;
  struct CUgraphNode_st *const *d = NULL;
  size_t nd = 0;
  int rc = st ? emu_capture_info(s, &v, &cid, graph, &d, &nd) : EMU_E_INVALID_VALUE;
  if (rc != EMU_OK)
    return emu_rc(rc);
  *st = (enum cudaStreamCaptureStatus)v;
  if (id)
    *id = cid;
  if (deps)
    *deps = (const cudaGraphNode_t *)d;
  if (edges)
    *edges = NULL;   /* no edge data: all default edges */
  if (ndeps)
    *ndeps = nd;
  return cudaSuccess;
}

EMU_API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
  if (!mode)
    return emu_ret(cudaErrorInvalidValue);
  int m = (int)*mode;
  int rc = emu_capture_mode_exchange(&m);
  if (rc == EMU_OK)
    *mode = (enum cudaStreamCaptureMode)m;
  return emu_rc(rc);
}

EMU_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
  return emu_rc(emu_graph_instantiate(x, g, flags));
}

EMU_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags)
{
  return emu_rc(emu_graph_instantiate(x, g, flags));
}

EMU_API cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) { return emu_rc(emu_graph_launch(x, s)); }

EMU_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x)
{
  if (!x)
    return emu_ret(cudaErrorInvalidValue);
  emu_graph_exec_destroy(x);
  return cudaSuccess;
}

EMU_API cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
  if (!g)
    return emu_ret(cudaErrorInvalidValue);
  emu_graph_put(g);
  return cudaSuccess;
}

EMU_API cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info)
{
  int result = 0;
  struct CUgraphNode_st *err = NULL;
  int rc = emu_graph_exec_update(x, g, &result, &err);
  if (info) {
    info->result = (enum cudaGraphExecUpdateResult)result;
    info->errorNode = err;
    info->errorFromNode = NULL;
  }
  return emu_rc(rc);
}

EMU_API cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
  return emu_rc(emu_graph_nodes(g, nodes, n));
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

/* The answer of every function cudart_exports.def lists that the emulator
 * does not model (emu_cudart_stubs.c). */
__attribute__((visibility("hidden"))) int emu_cudart_not_supported(void)
{
  return (int)emu_ret(cudaErrorNotSupported);
}

/* Driver entry points by name, as the runtime hands them out: the
 * emulator's libcuda.so.1 answers (cuGetProcAddress).  PyTorch's DriverAPI
 * resolves its cuMem*, cuStreamWriteValue32 and cuGetErrorString this way. */
int cuGetProcAddress_v2(const char *symbol, void **pfn, int ver, unsigned long long flags, int *status);

EMU_API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int ver,
                                                     unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *status)
{
  int st = 1;
  int r = cuGetProcAddress_v2(symbol, fn, (int)ver, flags, &st);
  if (status)
    *status = st == 0 ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  if (!symbol || !fn)
    return emu_ret(cudaErrorInvalidValue);
  (void)r;
  return cudaSuccess;
}

EMU_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                            enum cudaDriverEntryPointQueryResult *status)
{
  return cudaGetDriverEntryPointByVersion(symbol, fn, 13000, flags, status);
}

/* Returned by value: the stubs cannot stand in for it, so it is modelled. */
EMU_API struct cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, enum cudaChannelFormatKind f)
{
  struct cudaChannelFormatDesc d = {x, y, z, w, f};
  return d;
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
  { cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state" },
  { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
  { cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
    "operation not permitted when stream is capturing" },
  { cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
    "operation failed due to a previous error during capture" },
  { cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences" },
  { cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched", "the capture was not initiated in this stream" },
  { cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined", "the capture sequence contains a fork that was not joined to the primary stream" },
  { cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
    "dependency created on uncaptured work in another stream" },
  { cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
    "operation would make the legacy stream depend on a capturing blocking stream" },
  { cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream" },
  { cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread",
    "attempt to terminate a thread-local capture sequence from another thread" },
  { cudaErrorGraphExecUpdateFailure, "cudaErrorGraphExecUpdateFailure",
    "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update" },
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
EMU_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t ev, cudaStream_t s, unsigned int flags);
EMU_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t ev, cudaStream_t s, unsigned int flags)
{
  return cudaEventRecordWithFlags(ev, s, flags);
}
EMU_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode);
EMU_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
  return cudaStreamBeginCapture(s, mode);
}
EMU_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g);
EMU_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g) { return cudaStreamEndCapture(s, g); }
EMU_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st);
EMU_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st)
{
  return cudaStreamIsCapturing(s, st);
}
EMU_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                                  cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                                  const cudaGraphEdgeData **edges, size_t *ndeps);
EMU_API cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                                  cudaGraph_t *graph, const cudaGraphNode_t **deps,
                                                  const cudaGraphEdgeData **edges, size_t *ndeps)
{
  return cudaStreamGetCaptureInfo(s, st, id, graph, deps, edges, ndeps);
}
EMU_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s);
EMU_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t x, cudaStream_t s) { return cudaGraphLaunch(x, s); }
EMU_API cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k);
EMU_API cudaError_t cudaMemcpy_ptds(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { return cudaMemcpy(d, s, n, k); }
EMU_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n);
EMU_API cudaError_t cudaMemset_ptds(void *p, int v, size_t n) { return cudaMemset(p, v, n); }
