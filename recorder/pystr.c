/* pystr.c -- the Python string table (see pystr.h). */
#include "recorder/pystr.h"

#include <string.h>
#define XXH_INLINE_ALL /* header-only: see stack.c */
#include <xxhash.h>

static size_t entry_bytes(size_t flen, size_t nlen) {
  return (sizeof(struct ntr_pystr) + flen + 1 + nlen + 1 + 3) & ~(size_t)3;
}

static int same(const char *e, const char *file, size_t flen, const char *func, size_t nlen) {
  const struct ntr_pystr *h = (const struct ntr_pystr *)(const void *)e;
  const char *b = e + sizeof *h;
  return h->file_len == flen && h->func_len == nlen && memcmp(b, file, flen) == 0 &&
         memcmp(b + flen + 1, func, nlen) == 0;
}

uint32_t ntr_pystr_intern(struct ntr_ring *ring, const char *file, size_t flen, const char *func,
                          size_t nlen) {
  if (!ring->hdr || !ring->strs)
    return 0;
  if (flen > NTR_PYSTR_FILE_MAX) {
    file += flen - NTR_PYSTR_FILE_MAX; /* the tail names the file */
    flen = NTR_PYSTR_FILE_MAX;
  }
  if (nlen > NTR_PYSTR_FUNC_MAX)
    nlen = NTR_PYSTR_FUNC_MAX;
  XXH64_hash_t h = XXH64(file, flen, nlen);
  h = XXH64(func, nlen, h);
  uint32_t mine = 0; /* our entry (offset + 1), allocated at the first empty bucket */
  for (uint32_t probe = 0; probe < NTR_STR_INDEX; probe++) {
    uint32_t *bucket = &ring->str_index[(h + probe) & (NTR_STR_INDEX - 1)];
    /* Acquire pairs with the release CAS below: the entry a bucket names is
     * written before the bucket. */
    uint32_t v = __atomic_load_n(bucket, __ATOMIC_ACQUIRE);
    if (v == 0) {
      if (!mine) {
        size_t need = entry_bytes(flen, nlen);
        /* Relaxed: the range only has to be unique; the entry is published
         * through the bucket (release). */
        uint32_t off = __atomic_fetch_add(&ring->hdr->str_used, (uint32_t)need, __ATOMIC_RELAXED);
        if ((uint64_t)off + need > NTR_STR_BYTES) {
          __atomic_store_n(&ring->hdr->str_used, NTR_STR_BYTES, __ATOMIC_RELAXED);
          return 0;
        }
        char *e = ring->strs + off;
        struct ntr_pystr hd = {.file_len = (uint16_t)flen, .func_len = (uint16_t)nlen};
        memcpy(e, &hd, sizeof hd);
        memcpy(e + sizeof hd, file, flen);
        e[sizeof hd + flen] = '\0';
        memcpy(e + sizeof hd + flen + 1, func, nlen);
        e[sizeof hd + flen + 1 + nlen] = '\0';
        mine = off + 1;
      }
      uint32_t expected = 0;
      if (__atomic_compare_exchange_n(bucket, &expected, mine, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        return mine;
      v = expected; /* another thread took this bucket first: compare with its entry */
    }
    if (same(ring->strs + v - 1, file, flen, func, nlen))
      return v; /* an entry we allocated too stays as an unused duplicate */
  }
  return mine;
}
