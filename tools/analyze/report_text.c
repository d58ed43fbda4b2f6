/* report_text.c -- the human report: the verdict in one sentence, a table per
 * communicator, the evidence chain oldest first, and what to do next.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Ranks without evidence are listed up to NTA_LIST_BUDGET over the whole
 * report (nranks comes from the input), then counted.
 * Every string that comes from an input (host, job, paths, the texts built
 * from records) goes through ntt_esc: a crafted dump must not reach the
 * terminal with control bytes.
 */
#include <signal.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

/* Room for the longest string printed here (a path). */
#define ESC_MAX 4096

void nta_comm_hex(uint64_t id, char out[17]) {
  snprintf(out, 17, "%016llx", (unsigned long long)id);
}

const char *nta_fate_name(enum nta_fate f) {
  switch (f) {
  case NTA_ALIVE: return "running";
  case NTA_EXITED: return "exited";
  case NTA_EXECED: return "exec'd";
  case NTA_SIGNALED: return "signaled";
  case NTA_VANISHED: return "vanished";
  default: return "unknown";
  }
}

static const char *lifecycle_name(uint32_t l) {
  switch (l) {
  case NTR_COMM_INIT: return "in init";
  case NTR_COMM_READY: return "ready";
  case NTR_COMM_INIT_FAILED: return "init failed";
  case NTR_COMM_FINALIZING: return "finalizing";
  case NTR_COMM_DESTROYED: return "destroyed";
  case NTR_COMM_ABORTED: return "aborted";
  case NTR_COMM_REVOKED: return "revoked";
  default: return "?";
  }
}

/* "AllReduce #5" / "CommInitRank" / "-" for the member's blocking point. */
void nta_blocked_in(const struct nta_member *m, char *buf, size_t len) {
  if (m->cs && m->cs->blocked_since && m->cs->blocked_kind) {
    snprintf(buf, len, "%s", ntt_kind_name(m->cs->blocked_kind));
    return;
  }
  if (m->in_init) {
    snprintf(buf, len, "%s", ntt_kind_name(m->cs && m->cs->init_kind ? m->cs->init_kind : NTR_KIND_COMM_INIT_RANK));
    return;
  }
  uint64_t rn;
  const struct nta_replays *g = nta_replay_pending(m, &rn);
  if (g) {
    nta_replay_op(g, buf, len);
    size_t n = strlen(buf);
    snprintf(buf + n, len - n, " in graph replay %llu", (unsigned long long)rn);
    return;
  }
  if (m->lags && m->tracking) {
    /* Its completions lag (align.c view_lags): from completed + 1 to its
     * last issued call, which one it was in is known only when completed
     * + 1 completed nowhere. */
    struct nta_op lo, hi;
    uint64_t a = m->completed + 1;
    int fl = nta_coll_find(m, a, &lo), fh = nta_coll_find(m, m->issued, &hi);
    const char *k = fl ? ntt_kind_name(lo.op) : "collective";
    if (m->lag_sure || a == m->issued)
      snprintf(buf, len, "%s #%llu%s", k, (unsigned long long)a, m->lag_sure ? "" : "?");
    else
      snprintf(buf, len, "%s #%llu-%llu?", fl && fh && lo.op == hi.op ? k : "collective", (unsigned long long)a,
               (unsigned long long)m->issued);
    return;
  }
  if (!m->tracking && m->ncolls) {
    /* No completion events: say where it last was, and that it is a guess. */
    struct nta_op o;
    nta_coll_at(m, m->ncolls - 1, &o);
    snprintf(buf, len, "%s #%llu?", ntt_kind_name(o.op), (unsigned long long)o.seq);
    return;
  }
  if (m->tracking && m->enqueued > m->completed) {
    struct nta_op o;
    if (nta_coll_find(m, m->completed + 1, &o)) {
      snprintf(buf, len, "%s #%llu", ntt_kind_name(o.op), (unsigned long long)m->completed + 1);
      return;
    }
    snprintf(buf, len, "collective #%llu", (unsigned long long)m->completed + 1);
    return;
  }
  snprintf(buf, len, "-");
}

