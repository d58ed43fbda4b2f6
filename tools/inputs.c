/* inputs.c -- turn command-line paths into the list of ring files and dumps
 * to read, and the default evidence directories.
 *
 * Thread-safety: reentrant.  Not signal-safe.  Symbolic links to
 * directories are not followed while recursing (a link loop must not hang
 * a 3 a.m. analysis); links named on the command line are.  A file reached
 * twice (named twice, or through a link) is listed once: by (st_dev,
 * st_ino), as find -L tells files apart.
 *
 * Ring directories (ntt_list_rings) are trusted only when they could not
 * have been planted: owned by the caller, writable by nobody else; see
 * ntt_ring_dir_trust below for the rule and for root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tools/ntt.h"

#define NTT_MAX_DEPTH 16

struct pathlist {
  char **v;
  int n, cap;
};

static int pl_add(struct pathlist *pl, const char *p) {
  if (pl->n == pl->cap) {
    int cap = pl->cap ? pl->cap * 2 : 32;
    char **nv = realloc(pl->v, (size_t)cap * sizeof *nv);
    if (!nv)
      return -1;
    pl->v = nv;
    pl->cap = cap;
  }
  if (!(pl->v[pl->n] = strdup(p)))
    return -1;
  pl->n++;
  return 0;
}

/* ------------------------------------------------------ (dev, ino) set -- */

static uint64_t seen_hash(uint64_t dev, uint64_t ino) {
  uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ ino;
  h ^= h >> 31;
  return h * 0xbf58476d1ce4e5b9ull;
}

int ntt_seen_add(struct ntt_seen *s, const struct stat *st) {
  uint64_t dev = (uint64_t)st->st_dev, ino = (uint64_t)st->st_ino;
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    uint64_t *v = calloc(cap * 2, sizeof *v); /* pairs; ino + 1 so that 0 is empty */
    if (!v)
      return -1;
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->v[2 * i + 1])
        continue;
      size_t j = seen_hash(s->v[2 * i], s->v[2 * i + 1]) & (cap - 1);
      while (v[2 * j + 1])
        j = (j + 1) & (cap - 1);
      v[2 * j] = s->v[2 * i];
      v[2 * j + 1] = s->v[2 * i + 1];
    }
    free(s->v);
    s->v = v;
    s->cap = cap;
  }
  size_t j = seen_hash(dev, ino + 1) & (s->cap - 1);
  for (; s->v[2 * j + 1]; j = (j + 1) & (s->cap - 1))
    if (s->v[2 * j] == dev && s->v[2 * j + 1] == ino + 1)
      return 0;
  s->v[2 * j] = dev;
  s->v[2 * j + 1] = ino + 1;
  s->n++;
  return 1;
}

void ntt_seen_free(struct ntt_seen *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A bundle (*.tar.zst, nccltrace bundle) kept beside the evidence is read
 * only when named: it holds copies of what lies next to it. */
static int evidence_name(const char *name) {
  return (has_suffix(name, ".zst") && !has_suffix(name, ".tar.zst") && !has_suffix(name, ".tzst")) ||
         has_suffix(name, ".ring");
}

static int walk(struct pathlist *pl, const char *dir, int depth, int *bad, struct ntt_seen *seen) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "nccltrace: %s: %s\n", dir, strerror(errno));
    (*bad)++;
    return 0;
  }
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d))) {
    if (e->d_name[0] == '.')
      continue; /* ".", "..", and the recorder's temporary files */
    char p[4096];
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p)
      continue;
    struct stat st;
    if (lstat(p, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < NTT_MAX_DEPTH)
        rc = walk(pl, p, depth + 1, bad, seen);
    } else if (evidence_name(e->d_name) && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
      /* A link is listed once with what it points to; a dangling one is
       * listed, and its load says why it cannot be read. */
      struct stat t;
      int fresh = stat(p, &t) == 0 ? ntt_seen_add(seen, &t) : 1;
      if (fresh < 0)
        rc = -1;
      else if (fresh)
        rc = pl_add(pl, p);
    }
  }
  closedir(d);
  return rc;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int ntt_expand_inputs(char *const *args, int nargs, char ***out, int *bad) {
  struct pathlist pl = {0};
  struct ntt_seen seen = {0};
  for (int i = 0; i < nargs; i++) {
    struct stat st;
    if (stat(args[i], &st) != 0) {
      fprintf(stderr, "nccltrace: %s: %s\n", args[i], strerror(errno));
      (*bad)++;
      continue;
    }
    int first = pl.n;
    if (S_ISDIR(st.st_mode)) {
      char dir[4096];
      snprintf(dir, sizeof dir, "%s", args[i]);
      size_t l = strlen(dir);
      while (l > 1 && dir[l - 1] == '/')
        dir[--l] = '\0';
      if (walk(&pl, dir, 0, bad, &seen))
        goto oom;
      /* Within one directory, a stable order (names carry rank and time). */
      qsort(pl.v + first, (size_t)(pl.n - first), sizeof *pl.v, cmp_str);
    } else {
      int fresh = ntt_seen_add(&seen, &st);
      if (fresh < 0 || (fresh && pl_add(&pl, args[i])))
        goto oom;
    }
  }
  ntt_seen_free(&seen);
  *out = pl.v;
  return pl.n;
oom:
  ntt_seen_free(&seen);
  ntt_paths_free(pl.v, pl.n);
  return -1;
}

