/* test_reader.c -- the reader (tools/reader.h) on in-memory images.
 *
 * Proves: records come back oldest first from the main ring and the comm's
 * recent[] merged without duplicates; a slot being written (commit 0 below
 * head) or holding a position that does not map to it counts as torn and is
 * skipped, while a copy in recent[] still supplies the record; every prefix
 * of a ring and of a dump is refused (strict) or salvaged without a crash;
 * thousands of random corruptions never crash and always leave terminated
 * header strings and in-range counts (run under ASan+UBSan in the sanitize
 * suite); a file replaced under its name after it was listed
 * (ntt_input_expect) is refused by the probe and the load.  Exit 0 pass,
 * 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fixture.h"
#include "tools/reader.h"
#include "tests/nt_test.h"

static struct ntr_record *slot_of(unsigned char *ring, uint64_t i) {
  struct ntr_ring_header h;
  memcpy(&h, ring, sizeof h);
  return (struct ntr_record *)(ring + h.slot_offset) + i;
}

static void check_sane(const struct ntt_image *img, size_t len) {
  NT_CHECK(strlen(img->hdr.host) < sizeof img->hdr.host, "host terminated");
  NT_CHECK(strlen(img->hdr.job_id) < sizeof img->hdr.job_id, "job terminated");
  NT_CHECK(img->hdr.bt_depth <= NTR_BT_DEPTH, "bt_depth clamped");
  NT_CHECK(img->hdr.env_len <= NTR_ENV_BYTES, "env_len clamped");
  /* zstd expands at most 32768 times (reader_dump.c): memory follows input. */
  NT_CHECK(img->nrecs * sizeof(struct ntr_record) <= (uint64_t)len * 32768, "records bounded by the input (%llu)",
        (unsigned long long)img->nrecs);
  for (uint64_t i = 1; i < img->nrecs; i++)
    NT_CHECK(img->recs[i - 1].commit < img->recs[i].commit, "strictly increasing positions");
  for (uint32_t i = 0; i < img->nstacks; i++)
    NT_CHECK(img->stacks[i].depth <= NTR_STACK_DEPTH, "stack depth clamped");
  /* Exercise the names on hostile values. */
  for (uint64_t i = 0; i < img->nrecs; i++) {
    const struct ntr_record *r = &img->recs[i];
    NT_CHECK(ntt_kind_name(r->kind) && ntt_dtype_name(r->dtype) && ntt_redop_name(r->redop) &&
              ntt_result_name(r->result), "names never NULL");
    (void)ntt_image_ns(img, r->tsc);
  }
}

static void test_merge_and_torn(void) {
  struct fx_opts o = {0};
  unsigned char *ring;
  size_t len = fx_build_ring(&o, &ring);
  struct ntt_image img;
  char err[512];
  NT_CHECK(ntt_image_load_mem(ring, len, "mem", 0, &img, err, sizeof err) == 0, "load: %s", err);
  NT_CHECK(img.nrecs == 7 && img.torn == 0 && img.lost == 0 && img.ncomms == 1 && img.nstacks == 1,
        "7 records, 1 comm, 1 stack: %llu %llu", (unsigned long long)img.nrecs, (unsigned long long)img.torn);
  for (uint64_t i = 0; i < img.nrecs; i++)
    NT_CHECK(img.recs[i].commit == i + 1, "position order");
  ntt_image_free(&img);

  /* Slot 3 being written: recent[] still holds Broadcast (pos 3). */
  slot_of(ring, 3)->commit = NTR_COMMIT_WRITING;
  /* Slot 5 (Mark, no comm, so not in recent[]) being written: gone. */
  slot_of(ring, 5)->commit = NTR_COMMIT_WRITING;
  /* Slot 2 holds a position that maps to slot 1: damage. */
  slot_of(ring, 2)->commit = 66;
  NT_CHECK(ntt_image_load_mem(ring, len, "mem", 0, &img, err, sizeof err) == 0, "load torn: %s", err);
  NT_CHECK(img.torn == 3, "3 torn slots, got %llu", (unsigned long long)img.torn);
  NT_CHECK(img.nrecs == 6, "6 records (Mark lost), got %llu", (unsigned long long)img.nrecs);
  int has3 = 0, has5 = 0, has65 = 0;
  for (uint64_t i = 0; i < img.nrecs; i++) {
    has3 |= img.recs[i].commit == 4;
    has5 |= img.recs[i].commit == 6;
    has65 |= img.recs[i].commit == 66;
  }
  NT_CHECK(has3 && !has5 && !has65, "recent[] supplies pos 3; pos 5 and the misplaced slot are skipped");
  ntt_image_free(&img);

  /* Slot 5 (the Mark) never written -- a block position nobody used -- and
   * then a filler (ring.h, holes and fillers): neither is damage, neither
   * is a record. */
  slot_of(ring, 3)->commit = 4;
  slot_of(ring, 2)->commit = 3;
  for (int pass = 0; pass < 2; pass++) {
    struct ntr_record *f = slot_of(ring, 5);
    memset(f, 0, sizeof *f);
    f->commit = pass ? 6 : 0;
    NT_CHECK(ntt_image_load_mem(ring, len, "mem", 0, &img, err, sizeof err) == 0, "load holes: %s", err);
    NT_CHECK(img.torn == 0, "pass %d: an unused position or a filler is not torn, got %llu", pass,
          (unsigned long long)img.torn);
    int seen = 0;
    for (uint64_t i = 0; i < img.nrecs; i++)
      seen |= img.recs[i].kind == NTR_KIND_NONE || img.recs[i].commit == 6;
    NT_CHECK(!seen && img.nrecs == 6, "pass %d: 6 records without position 5, got %llu", pass,
          (unsigned long long)img.nrecs);
    ntt_image_free(&img);
  }
  free(ring);
}