void nta_member_state(const struct nta_member *m, char *buf, size_t len) {
  const struct nta_proc *p = m->proc;
  char f[48];
  char code[40];
  nta_exit_text(p->exit_code, code, sizeof code);
  if (p->fate == NTA_EXITED)
    snprintf(f, sizeof(f), "exited %s", code + 5); /* "137 (128+9, SIGKILL)": "code " left out */
  else if (p->fate == NTA_SIGNALED)
    snprintf(f, sizeof(f), "%s %d", p->fatal ? "crashed" : "killed by signal", p->signo);
  else
    snprintf(f, sizeof(f), "%s", nta_fate_name(p->fate));
  if (m->cs && m->cs->lifecycle != NTR_COMM_READY)
    snprintf(buf, len, "%s, comm %s", f, lifecycle_name(m->cs->lifecycle));
  else
    snprintf(buf, len, "%s", f);
}

static void fmt_rel(const struct nta_job *job, uint64_t t, char *buf, size_t len) {
  if (!t || !job->t0_ns) {
    snprintf(buf, len, "%12s", "?");
    return;
  }
  if (!nta_time_placed(t)) {
    snprintf(buf, len, "%12s", "(no clock)"); /* no_clock_note in the verdict says whose */
    return;
  }
  int64_t d = (int64_t)(t - job->t0_ns);
  snprintf(buf, len, "%+12.6fs", (double)d / 1e9);
}

#define SHARED_SHOWN 8            /* processes of several ranks named per communicator */

/* Ranks of c that share a process (ncclCommInitAll, a thread per device):
 * "pid 12 on h holds ranks 0-3", the table's rows say it only by the pid. */
static void shared_processes(const struct nta_comm *c, FILE *out) {
  int shown = 0, more = 0;
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    if (nta_member_of(c, m->proc) != m)
      continue;
    int r[NTA_MAX_VRANKS];
    int n = nta_proc_ranks(c, m->proc, r, NTA_MAX_VRANKS);
    if (n < 2)
      continue;
    if (shown == SHARED_SHOWN) {
      more++;
      continue;
    }
    char rl[96], host[sizeof(m->proc->img->hdr.host)];
    ntt_rank_ranges(r, n, rl, sizeof rl);
    ntt_field_str(m->proc->img->hdr.host, sizeof(m->proc->img->hdr.host), host, sizeof(host));
    fprintf(out, "  one process: pid %d on %s holds ranks %s%s\n", m->proc->img->hdr.pid, host, rl,
            m->proc->lrank >= 0 ? "" : " (no launcher rank)");
    shown++;
  }
  if (more)
    fprintf(out, "  (%d more processes hold several ranks each)\n", more);
}

/* Members whose evidence is the ring of a process that left no final dump
 * (killed): what their rows rest on (align.c lag_fill).  Said for every
 * such member, whether or not its last poll happened to lag. */
static void lag_note(const struct nta_comm *c, FILE *out) {
  int r[NTA_MAX_VRANKS], n = 0, total = 0, unsure = 0;
  for (int i = 0; i < c->nranked; i++) {
    const struct nta_member *m = c->ranked[i];
    unsure += m->lags && !m->lag_sure;
    if (m->lag_ring && total++ < NTA_MAX_VRANKS)
      r[n++] = m->rank;
  }
  if (!total && !unsure)
    return;
  char rl[160];
  ntt_rank_ranges(r, n, rl, sizeof rl);
  if (total > n)
    snprintf(rl + strlen(rl), sizeof rl - strlen(rl), " and %d more", total - n);
  if (total > 1)
    fprintf(out, "  ranks %s left no final dump: their rows come from their rings, whose completions are the "
            "watchdog's last poll (up to 15 ms behind), raised to what their peers completed\n", rl);
  else if (total)
    fprintf(out, "  rank %s left no final dump: its row comes from its ring, whose completions are the "
            "watchdog's last poll (up to 15 ms behind), raised to what its peers completed\n", rl);
  if (unsure)
    fprintf(out, "  a call marked '?' may have finished: the evidence of that rank lags, and no peer shows the "
            "call pending\n");
}

