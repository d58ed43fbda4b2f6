/* emu_graph.c -- stream capture, the capture-interaction modes, graphs and
 * their launches (contract in emu_core.h).
 *
 * Thread-safety: captures are registered in one list under emu_cap_mu (begin,
 * end, node append, invalidation); the fast path of emu_unsafe_call() reads
 * only the calling thread's TLS and one atomic counter.  An exec's graph is
 * swapped under the exec's mutex; graphs are reference-counted and immutable
 * once their capture ended, so launches run without any lock.
 * Signal-safety: none of this is async-signal-safe.
 *
 * Sources of each rule (CUDA 13.0 headers on this machine):
 *   cuda_runtime_api.h, cudaThreadExchangeStreamCaptureMode: the modes and
 *     which threads are prohibited from potentially unsafe calls;
 *   cudaStreamBeginCapture: not on the legacy stream, not twice, a
 *     non-relaxed capture ends on the thread that began it;
 *   cudaStreamEndCapture: an invalidated capture returns a NULL graph;
 *   cudaStreamIsCapturing: the legacy stream while a blocking stream
 *     captures gives cudaErrorStreamCaptureImplicit, without invalidating;
 *   cuda.h, enum CUresult 900..910: what each capture error means.
 */
#include "emu_core.h"

#include <stdlib.h>
#include <string.h>

#define EMU_MAX_DEVICES 64
#define EMU_STREAM_NON_BLOCKING 0x1u

/* The streams of one capture: [0] the origin, then those forked into it.
 * nnodes: work nodes the stream added (not waits or event records);
 * joined: how many of them the origin side has waited for (an event
 * recorded after them, waited on inside the capture).  The capture may end
 * only when every fork is joined back. */
#define EMU_CAP_MAX_STREAMS 16
struct emu_cap_member {
  struct CUstream_st *stream;
  uint32_t nnodes, joined;
};

struct emu_capture {
  struct emu_capture *next;      /* emu_caps, under emu_cap_mu */
  struct CUstream_st *stream;
  struct emu_cap_member mem[EMU_CAP_MAX_STREAMS];   /* under emu_cap_mu */
  int nmem;
  uint64_t id;
  int mode;                      /* the mode it was begun with */
  int blocking;                  /* its stream synchronizes with the legacy one */
  int device;
  pthread_t owner;               /* the thread that began it */
  int invalidated;               /* under emu_cap_mu */
  struct CUgraph_st *graph;      /* nodes so far */
  struct CUgraphNode_st *last;   /* the dependency of the next node */
};

static pthread_mutex_t emu_cap_mu = PTHREAD_MUTEX_INITIALIZER;
static struct emu_capture *emu_caps;
static _Atomic uint64_t emu_cap_next_id;
/* Ongoing captures begun in global mode (all threads): the one counter the
 * fast path of emu_unsafe_call() reads.  Paired acquire/release with begin
 * and end; a call racing a begin may miss it, as on CUDA. */
static _Atomic int emu_ncap_global;
/* Ongoing captures of blocking streams, per device (the legacy stream is
 * unusable meanwhile). */
static _Atomic int emu_ncap_blocking[EMU_MAX_DEVICES];

/* Per thread: the mode, and this thread's ongoing captures (those begun
 * here and not ended): not begun relaxed, and begun in global mode. */
static __thread int emu_tmode __attribute__((tls_model("initial-exec")));
static __thread int emu_own_strict __attribute__((tls_model("initial-exec")));
static __thread int emu_own_global __attribute__((tls_model("initial-exec")));

static void emu_own_count(const struct emu_capture *c, int d)
{
  if (c->mode != EMU_MODE_RELAXED)
    emu_own_strict += d;
  if (c->mode == EMU_MODE_GLOBAL)
    emu_own_global += d;
}

