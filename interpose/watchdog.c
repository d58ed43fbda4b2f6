/* watchdog.c -- completion tracking with CUDA driver events, timeouts, and
 * the tracer's own ncclCommGetAsyncError poll.
 *
 * Thread-safety: producers (application threads, hot path) and the single
 * watchdog thread share per-comm lock-free queues:
 *   ev_free[]: free events, single producer (watchdog refills, or the app
 *     thread at init before the comm is published), many consumers (CAS on
 *     ev_free_head);
 *   pend[]: recorded events, many producers (Vyukov bounded queue: per-cell
 *     turn, CAS on pend_tail), single consumer (watchdog).
 * The watchdog touches a comm handle only under nti_life_lock and while
 * c->live is set; destroy/abort clear live under the same lock first.
 * Signal-safety: nothing here runs in a signal handler but
 * nti_watchdog_last_pass (atomics, nanosleep, pthread_self).
 *
 * Cost on the hot path (per collective outside a group): one
 * cuStreamIsCapturing, one CAS to take an event, one cuEventRecord, one CAS
 * to queue it; the same again before the call for a start event when one is
 * due (nti_start_due; docs/performance.md, "Device arrival").  Inside a group the same happens once per (comm, stream) at
 * the outermost GroupEnd.
 *
 * Stream capture: the tracer never makes an application's capture fail.
 * CUDA prohibits "potentially unsafe" calls (event/stream query and sync,
 * device sync, malloc/free, synchronous copies) from a thread in global
 * capture mode while any thread has a global-mode capture open, and such a
 * call invalidates that capture (cuda_runtime_api.h,
 * cudaThreadExchangeStreamCaptureMode).  So the watchdog thread runs in
 * thread-local mode (it never captures, so it is never prohibited; PyTorch's
 * NCCL watchdog does the same), the exit pass runs relaxed, and the wrapper
 * records no event on a stream that is capturing or whose state is unknown.
 * Each CUDA call below says why it is safe where it is made.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>

#include "interpose/nti.h"
#include "recorder/thread.h"
#include "interpose/resolve.h"
#include "interpose/comm.h"
#include "interpose/ident.h"
#include "interpose/record.h"
#include "interpose/watchdog.h"
#include "interpose/graph.h"
#include "interpose/pyframes.h"
#include "interpose/trigger.h"

typedef int cu_result; /* CUresult; 0 = CUDA_SUCCESS */
#define CU_NOT_READY 600
#define CU_EV_DISABLE_TIMING 0x2
#define CU_CAPTURE_MODE_THREAD_LOCAL 1 /* CU_STREAM_CAPTURE_MODE_THREAD_LOCAL */
#define CU_CAPTURE_MODE_RELAXED 2      /* CU_STREAM_CAPTURE_MODE_RELAXED */

static struct {
  int ok; /* driver loaded and every function found */
  cu_result (*event_create)(void **, unsigned);
  cu_result (*event_record)(void *, void *);
  cu_result (*event_query)(void *);
  cu_result (*event_destroy)(void *);
  cu_result (*stream_is_capturing)(void *, int *);
  cu_result (*ctx_get)(void **);
  cu_result (*ctx_set)(void *);
  /* Optional (CUDA >= 10.1; older drivers have no capture modes). */
  cu_result (*exchange_capture_mode)(int *);
  /* Optional: the capture id (and graph) of a capturing stream; the newest
   * spelling the driver has (_v3: CUDA 12.3, _v2: 11.3, plain: 10.1). */
  cu_result (*capture_info_v3)(void *, int *, uint64_t *, void **, const void **, const void **, size_t *);
  cu_result (*capture_info_v2)(void *, int *, uint64_t *, void **, const void **, size_t *);
  cu_result (*capture_info)(void *, int *, uint64_t *);
} cu;

static pthread_t wd_thread;
static int wd_running;           /* under wd_lock */
static int wd_stop;              /* under wd_lock */
static pthread_mutex_t wd_lock = PTHREAD_MUTEX_INITIALIZER;
/* _exit's request for one more pass (nti_watchdog_last_pass): the count of
 * requests, and of those a whole pass has followed.  Atomics: the asker
 * may be a signal handler. */
static unsigned wd_pass_req, wd_pass_done;
static pthread_cond_t wd_cond = PTHREAD_COND_INITIALIZER;

/* Once per process (pthread_once): several threads may create their first
 * communicators at the same time.  cu.ok is published last with a release
 * store; cu_ready() pairs with it, so a reader that sees ok sees the table. */
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static inline int cu_ready(void) {
  return __atomic_load_n(&cu.ok, __ATOMIC_ACQUIRE);
}

/* The comm's CUcontext, published by nti_watchdog_comm_ready after its
 * first events were created (release); pairs with this acquire. */
static inline void *ctx_of(const struct nti_comm *c) {
  return __atomic_load_n(&c->cu_ctx, __ATOMIC_ACQUIRE);
}

static void load_driver(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    nti_say("libcuda.so.1 cannot be loaded; completion tracking is off (%s)", dlerror());
    return;
  }
#define SYM(field, name) *(void **)&cu.field = dlsym(h, name)
  SYM(event_create, "cuEventCreate");
  SYM(event_record, "cuEventRecord");
  SYM(event_query, "cuEventQuery");
  SYM(event_destroy, "cuEventDestroy_v2");
  if (!cu.event_destroy)
    SYM(event_destroy, "cuEventDestroy");
  SYM(stream_is_capturing, "cuStreamIsCapturing");
  SYM(ctx_get, "cuCtxGetCurrent");
  SYM(ctx_set, "cuCtxSetCurrent");
  SYM(exchange_capture_mode, "cuThreadExchangeStreamCaptureMode");
  SYM(capture_info_v3, "cuStreamGetCaptureInfo_v3");
  SYM(capture_info_v2, "cuStreamGetCaptureInfo_v2");
  SYM(capture_info, "cuStreamGetCaptureInfo");
#undef SYM
  if (!cu.event_create || !cu.event_record || !cu.event_query || !cu.event_destroy ||
      !cu.stream_is_capturing || !cu.ctx_get || !cu.ctx_set) {
    nti_say("libcuda.so.1 lacks event functions; completion tracking is off");
    return;
  }
  __atomic_store_n(&cu.ok, 1, __ATOMIC_RELEASE);
}

/* Swap the calling thread's capture-interaction mode (no-op without the
 * function).  The exchange itself is never prohibited.  Not gated on cu.ok:
 * NCCL's own CUDA calls on our thread need the mode even when event
 * tracking is off.  Callers run after load_driver's pthread_once (the
 * watchdog through pthread_create, the exit pass after the join), so the
 * pointer is visible without cu_ready()'s acquire. */
