/* verdict.c -- choose the root cause among the candidates (design §1):
 * the earliest independent cause wins; priority (explicit exit/crash/abort >
 * fingerprint mismatch > missing collective / init hang > NCCL async error >
 * env difference > stall) only breaks near-ties and decides what counts as an
 * effect.  Priority never beats time: a death, abort or error that comes
 * after the job was already stuck (a watchdog timeout, or the dying rank
 * itself had been waiting) is an effect of what stuck it.  An env difference
 * is a cause of its own only when the coordinator refused a comm's init for
 * it (NCCLTRACE_ENV_CHECK=abort): the exits after that failed init are its
 * effects; otherwise it is a hint that only outranks a plain stall.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/fr/fr.h"
#include "tools/ntt.h"

#define NTA_TIE_NS 1000000ull       /* events this close are simultaneous */
#define NTA_SAME_CAUSE_NS 500000000ull /* same-class deaths this close: one cause, several ranks */

static const char *const class_names[NTA_CLASS_COUNT] = {
    [NTA_HEALTHY] = "healthy",
    [NTA_RANK_EXIT] = "rank_exit",
    [NTA_RANK_CRASH] = "rank_crash",
    [NTA_RANK_KILLED] = "rank_killed",
    [NTA_APP_ABORT] = "app_abort",
    [NTA_COLL_MISMATCH] = "collective_mismatch",
    [NTA_P2P_MISMATCH] = "p2p_mismatch",
    [NTA_MISSING_COLL] = "missing_collective",
    [NTA_INIT_HANG] = "init_hang",
    [NTA_NCCL_ERROR] = "nccl_error",
    [NTA_ENV_MISMATCH] = "env_mismatch",
    [NTA_STALL] = "stall",
    [NTA_STRAGGLER] = "straggler",
    [NTA_SLOW_COLL] = "slow_collective",
};

const char *nta_class_name(enum nta_class c) {
  return (unsigned)c < NTA_CLASS_COUNT ? class_names[c] : "unknown";
}

static int is_death(enum nta_class c) {
  return c == NTA_RANK_EXIT || c == NTA_RANK_CRASH || c == NTA_RANK_KILLED || c == NTA_APP_ABORT;
}

/* Did p's init of a comm fail, no later than t, because the coordinator
 * refused it for an env difference?  Then what p did next (exit 1 on
 * ncclInvalidUsage) is that difference's effect. */
static int refused_before(const struct nta_job *job, const struct nta_proc *p, uint64_t t) {
  for (int j = 0; p && j < job->ncands; j++) {
    const struct nta_cand *e = &job->cands[j];
    if (e->cls != NTA_ENV_MISMATCH || !e->refused)
      continue;
    const struct nta_member *m = nta_member_of(e->comm, p);
    if (m && m->init_fail_ns && m->init_fail_ns <= t)
      return 1;
  }
  return 0;
}

/* An explicit event of a process (death, abort, NCCL error) is a cause only
 * when it is not noise, the process was not itself stuck, its init was not
 * refused first, and the job was not stuck yet. */
static int independent(const struct nta_job *job, const struct nta_cand *k) {
  if (k->noise || k->victim || refused_before(job, k->proc, k->t_ns))
    return 0;
  return !job->stuck_ns || k->t_ns < job->stuck_ns;
}

/* The process behind comm rank r of c, guessing launcher rank == comm rank
 * for a world-sized comm whose member left no evidence of joining. */
static const struct nta_proc *proc_of_rank(const struct nta_job *job, const struct nta_comm *c, int r) {
  const struct nta_member *m = r >= 0 && r < c->nranks ? nta_rank(c, r) : NULL;
  if (m)
    return m->proc;
  if (job->world_size > 0 && c->nranks == job->world_size)
    for (int i = 0; i < job->nprocs; i++)
      if (job->procs[i].lrank == r)
        return &job->procs[i];
  return NULL;
}

/* Does an independent death/abort/error of one of k's ranks explain it? */
static int explained(const struct nta_job *job, const struct nta_cand *k) {
  for (int i = 0; i < k->nranks; i++) {
    const struct nta_proc *p = proc_of_rank(job, k->comm, k->ranks[i]);
    if (!p)
      continue;
    for (int j = 0; j < job->ncands; j++) {
      const struct nta_cand *d = &job->cands[j];
      if (d->proc == p && (is_death(d->cls) || d->cls == NTA_NCCL_ERROR) && independent(job, d))
        return 1;
    }
  }
  return 0;
}

/* Is member m stuck in mismatch d: it never completed its call at d's seq
 * (collective), or d names it (p2p)? */
static int stuck_in(const struct nta_cand *d, const struct nta_member *m) {
  struct nta_op o;
  if (d->cls == NTA_COLL_MISMATCH)
    return nta_coll_find(m, d->seq, &o) && !o.done_ns;
  for (int a = 0; a < d->nranks; a++)
    if (d->ranks[a] == m->rank)
      return 1;
  return 0;
}

