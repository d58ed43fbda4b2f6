/* load.c -- inputs of `nccltrace analyze`: files and directories (searched
 * recursively for *.zst dumps and *.ring files), grouped by process, loaded
 * and reduced one process at a time, grouped by job id.  Only the chosen job
 * is kept: evidence of other jobs lying in the same directory must never
 * change a verdict (design §6).
 *
 * Thread-safety: nta_load starts a worker thread per CPU (at most
 * NTA_MAX_WORKERS, the caller being one of them) and joins them before
 * it returns.  Workers share only atomic counters of the next file or
 * process to take and of those finished; each writes its own entries'
 * slots (an image, an error, an nta_proc), which the calling thread reads
 * after the join.  The calling thread alone draws the progress line on a
 * terminal (tools/progress.c), between its own items.
 *
 * Why in three steps (docs/analyze.md "Scale"):
 *  1. every file's identity (host, pid, job) is read from its header alone
 *     (ntt_image_peek: for a dump, the first block of its frame);
 *  2. files are grouped by process, in input order;
 *  3. one process at a time per worker: its files are loaded whole, merged
 *     and reduced (reduce.c), and their records freed.
 * So at most one process's records per thread are in memory at once, and
 * the cores share the decompression, which is most of the work.
 *
 * Hostile inputs: a directory is entered once and a file read once, by
 * (st_dev, st_ino), so symbolic link loops end; and the memory a process's
 * files may take (ntt_image_probe: the file, its payload as far as its
 * header's geometry allows) is reserved from one budget (--max-memory)
 * before they are loaded.  A file that would take the budget past its
 * limit even alone is refused with its reason; the others wait for memory
 * to be given back (a thread holding memory never waits, so none deadlock).
 * Only files of trusted owners are opened (see "trust" below), and each
 * open checks that the file is still the one the listing judged.  Which
 * attempt of the chosen job is kept, and one process per launcher rank:
 * jobs.c.
 */
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"
#include "tools/reader.h"
#include "recorder/format.h"
#include "tools/fr/fr.h"

/* Loading threads: one per online CPU, at most NTA_MAX_WORKERS (each holds
 * one process's records at a time, ~16 MiB for a full default ring). */
_Static_assert(NTA_MAX_WORKERS <= sizeof(((struct nta_job *)0)->arenas) / sizeof(struct nta_arena),
               "one arena per loading thread");

static int workers(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > NTA_MAX_WORKERS ? NTA_MAX_WORKERS : (int)n;
}

/* One input: a file to load, or a path that could not even be listed. */
struct entry {
  char *path;
  int is_file;                  /* counts in inputs.files */
  char *error;                  /* NULL, or why it was unreadable (left: why it was left out) */
  int left;                     /* of an owner not trusted: never opened */
  long uid;                     /* its owner, when the listing saw it */
  dev_t dev;                    /* what the listing saw: a load of anything else is refused */
  ino_t ino;
  int peeked;                   /* its header was read */
  uint64_t need;                /* bytes its load may take (ntt_image_probe) */
  char job[64], host[64];
  int pid;
  int attempt;                  /* restart attempt (nta_hdr_attempt) */
  int group;                    /* index of its process group */
  int named;                    /* named on the command line, not found in a directory */
};

struct entries {
  struct entry *v;
  int n, cap;
};

static struct entry *entry_add(struct entries *l, const char *path, int is_file, const char *error) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    struct entry *v = realloc(l->v, (size_t)cap * sizeof(*v));
    if (!v)
      return NULL;
    l->v = v;
    l->cap = cap;
  }
  struct entry *e = &l->v[l->n];
  memset(e, 0, sizeof(*e));
  e->path = strdup(path);
  e->is_file = is_file;
  e->error = error ? strdup(error) : NULL;
  e->uid = -1;
  if (!e->path)
    return NULL;
  l->n++;
  return e;
}

/* ------------------------------------------------------------- trust -- */

