/* check_p2p.c -- send/recv matching, the entry points that route each
 * fingerprint, strict requests, and the time-driven reports (contract:
 * check.h). */
#include "interpose/exchange/check_int.h"
#include "recorder/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t p2p_hash(uint64_t comm, int32_t src, int32_t dst, uint64_t seq) {
  uint64_t pair = (uint64_t)(uint32_t)src << 32 | (uint32_t)dst;
  return ntx_mix64(comm ^ ntx_mix64(pair ^ ntx_mix64(seq)));
}

static void p2p_unlink(struct ntx_check *c, struct ntx_p2p *p) {
  struct ntx_p2p **pp = &c->p2p_hash[p2p_hash(p->cm->id, p->src, p->dst, p->seq) & c->p2p_mask];
  while (*pp != p)
    pp = &(*pp)->hnext;
  *pp = p->hnext;
  struct ntx_comm *cm = p->cm;
  if (p->fprev)
    p->fprev->fnext = p->fnext;
  else
    cm->p2p_head = p->fnext;
  if (p->fnext)
    p->fnext->fprev = p->fprev;
  else
    cm->p2p_tail = p->fprev;
  cm->p2p_pending--;
  c->p2p_total--;
  ntr_heap_free(p);
}

static void p2p_report(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_p2p *a,
                       const struct ntx_fp *b, int32_t src, int32_t dst, struct ntx_waiter *w) {
  const struct ntx_fp *snd = a->fp.dir == NTX_FP_SEND ? &a->fp : b;
  const struct ntx_fp *rcv = a->fp.dir == NTX_FP_SEND ? b : &a->fp;
  const char *field = snd->count != rcv->count ? "count" : "dtype";
  char ds[160], dr[160], text[NTX_TEXT_MAX];
  ntx_fp_describe(snd, ds, sizeof ds);
  ntx_fp_describe(rcv, dr, sizeof dr);
  snprintf(text, sizeof text,
           "p2p mismatch on comm %08x seq %llu field %s: rank %d %s to rank %d vs rank %d %s from rank %d",
           NTX_COMM_SHORT(cm->id), (unsigned long long)a->seq, field, (int)src, ds, (int)dst,
           (int)dst, dr, (int)src);
  c->st.p2p_mismatches++;
  if (!cm->p2p_reported) { /* the verdict first: see report_mismatch */
    cm->p2p_reported = 1;
    ntx_tell_comm(c, cm, NTX_V_P2P_MISMATCH, a->seq, src, dst, field, text);
  }
  ntx_resolve(c, a->waiters, NTX_REPLY_MISMATCH, text);
  ntx_resolve(c, w, NTX_REPLY_MISMATCH, text);
}

/* A send from a to b with seq k must meet b's recv from a with seq k, with
 * the same count and dtype.  Whichever half comes first waits in the hash. */
static void p2p_fp(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_fp *fp, double now,
                   struct ntx_waiter *w) {
  if (fp->peer < 0 || fp->peer >= cm->nranks || fp->peer == fp->rank) {
    c->st.unregistered++;
    ntx_resolve(c, w, NTX_REPLY_UNCHECKED, "");
    return;
  }
  int32_t src = fp->dir == NTX_FP_SEND ? fp->rank : fp->peer;
  int32_t dst = fp->dir == NTX_FP_SEND ? fp->peer : fp->rank;
  struct ntx_p2p **bucket = &c->p2p_hash[p2p_hash(cm->id, src, dst, fp->seq) & c->p2p_mask];
  for (struct ntx_p2p *p = *bucket; p; p = p->hnext) {
    if (p->cm != cm || p->src != src || p->dst != dst || p->seq != fp->seq)
      continue;
    if (p->fp.dir == fp->dir) { /* the same half again: wait with it */
      c->st.dup++;
      if (w) {
        w->next = p->waiters;
        p->waiters = w;
      }
      return;
    }
    if (p->fp.count != fp->count || p->fp.dtype != fp->dtype) {
      p2p_report(c, cm, p, fp, src, dst, w);
    } else {
      ntx_resolve(c, p->waiters, NTX_REPLY_OK, "");
      ntx_resolve(c, w, NTX_REPLY_OK, "");
    }
    p2p_unlink(c, p);
    return;
  }
  /* Bounded: the oldest pending half of this comm makes room (its waiters
   * proceed unchecked); a comm with nothing pending while all comms together
   * are full gets no room. */
  while (cm->p2p_pending >= c->lim.max_p2p_per_comm || c->p2p_total >= c->lim.max_p2p) {
    c->st.p2p_evicted++;
    if (!cm->p2p_head) {
      ntx_resolve(c, w, NTX_REPLY_UNCHECKED, "");
      return;
    }
    ntx_resolve(c, cm->p2p_head->waiters, NTX_REPLY_UNCHECKED, "");
    p2p_unlink(c, cm->p2p_head);
  }
  struct ntx_p2p *p = ntr_heap_calloc(1, sizeof *p);
  if (!p) {
    ntx_resolve(c, w, NTX_REPLY_UNCHECKED, "");
    return;
  }
  p->cm = cm;
  p->src = src;
  p->dst = dst;
  p->seq = fp->seq;
  p->t = now;
  p->fp = *fp;
  p->waiters = w;
  p->hnext = *bucket;
  *bucket = p;
  p->fprev = cm->p2p_tail;
  if (cm->p2p_tail)
    cm->p2p_tail->fnext = p;
  else
    cm->p2p_head = p;
  cm->p2p_tail = p;
  cm->p2p_pending++;
  c->p2p_total++;
}

