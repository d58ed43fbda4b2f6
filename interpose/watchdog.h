/* watchdog.h -- completion tracking and the watchdog thread (watchdog.c):
 * CUDA events after enqueued ops, device-arrival start events, timeouts of
 * ops and blocking calls, recent[] copies, async-error polling.
 *
 * Thread-safety: the track/defer/start functions are called by the
 * application's threads (SPMC event rings, Vyukov cells); the rest of a
 * comm's tracking state is the watchdog thread's alone (fields marked
 * "watchdog only" in comm.h).
 * Signal-safety: none of it is signal-safe (CUDA driver calls) but the
 * inline tests (relaxed loads) and nti_watchdog_last_pass.
 */
#ifndef NTI_WATCHDOG_H
#define NTI_WATCHDOG_H

#include "interpose/nti.h"
#include "interpose/comm.h"

/* Attach a completion event after an op was enqueued (hot path). */
void nti_complete_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos,
                        uint64_t tsc, int p2p, struct ntr_record *r);
/* Same for the ops of an outermost group on one (comm, stream): records
 * pos_first..pos of this thread and group complete with the event. */
void nti_complete_track_group(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first,
                              uint64_t pos, uint64_t tsc, int p2p);
/* An op or group the comm accepted with ncclInProgress: not evented yet
 * (its work is not on the stream); evented by the flush. */
void nti_complete_defer(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                        uint64_t tsc, int p2p);
/* The comm reported ncclSuccess: its deferred ops are enqueued now; event
 * them.  Any thread (the application's ncclCommGetAsyncError, the
 * watchdog's poll). */
void nti_complete_flush_deferred(struct nti_comm *c);
/* Device arrival: a start event recorded on the stream before collective
 * seq (outside groups) when it is due: every c->start_every-th seq
 * (NCCLTRACE_START_EVERY, 1 after a straggler report on the comm).  The
 * watchdog writes an NTR_KIND_DEV_ARRIVE event when the stream reaches it. */
void nti_start_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc);
static inline int nti_start_due(const struct nti_comm *c, uint64_t seq) {
  uint32_t every = __atomic_load_n(&c->start_every, __ATOMIC_RELAXED);
  return every == 1 || (every && seq % every == 1);
}
/* Lateness suspected on comm_id (a straggler report): a start event before
 * every collective of it from now on.  Any thread. */
void nti_start_boost(unsigned long long comm_id); /* also in trigger.h, for the exchange */
/* recent[] copies of collective/p2p records are made by the watchdog
 * (wrappers publish them with cs = NULL): 1 when it already handled c's
 * record at position pos.  One relaxed load. */
static inline int nti_recent_passed(const struct nti_comm *c, uint64_t pos) {
  return __atomic_load_n(&c->recent_upto, __ATOMIC_RELAXED) > pos;
}
/* Is the stream capturing?  1 yes, 0 no or unknown. */
int nti_stream_capturing(void *stream);
/* The capture id of a capturing stream (and the graph being built, NULL
 * when the driver does not say).  @return 1 capturing, 0 not or unknown. */
int nti_capture_id(void *stream, uint64_t *id, void **graph);
/* A replay's completion event (graph.c): seq = the last captured collective
 * of c in the graph (0: only send/recv). */
void nti_complete_track_replay(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc);
/* Per-comm event pool filled at init exit (app thread, context current). */
void nti_watchdog_comm_ready(struct nti_comm *c);
void nti_watchdog_start(void);
void nti_watchdog_stop(void);
/* _exit and _Exit: the watchdog thread runs one whole pass more, begun
 * after this call (ops that completed since its last poll are marked
 * complete before the exit dump), waited for 200 ms at most.  The thread
 * keeps running.  Async-signal-safe (atomics and nanosleep): _exit may be
 * called from a handler.  @return 0, -ESRCH no watchdog thread (or called
 * on it), -ETIMEDOUT. */
int nti_watchdog_last_pass(void);
/* Fork child: the watchdog thread did not survive; forget its state. */
void nti_watchdog_forget(void);

/* Record an async-error change (CAS on cs->async_error, one
 * recorder wins), finish nonblocking inits, dump on a new error.  The caller
 * holds c->async_poller (ncclCommGetAsyncError, the watchdog's poll). */
void nti_async_transition(struct nti_comm *c, ncclResult_t now);

#endif /* NTI_WATCHDOG_H */