/* Is missing collective k the effect of a fingerprint mismatch?  A rank
 * that never issued k->seq is stuck in a mismatched call: on k's own comm at
 * an earlier seq, or on another comm (a split half) whose mismatched call it
 * never completed, or in a p2p mismatch that names it.  Meanwhile the ranks
 * whose calls returned (a root-only Broadcast, an eager send, the healthy
 * half of a split) run on to k->seq, possibly before the last mismatched
 * call was even made, so time alone would name the effect. */
static int follows_mismatch(const struct nta_job *job, const struct nta_cand *k) {
  if (k->cls != NTA_MISSING_COLL)
    return 0;
  for (int j = 0; j < job->ncands; j++) {
    const struct nta_cand *d = &job->cands[j];
    if ((d->cls != NTA_COLL_MISMATCH && d->cls != NTA_P2P_MISMATCH) || !d->comm)
      continue;
    if (d->cls == NTA_COLL_MISMATCH && d->comm == k->comm && d->seq < k->seq)
      return 1;
    for (int i = 0; i < k->nranks; i++) {
      const struct nta_proc *p = proc_of_rank(job, k->comm, k->ranks[i]);
      const struct nta_member *m = p ? nta_member_of(d->comm, p) : NULL;
      if (m && stuck_in(d, m))
        return 1;
    }
  }
  return 0;
}

/* Is missing collective k the effect of a collective registration that
 * holds the ranks it names?  They wait in ncclCommWindowRegister (or
 * DevCommCreate) on k's comm, which the rank that issued k->seq skipped:
 * that rank is the cause (an init_hang candidate names it), whoever was
 * first on the clock. */
static int waits_in_registration(const struct nta_job *job, const struct nta_cand *k) {
  if (k->cls != NTA_MISSING_COLL || !k->comm || !k->nranks)
    return 0;
  for (int i = 0; i < k->nranks; i++) {
    const struct nta_proc *p = proc_of_rank(job, k->comm, k->ranks[i]);
    const struct nta_member *m = p ? nta_member_of(k->comm, p) : NULL;
    if (!m || !m->cs || !m->cs->blocked_since || !nta_kind_collective_reg(m->cs->blocked_kind))
      return 0;
  }
  return 1;
}

static int better(const struct nta_cand *a, const struct nta_cand *b) {
  /* a before b? */
  uint64_t ta = a->t_ns, tb = b->t_ns;
  /* One process's own events are ordered by its own clock: no tie (an
   * abort, then the exit it leads to, a millisecond later). */
  if (a->proc && a->proc == b->proc && ta != tb)
    return ta < tb;
  if (ta + NTA_TIE_NS < tb)
    return 1;
  if (tb + NTA_TIE_NS < ta)
    return 0;
  return a->cls < b->cls;
}

