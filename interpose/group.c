/* group.c -- ncclGroupStart/End/SimulateEnd: thread-local nesting, group
 * ids, completion events per outermost group; strict mode's GroupEnd
 * (strict.c) hooked in at the outermost End.
 *
 * Thread-safety: NCCL groups are per thread; so is everything here (TLS).
 * Signal-safety: not signal-safe; handlers only read nti_tls.group_*.
 *
 * NCCL semantics mirrored (design §1): nested groups launch only at the
 * outermost End; End without Start is NCCL's ncclInvalidUsage (forwarded,
 * our depth stays 0); End returning means enqueued, not complete -- so the
 * completion event of a group's ops is recorded after the outermost End.
 */
#include <stdlib.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/comm.h"
#include "interpose/record.h"
#include "interpose/group.h"
#include "interpose/strict.h"
#include "interpose/watchdog.h"
#include "interpose/exchange.h"

void nti_group_note_op(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos,
                       uint64_t tsc, int p2p) {
  /* One entry per (comm, stream): events complete in stream order, so the
   * highest seq on a pair stands for all earlier ones. */
  struct nti_tls *t = &nti_tls;
  if (!t->group_ops) {
    t->group_overflow = 1; /* allocation failed at GroupStart */
    return;
  }
  for (int i = 0; i < t->group_nops; i++) {
    struct nti_group_op *g = &t->group_ops[i];
    if (g->comm == c && g->stream == stream) {
      if (!p2p) {
        g->seq = seq;
        g->p2p_only = 0;
      }
      g->pos = pos;
      g->tsc = tsc;
      return;
    }
  }
  if (t->group_nops == NTI_GROUP_TRACK) {
    t->group_overflow = 1;
    return;
  }
  t->group_ops[t->group_nops++] = (struct nti_group_op){
      .comm = c, .stream = stream, .seq = seq, .pos = pos, .pos_first = pos, .tsc = tsc,
      .p2p_only = p2p};
}

void nti_group_reset(void) {
  nti_tls.group_depth = 0;
  nti_group_word_sync();
  nti_tls.group_id = 0;
  nti_tls.group_nops = 0;
  nti_tls.group_overflow = 0;
  nti_strict_reset();
}

/* After the outermost End was accepted: the group's ops are on their
 * streams now; mark them enqueued and event them. */
static void group_launched(ncclResult_t res) {
  struct nti_tls *t = &nti_tls;
  for (int i = 0; i < t->group_nops; i++) {
    struct nti_group_op *g = &t->group_ops[i];
    if (!g->p2p_only) {
      uint64_t cur = __atomic_load_n(&g->comm->cs->last_enqueued, __ATOMIC_RELAXED);
      if (g->seq > cur)
        __atomic_store_n(&g->comm->cs->last_enqueued, g->seq, __ATOMIC_RELEASE);
      __atomic_store_n(&g->comm->cs->last_enqueue_tsc, g->tsc, __ATOMIC_RELAXED);
    }
    /* ncclInProgress: NCCL launches the group from its own thread later;
     * evented once the comm says ncclSuccess. */
    if (res == ncclInProgress && g->comm->nonblocking && nti_tracked(g->comm))
      nti_complete_defer(g->comm, g->stream, g->p2p_only ? 0 : g->seq, g->pos_first, g->pos, g->tsc,
                         g->p2p_only);
    else
      nti_complete_track_group(g->comm, g->stream, g->p2p_only ? 0 : g->seq, g->pos_first, g->pos,
                               g->tsc, g->p2p_only);
  }
  if (t->group_overflow) {
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
      nti_say("a group used more than %d (communicator, stream) pairs; completion of the "
              "rest is not tracked", NTI_GROUP_TRACK);
  }
  t->group_nops = 0;
  t->group_overflow = 0;
}

/* The outermost End is where NCCL connects send/recv peers at their first
 * exchange (ncclTransportP2pSetup, on the host): it waits there for a peer
 * that never posts the matching direction.  Mark each comm of the group
 * blocked in GroupEnd meanwhile, as the collective wrappers do, so the
 * watchdog times it out and dumps (a blocked mark already set -- a
 * nonblocking init in progress -- is left alone).  @return the mark. */
static uint64_t group_block(void) {
  struct nti_tls *t = &nti_tls;
  uint64_t now = ntr_clock_now();
  int any = 0;
  for (int i = 0; i < t->group_nops; i++) {
    if (nti_blocked_mark_if_clear(t->group_ops[i].comm->cs, NTR_KIND_GROUP_END, nti_tid(), now))
      any = 1;
  }
  return any ? now : 0;
}