/* Whose files are read (docs/analyze.md "Whose files are read"): yours,
 * those of the owner of the directory you named (a file named alone: of
 * its directory), and the owners --allow-owner adds; --any-owner reads
 * all.  In a group-writable team directory a group member can put files
 * in, but cannot make them yours or the directory owner's: so a planted
 * dump, exit-status file or job is left out with its reason, and the
 * verdict says so.  Root is the invoker like anyone: its own files, the
 * directory owner's, the allowed ones. */
struct trust {
  const struct nta_job *job;
  long me;
};

static int trusted(const struct trust *t, long uid, long dir_owner) {
  if (t->job->any_owner || uid == t->me || uid == dir_owner)
    return 1;
  for (int i = 0; i < t->job->nallow_uids; i++)
    if (t->job->allow_uids[i] == uid)
      return 1;
  return 0;
}

static void left_out(struct entries *l, const char *path, const struct stat *st, const struct trust *t,
                     long dir_owner) {
  char who[64] = "", why[256];
  struct passwd *pw = getpwuid(st->st_uid);
  if (pw && pw->pw_name)
    snprintf(who, sizeof who, " (%.40s)", pw->pw_name);
  snprintf(why, sizeof why,
           "owned by uid %ld%s, not by you (uid %ld) or the directory's owner (uid %ld); "
           "--allow-owner %ld or --any-owner reads it",
           (long)st->st_uid, who, t->me, dir_owner, (long)st->st_uid);
  struct entry *e = entry_add(l, path, 1, why);
  if (e) {
    e->left = 1;
    e->uid = (long)st->st_uid;
  }
}

/* The owner of the directory a named path is judged by: the path itself
 * when it is a directory, else the directory holding it. */
static long named_dir_owner(const char *path, const struct trust *t) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return (long)st.st_uid;
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  return stat(dir, &st) == 0 ? (long)st.st_uid : t->me;
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A name PyTorch's Flight Recorder gives its dumps: a prefix and the rank
 * (TORCH_FR_DUMP_TEMP_FILE, default /tmp/nccl_trace_rank_<N>), or that and
 * .json / .pkl: a candidate, read only when its first bytes say so. */
static int fr_name(const char *s) {
  return ntf_rank_of_name(s) >= 0;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* seen: every directory entered and file listed so far, by (dev, ino), as
 * find -L tells them apart: a link loop (a/up -> .., b/up -> ..) or a file
 * named twice is visited once. */
#define NTA_MAX_DEPTH 32

static void walk(struct entries *l, const char *path, int depth, struct ntt_seen *seen, const struct trust *t,
                 long dir_owner) {
  struct stat st;
  if (stat(path, &st) != 0) {
    entry_add(l, path, 1, strerror(errno));
    return;
  }
  if (ntt_seen_add(seen, &st) == 0)
    return; /* entered or listed already */
  if (!S_ISDIR(st.st_mode)) {
    if (S_ISREG(st.st_mode) && !trusted(t, (long)st.st_uid, dir_owner)) {
      left_out(l, path, &st, t, dir_owner);
      return;
    }
    struct entry *e = entry_add(l, path, 1, NULL);
    if (e && S_ISREG(st.st_mode)) {
      e->uid = (long)st.st_uid;
      e->dev = st.st_dev;
      e->ino = st.st_ino;
    }
    return;
  }
  if (depth > NTA_MAX_DEPTH) {
    /* An absurd tree (a link loop ends at the seen set): stop, and say
     * what was not read. */
    entry_add(l, path, 0, "not read: more than 32 directories deep below the path given");
    return;
  }
  DIR *d = opendir(path);
  if (!d) {
    entry_add(l, path, 0, strerror(errno));
    return;
  }
  /* Sorted so that the output does not depend on directory order. */
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.')
      continue; /* ".", "..", and dot files (dump temp files are dotted) */
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      char **nn = realloc(names, cap * sizeof(*nn));
      if (!nn)
        break;
      names = nn;
    }
    names[n] = strdup(de->d_name);
    if (names[n])
      n++;
  }
  closedir(d);
  if (n > 1)
    qsort(names, n, sizeof(*names), cmp_name);
  for (size_t i = 0; i < n; i++) {
    char sub[4096];
    if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, names[i]) < sizeof(sub)) {
      struct stat s2;
      if (stat(sub, &s2) == 0 && S_ISDIR(s2.st_mode))
        walk(l, sub, depth + 1, seen, t, dir_owner);
      else if (has_suffix(names[i], ".tar.zst") || has_suffix(names[i], ".tzst"))
        continue; /* a bundle (nccltrace bundle) kept beside the evidence: read when named */
      else if (has_suffix(names[i], ".zst") || has_suffix(names[i], ".ring") ||
               has_suffix(names[i], NTR_RUNEXIT_SUFFIX) || fr_name(names[i]))
        walk(l, sub, depth + 1, seen, t, dir_owner); /* listed once; a FIFO or a dangling link is refused by its load */
    }
    free(names[i]);
  }
  free(names);
}

