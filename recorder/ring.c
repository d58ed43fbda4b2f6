/* ring.c -- create, map and fill the ring file; comm slots; the seqlock
 * reader (see ring.h for the protocol and contracts). */
#include "recorder/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "ntr_config.h"
#include "recorder/clock.h"
#include "recorder/env.h"
#include "recorder/ring_place.h"
#include "recorder/util.h"

#define PAGE 4096u
#define ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

int ntr_ring_name(char *out, size_t cap, const char *dir, const char *job, const char *host,
                  int pid, int attempt) {
  struct ntr_sb sb;
  ntr_sb_init(&sb, out, cap);
  if (dir) {
    ntr_sb_str(&sb, dir);
    ntr_sb_str(&sb, "/");
  }
  ntr_sb_str(&sb, "nccltrace-");
  ntr_sb_component(&sb, job && *job ? job : "nojob", 64);
  ntr_sb_str(&sb, "-");
  ntr_sb_component(&sb, host, 64);
  ntr_sb_str(&sb, "-");
  ntr_sb_i64(&sb, pid);
  if (attempt) {
    ntr_sb_str(&sb, "~");
    ntr_sb_i64(&sb, attempt);
  }
  ntr_sb_str(&sb, ".ring");
  return sb.overflow ? -ENAMETOOLONG : 0;
}

static void read_exe(char *out, size_t cap) {
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n;
    do
      n = read(fd, out, cap - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n > 0) {
      while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\0'))
        n--;
      out[n] = '\0';
      if (n > 0)
        return;
    }
  }
  ntr_strlcpy(out, program_invocation_short_name ? program_invocation_short_name : "?", cap);
}

/* Layout: [header 16 KiB][comm table][stack table][strings][block words][slots],
 * each section page aligned so a reader can map them independently. */
void ntr_ring_layout(struct ntr_ring_header *h, uint32_t slots) {
  uint32_t block = slots / 64 < NTR_RING_BLOCK ? (slots / 64 ? slots / 64 : 1) : NTR_RING_BLOCK;
  h->block_positions = block;
  h->block_count = slots / block;
  h->comm_offset = NTR_RING_HEADER_BYTES;
  h->stack_offset =
      ALIGN_UP(h->comm_offset + (uint64_t)NTR_COMM_MAX * sizeof(struct ntr_comm_state), PAGE);
  h->str_offset =
      ALIGN_UP(h->stack_offset + (uint64_t)NTR_STACK_MAX * sizeof(struct ntr_stack), PAGE);
  h->str_size = NTR_STR_BYTES;
  h->block_offset = ALIGN_UP(h->str_offset + NTR_STR_BYTES, PAGE);
  h->slot_offset = ALIGN_UP(h->block_offset + (uint64_t)h->block_count * sizeof(uint64_t), PAGE);
  h->file_size = ALIGN_UP(h->slot_offset + (uint64_t)slots * sizeof(struct ntr_record), PAGE);
}

static void fill_identity(struct ntr_ring_header *h, const char *job) {
  memcpy(h->magic, NTR_RING_MAGIC, 8);
  h->version = NTR_FORMAT_VERSION;
  h->header_size = sizeof(struct ntr_ring_header);
  h->record_size = sizeof(struct ntr_record);
  h->comm_max = NTR_COMM_MAX;
  h->comm_recent = NTR_COMM_RECENT;
  h->stack_max = NTR_STACK_MAX;
  h->stack_depth = NTR_STACK_DEPTH;
  h->pid = getpid();
  h->ppid = getppid();
  ntr_env_launcher(&h->rank, &h->local_rank, &h->world_size, &h->local_world_size);
  h->proc_state = NTR_PROC_RUNNING;
  if (gethostname(h->host, sizeof h->host) != 0)
    ntr_strlcpy(h->host, "unknown", sizeof h->host);
  h->host[sizeof h->host - 1] = '\0';
  ntr_strlcpy(h->job_id, job ? job : "", sizeof h->job_id);
  ntr_strlcpy(h->tracer_version, NTR_VERSION, sizeof h->tracer_version);
  read_exe(h->exe, sizeof h->exe);
  h->env_len = ntr_env_capture(h->env, sizeof h->env);
}

