/* straggler.c -- the rank everyone waits for, after the fact
 * (docs/analyze.md, "straggler").
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 *
 * Per communicator whose every rank left evidence, over its last
 * NTA_STRAG_SCAN seqs that every rank issued: each rank's arrival is its call
 * time (host arrival), or its device arrival (the stream reached the start
 * event recorded before the call) when that came later than the watchdog's
 * resolution allows for (DEV_RES_NS): a GPU still busy with earlier work.
 * Times are corrected by each process's clock offset to the coordinator
 * (ring header; none without a coordinator).  Per seq: who came last and by
 * how much after the others (latest - second latest).
 *
 * Over the last `window` seqs (NCCLTRACE_STRAGGLER_WINDOW, 200) -- only seqs
 * with a device arrival of every rank when there are enough of them, since a
 * host that runs ahead of its stream arrives early whatever its GPU does --
 * count the seqs where one rank came NCCLTRACE_STRAGGLER_MS / 2 or more after
 * the others (elsewhere nobody waited, and who was last is chance: a host
 * barrier before the call, an idle stream).  A rank last at >= 75% of those,
 * and at a quarter of the window or more, whose median margin there is >=
 * NCCLTRACE_STRAGGLER_MS (10), is a straggler, unless the clock uncertainty between the hosts is half that
 * margin or more (then it is said, not called).  Any seq where one rank came
 * >= 1 s after the others is a stall, listed with its seq and time.
 * Work: O(scan x ranks) decoded calls, memory O(scan + ranks).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

#define NTA_STRAG_SCAN 8192     /* newest seqs of a comm looked at */
#define MIN_SEQS 20             /* complete seqs before a window is judged */
#define DEV_RES_NS 16000000ull  /* watchdog poll (15 ms) + 1: a device arrival closer to the call is the call */
#define STALL_NS 1000000000ull
#define SLOW_MIN_NS 200000000ull /* a collective that held every rank this long, */
#define SLOW_FACTOR 10           /* ... and this many times the median of its shape, is slow */
#define SLOW_PEERS 4             /* collectives of that shape (op, count) at least, itself included */
#define LATE_FRAC 0.75          /* of the seqs where someone was clearly last */
#define SIG_FRAC 0.5            /* clearly last: by NCCLTRACE_STRAGGLER_MS x this or more */
#define MIN_SHARE 0.25          /* ... at this share of the whole window or more */
#define MIN_LATE 10             /* ... and at this many seqs or more */

struct seqrow {
  uint64_t seq, t_last, margin;
  uint64_t first;               /* earliest arrival */
  uint64_t done_first;          /* earliest completion; 0: some rank's was not seen */
  uint64_t key;                 /* its shape: count << 8 | op (first rank's call) */
  int last;                     /* index into c->ranked */
  int dev;                      /* every rank had a device arrival */
};

static double env_num(const char *name, double dflt, double lo, double hi) {
  const char *v = getenv(name);
  if (!v || !*v)
    return dflt;
  char *end;
  double x = strtod(v, &end);
  return *end || x < lo || x > hi ? dflt : x;
}

