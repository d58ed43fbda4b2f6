/* test_emu_capture -- the emulator's stream-capture rules, one case per rule,
 * each as cuda_runtime_api.h / cuda.h state it (docs/emulator.md, "Stream
 * capture"):
 *   tl_prober      a thread-local-mode thread's unsafe calls during another
 *                  thread's global capture succeed; the capture survives
 *   global_prober  a global-mode thread's unsafe call fails with
 *                  cudaErrorStreamCaptureUnsupported and invalidates it;
 *                  captures begun thread-local or relaxed prohibit nothing
 *                  in other threads
 *   relaxed        a relaxed-mode thread is never prohibited, not even
 *                  during its own capture
 *   own            the capturing thread itself (global and thread-local
 *                  mode): every unsafe call of both APIs fails and
 *                  invalidates; syncing/querying the capturing stream fails
 *                  in every mode
 *   event          an event last recorded inside a capture cannot be
 *                  queried or synchronized, in any mode
 *                  (cudaErrorCapturedEvent); a launch records it for real
 *   replay         captured memset/memcpy run at each launch, not at
 *                  capture; exec update, child graphs, node listing
 *   api            begin/end/is-capturing/capture-info edge cases
 *   driver         the driver API names (cuda.h maps them to _v2/_v3,
 *                  WithFlags): the same rules
 *   fork           cross-stream capture: a stream that waits on an event
 *                  recorded in a capture joins it (fork), its work becomes
 *                  nodes of the same graph, and it must be joined back
 *                  (an event of it waited on by the origin) before the
 *                  capture ends, else cudaErrorStreamCaptureUnjoined;
 *                  ending it from the forked stream is
 *                  cudaErrorStreamCaptureUnmatched (PyTorch's side-stream
 *                  collectives, async_op=True, are captured this way)
 * Single process; the prober runs in a second thread. */
#include "emu_test.h"

#include <cuda.h>
#include <pthread.h>

#define N 4096

static cudaStream_t cap_s, other_s, nb_s;   /* blocking, non-blocking, non-blocking */
static cudaEvent_t done_ev;   /* recorded outside any capture */

/* ---- the prober thread ---------------------------------------------------- */

struct probe {
  enum cudaStreamCaptureMode mode;
  cudaError_t rc[4];   /* event query, stream query, malloc, driver event query */
};

static void *prober(void *arg)
{
  struct probe *p = arg;
  enum cudaStreamCaptureMode m = p->mode;
  cudaThreadExchangeStreamCaptureMode(&m);
  p->rc[0] = cudaEventQuery(done_ev);
  p->rc[1] = cudaStreamQuery(other_s);
  void *x = NULL;
  p->rc[2] = cudaMalloc(&x, 64);
  if (p->rc[2] == cudaSuccess)
    cudaFree(x);
  p->rc[3] = (cudaError_t)cuEventQuery((CUevent)done_ev);
  return NULL;
}

static void run_prober(struct probe *p)
{
  pthread_t t;
  pthread_create(&t, NULL, prober, p);
  pthread_join(t, NULL);
}

/* A capture on cap_s (mode), a prober in pmode, end capture: what each got. */
static int capture_with_prober(enum cudaStreamCaptureMode mode, enum cudaStreamCaptureMode pmode, struct probe *p,
                               cudaError_t *end_rc, cudaGraph_t *g)
{
  static char *buf;
  if (!buf)
    T_CUDA(cudaMalloc((void **)&buf, N));
  T_CUDA(cudaStreamBeginCapture(cap_s, mode));
  T_CUDA(cudaMemsetAsync(buf, 1, N, cap_s));
  p->mode = pmode;
  run_prober(p);
  *end_rc = cudaStreamEndCapture(cap_s, g);
  return 0;
}

static int case_tl_prober(void)
{
  struct probe p;
  cudaError_t end;
  cudaGraph_t g = NULL;
  if (capture_with_prober(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, &p, &end, &g))
    return 1;
  for (int i = 0; i < 4; i++)
    NT_RET_CHECK(p.rc[i] == cudaSuccess, "thread-local prober call %d got %d (%s)", i, p.rc[i], cudaGetErrorName(p.rc[i]));
  NT_RET_CHECK(end == cudaSuccess && g, "end capture after a thread-local prober: %s", cudaGetErrorName(end));
  T_CUDA(cudaGraphDestroy(g));
  return 0;
}

