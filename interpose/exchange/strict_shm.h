/* strict_shm.h -- strict mode through shared memory when every rank of the
 * job is on this host (docs/wire-protocol.md, "Strict mode on one host"):
 * the ranks of a communicator agree on each collective through a board
 * file mapped by all of them, instead of a STRICT request to the
 * coordinator and its REPLY.
 *
 * Thread-safety: any application thread.  The boards of a process are
 * found without a lock; attaching one takes a mutex (first strict call on a
 * comm).  One thread at a time per (communicator, rank), as NCCL requires
 * of its own calls on a communicator.  Signal-safety: none, except
 * ntx_shm_repair_fault (a SIGBUS handler's).
 * Never-hang rule: a wait is bounded by NCCLTRACE_STRICT_TIMEOUT; a peer
 * seen gone (exited, or its pid dead) ends it at once.  Everything read
 * from a board is checked; a board that is not ours is replaced or the
 * coordinator path is used.
 */
#ifndef NTX_STRICT_SHM_H
#define NTX_STRICT_SHM_H
#include <stddef.h>
#include "recorder/format.h"

#define NTX_SHM_PASS 1 /* ntx_shm_wait: not handled here; use the coordinator */

/* At ntx_start: want is NCCLTRACE_STRICT_SHM (0 off, 1 on, -1 unset: on
 * when the launcher says the job is on one host: WORLD_SIZE ==
 * LOCAL_WORLD_SIZE, from h, this process's ring header). */
void ntx_shm_init(const struct ntr_ring_header *h, int want);
/* Strict wait of one collective call record (not a group).
 * @return 0 proceed, -1 refuse (msg says what differs; the mismatch line,
 *         ring record and dump are done), NTX_SHM_PASS when this path does
 *         not take the call (off, p2p, no board). */
int ntx_shm_wait(const struct ntr_record *rec, char *msg, size_t msg_len);
/* A SIGBUS at addr in one of our boards' mappings (its file was cut under
 * us): the page becomes anonymous memory and that comm's strict calls
 * proceed unchecked from now on.  Async-signal-safe (atomic loads, mmap).
 * @return 1 when addr was ours (the access may run again), else 0. */
int ntx_shm_repair_fault(void *addr);
/* At exit: our slots say we left, our boards are unlinked and unmapped. */
void ntx_shm_stop(void);
#endif
