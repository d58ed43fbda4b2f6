/* graph.c -- CUDA graphs holding NCCL calls: captures, graphs, execs and
 * replays (contract: graph.h; record layout: recorder/format.h GRAPH_*).
 *
 * Model.  A captured NCCL call takes its collective seq k at capture, like
 * any call, and is recorded once with NTR_REC_CAPTURED and aux = the CUDA
 * capture id.  NCCL's persistent plan runs it again at every launch of the
 * graph: replay n of captured call k.  Per-comm seqs do not advance at a
 * replay (every rank's eager calls keep their numbers whatever it replays);
 * a replay is one GRAPH_LAUNCH record per communicator of the graph with
 * its replay number, evented on the launch stream, and it moves
 * last_enqueued / last_completed up to the graph's last captured seq and
 * cs->replays / replays_done by one.  Ranks are compared by (comm, captured
 * seqs, replay number), never by the local capture id.
 */
#include <stdio.h>

#include "interpose/nti.h"
#include "interpose/comm.h"
#include "interpose/ident.h"
#include "interpose/record.h"
#include "interpose/watchdog.h"
#include "interpose/graph.h"

enum { G_FREE = 0, G_CAPTURING = 1, G_ENDED = 2 };

struct nti_graph_comm {
  struct nti_comm *c;
  uint64_t first, last;  /* collective seqs captured (0: only send/recv) */
  uint32_t ncalls, fp;
  uint32_t first_kind;
};
struct nti_graph {
  uint64_t id;           /* CUDA capture id: the graph id of the records */
  uintptr_t graph;       /* the graph handle, once known */
  int state;             /* G_*, under graph_lock */
  int refs;              /* graph + exec table entries, under graph_lock */
  int ncomm;             /* under graph_lock until the capture ended, then fixed */
  int overflow;          /* more communicators than NTI_GRAPH_COMMS */
  struct nti_graph_comm gc[NTI_GRAPH_COMMS];
  uint64_t replays;      /* launches so far (atomic) */
};

struct nti_gmap_slot nti_exec_map[NTI_GMAP_SLOTS];
uint32_t nti_exec_count;
static struct nti_gmap_slot graph_map[NTI_GMAP_SLOTS];
static struct nti_graph pool[NTI_GRAPH_MAX];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t n_capturing; /* entries in G_CAPTURING (atomic) */

int nti_graph_skip(void) {
  return !nti_active() || nti_tls.guard;
}

/* ------------------------------------------------------------ tables -- */

static struct nti_graph *gmap_get(struct nti_gmap_slot *m, uintptr_t key) {
  if (key <= NTI_GMAP_TOMB)
    return NULL;
  uint32_t i = nti_gmap_slot_of(key);
  for (uint32_t n = 0; n < NTI_GMAP_SLOTS; n++, i = (i + 1) & (NTI_GMAP_SLOTS - 1)) {
    uintptr_t k = __atomic_load_n(&m[i].key, __ATOMIC_ACQUIRE);
    if (k == key)
      return __atomic_load_n(&m[i].val, __ATOMIC_RELAXED);
    if (k == 0)
      return NULL;
  }
  return NULL;
}

static void entry_put(struct nti_graph *e) { /* under graph_lock */
  if (e && --e->refs <= 0 && e->state != G_CAPTURING)
    e->state = G_FREE;
}

/* Under graph_lock.  Replaces the value of a present key.  @return the old
 * value (its reference is the caller's to drop), or NULL. */
