/* fr.c -- PyTorch Flight Recorder dumps as evidence (tools/fr/fr.h;
 * docs/analyze.md "PyTorch Flight Recorder dumps").
 *
 * Alone (no dump or ring of ours in the job), nta_fr_detect gives the
 * verdict from FR fields, in the same classes as ours, per process group
 * (pg_config: its global ranks; a member is the dump whose file name ends
 * in its rank):
 *   collective_mismatch  the lowest collective_seq_id where the members'
 *                        entries differ: op (profiling_name), count
 *                        (elements over input_sizes), dtype (input_dtypes);
 *                        the ranks of the smaller variants are named
 *   missing_collective   some members issued seq s, others never did; or
 *                        every member with a dump waits at s and some pg
 *                        ranks left no dump (or an unreadable one)
 *   p2p_mismatch         sends and receives matched per peer pair, in
 *                        p2p_seq_id order: count or dtype differs, or a
 *                        send no receive of its peer matches
 *   stall                every member issued s and some never completed it;
 *                        "timed out" when FR's own timeout_ms had passed
 *                        when the dump was written (file mtime)
 *   straggler            only when nothing else: the rank last to call
 *                        (time_created_ns) at >= 75% of the last seqs every
 *                        member completed, by a median >= 10 ms
 * FR records no reduction op and no root: a verdict that a redop or root
 * difference would change says it cannot tell.
 *
 * Beside our dumps (nta_fr_merge): our analysis gives the verdict, and every
 * FR entry near it joins the one evidence timeline, marked source
 * "torch-fr".  Both clocks are the host's wall clock in ns (FR:
 * c10::getTime, system_clock; ours: each image's tsc mapped to CLOCK_REALTIME
 * by its header), so on one host they need no alignment; across hosts they
 * differ by the hosts' clock offset, as ours do.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tools/analyze/analyze.h"
#include "tools/fr/fr.h"
#include "tools/ntt.h"

#define SRC "torch-fr"
#define STRAG_WINDOW 200
#define STRAG_MIN 20
#define STRAG_MS 10.0
#define MERGE_SHOWN 16              /* FR entries per rank put in a merged timeline */

struct mem {
  int grank;                        /* global rank */
  const struct ntf_dump *d;         /* NULL: no dump */
  const struct ntf_pg *pg;
  int *coll, ncoll;                 /* indices into d->e: the group's collectives */
  int *p2p, np2p;
  uint64_t issued, completed, oldest;
};

struct grp {
  const struct ntf_pg *pg;          /* as the first dump that has it says */
  struct mem *m;
  int n;
};

/* Summaries are cut at their buffer: the parts come from the input. */
static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

static const struct ntf_entry *ent(const struct mem *m, int i) {
  return &m->d->e[i];
}

static const struct ntf_entry *coll_at(const struct mem *m, uint64_t s) {
  for (int i = 0; i < m->ncoll; i++)
    if (ent(m, m->coll[i])->coll_seq == s)
      return ent(m, m->coll[i]);
  return NULL;
}

static const struct ntf_dump *dump_of(const struct nta_job *job, int r) {
  const struct ntf_dump *best = NULL;
  for (int i = 0; i < job->nfr; i++)
    if (job->fr[i].rank == r && (!best || job->fr[i].mtime_ns > best->mtime_ns))
      best = &job->fr[i];
  return best;
}

/* " at faults.py:125 in warmup", "" without frames. */
static void site(const struct ntf_entry *e, char *buf, size_t len) {
  buf[0] = 0;
  if (!e || !e->nframes)
    return;
  const char *f = strrchr(e->frames[0].file, '/');
  /* a longer site is cut, never an error: the output is bounded by len */
  int n = snprintf(buf, len, " at %.110s:%d in %.60s", f ? f + 1 : e->frames[0].file, e->frames[0].line,
                   e->frames[0].func);
  if (n < 0)
    buf[0] = 0;
}

static void describe(const struct ntf_entry *e, char *buf, size_t len) {
  char cnt[32] = "?";
  if (e->in_numel >= 0)
    snprintf(cnt, sizeof cnt, "%lld", (long long)e->in_numel);
  snprintf(buf, len, "%s(count=%s, %s)", e->op, cnt, e->dtype[0] ? e->dtype : "dtype ?");
}

static const char *state_name(const struct ntf_entry *e) {
  return e->state == NTF_COMPLETED ? "completed" : e->state == NTF_STARTED ? "started, never completed"
                                                                           : "never started";
}