EMU_API int emu_unsafe_call(void)
{
  int mode = emu_tmode;
  if (mode == EMU_MODE_RELAXED)
    return EMU_OK;
  int own = emu_own_strict > 0;
  int other = mode == EMU_MODE_GLOBAL &&
              atomic_load_explicit(&emu_ncap_global, memory_order_acquire) > emu_own_global;
  if (!own && !other)
    return EMU_OK;
  /* Prohibited: the call fails and invalidates what it conflicts with. */
  pthread_t me = pthread_self();
  int hit = 0;
  pthread_mutex_lock(&emu_cap_mu);
  for (struct emu_capture *c = emu_caps; c; c = c->next) {
    int mine = pthread_equal(c->owner, me);
    if ((mine && c->mode != EMU_MODE_RELAXED) || (mode == EMU_MODE_GLOBAL && !mine && c->mode == EMU_MODE_GLOBAL)) {
      c->invalidated = 1;
      hit = 1;
    }
  }
  pthread_mutex_unlock(&emu_cap_mu);
  if (emu_verbose() && hit)
    emu_log("a potentially unsafe call during stream capture: capture invalidated");
  return EMU_E_CAPTURE_UNSUPPORTED;
}

EMU_API int emu_capture_mode_exchange(int *mode)
{
  if (!mode || *mode < EMU_MODE_GLOBAL || *mode > EMU_MODE_RELAXED)
    return EMU_E_INVALID_VALUE;
  int old = emu_tmode;
  emu_tmode = *mode;
  *mode = old;
  return EMU_OK;
}

static struct CUgraph_st *emu_graph_new(void)
{
  struct CUgraph_st *g = calloc(1, sizeof *g);
  if (!g)
    return NULL;
  atomic_init(&g->refs, 1);
  g->tail = &g->head;
  return g;
}

EMU_API int emu_capture_begin(struct CUstream_st *s, int mode)
{
  if ((uintptr_t)s <= 2 || mode < EMU_MODE_GLOBAL || mode > EMU_MODE_RELAXED)
    return EMU_E_INVALID_VALUE;   /* "may not be initiated if stream is cudaStreamLegacy" */
  struct emu_capture *c = calloc(1, sizeof *c);
  struct CUgraph_st *g = emu_graph_new();
  if (!c || !g) {
    free(c);
    free(g);
    return EMU_E_NOMEM;
  }
  c->stream = s;
  c->mem[0].stream = s;
  c->nmem = 1;
  c->mode = mode;
  c->blocking = !(s->flags & EMU_STREAM_NON_BLOCKING);
  c->device = s->device;
  c->owner = pthread_self();
  c->graph = g;
  pthread_mutex_lock(&emu_cap_mu);
  if (atomic_load_explicit(&s->cap, memory_order_relaxed)) {
    pthread_mutex_unlock(&emu_cap_mu);
    free(c);
    free(g);
    return EMU_E_ILLEGAL_STATE;   /* "only if the stream is not already in capture mode" */
  }
  c->id = atomic_fetch_add_explicit(&emu_cap_next_id, 1, memory_order_relaxed) + 1;
  c->next = emu_caps;
  emu_caps = c;
  if (mode == EMU_MODE_GLOBAL)
    atomic_fetch_add_explicit(&emu_ncap_global, 1, memory_order_release);
  if (c->blocking)
    atomic_fetch_add_explicit(&emu_ncap_blocking[c->device], 1, memory_order_release);
  atomic_store_explicit(&s->cap, c, memory_order_release);
  pthread_mutex_unlock(&emu_cap_mu);
  emu_own_count(c, 1);
  return EMU_OK;
}

