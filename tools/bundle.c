/* bundle.c -- `nccltrace bundle [--job ID] [--out FILE] [--rings R]
 * [--no-rings] [PATH...]`: one file with a job's evidence, its verdict and a
 * MANIFEST, for a ticket (tools/bundle.h is the container, docs/bundle.md
 * the format).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 *
 * What goes in, for the one job chosen as analyze chooses it
 * (tools/jobpick.c): its dumps as they are; its rings as dumps made the way
 * collect makes them (a ring of a live process is read as analyze reads it,
 * torn slots dropped, and marked alive: NTR_TRIG_F_ALIVE), never removed;
 * the `nccltrace run` exit files of that job (or of none); every PyTorch
 * Flight Recorder dump given (they carry no job id: said so).  Then
 * `nccltrace analyze` on exactly those files writes verdict.txt and
 * verdict.json, and the MANIFEST lists each member's size and XXH64, what
 * was left out and why.  The evidence is staged in a private directory
 * (symbolic links to the dumps; ring snapshots written there), so the
 * verdict is the one a teammate's `nccltrace analyze BUNDLE` gives.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include "ntr_config.h"
#include "recorder/dump.h"
#include "tools/analyze/analyze.h"
#include "tools/bundle.h"
#include "tools/fr/fr.h"
#include "tools/ntt.h"

#define NTB_WALK_DEPTH 16

enum kind { K_DUMP, K_RING, K_EXIT, K_FR, K_NKINDS };
static const char *const kind_dir[K_NKINDS] = {"dumps", "rings", "exit", "fr"};

struct item {
  char *src;
  enum kind kind;
  char job[64];
  int named;                  /* named on the command line */
  char rel[NTB_NAME_MAX + 1]; /* member name below the top directory */
  char staged[4096];
  uint64_t size, xxh;
  int64_t mtime;
};

struct bundle {
  struct item *v;
  int n, cap;
  char *missing; /* "missing WHAT: WHY\n" lines for the MANIFEST */
  size_t mlen;
  int nmissing;
  struct ntt_seen seen;
  uint64_t total; /* bytes staged */
  char **made;    /* staged paths, to remove */
  int nmade, capmade;
};

static const char usage_line[] = "usage: nccltrace bundle [--job ID] [--out FILE] [--rings R] [--no-rings] [PATH...]\n";

static void miss(struct bundle *b, const char *what, const char *why) {
  char w1[4096], w2[1024];
  ntt_esc(what, w1, sizeof w1);
  ntt_esc(why, w2, sizeof w2);
  fprintf(stderr, "nccltrace: bundle: %s: %s\n", w1, w2);
  size_t add = strlen(w1) + strlen(w2) + 16;
  char *m = realloc(b->missing, b->mlen + add);
  if (!m)
    return;
  b->missing = m;
  b->mlen += (size_t)snprintf(m + b->mlen, add, "missing %s: %s\n", w1, w2);
  b->nmissing++;
}

static struct item *add_item(struct bundle *b, const char *src, enum kind k, const char *job, int named) {
  if (b->n == b->cap) {
    int cap = b->cap ? 2 * b->cap : 32;
    struct item *v = realloc(b->v, (size_t)cap * sizeof *v);
    if (!v)
      return NULL;
    b->v = v;
    b->cap = cap;
  }
  struct item *it = &b->v[b->n];
  memset(it, 0, sizeof *it);
  if (!(it->src = strdup(src)))
    return NULL;
  it->kind = k;
  it->named = named;
  snprintf(it->job, sizeof it->job, "%s", job);
  b->n++;
  return it;
}

