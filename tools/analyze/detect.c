/* detect.c -- findings on aligned communicators: every candidate cause with
 * the time it happened.  Nothing here decides; verdict.c weighs candidates by
 * time and priority.  Each detector reads only the aligned view (align.c).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"


struct nta_cand *nta_cand_add(struct nta_job *job, enum nta_class cls, uint64_t t_ns) {
  if (job->ncands == job->cap_cands) {
    int cap = job->cap_cands ? 2 * job->cap_cands : 16;
    struct nta_cand *v = realloc(job->cands, (size_t)cap * sizeof(*v));
    if (!v)
      return NULL;
    job->cands = v;
    job->cap_cands = cap;
  }
  struct nta_cand *c = &job->cands[job->ncands++];
  memset(c, 0, sizeof(*c));
  c->cls = cls;
  c->t_ns = t_ns;
  return c;
}

void nta_event_add(struct nta_job *job, uint64_t t_ns, int rank, const char *kind, const char *fmt, ...) {
  if (job->nev == job->cap_ev) {
    int cap = job->cap_ev ? 2 * job->cap_ev : 64;
    struct nta_event *v = realloc(job->ev, (size_t)cap * sizeof(*v));
    if (!v)
      return;
    job->ev = v;
    job->cap_ev = cap;
  }
  struct nta_event *e = &job->ev[job->nev++];
  e->t_ns = t_ns;
  e->rank = rank;
  e->order = job->nev - 1;
  snprintf(e->kind, sizeof(e->kind), "%s", kind);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->text, sizeof(e->text), fmt, ap);
  va_end(ap);
}

void nta_describe_op(const struct nta_op *o, char *buf, size_t len) {
  const struct ntr_record *r = o->rec;
  const char *name = ntr_kind_name(o->op);
  if (ntr_kind_is_p2p(r->kind)) {
    snprintf(buf, len, "%s(count=%llu, %s, peer=%d)", name, (unsigned long long)r->count,
             ntr_dtype_name(r->dtype), r->peer);
  } else if (r->redop >= 0 && r->peer >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, %s, root=%d)", name, (unsigned long long)r->count,
             ntr_dtype_name(r->dtype), ntr_redop_name(r->redop), r->peer);
  } else if (r->redop >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, %s)", name, (unsigned long long)r->count,
             ntr_dtype_name(r->dtype), ntr_redop_name(r->redop));
  } else if (r->peer >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, root=%d)", name, (unsigned long long)r->count,
             ntr_dtype_name(r->dtype), r->peer);
  } else {
    snprintf(buf, len, "%s(count=%llu, %s)", name, (unsigned long long)r->count, ntr_dtype_name(r->dtype));
  }
}

static void rank_list(const int *r, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < n && o + 12 < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", r[i]);
}

static const struct nta_op *op_at(const struct nta_member *m, uint64_t seq) {
  uint64_t lo = 0, hi = m->ncolls;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (m->colls[mid].rec->seq < seq)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < m->ncolls && m->colls[lo].rec->seq == seq ? &m->colls[lo] : NULL;
}

/* Fingerprint fields, in the order a report names the first that differs. */
static const char *fp_diff(const struct nta_op *a, const struct nta_op *b) {
  if (a->op != b->op)
    return "op";
  if (a->rec->count != b->rec->count)
    return "count";
  if (a->rec->dtype != b->rec->dtype)
    return "dtype";
  if (a->rec->redop != b->rec->redop)
    return "redop";
  if (a->rec->peer != b->rec->peer)
    return "root";
  return NULL;
}

static const char *plural(int n) {
  return n == 1 ? "rank" : "ranks";
}

/* ------------------------------------------------- collective mismatch -- */

/* The smallest collective seq above s that some member recorded; *more = 0
 * when there is none.  Seqs come from hostile files (a ring is not
 * checksummed): walk the seqs present, never the numeric span between them. */
static uint64_t next_seq(const struct nta_comm *c, uint64_t s, int *more) {
  uint64_t best = 0;
  *more = 0;
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    uint64_t lo = 0, hi = m->ncolls;
    while (lo < hi) {
      uint64_t mid = (lo + hi) / 2;
      if (m->colls[mid].rec->seq <= s)
        lo = mid + 1;
      else
        hi = mid;
    }
    if (lo < m->ncolls && (!*more || m->colls[lo].rec->seq < best)) {
      best = m->colls[lo].rec->seq;
      *more = 1;
    }
  }
  return best;
}

