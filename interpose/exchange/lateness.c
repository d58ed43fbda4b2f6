/* lateness.c -- the coordinator's per-communicator lateness statistics
 * (contract: check.h and check_int.h; same thread as the checker).
 *
 * Every collective fingerprint carries its call time (wire v4, the sender's
 * realtime clock); corrected by the sender's clock offset (clocksync.c) it
 * is the rank's arrival on the coordinator's clock.  Per seq the slot keeps
 * the earliest, the latest and the second latest arrival and who was last:
 * O(1) per fingerprint, nothing per rank per seq.  Device arrivals (FP
 * entries of dir NTX_FP_DEV, sent by clients whose watchdog saw a start
 * event; only sampled seqs when NCCLTRACE_START_EVERY > 1) are kept the
 * same way in a small table of their own, by seq modulo NTX_DEVQ: a host
 * that runs ahead of its stream arrives early whatever its GPU does, so a
 * slow GPU shows only there.
 *
 * Per communicator and per kind of arrival (host, device), over the last
 * `straggler_window` seqs at which every rank arrived with a time: who was
 * last and by how much after the others (latest - second latest).  Only
 * seqs where the last came straggler_ms / 2 or more after the others count
 * (elsewhere nobody waited and who was last is chance: a host barrier
 * before the call, an idle stream).  A rank last at >= straggler_frac of
 * those, at a quarter of the window or more (at least MIN_LATE), whose
 * median margin there is at least straggler_ms is a straggler: every
 * member is told, at most every straggler_every_s per comm while it lasts
 * (the same rule as analyze, docs/analyze.md "straggler").  One host
 * arrival stall_s or more after the others is told at once.  Each rank's
 * own median lateness (arrival - earliest arrival seen so far for that seq)
 * is a streaming estimate, one word per member, sent to that rank every
 * lateness_every_s, for `nccltrace status`.
 *
 * A host whose link is slow is named too (link_judge): on the emulator, as
 * on a cluster whose NCCL traffic shares the hosts' network, a delayed
 * link does not make its ranks call late (their call times stay on time,
 * and the clock correction takes the delay out), it makes everything they
 * send arrive late.  The coordinator measures that itself: the clock
 * round trips to each client (clocksync.c, the best of the last 16, so a
 * lost packet's retransmission does not count).  A host whose best round
 * trip exceeds the median of the other hosts' by straggler_ms or more,
 * once every client of the comm has 8 samples, is named with its ranks, at
 * most every straggler_every_s per comm.  Clients of one host only (every
 * single-machine job) are never compared.
 *
 * Cost per fingerprint or device arrival: a few compares and one word
 * updated; per complete seq: one window entry and two counters; the median
 * of a window is computed at most once a second per comm, only while a
 * rank is last at most of the window.  Memory per comm: 16 bytes per
 * window entry, 32 per device table entry (256 of them) and 100 bytes
 * per rank, allocated at its first timed arrival.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/exchange/check_int.h"
#include "recorder/heap.h"

#define MIN_JUDGE 50 /* complete seqs before a window is judged */
#define MIN_LATE 10  /* seqs a straggler was clearly last at, at least */
#define NTX_DEVQ 256 /* device arrivals: seqs in flight per comm */

struct ntx_lwin {      /* one kind of arrival's window */
  uint32_t n, head, nsig;
  int32_t *rank;       /* window entries: who was last */
  uint32_t *late_us;   /* ... and by how much after the others */
  uint32_t *last_cnt;  /* per rank: entries of the window it was last at */
  uint32_t *sig_cnt;   /* ... by straggler_ms / 2 or more (nsig: all such entries) */
  uint64_t last_seq;   /* newest seq entered */
};

struct ntx_ldev {      /* device arrivals at one seq */
  uint64_t seq, t_last, t_second;
  int32_t last_rank;
  uint32_t n;
};

struct ntx_late {
  uint32_t window;
  struct ntx_lwin host, dev;
  struct ntx_ldev *devq; /* NTX_DEVQ, by seq modulo */
  uint32_t *med_us;    /* per rank: running median of its own lateness, us */
  double eval_t, reported_t, told_t, stall_t;
  double link_eval_t, link_t; /* link_judge: last look, last report */
  int dirty;           /* new samples since the last per-rank report */
  int said_clock;
};

