/* fuzz_reader.c -- libFuzzer target for the reader's decoder entry points:
 * ntt_image_load_mem in strict and salvage mode (bit 0 of the first input
 * byte picks the mode, the rest is the file); with bit 1, the same bytes as
 * a file (a memfd) through ntt_image_load (open, fstat, the pread windows of
 * a ring, the dump read into memory) and ntt_image_probe (the header and the
 * memory a load may take).  Seeds: mkfix ring/dump/bomb output.
 *
 * Contract of the reader checked here beyond "no crash": a refusal always
 * has a reason, an accepted image has terminated strings and clamped counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "tools/reader.h"

/* The file path of the input, or -1. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t len) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t off = 0;
  while (off < size) {
    ssize_t n = write(fd, data + off, size - off);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    off += (size_t)n;
  }
  snprintf(path, len, "/proc/self/fd/%d", fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  int salvage = data[0] & 1;
  struct ntt_image img;
  char err[512] = "";
  int rc;
  if (data[0] & 2) {
    char path[64];
    int fd = as_file(data + 1, size - 1, path, sizeof path);
    if (fd < 0)
      return 0;
    struct ntr_ring_header h;
    uint64_t need = 0;
    if (ntt_image_probe(path, &h, &need, err, sizeof err) == 0 && strlen(h.host) >= sizeof h.host)
      abort();
    err[0] = '\0';
    rc = ntt_image_load(path, salvage, &img, err, sizeof err);
    close(fd);
  } else {
    rc = ntt_image_load_mem(data + 1, size - 1, "fuzz", salvage, &img, err, sizeof err);
  }
  if (rc != 0) {
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
    (void)ntt_kind_name(r->kind);
    (void)ntt_dtype_name(r->dtype);
    (void)ntt_redop_name(r->redop);
    (void)ntt_result_name(r->result);
    (void)ntt_image_ns(&img, r->tsc);
  }
  ntt_image_free(&img);
  return 0;
}
