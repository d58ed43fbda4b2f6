/* safedir.c -- component-by-component directory walk (see safedir.h). */
#include "recorder/safedir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recorder/util.h"

static int fail(int *fd, int rc) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
  return rc;
}

/* The symlink st (in a parent with mode pmode) may be followed. */
static int symlink_ok(const struct stat *st, mode_t pmode, int last, unsigned flags) {
  if (last && (flags & NTR_SAFEDIR_NOFOLLOW_LAST))
    return 0;
  int trusted = st->st_uid == geteuid() || st->st_uid == 0;
  return trusted || (!last && !(pmode & S_IWOTH));
}

unsigned ntr_safedir_dump_mode(unsigned m) {
  unsigned g = m >> 3 & 7, o = m & 7;
  g = (g & 4 ? 5 : 0) | (g & 2);
  o = o & 4 ? 5 : 0;
  return 0700 | g << 3 | o;
}

int ntr_safedir_open(struct ntr_safedir *d, const char *path, unsigned flags) {
  return ntr_safedir_open_mode(d, path, flags, 0700);
}

int ntr_safedir_open_mode(struct ntr_safedir *d, const char *path, unsigned flags, unsigned leaf) {
  d->fd = -1;
  d->bad_uid = -1;
  d->bad_mode = 0;
  d->bad_len = 0;
  size_t n = path ? strlen(path) : 0;
  if (n == 0)
    return -ENOENT;
  if (n >= 1024)
    return -ENAMETOOLONG;
  int fd = open(path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat pst, st;
  if (fstat(fd, &pst) != 0)
    return fail(&fd, -errno);
  size_t i = 0;
  for (;;) {
    while (i < n && path[i] == '/')
      i++;
    if (i >= n)
      break;
    size_t j = i;
    while (j < n && path[j] != '/')
      j++;
    char comp[256];
    if (j - i >= sizeof comp)
      return fail(&fd, -ENAMETOOLONG);
    memcpy(comp, path + i, j - i);
    comp[j - i] = '\0';
    size_t k = j;
    while (k < n && path[k] == '/')
      k++;
    int last = k >= n;
    i = j;
    if (!strcmp(comp, "."))
      continue;
    int r = fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW);
    if (r != 0 && errno == ENOENT && (flags & NTR_SAFEDIR_CREATE)) {
      /* intermediate directories get 0755 like mkdir -p; the leaf its own (0700) */
      if (mkdirat(fd, comp, last ? (mode_t)(leaf & 0777) : 0755) != 0 && errno != EEXIST)
        return fail(&fd, -errno);
      r = fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW);
    }
    if (r != 0)
      return fail(&fd, -errno);
    int nofollow = O_NOFOLLOW;
    if (S_ISLNK(st.st_mode)) {
      if (!symlink_ok(&st, pst.st_mode, last, flags)) {
        d->bad_uid = st.st_uid;
        d->bad_len = (uint32_t)j;
        return fail(&fd, -ELOOP);
      }
      nofollow = 0; /* a trusted link: the kernel resolves its target */
    }
    int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | nofollow);
    if (nfd < 0) {
      if (errno == ELOOP)
        d->bad_len = (uint32_t)j; /* swapped for a symlink after the check */
      return fail(&fd, -errno);
    }
    close(fd);
    fd = nfd;
    if (fstat(fd, &pst) != 0)
      return fail(&fd, -errno);
  }
  /* pst is the directory reached */
  if (!S_ISDIR(pst.st_mode))
    return fail(&fd, -ENOTDIR);
  if (!(flags & NTR_SAFEDIR_SHARED) && pst.st_uid != geteuid()) {
    d->bad_uid = pst.st_uid;
    d->bad_len = (uint32_t)n;
    return fail(&fd, -EPERM);
  }
  if (!(flags & NTR_SAFEDIR_SHARED) && (pst.st_mode & (flags & NTR_SAFEDIR_GROUP_OK ? S_IWOTH : S_IWGRP | S_IWOTH))) {
    d->bad_mode = (uint32_t)(pst.st_mode & 07777);
    d->bad_len = (uint32_t)n;
    return fail(&fd, -EPERM);
  }
  d->fd = fd;
  d->dev = (uint64_t)pst.st_dev;
  d->ino = (uint64_t)pst.st_ino;
  return 0;
}

int ntr_safedir_valid(const struct ntr_safedir *d) {
  struct stat st;
  if (d->fd < 0 || fstat(d->fd, &st) != 0)
    return 0;
  return S_ISDIR(st.st_mode) && (uint64_t)st.st_dev == d->dev && (uint64_t)st.st_ino == d->ino;
}

void ntr_safedir_close(struct ntr_safedir *d) {
  if (ntr_safedir_valid(d))
    close(d->fd);
  d->fd = -1;
}