/* Shared by open and reopen_child; clocks, when given, are copied instead of
 * calibrated (a fork child inherits its parent's TSC rate). */
static int ring_create(struct ntr_ring *ring, const struct ntr_ring_config *cfg,
                       const struct ntr_ring_header *clocks) {
  memset(ring, 0, sizeof *ring);
  uint32_t slots = cfg->slots;
  if (slots < 64 || (slots & (slots - 1)) || !cfg->dir || !*cfg->dir)
    return -EINVAL;
  void *map = NULL;
  int rc = ntr_ring_place(ring, cfg, &slots, &map);
  if (rc)
    return rc;
  struct ntr_ring_header tmp;
  memset(&tmp, 0, sizeof tmp);
  ntr_ring_layout(&tmp, slots);

  struct ntr_ring_header *h = map;
  fill_identity(h, cfg->job_id);
  h->ring_place = ring->place;
  h->slot_count = slots;
  h->comm_offset = tmp.comm_offset;
  h->stack_offset = tmp.stack_offset;
  h->block_offset = tmp.block_offset;
  h->block_count = tmp.block_count;
  h->block_positions = tmp.block_positions;
  h->slot_offset = tmp.slot_offset;
  h->str_offset = tmp.str_offset;
  h->str_size = tmp.str_size;
  h->file_size = tmp.file_size;
  if (clocks) {
    h->tsc_base = clocks->tsc_base;
    h->mono_base_ns = clocks->mono_base_ns;
    h->real_base_ns = clocks->real_base_ns;
    h->tsc_hz = clocks->tsc_hz;
  } else {
    ntr_clock_calibrate(h);
  }

  ring->hdr = h;
  ring->comms = (struct ntr_comm_state *)((char *)map + h->comm_offset);
  ring->stacks = (struct ntr_stack *)((char *)map + h->stack_offset);
  ring->slots = (struct ntr_record *)((char *)map + h->slot_offset);
  ring->strs = (char *)map + h->str_offset;
  ring->blocks = (uint64_t *)((char *)map + h->block_offset);
  ring->mask = slots - 1;
  /* A block is at most 1/64 of the ring (ntr_ring_layout): a small ring is
   * not all holes, and 64 block indexes leave room for quiet owners. */
  ring->block = h->block_positions;
  ring->bmask = h->block_count - 1;
  ring->block_shift = (uint32_t)__builtin_ctz(ring->block);
  ring->map_size = h->file_size;
  return 0;
}

uint64_t ntr_ring_bytes(uint32_t slots) {
  struct ntr_ring_header t;
  memset(&t, 0, sizeof t);
  ntr_ring_layout(&t, slots);
  return t.file_size;
}

int ntr_ring_open(struct ntr_ring *ring, const struct ntr_ring_config *cfg) {
  return ring_create(ring, cfg, NULL);
}

int ntr_ring_reopen_child(struct ntr_ring *ring, const struct ntr_ring_config *cfg) {
  struct ntr_ring_header clocks;
  int have_clocks = 0;
  if (ring->hdr) {
    /* read-only use of the parent's header: the clock bases */
    clocks.tsc_base = ring->hdr->tsc_base;
    clocks.mono_base_ns = ring->hdr->mono_base_ns;
    clocks.real_base_ns = ring->hdr->real_base_ns;
    clocks.tsc_hz = ring->hdr->tsc_hz;
    have_clocks = 1;
    munmap(ring->hdr, ring->map_size);
    ring->hdr = NULL;
  }
  return ring_create(ring, cfg, have_clocks ? &clocks : NULL);
}