static void capture_mode_swap(int *mode) {
  if (cu.exchange_capture_mode)
    (void)cu.exchange_capture_mode(mode);
}

/* 1 capturing, 0 not, -1 unknown.  cuStreamIsCapturing is the query meant
 * for this and is never prohibited; it fails for the legacy stream while a
 * blocking stream captures (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT), and then
 * an event recorded there would depend on that capture: unknown. */
static int capture_state(void *stream) {
  int st = 0;
  if (!cu_ready())
    return 0;
  if (cu.stream_is_capturing(stream, &st) != 0)
    return -1;
  return st != 0; /* CU_STREAM_CAPTURE_STATUS_NONE = 0; ACTIVE and INVALIDATED capture */
}

int nti_stream_capturing(void *stream) {
  return capture_state(stream) > 0;
}

/* cuStreamGetCaptureInfo is a query made for this: CUDA lists it among the
 * calls that are legal on a capturing stream (it is how a library joins a
 * capture), it is not one of the potentially unsafe calls of
 * cuThreadExchangeStreamCaptureMode, and it neither waits for nor adds
 * work.  So it is safe in every mode, on the capturing thread (the wrapper
 * of a captured NCCL call, of cudaStreamEndCapture) as on any other. */
int nti_capture_id(void *stream, uint64_t *id, void **graph) {
  int st = 0;
  uint64_t cid = 0;
  void *g = NULL;
  cu_result rc = -1;
  if (!cu_ready())
    return 0;
  if (cu.capture_info_v3)
    rc = cu.capture_info_v3(stream, &st, &cid, &g, NULL, NULL, NULL);
  else if (cu.capture_info_v2)
    rc = cu.capture_info_v2(stream, &st, &cid, &g, NULL, NULL);
  else if (cu.capture_info)
    rc = cu.capture_info(stream, &st, &cid);
  if (rc != 0 || st != 1) /* CU_STREAM_CAPTURE_STATUS_ACTIVE */
    return 0;
  *id = cid;
  if (graph)
    *graph = g;
  return 1;
}

/* ---------------------------------------------------------- event pool -- */

