/* bundle_read.c -- read a bundle (tools/bundle.h, docs/bundle.md): a tar
 * archive, zstd-compressed or not, whose first member is the MANIFEST that
 * lists every other member with its size and XXH64.
 *
 * Thread-safety: reentrant (all state on the caller's stack or heap).  Not
 * signal-safe (allocates).  Input is hostile: every header field is parsed
 * strictly, every name checked before a sink sees it, every size bounded
 * before anything is allocated or written for it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include "tools/bundle.h"

#define NTB_BLOCK 512
#define NTB_CHUNK (128u << 10)
#define NTB_TAIL_MAX (1u << 20) /* zero bytes after the end-of-archive block */

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* ------------------------------------------------------ byte source -- */

/* The archive's bytes: from fd or memory, through zstd when compressed. */
struct src {
  int fd;                       /* -1: memory */
  const unsigned char *mem;
  size_t memlen, mempos;
  int zstd, raw_eof;
  ZSTD_DCtx *dctx;
  size_t last;                  /* ZSTD_decompressStream's last hint: 0 at a frame's end */
  ZSTD_inBuffer in;
  unsigned char *inbuf, *out;
  size_t out_pos, out_len;
  uint64_t offset;              /* archive bytes handed out so far */
  uint64_t produced;            /* archive bytes decompressed so far */
};

static ssize_t raw_read(struct src *s, void *buf, size_t n) {
  if (s->fd < 0) {
    size_t k = s->memlen - s->mempos < n ? s->memlen - s->mempos : n;
    memcpy(buf, s->mem + s->mempos, k);
    s->mempos += k;
    return (ssize_t)k;
  }
  for (;;) {
    ssize_t r = read(s->fd, buf, n);
    if (r < 0 && errno == EINTR)
      continue;
    return r;
  }
}

/* Refill s->out.  @return bytes now there, 0 at the end, -1 with err. */
static int src_fill(struct src *s, char *err, size_t errlen) {
  s->out_pos = s->out_len = 0;
  if (!s->zstd) {
    ssize_t r = raw_read(s, s->out, NTB_CHUNK);
    if (r < 0)
      return fail(err, errlen, "read error: %s", strerror(errno));
    s->out_len = (size_t)r;
    return (int)(r > 0);
  }
  for (;;) {
    if (s->in.pos == s->in.size && !s->raw_eof) {
      if (s->fd < 0) { /* the whole buffer at once */
        s->in.src = s->mem;
        s->in.size = s->memlen;
        s->in.pos = s->mempos;
        s->mempos = s->memlen;
        s->raw_eof = 1;
      } else {
        ssize_t r = raw_read(s, s->inbuf, NTB_CHUNK);
        if (r < 0)
          return fail(err, errlen, "read error: %s", strerror(errno));
        s->in.src = s->inbuf;
        s->in.size = (size_t)r;
        s->in.pos = 0;
        s->raw_eof = r == 0;
      }
    }
    if (s->in.pos == s->in.size && s->raw_eof) {
      if (s->last != 0)
        return fail(err, errlen, "truncated: the zstd stream ends inside a frame (after %llu bytes of the archive)",
                    (unsigned long long)s->produced);
      return 0;
    }
    ZSTD_outBuffer o = {s->out, NTB_CHUNK, 0};
    size_t r = ZSTD_decompressStream(s->dctx, &o, &s->in);
    if (ZSTD_isError(r))
      return fail(err, errlen, "corrupt zstd stream (after %llu bytes of the archive): %s",
                  (unsigned long long)s->produced, ZSTD_getErrorName(r));
    s->last = r;
    s->produced += o.pos;
    if (o.pos) {
      s->out_len = o.pos;
      return 1;
    }
  }
}

/* Read n bytes (buf NULL: skip them).  @return n, fewer at the end, -1. */
static ssize_t src_read(struct src *s, void *buf, size_t n, char *err, size_t errlen) {
  size_t got = 0;
  while (got < n) {
    if (s->out_pos == s->out_len) {
      int r = src_fill(s, err, errlen);
      if (r < 0)
        return -1;
      if (r == 0)
        break;
    }
    size_t k = s->out_len - s->out_pos < n - got ? s->out_len - s->out_pos : n - got;
    if (buf)
      memcpy((char *)buf + got, s->out + s->out_pos, k);
    s->out_pos += k;
    got += k;
  }
  s->offset += got;
  return (ssize_t)got;
}

