/* align.c -- from reduced processes to communicators.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 *
 * Communicators are aligned across processes by comm id and comm rank, in
 * the order the evidence names them (process by process: its comm table,
 * then its records' (comm, rank) pairs by position), so the reports list
 * communicators and members the same way whatever the input order.  Each
 * member's calls are the process's reduced data for that pair (reduce.c).
 * Fingerprints are then given job-wide ids, so detect.c compares calls of
 * different processes by one integer.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

static int is_init_kind(unsigned k) {
  return k == NTR_KIND_COMM_INIT_RANK || k == NTR_KIND_COMM_INIT_RANK_CONFIG ||
         k == NTR_KIND_COMM_INIT_RANK_SCALABLE || k == NTR_KIND_COMM_INIT_ALL ||
         k == NTR_KIND_COMM_SPLIT || k == NTR_KIND_COMM_SHRINK;
}

/* ------------------------------------------------------------ alignment -- */

/* (comm id, process, rank) -> member index, open addressing. */
struct keymap {
  uint64_t *k;    /* 3 words per entry */
  int *v;
  uint32_t cap, n;
};

static uint64_t mix3(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full ^ c * 0x165667b19e3779f9ull;
  x ^= x >> 31;
  x *= 0xff51afd7ed558ccdull;
  return x ^ (x >> 29);
}

static int keymap_grow(struct keymap *m) {
  uint32_t cap = m->cap ? 2 * m->cap : 256;
  uint64_t *k = malloc((size_t)cap * 3 * sizeof *k);
  int *v = malloc((size_t)cap * sizeof *v);
  if (!k || !v) {
    free(k);
    free(v);
    return -1;
  }
  for (uint32_t i = 0; i < cap; i++)
    v[i] = -1;
  for (uint32_t j = 0; j < m->cap; j++) {
    if (m->v[j] < 0)
      continue;
    uint32_t i = (uint32_t)mix3(m->k[3 * j], m->k[3 * j + 1], m->k[3 * j + 2]) & (cap - 1);
    while (v[i] >= 0)
      i = (i + 1) & (cap - 1);
    memcpy(&k[3 * i], &m->k[3 * j], 3 * sizeof *k);
    v[i] = m->v[j];
  }
  free(m->k);
  free(m->v);
  m->k = k;
  m->v = v;
  m->cap = cap;
  return 0;
}

/* The slot of key (a, b, c): *v < 0 when new (then fill it). */
static int *keymap_slot(struct keymap *m, uint64_t a, uint64_t b, uint64_t c) {
  if (2 * (m->n + 1) > m->cap && keymap_grow(m))
    return NULL;
  uint32_t i = (uint32_t)mix3(a, b, c) & (m->cap - 1);
  while (m->v[i] >= 0) {
    if (m->k[3 * i] == a && m->k[3 * i + 1] == b && m->k[3 * i + 2] == c)
      return &m->v[i];
    i = (i + 1) & (m->cap - 1);
  }
  m->k[3 * i] = a;
  m->k[3 * i + 1] = b;
  m->k[3 * i + 2] = c;
  m->n++;
  return &m->v[i];
}

static void keymap_free(struct keymap *m) {
  free(m->k);
  free(m->v);
  memset(m, 0, sizeof *m);
}

struct builder {
  struct keymap comms, members; /* comm id -> comm index; (comm index, proc index, rank) -> member index */
  int *mcap;                    /* per comm: members capacity */
  int cap;
};

static struct nta_comm *find_comm(struct nta_job *job, struct builder *b, uint64_t id) {
  int *slot = keymap_slot(&b->comms, id, 0, 0);
  if (!slot)
    return NULL;
  if (*slot >= 0)
    return &job->comms[*slot];
  if (job->ncomms == b->cap) {
    int nc = b->cap ? 2 * b->cap : 8;
    struct nta_comm *v = realloc(job->comms, (size_t)nc * sizeof *v);
    int *mc = realloc(b->mcap, (size_t)nc * sizeof *mc);
    if (mc)
      b->mcap = mc;
    if (v)
      job->comms = v;
    if (!v || !mc)
      return NULL;
    b->cap = nc;
  }
  b->mcap[job->ncomms] = 0;
  struct nta_comm *c = &job->comms[job->ncomms];
  memset(c, 0, sizeof(*c));
  c->id = id;
  *slot = job->ncomms++;
  return c;
}

