/* util.c -- async-signal-safe string and file helpers (see util.h). */
#include "recorder/util.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

static const struct {
  int e;
  const char *text;
} errno_texts[] = {
    {ENOSPC, "no space left on device"}, {EDQUOT, "disk quota exceeded"},
    {EFBIG, "file too large"},           {ENOMEM, "out of memory"},
    {EOPNOTSUPP, "not supported"},       {EACCES, "permission denied"},
    {EPERM, "not permitted"},            {ENOENT, "no such file or directory"},
    {ENOTDIR, "not a directory"},        {EROFS, "read-only file system"},
    {ELOOP, "a symlink"},                {EEXIST, "file exists"},
    {ENAMETOOLONG, "name too long"},     {EIO, "input/output error"},
    {EINVAL, "invalid argument"},        {EMFILE, "too many open files"},
};

void ntr_sb_errno(struct ntr_sb *sb, int e) {
  if (e < 0)
    e = -e;
  for (size_t i = 0; i < sizeof errno_texts / sizeof errno_texts[0]; i++)
    if (errno_texts[i].e == e) {
      ntr_sb_str(sb, errno_texts[i].text);
      uint64_t lim;
      if (e == EFBIG && ntr_fsize_limit(&lim)) {
        /* the usual cause, and not free space: name the limit */
        ntr_sb_str(sb, ": past RLIMIT_FSIZE=");
        ntr_sb_u64(sb, lim);
        ntr_sb_str(sb, " bytes (ulimit -f)");
      }
      return;
    }
  ntr_sb_str(sb, "errno ");
  ntr_sb_i64(sb, e);
}

int ntr_fsize_limit(uint64_t *bytes) {
  /* the raw system call: getrlimit is not on the async-signal-safe list,
   * prlimit64 is one system call */
  struct rlimit rl;
  if (syscall(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  *bytes = (uint64_t)rl.rlim_cur;
  return 1;
}

void ntr_sb_mib(struct ntr_sb *sb, uint64_t bytes) {
  uint64_t tenths = (bytes * 10 + (1u << 19)) >> 20;
  ntr_sb_u64(sb, tenths / 10);
  ntr_sb_str(sb, ".");
  ntr_sb_u64(sb, tenths % 10);
  ntr_sb_str(sb, " MiB");
}

void ntr_xfsz_block(struct ntr_xfsz *x) {
  sigset_t xfsz, pending;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  sigemptyset(&pending);
  sigpending(&pending);
  x->was_pending = sigismember(&pending, SIGXFSZ) == 1;
  pthread_sigmask(SIG_BLOCK, &xfsz, &x->old);
}

void ntr_xfsz_restore(struct ntr_xfsz *x) {
  sigset_t xfsz;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  if (!x->was_pending) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&xfsz, NULL, &zero) == SIGXFSZ) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &x->old, NULL);
}