/* Under emu_cap_mu: take c off the stream and the list. */
static void emu_capture_unlink(struct emu_capture *c)
{
  for (struct emu_capture **pp = &emu_caps; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  if (c->mode == EMU_MODE_GLOBAL)
    atomic_fetch_sub_explicit(&emu_ncap_global, 1, memory_order_release);
  if (c->blocking)
    atomic_fetch_sub_explicit(&emu_ncap_blocking[c->device], 1, memory_order_release);
  for (int i = 0; i < c->nmem; i++)
    atomic_store_explicit(&c->mem[i].stream->cap, NULL, memory_order_release);
}

/* Under emu_cap_mu: s's entry in c, or NULL. */
static struct emu_cap_member *emu_cap_member(struct emu_capture *c, struct CUstream_st *s)
{
  for (int i = 0; i < c->nmem; i++)
    if (c->mem[i].stream == s)
      return &c->mem[i];
  return NULL;
}

EMU_API int emu_capture_fork(struct CUstream_st *s, uint64_t cap_id)
{
  s = emu_stream_resolve(s);
  if ((uintptr_t)s <= 2 || s->legacy)
    return EMU_E_CAPTURE_IMPLICIT;   /* the legacy stream cannot join a capture */
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = emu_caps;
  while (c && c->id != cap_id)
    c = c->next;
  int rc = EMU_OK;
  if (!c)
    rc = EMU_E_CAPTURED_EVENT;   /* the capture that recorded it is over */
  else if (atomic_load_explicit(&s->cap, memory_order_relaxed))
    rc = EMU_E_CAPTURE_MERGE;
  else if (c->nmem == EMU_CAP_MAX_STREAMS) {
    rc = EMU_E_NOT_SUPPORTED;
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said))
      emu_log("capture %llu: more than %d streams fork into one capture (emulator limit): cudaErrorNotSupported",
              (unsigned long long)cap_id, EMU_CAP_MAX_STREAMS);
  }
  else {
    c->mem[c->nmem].stream = s;
    c->mem[c->nmem].nnodes = c->mem[c->nmem].joined = 0;
    c->nmem++;
    atomic_store_explicit(&s->cap, c, memory_order_release);
  }
  pthread_mutex_unlock(&emu_cap_mu);
  return rc;
}

EMU_API void emu_capture_join_back(struct CUstream_st *s, struct CUevent_st *ev)
{
  s = emu_stream_resolve(s);
  struct CUstream_st *from = atomic_load_explicit(&ev->cap_stream, memory_order_relaxed);
  uint32_t seq = atomic_load_explicit(&ev->cap_seq, memory_order_relaxed);
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  struct emu_cap_member *m = c && from != s ? emu_cap_member(c, from) : NULL;
  if (m && seq > m->joined)
    m->joined = seq;
  pthread_mutex_unlock(&emu_cap_mu);
}

EMU_API int emu_capture_end(struct CUstream_st *s, struct CUgraph_st **out)
{
  if (!out)
    return EMU_E_INVALID_VALUE;
  *out = NULL;
  if ((uintptr_t)s <= 2)
    return EMU_E_ILLEGAL_STATE;
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  if (!c) {
    pthread_mutex_unlock(&emu_cap_mu);
    return EMU_E_ILLEGAL_STATE;   /* not capturing */
  }
  if (c->stream != s) {
    pthread_mutex_unlock(&emu_cap_mu);
    return EMU_E_CAPTURE_UNMATCHED;   /* "the capture was not initiated in this stream" */
  }
  if (c->mode != EMU_MODE_RELAXED && !pthread_equal(c->owner, pthread_self())) {
    pthread_mutex_unlock(&emu_cap_mu);
    return EMU_E_CAPTURE_WRONG_THREAD;
  }
  /* Every stream forked into the capture must be joined back into the
   * origin stream (CUDA_ERROR_STREAM_CAPTURE_UNJOINED), which ends its
   * capture too. */
  int unjoined = 0;
  for (int i = 1; i < c->nmem; i++)
    if (c->mem[i].joined < c->mem[i].nnodes) {
      unjoined = 1;
      if (getenv("NCCLEMU_VERBOSE"))
        emu_log("capture %llu: stream %p forked into it has %u nodes, %u joined back", (unsigned long long)c->id,
                (void *)c->mem[i].stream, c->mem[i].nnodes, c->mem[i].joined);
    }
  emu_capture_unlink(c);
  pthread_mutex_unlock(&emu_cap_mu);
  if (pthread_equal(c->owner, pthread_self()))
    emu_own_count(c, -1);
  int rc = EMU_OK;
  if (c->invalidated || unjoined) {
    emu_graph_put(c->graph);
    rc = c->invalidated ? EMU_E_CAPTURE_INVALIDATED : EMU_E_CAPTURE_UNJOINED;
  } else {
    *out = c->graph;
  }
  free(c);
  return rc;
}

static int emu_legacy_blocked(struct CUstream_st *s)
{
  return s->legacy && atomic_load_explicit(&emu_ncap_blocking[s->device], memory_order_acquire) > 0;
}