static const struct nta_mdata empty_md = {.tracking = 1};

/* Register (comm id, rank) of process pi as a member; cs may be NULL. */
static int add_member(struct nta_job *job, struct builder *b, int pi, uint64_t id, int rank, int nranks,
                      const struct ntr_comm_state *cs) {
  struct nta_comm *c = find_comm(job, b, id);
  if (!c)
    return -1;
  int ci = (int)(c - job->comms);
  int *slot = keymap_slot(&b->members, (uint64_t)ci, (uint64_t)pi, (uint64_t)(uint32_t)rank);
  if (!slot)
    return -1;
  if (*slot < 0) {
    if (c->nmembers == b->mcap[ci]) {
      int nc = b->mcap[ci] ? 2 * b->mcap[ci] : 8;
      struct nta_member *v = realloc(c->members, (size_t)nc * sizeof *v);
      if (!v)
        return -1;
      c->members = v;
      b->mcap[ci] = nc;
    }
    struct nta_member *m = &c->members[c->nmembers];
    memset(m, 0, sizeof(*m));
    m->proc = &job->procs[pi];
    m->rank = rank;
    m->d = &empty_md;
    *slot = c->nmembers++;
  }
  struct nta_member *m = &c->members[*slot];
  if (cs) {
    m->cs = cs;
    if (cs->parent_id)
      c->parent = cs->parent_id;
  }
  if (nranks > c->nranks && nranks <= NTA_MAX_NRANKS)
    c->nranks = nranks;
  return 0;
}

/* When m's communicator failed: its first async error (not ncclInProgress)
 * or its ncclCommAbort, 0 never.  What completes after that is the failure
 * draining the stream (NCCL, and the emulator, end a broken collective's
 * kernel), not the collective finishing. */
static uint64_t comm_fail_ns(const struct nta_member *m) {
  uint64_t t = m->d->abort_ns;
  for (uint64_t j = 0; j < m->proc->nkeep; j++) {
    const struct ntr_record *r = &m->proc->keep[j];
    if (r->kind == NTR_KIND_ASYNC_ERROR && r->comm_id == m->comm->id && r->aux != 0 && r->aux != 7) {
      uint64_t e = nta_ns(m->proc, r->tsc);
      if (e && (!t || e < t))
        t = e;
      break;
    }
  }
  return t;
}

static void member_state(struct nta_member *m) {
  const struct nta_mdata *d = m->d;
  uint64_t fail = comm_fail_ns(m);
  m->ncolls = d->ncolls;
  m->np2p = d->np2p;
  m->tracking = d->tracking;
  m->first_ns = d->first_ns;
  m->init_enter_ns = d->init_enter_ns;
  m->init_fail_ns = d->init_fail_ns;
  m->abort_ns = d->abort_ns;
  m->issued = d->ncolls ? nta_coll_seq(m, d->ncolls - 1) : 0;
  /* The highest seq whose completion a record saw (seqs grow with index):
   * from the last block back, calls packed as completed first. */
  uint64_t done_seq = 0;
  for (uint64_t b = (d->ncolls + NTA_BLK - 1) / NTA_BLK; b-- > 0 && !done_seq;) {
    uint32_t f[NTA_BLK], dd[NTA_BLK];
    if (nta_blk_none_done(d, b))
      continue; /* a hung job's tail: skipped by its header */
    unsigned n = nta_blk_decode(d, b, NULL, f, NULL, dd);
    for (unsigned j = n; j-- > 0;) {
      if (!dd[j])
        continue;
      struct nta_op o;
      nta_coll_at(m, b * NTA_BLK + j, &o);
      if (o.done_ns && (!fail || o.done_ns < fail)) {
        done_seq = o.seq;
        break;
      }
    }
  }
  const struct ntr_comm_state *cs = m->cs;
  if (cs) {
    if (cs->coll_seq > m->issued)
      m->issued = cs->coll_seq;
    m->enqueued = cs->last_enqueued;
    m->completed = cs->last_completed;
    /* A failed comm's copy counts the drained calls too: where its records
     * still hold that call, they say when it completed. */
    struct nta_op o;
    if (fail && m->completed && nta_coll_find(m, m->completed, &o) && o.done_ns >= fail)
      m->completed = 0;
    m->in_init = cs->lifecycle == NTR_COMM_INIT;
    if (m->in_init && !m->init_enter_ns && cs->blocked_since && is_init_kind(cs->blocked_kind))
      m->init_enter_ns = ntt_image_ns(m->proc->img, cs->blocked_since);
    if (cs->lifecycle == NTR_COMM_ABORTED && !m->abort_ns)
      m->abort_ns = m->proc->last_ns;
    /* The EXIT record may have been overwritten; the state still says so. */
    if (cs->lifecycle == NTR_COMM_INIT_FAILED && !m->init_fail_ns)
      m->init_fail_ns = m->proc->last_ns ? m->proc->last_ns : 1;
  } else {
    m->enqueued = m->issued;
  }
  /* Completion is monotone per stream; an op whose record says so counts. */
  if (done_seq > m->completed)
    m->completed = done_seq;
  if (!m->init_enter_ns)
    m->init_enter_ns = m->first_ns;
}

