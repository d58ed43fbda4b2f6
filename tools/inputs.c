/* inputs.c -- turn command-line paths into the list of ring files and dumps
 * to read, and the default evidence directories.
 *
 * Thread-safety: reentrant.  Not signal-safe.  Symbolic links to
 * directories are not followed while recursing (a link loop must not hang
 * a 3 a.m. analysis); links named on the command line are.
 */
#include <dirent.h>
#include <errno.h>
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

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static int evidence_name(const char *name) {
  return has_suffix(name, ".zst") || has_suffix(name, ".ring");
}

static int walk(struct pathlist *pl, const char *dir, int depth, int *bad) {
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
        rc = walk(pl, p, depth + 1, bad);
    } else if (evidence_name(e->d_name) && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
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
      if (walk(&pl, dir, 0, bad))
        goto oom;
      /* Within one directory, a stable order (names carry rank and time). */
      qsort(pl.v + first, (size_t)(pl.n - first), sizeof *pl.v, cmp_str);
    } else if (pl_add(&pl, args[i])) {
      goto oom;
    }
  }
  *out = pl.v;
  return pl.n;
oom:
  ntt_paths_free(pl.v, pl.n);
  return -1;
}

void ntt_paths_free(char **paths, int n) {
  for (int i = 0; i < n; i++)
    free(paths[i]);
  free(paths);
}

void ntt_default_ring_dir(char *buf, size_t len) {
  const char *e = getenv("NCCLTRACE_RING_DIR");
  if (e && *e)
    snprintf(buf, len, "%s", e);
  else
    snprintf(buf, len, "/dev/shm/nccltrace-%u", (unsigned)getuid());
}

void ntt_default_dump_dir(char *buf, size_t len) {
  const char *e = getenv("NCCLTRACE_DIR");
  snprintf(buf, len, "%s", e && *e ? e : "./nccltrace-dumps");
}

int ntt_list_rings(const char *dir, char ***out) {
  struct pathlist pl = {0};
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".ring"))
      continue;
    char p[4096];
    struct stat st;
    if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p || lstat(p, &st) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    if (pl_add(&pl, p)) {
      closedir(d);
      ntt_paths_free(pl.v, pl.n);
      errno = ENOMEM;
      return -1;
    }
  }
  closedir(d);
  if (pl.n)
    qsort(pl.v, (size_t)pl.n, sizeof *pl.v, cmp_str);
  *out = pl.v;
  return pl.n;
}