static int win_alloc(struct ntx_lwin *w, uint32_t window, size_t nr) {
  w->rank = ntr_heap_calloc(window, sizeof *w->rank);
  w->late_us = ntr_heap_calloc(window, sizeof *w->late_us);
  w->last_cnt = ntr_heap_calloc(nr, sizeof *w->last_cnt);
  w->sig_cnt = ntr_heap_calloc(nr, sizeof *w->sig_cnt);
  return w->rank && w->late_us && w->last_cnt && w->sig_cnt ? 0 : -1;
}

static void win_free(struct ntx_lwin *w) {
  ntr_heap_free(w->rank);
  ntr_heap_free(w->late_us);
  ntr_heap_free(w->last_cnt);
  ntr_heap_free(w->sig_cnt);
}

static struct ntx_late *late_get(struct ntx_check *c, struct ntx_comm *cm) {
  if (cm->late)
    return cm->late;
  struct ntx_late *l = ntr_heap_calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->window = c->lim.straggler_window ? c->lim.straggler_window : 200;
  size_t nr = (size_t)cm->nranks;
  l->med_us = ntr_heap_calloc(nr, sizeof *l->med_us);
  l->devq = ntr_heap_calloc(NTX_DEVQ, sizeof *l->devq);
  if (win_alloc(&l->host, l->window, nr) < 0 || win_alloc(&l->dev, l->window, nr) < 0 || !l->med_us || !l->devq) {
    cm->late = l;
    ntx_late_free(cm);
    return NULL;
  }
  l->reported_t = l->stall_t = l->link_t = -1e30;
  cm->late = l;
  return l;
}

void ntx_late_free(struct ntx_comm *cm) {
  struct ntx_late *l = cm->late;
  if (!l)
    return;
  win_free(&l->host);
  win_free(&l->dev);
  ntr_heap_free(l->devq);
  ntr_heap_free(l->med_us);
  ntr_heap_free(l);
  cm->late = NULL;
}

void ntx_check_client_clock(struct ntx_check *c, uint32_t id, int64_t offset_ns, uint64_t uncert_ns,
                            uint32_t samples) {
  if (id >= c->lim.max_clients || !c->clients[id].active)
    return;
  struct ntx_check_client *cl = &c->clients[id];
  cl->clk_offset = offset_ns;
  cl->clk_uncert = uncert_ns;
  cl->clk_known = 1;
  cl->clk_samples = samples;
  for (uint32_t i = 0; i < cl->ncomms; i++) /* where each fingerprint looks it up */
    if (cl->comms[i].cm && cl->comms[i].rank >= 0 && cl->comms[i].rank < cl->comms[i].cm->nranks)
      cl->comms[i].cm->m[cl->comms[i].rank].clk_offset = offset_ns;
}

void ntx_late_arrive(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s, uint32_t id, int32_t rank,
                     uint64_t t_ns) {
  if (!t_ns || c->lim.straggler_ms <= 0)
    return;
  struct ntx_late *l = late_get(c, cm);
  if (!l)
    return;
  (void)id;
  uint64_t t = t_ns - (uint64_t)cm->m[rank].clk_offset; /* on our clock; wraps consistently */
  if (!s->timed || t < s->t_first)
    s->t_first = t;
  if (!s->timed || t > s->t_last) {
    s->t_second = s->timed ? s->t_last : t;
    s->t_last = t;
    s->last_rank = rank;
  } else if (t > s->t_second || s->timed == 1) {
    s->t_second = t;
  }
  s->timed++;
  /* A streaming median (one word per rank, no history): step towards
   * each sample by a sixteenth of the estimate, at least 50 us; it settles
   * where half the samples fall on each side. */
  uint64_t x = (t - s->t_first) / 1000;
  uint32_t *m = &l->med_us[rank];
  uint32_t step = *m / 16 > 50 ? *m / 16 : 50;
  if (x > *m)
    *m = x - *m < step ? (uint32_t)x : *m + step;
  else if (x < *m)
    *m = *m - x < step ? (uint32_t)x : *m - step;
  l->dirty = 1;
}