static void ev_entry(struct nta_job *job, const struct grp *g, const struct mem *m, const struct ntf_entry *e,
                     const char *note) {
  char d[160], at[256];
  describe(e, d, sizeof d);
  site(e, at, sizeof at);
  nta_event_add_src(job, e->t_created, m->grank, "call", SRC, "pg %.20s rank %d seq %llu: %s%s (%s)%s", g->pg->name,
                    m->grank, (unsigned long long)(e->is_p2p ? e->p2p_seq : e->coll_seq), d, at, state_name(e),
                    note);
}

static void set_stack(struct nta_job *job, const struct ntf_entry *e) {
  job->v.fr_nstack = 0;
  for (int i = 0; e && i < e->nframes && i < NTA_FR_STACK; i++)
    snprintf(job->v.fr_stack[i], sizeof job->v.fr_stack[i], "%s:%d %s", e->frames[i].file, e->frames[i].line,
             e->frames[i].func);
  job->v.fr_nstack = e ? (e->nframes < NTA_FR_STACK ? e->nframes : NTA_FR_STACK) : 0;
}

static void verdict(struct nta_job *job, enum nta_class cls, const struct grp *g, uint64_t seq, const char *field,
                    const int *ranks, int nr, uint64_t t) {
  struct nta_verdict *v = &job->v;
  v->cls = cls;
  v->seq = seq;
  snprintf(v->field, sizeof v->field, "%s", field ? field : "");
  snprintf(v->pg, sizeof v->pg, "%s", g ? g->pg->name : "");
  v->nranks = 0;
  for (int i = 0; i < nr && v->nranks < NTA_MAX_VRANKS; i++)
    v->ranks[v->nranks++] = ranks[i];
  v->t_ns = t;
}

/* ---------------------------------------------------------- groups -- */

static void groups_free(struct grp *g, int n) {
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < g[i].n; k++) {
      free(g[i].m[k].coll);
      free(g[i].m[k].p2p);
    }
    free(g[i].m);
  }
  free(g);
}

static int build(const struct nta_job *job, struct grp **out) {
  struct grp *g = NULL;
  int n = 0;
  for (int i = 0; i < job->nfr; i++)
    for (int k = 0; k < job->fr[i].npgs; k++) {
      const struct ntf_pg *p = &job->fr[i].pgs[k];
      int j = 0;
      while (j < n && strcmp(g[j].pg->name, p->name))
        j++;
      if (j < n || !p->nranks)
        continue;
      struct grp *ng = realloc(g, (size_t)(n + 1) * sizeof(*g));
      if (!ng)
        break;
      g = ng;
      g[n].pg = p;
      g[n].n = p->nranks;
      g[n].m = calloc((size_t)p->nranks, sizeof(struct mem));
      if (!g[n].m)
        break;
      n++;
    }
  for (int j = 0; j < n; j++)
    for (int k = 0; k < g[j].n; k++) {
      struct mem *m = &g[j].m[k];
      m->grank = g[j].pg->ranks[k];
      m->d = dump_of(job, m->grank);
      if (!m->d)
        continue;
      for (int q = 0; q < m->d->npgs; q++)
        if (!strcmp(m->d->pgs[q].name, g[j].pg->name))
          m->pg = &m->d->pgs[q];
      m->coll = calloc((size_t)m->d->ne + 1, sizeof(int));
      m->p2p = calloc((size_t)m->d->ne + 1, sizeof(int));
      if (!m->coll || !m->p2p)
        continue;
      m->oldest = UINT64_MAX;
      for (int e = 0; e < m->d->ne; e++) {
        const struct ntf_entry *x = &m->d->e[e];
        if (strcmp(x->pg_name, g[j].pg->name))
          continue;
        if (x->is_p2p) {
          m->p2p[m->np2p++] = e;
          continue;
        }
        m->coll[m->ncoll++] = e;
        if (x->coll_seq > m->issued)
          m->issued = x->coll_seq;
        if (x->coll_seq < m->oldest)
          m->oldest = x->coll_seq;
        if (x->state == NTF_COMPLETED && x->coll_seq > m->completed)
          m->completed = x->coll_seq;
      }
      if (m->pg && m->pg->has_status) {
        if (m->pg->last_enqueued > 0 && (uint64_t)m->pg->last_enqueued > m->issued)
          m->issued = (uint64_t)m->pg->last_enqueued;
        if (m->pg->last_completed > 0 && (uint64_t)m->pg->last_completed > m->completed)
          m->completed = (uint64_t)m->pg->last_completed;
      }
    }
  *out = g;
  return n;
}

