/* reduce.c -- one process's evidence, from its images to what the analysis
 * reads.
 *
 * Thread-safety: nta_reduce_proc touches only the process it is given and
 * that process's images; load.c runs it on several threads for distinct
 * processes.  Not signal-safe (allocates).
 *
 * A process may have left several images (a timeout dump, then an exit dump,
 * then its ring): the latest state is kept, and the records are the union by
 * ring position (a comm's recent[] copies included), so evidence that
 * scrolled out of one snapshot is still found in an earlier one.  The union
 * is walked once, in position order, without being copied (a k-way merge
 * over the images' sorted records), and reduced to:
 *  - per (comm id, rank): collectives in seq order, bit-packed by blocks of
 *    64 (pack.c), send/recv, the lifecycle times the detectors use, and
 *    the profiler plugin's proxy ops still open (wait_take);
 *  - the few records findings quote in full (exits, signals, tracer events,
 *    aborts; only the last NTA_MARKS_SHOWN application markers);
 *  - the process's fate and first/last times.
 * The caller then frees every image's records (they may be borrowed from a
 * load buffer, tools/reader.h): 1,024 ranks x 65,536 records is 8 GiB as
 * records and about 0.25 GiB reduced.  merge.c walks the union.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"
#include "recorder/clock.h"

/* ------------------------------------------------------------- slots -- */


/* Per (comm id, rank) while reducing: its collectives, its send/recv as
 * record pointers (valid while the images live), then encoded. */
struct slot {
  struct nta_mdata d;
  struct nta_tcoll *colls;
  const struct ntr_record **p2p;
  uint64_t ncolls, np2p, ccap, pcap;
};

struct red {
  struct nta_proc *p;
  struct nta_arena *arena;
  struct slot *sl;
  int nsl, capsl;
  int *hash; /* open addressing over sl, -1 empty */
  uint32_t hcap;
  int last;
  /* fingerprint interning */
  uint32_t *fh;
  uint32_t fhcap, capfp;
  uint64_t reg_seq, last_id;
  int last_rank;
  uint64_t capkeep;
  uint32_t fcache[16];          /* recent fingerprint indices, by a cheap hash of count and kind */
};

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

static int rehash(struct red *R) {
  uint32_t cap = R->hcap ? 2 * R->hcap : 64;
  int *h = malloc(cap * sizeof *h);
  if (!h)
    return -1;
  for (uint32_t i = 0; i < cap; i++)
    h[i] = -1;
  for (int k = 0; k < R->nsl; k++) {
    uint32_t i = (uint32_t)mix(R->sl[k].d.comm_id ^ (uint64_t)(uint32_t)R->sl[k].d.rank << 7) & (cap - 1);
    while (h[i] >= 0)
      i = (i + 1) & (cap - 1);
    h[i] = k;
  }
  free(R->hash);
  R->hash = h;
  R->hcap = cap;
  return 0;
}

static struct slot *slot_of(struct red *R, uint64_t id, int rank) {
  if (R->last >= 0 && R->sl[R->last].d.comm_id == id && R->sl[R->last].d.rank == rank)
    return &R->sl[R->last];
  if (2 * (uint32_t)(R->nsl + 1) > R->hcap && rehash(R))
    return NULL;
  uint32_t i = (uint32_t)mix(id ^ (uint64_t)(uint32_t)rank << 7) & (R->hcap - 1);
  while (R->hash[i] >= 0) {
    struct slot *s = &R->sl[R->hash[i]];
    if (s->d.comm_id == id && s->d.rank == rank) {
      R->last = R->hash[i];
      return s;
    }
    i = (i + 1) & (R->hcap - 1);
  }
  if (R->nsl == R->capsl) {
    int cap = R->capsl ? 2 * R->capsl : 8;
    struct slot *v = realloc(R->sl, (size_t)cap * sizeof *v);
    if (!v)
      return NULL;
    R->sl = v;
    R->capsl = cap;
  }
  struct slot *s = &R->sl[R->nsl];
  memset(s, 0, sizeof *s);
  s->d.comm_id = id;
  s->d.rank = rank;
  s->d.tracking = 1;
  R->hash[i] = R->nsl;
  R->last = R->nsl++;
  return s;
}

