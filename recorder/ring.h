/* ring.h -- the flight recorder: a lock-free ring of ntr_records in a
 * file-backed MAP_SHARED mapping, plus per-communicator state and the stack
 * table in the same mapping (layout: recorder/format.h, docs/dump-format.md).
 *
 * Thread-safety: ntr_ring_open/close/reopen_child are called once (library
 * constructor / destructor, fork child handler) and are not thread-safe.
 * Everything else is lock-free, multi-producer: any thread may reserve/commit
 * concurrently.  ntr_ring_set_job may run once while writers are active.
 * A ntr_ring_cursor belongs to one thread; its signal handlers must not use
 * it (they take ntr_ring_reserve).
 * Signal-safety: ntr_ring_reserve, ntr_ring_commit, ntr_ring_release,
 * ntr_ring_comm_alloc, ntr_ring_comm_wipe, ntr_ring_lost, ntr_ring_read (and its forms
 * ntr_ring_read_slot and ntr_ring_read_copies) and ntr_ring_settle
 * are async-signal-safe (atomics and plain stores only); ntr_ring_reopen_child is async-signal-safe in the sense
 * that a pthread_atfork child handler needs (syscalls only, no malloc, no
 * stdio, no locks); ntr_ring_open/close are not signal-safe.
 *
 * Write protocol: single-writer blocks, seqlock per slot.  Pairs with
 * ntr_ring_read and ntr_ring_settle.
 *
 *   Positions are free-running; the shared head only ever advances by a
 *   whole block of ring->block positions (NTR_RING_BLOCK, less in small
 *   rings), so blocks are aligned: block S covers [S, S + block) and has
 *   one ownership word, blocks[(S / block) & bmask], in the mapping.
 *   claim (once per block):  S = fetch_add(head, block); CAS the word from
 *     FREE(x) with x < S to OPEN(S).  A word that is OPEN or CLOSED (a
 *     writer of an older lap still holds that index) or FREE(x >= S) (a
 *     later lap took it) is not ours: the block is skipped, its positions
 *     never written (counted in hdr->unused), and the next one taken.
 *   write (every record, owner only, no read-modify-write): store
 *     commit = NTR_COMMIT_WRITING; release fence; fill the body;
 *     release-store commit = p + 1.
 *   release (once per block): store FREE(S) when the owner moves on (block
 *     used up, a communicator floor above it, the block closed by a
 *     reader, thread exit), counting its unused positions.
 *
 * The owner is the only writer of the block's slots from its claim to its
 * release, whatever happens to the rest of the ring: a writer preempted
 * for a whole lap keeps its block, and the lapping writers skip that index
 * (those positions stay holes).  So no claim per record is needed and no
 * two writers can ever mix bodies under one commit value.  Records that do
 * not come from a thread's cursor (signal handlers, the tools' tests,
 * anything without one) take a block of their own (ntr_ring_reserve: its
 * last position; ntr_ring_commit of a block's last position releases it).
 *
 * Holes and closing: a block's unused positions are holes until its owner
 * writes them; a thread that goes quiet leaves them open.  Readers that
 * follow positions in order (the exchange client) settle a hole with
 * ntr_ring_settle: positions of a released block, a skipped block or a
 * lapped one will never be written and are passed at once; a hole in an
 * open block that holds up later records is, on request, closed (CAS
 * OPEN(S) -> CLOSED(S)): the owner sees it at its next record (it
 * compares its block's word on every record: one load of a line it owns)
 * and moves to a fresh block, releasing the closed one.  The one race
 * left: an owner that compared just before the close writes one more
 * record there, which a reader that already passed it does not see (the
 * ring and dumps still hold it).  Consequences: position order is program
 * order per thread and per communicator (the caller passes a floor,
 * ntr_ring_reserve_in), but across threads a record may carry a lower
 * position than one written before it; and ntr_ring_lost counts the
 * unused positions of blocks still open (up to ring->block - 1 per
 * thread) as lost.
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
  uint64_t *blocks;              /* hdr + block_offset: block ownership words */
  uint64_t mask;                 /* slot_count - 1 */
  uint64_t bmask;                /* block_count - 1 */
  uint32_t block;                /* positions per block: NTR_RING_BLOCK, less in small rings (power of two) */
  uint32_t block_shift;          /* log2(block) */
  size_t map_size;
  char path[256];                /* the ring file ("" when anonymous) */
  char dir[1024];                /* directory of the ring file (for set_job); "" when anonymous */
  int anon;                      /* 1: anonymous memory, no file (recorder/ring_place.c) */
  int own_dir;                   /* 1: dir is a private directory made for this process */
  uint32_t place;                /* enum ntr_ring_place: where ring_place.c put it (hdr->ring_place) */
  /* Empty, or one line (without "nccltrace: ") saying which fallback was
   * taken and why: a smaller ring, another directory, anonymous memory. */
  char note[1024];
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