/* ----------------------------------------------------------- checks -- */

static const char *diff(const struct ntf_entry *a, const struct ntf_entry *b) {
  if (strcmp(a->op, b->op))
    return "op";
  if (a->in_numel != b->in_numel)
    return "count";
  if (strcmp(a->dtype, b->dtype))
    return "dtype";
  return NULL;
}

static const char *NO_REDOP =
    " (Flight Recorder records no reduction op and no root: a difference in either is not seen here)";

/* @return 1 when a verdict was given. */
static int check_mismatch(struct nta_job *job, const struct grp *g) {
  uint64_t lo = 1, hi = UINT64_MAX;
  int np = 0;
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (!m->d || !m->ncoll)
      continue;
    np++;
    if (m->oldest > lo)
      lo = m->oldest;
    if (m->issued < hi)
      hi = m->issued;
  }
  if (np < 2)
    return 0;
  for (uint64_t s = lo; s <= hi && s - lo < (1u << 20); s++) {
    const struct ntf_entry *es[NTA_MAX_VRANKS];
    int var[NTA_MAX_VRANKS], nvar = 0, cnt[NTA_MAX_VRANKS] = {0}, nk = 0, idx[NTA_MAX_VRANKS];
    const struct ntf_entry *rep[NTA_MAX_VRANKS];
    for (int k = 0; k < g->n && nk < NTA_MAX_VRANKS; k++) {
      if (!g->m[k].d || !g->m[k].ncoll)
        continue;
      const struct ntf_entry *e = coll_at(&g->m[k], s);
      if (!e)
        continue;
      int v = 0;
      while (v < nvar && diff(rep[v], e))
        v++;
      if (v == nvar)
        rep[nvar++] = e;
      cnt[v]++;
      es[nk] = e;
      var[nk] = v;
      idx[nk++] = k;
    }
    if (nvar < 2)
      continue;
    int big = 0;
    for (int v = 1; v < nvar; v++)
      if (cnt[v] > cnt[big])
        big = v;
    int tie = 0;
    for (int v = 0; v < nvar; v++)
      tie += v != big && cnt[v] == cnt[big];
    int odd = big == 0 ? 1 : 0;
    const char *f = diff(rep[big], rep[odd]);
    int r[NTA_MAX_VRANKS] = {0}, nr = 0, ro[NTA_MAX_VRANKS] = {0}, no = 0;
    uint64_t t = 0;
    for (int i = 0; i < nk; i++) {
      if (!t || (es[i]->t_created && es[i]->t_created < t))
        t = es[i]->t_created;
      if (tie || var[i] != big)
        r[nr++] = g->m[idx[i]].grank;
      else
        ro[no++] = g->m[idx[i]].grank;
    }
    verdict(job, NTA_COLL_MISMATCH, g, s, f, r, nr, t);
    char a[160], b[160], ra[256], rb[256], at[256];
    const struct ntf_entry *odd_e = NULL;
    for (int i = 0; i < nk; i++)
      if (var[i] != big && !odd_e)
        odd_e = es[i];
    describe(odd_e, a, sizeof a);
    describe(rep[big], b, sizeof b);
    site(odd_e, at, sizeof at);
    nta_rank_list(r, nr, ra, sizeof ra);
    nta_rank_list(ro, no, rb, sizeof rb);
    if (tie)
      say(job->v.summary, sizeof job->v.summary,
               "collective mismatch on process group %s (%s) seq %llu: %s %s disagree, with no majority: one "
               "called %s%s, another %s (%s differs)",
               g->pg->name, g->pg->desc, (unsigned long long)s, nta_plural(nr), ra, a, at, b, f);
    else
      say(job->v.summary, sizeof job->v.summary,
               "collective mismatch on process group %s (%s) seq %llu: %s %s called %s%s while %s %s called %s "
               "(%s differs)",
               g->pg->name, g->pg->desc, (unsigned long long)s, nta_plural(nr), ra, a, at, nta_plural(no), rb, b,
               f);
    set_stack(job, odd_e);
    for (int i = 0; i < nk; i++)
      ev_entry(job, g, &g->m[idx[i]], es[i], "");
    say(job->v.next, sizeof job->v.next,
             "fix the call at the site named: every rank of process group %s must issue the same collectives in "
             "the same order with the same sizes and dtypes",
             g->pg->name);
    return 1;
  }
  return 0;
}