#define INSIDE_SHOWN 8              /* open proxy ops said under the verdict */

/* Where, inside its call, each member waits (the plugin's proxy ops still
 * open): one "inside:" line each, the verdict's comm first. */
static void inside_lines(const struct nta_job *job, FILE *out) {
  int shown = 0, more = 0;
  char t[512], e[1024];
  for (int pass = 0; pass < 2; pass++)
    for (int ci = 0; ci < job->ncomms; ci++) {
      const struct nta_comm *c = &job->comms[ci];
      if ((c == job->v.comm) != (pass == 0))
        continue;
      for (int i = 0; i < c->nranked; i++) {
        const struct nta_member *m = c->ranked[i];
        for (int k = 0; k < m->d->nwaits; k++) {
          if (shown == INSIDE_SHOWN) {
            more++;
            continue;
          }
          nta_wait_text(m, &m->d->waits[k], t, sizeof t);
          if (job->ncomms > 1) {
            char hex[17];
            nta_comm_hex(c->id, hex);
            fprintf(out, "inside: comm %.8s: %s\n", hex, ntt_esc(t, e, sizeof e));
          } else {
            fprintf(out, "inside: %s\n", ntt_esc(t, e, sizeof e));
          }
          shown++;
        }
      }
    }
  if (more)
    fprintf(out, "inside: (%d more open proxy op%s, in the JSON report)\n", more, more == 1 ? "" : "s");
}

