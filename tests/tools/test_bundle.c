/* test_bundle.c -- the bundle reader (tools/bundle_read.c) on bundles the
 * writer (tools/bundle_write.c) makes, plain and zstd, and on damaged ones:
 *   roundtrip  every member comes back byte for byte, a name over 100
 *              bytes through its pax header included
 *   truncate   every cut of the archive (every length near the ends and
 *              in the headers, a stride through the data) is refused with a
 *              reason, never read as whole
 *   flip       one byte flipped anywhere: refused, or (a flip in padding
 *              or past the end) read with every member intact
 *   hostile    hand-made tars: not a bundle, a member not in the MANIFEST,
 *              a size the MANIFEST does not say, "..", a link, a member
 *              over the size limit, a bad checksum; each names what is wrong
 * Exit 0 pass, 1 fail.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include "tests/nt_test.h"
#include "tools/bundle.h"

#define NMEM 4
static const char *names[NMEM] = {
    "verdict.txt", "dumps/small.zst",
    "dumps/nccltrace-a-very-long-job-identifier-that-goes-on-and-on-r12-host-with-a-long-name-12345-0-sigterm.zst",
    "rings/big.zst"};
static unsigned char *data[NMEM];
static size_t lens[NMEM] = {100, 513, 1000, 300000};
/* whole seconds (the ustar field), and fractions (a pax mtime record) */
static const int64_t mtimes[NMEM] = {1796400000000000000ll, 1796400000123456789ll, 1796400001000000001ll, 5};

/* ---------------------------------------------------------- capture -- */

struct cap {
  int n;
  char name[NMEM + 1][300];
  unsigned char *buf[NMEM + 1];
  size_t len[NMEM + 1];
  int64_t mtime[NMEM + 1];
};

static int c_begin(void *ctx, const char *name, uint64_t size, int64_t mtime_ns, char *err, size_t errlen) {
  struct cap *c = ctx;
  (void)err, (void)errlen;
  c->mtime[c->n] = mtime_ns;
  if (c->n > NMEM)
    return -1;
  snprintf(c->name[c->n], sizeof c->name[c->n], "%s", name);
  c->buf[c->n] = malloc(size ? size : 1);
  c->len[c->n] = 0;
  return 0;
}

static int c_data(void *ctx, const void *p, size_t n, char *err, size_t errlen) {
  struct cap *c = ctx;
  (void)err, (void)errlen;
  memcpy(c->buf[c->n] + c->len[c->n], p, n);
  c->len[c->n] += n;
  return 0;
}

static int c_end(void *ctx, char *err, size_t errlen) {
  (void)err, (void)errlen;
  ((struct cap *)ctx)->n++;
  return 0;
}

static void cap_free(struct cap *c) {
  for (int i = 0; i <= NMEM; i++)
    free(c->buf[i]);
  memset(c, 0, sizeof *c);
}

/* Read buf; @return the reader's result, with every member checked equal
 * to the original when it accepted. */
