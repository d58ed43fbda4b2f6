/* fuzz_dump.h -- the input of the dump decoder fuzz targets (fuzz_fast,
 * fuzz_shot, fuzz_peek, fuzz_dump): one mode byte, then a dump file.
 *
 * Mode byte: bit 0 salvage, bit 1 "seal", bit 2 "stored" (with seal), bit 3
 * for the target's own use.  Sealed, the file's payload is taken as stored
 * bytes (run-fuzz.sh's raw seeds) and the target rewrites the dump around
 * them: compressed with zstd (or left stored with bit 2), payload_size,
 * compressed_size and the XXH64 checksum recomputed.  A mutation of a
 * sealed input thus reaches the section walk behind the checksum and the
 * zstd frame instead of being refused by them; an unsealed input tests
 * those checks themselves.
 *
 * Thread-safety: libFuzzer calls a target from one thread; the only state
 * kept is fz_kept_loadbuf's buffer.  Not signal-safe (allocates).
 */
#ifndef NTT_FUZZ_DUMP_H
#define NTT_FUZZ_DUMP_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include "recorder/util.h"
#include "tools/reader_int.h"

#define FZ_SALVAGE 1u
#define FZ_SEAL 2u
#define FZ_STORED 4u
#define FZ_OWN 8u

/* One input: its mode byte and the dump it stands for (fz_dump_of), and
 * where that dump's compressed payload lies (fz_fast_ready). */
struct fz_input {
  unsigned mode;
  unsigned char *buf; /* the dump, malloc'd: the target frees it */
  size_t len;
  struct ntr_dump_preamble pre;
  const unsigned char *src; /* the payload, inside buf */
  size_t srclen;
};

/* The dump an input stands for, into in (buf malloc'd, len bytes).
 * @return 0, or -1: nothing to test (too short, out of memory). */
static inline int fz_dump_of(const uint8_t *data, size_t size, struct fz_input *in) {
  if (size < 1)
    return -1;
  in->mode = data[0];
  data++;
  size--;
  if (!(in->mode & FZ_SEAL) || size < sizeof(struct ntr_dump_preamble)) {
    in->buf = malloc(size ? size : 1);
    if (!in->buf)
      return -1;
    memcpy(in->buf, data, size);
    in->len = size;
    return 0;
  }
  struct ntr_dump_preamble pre;
  memcpy(&pre, data, sizeof pre);
  const uint8_t *pl = data + sizeof pre;
  size_t plen = size - sizeof pre;
  size_t cap = (in->mode & FZ_STORED) ? plen : ZSTD_compressBound(plen);
  in->buf = malloc(sizeof pre + (cap ? cap : 1));
  if (!in->buf)
    return -1;
  size_t clen = plen;
  if (in->mode & FZ_STORED) {
    memcpy(in->buf + sizeof pre, pl, plen);
    pre.flags |= 1u;
  } else {
    clen = ZSTD_compress(in->buf + sizeof pre, cap, pl, plen, 1);
    if (ZSTD_isError(clen)) {
      free(in->buf);
      return -1;
    }
    pre.flags &= ~1u;
  }
  pre.preamble_size = sizeof pre;
  pre.payload_size = plen;
  pre.compressed_size = clen;
  pre.checksum = XXH64(pl, plen, 0);
  memcpy(in->buf, &pre, sizeof pre);
  in->len = sizeof pre + clen;
  return 0;
}

/* Whether ntt_load_dump, strict, would hand in's dump to its fast paths
 * (ntt_shot_load, ntt_fast_load): the checks it makes before them, so that
 * those targets call the fast paths exactly under their callers'
 * preconditions.  @return 0 with in->pre, src and srclen set, or -1. */
static inline int fz_fast_ready(struct fz_input *in) {
  if (in->len < sizeof in->pre)
    return -1;
  memcpy(&in->pre, in->buf, sizeof in->pre);
  if (in->pre.preamble_size != sizeof in->pre || in->pre.compressed_size != in->len - sizeof in->pre ||
      (in->pre.flags & 1u))
    return -1;
  in->src = in->buf + sizeof in->pre;
  in->srclen = in->len - sizeof in->pre;
  if (in->pre.payload_size > NTT_MAX_PAYLOAD || in->pre.payload_size > (uint64_t)in->srclen * 32768ull)
    return -1;
  struct ntr_ring_header gh;
  char why[256];
  if (ntt_peek_first_header(in->buf, in->len, &gh, why, sizeof why) ||
      in->pre.payload_size > ntt_dump_max_payload(&gh))
    return -1;
  unsigned long long fcs = ZSTD_getFrameContentSize(in->src, in->srclen);
  if (fcs == ZSTD_CONTENTSIZE_ERROR || (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != in->pre.payload_size))
    return -1;
  return 0;
}

/* What every accepted image must hold (abort otherwise): counts within the
 * sections they came from, the trigger's reason terminated. */
static inline void fz_check_sections(const struct ntt_image *img) {
  if (img->has_trigger && strnlen(img->trigger.reason, sizeof img->trigger.reason) >= sizeof img->trigger.reason)
    abort();
  if ((img->nrecs && !img->recs) || (img->ncomms && !img->comms) || (img->nstacks && !img->stacks))
    abort();
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < img->nrecs; i++)
    sum += img->recs[i].commit;
  for (uint32_t i = 0; i < img->ncomms; i++)
    sum += img->comms[i].comm_id;
  for (uint32_t i = 0; i < img->nstacks; i++)
    sum += img->stacks[i].depth;
  (void)sum;
}

/* The path of a memfd holding buf, for the path-based entry points.
 * @return the fd (the caller closes it), or -1. */
static inline int fz_memfd(const unsigned char *buf, size_t len, char *path, size_t pathlen) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  if (ntr_write_all(fd, buf, len) != 0) {
    close(fd);
    return -1;
  }
  snprintf(path, pathlen, "/proc/self/fd/%d", fd);
  return fd;
}

/* The load buffer a target keeps across inputs, as analyze keeps one
 * across files (so a shorter payload after a longer one is decoded in
 * stale memory); released at exit, so a leak check sees none. */
static inline struct ntt_loadbuf *fz_kept_loadbuf(void);
static inline void fz_kept_loadbuf_release(void) { ntt_loadbuf_free(fz_kept_loadbuf()); }
static inline struct ntt_loadbuf *fz_kept_loadbuf(void) {
  static struct ntt_loadbuf lb;
  static int registered;
  if (!registered++)
    atexit(fz_kept_loadbuf_release);
  return &lb;
}
#endif
