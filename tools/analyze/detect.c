/* detect.c -- findings on aligned communicators: every candidate cause with
 * the time it happened.  Nothing here decides; verdict.c weighs candidates by
 * time and priority.  Each detector reads only the aligned view (align.c).
 * Send/recv findings are in detect_p2p.c, env differences in detect_env.c,
 * init and split/shrink hangs in detect_init.c.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Every loop runs over the members present (c->ranked) or over the ranks
 * without evidence up to a fixed count, never over [0, nranks): nranks comes
 * from the input, which may be hostile (docs/reliability.md).
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

static void event_v(struct nta_job *job, uint64_t t_ns, int rank, const char *kind, const char *source,
                    const char *fmt, va_list ap) {
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
  snprintf(e->source, sizeof(e->source), "%s", source);
  vsnprintf(e->text, sizeof(e->text), fmt, ap);
}

void nta_event_add(struct nta_job *job, uint64_t t_ns, int rank, const char *kind, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  event_v(job, t_ns, rank, kind, "nccltrace", fmt, ap);
  va_end(ap);
}

void nta_event_add_src(struct nta_job *job, uint64_t t_ns, int rank, const char *kind, const char *source,
                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  event_v(job, t_ns, rank, kind, source, fmt, ap);
  va_end(ap);
}

void nta_describe_op(const struct nta_op *o, char *buf, size_t len) {
  const struct nta_op *r = o;
  const char *name = ntt_kind_name(o->op);
  if (ntt_kind_is_p2p(o->op)) {
    snprintf(buf, len, "%s(count=%llu, %s, peer=%d)", name, (unsigned long long)r->count,
             ntt_dtype_name(r->dtype), r->peer);
  } else if (r->redop >= 0 && r->peer >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, %s, root=%d)", name, (unsigned long long)r->count,
             ntt_dtype_name(r->dtype), ntt_redop_name(r->redop), r->peer);
  } else if (r->redop >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, %s)", name, (unsigned long long)r->count,
             ntt_dtype_name(r->dtype), ntt_redop_name(r->redop));
  } else if (r->peer >= 0) {
    snprintf(buf, len, "%s(count=%llu, %s, root=%d)", name, (unsigned long long)r->count,
             ntt_dtype_name(r->dtype), r->peer);
  } else {
    snprintf(buf, len, "%s(count=%llu, %s)", name, (unsigned long long)r->count, ntt_dtype_name(r->dtype));
  }
}

void nta_rank_list(const int *r, int n, char *buf, size_t len) {
  nta_rank_list_of(r, n, n, buf, len);
}

void nta_rank_list_of(const int *r, int n, int total, char *buf, size_t len) {
  enum { TAIL = 24 }; /* " and 2147483647 more" */
  size_t o = 0;
  int i = 0;
  buf[0] = 0;
  for (; i < n; i++) {
    char one[16];
    int w = snprintf(one, sizeof one, "%s%d", i ? "," : "", r[i]);
    int last = i == n - 1 && total <= n;
    /* the last one needs no room for a tail; any other keeps room for it */
    if (o + (size_t)w + (last ? 1 : TAIL) > len)
      break;
    memcpy(buf + o, one, (size_t)w + 1);
    o += (size_t)w;
  }
  if (total > i && o + TAIL <= len)
    snprintf(buf + o, len - o, i ? " and %d more" : "%d ranks", total - i);
}

const char *nta_plural(int n) {
  return n == 1 ? "rank" : "ranks";
}

int nta_absent_ranks(const struct nta_comm *c, int *out, int max) {
  int n = 0, r = 0;
  for (int i = 0; i <= c->nranked && n < max; i++) {
    int end = i < c->nranked ? c->ranked[i]->rank : c->nranks;
    for (; r < end && n < max; r++)
      out[n++] = r;
    r = end + 1;
  }
  return n;
}

/* Fingerprint fields, in the order a report names the first that differs. */
const char *nta_fp_diff(const struct nta_op *a, const struct nta_op *b) {
  if (a->op != b->op)
    return "op";
  if (a->count != b->count)
    return "count";
  if (a->dtype != b->dtype)
    return "dtype";
  if (a->redop != b->redop)
    return "redop";
  if (a->peer != b->peer)
    return "root";
  return NULL;
}

