/* fates.c -- process-level findings: how each process ended (exit code,
 * fatal or launcher signal, vanished), application aborts, NCCL async
 * errors, and the tracer's own events on the timeline.  Each death or abort
 * is checked for being a victim: a process that was already stuck itself
 * (its own op pending for long, its own timeout or async error first) died
 * of the hang, it did not cause it.
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 * Records are read from each process's kept records (reduce.c): exits,
 * signals, tracer events, aborts, the last few markers, by position.
 */
#include <signal.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"
#include "recorder/names.h"

#define NTA_VICTIM_GRACE_NS 1000000000ull /* pending this long before dying: already stuck */

static int fatal_signal(int s) {
  return s == SIGSEGV || s == SIGBUS || s == SIGILL || s == SIGFPE || s == SIGABRT || s == SIGSYS;
}

/* How the process ended, from its latest image and its kept records. */
void nta_set_fate(struct nta_proc *p) {
  const struct ntt_image *img = p->img;
  uint64_t exit_ns = 0, sig_ns = 0;
  int exit_code = 0, sig = 0;
  for (uint64_t i = 0; i < p->nkeep; i++) {
    const struct ntr_record *r = &p->keep[i];
    if (r->kind == NTR_KIND_EXIT) {
      exit_ns = nta_ns(p, r->tsc);
      exit_code = (int)(int64_t)r->aux;
    } else if (r->kind == NTR_KIND_SIGNAL && r->aux != SIGUSR1 && !sig_ns) {
      sig_ns = nta_ns(p, r->tsc);
      sig = (int)r->aux;
    } else if (r->kind == NTR_KIND_ASYNC_ERROR && !p->async_ns && r->aux != 0 && r->aux != 7) {
      /* 7 is ncclInProgress: a nonblocking comm at work, not an error */
      p->async_ns = nta_ns(p, r->tsc);
      p->async_err = (int)r->aux;
    } else if (r->kind == NTR_KIND_TIMEOUT && !p->timeout_ns) {
      p->timeout_ns = nta_ns(p, r->tsc);
    }
  }
  uint64_t trig_ns = img->has_trigger ? ntt_image_ns(img, img->trigger.tsc) : 0;
  p->fate = NTA_UNKNOWN;
  if (img->hdr.proc_state == NTR_PROC_EXITED || exit_ns) {
    p->fate = NTA_EXITED;
    p->exit_code = img->hdr.proc_state == NTR_PROC_EXITED ? img->hdr.exit_code : exit_code;
    p->fate_ns = exit_ns ? exit_ns : (trig_ns ? trig_ns : p->last_ns);
  } else if (img->hdr.proc_state == NTR_PROC_SIGNALED || sig_ns ||
             (img->has_trigger && img->trigger.kind == NTR_TRIG_FATAL_SIGNAL)) {
    p->fate = NTA_SIGNALED;
    p->signo = img->hdr.proc_state == NTR_PROC_SIGNALED && img->hdr.signo ? img->hdr.signo
               : sig ? sig : img->trigger.signo;
    p->fate_ns = sig_ns ? sig_ns : (trig_ns ? trig_ns : p->last_ns);
  } else if (img->has_trigger && (img->trigger.kind == NTR_TRIG_SIGNAL) &&
             img->trigger.signo != SIGUSR1) {
    p->fate = NTA_SIGNALED;
    p->signo = img->trigger.signo;
    p->fate_ns = trig_ns;
  } else if (img->hdr.proc_state == NTR_PROC_EXEC) {
    /* Not a death: the pid runs another program (its ring, or collect's
     * dump of it, says exec).  Peers that still needed it show that as a
     * missing collective; the timeline says where it went. */
    p->fate = NTA_EXECED;
    p->fate_ns = p->last_ns;
  } else if (!img->is_dump) {
    p->fate = img->pid_alive ? NTA_ALIVE : NTA_VANISHED;
    p->fate_ns = p->fate == NTA_VANISHED ? p->last_ns : 0;
  } else if (img->has_trigger && img->trigger.kind == NTR_TRIG_COLLECTED &&
             (img->trigger.flags & NTR_TRIG_F_ALIVE)) {
    /* bundle's snapshot of a live process's ring: as the ring read then */
    p->fate = NTA_ALIVE;
    p->fate_ns = 0;
  } else if (img->has_trigger && img->trigger.kind == NTR_TRIG_COLLECTED) {
    /* collect turned a dead process's ring into this dump: it vanished */
    p->fate = NTA_VANISHED;
    p->fate_ns = p->last_ns;
  }
  p->fatal = p->fate == NTA_SIGNALED && fatal_signal(p->signo);
}