static int cmp_dev(const void *a, const void *b) {
  const struct nta_dev *x = a, *y = b;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int64_t offset_of(const struct nta_proc *p) {
  return p->img->hdr.clock_samples ? p->img->hdr.clock_offset_ns : 0;
}

/* The rows of c: seqs every rank issued, newest NTA_STRAG_SCAN.  @return n, -1 no memory. */
static long rows_of(const struct nta_comm *c, struct seqrow **out, int *ndev_rows) {
  int n = c->nranked;
  if (n <= 0)
    return 0;
  uint64_t hi = UINT64_MAX, lo = 0;
  for (int i = 0; i < n; i++) {
    const struct nta_member *m = c->ranked[i];
    if (!m->ncolls)
      return 0;
    uint64_t last = nta_coll_seq(m, m->ncolls - 1);
    if (last < hi)
      hi = last;
  }
  lo = hi > NTA_STRAG_SCAN ? hi - NTA_STRAG_SCAN + 1 : 1;
  uint64_t *idx = calloc((size_t)n, sizeof *idx), *didx = calloc((size_t)n, sizeof *didx);
  struct nta_dev **dev = calloc((size_t)n, sizeof *dev);
  struct seqrow *rows = malloc((size_t)(hi - lo + 1) * sizeof *rows);
  long nr = 0;
  if (!idx || !didx || !dev || !rows)
    goto fail;
  for (int i = 0; i < n; i++) {
    const struct nta_member *m = c->ranked[i];
    idx[i] = nta_coll_upper(m, lo - 1);
    if (m->d->ndev) {
      if (!(dev[i] = malloc((size_t)m->d->ndev * sizeof **dev)))
        goto fail;
      memcpy(dev[i], m->d->dev, (size_t)m->d->ndev * sizeof **dev);
      qsort(dev[i], (size_t)m->d->ndev, sizeof **dev, cmp_dev);
    }
  }
  *ndev_rows = 0;
  for (uint64_t s = lo; s <= hi; s++) {
    struct seqrow r = {.seq = s, .last = -1, .dev = 1};
    uint64_t first = 0, second = 0;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
      const struct nta_member *m = c->ranked[i];
      while (idx[i] < m->ncolls && nta_coll_seq(m, idx[i]) < s)
        idx[i]++;
      if (idx[i] >= m->ncolls || nta_coll_seq(m, idx[i]) != s) {
        ok = 0;
        break;
      }
      struct nta_op o;
      nta_coll_at(m, idx[i], &o);
      uint64_t t = o.t_ns;
      if (!t) {
        ok = 0;
        break;
      }
      while (didx[i] < m->d->ndev && dev[i][didx[i]].seq < s)
        didx[i]++;
      if (didx[i] < m->d->ndev && dev[i][didx[i]].seq == s) {
        uint64_t d = dev[i][didx[i]].t_ns;
        if (d > t + DEV_RES_NS)
          t = d; /* the GPU reached it late: that is when the others could start */
      } else {
        r.dev = 0;
      }
      t -= (uint64_t)offset_of(m->proc);
      uint64_t done = o.done_ns ? o.done_ns - (uint64_t)offset_of(m->proc) : 0;
      if (i == 0)
        r.key = o.count << 8 | (o.op & 0xff);
      if (i == 0 || (r.done_first && (!done || done < r.done_first)))
        r.done_first = done;
      if (r.last < 0 || t > r.t_last) {
        second = r.last < 0 ? t : r.t_last;
        r.t_last = t;
        r.last = i;
      } else if (t > second) {
        second = t;
      }
      if (!first || t < first)
        first = t;
    }
    if (!ok || n < 2)
      continue;
    r.margin = r.t_last - second;
    r.first = first;
    rows[nr++] = r;
    *ndev_rows += r.dev;
  }
  free(idx);
  free(didx);
  for (int i = 0; i < n; i++)
    free(dev[i]);
  free(dev);
  *out = rows;
  return nr;
fail:
  free(idx);
  free(didx);
  for (int i = 0; dev && i < n; i++)
    free(dev[i]);
  free(dev);
  free(rows);
  return -1;
}

/* Clock uncertainty between c's hosts, ms; -1: hosts differ and some clock
 * was never measured (host realtime is then taken as it is). */
static double uncert_ms(const struct nta_comm *c) {
  double u = 0;
  int multi = 0, unmeasured = 0;
  const char *h0 = c->nranked ? c->ranked[0]->proc->img->hdr.host : "";
  for (int i = 0; i < c->nranked; i++) {
    const struct ntr_ring_header *h = &c->ranked[i]->proc->img->hdr;
    multi |= strncmp(h->host, h0, sizeof h->host) != 0;
    if (!h->clock_samples)
      unmeasured = 1;
    else if (h->clock_uncert_ns / 1e6 > u)
      u = h->clock_uncert_ns / 1e6;
  }
  return multi && unmeasured ? -1 : (multi ? 2 * u : 0);
}

