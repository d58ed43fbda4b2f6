/* test_heap.c -- the tracer threads' heap (recorder/heap.h): blocks of
 * every class and large ones keep their bytes through realloc and frees
 * from 8 threads at once, calloc zeroes a reused block, freed blocks are
 * reused (the mapped total stays bounded over 20 rounds), and threads that
 * allocate only from it make no glibc arena (a 64 MiB reservation each).
 * Exit: 0 pass, 1 fail.
 * Thread-safety: the workers share nothing but the heap.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "recorder/heap.h"
#include "tests/nt_test.h"

#define THREADS 8
#define SLOTS 64

static pthread_barrier_t bar;

static size_t pick(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  unsigned k = (unsigned)(*s >> 33) % 100;
  size_t n = (size_t)(*s >> 40) % 65536;
  return k < 5 ? n * 4 + 70000 : k < 60 ? n % 200 : n; /* large, small, up to 64 KiB */
}

static void fill(unsigned char *p, size_t n, unsigned char v) { memset(p, v, n); }
static int same(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v)
      return 0;
  return 1;
}

static void *worker(void *arg) {
  uint64_t seed = (uintptr_t)arg * 7919u + 1;
  unsigned char *p[SLOTS] = {0};
  size_t len[SLOTS] = {0};
  unsigned char tag = (unsigned char)(uintptr_t)arg;
  for (int round = 0; round < 20; round++) {
    for (int op = 0; op < 400; op++) {
      int i = (int)((seed >> 20) % SLOTS);
      size_t n = pick(&seed);
      if (p[i] && !same(p[i], len[i], tag))
        NT_DIE("thread %d: slot %d lost its bytes", (int)tag, i);
      if ((seed >> 50) & 1) {
        unsigned char *q = ntr_heap_realloc(p[i], n ? n : 1);
        NT_ASSERT(q != NULL);
        size_t keep = len[i] < n ? len[i] : n;
        NT_ASSERT(!p[i] || same(q, keep, tag), "realloc lost bytes");
        p[i] = q;
      } else {
        ntr_heap_free(p[i]);
        p[i] = ntr_heap_calloc(1, n);
        NT_ASSERT(p[i] != NULL);
        NT_ASSERT(same(p[i], n, 0), "calloc of %zu bytes not zeroed", n);
      }
      len[i] = n;
      fill(p[i], n, tag);
    }
    if (round == 10)
      pthread_barrier_wait(&bar); /* main counts arenas while all are alive */
  }
  for (int i = 0; i < SLOTS; i++)
    ntr_heap_free(p[i]);
  return NULL;
}

/* Private PROT_NONE mappings of 32 MiB or more: what glibc reserves per
 * arena (HEAP_MAX_SIZE, less what the arena uses). */
static int arenas(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long a, b;
    char perm[8];
    if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && !strcmp(perm, "---p") && b - a >= (32ul << 20))
      n++;
  }
  if (f)
    fclose(f);
  return n;
}

int main(void) {
  pthread_barrier_init(&bar, NULL, THREADS + 1);
  int before = arenas();
  pthread_t t[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++)
    NT_ASSERT(pthread_create(&t[i], NULL, worker, (void *)(i + 1)) == 0);
  pthread_barrier_wait(&bar);
  int during = arenas();
  size_t mid = ntr_heap_mapped();
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  printf("arenas before %d, with %d heap-only threads %d; heap %.1f MiB mapped at round 10, %.1f at the end\n",
         before, THREADS, during, mid / 1048576.0, ntr_heap_mapped() / 1048576.0);
  /* Under ASan/TSan the heap is plain malloc (recorder/heap.c): nothing
   * of ours to count there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PLAIN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PLAIN 1
#endif
#endif
#ifndef PLAIN
  NT_CHECK(during == before, "threads that use only ntr_heap made %d glibc arenas", during - before);
  /* 8 threads x 64 live blocks of at most 64 KiB (or a few large ones):
   * reuse keeps the small classes to a few chunks each. */
  NT_CHECK(mid > 0 && mid < (256u << 20), "heap mapped %zu bytes", mid);
#endif
  return nt_exit_status();
}