/* ------------------------------------------------- collective mismatch -- */

/* Job-wide fingerprint id of m's call at seq, UINT32_MAX when it has none. */
static uint32_t gfp_at(const struct nta_member *m, uint64_t seq) {
  uint64_t i = nta_coll_upper(m, seq);
  if (i == 0 || nta_coll_seq(m, i - 1) != seq)
    return UINT32_MAX;
  return m->proc->gfp[nta_cop_fpi(m->d, i - 1)];
}

/* The smallest collective seq above s that some member recorded; *more = 0
 * when there is none.  Seqs come from hostile files (a ring is not
 * checksummed): walk the seqs present, never the numeric span between them. */
static uint64_t next_seq(const struct nta_comm *c, uint64_t s, int *more) {
  uint64_t best = 0;
  *more = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    uint64_t k = nta_coll_upper(m, s);
    if (k < m->ncolls && (!*more || nta_coll_seq(m, k) < best)) {
      best = nta_coll_seq(m, k);
      *more = 1;
    }
  }
  return best;
}

/* The first seq at which two ranks' fingerprints differ.  Within a window
 * of seqs from the smallest one (as wide as a few times the longest member
 * history: the whole span, for any real job), one pass per member over its
 * calls against a reference -- the first fingerprint any rank had at each
 * seq -- finds it in O(calls): a call that differs from the reference
 * differs from another rank's.  Seqs past the window (only a hostile file
 * has them) are walked one present seq at a time.  @return 1 found (*out). */
static int first_mismatch(const struct nta_comm *c, uint64_t minseq, uint64_t maxseq, uint64_t *out) {
  uint64_t longest = 0;
  for (int i = 0; i < c->nranked; i++)
    if (c->ranked[i]->ncolls > longest)
      longest = c->ranked[i]->ncolls;
  uint64_t span = maxseq - minseq, width = 4 * longest + 65536;
  width = span < width ? span + 1 : width;
  uint32_t *ref = malloc((size_t)width * sizeof *ref);
  uint64_t best = UINT64_MAX;
  if (ref) {
    memset(ref, 0xff, (size_t)width * sizeof *ref);
    for (int i = 0; i < c->nranked; i++) {
      const struct nta_member *m = c->ranked[i];
      const struct nta_mdata *d = m->d;
      const uint32_t *gfp = m->proc->gfp;
      uint32_t f[NTA_BLK];
      uint64_t k = 0, seq = 0; /* the run of call j, and j's seq */
      for (uint64_t j = 0; j < d->ncolls; j++) {
        if (j % NTA_BLK == 0)
          nta_blk_decode(d, j / NTA_BLK, NULL, f, NULL, NULL);
        if (k < d->nruns && d->runs[k].idx0 == j)
          seq = d->runs[k++].seq0;
        else
          seq++;
        if (seq >= best || seq - minseq >= width)
          break; /* seqs only grow: nothing earlier is left here */
        uint32_t g = gfp[f[j % NTA_BLK]], *x = &ref[seq - minseq];
        if (*x == UINT32_MAX)
          *x = g;
        else if (*x != g)
          best = seq;
      }
    }
    free(ref);
  }
  if (best != UINT64_MAX) {
    *out = best;
    return 1;
  }
  /* Past the window (or no memory for it): seq by seq. */
  int more = 1;
  uint64_t s = ref ? minseq + width - 1 : minseq;
  if (ref)
    s = next_seq(c, s, &more);
  for (; more && s <= maxseq; s = next_seq(c, s, &more)) {
    uint32_t first = UINT32_MAX;
    for (int i = 0; i < c->nranked; i++) {
      uint32_t g = gfp_at(c->ranked[i], s);
      if (g == UINT32_MAX)
        continue;
      if (first == UINT32_MAX)
        first = g;
      else if (g != first) {
        *out = s;
        return 1;
      }
    }
  }
  return 0;
}

