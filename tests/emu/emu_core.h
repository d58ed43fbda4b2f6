/* emu_core.h -- the stream/event/device model of the CPU emulator.
 *
 * Thread-safety: every function here may be called from any thread at any
 * time.  Queries (emu_stream_query, emu_event_query) take no lock: they
 * compare two monotonically increasing counters with acquire loads, because a
 * tracer queries one event per collective from its watchdog thread.
 * Everything that waits (sync, enqueue onto a destroyed stream) sleeps on a
 * condition variable; nothing spins.
 *
 * Signal-safety: none of these functions is async-signal-safe (they allocate
 * and take mutexes), except emu_event_query and emu_stream_query, which only
 * perform atomic loads.
 *
 * The model: a stream is a FIFO of work items executed in order by one worker
 * thread owned by the stream.  `enqueued` counts items ever pushed,
 * `completed` counts items ever finished; both only grow, so a stream struct
 * is recycled (never freed) and an event is just (stream, target count).
 * The legacy default stream of each device reproduces CUDA's implicit
 * synchronization with blocking streams by attaching dependencies to items.
 *
 * Stream capture (emu_graph.c): a stream may be capturing; work submitted
 * to it then becomes a node of the capture's graph instead of running, and
 * every launch of an instantiated graph enqueues a fresh copy of each node's
 * work, in order, on the launch stream.  The capture-interaction rules of
 * cuda_runtime_api.h (cudaThreadExchangeStreamCaptureMode) are checked by
 * emu_unsafe_call() at every "potentially unsafe" entry point; it costs
 * three loads when nothing is being captured.
 *
 * This header is internal to tests/emu: libcuda.so.1 implements it and
 * exports the emu_* symbols; libcudart.so.13 and libnccl.so.2 link to it.
 */
#ifndef EMU_CORE_H
#define EMU_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <time.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#define EMU_API __attribute__((visibility("default")))

/* A unit of stream work.  The submitter embeds it in a larger struct; the
 * worker calls run(), which may block for as long as it likes (a hung
 * collective blocks forever) and must release its own memory before it
 * returns: the worker never touches the item again after run(). */
struct emu_work {
  struct emu_work *next;
  void (*run)(struct emu_work *w);
  /* Filled by emu_stream_enqueue: work this item must wait for (legacy
   * stream semantics).  Freed by the worker. */
  struct emu_dep *deps;
  int ndeps;
};

struct emu_dep {
  struct CUstream_st *stream;
  uint64_t target;
};

struct CUstream_st {
  pthread_mutex_t mu;
  pthread_cond_t work_cv;   /* worker waits for items */
  pthread_cond_t done_cv;   /* synchronizers wait for `completed` */
  struct emu_work *head, *tail;
  _Atomic uint64_t enqueued;   /* pairs with the acquire in query/sync */
  _Atomic uint64_t completed;  /* release-stored by the worker after run() */
  int device;
  unsigned flags;              /* CU_STREAM_NON_BLOCKING, ... */
  int legacy;                  /* the per-device default stream */
  int destroyed;               /* under mu: drain, then recycle */
  int has_worker;
  /* The ongoing capture, or NULL.  Written under the capture lock of
   * emu_graph.c (release), read by submitters with acquire. */
  struct emu_capture *_Atomic cap;
  struct CUstream_st *dev_next;   /* device's list of live streams */
  struct CUstream_st *pool_next;  /* free pool */
};

struct CUevent_st {
  _Atomic(struct CUstream_st *) stream;
  _Atomic uint64_t target;     /* 0: never recorded (query says complete) */
  unsigned flags;
  _Atomic uint64_t t_ns;       /* completion time, timing events only */
  _Atomic int refs;            /* the handle + pending timing markers + graph nodes */
  /* Id of the capture that holds this event's last record, 0 when the last
   * record ran on a stream (CUDA_ERROR_CAPTURED_EVENT for queries). */
  _Atomic uint64_t cap_id;
  /* That record's stream and its node count in the capture after the
   * record (a wait on the event joins that stream back: emu_graph.c). */
  _Atomic(struct CUstream_st *) cap_stream;
  _Atomic uint32_t cap_seq;
};

/* CUDA error numbers the model returns.  cudaError_t and CUresult agree on
 * every one of these values (emu_cudart.c asserts it against the headers). */
enum {
  EMU_OK = 0,
  EMU_E_INVALID_VALUE = 1,
  EMU_E_NOMEM = 2,
  EMU_E_INVALID_HANDLE = 400,
  EMU_E_ILLEGAL_STATE = 401,
  EMU_E_NOT_READY = 600,
  EMU_E_NOT_SUPPORTED = 801,
  EMU_E_CAPTURE_UNSUPPORTED = 900,
  EMU_E_CAPTURE_INVALIDATED = 901,
  EMU_E_CAPTURE_MERGE = 902,
  EMU_E_CAPTURE_UNMATCHED = 903,
  EMU_E_CAPTURE_UNJOINED = 904,
  EMU_E_CAPTURE_ISOLATION = 905,
  EMU_E_CAPTURE_IMPLICIT = 906,
  EMU_E_CAPTURED_EVENT = 907,
  EMU_E_CAPTURE_WRONG_THREAD = 908,
  EMU_E_GRAPH_EXEC_UPDATE_FAILURE = 910,
};