static void *ev_take(struct nti_comm *c) {
  for (;;) {
    /* Acquire pairs with the release store of ev_free_tail in ev_give. */
    uint64_t h = __atomic_load_n(&c->ev_free_head, __ATOMIC_ACQUIRE);
    uint64_t t = __atomic_load_n(&c->ev_free_tail, __ATOMIC_ACQUIRE);
    if (h == t)
      return NULL;
    void *ev = c->ev_free[h & (NTI_EVQ - 1)];
    /* The slot cannot be refilled before head moves past h (the producer
     * waits for space), so a successful CAS proves ev was valid. */
    if (__atomic_compare_exchange_n(&c->ev_free_head, &h, h + 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
      return ev;
  }
}

/* Single producer (watchdog, or the init thread before publication). */
static int ev_give(struct nti_comm *c, void *ev) {
  uint64_t t = c->ev_free_tail;
  uint64_t h = __atomic_load_n(&c->ev_free_head, __ATOMIC_ACQUIRE);
  if (t - h >= NTI_EVQ)
    return -ENOSPC;
  c->ev_free[t & (NTI_EVQ - 1)] = ev;
  __atomic_store_n(&c->ev_free_tail, t + 1, __ATOMIC_RELEASE);
  return 0;
}

/* Fill the pool.  Single producer: the init thread before cu_ctx is
 * published (the watchdog skips a comm without a context), the watchdog
 * after. */
static void ev_fill(struct nti_comm *c, unsigned want) {
  for (unsigned i = 0; i < want; i++) {
    uint64_t t = c->ev_free_tail;
    if (t - __atomic_load_n(&c->ev_free_head, __ATOMIC_ACQUIRE) >= NTI_EVQ / 2)
      return;
    void *ev = NULL;
    /* Event creation touches no stream: not a potentially unsafe call, on
     * the init thread (any mode) as on the watchdog (thread-local). */
    if (cu.event_create(&ev, CU_EV_DISABLE_TIMING) != 0 || !ev)
      return;
    if (ev_give(c, ev) < 0) {
      cu.event_destroy(ev); /* never recorded: safe in any mode */
      return;
    }
  }
}

/* --------------------------------------------------------- pending ops -- */

static int pend_push(struct nti_comm *c, void *ev, void *stream, uint64_t seq, uint64_t pos_first,
                     uint64_t pos, uint64_t tsc, int p2p, int replay, int start, uint32_t tid, uint32_t gid) {
  uint64_t t = __atomic_load_n(&c->pend_tail, __ATOMIC_RELAXED);
  for (;;) {
    struct nti_pending *cell = &c->pend[t & (NTI_EVQ - 1)];
    /* Acquire pairs with the consumer's release of turn: the cell is free. */
    uint64_t turn = __atomic_load_n(&cell->turn, __ATOMIC_ACQUIRE);
    int64_t dif = (int64_t)(turn - t);
    if (dif == 0) {
      if (__atomic_compare_exchange_n(&c->pend_tail, &t, t + 1, 1, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
        cell->ev = ev;
        cell->seq = seq;
        cell->pos = pos;
        cell->pos_first = pos_first;
        cell->stream = (uint64_t)(uintptr_t)stream;
        cell->tid = tid;
        cell->group_id = gid;
        cell->tsc = tsc;
        cell->p2p = p2p;
        cell->replay = replay;
        cell->start = start;
        /* Release pairs with the watchdog's acquire: the fields are set. */
        __atomic_store_n(&cell->turn, t + 1, __ATOMIC_RELEASE);
        return 0;
      }
    } else if (dif < 0) {
      return -ENOSPC; /* full: the watchdog is behind by NTI_EVQ ops */
    } else {
      t = __atomic_load_n(&c->pend_tail, __ATOMIC_RELAXED);
    }
  }
}

/* The tail events: an op that finds the pool empty records one again.  A
 * burst of more ops than the pool holds between two polls (start and
 * completion events, two per collective) used to leave the ops past the
 * pool untracked -- and with them the next op, issued before the watchdog
 * had taken the burst's events back, which never timed out when it was
 * the one that hung.  CUDA lets an event be recorded again (it then stands
 * for the newest record), and stream order makes its completion that of
 * every op before it on the stream: so the newest op of the burst is
 * timed, and the run is marked complete with it.  Of two tails, a writer
 * takes one the watchdog has seen complete, else records again the one
 * holding the older op: the other keeps the op before, so when the newest
 * hangs, the one before it is still seen complete (last_completed is
 * exact).  One stream per tail: an op on another stream than both
 * unacknowledged tails stays untracked, as does one that finds another
 * writer here (never waited for).  @return 0 tracked. */
static int tail_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                      uint64_t tsc, int p2p, uint32_t tid, uint32_t gid) {
  if (__atomic_exchange_n(&c->tail_busy, 1, __ATOMIC_ACQUIRE))
    return -1;
  struct nti_tail *t = NULL;
  int fresh = 0;
  for (int i = 0; i < NTI_TAILS && !fresh; i++) {
    struct nti_tail *x = &c->tail[i];
    if (!__atomic_load_n(&x->ev, __ATOMIC_ACQUIRE))
      continue;
    /* gen is written only under tail_busy: a plain read */
    if (x->gen == __atomic_load_n(&x->done, __ATOMIC_ACQUIRE)) {
      t = x;
      fresh = 1;
    } else if (__atomic_load_n(&x->stream, __ATOMIC_RELAXED) == (uint64_t)(uintptr_t)stream &&
               (!t || __atomic_load_n(&x->pos, __ATOMIC_RELAXED) < __atomic_load_n(&t->pos, __ATOMIC_RELAXED))) {
      t = x;
    }
  }
  if (!t) {
    __atomic_store_n(&c->tail_busy, 0, __ATOMIC_RELEASE);
    return -1;
  }
  uint64_t g = t->gen;
  __atomic_store_n(&t->gen, g + 1, __ATOMIC_RELAXED);
  /* The odd gen is visible before the record: a query the watchdog makes
   * after it is discarded (it reads the gen again after its query). */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (fresh)
    __atomic_store_n(&t->pos_first, pos_first, __ATOMIC_RELAXED);
  __atomic_store_n(&t->seq, seq, __ATOMIC_RELAXED);
  __atomic_store_n(&t->pos, pos, __ATOMIC_RELAXED);
  __atomic_store_n(&t->tsc, tsc, __ATOMIC_RELAXED);
  __atomic_store_n(&t->stream, (uint64_t)(uintptr_t)stream, __ATOMIC_RELAXED);
  __atomic_store_n(&t->tid, tid, __ATOMIC_RELAXED);
  __atomic_store_n(&t->gid, gid, __ATOMIC_RELAXED);
  __atomic_store_n(&t->p2p, p2p, __ATOMIC_RELAXED);
  /* Safe: ordinary stream work on a stream that is not capturing. */
  (void)cu.event_record(t->ev, stream);
  /* Release pairs with the watchdog's acquire of the gen: fields and
   * record are done. */
  __atomic_store_n(&t->gen, g + 2, __ATOMIC_RELEASE);
  __atomic_store_n(&c->tail_busy, 0, __ATOMIC_RELEASE);
  return 0;
}

/* tid, gid: the thread and group whose records [pos_first, pos] are
 * (complete_records matches them). */
static void track_as(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                     uint64_t tsc, int p2p, int replay, uint32_t tid, uint32_t gid) {
  if (!cu_ready() || !ctx_of(c))
    return; /* the record already says NTR_REC_NO_TRACKING */
  int cap = capture_state(stream);
  if (cap != 0) {
    /* Work captured into a graph runs when the graph is launched, maybe
     * never, maybe many times; and an event recorded in a capture would be
     * a captured event, which the watchdog could not query
     * (CUDA_ERROR_CAPTURED_EVENT).  Captured calls join their capture's
     * graph entry (graph.c), which events each launch instead.  Unknown
     * state: no event either. */
    if (cap > 0 && !replay)
      nti_graph_note_captured(c, stream, pos_first, pos);
    else if (cap > 0)
      nti_record_patch(pos, c, NTI_KEEP_RESULT, NTR_REC_CAPTURED, 0);
    else
      nti_record_patch(pos, c, NTI_KEEP_RESULT, NTR_REC_NO_TRACKING, 0);
    return;
  }
  void *ev = ev_take(c);
  if (!ev) {
    /* A replay counts in replays_done one by one: no tail for it. */
    if (replay || tail_track(c, stream, seq, pos_first, pos, tsc, p2p, tid, gid) < 0)
      nti_record_patch(pos, c, NTI_KEEP_RESULT, NTR_REC_NO_TRACKING, 0);
    return;
  }
  /* An event that fails to record is still queued: the watchdog's query
   * then fails too and returns the event to the pool. */
  /* Safe: recording on a stream that is not capturing is ordinary stream
   * work, not a potentially unsafe call, whatever other threads capture. */
  cu_result rr = cu.event_record(ev, stream);
  (void)rr;
  if (pend_push(c, ev, stream, seq, pos_first, pos, tsc, p2p, replay, 0, tid, gid) < 0) {
    /* Rare: the event leaks (the watchdog creates new ones). */
    if (replay || tail_track(c, stream, seq, pos_first, pos, tsc, p2p, tid, gid) < 0)
      nti_record_patch(pos, c, NTI_KEEP_RESULT, NTR_REC_NO_TRACKING, 0);
  }
}

static void track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                  uint64_t tsc, int p2p, int replay) {
  track_as(c, stream, seq, pos_first, pos, tsc, p2p, replay, nti_tid(), nti_tls.group_id);
}

void nti_complete_defer(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                        uint64_t tsc, int p2p) {
  /* Acquire pairs with the flusher's release of the flag. */
  while (__atomic_exchange_n(&c->defer_lock, 1, __ATOMIC_ACQUIRE))
    ; /* held only for a copy of a few entries */
  uint32_t n = c->ndefer;
  if (n < NTI_DEFER) {
    c->defer[n] = (struct nti_deferred){stream, seq, pos_first, pos, tsc, nti_tid(), nti_tls.group_id, p2p};
    __atomic_store_n(&c->ndefer, n + 1, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&c->defer_lock, 0, __ATOMIC_RELEASE);
  if (n >= NTI_DEFER)
    nti_record_patch(pos, c, NTI_KEEP_RESULT, NTR_REC_NO_TRACKING, 0);
}

void nti_complete_flush_deferred(struct nti_comm *c) {
  struct nti_deferred got[NTI_DEFER];
  if (!__atomic_load_n(&c->ndefer, __ATOMIC_RELAXED))
    return;
  while (__atomic_exchange_n(&c->defer_lock, 1, __ATOMIC_ACQUIRE))
    ;
  uint32_t n = c->ndefer;
  memcpy(got, c->defer, n * sizeof got[0]);
  __atomic_store_n(&c->ndefer, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&c->defer_lock, 0, __ATOMIC_RELEASE);
  /* NCCL has put the work on the streams: an event recorded now follows
   * it (and maybe later work of the application: completion is then seen
   * late, never early).  The stream's capture state is checked in track. */
  for (uint32_t i = 0; i < n; i++)
    track_as(c, got[i].stream, got[i].seq, got[i].pos_first, got[i].pos, got[i].tsc, got[i].p2p, 0, got[i].tid,
             got[i].group_id);
}

/* The same for a start event, before the op: nothing is patched when
 * there is none (the DEV_ARRIVE event is simply missing); a capturing or
 * unknown stream gets none, exactly as for completion events. */
void nti_start_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc) {
  if (!cu_ready() || !ctx_of(c) || capture_state(stream) != 0)
    return;
  void *ev = ev_take(c);
  if (!ev)
    return;
  /* Safe: ordinary stream work on a stream that is not capturing. */
  (void)cu.event_record(ev, stream);
  if (pend_push(c, ev, stream, seq, pos, pos, tsc, 0, 0, 1, nti_tid(), 0) < 0)
    return; /* rare: the event leaks (the watchdog creates new ones) */
}

void nti_start_boost(unsigned long long comm_id) {
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all)
    if (!__atomic_load_n(&c->retired, __ATOMIC_ACQUIRE) && c->cs->comm_id == comm_id) {
      __atomic_store_n(&c->start_every, 1, __ATOMIC_RELAXED);
      if (nti_tracked(c))
        nti_comm_fast_off(c); /* start events: the slow path's */
    }
}