static void detect_mismatch(struct nta_job *job, const struct nta_comm *c) {
  /* Only the span of seqs some record covers (a wrapped ring starts late). */
  uint64_t maxseq = 0, minseq = UINT64_MAX;
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    if (!m->ncolls)
      continue;
    if (m->colls[m->ncolls - 1].rec->seq > maxseq)
      maxseq = m->colls[m->ncolls - 1].rec->seq;
    if (m->colls[0].rec->seq < minseq)
      minseq = m->colls[0].rec->seq;
  }
  const struct nta_op **ops = calloc((size_t)c->nranks, sizeof(*ops));
  int *grp = calloc((size_t)c->nranks, sizeof(*grp));
  int *gsize = calloc((size_t)c->nranks, sizeof(*gsize));
  if (!ops || !grp || !gsize)
    goto out;
  int more = maxseq != 0;
  for (uint64_t s = minseq; more && s <= maxseq; s = next_seq(c, s, &more)) {
    int n = 0, ng = 0;
    for (int r = 0; r < c->nranks; r++) {
      ops[r] = c->by_rank[r] ? op_at(c->by_rank[r], s) : NULL;
      grp[r] = -1;
      if (ops[r])
        n++;
    }
    if (n < 2)
      continue;
    /* Group ranks by identical fingerprint; group g is led by rank lead[g]. */
    int lead[64];
    for (int r = 0; r < c->nranks; r++) {
      if (!ops[r])
        continue;
      int g = 0;
      for (; g < ng; g++)
        if (!fp_diff(ops[lead[g]], ops[r]))
          break;
      if (g == ng) {
        if (ng == 64)
          break;
        lead[ng] = r;
        gsize[ng++] = 0;
      }
      grp[r] = g;
      gsize[g]++;
    }
    if (ng < 2)
      continue;
    /* Majority decides the culprits; without a strict majority (two ranks,
     * or a tie) every disagreeing rank is named. */
    int maj = 0, tie = 0;
    for (int g = 1; g < ng; g++)
      if (gsize[g] > gsize[maj])
        maj = g;
    for (int g = 0; g < ng; g++)
      if (g != maj && gsize[g] == gsize[maj])
        tie = 1;
    int culprit = -1;
    for (int r = 0; r < c->nranks && culprit < 0; r++)
      if (grp[r] >= 0 && grp[r] != maj)
        culprit = r;
    uint64_t t = 0;
    for (int r = 0; r < c->nranks; r++)
      if (ops[r] && ops[r]->t_ns > t)
        t = ops[r]->t_ns;
    struct nta_cand *k = nta_cand_add(job, NTA_COLL_MISMATCH, t);
    if (!k)
      break;
    k->comm = c;
    k->seq = s;
    snprintf(k->field, sizeof(k->field), "%s", fp_diff(ops[lead[maj]], ops[culprit]));
    for (int r = 0; r < c->nranks && k->nranks < NTA_MAX_VRANKS; r++)
      if (grp[r] >= 0 && (tie || grp[r] != maj))
        k->ranks[k->nranks++] = r;
    char hex[17], a[160], b[160], ra[256], rb[256];
    nta_comm_hex(c->id, hex);
    int other[NTA_MAX_VRANKS] = {0}, no = 0, cul[NTA_MAX_VRANKS] = {0}, nc = 0;
    int cg = grp[culprit];
    for (int r = 0; r < c->nranks; r++) {
      if (grp[r] == cg && nc < NTA_MAX_VRANKS)
        cul[nc++] = r;
      else if (grp[r] == maj && no < NTA_MAX_VRANKS)
        other[no++] = r;
    }
    nta_describe_op(ops[culprit], a, sizeof(a));
    nta_describe_op(ops[lead[maj]], b, sizeof(b));
    rank_list(cul, nc, ra, sizeof(ra));
    rank_list(other, no, rb, sizeof(rb));
    int in_group = (ops[culprit]->rec->flags | ops[lead[maj]]->rec->flags) & NTR_REC_IN_GROUP;
    snprintf(k->summary, sizeof(k->summary),
             "collective mismatch on comm %s seq %llu%s: %s %s called %s while %s %s called %s%s",
             hex, (unsigned long long)s, in_group ? " (inside a group)" : "", plural(nc), ra, a,
             plural(no), rb, b, ng > 2 ? " (and more variants)" : "");
    for (int r = 0; r < c->nranks; r++)
      if (ops[r]) {
        char d[160];
        nta_describe_op(ops[r], d, sizeof(d));
        nta_event_add(job, ops[r]->t_ns, c->by_rank[r]->proc->lrank, "call",
                      "comm %.8s rank %d seq %llu: %s%s", hex, r, (unsigned long long)s, d,
                      ops[r]->rec->flags & NTR_REC_STRICT_REFUSED ? " (refused by strict mode)"
                      : ops[r]->done_ns                           ? " (completed)"
                                                                  : " (never completed)");
      }
    break; /* the first differing seq is the one that matters */
  }
