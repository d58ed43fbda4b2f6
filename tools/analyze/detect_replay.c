/* detect_replay.c -- findings on CUDA graph replays (docs/analyze.md,
 * "CUDA graphs").  A replay n of a graph runs the collectives it captured
 * again on every rank: a rank that never launched replay n while its peers
 * wait in it is missing that replay, as a rank that never issued seq k is
 * missing collective k.  A graph whose captured calls differ between ranks
 * is a collective mismatch at the captured seq (detect.c compares the
 * captured call records themselves); nothing extra here.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Loops run over the members present, never over [0, nranks).
 */
#include <stdio.h>
#include <string.h>
#include "tools/analyze/analyze.h"

const struct nta_replays *nta_replay_pending(const struct nta_member *m, uint64_t *n) {
  const struct nta_mdata *d = m->d;
  uint64_t broke = d->abort_ns;
  if (m->proc->async_ns && (!broke || m->proc->async_ns < broke))
    broke = m->proc->async_ns;
  const struct nta_replays *best = NULL;
  uint64_t best_ns = 0;
  for (int i = 0; i < d->ngr; i++) {
    const struct nta_replays *g = &d->gr[i];
    uint64_t pend = g->pending > g->completed ? g->pending : 0, t = g->pending_ns;
    if (broke && g->completed && g->completed_ns >= broke && (!pend || g->completed < pend)) {
      pend = g->completed;
      t = g->completed_ns;
    }
    if (pend && (!best || t < best_ns)) {
      best = g;
      best_ns = t;
      *n = pend;
    }
  }
  return best;
}

const struct nta_replays *nta_replay_find(const struct nta_mdata *d, uint64_t first, uint64_t last) {
  for (int i = 0; i < d->ngr; i++)
    if (d->gr[i].seq_first == first && d->gr[i].seq_last == last)
      return &d->gr[i];
  return NULL;
}

void nta_replay_op(const struct nta_replays *g, char *buf, size_t len) {
  const char *op = g->first_kind > 0 && g->first_kind < NTR_KIND_COUNT ? ntt_kind_name(g->first_kind) : "collective";
  if (g->seq_first)
    snprintf(buf, len, "%s #%llu", op, (unsigned long long)g->seq_first);
  else
    snprintf(buf, len, "%s", op);
}

/* Every rank launched replay n and none saw it complete, with proof that
 * it stayed stuck (a watchdog timeout, or the processes are gone): a stall
 * in that replay. */
static void replay_stall(struct nta_job *job, const struct nta_comm *c) {
  if (c->nranked != c->nranks || !c->nranked)
    return;
  const struct nta_replays *g0 = NULL;
  uint64_t n = 0, t = 0;
  int proof = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    uint64_t pn;
    const struct nta_replays *g = nta_replay_pending(m, &pn);
    if (!g || (g0 && (g->seq_first != g0->seq_first || g->seq_last != g0->seq_last || pn != n)))
      return;
    g0 = g;
    n = pn;
    if (g->pending_ns > t)
      t = g->pending_ns;
    proof |= m->proc->timeout_ns != 0 || (m->proc->fate != NTA_ALIVE && m->proc->fate != NTA_EXECED);
  }
  if (!proof)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_STALL, t);
  if (!k)
    return;
  k->comm = c;
  k->seq = g0->seq_first;
  k->replay = n;
  nta_replay_op(g0, k->replay_op, sizeof k->replay_op);
  for (int i = 0; i < c->nranked && k->nranks < NTA_MAX_VRANKS; i++)
    k->ranks[k->nranks++] = c->ranked[i]->rank;
  char hex[17];
  nta_comm_hex(c->id, hex);
  snprintf(k->summary, sizeof k->summary, "stall on comm %s: all %d ranks launched %s in graph replay %llu and none completed",
           hex, c->nranks, k->replay_op, (unsigned long long)n);
}

/* The first replay some rank never launched while another waits in it:
 * over the replays members are blocked in, the lowest with a rank behind. */
void nta_detect_replays(struct nta_job *job, const struct nta_comm *c) {
  const struct nta_member *w = NULL;
  const struct nta_replays *wg = NULL;
  uint64_t n = 0;
  for (int i = 0; i < c->nranked; i++) {
    uint64_t pn;
    const struct nta_replays *g = nta_replay_pending(c->ranked[i], &pn);
    if (!g || (wg && pn >= n))
      continue;
    int behind = 0;
    for (int j = 0; j < c->nranked && !behind; j++) {
      const struct nta_replays *o = nta_replay_find(c->ranked[j]->d, g->seq_first, g->seq_last);
      behind = !o || o->launched < pn;
    }
    if (behind) {
      w = c->ranked[i];
      wg = g;
      n = pn;
    }
  }
  if (!wg) {
    replay_stall(job, c);
    return;
  }
  int missing[NTA_MAX_VRANKS], nm = 0, waiting[NTA_MAX_VRANKS], nw = 0, nm_all = 0, nw_all = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    const struct nta_replays *g = nta_replay_find(m->d, wg->seq_first, wg->seq_last);
    uint64_t got = g ? g->launched : 0;
    nm_all += got < n;
    nw_all += got >= n;
    if (got < n && nm < NTA_MAX_VRANKS)
      missing[nm++] = m->rank;
    else if (got >= n && nw < NTA_MAX_VRANKS)
      waiting[nw++] = m->rank;
  }
  if (!nm)
    return; /* every rank launched it: a stall, not a missing replay */
  uint64_t t = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_replays *g = nta_replay_find(c->ranked[i]->d, wg->seq_first, wg->seq_last);
    if (g && g->pending == n && (!t || g->pending_ns < t))
      t = g->pending_ns;
  }
  struct nta_cand *k = nta_cand_add(job, NTA_MISSING_COLL, t ? t : wg->pending_ns);
  if (!k)
    return;
  k->comm = c;
  k->seq = wg->seq_first;
  k->replay = n;
  nta_replay_op(wg, k->replay_op, sizeof k->replay_op);
  memcpy(k->ranks, missing, sizeof(int) * (size_t)nm);
  k->nranks = nm;
  char hex[17], rm[256], rw[256];
  nta_comm_hex(c->id, hex);
  nta_rank_list_of(missing, nm, nm_all, rm, sizeof rm);
  nta_rank_list_of(waiting, nw, nw_all, rw, sizeof rw);
  snprintf(k->summary, sizeof k->summary,
           "missing graph replay on comm %s: %s %s never launched %s in graph replay %llu, which %s %s "
           "launched and wait in",
           hex, nta_plural(nm_all), rm, k->replay_op, (unsigned long long)n, nta_plural(nw_all), rw);
  for (int i = 0; i < nm; i++) {
    const struct nta_member *m = nta_rank(c, missing[i]);
    const struct nta_replays *g = m ? nta_replay_find(m->d, wg->seq_first, wg->seq_last) : NULL;
    if (m)
      nta_event_add(job, m->first_ns, m->proc->lrank, "behind", "comm %.8s rank %d: last graph replay launched %llu",
                    hex, m->rank, (unsigned long long)(g ? g->launched : 0));
  }
  nta_event_add(job, t ? t : wg->pending_ns, w->proc->lrank, "call", "comm %.8s rank %d: %s in graph replay %llu (never completed)",
                hex, w->rank, k->replay_op, (unsigned long long)n);
}
