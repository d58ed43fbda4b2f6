/* align.c -- from images to processes and communicators.
 *
 * A process may have left several images (a timeout dump, then an exit dump,
 * then its ring): they are merged into one nta_proc, keeping the latest state
 * and the union of records by ring position, so evidence that scrolled out of
 * one snapshot is still found in an earlier one.  Communicators are then
 * aligned across processes by comm id and comm rank: collectives by seq,
 * send/recv by (peer, direction, seq).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

uint64_t nta_rec_ns(const struct nta_proc *p, const struct ntr_record *r) {
  return r->tsc ? ntr_image_ns(p->img, r->tsc) : 0;
}

static int cmp_commit(const void *a, const void *b) {
  const struct ntr_record *x = a, *y = b;
  return x->commit < y->commit ? -1 : x->commit > y->commit;
}

static uint64_t image_max_pos(const struct ntr_image *img) {
  uint64_t m = 0;
  for (uint64_t i = 0; i < img->nrecs; i++)
    if (img->recs[i].commit > m)
      m = img->recs[i].commit;
  return m;
}

/* Is image b a later state of the process than image a? */
static int later(const struct ntr_image *a, const struct ntr_image *b) {
  uint64_t pa = image_max_pos(a), pb = image_max_pos(b);
  if (pa != pb)
    return pb > pa;
  int fa = a->hdr.proc_state != NTR_PROC_RUNNING, fb = b->hdr.proc_state != NTR_PROC_RUNNING;
  if (fa != fb)
    return fb;
  /* Same records and state: the ring holds completion updates made after any
   * dump was taken. */
  return !b->is_dump && a->is_dump;
}

static int same_proc(const struct ntr_image *a, const struct ntr_image *b) {
  return a->hdr.pid == b->hdr.pid && strncmp(a->hdr.host, b->hdr.host, sizeof(a->hdr.host)) == 0;
}

static int fatal_signal(int s) {
  return s == SIGSEGV || s == SIGBUS || s == SIGILL || s == SIGFPE || s == SIGABRT || s == SIGSYS;
}

static void set_fate(struct nta_proc *p) {
  const struct ntr_image *img = p->img;
  uint64_t exit_ns = 0, sig_ns = 0;
  int exit_code = 0, sig = 0;
  for (uint64_t i = 0; i < p->nrecs; i++) {
    const struct ntr_record *r = &p->recs[i];
    if (r->kind == NTR_KIND_EXIT) {
      exit_ns = nta_rec_ns(p, r);
      exit_code = (int)(int64_t)r->aux;
    } else if (r->kind == NTR_KIND_SIGNAL && r->aux != SIGUSR1 && !sig_ns) {
      sig_ns = nta_rec_ns(p, r);
      sig = (int)r->aux;
    } else if (r->kind == NTR_KIND_ASYNC_ERROR && !p->async_ns && r->aux != 0 && r->aux != 7) {
      /* 7 is ncclInProgress: a nonblocking comm at work, not an error */
      p->async_ns = nta_rec_ns(p, r);
      p->async_err = (int)r->aux;
    } else if (r->kind == NTR_KIND_TIMEOUT && !p->timeout_ns) {
      p->timeout_ns = nta_rec_ns(p, r);
    }
  }
  uint64_t trig_ns = img->has_trigger ? ntr_image_ns(img, img->trigger.tsc) : 0;
  p->fate = NTA_UNKNOWN;
  if (img->hdr.proc_state == NTR_PROC_EXITED || exit_ns) {
    p->fate = NTA_EXITED;
    p->exit_code = img->hdr.proc_state == NTR_PROC_EXITED ? img->hdr.exit_code : exit_code;
    p->fate_ns = exit_ns ? exit_ns : (trig_ns ? trig_ns : p->last_ns);
  } else if (img->hdr.proc_state == NTR_PROC_SIGNALED || sig_ns ||
             (img->has_trigger && img->trigger.kind == NTR_TRIG_FATAL_SIGNAL)) {
    p->fate = NTA_SIGNALED;
    p->signo = img->hdr.proc_state == NTR_PROC_SIGNALED && img->hdr.signo ? img->hdr.signo
               : sig ? sig : img->trigger.signo;
    p->fate_ns = sig_ns ? sig_ns : (trig_ns ? trig_ns : p->last_ns);
  } else if (img->has_trigger && (img->trigger.kind == NTR_TRIG_SIGNAL) &&
             img->trigger.signo != SIGUSR1) {
    p->fate = NTA_SIGNALED;
    p->signo = img->trigger.signo;
    p->fate_ns = trig_ns;
  } else if (!img->is_dump) {
    p->fate = img->pid_alive ? NTA_ALIVE : NTA_VANISHED;
    p->fate_ns = p->fate == NTA_VANISHED ? p->last_ns : 0;
  } else if (img->has_trigger && img->trigger.kind == NTR_TRIG_COLLECTED) {
    /* collect turned a dead process's ring into this dump: it vanished */
    p->fate = NTA_VANISHED;
    p->fate_ns = p->last_ns;
  }
  p->fatal = p->fate == NTA_SIGNALED && fatal_signal(p->signo);
}