static struct nti_graph *gmap_set(struct nti_gmap_slot *m, uintptr_t key, struct nti_graph *val, int *added) {
  uint32_t i = nti_gmap_slot_of(key), tomb = UINT32_MAX;
  *added = 0;
  for (uint32_t n = 0; n < NTI_GMAP_SLOTS; n++, i = (i + 1) & (NTI_GMAP_SLOTS - 1)) {
    uintptr_t k = m[i].key;
    if (k == key) {
      struct nti_graph *old = m[i].val;
      __atomic_store_n(&m[i].val, val, __ATOMIC_RELEASE);
      return old;
    }
    if (k == NTI_GMAP_TOMB && tomb == UINT32_MAX)
      tomb = i;
    if (k == 0)
      break;
  }
  if (tomb == UINT32_MAX)
    tomb = i;
  if (m[tomb].key > NTI_GMAP_TOMB) {
    static int said;
    if (!said++)
      nti_say("more than %u CUDA graphs with NCCL calls at once; the newest are not traced", NTI_GRAPH_MAX);
    return NULL;
  }
  __atomic_store_n(&m[tomb].val, val, __ATOMIC_RELAXED);
  /* Release pairs with the lookups' acquire: val is visible with key. */
  __atomic_store_n(&m[tomb].key, key, __ATOMIC_RELEASE);
  *added = 1;
  return NULL;
}

/* Under graph_lock.  @return the removed value, or NULL. */
static struct nti_graph *gmap_del(struct nti_gmap_slot *m, uintptr_t key) {
  if (key <= NTI_GMAP_TOMB)
    return NULL;
  uint32_t i = nti_gmap_slot_of(key);
  for (uint32_t n = 0; n < NTI_GMAP_SLOTS; n++, i = (i + 1) & (NTI_GMAP_SLOTS - 1)) {
    if (m[i].key == key) {
      __atomic_store_n(&m[i].key, NTI_GMAP_TOMB, __ATOMIC_RELEASE);
      return m[i].val;
    }
    if (m[i].key == 0)
      return NULL;
  }
  return NULL;
}

/* Under graph_lock: map key to e (taking a reference), dropping what it had. */
static void map_to(struct nti_gmap_slot *m, uintptr_t key, struct nti_graph *e) {
  int added;
  e->refs++;
  struct nti_graph *old = gmap_set(m, key, e, &added);
  if (!added && !old) { /* table full */
    e->refs--;
    return;
  }
  if (added && m == nti_exec_map)
    __atomic_fetch_add(&nti_exec_count, 1, __ATOMIC_RELAXED);
  entry_put(old);
}

static void unmap(struct nti_gmap_slot *m, uintptr_t key) {
  struct nti_graph *old = gmap_del(m, key);
  if (old && m == nti_exec_map)
    __atomic_fetch_sub(&nti_exec_count, 1, __ATOMIC_RELAXED);
  entry_put(old);
}

static struct nti_graph *entry_new(uint64_t id) { /* under graph_lock */
  for (unsigned i = 0; i < NTI_GRAPH_MAX; i++)
    if (pool[i].state == G_FREE) {
      struct nti_graph *e = &pool[i];
      memset(e, 0, sizeof *e);
      e->id = id;
      e->state = G_ENDED;
      return e;
    }
  static int said;
  if (!said++)
    nti_say("more than %u CUDA graphs with NCCL calls at once; the newest are not traced", NTI_GRAPH_MAX);
  return NULL;
}

static struct nti_graph_comm *entry_comm(struct nti_graph *e, struct nti_comm *c) {
  for (int i = 0; i < e->ncomm; i++)
    if (e->gc[i].c == c)
      return &e->gc[i];
  if (e->ncomm == NTI_GRAPH_COMMS) {
    e->overflow = 1;
    return NULL;
  }
  struct nti_graph_comm *g = &e->gc[e->ncomm++];
  memset(g, 0, sizeof *g);
  g->c = c;
  return g;
}

static void comm_add(struct nti_graph_comm *g, uint64_t seq, unsigned kind, uint32_t fp, int coll) {
  if (!g->ncalls)
    g->first_kind = kind;
  g->ncalls++;
  g->fp = nti_mix(g->fp, fp);
  if (coll && seq) {
    if (!g->first)
      g->first = seq;
    g->last = seq;
  }
}

