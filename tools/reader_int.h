/* reader_int.h -- what reader.c (ring files, entry points) and reader_dump.c
 * (dumps) share.  Same contract as recorder/reader.h: one image per thread at
 * a time, allocates, not signal-safe.
 */
#ifndef NTT_READER_INT_H
#define NTT_READER_INT_H
#include <stdarg.h>
#include "tools/reader.h"

/* Sanity bounds on header fields: far above what the recorder writes, low
 * enough that arithmetic on them cannot overflow 64 bits. */
#define NTT_MAX_SLOTS (1u << 28)
#define NTT_MAX_STACKS (1u << 20)
/* Dumps up to this size are read into memory rather than mapped. */
#define NTT_READ_MAX (1ull << 30)

/* err = "<name>: <fmt>"; @return -1. */
int ntt_fail(char *err, size_t errlen, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Terminate every string field of a copied header and clamp its counts, so
 * consumers may printf("%s") them and index bt_sym/env without checks.
 * @return 0, or -1 with a reason when strict (not salvaging) and a count was
 * out of range. */
int ntt_header_sanitize(struct ntr_ring_header *h, int salvage, char *why, size_t whylen);

/* Sort records by position, drop duplicates (keeping a completed copy over a
 * pending one) and records without a position.  @return records kept. */
uint64_t ntt_records_normalize(struct ntr_record *recs, uint64_t n);

/* Drop free comm slots, clamp stack depths. */
void ntt_image_tidy(struct ntr_image *img);

/* reader_py.c.  A STRINGS or PYTHREADS section of a dump (other types: 0,
 * nothing taken); the string table of a ring file in buf.  @return 0, or
 * -1 (a duplicate, a bad size, out of memory). */
int ntt_take_python(struct ntr_image *img, uint32_t type, const void *body, size_t len);
int ntt_ring_strings(struct ntr_image *img, const unsigned char *buf, size_t len);
void ntt_python_free(struct ntr_image *img);

/* reader_fast.c.  A valid dump (preamble already checked, strict, not raw)
 * decompressed in one call into lb (records borrowed in place), or in one
 * streaming pass.  @return 0, or -1 having taken nothing: img's comms and
 * stacks may be allocated (the caller frees them), img->recs is not lent. */
int ntt_shot_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                  struct ntr_image *img, struct ntr_loadbuf *lb);
int ntt_fast_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                  struct ntr_image *img);

/* The HEADER section of a dump, decompressing no further than it.
 * @return 0, or -1 with why. */
int ntt_peek_dump(const unsigned char *buf, size_t len, struct ntr_ring_header *hdr, char *why, size_t whylen);

/* lb: NULL, or where a valid dump's payload may be decompressed whole and
 * kept (tools/reader.h, ntr_image_load_buf): then img->recs points into
 * lb->p and *borrowed is set to 1. */
int ntt_load_dump(const unsigned char *buf, size_t len, const char *name, int salvage,
                  struct ntr_image *img, struct ntr_loadbuf *lb, int *borrowed, char *err, size_t errlen);
#endif
