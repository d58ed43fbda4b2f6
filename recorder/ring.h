/* ring.h -- the flight recorder: a lock-free ring of ntr_records in a
 * file-backed MAP_SHARED mapping, plus per-communicator state and the stack
 * table in the same mapping (layout: recorder/format.h, docs/dump-format.md).
 *
 * Thread-safety: ntr_ring_open/close/reopen_child are called once (library
 * constructor / destructor, fork child handler) and are not thread-safe.
 * Everything else is lock-free, multi-producer: any thread may reserve/commit
 * concurrently.  ntr_ring_set_job may run once while writers are active.
 * A ntr_ring_cursor belongs to one thread (and its signal handlers).
 * Signal-safety: ntr_ring_reserve, ntr_ring_reserve_in, ntr_ring_commit,
 * ntr_ring_comm_alloc, ntr_ring_lost, ntr_ring_read_slot and ntr_ring_settle
 * are async-signal-safe (atomics and plain stores only); ntr_ring_reopen_child is async-signal-safe in the sense
 * that a pthread_atfork child handler needs (syscalls only, no malloc, no
 * stdio, no locks); ntr_ring_open/close are not signal-safe.
 *
 * Write protocol (seqlock per slot), pairs with ntr_ring_read_slot:
 *   take a position p; rec = slots[p & mask];
 *   claim: commit c -> NTR_COMMIT_WRITING by CAS (ntr_ring_claim); release
 *   fence; fill the body; release-store rec->commit = p + 1.
 * Positions come from the shared head one at a time (ntr_ring_reserve), or,
 * on the hot path, from a per-thread block of ring->block positions
 * (ntr_ring_reserve_in: one fetch_add on the head per block, so threads do
 * not bounce the head's cache line on every call).  The claim makes a slot
 * single-owner whatever the source of p: a writer preempted for a whole lap
 * of the ring keeps its slot and the lapping writer moves on (that position
 * stays a hole); a position taken twice (a signal handler that interrupted
 * its thread between reading and advancing the block, a reader's filler)
 * goes to exactly one of them.  Without the claim two writers could write
 * one slot and leave a mixed body under a stable commit.
 *
 * Holes and fillers: a block's unused positions are holes until its thread
 * writes them; a thread that goes quiet leaves them open.  Readers that
 * follow positions in order (the exchange client) settle a hole that
 * holds them up with ntr_ring_settle: a filler record (kind NTR_KIND_NONE)
 * takes the position through the same claim, and the owning thread, whose
 * claim then fails, moves to a fresh block.  Consequences: position order is
 * program order per thread and per communicator (the caller passes a floor,
 * ntr_ring_reserve_in), but across threads a record may carry a lower
 * position than one written before it; and head counts reserved positions,
 * so ntr_ring_lost may count up to ring->block - 1 unused positions per
 * thread as lost.
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
/* Buckets of the in-process string index (recorder/pystr.c). */
#define NTR_STR_INDEX 8192u

struct ntr_ring {
  struct ntr_ring_header *hdr;   /* start of the mapping */
  struct ntr_comm_state *comms;  /* hdr + comm_offset */
  struct ntr_stack *stacks;      /* hdr + stack_offset */
  struct ntr_record *slots;      /* hdr + slot_offset */
  char *strs;                    /* hdr + str_offset: the Python string table */
  uint64_t mask;                 /* slot_count - 1 */
  uint32_t block;                /* positions per thread block: NTR_RING_BLOCK, less in small rings */
  size_t map_size;
  char path[256];                /* the ring file ("" when anonymous) */
  char dir[1024];                /* directory of the ring file (for set_job); "" when anonymous */
  int anon;                      /* 1: anonymous memory, no file (recorder/ring_place.c) */
  int own_dir;                   /* 1: dir is a private directory made for this process */
  /* Empty, or one line (without "nccltrace: ") saying which fallback was
   * taken and why: a smaller ring, another directory, anonymous memory. */
  char note[640];
  /* Hash index into stacks[]: bucket -> table index + 1, written by CAS
   * (stack.c).  Process-local, not in the file: readers only need stacks[]
   * in allocation order.  Zeroed with the ring (open, fork child). */
  uint16_t stack_index[NTR_STACK_INDEX];
  /* Same for strs[]: bucket -> entry offset + 1 (pystr.c). */
  uint32_t str_index[NTR_STR_INDEX];
};