static void detect_mismatch(struct nta_job *job, const struct nta_comm *c) {
  /* Only the span of seqs some record covers (a wrapped ring starts late). */
  uint64_t maxseq = 0, minseq = UINT64_MAX;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (!m->ncolls)
      continue;
    if (nta_coll_seq(m, m->ncolls - 1) > maxseq)
      maxseq = nta_coll_seq(m, m->ncolls - 1);
    if (nta_coll_seq(m, 0) < minseq)
      minseq = nta_coll_seq(m, 0);
  }
  uint64_t s;
  if (maxseq == 0 || !first_mismatch(c, minseq, maxseq, &s))
    return;
  int nr = c->nranked;
  struct nta_op *ops = calloc((size_t)nr, sizeof(*ops));
  int *has = calloc((size_t)nr, sizeof(*has));
  int *grp = calloc((size_t)nr, sizeof(*grp));
  int *gsize = calloc((size_t)nr, sizeof(*gsize));
  if (!ops || !has || !grp || !gsize)
    goto out;
  int ng = 0;
  for (int i = 0; i < nr; i++) {
    has[i] = nta_coll_find(c->ranked[i], s, &ops[i]);
    grp[i] = -1;
  }
  /* Group ranks by identical fingerprint; group g is led by rank lead[g]. */
  int lead[64];
  for (int i = 0; i < nr; i++) {
    if (!has[i])
      continue;
    int g = 0;
    for (; g < ng; g++)
      if (!nta_fp_diff(&ops[lead[g]], &ops[i]))
        break;
    if (g == ng) {
      if (ng == 64)
        break;
      lead[ng] = i;
      gsize[ng++] = 0;
    }
    grp[i] = g;
    gsize[g]++;
  }
  if (ng < 2)
    goto out;
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
  for (int i = 0; i < nr && culprit < 0; i++)
    if (grp[i] >= 0 && grp[i] != maj)
      culprit = i;
  uint64_t t = 0;
  for (int i = 0; i < nr; i++)
    if (has[i] && ops[i].t_ns > t)
      t = ops[i].t_ns;
  struct nta_cand *k = nta_cand_add(job, NTA_COLL_MISMATCH, t);
  if (!k)
    goto out;
  k->comm = c;
  k->seq = s;
  snprintf(k->field, sizeof(k->field), "%s", nta_fp_diff(&ops[lead[maj]], &ops[culprit]));
  for (int i = 0; i < nr && k->nranks < NTA_MAX_VRANKS; i++)
    if (grp[i] >= 0 && (tie || grp[i] != maj))
      k->ranks[k->nranks++] = c->ranked[i]->rank;
  char hex[17], a[400], b[400], ra[256], rb[256];
  nta_comm_hex(c->id, hex);
  int other[NTA_MAX_VRANKS] = {0}, no = 0, cul[NTA_MAX_VRANKS] = {0}, nc = 0;
  int cg = grp[culprit];
  for (int i = 0; i < nr; i++) {
    if (grp[i] == cg && nc < NTA_MAX_VRANKS)
      cul[nc++] = c->ranked[i]->rank;
    else if (grp[i] == maj && no < NTA_MAX_VRANKS)
      other[no++] = c->ranked[i]->rank;
  }
  nta_describe_op(&ops[culprit], a, sizeof(a));
  nta_describe_op(&ops[lead[maj]], b, sizeof(b));
  nta_site_text(c->ranked[culprit]->proc, ops[culprit].pystack, a + strlen(a), sizeof(a) - strlen(a));
  nta_site_text(c->ranked[lead[maj]]->proc, ops[lead[maj]].pystack, b + strlen(b), sizeof(b) - strlen(b));
  if (ops[culprit].pystack) {
    k->stack_proc = c->ranked[culprit]->proc;
    k->stack_id = ops[culprit].pystack;
  }
  nta_rank_list_of(cul, nc, gsize[cg], ra, sizeof(ra));
  nta_rank_list_of(other, no, gsize[maj], rb, sizeof(rb));
  int in_group = (ops[culprit].flags | ops[lead[maj]].flags) & NTR_REC_IN_GROUP;
  snprintf(k->summary, sizeof(k->summary),
           "collective mismatch on comm %s seq %llu%s: %s %s called %s while %s %s called %s%s",
           hex, (unsigned long long)s, in_group ? " (inside a group)" : "", nta_plural(gsize[cg]), ra, a,
           nta_plural(gsize[maj]), rb, b, ng > 2 ? " (and more variants)" : "");
  for (int i = 0; i < nr; i++)
    if (has[i]) {
      char d[160];
      nta_describe_op(&ops[i], d, sizeof(d));
      nta_event_add(job, ops[i].t_ns, c->ranked[i]->proc->lrank, "call",
                    "comm %.8s rank %d seq %llu: %s%s", hex, c->ranked[i]->rank, (unsigned long long)s, d,
                    ops[i].flags & NTR_REC_STRICT_REFUSED ? " (refused by strict mode)"
                    : ops[i].done_ns                      ? " (completed)"
                                                          : " (never completed)");
    }
