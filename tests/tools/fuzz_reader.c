/* fuzz_reader.c -- libFuzzer target for the reader's one decoder entry
 * point, ntr_image_load_mem, in strict and salvage mode (the first input
 * byte picks the mode, the rest is the file).  Seeds: mkfix ring/dump output.
 *
 * Contract of the reader checked here beyond "no crash": a refusal always
 * has a reason, an accepted image has terminated strings and clamped counts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "recorder/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int salvage = data[0] & 1;
  struct ntr_image img;
  char err[512] = "";
  if (ntr_image_load_mem(data + 1, size - 1, "fuzz", salvage, &img, err, sizeof err) != 0) {
    if (!err[0])
      abort();
    return 0;
  }
  if (strlen(img.hdr.host) >= sizeof img.hdr.host || img.hdr.bt_depth > NTR_BT_DEPTH ||
      img.hdr.env_len > NTR_ENV_BYTES)
    abort();
  for (uint64_t i = 0; i < img.nrecs; i++) {
    const struct ntr_record *r = &img.recs[i];
    if (i && img.recs[i - 1].commit >= r->commit)
      abort();
    (void)ntr_kind_name(r->kind);
    (void)ntr_dtype_name(r->dtype);
    (void)ntr_redop_name(r->redop);
    (void)ntr_result_name(r->result);
    (void)ntr_image_ns(&img, r->tsc);
  }
  ntr_image_free(&img);
  return 0;
}