/* Bytes of a ring of slots records (its file, or its anonymous mapping). */
uint64_t ntr_ring_bytes(uint32_t slots);

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

/* Block ownership words (blocks[] in the mapping, one per block index):
 * ((S + 1) << 2) | state, S the first position of the block that last
 * claimed the index; 0: never claimed. */
enum ntr_blk_state { NTR_BLK_FREE = 0, NTR_BLK_OPEN = 1, NTR_BLK_CLOSED = 2 };
static inline uint64_t ntr_blk_word(uint64_t start, unsigned state) { return (start + 1) << 2 | state; }
static inline uint64_t *ntr_ring_blk(const struct ntr_ring *ring, uint64_t p) {
  return &ring->blocks[(p >> ring->block_shift) & ring->bmask];
}

/* A thread's block (thread-local, process-local; all zero = none).
 * NTR_RING_BLOCK positions (8 KiB of slots) per block in rings of 4096
 * slots or more: one fetch_add on the shared head and one CAS on a block
 * word per 64 records, and threads that write at once meet at a block
 * boundary once per 64 records (bench/scale/threads: 16 -> 64 took 8
 * threads on 2 vCPUs from 3.0-3.3x to 1.9-2.0x one thread's cost per
 * call).  The price: up to 63 positions a quiet thread leaves open. */
#define NTR_RING_BLOCK 64u
struct ntr_ring_cursor {
  uint64_t next, end; /* next position to use; end of the block (0: none) */
  uint64_t *word;     /* the block's ownership word; NULL: none */
  uint64_t open;      /* ntr_blk_word(start, NTR_BLK_OPEN): what *word holds while ours */
  struct ntr_record *slot; /* the slot of next (a block's slots are contiguous) */
};

/* Out of line: release the cursor's block and claim a fresh one.  Returns
 * its first slot, opened (commit = NTR_COMMIT_WRITING).  When every block
 * index is held (more quiet writers than blocks: tiny rings) the record
 * goes to a thread-local scratch slot instead and hdr->dropped counts it.
 * Async-signal-safe. */
struct ntr_record *ntr_ring_reserve_block(struct ntr_ring *ring, struct ntr_ring_cursor *cur,
                                          uint64_t *pos);

/* Out of line: release the cursor's block and claim a fresh one, leaving
 * the cursor at its first position (nothing opened).  @return 0, or -1
 * when every block index is held (the cursor is then empty).
 * Async-signal-safe. */
int ntr_ring_refill(struct ntr_ring *ring, struct ntr_ring_cursor *cur);

/* Open slot p of a block the caller owns: no other writer can touch it, so
 * a plain store marks it; the release fence orders that mark before every
 * body store, so a reader that copied part of the new body sees commit
 * change and drops its copy (pairs with the acquire fence in
 * ntr_ring_read).  On x86-64 both are plain instructions. */
static inline struct ntr_record *ntr_ring_open_slot(struct ntr_ring *ring, uint64_t p) {
  struct ntr_record *rec = &ring->slots[p & ring->mask];
  /* Relaxed: ordered by the fence below. */
  __atomic_store_n(&rec->commit, NTR_COMMIT_WRITING, __ATOMIC_RELAXED);
  NTR_FENCE_RELEASE();
  return rec;
}

/* Reserve the next slot from the caller's block, taking a fresh block when
 * it is used up, when a reader closed it, or when its next position is
 * below floor (the last position + 1 of the communicator the record is
 * for: records of one communicator stay in position order when it moves
 * between threads).  The returned record is opened and holds its old
 * content; fill it and call ntr_ring_commit.  Never fails, never blocks.
 * Not for signal handlers that may interrupt the cursor's thread in here
 * (they use ntr_ring_reserve). */