EMU_API int emu_capture_info(struct CUstream_st *s, int *status, uint64_t *id, struct CUgraph_st **graph,
                             struct CUgraphNode_st *const **deps, size_t *ndeps)
{
  if (!status)
    return EMU_E_INVALID_VALUE;
  s = emu_stream_resolve(s);
  if (emu_legacy_blocked(s))
    return EMU_E_CAPTURE_IMPLICIT;
  *status = 0;
  if (!emu_stream_capturing(s))
    return EMU_OK;
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  if (c) {
    *status = c->invalidated ? 2 : 1;
    if (id)
      *id = c->id;
    if (graph)
      *graph = c->graph;
    /* The driver's array is valid until the next call on the stream: here
     * the capture's own `last` field. */
    if (deps)
      *deps = c->last ? &c->last : NULL;
    if (ndeps)
      *ndeps = c->last ? 1 : 0;
  }
  pthread_mutex_unlock(&emu_cap_mu);
  return EMU_OK;
}

EMU_API uint64_t emu_capture_id(struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  if (!emu_stream_capturing(s))
    return 0;
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  uint64_t id = c ? c->id : 0;
  pthread_mutex_unlock(&emu_cap_mu);
  return id;
}

EMU_API void emu_capture_invalidate(struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  if (c)
    c->invalidated = 1;
  pthread_mutex_unlock(&emu_cap_mu);
}

EMU_API int emu_capture_add(struct CUstream_st *s, struct CUgraphNode_st *n)
{
  return emu_capture_add_at(s, n, NULL);
}

EMU_API int emu_capture_add_at(struct CUstream_st *s, struct CUgraphNode_st *n, uint32_t *seq)
{
  n->next = NULL;
  pthread_mutex_lock(&emu_cap_mu);
  struct emu_capture *c = atomic_load_explicit(&s->cap, memory_order_relaxed);
  int rc = !c ? EMU_E_ILLEGAL_STATE : c->invalidated ? EMU_E_CAPTURE_INVALIDATED : EMU_OK;
  if (rc == EMU_OK) {
    *c->graph->tail = n;
    c->graph->tail = &n->next;
    c->graph->nnodes++;
    c->last = n;
    /* A wait or an event record is no work of its own that a join must
     * cover (in CUDA they add edges, not nodes). */
    struct emu_cap_member *m = emu_cap_member(c, s);
    if (m && n->type != EMU_NODE_EMPTY && n->type != EMU_NODE_EVENT_RECORD)
      m->nnodes++;
    if (m && seq)
      *seq = m->nnodes;
  }
  pthread_mutex_unlock(&emu_cap_mu);
  if (rc != EMU_OK)
    n->destroy(n);
  return rc;
}

/* Synchronizing or querying a capturing stream necessarily conflicts with
 * its capture, whatever the mode (the header's "API calls which necessarily
 * conflict with stream capture"); the legacy stream is unusable while a
 * blocking stream of its device captures ("attempted use would have an
 * implicit dependency on the capturing stream(s)"). */
EMU_API int emu_capture_stream_use(struct CUstream_st *s)
{
  s = emu_stream_resolve(s);
  if (emu_stream_capturing(s)) {
    emu_capture_invalidate(s);
    return EMU_E_CAPTURE_UNSUPPORTED;
  }
  if (!emu_legacy_blocked(s))
    return EMU_OK;
  pthread_mutex_lock(&emu_cap_mu);
  for (struct emu_capture *c = emu_caps; c; c = c->next)
    if (c->blocking && c->device == s->device)
      c->invalidated = 1;
  pthread_mutex_unlock(&emu_cap_mu);
  return EMU_E_CAPTURE_IMPLICIT;
}

/* ---- graphs and execs -------------------------------------------------- */

EMU_API void emu_graph_put(struct CUgraph_st *g)
{
  if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
    return;
  for (struct CUgraphNode_st *n = g->head, *nx; n; n = nx) {
    nx = n->next;
    n->destroy(n);
  }
  free(g);
}

EMU_API int emu_graph_instantiate(struct CUgraphExec_st **out, struct CUgraph_st *g, unsigned long long flags)
{
  if (!out || !g)
    return EMU_E_INVALID_VALUE;
  struct CUgraphExec_st *x = calloc(1, sizeof *x);
  if (!x)
    return EMU_E_NOMEM;
  pthread_mutex_init(&x->mu, NULL);
  atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
  x->graph = g;
  x->flags = flags;
  *out = x;
  return EMU_OK;
}

