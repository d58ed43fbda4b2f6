/* bundle_open.c -- a bundle named as an input of analyze, decode or export:
 * verified and extracted into a private temporary directory that stands in
 * for it, removed when the command ends.
 *
 * Thread-safety: ntb_open_inputs runs on the main thread before a command
 * starts others.  The cleanup list is process-wide; its signal handler
 * (SIGINT, SIGTERM, SIGHUP) is async-signal-safe: it only calls unlink and
 * rmdir on paths recorded before, then re-raises the signal.  Appends to the
 * list block those signals, so the handler never sees it half-grown.
 *
 * Why a directory, not memory: analyze's loader budgets memory, reads with
 * threads and checks files by (device, inode); extracted files go through
 * exactly the code that reads a directory, so a bundle's verdict is the
 * directory's.  Extracted files are the caller's (mode 0600 in a 0700
 * directory): naming a bundle is trusting its contents as one's own, which
 * are still read as hostile input.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include "tools/bundle.h"
#include "tools/ntt.h"

/* --------------------------------------------------------- cleanup -- */

static char **volatile clean_v;      /* created files and directories, in order */
static volatile sig_atomic_t clean_n;
static int clean_cap, clean_hooked;

static void clean_all(void) {
  for (sig_atomic_t i = clean_n; i-- > 0;)
    if (unlink(clean_v[i]) != 0)
      rmdir(clean_v[i]);
  clean_n = 0;
}

static void clean_signal(int sig) {
  int e = errno;
  clean_all();
  signal(sig, SIG_DFL);
  raise(sig);
  errno = e;
}

