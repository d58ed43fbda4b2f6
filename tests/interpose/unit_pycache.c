/* unit_pycache -- the call-site and frame caches of pyframes.c
 * (interpose/pycache.h):
 * - a full probe run admits a new entry by replacing its oldest, so the
 *   sites a process uses now stay cached however many it used before
 *   (a run that refused new entries re-resolved those sites on every call);
 * - entries are never torn: under concurrent puts and gets from several
 *   threads, a get returns the id / word put for that key, or nothing.
 * Exit 0 pass, 1 fail.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/pycache.h"
#include "tests/nt_test.h"

#define SLOTS 4096u
static uint64_t words[SLOTS];
static struct nti_pyc_frame fslots[SLOTS];

/* Keys that all start their probe run at slot 5. */
static uint64_t colliding(uint32_t j) { return 5 + ((uint64_t)(j + 1) << 32); }

static void sites_evict(void) {
  struct nti_pyc_sites c = {words, SLOTS - 1, 0};
  memset(words, 0, sizeof words);
  for (uint32_t j = 0; j < 100; j++) {
    nti_pyc_site_put(&c, colliding(j), j + 1);
    NT_CHECK(nti_pyc_site_get(&c, colliding(j)) == j + 1, "site %u not cached once its run was full", j);
  }
  /* the last NTI_PYC_PROBES are the ones kept */
  for (uint32_t j = 0; j < 100; j++) {
    uint32_t id = nti_pyc_site_get(&c, colliding(j));
    if (j >= 100 - NTI_PYC_PROBES)
      NT_CHECK(id == j + 1, "recent site %u: id %u", j, id);
    else
      NT_CHECK(id == 0, "old site %u still cached (id %u)", j, id);
  }
  /* a site resolved to nothing is remembered as such */
  nti_pyc_site_put(&c, 77, 0);
  NT_CHECK(nti_pyc_site_get(&c, 77) == NTI_PYC_NONE, "a site without a stack is not remembered");
}

static void frames_evict(void) {
  struct nti_pyc_frames c = {fslots, SLOTS - 1, 0};
  memset(fslots, 0, sizeof fslots);
  for (uint32_t j = 0; j < 100; j++) {
    nti_pyc_frame_put(&c, colliding(j), 1000 + j);
    NT_CHECK(nti_pyc_frame_get(&c, colliding(j)) == 1000 + j, "frame %u not cached once its run was full", j);
  }
  for (uint32_t j = 0; j < 100; j++) {
    uint64_t w = nti_pyc_frame_get(&c, colliding(j));
    NT_CHECK(j >= 100 - NTI_PYC_PROBES ? w == 1000 + j : w == 0, "frame %u: word %llu", j, (unsigned long long)w);
  }
}

/* Concurrency: a small table (many evictions), ids derived from keys. */
#define SMALL 64u
static uint64_t small_words[SMALL];
static struct nti_pyc_frame small_frames[SMALL];
static struct nti_pyc_sites small_sites = {small_words, SMALL - 1, 0};
static struct nti_pyc_frames small_fc = {small_frames, SMALL - 1, 0};
static int torn; /* atomic */

static uint32_t id_of(uint64_t key) { return (uint32_t)(key % 1000) + 1; }
static uint64_t word_of(uint64_t key) { return key * 3 + 1; }

static void *worker(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint64_t key = (x % 500) * 0x100000001ull + 1; /* 500 keys over 64 slots */
    if (i & 1) {
      nti_pyc_site_put(&small_sites, key, id_of(key));
      nti_pyc_frame_put(&small_fc, key, word_of(key));
    } else {
      uint32_t id = nti_pyc_site_get(&small_sites, key);
      uint64_t w = nti_pyc_frame_get(&small_fc, key);
      if ((id && id != id_of(key)) || (w && w != word_of(key)))
        __atomic_store_n(&torn, 1, __ATOMIC_RELAXED);
    }
  }
  return NULL;
}

static void concurrent(void) {
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++)
    pthread_create(&t[i], NULL, worker, (void *)(i + 1));
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  NT_CHECK(!torn, "a get returned another key's id or word");
}

int main(void) {
  sites_evict();
  frames_evict();
  concurrent();
  if (nt_failures)
    return 1;
  printf("ok\n");
  return 0;
}