static int case_global_prober(void)
{
  struct probe p;
  cudaError_t end;
  cudaGraph_t g = (cudaGraph_t)1;
  if (capture_with_prober(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeGlobal, &p, &end, &g))
    return 1;
  for (int i = 0; i < 4; i++)
    NT_RET_CHECK(p.rc[i] == cudaErrorStreamCaptureUnsupported, "global prober call %d got %s, want "
            "cudaErrorStreamCaptureUnsupported", i, cudaGetErrorName(p.rc[i]));
  NT_RET_CHECK(end == cudaErrorStreamCaptureInvalidated && g == NULL, "end capture after a global prober: %s",
          cudaGetErrorName(end));
  /* Once the capture ended, the same calls succeed again. */
  p.mode = cudaStreamCaptureModeGlobal;
  run_prober(&p);
  for (int i = 0; i < 4; i++)
    NT_RET_CHECK(p.rc[i] == cudaSuccess, "after the capture, call %d got %s", i, cudaGetErrorName(p.rc[i]));
  /* Only captures begun in global mode restrict other threads. */
  enum cudaStreamCaptureMode begun[2] = { cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed };
  for (int k = 0; k < 2; k++) {
    g = NULL;
    if (capture_with_prober(begun[k], cudaStreamCaptureModeGlobal, &p, &end, &g))
      return 1;
    for (int i = 0; i < 4; i++)
      NT_RET_CHECK(p.rc[i] == cudaSuccess, "global prober vs a capture begun in mode %d: call %d got %s", (int)begun[k],
              i, cudaGetErrorName(p.rc[i]));
    NT_RET_CHECK(end == cudaSuccess && g, "capture begun in mode %d: end %s", (int)begun[k], cudaGetErrorName(end));
    T_CUDA(cudaGraphDestroy(g));
  }
  return 0;
}

/* The potentially unsafe calls, runtime and driver. */
static cudaError_t unsafe_call(int k)
{
  static char host[64], *dev;
  if (!dev)
    cudaMalloc((void **)&dev, 64);
  void *x = NULL;
  CUdeviceptr dx = 0;
  switch (k) {
  case 0: return cudaEventQuery(done_ev);
  case 1: return cudaEventSynchronize(done_ev);
  case 2: return cudaStreamQuery(other_s);
  case 3: return cudaStreamSynchronize(other_s);
  case 4: return cudaDeviceSynchronize();
  case 5: { cudaError_t e = cudaMalloc(&x, 64); if (e == cudaSuccess) cudaFree(x); return e; }
  case 6: return cudaFree(NULL);
  case 7: return cudaMemcpy(dev, host, 64, cudaMemcpyHostToDevice);
  case 8: return cudaMemset(dev, 0, 64);
  case 9: return (cudaError_t)cuEventQuery((CUevent)done_ev);
  case 10: return (cudaError_t)cuEventSynchronize((CUevent)done_ev);
  case 11: return (cudaError_t)cuStreamQuery((CUstream)other_s);
  case 12: return (cudaError_t)cuStreamSynchronize((CUstream)other_s);
  case 13: return (cudaError_t)cuCtxSynchronize();
  case 14: { CUresult e = cuMemAlloc(&dx, 64); if (e == CUDA_SUCCESS) cuMemFree(dx); return (cudaError_t)e; }
  case 15: return (cudaError_t)cuMemFree(0);
  case 16: return (cudaError_t)cuMemcpy((CUdeviceptr)(uintptr_t)dev, (CUdeviceptr)(uintptr_t)host, 64);
  case 17: return (cudaError_t)cuMemsetD8((CUdeviceptr)(uintptr_t)dev, 0, 64);
  }
  return cudaErrorUnknown;
}