/* ------------------------------------------------------------ workers -- */

/* One process: the entries of its files, in input order. */
struct group {
  int *files;
  int nfiles, cap;
  struct nta_proc proc;
  int loaded;                   /* proc holds at least one image */
  int first_loaded;             /* entry index of its first readable file */
  int oom;
};

/* A load buffer kept from one process to the next is at most this large
 * (a default ring's dump is 8.4 MB), so that memory the budget gave back is
 * not held on to. */
#define NTA_KEEP_LOADBUF (32u << 20)

/* The memory budget shared by the loading threads. */
struct budget {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t limit, used;
};

/* Reserve need bytes, waiting for other threads to give memory back (the
 * caller holds none: no thread waits while holding, so none deadlock).
 * need never exceeds the limit (the caller refuses such files first). */
static void budget_take(struct budget *b, uint64_t need) {
  pthread_mutex_lock(&b->mu);
  while (b->used + need > b->limit)
    pthread_cond_wait(&b->cv, &b->mu);
  b->used += need;
  pthread_mutex_unlock(&b->mu);
}

static void budget_give(struct budget *b, uint64_t n) {
  if (!n)
    return;
  pthread_mutex_lock(&b->mu);
  b->used -= n;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void fmt_size(uint64_t n, char *buf, size_t len) {
  if (n >= (1ull << 30))
    snprintf(buf, len, "%.1f GiB", (double)n / (double)(1ull << 30));
  else if (n >= (1ull << 20))
    snprintf(buf, len, "%.1f MiB", (double)n / (double)(1ull << 20));
  else
    snprintf(buf, len, "%llu KiB", (unsigned long long)((n + 1023) >> 10));
}

uint64_t nta_default_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : (4ull << 30);
  /* A container sees the host's memory; its own limit is the cgroup's. */
  FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
  if (f) {
    unsigned long long lim;
    if (fscanf(f, "%llu", &lim) == 1 && lim > 0 && lim < ram)
      ram = lim;
    fclose(f);
  }
  return ram / 4;
}

struct work {
  struct budget *mem;
  struct entries *in;
  struct nta_arena *arenas;     /* one per thread */
  struct group *g;
  int ng;
  int phase;                    /* 0: peek entries, 1: load groups */
  int next;                     /* atomic: next entry or group to take */
  int done;                     /* atomic: entries or groups finished (the progress line) */
  struct ntt_progress prog;     /* the calling thread's alone */
};

static void set_error(struct entry *e, const char *err) {
  /* The reader's reason may already start with "PATH: ": say the path once. */
  const char *why = err;
  size_t pl = strlen(e->path);
  if (strncmp(why, e->path, pl) == 0 && why[pl] == ':')
    why += pl + (why[pl + 1] == ' ' ? 2 : 1);
  free(e->error);
  e->error = strdup(why[0] ? why : "unreadable");
}

/* Load one file whole: strict (decompressing a dump into lb, whose
 * records it then borrows: *borrowed), else record why and keep what is
 * intact past the damage (the error keeps the exit status and the verdict
 * honest about it).  @return the image, or NULL. */