static int check_missing(struct nta_job *job, const struct grp *g) {
  uint64_t lo = UINT64_MAX, hi = 0, maxdone = 0;
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (!m->d)
      continue;
    if (m->issued < lo)
      lo = m->issued;
    if (m->issued > hi)
      hi = m->issued;
    if (m->completed > maxdone)
      maxdone = m->completed;
  }
  if (lo == UINT64_MAX)
    return 0;
  int r[NTA_MAX_VRANKS] = {0}, nr = 0, w[NTA_MAX_VRANKS] = {0}, nw = 0;
  uint64_t s;
  const struct ntf_entry *first = NULL;
  if (hi > lo) {
    s = lo + 1;
    for (int k = 0; k < g->n; k++) {
      const struct mem *m = &g->m[k];
      if (!m->d)
        continue;
      if (m->issued < s) {
        if (nr < NTA_MAX_VRANKS)
          r[nr++] = m->grank;
        continue;
      }
      const struct ntf_entry *e = coll_at(m, s);
      if (e && (!first || e->t_created < first->t_created))
        first = e;
      if (nw < NTA_MAX_VRANKS)
        w[nw++] = m->grank;
    }
  } else {
    /* everyone with a dump agrees: the ranks without one never came */
    s = maxdone + 1;
    if (s > hi)
      return 0;
    for (int k = 0; k < g->n; k++) {
      const struct mem *m = &g->m[k];
      if (!m->d) {
        if (nr < NTA_MAX_VRANKS)
          r[nr++] = m->grank;
        continue;
      }
      const struct ntf_entry *e = coll_at(m, s);
      if (e && (!first || e->t_created < first->t_created))
        first = e;
      if (nw < NTA_MAX_VRANKS)
        w[nw++] = m->grank;
    }
    if (!nr)
      return 0;
  }
  verdict(job, NTA_MISSING_COLL, g, s, NULL, r, nr, first ? first->t_created : 0);
  char d[160] = "it", at[256] = "", rm[256], rw[256], last[640] = "";
  if (first) {
    describe(first, d, sizeof d);
    site(first, at, sizeof at);
  }
  nta_rank_list(r, nr, rm, sizeof rm);
  nta_rank_list(w, nw, rw, sizeof rw);
  const struct ntf_entry *culprit_last = NULL;
  if (hi > lo) {
    for (int k = 0; k < g->n && !culprit_last; k++) {
      const struct mem *m = &g->m[k];
      if (m->d && m->issued < s && m->ncoll)
        culprit_last = ent(m, m->coll[m->ncoll - 1]);
    }
    if (culprit_last) {
      char cd[160], cat[200];
      describe(culprit_last, cd, sizeof cd);
      site(culprit_last, cat, sizeof cat);
      say(last, sizeof last, "; its last collective there was #%llu %s%s",
               (unsigned long long)culprit_last->coll_seq, cd, cat);
    }
    say(job->v.summary, sizeof job->v.summary,
             "missing collective on process group %s (%s) seq %llu: %s %s never issued it while %s %s issued %s%s "
             "and waited%s",
             g->pg->name, g->pg->desc, (unsigned long long)s, nta_plural(nr), rm, nta_plural(nw), rw, d, at, last);
  } else {
    say(job->v.summary, sizeof job->v.summary,
             "missing collective on process group %s (%s) seq %llu: %s %s left no Flight Recorder dump (no "
             "evidence: crashed, killed, or its dump was not kept) while %s %s issued %s%s and waited",
             g->pg->name, g->pg->desc, (unsigned long long)s, nta_plural(nr), rm, nta_plural(nw), rw, d, at);
  }
  set_stack(job, culprit_last ? culprit_last : first);
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (!m->d) {
      nta_event_add_src(job, 0, m->grank, "no_evidence", SRC, "rank %d of pg %.20s left no Flight Recorder dump",
                        m->grank, g->pg->name);
      continue;
    }
    const struct ntf_entry *e = coll_at(m, s);
    if (e)
      ev_entry(job, g, m, e, "");
    else if (m->ncoll)
      ev_entry(job, g, m, ent(m, m->coll[m->ncoll - 1]), " (its last collective)");
  }
  say(job->v.next, sizeof job->v.next,
           "look at what rank%s %s did instead of seq %llu (its Python site above, its log); the others wait for it",
           nr == 1 ? "" : "s", rm, (unsigned long long)s);
  return 1;
}

