/* fates.c -- process-level findings: how each process ended (exit code,
 * fatal or launcher signal, vanished), application aborts, NCCL async
 * errors, and the tracer's own events on the timeline.  Each death or abort
 * is checked for being a victim: a process that was already stuck itself
 * (its own op pending for long, its own timeout or async error first) died
 * of the hang, it did not cause it.
 */
#include <signal.h>
#include <string.h>
#include "tools/analyze/analyze.h"

#define NTA_VICTIM_GRACE_NS 1000000000ull /* pending this long before dying: already stuck */
#define NTA_MARKS_SHOWN 4                  /* application markers per process in the chain */

int nta_proc_comm_rank(const struct nta_comm *c, const struct nta_proc *p) {
  const struct nta_member *m = nta_member_of(c, p);
  return m ? m->rank : -1;
}

/* Was the process already stuck itself when it died or aborted at t? */
static int victim_at(const struct nta_job *job, const struct nta_proc *p, uint64_t t) {
  if (p->timeout_ns && p->timeout_ns <= t)
    return 1;
  if (p->async_ns && p->async_ns < t)
    return 1;
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_member *m = nta_member_of(&job->comms[ci], p);
    if (!m || !m->tracking)
      continue;
    if (m->in_init && m->init_enter_ns && m->init_enter_ns + NTA_VICTIM_GRACE_NS < t)
      return 1;
    for (uint64_t i = m->ncolls; i-- > 0;) {
      const struct nta_op *o = &m->colls[i];
      if (o->rec->seq <= m->completed)
        break;
      if (!o->done_ns && o->t_ns + NTA_VICTIM_GRACE_NS < t && o->rec->result <= 0)
        return 1;
    }
  }
  return 0;
}

static const char *sig_name(int s) {
  switch (s) {
  case SIGSEGV: return "SIGSEGV";
  case SIGBUS: return "SIGBUS";
  case SIGILL: return "SIGILL";
  case SIGFPE: return "SIGFPE";
  case SIGABRT: return "SIGABRT";
  case SIGTERM: return "SIGTERM";
  case SIGINT: return "SIGINT";
  case SIGKILL: return "SIGKILL";
  case SIGHUP: return "SIGHUP";
  case SIGQUIT: return "SIGQUIT";
  case SIGSYS: return "SIGSYS";
  default: return "signal";
  }
}

static void proc_where(const struct nta_proc *p, char *buf, size_t len) {
  snprintf(buf, len, "pid %d on %.64s", p->img->hdr.pid, p->img->hdr.host);
}

void nta_detect_fates(struct nta_job *job) {
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    char where[128];
    proc_where(p, where, sizeof(where));
    struct nta_cand *k = NULL;
    if (p->fate == NTA_EXITED) {
      nta_event_add(job, p->fate_ns, p->lrank, "exit", "%s exited with code %d", where, p->exit_code);
      if (p->exit_code != 0 && (k = nta_cand_add(job, NTA_RANK_EXIT, p->fate_ns)) != NULL) {
        k->exit_code = p->exit_code;
        snprintf(k->summary, sizeof(k->summary), "rank %d (%s) exited with code %d", p->lrank, where,
                 p->exit_code);
      }
    } else if (p->fate == NTA_SIGNALED) {
      const struct ntr_ring_header *h = &p->img->hdr;
      char bt[400] = "";
      size_t o = 0;
      for (uint32_t f = 0; f < h->bt_depth && f < NTR_BT_DEPTH && f < 6 && o + 80 < sizeof(bt); f++)
        o += (size_t)snprintf(bt + o, sizeof(bt) - o, "%s%.*s", f ? " < " : "", (int)NTR_SYM_BYTES,
                              h->bt_sym[f][0] ? h->bt_sym[f] : "?");
      nta_event_add(job, p->fate_ns, p->lrank, "signal", "%s died of %s (%d)%s%s", where,
                    sig_name(p->signo), p->signo, bt[0] ? "; backtrace: " : "", bt);
      if ((k = nta_cand_add(job, NTA_RANK_CRASH, p->fate_ns)) != NULL) {
        k->signo = p->signo;
        k->noise = !p->fatal;
        snprintf(k->summary, sizeof(k->summary), "rank %d (%s) %s %s%s%s", p->lrank, where,
                 p->fatal ? "crashed with" : "was terminated by", sig_name(p->signo),
                 bt[0] ? "; backtrace: " : "", bt);
      }
    } else if (p->fate == NTA_VANISHED) {
      /* one ns after its last record: the chain shows that record first */
      nta_event_add(job, p->fate_ns + 1, p->lrank, "vanished",
                    "%s left no exit record and is gone (SIGKILL or OOM killer); last record here", where);
      if ((k = nta_cand_add(job, NTA_RANK_KILLED, p->fate_ns)) != NULL)
        snprintf(k->summary, sizeof(k->summary),
                 "rank %d (%s) vanished without an exit record (SIGKILL or the OOM killer)", p->lrank,
                 where);
    }
    if (k) {
      k->proc = p;
      k->victim = victim_at(job, p, p->fate_ns);
    }
    if (p->lost)
      nta_event_add(job, p->first_ns, p->lrank, "lost",
                    "%s: ring wrapped, %llu older records were overwritten", where,
                    (unsigned long long)p->lost);
    /* Tracer events worth seeing on the timeline; of the application's
     * markers only the last few per process (a training loop marks every
     * step). */
    uint64_t marks = 0, seen = 0;
    for (uint64_t j = 0; j < p->nrecs; j++)
      marks += p->recs[j].kind == NTR_KIND_MARK;
    for (uint64_t j = 0; j < p->nrecs; j++) {
      const struct ntr_record *r = &p->recs[j];
      uint64_t t = nta_rec_ns(p, r);
      char txt[25];
      memcpy(txt, r->u.text, 24);
      txt[24] = 0;
      char hex[17];
      nta_comm_hex(r->comm_id, hex);
      switch (r->kind) {
      case NTR_KIND_TIMEOUT:
        nta_event_add(job, t, p->lrank, "timeout", "comm %.8s rank %d: seq %llu did not complete in time",
                      hex, r->rank, (unsigned long long)r->seq);
        break;
      case NTR_KIND_ASYNC_ERROR:
        nta_event_add(job, t, p->lrank, "async_error", "comm %.8s rank %d: %s (was %s)", hex, r->rank,
                      ntr_result_name((int)r->aux), ntr_result_name(r->result));
        break;
      case NTR_KIND_MISMATCH:
        nta_event_add(job, t, p->lrank, "mismatch", "coordinator: comm %.8s seq %llu: %s differs from rank %d",
                      hex, (unsigned long long)r->seq, txt, (int)r->aux);
        break;
      case NTR_KIND_PEER_LOST:
        nta_event_add(job, t, p->lrank, "peer_lost", "coordinator: comm %.8s lost rank %d", hex, r->peer);
        break;
      case NTR_KIND_ENV_DIFF:
        nta_event_add(job, t, p->lrank, "env_diff", "coordinator: %s differs on comm %.8s", txt, hex);
        break;
      case NTR_KIND_MARK:
        if (++seen + NTA_MARKS_SHOWN > marks)
          nta_event_add(job, t, p->lrank, "mark", "%s = %lld", txt, (long long)r->count);
        break;
      case NTR_KIND_DUMP:
        nta_event_add(job, t, p->lrank, "dump", "dump written (%s)", txt);
        break;
      case NTR_KIND_COMM_ABORT:
        if (r->phase != NTR_PHASE_EXIT)
          nta_event_add(job, t, p->lrank, "abort", "comm %.8s rank %d: ncclCommAbort", hex, r->rank);
        break;
      default:
        break;
      }
    }
  }
}