out:
  free(ops);
  free(grp);
  free(gsize);
}

/* ------------------------------------------------------ p2p mismatch -- */

/* p2p[] is sorted by (peer, dir, seq) (align.c): binary search. */
static const struct nta_p2p *p2p_find(const struct nta_member *m, int peer, int dir, uint64_t seq) {
  uint64_t lo = 0, hi = m->np2p;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    const struct nta_p2p *x = &m->p2p[mid];
    int less = x->peer != peer ? x->peer < peer : x->dir != dir ? x->dir < dir : x->seq < seq;
    if (less)
      lo = mid + 1;
    else
      hi = mid;
  }
  const struct nta_p2p *x = lo < m->np2p ? &m->p2p[lo] : NULL;
  return x && x->peer == peer && x->dir == dir && x->seq == seq ? x : NULL;
}

/* Seq of the last collective member m issued before time t, 0 none
 * (colls[] is sorted by seq, which is issue order). */
static uint64_t coll_seq_before(const struct nta_member *m, uint64_t t) {
  uint64_t lo = 0, hi = m->ncolls;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (m->colls[mid].t_ns < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? m->colls[lo - 1].rec->seq : 0;
}

/* x (a call of rank self) has no counterpart on its peer: the peer never
 * posted the other half with the same per-pair seq.
 * - A receive that completed got its data: it was matched.
 * - A send that is still pending is unmatched if the peer has no receive.
 * - A send that completed proves nothing by itself: NCCL completes a send
 *   that fits into the peer's connection buffer before the receive is
 *   posted (eager, NVIDIA/nccl#544), so the receive may simply come later.
 *   It is unmatched only once the peer went past the point where it should
 *   have received: the peer issued more collectives on this communicator
 *   than the sender had when it sent (collectives order every rank's
 *   program the same way).  Without that evidence it is not counted. */
static int p2p_unmatched(const struct nta_comm *c, const struct nta_p2p *x, int self) {
  const struct nta_member *peer = c->by_rank[x->peer];
  if (p2p_find(peer, self, !x->dir, x->seq))
    return 0;
  if (!x->op.done_ns)
    return 1;
  if (x->dir == 1)
    return 0;
  return peer->issued > coll_seq_before(c->by_rank[self], x->op.t_ns);
}

/* The wrong peer: rank a's send to b has no receive on b, while another rank
 * d waits to receive from a something a never sent it.  Both a and d are
 * named (either side may have picked the wrong peer).  Records lost to a
 * wrapped ring could fake an unmatched call: such processes are skipped. */
static void detect_p2p_peer(struct nta_job *job, const struct nta_comm *c) {
  for (int a = 0; a < c->nranks; a++) {
    const struct nta_member *ma = c->by_rank[a];
    if (!ma || ma->proc->lost)
      continue;
    for (uint64_t i = 0; i < ma->np2p; i++) {
      const struct nta_p2p *s = &ma->p2p[i];
      if (s->dir != 0 || s->peer < 0 || s->peer >= c->nranks || !c->by_rank[s->peer] ||
          c->by_rank[s->peer]->proc->lost || !p2p_unmatched(c, s, a))
        continue;
      for (int d = 0; d < c->nranks; d++) {
        const struct nta_member *md = c->by_rank[d];
        if (d == a || d == s->peer || !md || md->proc->lost)
          continue;
        for (uint64_t j = 0; j < md->np2p; j++) {
          const struct nta_p2p *r = &md->p2p[j];
          if (r->dir != 1 || r->peer != a || !p2p_unmatched(c, r, d))
            continue;
          struct nta_cand *k = nta_cand_add(job, NTA_P2P_MISMATCH, s->op.t_ns > r->op.t_ns ? s->op.t_ns : r->op.t_ns);
          if (!k)
            return;
          k->comm = c;
          k->seq = s->seq;
          snprintf(k->field, sizeof(k->field), "peer");
          k->ranks[k->nranks++] = a < d ? a : d;
          k->ranks[k->nranks++] = a < d ? d : a;
          char hex[17], ds[160], dr[160];
          nta_comm_hex(c->id, hex);
          nta_describe_op(&s->op, ds, sizeof(ds));
          nta_describe_op(&r->op, dr, sizeof(dr));
          snprintf(k->summary, sizeof(k->summary),
                   "p2p mismatch on comm %s: rank %d's send #%llu went to rank %d, which never receives it, "
                   "while rank %d waits in %s for data from rank %d (peer differs)",
                   hex, a, (unsigned long long)s->seq, s->peer, d, dr, a);
          nta_event_add(job, s->op.t_ns, ma->proc->lrank, "call", "comm %.8s rank %d: %s (unmatched)", hex, a, ds);
          nta_event_add(job, r->op.t_ns, md->proc->lrank, "call", "comm %.8s rank %d: %s (unmatched)", hex, d, dr);
          return;
        }
      }
    }
  }
}

static void detect_p2p(struct nta_job *job, const struct nta_comm *c) {
  const struct nta_p2p *best_s = NULL, *best_r = NULL;
  const char *best_field = NULL;
  int best_a = -1;
  uint64_t best_t = 0;
  for (int a = 0; a < c->nranks; a++) {
    const struct nta_member *m = c->by_rank[a];
    if (!m)
      continue;
    for (uint64_t i = 0; i < m->np2p; i++) {
      const struct nta_p2p *s = &m->p2p[i];
      if (s->dir != 0 || s->peer < 0 || s->peer >= c->nranks || !c->by_rank[s->peer])
        continue;
      const struct nta_p2p *r = p2p_find(c->by_rank[s->peer], a, 1, s->seq);
      if (!r)
        continue;
      const char *f = s->op.rec->count != r->op.rec->count ? "count"
                      : s->op.rec->dtype != r->op.rec->dtype ? "dtype" : NULL;
      if (!f)
        continue;
      uint64_t t = s->op.t_ns > r->op.t_ns ? s->op.t_ns : r->op.t_ns;
      if (!best_s || t < best_t) {
        best_s = s;
        best_r = r;
        best_field = f;
        best_a = a;
        best_t = t;
      }
    }
  }
  if (!best_s) {
    detect_p2p_peer(job, c);
    return;
  }
  struct nta_cand *k = nta_cand_add(job, NTA_P2P_MISMATCH, best_t);
  if (!k)
    return;
  int b = best_s->peer;
  k->comm = c;
  k->seq = best_s->seq;
  snprintf(k->field, sizeof(k->field), "%s", best_field);
  k->ranks[k->nranks++] = best_a < b ? best_a : b;
  k->ranks[k->nranks++] = best_a < b ? b : best_a;
  char hex[17], ds[160], dr[160];
  nta_comm_hex(c->id, hex);
  nta_describe_op(&best_s->op, ds, sizeof(ds));
  nta_describe_op(&best_r->op, dr, sizeof(dr));
  snprintf(k->summary, sizeof(k->summary),
           "p2p mismatch on comm %s: rank %d's send #%llu to rank %d is %s but rank %d's matching "
           "receive is %s (%s differs)",
           hex, best_a, (unsigned long long)best_s->seq, b, ds, b, dr, best_field);
  nta_event_add(job, best_s->op.t_ns, c->by_rank[best_a]->proc->lrank, "call", "comm %.8s rank %d: %s",
                hex, best_a, ds);
  nta_event_add(job, best_r->op.t_ns, c->by_rank[b]->proc->lrank, "call", "comm %.8s rank %d: %s", hex,
                b, dr);
}

/* ------------------------------------- missing collective, init hang -- */

/* Every rank with evidence agrees and waits at seq lo, but some ranks of the
 * comm left no evidence at all: they are the ones that never came. */
static void detect_silent(struct nta_job *job, const struct nta_comm *c, uint64_t issued) {
  uint64_t maxdone = 0;
  int absent[NTA_MAX_VRANKS], na = 0, proof = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    if (!m) {
      if (na < NTA_MAX_VRANKS)
        absent[na++] = r;
      continue;
    }
    if (m->completed > maxdone)
      maxdone = m->completed;
    proof |= m->proc->timeout_ns != 0 || m->proc->fate != NTA_ALIVE;
  }
  uint64_t s = maxdone + 1;
  if (!na || !proof || s > issued)
    return;
  const struct nta_op *first = NULL;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_op *o = c->by_rank[r] ? op_at(c->by_rank[r], s) : NULL;
    if (o && (!first || o->t_ns < first->t_ns))
      first = o;
  }
  struct nta_cand *k = nta_cand_add(job, NTA_MISSING_COLL, first ? first->t_ns : c->first_ns);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  memcpy(k->ranks, absent, sizeof(int) * (size_t)na);
  k->nranks = na;
  char hex[17], d[160] = "it", rl[256];
  nta_comm_hex(c->id, hex);
  if (first)
    nta_describe_op(first, d, sizeof(d));
  rank_list(absent, na, rl, sizeof(rl));
  snprintf(k->summary, sizeof(k->summary),
           "missing collective on comm %s seq %llu: %s %s left no evidence at all while every other "
           "rank issued %s and waited",
           hex, (unsigned long long)s, plural(na), rl, d);
}