/* Under graph_lock: fold src's calls into dst (a graph launched into a capture,
 * or added as a child node). */
static void entry_merge(struct nti_graph *dst, const struct nti_graph *src) {
  for (int i = 0; i < src->ncomm; i++) {
    const struct nti_graph_comm *s = &src->gc[i];
    struct nti_graph_comm *d = entry_comm(dst, s->c);
    if (!d)
      continue;
    if (!d->ncalls)
      d->first_kind = s->first_kind;
    d->ncalls += s->ncalls;
    d->fp = nti_mix(d->fp, s->fp);
    if (s->first && (!d->first || s->first < d->first))
      d->first = s->first;
    if (s->last > d->last)
      d->last = s->last;
  }
  dst->overflow |= src->overflow;
}

/* Under graph_lock: the entry of an open capture, made on its first NCCL call. */
static struct nti_graph *capture_entry(uint64_t cid, void *graph) {
  for (unsigned i = 0; i < NTI_GRAPH_MAX; i++)
    if (pool[i].state == G_CAPTURING && pool[i].id == cid)
      return &pool[i];
  struct nti_graph *e = entry_new(cid);
  if (!e)
    return NULL;
  e->state = G_CAPTURING;
  __atomic_fetch_add(&n_capturing, 1, __ATOMIC_RELAXED);
  if (graph) {
    /* The graph the capture builds is the one end-capture returns: known
     * now, so instantiation finds it even if end-capture is not seen. */
    e->graph = (uintptr_t)graph;
    map_to(graph_map, e->graph, e);
  }
  return e;
}

/* ----------------------------------------------------------- records -- */

static int is_coll(unsigned kind) {
  return kind != NTR_KIND_SEND && kind != NTR_KIND_RECV;
}

/* One record per communicator of e (GRAPH_* layout, format.h).  pos: where
 * each went (LAUNCH), NULL otherwise. */
static int graph_records(const struct nti_graph *e, unsigned kind, uintptr_t handle, uint64_t count,
                         void *stream, int result, int dtype, uint64_t *pos) {
  int n = 0;
  for (int i = 0; i < e->ncomm; i++) {
    const struct nti_graph_comm *g = &e->gc[i];
    uint64_t p;
    unsigned phase = kind == NTR_KIND_GRAPH_LAUNCH ? NTR_PHASE_CALL : NTR_PHASE_EVENT;
    struct ntr_record *r = nti_record_begin(&p, kind, phase, g->c);
    r->seq = g->last;
    r->u.buf.sendbuf = g->first;
    r->u.buf.recvbuf = (uint64_t)handle;
    r->u.buf.stream = (uint64_t)(uintptr_t)stream;
    r->count = count;
    r->peer = (int32_t)g->ncalls;
    r->redop = (int32_t)g->first_kind;
    r->fp = g->fp;
    r->aux = e->id;
    r->result = result;
    if (dtype >= 0)
      r->dtype = (uint8_t)dtype;
    if (kind == NTR_KIND_GRAPH_LAUNCH && !nti_tracked(g->c))
      r->flags |= NTR_REC_NO_TRACKING;
    /* Launches are copied into recent[] by the watchdog, like ops (their
     * result comes after the call); events at once. */
    nti_record_end(r, p, phase == NTR_PHASE_CALL ? NULL : g->c);
    if (pos)
      pos[n] = p;
    n++;
  }
  return n;
}

/* ----------------------------------------------------------- capture -- */

