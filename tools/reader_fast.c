/* reader_fast.c -- the quick ways through a valid dump, and its identity
 * alone.  reader_dump.c calls these first and, on any deviation at all,
 * falls back to its whole-payload path, which is the one that says what is
 * wrong; so nothing here reports an error, it only declines.
 *
 * Thread-safety and signal-safety: see tools/reader.h;
 * no state is shared between calls (a load buffer belongs to its caller).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>
#include "tools/reader_int.h"

/* ------------------------------------------------------------ fast path -- */

/* A valid dump, read in one pass: each section's bytes are decompressed
 * straight into where they end up (the records into img->recs), and hashed
 * while they are still in cache; no payload-sized buffer, no copy of it.
 * Any deviation at all -- a damaged frame, a size that does not add up, a
 * duplicate or short section, a checksum mismatch -- returns -1 and the
 * caller reruns the whole-payload path, which names the problem exactly as
 * it always has.  Allocations follow the section lengths, each bounded by
 * what the preamble's payload size (already checked against the input) has
 * left. */
struct fstream {
  ZSTD_DCtx *d;
  ZSTD_inBuffer in;
  XXH64_state_t *h;
  unsigned char win[1u << 17];
  size_t have, pos;
  uint64_t total;               /* payload bytes delivered */
  int ended;                    /* the frame ended cleanly */
};

/* Exactly n bytes into dst (NULL: skip).  @return 0, or -1 short. */
static int fs_read(struct fstream *s, void *dst, size_t n) {
  unsigned char *out = dst;
  while (n) {
    if (s->pos < s->have) {
      size_t k = s->have - s->pos < n ? s->have - s->pos : n;
      if (out) {
        memcpy(out, s->win + s->pos, k);
        out += k;
      }
      s->pos += k;
      n -= k;
      continue;
    }
    if (s->ended)
      return -1;
    /* Big reads go straight to the destination; small ones through win. */
    int direct = out && n >= sizeof s->win;
    ZSTD_outBuffer ob = {direct ? (void *)out : (void *)s->win, direct ? n : sizeof s->win, 0};
    size_t ip = s->in.pos;
    size_t r = ZSTD_decompressStream(s->d, &ob, &s->in);
    if (ZSTD_isError(r))
      return -1;
    if (r == 0)
      s->ended = 1;
    else if (ob.pos == 0 && s->in.pos == ip)
      return -1; /* frame cut short */
    XXH64_update(s->h, ob.dst, ob.pos);
    s->total += ob.pos;
    if (direct) {
      out += ob.pos;
      n -= ob.pos;
    } else {
      s->have = ob.pos;
      s->pos = 0;
    }
  }
  return 0;
}

static int fast_sections(struct fstream *s, const struct ntr_dump_preamble *pre, struct ntt_image *img) {
  int have[8] = {0};
  for (uint32_t k = 0; k < pre->section_count; k++) {
    struct ntr_section sec;
    if (fs_read(s, &sec, sizeof sec) || s->total > pre->payload_size)
      return -1;
    uint64_t left = pre->payload_size - s->total + (s->pos < s->have ? s->have - s->pos : 0);
    if (sec.length > left)
      return -1;
    size_t n = (size_t)sec.length;
    if (sec.type == NTR_SEC_STRINGS || sec.type == NTR_SEC_PYTHREADS) {
      void *tmp = n ? malloc(n) : NULL;
      int bad = (n && !tmp) || fs_read(s, tmp, n) || ntt_take_python(img, sec.type, tmp, n);
      free(tmp);
      if (bad)
        return -1;
      continue;
    }
    if (sec.type < 1 || sec.type > 5) {
      if (fs_read(s, NULL, n))
        return -1;
      continue;
    }
    if (have[sec.type]++)
      return -1;
    switch (sec.type) {
    case NTR_SEC_HEADER:
      if (n != sizeof img->hdr || fs_read(s, &img->hdr, n))
        return -1;
      break;
    case NTR_SEC_TRIGGER:
      if (n != sizeof img->trigger || fs_read(s, &img->trigger, n))
        return -1;
      img->trigger.reason[sizeof img->trigger.reason - 1] = '\0';
      img->has_trigger = 1;
      break;
    case NTR_SEC_COMMS:
      if (n % sizeof(struct ntr_comm_state) || n / sizeof(struct ntr_comm_state) > 64ull * NTR_COMM_MAX)
        return -1;
      if (n && (!(img->comms = malloc(n)) || fs_read(s, img->comms, n)))
        return -1;
      img->ncomms = (uint32_t)(n / sizeof(struct ntr_comm_state));
      break;
    case NTR_SEC_STACKS:
      if (n % sizeof(struct ntr_stack) || n / sizeof(struct ntr_stack) > NTT_MAX_STACKS)
        return -1;
      if (n && (!(img->stacks = malloc(n)) || fs_read(s, img->stacks, n)))
        return -1;
      img->nstacks = (uint32_t)(n / sizeof(struct ntr_stack));
      break;
    case NTR_SEC_RECORDS:
      if (n % sizeof(struct ntr_record))
        return -1;
      if (n && (!(img->recs = malloc(n)) || fs_read(s, img->recs, n)))
        return -1;
      img->nrecs = n / sizeof(struct ntr_record);
      break;
    }
  }
  /* Nothing may follow the last section, and the frame must end there. */
  if (!have[NTR_SEC_HEADER] || s->pos < s->have)
    return -1;
  while (!s->ended) {
    unsigned char extra;
    if (fs_read(s, &extra, 1) == 0)
      return -1;
    if (!s->ended)
      return -1;
  }
  return s->in.pos == s->in.size && s->total == pre->payload_size &&
                 XXH64_digest(s->h) == pre->checksum
             ? 0
             : -1;
}

