/* fuzz_analyze.c -- libFuzzer target for `nccltrace analyze` past the reader:
 * up to four images (ranks) are loaded from the input with
 * ntt_image_load_mem, and whatever the reader accepts goes through the whole
 * analysis (merge, align, detect, verdict) and both reports.
 *
 * Input: byte 0 = flags (bit 0: salvage; bits 1-2: images - 1), then for
 * every image but the last a little-endian u32 length and that many bytes;
 * the last image takes the rest.  Seeds (run-fuzz.sh): real dumps of an
 * emulator run re-stored with a raw payload (preamble flags bit 0), so that
 * mutations reach the sections instead of dying in zstd.
 *
 * Contract checked beyond "no crash, no leak, no UB": the JSON report is
 * produced for any accepted set of images, and its verdict has a class.
 * Thread-safety: libFuzzer calls it from one thread.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/reader.h"
#include "tools/analyze/analyze.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *sink(void) {
  static FILE *f;
  if (!f)
    f = fopen("/dev/null", "w");
  return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int salvage = data[0] & 1;
  int want = 1 + ((data[0] >> 1) & 3);
  size_t off = 1;
  struct nta_job job;
  memset(&job, 0, sizeof job);
  snprintf(job.job_id, sizeof job.job_id, "fuzz");
  job.world_size = -1;
  job.imgs = calloc((size_t)want, sizeof *job.imgs);
  if (!job.imgs)
    return 0;
  for (int i = 0; i < want && off <= size; i++) {
    size_t len = size - off;
    if (i < want - 1) {
      if (size - off < 4)
        break;
      uint32_t l = (uint32_t)data[off] | (uint32_t)data[off + 1] << 8 | (uint32_t)data[off + 2] << 16 |
                   (uint32_t)data[off + 3] << 24;
      off += 4;
      len = l < size - off ? l : size - off;
    }
    char err[512] = "";
    struct ntt_image *img = &job.imgs[job.nimgs];
    if (ntt_image_load_mem(data + off, len, "fuzz", salvage, img, err, sizeof err) == 0)
      job.nimgs++;
    else if (!err[0])
      abort(); /* a refusal always says why */
    off += len;
  }
  if (job.nimgs == 0) {
    nta_job_free(&job);
    return 0;
  }
  if (nta_analyze(&job) == 0) {
    if (nta_class_name(job.v.cls) == NULL)
      abort();
    if (sink()) {
      nta_report_text(&job, sink());
      if (nta_report_json(&job, sink()) != 0)
        abort();
    }
  }
  nta_job_free(&job);
  return 0;
}