/* 6 characters of [a-z0-9] from getrandom, else from the clock and pid:
 * a guessed name only makes mkdirat fail with EEXIST and we try another. */
static void random_suffix(char *out, unsigned attempt) {
  unsigned char b[6];
  if (syscall(SYS_getrandom, b, sizeof b, 0x0001 /* GRND_NONBLOCK */) != (long)sizeof b) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)getpid() << 20 ^ attempt;
    for (int i = 0; i < 6; i++, x >>= 7)
      b[i] = (unsigned char)x;
  }
  for (int i = 0; i < 6; i++)
    out[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[b[i] % 36];
  out[6] = '\0';
}

int ntr_safedir_private(struct ntr_safedir *d, const char *parent, const char *prefix, char *out,
                        size_t cap) {
  struct ntr_safedir p;
  /* The parent may be shared (/tmp is root's and world-writable): only the
   * walk to it must be safe; the new directory is ours alone. */
  int rc = ntr_safedir_open(&p, parent, NTR_SAFEDIR_SHARED);
  if (rc)
    return rc;
  for (unsigned attempt = 0; attempt < 32; attempt++) {
    char name[128], sfx[8];
    random_suffix(sfx, attempt);
    struct ntr_sb sb;
    ntr_sb_init(&sb, name, sizeof name);
    ntr_sb_str(&sb, prefix);
    ntr_sb_str(&sb, sfx);
    if (sb.overflow) {
      rc = -ENAMETOOLONG;
      break;
    }
    if (mkdirat(p.fd, name, 0700) != 0) {
      rc = -errno;
      if (errno == EEXIST)
        continue;
      break;
    }
    int fd = openat(p.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
      rc = fd < 0 ? -errno : -EPERM;
      if (fd >= 0)
        close(fd);
      break;
    }
    ntr_sb_init(&sb, out, cap);
    ntr_sb_str(&sb, parent);
    ntr_sb_str(&sb, "/");
    ntr_sb_str(&sb, name);
    if (sb.overflow) {
      close(fd);
      unlinkat(p.fd, name, AT_REMOVEDIR);
      rc = -ENAMETOOLONG;
      break;
    }
    d->fd = fd;
    d->dev = (uint64_t)st.st_dev;
    d->ino = (uint64_t)st.st_ino;
    d->bad_uid = -1;
    d->bad_mode = 0;
    d->bad_len = 0;
    rc = 0;
    break;
  }
  close(p.fd);
  return rc;
}

int ntr_safedir_sibling(struct ntr_safedir *d, const char *path, char *out, size_t cap) {
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/')
    n--;
  size_t b = n;
  while (b > 0 && path[b - 1] != '/')
    b--;
  char parent[1024], prefix[128];
  if (b == n || n - b + 2 > sizeof prefix)
    return -EINVAL;
  memcpy(prefix, path + b, n - b);
  prefix[n - b] = '-';
  prefix[n - b + 1] = '\0';
  size_t p = b > 1 ? b - 1 : b; /* "/x" -> "/", "a/x" -> "a", "x" -> "." */
  if (p + 1 > sizeof parent)
    return -ENAMETOOLONG;
  if (p == 0) {
    parent[0] = '.';
    parent[1] = '\0';
  } else {
    memcpy(parent, path, p);
    parent[p] = '\0';
  }
  return ntr_safedir_private(d, parent, prefix, out, cap);
}

void ntr_safedir_say(struct ntr_sb *sb, const char *what, const char *path, int rc,
                     const struct ntr_safedir *d) {
  ntr_sb_str(sb, what);
  ntr_sb_str(sb, path);
  if (rc == -ELOOP) {
    ntr_sb_str(sb, " is or passes through a symlink");
    if (d->bad_uid >= 0 && (uid_t)d->bad_uid != geteuid()) {
      ntr_sb_str(sb, " owned by uid ");
      ntr_sb_i64(sb, d->bad_uid);
    }
  } else if (rc == -EPERM && d->bad_mode) {
    ntr_sb_str(sb, d->bad_mode & S_IWOTH ? " is writable by others (mode " : " is writable by its group (mode ");
    char m[5] = {(char)('0' + (d->bad_mode >> 9 & 7)), (char)('0' + (d->bad_mode >> 6 & 7)),
                 (char)('0' + (d->bad_mode >> 3 & 7)), (char)('0' + (d->bad_mode & 7)), 0};
    ntr_sb_str(sb, m);
    ntr_sb_str(sb, ")");
  } else if (rc == -EPERM) {
    ntr_sb_str(sb, " is owned by uid ");
    ntr_sb_i64(sb, d->bad_uid);
  } else {
    ntr_sb_str(sb, ": ");
    ntr_sb_errno(sb, rc);
  }
}