static struct ntt_image *load_one(struct entry *e, struct ntt_loadbuf *lb, int *borrowed) {
  struct ntt_image *img = calloc(1, sizeof(*img));
  *borrowed = 0;
  if (!img) {
    set_error(e, "out of memory");
    return NULL;
  }
  char err[256] = "";
  ntt_input_expect(e->dev, e->ino, e->uid >= 0);
  int rc = ntt_image_load_buf(e->path, img, lb, borrowed, err, sizeof(err));
  ntt_input_expect(0, 0, 0);
  if (rc == 0)
    return img;
  set_error(e, err);
  ntt_image_free(img);
  memset(img, 0, sizeof(*img));
  ntt_loadbuf_free(lb); /* the salvage below takes what the budget counted for it */
  char err2[256];
  ntt_input_expect(e->dev, e->ino, e->uid >= 0);
  rc = ntt_image_load(e->path, 1, img, err2, sizeof(err2));
  ntt_input_expect(0, 0, 0);
  if (rc == 0)
    return img;
  ntt_image_free(img);
  free(img);
  return NULL;
}

/* A loading thread's buffers: one per image of the process in hand, kept
 * from one process to the next (already mapped memory). */
struct bufs {
  struct ntt_loadbuf *b;
  int n;
};

static void load_group(struct work *w, struct group *g, struct nta_arena *arena, struct bufs *lb) {
  struct ntt_image **imgs = calloc((size_t)g->nfiles, sizeof(*imgs));
  int *lent = calloc((size_t)g->nfiles, sizeof(*lent));
  if (imgs && lent && g->nfiles > lb->n) {
    struct ntt_loadbuf *v = realloc(lb->b, (size_t)g->nfiles * sizeof(*v));
    if (v) {
      lb->b = v;
      for (; lb->n < g->nfiles; lb->n++)
        memset(&lb->b[lb->n], 0, sizeof(lb->b[lb->n]));
    }
  }
  if (!imgs || !lent || g->nfiles > lb->n) {
    g->oom = 1;
    free(imgs);
    free(lent);
    return;
  }
  /* The process's files are held at once: reserve them together, in
   * order, and refuse each one that would take the total past the limit
   * (the same files whatever the other threads do). */
  uint64_t held = 0;
  unsigned char *take = calloc((size_t)g->nfiles, 1); /* 1: a file within the budget */
  if (!take) {
    g->oom = 1;
    free(imgs);
    free(lent);
    return;
  }
  for (int i = 0; i < g->nfiles; i++) {
    struct entry *e = &w->in->v[g->files[i]];
    take[i] = e->need <= w->mem->limit - held;
    if (take[i]) {
      held += e->need;
      continue;
    }
    char a[32], b[32], why[256];
    fmt_size(e->need, a, sizeof(a));
    fmt_size(w->mem->limit, b, sizeof(b));
    snprintf(why, sizeof(why), "refused: loading it takes up to %s, past the memory budget of %s%s (--max-memory)",
             a, b, held ? " with its process's other files" : "");
    set_error(e, why);
  }
  budget_take(w->mem, held);
  int n = 0;
  for (int i = 0; i < g->nfiles; i++) {
    struct entry *e = &w->in->v[g->files[i]];
    if (!take[i])
      continue;
    struct ntt_image *img = load_one(e, &lb->b[n], &lent[n]);
    if (!img)
      continue;
    if (!n)
      g->first_loaded = g->files[i];
    imgs[n++] = img;
  }
  if (n) {
    g->loaded = 1;
    if (nta_reduce_proc(&g->proc, imgs, n, arena, 1) != 0)
      g->oom = 1;
    g->proc.own_img = 1;
    for (int i = 0; i < n; i++) {
      if (!lent[i])
        free(imgs[i]->recs); /* borrowed records go back with their buffer */
      imgs[i]->recs = NULL;
      imgs[i]->nrecs = 0;
      if (imgs[i] != g->proc.img) {
        ntt_image_free(imgs[i]);
        free(imgs[i]);
      }
    }
  }
  free(imgs);
  free(lent);
  free(take);
  /* Records are freed; what the reduced process keeps is small next to
   * them.  Load buffers stay for the next process (memory already mapped)
   * unless they are large: the budget no longer counts them. */
  for (int i = 0; i < lb->n; i++)
    if (lb->b[i].cap > NTA_KEEP_LOADBUF)
      ntt_loadbuf_free(&lb->b[i]);
  budget_give(w->mem, held);
}