static int read_check(const unsigned char *buf, size_t len, char *err, size_t errlen) {
  struct cap c;
  memset(&c, 0, sizeof c);
  struct ntb_sink s = {c_begin, c_data, c_end, &c};
  struct ntb_info info;
  int rc = ntb_read_mem(buf, len, &s, &info, err, errlen);
  if (rc == 0) {
    NT_CHECK(c.n == NMEM + 1, "%d members", c.n);
    NT_CHECK(!strcmp(info.top, "top"), "top %s", info.top);
    NT_CHECK(!strcmp(info.job, "jobX"), "job %s", info.job);
    NT_CHECK(info.nfiles == NMEM);
    for (int i = 0; i < NMEM && i + 1 < c.n; i++) {
      NT_CHECK(!strcmp(c.name[i + 1], names[i]), "member %d: %s", i, c.name[i + 1]);
      NT_CHECK(c.len[i + 1] == lens[i] && !memcmp(c.buf[i + 1], data[i], lens[i]), "member %s differs", names[i]);
      NT_CHECK(c.mtime[i + 1] == mtimes[i], "member %s: mtime %lld, not %lld", names[i], (long long)c.mtime[i + 1],
               (long long)mtimes[i]);
    }
  } else {
    NT_CHECK(err[0], "a refusal without a reason");
  }
  cap_free(&c);
  return rc;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  NT_ASSERT(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n);
  NT_ASSERT(fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *len = (size_t)n;
  return b;
}

static unsigned char *make(int zstd, size_t *len) {
  char path[] = "/tmp/test_bundle_XXXXXX";
  int fd = mkstemp(path);
  NT_ASSERT(fd >= 0);
  close(fd);
  char why[512], man[4096];
  int k = snprintf(man, sizeof man, "%s\nversion test\nhost h\ncreated now\njob jobX\n", NTB_MAGIC);
  for (int i = 0; i < NMEM; i++)
    k += snprintf(man + k, sizeof man - (size_t)k, "file %016llx %zu %lld.%09lld %s /src/%d\n",
                  (unsigned long long)XXH64(data[i], lens[i], 0), lens[i], (long long)(mtimes[i] / 1000000000),
                  (long long)(mtimes[i] % 1000000000), names[i], i);
  k += snprintf(man + k, sizeof man - (size_t)k, "sum %016llx\n", (unsigned long long)XXH64(man, (size_t)k, 0));
  struct ntb_writer *w = ntb_writer_open(path, zstd, why, sizeof why);
  NT_ASSERT(w, "%s", why);
  NT_ASSERT(!ntb_writer_add_mem(w, "top/MANIFEST", man, (size_t)k, 1000000000, why, sizeof why), "%s", why);
  for (int i = 0; i < NMEM; i++) {
    char n[300];
    snprintf(n, sizeof n, "top/%s", names[i]);
    NT_ASSERT(!ntb_writer_add_mem(w, n, data[i], lens[i], mtimes[i], why, sizeof why), "%s", why);
  }
  NT_ASSERT(!ntb_writer_close(w, 1, why, sizeof why), "%s", why);
  unsigned char *b = slurp(path, len);
  unlink(path);
  return b;
}

static void truncations(const unsigned char *b, size_t len, int zstd, const char *what) {
  char err[512];
  int accepted = 0;
  /* a plain tar cut after its first end-of-archive block is whole */
  size_t last = len;
  while (last > 0 && !b[last - 1])
    last--;
  size_t whole = zstd ? len : (last + 511) / 512 * 512 + 512;
  for (size_t l = 0; l < len; l += (l < 4096 || len - l < 12288) ? 1 : 509) {
    if (read_check(b, l, err, sizeof err) == 0 && l < whole) {
      accepted++;
      fprintf(stderr, "%s: a cut at %zu of %zu reads as whole\n", what, l, len);
    }
  }
  NT_CHECK(accepted == 0, "%s: %d cuts read as whole", what, accepted);
}

static void flips(const unsigned char *b, size_t len, const char *what) {
  unsigned char *c = malloc(len);
  char err[512];
  int refused = 0;
  for (size_t at = 0; at < len; at += (at < 8192 ? 1 : 97)) {
    memcpy(c, b, len);
    c[at] ^= 0x20;
    if (read_check(c, len, err, sizeof err) != 0)
      refused++;
  }
  NT_CHECK(refused > 0, "%s: no flip refused", what);
  free(c);
}

/* ------------------------------------------------------- hand-made -- */

static void hdr(unsigned char *b, const char *name, unsigned long long size, char type, int sum_ok) {
  memset(b, 0, 512);
  snprintf((char *)b, 100, "%s", name);
  snprintf((char *)b + 100, 8, "%07o", 0600);
  snprintf((char *)b + 124, 12, "%011llo", size);
  b[156] = (unsigned char)type;
  memcpy(b + 257, "ustar", 6);
  memcpy(b + 263, "00", 2);
  memset(b + 148, ' ', 8);
  unsigned s = 0;
  for (int i = 0; i < 512; i++)
    s += b[i];
  snprintf((char *)b + 148, 8, "%06o", sum_ok ? s : s + 1);
}

/* A tar of MANIFEST + one member: man is the MANIFEST's text (its sum
 * line added). */
static size_t handmade(unsigned char *out, const char *text, const char *name, const char *body, char type,
                       unsigned long long size_field, int sum_ok) {
  char man[1024];
  int k = snprintf(man, sizeof man, "%s", text);
  snprintf(man + k, sizeof man - (size_t)k, "sum %016llx\n", (unsigned long long)XXH64(man, (size_t)k, 0));
  size_t at = 0, ml = strlen(man), bl = strlen(body);
  hdr(out, "top/MANIFEST", ml, '0', 1);
  at += 512;
  memcpy(out + at, man, ml);
  at += (ml + 511) / 512 * 512;
  hdr(out + at, name, size_field, type, sum_ok);
  at += 512;
  memcpy(out + at, body, bl);
  at += (bl + 511) / 512 * 512;
  memset(out + at, 0, 1024);
  return at + 1024;
}

static void expect(const unsigned char *b, size_t len, const char *want, const char *what) {
  char err[512] = "";
  int rc = ntb_read_mem(b, len, NULL, NULL, err, sizeof err);
  NT_CHECK(rc != 0 && strstr(err, want), "%s: rc %d, err '%s', want '%s'", what, rc, err, want);
}

static void hostile(void) {
  static unsigned char b[16384];
  char man[512];
  unsigned long long h = (unsigned long long)XXH64("abc", 3, 0);
  snprintf(man, sizeof man, "%s\nfile %016llx 3 5 dumps/a.zst\n", NTB_MAGIC, h);
  size_t n = handmade(b, man, "top/dumps/a.zst", "abc", '0', 3, 1);
  char err[512];
  NT_CHECK(ntb_read_mem(b, n, NULL, NULL, err, sizeof err) == 0, "the hand-made bundle reads: %s", err);
  n = handmade(b, man, "top/dumps/b.zst", "abc", '0', 3, 1);
  expect(b, n, "not listed in the MANIFEST", "unlisted member");
  n = handmade(b, man, "top/dumps/a.zst", "abcd", '0', 4, 1);
  expect(b, n, "the MANIFEST says 3", "size differs");
  n = handmade(b, man, "top/dumps/a.zst", "abd", '0', 3, 1);
  expect(b, n, "the bundle is corrupt", "content differs");
  n = handmade(b, man, "top/../etc/a.zst", "abc", '0', 3, 1);
  expect(b, n, "not a bundle member name", "dot-dot");
  n = handmade(b, man, "top/dumps/a.zst", "", '2', 0, 1);
  expect(b, n, "is not allowed in a bundle", "a symbolic link");
  n = handmade(b, man, "top/dumps/a.zst", "", '0', 077777777777ull, 1);
  expect(b, n, "over the", "a member over the limit");
  n = handmade(b, man, "top/dumps/a.zst", "abc", '0', 3, 0);
  expect(b, n, "checksum", "bad header checksum");
  n = handmade(b, man, "other/dumps/a.zst", "abc", '0', 3, 1);
  expect(b, n, "outside the bundle's directory", "outside top");
  n = handmade(b, "just text\n", "top/dumps/a.zst", "abc", '0', 3, 1);
  expect(b, n, "not an nccltrace bundle", "no magic");
  n = handmade(b, "nccltrace-bundle 9\n", "top/dumps/a.zst", "abc", '0', 3, 1);
  expect(b, n, "is not one this nccltrace reads", "a later format");
  /* a tar whose first member is no MANIFEST */
  hdr(b, "x/readme", 3, '0', 1);
  memcpy(b + 512, "abc", 3);
  memset(b + 1024, 0, 1024);
  expect(b, 2048, "not an nccltrace bundle", "another tar");
  /* listed but absent */
  snprintf(man, sizeof man, "%s\nfile %016llx 3 5 dumps/a.zst\nfile %016llx 3 5 dumps/z.zst\n", NTB_MAGIC, h, h);
  n = handmade(b, man, "top/dumps/a.zst", "abc", '0', 3, 1);
  expect(b, n, "is not in the archive", "a listed member missing");
  /* a MANIFEST without its sum line, or with a wrong one */
  hdr(b, "top/MANIFEST", strlen(NTB_MAGIC) + 1, '0', 1);
  memcpy(b + 512, NTB_MAGIC "\n", strlen(NTB_MAGIC) + 1);
  memset(b + 1024, 0, 1024);
  expect(b, 2048, "not 'sum XXH64'", "no sum line");
  expect((const unsigned char *)"garbage", 7, "not a tar archive", "garbage");
}

int main(void) {
  srand(7);
  for (int i = 0; i < NMEM; i++) {
    data[i] = malloc(lens[i]);
    for (size_t k = 0; k < lens[i]; k++)
      data[i][k] = (unsigned char)(i == 3 ? rand() : (int)('a' + k % 26));
  }
  for (int z = 0; z < 2; z++) {
    size_t len;
    unsigned char *b = make(z, &len);
    char err[512] = "";
    NT_CHECK(ntb_sniff(b, len) == (z ? 2 : 1));
    NT_CHECK(read_check(b, len, err, sizeof err) == 0, "%s bundle reads: %s", z ? "zstd" : "plain", err);
    truncations(b, len, z, z ? "zstd" : "plain");
    flips(b, len, z ? "zstd" : "plain");
    free(b);
  }
  hostile();
  for (int i = 0; i < NMEM; i++)
    free(data[i]);
  return nt_exit_status();
}