static int made(struct bundle *b, const char *p) {
  if (b->nmade == b->capmade) {
    int cap = b->capmade ? 2 * b->capmade : 64;
    char **v = realloc(b->made, (size_t)cap * sizeof *v);
    if (!v)
      return -1;
    b->made = v;
    b->capmade = cap;
  }
  /* also removed at exit and on SIGINT, SIGTERM, SIGHUP (bundle_open.c) */
  if (ntb_clean_add(p))
    return -1;
  return (b->made[b->nmade] = strdup(p)) ? (b->nmade++, 0) : -1;
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), c = strlen(suf);
  return a >= c && strcmp(s + a - c, suf) == 0;
}

/* ------------------------------------------------------------ gather -- */

/* What a file is, by content; its job.  @return 0 (added, or left out with
 * a MANIFEST line), -1 out of memory. */
static int classify(struct bundle *b, struct ntt_jobs *jobs, const char *path, int named) {
  struct stat st;
  if (stat(path, &st) != 0) {
    miss(b, path, strerror(errno));
    return 0;
  }
  if (!S_ISREG(st.st_mode)) {
    if (named)
      miss(b, path, "not a regular file");
    return 0;
  }
  if (ntt_seen_add(&b->seen, &st) == 0)
    return 0;
  if (has_suffix(path, NTR_RUNEXIT_SUFFIX)) {
    struct nta_runexit r;
    char why[256];
    if (nta_runexit_read(path, &r, why, sizeof why) != 0) {
      miss(b, path, why);
      return 0;
    }
    if (r.job[0] && ntt_jobs_add(jobs, r.job, r.end_ns) < 0)
      return -1;
    return add_item(b, path, K_EXIT, r.job, named) ? 0 : -1;
  }
  unsigned char head[4096];
  ssize_t hn = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd >= 0) {
    hn = read(fd, head, sizeof head);
    close(fd);
  }
  if (hn < 0) {
    miss(b, path, strerror(errno));
    return 0;
  }
  if (ntf_rank_of_name(path) >= 0 && ntf_sniff(head, (size_t)hn))
    return add_item(b, path, K_FR, "", named) ? 0 : -1;
  if (ntb_is_bundle(path)) {
    if (named)
      miss(b, path, "a bundle or other tar archive, not evidence: left out");
    return 0;
  }
  struct ntt_image img;
  char err[512];
  if (ntt_image_load(path, 0, &img, err, sizeof err) != 0) {
    char err2[512];
    if (ntt_image_load(path, 1, &img, err2, sizeof err2) != 0) {
      miss(b, path, err);
      return 0;
    }
  }
  char id[64];
  snprintf(id, sizeof id, "%.*s", 63, img.hdr.job_id);
  int rc = ntt_jobs_add(jobs, id, ntt_image_latest_ns(&img)) < 0 ||
           !add_item(b, path, img.is_dump ? K_DUMP : K_RING, id, named);
  ntt_image_free(&img);
  return rc ? -1 : 0;
}

static int cmp_name(const void *a, const void *c) {
  return strcmp(*(char *const *)a, *(char *const *)c);
}

/* Files below dir that may be evidence (as analyze walks: dumps, rings,
 * exit files, Flight Recorder names), sorted per directory; links to
 * directories not followed. */