out:
  free(ops);
  free(has);
  free(grp);
  free(gsize);
}

/* ----------------------------------------------- missing collective -- */

/* A member of c whose ring was in anonymous memory (ring header
 * ring_place), NULL when none: then ranks of c that left nothing at all
 * likely had theirs there too (the same directories were full for them),
 * and a SIGKILL or the OOM killer leaves nothing of such a ring. */
static const struct nta_member *anon_ring_member(const struct nta_comm *c) {
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_proc *p = c->ranked[i]->proc;
    if (p->img && p->img->hdr.ring_place == NTR_PLACE_ANON)
      return c->ranked[i];
  }
  return NULL;
}

/* Every rank with evidence agrees and waits at seq lo, but some ranks of the
 * comm left no evidence at all: they are the ones that never came, or, when
 * a peer's ring was in anonymous memory, ranks whose rings were lost. */
static void detect_silent(struct nta_job *job, const struct nta_comm *c, uint64_t issued) {
  uint64_t maxdone = 0;
  int absent[NTA_MAX_VRANKS], na, proof = 0;
  na = nta_absent_ranks(c, absent, NTA_MAX_VRANKS);
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (m->completed > maxdone)
      maxdone = m->completed;
    proof |= m->proc->timeout_ns != 0 || m->proc->fate != NTA_ALIVE;
  }
  uint64_t s = maxdone + 1;
  if (!na || !proof || s > issued)
    return;
  struct nta_op first, o;
  int have = 0;
  for (int i = 0; i < c->nranked; i++)
    if (nta_coll_find(c->ranked[i], s, &o) && (!have || o.t_ns < first.t_ns)) {
      first = o;
      have = 1;
    }
  struct nta_cand *k = nta_cand_add(job, NTA_MISSING_COLL, have ? first.t_ns : c->first_ns);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  memcpy(k->ranks, absent, sizeof(int) * (size_t)na);
  k->nranks = na;
  char hex[17], d[400] = "it", rl[256];
  nta_comm_hex(c->id, hex);
  if (have) {
    nta_describe_op(&first, d, sizeof(d));
    for (int i = 0; i < c->nranked; i++)
      if (nta_coll_find(c->ranked[i], s, &o) && o.t_ns == first.t_ns) {
        nta_site_text(c->ranked[i]->proc, o.pystack, d + strlen(d), sizeof(d) - strlen(d));
        break;
      }
  }
  int na_all = c->nranks - c->nranked; /* ranked: one per rank in [0, nranks) */
  nta_rank_list_of(absent, na, na_all, rl, sizeof(rl));
  const struct nta_member *anon = anon_ring_member(c);
  if (anon) {
    /* The evidence cannot tell a skipped collective from a lost ring, and a
     * lost ring is what it shows: say that, not a code bug. */
    k->silent = 2;
    snprintf(k->summary, sizeof(k->summary),
             "%s %s left no evidence; %s could not survive a kill (rank %d's ring on %.64s was in anonymous "
             "memory: no room in the ring directory nor in $TMPDIR) while every other rank issued %s on "
             "comm %s seq %llu and waited",
             nta_plural(na_all), rl, na_all > 1 ? "their rings" : "its ring", anon->rank, anon->proc->img->hdr.host, d,
             hex, (unsigned long long)s);
    return;
  }
  k->silent = 1;
  /* With an input unreadable, theirs may be in it: only what was read is
   * known to hold nothing of them. */
  char unread[160] = "";
  int nexit = 0; /* of them, ranks nccltrace run saw end (comm rank = launcher rank in a world comm) */
  for (int i = 0; c->nranks == job->world_size && i < na; i++)
    nexit += nta_runexit_has_rank(job, absent[i]);
  if (nexit)
    snprintf(unread, sizeof unread, " (nccltrace run recorded how %d of them ended)", nexit);
  else if (job->nunreadable)
    snprintf(unread, sizeof unread, " (%d input%s unreadable: %s may be among them)", job->nunreadable,
             job->nunreadable > 1 ? "s were" : " was", na_all > 1 ? "theirs" : "its");
  snprintf(k->summary, sizeof(k->summary),
           "missing collective on comm %s seq %llu: %s %s left %s%s while every other "
           "rank issued %s and waited",
           hex, (unsigned long long)s, nta_plural(na_all), rl,
           nexit ? "no ring or dump" : job->nunreadable ? "no readable evidence" : "no evidence at all", unread, d);
}