struct ntr_ring_config {
  const char *dir;        /* NCCLTRACE_RING_DIR (created 0700 if missing) */
  const char *job_id;     /* "" or NULL: not known yet (file named "nojob") */
  uint32_t slots;         /* power of two, >= 64 */
  int fallback;           /* 0: dir or nothing; 1: the fallbacks of ring_place.c */
};

/* Create and map this process's ring file <dir>/nccltrace-<job>-<host>-<pid>.ring,
 * 0600, O_EXCL|O_NOFOLLOW, its blocks reserved (posix_fallocate: a full
 * tmpfs fails here, never later as a SIGBUS on the mapping), and fill the
 * header (identity, clocks, env).
 * pre: ring points to writable memory (it is zeroed here).
 * The directory is walked with recorder/safedir.h and refused (-ELOOP,
 * -ENOTDIR, -EPERM) when it is a symlink, not a directory, not owned by the
 * effective uid, or writable by group or others.  If a regular file of
 * that name is left over (pid reuse), "~1" ... "~15" is appended before
 * ".ring"; a symlink or other non-file at the path makes the call fail with
 * -EEXIST.
 * With cfg->fallback, a refused or full directory is not the end: see
 * recorder/ring_place.c (a smaller ring, a private or other directory,
 * anonymous memory); ring->note then says what was chosen and why.
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

/* Remove the ring file (and the private directory made for it, once
 * empty), keeping the mapping: for exit paths whose dump superseded the
 * ring.  Async-signal-safe (unlink, rmdir). */
void ntr_ring_unlink(struct ntr_ring *ring);

/* A SIGBUS at addr: when addr lies in the ring's mapping (its file was cut
 * under us, by another process of ours or an administrator), the page is
 * replaced by anonymous memory so the faulting store or load goes on.
 * @return 1 when repaired (the caller returns from its handler), 0 when
 *         addr is not ours.  Async-signal-safe (mmap). */
int ntr_ring_repair_fault(struct ntr_ring *ring, void *addr);

/* Take ownership of a slot for position p.
 * @return 1 when the caller now owns the slot (its commit is
 *         NTR_COMMIT_WRITING), 0 when another writer owns it or it already
 *         holds position p or a later one. */
static inline int ntr_ring_claim(uint64_t *commit, uint64_t p) {
  /* Acquire pairs with the release store of the previous owner's commit:
   * our body stores are ordered after that owner's. */
  uint64_t c = __atomic_load_n(commit, __ATOMIC_ACQUIRE);
  if (c == NTR_COMMIT_WRITING || c > p)
    return 0; /* being written, or holds position c - 1 >= p */
  /* CAS rather than a store: exactly one of several claimants wins (0, a
   * never written slot, is claimed the same way). */
  return __atomic_compare_exchange_n(commit, &c, NTR_COMMIT_WRITING, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED);
}

/* After a successful claim: the claim must be visible before any body store,
 * so that a reader that copied part of the new body sees commit change and
 * drops its copy.  Pairs with the acquire fence in ntr_ring_read_slot. */
static inline struct ntr_record *ntr_ring_claimed(struct ntr_record *rec, uint64_t p, uint64_t *pos) {
  NTR_FENCE_RELEASE();
  *pos = p;
  return rec;
}

/* Reserve the next slot from the shared head: the returned record is
 * claimed and holds its old content; fill it and call ntr_ring_commit.
 * Never fails, never blocks; wait-free in practice (a position whose slot
 * is still owned by a writer a whole lap behind is skipped). */