static void test_prefixes(unsigned char *buf, size_t len, const char *what, size_t step) {
  struct ntt_image img;
  char err[512];
  for (size_t n = 0; n < len; n += (n < 256 ? 1 : step)) {
    NT_CHECK(ntt_image_load_mem(buf, n, what, 0, &img, err, sizeof err) != 0, "%s prefix %zu accepted", what, n);
    NT_CHECK(strncmp(err, what, strlen(what)) == 0, "message names the input: %s", err);
    if (ntt_image_load_mem(buf, n, what, 1, &img, err, sizeof err) == 0) {
      NT_CHECK(img.salvaged, "%s prefix %zu salvaged without the flag", what, n);
      check_sane(&img, n);
      ntt_image_free(&img);
    }
  }
  NT_CHECK(ntt_image_load_mem(buf, len, what, 0, &img, err, sizeof err) == 0, "%s whole: %s", what, err);
  ntt_image_free(&img);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void test_flips(const unsigned char *orig, size_t len, size_t span, int iters) {
  unsigned char *buf = malloc(len);
  struct ntt_image img;
  char err[512];
  for (int it = 0; it < iters; it++) {
    memcpy(buf, orig, len);
    int nflip = 1 + (int)(next_rand() % 4);
    for (int k = 0; k < nflip; k++)
      buf[next_rand() % span] ^= (unsigned char)(1u << (next_rand() % 8));
    for (int salvage = 0; salvage < 2; salvage++) {
      if (ntt_image_load_mem(buf, len, "flip", salvage, &img, err, sizeof err) == 0) {
        check_sane(&img, len);
        ntt_image_free(&img);
      } else {
        NT_CHECK(err[0] != '\0', "a refusal has a reason");
      }
    }
  }
  free(buf);
}

/* What analyze judged by its owner is what it reads: a file renamed over
 * the listed one (a group member in a team directory) is refused. */
static void test_replaced(const unsigned char *dump, size_t dlen) {
  char dir[] = "/tmp/ntt-replaced-XXXXXX", a[64], b[64], err[256];
  if (!mkdtemp(dir)) {
    NT_CHECK(0, "mkdtemp");
    return;
  }
  snprintf(a, sizeof a, "%s/a.zst", dir);
  snprintf(b, sizeof b, "%s/b.zst", dir);
  struct stat listed, now;
  NT_CHECK(fx_write(a, dump, dlen) == 0 && stat(a, &listed) == 0, "write a");
  NT_CHECK(fx_write(b, dump, dlen) == 0 && rename(b, a) == 0 && stat(a, &now) == 0, "replace a");
  struct ntr_ring_header h;
  struct ntt_image img;
  uint64_t need;
  ntt_input_expect(listed.st_dev, listed.st_ino, 1);
  NT_CHECK(ntt_image_probe(a, &h, &need, err, sizeof err) != 0 && strstr(err, "replaced since it was listed"),
           "probe of a replaced file refused: %s", err);
  NT_CHECK(ntt_image_load(a, 1, &img, err, sizeof err) != 0 && strstr(err, "replaced since it was listed"),
           "load of a replaced file refused: %s", err);
  ntt_input_expect(now.st_dev, now.st_ino, 1);
  NT_CHECK(ntt_image_load(a, 0, &img, err, sizeof err) == 0, "the file listed loads: %s", err);
  ntt_image_free(&img);
  ntt_input_expect(0, 0, 0);
  unlink(a);
  rmdir(dir);
}

int main(void) {
  test_merge_and_torn();

  struct fx_opts o = {.bt = 1};
  unsigned char *ring, *dump;
  size_t rlen = fx_build_ring(&o, &ring);
  size_t dlen = fx_build_dump(&o, &dump);
  NT_CHECK(rlen && dlen, "fixtures built");
  test_replaced(dump, dlen);
  test_prefixes(dump, dlen, "dump", 1);
  test_prefixes(ring, rlen, "ring", 61);
  /* Dumps: anywhere.  Rings: the header (where the hostile fields are) and
   * the first slots. */
  test_flips(dump, dlen, dlen, 10000);
  struct ntr_ring_header h;
  memcpy(&h, ring, sizeof h);
  test_flips(ring, rlen, sizeof h, 1500);
  test_flips(ring, rlen, rlen, 300);
  free(ring);
  free(dump);
  if (nt_failures)
    return 1;
  printf("ok\n");
  return 0;
}