/* The stream reached a start event: the device's arrival at that op. */
static void device_arrived(struct nti_comm *c, const struct nti_pending *cell, uint64_t now) {
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_DEV_ARRIVE, NTR_PHASE_EVENT, c);
  r->tsc = now;
  r->seq = cell->seq;
  r->count = cell->tsc;
  r->aux = cell->pos;
  r->u.buf.stream = cell->stream;
  nti_record_end(r, pos, NULL); /* not into recent[]: that keeps the ops */
}

void nti_complete_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc,
                        int p2p, struct ntr_record *r) {
  (void)r;
  track(c, stream, seq, pos, pos, tsc, p2p, 0);
}

void nti_complete_track_replay(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc) {
  track(c, stream, seq, pos, pos, tsc, seq == 0, 1);
}

void nti_complete_track_group(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first,
                              uint64_t pos, uint64_t tsc, int p2p) {
  track(c, stream, seq, pos_first, pos, tsc, p2p, 0);
}

/* The event of a group stands for every op of that group on its (comm,
 * stream): mark each of those records complete. */
static void complete_records(struct nti_comm *c, const struct nti_pending *cell, uint64_t now) {
  uint64_t first = cell->pos_first;
  if (cell->pos - first > nti_proc.ring.mask)
    first = cell->pos - nti_proc.ring.mask; /* older ones were overwritten anyway */
  for (uint64_t p = first; p <= cell->pos; p++) {
    struct ntr_record copy;
    const struct ntr_record *r = &nti_proc.ring.slots[p & nti_proc.ring.mask];
    int got = ntr_ring_read_slot(r, &copy) == p + 1;
    if (p != cell->pos && (!got || copy.comm_id != c->cs->comm_id || copy.tid != cell->tid ||
                           copy.group_id != cell->group_id || copy.u.buf.stream != cell->stream ||
                           copy.phase != NTR_PHASE_CALL))
      continue;
    if (got && (copy.kind == NTR_KIND_SEND || copy.kind == NTR_KIND_RECV)) /* single writer: us */
      __atomic_store_n(&c->cs->p2p_completed, c->cs->p2p_completed + 1, __ATOMIC_RELAXED);
    nti_record_patch(p, c, NTI_KEEP_RESULT, NTR_REC_COMPLETED, now);
  }
}

void nti_watchdog_comm_ready(struct nti_comm *c) {
  /* Also here: a comm created on another thread while the first comm's
   * thread is still loading the driver waits for it instead of going
   * untracked. */
  pthread_once(&cu_once, load_driver);
  if (!cu_ready() || ctx_of(c))
    return;
  void *ctx = NULL;
  /* The init thread has the comm's device current (NCCL requires it): the
   * events live in that context.  Context queries touch no stream: safe
   * during a capture. */
  if (cu.ctx_get(&ctx) != 0 || !ctx) {
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
      nti_say("no CUDA context current at communicator init; completion tracking is off for it");
    return;
  }
  ev_fill(c, NTI_EVQ / 2);
  for (int i = 0; i < NTI_TAILS; i++) {
    void *tail = NULL;
    if (cu.event_create(&tail, CU_EV_DISABLE_TIMING) == 0 && tail)
      __atomic_store_n(&c->tail[i].ev, tail, __ATOMIC_RELEASE);
  }
  __atomic_store_n(&c->start_every, nti_cfg.start_every, __ATOMIC_RELAXED);
  __atomic_store_n(&c->cu_ctx, ctx, __ATOMIC_RELEASE); /* pairs with ctx_of() */
  nti_comm_flags_update(c);
}

/* ------------------------------------------------------------ watchdog -- */

static double secs(uint64_t dt) {
  uint64_t hz = nti_proc.ring.hdr->tsc_hz;
  return hz ? (double)dt / (double)hz : 0.0;
}

static void timeout_report(struct nti_comm *c, uint64_t seq, const char *op, double waited) {
  struct ntr_comm_state *cs = c->cs;
  char reason[96];
  snprintf(reason, sizeof reason, "timeout: comm %016llx rank %d seq %llu %s not complete after %.0f s",
           (unsigned long long)cs->comm_id, cs->rank, (unsigned long long)seq, op, waited);
  nti_say("%s", reason);
  __atomic_add_fetch(&cs->stalls, 1, __ATOMIC_RELAXED); /* for the metrics endpoint */
  nti_record_event(NTR_KIND_TIMEOUT, c, op, 0, (uint64_t)waited, seq);
  nti_dump_now(NTR_TRIG_TIMEOUT, 0, 0, reason);
}

/* A replay that did not finish: named by the first captured call of this
 * comm in the graph and the replay number, "AllReduce #5 in graph replay 31"
 * (the TIMEOUT record: text = that op, seq = its seq, count = the replay). */
static void replay_timeout_report(struct nti_comm *c, const struct ntr_record *g, double waited) {
  struct ntr_comm_state *cs = c->cs;
  const char *op = nti_kind_name((unsigned)g->redop);
  uint64_t seq = g->u.buf.sendbuf;
  char reason[96];
  snprintf(reason, sizeof reason, "timeout: comm %016llx rank %d %s #%llu in graph replay %llu not complete after %.0f s",
           (unsigned long long)cs->comm_id, cs->rank, op, (unsigned long long)seq, (unsigned long long)g->count,
           waited);
  nti_say("%s", reason);
  __atomic_add_fetch(&cs->stalls, 1, __ATOMIC_RELAXED);
  nti_record_event(NTR_KIND_TIMEOUT, c, op, g->count, (uint64_t)waited, seq);
  nti_dump_now(NTR_TRIG_TIMEOUT, 0, 0, reason);
}