static int walk(struct bundle *b, struct ntt_jobs *jobs, const char *dir, int depth) {
  DIR *d = opendir(dir);
  if (!d) {
    miss(b, dir, strerror(errno));
    return 0;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue; /* ".", "..", temporary files of dumps being written */
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) {
        rc = -1;
        break;
      }
      names = nn;
    }
    if (!(names[n] = strdup(e->d_name))) {
      rc = -1;
      break;
    }
    n++;
  }
  closedir(d);
  if (n > 1)
    qsort(names, n, sizeof *names, cmp_name);
  for (size_t i = 0; i < n; i++) {
    char p[4096];
    struct stat st;
    if (!rc && (size_t)snprintf(p, sizeof p, "%s/%s", dir, names[i]) < sizeof p && lstat(p, &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        if (depth < NTB_WALK_DEPTH && ntt_seen_add(&b->seen, &st) == 1)
          rc = walk(b, jobs, p, depth + 1);
      } else if (has_suffix(names[i], ".zst") || has_suffix(names[i], ".ring") ||
                 has_suffix(names[i], NTR_RUNEXIT_SUFFIX) || ntf_rank_of_name(names[i]) >= 0) {
        rc = classify(b, jobs, p, 0);
      }
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ------------------------------------------------------------ staging -- */

/* rel = DIR/NAME, NAME made safe and unique among the members so far. */
static void member_name(struct bundle *b, struct item *it, const char *base) {
  char safe[200];
  ntb_safe_name(base, safe, sizeof safe);
  snprintf(it->rel, sizeof it->rel, "%s/%s", kind_dir[it->kind], safe);
  for (int k = 2;; k++) {
    int clash = 0;
    for (int i = 0; i < b->n && !clash; i++)
      clash = &b->v[i] != it && !strcmp(b->v[i].rel, it->rel);
    if (!clash)
      return;
    snprintf(it->rel, sizeof it->rel, "%s/%d-%s", kind_dir[it->kind], k, safe);
  }
}

/* The tick of a ring's clock at realtime now_ns (the inverse of
 * ntr_clock_to_real_ns), for a snapshot's trigger. */
static uint64_t tsc_at(const struct ntr_ring_header *h, uint64_t now_ns) {
  uint64_t hz = h->tsc_hz ? h->tsc_hz : 1000000000ull;
  if (now_ns <= h->real_base_ns)
    return h->tsc_base;
  unsigned __int128 d = (unsigned __int128)(now_ns - h->real_base_ns) * hz / 1000000000ull;
  return h->tsc_base + (uint64_t)d;
}

/* A ring as a dump in dir: collect's, or a snapshot of a live process. */
static int stage_ring(struct bundle *b, struct item *it, const char *dir) {
  struct ntt_image img;
  char err[512], err2[512];
  if (ntt_image_load(it->src, 0, &img, err, sizeof err) != 0 &&
      ntt_image_load(it->src, 1, &img, err2, sizeof err2) != 0) {
    miss(b, it->src, err);
    return 1;
  }
  struct ntr_trigger trig;
  if (img.pid_alive) {
    memset(&trig, 0, sizeof trig);
    trig.kind = NTR_TRIG_COLLECTED;
    trig.flags = NTR_TRIG_F_ALIVE;
    trig.tsc = tsc_at(&img.hdr, ntt_wall_now_ns());
    uint64_t last = ntt_image_last_tsc(&img);
    if (trig.tsc < last)
      trig.tsc = last;
    trig.lost = img.lost;
    snprintf(trig.reason, sizeof trig.reason, "bundled: pid %d alive, a snapshot of its ring", img.hdr.pid);
  } else {
    ntt_collect_trigger(&img, &trig);
  }
  char out[4096] = "";
  int w = ntr_dump_write_image(dir, &img.hdr, img.comms, img.ncomms, img.stacks, img.nstacks, img.recs, img.nrecs,
                               img.strs, img.str_len, &trig, out, sizeof out);
  ntt_image_free(&img);
  if (w != 0) {
    char why[1600];
    snprintf(why, sizeof why, "cannot write its snapshot into %.1300s: %s", dir, strerror(-w));
    miss(b, it->src, why);
    return 1;
  }
  if (made(b, out))
    return -1;
  const char *base = strrchr(out, '/');
  member_name(b, it, base ? base + 1 : out);
  snprintf(it->staged, sizeof it->staged, "%s", out);
  return 0;
}

/* Every item of the job into top/<kind>/ (links, or ring snapshots).
 * Items that fail are dropped with a MANIFEST line.  @return 0 or -1. */
static int stage(struct bundle *b, const char *topdir) {
  if (strlen(topdir) > 1200)
    return -1;
  for (int k = 0; k < K_NKINDS; k++) {
    char d[1300];
    snprintf(d, sizeof d, "%.1200s/%s", topdir, kind_dir[k]);
    if (mkdir(d, 0700) != 0 || made(b, d))
      return -1;
  }
  int keep = 0;
  for (int i = 0; i < b->n; i++) {
    struct item *it = &b->v[i];
    int rc;
    if (it->kind == K_RING) {
      char d[1300];
      snprintf(d, sizeof d, "%.1200s/rings", topdir);
      rc = stage_ring(b, it, d);
    } else {
      char abs[PATH_MAX];
      const char *base = strrchr(it->src, '/');
      member_name(b, it, base ? base + 1 : it->src);
      snprintf(it->staged, sizeof it->staged, "%.1200s/%s", topdir, it->rel);
      rc = 0;
      if (!realpath(it->src, abs) || symlink(abs, it->staged) != 0) {
        miss(b, it->src, strerror(errno));
        rc = 1;
      } else if (made(b, it->staged)) {
        rc = -1;
      }
    }
    if (rc < 0)
      return -1;
    /* the reader's limits (bundle.h): past them, left out with a line */
    struct stat st;
    if (rc == 0 && stat(it->staged, &st) == 0) {
      char why[160];
      why[0] = 0;
      if ((uint64_t)st.st_size > NTB_MEMBER_MAX)
        snprintf(why, sizeof why, "%lld bytes, over the %llu-byte limit of a bundle member: left out",
                 (long long)st.st_size, (unsigned long long)NTB_MEMBER_MAX);
      else if (b->total + (uint64_t)st.st_size > NTB_TOTAL_MAX - (64u << 20) || keep >= NTB_MEMBERS_MAX - 3)
        snprintf(why, sizeof why, "the bundle would pass its limit of %llu bytes or %d members: left out",
                 (unsigned long long)NTB_TOTAL_MAX, NTB_MEMBERS_MAX);
      if (why[0]) {
        miss(b, it->src, why);
        unlink(it->staged); /* not in the bundle, so not in its verdict */
        rc = 1;
      } else {
        b->total += (uint64_t)st.st_size;
      }
    }
    if (rc == 0) {
      if (keep != i) {
        b->v[keep] = *it;
        it->src = NULL;
      }
      keep++;
    } else {
      free(it->src);
      it->src = NULL;
    }
  }
  b->n = keep;
  return 0;
}

/* Size and XXH64 of path's content.  @return 0, or -1 with errno. */
static int hash_file(const char *path, uint64_t *size, uint64_t *xxh, int64_t *mtime_ns) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return -1;
  struct stat st;
  XXH64_state_t *xs = XXH64_createState();
  unsigned char *buf = malloc(1 << 17);
  int rc = -1;
  if (fstat(fd, &st) != 0 || !xs || !buf)
    goto out;
  XXH64_reset(xs, 0);
  uint64_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf, 1 << 17);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      goto out;
    if (r == 0)
      break;
    XXH64_update(xs, buf, (size_t)r);
    n += (uint64_t)r;
  }
  *size = n;
  *xxh = XXH64_digest(xs);
  *mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  rc = 0;
