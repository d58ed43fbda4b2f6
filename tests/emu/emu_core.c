/* emu_core.c -- streams, events and devices of the CPU emulator (see
 * emu_core.h for the contract).  Lives in libcuda.so.1 so that the runtime
 * (libcudart) and NCCL (libnccl) share one model: a cudaStream_t and a
 * CUstream are the same object. */
#include "emu_core.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMU_MAX_DEVICES 64
#define EMU_STREAM_NON_BLOCKING 0x1u
#define EMU_EVENT_DISABLE_TIMING 0x2u

struct emu_device {
  pthread_mutex_t mu;             /* guards `streams` and `legacy` creation */
  struct CUstream_st *streams;    /* live non-legacy streams */
  struct CUstream_st *_Atomic legacy;
};

static struct emu_device emu_devs[EMU_MAX_DEVICES];
static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static int emu_ndev = 8;
static int emu_verbose_flag;
static pthread_mutex_t emu_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *emu_pool;
static __thread int emu_cur_dev __attribute__((tls_model("initial-exec")));

static void emu_init_once(void)
{
  const char *s = getenv("NCCLEMU_DEVICES");
  if (s && *s) {
    long v = strtol(s, NULL, 10);
    if (v >= 1 && v <= EMU_MAX_DEVICES)
      emu_ndev = (int)v;
  }
  s = getenv("NCCLEMU_VERBOSE");
  emu_verbose_flag = s && *s && strcmp(s, "0") != 0;
  for (int i = 0; i < EMU_MAX_DEVICES; i++)
    pthread_mutex_init(&emu_devs[i].mu, NULL);
}

static void emu_init(void) { pthread_once(&emu_once, emu_init_once); }

EMU_API int emu_verbose(void) { emu_init(); return emu_verbose_flag; }

EMU_API void emu_log(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof buf)
    n = sizeof buf - 1;
  /* One write so that lines of concurrent ranks do not interleave. */
  char line[600];
  int m = snprintf(line, sizeof line, "ncclemu[%d]: %.*s\n", (int)getpid(), n, buf);
  if (m > 0)
    (void)!write(2, line, (size_t)m < sizeof line ? (size_t)m : sizeof line - 1);
}

EMU_API int emu_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, int detached)
{
  sigset_t all, old;
  sigfillset(&all);
  /* Faults must still reach the faulting thread. */
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGABRT);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  if (detached)
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t tmp;
  int rc = pthread_create(t ? t : &tmp, &attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return -rc;
}

EMU_API int emu_device_count(void) { emu_init(); return emu_ndev; }
EMU_API int emu_get_device(void) { return emu_cur_dev; }

/* Bit d: device d's primary context is active.  CUDA 12 and later make it
 * active when a thread first sets the device (cudaSetDevice "initializes
 * the primary context"), or when the driver retains it. */
static _Atomic uint64_t emu_ctx_active;

EMU_API int emu_set_device(int dev)
{
  emu_init();
  if (dev < 0 || dev >= emu_ndev)
    return -EINVAL;
  emu_cur_dev = dev;
  if (dev < 64)
    atomic_fetch_or_explicit(&emu_ctx_active, (uint64_t)1 << dev, memory_order_relaxed);
  return 0;
}

EMU_API void emu_ctx_set_active(int dev, int on)
{
  if (dev < 0 || dev >= 64)
    return;
  if (on)
    atomic_fetch_or_explicit(&emu_ctx_active, (uint64_t)1 << dev, memory_order_relaxed);
  else
    atomic_fetch_and_explicit(&emu_ctx_active, ~((uint64_t)1 << dev), memory_order_relaxed);
}

EMU_API int emu_ctx_is_active(int dev)
{
  return dev >= 0 && dev < 64 && (atomic_load_explicit(&emu_ctx_active, memory_order_relaxed) >> dev & 1);
}

/* ---- streams --------------------------------------------------------- */

static void emu_wait_deps(struct emu_work *w)
{
  for (int i = 0; i < w->ndeps; i++)
    emu_stream_wait_count(w->deps[i].stream, w->deps[i].target);
  free(w->deps);
  w->deps = NULL;
}