int ntr_ring_set_job(struct ntr_ring *ring, const char *job_id) {
  if (!ring->hdr || !job_id)
    return -EINVAL;
  ntr_strlcpy(ring->hdr->job_id, job_id, sizeof ring->hdr->job_id);
  if (ring->anon)
    return 0; /* no file to rename */
  char path[sizeof ring->path];
  for (int attempt = 0; attempt < 16; attempt++) {
    int rc = ntr_ring_name(path, sizeof path, ring->dir, job_id, ring->hdr->host, ring->hdr->pid,
                       attempt);
    if (rc)
      return rc;
    if (strcmp(path, ring->path) == 0)
      return 0;
    /* link + unlink instead of rename: never replaces another ring */
    if (link(ring->path, path) == 0) {
      unlink(ring->path);
      memcpy(ring->path, path, sizeof path);
      return 0;
    }
    if (errno != EEXIST)
      return -errno;
  }
  return -EEXIST;
}

void ntr_ring_unlink(struct ntr_ring *ring) {
  if (ring->path[0])
    unlink(ring->path);
  /* Fails (ENOTEMPTY) while other files are there: then it stays. */
  if (ring->own_dir && ring->dir[0])
    rmdir(ring->dir);
}

int ntr_ring_repair_fault(struct ntr_ring *ring, void *addr) {
  char *base = (char *)ring->hdr, *a = addr;
  if (!base || a < base || a >= base + ring->map_size)
    return 0;
  char *page = base + (size_t)(a - base) / PAGE * PAGE;
  /* MAP_FIXED over the lost page: zeroes, private to us; what was there is
   * gone with the file's blocks anyway. */
  void *m = mmap(page, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  return m == (void *)page;
}

void ntr_ring_close(struct ntr_ring *ring, int remove) {
  if (ring->hdr) {
    munmap(ring->hdr, ring->map_size);
    ring->hdr = NULL;
  }
  if (remove)
    ntr_ring_unlink(ring);
  ring->comms = NULL;
  ring->stacks = NULL;
  ring->slots = NULL;
  ring->strs = NULL;
}

struct ntr_comm_state *ntr_ring_comm_alloc(struct ntr_ring *ring) {
  /* Relaxed: the index only has to be unique; the slot is zero in a fresh
   * file and nobody reads it before the caller publishes its comm_id. */
  uint32_t i = __atomic_fetch_add(&ring->hdr->comm_count, 1, __ATOMIC_RELAXED);
  if (i >= NTR_COMM_MAX) {
    /* keep comm_count meaningful for readers: they clamp, but do not let it
     * wrap after 4 billion failed allocations */
    __atomic_store_n(&ring->hdr->comm_count, NTR_COMM_MAX, __ATOMIC_RELAXED);
    return NULL;
  }
  struct ntr_comm_state *cs = &ring->comms[i];
  memset(cs, 0, sizeof *cs);
  return cs;
}

void ntr_ring_comm_wipe(struct ntr_comm_state *cs) {
  /* Release: a reader that sees a later store sees these. */
  __atomic_store_n(&cs->lifecycle, NTR_COMM_FREE, __ATOMIC_RELEASE);
  __atomic_store_n(&cs->comm_id, 0, __ATOMIC_RELEASE);
  for (uint32_t k = 0; k < NTR_COMM_RECENT; k++)
    __atomic_store_n(&cs->recent[k].commit, 0, __ATOMIC_RELEASE);
  /* The rest word by word (a memset may store bytes): the header, then
   * each entry's body after its commit. */
  uint64_t *w = (uint64_t *)(void *)cs;
  for (size_t i = 0; i < offsetof(struct ntr_comm_state, recent) / 8; i++)
    __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
  for (uint32_t k = 0; k < NTR_COMM_RECENT; k++) {
    uint64_t *r = (uint64_t *)(void *)&cs->recent[k];
    for (size_t i = 1; i < sizeof cs->recent[k] / 8; i++)
      __atomic_store_n(&r[i], 0, __ATOMIC_RELAXED);
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

void ntr_ring_commit_recent(struct ntr_comm_state *cs, const struct ntr_record *rec,
                            uint64_t pos) {
  /* Relaxed: the index only has to be unique per record. */
  uint64_t n = __atomic_fetch_add(&cs->rec_count, 1, __ATOMIC_RELAXED);
  struct ntr_record *dst = &cs->recent[n & (NTR_COMM_RECENT - 1)];
  /* Same single-owner seqlock as the main ring (ring.h), with recent[]'s own
   * lap; commit still carries the global position.  If another writer owns
   * the entry, this copy is dropped: the main ring still has the record. */
  uint64_t c = __atomic_load_n(&dst->commit, __ATOMIC_ACQUIRE);
  if (c == 0 ? n >= NTR_COMM_RECENT : c - 1 > pos)
    return;
  /* Acquire pairs with the release store of the previous owner's commit. */
  if (c != 0 &&
      !__atomic_compare_exchange_n(&dst->commit, &c, 0, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return;
  NTR_FENCE_RELEASE(); /* commit = 0 before the body */
  /* Word-atomic relaxed stores: readers copy concurrently, and this keeps the
   * race defined behaviour (and what TSan sees matches the protocol). */
  const uint64_t *src = (const uint64_t *)rec;
  uint64_t *d = (uint64_t *)dst;
  for (size_t w = 1; w < sizeof *rec / 8; w++)
    __atomic_store_n(&d[w], src[w], __ATOMIC_RELAXED);
  /* Release pairs with the acquire load in ntr_ring_read. */
  __atomic_store_n(&dst->commit, pos + 1, __ATOMIC_RELEASE);
}

/* The body copy races with writers by design (the seqlock detects it): it is
 * excluded from TSan, which cannot see that a torn copy is discarded. */
#if defined(__clang__)
#define NTR_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define NTR_NO_TSAN __attribute__((no_sanitize_thread))
#endif

NTR_NO_TSAN static void copy_body(struct ntr_record *out, const struct ntr_record *slot) {
  const volatile uint64_t *s = (const volatile uint64_t *)slot;
  uint64_t *d = (uint64_t *)out;
  for (size_t w = 1; w < sizeof *slot / 8; w++)
    d[w] = s[w];
}

enum ntr_slot_state ntr_ring_read(const struct ntr_record *slot, struct ntr_record *out) {
  /* Acquire pairs with the writer's release store of commit: the body we
   * copy is at least as new as that commit. */
  uint64_t c1 = __atomic_load_n(&slot->commit, __ATOMIC_ACQUIRE);
  if (c1 == 0 || c1 == NTR_COMMIT_WRITING)
    return ntr_slot_judge(c1, c1);
  copy_body(out, slot);
  /* Acquire fence pairs with the writer's release fence after commit = 0:
   * if any body word we read came from a newer writer, the second load
   * below sees that writer's commit = 0 (or later), not c1. */
  NTR_FENCE_ACQUIRE();
  uint64_t c2 = __atomic_load_n(&slot->commit, __ATOMIC_RELAXED);
  out->commit = c1;
  return ntr_slot_judge(c1, c2);
}

/* ------------------------------------------------------------ blocks -- */

/* Where a record goes when no block can be had (every index held): never
 * read, so its races are harmless; per thread so that TSan agrees. */
static __thread __attribute__((tls_model("initial-exec"))) struct ntr_record scratch;

/* Give block start back if it is still ours (OPEN or CLOSED by a reader);
 * its positions from next on are counted unused.  A CAS, not a store: the
 * block may have been released already by the commit of its last position
 * (ntr_ring_commit) and claimed again by a writer of a later lap. */
static void release_block(struct ntr_ring *ring, uint64_t start, uint64_t next) {
  uint64_t *w = ntr_ring_blk(ring, start);
  uint64_t expect = ntr_blk_word(start, NTR_BLK_OPEN);
  /* Release: every record we committed in the block is visible to whoever
   * sees FREE (the next claimer's acquire CAS, a reader's acquire load in
   * ntr_ring_settle). */
  if (!__atomic_compare_exchange_n(w, &expect, ntr_blk_word(start, NTR_BLK_FREE), 0, __ATOMIC_RELEASE,
                                   __ATOMIC_RELAXED)) {
    expect = ntr_blk_word(start, NTR_BLK_CLOSED);
    if (!__atomic_compare_exchange_n(w, &expect, ntr_blk_word(start, NTR_BLK_FREE), 0, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED))
      return; /* released already; its unused rest was counted then */
  }
  uint64_t end = start + ring->block;
  if (next < end) /* Relaxed: a statistic (ntr_ring_lost). */
    __atomic_fetch_add(&ring->hdr->unused, end - next, __ATOMIC_RELAXED);
}

void ntr_ring_release_at(struct ntr_ring *ring, uint64_t pos) {
  /* Only a record that is in the ring: not the scratch slot of a dropped
   * record, whose position is not its own.  Relaxed: we wrote it. */
  if (__atomic_load_n(&ring->slots[pos & ring->mask].commit, __ATOMIC_RELAXED) != pos + 1)
    return;
  release_block(ring, pos & ~(uint64_t)(ring->block - 1), pos + 1);
}

void ntr_ring_release(struct ntr_ring *ring, struct ntr_ring_cursor *cur) {
  if (cur->word && ring->hdr)
    release_block(ring, cur->end - ring->block, cur->next);
  cur->next = cur->end = 0;
  cur->word = NULL;
  cur->open = 0;
  cur->slot = NULL;
}

/* Claim a fresh block: @return its first position, or UINT64_MAX when
 * every index was held for a whole round. */
static uint64_t claim_block(struct ntr_ring *ring) {
  for (uint64_t tries = 0; tries <= ring->bmask; tries++) {
    /* Relaxed: the position only has to be unique; the block word and the
     * slots' commits carry all ordering. */
    uint64_t s = __atomic_fetch_add(&ring->hdr->head, ring->block, __ATOMIC_RELAXED);
    uint64_t *w = ntr_ring_blk(ring, s);
    /* Acquire (load and CAS) pairs with the release in release_block: our
     * slot stores come after every store of the block's previous owner. */
    uint64_t old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    if ((old & 3u) == NTR_BLK_FREE && (old >> 2) < s + 1 &&
        __atomic_compare_exchange_n(w, &old, ntr_blk_word(s, NTR_BLK_OPEN), 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
      return s;
    /* Held by a writer of an older lap, or taken by a later one: skipped.
     * Relaxed: a statistic. */
    __atomic_fetch_add(&ring->hdr->unused, ring->block, __ATOMIC_RELAXED);
  }
  return UINT64_MAX;
}

struct ntr_record *ntr_ring_reserve_block(struct ntr_ring *ring, struct ntr_ring_cursor *cur,
                                          uint64_t *pos) {
  ntr_ring_release(ring, cur);
  uint64_t s = claim_block(ring);
  if (s == UINT64_MAX) {
    /* Relaxed: a statistic. */
    __atomic_fetch_add(&ring->hdr->dropped, 1, __ATOMIC_RELAXED);
    *pos = 0;
    return &scratch;
  }
  cur->next = s + 1;
  cur->end = s + ring->block;
  cur->word = ntr_ring_blk(ring, s);
  cur->open = ntr_blk_word(s, NTR_BLK_OPEN);
  cur->slot = &ring->slots[(s + 1) & ring->mask];
  *pos = s;
  return ntr_ring_open_slot(ring, s);
}

int ntr_ring_refill(struct ntr_ring *ring, struct ntr_ring_cursor *cur) {
  ntr_ring_release(ring, cur);
  uint64_t s = claim_block(ring);
  if (s == UINT64_MAX)
    return -1;
  cur->next = s;
  cur->end = s + ring->block;
  cur->word = ntr_ring_blk(ring, s);
  cur->open = ntr_blk_word(s, NTR_BLK_OPEN);
  cur->slot = &ring->slots[s & ring->mask];
  return 0;
}

struct ntr_record *ntr_ring_reserve(struct ntr_ring *ring, uint64_t *pos) {
  uint64_t s = claim_block(ring);
  if (s == UINT64_MAX) {
    __atomic_fetch_add(&ring->hdr->dropped, 1, __ATOMIC_RELAXED);
    *pos = 0;
    return &scratch;
  }
  /* The last position: ntr_ring_commit of it releases the block.  Relaxed:
   * a statistic. */
  if (ring->block > 1)
    __atomic_fetch_add(&ring->hdr->unused, ring->block - 1, __ATOMIC_RELAXED);
  *pos = s + ring->block - 1;
  return ntr_ring_open_slot(ring, *pos);
}

/* ------------------------------------------------------------- holes -- */

/* Slot of position q holds q or a later position, or is being written. */
static int slot_taken(const struct ntr_ring *ring, uint64_t q) {
  /* Relaxed: a hint for the reader. */
  uint64_t c = __atomic_load_n(&ring->slots[q & ring->mask].commit, __ATOMIC_RELAXED);
  return c > q; /* NTR_COMMIT_WRITING is larger than any position */
}

int ntr_ring_settle(struct ntr_ring *ring, uint64_t p, uint64_t head, int close) {
  uint64_t c = __atomic_load_n(&ring->slots[p & ring->mask].commit, __ATOMIC_ACQUIRE);
  if (c == NTR_COMMIT_WRITING)
    return NTR_HOLE_WRITING;
  if (c > p)
    return NTR_SETTLED;
  uint64_t start = p & ~(uint64_t)(ring->block - 1);
  uint64_t *w = ntr_ring_blk(ring, start);
  /* Acquire pairs with the release in release_block: a released block's
   * records are all visible, so an unwritten slot there stays unwritten. */
  uint64_t word = __atomic_load_n(w, __ATOMIC_ACQUIRE);
  uint64_t owner = (word >> 2) - 1; /* start of the block that holds the index */
  unsigned st = (unsigned)(word & 3u);
  if (word && owner > start)
    return NTR_SETTLED; /* lapped: a later block took the index */
  if (word && owner == start && st != NTR_BLK_OPEN) {
    /* released or closed: read the slot once more (its owner may have
     * committed it just before releasing) */
    c = __atomic_load_n(&ring->slots[p & ring->mask].commit, __ATOMIC_ACQUIRE);
    return c == NTR_COMMIT_WRITING ? NTR_HOLE_WRITING : NTR_SETTLED;
  }
  /* Open (ours to wait for), or not claimed at this lap yet (the claimer
   * is between its fetch_add and its CAS, or skipped the index). */
  uint64_t lim = p + 1 + ring->block, q = p + 1;
  if (lim > head)
    lim = head;
  while (q < lim && !slot_taken(ring, q))
    q++;
  if (q >= lim)
    return NTR_HOLE_FRONTIER;
  if (!close)
    return NTR_HOLE_BLOCKING;
  /* Close the block (its owner moves on at its next record) or, when no
   * one claimed it, fence it (FREE(start): a late claimer's CAS fails). */
  uint64_t target = st == NTR_BLK_OPEN && owner == start ? ntr_blk_word(start, NTR_BLK_CLOSED)
                                                         : ntr_blk_word(start, NTR_BLK_FREE);
  if (word && owner < start && st != NTR_BLK_FREE)
    return NTR_SETTLED; /* an older lap's owner holds it: its claimer at p skipped it */
  /* Relaxed: the reader only needs the outcome; the slots' commits carry
   * the data. */
  if (!__atomic_compare_exchange_n(w, &word, target, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return NTR_HOLE_BLOCKING; /* changed under us: look again next time */
  c = __atomic_load_n(&ring->slots[p & ring->mask].commit, __ATOMIC_ACQUIRE);
  return c == NTR_COMMIT_WRITING ? NTR_HOLE_WRITING : NTR_SETTLED;
}