/* For a process-level cause: the comm where peers waited on it. */
static void place_in_comm(const struct nta_job *job, const struct nta_cand *k, struct nta_verdict *v,
                          char *ctx, size_t ctxlen) {
  ctx[0] = 0;
  const struct nta_comm *best = k->comm;
  const struct nta_cand *wait = NULL;
  for (int j = 0; j < job->ncands && !best; j++) {
    const struct nta_cand *d = &job->cands[j];
    if ((d->cls == NTA_MISSING_COLL || d->cls == NTA_INIT_HANG) && d->comm)
      for (int i = 0; i < d->nranks; i++)
        if (proc_of_rank(job, d->comm, d->ranks[i]) == k->proc) {
          best = d->comm;
          wait = d;
        }
  }
  for (int ci = 0; ci < job->ncomms && !best; ci++)
    if (nta_member_of(&job->comms[ci], k->proc) &&
        (!best || job->comms[ci].nranks > best->nranks))
      best = &job->comms[ci];
  v->comm = best;
  if (!best) {
    if (k->proc && k->proc->lrank >= 0) /* else no rank is known: none is named */
      v->ranks[v->nranks++] = k->proc->lrank;
    return;
  }
  /* Every comm rank the process held: one process of ncclCommInitAll (or
   * a thread per device) takes all of them down with it. */
  if (k->nranks)
    v->ranks[v->nranks++] = k->ranks[0];
  else
    v->nranks = nta_proc_ranks(best, k->proc, v->ranks, NTA_MAX_VRANKS);
  if (!v->nranks && job->world_size == best->nranks && k->proc->lrank >= 0)
    v->ranks[v->nranks++] = k->proc->lrank;
  if (!wait)
    for (int j = 0; j < job->ncands; j++)
      if ((job->cands[j].cls == NTA_MISSING_COLL || job->cands[j].cls == NTA_INIT_HANG) &&
          job->cands[j].comm == best)
        wait = &job->cands[j];
  if (wait) {
    char hex[17];
    nta_comm_hex(best->id, hex);
    if (wait->cls == NTA_MISSING_COLL && wait->replay) {
      snprintf(ctx, ctxlen, "; the others then waited in %s in graph replay %llu on comm %s", wait->replay_op,
               (unsigned long long)wait->replay, hex);
      v->replay = wait->replay;
    } else if (wait->cls == NTA_MISSING_COLL)
      snprintf(ctx, ctxlen, "; the others then waited in collective seq %llu on comm %s",
               (unsigned long long)wait->seq, hex);
    else
      snprintf(ctx, ctxlen, "; the others then waited in the init of comm %s", hex);
  }
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

/* "; with it, 16 ranks vanished within 2 ms: ranks 8-23 of comm 9f2c0123
 * (hosts node1, node2)": the ranks that went the same way as the picked one
 * (v->ranks, lost more not kept), so the text names every one the JSON
 * does, and the hosts they were on (a node-wide kill shows as one host). */
static void alike_text(const struct nta_job *job, const struct nta_cand *pick, const struct nta_verdict *v,
                       int lost, uint64_t span_ns, char *buf, size_t len) {
  int r[NTA_MAX_VRANKS], n = v->nranks;
  memcpy(r, v->ranks, sizeof(int) * (size_t)n);
  qsort(r, (size_t)n, sizeof *r, cmp_int);
  char rl[160], hex[17] = "", hosts[128] = "";
  ntt_rank_ranges(r, n, rl, sizeof rl);
  if (lost) {
    size_t o = strlen(rl);
    snprintf(rl + o, sizeof rl - o, " and %d more", lost);
  }
  if (v->comm)
    nta_comm_hex(v->comm->id, hex);
  /* hosts, in rank order, at most 4 named */
  const char *seen[4];
  int nh = 0, more = 0;
  for (int i = 0; i < n; i++) {
    const struct nta_member *m = v->comm ? nta_rank(v->comm, r[i]) : NULL;
    const struct nta_proc *p = m ? m->proc : NULL;
    for (int j = 0; !p && v->comm == NULL && j < job->nprocs; j++)
      if (job->procs[j].lrank == r[i])
        p = &job->procs[j];
    if (!p || !p->img)
      continue;
    int dup = 0;
    for (int j = 0; j < nh; j++)
      dup |= strncmp(seen[j], p->img->hdr.host, sizeof p->img->hdr.host) == 0;
    if (dup)
      continue;
    if (nh < 4)
      seen[nh++] = p->img->hdr.host;
    else
      more = 1;
  }
  size_t o = 0;
  for (int j = 0; j < nh; j++)
    o += (size_t)snprintf(hosts + o, sizeof hosts - o, "%s%.24s", j ? ", " : "", seen[j]);
  if (more && o < sizeof hosts)
    snprintf(hosts + o, sizeof hosts - o, ", ...");
  const char *verb = pick->cls == NTA_RANK_EXIT    ? "exited"
                     : pick->cls == NTA_RANK_CRASH ? "died of a signal"
                     : pick->cls == NTA_APP_ABORT  ? "aborted"
                                                   : "vanished";
  char on[160] = "";
  if (nh)
    snprintf(on, sizeof on, " (host%s %s)", nh > 1 || more ? "s" : "", hosts);
  if (v->comm)
    snprintf(buf, len, "; with it, %d ranks %s within %llu ms: ranks %s of comm %.8s%s", n + lost, verb,
             (unsigned long long)(span_ns / 1000000), rl, hex, on);
  else
    snprintf(buf, len, "; with it, %d ranks %s within %llu ms: launcher ranks %s%s", n + lost, verb,
             (unsigned long long)(span_ns / 1000000), rl, on);
}

/* The clause of a next step about the other ranks, said only when the
 * evidence holds any (an exit status alone, or a lone process, has none). */
static const char *peers_clause(enum nta_class c) {
  switch (c) {
  case NTA_RANK_EXIT: return "; the hung peers are victims";
  case NTA_RANK_CRASH: return "; the peers' NCCL errors are effects";
  case NTA_RANK_KILLED: return "; the peers' errors are effects";
  default: return "";
  }
}

static int has_peers(const struct nta_job *job, const struct nta_verdict *v) {
  return job->nprocs > 1 || (v->comm && v->comm->nranks > 1);
}

static const char *next_step(enum nta_class c) {
  switch (c) {
  case NTA_HEALTHY: return "nothing to fix; keep nccltrace on to catch the next failure";
  case NTA_RANK_EXIT: return "read that rank's own log/traceback for why it exited";
  case NTA_RANK_CRASH: return "debug the crash on that rank (backtrace above, core dump)";
  case NTA_RANK_KILLED: return "read that rank's stderr and exit status first (exit 127 with 'symbol lookup error' or "
                               "'error while loading shared libraries': the dynamic linker ended it), then the kernel "
                               "log (dmesg: OOM killer) and the scheduler of that host for who sent SIGKILL";
  case NTA_APP_ABORT: return "find why the application aborted the communicator on that rank (its error handling path)";
  case NTA_COLL_MISMATCH: return "fix the code path where ranks diverge so every rank issues the same collective at that seq";
  case NTA_P2P_MISMATCH: return "make the send and its matching receive agree (count, datatype, peer)";
  case NTA_MISSING_COLL: return "find the branch that made those ranks skip the collective (rank-dependent control flow, early exit)";
  case NTA_INIT_HANG: return "check that the missing ranks reach communicator init (lazy init, rendezvous, launch); a work timeout does not cover init";
  case NTA_NCCL_ERROR: return "check that rank's NCCL log (NCCL_DEBUG=INFO) and the transport (NIC, links) it reported";
  case NTA_ENV_MISMATCH: return "launch every rank with the same NCCL_* environment";
  case NTA_STALL: return "every rank agreed: suspect the data plane (GPU, NVLink/network), rerun with NCCL_DEBUG=INFO";
  case NTA_STRAGGLER: return "look at that rank's host and GPU (data loader, CPU contention, throttling, clocks); the others only wait for it";
  case NTA_SLOW_COLL: return "a rank last at the device by most of the time held: what its GPU ran before that seq; "
                             "otherwise the collective itself was slow: links, network, NCCL's log at that time";
  default: return "";
  }
}

/* Comm ranks a verdict names that live in one process with other ranks of
 * the comm (ncclCommInitAll, a thread per device): say which process, so
 * "rank 2" is not read as a process of its own. */
static void shared_process_note(struct nta_verdict *v) {
  if (!v->comm)
    return;
  const struct nta_proc *done[4];
  int nd = 0;
  for (int i = 0; i < v->nranks && nd < 4; i++) {
    const struct nta_member *m = v->ranks[i] >= 0 ? nta_rank(v->comm, v->ranks[i]) : NULL;
    int seen = 0;
    for (int j = 0; m && j < nd; j++)
      seen |= done[j] == m->proc;
    if (!m || seen)
      continue;
    int r[NTA_MAX_VRANKS];
    int n = nta_proc_ranks(v->comm, m->proc, r, NTA_MAX_VRANKS);
    if (n < 2)
      continue;
    done[nd++] = m->proc;
    char rl[96], hex[17];
    ntt_rank_ranges(r, n, rl, sizeof rl);
    nta_comm_hex(v->comm->id, hex);
    size_t o = strlen(v->summary);
    if (o + 160 < sizeof(v->summary))
      snprintf(v->summary + o, sizeof(v->summary) - o, " [rank %d is one of ranks %s of comm %.8s in pid %d on %.64s]",
               v->ranks[i], rl, hex, m->proc->img->hdr.pid, m->proc->img->hdr.host);
  }
}

/* Comms a process could not watch (more than NTR_COMM_MAX alive at once:
 * no slot, so no timeout, no cross-rank check, their calls recorded
 * without a comm id): a verdict, healthy above all, holds only for the
 * comms that were watched, and says which were not (their NOTE records;
 * a ring that lapped since has lost them, the process's stderr line
 * stays). */
static void unwatched_note(const struct nta_job *job, struct nta_verdict *v) {
  size_t cap = sizeof(v->summary);
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    char list[200] = "";
    size_t l = 0;
    uint32_t named = 0;
    for (uint64_t k = 0; k < p->nkeep; k++) {
      const struct ntr_record *r = &p->keep[k];
      if (!nta_note_unwatched(r))
        continue;
      if (named < 4 && l + 40 < sizeof list) {
        char hex[17];
        nta_comm_hex(r->comm_id, hex);
        l += (size_t)snprintf(list + l, sizeof list - l, "%scomm %.8s rank %d", named ? ", " : "", hex, (int)r->rank);
      }
      named++;
    }
    uint32_t total = named;
    size_t o = strlen(v->summary);
    if (!total || !p->img || o + 320 >= cap)
      continue;
    snprintf(v->summary + o, cap - o,
             " [%u communicator%s not watched in pid %d on %.64s (more than %u alive at once: no timeout, no "
             "cross-rank check)%s%s%s]",
             total, total > 1 ? "s" : "", p->img->hdr.pid, p->img->hdr.host, p->img->hdr.comm_max, named ? ": " : "",
             list, named > 4 ? ", ..." : "");
  }
}

