/* detect_p2p.c -- send/receive findings on an aligned communicator: a send
 * and its matching receive (same per-pair seq) that disagree in count or
 * dtype, and the wrong peer (a send nobody receives while another rank waits
 * for data from the sender).
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Loops run over the members present (c->ranked), never over [0, nranks).
 */
#include <string.h>
#include "tools/analyze/analyze.h"

/* p2p[] is sorted by (peer, dir, seq) (reduce.c): binary search. */
static const struct nta_p2p *p2p_find(const struct nta_member *m, int peer, int dir, uint64_t seq) {
  const struct nta_p2p *v = m->d->p2p;
  uint64_t lo = 0, hi = m->np2p;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    const struct nta_p2p *x = &v[mid];
    int less = x->peer != peer ? x->peer < peer : x->dir != dir ? x->dir < dir : x->seq < seq;
    if (less)
      lo = mid + 1;
    else
      hi = mid;
  }
  const struct nta_p2p *x = lo < m->np2p ? &v[lo] : NULL;
  return x && x->peer == peer && x->dir == dir && x->seq == seq ? x : NULL;
}

/* Seq of the last collective member m issued before time t, 0 none
 * (collectives are in seq order, which is issue order). */
static uint64_t coll_seq_before(const struct nta_member *m, uint64_t t) {
  uint64_t lo = 0, hi = m->ncolls;
  while (lo < hi) {
    uint64_t mid = (lo + hi) / 2;
    if (nta_coll_t_ns(m, mid) < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? nta_coll_seq(m, lo - 1) : 0;
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
static int p2p_unmatched(const struct nta_comm *c, const struct nta_member *self, const struct nta_p2p *x) {
  const struct nta_member *peer = nta_rank(c, x->peer);
  if (p2p_find(peer, self->rank, !x->dir, x->seq))
    return 0;
  struct nta_op o;
  nta_p2p_op(self, x, &o);
  if (!o.done_ns)
    return 1;
  if (x->dir == 1)
    return 0;
  return peer->issued > coll_seq_before(self, o.t_ns);
}

/* The wrong peer: rank a's send to b has no receive on b, while another rank
 * d waits to receive from a something a never sent it.  Both a and d are
 * named (either side may have picked the wrong peer).  Records lost to a
 * wrapped ring could fake an unmatched call: such processes are skipped. */
/* A p2p mismatch candidate between ranks a and b at seq, on the field that
 * differs; hex, ds and dr get the comm id and both ops described, with
 * their Python sites, for the summary.  verdict.stack: the send's site.
 * @return the candidate, NULL when the table is full. */
static struct nta_cand *p2p_cand(struct nta_job *job, const struct nta_comm *c, uint64_t seq, const char *field,
                                 int a, int b, const struct nta_op *so, const struct nta_op *ro,
                                 const struct nta_proc *ps, const struct nta_proc *pr, char hex[17],
                                 char *ds, char *dr, size_t dlen) {
  struct nta_cand *k = nta_cand_add(job, NTA_P2P_MISMATCH, so->t_ns > ro->t_ns ? so->t_ns : ro->t_ns);
  if (!k)
    return NULL;
  k->comm = c;
  k->seq = seq;
  snprintf(k->field, sizeof(k->field), "%s", field);
  k->ranks[k->nranks++] = a < b ? a : b;
  k->ranks[k->nranks++] = a < b ? b : a;
  nta_comm_hex(c->id, hex);
  nta_describe_op(so, ds, dlen);
  nta_describe_op(ro, dr, dlen);
  nta_site_text(ps, so->pystack, ds + strlen(ds), dlen - strlen(ds));
  nta_site_text(pr, ro->pystack, dr + strlen(dr), dlen - strlen(dr));
  nta_cand_site(k, ps, so->pystack);
  return k;
}

static void detect_p2p_peer(struct nta_job *job, const struct nta_comm *c) {
  for (int ia = 0; ia < c->nranked; ia++) {
    const struct nta_member *ma = c->ranked[ia];
    int a = ma->rank;
    if (ma->proc->lost)
      continue;
    for (uint64_t i = 0; i < ma->np2p; i++) {
      const struct nta_p2p *s = &ma->d->p2p[i];
      const struct nta_member *mb = s->dir == 0 && s->peer >= 0 && s->peer < c->nranks ? nta_rank(c, s->peer) : NULL;
      if (!mb || mb->proc->lost || !p2p_unmatched(c, ma, s))
        continue;
      for (int id = 0; id < c->nranked; id++) {
        const struct nta_member *md = c->ranked[id];
        int d = md->rank;
        if (d == a || d == s->peer || md->proc->lost)
          continue;
        for (uint64_t j = 0; j < md->np2p; j++) {
          const struct nta_p2p *r = &md->d->p2p[j];
          if (r->dir != 1 || r->peer != a || !p2p_unmatched(c, md, r))
            continue;
          struct nta_op so, ro;
          nta_p2p_op(ma, s, &so);
          nta_p2p_op(md, r, &ro);
          char hex[17], ds[400], dr[400];
          struct nta_cand *k = p2p_cand(job, c, s->seq, "peer", a, d, &so, &ro, ma->proc, md->proc, hex, ds, dr,
                                        sizeof ds);
          if (!k)
            return;
          snprintf(k->summary, sizeof(k->summary),
                   "p2p mismatch on comm %s: rank %d's send #%llu (%s) went to rank %d, which never receives it, "
                   "while rank %d waits in %s for data from rank %d (peer differs)",
                   hex, a, (unsigned long long)s->seq, ds, s->peer, d, dr, a);
          nta_event_add(job, so.t_ns, ma->proc->lrank, "call", "comm %.8s rank %d: %s (unmatched)", hex, a, ds);
          nta_event_add(job, ro.t_ns, md->proc->lrank, "call", "comm %.8s rank %d: %s (unmatched)", hex, d, dr);
          return;
        }
      }
    }
  }
}

void nta_detect_p2p(struct nta_job *job, const struct nta_comm *c) {
  const struct nta_member *best_ma = NULL, *best_mb = NULL;
  struct nta_op best_s, best_r;
  const char *best_field = NULL;
  uint64_t best_seq = 0, best_t = 0;
  for (int ia = 0; ia < c->nranked; ia++) {
    const struct nta_member *m = c->ranked[ia];
    for (uint64_t i = 0; i < m->np2p; i++) {
      const struct nta_p2p *s = &m->d->p2p[i];
      const struct nta_member *mb = s->dir == 0 && s->peer >= 0 && s->peer < c->nranks ? nta_rank(c, s->peer) : NULL;
      if (!mb)
        continue;
      const struct nta_p2p *r = p2p_find(mb, m->rank, 1, s->seq);
      if (!r)
        continue;
      const struct nta_fp *fs = &m->proc->fps[s->fpi], *fr = &mb->proc->fps[r->fpi];
      const char *f = fs->count != fr->count ? "count" : fs->dtype != fr->dtype ? "dtype" : NULL;
      if (!f)
        continue;
      struct nta_op so, ro;
      nta_p2p_op(m, s, &so);
      nta_p2p_op(mb, r, &ro);
      uint64_t t = so.t_ns > ro.t_ns ? so.t_ns : ro.t_ns;
      if (!best_ma || t < best_t) {
        best_ma = m;
        best_mb = mb;
        best_s = so;
        best_r = ro;
        best_field = f;
        best_seq = s->seq;
        best_t = t;
      }
    }
  }
  if (!best_ma) {
    detect_p2p_peer(job, c);
    return;
  }
  int a = best_ma->rank, b = best_mb->rank;
  char hex[17], ds[400], dr[400];
  struct nta_cand *k = p2p_cand(job, c, best_seq, best_field, a, b, &best_s, &best_r, best_ma->proc, best_mb->proc,
                                hex, ds, dr, sizeof ds);
  if (!k)
    return;
  snprintf(k->summary, sizeof(k->summary),
           "p2p mismatch on comm %s: rank %d's send #%llu to rank %d is %s but rank %d's matching "
           "receive is %s (%s differs)",
           hex, a, (unsigned long long)best_seq, b, ds, b, dr, best_field);
  nta_event_add(job, best_s.t_ns, best_ma->proc->lrank, "call", "comm %.8s rank %d: %s", hex, a, ds);
  nta_event_add(job, best_r.t_ns, best_mb->proc->lrank, "call", "comm %.8s rank %d: %s", hex, b, dr);
}