static int push_ptr(const struct ntr_record ***v, uint64_t *n, uint64_t *cap, const struct ntr_record *r) {
  if (*n == *cap) {
    uint64_t c = *cap ? 2 * *cap : 64;
    const struct ntr_record **nv = realloc(*v, (size_t)c * sizeof *nv);
    if (!nv)
      return -1;
    *v = nv;
    *cap = c;
  }
  (*v)[(*n)++] = r;
  return 0;
}

/* One multiply-xorshift: a training loop has a handful of fingerprints. */
static uint32_t fp_hash(const struct nta_fp *f) {
  uint64_t a = f->count ^ ((uint64_t)f->op << 48 | (uint64_t)f->dtype << 40 | (uint64_t)f->flags << 24 |
                            (uint64_t)f->pystack << 8);
  uint64_t b = (uint64_t)(uint32_t)f->redop ^ (uint64_t)(uint32_t)f->peer << 32 ^ (uint64_t)(uint32_t)f->result << 13;
  uint64_t h = (a ^ b * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
  return (uint32_t)(h >> 32);
}

/* @return the index of r's fingerprint in p->fps, UINT32_MAX out of memory. */
static uint32_t intern(struct red *R, const struct ntr_record *r) {
  struct nta_proc *p = R->p;
  struct nta_fp f;
  memset(&f, 0, sizeof f);
  f.count = r->count;
  f.redop = r->redop;
  f.peer = r->peer;
  f.result = r->result;
  f.op = (uint16_t)ntr_kind_fp_op(r->kind);
  f.flags = r->flags & (uint16_t)~(NTR_REC_COMPLETED | NTR_REC_NO_TRACKING);
  f.dtype = r->dtype;
  f.pystack = r->pystack_id;
  if (2 * (p->nfps + 1) > R->fhcap) {
    uint32_t cap = R->fhcap ? 2 * R->fhcap : 64;
    uint32_t *h = malloc(cap * sizeof *h);
    if (!h)
      return UINT32_MAX;
    for (uint32_t i = 0; i < cap; i++)
      h[i] = UINT32_MAX;
    for (uint32_t k = 0; k < p->nfps; k++) {
      uint32_t i = fp_hash(&p->fps[k]) & (cap - 1);
      while (h[i] != UINT32_MAX)
        i = (i + 1) & (cap - 1);
      h[i] = k;
    }
    free(R->fh);
    R->fh = h;
    R->fhcap = cap;
  }
  uint32_t i = fp_hash(&f) & (R->fhcap - 1);
  while (R->fh[i] != UINT32_MAX) {
    if (memcmp(&p->fps[R->fh[i]], &f, sizeof f) == 0)
      return R->fh[i];
    i = (i + 1) & (R->fhcap - 1);
  }
  if (p->nfps == R->capfp) {
    uint32_t cap = R->capfp ? 2 * R->capfp : 16;
    struct nta_fp *v = realloc(p->fps, cap * sizeof *v);
    if (!v)
      return UINT32_MAX;
    p->fps = v;
    R->capfp = cap;
  }
  p->fps[p->nfps] = f;
  R->fh[i] = p->nfps;
  return p->nfps++;
}

/* intern() behind a direct-mapped cache compared field by field: a training
 * loop cycles through a few fingerprints, and building and hashing the
 * full key for every collective would cost a tenth of the reduction. */
static uint32_t intern_fast(struct red *R, const struct ntr_record *r) {
  unsigned h = (unsigned)((r->count ^ (r->count >> 13) ^ (uint64_t)r->kind * 0x9e37u) & 15);
  uint32_t c = R->fcache[h];
  if (c != UINT32_MAX) {
    const struct nta_fp *f = &R->p->fps[c];
    if (f->count == r->count && f->op == ntr_kind_fp_op(r->kind) && f->dtype == r->dtype && f->redop == r->redop &&
        f->peer == r->peer && f->result == r->result && f->pystack == r->pystack_id &&
        f->flags == (r->flags & (uint16_t)~(NTR_REC_COMPLETED | NTR_REC_NO_TRACKING)))
      return c;
  }
  c = intern(R, r);
  R->fcache[h] = c;
  return c;
}

static int is_init_kind(unsigned k) {
  return k == NTR_KIND_COMM_INIT_RANK || k == NTR_KIND_COMM_INIT_RANK_CONFIG ||
         k == NTR_KIND_COMM_INIT_RANK_SCALABLE || k == NTR_KIND_COMM_INIT_ALL ||
         k == NTR_KIND_COMM_SPLIT || k == NTR_KIND_COMM_SHRINK;
}

/* Records the findings quote by themselves. */
static int kept_kind(unsigned k) {
  switch (k) {
  case NTR_KIND_EXIT: case NTR_KIND_SIGNAL: case NTR_KIND_ASYNC_ERROR: case NTR_KIND_TIMEOUT:
  case NTR_KIND_MISMATCH: case NTR_KIND_PEER_LOST: case NTR_KIND_ENV_DIFF: case NTR_KIND_MARK:
  case NTR_KIND_DUMP: case NTR_KIND_COMM_ABORT: case NTR_KIND_STRAGGLER:
    return 1;
  default:
    return 0;
  }
}

/* The interposer's NOTE naming a comm it gave no slot (more than
 * NTR_COMM_MAX alive at once): the verdict lists those comms. */
int nta_note_unwatched(const struct ntr_record *r) {
  return r->kind == NTR_KIND_NOTE && strncmp(r->u.text, "unwatched", sizeof r->u.text) == 0;
}

/* The interposer's NOTE that a libnccl it never called was loaded
 * (interpose/exit.c): this process's NCCL calls were invisible. */
int nta_note_unseen(const struct ntr_record *r) {
  return r->kind == NTR_KIND_NOTE && strncmp(r->u.text, "nccl unseen", sizeof r->u.text) == 0;
}

static int keep(struct red *R, const struct ntr_record *r) {
  struct nta_proc *p = R->p;
  if (p->nkeep == R->capkeep) {
    uint64_t cap = R->capkeep ? 2 * R->capkeep : 16;
    struct ntr_record *v = realloc(p->keep, (size_t)cap * sizeof *v);
    if (!v)
      return -1;
    p->keep = v;
    R->capkeep = cap;
  }
  p->keep[p->nkeep++] = *r;
  return 0;
}

/* A launch of a graph (GRAPH_LAUNCH, format.h).  A launch into a capture
 * (a child node, no replay) or one CUDA refused is no replay. */
static void replay_take(struct nta_mdata *d, const struct nta_proc *p, const struct ntr_record *r) {
  if (r->phase != NTR_PHASE_CALL || (r->flags & NTR_REC_CAPTURED) || (r->result != 0 && r->result != -1) ||
      !r->count)
    return;
  d->nreplays++;
  struct nta_replays *g = NULL;
  for (int i = 0; i < d->ngr && !g; i++)
    if (d->gr[i].seq_first == r->u.buf.sendbuf && d->gr[i].seq_last == r->seq)
      g = &d->gr[i];
  if (!g) {
    if (d->ngr == NTA_GRAPHS)
      return;
    g = &d->gr[d->ngr++];
    memset(g, 0, sizeof *g);
    g->seq_first = r->u.buf.sendbuf;
    g->seq_last = r->seq;
    g->first_kind = (uint32_t)r->redop;
    g->ncalls = (uint32_t)r->peer;
    g->fp = r->fp;
  }
  uint64_t n = r->count;
  if (n > g->launched)
    g->launched = n;
  if ((r->flags & NTR_REC_COMPLETED) && r->tsc_done) {
    if (n > g->completed) {
      g->completed = n;
      g->completed_ns = nta_ns(p, r->tsc_done);
    }
  } else if (!(r->flags & NTR_REC_NO_TRACKING) && (!g->pending || n < g->pending)) {
    g->pending = n;
    g->pending_ns = nta_ns(p, r->tsc);
  }
}

/* A ProxyOp or ProxyStep record (the plugin's inside view, format.h):
 * keep the ops still open.  Each record carries the whole op (seq, kind,
 * peer, channel, steps, direction), so a step whose op's enter scrolled
 * out still opens it; full, the oldest open op gives way. */
static void wait_take(struct nta_mdata *d, const struct nta_proc *p, const struct ntr_record *r) {
  int32_t kind = r->redop, peer = r->peer, chan = r->dtype, is_send = r->u.buf.recvbuf != 0;
  struct nta_wait *w = NULL;
  int i;
  for (i = 0; i < d->nwaits; i++) {
    struct nta_wait *x = &d->waits[i];
    if (x->kind == kind && x->peer == peer && x->chan == chan && x->is_send == is_send) {
      w = x;
      break;
    }
  }
  if (w && w->seq != r->seq) { /* a later op of the same stream: the earlier one's exit was lost */
    memmove(w, w + 1, (size_t)(d->nwaits - i - 1) * sizeof *w);
    d->nwaits--;
    w = NULL;
  }
  if (r->kind == NTR_KIND_PROXY_OP && r->phase == NTR_PHASE_EXIT) {
    if (w) {
      memmove(w, w + 1, (size_t)(d->nwaits - i - 1) * sizeof *w);
      d->nwaits--;
    }
    return;
  }
  if (!w) {
    if (r->kind == NTR_KIND_PROXY_STEP && r->phase == NTR_PHASE_EXIT && r->count + 1 >= r->u.buf.sendbuf)
      return; /* the last step of an op whose exit follows: nothing to open */
    if (d->nwaits == NTA_WAITS) {
      memmove(&d->waits[0], &d->waits[1], (size_t)(NTA_WAITS - 1) * sizeof d->waits[0]);
      d->nwaits--;
    }
    w = &d->waits[d->nwaits++];
    memset(w, 0, sizeof *w);
    w->seq = r->seq;
    w->kind = kind;
    w->peer = peer;
    w->chan = chan;
    w->is_send = is_send;
    w->step = -1;
    w->state = -1;
  }
  w->t_ns = nta_ns(p, r->tsc);
  w->nsteps = r->u.buf.sendbuf > INT32_MAX ? INT32_MAX : (int32_t)r->u.buf.sendbuf;
  if (r->kind != NTR_KIND_PROXY_STEP)
    return;
  int32_t step = r->count > INT32_MAX ? INT32_MAX : (int32_t)r->count;
  if (r->phase == NTR_PHASE_ENTER) {
    w->step = step;
    w->state = -1;
    w->bytes = 0;
  } else if (r->phase == NTR_PHASE_EVENT) {
    w->step = step;
    w->state = (int32_t)r->aux;
    w->bytes = r->u.buf.stream;
  } else if (r->phase == NTR_PHASE_EXIT) {
    if (w->step == step) {
      w->step = -1;
      w->state = -1;
    }
    if (step + 1 > w->done)
      w->done = step + 1;
  }
}

/* One record of the union, in position order.  Keeps what the analysis
 * needs from the full records: which (comm, rank) pairs are members,
 * in which order, and per member its calls and lifecycle times. */
static int take(struct red *R, const struct ntr_record *r, uint64_t *min_tsc, uint64_t *max_tsc) {
  struct nta_proc *p = R->p;
  p->nrecs++;
  if (r->tsc) {
    if (!*min_tsc || r->tsc < *min_tsc)
      *min_tsc = r->tsc;
    if (r->tsc > *max_tsc)
      *max_tsc = r->tsc;
  }
  if (kept_kind(r->kind) || nta_note_unwatched(r) || nta_note_unseen(r)) {
    p->nmarks += r->kind == NTR_KIND_MARK;
    if (keep(R, r))
      return -1;
  }
  if (!r->comm_id)
    return 0;
  struct slot *s = slot_of(R, r->comm_id, r->rank);
  if (!s)
    return -1;
  if (r->kind == NTR_KIND_DEV_ARRIVE) {
    if (s->d.ndev == s->d.devcap) {
      uint64_t c = s->d.devcap ? 2 * s->d.devcap : 64;
      struct nta_dev *v = realloc(s->d.dev, (size_t)c * sizeof *v);
      if (!v)
        return -1;
      s->d.dev = v;
      s->d.devcap = c;
    }
    s->d.dev[s->d.ndev].seq = r->seq;
    s->d.dev[s->d.ndev++].t_ns = nta_ns(p, r->tsc);
    return 0;
  }
  if (r->kind == NTR_KIND_PROXY_OP || r->kind == NTR_KIND_PROXY_STEP) {
    wait_take(&s->d, p, r);
    return 0;
  }
  /* Registration: a non-tracer record names a member (consecutive records
   * of one member register once, as the old per-record scan did). */
  if (r->rank >= 0 && r->kind < NTR_KIND_FIRST_TRACER_EVENT &&
      !(r->comm_id == R->last_id && r->rank == R->last_rank)) {
    R->last_id = r->comm_id;
    R->last_rank = r->rank;
    if (!s->d.is_member) {
      s->d.is_member = 1;
      s->d.reg_order = R->reg_seq++;
    }
    if (r->nranks > s->d.reg_nranks && r->nranks <= NTA_MAX_NRANKS)
      s->d.reg_nranks = r->nranks;
  }
  if (r->tsc && (!s->d.min_tsc || r->tsc < s->d.min_tsc))
    s->d.min_tsc = r->tsc;
  if (is_init_kind(r->kind) && r->phase == NTR_PHASE_ENTER && !s->d.init_enter_ns) {
    s->d.init_enter_ns = nta_ns(p, r->tsc);
    s->d.init_pystack = r->pystack_id;
  }
  if (r->kind == NTR_KIND_COMM_ABORT && r->phase != NTR_PHASE_EXIT && !s->d.abort_ns) {
    s->d.abort_ns = nta_ns(p, r->tsc);
    s->d.abort_pystack = r->pystack_id;
  }
  if (r->pystack_id && r->phase == NTR_PHASE_ENTER && !is_init_kind(r->kind) && r->kind < NTR_KIND_FIRST_TRACER_EVENT &&
      !ntt_kind_is_collective(r->kind) && !ntt_kind_is_p2p(r->kind))
    s->d.life_pystack = r->pystack_id;
  /* ncclInProgress (7) is a nonblocking init still running, not a failure. */
  if (is_init_kind(r->kind) && r->phase == NTR_PHASE_EXIT && r->result > 0 && r->result != 7 &&
      !s->d.init_fail_ns) {
    uint64_t t = nta_ns(p, r->tsc);
    s->d.init_fail_ns = t ? t : 1;
  }
  if (r->phase == NTR_PHASE_EXIT)
    return 0;
  if (r->kind == NTR_KIND_GRAPH_LAUNCH) {
    replay_take(&s->d, p, r);
    return 0;
  }
  if (ntt_kind_is_collective(r->kind)) {
    /* Strict-mode refusals are kept: what the application called is the
     * evidence, whether or not NCCL ever saw it. */
    if (r->flags & NTR_REC_NO_TRACKING)
      s->d.tracking = 0;
    if (s->ncolls == s->ccap) {
      uint64_t c = s->ccap ? 2 * s->ccap : 64;
      struct nta_tcoll *v = realloc(s->colls, (size_t)c * sizeof *v);
      if (!v)
        return -1;
      s->colls = v;
      s->ccap = c;
    }
    struct nta_tcoll *t = &s->colls[s->ncolls++];
    t->seq = r->seq;
    t->tsc = r->tsc;
    t->done = (r->flags & NTR_REC_COMPLETED) && r->tsc_done ? r->tsc_done : 0;
    t->order = p->nrecs;
    t->fpi = intern_fast(R, r);
    return t->fpi == UINT32_MAX ? -1 : 0;
  }
  if (ntt_kind_is_p2p(r->kind))
    return push_ptr(&s->p2p, &s->np2p, &s->pcap, r);
  return 0;
}

static int cmp_tseq(const void *a, const void *b) {
  const struct nta_tcoll *x = a, *y = b;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_pp2p(const void *a, const void *b) {
  const struct ntr_record *x = *(const struct ntr_record *const *)a, *y = *(const struct ntr_record *const *)b;
  int dx = x->kind == NTR_KIND_RECV, dy = y->kind == NTR_KIND_RECV;
  if (x->peer != y->peer)
    return x->peer < y->peer ? -1 : 1;
  if (dx != dy)
    return dx < dy ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->commit < y->commit ? -1 : x->commit > y->commit;
}

/* Collectives of one slot: sorted by seq (they nearly always are), one per
 * seq (the first by position), then bit-packed (pack.c). */
static int encode(struct red *R, struct slot *s) {
  struct nta_mdata *d = &s->d;
  uint64_t n = s->ncolls;
  for (uint64_t i = 1; i < n; i++)
    if (cmp_tseq(&s->colls[i - 1], &s->colls[i]) > 0) {
      qsort(s->colls, (size_t)n, sizeof *s->colls, cmp_tseq);
      break;
    }
  uint64_t w = 0;
  for (uint64_t i = 0; i < n; i++)
    if (!w || s->colls[w - 1].seq != s->colls[i].seq)
      s->colls[w++] = s->colls[i];
  n = w;
  if (nta_pack_colls(d, s->colls, n, R->arena))
    return -1;
  uint64_t capr = 0;
  for (uint64_t i = 0; i < n; i++) {
    const struct nta_tcoll *r = &s->colls[i];
    if (!i || r->seq != s->colls[i - 1].seq + 1) {
      if (d->nruns == capr) {
        capr = capr ? 2 * capr : 4;
        struct nta_run *v = realloc(d->runs, (size_t)capr * sizeof *v);
        if (!v)
          return -1;
        d->runs = v;
      }
      d->runs[d->nruns++] = (struct nta_run){r->seq, i};
    }
  }
  d->ncolls = n;
  free(s->colls);
  s->colls = NULL;
  /* Send/recv: by (peer, direction, seq), position breaking ties. */
  if (s->np2p) {
    qsort(s->p2p, (size_t)s->np2p, sizeof *s->p2p, cmp_pp2p);
    d->p2p = malloc((size_t)s->np2p * sizeof *d->p2p);
    if (!d->p2p)
      return -1;
    for (uint64_t i = 0; i < s->np2p; i++) {
      const struct ntr_record *r = s->p2p[i];
      struct nta_p2p *x = &d->p2p[i];
      x->peer = r->peer;
      x->dir = r->kind == NTR_KIND_RECV;
      x->seq = r->seq;
      x->tsc = r->tsc;
      x->done = (r->flags & NTR_REC_COMPLETED) && r->tsc_done ? r->tsc_done : 0;
      if ((x->fpi = intern(R, r)) == UINT32_MAX)
        return -1;
    }
    d->np2p = s->np2p;
  }
  free(s->p2p);
  s->p2p = NULL;
  return 0;
}

/* ------------------------------------------------------------- times -- */

/* Is tick -> ns conversion order-preserving, without wrapping to 0 or past
 * 2^64, over [lo, hi]?  Then the first/last times are those of the
 * smallest/largest ticks and need no conversion per record. */
static int ns_monotone(const struct ntt_image *img, uint64_t lo, uint64_t hi) {
  const struct ntr_ring_header *h = &img->hdr;
  uint64_t ns;
  if (!ntr_clock_ns_exact(h->real_base_ns, h->tsc_base, h->tsc_hz, lo, &ns) ||
      !ntr_clock_ns_exact(h->real_base_ns, h->tsc_base, h->tsc_hz, hi, &ns))
    return 0;
  return ntt_image_ns(img, lo) != 0;
}

/* The exact per-record rule, for clocks where ns_monotone fails. */
static int exact_times(struct red *R, struct ntt_image **imgs, int n, int sorted) {
  struct nta_proc *p = R->p;
  struct nta_walker w;
  if (nta_walker_init(&w, imgs, n, sorted)) {
    nta_walker_free(&w);
    return -1;
  }
  p->first_ns = p->last_ns = 0;
  for (int k = 0; k < R->nsl; k++)
    R->sl[k].d.first_ns = 0;
  const struct ntr_record *r;
  while ((r = nta_walker_next(&w)) != NULL) {
    uint64_t t = nta_ns(p, r->tsc);
    if (t && (!p->first_ns || t < p->first_ns))
      p->first_ns = t;
    if (t > p->last_ns)
      p->last_ns = t;
    if (!r->comm_id)
      continue;
    struct slot *s = slot_of(R, r->comm_id, r->rank);
    if (s && t && (!s->d.first_ns || t < s->d.first_ns))
      s->d.first_ns = t;
  }
  nta_walker_free(&w);
  return 0;
}

/* ---------------------------------------------------------- the entry -- */

static int cmp_reg(const void *a, const void *b) {
  const struct nta_mdata *x = a, *y = b;
  if (x->is_member != y->is_member)
    return x->is_member ? -1 : 1;
  return x->reg_order < y->reg_order ? -1 : x->reg_order > y->reg_order;
}

int nta_reduce_proc(struct nta_proc *p, struct ntt_image **imgs, int n, struct nta_arena *arena, int sorted) {
  struct ntt_image *latest = imgs[0];
  for (int i = 1; i < n; i++)
    if (nta_image_later(latest, imgs[i]))
      latest = imgs[i];
  p->img = latest;
  p->nfiles = n;
  snprintf(p->job, sizeof p->job, "%s", latest->hdr.job_id[0] ? latest->hdr.job_id : "(no job id)");
  for (int i = 0; i < n; i++) {
    uint64_t t = ntt_image_latest_ns(imgs[i]);
    if (t > p->latest_ns)
      p->latest_ns = t;
  }
  struct red R;
  memset(&R, 0, sizeof R);
  R.p = p;
  R.arena = arena;
  memset(R.fcache, 0xff, sizeof R.fcache);
  p->in_arena = arena != NULL;
  R.last = -1;
  R.last_rank = -2;
  struct nta_walker w;
  int rc = nta_walker_init(&w, imgs, n, sorted);
  uint64_t min_tsc = 0, max_tsc = 0;
  const struct ntr_record *r;
  while (rc == 0 && (r = nta_walker_next(&w)) != NULL)
    rc = take(&R, r, &min_tsc, &max_tsc);
  nta_walker_free(&w);
  if (rc == 0) {
    if (!min_tsc || ns_monotone(p->img, min_tsc, max_tsc)) {
      p->first_ns = nta_ns(p, min_tsc);
      p->last_ns = nta_ns(p, max_tsc);
      for (int k = 0; k < R.nsl; k++)
        R.sl[k].d.first_ns = nta_ns(p, R.sl[k].d.min_tsc);
    } else {
      rc = exact_times(&R, imgs, n, sorted);
    }
  }
  for (int k = 0; rc == 0 && k < R.nsl; k++)
    rc = encode(&R, &R.sl[k]);
  /* Only the last few application markers are ever shown. */
  if (p->nmarks > NTA_MARKS_SHOWN) {
    uint64_t skip = p->nmarks - NTA_MARKS_SHOWN, o = 0;
    for (uint64_t i = 0; i < p->nkeep; i++) {
      if (p->keep[i].kind == NTR_KIND_MARK && skip) {
        skip--;
        continue;
      }
      p->keep[o++] = p->keep[i];
    }
    p->nkeep = o;
  }
  /* Slots in the order their pairs became members (the old scan's order). */
  p->md = calloc((size_t)(R.nsl ? R.nsl : 1), sizeof *p->md);
  if (!p->md)
    rc = -1;
  for (int k = 0; k < R.nsl; k++) {
    free(R.sl[k].colls);
    free(R.sl[k].p2p);
    if (p->md)
      p->md[k] = R.sl[k].d;
    else {
      if (!arena)
        free(R.sl[k].d.pk);
      free(R.sl[k].d.boff);
      free(R.sl[k].d.runs);
      free(R.sl[k].d.esc);
      free(R.sl[k].d.p2p);
      free(R.sl[k].d.dev);
    }
  }
  if (p->md) {
    p->nmd = R.nsl;
    qsort(p->md, (size_t)p->nmd, sizeof *p->md, cmp_reg);
  }
  free(R.sl);
  free(R.hash);
  free(R.fh);
  p->lost = p->img->lost;
  p->lrank = p->img->hdr.rank;
  p->attempt = nta_hdr_attempt(&p->img->hdr);
  p->first_path = p->img->path;
  if (rc == 0)
    rc = nta_py_keep(p, imgs, n);
  nta_set_fate(p);
  return rc;
}

void nta_proc_free(struct nta_proc *p) {
  for (int k = 0; k < p->nmd; k++) {
    if (!p->in_arena)
      free(p->md[k].pk);
    free(p->md[k].boff);
    free(p->md[k].runs);
    free(p->md[k].esc);
    free(p->md[k].p2p);
    free(p->md[k].dev);
  }
  free(p->md);
  free(p->keep);
  free(p->fps);
  free(p->gfp);
  free(p->mems);
  nta_py_free(p);
  if (p->own_img) {
    ntt_image_free(p->img);
    free(p->img);
  }
  memset(p, 0, sizeof *p);
}