static void who(const struct ntx_check *c, const struct ntx_comm *cm, int32_t rank, char *b, size_t len) {
  int32_t id = cm->m[rank].client;
  const struct ntx_check_client *cl = id >= 0 && (uint32_t)id < c->lim.max_clients ? &c->clients[id] : NULL;
  if (!cl || !cl->active)
    snprintf(b, len, "host ?");
  else if (cl->agg)
    snprintf(b, len, "host %s", cl->host);
  else
    snprintf(b, len, "%s, pid %d", cl->host, cl->pid);
}

/* The k-th smallest of v[0..n) (k < n), reordering v: quickselect, in
 * place.  Not qsort: the coordinator's thread must not malloc (glibc's
 * qsort may, recorder/heap.h says why). */
static uint32_t select_kth(uint32_t *v, uint32_t n, uint32_t k) {
  uint32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    uint32_t pivot = v[lo + (hi - lo) / 2], i = lo, j = hi;
    while (i <= j) {
      while (v[i] < pivot)
        i++;
      while (v[j] > pivot)
        j--;
      if (i <= j) {
        uint32_t t = v[i];
        v[i] = v[j];
        v[j] = t;
        i++;
        if (j == 0)
          break;
        j--;
      }
    }
    if (k <= j)
      hi = j;
    else if (k >= i)
      lo = i;
    else
      break;
  }
  return v[k];
}

/* The median margin of rank r over the window's entries it was last at
 * by floor_us or more. */
static uint32_t median_margin(const struct ntx_lwin *w, uint32_t window, int32_t r, uint32_t floor_us) {
  uint32_t v[4096], k = 0, n = w->n < window ? w->n : window;
  for (uint32_t i = 0; i < n && k < 4096; i++)
    if (w->rank[i] == r && w->late_us[i] >= floor_us)
      v[k++] = w->late_us[i];
  if (!k)
    return 0;
  return select_kth(v, k, k / 2);
}

static uint32_t sig_floor_us(const struct ntx_check *c) {
  return (uint32_t)(c->lim.straggler_ms * 500.0);
}

static uint64_t uncert_of(const struct ntx_check *c, const struct ntx_comm *cm, int32_t r) {
  int32_t id = cm->m[r].client;
  return id >= 0 && (uint32_t)id < c->lim.max_clients ? c->clients[id].clk_uncert : 0;
}

static void judge(struct ntx_check *c, struct ntx_comm *cm, struct ntx_late *l, const struct ntx_lwin *win,
                  int32_t r, double now, int dev) {
  uint32_t n = win->n < l->window ? win->n : l->window, k = win->sig_cnt[r];
  if (n < (l->window < MIN_JUDGE ? l->window : MIN_JUDGE) || k < MIN_LATE || 4 * k < n ||
      (double)k < c->lim.straggler_frac * win->nsig)
    return;
  if (now - l->eval_t < 1.0 || now - l->reported_t < c->lim.straggler_every_s)
    return;
  l->eval_t = now;
  uint32_t med = median_margin(win, l->window, r, sig_floor_us(c));
  if ((double)med < c->lim.straggler_ms * 1000.0)
    return;
  char text[NTX_TEXT_MAX], w[NTX_HOST + 32];
  /* Two clocks meet in each margin: an uncertainty of half the margin or
   * more could have made it (docs/analyze.md, clocks). */
  uint64_t unc_us = 0;
  for (int32_t q = 0; q < cm->nranks; q++) {
    uint64_t u = uncert_of(c, cm, q) / 1000;
    if (u > unc_us)
      unc_us = u;
  }
  unc_us += uncert_of(c, cm, r) / 1000;
  if (unc_us * 2 > med) {
    if (!l->said_clock) {
      l->said_clock = 1;
      snprintf(text, sizeof text, "lateness on comm %08x: rank %d looks late by %.1f ms, but the clock "
               "uncertainty between hosts is %.1f ms: not named a straggler", NTX_COMM_SHORT(cm->id), r,
               med / 1000.0, unc_us / 1000.0);
      ntx_tell_comm(c, cm, NTX_V_NOTE, win->last_seq, r, 0, "lateness", text);
    }
    return;
  }
  l->reported_t = now;
  c->st.stragglers++;
  who(c, cm, r, w, sizeof w);
  snprintf(text, sizeof text, "straggler on comm %08x: rank %d (%s) arrived last%s at %.0f%% of the last %u "
           "collectives, median %.1f ms after the others", NTX_COMM_SHORT(cm->id), r, w,
           dev ? " at the device" : "", 100.0 * k / n, n, med / 1000.0);
  char field[NTX_FIELD];
  snprintf(field, sizeof field, "last %u/%u%s", k, n, dev ? " dev" : "");
  ntx_tell_comm(c, cm, NTX_V_STRAGGLER, win->last_seq, r, med, field, text);
}