static const char *const unsafe_names[] = {
  "cudaEventQuery", "cudaEventSynchronize", "cudaStreamQuery", "cudaStreamSynchronize", "cudaDeviceSynchronize",
  "cudaMalloc", "cudaFree", "cudaMemcpy", "cudaMemset", "cuEventQuery", "cuEventSynchronize", "cuStreamQuery",
  "cuStreamSynchronize", "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpy", "cuMemsetD8_v2" };
#define NUNSAFE 18

static int case_own(void)
{
  enum cudaStreamCaptureMode modes[2] = { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal };
  for (int mi = 0; mi < 2; mi++) {
    enum cudaStreamCaptureMode m = modes[mi];
    T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));
    for (int k = 0; k < NUNSAFE; k++) {
      T_CUDA(cudaStreamBeginCapture(cap_s, modes[mi]));
      cudaError_t e = unsafe_call(k);
      cudaGraph_t g = (cudaGraph_t)1;
      cudaError_t end = cudaStreamEndCapture(cap_s, &g);
      NT_RET_CHECK(e == cudaErrorStreamCaptureUnsupported, "mode %d: %s during own capture got %s", mi, unsafe_names[k],
              cudaGetErrorName(e));
      NT_RET_CHECK(end == cudaErrorStreamCaptureInvalidated && !g, "mode %d: %s did not invalidate (%s)", mi,
              unsafe_names[k], cudaGetErrorName(end));
      NT_RET_CHECK(unsafe_call(k) == cudaSuccess, "%s after the capture", unsafe_names[k]);
    }
    T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));   /* restore */
  }
  /* Syncing or querying the capturing stream conflicts in every mode. */
  for (int mode = 0; mode < 3; mode++) {
    enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode)mode;
    T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));
    for (int k = 0; k < 2; k++) {
      T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeRelaxed));
      cudaError_t e = k ? cudaStreamQuery(cap_s) : cudaStreamSynchronize(cap_s);
      cudaGraph_t g;
      cudaError_t end = cudaStreamEndCapture(cap_s, &g);
      NT_RET_CHECK(e == cudaErrorStreamCaptureUnsupported && end == cudaErrorStreamCaptureInvalidated,
              "mode %d: %s on the capturing stream: %s, end %s", mode, k ? "query" : "sync", cudaGetErrorName(e),
              cudaGetErrorName(end));
    }
    T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));
  }
  return 0;
}