static int merge_one(struct nta_proc *p, struct ntr_image **imgs, int n) {
  uint64_t total = 0;
  for (int i = 0; i < n; i++) {
    total += imgs[i]->nrecs;
    for (uint32_t c = 0; c < imgs[i]->ncomms; c++)
      total += NTR_COMM_RECENT;
  }
  p->recs = calloc(total ? total : 1, sizeof(*p->recs));
  if (!p->recs)
    return -1;
  uint64_t k = 0;
  for (int i = 0; i < n; i++) {
    for (uint64_t j = 0; j < imgs[i]->nrecs; j++)
      if (imgs[i]->recs[j].commit)
        p->recs[k++] = imgs[i]->recs[j];
    /* recent[] keeps a quiet communicator's history after the main ring
     * wrapped; its copies carry the same positions, so the union dedupes. */
    for (uint32_t c = 0; c < imgs[i]->ncomms; c++)
      for (uint32_t j = 0; j < NTR_COMM_RECENT; j++)
        if (imgs[i]->comms[c].recent[j].commit)
          p->recs[k++] = imgs[i]->comms[c].recent[j];
  }
  qsort(p->recs, k, sizeof(*p->recs), cmp_commit);
  uint64_t w = 0;
  for (uint64_t j = 0; j < k; j++) {
    if (w && p->recs[w - 1].commit == p->recs[j].commit) {
      /* Same record seen twice: keep the copy that knows about completion. */
      if (!p->recs[w - 1].tsc_done && p->recs[j].tsc_done)
        p->recs[w - 1] = p->recs[j];
      continue;
    }
    p->recs[w++] = p->recs[j];
  }
  p->nrecs = w;
  /* The union is all the analysis reads of the records: the images' own
   * copies go now, or every record would be held twice (1,024 ranks x 65,536
   * records is 8 GiB per copy).  Headers and comm states stay. */
  for (int i = 0; i < n; i++) {
    free(imgs[i]->recs);
    imgs[i]->recs = NULL;
    imgs[i]->nrecs = 0;
  }
  struct ntr_record *fit = w < total ? realloc(p->recs, (w ? w : 1) * sizeof(*p->recs)) : NULL;
  if (fit)
    p->recs = fit;
  p->lost = p->img->lost;
  if (w) {
    p->first_ns = nta_rec_ns(p, &p->recs[0]);
    p->last_ns = nta_rec_ns(p, &p->recs[w - 1]);
    /* Records are ordered by position, not time, across threads: scan. */
    for (uint64_t j = 0; j < w; j++) {
      uint64_t t = nta_rec_ns(p, &p->recs[j]);
      if (t && (!p->first_ns || t < p->first_ns))
        p->first_ns = t;
      if (t > p->last_ns)
        p->last_ns = t;
    }
  }
  p->lrank = p->img->hdr.rank;
  p->first_path = p->img->path;
  set_fate(p);
  return 0;
}

int nta_merge_procs(struct nta_job *job) {
  job->procs = calloc((size_t)(job->nimgs ? job->nimgs : 1), sizeof(*job->procs));
  struct ntr_image **grp = calloc((size_t)(job->nimgs ? job->nimgs : 1), sizeof(*grp));
  char *used = calloc((size_t)(job->nimgs ? job->nimgs : 1), 1);
  int rc = 0;
  if (!job->procs || !grp || !used)
    rc = -1;
  job->world_size = -1;
  for (int i = 0; rc == 0 && i < job->nimgs; i++) {
    if (used[i])
      continue;
    int n = 0;
    struct ntr_image *latest = &job->imgs[i];
    for (int j = i; j < job->nimgs; j++)
      if (!used[j] && same_proc(&job->imgs[i], &job->imgs[j])) {
        used[j] = 1;
        grp[n++] = &job->imgs[j];
        if (later(latest, &job->imgs[j]))
          latest = &job->imgs[j];
      }
    struct nta_proc *p = &job->procs[job->nprocs++];
    p->img = latest;
    p->nfiles = n;
    if (merge_one(p, grp, n) != 0)
      rc = -1;
    if (latest->hdr.world_size > job->world_size)
      job->world_size = latest->hdr.world_size;
  }
  free(grp);
  free(used);
  return rc;
}