int nta_proc_comm_rank(const struct nta_comm *c, const struct nta_proc *p) {
  const struct nta_member *m = nta_member_of(c, p);
  return m ? m->rank : -1;
}

/* Was the process already stuck itself when it died or aborted at t? */
static int victim_at(const struct nta_proc *p, uint64_t t) {
  if (p->timeout_ns && p->timeout_ns <= t)
    return 1;
  if (p->async_ns && p->async_ns < t)
    return 1;
  /* Each communicator once, through its first member of p (as before). */
  for (int mi = 0; mi < p->nmems; mi++) {
    const struct nta_member *m = p->mems[mi];
    if (nta_member_of(m->comm, p) != m || !m->tracking)
      continue;
    if (m->in_init && m->init_enter_ns && m->init_enter_ns + NTA_VICTIM_GRACE_NS < t)
      return 1;
    for (uint64_t i = m->ncolls; i-- > 0;) {
      if (nta_coll_seq(m, i) <= m->completed)
        break;
      struct nta_op o;
      nta_coll_at(m, i, &o);
      if (!o.done_ns && o.t_ns + NTA_VICTIM_GRACE_NS < t && o.result <= 0)
        return 1;
    }
  }
  return 0;
}

static const char *sig_name(int s) {
  const char *n = ntr_name_signal(s);
  return n ? n : "signal";
}

void nta_exit_text(int code, char *buf, size_t len) {
  /* 128+N is how a shell, a launcher and a container runtime report a child
   * that signal N ended; the rank's own exit(137) reads the same. */
  const char *n = code > 128 && code < 128 + 65 ? ntr_name_signal(code - 128) : NULL;
  if (n)
    snprintf(buf, len, "code %d (128+%d, %s)", code, code - 128, n);
  else
    snprintf(buf, len, "code %d", code);
}

static void proc_where(const struct nta_proc *p, char *buf, size_t len) {
  snprintf(buf, len, "pid %d on %.64s", p->img->hdr.pid, p->img->hdr.host);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return x < y ? -1 : x > y;
}

int nta_proc_ranks(const struct nta_comm *c, const struct nta_proc *p, int *out, int max) {
  int n = 0;
  for (int i = 0; i < p->nmems && n < max; i++)
    if (p->mems[i]->comm == c)
      out[n++] = p->mems[i]->rank;
  if (n > 1)
    qsort(out, (size_t)n, sizeof(*out), cmp_int);
  return n;
}


/* "ranks 0-3 of comm 483dcaec" for each communicator of which p holds
 * several ranks (all of them when all is set), at most two, then how many
 * more.  @return the number of communicators described. */
static int held_text(const struct nta_proc *p, int all, char *buf, size_t len) {
  size_t o = 0;
  int shown = 0, more = 0;
  buf[0] = 0;
  for (int i = 0; i < p->nmems; i++) {
    const struct nta_comm *c = p->mems[i]->comm;
    if (nta_member_of(c, p) != p->mems[i])
      continue; /* each communicator once */
    int r[NTA_MAX_VRANKS];
    int n = nta_proc_ranks(c, p, r, NTA_MAX_VRANKS);
    if (n < 2 && !all)
      continue;
    if (shown == 2) {
      more++;
      continue;
    }
    char rl[96], hex[17];
    if (n == 1 && r[0] < 0)
      snprintf(rl, sizeof rl, "?"); /* its rank in the comm was never known */
    else
      ntt_rank_ranges(r, n, rl, sizeof rl);
    nta_comm_hex(c->id, hex);
    if (o < len)
      o += (size_t)snprintf(buf + o, len - o, "%s%s %s of comm %.8s", shown ? ", " : "", n > 1 ? "ranks" : "rank",
                            rl, hex);
    shown++;
  }
  if (more && o < len)
    snprintf(buf + o, len - o, " and %d more communicator%s", more, more == 1 ? "" : "s");
  return shown + more;
}