static int case_relaxed(void)
{
  struct probe p;
  cudaError_t end;
  cudaGraph_t g = NULL;
  if (capture_with_prober(cudaStreamCaptureModeGlobal, cudaStreamCaptureModeRelaxed, &p, &end, &g))
    return 1;
  for (int i = 0; i < 4; i++)
    NT_RET_CHECK(p.rc[i] == cudaSuccess, "relaxed prober call %d got %s", i, cudaGetErrorName(p.rc[i]));
  NT_RET_CHECK(end == cudaSuccess && g, "end capture after a relaxed prober: %s", cudaGetErrorName(end));
  T_CUDA(cudaGraphDestroy(g));
  /* Relaxed in the capturing thread itself: still not prohibited.  The
   * capture is on a non-blocking stream: a blocking one would make the
   * synchronous copies' legacy stream unusable (the implicit dependency of
   * cudaStreamIsCapturing's note), which is another rule. */
  enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
  T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));
  NT_RET_CHECK(m == cudaStreamCaptureModeGlobal, "the default mode is global (got %d)", (int)m);
  T_CUDA(cudaStreamBeginCapture(nb_s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < NUNSAFE; k++) {
    cudaError_t e = unsafe_call(k);
    NT_RET_CHECK(e == cudaSuccess, "relaxed thread, own capture: %s got %s", unsafe_names[k], cudaGetErrorName(e));
  }
  T_CUDA(cudaStreamEndCapture(nb_s, &g));
  NT_RET_CHECK(g, "no graph");
  T_CUDA(cudaGraphDestroy(g));
  /* The same with a blocking capturing stream: the legacy stream's
   * synchronous copy conflicts (cudaErrorStreamCaptureImplicit) and
   * invalidates it. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  NT_RET_CHECK(unsafe_call(7) == cudaErrorStreamCaptureImplicit, "cudaMemcpy vs a blocking capture");
  NT_RET_CHECK(cudaStreamEndCapture(cap_s, &g) == cudaErrorStreamCaptureInvalidated, "implicit use did not invalidate");
  T_CUDA(cudaThreadExchangeStreamCaptureMode(&m));
  m = (enum cudaStreamCaptureMode)7;
  NT_RET_CHECK(cudaThreadExchangeStreamCaptureMode(&m) == cudaErrorInvalidValue, "mode 7 accepted");
  return 0;
}

struct evq {
  cudaEvent_t ev;
  enum cudaStreamCaptureMode mode;
  cudaError_t q, s;
};

static void *event_prober(void *arg)
{
  struct evq *e = arg;
  enum cudaStreamCaptureMode m = e->mode;
  cudaThreadExchangeStreamCaptureMode(&m);
  e->q = cudaEventQuery(e->ev);
  e->s = cudaEventSynchronize(e->ev);
  return NULL;
}

static int case_event(void)
{
  cudaEvent_t ev;
  T_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  char *buf;
  T_CUDA(cudaMalloc((void **)&buf, N));
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeThreadLocal));
  T_CUDA(cudaMemsetAsync(buf, 2, N, cap_s));
  T_CUDA(cudaEventRecord(ev, cap_s));
  /* Other threads in every mode: not prohibited by a thread-local capture,
   * yet the captured event refuses them, and that invalidates nothing. */
  for (int mode = 0; mode < 3; mode++) {
    struct evq e = { ev, (enum cudaStreamCaptureMode)mode, 0, 0 };
    pthread_t t;
    pthread_create(&t, NULL, event_prober, &e);
    pthread_join(t, NULL);
    NT_RET_CHECK(e.q == cudaErrorCapturedEvent && e.s == cudaErrorCapturedEvent,
            "mode %d: query/sync of a captured event: %s / %s", mode, cudaGetErrorName(e.q), cudaGetErrorName(e.s));
  }
  cudaGraph_t g;
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  /* After the capture: still last recorded inside it. */
  NT_RET_CHECK(cudaEventQuery(ev) == cudaErrorCapturedEvent, "captured event after end capture");
  NT_RET_CHECK(cuEventQuery((CUevent)ev) == CUDA_ERROR_CAPTURED_EVENT, "driver: captured event after end capture");
  cudaGraphExec_t x;
  T_CUDA(cudaGraphInstantiate(&x, g, 0));
  T_CUDA(cudaGraphLaunch(x, other_s));
  T_CUDA(cudaStreamSynchronize(other_s));
  /* The launch recorded it on other_s: a normal event again. */
  T_CUDA(cudaEventQuery(ev));
  NT_RET_CHECK(buf[0] == 2 && buf[N - 1] == 2, "memset node did not run");
  T_CUDA(cudaGraphExecDestroy(x));
  T_CUDA(cudaGraphDestroy(g));
  T_CUDA(cudaEventDestroy(ev));
  T_CUDA(cudaFree(buf));
  return 0;
}

