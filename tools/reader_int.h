/* reader_int.h -- what reader.c (ring files, entry points) and reader_dump.c
 * (dumps) share.  Same contract as tools/reader.h: one image per thread at
 * a time, allocates, not signal-safe.
 */
#ifndef NTT_READER_INT_H
#define NTT_READER_INT_H
#include <stdarg.h>
#include "tools/reader.h"

#include <sys/stat.h>

/* Sanity bounds on header fields: slots as many as NCCLTRACE_RING allows
 * (interpose/config.c), stacks far above what the recorder writes; low
 * enough that arithmetic on them cannot overflow 64 bits. */
#define NTT_MAX_SLOTS (1u << 24)
#define NTT_MAX_STACKS (1u << 20)
/* Refuse payloads above 4 GiB: the largest ring's dump holds about 2 GiB. */
#define NTT_MAX_PAYLOAD (4ull << 30)
/* A dump is read into memory whole: at most a stored (raw) 4 GiB payload. */
#define NTT_READ_MAX (NTT_MAX_PAYLOAD + (1ull << 20))
/* ntt_image_peek reads at most this much of a file to find its header:
 * a dump's HEADER section is the payload's first (docs/dump-format.md),
 * inside the frame's first block (128 KiB at most); reading on would
 * only cost memory outside analyze's budget. */
#define NTT_PEEK_MAX (1ull << 20)

/* Open an input for reading without blocking on a FIFO or device: anything
 * but a regular file is refused with a reason naming what it is.
 * @return the fd (blocking again), or -1 with "<path>: <reason>" in err. */
int ntt_open_input(const char *path, struct stat *st, char *err, size_t errlen);

/* The largest payload a dump of a ring with h's geometry (slot_count,
 * comm_max, stack_max) can hold: its five sections at their largest, plus
 * 1 MiB for sections of a later minor revision.  Fields out of the reader's
 * bounds count at those bounds. */
uint64_t ntt_dump_max_payload(const struct ntr_ring_header *h);

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
void ntt_image_tidy(struct ntt_image *img);

/* reader_py.c.  A STRINGS or PYTHREADS section of a dump (other types: 0,
 * nothing taken); the string table of a ring file: its used bytes that lie
 * inside a file of len bytes (0: none), then those bytes, read from
 * h->str_offset, taken into img.  @return 0, or -1 (a duplicate, a bad
 * size, out of memory). */
int ntt_take_python(struct ntt_image *img, uint32_t type, const void *body, size_t len);
size_t ntt_ring_strings_span(const struct ntr_ring_header *h, size_t len);
int ntt_ring_strings(struct ntt_image *img, const unsigned char *table, size_t used);
void ntt_python_free(struct ntt_image *img);

/* reader_fast.c.  A valid dump (preamble already checked, strict, not raw)
 * decompressed in one call into lb (records borrowed in place), or in one
 * streaming pass.  @return 0, or -1 having taken nothing: img's comms and
 * stacks may be allocated (the caller frees them), img->recs is not lent. */
int ntt_shot_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                  struct ntt_image *img, struct ntt_loadbuf *lb);
int ntt_fast_load(const struct ntr_dump_preamble *pre, const unsigned char *src, size_t srclen,
                  struct ntt_image *img);

/* The HEADER section of a dump, decompressing no further than it.
 * @return 0, or -1 with why. */
int ntt_peek_dump(const unsigned char *buf, size_t len, struct ntr_ring_header *hdr, char *why, size_t whylen);
/* The same, when the payload's first section is the HEADER (as the format
 * requires): one block decompressed at most.  @return 0, or -1 with why. */
int ntt_peek_first_header(const unsigned char *buf, size_t len, struct ntr_ring_header *hdr, char *why,
                          size_t whylen);

/* lb: NULL, or where a valid dump's payload may be decompressed whole and
 * kept (tools/reader.h, ntt_image_load_buf): then img->recs points into
 * lb->p and *borrowed is set to 1. */
int ntt_load_dump(const unsigned char *buf, size_t len, const char *name, int salvage,
                  struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed, char *err, size_t errlen);
#endif