/* The oldest op of a comm seen not complete at this poll: the head of its
 * pending events, or the tail event's op when that one is older. */
struct wd_wait {
  int set;
  uint64_t pos, seq, tsc;
};

/* A tail event (tail_track): its newest op, once its writer is done (the
 * gen read again after the query says no write overlapped).  Complete:
 * every op of the run on its stream is; not ready: a candidate for the
 * timeout.  A failed query acknowledges it too (as a failed pooled event
 * is given back). */
static void poll_tail(struct nti_comm *c, struct nti_tail *t, uint64_t now, struct wd_wait *w) {
  void *ev = __atomic_load_n(&t->ev, __ATOMIC_ACQUIRE);
  if (!ev)
    return;
  /* Acquire pairs with the writer's release of the even gen. */
  uint64_t g = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
  if ((g & 1) || g == __atomic_load_n(&t->done, __ATOMIC_RELAXED))
    return;
  struct nti_pending cell = {
      .seq = __atomic_load_n(&t->seq, __ATOMIC_RELAXED),
      .pos = __atomic_load_n(&t->pos, __ATOMIC_RELAXED),
      .pos_first = __atomic_load_n(&t->pos_first, __ATOMIC_RELAXED),
      .tsc = __atomic_load_n(&t->tsc, __ATOMIC_RELAXED),
      .stream = __atomic_load_n(&t->stream, __ATOMIC_RELAXED),
      .tid = __atomic_load_n(&t->tid, __ATOMIC_RELAXED),
      .group_id = __atomic_load_n(&t->gid, __ATOMIC_RELAXED),
      .p2p = __atomic_load_n(&t->p2p, __ATOMIC_RELAXED),
  };
  /* Potentially unsafe, made only in thread-local or relaxed mode, as the
   * pool's queries (poll_events). */
  cu_result q = cu.event_query(ev);
  /* Pairs with the writer's fence after its odd gen: a record that began
   * before the query shows here. */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (__atomic_load_n(&t->gen, __ATOMIC_RELAXED) != g)
    return; /* recorded again meanwhile: next poll */
  if (q == CU_NOT_READY) {
    if (!w->set || cell.pos < w->pos)
      *w = (struct wd_wait){1, cell.pos, cell.seq, cell.tsc};
    return;
  }
  if (q == 0) {
    if (!cell.p2p && cell.seq > __atomic_load_n(&c->cs->last_completed, __ATOMIC_RELAXED))
      __atomic_store_n(&c->cs->last_completed, cell.seq, __ATOMIC_RELEASE);
    __atomic_store_n(&c->cs->last_complete_tsc, now, __ATOMIC_RELAXED);
    complete_records(c, &cell, now);
  }
  /* Release pairs with tail_track's acquire: a later op starts a new run. */
  __atomic_store_n(&t->done, g, __ATOMIC_RELEASE);
}

/* A destroyed (or aborted) comm whose tails are idle: their events go back
 * to the driver, and tail_busy stays taken (no writer records one again). */
static void tail_release(struct nti_comm *c) {
  uint32_t lc = __atomic_load_n(&c->cs->lifecycle, __ATOMIC_ACQUIRE);
  if (lc != NTR_COMM_DESTROYED && lc != NTR_COMM_ABORTED)
    return;
  for (int i = 0; i < NTI_TAILS; i++)
    if (__atomic_load_n(&c->tail[i].ev, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&c->tail[i].gen, __ATOMIC_ACQUIRE) != __atomic_load_n(&c->tail[i].done, __ATOMIC_RELAXED))
      return;
  if (__atomic_exchange_n(&c->tail_busy, 1, __ATOMIC_ACQUIRE))
    return;
  for (int i = 0; i < NTI_TAILS; i++) {
    void *ev = __atomic_exchange_n(&c->tail[i].ev, NULL, __ATOMIC_ACQ_REL);
    if (ev)
      cu.event_destroy(ev); /* not a potentially unsafe call */
  }
}

static void poll_events(struct nti_comm *c, uint64_t now, uint64_t tmo) {
  void *ctx = ctx_of(c);
  if (!cu_ready() || !ctx)
    return;
  cu.ctx_set(ctx); /* binds a context, touches no stream: safe during a capture */
  struct wd_wait w = {0};
  for (;;) {
    uint64_t h = c->pend_head;
    struct nti_pending *cell = &c->pend[h & (NTI_EVQ - 1)];
    if (__atomic_load_n(&cell->turn, __ATOMIC_ACQUIRE) != h + 1)
      break; /* empty */
    /* A potentially unsafe call: made only in thread-local mode (the
     * watchdog, which has no capture of its own) or relaxed mode (the exit
     * pass), so never prohibited; the event was recorded on a stream that
     * was not capturing, so it is no captured event. */
    cu_result q = cu.event_query(cell->ev);
    if (q == CU_NOT_READY) {
      /* Events on one comm complete in order: the oldest pending one is the
       * first op that has not finished. */
      w = (struct wd_wait){1, cell->pos, cell->seq, cell->tsc};
      break;
    }
    if (q == 0 && cell->start) {
      device_arrived(c, cell, now);
    } else if (q == 0) {
      if (cell->replay) /* single writer: the watchdog (or the exit pass after it stopped) */
        __atomic_store_n(&c->cs->replays_done, c->cs->replays_done + 1, __ATOMIC_RELAXED);
      if (!cell->p2p) {
        uint64_t cur = __atomic_load_n(&c->cs->last_completed, __ATOMIC_RELAXED);
        if (cell->seq > cur)
          __atomic_store_n(&c->cs->last_completed, cell->seq, __ATOMIC_RELEASE);
      }
      __atomic_store_n(&c->cs->last_complete_tsc, now, __ATOMIC_RELAXED);
      complete_records(c, cell, now);
    }
    /* Completed or failed: the event goes back to the pool. */
    if (ev_give(c, cell->ev) < 0)
      cu.event_destroy(cell->ev); /* not a potentially unsafe call */
    /* Release pairs with the producers' acquire: the cell is free again. */
    __atomic_store_n(&cell->turn, h + NTI_EVQ, __ATOMIC_RELEASE);
    c->pend_head = h + 1;
  }
  for (int i = 0; i < NTI_TAILS; i++)
    poll_tail(c, &c->tail[i], now, &w);
  if (tmo && w.set && now > w.tsc && now - w.tsc > tmo && w.pos + 1 > c->timeout_reported_pos) {
    c->timeout_reported_pos = w.pos + 1;
    struct ntr_record r;
    unsigned kind = ntr_ring_read_slot(&nti_proc.ring.slots[w.pos & nti_proc.ring.mask], &r) == w.pos + 1 ? r.kind : 0;
    if (kind == NTR_KIND_GRAPH_LAUNCH)
      replay_timeout_report(c, &r, secs(now - w.tsc));
    else
      timeout_report(c, w.seq, kind ? nti_kind_name(kind) : "op", secs(now - w.tsc));
  }
  if (__atomic_load_n(&c->live, __ATOMIC_ACQUIRE)) {
    /* Only when the pool runs low (more than 3/8 of the queue in flight at
     * once), then back to half: a driver's cuEventCreate may allocate, and
     * a malloc on this thread costs it a glibc arena, 64 MiB of address
     * space (recorder/heap.h); the init fill covers ordinary depths, the
     * tail event a burst past them. */
    if (c->ev_free_tail - __atomic_load_n(&c->ev_free_head, __ATOMIC_ACQUIRE) < NTI_EVQ / 8)
      ev_fill(c, NTI_EVQ / 2);
  } else if (c->pend_head == __atomic_load_n(&c->pend_tail, __ATOMIC_ACQUIRE)) {
    /* Destroyed and drained: its events go back to the driver. */
    void *ev;
    while ((ev = ev_take(c)))
      cu.event_destroy(ev); /* not a potentially unsafe call */
    tail_release(c);
  }
}