static void detect_missing(struct nta_job *job, const struct nta_comm *c) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    if (!m || m->in_init)
      continue;
    if (m->issued < lo)
      lo = m->issued;
    if (m->issued > hi)
      hi = m->issued;
  }
  if (lo == UINT64_MAX)
    return;
  if (hi == lo) {
    detect_silent(job, c, lo);
    return;
  }
  uint64_t s = lo + 1, t = 0;
  const struct nta_op *first = NULL;
  int waiting[NTA_MAX_VRANKS], nw = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    if (!m || m->issued < s)
      continue;
    const struct nta_op *o = op_at(m, s);
    if (o && (!first || o->t_ns < t)) {
      first = o;
      t = o->t_ns;
    }
    if (nw < NTA_MAX_VRANKS)
      waiting[nw++] = r;
  }
  struct nta_cand *k = nta_cand_add(job, NTA_MISSING_COLL, t);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  for (int r = 0; r < c->nranks && k->nranks < NTA_MAX_VRANKS; r++)
    if (c->by_rank[r] && !c->by_rank[r]->in_init && c->by_rank[r]->issued < s)
      k->ranks[k->nranks++] = r;
  char hex[17], d[160] = "it", rm[256], rw[256];
  nta_comm_hex(c->id, hex);
  if (first)
    nta_describe_op(first, d, sizeof(d));
  rank_list(k->ranks, k->nranks, rm, sizeof(rm));
  rank_list(waiting, nw, rw, sizeof(rw));
  snprintf(k->summary, sizeof(k->summary),
           "missing collective on comm %s seq %llu: %s %s never issued %s, which %s %s issued", hex,
           (unsigned long long)s, plural(k->nranks), rm, d, plural(nw), rw);
  for (int i = 0; i < k->nranks; i++) {
    const struct nta_member *m = c->by_rank[k->ranks[i]];
    const struct nta_op *last = m->ncolls ? &m->colls[m->ncolls - 1] : NULL;
    char ld[160] = "none";
    if (last)
      nta_describe_op(last, ld, sizeof(ld));
    nta_event_add(job, last ? last->t_ns : m->first_ns, m->proc->lrank, "behind",
                  "comm %.8s rank %d: last collective issued #%llu %s", hex, k->ranks[i],
                  (unsigned long long)m->issued, ld);
  }
  for (int i = 0; i < nw; i++) {
    const struct nta_op *o = op_at(c->by_rank[waiting[i]], s);
    if (o)
      nta_event_add(job, o->t_ns, c->by_rank[waiting[i]]->proc->lrank, "call",
                    "comm %.8s rank %d seq %llu: %s%s", hex, waiting[i], (unsigned long long)s, d,
                    o->done_ns ? " (completed)" : "");
  }
}

