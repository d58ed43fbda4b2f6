/* pycache.h -- the two caches of pyframes.c: known call sites (hash of a
 * thread's frame chain -> stack id) and known frames (hash of one frame ->
 * its frame word).  Open addressing over a probe run of NTI_PYC_PROBES
 * slots; when a run is full a new entry replaces the oldest of the run, so
 * a process with more sites than slots pays one resolution per miss and
 * keeps its recent sites cached (a run that never admits a new entry would
 * re-resolve that site on every call).
 *
 * Stale entries: a key hashes code object addresses, which CPython reuses
 * once a code object is freed (exec'd or reloaded code, functions made in a
 * loop).  pyframes.c mixes each code object's co_filename pointer and
 * co_firstlineno into the key, so a new code object at a freed one's
 * address misses unless it also has the same file object and first line
 * (then it is, as far as a call site can tell, the same code).
 *
 * Thread-safety: lock-free, any number of threads.  A site entry is one
 * 64-bit word (key bits, age, id), read and replaced whole: a reader never
 * pairs one entry's key with another's id.  A frame entry is three words
 * under a per-slot sequence count (a seqlock whose writer never waits: a
 * slot being written is skipped, by writers and readers alike).
 * Signal-safety: async-signal-safe (atomics only; nothing waits).  A signal
 * handler interrupting a write on the same thread sees that slot busy.
 */
#ifndef NTI_PYCACHE_H
#define NTI_PYCACHE_H
#include <stdint.h>
#include "recorder/ring.h" /* NTR_FENCE_* (TSan-safe fences) */

#define NTI_PYC_PROBES 16u
#define NTI_PYC_NONE 0xffffu    /* a site resolved to no stack (the table is full) */

/* ------------------------------------------------------------ sites -- */

/* word: key's upper 40 bits << 24 | age (8 bits) << 16 | id (16 bits);
 * 0 = empty.  Stack ids are below NTR_STACK_MAX (1024): 16 bits hold them. */
struct nti_pyc_sites {
  uint64_t *w;                  /* nslots words (a power of two) */
  uint32_t mask;                /* nslots - 1 */
  uint32_t clock;               /* atomic: entries made, low 8 bits = age */
};

static inline uint64_t nti_pyc_tag(uint64_t key) {
  uint64_t t = key >> 24;
  return t ? t : 1;
}

/* The id stored for key: 0 when unknown, NTI_PYC_NONE when known to have none. */
static inline uint32_t nti_pyc_site_get(const struct nti_pyc_sites *c, uint64_t key) {
  uint64_t tag = nti_pyc_tag(key);
  for (uint32_t p = 0; p < NTI_PYC_PROBES; p++) {
    /* Relaxed: the word is the whole entry; the id names a stack-table
     * entry the caller only copies into a record. */
    uint64_t w = __atomic_load_n(&c->w[(key + p) & c->mask], __ATOMIC_RELAXED);
    if (w >> 24 == tag)
      return (uint32_t)(w & 0xffff);
    if (!w)
      return 0;
  }
  return 0;
}

/* Remember key -> id (0 is stored as NTI_PYC_NONE): the first empty slot
 * of the run, else the run's oldest entry.  A lost race leaves key
 * uncached until its next miss. */
static inline void nti_pyc_site_put(struct nti_pyc_sites *c, uint64_t key, uint32_t id) {
  uint64_t tag = nti_pyc_tag(key);
  uint32_t now = __atomic_fetch_add(&c->clock, 1, __ATOMIC_RELAXED) & 0xff;
  uint64_t nw = tag << 24 | (uint64_t)now << 16 | ((id && id < NTI_PYC_NONE) ? id : NTI_PYC_NONE);
  uint64_t *victim = NULL, old = 0;
  uint32_t oldest = 0;
  for (uint32_t p = 0; p < NTI_PYC_PROBES; p++) {
    uint64_t *s = &c->w[(key + p) & c->mask];
    uint64_t w = __atomic_load_n(s, __ATOMIC_RELAXED);
    if (w >> 24 == tag)
      return; /* another thread cached it */
    if (!w) {
      victim = s, old = 0;
      break;
    }
    uint32_t age = (now - (uint32_t)(w >> 16)) & 0xff;
    if (!victim || age > oldest)
      victim = s, old = w, oldest = age;
  }
  __atomic_compare_exchange_n(victim, &old, nw, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* ----------------------------------------------------------- frames -- */

struct nti_pyc_frame {
  uint32_t seq;                 /* atomic: odd while being written */
  uint32_t stamp;               /* when it was written (the cache's clock) */
  uint64_t key, word;           /* atomic (relaxed, under seq); key 0 = empty */
};
struct nti_pyc_frames {
  struct nti_pyc_frame *f;      /* nslots (a power of two) */
  uint32_t mask;
  uint32_t clock;               /* atomic */
};

/* The frame word stored for key, 0 when unknown (or being written). */
static inline uint64_t nti_pyc_frame_get(const struct nti_pyc_frames *c, uint64_t key) {
  for (uint32_t p = 0; p < NTI_PYC_PROBES; p++) {
    const struct nti_pyc_frame *f = &c->f[(key + p) & c->mask];
    /* Acquire pairs with the writer's release of the even seq. */
    uint32_t s1 = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
    uint64_t k = __atomic_load_n(&f->key, __ATOMIC_RELAXED);
    uint64_t w = __atomic_load_n(&f->word, __ATOMIC_RELAXED);
    /* Orders the loads above before the re-read of seq. */
    NTR_FENCE_ACQUIRE();
    uint32_t s2 = __atomic_load_n(&f->seq, __ATOMIC_RELAXED);
    if (s1 & 1 || s1 != s2)
      continue; /* being written: not a hit, and not the end of the run */
    if (k == key)
      return w;
    if (!k)
      return 0;
  }
  return 0;
}

static inline void nti_pyc_frame_put(struct nti_pyc_frames *c, uint64_t key, uint64_t word) {
  uint32_t now = __atomic_fetch_add(&c->clock, 1, __ATOMIC_RELAXED);
  struct nti_pyc_frame *victim = NULL;
  uint32_t oldest = 0;
  for (uint32_t p = 0; p < NTI_PYC_PROBES; p++) {
    struct nti_pyc_frame *f = &c->f[(key + p) & c->mask];
    uint64_t k = __atomic_load_n(&f->key, __ATOMIC_RELAXED);
    if (k == key)
      return;
    if (!k) {
      victim = f;
      break;
    }
    uint32_t age = now - __atomic_load_n(&f->stamp, __ATOMIC_RELAXED);
    if (!victim || age > oldest)
      victim = f, oldest = age;
  }
  uint32_t s = __atomic_load_n(&victim->seq, __ATOMIC_RELAXED);
  /* Acquire: the stores below stay after the claim (odd seq). */
  if (s & 1 || !__atomic_compare_exchange_n(&victim->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return; /* another writer has it */
  /* Pairs with the reader's acquire fence: a reader that loads any store
   * below also sees the odd seq on its re-read. */
  NTR_FENCE_RELEASE();
  __atomic_store_n(&victim->key, key, __ATOMIC_RELAXED);
  __atomic_store_n(&victim->word, word, __ATOMIC_RELAXED);
  __atomic_store_n(&victim->stamp, now, __ATOMIC_RELAXED);
  /* Release pairs with the reader's acquire of seq: key and word first. */
  __atomic_store_n(&victim->seq, s + 2, __ATOMIC_RELEASE);
}
#endif