/* Send/recv per peer pair, k-th with k-th (p2p_seq_id order on each side).
 * PyTorch's own analyzer matches by collective_seq_id, which p2p ops do not
 * advance: unbatched sends and receives would all look alike to it. */
static int check_p2p(struct nta_job *job, const struct grp *g) {
  for (int ka = 0; ka < g->n; ka++) {
    const struct mem *a = &g->m[ka];
    if (!a->d)
      continue;
    for (int kb = 0; kb < g->n; kb++) {
      const struct mem *b = &g->m[kb];
      if (kb == ka || !b->d)
        continue;
      int j = 0;
      for (int i = 0; i < a->np2p; i++) {
        const struct ntf_entry *s = ent(a, a->p2p[i]);
        if (s->p2p_dir != 0 || s->peer != b->grank)
          continue;
        const struct ntf_entry *rv = NULL;
        for (; j < b->np2p && !rv; j++) {
          const struct ntf_entry *x = ent(b, b->p2p[j]);
          if (x->p2p_dir == 1 && x->peer == a->grank)
            rv = x;
        }
        const char *f = NULL;
        if (rv)
          f = s->in_numel != rv->in_numel ? "count" : strcmp(s->dtype, rv->dtype) ? "dtype" : NULL;
        else if (s->state != NTF_COMPLETED)
          f = "peer";
        if (!f)
          continue;
        int r[2] = {a->grank, b->grank};
        verdict(job, NTA_P2P_MISMATCH, g, s->p2p_seq, f, r, 2, s->t_created);
        char ds[160], dr[160] = "", at[256], atr[256] = "";
        describe(s, ds, sizeof ds);
        site(s, at, sizeof at);
        if (rv) {
          describe(rv, dr, sizeof dr);
          site(rv, atr, sizeof atr);
          say(job->v.summary, sizeof job->v.summary,
                   "p2p mismatch on process group %s (%s): rank %d's send to rank %d is %s%s but rank %d's "
                   "matching receive is %s%s (%s differs)",
                   g->pg->name, g->pg->desc, a->grank, b->grank, ds, at, b->grank, dr, atr, f);
        } else {
          say(job->v.summary, sizeof job->v.summary,
                   "p2p mismatch on process group %s (%s): rank %d's send to rank %d (%s%s) has no matching "
                   "receive on rank %d, and never completed",
                   g->pg->name, g->pg->desc, a->grank, b->grank, ds, at, b->grank);
        }
        set_stack(job, s);
        ev_entry(job, g, a, s, "");
        if (rv)
          ev_entry(job, g, b, rv, "");
        say(job->v.next, sizeof job->v.next,
                 "make rank %d's send and rank %d's receive agree (sizes, dtype, and one receive per send)",
                 a->grank, b->grank);
        return 1;
      }
    }
  }
  return 0;
}