static int case_replay(void)
{
  int *src, *dst, *big;
  T_CUDA(cudaMalloc((void **)&src, N * sizeof(int)));
  T_CUDA(cudaMalloc((void **)&dst, N * sizeof(int)));
  T_CUDA(cudaMalloc((void **)&big, N * sizeof(int)));
  int host[N];
  for (int i = 0; i < N; i++)
    host[i] = 5;
  T_CUDA(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice));
  T_CUDA(cudaMemset(dst, 0, N * sizeof(int)));
  T_CUDA(cudaMemset(big, 0, N * sizeof(int)));
  T_CUDA(cudaDeviceSynchronize());
  cudaGraph_t g;
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaMemsetAsync(big, 0xff, N * sizeof(int), cap_s));
  T_CUDA(cudaMemcpyAsync(dst, src, N * sizeof(int), cudaMemcpyDeviceToDevice, cap_s));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  NT_RET_CHECK(dst[0] == 0 && big[0] == 0, "captured work ran at capture time");
  size_t nn = 0;
  T_CUDA(cudaGraphGetNodes(g, NULL, &nn));
  NT_RET_CHECK(nn == 2, "graph has %zu nodes, want 2", nn);
  cudaGraphExec_t x;
  T_CUDA(cudaGraphInstantiateWithFlags(&x, g, 0));
  T_CUDA(cudaGraphDestroy(g));   /* the exec keeps its own copy */
  for (int r = 1; r <= 5; r++) {
    for (int i = 0; i < N; i++)
      host[i] = 100 * r + i;
    T_CUDA(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice));
    T_CUDA(cudaGraphLaunch(x, other_s));
    T_CUDA(cudaStreamSynchronize(other_s));
    NT_RET_CHECK(dst[7] == 100 * r + 7 && dst[N - 1] == 100 * r + N - 1, "replay %d: dst[7] = %d", r, dst[7]);
    NT_RET_CHECK(big[0] == -1, "replay %d: memset did not run", r);
  }
  /* Exec update: same shape (memset, memcpy) with new operands succeeds. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaMemsetAsync(big, 0, N * sizeof(int), cap_s));
  T_CUDA(cudaMemcpyAsync(src, dst, N * sizeof(int), cudaMemcpyDeviceToDevice, cap_s));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  cudaGraphExecUpdateResultInfo info;
  T_CUDA(cudaGraphExecUpdate(x, g, &info));
  NT_RET_CHECK(info.result == cudaGraphExecUpdateSuccess, "update result %d", (int)info.result);
  T_CUDA(cudaMemset(dst, 0x11, N * sizeof(int)));
  T_CUDA(cudaDeviceSynchronize());   /* cudaMemset is asynchronous, other_s does not wait for it */
  T_CUDA(cudaGraphLaunch(x, other_s));
  T_CUDA(cudaStreamSynchronize(other_s));
  NT_RET_CHECK(src[0] == 0x11111111 && big[0] == 0, "the updated exec runs the new operands");
  T_CUDA(cudaGraphDestroy(g));
  /* A different node count: topology changed. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaMemsetAsync(big, 0, N * sizeof(int), cap_s));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  NT_RET_CHECK(cudaGraphExecUpdate(x, g, &info) == cudaErrorGraphExecUpdateFailure &&
          info.result == cudaGraphExecUpdateErrorTopologyChanged && !info.errorNode, "topology change: result %d",
          (int)info.result);
  T_CUDA(cudaGraphDestroy(g));
  /* Same count, another node type. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaMemcpyAsync(big, src, N * sizeof(int), cudaMemcpyDeviceToDevice, cap_s));
  T_CUDA(cudaMemcpyAsync(src, dst, N * sizeof(int), cudaMemcpyDeviceToDevice, cap_s));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  NT_RET_CHECK(cudaGraphExecUpdate(x, g, &info) == cudaErrorGraphExecUpdateFailure &&
          info.result == cudaGraphExecUpdateErrorNodeTypeChanged && info.errorNode, "type change: result %d",
          (int)info.result);
  T_CUDA(cudaGraphDestroy(g));
  /* A graph launched inside a capture becomes a child-graph node. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaGraphLaunch(x, cap_s));
  T_CUDA(cudaGraphLaunch(x, cap_s));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  T_CUDA(cudaGraphGetNodes(g, NULL, &nn));
  NT_RET_CHECK(nn == 2, "child graphs: %zu nodes", nn);
  cudaGraphNode_t nodes[3];
  nn = 3;
  T_CUDA(cudaGraphGetNodes(g, nodes, &nn));
  NT_RET_CHECK(nn == 2 && nodes[2] == NULL, "cudaGraphGetNodes with room for 3: %zu", nn);
  cudaGraphExec_t x2;
  T_CUDA(cudaGraphInstantiate(&x2, g, 0));
  T_CUDA(cudaMemset(src, 0, N * sizeof(int)));
  T_CUDA(cudaMemset(dst, 0x22, N * sizeof(int)));
  T_CUDA(cudaDeviceSynchronize());
  T_CUDA(cudaGraphLaunch(x2, other_s));
  T_CUDA(cudaStreamSynchronize(other_s));
  NT_RET_CHECK(src[0] == 0x22222222, "child graph did not run");
  T_CUDA(cudaGraphExecDestroy(x2));
  T_CUDA(cudaGraphDestroy(g));
  T_CUDA(cudaGraphExecDestroy(x));
  T_CUDA(cudaFree(src));
  T_CUDA(cudaFree(dst));
  T_CUDA(cudaFree(big));
  return 0;
}

struct ender {
  cudaError_t rc;
};

static void *end_other_thread(void *arg)
{
  cudaGraph_t g;
  ((struct ender *)arg)->rc = cudaStreamEndCapture(cap_s, &g);
  if (((struct ender *)arg)->rc == cudaSuccess)
    cudaGraphDestroy(g);
  return NULL;
}

static int case_api(void)
{
  cudaGraph_t g;
  enum cudaStreamCaptureStatus st;
  NT_RET_CHECK(cudaStreamBeginCapture(NULL, cudaStreamCaptureModeGlobal) == cudaErrorInvalidValue,
          "capture on the legacy stream was accepted");
  NT_RET_CHECK(cudaStreamEndCapture(cap_s, &g) == cudaErrorIllegalState, "end capture without a capture");
  T_CUDA(cudaStreamIsCapturing(cap_s, &st));
  NT_RET_CHECK(st == cudaStreamCaptureStatusNone, "status %d before capture", (int)st);
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  NT_RET_CHECK(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal) != cudaSuccess, "a second begin was accepted");
  T_CUDA(cudaStreamIsCapturing(cap_s, &st));
  NT_RET_CHECK(st == cudaStreamCaptureStatusActive, "status %d while capturing", (int)st);
  /* The legacy stream while a blocking stream captures (cap_s is blocking). */
  NT_RET_CHECK(cudaStreamIsCapturing(NULL, &st) == cudaErrorStreamCaptureImplicit, "legacy stream status");
  unsigned long long id1 = 0, id2 = 0;
  cudaGraph_t cg = NULL;
  size_t nd = 9;
  const cudaGraphNode_t *deps;
  T_CUDA(cudaStreamGetCaptureInfo(cap_s, &st, &id1, &cg, &deps, NULL, &nd));
  NT_RET_CHECK(id1 != 0 && cg && nd == 0, "capture info: id %llu graph %p deps %zu", id1, (void *)cg, nd);
  /* A non-relaxed capture ends on its own thread. */
  struct ender e;
  pthread_t t;
  pthread_create(&t, NULL, end_other_thread, &e);
  pthread_join(t, NULL);
  NT_RET_CHECK(e.rc == cudaErrorStreamCaptureWrongThread, "end from another thread: %s", cudaGetErrorName(e.rc));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  T_CUDA(cudaGraphDestroy(g));
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaStreamGetCaptureInfo(cap_s, &st, &id2, NULL, NULL, NULL, NULL));
  NT_RET_CHECK(id2 != id1, "capture ids repeat");
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  T_CUDA(cudaGraphDestroy(g));
  /* A relaxed capture may end on another thread. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeRelaxed));
  pthread_create(&t, NULL, end_other_thread, &e);
  pthread_join(t, NULL);
  NT_RET_CHECK(e.rc == cudaSuccess, "relaxed capture ended elsewhere: %s", cudaGetErrorName(e.rc));
  /* Waiting inside a capture on an event recorded outside it crosses the
   * boundary: isolation error, the capture is invalidated. */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  cudaError_t we = cudaStreamWaitEvent(cap_s, done_ev, 0);
  NT_RET_CHECK(we == cudaErrorStreamCaptureIsolation, "external wait: %s", cudaGetErrorName(we));
  NT_RET_CHECK(cudaStreamEndCapture(cap_s, &g) == cudaErrorStreamCaptureInvalidated, "external wait did not invalidate");
  return 0;
}