static inline struct ntr_record *ntr_ring_reserve(struct ntr_ring *ring, uint64_t *pos) {
  for (;;) {
    /* Relaxed: the position only has to be unique; the slot's commit
     * carries all ordering towards readers. */
    uint64_t p = __atomic_fetch_add(&ring->hdr->head, 1, __ATOMIC_RELAXED);
    struct ntr_record *rec = &ring->slots[p & ring->mask];
    if (ntr_ring_claim(&rec->commit, p))
      return ntr_ring_claimed(rec, p, pos);
  }
}

/* A thread's block of positions (thread-local, process-local; zero = none).
 * NTR_RING_BLOCK positions (8 KiB of slots) per block in rings of 4096
 * slots or more: one fetch_add on the shared head per 64 records, and
 * threads that write at once meet at a block boundary once per 64 records
 * (bench/scale/threads: 16 -> 64 took 8 threads on 2 vCPUs from 3.0-3.3x
 * to 1.9-2.0x one thread's cost per call).  The price: up to 63 positions
 * a reader fills when their thread goes quiet (ntr_ring_settle). */
#define NTR_RING_BLOCK 64u
struct ntr_ring_cursor {
  uint64_t next, end; /* next position to use; end of the block */
};

/* Reserve the next slot from the caller's block, taking a fresh block from
 * the head when it is used up, when a claim fails (a reader filled the rest
 * of it, or it was lapped) or when its next position is below floor (the
 * last position + 1 of the communicator the record is for: records of one
 * communicator stay in position order when it moves between threads).
 * Same contract as ntr_ring_reserve.  Async-signal-safe: a handler that
 * interrupts its thread in here may take the same position; the claim gives
 * it to one of the two and the other moves on. */
static inline struct ntr_record *ntr_ring_reserve_in(struct ntr_ring *ring, struct ntr_ring_cursor *cur,
                                                     uint64_t floor, uint64_t *pos) {
  for (;;) {
    uint64_t p = cur->next;
    if (__builtin_expect(p >= cur->end || p < floor, 0)) {
      p = __atomic_fetch_add(&ring->hdr->head, ring->block, __ATOMIC_RELAXED);
      cur->end = p + ring->block;
    }
    cur->next = p + 1;
    struct ntr_record *rec = &ring->slots[p & ring->mask];
    if (__builtin_expect(ntr_ring_claim(&rec->commit, p), 1))
      return ntr_ring_claimed(rec, p, pos);
    cur->end = 0; /* settled by a reader or lapped: the rest is not ours */
  }
}

/* For readers that follow positions in order, at a position p < head whose
 * slot does not hold p (yet).  With fill = 1, a hole that holds up later
 * records is filled with fillers, and so are the unused positions after it
 * up to the next written one (at most ring->block), through the writers'
 * claim.  A reader should wait a while before it fills: a thread in the
 * middle of a call is about to write p.
 * @return NTR_SETTLED: p holds p now (a filler included) or a later
 *         position: read it again / move on;
 *         NTR_HOLE_WRITING: a writer holds the slot;
 *         NTR_HOLE_FRONTIER: nothing is written after p yet: the unused rest
 *         of a block whose thread will write it next, never to be skipped;
 *         NTR_HOLE_BLOCKING: a hole with later records after it (not filled:
 *         fill = 0, or its writer claimed it first).
 * Thread-safe; async-signal-safe. */
enum ntr_settle { NTR_SETTLED = 1, NTR_HOLE_WRITING = 0, NTR_HOLE_FRONTIER = -1, NTR_HOLE_BLOCKING = -2 };
int ntr_ring_settle(struct ntr_ring *ring, uint64_t p, uint64_t head, int fill);

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

/* Positions overwritten so far (head - slot_count when positive): records
 * lost, plus any reserved positions that were never used (see above). */
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