static void stalls_of(struct nta_strag *g, const struct nta_comm *c, const struct seqrow *rows, long nr) {
  for (long k = 0; k < nr; k++) {
    if (rows[k].margin < STALL_NS)
      continue;
    if (g->nstalls == NTA_MAX_STALLS) {
      g->more_stalls++;
      continue;
    }
    g->stalls[g->nstalls].seq = rows[k].seq;
    g->stalls[g->nstalls].t_ns = rows[k].t_last;
    g->stalls[g->nstalls].rank = c->ranked[rows[k].last]->rank;
    g->stalls[g->nstalls].late_ms = (double)rows[k].margin / 1e6;
    g->nstalls++;
  }
}

struct held {
  uint64_t key, ns;             /* op and count; first arrival to first completion */
};

static int cmp_held(const void *a, const void *b) {
  const struct held *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return x->ns < y->ns ? -1 : x->ns > y->ns;
}

/* Collectives that held every rank: from the first arrival to the first
 * completion SLOW_MIN_NS or more and SLOW_FACTOR times the median of the
 * comm's collectives of the same op and count or more (a benchmark's 8 GB
 * AllReduce is slow beside its 8-byte ones, and no fault), among rows with
 * every rank's device arrival (a host that ran ahead of its stream would
 * count its queueing) and completion.  At least SLOW_PEERS of that shape
 * are needed.  A rank seconds late is a stall (stalls_of), not this. */
static void slow_of(struct nta_strag *g, const struct nta_comm *c, const struct seqrow *rows, long nr) {
  struct held *h = malloc((size_t)(nr ? nr : 1) * sizeof *h);
  long nh = 0;
  if (!h)
    return;
  for (long k = 0; k < nr; k++)
    if (rows[k].dev && rows[k].done_first > rows[k].first)
      h[nh++] = (struct held){rows[k].key, rows[k].done_first - rows[k].first};
  qsort(h, (size_t)nh, sizeof *h, cmp_held);
  for (long k = 0; k < nr; k++) {
    const struct seqrow *r = &rows[k];
    if (!r->dev || r->done_first <= r->first || r->margin >= STALL_NS)
      continue;
    uint64_t held = r->done_first - r->first;
    if (held < SLOW_MIN_NS)
      continue;
    long lo = 0, hi = nh; /* the rows of its shape: [lo, end) */
    while (lo < hi) {
      long mid = lo + (hi - lo) / 2;
      if (h[mid].key < r->key)
        lo = mid + 1;
      else
        hi = mid;
    }
    long end = lo;
    while (end < nh && h[end].key == r->key)
      end++;
    if (end - lo < SLOW_PEERS)
      continue;
    uint64_t usual = h[lo + (end - lo) / 2].ns;
    if (held < SLOW_FACTOR * usual)
      continue;
    if (g->nslow == NTA_MAX_SLOW) {
      g->more_slow++;
      continue;
    }
    struct nta_slow *w = &g->slow[g->nslow++];
    w->seq = r->seq;
    w->t_ns = r->first;
    w->rank = c->ranked[r->last]->rank;
    w->held_ms = (double)held / 1e6;
    w->usual_ms = (double)usual / 1e6;
    w->last_ms = (double)r->margin / 1e6;
    w->took_ms = r->done_first > r->t_last ? (double)(r->done_first - r->t_last) / 1e6 : 0;
  }
  free(h);
}

enum nta_class nta_strag_class(const struct nta_strag *g) {
  return !g->consistent && !g->nstalls && g->nslow ? NTA_SLOW_COLL : NTA_STRAGGLER;
}