void ntt_paths_free(char **paths, int n) {
  for (int i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}

int ntt_default_ring_dir(char *buf, size_t len) {
  const char *e = getenv("NCCLTRACE_RING_DIR");
  if (e && *e) {
    snprintf(buf, len, "%s", e);
    return 1;
  }
  snprintf(buf, len, "/dev/shm/nccltrace-%u", (unsigned)getuid());
  return 0;
}

/* The rule: a ring directory is read only when nobody but its owner can
 * have put files there -- not writable by group or others -- and its owner
 * is the caller (euid).  Root also reads a directory of another user that
 * it was pointed at (--rings or NCCLTRACE_RING_DIR): that user's rings, as
 * an administrator collecting for them would; a default directory must be
 * root's own.  In a trusted directory, a ring is read only when it is owned
 * by the directory's owner (for root also: by root) and writable by nobody
 * else.  @return 0 trusted (*owner set), -1 with why. */
static int dir_trust(const struct stat *st, int named, uid_t *owner, char *why, size_t whylen) {
  uid_t me = geteuid();
  if (!S_ISDIR(st->st_mode)) {
    snprintf(why, whylen, "not a directory");
    return -1;
  }
  if (st->st_uid != me && !(me == 0 && named)) {
    snprintf(why, whylen, "owned by uid %u, not by you (uid %u): ignored, its rings could be anyone's",
             (unsigned)st->st_uid, (unsigned)me);
    return -1;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, whylen, "writable by %s (mode %04o): ignored, anyone could have put rings there "
             "(chmod go-w it if it is yours)", st->st_mode & S_IWOTH ? "others" : "its group",
             (unsigned)(st->st_mode & 07777));
    return -1;
  }
  *owner = st->st_uid;
  return 0;
}

static int file_trust(const struct stat *st, uid_t owner, char *why, size_t whylen) {
  if (st->st_uid != owner && !(geteuid() == 0 && st->st_uid == 0)) {
    snprintf(why, whylen, "owned by uid %u, not by the directory's owner (uid %u): ignored", (unsigned)st->st_uid,
             (unsigned)owner);
    return -1;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, whylen, "writable by %s (mode %04o): ignored", st->st_mode & S_IWOTH ? "others" : "its group",
             (unsigned)(st->st_mode & 07777));
    return -1;
  }
  return 0;
}

void ntt_default_dump_dir(char *buf, size_t len) {
  const char *e = getenv("NCCLTRACE_DIR");
  snprintf(buf, len, "%s", e && *e ? e : "./nccltrace-dumps");
}

static int list_one(struct pathlist *plp, const char *dir, int named, char *why, size_t whylen) {
  struct pathlist pl = *plp;
  /* The directory checked is the one listed: opened once, then read
   * through that descriptor. */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    snprintf(why, whylen, "%s", strerror(e));
    errno = e;
    return -1;
  }
  struct stat dst;
  uid_t owner;
  if (fstat(dfd, &dst) != 0) {
    int e = errno;
    snprintf(why, whylen, "%s", strerror(e));
    close(dfd);
    errno = e;
    return -1;
  }
  if (dir_trust(&dst, named, &owner, why, whylen)) {
    close(dfd);
    errno = EPERM;
    return -1;
  }
  DIR *d = fdopendir(dfd);
  if (!d) {
    int e = errno;
    snprintf(why, whylen, "%s", strerror(e));
    close(dfd);
    errno = e;
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".ring"))
      continue;
    char p[4096], fwhy[256];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p ||
        fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (file_trust(&st, owner, fwhy, sizeof fwhy)) {
      char shown[4096];
      fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(p, shown, sizeof shown), fwhy);
      continue;
    }
    if (pl_add(&pl, p)) {
      closedir(d);
      *plp = pl;
      snprintf(why, whylen, "%s", strerror(ENOMEM));
      errno = ENOMEM;
      return -1;
    }
  }
  closedir(d);
  *plp = pl;
  return 0;
}

