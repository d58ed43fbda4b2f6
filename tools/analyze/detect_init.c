/* detect_init.c -- communicator creation that never completed: an init some
 * members entered and never returned from, and a split or shrink (recorded
 * on the parent) some parent ranks wait in while the others never called it;
 * likewise a collective registration (a symmetric-memory window, a device
 * communicator), which NCCL 2.28 completes only once every rank called it.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Ranks without evidence are enumerated only up to NTA_MAX_VRANKS, from the
 * gaps between the members present (nranks comes from the input).
 */
#include "tools/analyze/analyze.h"

/* ncclCommSplit/Shrink are collective over the parent: nobody returns until
 * every rank called it.  The interposer records them on the parent (the
 * child's rank and size are known only after the call), so a split that
 * never completes is seen as parent members blocked in it; the parent's
 * other ranks never joined. */
int nta_kind_collective_reg(unsigned kind) {
  return kind == NTR_KIND_COMM_WINDOW_REGISTER || kind == NTR_KIND_DEV_COMM_CREATE;
}

void nta_detect_split_hang(struct nta_job *job, const struct nta_comm *c) {
  int waiting[NTA_MAX_VRANKS], nw = 0, nw_all = 0;
  uint64_t t = 0;
  unsigned kind = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    const struct ntr_comm_state *cs = m->cs;
    if (!cs || !cs->blocked_since ||
        (cs->blocked_kind != NTR_KIND_COMM_SPLIT && cs->blocked_kind != NTR_KIND_COMM_SHRINK &&
         !nta_kind_collective_reg(cs->blocked_kind)))
      continue;
    uint64_t since = ntt_image_ns(m->proc->img, cs->blocked_since);
    if (!t || since < t)
      t = since;
    kind = cs->blocked_kind;
    nw_all++;
    if (nw < NTA_MAX_VRANKS)
      waiting[nw++] = m->rank;
  }
  if (!nw || nw_all == c->nranks)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_INIT_HANG, t);
  if (!k)
    return;
  k->comm = c;
  /* field names the registration call (the advice differs from an init's) */
  if (nta_kind_collective_reg(kind))
    snprintf(k->field, sizeof(k->field), "%s", ntt_kind_name(kind));
  /* Every rank of the parent that is not waiting, the first NTA_MAX_VRANKS:
   * at most NTA_MAX_VRANKS + nw steps. */
  for (int r = 0, w = 0; r < c->nranks && k->nranks < NTA_MAX_VRANKS; r++) {
    if (w < nw && waiting[w] == r)
      w++;
    else
      k->ranks[k->nranks++] = r;
  }
  int nm_all = c->nranks - nw_all; /* the ranks not waiting in it */
  char hex[17], rm[256], rw[256], at[400] = "";
  nta_comm_hex(c->id, hex);
  nta_rank_list_of(k->ranks, k->nranks, nm_all, rm, sizeof(rm));
  nta_rank_list_of(waiting, nw, nw_all, rw, sizeof(rw));
  for (int i = 0; i < nw && !at[0]; i++) {
    const struct nta_member *m = nta_rank(c, waiting[i]);
    nta_site_text(m->proc, m->d->life_pystack, at, sizeof(at));
    nta_cand_site(k, m->proc, m->d->life_pystack);
  }
  snprintf(k->summary, sizeof(k->summary),
           "%s of comm %s never completed: %s %s never called it while %s %s waited in it%s",
           ntt_kind_name(kind), hex, nta_plural(nm_all), rm, nta_plural(nw_all), rw, at);
  for (int i = 0; i < nw; i++) {
    const struct nta_member *m = nta_rank(c, waiting[i]);
    nta_event_add(job, ntt_image_ns(m->proc->img, m->cs->blocked_since), m->proc->lrank, "init",
                  "comm %.8s rank %d entered %s and never returned", hex, waiting[i], ntt_kind_name(kind));
  }
}

/* Members whose init (CommInitRank/Config/Scalable/All) never returned; the
 * ranks that never joined are those without evidence of the comm. */
void nta_detect_init(struct nta_job *job, const struct nta_comm *c) {
  int in_init = 0;
  uint64_t t = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
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
  k->nranks = nta_absent_ranks(c, k->ranks, NTA_MAX_VRANKS);
  int na_all = c->nranks - c->nranked; /* ranked: one per rank in [0, nranks) */
  for (int i = 0; i < c->nranked && nw < NTA_MAX_VRANKS; i++)
    if (c->ranked[i]->in_init)
      waiting[nw++] = c->ranked[i]->rank;
  char hex[17], rm[256], rw[256], at[400] = "";
  nta_comm_hex(c->id, hex);
  nta_rank_list_of(waiting, nw, in_init, rw, sizeof(rw));
  /* verdict.stack: the init call the joined ranks wait in */
  for (int i = 0; i < nw && !at[0]; i++) {
    const struct nta_member *m = nta_rank(c, waiting[i]);
    nta_site_text(m->proc, m->d->init_pystack, at, sizeof(at));
    nta_cand_site(k, m->proc, m->d->init_pystack);
  }
  unsigned kind = 0;
  for (int i = 0; i < c->nranked && !kind; i++)
    if (c->ranked[i]->cs)
      kind = c->ranked[i]->cs->init_kind;
  if (k->nranks) {
    nta_rank_list_of(k->ranks, k->nranks, na_all, rm, sizeof(rm));
    snprintf(k->summary, sizeof(k->summary),
             "init of comm %s (%d ranks) never completed: %s %s never joined while %s %s waited in %s%s",
             hex, c->nranks, nta_plural(na_all), rm, nta_plural(in_init), rw,
             kind ? ntt_kind_name(kind) : "communicator init", at);
  } else {
    /* Everyone arrived and init still did not finish: name them all. */
    for (int i = 0; i < nw; i++)
      k->ranks[k->nranks++] = waiting[i];
    snprintf(k->summary, sizeof(k->summary),
             "init of comm %s (%d ranks) never completed although every rank joined (%s waited in %s%s)",
             hex, c->nranks, rw, kind ? ntt_kind_name(kind) : "communicator init", at);
  }
  for (int i = 0; i < nw; i++) {
    const struct nta_member *m = nta_rank(c, waiting[i]);
    nta_event_add(job, m->init_enter_ns, m->proc->lrank, "init",
                  "comm %.8s rank %d entered %s and never returned", hex, waiting[i],
                  kind ? ntt_kind_name(kind) : "init");
  }
}
