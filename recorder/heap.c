/* heap.c -- the tracer threads' own heap (heap.h says why).
 *
 * Every block has a 16-byte header before it: its class, or for a large
 * block the length of its own mapping.  Class k holds blocks of 32 << k
 * bytes, header included (32 B .. 64 KiB), kept on a free list per class
 * and carved from 1 MiB chunks.
 *
 * Thread-safety and signal-safety: see heap.h.
 */
#include "recorder/heap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h> /* the sanitizer builds' malloc */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NTR_HEAP_PLAIN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NTR_HEAP_PLAIN 1
#endif
#endif

#ifdef NTR_HEAP_PLAIN
void *ntr_heap_alloc(size_t n) { return malloc(n); }
void *ntr_heap_calloc(size_t n, size_t sz) { return calloc(n, sz); }
void *ntr_heap_realloc(void *p, size_t n) { return realloc(p, n); }
void ntr_heap_free(void *p) { free(p); }
size_t ntr_heap_mapped(void) { return 0; }
#else

#define NCLASS 12u                 /* 32 << 11 = 64 KiB */
#define CHUNK (1u << 20)
#define LARGE UINT32_MAX
#define MAGIC 0x6e746870u          /* "nthp": a block of ours */

struct hdr {
  uint64_t len;   /* large: bytes of the mapping; else the class's block size */
  uint32_t cls;   /* class, or LARGE */
  uint32_t magic;
};
_Static_assert(sizeof(struct hdr) == 16, "blocks stay 16-byte aligned");

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static void *free_list[NCLASS];
static char *cur, *end;            /* the chunk being carved */
static size_t mapped;

static void lock(void) { pthread_mutex_lock(&mu); }
static void unlock(void) { pthread_mutex_unlock(&mu); }
static void at_fork(void) { pthread_atfork(lock, unlock, unlock); }

static void *map(size_t n) {
  void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  mapped += n;
  return p;
}

static unsigned class_of(size_t total) {
  unsigned k = 0;
  while ((32ull << k) < total)
    k++;
  return k;
}

void *ntr_heap_alloc(size_t n) {
  pthread_once(&once, at_fork);
  if (n > SIZE_MAX / 2) {
    errno = ENOMEM;
    return NULL;
  }
  size_t total = n + sizeof(struct hdr);
  struct hdr *h;
  lock();
  if (total > (32ull << (NCLASS - 1))) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    total = (total + pg - 1) / pg * pg;
    h = map(total);
    if (h) {
      h->len = total;
      h->cls = LARGE;
    }
  } else {
    unsigned k = class_of(total);
    size_t bs = 32ull << k;
    h = free_list[k];
    if (h) {
      free_list[k] = *(void **)(h + 1);
    } else {
      if ((size_t)(end - cur) < bs) {
        cur = map(CHUNK); /* the rest of the old chunk is left: at most one block */
        end = cur ? cur + CHUNK : NULL;
      }
      h = (struct hdr *)cur;
      if (h)
        cur += bs;
    }
    if (h) {
      h->len = bs;
      h->cls = k;
    }
  }
  if (h)
    h->magic = MAGIC;
  unlock();
  return h ? h + 1 : NULL;
}

void *ntr_heap_calloc(size_t n, size_t sz) {
  if (sz && n > SIZE_MAX / 2 / sz) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = ntr_heap_alloc(n * sz);
  if (p) {
    /* A fresh mapping is zero already; a reused block is not. */
    memset(p, 0, n * sz);
  }
  return p;
}

void ntr_heap_free(void *p) {
  if (!p)
    return;
  struct hdr *h = (struct hdr *)p - 1;
  if (h->magic != MAGIC)
    return; /* not ours (a bug): kept, rather than corrupt either heap */
  h->magic = 0;
  lock();
  if (h->cls == LARGE) {
    mapped -= h->len;
    munmap(h, h->len);
  } else {
    *(void **)(h + 1) = free_list[h->cls];
    free_list[h->cls] = h;
  }
  unlock();
}

void *ntr_heap_realloc(void *p, size_t n) {
  if (!p)
    return ntr_heap_alloc(n);
  if (!n) {
    ntr_heap_free(p);
    return NULL;
  }
  struct hdr *h = (struct hdr *)p - 1;
  size_t have = h->len - sizeof *h;
  if (n <= have && h->cls != LARGE)
    return p;
  void *q = ntr_heap_alloc(n);
  if (!q)
    return NULL;
  memcpy(q, p, n < have ? n : have);
  ntr_heap_free(p);
  return q;
}

size_t ntr_heap_mapped(void) {
  lock();
  size_t m = mapped;
  unlock();
  return m;
}
#endif