static int case_driver(void)
{
  CUstream s = (CUstream)cap_s, o = (CUstream)other_s;
  CUdeviceptr a, b;
  NT_RET_CHECK(cuMemAlloc(&a, N) == CUDA_SUCCESS && cuMemAlloc(&b, N) == CUDA_SUCCESS, "cuMemAlloc");
  NT_RET_CHECK(cuMemsetD8(a, 3, N) == CUDA_SUCCESS && cuMemsetD8(b, 0, N) == CUDA_SUCCESS, "cuMemsetD8");
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
  NT_RET_CHECK(cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS && m == CU_STREAM_CAPTURE_MODE_GLOBAL, "exchange");
  NT_RET_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "cuStreamBeginCapture_v2");
  CUstreamCaptureStatus st;
  cuuint64_t id = 0;
  NT_RET_CHECK(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE, "is capturing");
  NT_RET_CHECK(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL) == CUDA_SUCCESS && id, "capture info _v3");
  NT_RET_CHECK(cuMemcpyAsync(b, a, N, s) == CUDA_SUCCESS, "captured cuMemcpyAsync");
  NT_RET_CHECK(cuMemsetD8Async(a, 9, N, s) == CUDA_SUCCESS, "captured cuMemsetD8Async");
  /* Thread-local mode, own ongoing capture: prohibited, invalidates. */
  NT_RET_CHECK(cuStreamQuery(o) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "own thread-local capture");
  CUgraph g = NULL;
  NT_RET_CHECK(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && !g, "invalidated");
  NT_RET_CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS, "begin again");
  NT_RET_CHECK(cuMemcpyAsync(b, a, N, s) == CUDA_SUCCESS && cuMemsetD8Async(a, 9, N, s) == CUDA_SUCCESS, "capture");
  NT_RET_CHECK(cuStreamEndCapture(s, &g) == CUDA_SUCCESS && g, "end capture");
  unsigned char *pa = (unsigned char *)(uintptr_t)a, *pb = (unsigned char *)(uintptr_t)b;
  NT_RET_CHECK(pb[0] == 0 && pa[0] == 3, "captured driver work ran at capture");
  CUgraphExec x;
  NT_RET_CHECK(cuGraphInstantiate(&x, g, 0) == CUDA_SUCCESS, "cuGraphInstantiateWithFlags");
  NT_RET_CHECK(cuGraphLaunch(x, o) == CUDA_SUCCESS && cuStreamSynchronize(o) == CUDA_SUCCESS, "launch");
  NT_RET_CHECK(pb[N - 1] == 3 && pa[N - 1] == 9, "driver replay: b %d a %d", pb[N - 1], pa[N - 1]);
  CUgraphExecUpdateResultInfo info;
  NT_RET_CHECK(cuGraphExecUpdate(x, g, &info) == CUDA_SUCCESS && info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS, "update");
  NT_RET_CHECK(cuGraphExecDestroy(x) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS, "destroy");
  NT_RET_CHECK(cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS && m == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "restore");
  NT_RET_CHECK(cuMemFree(a) == CUDA_SUCCESS && cuMemFree(b) == CUDA_SUCCESS, "cuMemFree");
  return 0;
}