static void detect_missing(struct nta_job *job, const struct nta_comm *c) {
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (m->in_init)
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
  struct nta_op first, o;
  const struct nta_proc *first_proc = NULL;
  int have = 0;
  int waiting[NTA_MAX_VRANKS], nw = 0, nw_all = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (m->issued < s)
      continue;
    nw_all++;
    if (nta_coll_find(m, s, &o) && (!have || o.t_ns < t)) {
      first = o;
      first_proc = m->proc;
      have = 1;
      t = o.t_ns;
    }
    if (nw < NTA_MAX_VRANKS)
      waiting[nw++] = m->rank;
  }
  struct nta_cand *k = nta_cand_add(job, NTA_MISSING_COLL, t);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  int nm_all = 0;
  for (int i = 0; i < c->nranked; i++)
    if (!c->ranked[i]->in_init && c->ranked[i]->issued < s && nm_all++ < NTA_MAX_VRANKS)
      k->ranks[k->nranks++] = c->ranked[i]->rank;
  char hex[17], d[160] = "it", rm[256], rw[256], at[400] = "", last[600] = "";
  nta_comm_hex(c->id, hex);
  if (have) {
    nta_describe_op(&first, d, sizeof(d));
    nta_site_text(first_proc, first.pystack, at, sizeof(at));
  }
  nta_rank_list_of(k->ranks, k->nranks, nm_all, rm, sizeof(rm));
  nta_rank_list_of(waiting, nw, nw_all, rw, sizeof(rw));
  /* verdict.stack: the first culprit's last call on the comm, where its
   * code went another way (pysite.c) */
  const struct nta_member *cm = k->nranks ? nta_rank(c, k->ranks[0]) : NULL;
  struct nta_op lo_op;
  char lsite[400];
  if (cm && nta_member_last_op(cm, &lo_op)) {
    nta_site_text(cm->proc, lo_op.pystack, lsite, sizeof(lsite));
    if (lsite[0]) {
      char ld[160];
      nta_describe_op(&lo_op, ld, sizeof(ld));
      snprintf(last, sizeof(last), "; rank %d's last call on the comm was %s%s", cm->rank, ld, lsite);
      nta_cand_site(k, cm->proc, lo_op.pystack);
    }
  }
  snprintf(k->summary, sizeof(k->summary),
           "missing collective on comm %s seq %llu: %s %s never issued %s, which %s %s issued%s%s", hex,
           (unsigned long long)s, nta_plural(k->nranks), rm, d, nta_plural(nw), rw, at, last);
  for (int i = 0; i < k->nranks; i++) {
    const struct nta_member *m = nta_rank(c, k->ranks[i]);
    struct nta_op last;
    char ld[160] = "none";
    if (m->ncolls) {
      nta_coll_at(m, m->ncolls - 1, &last);
      nta_describe_op(&last, ld, sizeof(ld));
    }
    nta_event_add(job, m->ncolls ? last.t_ns : m->first_ns, m->proc->lrank, "behind",
                  "comm %.8s rank %d: last collective issued #%llu %s", hex, k->ranks[i],
                  (unsigned long long)m->issued, ld);
  }
  for (int i = 0; i < nw; i++) {
    const struct nta_member *m = nta_rank(c, waiting[i]);
    if (nta_coll_find(m, s, &o))
      nta_event_add(job, o.t_ns, m->proc->lrank, "call", "comm %.8s rank %d seq %llu: %s%s", hex, waiting[i],
                    (unsigned long long)s, d, o.done_ns ? " (completed)" : "");
  }
}