static int cmp_mdkey(const void *a, const void *b) {
  const struct nta_mdata *x = *(const struct nta_mdata *const *)a, *y = *(const struct nta_mdata *const *)b;
  if (x->comm_id != y->comm_id)
    return x->comm_id < y->comm_id ? -1 : 1;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static const struct nta_mdata *md_find(const struct nta_mdata *const *idx, int n, uint64_t id, int rank) {
  int lo = 0, hi = n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    const struct nta_mdata *x = idx[mid];
    if (x->comm_id < id || (x->comm_id == id && x->rank < rank))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && idx[lo]->comm_id == id && idx[lo]->rank == rank ? idx[lo] : NULL;
}

static int cmp_rank(const void *a, const void *b) {
  const struct nta_member *x = *(struct nta_member *const *)a, *y = *(struct nta_member *const *)b;
  if (x->rank != y->rank)
    return x->rank < y->rank ? -1 : 1;
  return x < y ? -1 : x > y; /* member order within a rank */
}

/* Job-wide ids of fingerprints (the fields a mismatch compares). */
static int fingerprint_ids(struct nta_job *job) {
  struct keymap ids = {0};
  struct keymap ext = {0}; /* second half of the key: (id of the first half, redop/peer) */
  int next = 0, rc = 0;
  for (int pi = 0; pi < job->nprocs && rc == 0; pi++) {
    struct nta_proc *p = &job->procs[pi];
    p->gfp = malloc((p->nfps ? p->nfps : 1) * sizeof *p->gfp);
    if (!p->gfp) {
      rc = -1;
      break;
    }
    for (uint32_t i = 0; i < p->nfps && rc == 0; i++) {
      const struct nta_fp *f = &p->fps[i];
      int *a = keymap_slot(&ids, f->count, (uint64_t)f->op << 8 | f->dtype, 0);
      if (!a) {
        rc = -1;
        break;
      }
      if (*a < 0)
        *a = next++;
      int *g = keymap_slot(&ext, (uint64_t)*a, (uint64_t)(uint32_t)f->redop, (uint64_t)(uint32_t)f->peer);
      if (!g) {
        rc = -1;
        break;
      }
      if (*g < 0)
        *g = next++;
      p->gfp[i] = (uint32_t)*g;
    }
  }
  keymap_free(&ids);
  keymap_free(&ext);
  return rc;
}

/* Evidence whose completions may lag the op records: the comm table's
 * completions and the completed flags are what the watchdog saw by its
 * last poll (every 15 ms, docs/dump-format.md), while issues are exact.
 * So in the ring of a process that died without dumping (SIGKILL, the OOM
 * killer), and in a signal's dump, whose final watchdog pass is bounded
 * and can be missed under load.  A timeout dump (the watchdog's own), an
 * exit dump (after the last pass) and a live ring are taken as they are. */
static int dead_ring(const struct nta_proc *p) {
  const struct ntt_image *img = p->img;
  int ring = !img->is_dump || (img->has_trigger && img->trigger.kind == NTR_TRIG_COLLECTED);
  return ring && p->fate != NTA_ALIVE && p->fate != NTA_EXECED;
}

static int view_lags(const struct nta_proc *p) {
  const struct ntt_image *img = p->img;
  int sig = img->is_dump && img->has_trigger &&
            (img->trigger.kind == NTR_TRIG_SIGNAL || img->trigger.kind == NTR_TRIG_FATAL_SIGNAL);
  return dead_ring(p) || sig;
}

#define NTA_LAG_NS 500000000ull /* polls every 15 ms; a signal's final pass waits up to 200 ms */

/* Was m's call completed + 1 issued long enough before its evidence was
 * taken (the dump's trigger, else its last record) that the watchdog had
 * polled it since: then its pending state is what the watchdog saw. */
static int polled_since(const struct nta_member *m) {
  struct nta_op o;
  const struct nta_proc *p = m->proc;
  uint64_t snap = p->img->has_trigger ? ntt_image_ns(p->img, p->img->trigger.tsc) : 0;
  if (!snap)
    snap = p->last_ns;
  return nta_coll_find(m, m->completed + 1, &o) && o.t_ns && o.t_ns + NTA_LAG_NS < snap;
}

#define NTA_LAG_WALK 4096 /* seqs compared per member: a 15 ms lag is far fewer */

/* The highest seq in (m->completed, upto] up to which m's calls have the
 * fingerprints of peer's, which completed them: a collective the peer
 * completed with the same call needed m too.  A differing call (a
 * root-only Broadcast against AllReduces) completes alone, so proves
 * nothing past it. */
static uint64_t joined_upto(const struct nta_member *m, const struct nta_member *peer, uint64_t upto) {
  uint64_t ok = m->completed;
  for (uint64_t s = m->completed + 1; s <= upto && s <= m->completed + NTA_LAG_WALK; s++) {
    struct nta_op a, b;
    if (!nta_coll_find(m, s, &a) || !nta_coll_find(peer, s, &b) || nta_fp_diff(&a, &b))
      break;
    ok = s;
  }
  return ok;
}

/* A collective its peers completed needed every rank: a member whose view
 * lags took part in each one it issued up to the peers' highest completed
 * seq, whatever its last poll saw.  Past that, its own evidence cannot
 * tell, unless completed + 1 completed nowhere (lag_sure): a member never
 * issued it, or one whose view does not lag never completed it; or the
 * member's own watchdog had long polled it pending. */
static void lag_fill(struct nta_comm *c) {
  const struct nta_member *top = NULL, *top2 = NULL;
  uint64_t best = 0, second = 0, exact_lo = UINT64_MAX, issued_lo = UINT64_MAX;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (m->completed > best) {
      second = best;
      top2 = top;
      best = m->completed;
      top = m;
    } else if (m->completed > second) {
      second = m->completed;
      top2 = m;
    }
    if (m->in_init)
      continue;
    if (m->issued < issued_lo)
      issued_lo = m->issued;
    if (!view_lags(m->proc) && m->tracking && m->completed < exact_lo)
      exact_lo = m->completed;
  }
  for (int i = 0; i < c->nranked; i++) {
    struct nta_member *m = c->ranked[i];
    m->lag_ring = dead_ring(m->proc) && m->ncolls;
    /* without completion tracking (an op recorded without its event) what
     * it completed is no better known than in a lagging view */
    if ((m->tracking && !view_lags(m->proc)) || m->issued <= m->completed)
      continue;
    const struct nta_member *peer = m == top ? top2 : top;
    uint64_t peers = m == top ? second : best;
    uint64_t e = peers < m->issued ? peers : m->issued;
    if (peer && e > m->completed)
      m->completed = joined_upto(m, peer, e);
    if (m->enqueued < m->completed)
      m->enqueued = m->completed;
    m->lags = m->issued > m->completed;
    m->lag_sure = m->lags && (issued_lo <= m->completed || exact_lo <= m->completed || polled_since(m));
  }
}