static int check_stall(struct nta_job *job, const struct grp *g) {
  uint64_t s = UINT64_MAX;
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (m->d && m->issued > m->completed && m->completed + 1 < s)
      s = m->completed + 1;
  }
  if (s == UINT64_MAX)
    return 0;
  int r[NTA_MAX_VRANKS], nr = 0, nd = 0;
  const struct ntf_entry *first = NULL;
  int timed_out = 0;
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (!m->d)
      continue;
    const struct ntf_entry *e = coll_at(m, s);
    if (e && (!first || e->t_created < first->t_created))
      first = e;
    if (m->completed >= s)
      nd++;
    else if (nr < NTA_MAX_VRANKS)
      r[nr++] = m->grank;
    if (e && e->timeout_ms > 0 && e->t_created && m->d->mtime_ns &&
        m->d->mtime_ns >= e->t_created + (uint64_t)e->timeout_ms * 1000000ull)
      timed_out = 1;
  }
  verdict(job, NTA_STALL, g, s, NULL, r, nr, first ? first->t_created : 0);
  char d[160] = "it", at[256] = "", rl[256];
  if (first) {
    describe(first, d, sizeof d);
    site(first, at, sizeof at);
  }
  nta_rank_list(r, nr, rl, sizeof rl);
  char to[96] = "";
  if (timed_out)
    snprintf(to, sizeof to, "; it timed out (timeout %lld ms)", (long long)first->timeout_ms);
  if (nd)
    say(job->v.summary, sizeof job->v.summary,
             "stall on process group %s (%s) seq %llu: every rank issued %s%s; %s %s never completed it while %d "
             "did%s%s",
             g->pg->name, g->pg->desc, (unsigned long long)s, d, at, nta_plural(nr), rl, nd, to, NO_REDOP);
  else
    say(job->v.summary, sizeof job->v.summary,
             "stall on process group %s (%s) seq %llu: every rank issued %s%s and none completed it%s; the FR "
             "evidence cannot tell which rank's device never arrived%s",
             g->pg->name, g->pg->desc, (unsigned long long)s, d, at, to, NO_REDOP);
  set_stack(job, first);
  for (int k = 0; k < g->n; k++) {
    const struct ntf_entry *e = g->m[k].d ? coll_at(&g->m[k], s) : NULL;
    if (e)
      ev_entry(job, g, &g->m[k], e, "");
  }
  say(job->v.next, sizeof job->v.next,
           "run with nccltrace (LD_PRELOAD or nccltrace run) for the reduction op, root and device arrivals "
           "FR does not record; look at the GPU%s of rank%s %s",
           nr == 1 ? "" : "s", nr == 1 ? "" : "s", rl);
  return 1;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int check_straggler(struct nta_job *job, const struct grp *g) {
  if (g->n < 2 || g->n > NTA_MAX_VRANKS)
    return 0;
  uint64_t hi = UINT64_MAX, lo = 1;
  for (int k = 0; k < g->n; k++) {
    const struct mem *m = &g->m[k];
    if (!m->d || !m->ncoll)
      return 0;
    if (m->completed < hi)
      hi = m->completed;
    if (m->oldest > lo)
      lo = m->oldest;
  }
  if (hi == UINT64_MAX || hi < lo || hi - lo + 1 < STRAG_MIN)
    return 0;
  if (hi - lo + 1 > STRAG_WINDOW)
    lo = hi - STRAG_WINDOW + 1;
  int last[NTA_MAX_VRANKS] = {0};
  uint64_t *margin = calloc((size_t)(hi - lo + 1), sizeof(uint64_t));
  int *who = calloc((size_t)(hi - lo + 1), sizeof(int));
  int nseq = 0;
  for (uint64_t s = lo; margin && who && s <= hi; s++) {
    uint64_t t1 = 0, t2 = 0;
    int w = -1, ok = 1;
    for (int k = 0; k < g->n && ok; k++) {
      const struct ntf_entry *e = coll_at(&g->m[k], s);
      if (!e || !e->t_created) {
        ok = 0;
        break;
      }
      if (e->t_created > t1) {
        t2 = t1;
        t1 = e->t_created;
        w = k;
      } else if (e->t_created > t2) {
        t2 = e->t_created;
      }
    }
    if (!ok || w < 0)
      continue;
    last[w]++;
    who[nseq] = w;
    margin[nseq++] = t1 - t2;
  }
  int best = 0;
  for (int k = 1; k < g->n; k++)
    if (last[k] > last[best])
      best = k;
  int found = 0;
  if (nseq >= STRAG_MIN && last[best] >= 0.75 * nseq) {
    uint64_t *mm = calloc((size_t)nseq, sizeof(uint64_t));
    int n = 0;
    for (int i = 0; mm && i < nseq; i++)
      if (who[i] == best)
        mm[n++] = margin[i];
    if (n) {
      qsort(mm, (size_t)n, sizeof(*mm), cmp_u64);
      double med = (double)mm[n / 2] / 1e6;
      if (med >= STRAG_MS) {
        int r = g->m[best].grank;
        verdict(job, NTA_STRAGGLER, g, 0, NULL, &r, 1, 0);
        say(job->v.summary, sizeof job->v.summary,
                 "straggler on process group %s (%s): rank %d called last at %d of the last %d collectives, by a "
                 "median %.1f ms after the others (host arrival, time_created_ns; FR records no device arrival "
                 "unless TORCH_NCCL_ENABLE_TIMING)",
                 g->pg->name, g->pg->desc, r, last[best], nseq, med);
        say(job->v.next, sizeof job->v.next, "look at what rank %d does between collectives", r);
        found = 1;
      }
    }
    free(mm);
  }
  free(margin);
  free(who);
  return found;
}

/* ------------------------------------------------------------ entry -- */