/* ------------------------------------------------------------ alignment -- */

static int is_init_kind(unsigned k) {
  return k == NTR_KIND_COMM_INIT_RANK || k == NTR_KIND_COMM_INIT_RANK_CONFIG ||
         k == NTR_KIND_COMM_INIT_RANK_SCALABLE || k == NTR_KIND_COMM_INIT_ALL ||
         k == NTR_KIND_COMM_SPLIT || k == NTR_KIND_COMM_SHRINK;
}

#define NTA_MAX_NRANKS (1 << 20)

static struct nta_comm *find_comm(struct nta_job *job, uint64_t id, int *cap) {
  for (int i = 0; i < job->ncomms; i++)
    if (job->comms[i].id == id)
      return &job->comms[i];
  if (job->ncomms == *cap) {
    int nc = *cap ? 2 * *cap : 8;
    struct nta_comm *v = realloc(job->comms, (size_t)nc * sizeof(*v));
    if (!v)
      return NULL;
    job->comms = v;
    *cap = nc;
  }
  struct nta_comm *c = &job->comms[job->ncomms++];
  memset(c, 0, sizeof(*c));
  c->id = id;
  return c;
}

/* Members are collected per comm in a growing array first, indexed later. */
static struct nta_member *find_member(struct nta_comm *c, struct nta_proc *p, int rank, int *cap) {
  for (int i = 0; i < c->nmembers; i++)
    if (c->members[i].proc == p && c->members[i].rank == rank)
      return &c->members[i];
  if (c->nmembers == *cap) {
    int nc = *cap ? 2 * *cap : 8;
    struct nta_member *v = realloc(c->members, (size_t)nc * sizeof(*v));
    if (!v)
      return NULL;
    c->members = v;
    *cap = nc;
  }
  struct nta_member *m = &c->members[c->nmembers++];
  memset(m, 0, sizeof(*m));
  m->proc = p;
  m->rank = rank;
  m->tracking = 1;
  return m;
}

static int cmp_op_seq(const void *a, const void *b) {
  const struct nta_op *x = a, *y = b;
  if (x->rec->seq != y->rec->seq)
    return x->rec->seq < y->rec->seq ? -1 : 1;
  return x->rec->commit < y->rec->commit ? -1 : x->rec->commit > y->rec->commit;
}

static int cmp_p2p(const void *a, const void *b) {
  const struct nta_p2p *x = a, *y = b;
  if (x->peer != y->peer)
    return x->peer < y->peer ? -1 : 1;
  if (x->dir != y->dir)
    return x->dir < y->dir ? -1 : 1;
  if (x->seq != y->seq)
    return x->seq < y->seq ? -1 : 1;
  return x->op.rec->commit < y->op.rec->commit ? -1 : x->op.rec->commit > y->op.rec->commit;
}

static void fill_op(struct nta_op *o, const struct nta_proc *p, const struct ntr_record *r) {
  o->rec = r;
  o->t_ns = nta_rec_ns(p, r);
  o->done_ns = (r->flags & NTR_REC_COMPLETED) && r->tsc_done ? ntr_image_ns(p->img, r->tsc_done) : 0;
  o->op = ntr_kind_fp_op(r->kind);
}

/* Which member of process p a record belongs to; last is a one-entry cache
 * (consecutive records mostly share a communicator). */
struct nta_pm {
  uint64_t id;
  int rank;
  struct nta_member *m;
};

static struct nta_member *pm_find(struct nta_pm *pm, int n, int *last, const struct ntr_record *r) {
  if (*last >= 0 && pm[*last].id == r->comm_id && pm[*last].rank == r->rank)
    return pm[*last].m;
  for (int i = 0; i < n; i++)
    if (pm[i].id == r->comm_id && pm[i].rank == r->rank) {
      *last = i;
      return pm[i].m;
    }
  return NULL;
}

/* Distribute one process's records to its members: collectives by seq,
 * send/recv by (peer, direction, seq), lifecycle times.  One pass to count,
 * one to fill. */
