/* exchange.h -- the client side of the cross-rank check (design §5): what
 * the interposer calls.  Implemented in interpose/exchange/ (client.c: the
 * client thread; coord.c, check*.c: the coordinator, embedded or standalone;
 * wire.c: the wire format of docs/wire-protocol.md).
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
/* The keys exchange connections authenticate with (exchange/keys.h): the
 * bytes of a communicator's ncclUniqueId (ncclGetUniqueId's output, the id
 * of every ncclCommInitRank*), before ntx_comm_register; and a random key
 * for an ncclCommInitAll (all its ranks are in this process). */
void ntx_keys_learn_uid(const void *uid, size_t len);
void ntx_keys_learn_local(void);
/* Called at the ENTRY of every communicator init/split/shrink, after cs has
 * comm_id, rank, nranks: registers the rank with the coordinator. */
void ntx_comm_register(struct ntr_comm_state *cs);
/* The comm whose state is cs is gone and its slot goes to another comm:
 * its registration is dropped (the coordinator keeps what it was told). */
void ntx_comm_unregister(const struct ntr_comm_state *cs);
/* Strict mode: the calling thread's pending collective(s) (one call, or every
 * record of an outermost group) wait for every rank's fingerprints.
 * @return 0 to proceed, -1 to refuse (msg says what differs). */
int ntx_strict_wait(const struct ntr_record *const *recs, int n, char *msg, size_t msg_len);
/* 1 when the check is on: a coordinator was found (connected, or still
 * being connected to) and the mode is not off.  Strict wrappers ask this. */
int ntx_enabled(void);
/* NCCLTRACE_ENV_CHECK=abort: call after ntx_comm_register (before or after
 * the real init): waits, at most NCCLTRACE_STRICT_TIMEOUT, until every rank of
 * the comm registered and the coordinator compared their NCCL_* environment.
 * @return -1 when it differs and the init must fail (the line saying so is
 *         already printed), else 0 (also when env_check is not abort, or
 *         without a coordinator). */
int ntx_comm_env_verdict(struct ntr_comm_state *cs);
/* Flush what is pending (bounded wait) and stop: at exit. */
void ntx_stop(void);
#endif