static inline struct ntr_record *ntr_ring_reserve_in(struct ntr_ring *ring, struct ntr_ring_cursor *cur,
                                                     uint64_t floor, uint64_t *pos) {
  uint64_t p = cur->next;
  /* Relaxed load of our own block's word: a reader's close only has to be
   * seen at some later record (ring.h, holes and closing). */
  if (__builtin_expect(p >= cur->end || p < floor ||
                           __atomic_load_n(cur->word, __ATOMIC_RELAXED) != cur->open, 0))
    return ntr_ring_reserve_block(ring, cur, pos);
  cur->next = p + 1;
  *pos = p;
  struct ntr_record *rec = cur->slot++;
  (void)ring;
  /* Relaxed: ordered by the fence (ntr_ring_open_slot). */
  __atomic_store_n(&rec->commit, NTR_COMMIT_WRITING, __ATOMIC_RELAXED);
  NTR_FENCE_RELEASE();
  return rec;
}

/* Give the cursor's block back (its unused positions are counted in
 * hdr->unused) and reset the cursor: thread exit, or a writer that wants
 * to leave no open block behind.  Async-signal-safe. */
void ntr_ring_release(struct ntr_ring *ring, struct ntr_ring_cursor *cur);

/* Reserve a slot for a writer without a cursor (signal handlers, tools,
 * tests): a block of its own, whose last position it takes (the others are
 * counted unused); ntr_ring_commit releases the block.  Thread-safe and
 * async-signal-safe.  Same contract as ntr_ring_reserve_in otherwise. */
struct ntr_record *ntr_ring_reserve(struct ntr_ring *ring, uint64_t *pos);

/* For readers that follow positions in order, at a position p < head whose
 * slot does not hold p (yet).  With close = 1, an open block whose hole
 * holds up later records is closed (ring.h, holes and closing).  A reader
 * should wait a while before it closes: a thread in the middle of a call
 * is about to write p.
 * @return NTR_SETTLED: p holds p now or a later position, or will never
 *         be written (its block was released, skipped, lapped or closed):
 *         read it again / move on;
 *         NTR_HOLE_WRITING: its writer is writing the slot;
 *         NTR_HOLE_FRONTIER: nothing is written after p yet: the unused rest
 *         of a block whose thread will write it next, never to be skipped;
 *         NTR_HOLE_BLOCKING: a hole with later records after it (not closed:
 *         close = 0).
 * Thread-safe; async-signal-safe. */
enum ntr_settle { NTR_SETTLED = 1, NTR_HOLE_WRITING = 0, NTR_HOLE_FRONTIER = -1, NTR_HOLE_BLOCKING = -2 };
int ntr_ring_settle(struct ntr_ring *ring, uint64_t p, uint64_t head, int close);

/* Copy a record being committed into a communicator's recent[], with the
 * same seqlock (recorder/ring.c).  pre: the caller still owns rec. */
void ntr_ring_commit_recent(struct ntr_comm_state *cs, const struct ntr_record *rec,
                            uint64_t pos);

/* Release the block of position pos if pos is its last position and the
 * block is still the one that holds it (ring.c).  Async-signal-safe. */
void ntr_ring_release_at(struct ntr_ring *ring, uint64_t pos);

/* Publish: release-stores commit = pos + 1.  If cs is non-NULL the record is
 * also copied into cs->recent[] so a quiet communicator keeps its history.
 * The last position of a block releases it (a cursor-less writer's block,
 * ntr_ring_reserve; an owner's block it used up: its next reserve finds it
 * released already). */
static inline void ntr_ring_commit(struct ntr_ring *ring, struct ntr_record *rec, uint64_t pos,
                                   struct ntr_comm_state *cs) {
  /* Copy first, while the slot is still ours. */
  if (cs)
    ntr_ring_commit_recent(cs, rec, pos);
  /* Release pairs with the acquire load of commit in ntr_ring_read. */
  __atomic_store_n(&rec->commit, pos + 1, __ATOMIC_RELEASE);
  if (((pos + 1) & (ring->block - 1)) == 0)
    ntr_ring_release_at(ring, pos);
}

/* The hot path's publish: the store alone (the block is released by the
 * owner's next claim). */
