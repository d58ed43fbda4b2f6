/* fuzz_shot.c -- libFuzzer target for ntt_shot_load (tools/reader_fast.c),
 * the one-call decompression of a valid dump into a caller's load buffer,
 * records borrowed in place: the path analyze takes for every dump.  The
 * load buffer is kept across inputs, as analyze keeps it across files, so
 * a shorter payload after a longer one is decoded in stale memory.  Input:
 * tests/tools/fuzz_dump.h; called only under ntt_load_dump's checks
 * (fz_fast_ready).  Memory-based: no file.
 *
 * Contract checked beyond "no crash, leak or UB": borrowed records lie
 * inside the load buffer; a refusal lends nothing.
 */
#include "tests/tools/fuzz_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct ntt_loadbuf *lb = fz_kept_loadbuf();
  struct fz_input in;
  if (fz_dump_of(data, size, &in))
    return 0;
  if (fz_fast_ready(&in) == 0) {
    if (in.mode & FZ_OWN)
      ntt_loadbuf_free(lb); /* a fresh buffer: the first load of a run */
    struct ntt_image img;
    memset(&img, 0, sizeof img);
    if (ntt_shot_load(&in.pre, in.src, in.srclen, &img, lb) == 0) {
      const unsigned char *r = (const unsigned char *)img.recs;
      if (img.nrecs && (r < lb->p || r + img.nrecs * sizeof *img.recs > lb->p + lb->cap))
        abort();
      fz_check_sections(&img);
    } else if (img.recs || img.nrecs) {
      abort();
    }
    img.recs = NULL; /* borrowed from *lb */
    ntt_image_free(&img);
  }
  free(in.buf);
  return 0;
}