out:
  free(buf);
  XXH64_freeState(xs);
  close(fd);
  return rc;
}

/* `nccltrace analyze [--json] [--job ID] --any-owner DIR` (this very
 * program), stdout to out, stderr to errf.  @return its exit status, -1
 * when it could not run. */
static int run_analyze(const char *dir, const char *job, int json, const char *out, const char *errf) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return -1;
  self[n] = 0;
  int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int fe = open(errf, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fo < 0 || fe < 0) {
    if (fo >= 0)
      close(fo);
    if (fe >= 0)
      close(fe);
    return -1;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fo, 1);
    dup2(fe, 2);
    char *args[8];
    int k = 0;
    args[k++] = self;
    args[k++] = "analyze";
    if (json)
      args[k++] = "--json";
    if (job[0]) {
      args[k++] = "--job";
      args[k++] = (char *)job;
    }
    args[k++] = "--any-owner";
    args[k++] = (char *)dir;
    args[k] = NULL;
    execv(self, args);
    _exit(127);
  }
  close(fo);
  close(fe);
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------- main -- */

static void fmt_utc(time_t t, const char *f, char *buf, size_t len) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, f, &tm);
}

/* Append to a growing text (the MANIFEST). */
struct text {
  char *p;
  size_t n, cap;
  int oom;
};
static void tput(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tput(struct text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (k < 0 || t->oom)
    return;
  if (t->n + (size_t)k + 1 > t->cap) {
    size_t cap = (t->cap + (size_t)k + 1) * 2;
    char *np = realloc(t->p, cap);
    if (!np) {
      t->oom = 1;
      return;
    }
    t->p = np;
    t->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
  va_end(ap);
  t->n += (size_t)k;
}

static int cmp_item(const void *a, const void *c) {
  const struct item *x = a, *y = c;
  return strcmp(x->rel, y->rel);
}

static void cleanup(struct bundle *b) {
  for (int i = b->nmade; i-- > 0;) {
    if (unlink(b->made[i]) != 0)
      rmdir(b->made[i]);
    free(b->made[i]);
  }
  free(b->made);
  for (int i = 0; i < b->n; i++)
    free(b->v[i].src);
  free(b->v);
  free(b->missing);
  ntt_seen_free(&b->seen);
}

static int add_member_file(struct ntb_writer *w, const char *top, const char *rel, const char *path,
                           struct text *man, const char *source, char *why, size_t whylen) {
  uint64_t size, xxh;
  int64_t mtime;
  char name[NTB_NAME_MAX + 2];
  if (hash_file(path, &size, &xxh, &mtime) != 0) {
    snprintf(why, whylen, "%s: %s", path, strerror(errno));
    return -1;
  }
  snprintf(name, sizeof name, "%s/%s", top, rel);
  if (w && ntb_writer_add_file(w, name, path, size, &xxh, mtime, why, whylen))
    return -1;
  if (man) {
    char s[4096];
    tput(man, "file %016llx %llu %lld.%09lld %s%s%s\n", (unsigned long long)xxh, (unsigned long long)size,
         (long long)(mtime / 1000000000), (long long)(mtime % 1000000000), rel, source ? " " : "",
         source ? ntt_esc(source, s, sizeof s) : "");
  }
  return 0;
}

int ntt_bundle_main(int argc, char **argv) {
  enum { O_NORINGS = 256 };
  static const struct option opts[] = {{"job", required_argument, NULL, 'j'},  {"out", required_argument, NULL, 'o'},
                                       {"rings", required_argument, NULL, 'r'}, {"no-rings", no_argument, NULL, O_NORINGS},
                                       {"help", no_argument, NULL, 'h'},        {0}};
  const char *want = NULL, *outarg = NULL;
  char rings[4096];
  int named_rings = ntt_default_ring_dir(rings, sizeof rings), no_rings = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "j:o:r:h", opts, NULL)) != -1) {
    switch (c) {
    case 'j': want = optarg; break;
    case 'o': outarg = optarg; break;
    case 'r': snprintf(rings, sizeof rings, "%s", optarg); named_rings = 1; break;
    case O_NORINGS: no_rings = 1; break;
    case 'h': ntt_usage_cmd(stdout, "bundle"); return NTT_EXIT_OK;
    default: fputs(usage_line, stderr); return NTT_EXIT_INPUT;
    }
  }
  char se[4096], se2[512];
  int zstd = 1;
  if (outarg) {
    if (has_suffix(outarg, ".tar"))
      zstd = 0;
    else if (!has_suffix(outarg, ".tar.zst") && !has_suffix(outarg, ".tzst")) {
      fprintf(stderr, "nccltrace: bundle: --out wants a name ending in .tar.zst (compressed) or .tar, not '%s'\n",
              ntt_esc(outarg, se, sizeof se));
      return NTT_EXIT_INPUT;
    }
  }
  struct bundle b;
  memset(&b, 0, sizeof b);
  struct ntt_jobs jobs = {0};
  int rc = NTT_EXIT_OK, oom = 0;
  char dumpdir[4096];
  if (optind < argc) {
    for (int i = optind; i < argc && !oom; i++) {
      struct stat st;
      if (stat(argv[i], &st) != 0) {
        fprintf(stderr, "nccltrace: bundle: %s: %s\n", ntt_esc(argv[i], se, sizeof se), strerror(errno));
        rc = NTT_EXIT_INPUT;
      } else if (S_ISDIR(st.st_mode)) {
        ntt_seen_add(&b.seen, &st);
        oom = walk(&b, &jobs, argv[i], 0) < 0;
      } else {
        oom = classify(&b, &jobs, argv[i], 1) < 0;
      }
    }
  } else {
    /* the dump directory, when there is one */
    struct stat st;
    ntt_default_dump_dir(dumpdir, sizeof dumpdir);
    if (stat(dumpdir, &st) == 0 && S_ISDIR(st.st_mode)) {
      ntt_seen_add(&b.seen, &st);
      oom = walk(&b, &jobs, dumpdir, 0) < 0;
    }
  }
  if (!no_rings && !oom) {
    char **list = NULL, why[512];
    int n = ntt_list_rings(rings, named_rings, &list, why, sizeof why);
    if (n < 0 && (errno != ENOENT || named_rings)) /* a directory named, or one refused */
      miss(&b, rings, why);
    for (int i = 0; i < n && !oom; i++)
      oom = classify(&b, &jobs, list[i], 0) < 0;
    if (n > 0)
      ntt_paths_free(list, n);
  }
  if (rc == NTT_EXIT_INPUT) { /* a PATH named that is not there: a typo, most likely */
    cleanup(&b);
    ntt_jobs_free(&jobs);
    return rc;
  }
  if (oom) {
    fprintf(stderr, "nccltrace: bundle: out of memory\n");
    cleanup(&b);
    ntt_jobs_free(&jobs);
    return NTT_EXIT_FAIL;
  }
  int nfr = 0;
  for (int i = 0; i < b.n; i++)
    nfr += b.v[i].kind == K_FR;
  int pick = ntt_jobs_pick(&jobs, want);
  if (pick < 0 && (want || !nfr)) {
    if (want && jobs.n)
      ntt_jobs_say(stderr, "bundle", &jobs, pick, want);
    else if (want)
      fprintf(stderr, "nccltrace: bundle: no evidence of job %s found\n", ntt_esc(want, se, sizeof se));
    else {
      char places[12288];
      ntt_ring_places(rings, places, sizeof places);
      fprintf(stderr, "nccltrace: bundle: no evidence found (in %s%s%s): nothing to bundle\n",
              optind < argc ? "the paths given" : ntt_esc(dumpdir, se, sizeof se), no_rings ? "" : ", ",
              no_rings ? "" : places);
    }
    cleanup(&b);
    ntt_jobs_free(&jobs);
    return NTT_EXIT_INPUT;
  }
  if (pick >= 0)
    ntt_jobs_say(stderr, "bundle", &jobs, pick, want);
  else /* Flight Recorder dumps alone */
    fprintf(stderr, "nccltrace: bundle: no dump or ring of ours: Flight Recorder dumps only, which carry no job id\n");
  const char *job = pick >= 0 ? jobs.id[pick] : "";
  /* the job's items only */
  int keep = 0, other = 0;
  for (int i = 0; i < b.n; i++) {
    struct item *it = &b.v[i];
    int mine = it->kind == K_FR || (it->kind == K_EXIT && !it->job[0]) || !strcmp(it->job, job);
    if (mine)
      b.v[keep++] = *it;
    else {
      other++;
      free(it->src);
    }
  }
  b.n = keep;
  /* the file and its top directory */
  char out[4096], top[128], host[64] = "", stamp[32], created[40];
  time_t now = time(NULL);
  fmt_utc(now, "%Y%m%dT%H%M%SZ", stamp, sizeof stamp);
  fmt_utc(now, "%Y-%m-%dT%H:%M:%SZ", created, sizeof created);
  if (gethostname(host, sizeof host) != 0)
    snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = 0;
  if (outarg) {
    snprintf(out, sizeof out, "%s", outarg);
  } else {
    char sj[64];
    ntb_safe_name(job[0] ? job : "nojob", sj, sizeof sj);
    snprintf(out, sizeof out, "nccltrace-bundle-%s-%s.tar.zst", sj, stamp);
  }
  {
    const char *base = strrchr(out, '/');
    base = base ? base + 1 : out;
    char t[256];
    snprintf(t, sizeof t, "%.200s", base);
    size_t l = strlen(t);
    const char *sufs[] = {".tar.zst", ".tzst", ".tar"};
    for (int k = 0; k < 3; k++)
      if (l > strlen(sufs[k]) && has_suffix(t, sufs[k])) {
        t[l - strlen(sufs[k])] = 0;
        break;
      }
    ntb_safe_name(t, top, sizeof top);
  }
  /* stage */
  const char *tmpenv = getenv("TMPDIR");
  char stagedir[1024], topdir[1200];
  if ((size_t)snprintf(stagedir, sizeof stagedir, "%s/nccltrace-bundle-XXXXXX",
                       tmpenv && tmpenv[0] == '/' ? tmpenv : "/tmp") >= sizeof stagedir ||
      !mkdtemp(stagedir)) {
    fprintf(stderr, "nccltrace: bundle: cannot make a staging directory %s: %s\n", stagedir, strerror(errno));
    cleanup(&b);
    ntt_jobs_free(&jobs);
    return NTT_EXIT_FAIL;
  }
  snprintf(topdir, sizeof topdir, "%s/%s", stagedir, top);
  int fail = made(&b, stagedir) || mkdir(topdir, 0700) != 0 || made(&b, topdir) || stage(&b, topdir);
  char vtxt[4200], vjson[4200], verr[4200];
  snprintf(vtxt, sizeof vtxt, "%s/verdict.txt", topdir);
  snprintf(vjson, sizeof vjson, "%s/verdict.json", topdir);
  snprintf(verr, sizeof verr, "%s/analyze.stderr", topdir);
  int astatus = -1;
  if (!fail) {
    fail = made(&b, vtxt) || made(&b, vjson) || made(&b, verr);
    astatus = run_analyze(topdir, job, 0, vtxt, verr);
    if (run_analyze(topdir, job, 1, vjson, verr) < 0 || astatus < 0)
      fprintf(stderr, "nccltrace: bundle: analyze could not run: the bundle has no verdict\n");
  }
  qsort(b.v, (size_t)b.n, sizeof *b.v, cmp_item);
  /* MANIFEST, then the members in its order */
  struct text man = {0};
  char why[1024] = "";
  char cmdline[4096] = "nccltrace bundle";
  for (int i = 1; i < argc; i++) {
    size_t l = strlen(cmdline);
    snprintf(cmdline + l, sizeof cmdline - l, " %s", argv[i]);
  }
  int count[K_NKINDS] = {0};
  for (int i = 0; i < b.n; i++)
    count[b.v[i].kind]++;
  tput(&man, "%s\nversion %s\nhost %s\ncreated %s\njob %s\n", NTB_MAGIC, NTR_VERSION,
       ntt_esc(host, se2, sizeof se2), created, job[0] ? ntt_esc(job, se, sizeof se) : "-");
  tput(&man, "command %s\n", ntt_esc(cmdline, se, sizeof se));
  tput(&man, "analyze-exit %d\n", astatus);
  tput(&man, "counts dumps %d rings %d exit %d fr %d\n", count[K_DUMP], count[K_RING], count[K_EXIT], count[K_FR]);
  if (count[K_FR])
    tput(&man, "note Flight Recorder dumps carry no job id: every one given is included\n");
  if (other)
    tput(&man, "note %d file%s of other jobs left out (nccltrace bundle --job ID to bundle one of them)\n", other,
         other == 1 ? "" : "s");
  if (b.missing)
    tput(&man, "%s", b.missing);
  const char *extra[3][2] = {{"verdict.txt", vtxt}, {"verdict.json", vjson}, {"analyze.stderr", verr}};
  for (int k = 0; k < 3 && !fail; k++)
    fail = add_member_file(NULL, top, extra[k][0], extra[k][1], &man, NULL, why, sizeof why) != 0;
  for (int i = 0; i < b.n && !fail; i++) {
    char abs[PATH_MAX];
    const char *src = realpath(b.v[i].src, abs) ? abs : b.v[i].src;
    fail = add_member_file(NULL, top, b.v[i].rel, b.v[i].staged, &man, src, why, sizeof why) != 0;
  }
  if (!man.oom)
    tput(&man, "sum %016llx\n", (unsigned long long)XXH64(man.p, man.n, 0));
  struct ntb_writer *w = NULL;
  if (!fail && !man.oom)
    w = ntb_writer_open(out, zstd, why, sizeof why);
  if (w) {
    char name[NTB_NAME_MAX + 2];
    snprintf(name, sizeof name, "%s/%s", top, NTB_MANIFEST);
    fail = ntb_writer_add_mem(w, name, man.p, man.n, (int64_t)now * 1000000000, why, sizeof why) != 0;
    for (int k = 0; k < 3 && !fail; k++)
      fail = add_member_file(w, top, extra[k][0], extra[k][1], NULL, NULL, why, sizeof why) != 0;
    for (int i = 0; i < b.n && !fail; i++)
      fail = add_member_file(w, top, b.v[i].rel, b.v[i].staged, NULL, NULL, why, sizeof why) != 0;
    fail = ntb_writer_close(w, !fail, why, sizeof why) != 0 || fail;
  } else {
    fail = 1;
  }
  if (fail) {
    fprintf(stderr, "nccltrace: bundle: %s: %s\n", ntt_esc(out, se, sizeof se),
            why[0] ? ntt_esc(why, se2, sizeof se2) : man.oom ? "out of memory" : "staging failed");
    rc = NTT_EXIT_FAIL;
  } else {
    struct stat st;
    char first[256] = "";
    FILE *f = fopen(vtxt, "r");
    if (f) {
      if (fgets(first, sizeof first, f))
        first[strcspn(first, "\n")] = 0;
      fclose(f);
    }
    printf("%s: job %s: %d dump%s, %d ring snapshot%s, %d exit file%s, %d Flight Recorder dump%s; %lld bytes\n",
           ntt_esc(out, se, sizeof se), job[0] ? ntt_esc(job, se2, sizeof se2) : "-", count[K_DUMP],
           count[K_DUMP] == 1 ? "" : "s", count[K_RING], count[K_RING] == 1 ? "" : "s", count[K_EXIT],
           count[K_EXIT] == 1 ? "" : "s", count[K_FR], count[K_FR] == 1 ? "" : "s",
           stat(out, &st) == 0 ? (long long)st.st_size : -1ll);
    if (first[0])
      printf("verdict: %s\n", ntt_esc(first, se, sizeof se));
    if (b.nmissing)
      printf("%d file%s left out: see the MANIFEST's \"missing\" lines\n", b.nmissing, b.nmissing == 1 ? "" : "s");
  }
  free(man.p);
  cleanup(&b);
  ntt_jobs_free(&jobs);
  if (fflush(stdout) != 0 && !rc)
    rc = NTT_EXIT_FAIL;
  return rc;
}