int ntt_fast_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                     struct ntt_image *img) {
  struct fstream *s = malloc(sizeof *s);
  if (!s)
    return -1;
  memset(s, 0, offsetof(struct fstream, win));
  s->have = s->pos = 0;
  s->total = 0;
  s->ended = 0;
  s->d = ZSTD_createDCtx();
  s->h = XXH64_createState();
  s->in = (ZSTD_inBuffer){src, srclen, 0};
  int rc = -1;
  if (s->d && s->h && XXH64_reset(s->h, 0) == XXH_OK)
    rc = fast_sections(s, pre, img);
  ZSTD_freeDCtx(s->d);
  XXH64_freeState(s->h);
  free(s);
  return rc;
}

/* The payload size up to which a dump is decompressed whole into a
 * caller's buffer (a default ring's dump is 8.4 MB). */
#define NTT_SHOT_MAX (256ull << 20)

/* A valid dump decompressed in one call into lb->p (no window to copy out
 * of, memory already mapped from the caller's previous file), hashed, and
 * its sections taken in place: the records are not copied at all.  Any
 * deviation returns -1 with nothing borrowed, and the caller tries the next
 * path. */
int ntt_shot_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                     struct ntt_image *img, struct ntt_loadbuf *lb) {
  size_t n = (size_t)pre->payload_size;
  if (pre->payload_size > NTT_SHOT_MAX || n < sizeof(struct ntr_section))
    return -1;
  if (n > lb->cap) {
    unsigned char *p = realloc(lb->p, n);
    if (!p)
      return -1;
    lb->p = p;
    lb->cap = n;
  }
  size_t got = ZSTD_decompress(lb->p, n, src, srclen);
  if (ZSTD_isError(got) || got != n || XXH64(lb->p, n, 0) != pre->checksum)
    return -1;
  int have[6] = {0};
  size_t off = 0;
  for (uint32_t k = 0; k < pre->section_count; k++) {
    struct ntr_section sec;
    if (n - off < sizeof sec)
      goto bad;
    memcpy(&sec, lb->p + off, sizeof sec);
    off += sizeof sec;
    if (sec.length > n - off)
      goto bad;
    const unsigned char *body = lb->p + off;
    size_t len = (size_t)sec.length;
    off += len;
    if (sec.type == NTR_SEC_STRINGS || sec.type == NTR_SEC_PYTHREADS) {
      if (ntt_take_python(img, sec.type, body, len))
        goto bad;
      continue;
    }
    if (sec.type < 1 || sec.type > 5)
      continue;
    if (have[sec.type]++)
      goto bad;
    switch (sec.type) {
    case NTR_SEC_HEADER:
      if (len != sizeof img->hdr)
        goto bad;
      memcpy(&img->hdr, body, len);
      break;
    case NTR_SEC_TRIGGER:
      if (len != sizeof img->trigger)
        goto bad;
      memcpy(&img->trigger, body, len);
      img->trigger.reason[sizeof img->trigger.reason - 1] = '\0';
      img->has_trigger = 1;
      break;
    case NTR_SEC_COMMS:
      if (len % sizeof(struct ntr_comm_state) || len / sizeof(struct ntr_comm_state) > 64ull * NTR_COMM_MAX)
        goto bad;
      if (len && !(img->comms = malloc(len)))
        goto bad;
      if (len)
        memcpy(img->comms, body, len);
      img->ncomms = (uint32_t)(len / sizeof(struct ntr_comm_state));
      break;
    case NTR_SEC_STACKS:
      if (len % sizeof(struct ntr_stack) || len / sizeof(struct ntr_stack) > NTT_MAX_STACKS)
        goto bad;
      if (len && !(img->stacks = malloc(len)))
        goto bad;
      if (len)
        memcpy(img->stacks, body, len);
      img->nstacks = (uint32_t)(len / sizeof(struct ntr_stack));
      break;
    case NTR_SEC_RECORDS:
      /* In place: 8-aligned (every section before it is a multiple of 8
       * long) -- checked rather than assumed. */
      if (len % sizeof(struct ntr_record) || ((uintptr_t)body & 7))
        goto bad;
      img->recs = len ? (struct ntr_record *)(void *)body : NULL;
      img->nrecs = len / sizeof(struct ntr_record);
      break;
    }
  }
  if (!have[NTR_SEC_HEADER] || off != n)
    goto bad;
  return 0;
bad:
  img->recs = NULL; /* lent memory: the caller's cleanup must not free it */
  img->nrecs = 0;
  return -1;
}