/* ------------------------------------------------------- recent copies -- */

static int is_op(unsigned kind) {
#define NT_COLL(name, KIND, ...) kind == NTR_KIND_##KIND ||
  /* replays too: published like ops (graph.c), copied like ops */
#define NT_P2P NT_COLL
  return kind == NTR_KIND_GRAPH_LAUNCH ||
#include "recorder/nccl_api.def"
      0;
}

/* Polls the scan has waited for c's record at pos (counted once per poll). */
static uint64_t comm_stalled(struct nti_comm *c, uint64_t pos) {
  if (c->stall_pos != pos + 1) {
    c->stall_pos = pos + 1;
    c->stall_polls = 0;
  }
  return ++c->stall_polls;
}

/* Copy c's collective/p2p records written since the last poll into its
 * recent[] (the wrappers publish them with cs = NULL), so a quiet comm keeps
 * its history in the mapping while a busy one laps the ring.  Only the
 * newest NTR_COMM_RECENT can matter (recent[] keeps no more), so the walk
 * starts at c's newest record and follows the records' prev_gap links back
 * (nti_reserve): the work per poll is bounded by recent[]'s size whatever
 * the call rate, and the watchdog reads no slot of another comm -- a scan
 * of the whole ring in position order kept the other core busy and pulled
 * the very lines the writers were about to write into its cache.
 * The newest record waits while its call has not returned (its result
 * would be missing from the copy), for about a second (70 polls) at most;
 * the wrapper patches a copy made earlier (nti_record_patch). */
/* last_enqueued of a comm without completion tracking: the wrappers'
 * fast path leaves it to us (wrappers.c: fast_post), and we read it off
 * the records we copy: the newest collective, outside a group (GroupEnd
 * keeps those, group.c), that NCCL accepted.  Watchdog only; a tracked
 * comm's value is the wrappers'. */
static void note_enqueued(struct nti_comm *c, const struct ntr_record *r) {
  if (nti_tracked(c) || r->kind == NTR_KIND_SEND || r->kind == NTR_KIND_RECV || (r->flags & NTR_REC_IN_GROUP) ||
      (r->result != ncclSuccess && r->result != ncclInProgress))
    return;
  /* Relaxed load: only we write it for such a comm.  Release store: as
   * the wrappers' (readers of the mapping). */
  if (r->seq > __atomic_load_n(&c->cs->last_enqueued, __ATOMIC_RELAXED))
    __atomic_store_n(&c->cs->last_enqueued, r->seq, __ATOMIC_RELEASE);
}

/* A record copied into recent[] before its call returned (after about a
 * second): its result, once the main ring has it, goes into the copy.  The
 * wrappers used to do this; now the calling thread stores the result into
 * the ring only. */
static void recent_patch(struct nti_comm *c) {
  uint64_t p1 = c->recent_patch_pos;
  if (!p1)
    return;
  struct ntr_record r;
  if (ntr_ring_read_slot(&nti_proc.ring.slots[(p1 - 1) & nti_proc.ring.mask], &r) != p1) {
    c->recent_patch_pos = 0; /* overwritten: the copy keeps -1 */
    return;
  }
  if (r.result == -1)
    return;
  nti_record_patch(p1 - 1, c, r.result, 0, 0);
  note_enqueued(c, &r);
  c->recent_patch_pos = 0;
}

/* A collective or p2p call in progress for longer than the timeout (NCCL
 * connects to peers lazily, inside the first op that needs them): the
 * wrappers' fast path marks nothing, so the comm's newest record tells --
 * an op CALL record of this comm whose result is still -1.  It is timed
 * out like a lifecycle call: the comm is marked blocked in it (so dumps
 * show where), reported once, and the mark is taken back once the call
 * returned.  The mark is only set where there is none: a lifecycle or
 * group mark of the same comm comes first. */
static void poll_incall(struct nti_comm *c, uint64_t now, uint64_t tmo) {
  struct ntr_comm_state *cs = c->cs;
  uint64_t newest = __atomic_load_n(&c->next_pos, __ATOMIC_ACQUIRE);
  struct ntr_record r;
  int incall = newest && ntr_ring_read_slot(&nti_proc.ring.slots[(newest - 1) & nti_proc.ring.mask], &r) == newest &&
               r.phase == NTR_PHASE_CALL && is_op(r.kind) && r.result == -1 && r.comm_id == cs->comm_id;
  if (c->incall_mark && (!incall || r.tsc != c->incall_mark)) {
    uint64_t mark = c->incall_mark;
    /* Ours only: a lifecycle call may have marked the comm since. */
    __atomic_compare_exchange_n(&cs->blocked_since, &mark, 0, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    c->incall_mark = 0;
  }
  if (!incall || !tmo || now <= r.tsc || now - r.tsc <= tmo || c->incall_reported_pos == newest)
    return;
  c->incall_reported_pos = newest;
  /* An existing mark (a lifecycle call's) is left alone. */
  if (nti_blocked_mark_if_clear(cs, r.kind, r.tid, r.tsc)) {
    c->incall_mark = r.tsc;
    c->life_reported_since = r.tsc; /* reported here, not again by poll_lifecycle */
  }
  timeout_report(c, r.seq, nti_kind_name(r.kind), secs(now - r.tsc));
}

/* The metrics endpoint's p2p and byte counters (interpose/metrics.c),
 * from the records copied here: the watchdog is their single writer. */
static void count_issued(struct ntr_comm_state *cs, const struct ntr_record *r) {
  static const uint8_t size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}; /* ncclInt8 .. ncclFloat8e5m2 */
  if (r->kind == NTR_KIND_GRAPH_LAUNCH)
    return;
  if (r->kind == NTR_KIND_SEND || r->kind == NTR_KIND_RECV)
    __atomic_store_n(&cs->p2p_issued, cs->p2p_issued + 1, __ATOMIC_RELAXED);
  if (r->dtype < sizeof size)
    __atomic_store_n(&cs->bytes_issued, cs->bytes_issued + r->count * size[r->dtype], __ATOMIC_RELAXED);
}