/* Where the tracer puts rings when dir is refused or full
 * (recorder/ring_place.c): a private sibling "<dir>-XXXXXX", then
 * $TMPDIR (else /tmp)/nccltrace-<euid> and its private siblings (both
 * $TMPDIR's and /tmp's: the job's TMPDIR may not be ours).  Each is listed under the same trust
 * rule as dir; a missing one is no error. */
static int is_private_sibling(const char *name, const char *base) {
  size_t n = strlen(base);
  if (strncmp(name, base, n) != 0 || name[n] != '-' || strlen(name + n + 1) != 6)
    return 0;
  for (const char *c = name + n + 1; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
      return 0;
  return 1;
}

static int list_siblings(struct pathlist *pl, const char *dir) {
  char parent[4096];
  const char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : dir;
  if (!*base)
    return 0;
  if (!slash)
    snprintf(parent, sizeof parent, ".");
  else if (slash == dir)
    snprintf(parent, sizeof parent, "/");
  else
    snprintf(parent, sizeof parent, "%.*s", (int)(slash - dir), dir);
  DIR *d = opendir(parent);
  if (!d)
    return 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) && !rc) {
    char p[4096], why[512];
    if (!is_private_sibling(e->d_name, base) ||
        snprintf(p, sizeof p, "%s/%s", strcmp(parent, "/") ? parent : "", e->d_name) >= (int)sizeof p)
      continue;
    if (list_one(pl, p, 0, why, sizeof why) && errno != ENOENT && errno != ENOTDIR) {
      if (errno == ENOMEM)
        rc = -1;
      else {
        char shown[4096];
        fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(p, shown, sizeof shown), why);
      }
    }
  }
  closedir(d);
  return rc;
}

int ntt_ring_fallback_dirs(char out[2][4096]) {
  const char *t = getenv("TMPDIR");
  int n = 0;
  if (t && t[0] == '/')
    snprintf(out[n++], 4096, "%s/nccltrace-%u", t, (unsigned)geteuid());
  snprintf(out[n], 4096, "/tmp/nccltrace-%u", (unsigned)geteuid());
  if (!n || strcmp(out[0], out[1]))
    n++;
  return n;
}

void ntt_ring_places(const char *dir, char *buf, size_t len) {
  char other[2][4096], a[4096], b[4096];
  int n = ntt_ring_fallback_dirs(other);
  int k = snprintf(buf, len, "%s (and %s-*)", ntt_esc(dir, a, sizeof a), a);
  for (int i = 0; i < n && k > 0 && (size_t)k < len; i++)
    if (strcmp(other[i], dir))
      k += snprintf(buf + k, len - (size_t)k, ", %s (and %s-*)", ntt_esc(other[i], b, sizeof b), b);
}

int ntt_list_rings(const char *dir, int named, char ***out, char *why, size_t whylen) {
  struct pathlist pl = {0};
  int rc = list_one(&pl, dir, named, why, whylen), err = errno;
  if (rc && err != ENOENT && err != EPERM) {
    ntt_paths_free(pl.v, pl.n);
    errno = err;
    return -1;
  }
  /* The tracer's other places (recorder/ring_place.c): a named directory
   * too, since rings go there when it is full, and the recovery command of
   * the user guide names the configured directory. */
  char other[2][4096], owhy[512];
  int nother = ntt_ring_fallback_dirs(other);
  for (int i = 0; i < nother; i++) {
    if (!strcmp(other[i], dir))
      continue;
    if ((list_one(&pl, other[i], 0, owhy, sizeof owhy) && errno == ENOMEM) || list_siblings(&pl, other[i])) {
      ntt_paths_free(pl.v, pl.n);
      snprintf(why, whylen, "%s", strerror(ENOMEM));
      errno = ENOMEM;
      return -1;
    }
  }
  if (list_siblings(&pl, dir)) {
    ntt_paths_free(pl.v, pl.n);
    snprintf(why, whylen, "%s", strerror(ENOMEM));
    errno = ENOMEM;
    return -1;
  }
  if (rc && !pl.n) {
    errno = err;
    return -1;
  }
  if (rc && err == EPERM) { /* refused, but the tracer's fallbacks hold rings */
    char shown[4096];
    fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(dir, shown, sizeof shown), why);
  }
  if (pl.n)
    qsort(pl.v, (size_t)pl.n, sizeof *pl.v, cmp_str);
  *out = pl.v;
  return pl.n;
}
