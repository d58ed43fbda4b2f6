/* ring.h -- the flight recorder: a lock-free ring of ntr_records in a
 * file-backed MAP_SHARED mapping, plus per-communicator state and the stack
 * table in the same mapping (layout: recorder/format.h, docs/dump-format.md).
 *
 * Thread-safety: ntr_ring_open/close/reopen_child are called once (library
 * constructor / destructor, fork child handler) and are not thread-safe.
 * Everything else is lock-free, multi-producer: any thread may reserve/commit
 * concurrently.  ntr_ring_set_job may run once while writers are active.
 * Signal-safety: ntr_ring_reserve, ntr_ring_commit, ntr_ring_comm_alloc,
 * ntr_ring_lost and ntr_ring_read_slot are async-signal-safe (atomics and
 * plain stores only); ntr_ring_reopen_child is async-signal-safe in the sense
 * that a pthread_atfork child handler needs (syscalls only, no malloc, no
 * stdio, no locks); ntr_ring_open/close are not signal-safe.
 *
 * Write protocol (seqlock per slot), pairs with ntr_ring_read_slot:
 *   pos = fetch_add(head, 1); rec = slots[pos & mask];
 *   claim: commit c -> 0 by CAS (ntr_ring_claim); release fence; fill the
 *   body; copy it to the comm's recent[] (same protocol) while still the
 *   slot's owner; release-store rec->commit = pos + 1.
 * The claim makes a slot single-owner: a writer preempted for a whole lap of
 * the ring (slot_count records by others meanwhile) keeps its slot, and the
 * lapping writer skips to the next position (that position stays a hole;
 * readers see its commit missing, like a torn slot).  Without the claim both
 * could write one slot and leave a mixed body under a stable commit.
 */
#ifndef NTR_RING_H
#define NTR_RING_H

#include <stdint.h>
#include <stddef.h>
#include "recorder/format.h"

/* Fences of the seqlock.  GCC's TSan rejects thread fences (-Wtsan); on
 * x86-64 acquire and release fences only restrain the compiler (TSO does the
 * rest), which a signal fence does too, so that build uses those. */
#if defined(__SANITIZE_THREAD__) && defined(__x86_64__)
#define NTR_FENCE_RELEASE() __atomic_signal_fence(__ATOMIC_RELEASE)
#define NTR_FENCE_ACQUIRE() __atomic_signal_fence(__ATOMIC_ACQUIRE)
#else
#define NTR_FENCE_RELEASE() __atomic_thread_fence(__ATOMIC_RELEASE)
#define NTR_FENCE_ACQUIRE() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#endif

/* Buckets of the in-process stack index (recorder/stack.c): twice the table
 * so linear probing stays short. */
#define NTR_STACK_INDEX (2u * NTR_STACK_MAX)

struct ntr_ring {
  struct ntr_ring_header *hdr;   /* start of the mapping */
  struct ntr_comm_state *comms;  /* hdr + comm_offset */
  struct ntr_stack *stacks;      /* hdr + stack_offset */
  struct ntr_record *slots;      /* hdr + slot_offset */
  uint64_t mask;                 /* slot_count - 1 */
  size_t map_size;
  char path[256];                /* the ring file */
  char dir[1024];                /* directory of the ring file (for set_job) */
  /* Hash index into stacks[]: bucket -> table index + 1, written by CAS
   * (stack.c).  Process-local, not in the file: readers only need stacks[]
   * in allocation order.  Zeroed with the ring (open, fork child). */
  uint16_t stack_index[NTR_STACK_INDEX];
};

struct ntr_ring_config {
  const char *dir;        /* NCCLTRACE_RING_DIR (created 0700 if missing) */
  const char *job_id;     /* "" or NULL: not known yet (file named "nojob") */
  uint32_t slots;         /* power of two, >= 64 */
};

/* Create and map this process's ring file <dir>/nccltrace-<job>-<host>-<pid>.ring,
 * 0600, O_EXCL|O_NOFOLLOW, and fill the header (identity, clocks, env).
 * pre: ring points to writable memory (it is zeroed here).
 * The directory is refused (-ELOOP, -ENOTDIR, -EPERM) when it is a symlink,
 * not a directory, or not owned by the effective uid.  If a regular file of
 * that name is left over (pid reuse), "~1" ... "~15" is appended before
 * ".ring"; a symlink or other non-file at the path makes the call fail with
 * -EEXIST.
 * @return 0 or -errno; on failure the ring stays unusable (hdr == NULL) and
 *         callers record nothing. */
int ntr_ring_open(struct ntr_ring *ring, const struct ntr_ring_config *cfg);