static void route(struct ntx_check *c, uint32_t id, const struct ntx_fp *fp, double now, struct ntx_waiter *w) {
  c->st.fps++;
  struct ntx_comm *cm = ntx_member_of(c, id, fp->comm_id, fp->rank);
  if (fp->dir == NTX_FP_DEV) { /* a device arrival: lateness only, nothing to agree on */
    if (cm && cm->m[fp->rank].state == NTX_M_ACTIVE)
      ntx_late_dev(c, cm, fp->rank, fp->seq, fp->t_ns);
    ntx_resolve(c, w, NTX_REPLY_UNCHECKED, "");
  } else if (!cm)
    ntx_resolve(c, w, NTX_REPLY_UNCHECKED, "");
  else if (fp->dir == NTX_FP_COLL)
    ntx_coll_fp(c, cm, fp, now, w);
  else
    p2p_fp(c, cm, fp, now, w);
}

void ntx_check_fp(struct ntx_check *c, uint32_t id, const struct ntx_fp *fp, double now) {
  route(c, id, fp, now, NULL);
}

static struct ntx_waiter *new_waiter(struct ntx_check *c, struct ntx_req *r) {
  struct ntx_waiter *w = ntr_heap_calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->r = r;
  r->outstanding++;
  c->clients[r->client].waits++;
  return w;
}

void ntx_check_strict(struct ntx_check *c, uint32_t id, uint32_t req_id, const struct ntx_fp *fps,
                      uint32_t n, double now) {
  if (id >= c->lim.max_clients || !c->clients[id].active)
    return;
  struct ntx_check_client *cl = &c->clients[id];
  struct ntx_req *r = NULL;
  if (cl->waits + n + 1 > c->lim.max_waits || !(r = ntr_heap_calloc(1, sizeof *r))) {
    /* too much waiting already: compare, but let the caller go unchecked */
    c->st.waits_refused++;
    for (uint32_t i = 0; i < n; i++)
      route(c, id, &fps[i], now, NULL);
    c->ops.reply(c->ctx, id, req_id, NTX_REPLY_UNCHECKED, "");
    return;
  }
  r->client = id;
  r->gen = cl->gen;
  r->req_id = req_id;
  /* a guard waiter keeps the request open until every entry is placed */
  struct ntx_waiter *guard = new_waiter(c, r);
  if (!guard) {
    ntr_heap_free(r);
    c->ops.reply(c->ctx, id, req_id, NTX_REPLY_UNCHECKED, "");
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    struct ntx_waiter *w = new_waiter(c, r);
    if (!w)
      r->status = NTX_REPLY_UNCHECKED;
    route(c, id, &fps[i], now, w);
  }
  ntx_resolve(c, guard, NTX_REPLY_OK, "");
}

/* ------------------------------------------------------------- timers -- */

static void who(const struct ntx_check *c, const struct ntx_comm *cm, int32_t r, char *b, size_t len) {
  const struct ntx_member *m = &cm->m[r];
  if (m->client >= 0)
    snprintf(b, len, " (host %s, pid %d)", c->clients[m->client].host, (int)c->clients[m->client].pid);
  else
    b[0] = '\0';
}

static void init_wait(struct ntx_check *c, struct ntx_comm *cm, double now) {
  uint8_t *sel = ntr_heap_alloc((size_t)cm->nranks);
  if (!sel)
    return;
  for (int32_t r = 0; r < cm->nranks; r++)
    sel[r] = cm->m[r].state == NTX_M_NONE;
  int32_t first = 0;
  while (first < cm->nranks && !sel[first])
    first++;
  char list[512], text[NTX_TEXT_MAX];
  int n;
  ntx_rank_list(sel, cm->nranks, 1, list, sizeof list, &n);
  snprintf(text, sizeof text,
           "comm %08x init: waiting for rank%s %s (never joined); %u of %d joined, the first %.1f s ago",
           NTX_COMM_SHORT(cm->id), n > 1 ? "s" : "", list, cm->nreg, (int)cm->nranks,
           now - cm->first_reg_t);
  ntx_tell_comm(c, cm, NTX_V_INIT_WAIT, 0, first, n, "init", text);
  cm->init_reported = 1;
  ntr_heap_free(sel);
}

