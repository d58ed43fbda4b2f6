/* tools/reader.h -- what the tools' reader offers beyond recorder/reader.h:
 * reading only a file's identity, for callers that must group many files
 * before loading any of them whole (`nccltrace analyze`).
 *
 * Thread-safety: independent calls may run on different threads (no shared
 * state).  Not signal-safe (allocates).
 */
#ifndef NTT_READER_H
#define NTT_READER_H
#include <stddef.h>
#include "recorder/reader.h"

/* Read the ring header of a ring file or dump (format detected by magic)
 * without reading its records: for a dump, only as much of the zstd frame
 * as it takes to reach the HEADER section.  As lenient as a --salvage load
 * (string fields terminated, counts clamped), so every file that loads at
 * all also peeks; the reverse need not hold.
 * @return 0, or -1 with a one-line reason in err. */
int ntr_image_peek(const char *path, struct ntr_ring_header *hdr, char *err, size_t errlen);
/* ntr_image_peek, and *need: the bytes a load of the file may allocate at
 * most (the file read into memory, a dump's payload as far as its header's
 * geometry allows, a ring's windows and records), so that a caller can
 * budget memory before loading.  Set (to the file size) even when the
 * header cannot be read. */
#include <stdint.h>
int ntr_image_probe(const char *path, struct ntr_ring_header *hdr, uint64_t *need, char *err, size_t errlen);

/* A buffer a caller keeps across loads (one per thread, per image it
 * holds at once) so that a dump is decompressed in one call straight into
 * memory that is already mapped.  Zero-initialize; ntr_loadbuf_free. */
struct ntr_loadbuf {
  unsigned char *p;
  size_t cap;
};
void ntr_loadbuf_free(struct ntr_loadbuf *lb);

/* Strict ntr_image_load that may decompress a valid dump into lb: then
 * *borrowed = 1 and img->recs points into lb->p -- valid until lb is used
 * again or freed; set img->recs = NULL before ntr_image_free.  Otherwise
 * (a ring, an unusual or damaged dump) exactly ntr_image_load's result,
 * *borrowed = 0.  @return 0, or -1 with a reason in err. */
int ntr_image_load_buf(const char *path, struct ntr_image *img, struct ntr_loadbuf *lb, int *borrowed, char *err,
                       size_t errlen);
#endif