/* Capture-interaction modes: the values of cudaStreamCaptureMode and
 * CUstreamCaptureMode. */
enum { EMU_MODE_GLOBAL = 0, EMU_MODE_THREAD_LOCAL = 1, EMU_MODE_RELAXED = 2 };

/* Node types: the values of cudaGraphNodeType / CUgraphNodeType.  An NCCL
 * operation is a kernel node, as NCCL's own are. */
enum { EMU_NODE_KERNEL = 0, EMU_NODE_MEMCPY = 1, EMU_NODE_MEMSET = 2, EMU_NODE_GRAPH = 4,
       EMU_NODE_EMPTY = 5, EMU_NODE_EVENT_RECORD = 7 };

/* A graph node: an immutable template.  launch() puts one launch's work on
 * `s` (fresh work items: they free themselves after running) and returns an
 * EMU_E_* value; destroy() frees the template.  cudaGraphNode_t and
 * CUgraphNode are pointers to this. */
struct CUgraphNode_st {
  struct CUgraphNode_st *next;
  int type;
  int (*launch)(struct CUgraphNode_st *n, struct CUstream_st *s);
  void (*destroy)(struct CUgraphNode_st *n);
};

/* A graph: a reference-counted, immutable list of nodes once its capture
 * ended (the handle and every exec instantiated from it hold a reference). */
struct CUgraph_st {
  _Atomic int refs;
  int nnodes;
  struct CUgraphNode_st *head, **tail;
};

struct CUgraphExec_st {
  pthread_mutex_t mu;              /* guards graph (exec update swaps it) */
  struct CUgraph_st *graph;
  unsigned long long flags;
};

/* Device and context bookkeeping. */
EMU_API int emu_device_count(void);
EMU_API int emu_get_device(void);
EMU_API int emu_set_device(int dev);   /* 0 or -EINVAL */
/* Device DEV's primary context: made active by emu_set_device or a retain,
 * inactive again after a reset (cuDevicePrimaryCtxGetState). */
EMU_API void emu_ctx_set_active(int dev, int on);
EMU_API int emu_ctx_is_active(int dev);

/* Streams.  `s` may be NULL, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD: those
 * name the current device's default stream. */
EMU_API struct CUstream_st *emu_stream_resolve(struct CUstream_st *s);
EMU_API int emu_stream_create(struct CUstream_st **out, unsigned flags);
EMU_API void emu_stream_destroy(struct CUstream_st *s);
EMU_API void emu_stream_enqueue(struct CUstream_st *s, struct emu_work *w);
EMU_API void emu_stream_sync(struct CUstream_st *s);
EMU_API int emu_stream_query(struct CUstream_st *s);   /* 1 idle, 0 busy */
EMU_API void emu_stream_wait_count(struct CUstream_st *s, uint64_t target);
EMU_API void emu_device_sync(int dev);
/* Enqueue a wait for `ev` (as recorded now) onto `s`: EMU_OK, or on a
 * capture boundary the error CUDA gives (see emu_graph.c). */
EMU_API int emu_stream_wait_event(struct CUstream_st *s, struct CUevent_st *ev);

/* Events. */
EMU_API struct CUevent_st *emu_event_create(unsigned flags);
EMU_API void emu_event_destroy(struct CUevent_st *ev);
/* Capture-aware: on a capturing stream an event-record node (EMU_E_* of
 * emu_capture_add); else the record itself (EMU_OK). */
EMU_API int emu_event_record(struct CUevent_st *ev, struct CUstream_st *s);
/* The record itself, on a stream that runs work (graph launch). */
EMU_API void emu_event_record_now(struct CUevent_st *ev, struct CUstream_st *s);
/* 1 complete, 0 not yet, -1 last recorded inside a capture. */
EMU_API int emu_event_query(struct CUevent_st *ev);
EMU_API void emu_event_sync(struct CUevent_st *ev);
/* 0 and *ms set, -EAGAIN not complete, -EINVAL no timing data. */
EMU_API int emu_event_elapsed(struct CUevent_st *a, struct CUevent_st *b, float *ms);

/* ---- stream capture and graphs (emu_graph.c) ----------------------------- */

/* The capture-interaction check of every potentially unsafe call (event
 * query/sync, stream query/sync, device/context sync, malloc/free,
 * synchronous memcpy/memset), by the calling thread's mode:
 *   global: prohibited if this thread has an ongoing capture not begun in
 *     relaxed mode, or any other thread has one begun in global mode;
 *   thread-local: prohibited if this thread has one not begun relaxed;
 *   relaxed: never.
 * @return EMU_OK, or EMU_E_CAPTURE_UNSUPPORTED after invalidating every
 * capture the call conflicts with.  No lock unless prohibited. */