void nta_report_text(const struct nta_job *job, FILE *out) {
  const struct nta_verdict *v = &job->v;
  int budget = NTA_LIST_BUDGET;
  char e1[ESC_MAX], e2[ESC_MAX];
  fprintf(out, "%s\n", ntt_esc(v->summary, e1, sizeof(e1)));
  for (int i = 0; i < job->nstrag; i++)
    if (&job->strag[i] != v->strag)
      fprintf(out, "also: %s\n", ntt_esc(job->strag[i].summary, e1, sizeof(e1)));
  inside_lines(job, out);
  if (job->nother_jobs && !job->job_chosen)
    fprintf(out, "(analyzed job %s, the most recent of %d found; pick another with --job)\n",
            ntt_esc(job->job_id, e1, sizeof(e1)), job->nother_jobs + 1);
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    char hex[17], par[17];
    nta_comm_hex(c->id, hex);
    nta_comm_hex(c->parent, par);
    fprintf(out, "\ncomm %s (%d rank%s%s%s)%s\n", hex, c->nranks, c->nranks == 1 ? "" : "s",
            c->parent ? ", parent " : "", c->parent ? par : "", v->comm == c ? "  <- verdict" : "");
    fprintf(out, "  %-5s %-20s %-8s %-9s %-9s %-20s %s\n", "rank", "host", "pid", "last enq", "last done",
            "blocked in", "state");
    int unlisted = 0;
    for (int i = 0, r = 0; i <= c->nranked; i++) {
      /* Ranks without evidence before the next member, then the member. */
      int end = i < c->nranked ? c->ranked[i]->rank : c->nranks;
      for (; r < end; r++) {
        if (budget == 0) {
          unlisted += end - r;
          break;
        }
        budget--;
        fprintf(out, "  %-5d %-20s %-8s %-9s %-9s %-20s %s\n", r, "-", "-", "-", "-", "-", "no evidence");
      }
      r = end + 1;
      if (i == c->nranked)
        break;
      const struct nta_member *m = c->ranked[i];
      char b[64], st[96], host[sizeof(m->proc->img->hdr.host)];
      nta_blocked_in(m, b, sizeof(b));
      nta_member_state(m, st, sizeof(st));
      ntt_field_str(m->proc->img->hdr.host, sizeof(m->proc->img->hdr.host), host, sizeof(host));
      fprintf(out, "  %-5d %-20.20s %-8d %-9llu %-9llu %-20s %s\n", m->rank, host,
              m->proc->img->hdr.pid, (unsigned long long)m->enqueued, (unsigned long long)m->completed, b,
              st);
    }
    if (unlisted)
      fprintf(out, "  (%d more ranks without evidence, not listed)\n", unlisted);
    lag_note(c, out);
    shared_processes(c, out);
  }
  if (job->nfr)
    nta_fr_report_text(job, out);
  if (v->cls != NTA_HEALTHY)
    nta_report_pythreads(job, out);
  if (v->fr_nstack) {
    fprintf(out, "\nPython stack of the call (Flight Recorder frames):\n");
    for (int i = 0; i < v->fr_nstack; i++)
      fprintf(out, "  %s\n", ntt_esc(v->fr_stack[i], e1, sizeof(e1)));
  }
  fprintf(out, "\nevidence (oldest first):\n");
  for (int i = 0; i < job->nev; i++) {
    const struct nta_event *e = &job->ev[i];
    char t[32];
    fmt_rel(job, e->t_ns, t, sizeof(t));
    ntt_esc(e->kind, e1, sizeof(e1));
    ntt_esc(e->text, e2, sizeof(e2));
    /* the source is said only when Flight Recorder dumps are among the inputs */
    char src[24] = "";
    if (job->nfr)
      snprintf(src, sizeof src, "%-9s ", e->source);
    if (e->rank >= 0)
      fprintf(out, "  %s  %srank %-3d %-12s %s\n", t, src, e->rank, e1, e2);
    else
      fprintf(out, "  %s  %srank ?   %-12s %s\n", t, src, e1, e2);
  }
  fprintf(out, "\nnext: %s\n", ntt_esc(v->next, e1, sizeof(e1)));
  fprintf(out, "inputs: %d file%s, %d process%s, job %s", job->nfiles, job->nfiles == 1 ? "" : "s",
          job->nprocs, job->nprocs == 1 ? "" : "es", job->job_id[0] ? ntt_esc(job->job_id, e1, sizeof(e1)) : "(none)");
  if (job->attempt || job->nother_attempts) {
    fprintf(out, ", attempt %d", job->attempt);
    if (job->nother_attempts) {
      fprintf(out, " (other attempts:");
      for (int i = 0; i < job->nother_attempts; i++)
        fprintf(out, " %d", job->other_attempts[i]);
      fprintf(out, ")");
    }
  }
  if (job->nother_jobs) {
    fprintf(out, " (other jobs:");
    for (int i = 0; i < job->nother_jobs; i++)
      fprintf(out, " %s", ntt_esc(job->other_jobs[i], e1, sizeof(e1)));
    fprintf(out, ")");
  }
  fprintf(out, "\n");
  for (int i = 0; i < job->ndups; i++) {
    const struct nta_dup *d = &job->dups[i];
    fprintf(out, "duplicate rank %d: claimed by %d processes:", d->rank, d->n);
    for (int k = 0; k < d->n && k < NTA_DUP_SHOWN; k++)
      fprintf(out, "%s pid %d on %s (%d file%s, %s)", k ? "," : "", d->p[k].pid,
              ntt_esc(d->p[k].host, e1, sizeof(e1)), d->p[k].nfiles, d->p[k].nfiles == 1 ? "" : "s",
              d->p[k].analyzed ? "analyzed: the latest evidence" : "left out");
    if (d->n > NTA_DUP_SHOWN)
      fprintf(out, " and %d more", d->n - NTA_DUP_SHOWN);
    fprintf(out, "\n");
  }
  for (int i = 0; i < job->nleft_out; i++)
    fprintf(out, "left out: %s: %s\n", ntt_esc(job->left_out[i].path, e1, sizeof(e1)),
            ntt_esc(job->left_out[i].reason, e2, sizeof(e2)));
  for (int i = 0; i < job->nunreadable; i++)
    fprintf(out, "unreadable: %s: %s\n", ntt_esc(job->unreadable[i].path, e1, sizeof(e1)),
            ntt_esc(job->unreadable[i].reason, e2, sizeof(e2)));
}
