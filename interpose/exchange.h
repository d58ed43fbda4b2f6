/* exchange.h -- the client side of the cross-rank check (design §5): what
 * the interposer calls.  Implemented in interpose/exchange.c (client thread)
 * and tools/coord*.c + recorder/wire.c (coordinator, shared wire format).
 *
 * Thread-safety: all functions may be called from any application thread.
 * The client's own thread reads the ring (never the application's records in
 * flight) and talks to the coordinator.  Nothing here is signal-safe except
 * ntx_enabled().
 * Never-hang rule: in async mode no function blocks; ntx_strict_wait blocks
 * at most NCCLTRACE_STRICT_TIMEOUT.
 */
#ifndef NTX_EXCHANGE_H
#define NTX_EXCHANGE_H
#include <stddef.h>
#include "recorder/ring.h"

/* Discover the coordinator, maybe host it, start the client thread. */
void ntx_start(struct ntr_ring *ring);
/* Called at the ENTRY of every communicator init/split/shrink, after cs has
 * comm_id, rank, nranks: registers the rank with the coordinator. */
void ntx_comm_register(struct ntr_comm_state *cs);
/* Strict mode: the calling thread's pending collective(s) (one call, or every
 * record of an outermost group) wait for every rank's fingerprints.
 * @return 0 to proceed, -1 to refuse (msg says what differs). */
int ntx_strict_wait(const struct ntr_record *const *recs, int n, char *msg, size_t msg_len);
/* 1 when a coordinator connection exists and the check mode is not off. */
int ntx_enabled(void);
/* Flush what is pending (bounded wait) and stop: at exit. */
void ntx_stop(void);
#endif
