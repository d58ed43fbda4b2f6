/* load.c -- inputs of `nccltrace analyze`: files and directories (searched
 * recursively for *.zst dumps and *.ring files), loaded with the shared
 * reader, grouped by job id.  Only the chosen job is kept: evidence of other
 * jobs lying in the same directory must never change a verdict (design §6).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tools/analyze/analyze.h"

struct nta_loaded {
  struct ntr_image *v;
  int n, cap;
};

static void add_error(struct nta_job *job, const char *path, const char *reason) {
  struct nta_input_error *e = realloc(job->unreadable, (size_t)(job->nunreadable + 1) * sizeof(*e));
  if (!e)
    return;
  job->unreadable = e;
  e = &job->unreadable[job->nunreadable++];
  snprintf(e->path, sizeof(e->path), "%s", path);
  snprintf(e->reason, sizeof(e->reason), "%s", reason);
}

static int has_suffix(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && strcmp(s + a - b, suf) == 0;
}

static void load_file(struct nta_job *job, struct nta_loaded *l, const char *path) {
  char err[256] = "";
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    struct ntr_image *v = realloc(l->v, (size_t)cap * sizeof(*v));
    if (!v) {
      add_error(job, path, "out of memory");
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  struct ntr_image *img = &l->v[l->n];
  memset(img, 0, sizeof(*img));
  job->nfiles++;
  if (ntr_image_load(path, 0, img, err, sizeof(err)) == 0) {
    l->n++;
    return;
  }
  /* The reader's reason may already start with "PATH: ": say the path once. */
  const char *why = err;
  size_t pl = strlen(path);
  if (strncmp(why, path, pl) == 0 && why[pl] == ':')
    why += pl + (why[pl + 1] == ' ' ? 2 : 1);
  add_error(job, path, why[0] ? why : "unreadable");
  /* What is intact past the damage is still evidence; the error above keeps
   * the exit status and the verdict honest about it. */
  ntr_image_free(img);
  memset(img, 0, sizeof(*img));
  char err2[256];
  if (ntr_image_load(path, 1, img, err2, sizeof(err2)) == 0)
    l->n++;
  else
    ntr_image_free(img);
}

static void walk(struct nta_job *job, struct nta_loaded *l, const char *path, int depth) {
  struct stat st;
  if (stat(path, &st) != 0) {
    add_error(job, path, strerror(errno));
    job->nfiles++;
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    load_file(job, l, path);
    return;
  }
  if (depth > 32)
    return; /* a symlink loop or an absurd tree: stop, do not recurse forever */
  DIR *d = opendir(path);
  if (!d) {
    add_error(job, path, strerror(errno));
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
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  for (size_t i = 0; i < n; i++) {
    char sub[4096];
    if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, names[i]) < sizeof(sub)) {
      struct stat s2;
      if (stat(sub, &s2) == 0 && S_ISDIR(s2.st_mode))
        walk(job, l, sub, depth + 1);
      else if (has_suffix(names[i], ".zst") || has_suffix(names[i], ".ring"))
        load_file(job, l, sub);
    }
    free(names[i]);
  }
  free(names);
}

/* Latest moment an image knows about: its last record or its trigger. */
static uint64_t image_latest_ns(const struct ntr_image *img) {
  uint64_t t = 0;
  if (img->nrecs)
    t = ntr_image_ns(img, img->recs[img->nrecs - 1].tsc);
  if (img->has_trigger) {
    uint64_t tt = ntr_image_ns(img, img->trigger.tsc);
    if (tt > t)
      t = tt;
  }
  return t;
}

static const char *job_of(const struct ntr_image *img) {
  return img->hdr.job_id[0] ? img->hdr.job_id : "(no job id)";
}

int nta_load(struct nta_job *job, char *const *paths, int npaths, const char *job_id) {
  struct nta_loaded l = {0};
  for (int i = 0; i < npaths; i++)
    walk(job, &l, paths[i], 0);
  if (l.n == 0) {
    free(l.v);
    return -1;
  }
  /* Jobs, each with its latest time. */
  char (*ids)[64] = calloc((size_t)l.n, sizeof(*ids));
  uint64_t *latest = calloc((size_t)l.n, sizeof(*latest));
  int nids = 0;
  if (!ids || !latest) {
    free(ids);
    free(latest);
    for (int i = 0; i < l.n; i++)
      ntr_image_free(&l.v[i]);
    free(l.v);
    return -1;
  }
  for (int i = 0; i < l.n; i++) {
    const char *id = job_of(&l.v[i]);
    int k = 0;
    while (k < nids && strcmp(ids[k], id) != 0)
      k++;
    if (k == nids)
      snprintf(ids[nids++], 64, "%s", id);
    uint64_t t = image_latest_ns(&l.v[i]);
    if (t > latest[k])
      latest[k] = t;
  }
  int pick = -1;
  if (job_id && job_id[0]) {
    for (int k = 0; k < nids; k++)
      if (strcmp(ids[k], job_id) == 0)
        pick = k;
    job->job_chosen = 1;
  } else {
    pick = 0;
    for (int k = 1; k < nids; k++)
      if (latest[k] > latest[pick])
        pick = k;
  }
  job->other_jobs = calloc((size_t)nids, sizeof(*job->other_jobs));
  for (int k = 0; k < nids && job->other_jobs; k++)
    if (k != pick)
      snprintf(job->other_jobs[job->nother_jobs++], 64, "%s", ids[k]);
  int rc = 0;
  if (pick < 0) {
    char why[256];
    snprintf(why, sizeof(why), "no evidence of job %s (%d other job%s found)", job_id, nids,
             nids == 1 ? "" : "s");
    add_error(job, "--job", why);
    rc = -1;
  } else {
    snprintf(job->job_id, sizeof(job->job_id), "%s", ids[pick]);
    job->imgs = calloc((size_t)l.n, sizeof(*job->imgs));
    if (!job->imgs)
      rc = -1;
  }
  for (int i = 0; i < l.n; i++) {
    if (rc == 0 && strcmp(job_of(&l.v[i]), ids[pick]) == 0)
      job->imgs[job->nimgs++] = l.v[i]; /* ownership moves: pointers inside stay valid */
    else
      ntr_image_free(&l.v[i]);
  }
  free(l.v);
  free(ids);
  free(latest);
  return rc;
}