/* In the child of fork(): switch to a NEW ring file for the child's pid.
 * MAP_SHARED mappings are inherited by fork, so until this returns the child
 * shares the parent's ring and must write nothing to it.  The parent's mapping
 * is unmapped without being written (its comm table and stacks stay the
 * parent's), the clock calibration is inherited (no 10 ms wait), and the
 * child's header gets the child's pid/ppid.  Call it first thing in the
 * pthread_atfork child handler, before any record is written.
 * @return 0 or -errno; on failure ring->hdr is NULL (record nothing). */
int ntr_ring_reopen_child(struct ntr_ring *ring, const struct ntr_ring_config *cfg);

/* Record the job id once it is known (derived at the first communicator):
 * writes hdr->job_id and renames the file to the name with that job.
 * @return 0 or -errno (the ring keeps working either way). */
int ntr_ring_set_job(struct ntr_ring *ring, const char *job_id);

/* Unmap; the file stays unless remove is set. */
void ntr_ring_close(struct ntr_ring *ring, int remove);

/* Take ownership of a slot for position p (lap = slots in the ring).
 * @return 1 when the caller now owns the slot (its commit is 0), 0 when the
 *         slot belongs to another writer or already holds a newer record. */
static inline int ntr_ring_claim(uint64_t *commit, uint64_t p, uint64_t lap) {
  /* Acquire pairs with the release store of the previous owner's commit:
   * our body stores are ordered after that owner's. */
  uint64_t c = __atomic_load_n(commit, __ATOMIC_ACQUIRE);
  if (c == 0)
    return p < lap; /* fresh slot on the first lap; later: a writer owns it */
  if (c - 1 > p)
    return 0;       /* a writer of a later lap got here first */
  /* CAS rather than a store: exactly one of several lapping writers wins. */
  return __atomic_compare_exchange_n(commit, &c, 0, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Reserve the next slot: the returned record has commit = 0 and its old
 * content; fill it and call ntr_ring_commit.  Never fails, never blocks.
 * Wait-free in practice: a position whose slot is still owned by a writer a
 * whole lap behind (preempted mid-record) is skipped and stays a hole, so two
 * writers never share a slot and a stable commit always means an intact body. */
static inline struct ntr_record *ntr_ring_reserve(struct ntr_ring *ring, uint64_t *pos) {
  for (;;) {
    /* Relaxed: the position only has to be unique; the slot's commit
     * carries all ordering towards readers. */
    uint64_t p = __atomic_fetch_add(&ring->hdr->head, 1, __ATOMIC_RELAXED);
    struct ntr_record *rec = &ring->slots[p & ring->mask];
    if (!ntr_ring_claim(&rec->commit, p, ring->mask + 1))
      continue;
    /* commit = 0 must be visible before any body store: a reader that
     * copied part of the new body then sees commit change and drops it.
     * Pairs with the acquire fence in ntr_ring_read_slot. */
    NTR_FENCE_RELEASE();
    *pos = p;
    return rec;
  }
}

/* Copy a record being committed into a communicator's recent[], with the
 * same seqlock (recorder/ring.c).  pre: the caller still owns rec. */
void ntr_ring_commit_recent(struct ntr_comm_state *cs, const struct ntr_record *rec,
                            uint64_t pos);

/* Publish: release-stores commit = pos + 1.  If cs is non-NULL the record is
 * also copied into cs->recent[] so a quiet communicator keeps its history. */
static inline void ntr_ring_commit(struct ntr_ring *ring, struct ntr_record *rec, uint64_t pos,
                                   struct ntr_comm_state *cs) {
  (void)ring;
  /* Copy first, while the slot is still ours: once committed, a writer a lap
   * ahead may claim it and rewrite the body under our copy. */
  if (cs)
    ntr_ring_commit_recent(cs, rec, pos);
  /* Release pairs with the acquire load of commit in ntr_ring_read_slot. */
  __atomic_store_n(&rec->commit, pos + 1, __ATOMIC_RELEASE);
}

/* Hand out a fresh comm slot (zeroed), or NULL when all NTR_COMM_MAX are used. */
struct ntr_comm_state *ntr_ring_comm_alloc(struct ntr_ring *ring);

/* Records overwritten so far (exact: head - slot_count when positive). */
static inline uint64_t ntr_ring_lost(const struct ntr_ring *ring) {
  /* Relaxed: a statistic read at one instant. */
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_RELAXED);
  uint64_t slots = ring->mask + 1;
  return head > slots ? head - slots : 0;
}

/* Seqlock read of one slot (main ring or a recent[] entry) into *out.
 * @return the record's commit value (position + 1) when the copy is
 *         consistent, 0 when the slot is empty, being written or was torn
 *         while copying.  The caller checks that the position fits the slot
 *         it expected (main ring: (commit - 1) & mask == index). */
uint64_t ntr_ring_read_slot(const struct ntr_record *slot, struct ntr_record *out);

#endif /* NTR_RING_H */