static void *emu_stream_worker(void *arg)
{
  struct CUstream_st *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->head && !s->destroyed)
      pthread_cond_wait(&s->work_cv, &s->mu);
    if (!s->head)
      break;   /* destroyed and drained */
    struct emu_work *w = s->head;
    s->head = w->next;
    if (!s->head)
      s->tail = NULL;
    pthread_mutex_unlock(&s->mu);
    emu_wait_deps(w);
    w->run(w);   /* may block forever: a hung collective */
    pthread_mutex_lock(&s->mu);
    /* Pairs with the acquire loads in query and sync. */
    atomic_store_explicit(&s->completed, atomic_load_explicit(&s->completed, memory_order_relaxed) + 1,
                          memory_order_release);
    pthread_cond_broadcast(&s->done_cv);
  }
  s->has_worker = 0;
  pthread_mutex_unlock(&s->mu);

  struct emu_device *d = &emu_devs[s->device];
  pthread_mutex_lock(&d->mu);
  for (struct CUstream_st **pp = &d->streams; *pp; pp = &(*pp)->dev_next)
    if (*pp == s) {
      *pp = s->dev_next;
      break;
    }
  pthread_mutex_unlock(&d->mu);
  /* Recycled, never freed: events may still point here, and the counters
   * keep growing, so an old (stream, target) pair stays meaningful. */
  pthread_mutex_lock(&emu_pool_mu);
  s->pool_next = emu_pool;
  emu_pool = s;
  pthread_mutex_unlock(&emu_pool_mu);
  return NULL;
}

static struct CUstream_st *emu_stream_new(int dev, unsigned flags, int legacy)
{
  pthread_mutex_lock(&emu_pool_mu);
  struct CUstream_st *s = emu_pool;
  if (s)
    emu_pool = s->pool_next;
  pthread_mutex_unlock(&emu_pool_mu);
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s)
      return NULL;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
  }
  pthread_mutex_lock(&s->mu);
  s->head = s->tail = NULL;
  s->device = dev;
  s->flags = flags;
  s->legacy = legacy;
  s->destroyed = 0;
  s->has_worker = 1;
  pthread_mutex_unlock(&s->mu);
  if (emu_thread_start(NULL, emu_stream_worker, s, 1) != 0) {
    pthread_mutex_lock(&emu_pool_mu);
    s->pool_next = emu_pool;
    emu_pool = s;
    pthread_mutex_unlock(&emu_pool_mu);
    return NULL;
  }
  return s;
}

static struct CUstream_st *emu_legacy_stream(int dev)
{
  struct emu_device *d = &emu_devs[dev];
  struct CUstream_st *s = atomic_load_explicit(&d->legacy, memory_order_acquire);
  if (s)
    return s;
  pthread_mutex_lock(&d->mu);
  s = atomic_load_explicit(&d->legacy, memory_order_relaxed);
  if (!s) {
    s = emu_stream_new(dev, 0, 1);
    atomic_store_explicit(&d->legacy, s, memory_order_release);
  }
  pthread_mutex_unlock(&d->mu);
  return s;
}

EMU_API struct CUstream_st *emu_stream_resolve(struct CUstream_st *s)
{
  emu_init();
  if ((uintptr_t)s <= 2)   /* NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD */
    return emu_legacy_stream(emu_cur_dev);
  return s;
}

EMU_API int emu_stream_create(struct CUstream_st **out, unsigned flags)
{
  emu_init();
  int dev = emu_cur_dev;
  struct CUstream_st *s = emu_stream_new(dev, flags, 0);
  if (!s)
    return -ENOMEM;
  struct emu_device *d = &emu_devs[dev];
  pthread_mutex_lock(&d->mu);
  s->dev_next = d->streams;
  d->streams = s;
  pthread_mutex_unlock(&d->mu);
  *out = s;
  return 0;
}

EMU_API void emu_stream_destroy(struct CUstream_st *s)
{
  if ((uintptr_t)s <= 2)
    return;
  /* As in CUDA, pending work still runs; the stream is recycled after. */
  pthread_mutex_lock(&s->mu);
  s->destroyed = 1;
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
}

