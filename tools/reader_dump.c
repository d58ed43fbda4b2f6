/* reader_dump.c -- load a dump: validate the preamble, decompress the zstd
 * frame with every size bounded, verify the XXH64 checksum, walk sections.
 *
 * Thread-safety and signal-safety: see tools/reader.h (also for
 * the peek).  No state is shared between calls.
 * A valid dump is read by reader_fast.c (in one call into a caller's
 * buffer, or in one streaming pass); anything unusual goes through the
 * whole-payload path here, the only one that names problems.  With
 * salvage, a damaged frame is decompressed as a stream and whatever
 * complete sections (and complete records of a cut RECORDS section) came
 * out before the damage are kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>
#include "tools/reader_int.h"

/* zstd cannot expand more than this: a 128 KiB block costs at least 4
 * bytes (3-byte block header, 1 RLE byte).  Bounds allocations by input. */
#define NTT_ZSTD_MAX_RATIO 32768ull

static const char *sec_name(uint32_t type) {
  switch (type) {
  case NTR_SEC_HEADER: return "HEADER";
  case NTR_SEC_COMMS: return "COMMS";
  case NTR_SEC_STACKS: return "STACKS";
  case NTR_SEC_RECORDS: return "RECORDS";
  case NTR_SEC_TRIGGER: return "TRIGGER";
  default: return "unknown";
  }
}

/* Streaming decompression into a buffer that grows with the output, never
 * with a size field alone, up to cap bytes: a hostile preamble cannot make
 * us allocate what the frame does not really produce.  *complete: the frame
 * ended cleanly; otherwise *zerr says why, and the bytes produced before the
 * damage are returned (what --salvage walks).  @return the buffer or NULL
 * (out of memory). */
static unsigned char *inflate(const unsigned char *src, size_t srclen, size_t cap, size_t *outlen,
                              int *complete, const char **zerr) {
  *outlen = 0;
  *complete = 0;
  *zerr = NULL;
  ZSTD_DCtx *d = ZSTD_createDCtx();
  if (!d)
    return NULL;
  size_t size = cap < (1u << 20) ? cap : (1u << 20);
  unsigned char *buf = malloc(size ? size : 1);
  if (!buf) {
    ZSTD_freeDCtx(d);
    return NULL;
  }
  ZSTD_inBuffer in = {src, srclen, 0};
  ZSTD_outBuffer ob = {buf, size, 0};
  for (;;) {
    if (ob.pos == ob.size && size < cap) {
      size_t ns = size > cap / 2 ? cap : size * 2;
      unsigned char *nb = realloc(buf, ns);
      if (!nb) {
        free(buf);
        ZSTD_freeDCtx(d);
        return NULL;
      }
      buf = nb;
      size = ns;
      ob.dst = buf;
      ob.size = size;
    }
    size_t ip = in.pos, op = ob.pos;
    size_t r = ZSTD_decompressStream(d, &ob, &in);
    if (ZSTD_isError(r)) {
      *zerr = ZSTD_getErrorName(r);
      break;
    }
    if (r == 0) {
      *complete = in.pos == in.size;
      if (!*complete)
        *zerr = "data after the end of the frame";
      break;
    }
    if (in.pos == ip && ob.pos == op) {
      *zerr = ob.pos == ob.size ? "more data than the preamble says" : "frame cut short";
      break;
    }
  }
  ZSTD_freeDCtx(d);
  *outlen = ob.pos;
  return buf;
}

uint64_t ntt_dump_max_payload(const struct ntr_ring_header *h) {
  uint64_t slots = h->slot_count < NTT_MAX_SLOTS ? h->slot_count : NTT_MAX_SLOTS;
  uint64_t comms = h->comm_max < 64ull * NTR_COMM_MAX ? h->comm_max : 64ull * NTR_COMM_MAX;
  uint64_t stacks = h->stack_max < NTT_MAX_STACKS ? h->stack_max : NTT_MAX_STACKS;
  /* Records: what the main ring holds plus the comms' recent[] copies, and
   * never more than were ever written (head positions). */
  uint64_t recs = slots + comms * NTR_COMM_RECENT;
  if (h->head < recs)
    recs = h->head;
  return 5 * sizeof(struct ntr_section) + sizeof(struct ntr_ring_header) + comms * sizeof(struct ntr_comm_state) +
         stacks * sizeof(struct ntr_stack) + recs * sizeof(struct ntr_record) + sizeof(struct ntr_trigger) +
         (1u << 20);
}