struct thread_arg {
  struct work *w;
  int index;
  struct bufs lb;
};

/* One more entry or group finished; the calling thread (index 0) alone
 * draws the progress line, so the others never touch stderr. */
static void finished(struct work *w, int index) {
  int done = __atomic_add_fetch(&w->done, 1, __ATOMIC_RELAXED);
  if (index == 0)
    ntt_progress_show(&w->prog, done);
}

static void *worker(void *arg) {
  struct work *w = ((struct thread_arg *)arg)->w;
  int index = ((struct thread_arg *)arg)->index;
  struct nta_arena *arena = &w->arenas[index];
  for (;;) {
    int i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
    if (w->phase == 0) {
      if (i >= w->in->n)
        break;
      struct entry *e = &w->in->v[i];
      if (e->error || !e->is_file) {
        finished(w, index);
        continue;
      }
      struct ntr_ring_header *h = malloc(sizeof(*h));
      char err[256];
      ntt_input_expect(e->dev, e->ino, e->uid >= 0);
      if (h && ntt_image_probe(e->path, h, &e->need, err, sizeof(err)) == 0) {
        e->peeked = 1;
        snprintf(e->job, sizeof(e->job), "%s", h->job_id);
        snprintf(e->host, sizeof(e->host), "%s", h->host);
        e->pid = h->pid;
        e->attempt = nta_hdr_attempt(h);
      }
      ntt_input_expect(0, 0, 0);
      free(h);
    } else {
      if (i >= w->ng)
        break;
      load_group(w, &w->g[i], arena, &((struct thread_arg *)arg)->lb);
    }
    finished(w, index);
  }
  return NULL;
}

/* Run the phase on the calling thread and workers() - 1 more, with a
 * progress line on a terminal (erased before the phase returns). */
static void run_phase(struct work *w, int phase) {
  w->phase = phase;
  w->next = 0;
  w->done = 0;
  if (phase == 0)
    ntt_progress_begin(&w->prog, "analyze: headers", "files", w->in->n);
  else
    ntt_progress_begin(&w->prog, "analyze: loading", "processes", w->ng);
  pthread_t t[NTA_MAX_WORKERS - 1];
  struct thread_arg args[NTA_MAX_WORKERS];
  int started = 0, nw = workers();
  for (int i = 0; i < nw; i++)
    args[i] = (struct thread_arg){w, i, {NULL, 0}};
  for (int i = 0; i < nw - 1; i++)
    if (pthread_create(&t[started], NULL, worker, &args[started + 1]) == 0)
      started++;
  worker(&args[0]);
  for (int i = 0; i < started; i++)
    pthread_join(t[i], NULL);
  ntt_progress_end(&w->prog);
  for (int i = 0; i < nw; i++) {
    for (int k = 0; k < args[i].lb.n; k++)
      ntt_loadbuf_free(&args[i].lb.b[k]);
    free(args[i].lb.b);
  }
}