void nti_graph_note_captured(struct nti_comm *c, void *stream, uint64_t pos_first, uint64_t pos) {
  uint64_t cid = 0;
  void *graph = NULL;
  int have = nti_capture_id(stream, &cid, &graph);
  uint32_t tid = nti_tid(), gid = nti_tls.group_id;
  if (pos - pos_first > nti_proc.ring.mask)
    pos_first = pos - nti_proc.ring.mask;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *e = have ? capture_entry(cid, graph) : NULL;
  struct nti_graph_comm *g = e ? entry_comm(e, c) : NULL;
  for (uint64_t p = pos_first; p <= pos; p++) {
    struct ntr_record copy;
    if (ntr_ring_read_slot(&nti_proc.ring.slots[p & nti_proc.ring.mask], &copy) != p + 1 ||
        copy.comm_id != c->cs->comm_id || copy.tid != tid || copy.group_id != gid ||
        copy.u.buf.stream != (uint64_t)(uintptr_t)stream || copy.phase != NTR_PHASE_CALL)
      continue;
    if (g)
      comm_add(g, copy.seq, copy.kind, ntr_record_fp(&copy), is_coll(copy.kind)); /* fp: derived (format.h) */
    nti_record_patch_aux(p, c, cid);
    nti_record_patch(p, c, NTI_KEEP_RESULT, NTR_REC_CAPTURED, 0);
  }
  pthread_mutex_unlock(&graph_lock);
}

uint64_t nti_graph_end_pre(void *stream) {
  uint64_t cid = 0;
  if (!__atomic_load_n(&n_capturing, __ATOMIC_RELAXED) || !nti_capture_id(stream, &cid, NULL))
    return 0;
  return cid;
}

void nti_graph_end_post(void *stream, uint64_t cid, void *graph, int rc) {
  if (!cid)
    return;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *e = NULL;
  for (unsigned i = 0; i < NTI_GRAPH_MAX && !e; i++)
    if (pool[i].state == G_CAPTURING && pool[i].id == cid)
      e = &pool[i];
  if (e) {
    __atomic_fetch_sub(&n_capturing, 1, __ATOMIC_RELAXED);
    e->state = G_ENDED;
    if (rc == 0 && graph && e->graph != (uintptr_t)graph) {
      if (e->graph)
        unmap(graph_map, e->graph);
      e->graph = (uintptr_t)graph;
      map_to(graph_map, e->graph, e);
    }
    graph_records(e, NTR_KIND_GRAPH_CAPTURE, rc == 0 ? (uintptr_t)graph : 0, 0, stream, rc, -1, NULL);
    if (rc != 0 && e->graph) /* invalidated: no graph came of it */
      unmap(graph_map, e->graph);
    else if (e->refs <= 0)
      e->state = G_FREE;
  }
  pthread_mutex_unlock(&graph_lock);
}

/* ------------------------------------------------------ graphs, execs -- */

void nti_graph_instantiated(void *exec, void *graph, int rc) {
  if (rc != 0 || !exec)
    return;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *e = gmap_get(graph_map, (uintptr_t)graph);
  if (e) {
    map_to(nti_exec_map, (uintptr_t)exec, e);
    graph_records(e, NTR_KIND_GRAPH_INSTANTIATE, (uintptr_t)exec, (uint64_t)(uintptr_t)graph, NULL, rc, -1, NULL);
  }
  pthread_mutex_unlock(&graph_lock);
}

void nti_graph_updated(void *exec, void *graph, int rc) {
  if (rc != 0)
    return;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *e = gmap_get(graph_map, (uintptr_t)graph);
  if (e) {
    map_to(nti_exec_map, (uintptr_t)exec, e);
    graph_records(e, NTR_KIND_GRAPH_INSTANTIATE, (uintptr_t)exec, (uint64_t)(uintptr_t)graph, NULL, rc, -1, NULL);
  } else {
    unmap(nti_exec_map, (uintptr_t)exec); /* its new graph holds no NCCL call */
  }
  pthread_mutex_unlock(&graph_lock);
}

/* A graph or an exec of one that holds NCCL calls is destroyed: its
 * record (aux 1 for an exec), and the key leaves its map. */
