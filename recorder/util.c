/* util.c -- async-signal-safe string and file helpers (see util.h). */
#include "recorder/util.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ntr_sb_init(struct ntr_sb *sb, char *buf, size_t cap) {
  sb->buf = buf;
  sb->cap = cap;
  sb->len = 0;
  sb->overflow = cap == 0;
  if (cap)
    buf[0] = '\0';
}

static void put(struct ntr_sb *sb, char c) {
  if (sb->len + 1 >= sb->cap) {
    sb->overflow = 1;
    return;
  }
  sb->buf[sb->len++] = c;
  sb->buf[sb->len] = '\0';
}

void ntr_sb_str(struct ntr_sb *sb, const char *s) {
  while (*s)
    put(sb, *s++);
}

void ntr_sb_u64(struct ntr_sb *sb, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n)
    put(sb, tmp[--n]);
}

void ntr_sb_i64(struct ntr_sb *sb, int64_t v) {
  if (v < 0) {
    put(sb, '-');
    ntr_sb_u64(sb, (uint64_t)0 - (uint64_t)v);
  } else {
    ntr_sb_u64(sb, (uint64_t)v);
  }
}

void ntr_sb_hex(struct ntr_sb *sb, uint64_t v) {
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  put(sb, '0');
  put(sb, 'x');
  while (n)
    put(sb, tmp[--n]);
}

void ntr_sb_component(struct ntr_sb *sb, const char *s, size_t max) {
  for (size_t i = 0; i < max && s[i]; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_';
    put(sb, ok ? c : '_');
  }
}

void ntr_strlcpy(char *dst, const char *src, size_t dst_size) {
  size_t n = strlen(src);
  if (n >= dst_size)
    n = dst_size - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int ntr_mkdir_p(const char *path, mode_t mode) {
  char tmp[1024];
  size_t n = strlen(path);
  if (n == 0)
    return -ENOENT;
  if (n >= sizeof tmp)
    return -ENAMETOOLONG;
  memcpy(tmp, path, n + 1);
  while (n > 1 && tmp[n - 1] == '/')
    tmp[--n] = '\0';
  for (size_t i = 1; i <= n; i++) {
    if (tmp[i] != '/' && tmp[i] != '\0')
      continue;
    char saved = tmp[i];
    tmp[i] = '\0';
    /* intermediate directories get 0755 like mkdir -p; the leaf gets mode */
    if (mkdir(tmp, saved ? 0755 : mode) != 0 && errno != EEXIST)
      return -errno;
    tmp[i] = saved;
  }
  return 0;
}

int ntr_write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (w == 0)
      return -EIO;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}