int ntb_sniff(const unsigned char *head, size_t n) {
  if (n >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd)
    return 2;
  if (n >= NTB_BLOCK && memcmp(head + 257, "ustar", 5) == 0)
    return 1;
  return 0;
}

/* ---------------------------------------------------------- headers -- */

/* An octal field: digits, then spaces or NULs.  @return 0, or -1. */
static int octal(const unsigned char *f, size_t len, uint64_t *out) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < len && f[i] == ' ')
    i++;
  size_t d = i;
  for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
    if (v >> 60)
      return -1;
    v = v * 8 + (uint64_t)(f[i] - '0');
  }
  if (i == d)
    return -1;
  for (; i < len; i++)
    if (f[i] != ' ' && f[i] != '\0')
      return -1;
  *out = v;
  return 0;
}

static int name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_' || c == '/';
}

/* A member name: relative, components of name_char, none empty, "." or "..". */
static int name_ok(const char *n) {
  size_t len = strlen(n);
  if (!len || len > NTB_NAME_MAX || n[0] == '/')
    return 0;
  const char *c = n;
  while (*c) {
    const char *e = strchr(c, '/');
    size_t l = e ? (size_t)(e - c) : strlen(c);
    if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
      return 0;
    for (size_t i = 0; i < l; i++)
      if (!name_char(c[i]))
        return 0;
    if (!e)
      break;
    c = e + 1;
    if (!*c)
      return 0; /* a trailing '/' */
  }
  return 1;
}

/* A name as found, printable, for a message. */
static void shown(const char *n, char *buf, size_t len) {
  size_t k = 0;
  for (; *n && k + 1 < len; n++)
    buf[k++] = (*n >= 0x20 && *n < 0x7f) ? *n : '?';
  buf[k] = 0;
}

/* "SECONDS[.FRACTION]" as ns.  @return 0, or -1. */
static int pax_time(const char *v, size_t n, int64_t *out) {
  size_t i = 0;
  int64_t s = 0, f = 0, scale = 1000000000;
  if (!n || n > 40)
    return -1;
  for (; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
    if (s > 9000000000ll)
      return -1; /* past year 2255: not a time of ours */
    s = s * 10 + (v[i] - '0');
  }
  if (i == 0)
    return -1;
  if (i < n && v[i] == '.')
    for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++)
      if (scale > 1) {
        scale /= 10;
        f += (v[i] - '0') * scale;
      }
  if (i != n)
    return -1;
  *out = s * 1000000000 + f;
  return 0;
}

/* pax records "LEN key=value\n": path, size and mtime (others ignored). */
static int pax_parse(const char *p, size_t n, char *path, size_t pathlen, uint64_t *size, int *has_size,
                     int64_t *mtime_ns, int *has_mtime, char *err, size_t errlen) {
  size_t at = 0;
  while (at < n) {
    if (p[at] == '\0')
      break; /* padding */
    size_t len = 0, i = at;
    while (i < n && p[i] >= '0' && p[i] <= '9' && len < NTB_PAX_MAX)
      len = len * 10 + (size_t)(p[i++] - '0');
    if (i == at || i >= n || p[i] != ' ' || len <= i - at + 1 || len > n - at || p[at + len - 1] != '\n')
      return fail(err, errlen, "corrupt pax header: bad record at byte %zu", at);
    const char *kv = p + i + 1, *end = p + at + len - 1;
    const char *eq = memchr(kv, '=', (size_t)(end - kv));
    if (!eq)
      return fail(err, errlen, "corrupt pax header: record at byte %zu has no '='", at);
    size_t kl = (size_t)(eq - kv), vl = (size_t)(end - eq - 1);
    if (kl == 4 && !memcmp(kv, "path", 4)) {
      if (vl >= pathlen || memchr(eq + 1, '\0', vl))
        return fail(err, errlen, "pax path longer than %zu bytes", pathlen - 1);
      memcpy(path, eq + 1, vl);
      path[vl] = 0;
    } else if (kl == 4 && !memcmp(kv, "size", 4)) {
      uint64_t v = 0;
      if (!vl || vl > 19)
        return fail(err, errlen, "corrupt pax header: bad size");
      for (size_t k = 0; k < vl; k++) {
        char c = eq[1 + k];
        if (c < '0' || c > '9')
          return fail(err, errlen, "corrupt pax header: bad size");
        v = v * 10 + (uint64_t)(c - '0');
      }
      *size = v;
      *has_size = 1;
    } else if (kl == 5 && !memcmp(kv, "mtime", 5)) {
      if (pax_time(eq + 1, vl, mtime_ns))
        return fail(err, errlen, "corrupt pax header: bad mtime");
      *has_mtime = 1;
    }
    at += len;
  }
  return 0;
}

