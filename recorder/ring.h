/* ring.h -- the flight recorder: a lock-free ring of ntr_records in a
 * file-backed MAP_SHARED mapping, plus per-communicator state and the stack
 * table in the same mapping (layout: recorder/format.h).
 *
 * Thread-safety: ntr_ring_open/close are called once (library constructor /
 * destructor, fork child handler) and are not thread-safe.  Everything else is
 * lock-free, multi-producer: any thread may reserve/commit concurrently.
 * Signal-safety: ntr_ring_reserve, ntr_ring_commit, ntr_ring_comm_alloc and
 * ntr_ring_snapshot are async-signal-safe (atomics and plain stores only);
 * ntr_ring_open/close are not.
 */
#ifndef NTR_RING_H
#define NTR_RING_H

#include <stdint.h>
#include <stddef.h>
#include "recorder/format.h"

struct ntr_ring {
  struct ntr_ring_header *hdr;   /* start of the mapping */
  struct ntr_comm_state *comms;  /* hdr + comm_offset */
  struct ntr_stack *stacks;      /* hdr + stack_offset */
  struct ntr_record *slots;      /* hdr + slot_offset */
  uint64_t mask;                 /* slot_count - 1 */
  size_t map_size;
  char path[256];                /* the ring file */
};

struct ntr_ring_config {
  const char *dir;        /* NCCLTRACE_RING_DIR (created 0700 if missing) */
  const char *job_id;
  uint32_t slots;         /* power of two, >= 64 */
};

/* Create and map this process's ring file <dir>/nccltrace-<job>-<host>-<pid>.ring,
 * 0600, O_EXCL|O_NOFOLLOW, and fill the header (identity, clocks, env).
 * @return 0 or -errno; on failure the ring stays unusable and callers record nothing. */
int ntr_ring_open(struct ntr_ring *ring, const struct ntr_ring_config *cfg);
/* Unmap; the file stays unless remove is set. */
void ntr_ring_close(struct ntr_ring *ring, int remove);

/* Reserve the next slot: the returned record has commit = 0 and its old
 * content; fill it and call ntr_ring_commit.  Never fails, never blocks. */
struct ntr_record *ntr_ring_reserve(struct ntr_ring *ring, uint64_t *pos);
/* Publish: release-stores commit = pos + 1.  If cs is non-NULL the record is
 * also copied into cs->recent[] so a quiet communicator keeps its history. */
void ntr_ring_commit(struct ntr_ring *ring, struct ntr_record *rec, uint64_t pos,
                     struct ntr_comm_state *cs);

/* Hand out a fresh comm slot (zeroed), or NULL when all NTR_COMM_MAX are used. */
struct ntr_comm_state *ntr_ring_comm_alloc(struct ntr_ring *ring);

/* Records overwritten so far (exact: head - slot_count when positive). */
uint64_t ntr_ring_lost(const struct ntr_ring *ring);

#endif /* NTR_RING_H */
