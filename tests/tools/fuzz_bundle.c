/* fuzz_bundle.c -- libFuzzer target for the bundle reader
 * (tools/bundle_read.c, ntb_read_mem): a plain or zstd tar whose first
 * member is a MANIFEST.  Seeds: bundles `nccltrace bundle` writes (plain
 * .tar and .tar.zst).
 *
 * Contract checked beyond "no crash, leak or UB": a refusal has a reason;
 * an accepted bundle handed the sink exactly the bytes each header said,
 * within the member limit, and members' names are relative with no "..".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tools/bundle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
  uint64_t want, got;
};

static int fz_begin(void *ctx, const char *name, uint64_t n, int64_t mtime_ns, char *err, size_t errlen) {
  struct fz *f = ctx;
  (void)err, (void)errlen;
  if (mtime_ns < 0)
    abort();
  if (name[0] == '/' || strstr(name, "..") || n > NTB_MEMBER_MAX)
    abort();
  f->want = n;
  f->got = 0;
  return 0;
}

static int fz_data(void *ctx, const void *p, size_t n, char *err, size_t errlen) {
  struct fz *f = ctx;
  (void)p, (void)err, (void)errlen;
  f->got += n;
  if (f->got > f->want)
    abort();
  return 0;
}

static int fz_end(void *ctx, char *err, size_t errlen) {
  struct fz *f = ctx;
  (void)err, (void)errlen;
  if (f->got != f->want)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {0, 0};
  struct ntb_sink sink = {fz_begin, fz_data, fz_end, &f};
  struct ntb_info info;
  char err[512] = "";
  if (ntb_read_mem(data, size, &sink, &info, err, sizeof err) != 0 && !err[0])
    abort();
  return 0;
}