/* A teardown abort: some frameworks abort (rather than destroy) their
 * communicators at shutdown.  It is no candidate at all, only an event on
 * the timeline, when on every member of the comm everything issued completed
 * and nobody issued a collective past the aborter's last one: no rank ever
 * needed the aborter again.  Without completion tracking we cannot tell, and
 * the abort keeps its weight. */
static int abort_harmless(const struct nta_comm *c, const struct nta_member *aborter) {
  /* Teardown ends in a clean exit: an abort followed by a failing exit or a
   * signal is the application giving up, and stays a cause. */
  const struct nta_proc *p = aborter->proc;
  if (p->fate != NTA_EXITED || p->exit_code != 0)
    return 0;
  for (int i = 0; i < c->nmembers; i++) {
    const struct nta_member *m = &c->members[i];
    if (!m->tracking || m->issued > aborter->issued || m->completed < m->issued)
      return 0;
    for (uint64_t j = 0; j < m->np2p; j++)
      if (!m->p2p[j].op.done_ns)
        return 0;
  }
  return 1;
}

void nta_detect_errors(struct nta_job *job) {
  for (int ci = 0; ci < job->ncomms; ci++) {
    const struct nta_comm *c = &job->comms[ci];
    for (int i = 0; i < c->nmembers; i++) {
      const struct nta_member *m = &c->members[i];
      char hex[17];
      nta_comm_hex(c->id, hex);
      if (m->abort_ns && !abort_harmless(c, m)) {
        struct nta_cand *k = nta_cand_add(job, NTA_APP_ABORT, m->abort_ns);
        if (k) {
          k->comm = c;
          k->proc = m->proc;
          k->ranks[k->nranks++] = m->rank;
          k->victim = victim_at(job, m->proc, m->abort_ns);
          snprintf(k->summary, sizeof(k->summary), "rank %d aborted comm %s (ncclCommAbort)", m->rank, hex);
        }
      }
      int err = m->cs ? m->cs->async_error : 0;
      uint64_t t = 0;
      for (uint64_t j = 0; j < m->proc->nrecs; j++) {
        const struct ntr_record *r = &m->proc->recs[j];
        if (r->kind == NTR_KIND_ASYNC_ERROR && r->comm_id == c->id && r->aux != 0 && r->aux != 7) {
          t = nta_rec_ns(m->proc, r);
          err = (int)r->aux;
          break;
        }
      }
      if (err == 0 || err == 7)
        continue;
      if (!t)
        t = m->proc->last_ns;
      struct nta_cand *k = nta_cand_add(job, NTA_NCCL_ERROR, t);
      if (!k)
        continue;
      k->comm = c;
      k->proc = m->proc;
      k->error = err;
      k->ranks[k->nranks++] = m->rank;
      /* A peer's death shows up as ncclRemoteError: only a cause when
       * nothing came before it (verdict.c compares times). */
      snprintf(k->summary, sizeof(k->summary), "rank %d of comm %s got %s from NCCL", m->rank, hex,
               ntr_result_name(err));
    }
  }
}