/* ncclCommSplit/Shrink are collective over the parent: nobody returns until
 * every rank called it.  The interposer records them on the parent (the
 * child's rank and size are known only after the call), so a split that
 * never completes is seen as parent members blocked in it; the parent's
 * other ranks never joined. */
static void detect_split_hang(struct nta_job *job, const struct nta_comm *c) {
  int waiting[NTA_MAX_VRANKS], nw = 0;
  uint64_t t = 0;
  unsigned kind = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    const struct ntr_comm_state *cs = m ? m->cs : NULL;
    if (!cs || !cs->blocked_since ||
        (cs->blocked_kind != NTR_KIND_COMM_SPLIT && cs->blocked_kind != NTR_KIND_COMM_SHRINK))
      continue;
    uint64_t since = ntr_image_ns(m->proc->img, cs->blocked_since);
    if (!t || since < t)
      t = since;
    kind = cs->blocked_kind;
    if (nw < NTA_MAX_VRANKS)
      waiting[nw++] = r;
  }
  if (!nw || nw == c->nranks)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_INIT_HANG, t);
  if (!k)
    return;
  k->comm = c;
  for (int r = 0, w = 0; r < c->nranks && k->nranks < NTA_MAX_VRANKS; r++) {
    if (w < nw && waiting[w] == r)
      w++;
    else
      k->ranks[k->nranks++] = r;
  }
  char hex[17], rm[256], rw[256];
  nta_comm_hex(c->id, hex);
  rank_list(k->ranks, k->nranks, rm, sizeof(rm));
  rank_list(waiting, nw, rw, sizeof(rw));
  snprintf(k->summary, sizeof(k->summary),
           "%s of comm %s never completed: %s %s never called it while %s %s waited in it",
           ntr_kind_name(kind), hex, plural(k->nranks), rm, plural(nw), rw);
  for (int i = 0; i < nw; i++)
    nta_event_add(job, ntr_image_ns(c->by_rank[waiting[i]]->proc->img, c->by_rank[waiting[i]]->cs->blocked_since),
                  c->by_rank[waiting[i]]->proc->lrank, "init", "comm %.8s rank %d entered %s and never returned", hex,
                  waiting[i], ntr_kind_name(kind));
}