/* Processes whose evidence has no realtime base (a header written before
 * its clock was set, or damaged): their times count from an unknown
 * origin and are not placed on the job's clock (reports print no offset
 * for them, nta_time_placed). */
static void no_clock_note(const struct nta_job *job, struct nta_verdict *v) {
  char list[160] = "";
  size_t l = 0;
  int n = 0;
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    if (!p->img || p->img->hdr.real_base_ns)
      continue;
    if (n < 2 && l + 80 < sizeof list)
      l += (size_t)snprintf(list + l, sizeof list - l, "%spid %d on %.32s", n ? ", " : "", p->img->hdr.pid,
                            p->img->hdr.host);
    n++;
  }
  size_t o = strlen(v->summary);
  if (n && o + 240 < sizeof v->summary)
    snprintf(v->summary + o, sizeof v->summary - o,
             " [no clock base in the evidence of %s%s: %s times are not on the job's clock, and the order of "
             "events across ranks may be wrong]",
             list, n > 2 ? " and more" : "", n > 1 ? "their" : "its");
}

int nta_time_placed(uint64_t t_ns) {
  return t_ns >= NTA_WALL_MIN_NS;
}

/* What the verdict line says about evidence it did not use: files of
 * other owners left out, launcher ranks claimed twice, other attempts and
 * other jobs in the inputs (load.c).  None of them changes the verdict;
 * each is said, so that a planted or stale job cannot pass unseen. */