/* Enter one complete seq into a window: who was last, margin us. */
static void win_add(const struct ntx_check *c, struct ntx_late *l, struct ntx_lwin *w, uint64_t seq, int32_t last,
                    uint32_t us) {
  uint32_t i = w->head, floor = sig_floor_us(c);
  if (w->n >= l->window) {
    w->last_cnt[w->rank[i]]--;
    if (w->late_us[i] >= floor) {
      w->sig_cnt[w->rank[i]]--;
      w->nsig--;
    }
  }
  w->rank[i] = last;
  w->late_us[i] = us;
  w->last_cnt[last]++;
  if (us >= floor) {
    w->sig_cnt[last]++;
    w->nsig++;
  }
  w->head = (i + 1) % l->window;
  w->n++;
  if (seq > w->last_seq)
    w->last_seq = seq;
}

static uint32_t to_us(uint64_t d) {
  return d / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(d / 1000);
}

void ntx_late_dev(struct ntx_check *c, struct ntx_comm *cm, int32_t rank, uint64_t seq, uint64_t t_ns) {
  if (!t_ns || !seq || c->lim.straggler_ms <= 0 || cm->nranks < 2)
    return;
  struct ntx_late *l = late_get(c, cm);
  if (!l)
    return;
  struct ntx_ldev *e = &l->devq[seq % NTX_DEVQ];
  if (seq < e->seq)
    return; /* its slot went to a newer seq: this one never completed in time */
  if (seq > e->seq) /* a seq some rank never sampled is dropped here */
    *e = (struct ntx_ldev){.seq = seq};
  if (e->n >= (uint32_t)cm->nranks)
    return; /* complete already: a repeat */
  uint64_t t = t_ns - (uint64_t)cm->m[rank].clk_offset; /* on our clock; wraps consistently */
  if (!e->n || t > e->t_last) {
    e->t_second = e->n ? e->t_last : t;
    e->t_last = t;
    e->last_rank = rank;
  } else if (t > e->t_second || e->n == 1) {
    e->t_second = t;
  }
  if (++e->n < (uint32_t)cm->nranks)
    return;
  win_add(c, l, &l->dev, seq, e->last_rank, to_us(e->t_last - e->t_second));
  judge(c, cm, l, &l->dev, e->last_rank, c->now, 1);
}

void ntx_late_decided(struct ntx_check *c, struct ntx_comm *cm, struct ntx_slot *s) {
  struct ntx_late *l = cm->late;
  if (!l || s->timed < (uint32_t)cm->nranks || cm->nranks < 2)
    return;
  c->st.timed++;
  uint32_t us = to_us(s->t_last - s->t_second);
  win_add(c, l, &l->host, s->seq, s->last_rank, us);
  if ((double)us >= c->lim.stall_s * 1e6 && (double)us >= c->lim.straggler_ms * 1000.0) {
    char text[NTX_TEXT_MAX], w[NTX_HOST + 32];
    who(c, cm, s->last_rank, w, sizeof w);
    c->st.stalls++;
    snprintf(text, sizeof text, "straggler on comm %08x: rank %d (%s) arrived %.2f s after the others at "
             "seq %llu (one long stall)", NTX_COMM_SHORT(cm->id), s->last_rank, w, us / 1e6,
             (unsigned long long)s->seq);
    ntx_tell_comm(c, cm, NTX_V_STRAGGLER, s->seq, s->last_rank, us, "stall", text);
    return;
  }
  judge(c, cm, l, &l->host, s->last_rank, c->now, 0);
}

#define LINK_SAMPLES 8 /* round trips per client before its link is judged */

static const struct ntx_check_client *client_of(const struct ntx_check *c, const struct ntx_comm *cm, int32_t r) {
  int32_t id = cm->m[r].client;
  return id >= 0 && (uint32_t)id < c->lim.max_clients && c->clients[id].active ? &c->clients[id] : NULL;
}

/* The host whose link is slow (the header says why round trips): at most
 * once a second per comm, O(members). */