static void detect_init(struct nta_job *job, const struct nta_comm *c) {
  int in_init = 0, present = 0;
  uint64_t t = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    if (!m)
      continue;
    present++;
    if (m->in_init) {
      in_init++;
      if (!t || (m->init_enter_ns && m->init_enter_ns < t))
        t = m->init_enter_ns;
    }
  }
  if (!in_init)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_INIT_HANG, t);
  if (!k)
    return;
  k->comm = c;
  int waiting[NTA_MAX_VRANKS], nw = 0;
  for (int r = 0; r < c->nranks; r++) {
    if (!c->by_rank[r]) {
      if (k->nranks < NTA_MAX_VRANKS)
        k->ranks[k->nranks++] = r;
    } else if (c->by_rank[r]->in_init && nw < NTA_MAX_VRANKS) {
      waiting[nw++] = r;
    }
  }
  char hex[17], rm[256], rw[256];
  nta_comm_hex(c->id, hex);
  rank_list(waiting, nw, rw, sizeof(rw));
  unsigned kind = 0;
  for (int r = 0; r < c->nranks && !kind; r++)
    if (c->by_rank[r] && c->by_rank[r]->cs)
      kind = c->by_rank[r]->cs->init_kind;
  if (k->nranks) {
    rank_list(k->ranks, k->nranks, rm, sizeof(rm));
    snprintf(k->summary, sizeof(k->summary),
             "init of comm %s (%d ranks) never completed: %s %s never joined while %s %s waited in %s",
             hex, c->nranks, plural(k->nranks), rm, plural(nw), rw,
             kind ? ntr_kind_name(kind) : "communicator init");
  } else {
    /* Everyone arrived and init still did not finish: name them all. */
    for (int i = 0; i < nw; i++)
      k->ranks[k->nranks++] = waiting[i];
    snprintf(k->summary, sizeof(k->summary),
             "init of comm %s (%d ranks) never completed although every rank joined (%s waited in %s)",
             hex, c->nranks, rw, kind ? ntr_kind_name(kind) : "communicator init");
  }
  for (int i = 0; i < nw; i++) {
    const struct nta_member *m = c->by_rank[waiting[i]];
    nta_event_add(job, m->init_enter_ns, m->proc->lrank, "init",
                  "comm %.8s rank %d entered %s and never returned", hex, waiting[i],
                  kind ? ntr_kind_name(kind) : "init");
  }
  (void)present;
}