static int emu_add_dep(struct emu_work *w, int *cap, struct CUstream_st *s)
{
  uint64_t e = atomic_load_explicit(&s->enqueued, memory_order_acquire);
  if (atomic_load_explicit(&s->completed, memory_order_acquire) >= e)
    return 0;
  if (w->ndeps == *cap) {
    int ncap = *cap ? *cap * 2 : 4;
    struct emu_dep *nd = realloc(w->deps, (size_t)ncap * sizeof *nd);
    if (!nd)
      return -ENOMEM;
    w->deps = nd;
    *cap = ncap;
  }
  w->deps[w->ndeps].stream = s;
  w->deps[w->ndeps].target = e;
  w->ndeps++;
  return 0;
}

/* Legacy default stream semantics: work on the default stream waits for all
 * earlier work of the device's blocking streams, and work on a blocking
 * stream waits for earlier work of the default stream. */
static void emu_legacy_deps(struct CUstream_st *s, struct emu_work *w, int *cap)
{
  struct emu_device *d = &emu_devs[s->device];
  if (s->legacy) {
    pthread_mutex_lock(&d->mu);
    for (struct CUstream_st *b = d->streams; b; b = b->dev_next)
      if (!(b->flags & EMU_STREAM_NON_BLOCKING))
        (void)emu_add_dep(w, cap, b);
    pthread_mutex_unlock(&d->mu);
  } else if (!(s->flags & EMU_STREAM_NON_BLOCKING)) {
    struct CUstream_st *l = atomic_load_explicit(&d->legacy, memory_order_acquire);
    if (l)
      (void)emu_add_dep(w, cap, l);
  }
}

static uint64_t emu_enqueue_locked_idx(struct CUstream_st *s, struct emu_work *w)
{
  w->next = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->tail)
    s->tail->next = w;
  else
    s->head = w;
  s->tail = w;
  uint64_t idx = atomic_load_explicit(&s->enqueued, memory_order_relaxed) + 1;
  atomic_store_explicit(&s->enqueued, idx, memory_order_release);
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
  return idx;
}

static uint64_t emu_enqueue_idx(struct CUstream_st *s, struct emu_work *w)
{
  s = emu_stream_resolve(s);
  int cap = w->ndeps;
  emu_legacy_deps(s, w, &cap);
  return emu_enqueue_locked_idx(s, w);
}

EMU_API void emu_stream_enqueue(struct CUstream_st *s, struct emu_work *w)
{
  (void)emu_enqueue_idx(s, w);
}

