/* fuzz_fr.c -- libFuzzer target for the PyTorch Flight Recorder reader
 * (tools/fr/fr.h): the pickle decoder and the field checks analyze runs on
 * every FR dump it is given.  Input: one mode byte (bit 0: 0 the pickle
 * form, 1 the JSON form), then the file's bytes.  Memory-based: no file.
 *
 * Contract checked beyond "no crash, leak or UB": a refusal has a reason;
 * an accepted dump's counts are within their bounds and its strings are
 * terminated; the decoder never takes more than its memory limit (a small
 * limit here, so the limit's path is exercised too).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tools/fr/fr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  enum ntf_form form = (data[0] & 1) ? NTF_JSON : NTF_PICKLE;
  uint64_t limit = (data[0] & 2) ? 4096 : 64u << 20;
  struct ntf_dump d;
  memset(&d, 0, sizeof d);
  char err[256] = "";
  int rc = ntf_dump_parse(data + 1, size - 1, form, limit, &d, err, sizeof err);
  if (rc != 0 && !err[0])
    abort();
  if (rc == 0) {
    if (d.ne < 0 || d.npgs < 0 || strnlen(d.version, sizeof d.version) >= sizeof d.version)
      abort();
    for (int i = 0; i < d.ne; i++)
      if (strnlen(d.e[i].op, sizeof d.e[i].op) >= sizeof d.e[i].op || d.e[i].nframes > NTF_FRAMES)
        abort();
  }
  ntf_dump_free(&d);
  (void)ntf_sniff(data + 1, size - 1);
  return 0;
}