static uint64_t key_hash(const struct entry *e) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)e->pid ^ ((uint64_t)(uint32_t)e->attempt << 32);
  for (const char *p = e->host; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  h = (h ^ 0xff) * 1099511628211ull;
  for (const char *p = e->job; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  return h;
}

static int same_key(const struct entry *a, const struct entry *b) {
  return a->pid == b->pid && a->attempt == b->attempt && !strcmp(a->host, b->host) && !strcmp(a->job, b->job);
}

/* Files of one process (same job, attempt, host and pid), in input order; a file
 * whose header could not be read is a group of its own.  A hash of the key
 * to the group's first entry: linear in the number of files. */
static int make_groups(struct work *w) {
  struct entries *in = w->in;
  uint32_t cap = 16;
  while (cap < 2u * (uint32_t)in->n)
    cap <<= 1;
  int *tab = malloc(cap * sizeof(*tab)); /* entry index of a group's first file, -1 empty */
  w->g = calloc((size_t)(in->n ? in->n : 1), sizeof(*w->g));
  if (!w->g || !tab) {
    free(tab);
    return -1;
  }
  for (uint32_t i = 0; i < cap; i++)
    tab[i] = -1;
  for (int i = 0; i < in->n; i++) {
    struct entry *e = &in->v[i];
    e->group = -1;
    if (e->error || !e->is_file)
      continue;
    if (e->peeked) {
      uint32_t h = (uint32_t)key_hash(e) & (cap - 1);
      while (tab[h] >= 0 && !same_key(&in->v[tab[h]], e))
        h = (h + 1) & (cap - 1);
      if (tab[h] >= 0)
        e->group = in->v[tab[h]].group;
      else
        tab[h] = i;
    }
    if (e->group < 0)
      e->group = w->ng++;
    struct group *g = &w->g[e->group];
    if (g->nfiles == g->cap) {
      int c = g->cap ? 2 * g->cap : 2;
      int *v = realloc(g->files, (size_t)c * sizeof(*v));
      if (!v) {
        free(tab);
        return -1;
      }
      g->files = v;
      g->cap = c;
    }
    g->files[g->nfiles++] = i;
  }
  free(tab);
  return 0;
}

static int cmp_group(const void *a, const void *b) {
  const struct group *x = a, *y = b;
  return x->first_loaded < y->first_loaded ? -1 : x->first_loaded > y->first_loaded;
}

/* NCCLTRACE_ANALYZE_TIMING=1: phase times on stderr (docs/analyze.md). */
void nta_phase(const char *what) {
  static int on = -1;
  static struct timespec t0;
  if (on < 0) {
    const char *e = getenv("NCCLTRACE_ANALYZE_TIMING");
    on = e && e[0] == '1';
    clock_gettime(CLOCK_MONOTONIC, &t0);
  }
  if (!on)
    return;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  fprintf(stderr, "nccltrace: analyze: %8.3f s  %s\n",
          (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9, what);
}

void nta_input_add(struct nta_input_error **v, int *n, const char *path, const char *reason, long uid) {
  struct nta_input_error *e = realloc(*v, (size_t)(*n + 1) * sizeof(*e));
  if (!e)
    return;
  *v = e;
  e = &e[(*n)++];
  snprintf(e->path, sizeof(e->path), "%s", path);
  snprintf(e->reason, sizeof(e->reason), "%s", reason);
  e->uid = uid;
}

static void add_error(struct nta_job *job, const char *path, const char *reason) {
  nta_input_add(&job->unreadable, &job->nunreadable, path, reason, -1);
}

/* Exit-status files of `nccltrace run` (runexit.c): a few small files, read
 * here on the calling thread and taken out of the entries (they are no
 * images).  One unreadable is an unreadable input like any other. */
static void read_runexits(struct nta_job *job, struct entries *in) {
  int k = 0;
  for (int i = 0; i < in->n; i++) {
    struct entry *e = &in->v[i];
    if (e->error || !e->is_file || !has_suffix(e->path, NTR_RUNEXIT_SUFFIX)) {
      in->v[k++] = *e;
      continue;
    }
    job->nfiles++;
    struct nta_runexit r;
    char why[256];
    struct nta_runexit *v = NULL;
    if (nta_runexit_read(e->path, &r, why, sizeof why) != 0)
      add_error(job, e->path, why);
    else if ((v = realloc(job->runexits, (size_t)(job->nrunexits + 1) * sizeof(*v))) != NULL) {
      job->runexits = v;
      job->runexits[job->nrunexits++] = r;
    }
    free(e->path);
    free(e->error);
  }
  in->n = k;
}

/* PyTorch Flight Recorder dumps (fr.c): every input that is not ours and
 * starts like one, read here on the calling thread (a few small files) and
 * taken out of the entries.  A file found in a directory that is no FR dump
 * is not evidence and is dropped unsaid; one named on the command line is
 * left to the reader, which says why it is not a dump.  What the FR dumps
 * keep is taken from the memory budget before ours load. */
static void read_fr(struct nta_job *job, struct entries *in, uint64_t limit) {
  int k = 0;
  uint64_t used = 0;
  for (int i = 0; i < in->n; i++) {
    struct entry *e = &in->v[i];
    if (e->error || !e->is_file || has_suffix(e->path, ".zst") || has_suffix(e->path, ".ring")) {
      in->v[k++] = *e;
      continue;
    }
    if (!e->named && e->uid < 0) { /* found in a directory, not a regular file: no FR dump */
      free(e->path);
      free(e->error);
      continue;
    }
    char why[256] = "";
    int rc = nta_fr_read(job, e->path, e->dev, e->ino, e->uid >= 0, limit > used ? limit - used : 0, why,
                         sizeof why);
    if (rc == 0 && e->named) {
      in->v[k++] = *e;
      continue;
    }
    if (rc != 0)
      job->nfiles++;
    if (rc > 0)
      used += (uint64_t)job->fr[job->nfr - 1].ne * sizeof(struct ntf_entry);
    else if (rc < 0)
      add_error(job, e->path, why);
    free(e->path);
    free(e->error);
  }
  in->n = k;
}

/* Keep the exit statuses of job id (or of no job); when no process left
 * evidence, those of the job that ended last. */
static void keep_runexits(struct nta_job *job, const char *id) {
  int k = 0;
  for (int i = 0; i < job->nrunexits; i++)
    if (!job->runexits[i].job[0] || !strcmp(job->runexits[i].job, id))
      job->runexits[k++] = job->runexits[i];
  job->nrunexits = k;
}

int nta_load(struct nta_job *job, char *const *paths, int npaths, const char *job_id) {
  /* Each file's records are one allocation of a few MiB, freed before the
   * next file: served from the heap and reused, not mapped and unmapped
   * each time (a fresh mapping costs a page fault per 4 KiB, which was a
   * third of the time on 1,024 dumps). */
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  struct entries in = {0};
  struct ntt_seen seen = {0};
  struct trust t = {job, (long)geteuid()};
  for (int i = 0; i < npaths; i++) {
    int before = in.n;
    walk(&in, paths[i], 0, &seen, &t, named_dir_owner(paths[i], &t));
    struct stat st;
    if (in.n == before + 1 && stat(paths[i], &st) == 0 && !S_ISDIR(st.st_mode))
      in.v[before].named = 1;
  }
  ntt_seen_free(&seen);
  read_runexits(job, &in);
  struct budget mem = {.limit = job->max_memory ? job->max_memory : nta_default_memory()};
  read_fr(job, &in, mem.limit);
  pthread_mutex_init(&mem.mu, NULL);
  pthread_cond_init(&mem.cv, NULL);
  struct work w = {.mem = &mem, .in = &in, .arenas = job->arenas};
  int rc = 0;
  nta_phase("inputs listed");
  run_phase(&w, 0);
  nta_phase("headers read");
  if (make_groups(&w) != 0)
    rc = -1;
  else
    run_phase(&w, 1);
  nta_phase("processes loaded and reduced");
  pthread_mutex_destroy(&mem.mu);
  pthread_cond_destroy(&mem.cv);
  for (int i = 0; i < in.n; i++) {
    job->nfiles += in.v[i].is_file;
    if (in.v[i].left)
      nta_input_add(&job->left_out, &job->nleft_out, in.v[i].path, in.v[i].error, in.v[i].uid);
    else if (in.v[i].error)
      add_error(job, in.v[i].path, in.v[i].error);
  }
  /* The processes that loaded, in the order of their first readable file. */
  int np = 0, oom = rc != 0;
  for (int gi = 0; w.g && gi < w.ng; gi++) {
    oom |= w.g[gi].oom;
    if (w.g[gi].loaded)
      w.g[np++] = w.g[gi];
    else
      free(w.g[gi].files);
  }
  if (np > 1)
    qsort(w.g, (size_t)np, sizeof(*w.g), cmp_group);
  if (oom) {
    add_error(job, "analyze", "out of memory: the evidence was not all reduced");
    rc = -1;
  }
  if (np == 0 && job->nrunexits && !oom) {
    /* Only what nccltrace run saw: commands that left no ring or dump. */
    const struct nta_runexit *last = &job->runexits[0];
    for (int i = 1; i < job->nrunexits; i++)
      if (job->runexits[i].end_ns > last->end_ns)
        last = &job->runexits[i];
    const char *id = job_id && job_id[0] ? job_id : last->job;
    snprintf(job->job_id, sizeof(job->job_id), "%s", id);
    keep_runexits(job, id);
    job->job_chosen = job_id && job_id[0];
    free(w.g);
    for (int i = 0; i < in.n; i++) {
      free(in.v[i].path);
      free(in.v[i].error);
    }
    free(in.v);
    return job->nrunexits ? 0 : -1;
  }
  if (np == 0 && job->nfr && !oom) {
    /* Only Flight Recorder dumps: they carry no job id. */
    snprintf(job->job_id, sizeof(job->job_id), "%s", job_id && job_id[0] ? job_id : "torch-fr");
    free(w.g);
    for (int i = 0; i < in.n; i++) {
      free(in.v[i].path);
      free(in.v[i].error);
    }
    free(in.v);
    return 0;
  }
  if (np == 0)
    rc = -1;
  /* Jobs, in order of first appearance, each with its latest time; the
   * choice is the one every command makes (tools/jobpick.c). */
  struct ntt_jobs jobs = {0};
  int pick = -1;
  for (int gi = 0; rc == 0 && gi < np; gi++)
    if (ntt_jobs_add(&jobs, w.g[gi].proc.job, w.g[gi].proc.latest_ns) < 0)
      rc = -1;
  char (*ids)[64] = jobs.id;
  int nids = jobs.n;
  if (rc == 0) {
    pick = ntt_jobs_pick(&jobs, job_id);
    job->job_chosen = job_id && job_id[0];
    job->other_jobs = calloc((size_t)(nids > 0 ? nids : 1), sizeof(*job->other_jobs));
    for (int k = 0; k < nids && job->other_jobs; k++)
      if (k != pick)
        snprintf(job->other_jobs[job->nother_jobs++], 64, "%s", ids[k]);
    if (pick < 0) {
      char why[256];
      snprintf(why, sizeof(why), "no evidence of job %s (%d other job%s found)", job_id, nids,
               nids == 1 ? "" : "s");
      add_error(job, "--job", why);
      rc = -1;
    } else {
      snprintf(job->job_id, sizeof(job->job_id), "%s", ids[pick]);
      keep_runexits(job, ids[pick]);
      job->procs = calloc((size_t)np, sizeof(*job->procs));
      if (!job->procs)
        rc = -1;
    }
  }
  /* The job's attempts: the latest (highest restart count) unless
   * --attempt names one. */
  if (rc == 0) {
    int *v = malloc((size_t)np * sizeof *v), n = 0;
    for (int gi = 0; v && gi < np; gi++)
      if (strcmp(w.g[gi].proc.job, ids[pick]) == 0)
        v[n++] = w.g[gi].proc.attempt;
    if (!v || nta_pick_attempt(job, v, n, ids[pick]) != 0)
      rc = -1;
  }
  for (int gi = 0; gi < np; gi++) {
    if (rc == 0 && strcmp(w.g[gi].proc.job, ids[pick]) == 0 && w.g[gi].proc.attempt == job->attempt)
      job->procs[job->nprocs++] = w.g[gi].proc; /* moves: its pointers stay valid */
    else
      nta_proc_free(&w.g[gi].proc);
    free(w.g[gi].files);
  }
  if (rc == 0) {
    nta_keep_attempt_runexits(job);
    if (nta_dedupe_ranks(job) != 0)
      rc = -1;
  }
  free(w.g);
  for (int i = 0; i < in.n; i++) {
    free(in.v[i].path);
    free(in.v[i].error);
  }
  free(in.v);
  ntt_jobs_free(&jobs);
  return rc;
}