static void other_evidence(const struct nta_job *job, struct nta_verdict *v) {
  size_t o = strlen(v->summary), cap = sizeof(v->summary);
  if (job->nleft_out && o + 96 < cap)
    o += (size_t)snprintf(v->summary + o, cap - o, " [%d input%s left out: owned by other users]", job->nleft_out,
                          job->nleft_out > 1 ? "s" : "");
  if (job->ndups && o + 128 < cap) {
    char list[64] = "";
    size_t l = 0;
    for (int i = 0; i < job->ndups && l + 16 < sizeof list; i++)
      l += (size_t)snprintf(list + l, sizeof list - l, "%s%d", i ? "," : "", job->dups[i].rank);
    o += (size_t)snprintf(v->summary + o, cap - o,
                          " [duplicate launcher rank%s %s%s: claimed by several processes, the latest of each analyzed]",
                          job->ndups > 1 ? "s" : "", list, l + 16 >= sizeof list ? ",..." : "");
  }
  if (job->nother_attempts && o + 96 < cap) {
    char list[64] = "";
    size_t l = 0;
    for (int i = 0; i < job->nother_attempts && l + 16 < sizeof list; i++)
      l += (size_t)snprintf(list + l, sizeof list - l, "%s%d", i ? "," : "", job->other_attempts[i]);
    o += (size_t)snprintf(v->summary + o, cap - o, " [restart attempt %d%s; attempt%s %s also present: --attempt N]",
                          job->attempt, job->want_attempt ? "" : ", the latest", job->nother_attempts > 1 ? "s" : "",
                          list);
  }
  if (job->nother_jobs && o + 96 < cap)
    snprintf(v->summary + o, cap - o, " [%d other job%s in the inputs, not analyzed: --job ID]", job->nother_jobs,
             job->nother_jobs > 1 ? "s" : "");
}