/* --------------------------------------------------------- manifest -- */

struct listed {
  char name[NTB_NAME_MAX + 1]; /* relative to the top directory */
  uint64_t size, xxh;
  int64_t mtime_ns;
  int seen;
};

struct manifest {
  struct listed *v;
  int n, cap;
};

static int cmp_listed(const void *a, const void *b) {
  return strcmp(((const struct listed *)a)->name, ((const struct listed *)b)->name);
}

/* Copy a "key value" line's value, printable, into dst. */
static void value(const char *v, size_t n, char *dst, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < cap; i++)
    dst[k++] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
  dst[k] = 0;
}

static int manifest_parse(const char *p, size_t n, struct manifest *m, struct ntb_info *info, char *err,
                          size_t errlen) {
  size_t ml = strlen(NTB_MAGIC);
  if (n < ml + 1 || memcmp(p, NTB_MAGIC, ml) || p[ml] != '\n') {
    if (n > 17 && !memcmp(p, "nccltrace-bundle ", 17)) {
      char v[16];
      const char *nl = memchr(p + 17, '\n', n - 17);
      value(p + 17, nl ? (size_t)(nl - p - 17) : n - 17, v, sizeof v);
      return fail(err, errlen, "bundle format '%s' is not one this nccltrace reads (it reads %s)", v, NTB_MAGIC);
    }
    return fail(err, errlen, "not an nccltrace bundle: its MANIFEST does not start with '%s'", NTB_MAGIC);
  }
  /* its last line, "sum XXH64" of every byte before it: the MANIFEST is
   * the one member no other line vouches for */
  size_t body = n;
  if (n && p[n - 1] == '\n') {
    const char *last = p + n - 1;
    while (last > p && last[-1] != '\n')
      last--;
    body = (size_t)(last - p);
  }
  char want[17];
  if (n - body != 21 || memcmp(p + body, "sum ", 4) != 0)
    return fail(err, errlen, "MANIFEST: its last line is not 'sum XXH64': cut or damaged");
  snprintf(want, sizeof want, "%016llx", (unsigned long long)XXH64(p, body, 0));
  if (memcmp(p + body + 4, want, 16) != 0)
    return fail(err, errlen, "MANIFEST: its sum is not %s: the bundle is corrupt", want);
  n = body;
  size_t at = ml + 1;
  int line = 1;
  while (at < n) {
    const char *l = p + at, *nl = memchr(l, '\n', n - at);
    size_t len = nl ? (size_t)(nl - l) : n - at;
    at += len + 1;
    line++;
    const char *sp = memchr(l, ' ', len);
    size_t kl = sp ? (size_t)(sp - l) : len;
    const char *v = sp ? sp + 1 : l + len;
    size_t vl = len - kl - (sp ? 1 : 0);
    if (kl == 4 && !memcmp(l, "file", 4)) {
      /* file XXH64 SIZE MTIME NAME [SOURCE...] */
      char f[4][NTB_NAME_MAX + 2];
      size_t k = 0;
      for (int w = 0; w < 4; w++) {
        size_t s = k;
        while (k < vl && v[k] != ' ')
          k++;
        if (k == s || k - s > NTB_NAME_MAX)
          return fail(err, errlen, "MANIFEST line %d: a file line wants 'file XXH64 SIZE MTIME NAME'", line);
        memcpy(f[w], v + s, k - s);
        f[w][k - s] = 0;
        if (k < vl)
          k++;
      }
      char *e1, *e2;
      errno = 0;
      unsigned long long h = strtoull(f[0], &e1, 16), sz = strtoull(f[1], &e2, 10);
      int64_t mt;
      if (*e1 || *e2 || strlen(f[0]) != 16 || errno || f[1][0] == '-' || pax_time(f[2], strlen(f[2]), &mt) ||
          !name_ok(f[3]))
        return fail(err, errlen, "MANIFEST line %d: a file line wants 'file XXH64 SIZE MTIME NAME' (16 hex "
                    "digits, a decimal, seconds, a relative name)", line);
      if (m->n >= NTB_MEMBERS_MAX)
        return fail(err, errlen, "MANIFEST lists more than %d files", NTB_MEMBERS_MAX);
      if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        struct listed *nv = realloc(m->v, (size_t)cap * sizeof *nv);
        if (!nv)
          return fail(err, errlen, "out of memory");
        m->v = nv;
        m->cap = cap;
      }
      struct listed *e = &m->v[m->n++];
      memcpy(e->name, f[3], strlen(f[3]) + 1); /* name_ok: at most NTB_NAME_MAX bytes */
      e->mtime_ns = mt;
      e->xxh = h;
      e->size = sz;
      e->seen = 0;
      info->bytes += sz;
    } else if (kl == 7 && !memcmp(l, "version", 7)) {
      value(v, vl, info->version, sizeof info->version);
    } else if (kl == 4 && !memcmp(l, "host", 4)) {
      value(v, vl, info->host, sizeof info->host);
    } else if (kl == 3 && !memcmp(l, "job", 3)) {
      value(v, vl, info->job, sizeof info->job);
    } else if (kl == 7 && !memcmp(l, "created", 7)) {
      value(v, vl, info->created, sizeof info->created);
    }
    /* other keys: informative (missing, source, command, verdict) */
  }
  if (m->n > 1) {
    qsort(m->v, (size_t)m->n, sizeof *m->v, cmp_listed);
    for (int i = 1; i < m->n; i++)
      if (!strcmp(m->v[i].name, m->v[i - 1].name))
        return fail(err, errlen, "MANIFEST lists %s twice", m->v[i].name);
  }
  info->nfiles = m->n;
  return 0;
}