EMU_API int emu_unsafe_call(void);
/* Swap the calling thread's mode with *mode.  EMU_E_INVALID_VALUE for a
 * value that is not a mode. */
EMU_API int emu_capture_mode_exchange(int *mode);
EMU_API int emu_capture_begin(struct CUstream_st *s, int mode);
/* End s's capture: *out gets the graph (NULL and EMU_E_CAPTURE_INVALIDATED
 * when the capture was invalidated). */
EMU_API int emu_capture_end(struct CUstream_st *s, struct CUgraph_st **out);
/* *status: 0 none, 1 active, 2 invalidated; *id and *graph only when
 * capturing (either may be NULL).  EMU_E_CAPTURE_IMPLICIT for the legacy
 * stream while a blocking stream of its device is capturing. */
EMU_API int emu_capture_info(struct CUstream_st *s, int *status, uint64_t *id, struct CUgraph_st **graph,
                             struct CUgraphNode_st *const **deps, size_t *ndeps);
/* Nonzero when s (resolved) is capturing: submitters then build a node. */
static inline int emu_stream_capturing(struct CUstream_st *s)
{
  return (uintptr_t)s > 2 && atomic_load_explicit(&s->cap, memory_order_acquire) != NULL;
}
/* Append n to s's capture (which takes ownership, also on failure).
 * EMU_E_CAPTURE_INVALIDATED when that capture was invalidated,
 * EMU_E_ILLEGAL_STATE when s stopped capturing meanwhile. */
EMU_API int emu_capture_add(struct CUstream_st *s, struct CUgraphNode_st *n);
/* The same; *seq gets s's node count in the capture after n. */
EMU_API int emu_capture_add_at(struct CUstream_st *s, struct CUgraphNode_st *n, uint32_t *seq);
/* Cross-stream capture, as cudaStreamBeginCapture documents it: a stream
 * that is not capturing and waits on an event recorded in capture CAP_ID
 * joins that capture (a fork); EMU_E_CAPTURED_EVENT when the capture is
 * over, EMU_E_NOT_SUPPORTED past EMU_CAP_MAX_STREAMS streams. */
EMU_API int emu_capture_fork(struct CUstream_st *s, uint64_t cap_id);
/* A capturing stream waits on EV of its own capture: the stream that
 * recorded EV is joined back up to that record. */
EMU_API void emu_capture_join_back(struct CUstream_st *s, struct CUevent_st *ev);
/* A use of stream s that must not happen while it captures (sync, query),
 * or of the legacy stream while a blocking stream of its device captures:
 * EMU_OK, or the error after invalidating the capture(s) in the way. */
EMU_API int emu_capture_stream_use(struct CUstream_st *s);
/* The id of s's ongoing capture, 0 when none. */
EMU_API uint64_t emu_capture_id(struct CUstream_st *s);
EMU_API void emu_capture_invalidate(struct CUstream_st *s);

EMU_API void emu_graph_put(struct CUgraph_st *g);
EMU_API int emu_graph_instantiate(struct CUgraphExec_st **out, struct CUgraph_st *g, unsigned long long flags);
/* Launch on s, or on a capturing s add a child-graph node. */
EMU_API int emu_graph_launch(struct CUgraphExec_st *x, struct CUstream_st *s);
EMU_API void emu_graph_exec_destroy(struct CUgraphExec_st *x);
/* Same node count and node types in order: the exec now runs g's nodes,
 * *result 0.  Else *result is 2 (topology changed: counts differ) or 3
 * (node type changed, *err_node set) and EMU_E_GRAPH_EXEC_UPDATE_FAILURE. */
EMU_API int emu_graph_exec_update(struct CUgraphExec_st *x, struct CUgraph_st *g, int *result,
                                  struct CUgraphNode_st **err_node);
EMU_API int emu_graph_nodes(struct CUgraph_st *g, struct CUgraphNode_st **nodes, size_t *n);

/* Memcpy/memset work on s (capture-aware: a node on a capturing stream). */
EMU_API int emu_copy_async(void *dst, const void *src, size_t n, int value, int is_set, struct CUstream_st *s);
/* Synchronous copy/set: the caller has passed emu_unsafe_call(). */
EMU_API int emu_copy_sync(void *dst, const void *src, size_t n, int value, int is_set);

/* Verbose diagnostics (NCCLEMU_VERBOSE=1), one line on stderr. */
EMU_API int emu_verbose(void);
EMU_API void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether FN is one of libcuda.so.1's stand-ins for an unmodelled driver
 * function (emu_cuda_stubs.c). */
EMU_API int emu_is_stub(const void *fn);

/* Start a helper thread with every asynchronous signal blocked, so that the
 * application's (and a tracer's) signal handlers run on application threads,
 * as they would with the real driver's internal threads. */
EMU_API int emu_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, int detached);

static inline uint64_t emu_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Futex on a 32-bit word that may live in MAP_SHARED memory (hence no
 * FUTEX_PRIVATE_FLAG): cross-process waits and wakes. */
static inline void emu_futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
  struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline void emu_futex_wake_all(_Atomic uint32_t *addr)
{
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#endif