int ntb_clean_add(const char *path) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigprocmask(SIG_BLOCK, &block, &old);
  int rc = 0;
  char *p = strdup(path);
  if (!p) {
    rc = -1;
  } else if (clean_n == clean_cap) {
    int cap = clean_cap ? 2 * clean_cap : 64;
    char **v = realloc(clean_v, (size_t)cap * sizeof *v);
    if (v) {
      clean_v = v;
      clean_cap = cap;
    } else {
      free(p);
      rc = -1;
    }
  }
  if (!rc) {
    clean_v[clean_n] = p;
    clean_n = clean_n + 1;
  }
  if (!clean_hooked) {
    clean_hooked = 1;
    atexit(clean_all);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = clean_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* ------------------------------------------------------ extraction -- */

struct extract {
  char tmp[4096];  /* the private directory */
  char root[4096]; /* <tmp>/<top>, once the reader knows top */
  struct ntb_info *info;
  int64_t mtime_ns; /* of the member being written */
  int fd;
  char cur[4096];
  char **files; /* dumps and rings extracted, for decode */
  int nfiles, cap;
};

static int mkdirs_under(struct extract *x, const char *rel, char *err, size_t errlen) {
  char p[4096];
  if ((size_t)snprintf(p, sizeof p, "%s/%s", x->root, rel) >= sizeof p) {
    snprintf(err, errlen, "path too long");
    return -1;
  }
  for (char *s = p + strlen(x->root) + 1; (s = strchr(s, '/')) != NULL; s++) {
    *s = 0;
    if (mkdir(p, 0700) == 0) {
      if (ntb_clean_add(p)) {
        snprintf(err, errlen, "out of memory");
        return -1;
      }
    } else if (errno != EEXIST) {
      snprintf(err, errlen, "cannot make %s: %s", p, strerror(errno));
      return -1;
    }
    *s = '/';
  }
  return 0;
}

static int is_evidence(const char *rel) {
  size_t l = strlen(rel);
  return (l > 4 && !strcmp(rel + l - 4, ".zst")) || (l > 5 && !strcmp(rel + l - 5, ".ring"));
}

static int x_begin(void *ctx, const char *rel, uint64_t size, int64_t mtime_ns, char *err, size_t errlen) {
  struct extract *x = ctx;
  (void)size;
  x->mtime_ns = mtime_ns;
  if (!x->root[0]) { /* the MANIFEST, first: the reader has set info->top */
    if ((size_t)snprintf(x->root, sizeof x->root, "%s/%s", x->tmp, x->info->top) >= sizeof x->root ||
        mkdir(x->root, 0700) != 0 || ntb_clean_add(x->root)) {
      snprintf(err, errlen, "cannot make %s: %s", x->root, strerror(errno));
      return -1;
    }
  }
  if (mkdirs_under(x, rel, err, errlen))
    return -1;
  if ((size_t)snprintf(x->cur, sizeof x->cur, "%s/%s", x->root, rel) >= sizeof x->cur) {
    snprintf(err, errlen, "path too long");
    return -1;
  }
  x->fd = open(x->cur, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (x->fd < 0) {
    snprintf(err, errlen, "cannot create %s: %s", x->cur, strerror(errno));
    return -1;
  }
  if (ntb_clean_add(x->cur)) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (is_evidence(rel) && strchr(rel, '/')) {
    if (x->nfiles == x->cap) {
      int cap = x->cap ? 2 * x->cap : 32;
      char **v = realloc(x->files, (size_t)cap * sizeof *v);
      if (!v) {
        snprintf(err, errlen, "out of memory");
        return -1;
      }
      x->files = v;
      x->cap = cap;
    }
    if (!(x->files[x->nfiles] = strdup(x->cur))) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    x->nfiles++;
  }
  return 0;
}

static int x_data(void *ctx, const void *p, size_t n, char *err, size_t errlen) {
  struct extract *x = ctx;
  const char *c = p;
  while (n) {
    ssize_t r = write(x->fd, c, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      snprintf(err, errlen, "cannot write %s: %s", x->cur, r < 0 ? strerror(errno) : "no space");
      return -1;
    }
    c += r;
    n -= (size_t)r;
  }
  return 0;
}

static int x_end(void *ctx, char *err, size_t errlen) {
  struct extract *x = ctx;
  /* the member's time, as tar xf gives it: a Flight Recorder dump's time
   * is its file's */
  struct timespec ts[2] = {{x->mtime_ns / 1000000000, x->mtime_ns % 1000000000},
                           {x->mtime_ns / 1000000000, x->mtime_ns % 1000000000}};
  if (x->mtime_ns > 0)
    futimens(x->fd, ts);
  int rc = close(x->fd);
  x->fd = -1;
  if (rc != 0) {
    snprintf(err, errlen, "cannot write %s: %s", x->cur, strerror(errno));
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------- inputs -- */

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Is path a bundle?  By name, or by content: a tar header, plain or at
 * the start of a zstd stream (a dump is a zstd stream too: its first
 * bytes decompressed are no tar header).  @return 1 yes, 0 no. */
int ntb_is_bundle(const char *path) {
  if (has_suffix(path, ".tar") || has_suffix(path, ".tar.zst") || has_suffix(path, ".tzst"))
    return 1;
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
    return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return 0;
  unsigned char head[4096], out[512];
  ssize_t n = read(fd, head, sizeof head);
  close(fd);
  if (n <= 0)
    return 0;
  int k = ntb_sniff(head, (size_t)n);
  if (k != 2)
    return k == 1;
  ZSTD_DCtx *d = ZSTD_createDCtx();
  if (!d)
    return 0;
  ZSTD_inBuffer in = {head, (size_t)n, 0};
  ZSTD_outBuffer o = {out, sizeof out, 0};
  while (o.pos < o.size && in.pos < in.size) {
    size_t r = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(r) || r == 0)
      break;
  }
  ZSTD_freeDCtx(d);
  return ntb_sniff(out, o.pos) == 1;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Extract path into a fresh directory.  @return 0 with x filled, or -1
 * with err (everything made for it removed). */
static int extract(const char *path, struct extract *x, struct ntb_info *info, char *err, size_t errlen) {
  const char *t = getenv("TMPDIR");
  char dir[1024];
  if ((size_t)snprintf(dir, sizeof dir, "%s/nccltrace-bundle-XXXXXX", t && t[0] == '/' ? t : "/tmp") >= sizeof dir ||
      !mkdtemp(dir)) {
    snprintf(err, errlen, "cannot make a directory to read it into (%.200s): %s", dir, strerror(errno));
    return -1;
  }
  int first = clean_n;
  if (ntb_clean_add(dir)) {
    rmdir(dir);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
  } else {
    x->fd = -1;
    x->info = info;
    snprintf(x->tmp, sizeof x->tmp, "%s", dir);
    struct ntb_sink sink = {x_begin, x_data, x_end, x};
    int rc = ntb_read_fd(fd, &sink, info, err, errlen);
    close(fd);
    if (x->fd >= 0)
      close(x->fd);
    if (!rc)
      return 0;
  }
  /* remove what this bundle made, newest first */
  for (sig_atomic_t i = clean_n; i-- > first;) {
    if (unlink(clean_v[i]) != 0)
      rmdir(clean_v[i]);
  }
  clean_n = first;
  for (int i = 0; i < x->nfiles; i++)
    free(x->files[i]);
  free(x->files);
  x->files = NULL;
  x->nfiles = 0;
  return -1;
}

int ntb_open_inputs(const char *cmd, char *const *args, int nargs, int files, char ***out) {
  char **v = NULL;
  int n = 0, cap = 0, bad = 0;
  for (int i = 0; i < nargs; i++) {
    struct extract x;
    memset(&x, 0, sizeof x);
    char err[1024], se[1200], sp[4096];
    struct ntb_info info;
    int is = ntb_is_bundle(args[i]);
    if (is && extract(args[i], &x, &info, err, sizeof err) != 0) {
      fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(args[i], sp, sizeof sp), ntt_esc(err, se, sizeof se));
      bad++;
      continue;
    }
    int add = !is ? 1 : files ? x.nfiles : 1;
    if (n + add > cap) {
      int nc = (n + add) * 2 + 8;
      char **nv = realloc(v, (size_t)nc * sizeof *nv);
      if (!nv) {
        bad++;
        break;
      }
      v = nv;
      cap = nc;
    }
    if (!is) {
      v[n++] = strdup(args[i]);
      continue;
    }
    fprintf(stderr, "nccltrace: %s: bundle %s: job %s, made on %s at %s, %d files; read from %s\n", cmd,
            ntt_esc(args[i], sp, sizeof sp), info.job[0] ? info.job : "-", info.host[0] ? info.host : "?",
            info.created[0] ? info.created : "?", info.nfiles, x.root);
    if (files) {
      qsort(x.files, (size_t)x.nfiles, sizeof *x.files, cmp_str);
      for (int k = 0; k < x.nfiles; k++)
        v[n++] = x.files[k];
      free(x.files);
    } else {
      v[n++] = strdup(x.root);
      for (int k = 0; k < x.nfiles; k++)
        free(x.files[k]);
      free(x.files);
    }
  }
  for (int i = 0; i < n; i++)
    if (!v[i])
      bad++;
  if (bad) {
    ntt_paths_free(v, n);
    return -1;
  }
  *out = v;
  return n;
}
