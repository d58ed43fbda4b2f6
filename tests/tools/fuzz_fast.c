/* fuzz_fast.c -- libFuzzer target for ntt_fast_load (tools/reader_fast.c),
 * the streaming pass through a valid dump that analyze takes when no load
 * buffer is lent.  Input: tests/tools/fuzz_dump.h (mode byte, dump file;
 * sealed seeds reach the sections past the checksum).  The target calls it
 * only under the checks ntt_load_dump makes first (fz_fast_ready), so every
 * input is one the real caller could hand over.  Memory-based: no file.
 *
 * Contract checked beyond "no crash, leak or UB": an accepted dump's counts
 * cover allocated sections, its trigger reason is terminated.
 */
#include "tests/tools/fuzz_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz_input in;
  if (fz_dump_of(data, size, &in))
    return 0;
  if (fz_fast_ready(&in) == 0) {
    struct ntt_image img;
    memset(&img, 0, sizeof img);
    if (ntt_fast_load(&in.pre, in.src, in.srclen, &img) == 0) {
      fz_check_sections(&img);
    }
    ntt_image_free(&img);
  }
  free(in.buf);
  return 0;
}
