/* bundle_write.c -- write a bundle (tools/bundle.h, docs/bundle.md): POSIX
 * tar members (ustar headers; a pax 'x' header carries a name longer than
 * the ustar fields hold), optionally through one zstd stream with its
 * checksum on.
 *
 * Thread-safety: one writer per thread.  Not signal-safe.  The archive is
 * written as a hidden temporary file beside its destination and renamed
 * only once complete, so a bundle that exists is whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include "tools/bundle.h"

#define NTB_BLOCK 512
#define NTB_RECORD (20 * NTB_BLOCK) /* tar pads the archive to whole records */
#define NTB_CHUNK (128u << 10)

struct ntb_writer {
  int fd;
  ZSTD_CCtx *cctx;
  unsigned char *zbuf;
  uint64_t offset; /* archive bytes written (before compression) */
  char path[4096], tmp[4096];
};

static int fail(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return -1;
}

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t r = write(fd, c, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

/* Archive bytes out (compressed when zstd); end: finish the frame. */
static int emit(struct ntb_writer *w, const void *p, size_t n, int end, char *why, size_t whylen) {
  w->offset += n;
  if (!w->cctx)
    return write_all(w->fd, p, n) ? fail(why, whylen, "write: %s", strerror(errno)) : 0;
  ZSTD_inBuffer in = {p, n, 0};
  for (;;) {
    ZSTD_outBuffer o = {w->zbuf, ZSTD_CStreamOutSize(), 0};
    size_t r = ZSTD_compressStream2(w->cctx, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
    if (ZSTD_isError(r))
      return fail(why, whylen, "zstd: %s", ZSTD_getErrorName(r));
    if (o.pos && write_all(w->fd, w->zbuf, o.pos))
      return fail(why, whylen, "write: %s", strerror(errno));
    if (end ? r == 0 : in.pos == in.size)
      return 0;
  }
}

void ntb_safe_name(const char *in, char *out, size_t len) {
  size_t k = 0;
  for (; *in && k + 1 < len; in++) {
    char c = *in;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '-' || c == '_';
    out[k++] = ok ? c : '_';
  }
  out[k] = 0;
  if (!k || !strcmp(out, ".") || !strcmp(out, ".."))
    snprintf(out, len, "_");
}

struct ntb_writer *ntb_writer_open(const char *path, int zstd, char *why, size_t whylen) {
  struct ntb_writer *w = calloc(1, sizeof *w);
  if (!w) {
    fail(why, whylen, "out of memory");
    return NULL;
  }
  snprintf(w->path, sizeof w->path, "%s", path);
  const char *sl = strrchr(path, '/');
  int dl = sl ? (int)(sl - path + 1) : 0;
  if ((size_t)snprintf(w->tmp, sizeof w->tmp, "%.*s.%s.tmp-XXXXXX", dl, path, sl ? sl + 1 : path) >= sizeof w->tmp) {
    fail(why, whylen, "path too long");
    free(w);
    return NULL;
  }
  w->fd = mkstemp(w->tmp); /* 0600: dumps hold host names and environment */
  if (w->fd < 0) {
    fail(why, whylen, "cannot create a file beside %s: %s", path, strerror(errno));
    free(w);
    return NULL;
  }
  ntb_clean_add(w->tmp); /* removed if the command is interrupted (gone once renamed) */
  if (zstd) {
    w->cctx = ZSTD_createCCtx();
    w->zbuf = malloc(ZSTD_CStreamOutSize());
    if (!w->cctx || !w->zbuf || ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, 3)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 1))) {
      fail(why, whylen, "zstd: cannot start a stream");
      ntb_writer_close(w, 0, NULL, 0);
      return NULL;
    }
  }
  return w;
}

static void put_octal(unsigned char *f, size_t len, uint64_t v) {
  /* len-1 digits, zero-padded, then NUL */
  f[len - 1] = 0;
  for (size_t i = len - 1; i-- > 0;) {
    f[i] = (unsigned char)('0' + (v & 7));
    v >>= 3;
  }
}

static void header(unsigned char *b, const char *name, uint64_t size, int64_t mtime_ns, char type) {
  memset(b, 0, NTB_BLOCK);
  snprintf((char *)b, 100, "%s", name); /* at most 99 bytes and a NUL */
  put_octal(b + 100, 8, 0600);
  put_octal(b + 108, 8, 0);
  put_octal(b + 116, 8, 0);
  put_octal(b + 124, 12, size);
  put_octal(b + 136, 12, mtime_ns > 0 ? (uint64_t)mtime_ns / 1000000000u : 0);
  b[156] = (unsigned char)type;
  memcpy(b + 257, "ustar", 6); /* "ustar\0" then version "00" */
  memcpy(b + 263, "00", 2);
  memset(b + 148, ' ', 8);
  uint64_t s = 0;
  for (int i = 0; i < NTB_BLOCK; i++)
    s += b[i];
  put_octal(b + 148, 7, s); /* six digits, NUL, then the space already there */
  b[155] = ' ';
}

static int pad(struct ntb_writer *w, uint64_t n, char *why, size_t whylen) {
  static const unsigned char zero[NTB_BLOCK];
  size_t k = (size_t)((NTB_BLOCK - n % NTB_BLOCK) % NTB_BLOCK);
  return k ? emit(w, zero, k, 0, why, whylen) : 0;
}

/* A pax record "LEN key=value\n" into buf, LEN counting its own digits.
 * @return its length. */