struct walk {
  struct ntt_image *img;
  int have_header, have_comms, have_stacks, have_records;
  uint32_t sections;
};

/* @return 0, or -1 with why.  In salvage mode a damaged section is skipped
 * (a cut RECORDS section keeps its complete records). */
static int take_section(struct walk *w, uint32_t type, const unsigned char *p, uint64_t n, int cut,
                        int salvage, char *why, size_t whylen) {
  struct ntt_image *img = w->img;
  size_t unit = 0;
  int *seen = NULL;
  switch (type) {
  case NTR_SEC_HEADER: unit = sizeof(struct ntr_ring_header); seen = &w->have_header; break;
  case NTR_SEC_COMMS: unit = sizeof(struct ntr_comm_state); seen = &w->have_comms; break;
  case NTR_SEC_STACKS: unit = sizeof(struct ntr_stack); seen = &w->have_stacks; break;
  case NTR_SEC_RECORDS: unit = sizeof(struct ntr_record); seen = &w->have_records; break;
  case NTR_SEC_TRIGGER: unit = sizeof(struct ntr_trigger); seen = &img->has_trigger; break;
  case NTR_SEC_STRINGS:
  case NTR_SEC_PYTHREADS:
    if (ntt_take_python(img, type, p, (size_t)n) == 0 || salvage)
      return 0;
    snprintf(why, whylen, "%s section of %llu bytes is invalid", type == NTR_SEC_STRINGS ? "STRINGS" : "PYTHREADS",
             (unsigned long long)n);
    return -1;
  default: return 0; /* a later minor revision's section: skip it */
  }
  if (*seen) {
    snprintf(why, whylen, "duplicate %s section", sec_name(type));
    return -1;
  }
  int exact = type == NTR_SEC_HEADER || type == NTR_SEC_TRIGGER;
  if (cut || (exact ? n != unit : n % unit != 0)) {
    if (!salvage) {
      snprintf(why, whylen, "%s section of %llu bytes, expected %s %zu", sec_name(type), (unsigned long long)n,
               exact ? "exactly" : "a multiple of", unit);
      return -1;
    }
    img->salvaged = 1;
    if (exact && n < unit)
      return 0;
    n = exact ? unit : n - n % unit;
  }
  *seen = 1;
  uint64_t count = n / unit;
  switch (type) {
  case NTR_SEC_HEADER:
    memcpy(&img->hdr, p, sizeof img->hdr);
    break;
  case NTR_SEC_TRIGGER:
    memcpy(&img->trigger, p, sizeof img->trigger);
    img->trigger.reason[sizeof img->trigger.reason - 1] = '\0';
    break;
  case NTR_SEC_COMMS:
    if (count > 64ull * NTR_COMM_MAX) {
      snprintf(why, whylen, "COMMS section holds %llu communicators", (unsigned long long)count);
      return -1;
    }
    if (count && !(img->comms = malloc((size_t)n)))
      goto oom;
    if (count)
      memcpy(img->comms, p, (size_t)n);
    img->ncomms = (uint32_t)count;
    break;
  case NTR_SEC_STACKS:
    if (count > NTT_MAX_STACKS) {
      snprintf(why, whylen, "STACKS section holds %llu stacks", (unsigned long long)count);
      return -1;
    }
    if (count && !(img->stacks = malloc((size_t)n)))
      goto oom;
    if (count)
      memcpy(img->stacks, p, (size_t)n);
    img->nstacks = (uint32_t)count;
    break;
  case NTR_SEC_RECORDS:
    if (count && !(img->recs = malloc((size_t)n)))
      goto oom;
    if (count)
      memcpy(img->recs, p, (size_t)n);
    img->nrecs = count;
    break;
  }
  return 0;
oom:
  snprintf(why, whylen, "out of memory for a %s section of %llu bytes", sec_name(type), (unsigned long long)n);
  return -1;
}

