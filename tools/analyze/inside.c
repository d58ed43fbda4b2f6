/* inside.c -- the inside view of a stuck call: the proxy ops of the
 * profiler plugin each member still had open at its last evidence
 * (nta_mdata.waits, reduce.c), said as where it waits and what its peer
 * shows (docs/analyze.md "Inside a stuck call").
 *
 * Thread-safety: single-threaded (after loading).  Not signal-safe.
 */
#include <signal.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

/* NCCL's proxy step states (nccl_profiler.h ncclProfilerProxyStep*). */
const char *nta_step_state_name(int state) {
  switch (state) {
  case 8: return "SendGPUWait";
  case 9: return "SendWait";
  case 10: return "RecvWait";
  case 11: return "RecvFlushWait";
  case 12: return "RecvGPUWait";
  case 20: return "SendPeerWait";
  default: return NULL;
  }
}

const char *nta_step_state_what(int state) {
  switch (state) {
  case 8: return "waiting for the GPU to provide the data";
  case 9: return "posted, waiting for the transfer to complete";
  case 10: return "waiting for the peer's data";
  case 11: return "received, flushing";
  case 12: return "received, waiting for the GPU to consume it";
  case 20: return "posted, waiting for the peer";
  default: return NULL;
  }
}

static int ended(const struct nta_proc *p) {
  return p->fate == NTA_EXITED || p->fate == NTA_SIGNALED || p->fate == NTA_VANISHED || p->fate == NTA_EXECED;
}

/* Ended, and not by the stop signals a launcher sends the survivors of a
 * failure (those peers were stuck with us: their own wait says more). */
static int ended_itself(const struct nta_proc *p) {
  return ended(p) &&
         !(p->fate == NTA_SIGNALED && (p->signo == SIGTERM || p->signo == SIGINT || p->signo == SIGHUP));
}

const char *nta_wait_peer(const struct nta_member *m, const struct nta_wait *w, const struct nta_wait **pw,
                          const struct nta_member **pm) {
  *pw = NULL;
  *pm = NULL;
  if (w->peer < 0 || !m->comm)
    return NULL;
  const struct nta_member *q = nta_rank(m->comm, w->peer);
  *pm = q;
  if (!q)
    return "absent";
  for (int i = 0; i < q->d->nwaits; i++) {
    const struct nta_wait *x = &q->d->waits[i];
    if (x->peer == m->rank && x->seq == w->seq && x->is_send != w->is_send) {
      *pw = x;
      break;
    }
  }
  if (ended_itself(q->proc))
    return "gone";
  if (*pw)
    return "waiting";
  return ended(q->proc) ? "gone" : "idle";
}

static void op_name(const struct nta_wait *w, char *buf, size_t len) {
  const char *k = w->kind >= 0 ? ntt_kind_name((unsigned)w->kind) : (w->is_send ? "send" : "receive");
  if (w->peer >= 0)
    snprintf(buf, len, "%s #%llu %s rank %d", k, (unsigned long long)w->seq, w->is_send ? "to" : "from",
             w->peer);
  else
    snprintf(buf, len, "%s #%llu", k, (unsigned long long)w->seq);
}

static void step_text(const struct nta_wait *w, char *buf, size_t len) {
  if (w->step < 0) {
    snprintf(buf, len, "%d of %d steps done, none in progress", w->done, w->nsteps);
    return;
  }
  const char *n = nta_step_state_name(w->state), *what = nta_step_state_what(w->state);
  if (n)
    snprintf(buf, len, "step %d of %d (%s: %s)", w->step + 1, w->nsteps, n, what);
  else
    snprintf(buf, len, "step %d of %d", w->step + 1, w->nsteps);
}

void nta_wait_text(const struct nta_member *m, const struct nta_wait *w, char *buf, size_t len) {
  char op[96], st[160], peer[200] = "";
  op_name(w, op, sizeof op);
  step_text(w, st, sizeof st);
  const struct nta_wait *pw;
  const struct nta_member *pm;
  const char *ps = nta_wait_peer(m, w, &pw, &pm);
  if (ps && !strcmp(ps, "gone")) {
    char f[96];
    nta_member_state(pm, f, sizeof f);
    char s2[160] = "";
    if (pw && pw->step >= 0)
      snprintf(s2, sizeof s2, "; it was at step %d of %d", pw->step + 1, pw->nsteps);
    snprintf(peer, sizeof peer, "; rank %d never %s it (process gone: %s%s)", w->peer,
             w->is_send ? "received" : "sent", f, s2);
  } else if (ps && !strcmp(ps, "waiting")) {
    char s2[160];
    step_text(pw, s2, sizeof s2);
    char f[112] = "";
    if (ended(pm->proc)) {
      char f0[96];
      nta_member_state(pm, f0, sizeof f0);
      snprintf(f, sizeof f, ", then %s", f0);
    }
    snprintf(peer, sizeof peer, "; rank %d is at %s%s", w->peer, s2, f);
  } else if (ps && !strcmp(ps, "absent")) {
    snprintf(peer, sizeof peer, "; no evidence from rank %d", w->peer);
  } else if (ps) {
    snprintf(peer, sizeof peer, "; rank %d has no %s for it in progress", w->peer,
             w->is_send ? "receive" : "send");
  }
  snprintf(buf, len, "rank %d, %s, channel %d: %s%s", m->rank, op, w->chan, st, peer);
}