static int proc_records(struct nta_proc *p, struct nta_pm *pm, int n) {
  int last = -1;
  for (uint64_t i = 0; i < p->nrecs; i++) {
    const struct ntr_record *r = &p->recs[i];
    struct nta_member *m = r->comm_id && r->phase != NTR_PHASE_EXIT ? pm_find(pm, n, &last, r) : NULL;
    if (!m)
      continue;
    if (ntr_kind_is_collective(r->kind))
      m->ncolls++;
    else if (ntr_kind_is_p2p(r->kind))
      m->np2p++;
  }
  for (int k = 0; k < n; k++) {
    struct nta_member *m = pm[k].m;
    m->colls = calloc(m->ncolls ? m->ncolls : 1, sizeof(*m->colls));
    m->p2p = calloc(m->np2p ? m->np2p : 1, sizeof(*m->p2p));
    if (!m->colls || !m->p2p)
      return -1;
    m->ncolls = m->np2p = 0;
  }
  for (uint64_t i = 0; i < p->nrecs; i++) {
    const struct ntr_record *r = &p->recs[i];
    struct nta_member *m = r->comm_id ? pm_find(pm, n, &last, r) : NULL;
    if (!m)
      continue;
    uint64_t t = nta_rec_ns(p, r);
    if (t && (!m->first_ns || t < m->first_ns))
      m->first_ns = t;
    if (is_init_kind(r->kind) && r->phase == NTR_PHASE_ENTER && !m->init_enter_ns)
      m->init_enter_ns = t;
    if (r->kind == NTR_KIND_COMM_ABORT && r->phase != NTR_PHASE_EXIT && !m->abort_ns)
      m->abort_ns = t;
    /* ncclInProgress (7) is a nonblocking init still running, not a failure. */
    if (is_init_kind(r->kind) && r->phase == NTR_PHASE_EXIT && r->result > 0 && r->result != 7 &&
        !m->init_fail_ns)
      m->init_fail_ns = t ? t : 1;
    if (r->phase == NTR_PHASE_EXIT)
      continue;
    if (ntr_kind_is_collective(r->kind)) {
      /* Strict-mode refusals are kept: what the application called is the
       * evidence, whether or not NCCL ever saw it. */
      fill_op(&m->colls[m->ncolls++], p, r);
      if (r->flags & NTR_REC_NO_TRACKING)
        m->tracking = 0;
    } else if (ntr_kind_is_p2p(r->kind)) {
      struct nta_p2p *x = &m->p2p[m->np2p++];
      x->peer = r->peer;
      x->dir = r->kind == NTR_KIND_RECV;
      x->seq = r->seq;
      fill_op(&x->op, p, r);
    }
  }
  for (int k = 0; k < n; k++) {
    struct nta_member *m = pm[k].m;
    qsort(m->colls, m->ncolls, sizeof(*m->colls), cmp_op_seq);
    uint64_t w = 0; /* one call per seq: the first one seen */
    for (uint64_t i = 0; i < m->ncolls; i++)
      if (!w || m->colls[w - 1].rec->seq != m->colls[i].rec->seq)
        m->colls[w++] = m->colls[i];
    m->ncolls = w;
    qsort(m->p2p, m->np2p, sizeof(*m->p2p), cmp_p2p);
    if (m->ncolls && m->colls[m->ncolls - 1].rec->seq > m->issued)
      m->issued = m->colls[m->ncolls - 1].rec->seq;
  }
  return 0;
}

static void member_state(struct nta_member *m) {
  const struct ntr_comm_state *cs = m->cs;
  if (cs) {
    if (cs->coll_seq > m->issued)
      m->issued = cs->coll_seq;
    m->enqueued = cs->last_enqueued;
    m->completed = cs->last_completed;
    m->in_init = cs->lifecycle == NTR_COMM_INIT;
    if (m->in_init && !m->init_enter_ns && cs->blocked_since && is_init_kind(cs->blocked_kind))
      m->init_enter_ns = ntr_image_ns(m->proc->img, cs->blocked_since);
    if (cs->lifecycle == NTR_COMM_ABORTED && !m->abort_ns)
      m->abort_ns = m->proc->last_ns;
    /* The EXIT record may have been overwritten; the state still says so. */
    if (cs->lifecycle == NTR_COMM_INIT_FAILED && !m->init_fail_ns)
      m->init_fail_ns = m->proc->last_ns ? m->proc->last_ns : 1;
  } else {
    m->enqueued = m->issued;
    for (uint64_t i = 0; i < m->ncolls; i++)
      if (m->colls[i].done_ns && m->colls[i].rec->seq > m->completed)
        m->completed = m->colls[i].rec->seq;
  }
  /* Completion is monotone per stream; an op whose record says so counts. */
  for (uint64_t i = 0; i < m->ncolls; i++)
    if (m->colls[i].done_ns && m->colls[i].rec->seq > m->completed)
      m->completed = m->colls[i].rec->seq;
  if (!m->init_enter_ns)
    m->init_enter_ns = m->first_ns;
}