static int walk_sections(struct ntt_image *img, const unsigned char *pl, size_t plen, uint32_t expect,
                         int salvage, int cut_payload, char *why, size_t whylen) {
  struct walk w = {.img = img};
  size_t off = 0;
  while (off < plen) {
    struct ntr_section s;
    if (plen - off < sizeof s) {
      if (!salvage) {
        snprintf(why, whylen, "%zu stray bytes after section %u", plen - off, w.sections);
        return -1;
      }
      img->salvaged = 1;
      break;
    }
    memcpy(&s, pl + off, sizeof s);
    off += sizeof s;
    w.sections++;
    int cut = s.length > plen - off;
    if (cut && !salvage) {
      snprintf(why, whylen, "section %u (%s) says %llu bytes, %zu remain", w.sections, sec_name(s.type),
               (unsigned long long)s.length, plen - off);
      return -1;
    }
    uint64_t n = cut ? plen - off : s.length;
    if (take_section(&w, s.type, pl + off, n, cut, salvage, why, whylen))
      return -1;
    off += (size_t)n;
  }
  if (!w.have_header) {
    snprintf(why, whylen, "%sno HEADER section", cut_payload ? "damaged beyond salvage: " : "");
    return -1;
  }
  if (w.sections != expect) {
    if (!salvage) {
      snprintf(why, whylen, "preamble says %u sections, payload has %u", expect, w.sections);
      return -1;
    }
    img->salvaged = 1;
  }
  return 0;
}