static void recent_scan_comm(struct nti_comm *c, uint64_t head, int final) {
  static struct ntr_record got[NTR_COMM_RECENT]; /* watchdog only (or its last pass at exit) */
  uint64_t newest = __atomic_load_n(&c->next_pos, __ATOMIC_ACQUIRE);
  uint64_t upto = __atomic_load_n(&c->recent_upto, __ATOMIC_RELAXED);
  uint64_t slots = nti_proc.ring.mask + 1;
  if (newest <= upto)
    return;
  uint64_t p = newest - 1, done = newest;
  int n = 0;
  while (p >= upto && head - p <= slots && n < (int)NTR_COMM_RECENT) {
    struct ntr_record r;
    uint64_t cm = ntr_ring_read_slot(&nti_proc.ring.slots[p & nti_proc.ring.mask], &r);
    if (cm != p + 1 || r.comm_id != c->cs->comm_id || r.rank != c->cs->rank) {
      /* the newest still being written: next poll (unless its writer is
       * gone); an older link that does not hold c's record: overwritten */
      if (p == newest - 1 && !final && comm_stalled(c, p) < 70)
        return;
      break;
    }
    if (r.phase == NTR_PHASE_CALL && is_op(r.kind)) {
      if (p == newest - 1 && r.result == -1 && !final && comm_stalled(c, p) < 70) {
        done = p; /* its call has not returned: copied at a later poll */
      } else {
        got[n++] = r;
        if (r.result == -1)
          c->recent_patch_pos = p + 1; /* its result is patched in later */
      }
    }
    if (!r.prev_gap || r.prev_gap > p)
      break;
    p -= r.prev_gap;
  }
  while (n > 0) { /* oldest first: recent[] keeps the newest at the top */
    n--;
    ntr_ring_commit_recent(c->cs, &got[n], got[n].commit - 1);
    note_enqueued(c, &got[n]);
    count_issued(c->cs, &got[n]);
  }
  /* Release: a wrapper that sees the new position also sees the copies. */
  __atomic_store_n(&c->recent_upto, done, __ATOMIC_RELEASE);
}

static void recent_scan(int final) {
  nti_comm_seq_sync_all();
  uint64_t head = __atomic_load_n(&nti_proc.ring.hdr->head, __ATOMIC_ACQUIRE);
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all) {
    if (__atomic_load_n(&c->retired, __ATOMIC_ACQUIRE))
      continue; /* its slot may be another comm's now */
    recent_scan_comm(c, head, final);
    recent_patch(c);
  }
}

/* A dead comm (destroyed, aborted, or its init failed) with nothing left
 * to watch -- the call that ended it returned, no event in flight, no
 * deferred op, tails idle -- is retired: its slot may go to a new comm
 * (registry.c), and the watchdog never looks at it again.  Watchdog only. */
static void maybe_retire(struct nti_comm *c) {
  if (__atomic_load_n(&c->live, __ATOMIC_ACQUIRE))
    return;
  uint32_t lc = __atomic_load_n(&c->cs->lifecycle, __ATOMIC_ACQUIRE);
  if (lc != NTR_COMM_DESTROYED && lc != NTR_COMM_ABORTED && lc != NTR_COMM_INIT_FAILED)
    return;
  /* Acquire pairs with the clear after the ending call's EXIT record. */
  if (__atomic_load_n(&c->cs->blocked_since, __ATOMIC_ACQUIRE) || c->incall_mark ||
      c->pend_head != __atomic_load_n(&c->pend_tail, __ATOMIC_ACQUIRE) || __atomic_load_n(&c->ndefer, __ATOMIC_RELAXED))
    return;
  for (int i = 0; i < NTI_TAILS; i++)
    if (__atomic_load_n(&c->tail[i].ev, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&c->tail[i].gen, __ATOMIC_ACQUIRE) != __atomic_load_n(&c->tail[i].done, __ATOMIC_RELAXED))
      return;
  nti_comm_retire(c);
}

static void poll_lifecycle(struct nti_comm *c, uint64_t now, uint64_t tmo) {
  struct ntr_comm_state *cs = c->cs;
  uint64_t since = __atomic_load_n(&cs->blocked_since, __ATOMIC_ACQUIRE);
  if (!tmo || !since || now <= since || now - since <= tmo || c->life_reported_since == since)
    return;
  c->life_reported_since = since;
  timeout_report(c, __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED), nti_kind_name(cs->blocked_kind),
                 secs(now - since));
}

void nti_async_transition(struct nti_comm *c, ncclResult_t now) {
  struct ntr_comm_state *cs = c->cs;
  if (now == ncclSuccess)
    nti_complete_flush_deferred(c); /* ops accepted with ncclInProgress are on their streams now */
  int32_t old = __atomic_load_n(&cs->async_error, __ATOMIC_ACQUIRE);
  if (old == (int32_t)now)
    return;
  /* The caller holds c->async_poller; the CAS also keeps a change that
   * another path (init, destroy) stored from being recorded twice. */
  if (!__atomic_compare_exchange_n(&cs->async_error, &old, (int32_t)now, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_ASYNC_ERROR, NTR_PHASE_EVENT, c);
  r->aux = (uint64_t)(uint32_t)now;
  r->result = old;
  r->seq = __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED);
  nti_record_end(r, pos, c);
  if (now == ncclSuccess && old == ncclInProgress) {
    /* A nonblocking init/finalize/split finished. */
    uint32_t lc = __atomic_load_n(&cs->lifecycle, __ATOMIC_ACQUIRE);
    if (lc == NTR_COMM_INIT) {
      __atomic_store_n(&cs->lifecycle, NTR_COMM_READY, __ATOMIC_RELEASE);
      nti_job_comm_ready(cs->comm_id);
    }
    nti_blocked_clear(cs);
  } else if (now != ncclSuccess && now != ncclInProgress) {
    char reason[96];
    snprintf(reason, sizeof reason, "async error %d on comm %016llx rank %d", (int)now,
             (unsigned long long)cs->comm_id, cs->rank);
    nti_say("%s", reason);
    nti_dump_now(NTR_TRIG_ASYNC_ERROR, 0, 0, reason);
  }
}