/* ------------------------------------------------------------ archive -- */

static int all_zero_n(const unsigned char *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b[i])
      return 0;
  return 1;
}

static int all_zero(const unsigned char *b) {
  return all_zero_n(b, NTB_BLOCK);
}

static int header_sum_ok(const unsigned char *b, uint64_t *want, uint64_t *got) {
  uint64_t s = 0;
  for (int i = 0; i < NTB_BLOCK; i++)
    s += (i >= 148 && i < 156) ? ' ' : b[i];
  *got = s;
  return octal(b + 148, 8, want) == 0 && *want == s;
}

/* Skip the padding after n data bytes.  @return 0 or -1. */
static int skip_pad(struct src *s, uint64_t n, const char *what, char *err, size_t errlen) {
  size_t pad = (size_t)((NTB_BLOCK - n % NTB_BLOCK) % NTB_BLOCK);
  ssize_t r = src_read(s, NULL, pad, err, errlen);
  if (r < 0)
    return -1;
  if ((size_t)r < pad)
    return fail(err, errlen, "truncated: the archive ends inside the padding of %s", what);
  return 0;
}

static int read_archive(struct src *s, const struct ntb_sink *sink, struct ntb_info *info, char *err,
                        size_t errlen) {
  unsigned char b[NTB_BLOCK];
  struct manifest m = {0};
  char path[NTB_NAME_MAX + 2] = "", nm[NTB_NAME_MAX + 2], sn[NTB_NAME_MAX + 2];
  uint64_t pax_size = 0, total = 0;
  int64_t pax_mtime = 0;
  int has_path = 0, has_size = 0, has_mtime = 0, members = 0, rc = -1;
  unsigned char *chunk = malloc(NTB_CHUNK);
  XXH64_state_t *xs = XXH64_createState();
  if (!chunk || !xs) {
    fail(err, errlen, "out of memory");
    goto out;
  }
  for (;;) {
    uint64_t at = s->offset;
    ssize_t r = src_read(s, b, NTB_BLOCK, err, errlen);
    if (r < 0)
      goto out;
    if (r == 0 && at == 0) {
      fail(err, errlen, "empty: not a tar archive");
      goto out;
    }
    if (r < NTB_BLOCK) {
      if (at == 0)
        fail(err, errlen, "not a tar archive (shorter than one %d-byte header)", NTB_BLOCK);
      else
        fail(err, errlen, "truncated: the archive ends after %llu bytes%s", (unsigned long long)(at + (uint64_t)r),
             r ? ", inside a header" : ", without its end-of-archive blocks");
      goto out;
    }
    if (all_zero(b)) {
      if (!members) {
        fail(err, errlen, at == 0 ? "not an nccltrace bundle: an empty tar archive"
                                  : "not an nccltrace bundle: no member after a pax header");
        goto out;
      }
      /* The end.  What follows is tar's zero padding (a second zero
       * block, then to a whole record): read to the end all the same, so
       * that a cut or damaged zstd stream is caught by its frame checksum. */
      uint64_t tail = 0;
      for (;;) {
        r = src_read(s, b, NTB_BLOCK, err, errlen);
        if (r < 0)
          goto out;
        if (r == 0)
          break;
        tail += (uint64_t)r;
        if (tail > NTB_TAIL_MAX || !all_zero_n(b, (size_t)r)) {
          fail(err, errlen, "data after the end of the archive (archive byte %llu)", (unsigned long long)at);
          goto out;
        }
      }
      break;
    }
    uint64_t want = 0, got = 0;
    if (!header_sum_ok(b, &want, &got)) {
      if (at == 0)
        fail(err, errlen, "not a tar archive (no valid header at its start)");
      else
        fail(err, errlen, "corrupt header at archive byte %llu: checksum field %llo, the header sums to %llo",
             (unsigned long long)at, (unsigned long long)want, (unsigned long long)got);
      goto out;
    }
    if (memcmp(b + 257, "ustar", 5) != 0) {
      fail(err, errlen, "not a POSIX (ustar) tar header at archive byte %llu", (unsigned long long)at);
      goto out;
    }
    uint64_t size;
    if (octal(b + 124, 12, &size) != 0) {
      fail(err, errlen, "corrupt header at archive byte %llu: its size is not an octal number",
           (unsigned long long)at);
      goto out;
    }
    char type = (char)b[156];
    if (type == 'x' || type == 'g') {
      if (size > NTB_PAX_MAX) {
        fail(err, errlen, "a pax header of %llu bytes at archive byte %llu (the limit is %u)",
             (unsigned long long)size, (unsigned long long)at, NTB_PAX_MAX);
        goto out;
      }
      char *p = malloc((size_t)size + 1);
      if (!p) {
        fail(err, errlen, "out of memory");
        goto out;
      }
      r = src_read(s, p, (size_t)size, err, errlen);
      if (r >= 0 && (uint64_t)r < size)
        fail(err, errlen, "truncated: the archive ends inside a pax header");
      int bad = r < 0 || (uint64_t)r < size;
      if (!bad && type == 'x')
        bad = pax_parse(p, (size_t)size, path, sizeof path, &pax_size, &has_size, &pax_mtime, &has_mtime, err,
                        errlen) != 0;
      free(p);
      if (bad || skip_pad(s, size, "a pax header", err, errlen))
        goto out;
      if (type == 'x')
        has_path = path[0] != 0;
      continue;
    }
    if (has_path) {
      snprintf(nm, sizeof nm, "%s", path);
    } else {
      char name[101], prefix[156];
      memcpy(name, b, 100);
      name[100] = 0;
      memcpy(prefix, b + 345, 155);
      prefix[155] = 0;
      if ((size_t)snprintf(nm, sizeof nm, "%s%s%s", prefix, prefix[0] ? "/" : "", name) >= sizeof nm) {
        fail(err, errlen, "a member name longer than %d bytes at archive byte %llu", NTB_NAME_MAX,
             (unsigned long long)at);
        goto out;
      }
    }
    if (has_size)
      size = pax_size;
    uint64_t mt = 0;
    int64_t mtime_ns = has_mtime ? pax_mtime : (octal(b + 136, 12, &mt) == 0 && mt < 9000000000ull ? (int64_t)mt * 1000000000 : 0);
    has_path = has_size = has_mtime = 0;
    path[0] = 0;
    shown(nm, sn, sizeof sn);
    if (type == '5') { /* a directory (a bundle re-made by tar): nothing to read */
      if (skip_pad(s, 0, sn, err, errlen))
        goto out;
      continue;
    }
    if (type != '0' && type != '\0') {
      fail(err, errlen, "member %s: tar type '%c' (a link, device or other special file) is not allowed in a bundle",
           sn, type >= 0x20 && type < 0x7f ? type : '?');
      goto out;
    }
    if (!name_ok(nm)) {
      fail(err, errlen, "member %s: not a bundle member name (a relative path of [A-Za-z0-9._-] components, "
           "no '..')", sn);
      goto out;
    }
    if (size > NTB_MEMBER_MAX) {
      fail(err, errlen, "member %s: %llu bytes, over the %llu-byte limit of a bundle member", sn,
           (unsigned long long)size, (unsigned long long)NTB_MEMBER_MAX);
      goto out;
    }
    if (++members > NTB_MEMBERS_MAX + 1 || (total += size) > NTB_TOTAL_MAX) {
      fail(err, errlen, "more than %d members or %llu bytes: over the limits of a bundle", NTB_MEMBERS_MAX,
           (unsigned long long)NTB_TOTAL_MAX);
      goto out;
    }
    const char *rel;
    struct listed *e = NULL;
    if (members == 1) {
      /* <top>/MANIFEST, top one component */
      const char *sl = strchr(nm, '/');
      if (!sl || strcmp(sl + 1, NTB_MANIFEST) != 0 || (size_t)(sl - nm) >= sizeof info->top) {
        fail(err, errlen, "not an nccltrace bundle: its first member is %s, not TOP/%s", sn, NTB_MANIFEST);
        goto out;
      }
      memcpy(info->top, nm, (size_t)(sl - nm));
      info->top[sl - nm] = 0;
      if (size > NTB_MANIFEST_MAX) {
        fail(err, errlen, "a MANIFEST of %llu bytes (the limit is %u)", (unsigned long long)size, NTB_MANIFEST_MAX);
        goto out;
      }
      rel = sl + 1;
    } else {
      size_t tl = strlen(info->top);
      if (strncmp(nm, info->top, tl) != 0 || nm[tl] != '/') {
        fail(err, errlen, "member %s is outside the bundle's directory %s/", sn, info->top);
        goto out;
      }
      rel = nm + tl + 1;
      struct listed key;
      snprintf(key.name, sizeof key.name, "%s", rel);
      e = m.n ? bsearch(&key, m.v, (size_t)m.n, sizeof *m.v, cmp_listed) : NULL;
      if (!e) {
        fail(err, errlen, "member %s is not listed in the MANIFEST", sn);
        goto out;
      }
      if (e->seen) {
        fail(err, errlen, "member %s appears twice", sn);
        goto out;
      }
      if (e->size != size) {
        fail(err, errlen, "member %s: %llu bytes, the MANIFEST says %llu", sn, (unsigned long long)size,
             (unsigned long long)e->size);
        goto out;
      }
      e->seen = 1;
    }
    /* a listed member's time is the MANIFEST's, which its sum vouches for */
    if (sink && sink->begin && sink->begin(sink->ctx, rel, size, e ? e->mtime_ns : mtime_ns, err, errlen))
      goto out;
    char *man = NULL;
    if (members == 1 && !(man = malloc((size_t)size + 1))) {
      fail(err, errlen, "out of memory");
      goto out;
    }
    XXH64_reset(xs, 0);
    uint64_t left = size;
    while (left) {
      size_t k = left < NTB_CHUNK ? (size_t)left : NTB_CHUNK;
      r = src_read(s, chunk, k, err, errlen);
      if (r >= 0 && (size_t)r < k)
        fail(err, errlen, "truncated: the archive ends inside member %s (%llu of its %llu bytes read)", sn,
             (unsigned long long)(size - left + (uint64_t)r), (unsigned long long)size);
      if (r < 0 || (size_t)r < k) {
        free(man);
        goto out;
      }
      if (man)
        memcpy(man + (size - left), chunk, k);
      XXH64_update(xs, chunk, k);
      if (sink && sink->data && sink->data(sink->ctx, chunk, k, err, errlen)) {
        free(man);
        goto out;
      }
      left -= k;
    }
    if (man) {
      int bad = manifest_parse(man, (size_t)size, &m, info, err, errlen);
      free(man);
      if (bad)
        goto out;
    }
    if (skip_pad(s, size, sn, err, errlen))
      goto out;
    if (e && XXH64_digest(xs) != e->xxh) {
      fail(err, errlen, "member %s: its XXH64 %016llx is not the MANIFEST's %016llx: the bundle is corrupt", sn,
           (unsigned long long)XXH64_digest(xs), (unsigned long long)e->xxh);
      goto out;
    }
    if (sink && sink->end && sink->end(sink->ctx, err, errlen))
      goto out;
  }
  for (int i = 0; i < m.n; i++)
    if (!m.v[i].seen) {
      fail(err, errlen, "incomplete: %s, listed in the MANIFEST, is not in the archive", m.v[i].name);
      goto out;
    }
  rc = 0;
out:
  free(m.v);
  free(chunk);
  XXH64_freeState(xs);
  return rc;
}