static void judge(struct nta_job *job, const struct nta_comm *c, const struct seqrow *rows, long nr, int ndev) {
  double thr_ms = env_num("NCCLTRACE_STRAGGLER_MS", 10, 0, 3.6e6);
  int window = (int)env_num("NCCLTRACE_STRAGGLER_WINDOW", 200, 20, 4096);
  struct nta_strag g;
  memset(&g, 0, sizeof g);
  g.comm = c;
  g.rank = -1;
  g.uncert_ms = uncert_ms(c);
  stalls_of(&g, c, rows, nr);
  slow_of(&g, c, rows, nr);
  /* the window: the newest `window` rows (device rows only, when enough) */
  int use_dev = ndev >= MIN_SEQS;
  int *cnt = calloc((size_t)c->nranked, sizeof *cnt);
  uint64_t *marg = malloc((size_t)window * sizeof *marg);
  const struct seqrow **win = malloc((size_t)window * sizeof *win);
  int n = 0;
  if (!cnt || !marg || !win)
    goto out;
  for (long k = nr - 1; k >= 0 && n < window; k--)
    if (!use_dev || rows[k].dev)
      win[n++] = &rows[k];
  if (n >= MIN_SEQS && thr_ms > 0) {
    /* Only seqs where someone was clearly last count: a rank is last by
     * chance wherever nobody waited (a host barrier before the call, an
     * idle stream), and those seqs would dilute the share of the one
     * everyone waits for whenever it is late. */
    uint64_t floor_ns = (uint64_t)(thr_ms * 1e6 * SIG_FRAC);
    int nsig = 0, best = 0;
    for (int k = 0; k < n; k++)
      if (win[k]->margin >= floor_ns) {
        cnt[win[k]->last]++;
        nsig++;
      }
    for (int i = 1; i < c->nranked; i++)
      if (cnt[i] > cnt[best])
        best = i;
    int m = 0;
    for (int k = 0; k < n; k++)
      if (win[k]->last == best && win[k]->margin >= floor_ns)
        marg[m++] = win[k]->margin;
    qsort(marg, (size_t)m, sizeof *marg, cmp_u64);
    double med = m ? (double)marg[m / 2] / 1e6 : 0;
    double frac = (double)cnt[best] / n, of_sig = nsig ? (double)cnt[best] / nsig : 0;
    if (cnt[best] >= MIN_LATE && frac >= MIN_SHARE && of_sig >= LATE_FRAC && med >= thr_ms) {
      char hex[17];
      nta_comm_hex(c->id, hex);
      if (g.uncert_ms >= 0 && 2 * g.uncert_ms > med) {
        nta_event_add(job, win[0]->t_last, c->ranked[best]->proc->lrank, "lateness",
                      "comm %s: rank %d looks %.1f ms late, but the clocks of its hosts are uncertain by "
                      "%.1f ms: not called a straggler", hex, c->ranked[best]->rank, med, g.uncert_ms);
      } else {
        g.consistent = 1;
        g.rank = c->ranked[best]->rank;
        g.device = use_dev;
        g.lateness_ms = med;
        g.late_fraction = frac;
        g.window = n;
        g.t_ns = win[0]->t_last;
        const struct ntr_ring_header *h = &c->ranked[best]->proc->img->hdr;
        snprintf(g.summary, sizeof g.summary,
                 "straggler on comm %s: rank %d (%.64s, pid %d) arrived last at %.0f%% of the last %d "
                 "collectives (%.0f%% of those where a rank came %.1f ms or more after the others), median "
                 "%.1f ms after the others (%s arrival)%s",
                 hex, g.rank, h->host, h->pid, 100 * frac, n, 100 * of_sig, thr_ms * SIG_FRAC, med,
                 use_dev ? "device" : "host",
                 g.uncert_ms < 0 ? "; host clocks not measured (no coordinator): taken as they are" : "");
      }
    }
  }
  if (!g.consistent && g.nstalls) {
    char hex[17], list[256] = "";
    nta_comm_hex(c->id, hex);
    size_t o = 0;
    for (int i = 0; i < g.nstalls && o + 64 < sizeof list; i++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%sseq %llu (rank %d, %.2f s)", i ? ", " : "",
                            (unsigned long long)g.stalls[i].seq, g.stalls[i].rank, g.stalls[i].late_ms / 1e3);
    int same = 1;
    for (int i = 1; i < g.nstalls; i++)
      same &= g.stalls[i].rank == g.stalls[0].rank;
    g.rank = same ? g.stalls[0].rank : -1;
    g.lateness_ms = g.stalls[0].late_ms;
    g.t_ns = g.stalls[0].t_ns;
    g.window = (int)nr;
    snprintf(g.summary, sizeof g.summary, "stall%s on comm %s: %s%s arrived seconds after the others at %s%s",
             g.nstalls + g.more_stalls > 1 ? "s" : "", hex, same ? "rank " : "ranks",
             same ? "" : " ", list, g.more_stalls ? " and more" : "");
    if (same) { /* "rank 1 arrived" */
      char tmp[512];
      snprintf(tmp, sizeof tmp, "stall%s on comm %s: rank %d arrived seconds after the others at %s%s",
               g.nstalls + g.more_stalls > 1 ? "s" : "", hex, g.rank, list, g.more_stalls ? " and more" : "");
      snprintf(g.summary, sizeof g.summary, "%s", tmp);
    }
  }
  if (!g.consistent && !g.nstalls && g.nslow) {
    char hex[17];
    nta_comm_hex(c->id, hex);
    const struct nta_slow *w = &g.slow[0];
    g.rank = w->rank;
    g.lateness_ms = w->last_ms;
    g.t_ns = w->t_ns;
    g.window = (int)nr;
    g.device = 1;
    /* Who to look at: the last rank when the wait was mostly for it. */
    const char *why = w->last_ms >= w->took_ms ? "the others waited for it" :
                      "the collective itself took the rest once every rank was there";
    snprintf(g.summary, sizeof g.summary,
             "slow collective on comm %s seq %llu: %.1f ms from the first arrival to the first completion "
             "(usually %.1f ms at that op and count); "
             "rank %d arrived last at the device, %.1f ms after the others, and it took %.1f ms after that: "
             "%s%s", hex, (unsigned long long)w->seq, w->held_ms, w->usual_ms, w->rank, w->last_ms, w->took_ms,
             why, g.nslow + g.more_slow > 1 ? " (and more slow collectives: slow_collectives)" : "");
  }
  if ((g.consistent || g.nstalls || g.nslow) && job->nstrag < NTA_MAX_STRAG)
    job->strag[job->nstrag++] = g;
out:
  free(cnt);
  free(marg);
  free(win);
}