static void link_judge(struct ntx_check *c, struct ntx_comm *cm, struct ntx_late *l, double now) {
  if (now - l->link_eval_t < 1.0 || now - l->link_t < c->lim.straggler_every_s)
    return;
  l->link_eval_t = now;
  const struct ntx_check_client *w = NULL;
  int32_t wr = -1;
  for (int32_t r = 0; r < cm->nranks; r++) {
    const struct ntx_check_client *cl = client_of(c, cm, r);
    if (cm->m[r].state != NTX_M_ACTIVE || !cl)
      continue;
    if (!cl->clk_known || cl->clk_samples < LINK_SAMPLES)
      return; /* not every link measured yet */
    if (!w || cl->clk_uncert > w->clk_uncert) {
      w = cl;
      wr = r;
    }
  }
  if (!w)
    return;
  uint32_t v[4096], k = 0;
  for (int32_t r = 0; r < cm->nranks && k < 4096; r++) {
    const struct ntx_check_client *cl = client_of(c, cm, r);
    if (cm->m[r].state == NTX_M_ACTIVE && cl && strcmp(cl->host, w->host))
      v[k++] = (uint32_t)(cl->clk_uncert / 500 > UINT32_MAX ? UINT32_MAX : cl->clk_uncert / 500); /* round trip, us */
  }
  if (!k)
    return; /* one host: no other link to compare with */
  uint32_t others = select_kth(v, k, k / 2), mine = (uint32_t)(w->clk_uncert / 500);
  if (mine < others || (double)(mine - others) < c->lim.straggler_ms * 1000.0)
    return;
  l->link_t = now;
  c->st.stragglers++;
  char ranks[160] = "", text[NTX_TEXT_MAX], field[NTX_FIELD];
  size_t n = 0;
  int nr = 0;
  for (int32_t r = 0; r < cm->nranks; r++) {
    const struct ntx_check_client *cl = client_of(c, cm, r);
    if (!cl || strcmp(cl->host, w->host) || cm->m[r].state != NTX_M_ACTIVE)
      continue;
    if (n + 16 >= sizeof ranks) {
      snprintf(ranks + n, sizeof ranks - n, ",...");
      break;
    }
    n += (size_t)snprintf(ranks + n, sizeof ranks - n, "%s%d", nr ? "," : "", r);
    nr++;
  }
  snprintf(text, sizeof text, "straggler on comm %08x: host %s (rank%s %s): its link is slow, a round trip "
           "to the coordinator takes %.1f ms, %.1f ms from the other hosts (median): what it sends "
           "arrives late", NTX_COMM_SHORT(cm->id), w->host, nr > 1 ? "s" : "", ranks, mine / 1000.0,
           others / 1000.0);
  snprintf(field, sizeof field, "link");
  ntx_tell_comm(c, cm, NTX_V_STRAGGLER, l->host.last_seq, wr, mine - others, field, text);
}

/* Each member's median lateness, to its own client (its ring's comm state). */
void ntx_late_tick(struct ntx_check *c, struct ntx_comm *cm, double now) {
  struct ntx_late *l = cm->late;
  if (l && c->lim.straggler_ms > 0)
    link_judge(c, cm, l, now);
  if (!l || !l->dirty || now - l->told_t < c->lim.lateness_every_s)
    return;
  l->told_t = now;
  l->dirty = 0;
  uint32_t n = l->host.n < l->window ? l->host.n : l->window;
  for (int32_t r = 0; r < cm->nranks; r++) {
    const struct ntx_member *m = &cm->m[r];
    if (m->state != NTX_M_ACTIVE || m->client < 0)
      continue;
    int64_t med = l->med_us[r];
    uint64_t seq = (uint64_t)n << 32 | l->host.last_cnt[r];
    c->ops.verdict(c->ctx, (uint32_t)m->client, NTX_V_LATENESS, cm->id, seq, r, med, "", "");
  }
}

void ntx_late_of(const struct ntx_comm *cm, int32_t rank, uint32_t *med_us, uint32_t *last, uint32_t *n) {
  const struct ntx_late *l = cm->late;
  *med_us = *last = *n = 0;
  if (!l || rank < 0 || rank >= cm->nranks)
    return;
  *med_us = l->med_us[rank];
  *last = l->host.last_cnt[rank];
  *n = l->host.n < l->window ? l->host.n : l->window;
}