static int read_src(struct src *s, const unsigned char *head, size_t n, const struct ntb_sink *sink,
                    struct ntb_info *info, char *err, size_t errlen) {
  struct ntb_info dummy;
  if (!info)
    info = &dummy;
  memset(info, 0, sizeof *info);
  s->zstd = ntb_sniff(head, n) == 2;
  s->out = malloc(NTB_CHUNK);
  s->inbuf = s->zstd && s->fd >= 0 ? malloc(NTB_CHUNK) : NULL;
  s->dctx = s->zstd ? ZSTD_createDCtx() : NULL;
  int rc;
  if (!s->out || (s->zstd && (!s->dctx || (s->fd >= 0 && !s->inbuf))))
    rc = fail(err, errlen, "out of memory");
  else if (s->dctx && ZSTD_isError(ZSTD_DCtx_setParameter(s->dctx, ZSTD_d_windowLogMax, 27)))
    rc = fail(err, errlen, "zstd: cannot set the window limit");
  else
    rc = read_archive(s, sink, info, err, errlen);
  free(s->out);
  free(s->inbuf);
  ZSTD_freeDCtx(s->dctx);
  return rc;
}

int ntb_read_mem(const void *buf, size_t len, const struct ntb_sink *sink, struct ntb_info *info, char *err,
                 size_t errlen) {
  struct src s = {.fd = -1, .mem = buf, .memlen = len};
  return read_src(&s, buf, len, sink, info, err, errlen);
}

int ntb_read_fd(int fd, const struct ntb_sink *sink, struct ntb_info *info, char *err, size_t errlen) {
  unsigned char head[4];
  ssize_t n = pread(fd, head, sizeof head, 0);
  if (n < 0)
    return fail(err, errlen, "read error: %s", strerror(errno));
  struct src s = {.fd = fd};
  if (lseek(fd, 0, SEEK_SET) != 0)
    return fail(err, errlen, "cannot seek: %s", strerror(errno));
  return read_src(&s, head, (size_t)n, sink, info, err, errlen);
}