EMU_API void emu_stream_wait_count(struct CUstream_st *s, uint64_t target)
{
  if (atomic_load_explicit(&s->completed, memory_order_acquire) >= target)
    return;
  pthread_mutex_lock(&s->mu);
  while (atomic_load_explicit(&s->completed, memory_order_acquire) < target)
    pthread_cond_wait(&s->done_cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

EMU_API void emu_stream_sync(struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  if (s->legacy) {
    /* Synchronizing the legacy stream also waits for blocking streams. */
    struct emu_work w = { 0 };
    int cap = 0;
    emu_legacy_deps(s, &w, &cap);
    emu_wait_deps(&w);
  }
  emu_stream_wait_count(s, atomic_load_explicit(&s->enqueued, memory_order_acquire));
}

EMU_API int emu_stream_query(struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  return atomic_load_explicit(&s->completed, memory_order_acquire) >=
         atomic_load_explicit(&s->enqueued, memory_order_acquire);
}

EMU_API void emu_device_sync(int dev)
{
  emu_init();
  if (dev < 0 || dev >= emu_ndev)
    return;
  struct emu_work w = { 0 };
  int cap = 0;
  struct emu_device *d = &emu_devs[dev];
  pthread_mutex_lock(&d->mu);
  for (struct CUstream_st *b = d->streams; b; b = b->dev_next)
    (void)emu_add_dep(&w, &cap, b);
  pthread_mutex_unlock(&d->mu);
  struct CUstream_st *l = atomic_load_explicit(&d->legacy, memory_order_acquire);
  if (l)
    (void)emu_add_dep(&w, &cap, l);
  emu_wait_deps(&w);
}

static void emu_noop_run(struct emu_work *w) { free(w); }

static void emu_wait_event_now(struct CUstream_st *s, struct CUstream_st *es, uint64_t t)
{
  struct emu_work *w = calloc(1, sizeof *w);
  if (!w) {
    emu_stream_wait_count(es, t);   /* degrade to a host wait */
    return;
  }
  w->run = emu_noop_run;
  w->deps = malloc(sizeof *w->deps);
  if (w->deps) {
    w->deps[0].stream = es;
    w->deps[0].target = t;
    w->ndeps = 1;
  } else {
    emu_stream_wait_count(es, t);
  }
  emu_stream_enqueue(s, w);
}

static int emu_empty_launch(struct CUgraphNode_st *n, struct CUstream_st *s)
{
  (void)n;
  (void)s;
  return EMU_OK;
}

static void emu_node_free(struct CUgraphNode_st *n) { free(n); }

/* Waits across a capture boundary, as CUDA rules them (cuda.h, enum
 * CUresult; cudaStreamBeginCapture on cross-stream dependencies): waiting
 * inside a capture on an event of the same capture is an empty node (the
 * graph is a list in submission order, which respects every dependency)
 * and joins the recording stream back up to that record; on an event of
 * another capture it would merge two captures
 * (CUDA_ERROR_STREAM_CAPTURE_MERGE); on an event recorded outside it the
 * dependency would cross the boundary (CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
 * both invalidate the capture.  A stream that is not capturing and waits
 * on a captured event joins the capture (a fork, emu_capture_fork): its
 * work becomes nodes of the same graph until the capture ends, which
 * needs it joined back first. */
EMU_API int emu_stream_wait_event(struct CUstream_st *s, struct CUevent_st *ev)
{
  s = emu_stream_resolve(s);
  uint64_t ecap = atomic_load_explicit(&ev->cap_id, memory_order_acquire);
  if (emu_stream_capturing(s)) {
    uint64_t mine = emu_capture_id(s);
    if (ecap == 0 && !atomic_load_explicit(&ev->stream, memory_order_acquire))
      return EMU_OK;   /* never recorded: CUDA's wait is a no-op too */
    if (ecap != mine) {
      emu_capture_invalidate(s);
      return ecap ? EMU_E_CAPTURE_MERGE : EMU_E_CAPTURE_ISOLATION;
    }
    emu_capture_join_back(s, ev);
    struct CUgraphNode_st *n = calloc(1, sizeof *n);
    if (!n)
      return EMU_E_NOMEM;
    n->type = EMU_NODE_EMPTY;
    n->launch = emu_empty_launch;
    n->destroy = emu_node_free;
    return emu_capture_add(s, n);
  }
  if (ecap)
    return emu_capture_fork(s, ecap);
  struct CUstream_st *es = atomic_load_explicit(&ev->stream, memory_order_acquire);
  uint64_t t = atomic_load_explicit(&ev->target, memory_order_acquire);
  if (!es || t == 0)
    return EMU_OK;
  emu_wait_event_now(s, es, t);
  return EMU_OK;
}

/* ---- events ---------------------------------------------------------- */

EMU_API struct CUevent_st *emu_event_create(unsigned flags)
{
  struct CUevent_st *ev = calloc(1, sizeof *ev);
  if (!ev)
    return NULL;
  ev->flags = flags;
  atomic_init(&ev->refs, 1);
  return ev;
}

static void emu_event_put(struct CUevent_st *ev)
{
  if (atomic_fetch_sub_explicit(&ev->refs, 1, memory_order_acq_rel) == 1)
    free(ev);
}

EMU_API void emu_event_destroy(struct CUevent_st *ev) { emu_event_put(ev); }

struct emu_marker {
  struct emu_work w;
  struct CUevent_st *ev;
  uint64_t idx;
};

/* Timestamps of timing events are keyed by the marker's queue index, so a
 * stale marker of an earlier record never overwrites a newer one. */
static void emu_marker_run(struct emu_work *w)
{
  struct emu_marker *m = (struct emu_marker *)w;
  if (atomic_load_explicit(&m->ev->target, memory_order_acquire) == m->idx)
    atomic_store_explicit(&m->ev->t_ns, emu_now_ns(), memory_order_release);
  emu_event_put(m->ev);
  free(m);
}

EMU_API void emu_event_record_now(struct CUevent_st *ev, struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  atomic_store_explicit(&ev->cap_id, 0, memory_order_release);
  if (ev->flags & EMU_EVENT_DISABLE_TIMING) {
    /* The cheap path a tracer takes once per collective: no allocation,
     * no lock, just the stream's enqueue counter.  Ordered work on the
     * stream means "completed >= target" is "everything before is done". */
    atomic_store_explicit(&ev->t_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&ev->stream, s, memory_order_relaxed);
    atomic_store_explicit(&ev->target, atomic_load_explicit(&s->enqueued, memory_order_acquire),
                          memory_order_release);
    return;
  }
  struct emu_marker *m = calloc(1, sizeof *m);
  if (!m) {
    atomic_store_explicit(&ev->stream, s, memory_order_relaxed);
    atomic_store_explicit(&ev->target, atomic_load_explicit(&s->enqueued, memory_order_acquire),
                          memory_order_release);
    return;
  }
  m->w.run = emu_marker_run;
  m->ev = ev;
  atomic_fetch_add_explicit(&ev->refs, 1, memory_order_relaxed);
  atomic_store_explicit(&ev->t_ns, 0, memory_order_relaxed);
  atomic_store_explicit(&ev->stream, s, memory_order_relaxed);
  /* Hold the stream lock across "push + publish target" so the marker
   * cannot run before the event knows its index. */
  int cap = 0;
  emu_legacy_deps(s, &m->w, &cap);
  m->w.next = NULL;
  pthread_mutex_lock(&s->mu);
  uint64_t idx = atomic_load_explicit(&s->enqueued, memory_order_relaxed) + 1;
  m->idx = idx;
  atomic_store_explicit(&ev->target, idx, memory_order_release);
  if (s->tail)
    s->tail->next = &m->w;
  else
    s->head = &m->w;
  s->tail = &m->w;
  atomic_store_explicit(&s->enqueued, idx, memory_order_release);
  pthread_cond_signal(&s->work_cv);
  pthread_mutex_unlock(&s->mu);
}

struct emu_record_node {
  struct CUgraphNode_st n;
  struct CUevent_st *ev;
};

static int emu_record_launch(struct CUgraphNode_st *n, struct CUstream_st *s)
{
  emu_event_record_now(((struct emu_record_node *)n)->ev, s);
  return EMU_OK;
}

static void emu_record_destroy(struct CUgraphNode_st *n)
{
  emu_event_put(((struct emu_record_node *)n)->ev);
  free(n);
}

EMU_API int emu_event_record(struct CUevent_st *ev, struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  if (!emu_stream_capturing(s)) {
    emu_event_record_now(ev, s);
    return EMU_OK;
  }
  /* Recorded inside a capture: an event-record node, which records the
   * event on the launch stream at each launch.  Until then the event's last
   * record is the captured one. */
  struct emu_record_node *r = calloc(1, sizeof *r);
  if (!r)
    return EMU_E_NOMEM;
  r->n.type = EMU_NODE_EVENT_RECORD;
  r->n.launch = emu_record_launch;
  r->n.destroy = emu_record_destroy;
  r->ev = ev;
  atomic_fetch_add_explicit(&ev->refs, 1, memory_order_relaxed);
  uint64_t id = emu_capture_id(s);
  uint32_t seq = 0;
  int rc = emu_capture_add_at(s, &r->n, &seq);
  if (rc == EMU_OK) {
    atomic_store_explicit(&ev->cap_stream, s, memory_order_relaxed);
    atomic_store_explicit(&ev->cap_seq, seq, memory_order_relaxed);
    atomic_store_explicit(&ev->cap_id, id, memory_order_release);
  }
  return rc;
}

EMU_API int emu_event_query(struct CUevent_st *ev)
{
  if (atomic_load_explicit(&ev->cap_id, memory_order_acquire))
    return -1;
  uint64_t t = atomic_load_explicit(&ev->target, memory_order_acquire);
  if (t == 0)
    return 1;
  struct CUstream_st *s = atomic_load_explicit(&ev->stream, memory_order_relaxed);
  return atomic_load_explicit(&s->completed, memory_order_acquire) >= t;
}

EMU_API void emu_event_sync(struct CUevent_st *ev)
{
  uint64_t t = atomic_load_explicit(&ev->target, memory_order_acquire);
  if (t == 0)
    return;
  emu_stream_wait_count(atomic_load_explicit(&ev->stream, memory_order_relaxed), t);
}

EMU_API int emu_event_elapsed(struct CUevent_st *a, struct CUevent_st *b, float *ms)
{
  if ((a->flags | b->flags) & EMU_EVENT_DISABLE_TIMING)
    return -EINVAL;
  if (atomic_load(&a->target) == 0 || atomic_load(&b->target) == 0)
    return -EINVAL;
  int qa = emu_event_query(a), qb = emu_event_query(b);
  if (qa < 0 || qb < 0)
    return -EINVAL;
  if (!qa || !qb)
    return -EAGAIN;
  uint64_t ta = atomic_load_explicit(&a->t_ns, memory_order_acquire);
  uint64_t tb = atomic_load_explicit(&b->t_ns, memory_order_acquire);
  if (!ta || !tb)
    return -EINVAL;
  *ms = (float)((double)((int64_t)(tb - ta)) / 1e6);
  return 0;
}

/* ---- memcpy / memset work ---------------------------------------------- */

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

static int emu_copy_enqueue(void *dst, const void *src, size_t n, int value, int is_set, struct CUstream_st *s)
{
  struct emu_copy *c = calloc(1, sizeof *c);
  if (!c)
    return EMU_E_NOMEM;
  c->w.run = emu_copy_run;
  c->dst = dst;
  c->src = src;
  c->n = n;
  c->value = value;
  c->is_set = is_set;
  emu_stream_enqueue(s, &c->w);
  return EMU_OK;
}

/* A captured memcpy/memset: the same operands at every launch. */
struct emu_copy_node {
  struct CUgraphNode_st n;
  void *dst;
  const void *src;
  size_t len;
  int value;
};

static int emu_copy_node_launch(struct CUgraphNode_st *n, struct CUstream_st *s)
{
  struct emu_copy_node *c = (struct emu_copy_node *)n;
  return emu_copy_enqueue(c->dst, c->src, c->len, c->value, n->type == EMU_NODE_MEMSET, s);
}

EMU_API int emu_copy_async(void *dst, const void *src, size_t n, int value, int is_set, struct CUstream_st *s)
{
  if (n && (!dst || (!is_set && !src)))
    return EMU_E_INVALID_VALUE;
  s = emu_stream_resolve(s);
  if (!emu_stream_capturing(s)) {
    /* The legacy stream while a blocking stream captures: unusable. */
    int rc = s->legacy ? emu_capture_stream_use(s) : EMU_OK;
    return rc != EMU_OK ? rc : emu_copy_enqueue(dst, src, n, value, is_set, s);
  }
  struct emu_copy_node *c = calloc(1, sizeof *c);
  if (!c)
    return EMU_E_NOMEM;
  c->n.type = is_set ? EMU_NODE_MEMSET : EMU_NODE_MEMCPY;
  c->n.launch = emu_copy_node_launch;
  c->n.destroy = emu_node_free;
  c->dst = dst;
  c->src = src;
  c->len = n;
  c->value = value;
  return emu_capture_add(s, &c->n);
}

/* Synchronous copies are ordered on the legacy default stream: they wait
 * for it and for every blocking stream of the device, then copy. */
EMU_API int emu_copy_sync(void *dst, const void *src, size_t n, int value, int is_set)
{
  if (n && (!dst || (!is_set && !src)))
    return EMU_E_INVALID_VALUE;
  int rc = emu_capture_stream_use(NULL);
  if (rc != EMU_OK)
    return rc;
  emu_stream_sync(NULL);
  if (is_set)
    memset(dst, value, n);
  else if (n)
    memmove(dst, src, n);
  return EMU_OK;
}