void nta_decide(struct nta_job *job) {
  struct nta_verdict *v = &job->v;
  memset(v, 0, sizeof(*v));
  const struct nta_cand *pick = NULL;
  for (int j = 0; j < job->ncands; j++) {
    const struct nta_cand *k = &job->cands[j];
    int ok;
    switch (k->cls) {
    case NTA_RANK_EXIT: case NTA_RANK_CRASH: case NTA_RANK_KILLED: case NTA_APP_ABORT:
    case NTA_NCCL_ERROR:
      ok = independent(job, k);
      break;
    case NTA_COLL_MISMATCH: case NTA_P2P_MISMATCH:
      ok = 1;
      break;
    case NTA_MISSING_COLL: case NTA_INIT_HANG:
      ok = !explained(job, k) && !follows_mismatch(job, k) && !waits_in_registration(job, k);
      break;
    case NTA_ENV_MISMATCH:
      ok = k->refused; /* otherwise only a hint, below */
      break;
    default:
      ok = 0;
    }
    if (ok && (!pick || better(k, pick)))
      pick = k;
  }
  if (!pick) {
    /* Nothing explicit: an env difference outranks a plain stall. */
    const struct nta_cand *stall = NULL, *env = NULL;
    for (int j = 0; j < job->ncands; j++) {
      const struct nta_cand *k = &job->cands[j];
      if (k->cls == NTA_STALL && (!stall || k->t_ns < stall->t_ns))
        stall = k;
    }
    for (int j = 0; stall && j < job->ncands; j++)
      if (job->cands[j].cls == NTA_ENV_MISMATCH && (!env || job->cands[j].comm == stall->comm))
        env = &job->cands[j];
    pick = env ? env : stall;
    if (env && stall) {
      char hex[17];
      nta_comm_hex(stall->comm->id, hex);
      snprintf(v->summary, sizeof(v->summary), "%.900s; collective seq %llu on comm %s then stalled on every rank",
               env->summary, (unsigned long long)stall->seq, hex);
      v->seq = stall->seq;
    }
  }
  if (!pick) {
    /* Only effects left (a launcher SIGTERM, a death after a timeout): the
     * earliest of them is all there is to report. */
    for (int j = 0; j < job->ncands; j++) {
      const struct nta_cand *k = &job->cands[j];
      if ((is_death(k->cls) || k->cls == NTA_NCCL_ERROR) && (!pick || better(k, pick)))
        pick = k;
    }
  }
  if (!pick && job->nstrag) {
    /* No fault: the rank everyone waited for is the finding (the first:
     * straggler.c orders consistent ones before stalls). */
    const struct nta_strag *g = &job->strag[0];
    v->cls = nta_strag_class(g);
    v->strag = g;
    v->comm = g->comm;
    v->t_ns = g->t_ns;
    if (g->rank >= 0)
      v->ranks[v->nranks++] = g->rank;
    for (int i = 0; g->rank < 0 && i < g->nstalls && v->nranks < NTA_MAX_VRANKS; i++) {
      int dup = 0;
      for (int k = 0; k < v->nranks; k++)
        dup |= v->ranks[k] == g->stalls[i].rank;
      if (!dup)
        v->ranks[v->nranks++] = g->stalls[i].rank;
    }
    if (!g->consistent && g->nstalls)
      v->seq = g->stalls[0].seq;
    else if (!g->consistent && g->nslow)
      v->seq = g->slow[0].seq;
    snprintf(v->summary, sizeof(v->summary), "%s", g->summary);
  } else if (!pick) {
    v->cls = NTA_HEALTHY;
    unsigned long long ncoll = 0, np2p = 0, nrep = 0;
    for (int ci = 0; ci < job->ncomms; ci++)
      for (int i = 0; i < job->comms[ci].nmembers; i++) {
        ncoll += job->comms[ci].members[i].ncolls;
        np2p += job->comms[ci].members[i].np2p;
        nrep += job->comms[ci].members[i].d->nreplays;
      }
    char reps[64] = "";
    if (nrep)
      snprintf(reps, sizeof reps, " and %llu graph replays", nrep);
    if (!job->ncomms && !ncoll && !np2p)
      snprintf(v->summary, sizeof(v->summary),
               "healthy as far as recorded: %d process%s left evidence, but no NCCL call and no communicator "
               "was recorded: nothing to judge", job->nprocs, job->nprocs == 1 ? "" : "es");
    else
      snprintf(v->summary, sizeof(v->summary),
               "healthy: %d process%s, %d communicator%s, %llu collective and %llu send/recv calls%s recorded, "
               "no fault found",
               job->nprocs, job->nprocs == 1 ? "" : "es", job->ncomms, job->ncomms == 1 ? "" : "s", ncoll, np2p,
               reps);
  } else {
    v->cls = pick->cls;
    v->t_ns = pick->t_ns;
    if (!v->seq)
      v->seq = pick->seq;
    if (pick->replay)
      v->replay = pick->replay;
    snprintf(v->field, sizeof(v->field), "%s", pick->field);
    char ctx[256] = "", site[768] = "", alike[320] = "";
    if (pick->proc && (is_death(pick->cls) || pick->cls == NTA_NCCL_ERROR)) {
      place_in_comm(job, pick, v, ctx, sizeof(ctx));
      nta_death_site(pick, v, site, sizeof(site));
      /* Same-class, independent deaths close together: one event, several
       * ranks (an NCCL error spreads to peers: only the first counts). */
      int lost = 0, nalike = 0;
      uint64_t last_t = pick->t_ns;
      for (int j = 0; j < job->ncands && is_death(pick->cls); j++) {
        const struct nta_cand *k = &job->cands[j];
        if (k == pick || k->cls != pick->cls || !k->proc || !independent(job, k) ||
            k->t_ns > pick->t_ns + NTA_SAME_CAUSE_NS)
          continue;
        nalike++;
        if (k->t_ns > last_t)
          last_t = k->t_ns;
        int rs[NTA_MAX_VRANKS], nr = 0;
        if (v->comm)
          nr = nta_proc_ranks(v->comm, k->proc, rs, NTA_MAX_VRANKS);
        else
          rs[nr++] = k->proc->lrank;
        for (int q = 0; q < nr; q++) {
          int dup = 0;
          for (int i = 0; i < v->nranks; i++)
            dup |= v->ranks[i] == rs[q];
          if (rs[q] < 0 || dup)
            continue;
          if (v->nranks < NTA_MAX_VRANKS)
            v->ranks[v->nranks++] = rs[q];
          else
            lost++; /* not kept: counted */
        }
      }
      if (nalike)
        alike_text(job, pick, v, lost, last_t - pick->t_ns, alike, sizeof alike);
    } else {
      v->comm = pick->comm;
      memcpy(v->ranks, pick->ranks, sizeof(v->ranks));
      v->stack_proc = pick->stack_proc;
      v->stack_id = pick->stack_id;
      v->nranks = pick->nranks;
      v->silent = pick->silent;
    }
    if (pick->cls == NTA_RANK_EXIT) {
      v->has_exit = 1;
      v->exit_code = pick->exit_code;
    } else if (pick->cls == NTA_RANK_CRASH || (pick->cls == NTA_RANK_KILLED && pick->signo)) {
      v->has_signal = 1; /* a kill only when nccltrace run saw the signal */
      v->signo = pick->signo;
    } else if (pick->cls == NTA_NCCL_ERROR) {
      v->has_error = 1;
      v->error = pick->error;
    }
    if (!v->summary[0])
      snprintf(v->summary, sizeof(v->summary), "%.480s%.200s%.200s%.140s", pick->summary, site, alike, ctx);
    if (!(pick->proc && (is_death(pick->cls) || pick->cls == NTA_NCCL_ERROR)))
      shared_process_note(v);
  }
  /* Missing evidence is itself evidence, and the verdict must say so. */
  char miss[512] = "";
  size_t o = 0;
  int nmiss = 0, nlisted = 0;
  unsigned char seen[4096] = {0};
  for (int i = 0; i < job->nprocs; i++)
    if (job->procs[i].lrank >= 0 && job->procs[i].lrank < 4096)
      seen[job->procs[i].lrank] = 1;
  for (int r = 0; r < job->world_size && r < 4096; r++) {
    /* one that left an exit status has its own line (runexit.c) */
    if (!seen[r] && !nta_runexit_has_rank(job, r)) {
      nta_event_add(job, job->t0_ns, r, "no_evidence", "no evidence from rank %d (no ring, no dump)", r);
      if (o + 40 < sizeof(miss))
        o += (size_t)snprintf(miss + o, sizeof(miss) - o, "%s%d", nmiss ? "," : "", r), nlisted++;
      nmiss++;
    }
  }
  if (nmiss > nlisted)
    snprintf(miss + o, sizeof(miss) - o, " and %d more", nmiss - nlisted);
  o = strlen(v->summary);
  if (nmiss && o + 64 < sizeof(v->summary))
    snprintf(v->summary + o, sizeof(v->summary) - o, " [no %sevidence from rank%s %s]",
             job->nunreadable ? "readable " : "", nmiss > 1 ? "s" : "", miss);
  o = strlen(v->summary);
  if (!job->nprocs && job->nrunexits && o + 128 < sizeof(v->summary))
    snprintf(v->summary + o, sizeof(v->summary) - o,
             " [no ring or dump from any process: only the %d exit status%s nccltrace run recorded]", job->nrunexits,
             job->nrunexits > 1 ? "es" : "");
  no_clock_note(job, v);
  o = strlen(v->summary);
  if (job->nunreadable && o + 64 < sizeof(v->summary))
    snprintf(v->summary + o, sizeof(v->summary) - o, " [evidence incomplete: %d input%s unreadable]",
             job->nunreadable, job->nunreadable > 1 ? "s" : "");
  other_evidence(job, v);
  unwatched_note(job, v);
  int peers = has_peers(job, v);
  if (v->cls == NTA_RANK_EXIT && v->exit_code == 127)
    snprintf(v->next, sizeof(v->next),
             "read that rank's stderr for 'symbol lookup error' or 'error while loading shared libraries': "
             "the dynamic linker ended it (a library missing, or older than the program needs)%s",
             peers ? peers_clause(v->cls) : "");
  else if (v->cls == NTA_RANK_KILLED && v->has_signal)
    snprintf(v->next, sizeof(v->next),
             "find who sent signal %d: the kernel log of that host (dmesg: the OOM killer), then the "
             "scheduler's and the launcher's logs%s", v->signo, peers ? peers_clause(v->cls) : "");
  else if (v->cls == NTA_MISSING_COLL && v->silent == 1)
    snprintf(v->next, sizeof(v->next),
             "those ranks left no ring and no dump, so the evidence cannot tell a skipped collective from "
             "a lost rank: run `nccltrace collect` on their hosts or copy their dumps here; if they left "
             "nothing because they never got there, find the branch that made them skip it");
  else if (v->cls == NTA_MISSING_COLL && v->silent == 2)
    snprintf(v->next, sizeof(v->next),
             "find how those ranks ended: their stderr and exit status, the kernel log (dmesg: the OOM "
             "killer) and the scheduler's logs for a SIGKILL; give the tracer room for ring files "
             "(NCCLTRACE_RING_DIR, docs/reliability.md) so the next run keeps their evidence");
  else if (v->cls == NTA_INIT_HANG && v->field[0])
    snprintf(v->next, sizeof(v->next),
             "make every rank of the communicator call nccl%s in the same order: it is collective, "
             "and the ranks that called it wait for the others", v->field);
  else
    snprintf(v->next, sizeof(v->next), "%s%s", next_step(v->cls),
             peers && v->cls != NTA_RANK_KILLED ? peers_clause(v->cls) : "");
}