static void skew(struct ntx_check *c, struct ntx_comm *cm, const struct ntx_slot *s, double now) {
  uint8_t *sel = ntr_heap_alloc((size_t)cm->nranks);
  if (!sel)
    return;
  int32_t first = -1;
  uint64_t ahead = 0;
  for (int32_t r = 0; r < cm->nranks; r++) {
    const struct ntx_member *m = &cm->m[r];
    sel[r] = m->state == NTX_M_ACTIVE && m->last_seq < s->seq;
    if (sel[r] && first < 0)
      first = r;
    if (m->last_seq > ahead)
      ahead = m->last_seq;
  }
  cm->skew_reported = s->seq;
  if (first >= 0) {
    char list[512], host[128], text[NTX_TEXT_MAX];
    int n;
    ntx_rank_list(sel, cm->nranks, 1, list, sizeof list, &n);
    who(c, cm, first, host, sizeof host);
    snprintf(text, sizeof text,
             "rank%s %s%s %s %.1f s behind on comm %08x: not reached seq %llu (others are at seq %llu)",
             n > 1 ? "s" : "", list, n > 1 ? "" : host, n > 1 ? "are" : "is", now - s->first_t,
             NTX_COMM_SHORT(cm->id), (unsigned long long)s->seq, (unsigned long long)ahead);
    ntx_tell_comm(c, cm, NTX_V_SKEW, s->seq, first, (int64_t)ahead, "skew", text);
  }
  ntr_heap_free(sel);
}

/* A recv from s that found no send, while s has a send to another rank
 * that found no recv, both alone past grace_s: s (or the receiver) has the
 * wrong peer.  Reported once per comm; the search is bounded. */
static void p2p_wrong_peer(struct ntx_check *c, struct ntx_comm *cm, double now) {
  uint32_t looked = 0;
  for (struct ntx_p2p *a = cm->p2p_head; a && now - a->t >= c->lim.grace_s && looked < 1024; a = a->fnext, looked++) {
    if (a->fp.dir != NTX_FP_RECV)
      continue;
    for (struct ntx_p2p *b = cm->p2p_head; b && now - b->t >= c->lim.grace_s; b = b->fnext) {
      if (b->fp.dir != NTX_FP_SEND || b->src != a->src || b->dst == a->dst)
        continue;
      char ds[160], dr[160], text[NTX_TEXT_MAX];
      ntx_fp_describe(&b->fp, ds, sizeof ds);
      ntx_fp_describe(&a->fp, dr, sizeof dr);
      snprintf(text, sizeof text,
               "p2p mismatch on comm %08x seq %llu field peer: rank %d %s to rank %d vs rank %d %s from "
               "rank %d (neither has a partner after %.1f s)",
               NTX_COMM_SHORT(cm->id), (unsigned long long)a->seq, (int)b->src, ds, (int)b->dst,
               (int)a->dst, dr, (int)a->src, now - (a->t > b->t ? a->t : b->t));
      c->st.p2p_mismatches++;
      cm->p2p_reported = 1;
      ntx_tell_comm(c, cm, NTX_V_P2P_MISMATCH, a->seq, a->src, a->dst, "peer", text);
      ntx_resolve(c, a->waiters, NTX_REPLY_MISMATCH, text);
      ntx_resolve(c, b->waiters, NTX_REPLY_MISMATCH, text);
      a->waiters = b->waiters = NULL;
      return;
    }
  }
}

void ntx_check_tick(struct ntx_check *c, double now) {
  c->now = now;
  for (uint32_t i = 0; i < c->ncomms; i++) {
    struct ntx_comm *cm = c->comms[i];
    ntx_late_tick(c, cm, now);
    if (cm->nreg < (uint32_t)cm->nranks && !cm->init_reported &&
        now - cm->first_reg_t >= c->lim.init_wait_s)
      init_wait(c, cm, now);
    if (cm->p2p_head && !cm->p2p_reported && now - cm->p2p_head->t >= c->lim.grace_s)
      p2p_wrong_peer(c, cm, now);
    if (!cm->win)
      continue;
    struct ntx_slot *s = &cm->win[cm->base & (c->lim.window - 1)];
    if (s->seq != cm->base || s->state != NTX_SLOT_OPEN)
      continue;
    if (s->vs && now - s->first_t >= c->lim.grace_s)
      ntx_check_decide_base(c, cm); /* disagreeing, some ranks not there: say what is known */
    else if (now - s->first_t >= c->lim.skew_s && cm->skew_reported < s->seq)
      skew(c, cm, s, now);
  }
}
