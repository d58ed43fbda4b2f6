/* record.h -- records written outside the wrappers' fast path: reserve,
 * begin and end of a record, patches after the call, tracer events, call
 * sites (record.c for the out-of-line part).
 *
 * Thread-safety: any thread; a record is written by the thread that
 * reserved it, patches are relaxed stores checked against the position.
 * Signal-safety: nti_reserve, nti_record_begin/end, nti_record_patch,
 * nti_record_patch_aux and nti_record_event are async-signal-safe (ring
 * reserve/commit, plain stores; a handler's records come from its own
 * block, nti_tls.internal); the stack and site functions are not.
 */
#ifndef NTI_RECORD_H
#define NTI_RECORD_H

#include "interpose/nti.h"
#include "interpose/comm.h"

/* A position for a record of comm c (or none), outside the wrappers' fast
 * path: from the thread's block, keeping c's records in position order;
 * signal handlers' from theirs (nti_tls.internal).  Also links the record to c's
 * previous one (prev_gap): the watchdog walks that chain back from c's
 * newest record to copy recent[] (watchdog.c). */
static inline __attribute__((always_inline)) struct ntr_record *nti_reserve(uint64_t *pos, const struct nti_comm *c) {
  struct ntr_record *r;
  if (NTI_UNLIKELY(nti_tls.internal)) {
    r = nti_tls.internal == 1 ? ntr_ring_reserve_in(&nti_proc.ring, &nti_tls.sig_cur, 0, pos)
                              : ntr_ring_reserve(&nti_proc.ring, pos);
    r->prev_gap = 0;
    return r;
  }
  uint64_t *next = c ? (uint64_t *)&c->next_pos : NULL; /* written by its user thread only */
  uint64_t prev = next ? __atomic_load_n(next, __ATOMIC_RELAXED) : 0;
  r = ntr_ring_reserve_in(&nti_proc.ring, &nti_tls.ring_cur, prev, pos);
  if (NTI_UNLIKELY(!nti_tls.exit_hooked))
    nti_thread_hook();
  /* prev = position + 1 of c's newest record, 0 when none; the gap is at
   * least 1 (the floor above) */
  uint64_t gap = *pos + 1 - prev;
  r->prev_gap = prev && gap <= UINT32_MAX ? (uint32_t)gap : 0;
  if (next)
    /* Release: the watchdog that reads this newest position walks the
     * chain from it (its own record's commit orders the rest). */
    __atomic_store_n(next, *pos + 1, __ATOMIC_RELEASE);
  return r;
}

static inline struct ntr_record *nti_record_begin(uint64_t *pos, unsigned kind, unsigned phase,
                                                  const struct nti_comm *c) {
  struct ntr_record *r = nti_reserve(pos, c);
  r->tsc = ntr_clock_now();
  r->tsc_done = 0;
  r->kind = (uint16_t)kind;
  r->phase = (uint8_t)phase;
  r->dtype = 0xff;
  r->redop = -1;
  r->peer = -1;
  r->result = -1;
  r->count = 0;
  r->seq = 0;
  r->aux = 0;
  r->fp = 0;
  r->stack_id = 0;
  r->pystack_id = 0;
  r->u.buf.sendbuf = r->u.buf.recvbuf = r->u.buf.stream = 0;
  r->tid = nti_tid();
  r->group_depth = (uint16_t)nti_tls.group_depth;
  r->group_id = nti_tls.group_id;
  r->flags = nti_tls.group_depth ? NTR_REC_IN_GROUP : 0;
  if (c) {
    struct ntr_comm_state *cs = c->cs;
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
    if (c->nonblocking)
      r->flags |= NTR_REC_NONBLOCKING;
  } else {
    r->comm_id = 0;
    r->rank = -1;
    r->nranks = 0;
  }
  return r;
}
static inline void nti_record_end(struct ntr_record *r, uint64_t pos, const struct nti_comm *c) {
  ntr_ring_commit(&nti_proc.ring, r, pos, c ? c->cs : NULL);
}
/* Set aux of a committed record, as nti_record_patch does the rest (only
 * while the slot and recent[] copy still hold position pos). */
void nti_record_patch_aux(uint64_t pos, const struct nti_comm *c, uint64_t aux);
/* Patch a committed record (ring slot and recent[] copy) if it still holds
 * position pos (a record pointer would not do: a lapping writer may have
 * reused the slot since): result (NTI_KEEP_RESULT = leave), flags OR'ed, tsc_done
 * (0 = leave).  Async-signal-safe. */
#define NTI_KEEP_RESULT (-0x7fffffff)
void nti_record_patch(uint64_t pos, const struct nti_comm *c, int result, uint16_t flags,
                      uint64_t tsc_done);
/* Name of a kind for messages: "AllReduce", "CommInitRank", "Mark". */
const char *nti_kind_name(unsigned kind);
/* A tracer event (MARK, TIMEOUT, ...) with text; async-signal-safe. */
void nti_record_event(unsigned kind, const struct nti_comm *c, const char *text,
                      uint64_t count, uint64_t aux, uint64_t seq);
/* Stack id for NCCLTRACE_STACKS=1 (0 when off). */
uint32_t nti_stack_id(void);
/* The call sites nti_sites_on() asks for into r: native stack_id (cached
 * by site, the return address into the application, when not NULL),
 * Python pystack_id.  Out of line: C programs without NCCLTRACE_STACKS
 * never call it.  Keeps errno. */
void nti_sites(struct ntr_record *r, const void *site);
/* The same, cached by call site (the return address into the caller of
 * the wrapper): a known site costs a probe (record.c). */
uint32_t nti_stack_id_at(const void *site);

#endif /* NTI_RECORD_H */