static int emu_graph_run(struct CUgraph_st *g, struct CUstream_st *s)
{
  int rc = EMU_OK;
  for (struct CUgraphNode_st *n = g->head; n && rc == EMU_OK; n = n->next)
    rc = n->launch(n, s);
  return rc;
}

/* A graph launched into a capturing stream: a child-graph node. */
struct emu_child_node {
  struct CUgraphNode_st n;
  struct CUgraph_st *g;
};

static int emu_child_launch(struct CUgraphNode_st *n, struct CUstream_st *s)
{
  return emu_graph_run(((struct emu_child_node *)n)->g, s);
}

static void emu_child_destroy(struct CUgraphNode_st *n)
{
  emu_graph_put(((struct emu_child_node *)n)->g);
  free(n);
}

static struct CUgraph_st *emu_exec_graph(struct CUgraphExec_st *x)
{
  pthread_mutex_lock(&x->mu);
  struct CUgraph_st *g = x->graph;
  atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
  pthread_mutex_unlock(&x->mu);
  return g;
}

EMU_API int emu_graph_launch(struct CUgraphExec_st *x, struct CUstream_st *s)
{
  if (!x)
    return EMU_E_INVALID_VALUE;
  s = emu_stream_resolve(s);
  struct CUgraph_st *g = emu_exec_graph(x);
  if (emu_stream_capturing(s)) {
    struct emu_child_node *c = calloc(1, sizeof *c);
    if (!c) {
      emu_graph_put(g);
      return EMU_E_NOMEM;
    }
    c->n.type = EMU_NODE_GRAPH;
    c->n.launch = emu_child_launch;
    c->n.destroy = emu_child_destroy;
    c->g = g;
    return emu_capture_add(s, &c->n);
  }
  int rc = s->legacy ? emu_capture_stream_use(s) : EMU_OK;
  if (rc == EMU_OK)
    rc = emu_graph_run(g, s);
  emu_graph_put(g);
  return rc;
}

EMU_API void emu_graph_exec_destroy(struct CUgraphExec_st *x)
{
  if (!x)
    return;
  emu_graph_put(x->graph);
  pthread_mutex_destroy(&x->mu);
  free(x);
}

EMU_API int emu_graph_exec_update(struct CUgraphExec_st *x, struct CUgraph_st *g, int *result,
                                  struct CUgraphNode_st **err_node)
{
  *result = 1;   /* CU_GRAPH_EXEC_UPDATE_ERROR: an invalid value */
  *err_node = NULL;
  if (!x || !g)
    return EMU_E_INVALID_VALUE;
  pthread_mutex_lock(&x->mu);
  struct CUgraph_st *old = x->graph;
  int rc = EMU_OK;
  if (old->nnodes != g->nnodes) {
    *result = 2;   /* TOPOLOGY_CHANGED: node counts differ, no error node */
    rc = EMU_E_GRAPH_EXEC_UPDATE_FAILURE;
  } else {
    for (struct CUgraphNode_st *a = old->head, *b = g->head; a && b; a = a->next, b = b->next)
      if (a->type != b->type) {
        *result = 3;   /* NODE_TYPE_CHANGED, the node from g */
        *err_node = b;
        rc = EMU_E_GRAPH_EXEC_UPDATE_FAILURE;
        break;
      }
  }
  if (rc == EMU_OK) {
    *result = 0;
    atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    x->graph = g;
  }
  pthread_mutex_unlock(&x->mu);
  if (rc == EMU_OK)
    emu_graph_put(old);
  return rc;
}

EMU_API int emu_graph_nodes(struct CUgraph_st *g, struct CUgraphNode_st **nodes, size_t *n)
{
  if (!g || !n)
    return EMU_E_INVALID_VALUE;
  if (!nodes) {
    *n = (size_t)g->nnodes;
    return EMU_OK;
  }
  size_t i = 0;
  for (struct CUgraphNode_st *x = g->head; x && i < *n; x = x->next)
    nodes[i++] = x;
  for (size_t j = i; j < *n; j++)
    nodes[j] = NULL;   /* "the remaining entries in nodes will be set to NULL" */
  *n = i;
  return EMU_OK;
}