int nta_align(struct nta_job *job) {
  struct builder b;
  memset(&b, 0, sizeof b);
  int rc = 0;
  for (int pi = 0; pi < job->nprocs && rc == 0; pi++) {
    struct nta_proc *p = &job->procs[pi];
    /* Members from the comm table, then from records (a comm whose slot was
     * not available still left records). */
    for (uint32_t ci = 0; ci < p->img->ncomms && rc == 0; ci++) {
      const struct ntr_comm_state *cs = &p->img->comms[ci];
      if (cs->comm_id)
        rc = add_member(job, &b, pi, cs->comm_id, cs->rank, cs->nranks, cs);
    }
    for (int k = 0; k < p->nmd && rc == 0 && p->md[k].is_member; k++)
      rc = add_member(job, &b, pi, p->md[k].comm_id, p->md[k].rank, p->md[k].reg_nranks, NULL);
  }
  keymap_free(&b.comms);
  keymap_free(&b.members);
  free(b.mcap);
  if (rc != 0)
    return -1;
  /* Members no longer move: hand each process its members, and each member
   * its process's data for its (comm, rank). */
  for (int pi = 0; pi < job->nprocs; pi++)
    job->procs[pi].nmems = 0;
  for (int ci = 0; ci < job->ncomms; ci++)
    for (int i = 0; i < job->comms[ci].nmembers; i++) {
      job->comms[ci].members[i].comm = &job->comms[ci];
      job->comms[ci].members[i].proc->nmems++;
    }
  for (int pi = 0; pi < job->nprocs; pi++) {
    struct nta_proc *p = &job->procs[pi];
    free(p->mems);
    p->mems = calloc((size_t)(p->nmems ? p->nmems : 1), sizeof *p->mems);
    if (!p->mems)
      return -1;
    p->nmems = 0;
  }
  for (int ci = 0; ci < job->ncomms; ci++)
    for (int i = 0; i < job->comms[ci].nmembers; i++) {
      struct nta_member *m = &job->comms[ci].members[i];
      m->proc->mems[m->proc->nmems++] = m;
    }
  for (int pi = 0; pi < job->nprocs; pi++) {
    struct nta_proc *p = &job->procs[pi];
    const struct nta_mdata **ix = malloc((size_t)(p->nmd ? p->nmd : 1) * sizeof *ix);
    if (!ix)
      return -1;
    for (int k = 0; k < p->nmd; k++)
      ix[k] = &p->md[k];
    qsort(ix, (size_t)p->nmd, sizeof *ix, cmp_mdkey);
    for (int i = 0; i < p->nmems; i++) {
      const struct nta_mdata *d = md_find(ix, p->nmd, p->mems[i]->comm->id, p->mems[i]->rank);
      if (d)
        p->mems[i]->d = d;
    }
    free(ix);
  }
  if (fingerprint_ids(job))
    return -1;
  for (int ci = 0; ci < job->ncomms; ci++) {
    struct nta_comm *c = &job->comms[ci];
    int maxr = c->nranks;
    for (int i = 0; i < c->nmembers; i++) {
      member_state(&c->members[i]);
      if (c->members[i].rank + 1 > maxr && c->members[i].rank < NTA_MAX_NRANKS)
        maxr = c->members[i].rank + 1;
      uint64_t f = c->members[i].first_ns;
      if (f && (!c->first_ns || f < c->first_ns))
        c->first_ns = f;
    }
    c->nranks = maxr;
    /* One member per rank: two processes claiming one rank (a restarted
     * rank): the later wins, the first on a tie. */
    c->ranked = calloc((size_t)(c->nmembers ? c->nmembers : 1), sizeof(*c->ranked));
    if (!c->ranked)
      return -1;
    int n = 0;
    for (int i = 0; i < c->nmembers; i++)
      if (c->members[i].rank >= 0 && c->members[i].rank < maxr)
        c->ranked[n++] = &c->members[i];
    qsort(c->ranked, (size_t)n, sizeof *c->ranked, cmp_rank);
    int w = 0;
    for (int i = 0; i < n; i++) {
      if (w && c->ranked[w - 1]->rank == c->ranked[i]->rank) {
        if (c->ranked[w - 1]->proc->last_ns < c->ranked[i]->proc->last_ns)
          c->ranked[w - 1] = c->ranked[i];
        continue;
      }
      c->ranked[w++] = c->ranked[i];
    }
    c->nranked = w;
    lag_fill(c);
  }
  return 0;
}

struct nta_member *nta_rank(const struct nta_comm *c, int r) {
  int lo = 0, hi = c->nranked;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (c->ranked[mid]->rank < r)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < c->nranked && c->ranked[lo]->rank == r ? c->ranked[lo] : NULL;
}

const struct nta_member *nta_member_of(const struct nta_comm *c, const struct nta_proc *p) {
  /* A process's members in comm order; the first of c's is the one wanted. */
  for (int i = 0; i < p->nmems; i++)
    if (p->mems[i]->comm == c)
      return p->mems[i];
  return NULL;
}
