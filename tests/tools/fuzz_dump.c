/* fuzz_dump.c -- libFuzzer target for the whole-payload path of
 * tools/reader_dump.c (ntt_load_dump): the one that names what is wrong,
 * taken for stored payloads, for --salvage, and whenever the fast paths
 * decline.  Mode bit 3 instead loads the dump as analyze does, strict with
 * a load buffer kept across inputs, through the path-based
 * ntt_image_load_buf: the input is written to a memfd and passed as
 * /proc/self/fd/N.  Input: tests/tools/fuzz_dump.h (sealed and stored
 * seeds reach the section walk in strict mode).
 *
 * Contract checked beyond "no crash, leak or UB": a refusal has a reason;
 * an accepted image has a terminated host, clamped counts and its records
 * in strictly increasing commit order.
 */
#include "tests/tools/fuzz_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct ntt_loadbuf *lb = fz_kept_loadbuf();
  struct fz_input in;
  if (fz_dump_of(data, size, &in))
    return 0;
  struct ntt_image img;
  char err[512] = "";
  int borrowed = 0, rc;
  if (in.mode & FZ_OWN) {
    char path[64];
    int fd = fz_memfd(in.buf, in.len, path, sizeof path);
    if (fd < 0) {
      free(in.buf);
      return 0;
    }
    rc = ntt_image_load_buf(path, &img, lb, &borrowed, err, sizeof err);
    close(fd);
  } else {
    memset(&img, 0, sizeof img);
    rc = ntt_load_dump(in.buf, in.len, "fuzz", in.mode & FZ_SALVAGE, &img, NULL, NULL, err, sizeof err);
    if (rc)
      ntt_image_free(&img); /* as reader.c's callers do */
  }
  free(in.buf);
  if (rc != 0) {
    if (!err[0] || borrowed)
      abort();
    return 0;
  }
  if (strnlen(img.hdr.host, sizeof img.hdr.host) >= sizeof img.hdr.host || img.hdr.bt_depth > NTR_BT_DEPTH ||
      img.hdr.env_len > NTR_ENV_BYTES)
    abort();
  fz_check_sections(&img);
  for (uint64_t i = 1; i < img.nrecs; i++)
    if (img.recs[i - 1].commit >= img.recs[i].commit)
      abort();
  if (borrowed)
    img.recs = NULL;
  ntt_image_free(&img);
  return 0;
}