static int case_fork(void)
{
  int *src, *dst;
  T_CUDA(cudaMalloc((void **)&src, N * sizeof(int)));
  T_CUDA(cudaMalloc((void **)&dst, N * sizeof(int)));
  int host[N];
  for (int i = 0; i < N; i++)
    host[i] = 7;
  T_CUDA(cudaMemcpy(src, host, sizeof host, cudaMemcpyHostToDevice));
  T_CUDA(cudaMemset(dst, 0, N * sizeof(int)));
  T_CUDA(cudaDeviceSynchronize());
  cudaEvent_t fork_ev, join_ev;
  T_CUDA(cudaEventCreateWithFlags(&fork_ev, cudaEventDisableTiming));
  T_CUDA(cudaEventCreateWithFlags(&join_ev, cudaEventDisableTiming));
  cudaGraph_t g;
  enum cudaStreamCaptureStatus st;
  /* fork and join back: both streams' work is in the graph */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaMemsetAsync(dst, 0, N * sizeof(int), cap_s));
  T_CUDA(cudaEventRecord(fork_ev, cap_s));
  T_CUDA(cudaStreamWaitEvent(nb_s, fork_ev, 0));
  T_CUDA(cudaStreamIsCapturing(nb_s, &st));
  NT_RET_CHECK(st == cudaStreamCaptureStatusActive, "the forked stream is not capturing (%d)", (int)st);
  T_CUDA(cudaMemcpyAsync(dst, src, N * sizeof(int), cudaMemcpyDeviceToDevice, nb_s));
  NT_RET_CHECK(cudaStreamEndCapture(nb_s, &g) == cudaErrorStreamCaptureUnmatched,
               "ending the capture from the forked stream must be cudaErrorStreamCaptureUnmatched");
  T_CUDA(cudaEventRecord(join_ev, nb_s));
  T_CUDA(cudaStreamWaitEvent(cap_s, join_ev, 0));
  T_CUDA(cudaStreamEndCapture(cap_s, &g));
  NT_RET_CHECK(g != NULL, "no graph");
  T_CUDA(cudaStreamIsCapturing(nb_s, &st));
  NT_RET_CHECK(st == cudaStreamCaptureStatusNone, "the forked stream still captures after the end (%d)", (int)st);
  NT_RET_CHECK(dst[0] == 0, "captured work ran at capture time");
  cudaGraphExec_t x;
  T_CUDA(cudaGraphInstantiateWithFlags(&x, g, 0));
  T_CUDA(cudaGraphLaunch(x, other_s));
  T_CUDA(cudaStreamSynchronize(other_s));
  NT_RET_CHECK(dst[0] == 7 && dst[N - 1] == 7, "the forked stream's copy did not run at launch: %d", dst[0]);
  T_CUDA(cudaGraphExecDestroy(x));
  T_CUDA(cudaGraphDestroy(g));
  /* fork without the join: the end fails and the fork's capture ends too */
  T_CUDA(cudaStreamBeginCapture(cap_s, cudaStreamCaptureModeGlobal));
  T_CUDA(cudaEventRecord(fork_ev, cap_s));
  T_CUDA(cudaStreamWaitEvent(nb_s, fork_ev, 0));
  T_CUDA(cudaMemsetAsync(dst, 0, N * sizeof(int), nb_s));
  cudaError_t e = cudaStreamEndCapture(cap_s, &g);
  NT_RET_CHECK(e == cudaErrorStreamCaptureUnjoined && g == NULL, "unjoined fork: %d, want %d",
               (int)e, (int)cudaErrorStreamCaptureUnjoined);
  T_CUDA(cudaStreamIsCapturing(nb_s, &st));
  NT_RET_CHECK(st == cudaStreamCaptureStatusNone, "the unjoined stream still captures (%d)", (int)st);
  (void)cudaGetLastError();
  /* a fork from a capture that is over: the event was last recorded in it */
  e = cudaStreamWaitEvent(nb_s, fork_ev, 0);
  NT_RET_CHECK(e == cudaErrorCapturedEvent, "wait on an event of an ended capture: %d", (int)e);
  (void)cudaGetLastError();
  return 0;
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: %s tl_prober|global_prober|relaxed|own|event|replay|api|driver|fork\n", argv[0]);
    return 2;
  }
  T_CUDA(cudaSetDevice(0));
  T_CUDA(cudaStreamCreate(&cap_s));
  T_CUDA(cudaStreamCreateWithFlags(&other_s, cudaStreamNonBlocking));
  T_CUDA(cudaStreamCreateWithFlags(&nb_s, cudaStreamNonBlocking));
  T_CUDA(cudaEventCreateWithFlags(&done_ev, cudaEventDisableTiming));
  T_CUDA(cudaEventRecord(done_ev, other_s));
  T_CUDA(cudaStreamSynchronize(other_s));
  const char *c = argv[1];
  int rc = !strcmp(c, "tl_prober")       ? case_tl_prober()
           : !strcmp(c, "global_prober") ? case_global_prober()
           : !strcmp(c, "relaxed")       ? case_relaxed()
           : !strcmp(c, "own")           ? case_own()
           : !strcmp(c, "event")         ? case_event()
           : !strcmp(c, "replay")        ? case_replay()
           : !strcmp(c, "api")           ? case_api()
           : !strcmp(c, "driver")        ? case_driver()
           : !strcmp(c, "fork")          ? case_fork()
                                         : 2;
  if (rc == 0)
    printf("ok: %s\n", c);
  return rc;
}