/* The live reports the coordinator made (Straggler events): on the chain,
 * once each (every rank of the comm recorded the same one). */
static void live_events(struct nta_job *job) {
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    for (uint64_t k = 0; k < p->nkeep; k++) {
      const struct ntr_record *r = &p->keep[k];
      if (r->kind != NTR_KIND_STRAGGLER || r->rank != 0)
        continue; /* rank 0 of the comm speaks for all */
      char hex[17];
      nta_comm_hex(r->comm_id, hex);
      size_t tl = strnlen(r->u.text, sizeof r->u.text);
      int dev = tl >= 4 && !memcmp(r->u.text + tl - 4, " dev", 4); /* "last N/M dev" */
      if (!strncmp(r->u.text, "link", 5)) /* lateness.c, link_judge: the host's round trips, not its calls */
        nta_event_add(job, nta_ns(p, r->tsc), p->lrank, "straggler",
                      "live: comm %s rank %d's host has a slow link, round trips %.1f ms longer than the "
                      "other hosts' (seq %llu)", hex, r->peer, (double)r->aux / 1e3, (unsigned long long)r->seq);
      else
        nta_event_add(job, nta_ns(p, r->tsc), p->lrank, "straggler",
                      "live: comm %s rank %d %s, %.1f ms late (seq %llu)", hex, r->peer,
                      strncmp(r->u.text, "stall", 5) ? (dev ? "arrived last at the device" : "arrived last")
                                                     : "stalled",
                      (double)r->aux / 1e3, (unsigned long long)r->seq);
    }
  }
}

static int cmp_strag(const void *a, const void *b) {
  const struct nta_strag *x = a, *y = b;
  if (x->consistent != y->consistent)
    return y->consistent - x->consistent;
  return x->lateness_ms < y->lateness_ms ? 1 : x->lateness_ms > y->lateness_ms ? -1 : 0;
}

void nta_detect_straggler(struct nta_job *job) {
  job->nstrag = 0;
  live_events(job);
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    if (c->nranks < 2 || c->nranked != c->nranks)
      continue;
    struct seqrow *rows = NULL;
    int ndev = 0;
    long nr = rows_of(c, &rows, &ndev);
    if (nr > 0)
      judge(job, c, rows, nr, ndev);
    free(rows);
  }
  qsort(job->strag, (size_t)job->nstrag, sizeof job->strag[0], cmp_strag);
}
