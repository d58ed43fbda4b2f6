/* reader_py.c -- the Python parts of an image: the string table and the
 * PYTHREADS section of a dump (recorder/format.h), taken from hostile
 * bytes, and the resolution of a frame word against the table.
 *
 * Thread-safety: per image, like the rest of the reader.  Not signal-safe.
 */
#include <stdlib.h>
#include <string.h>
#include "tools/reader_int.h"

int ntt_take_python(struct ntt_image *img, uint32_t type, const void *body, size_t len) {
  if (type == NTR_SEC_STRINGS) {
    if (img->strs || len > NTR_STR_BYTES + 8)
      return -1;
    if (len > NTR_STR_BYTES)
      len = NTR_STR_BYTES;
    if (len && !(img->strs = malloc(len)))
      return -1;
    if (len)
      memcpy(img->strs, body, len);
    img->str_len = (uint32_t)len;
    return 0;
  }
  if (type == NTR_SEC_PYTHREADS) {
    if (img->pythreads || len % sizeof(struct ntr_pythread) ||
        len / sizeof(struct ntr_pythread) > NTR_PYTHREAD_MAX)
      return -1;
    uint32_t n = (uint32_t)(len / sizeof(struct ntr_pythread));
    if (n && !(img->pythreads = malloc(len)))
      return -1;
    if (n)
      memcpy(img->pythreads, body, len);
    for (uint32_t i = 0; i < n; i++) {
      struct ntr_pythread *t = &img->pythreads[i];
      if (t->depth > NTR_PYTHREAD_DEPTH)
        t->depth = NTR_PYTHREAD_DEPTH;
      t->name[sizeof t->name - 1] = '\0';
    }
    img->npythreads = n;
    return 0;
  }
  return 0;
}

size_t ntt_ring_strings_span(const struct ntr_ring_header *h, size_t len) {
  uint64_t used = h->str_used < h->str_size ? h->str_used : h->str_size;
  if (used > NTR_STR_BYTES)
    used = NTR_STR_BYTES;
  if (!used || !h->str_offset || h->str_offset > len || used > len - h->str_offset)
    return 0; /* no table, or not inside the file: frames then resolve to "?" */
  return (size_t)used;
}

int ntt_ring_strings(struct ntt_image *img, const unsigned char *table, size_t used) {
  if (!used)
    return 0;
  if (!(img->strs = malloc(used)))
    return -1;
  memcpy(img->strs, table, used);
  img->str_len = (uint32_t)used;
  return 0;
}

void ntt_python_free(struct ntt_image *img) {
  free(img->strs);
  free(img->pythreads);
  img->strs = NULL;
  img->pythreads = NULL;
  img->str_len = img->npythreads = 0;
}

int ntt_image_pyframe(const struct ntt_image *img, uint64_t word, const char **file,
                      const char **func, uint32_t *line) {
  *file = *func = "?";
  *line = ntr_pyframe_line(word);
  uint32_t off1 = ntr_pyframe_str(word);
  if (!off1 || !img->strs)
    return -1;
  size_t off = off1 - 1, n = img->str_len;
  struct ntr_pystr hd;
  if (off % 4 || off > n || n - off < sizeof hd)
    return -1;
  memcpy(&hd, img->strs + off, sizeof hd);
  size_t need = sizeof hd + (size_t)hd.file_len + 1 + hd.func_len + 1;
  if (hd.file_len > NTR_PYSTR_FILE_MAX || hd.func_len > NTR_PYSTR_FUNC_MAX || need > n - off)
    return -1;
  const char *f = img->strs + off + sizeof hd;
  if (f[hd.file_len] != '\0' || f[hd.file_len + 1 + hd.func_len] != '\0' ||
      memchr(f, '\0', hd.file_len) || memchr(f + hd.file_len + 1, '\0', hd.func_len))
    return -1;
  *file = f;
  *func = f + hd.file_len + 1;
  return 0;
}
