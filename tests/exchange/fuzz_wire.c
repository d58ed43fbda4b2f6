/* fuzz_wire.c -- libFuzzer target for the exchange wire parser: the frame
 * parser with and without authentication, then the message decoder and
 * every entry it reports (fingerprints, the entries of a JOB answer).  Built with -Dfuzz=true under clang. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "interpose/exchange/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct ntx_session sess;
  memset(&sess, 0x5a, sizeof sess);
  /* the first byte picks the expected seq, so replay logic is reached too */
  uint64_t seq = size ? data[0] % 4 : 0;
  size_t off = 0;
  while (off < size) {
    struct ntx_frame f;
    int r = ntx_frame_parse(data + off, size - off, &sess, NTX_DIR_TO_COORD, seq, &f);
    if (r <= 0) /* the tag cannot be forged by a fuzzer: also decode unauthenticated */
      r = ntx_frame_parse(data + off, size - off, NULL, NTX_DIR_TO_COORD, seq, &f);
    if (r <= 0)
      break;
    struct ntx_msg m;
    int ok = ntx_msg_decode(&f, &m) == 0;
    if (ok && (m.type == NTX_MSG_FP || m.type == NTX_MSG_STRICT)) {
      for (uint32_t i = 0; i < m.u.fp.n; i++) {
        struct ntx_fp fp;
        ntx_fp_get(m.u.fp.entries, i, &fp);
      }
    }
    if (ok && m.type == NTX_MSG_JOB) { /* the status query's answer: every entry (v5) */
      struct ntx_job_ent e;
      uint32_t at = 0, k = 0;
      while (ntx_job_next(m.u.job.ents, m.u.job.len, &at, &e))
        k++;
      if (k != m.u.job.n) /* the decoder promised exactly n well-formed entries */
        __builtin_trap();
    }
    off += (size_t)r;
    seq++;
  }
  return 0;
}
