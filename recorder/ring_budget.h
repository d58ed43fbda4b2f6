/* ring_budget.h -- how much of a ring directory's file system the rings
 * may take (internal to recorder/, used by ring_place.c).
 *
 * Thread-safety: no shared state; a struct ntr_ring_budget belongs to its
 * caller.  Across processes the caller holds ntr_ring_budget_lock while it
 * scans and creates, so that ranks starting at once see each other's rings.
 * Signal-safety: async-signal-safe (getdents64, fstatat, openat, pread,
 * flock, nanosleep, kill only), as ntr_ring_reopen_child needs.
 *
 * The rule (docs/reliability.md, round two, item 3): every ring in one
 * directory, of any job and any process, shares one budget of a third
 * (NTR_RING_BUDGET_DIV) of the file system's size, and no ring is made
 * that would leave less than the reserve free for NCCL's segments and the
 * application: half of the file system (NTR_RING_RESERVE_DIV), at most
 * 4 GiB (NTR_RING_RESERVE_MAX: a large disk that is half full still takes
 * a ring).  Rings of processes that
 * are dead on this host and were never collected count against the budget
 * like any other (they are evidence: nothing here deletes them); they are
 * counted apart so the caller can name them.
 */
#ifndef NTR_RING_BUDGET_H
#define NTR_RING_BUDGET_H
#include <stdint.h>

#define NTR_RING_BUDGET_DIV 3u  /* rings together: at most total / 3 */
#define NTR_RING_RESERVE_DIV 2u /* and never less than total / 2 left free, */
#define NTR_RING_RESERVE_MAX (4ull << 30) /* or 4 GiB when that is less */

struct ntr_ring_budget {
  uint64_t total;      /* the file system's size, bytes (0: unknown, no budget) */
  uint64_t budget;     /* total / NTR_RING_BUDGET_DIV */
  uint64_t reserve;    /* what stays free: min(total / NTR_RING_RESERVE_DIV, NTR_RING_RESERVE_MAX) */
  uint64_t used;       /* bytes allocated to ring files in the directory */
  uint64_t room;       /* what one more ring may take: within the budget and the reserve */
  uint32_t rings;      /* ring files in the directory */
  uint32_t dead;       /* of those, rings of processes dead on this host */
  uint64_t dead_bytes; /* their bytes */
};

/* Scan the directory dirfd (host: ours, for telling dead pids) and fill b.
 * The directory's read position is moved (callers use dirfd with *at
 * calls only).  @return 0, or -errno (b then says "no budget": room = ~0). */
int ntr_ring_budget_scan(int dirfd, const char *host, struct ntr_ring_budget *b);

/* Take / drop the directory's lock (flock on dirfd).  Bounded: after about
 * a second without it the caller goes on unlocked (a process stuck holding
 * it must not stop another's start).  @return 1 held, 0 not. */
int ntr_ring_budget_lock(int dirfd);
void ntr_ring_budget_unlock(int dirfd);
#endif