/* Register (comm id, rank) of process p as a member; cs may be NULL. */
static int add_member(struct nta_job *job, int *cap, int **mcap, int *mcap_n, struct nta_proc *p, uint64_t id,
                      int rank, int nranks, const struct ntr_comm_state *cs) {
  struct nta_comm *c = find_comm(job, id, cap);
  if (!c)
    return -1;
  if (*cap > *mcap_n) {
    int *v = realloc(*mcap, (size_t)*cap * sizeof(*v));
    if (!v)
      return -1;
    for (int k = *mcap_n; k < *cap; k++)
      v[k] = 0;
    *mcap = v;
    *mcap_n = *cap;
  }
  struct nta_member *m = find_member(c, p, rank, &(*mcap)[c - job->comms]);
  if (!m)
    return -1;
  if (cs) {
    m->cs = cs;
    if (cs->parent_id)
      c->parent = cs->parent_id;
  }
  if (nranks > c->nranks && nranks <= NTA_MAX_NRANKS)
    c->nranks = nranks;
  return 0;
}

int nta_align(struct nta_job *job) {
  int cap = 0, mcap_n = 0, rc = 0;
  int *mcap = NULL;
  for (int pi = 0; pi < job->nprocs && rc == 0; pi++) {
    struct nta_proc *p = &job->procs[pi];
    /* Members from the comm table, then from records (a comm whose slot was
     * not available still left records). */
    for (uint32_t ci = 0; ci < p->img->ncomms && rc == 0; ci++) {
      const struct ntr_comm_state *cs = &p->img->comms[ci];
      if (cs->comm_id)
        rc = add_member(job, &cap, &mcap, &mcap_n, p, cs->comm_id, cs->rank, cs->nranks, cs);
    }
    uint64_t last_id = 0;
    int last_rank = -2;
    for (uint64_t i = 0; i < p->nrecs && rc == 0; i++) {
      const struct ntr_record *r = &p->recs[i];
      if (!r->comm_id || r->rank < 0 || r->kind >= NTR_KIND_FIRST_TRACER_EVENT ||
          (r->comm_id == last_id && r->rank == last_rank))
        continue;
      last_id = r->comm_id;
      last_rank = r->rank;
      rc = add_member(job, &cap, &mcap, &mcap_n, p, r->comm_id, r->rank, r->nranks, NULL);
    }
  }
  free(mcap);
  if (rc != 0)
    return -1;
  /* Members no longer move: hand each process its members, then its records. */
  int nm = 0;
  for (int ci = 0; ci < job->ncomms; ci++)
    nm += job->comms[ci].nmembers;
  struct nta_pm *pm = calloc((size_t)(nm ? nm : 1), sizeof(*pm));
  if (!pm)
    return -1;
  for (int pi = 0; pi < job->nprocs && rc == 0; pi++) {
    int n = 0;
    for (int ci = 0; ci < job->ncomms; ci++)
      for (int i = 0; i < job->comms[ci].nmembers; i++)
        if (job->comms[ci].members[i].proc == &job->procs[pi]) {
          pm[n].id = job->comms[ci].id;
          pm[n].rank = job->comms[ci].members[i].rank;
          pm[n++].m = &job->comms[ci].members[i];
        }
    rc = proc_records(&job->procs[pi], pm, n);
  }
  free(pm);
  if (rc != 0)
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
    c->by_rank = calloc((size_t)(maxr ? maxr : 1), sizeof(*c->by_rank));
    if (!c->by_rank)
      return -1;
    for (int i = 0; i < c->nmembers; i++) {
      int r = c->members[i].rank;
      /* Two processes claiming one rank (a restarted rank): the later wins. */
      if (r >= 0 && r < maxr &&
          (!c->by_rank[r] || c->by_rank[r]->proc->last_ns < c->members[i].proc->last_ns))
        c->by_rank[r] = &c->members[i];
    }
  }
  return 0;
}

const struct nta_member *nta_member_of(const struct nta_comm *c, const struct nta_proc *p) {
  for (int i = 0; i < c->nmembers; i++)
    if (c->members[i].proc == p)
      return &c->members[i];
  return NULL;
}
