/* fuzz_peek.c -- libFuzzer target for ntt_peek_dump and
 * ntt_peek_first_header (tools/reader_fast.c): a dump's HEADER found by
 * decompressing no further than it, which analyze does for every input
 * before it budgets memory, and which bounds the payload before a load.
 * Input: tests/tools/fuzz_dump.h.  Memory-based: no file.
 *
 * Contract checked beyond "no crash, leak or UB": a refusal has a reason; a
 * peeked header is sanitized (host terminated, counts clamped); whatever
 * the first-section peek accepts, the any-section peek accepts too.
 */
#include "tests/tools/fuzz_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, const struct ntr_ring_header *h, const char *why) {
  if (rc != 0) {
    if (!why[0])
      abort();
    return;
  }
  if (strnlen(h->host, sizeof h->host) >= sizeof h->host || h->bt_depth > NTR_BT_DEPTH ||
      h->env_len > NTR_ENV_BYTES)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz_input in;
  if (fz_dump_of(data, size, &in))
    return 0;
  struct ntr_ring_header h1, h2;
  char why1[256] = "", why2[256] = "";
  int any = ntt_peek_dump(in.buf, in.len, &h1, why1, sizeof why1);
  check(any, &h1, why1);
  int first = ntt_peek_first_header(in.buf, in.len, &h2, why2, sizeof why2);
  check(first, &h2, why2);
  if (first == 0 && any != 0)
    abort();
  free(in.buf);
  return 0;
}