/* ------------------------------------------------------ env mismatch -- */

/* Value of NAME in an image's env block, or NULL. */
static const char *env_get(const struct ntr_image *img, const char *name, size_t nlen) {
  uint32_t len = img->hdr.env_len < NTR_ENV_BYTES ? img->hdr.env_len : NTR_ENV_BYTES;
  const char *e = img->hdr.env, *end = e + len;
  while (e < end && *e) {
    size_t l = strnlen(e, (size_t)(end - e));
    if (l > nlen && strncmp(e, name, nlen) == 0 && e[nlen] == '=')
      return e + nlen + 1;
    e += l + 1;
  }
  return NULL;
}

/* NCCLTRACE_ENV_CHECK=abort leaves, on a member whose init of c failed, the
 * coordinator's ENV_DIFF record of c from before that failure: the variable
 * it refused the init for goes to name.  Only then is the difference a proven
 * cause; otherwise (NCCL_DEBUG differing on a healthy job) it is a hint.
 * @return 1 refused, 0 not. */
static int env_refused(const struct nta_comm *c, char *name, size_t len) {
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    if (!m->init_fail_ns)
      continue;
    for (uint64_t j = 0; j < m->proc->nrecs; j++) {
      const struct ntr_record *r = &m->proc->recs[j];
      if (r->kind != NTR_KIND_ENV_DIFF || r->comm_id != c->id || nta_rec_ns(m->proc, r) > m->init_fail_ns)
        continue;
      size_t l = strnlen(r->u.text, sizeof(r->u.text));
      snprintf(name, len, "%.*s", (int)l, r->u.text);
      return 1;
    }
  }
  return 0;
}

static void detect_env(struct nta_job *job, const struct nta_comm *c) {
  /* The variable the coordinator refused the init for, else the first
   * (by name) of every NCCL_* name any member has that differs. */
  char best[64] = "";
  int refused = env_refused(c, best, sizeof(best));
  for (int i = 0; i < c->nmembers && !refused; i++) {
    const struct ntr_image *img = c->members[i].proc->img;
    uint32_t len = img->hdr.env_len < NTR_ENV_BYTES ? img->hdr.env_len : NTR_ENV_BYTES;
    const char *e = img->hdr.env, *end = e + len;
    while (e < end && *e) {
      size_t l = strnlen(e, (size_t)(end - e));
      const char *eq = memchr(e, '=', l);
      if (eq && strncmp(e, "NCCL_", 5) == 0 && (size_t)(eq - e) < sizeof(best)) {
        size_t nl = (size_t)(eq - e);
        for (int j = 0; j < c->nmembers; j++) {
          const char *v = env_get(c->members[j].proc->img, e, nl);
          if (!v || strcmp(v, eq + 1) != 0) {
            char name[64];
            memcpy(name, e, nl);
            name[nl] = 0;
            if (!best[0] || strcmp(name, best) < 0)
              snprintf(best, sizeof(best), "%s", name);
            break;
          }
        }
      }
      e += l + 1;
    }
  }
  if (!best[0])
    return;
  /* Majority value decides who differs. */
  size_t nl = strlen(best);
  const char *maj = NULL;
  int majn = -1;
  for (int i = 0; i < c->nmembers; i++) {
    const char *v = env_get(c->members[i].proc->img, best, nl);
    int n = 0;
    for (int j = 0; j < c->nmembers; j++) {
      const char *w = env_get(c->members[j].proc->img, best, nl);
      n += (v == NULL && w == NULL) || (v && w && strcmp(v, w) == 0);
    }
    if (n > majn) {
      majn = n;
      maj = v;
    }
  }
  struct nta_cand *k = nta_cand_add(job, NTA_ENV_MISMATCH, c->first_ns);
  if (!k)
    return;
  k->comm = c;
  k->refused = refused;
  snprintf(k->field, sizeof(k->field), "%s", best);
  char diff[256] = "", hex[17], rl[256];
  nta_comm_hex(c->id, hex);
  for (int r = 0; r < c->nranks; r++) {
    if (!c->by_rank[r])
      continue;
    const char *v = env_get(c->by_rank[r]->proc->img, best, nl);
    if ((v == NULL) != (maj == NULL) || (v && strcmp(v, maj) != 0)) {
      if (k->nranks < NTA_MAX_VRANKS)
        k->ranks[k->nranks++] = r;
      if (!diff[0])
        snprintf(diff, sizeof(diff), "%s", v ? v : "(unset)");
      nta_event_add(job, c->first_ns, c->by_rank[r]->proc->lrank, "env", "comm %.8s rank %d: %s=%s",
                    hex, r, best, v ? v : "(unset)");
    }
  }
  rank_list(k->ranks, k->nranks, rl, sizeof(rl));
  snprintf(k->summary, sizeof(k->summary), "%s differs on comm %s: %s %s %s %s=%s while the others have %s%s",
           best, hex, plural(k->nranks), rl, k->nranks == 1 ? "has" : "have", best, diff,
           maj ? maj : "(unset)",
           refused ? "; the coordinator refused the comm's init for it (NCCLTRACE_ENV_CHECK=abort)" : "");
}