/* ----------------------------------------------------------------- peek -- */

/* A forward-only reader of the payload: stored bytes, or a zstd frame
 * decompressed a block at a time into a small window. */
struct pstream {
  const unsigned char *src;
  size_t srclen;
  int raw;
  size_t rpos;              /* raw: bytes consumed */
  ZSTD_DCtx *d;
  ZSTD_inBuffer in;
  unsigned char win[1u << 16];
  size_t have, pos;
  const char *zerr;         /* why the frame stopped early, NULL: it ended */
};

/* Up to n bytes into dst (NULL: skip them).  @return bytes delivered. */
static size_t ps_read(struct pstream *s, void *dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    if (s->raw) {
      size_t k = s->srclen - s->rpos < n - got ? s->srclen - s->rpos : n - got;
      if (!k)
        break;
      if (dst)
        memcpy((unsigned char *)dst + got, s->src + s->rpos, k);
      s->rpos += k;
      got += k;
      continue;
    }
    if (s->pos == s->have) {
      ZSTD_outBuffer ob = {s->win, sizeof s->win, 0};
      size_t ip = s->in.pos;
      size_t r = ZSTD_decompressStream(s->d, &ob, &s->in);
      if (ZSTD_isError(r))
        s->zerr = ZSTD_getErrorName(r);
      else if (ob.pos == 0 && r != 0 && s->in.pos == ip)
        s->zerr = "frame cut short";
      if (ZSTD_isError(r) || (ob.pos == 0 && (r == 0 || s->in.pos == ip)))
        break; /* damage, or the end of the frame */
      s->have = ob.pos;
      s->pos = 0;
      continue;
    }
    size_t k = s->have - s->pos < n - got ? s->have - s->pos : n - got;
    if (dst)
      memcpy((unsigned char *)dst + got, s->win + s->pos, k);
    s->pos += k;
    got += k;
  }
  return got;
}

static int peek(const unsigned char *buf, size_t len, int first, struct ntr_ring_header *hdr, char *why,
                size_t whylen);
int ntt_peek_dump(const unsigned char *buf, size_t len, struct ntr_ring_header *hdr, char *why, size_t whylen) {
  return peek(buf, len, 0, hdr, why, whylen);
}
int ntt_peek_first_header(const unsigned char *buf, size_t len, struct ntr_ring_header *hdr, char *why,
                          size_t whylen) {
  return peek(buf, len, 1, hdr, why, whylen);
}

static int peek(const unsigned char *buf, size_t len, int first, struct ntr_ring_header *hdr, char *why,
                size_t whylen) {
  struct ntr_dump_preamble pre;
  if (len < sizeof pre) {
    snprintf(why, whylen, "truncated: a dump preamble needs %zu bytes, file has %zu", sizeof pre, len);
    return -1;
  }
  memcpy(&pre, buf, sizeof pre);
  if (pre.preamble_size != sizeof pre) {
    snprintf(why, whylen, "preamble_size %u, expected %zu", pre.preamble_size, sizeof pre);
    return -1;
  }
  struct pstream *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  s->src = buf + sizeof pre;
  s->srclen = len - sizeof pre < pre.compressed_size ? len - sizeof pre : (size_t)pre.compressed_size;
  s->raw = pre.flags & 1u;
  int rc = -1;
  if (!s->raw) {
    s->d = ZSTD_createDCtx();
    s->in = (ZSTD_inBuffer){s->src, s->srclen, 0};
    if (!s->d) {
      snprintf(why, whylen, "out of memory");
      free(s);
      return -1;
    }
  }
  snprintf(why, whylen, first ? "damaged: the payload does not start with a HEADER section"
                              : "no HEADER section before the data ends or is damaged");
  for (;;) {
    struct ntr_section sec;
    if (ps_read(s, &sec, sizeof sec) != sizeof sec)
      break;
    if (first && sec.type != NTR_SEC_HEADER) {
      snprintf(why, whylen, "damaged: the payload starts with a section of type %u, not the HEADER", sec.type);
      break;
    }
    if (sec.type == NTR_SEC_HEADER) {
      if (first && sec.length != sizeof *hdr)
        snprintf(why, whylen, "damaged: a HEADER section of %llu bytes, expected %zu", (unsigned long long)sec.length,
                 sizeof *hdr);
      else if (sec.length >= sizeof *hdr && ps_read(s, hdr, sizeof *hdr) == sizeof *hdr) {
        ntt_header_sanitize(hdr, 1, why, whylen);
        rc = 0;
      }
      break;
    }
    /* Skip a section we do not need; stop at one longer than what is left. */
    uint64_t left = sec.length;
    while (left) {
      size_t k = left > (1u << 30) ? (1u << 30) : (size_t)left;
      size_t g = ps_read(s, NULL, k);
      left -= g;
      if (g < k)
        break;
    }
    if (left)
      break;
  }
  if (rc && first && s->zerr)
    snprintf(why, whylen, "corrupt zstd frame: %s", s->zerr);
  ZSTD_freeDCtx(s->d);
  free(s);
  return rc;
}