void nta_proc_label(const struct nta_proc *p, char *buf, size_t len) {
  char where[128], held[320];
  proc_where(p, where, sizeof(where));
  if (p->lrank >= 0) {
    if (held_text(p, 0, held, sizeof held))
      snprintf(buf, len, "rank %d (%s, holds %s)", p->lrank, where, held);
    else
      snprintf(buf, len, "rank %d (%s)", p->lrank, where);
  } else if (held_text(p, 1, held, sizeof held)) {
    snprintf(buf, len, "%s (holds %s)", where, held);
  } else {
    snprintf(buf, len, "%s", where);
  }
}

/* A rank that died with no communicator recorded: either it made no NCCL
 * call yet, or its calls were invisible to the tracer (NCCL loaded past
 * the preload: the tracer's "nccl unseen" note says so for sure).  Its
 * death is then no evidence about NCCL, and the text must say which. */
static void invisible_nccl(const struct nta_proc *p, char *summary, size_t cap) {
  if (p->nmd > 0)
    return;
  int unseen = 0;
  for (uint64_t j = 0; j < p->nkeep && !unseen; j++)
    unseen = nta_note_unseen(&p->keep[j]);
  size_t n = strlen(summary);
  if (n + 1 >= cap)
    return;
  snprintf(summary + n, cap - n, "%s",
           unseen ? " [its NCCL calls were invisible to the tracer: the libnccl it loaded is not the one the "
                    "tracer calls (a second NCCL, or loaded by dlmopen); its stderr names the library]"
                  : " [no NCCL call of this process was recorded: it died before its first one, or its NCCL "
                    "calls were invisible to the tracer (NCCL loaded past the preload)]");
}