void nta_fr_detect(struct nta_job *job) {
  struct grp *g = NULL;
  int n = build(job, &g);
  uint64_t t0 = 0;
  for (int i = 0; i < job->nfr; i++) {
    const struct ntf_dump *d = &job->fr[i];
    for (int k = 0; k < d->ne; k++)
      if (d->e[k].t_created && (!t0 || d->e[k].t_created < t0))
        t0 = d->e[k].t_created;
    nta_event_add_src(job, d->mtime_ns, d->rank, "dump", SRC, "Flight Recorder dump %.200s (%s, version %s, %d entries%s)",
                      strrchr(d->path, '/') ? strrchr(d->path, '/') + 1 : d->path,
                      d->form == NTF_JSON ? "JSON" : "pickle", d->version, d->ne,
                      d->skipped ? ", some refused" : "");
  }
  job->t0_ns = t0;
  int (*const checks[])(struct nta_job *, const struct grp *) = {check_mismatch, check_missing, check_p2p,
                                                                   check_stall, check_straggler};
  int done = 0;
  /* the default group first: a subgroup's hang is usually its effect */
  for (size_t c = 0; c < sizeof checks / sizeof *checks && !done; c++)
    for (int i = 0; i < n && !done; i++)
      done = checks[c](job, &g[i]);
  if (!done) {
    job->v.cls = NTA_HEALTHY;
    say(job->v.summary, sizeof job->v.summary,
             "healthy by the Flight Recorder evidence: %d dump%s, every process group's collectives agree and "
             "completed%s",
             job->nfr, job->nfr == 1 ? "" : "s", NO_REDOP);
    say(job->v.next, sizeof job->v.next, "nothing to fix in what FR recorded");
  }
  groups_free(g, n);
}

/* Beside our evidence: each rank's FR entries around the verdict's time
 * join the timeline (the last MERGE_SHOWN before it and every one after). */
void nta_fr_merge(struct nta_job *job) {
  uint64_t vt = job->v.t_ns;
  for (int i = 0; i < job->nfr; i++) {
    const struct ntf_dump *d = &job->fr[i];
    int from = 0;
    if (vt) {
      int before = 0;
      for (int k = d->ne - 1; k >= 0; k--)
        if (d->e[k].t_created && d->e[k].t_created < vt && ++before == MERGE_SHOWN) {
          from = k;
          break;
        }
    } else if (d->ne > MERGE_SHOWN) {
      from = d->ne - MERGE_SHOWN;
    }
    nta_event_add_src(job, d->mtime_ns, d->rank, "dump", SRC, "Flight Recorder dump %.200s (%s, version %s, %d entries)",
                      strrchr(d->path, '/') ? strrchr(d->path, '/') + 1 : d->path,
                      d->form == NTF_JSON ? "JSON" : "pickle", d->version, d->ne);
    for (int k = from; k < d->ne; k++) {
      const struct ntf_entry *e = &d->e[k];
      char ds[160], at[256];
      describe(e, ds, sizeof ds);
      site(e, at, sizeof at);
      nta_event_add_src(job, e->t_created, d->rank, "call", SRC, "pg %.20s seq %llu: %s%s (%s)", e->pg_name,
                        (unsigned long long)(e->is_p2p ? e->p2p_seq : e->coll_seq), ds, at, state_name(e));
    }
  }
}

/* ------------------------------------------------------------- read -- */