static int cmp_event(const void *a, const void *b) {
  const struct nta_event *x = a, *y = b;
  if (x->t_ns != y->t_ns)
    return x->t_ns < y->t_ns ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order; /* detection order for equal times */
}

static int same_proc(const struct ntt_image *a, const struct ntt_image *b) {
  return a->hdr.pid == b->hdr.pid && strncmp(a->hdr.host, b->hdr.host, sizeof(a->hdr.host)) == 0;
}

/* Images built in memory (tests, fuzzers): group by process, reduce. */
static int procs_from_images(struct nta_job *job) {
  job->procs = calloc((size_t)(job->nimgs ? job->nimgs : 1), sizeof(*job->procs));
  struct ntt_image **grp = calloc((size_t)(job->nimgs ? job->nimgs : 1), sizeof(*grp));
  char *used = calloc((size_t)(job->nimgs ? job->nimgs : 1), 1);
  int rc = job->procs && grp && used ? 0 : -1;
  for (int i = 0; rc == 0 && i < job->nimgs; i++) {
    if (used[i])
      continue;
    int n = 0;
    for (int j = i; j < job->nimgs; j++)
      if (!used[j] && same_proc(&job->imgs[i], &job->imgs[j])) {
        used[j] = 1;
        grp[n++] = &job->imgs[j];
      }
    rc = nta_reduce_proc(&job->procs[job->nprocs++], grp, n, NULL, 0);
    for (int k = 0; k < n; k++) { /* reduced: the records are not read again */
      free(grp[k]->recs);
      grp[k]->recs = NULL;
      grp[k]->nrecs = 0;
    }
  }
  free(grp);
  free(used);
  return rc;
}

