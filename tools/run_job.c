/* run_job.c -- which job CMD's evidence belongs to (run_job.h).
 *
 * The tracer, not run, knows a job's id: a launcher variable set only in
 * the ranks' environment (torchrun's TORCHELASTIC_RUN_ID), or an id derived
 * from the job's communicator (docs/identity.md).  So run reads it back
 * from the ring headers its command's processes left: the dumps in the
 * dump directory and the rings in the ring directory, written after CMD
 * started (real_base_ns, the tracer's clock base, is taken at each
 * process's start).
 *   1. Headers of CMD itself or of its children (pid or ppid = CMD's pid:
 *      the ranks of a launcher such as torchrun or launch.sh): their most
 *      frequent job id (ties: the smallest).
 *   2. Else, a grandchild's (a script that starts the launcher): headers of
 *      this host that started after CMD, when all of them name one job.
 *      Two jobs sharing the directories at once name two and fall to 3.
 *   3. Else none: run's own environment's id, else "nojob" (run.c).
 * Bounded: at most RJ_MAX_FILES entries looked at per directory, dumps
 * older than CMD skipped by their mtime before any is opened.
 *
 * Thread-safety: run's one thread only.  Not signal-safe (reads files).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tools/ntt.h"
#include "tools/run_job.h"

#define RJ_MAX_FILES 8192
#define RJ_MAX_JOBS 16
#define RJ_SLACK_NS 1000000000ull /* clocks of one host, read at different moments */

struct rj_tally {
  char job[RJ_MAX_JOBS][sizeof(((struct ntr_ring_header *)0)->job_id)];
  int n[RJ_MAX_JOBS];
  int njobs, overflow;
};

static void tally(struct rj_tally *t, const char *job) {
  for (int i = 0; i < t->njobs; i++)
    if (!strcmp(t->job[i], job)) {
      t->n[i]++;
      return;
    }
  if (t->njobs == RJ_MAX_JOBS) {
    t->overflow = 1;
    return;
  }
  snprintf(t->job[t->njobs], sizeof t->job[0], "%s", job);
  t->n[t->njobs++] = 1;
}

static int has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n >= k && !strcmp(s + n - k, suf);
}

static void scan(const char *dir, const char *suffix, pid_t pid, uint64_t start_ns, const char *host,
                 struct rj_tally *mine, struct rj_tally *others) {
  DIR *d = dir && dir[0] ? opendir(dir) : NULL;
  if (!d)
    return;
  struct dirent *e;
  int seen = 0;
  while ((e = readdir(d)) != NULL && seen < RJ_MAX_FILES) {
    if (strncmp(e->d_name, "nccltrace-", 10) != 0 || !has_suffix(e->d_name, suffix))
      continue;
    seen++;
    char path[8192];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
      continue;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    uint64_t mt = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    if (!strcmp(suffix, ".zst") && mt + RJ_SLACK_NS < start_ns)
      continue; /* a dump written before CMD started */
    struct ntr_ring_header h;
    char err[256];
    if (ntt_image_peek(path, &h, err, sizeof err) != 0)
      continue;
    struct ntt_ident id;
    ntt_ident_of(&h, &id);
    if (!id.job[0] || h.real_base_ns + RJ_SLACK_NS < start_ns)
      continue;
    if (h.pid == pid || h.ppid == pid)
      tally(mine, id.job);
    else if (!strcmp(id.host, host))
      tally(others, id.job);
  }
  closedir(d);
}

int ntt_run_evidence_job(pid_t pid, uint64_t start_ns, const char *dump_dir, const char *ring_dir, char *job,
                         size_t len) {
  static struct rj_tally mine, others; /* single-threaded command, once */
  memset(&mine, 0, sizeof mine);
  memset(&others, 0, sizeof others);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  scan(dump_dir, ".zst", pid, start_ns, host, &mine, &others);
  scan(ring_dir, ".ring", pid, start_ns, host, &mine, &others);
  job[0] = '\0';
  if (mine.njobs) {
    int best = 0;
    for (int i = 1; i < mine.njobs; i++)
      if (mine.n[i] > mine.n[best] || (mine.n[i] == mine.n[best] && strcmp(mine.job[i], mine.job[best]) < 0))
        best = i;
    snprintf(job, len, "%s", mine.job[best]);
    return 1;
  }
  if (others.njobs == 1 && !others.overflow) {
    snprintf(job, len, "%s", others.job[0]);
    return 1;
  }
  return 0;
}
