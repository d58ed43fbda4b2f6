/* jobpick.c -- which job a command reads when its evidence holds several:
 * the one named (--job), else the one with the most recent evidence.  One
 * rule for analyze, export and status (docs/analyze.md "Jobs, attempts and
 * duplicate ranks"), so two commands never pick different jobs from the
 * same directory.
 *
 * Thread-safety: an ntt_jobs is used by one thread.  Not signal-safe
 * (allocates).
 */
#include <stdlib.h>
#include <string.h>
#include "tools/ntt.h"

uint64_t ntt_image_latest_ns(const struct ntt_image *img) {
  uint64_t t = 0;
  if (img->nrecs)
    t = ntt_image_ns(img, img->recs[img->nrecs - 1].tsc);
  if (img->has_trigger) {
    uint64_t tt = ntt_image_ns(img, img->trigger.tsc);
    if (tt > t)
      t = tt;
  }
  return t;
}

int ntt_jobs_add(struct ntt_jobs *j, const char *id, uint64_t t_ns) {
  int k = 0;
  while (k < j->n && strcmp(j->id[k], id) != 0)
    k++;
  if (k == j->n) {
    if (j->n == j->cap) {
      int cap = j->cap ? 2 * j->cap : 8;
      char(*v)[64] = realloc(j->id, (size_t)cap * sizeof *v);
      if (!v)
        return -1;
      j->id = v;
      uint64_t *l = realloc(j->latest, (size_t)cap * sizeof *l);
      if (!l)
        return -1;
      j->latest = l;
      j->cap = cap;
    }
    snprintf(j->id[k], sizeof j->id[k], "%s", id);
    j->latest[k] = 0;
    j->n++;
  }
  if (t_ns > j->latest[k])
    j->latest[k] = t_ns;
  return k;
}

int ntt_jobs_pick(const struct ntt_jobs *j, const char *want) {
  if (want && want[0]) {
    for (int k = 0; k < j->n; k++)
      if (strcmp(j->id[k], want) == 0)
        return k;
    return -1;
  }
  int pick = j->n ? 0 : -1;
  for (int k = 1; k < j->n; k++)
    if (j->latest[k] > j->latest[pick])
      pick = k;
  return pick;
}

int ntt_jobs_say(FILE *out, const char *cmd, const struct ntt_jobs *j, int pick, const char *want) {
  char e1[128];
  if (pick < 0) {
    fprintf(out, "nccltrace: %s: no evidence of job %s (%d other job%s found:", cmd, ntt_esc(want, e1, sizeof e1),
            j->n, j->n == 1 ? "" : "s");
    for (int k = 0; k < j->n && k < 16; k++)
      fprintf(out, " %s", ntt_esc(j->id[k][0] ? j->id[k] : "-", e1, sizeof e1));
    fprintf(out, "%s)\n", j->n > 16 ? " ..." : "");
    return 1;
  }
  if (j->n < 2 || (want && want[0]))
    return 0;
  fprintf(out, "nccltrace: %s: evidence of %d jobs; reading job %s, the most recent (pick another with --job ID; others:",
          cmd, j->n, ntt_esc(j->id[pick][0] ? j->id[pick] : "-", e1, sizeof e1));
  int shown = 0;
  for (int k = 0; k < j->n && shown < 16; k++)
    if (k != pick) {
      fprintf(out, " %s", ntt_esc(j->id[k][0] ? j->id[k] : "-", e1, sizeof e1));
      shown++;
    }
  fprintf(out, "%s)\n", j->n - 1 > shown ? " ..." : "");
  return 1;
}

void ntt_jobs_free(struct ntt_jobs *j) {
  free(j->id);
  free(j->latest);
  memset(j, 0, sizeof *j);
}