int nta_analyze(struct nta_job *job) {
  if (!job->procs && job->nimgs && procs_from_images(job) != 0)
    return -12;
  job->world_size = -1;
  for (int i = 0; i < job->nprocs; i++)
    if (job->procs[i].img->hdr.world_size > job->world_size)
      job->world_size = job->procs[i].img->hdr.world_size;
  if (job->nprocs == 0 && job->nfr) { /* Flight Recorder dumps alone */
    nta_fr_detect(job);
    if (job->nev > 1)
      qsort(job->ev, (size_t)job->nev, sizeof(*job->ev), cmp_event);
    return 0;
  }
  nta_runexit_apply(job); /* fates first: alignment reports them */
  if (nta_align(job) != 0)
    return -12;
  nta_phase("communicators aligned");
  job->t0_ns = 0;
  for (int i = 0; i < job->nprocs; i++)
    if (nta_time_placed(job->procs[i].first_ns) && (!job->t0_ns || job->procs[i].first_ns < job->t0_ns))
      job->t0_ns = job->procs[i].first_ns;
  nta_detect(job);
  nta_phase("findings detected");
  nta_decide(job);
  /* No process with a clock (exit statuses alone, or bases missing): the
   * first placed event is the origin, so no offset is epoch-sized. */
  for (int i = 0; !job->t0_ns && i < job->nev; i++)
    if (nta_time_placed(job->ev[i].t_ns) && (!job->t0_ns || job->ev[i].t_ns < job->t0_ns))
      job->t0_ns = job->ev[i].t_ns;
  if (job->nfr)
    nta_fr_merge(job);
  if (job->nev > 1) /* ev is NULL when there is none: qsort's argument must not be */
    qsort(job->ev, (size_t)job->nev, sizeof(*job->ev), cmp_event);
  return 0;
}

void nta_job_free(struct nta_job *job) {
  for (int ci = 0; ci < job->ncomms; ci++) {
    struct nta_comm *c = &job->comms[ci];
    free(c->members);
    free(c->ranked);
  }
  free(job->comms);
  for (int i = 0; i < job->nprocs; i++)
    nta_proc_free(&job->procs[i]);
  free(job->procs);
  for (int i = 0; i < job->nimgs; i++)
    ntt_image_free(&job->imgs[i]);
  free(job->imgs);
  free(job->ev);
  free(job->cands);
  free(job->unreadable);
  free(job->runexits);
  free(job->other_jobs);
  free(job->other_attempts);
  free(job->left_out);
  free(job->dups);
  free(job->allow_uids);
  for (int i = 0; i < job->nfr; i++)
    ntf_dump_free(&job->fr[i]);
  free(job->fr);
  for (int i = 0; i < NTA_MAX_WORKERS; i++)
    nta_arena_free(&job->arenas[i]);
  memset(job, 0, sizeof(*job));
}