static void poll_async(struct nti_comm *c) {
  nti_fn_ncclCommGetAsyncError_t get = __atomic_load_n(&nti_real_ncclCommGetAsyncError, __ATOMIC_ACQUIRE);
  if (!get)
    get = (nti_fn_ncclCommGetAsyncError_t)nti_resolve(NTI_FN_ncclCommGetAsyncError);
  if (!get)
    return;
  if (__atomic_exchange_n(&c->async_poller, 1, __ATOMIC_ACQUIRE))
    return; /* the application is polling this comm now (lifecycle.c) */
  ncclResult_t err = ncclSuccess, res = ncclInternalError;
  pthread_mutex_lock(&nti_life_lock);
  if (__atomic_load_n(&c->live, __ATOMIC_ACQUIRE) && c->handle)
    res = get(c->handle, &err);
  pthread_mutex_unlock(&nti_life_lock);
  if (res == ncclSuccess)
    nti_async_transition(c, err);
  __atomic_store_n(&c->async_poller, 0, __ATOMIC_RELEASE);
}

static void *watchdog_main(void *arg) {
  (void)arg;
  /* Everything this thread calls into NCCL passes through unrecorded. */
  nti_tls.guard = 1;
  /* Thread-local capture mode, once, before any CUDA call of this thread
   * (including those NCCL makes for ncclCommGetAsyncError): a thread with
   * no capture of its own is then never prohibited, so none of its event
   * queries can invalidate an application's global-mode capture. */
  int mode = CU_CAPTURE_MODE_THREAD_LOCAL;
  capture_mode_swap(&mode);
  uint64_t hz = nti_proc.ring.hdr->tsc_hz;
  uint64_t tmo = hz ? (uint64_t)(nti_cfg.timeout_s * (double)hz) : 0;
  pthread_mutex_lock(&wd_lock);
  while (!wd_stop) {
    pthread_mutex_unlock(&wd_lock);
    /* Acquire pairs with the asker's release: the records it wrote before
     * asking are in the ring; the pass below starts after them. */
    unsigned req = __atomic_load_n(&wd_pass_req, __ATOMIC_ACQUIRE);
    uint64_t now = ntr_clock_now();
    nti_py_poll(); /* a Python loaded since our first NCCL call */
    recent_scan(0);
    for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all) {
      if (__atomic_load_n(&c->retired, __ATOMIC_ACQUIRE))
        continue;
      poll_events(c, now, tmo);
      poll_lifecycle(c, now, tmo);
      poll_incall(c, now, tmo);
      if (__atomic_load_n(&c->live, __ATOMIC_ACQUIRE))
        poll_async(c);
      else
        maybe_retire(c);
    }
    /* Release: the asker that sees it sees the pass's stores (last_completed). */
    __atomic_store_n(&wd_pass_done, req, __ATOMIC_RELEASE);
    pthread_mutex_lock(&wd_lock);
    if (wd_stop)
      break;
    /* 15 ms between polls: completion latency well under a second, and a
     * sleeping thread costs nothing on two shared cores. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 15 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&wd_cond, &wd_lock, &ts);
  }
  pthread_mutex_unlock(&wd_lock);
  return NULL;
}

void nti_watchdog_start(void) {
  pthread_once(&cu_once, load_driver);
  /* Looked up here, not on our thread: a dlsym that misses allocates its
   * error text, and a malloc there costs the thread a glibc arena
   * (recorder/heap.h). */
  if (!__atomic_load_n(&nti_real_ncclCommGetAsyncError, __ATOMIC_ACQUIRE))
    (void)nti_resolve(NTI_FN_ncclCommGetAsyncError);
  pthread_mutex_lock(&wd_lock);
  if (!wd_running) {
    wd_stop = 0;
    /* Signals are handled by application threads, never by ours: a
     * SIGTERM delivered here would run the app's handler on our thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = ntr_thread_create(&wd_thread, watchdog_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
      wd_running = 1;
    else
      nti_say("cannot start the watchdog thread (%s); timeouts and completion are not tracked",
              strerror(rc));
  }
  pthread_mutex_unlock(&wd_lock);
}

void nti_watchdog_stop(void) {
  pthread_mutex_lock(&wd_lock);
  if (!wd_running) {
    pthread_mutex_unlock(&wd_lock);
    return;
  }
  wd_stop = 1;
  pthread_cond_signal(&wd_cond);
  pthread_mutex_unlock(&wd_lock);
  /* Bounded: exit never waits on a stuck tracer thread (one blocked in a
   * driver call, say).  Left running, it also keeps the last pass. */
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl); /* pthread_timedjoin_np's clock */
  dl.tv_sec += 1;
  if (pthread_timedjoin_np(wd_thread, NULL, &dl) != 0) {
    nti_say("the watchdog thread did not stop within 1 s; left running");
    return;
  }
  pthread_mutex_lock(&wd_lock);
  wd_running = 0;
  pthread_mutex_unlock(&wd_lock);
  /* Last pass (exit): ops that finished since the previous poll are marked
   * complete before the exit dump.  No timeout reports here. */
  uint64_t now = ntr_clock_now();
  recent_scan(1);
  /* This runs on the exiting application thread, which may have a capture
   * of its own open: relaxed mode for these queries, then its mode back. */
  int mode = CU_CAPTURE_MODE_RELAXED;
  capture_mode_swap(&mode);
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all)
    if (!__atomic_load_n(&c->retired, __ATOMIC_ACQUIRE))
      poll_events(c, now, 0);
  capture_mode_swap(&mode);
}

int nti_watchdog_last_pass(void) {
  /* Relaxed read of wd_running (written under wd_lock, which a handler
   * may not take): a thread that started is seen by whoever made it. */
  if (!__atomic_load_n(&wd_running, __ATOMIC_RELAXED) || pthread_equal(pthread_self(), wd_thread))
    return -ESRCH;
  unsigned want = __atomic_add_fetch(&wd_pass_req, 1, __ATOMIC_RELEASE);
  /* One pass begun after the request: up to a poll interval (15 ms) of
   * sleep, then the pass.  Bounded: a watchdog stuck in a driver call, or
   * waiting for a lock the interrupted thread holds, is not waited for. */
  for (int i = 0; i < 50; i++) {
    if ((int)(__atomic_load_n(&wd_pass_done, __ATOMIC_ACQUIRE) - want) >= 0)
      return 0;
    struct timespec ts = {0, 4 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return -ETIMEDOUT;
}

void nti_watchdog_forget(void) {
  /* Fork child: only the forking thread exists; the locks may have been
   * held by the parent's watchdog at fork time, so they are re-created. */
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  wd_lock = m;
  wd_cond = cv;
  wd_running = 0;
  wd_stop = 0;
  wd_pass_req = wd_pass_done = 0;
  nti_life_lock = m;
}