/* ------------------------------------------------------------- stall -- */

static void detect_stall(struct nta_job *job, const struct nta_comm *c) {
  uint64_t maxdone = 0, minenq = UINT64_MAX, miniss = UINT64_MAX, maxiss = 0;
  int tracked = 1, clean_exit = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_member *m = c->by_rank[r];
    if (!m || m->in_init)
      return; /* a rank without evidence, or init: not "everyone issued it" */
    tracked &= m->tracking;
    if (m->completed > maxdone)
      maxdone = m->completed;
    if (m->enqueued < minenq)
      minenq = m->enqueued;
    if (m->issued < miniss)
      miniss = m->issued;
    if (m->issued > maxiss)
      maxiss = m->issued;
    clean_exit |= m->proc->fate == NTA_EXITED && m->proc->exit_code == 0;
  }
  /* With completion tracking: the first seq nobody completed, issued by all.
   * Without it (no CUDA driver, events unavailable): the last collective,
   * issued identically by every rank, after which nobody went on and nobody
   * finished normally. */
  uint64_t s = tracked ? maxdone + 1 : maxiss;
  if (!c->nranks || !s || s > minenq || (!tracked && (miniss != maxiss || clean_exit)))
    return;
  const struct nta_op *ref = NULL;
  uint64_t t = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_op *o = op_at(c->by_rank[r], s);
    if (!o)
      continue;
    if (ref && fp_diff(ref, o))
      return; /* a mismatch, found by detect_mismatch */
    ref = ref ? ref : o;
    if (o->t_ns > t)
      t = o->t_ns;
  }
  /* A live job between issue and completion is not a stall: require proof
   * that it stayed stuck (a watchdog timeout, or the processes are gone). */
  int proof = 0;
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_proc *p = c->by_rank[r]->proc;
    if (p->timeout_ns || p->fate != NTA_ALIVE)
      proof = 1;
  }
  if (!proof)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_STALL, t);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  for (int r = 0; r < c->nranks && k->nranks < NTA_MAX_VRANKS; r++)
    k->ranks[k->nranks++] = r;
  char hex[17], d[160] = "it";
  nta_comm_hex(c->id, hex);
  if (ref)
    nta_describe_op(ref, d, sizeof(d));
  snprintf(k->summary, sizeof(k->summary), "stall on comm %s seq %llu: all %d ranks issued %s identically and %s",
           hex, (unsigned long long)s, c->nranks, d,
           tracked ? "none completed" : "none went further (completion was not tracked)");
  for (int r = 0; r < c->nranks; r++) {
    const struct nta_op *o = op_at(c->by_rank[r], s);
    if (o)
      nta_event_add(job, o->t_ns, c->by_rank[r]->proc->lrank, "call", "comm %.8s rank %d seq %llu: %s%s", hex, r,
                    (unsigned long long)s, d, o->done_ns ? " (completed)" : "");
  }
}

int nta_detect(struct nta_job *job) {
  for (int i = 0; i < job->nprocs; i++)
    if (job->procs[i].timeout_ns && (!job->stuck_ns || job->procs[i].timeout_ns < job->stuck_ns))
      job->stuck_ns = job->procs[i].timeout_ns;
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    detect_init(job, c);
    detect_split_hang(job, c);
    detect_mismatch(job, c);
    detect_p2p(job, c);
    detect_missing(job, c);
    detect_env(job, c);
    detect_stall(job, c);
  }
  nta_detect_fates(job);
  nta_detect_errors(job);
  return 0;
}