static void group_unblock(uint64_t since) {
  struct nti_tls *t = &nti_tls;
  for (int i = 0; i < t->group_nops; i++) {
    struct ntr_comm_state *cs = t->group_ops[i].comm->cs;
    if (__atomic_load_n(&cs->blocked_since, __ATOMIC_RELAXED) == since)
      nti_blocked_clear(cs);
  }
}

static void group_record(unsigned kind, int result, int depth) {
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, kind, NTR_PHASE_CALL, NULL);
  r->group_depth = (uint16_t)depth;
  r->result = result;
  nti_record_end(r, pos, NULL);
}

NTI_EXPORT ncclResult_t ncclGroupStart(void) {
  nti_fn_ncclGroupStart_t real = NTI_REAL(ncclGroupStart);
  if (NTI_UNLIKELY(!real))
    return ncclInvalidUsage;
  if (!nti_active() || nti_tls.guard)
    return real();
  int saved = errno;
  nti_tls.guard++;
  errno = saved;
  ncclResult_t res = real();
  saved = errno;
  if (res == ncclSuccess) {
    if (!nti_tls.group_ops)
      nti_tls.group_ops = calloc(NTI_GROUP_TRACK, sizeof *nti_tls.group_ops);
    if (nti_tls.group_depth++ == 0) {
      nti_tls.group_id = ++nti_tls.group_seq;
      nti_tls.group_nops = 0;
      nti_tls.group_overflow = 0;
    }
    nti_group_word_sync();
  }
  group_record(NTR_KIND_GROUP_START, res, (int)nti_tls.group_depth);
  nti_tls.guard--;
  errno = saved;
  return res;
}

static ncclResult_t group_end(unsigned kind, ncclSimInfo_t *sim) {
  nti_fn_ncclGroupEnd_t end = NTI_REAL(ncclGroupEnd);
  nti_fn_ncclGroupSimulateEnd_t send = kind == NTR_KIND_GROUP_SIMULATE_END ? NTI_REAL(ncclGroupSimulateEnd) : NULL;
  if (NTI_UNLIKELY(kind == NTR_KIND_GROUP_END ? !end : !send))
    return ncclInvalidUsage;
  if (!nti_active() || nti_tls.guard)
    return send ? send(sim) : end();
  int saved = errno;
  nti_tls.guard++;
  int depth = (int)nti_tls.group_depth;
  ncclResult_t res = ncclSuccess;
  if (!send && depth == 1 && nti_strict_on()) {
    /* Strict mode, outermost End: the group's collectives were held back;
     * wait for the ranks to agree, replay them into NCCL's open group,
     * then close it.  Refused: End closes an empty group (nothing is
     * enqueued) and the application gets ncclInvalidUsage. */
    int deferred;
    ncclResult_t verdict = nti_strict_group_end(&deferred);
    errno = saved;
    res = end();
    saved = errno;
    if (verdict == ncclInvalidUsage)
      res = ncclInvalidUsage;
    else if (res == ncclSuccess && verdict != ncclSuccess)
      res = verdict;
  } else {
    uint64_t since = !send && depth == 1 ? group_block() : 0;
    errno = saved;
    res = send ? send(sim) : end();
    saved = errno;
    if (since)
      group_unblock(since);
  }
  if (depth > 0)
    nti_tls.group_depth--;
  nti_group_word_sync();
  int outermost = depth == 1;
  group_record(kind, res, (int)nti_tls.group_depth);
  if (outermost) {
    if (!send && (res == ncclSuccess || res == ncclInProgress))
      group_launched(res);
    nti_tls.group_nops = 0;
    nti_tls.group_overflow = 0;
    nti_tls.group_id = 0;
  }
  nti_tls.guard--;
  errno = saved;
  return res;
}

void nti_group_plugin_open(int user_group) {
  struct nti_tls *t = &nti_tls;
  if (!t->group_ops)
    t->group_ops = calloc(NTI_GROUP_TRACK, sizeof *t->group_ops);
  t->group_nops = 0;
  t->group_overflow = 0;
  t->group_depth = user_group ? 1 : 0;
  t->group_id = user_group ? ++t->group_seq : 0;
  nti_group_word_sync();
}

void nti_group_plugin_close(void) {
  group_launched(ncclSuccess);
  nti_tls.group_depth = 0;
  nti_tls.group_id = 0;
  nti_group_word_sync();
}

NTI_EXPORT ncclResult_t ncclGroupEnd(void) {
  return group_end(NTR_KIND_GROUP_END, NULL);
}

NTI_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  return group_end(NTR_KIND_GROUP_SIMULATE_END, simInfo);
}