/* ------------------------------------------------------------- stall -- */

static void detect_stall(struct nta_job *job, const struct nta_comm *c) {
  uint64_t maxdone = 0, minenq = UINT64_MAX, miniss = UINT64_MAX, maxiss = 0;
  int tracked = 1, clean_exit = 0;
  if (c->nranked != c->nranks)
    return; /* a rank without evidence: not "everyone issued it" */
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    if (m->in_init)
      return; /* init: not "everyone issued it" */
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
  struct nta_op ref, o;
  int have = 0;
  uint64_t t = 0;
  for (int i = 0; i < c->nranked; i++) {
    if (!nta_coll_find(c->ranked[i], s, &o))
      continue;
    if (have && nta_fp_diff(&ref, &o))
      return; /* a mismatch, found by detect_mismatch */
    if (!have)
      ref = o;
    have = 1;
    if (o.t_ns > t)
      t = o.t_ns;
  }
  /* A live job between issue and completion is not a stall: require proof
   * that it stayed stuck (a watchdog timeout, or the processes are gone). */
  int proof = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_proc *p = c->ranked[i]->proc;
    /* exec'd: the program moved on before the watchdog's next poll, which
     * proves nothing about being stuck. */
    if (p->timeout_ns || (p->fate != NTA_ALIVE && p->fate != NTA_EXECED))
      proof = 1;
  }
  if (!proof)
    return;
  struct nta_cand *k = nta_cand_add(job, NTA_STALL, t);
  if (!k)
    return;
  k->comm = c;
  k->seq = s;
  for (int i = 0; i < c->nranked && k->nranks < NTA_MAX_VRANKS; i++)
    k->ranks[k->nranks++] = c->ranked[i]->rank;
  char hex[17], d[160] = "it";
  nta_comm_hex(c->id, hex);
  if (have)
    nta_describe_op(&ref, d, sizeof(d));
  /* verdict.stack: the blocked call of the lowest rank with a site */
  char at[400] = "";
  for (int i = 0; i < c->nranked && !at[0]; i++)
    if (nta_coll_find(c->ranked[i], s, &o) && o.pystack) {
      nta_site_text(c->ranked[i]->proc, o.pystack, at, sizeof(at));
      nta_cand_site(k, c->ranked[i]->proc, o.pystack);
    }
  snprintf(k->summary, sizeof(k->summary), "stall on comm %s seq %llu: all %d ranks issued %s%s identically and %s",
           hex, (unsigned long long)s, c->nranks, d, at,
           tracked ? "none completed" : "none went further (completion was not tracked)");
  for (int i = 0; i < c->nranked; i++)
    if (nta_coll_find(c->ranked[i], s, &o))
      nta_event_add(job, o.t_ns, c->ranked[i]->proc->lrank, "call", "comm %.8s rank %d seq %llu: %s%s", hex,
                    c->ranked[i]->rank, (unsigned long long)s, d, o.done_ns ? " (completed)" : "");
}

int nta_detect(struct nta_job *job) {
  for (int i = 0; i < job->nprocs; i++)
    if (job->procs[i].timeout_ns && (!job->stuck_ns || job->procs[i].timeout_ns < job->stuck_ns))
      job->stuck_ns = job->procs[i].timeout_ns;
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    nta_detect_init(job, c);
    nta_detect_split_hang(job, c);
    detect_mismatch(job, c);
    nta_detect_p2p(job, c);
    detect_missing(job, c);
    nta_detect_replays(job, c);
    nta_detect_env(job, c);
    detect_stall(job, c);
  }
  nta_detect_fates(job);
  nta_detect_errors(job);
  nta_detect_straggler(job);
  return 0;
}