static inline void ntr_ring_publish(struct ntr_record *rec, uint64_t pos) {
  /* Release pairs with the acquire load of commit in ntr_ring_read. */
  __atomic_store_n(&rec->commit, pos + 1, __ATOMIC_RELEASE);
}

/* Hand out a fresh comm slot (zeroed), or NULL when all NTR_COMM_MAX are used. */
struct ntr_comm_state *ntr_ring_comm_alloc(struct ntr_ring *ring);
/* Make a used slot fresh again for another comm (its old owner writes it no
 * more: the caller's contract).  In an order a concurrent reader (a dump, a
 * live `status` or `collect`) can live with: lifecycle FREE and comm_id 0
 * first, so a copy taken meanwhile names no comm; then every recent[]
 * entry's commit 0, so no old record is taken for one of the slot's; then
 * the rest.  Every store is a whole aligned word: a reader sees old or new
 * values, never a torn one.  Async-signal-safe. */
void ntr_ring_comm_wipe(struct ntr_comm_state *cs);

/* Records overwritten so far: positions handed out, less those never used
 * (skipped and released blocks' rest, hdr->unused), less one ring's worth;
 * the unused rest of blocks still open counts as lost (see above). */
static inline uint64_t ntr_ring_lost(const struct ntr_ring *ring) {
  /* Relaxed: statistics read at one instant. */
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_RELAXED);
  uint64_t unused = __atomic_load_n(&ring->hdr->unused, __ATOMIC_RELAXED);
  uint64_t slots = ring->mask + 1, used = head > unused ? head - unused : 0;
  return used > slots ? used - slots : 0;
}

/* What a reader's copy of a slot is (format.h, struct ntr_record). */
enum ntr_slot_state {
  NTR_SLOT_EMPTY = 0, /* commit 0: never written (recent[]: or being claimed) */
  NTR_SLOT_VALID = 1, /* a whole record, the copy is consistent */
  NTR_SLOT_TORN = 2,  /* being written (NTR_COMMIT_WRITING, or a writer that died
                         there), or changed while it was copied */
};

/* The verdict on a copy taken between two reads of commit (before, after):
 * the one rule every reader applies.  Pure function. */
static inline enum ntr_slot_state ntr_slot_judge(uint64_t before, uint64_t after) {
  if (before == 0)
    return NTR_SLOT_EMPTY;
  if (before == NTR_COMMIT_WRITING || before != after)
    return NTR_SLOT_TORN;
  return NTR_SLOT_VALID;
}

/* Seqlock read of one slot (main ring or a recent[] entry) of a live
 * mapping into *out (valid only with NTR_SLOT_VALID, out->commit then being
 * the position + 1).  The caller checks that the position fits the slot it
 * expected (main ring: (commit - 1) & mask == index). */
enum ntr_slot_state ntr_ring_read(const struct ntr_record *slot, struct ntr_record *out);

/* ntr_ring_read for callers that want the position: @return the commit
 * value (position + 1) when valid, else 0. */
static inline uint64_t ntr_ring_read_slot(const struct ntr_record *slot, struct ntr_record *out) {
  return ntr_ring_read(slot, out) == NTR_SLOT_VALID ? out->commit : 0;
}

/* The same read for a reader that cannot load the slot's words itself: the
 * tools pread a ring file twice (a mapping would turn a writer's truncation
 * into SIGBUS), and pread copies a slot's words in no specified order, so
 * the two copies must agree in full, not only in commit: first is the
 * earlier copy, second the later one (the same pointer for bytes that
 * cannot change: a buffer in memory).  Plain memory reads, any alignment. */
static inline enum ntr_slot_state ntr_ring_read_copies(const void *first, const void *second,
                                                       struct ntr_record *out) {
  uint64_t after;
  __builtin_memcpy(out, first, sizeof *out);
  __builtin_memcpy(&after, (const unsigned char *)second + offsetof(struct ntr_record, commit), sizeof after);
  enum ntr_slot_state st = ntr_slot_judge(out->commit, after);
  if (st == NTR_SLOT_VALID && first != second && __builtin_memcmp(first, second, sizeof *out) != 0)
    return NTR_SLOT_TORN;
  return st;
}

#endif /* NTR_RING_H */