static size_t pax_record(char *buf, size_t cap, const char *key, const char *value) {
  size_t body = strlen(key) + strlen(value) + 3, len = body + 1;
  while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
    len = body + (size_t)snprintf(NULL, 0, "%zu", len);
  snprintf(buf, cap, "%zu %s=%s\n", len, key, value);
  return len;
}

/* The header(s) of a member: a pax 'x' header first when its name does not
 * fit the ustar field or its mtime has a fraction of a second (a Flight
 * Recorder dump's time is its file's, to the ns). */
static int member_header(struct ntb_writer *w, const char *name, uint64_t size, int64_t mtime_ns, char *why,
                         size_t whylen) {
  unsigned char b[NTB_BLOCK];
  size_t nl = strlen(name);
  if (nl > NTB_NAME_MAX)
    return fail(why, whylen, "member name longer than %d bytes: %s", NTB_NAME_MAX, name);
  char rec[NTB_NAME_MAX + 96], t[40];
  size_t k = 0;
  if (nl > 99)
    k += pax_record(rec, sizeof rec, "path", name);
  if (mtime_ns > 0 && mtime_ns % 1000000000 != 0) {
    snprintf(t, sizeof t, "%lld.%09lld", (long long)(mtime_ns / 1000000000), (long long)(mtime_ns % 1000000000));
    k += pax_record(rec + k, sizeof rec - k, "mtime", t);
  }
  if (k) {
    char pname[100];
    snprintf(pname, sizeof pname, "PaxHeaders/%.80s", name + nl - (nl > 80 ? 80 : nl));
    header(b, pname, (uint64_t)k, mtime_ns, 'x');
    if (emit(w, b, NTB_BLOCK, 0, why, whylen) || emit(w, rec, k, 0, why, whylen) || pad(w, (uint64_t)k, why, whylen))
      return -1;
  }
  header(b, name, size, mtime_ns, '0');
  return emit(w, b, NTB_BLOCK, 0, why, whylen);
}

int ntb_writer_add_mem(struct ntb_writer *w, const char *name, const void *p, size_t n, int64_t mtime_ns, char *why,
                       size_t whylen) {
  if (n > NTB_MEMBER_MAX)
    return fail(why, whylen, "%s: %zu bytes, over the %llu-byte member limit", name, n,
                (unsigned long long)NTB_MEMBER_MAX);
  if (member_header(w, name, n, mtime_ns, why, whylen) || emit(w, p, n, 0, why, whylen) || pad(w, n, why, whylen))
    return -1;
  return 0;
}

int ntb_writer_add_file(struct ntb_writer *w, const char *name, const char *src, uint64_t size,
                        const uint64_t *xxh, int64_t mtime_ns, char *why, size_t whylen) {
  if (size > NTB_MEMBER_MAX)
    return fail(why, whylen, "%s: %llu bytes, over the %llu-byte member limit", src, (unsigned long long)size,
                (unsigned long long)NTB_MEMBER_MAX);
  int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return fail(why, whylen, "%s: %s", src, strerror(errno));
  unsigned char *buf = malloc(NTB_CHUNK);
  XXH64_state_t *xs = XXH64_createState();
  int rc = -1;
  if (!buf || !xs) {
    fail(why, whylen, "out of memory");
    goto out;
  }
  XXH64_reset(xs, 0);
  if (member_header(w, name, size, mtime_ns, why, whylen))
    goto out;
  uint64_t left = size;
  while (left) {
    size_t k = left < NTB_CHUNK ? (size_t)left : NTB_CHUNK;
    ssize_t r = read(fd, buf, k);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      fail(why, whylen, "%s: %s while it was read", src, r < 0 ? strerror(errno) : "shrank");
      goto out;
    }
    XXH64_update(xs, buf, (size_t)r);
    if (emit(w, buf, (size_t)r, 0, why, whylen))
      goto out;
    left -= (uint64_t)r;
  }
  char extra;
  if (read(fd, &extra, 1) > 0) {
    fail(why, whylen, "%s: grew while it was read", src);
    goto out;
  }
  if (xxh && XXH64_digest(xs) != *xxh) {
    fail(why, whylen, "%s: changed while it was read", src);
    goto out;
  }
  rc = pad(w, size, why, whylen);
out:
  free(buf);
  XXH64_freeState(xs);
  close(fd);
  return rc;
}

int ntb_writer_close(struct ntb_writer *w, int ok, char *why, size_t whylen) {
  char dummy[8];
  if (!why) {
    why = dummy;
    whylen = sizeof dummy;
  }
  int rc = ok ? 0 : -1;
  if (ok) {
    /* two zero blocks, then zeros to a whole record */
    static const unsigned char zero[NTB_RECORD + 2 * NTB_BLOCK];
    uint64_t end = w->offset + 2 * NTB_BLOCK;
    size_t k = 2 * NTB_BLOCK + (size_t)((NTB_RECORD - end % NTB_RECORD) % NTB_RECORD);
    rc = emit(w, zero, k, 1, why, whylen);
    if (!rc && fsync(w->fd) != 0 && errno != EINVAL)
      rc = fail(why, whylen, "fsync: %s", strerror(errno));
  }
  if (close(w->fd) != 0 && !rc)
    rc = fail(why, whylen, "close: %s", strerror(errno));
  if (!rc && rename(w->tmp, w->path) != 0)
    rc = fail(why, whylen, "cannot rename into %s: %s", w->path, strerror(errno));
  if (rc)
    unlink(w->tmp);
  ZSTD_freeCCtx(w->cctx);
  free(w->zbuf);
  free(w);
  return rc;
}
