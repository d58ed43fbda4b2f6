/* jobs.c -- which evidence of the chosen job is analyzed: its restart
 * attempt (torchelastic and Slurm keep the job id across restarts), the
 * exit statuses that belong to that attempt, and launcher ranks that more
 * than one process claims (never merged).  docs/analyze.md "Jobs,
 * attempts and duplicate ranks".
 *
 * Thread-safety: called by nta_load on the calling thread, after the
 * loading threads are joined; one nta_job at a time.  Not signal-safe
 * (allocates).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

/* A launcher's restart count from the environment block ("NAME=VALUE\0..."):
 * torchelastic keeps TORCHELASTIC_RUN_ID across restarts and Slurm keeps
 * SLURM_JOB_ID across requeues, so the job id alone merges attempts. */
static int env_count(const struct ntr_ring_header *h, const char *name) {
  size_t nl = strlen(name), len = h->env_len < sizeof h->env ? h->env_len : sizeof h->env;
  for (size_t o = 0; o < len;) {
    const char *v = h->env + o;
    size_t n = strnlen(v, len - o);
    if (n > nl && !memcmp(v, name, nl) && v[nl] == '=') {
      long x = 0;
      const char *p = v + nl + 1;
      if (!*p || p >= v + n)
        return -1;
      for (; p < v + n; p++) {
        if (*p < '0' || *p > '9' || x > 100000000)
          return -1;
        x = x * 10 + (*p - '0');
      }
      return (int)x;
    }
    o += n + 1;
  }
  return -1;
}

int nta_hdr_attempt(const struct ntr_ring_header *h) {
  int a = env_count(h, "TORCHELASTIC_RESTART_COUNT");
  if (a < 0)
    a = env_count(h, "SLURM_RESTART_COUNT");
  return a < 0 ? 0 : a;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

int nta_pick_attempt(struct nta_job *job, int *v, int n, const char *id) {
  qsort(v, (size_t)n, sizeof *v, cmp_int);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!k || v[i] != v[k - 1])
      v[k++] = v[i];
  int found = !job->want_attempt;
  if (job->want_attempt) {
    for (int i = 0; i < k; i++)
      found |= v[i] == job->attempt_wanted;
    job->attempt = job->attempt_wanted;
  } else {
    job->attempt = k ? v[k - 1] : 0;
  }
  if (!found) {
    char why[256], list[160] = "";
    size_t o = 0;
    for (int i = 0; i < k && o + 16 < sizeof list; i++)
      o += (size_t)snprintf(list + o, sizeof list - o, "%s%d", i ? "," : "", v[i]);
    snprintf(why, sizeof why, "no evidence of attempt %d of job %s (attempts present: %s)", job->attempt_wanted,
             id, list);
    nta_input_add(&job->unreadable, &job->nunreadable, "--attempt", why, -1);
    free(v);
    return -1;
  }
  job->other_attempts = v;
  job->nother_attempts = 0;
  for (int i = 0; i < k; i++)
    if (v[i] != job->attempt)
      v[job->nother_attempts++] = v[i];
  return 0;
}

/* With several attempts of the job, an exit status of `nccltrace run`
 * belongs to the analyzed one only when its command ran while that
 * attempt's processes did: a status of attempt 0 must not become a
 * failure of attempt 1. */
void nta_keep_attempt_runexits(struct nta_job *job) {
  if (!job->nother_attempts || !job->nprocs)
    return;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    if (p->first_ns && p->first_ns < lo)
      lo = p->first_ns;
    if (p->latest_ns > hi)
      hi = p->latest_ns;
  }
  int k = 0;
  for (int i = 0; i < job->nrunexits; i++) {
    const struct nta_runexit *r = &job->runexits[i];
    if ((!r->end_ns || lo == UINT64_MAX || r->end_ns >= lo) && (!r->start_ns || !hi || r->start_ns <= hi))
      job->runexits[k++] = *r;
  }
  job->nrunexits = k;
}

static int cmp_claim(const void *a, const void *b, void *arg) {
  const struct nta_proc *v = arg;
  int x = *(const int *)a, y = *(const int *)b;
  if (v[x].lrank != v[y].lrank)
    return v[x].lrank < v[y].lrank ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* A fork child carries its parent's launcher rank: it is no second claim. */
static int forked_from(const struct nta_proc *c, const struct nta_proc *p) {
  return c->img->hdr.ppid == p->img->hdr.pid && !strcmp(c->img->hdr.host, p->img->hdr.host);
}

/* Two processes of one job and attempt that claim the same launcher rank
 * are never analyzed as one rank: a planted dump, or a job id reused
 * without a restart count.  The claimant with the latest evidence is
 * analyzed, the others are freed, and every claim is listed (job->dups).
 * @return 0 or -1 (out of memory). */
int nta_dedupe_ranks(struct nta_job *job) {
  int n = job->nprocs;
  int *ix = malloc((size_t)(n ? n : 1) * sizeof *ix);
  unsigned char *drop = calloc((size_t)(n ? n : 1), 1), *claim = calloc((size_t)(n ? n : 1), 1);
  if (!ix || !drop || !claim) {
    free(ix);
    free(drop);
    free(claim);
    return -1;
  }
  for (int i = 0; i < n; i++)
    ix[i] = i;
  qsort_r(ix, (size_t)n, sizeof *ix, cmp_claim, job->procs);
  for (int a = 0; a < n;) {
    int b = a;
    while (b < n && job->procs[ix[b]].lrank == job->procs[ix[a]].lrank)
      b++;
    if (job->procs[ix[a]].lrank < 0 || b - a < 2) {
      a = b;
      continue;
    }
    /* Claimants: those not forked from another claimant (looked for
     * among a few: hostile input may claim one rank many times). */
    int best = -1, nclaim = 0;
    for (int i = a; i < b; i++) {
      claim[i - a] = 1;
      for (int j = a; j < b && b - a <= 64; j++)
        if (j != i && forked_from(&job->procs[ix[i]], &job->procs[ix[j]]))
          claim[i - a] = 0;
      if (!claim[i - a])
        continue;
      nclaim++;
      if (best < 0 || job->procs[ix[i]].latest_ns > job->procs[ix[best]].latest_ns)
        best = i;
    }
    if (nclaim > 1) {
      struct nta_dup *d = realloc(job->dups, (size_t)(job->ndups + 1) * sizeof *d);
      if (!d) {
        free(ix);
        free(drop);
        free(claim);
        return -1;
      }
      job->dups = d;
      d = &d[job->ndups++];
      memset(d, 0, sizeof *d);
      d->rank = job->procs[ix[a]].lrank;
      for (int i = a; i < b; i++) {
        if (!claim[i - a])
          continue;
        const struct nta_proc *p = &job->procs[ix[i]];
        if (d->n < NTA_DUP_SHOWN) {
          snprintf(d->p[d->n].host, sizeof d->p[d->n].host, "%s", p->img->hdr.host);
          d->p[d->n].pid = p->img->hdr.pid;
          d->p[d->n].nfiles = p->nfiles;
          d->p[d->n].analyzed = i == best;
          d->p[d->n].latest_ns = p->latest_ns;
        }
        d->n++;
        if (i != best)
          drop[ix[i]] = 1;
      }
    }
    a = b;
  }
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (drop[i])
      nta_proc_free(&job->procs[i]);
    else
      job->procs[k++] = job->procs[i];
  }
  job->nprocs = k;
  free(ix);
  free(drop);
  free(claim);
  return 0;
}