static void destroyed(struct nti_gmap_slot *m, uintptr_t key, int is_exec) {
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *e = gmap_get(m, key);
  if (e) {
    graph_records(e, NTR_KIND_GRAPH_DESTROY, key, __atomic_load_n(&e->replays, __ATOMIC_RELAXED), NULL, 0,
                  is_exec, NULL);
    unmap(m, key);
  }
  pthread_mutex_unlock(&graph_lock);
}

void nti_graph_exec_destroyed(void *exec) { destroyed(nti_exec_map, (uintptr_t)exec, 1); }

void nti_graph_destroyed(void *graph) { destroyed(graph_map, (uintptr_t)graph, 0); }

/* A clone runs the same captured calls: a new entry with the same id (the
 * same captured sequence), its own replay count. */
void nti_graph_cloned(void *clone, void *orig, int rc) {
  if (rc != 0 || !clone)
    return;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *o = gmap_get(graph_map, (uintptr_t)orig);
  struct nti_graph *e = o ? entry_new(o->id) : NULL;
  if (e) {
    entry_merge(e, o);
    e->graph = (uintptr_t)clone;
    map_to(graph_map, e->graph, e);
  }
  pthread_mutex_unlock(&graph_lock);
}

/* A child-graph node embeds a copy of the child: the parent now runs its
 * NCCL calls too. */
void nti_graph_child_added(void *parent, void *child, int rc) {
  if (rc != 0)
    return;
  pthread_mutex_lock(&graph_lock);
  struct nti_graph *ch = gmap_get(graph_map, (uintptr_t)child);
  if (ch) {
    struct nti_graph *p = gmap_get(graph_map, (uintptr_t)parent);
    if (!p && (p = entry_new(ch->id))) {
      p->graph = (uintptr_t)parent;
      map_to(graph_map, p->graph, p);
    }
    if (p)
      entry_merge(p, ch);
  }
  pthread_mutex_unlock(&graph_lock);
}

/* ------------------------------------------------------------ launch -- */

void nti_graph_launch_pre(struct nti_graph *e, void *exec, void *stream, struct nti_graph_launch *l) {
  l->e = e;
  l->replay = __atomic_add_fetch(&e->replays, 1, __ATOMIC_RELAXED);
  l->tsc = ntr_clock_now();
  l->n = graph_records(e, NTR_KIND_GRAPH_LAUNCH, (uintptr_t)exec, l->replay, stream, -1, -1, l->pos);
}

void nti_graph_launch_post(struct nti_graph_launch *l, void *stream, int rc) {
  struct nti_graph *e = l->e;
  int saved = errno;
  int child = rc == 0 && nti_stream_capturing(stream);
  if (child) {
    /* Launched into a capture: a child-graph node of the graph being
     * captured, which now holds these calls; this is no replay yet. */
    uint64_t cid = 0;
    void *graph = NULL;
    if (nti_capture_id(stream, &cid, &graph)) {
      pthread_mutex_lock(&graph_lock);
      struct nti_graph *outer = capture_entry(cid, graph);
      if (outer)
        entry_merge(outer, e);
      pthread_mutex_unlock(&graph_lock);
    }
  }
  for (int i = 0; i < l->n; i++) {
    struct nti_comm *c = e->gc[i].c;
    nti_record_patch(l->pos[i], c, rc, child ? NTR_REC_CAPTURED : 0, 0);
    if (rc != 0 || child)
      continue;
    struct ntr_comm_state *cs = c->cs;
    __atomic_fetch_add(&cs->replays, 1, __ATOMIC_RELAXED);
    uint64_t last = e->gc[i].last;
    if (last > __atomic_load_n(&cs->last_enqueued, __ATOMIC_RELAXED))
      __atomic_store_n(&cs->last_enqueued, last, __ATOMIC_RELEASE);
    __atomic_store_n(&cs->last_enqueue_tsc, l->tsc, __ATOMIC_RELAXED);
    if (nti_tracked(c))
      nti_complete_track_replay(c, stream, last, l->pos[i], l->tsc);
  }
  errno = saved;
}