static int finish(struct ntt_image *img, const char *name, int salvage, char *err, size_t errlen);
int ntt_load_dump(const unsigned char *buf, size_t len, const char *name, int salvage,
                  struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed, char *err, size_t errlen) {
  struct ntr_dump_preamble pre;
  char why[256];
  if (len < sizeof pre)
    return ntt_fail(err, errlen, name, "truncated: a dump preamble needs %zu bytes, file has %zu", sizeof pre, len);
  memcpy(&pre, buf, sizeof pre);
  if (pre.preamble_size != sizeof pre)
    return ntt_fail(err, errlen, name, "preamble_size %u, expected %zu", pre.preamble_size, sizeof pre);
  size_t avail = len - sizeof pre;
  const unsigned char *src = buf + sizeof pre;
  size_t srclen = (size_t)pre.compressed_size;
  if (pre.compressed_size > avail) {
    if (!salvage)
      return ntt_fail(err, errlen, name, "truncated: preamble says %llu compressed bytes, file has %zu",
                      (unsigned long long)pre.compressed_size, avail);
    img->salvaged = 1;
    srclen = avail;
  } else if (pre.compressed_size < avail) {
    if (!salvage)
      return ntt_fail(err, errlen, name, "%zu unexpected bytes after the %llu-byte compressed payload",
                      avail - (size_t)pre.compressed_size, (unsigned long long)pre.compressed_size);
    img->salvaged = 1;
  }
  int raw = pre.flags & 1u;
  if (pre.payload_size > NTT_MAX_PAYLOAD)
    return ntt_fail(err, errlen, name, "payload of %llu bytes exceeds the 4 GiB limit",
                    (unsigned long long)pre.payload_size);
  /* What the bytes present can possibly hold: allocations follow the input,
   * never a size field alone. */
  uint64_t bound = raw ? (uint64_t)srclen : (uint64_t)srclen * NTT_ZSTD_MAX_RATIO;
  uint64_t want = pre.payload_size;
  if (want > bound) {
    if (!salvage)
      return ntt_fail(err, errlen, name, "preamble says %llu payload bytes, impossible from %zu %s bytes",
                      (unsigned long long)pre.payload_size, srclen, raw ? "stored" : "compressed");
    img->salvaged = 1;
    want = bound;
  }
  /* The HEADER section comes first (docs/dump-format.md): its geometry
   * bounds the payload before anything larger than one block is
   * decompressed or allocated. */
  struct ntr_ring_header gh;
  if (ntt_peek_first_header(buf, len, &gh, why, sizeof why))
    return ntt_fail(err, errlen, name, "%s", why);
  uint64_t gmax = ntt_dump_max_payload(&gh);
  if (pre.payload_size > gmax) {
    if (!salvage)
      return ntt_fail(err, errlen, name,
                      "preamble says %llu payload bytes, more than a dump of its ring (%u slots, %llu records "
                      "written, %u communicators, %u stacks) can hold: %llu bytes at most",
                      (unsigned long long)pre.payload_size, gh.slot_count, (unsigned long long)gh.head,
                      gh.comm_max, gh.stack_max, (unsigned long long)gmax);
    img->salvaged = 1;
    if (want > gmax)
      want = gmax;
  }
  if (!raw && !salvage) {
    unsigned long long fcs = ZSTD_getFrameContentSize(src, srclen);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
      return ntt_fail(err, errlen, name, "corrupt zstd frame: no valid frame header");
    if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != pre.payload_size)
      return ntt_fail(err, errlen, name, "zstd frame says %llu bytes, preamble says %llu", fcs,
                      (unsigned long long)pre.payload_size);
  }

  if (!raw && !salvage && lb && ntt_shot_load(&pre, src, srclen, img, lb) == 0) {
    *borrowed = 1;
    if (finish(img, name, salvage, err, errlen) == 0)
      return 0;
    *borrowed = 0; /* refused after all: lend nothing, the caller frees the image */
    img->recs = NULL;
    img->nrecs = 0;
    return -1;
  }
  if (!raw && !salvage) {
    free(img->comms);
    free(img->stacks);
    ntt_python_free(img);
    img->comms = NULL;
    img->stacks = NULL;
    img->ncomms = img->nstacks = 0;
    img->has_trigger = 0;
    memset(&img->hdr, 0, sizeof img->hdr);
    memset(&img->trigger, 0, sizeof img->trigger);
    if (ntt_fast_load(&pre, src, srclen, img) == 0)
      return finish(img, name, salvage, err, errlen);
    /* Anything unusual: the whole-payload path below says exactly what. */
    ntt_image_free(img);
    img->has_trigger = 0;
    memset(&img->hdr, 0, sizeof img->hdr);
    memset(&img->trigger, 0, sizeof img->trigger);
  }
  size_t plen = (size_t)want;
  int cut = want < pre.payload_size;
  unsigned char *pl;
  if (raw) {
    size_t n = srclen < plen ? srclen : plen;
    if (!(pl = malloc(n ? n : 1)))
      return ntt_fail(err, errlen, name, "out of memory for a %zu-byte payload", n);
    memcpy(pl, src, n);
    if (n < plen) {
      cut = 1;
      plen = n;
    }
  } else {
    size_t got;
    int complete;
    const char *zerr;
    if (!(pl = inflate(src, srclen, plen, &got, &complete, &zerr)))
      return ntt_fail(err, errlen, name, "out of memory decompressing %zu bytes", plen);
    if (!complete || got != plen) {
      if (!salvage) {
        free(pl);
        if (!complete)
          return ntt_fail(err, errlen, name, "corrupt zstd frame: %s", zerr);
        return ntt_fail(err, errlen, name, "zstd frame holds %zu bytes, preamble says %zu", got, plen);
      }
      img->salvaged = 1;
      cut = 1;
    }
    plen = got;
  }
  if (!cut) {
    uint64_t sum = XXH64(pl, plen, 0);
    if (sum != pre.checksum) {
      if (!salvage) {
        free(pl);
        return ntt_fail(err, errlen, name, "checksum mismatch: payload XXH64 %016llx, preamble says %016llx",
                        (unsigned long long)sum, (unsigned long long)pre.checksum);
      }
      img->salvaged = 1;
    }
  }
  int rc = walk_sections(img, pl, plen, pre.section_count, salvage, cut, why, sizeof why);
  free(pl);
  if (rc)
    return ntt_fail(err, errlen, name, "%s", why);
  return finish(img, name, salvage, err, errlen);
}

/* Checks and tidying after the sections are in. */
static int finish(struct ntt_image *img, const char *name, int salvage, char *err, size_t errlen) {
  char why[256];
  if (memcmp(img->hdr.magic, NTR_RING_MAGIC, 8) != 0 && !salvage)
    return ntt_fail(err, errlen, name, "HEADER section does not hold a ring header (bad magic)");
  if (ntt_header_sanitize(&img->hdr, salvage, why, sizeof why))
    return ntt_fail(err, errlen, name, "%s", why);
  if (img->hdr.comm_recent != NTR_COMM_RECENT && img->ncomms && !salvage)
    return ntt_fail(err, errlen, name, "comm_recent %u, this nccltrace reads %u", img->hdr.comm_recent,
                    NTR_COMM_RECENT);
  uint64_t before = img->nrecs;
  img->nrecs = ntt_records_normalize(img->recs, img->nrecs);
  img->torn += before - img->nrecs;
  if (img->has_trigger)
    img->lost = img->trigger.lost;
  else if (img->hdr.slot_count && img->hdr.head > img->hdr.slot_count)
    img->lost = img->hdr.head - img->hdr.slot_count;
  ntt_image_tidy(img);
  return 0;
}