void nta_detect_fates(struct nta_job *job) {
  for (int i = 0; i < job->nprocs; i++) {
    const struct nta_proc *p = &job->procs[i];
    char where[128];
    proc_where(p, where, sizeof(where));
    struct nta_cand *k = NULL;
    /* collect's salvage of a dump its process never finished (tools/collect.c) */
    if (p->img->has_trigger && strncmp(p->img->trigger.reason, "salvaged:", 9) == 0)
      nta_event_add(job, ntt_image_ns(p->img, p->img->trigger.tsc), p->lrank, "salvaged",
                    "%s: its dump was never finished (the process was killed while writing it); "
                    "collect salvaged what the file held", where);
    char label[512];
    nta_proc_label(p, label, sizeof label);
    if (p->fate == NTA_EXITED && p->run) {
      /* Its exit hook never ran: the status is nccltrace run's (runexit.c). */
      char code[64];
      nta_exit_text(p->exit_code, code, sizeof code);
      nta_event_add(job, p->fate_ns + 1, p->lrank, "exit",
                    "%s exited with %s without an exit record (seen by nccltrace run); last record here",
                    where, code);
      if (p->exit_code != 0 && (k = nta_cand_add(job, NTA_RANK_EXIT, p->fate_ns)) != NULL) {
        k->exit_code = p->exit_code;
        snprintf(k->summary, sizeof(k->summary),
                 "%s exited with %s without an exit record (the status nccltrace run saw)%s", label,
                 code,
                 p->exit_code == 127 ? "; exit 127 that bypasses exit() is how the dynamic linker ends a process "
                                       "('symbol lookup error', 'error while loading shared libraries')"
                                     : "; it ended without exit() (_exit, exit_group, the dynamic linker)");
      }
    } else if (p->fate == NTA_EXITED) {
      char code[64];
      nta_exit_text(p->exit_code, code, sizeof code);
      nta_event_add(job, p->fate_ns, p->lrank, "exit", "%s exited with %s", where, code);
      if (p->exit_code != 0 && (k = nta_cand_add(job, NTA_RANK_EXIT, p->fate_ns)) != NULL) {
        k->exit_code = p->exit_code;
        snprintf(k->summary, sizeof(k->summary), "%s exited with %s", label, code);
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
        snprintf(k->summary, sizeof(k->summary), "%s %s %s%s%s", label,
                 p->fatal ? "crashed with" : "was terminated by", sig_name(p->signo),
                 bt[0] ? "; backtrace: " : "", bt);
      }
    } else if (p->fate == NTA_EXECED) {
      nta_event_add(job, p->fate_ns + 1, p->lrank, "exec",
                    "%s replaced its program by exec, leaving its communicators without finalizing them",
                    where);
    } else if (p->fate == NTA_VANISHED) {
      char seen[64] = "", launcher[256] = "";
      if (p->run)
        snprintf(seen, sizeof seen, " (nccltrace run saw it killed by %s)", sig_name(p->signo));
      if (p->launcher && (p->launcher->signaled || p->launcher->code)) {
        char st[64];
        if (p->launcher->signaled)
          snprintf(st, sizeof st, "was killed by %s (%d)", sig_name(p->launcher->code), p->launcher->code);
        else
          snprintf(st, sizeof st, "exited with "), nta_exit_text(p->launcher->code, st + strlen(st), sizeof st - strlen(st));
        snprintf(launcher, sizeof launcher, "; its launcher %s (pid %d, started by nccltrace run) then %s "
                 "(a launcher's status is one rank's, not necessarily this one's)",
                 p->launcher->exe[0] ? p->launcher->exe : "?", p->launcher->pid, st);
      }
      /* one ns after its last record: the chain shows that record first */
      nta_event_add(job, p->fate_ns + 1, p->lrank, "vanished",
                    "%s left no exit record and is gone%s; last record here", where, seen);
      /* What is known is only that no exit was recorded: SIGKILL, the OOM
       * killer, and ends that bypass exit() all look alike here. */
      if ((k = nta_cand_add(job, NTA_RANK_KILLED, p->fate_ns)) != NULL) {
        k->signo = p->run ? p->signo : 0;
        if (p->run)
          snprintf(k->summary, sizeof(k->summary),
                   "%s was killed by %s (%d) without an exit record (the status nccltrace run saw); causes "
                   "include the OOM killer and a launcher's or scheduler's SIGKILL%.300s",
                   label, sig_name(p->signo), p->signo, launcher);
        else
          snprintf(k->summary, sizeof(k->summary),
                   "%s vanished without an exit record; causes include SIGKILL, the OOM killer and "
                   "ends that bypass exit() (the dynamic linker's 'symbol lookup error', _exit from a vfork "
                   "child)%.300s",
                   label, launcher);
      }
    }
    if (k) {
      k->proc = p;
      k->victim = victim_at(p, p->fate_ns);
      invisible_nccl(p, k->summary, sizeof k->summary);
    }
    if (p->lost)
      nta_event_add(job, p->first_ns, p->lrank, "lost",
                    "%s: ring wrapped, %llu older records were overwritten", where,
                    (unsigned long long)p->lost);
    /* Tracer events worth seeing on the timeline; of the application's
     * markers only the last few per process (a training loop marks every
     * step): reduce.c kept only those. */
    for (uint64_t j = 0; j < p->nkeep; j++) {
      const struct ntr_record *r = &p->keep[j];
      uint64_t t = nta_ns(p, r->tsc);
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
                      ntt_result_name((int)r->aux), ntt_result_name(r->result));
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
  nta_runexit_detect(job);
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
    for (uint64_t j = 0; j < m->np2p; j++) {
      struct nta_op o;
      nta_p2p_op(m, &m->d->p2p[j], &o);
      if (!o.done_ns)
        return 0;
    }
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
          k->victim = victim_at(m->proc, m->abort_ns);
          snprintf(k->summary, sizeof(k->summary), "rank %d aborted comm %s (ncclCommAbort)", m->rank, hex);
        }
      }
      int err = m->cs ? m->cs->async_error : 0;
      uint64_t t = 0;
      for (uint64_t j = 0; j < m->proc->nkeep; j++) {
        const struct ntr_record *r = &m->proc->keep[j];
        if (r->kind == NTR_KIND_ASYNC_ERROR && r->comm_id == c->id && r->aux != 0 && r->aux != 7) {
          t = nta_ns(m->proc, r->tsc);
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
               ntt_result_name(err));
    }
  }
}