int nta_fr_read(struct nta_job *job, const char *path, dev_t dev, ino_t ino, int check, uint64_t limit, char *why,
                size_t whylen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    snprintf(why, whylen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (check && (st.st_dev != dev || st.st_ino != ino))) {
    close(fd);
    snprintf(why, whylen, "not the regular file the listing saw");
    return -1;
  }
  uint8_t head[64];
  ssize_t hn = pread(fd, head, sizeof head, 0);
  int form = hn > 0 ? ntf_sniff(head, (size_t)hn) : 0;
  if (!form) {
    close(fd);
    return 0;
  }
  if ((uint64_t)st.st_size > limit) {
    close(fd);
    snprintf(why, whylen, "Flight Recorder dump of %lld bytes: over the memory limit (--max-memory)",
             (long long)st.st_size);
    return -1;
  }
  size_t len = (size_t)st.st_size;
  uint8_t *buf = malloc(len ? len : 1);
  size_t got = 0;
  while (buf && got < len) {
    ssize_t r = read(fd, buf + got, len - got);
    if (r <= 0)
      break;
    got += (size_t)r;
  }
  close(fd);
  if (!buf) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  struct ntf_dump d;
  memset(&d, 0, sizeof d);
  char err[256];
  int rc = ntf_dump_parse(buf, got, (enum ntf_form)form, limit - len, &d, err, sizeof err);
  free(buf);
  if (rc != 0) {
    snprintf(why, whylen, "Flight Recorder dump (%s): %s", form == NTF_JSON ? "JSON" : "pickle", err);
    ntf_dump_free(&d);
    return -1;
  }
  snprintf(d.path, sizeof d.path, "%s", path);
  d.rank = ntf_rank_of_name(path);
  for (int i = 0; d.rank < 0 && i < d.ne; i++)
    if (d.e[i].self >= 0)
      d.rank = d.e[i].self;
  d.mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
  if (d.rank < 0) {
    snprintf(why, whylen, "Flight Recorder dump: which rank wrote it is unknown (its name ends in no number)");
    ntf_dump_free(&d);
    return -1;
  }
  struct ntf_dump *v = realloc(job->fr, (size_t)(job->nfr + 1) * sizeof(*v));
  if (!v) {
    ntf_dump_free(&d);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  job->fr = v;
  job->fr[job->nfr++] = d;
  return 1;
}

/* ---------------------------------------------------------- reports -- */

/* Per dump, per process group it holds: what FR says of that rank. */
void nta_fr_report_text(const struct nta_job *job, FILE *out) {
  char e1[4096];
  fprintf(out, "\nFlight Recorder dumps (PyTorch):\n");
  fprintf(out, "  %-5s %-10s %-9s %-9s %-9s %-8s %s\n", "rank", "pg", "last enq", "last done", "entries", "version",
          "file");
  for (int i = 0; i < job->nfr; i++) {
    const struct ntf_dump *d = &job->fr[i];
    for (int k = 0; k < d->npgs || (k == 0 && !d->npgs); k++) {
      const struct ntf_pg *p = d->npgs ? &d->pgs[k] : NULL;
      char pg[64] = "-", en[24] = "-", dn[24] = "-";
      if (p) {
        ntt_esc(p->name, pg, sizeof pg);
        if (p->last_enqueued >= 0)
          snprintf(en, sizeof en, "%lld", (long long)p->last_enqueued);
        if (p->last_completed >= 0)
          snprintf(dn, sizeof dn, "%lld", (long long)p->last_completed);
      }
      char ver[16];
      fprintf(out, "  %-5d %-10.10s %-9s %-9s %-9d %-8s %s\n", d->rank, pg, en, dn, d->ne,
              ntt_esc(d->version, ver, sizeof ver), ntt_esc(d->path, e1, sizeof e1));
    }
  }
}

json_t *nta_fr_json(const struct nta_job *job) {
  json_t *a = json_array();
  for (int i = 0; i < job->nfr; i++) {
    const struct ntf_dump *d = &job->fr[i];
    json_t *o = json_object(), *pgs = json_array();
    json_object_set_new(o, "rank", json_integer(d->rank));
    json_object_set_new(o, "file", ntt_json_str(d->path, sizeof d->path));
    json_object_set_new(o, "form", json_string(d->form == NTF_JSON ? "json" : "pickle"));
    json_object_set_new(o, "version", ntt_json_str(d->version, sizeof d->version));
    json_object_set_new(o, "entries", json_integer(d->ne));
    json_object_set_new(o, "entries_refused", json_integer(d->skipped));
    for (int k = 0; k < d->npgs; k++) {
      const struct ntf_pg *p = &d->pgs[k];
      json_t *x = json_object(), *r = json_array();
      json_object_set_new(x, "name", ntt_json_str(p->name, sizeof p->name));
      json_object_set_new(x, "desc", ntt_json_str(p->desc, sizeof p->desc));
      for (int q = 0; q < p->nranks && q < NTA_LIST_BUDGET; q++)
        json_array_append_new(r, json_integer(p->ranks[q]));
      json_object_set_new(x, "ranks", r);
      json_object_set_new(x, "last_enqueued", p->last_enqueued >= 0 ? json_integer(p->last_enqueued) : json_null());
      json_object_set_new(x, "last_started", p->last_started >= 0 ? json_integer(p->last_started) : json_null());
      json_object_set_new(x, "last_completed",
                          p->last_completed >= 0 ? json_integer(p->last_completed) : json_null());
      json_array_append_new(pgs, x);
    }
    json_object_set_new(o, "process_groups", pgs);
    json_array_append_new(a, o);
  }
  return a;
}
