/* analyze_bench.c -- what `nccltrace analyze` costs on big jobs, and how that
 * cost grows with the number of ranks.
 *
 *   analyze_bench --nccltrace PATH --cache DIR [--ranks 64,256,1024]
 *                 [--recs N] [--big-ranks N --big-recs N] [--reps R]
 *                 [--mem-cap-gib G] [--time-cap-s S]
 *
 * Inputs are synthetic dumps written by the real recorder (synth.h): every
 * rank of one world communicator, a mismatch at seq recs/2 on rank N/3.
 * They are generated once into DIR/r<N>x<R> (kept between runs: writing
 * 1,024 dumps of a full ring takes minutes on two cores) and reused.
 * `analyze --json` runs as a child; wall time from fork to wait4, CPU time
 * and peak RSS from wait4's rusage.  A child that exceeds --mem-cap-gib of
 * address space (RLIMIT_AS, default 12) or --time-cap-s (default 120) is
 * stopped and reported as failing: it must never push the machine into the
 * OOM killer.
 * Figures: time and memory of the big configuration (default 1,024 ranks x
 * 65,536 records) against 10 s / 2 GiB, and the exponent k of cost ~ ranks^k
 * over --ranks at --recs records (k <= 1.1 counts as linear).
 * Exit: 0 when it ran, 1 on failure to generate or run.  Single-threaded.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/scale/bu.h"
#include "bench/scale/synth.h"

struct run {
  double wall, cpu, rss_mib;
  int ok;          /* exit 0 and the verdict found */
  char why[160];
};

static int ensure_job(const char *cache, int nranks, uint64_t recs, char *dir, size_t dl) {
  snprintf(dir, dl, "%s/r%dx%llu", cache, nranks, (unsigned long long)recs);
  char mark[1200];
  snprintf(mark, sizeof mark, "%s/.complete", dir);
  if (access(mark, F_OK) == 0)
    return 0;
  char cmd[1300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    return -EIO;
  mkdir(cache, 0700);
  double t0 = bu_now();
  fprintf(stderr, "analyze_bench: writing %d synthetic dumps of %llu records into %s ...\n", nranks,
          (unsigned long long)recs, dir);
  int rc = synth_write_job(cache, dir, nranks, recs, recs / 2, nranks / 3);
  if (rc)
    return rc;
  int fd = open(mark, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0)
    close(fd);
  fprintf(stderr, "analyze_bench: ... done in %.1f s\n", bu_now() - t0);
  return 0;
}

static void run_analyze(const char *tool, const char *dir, double mem_cap_gib, double time_cap_s,
                        struct run *out) {
  memset(out, 0, sizeof *out);
  char outpath[] = "/tmp/nccltrace-anabench-XXXXXX";
  int ofd = mkstemp(outpath);
  if (ofd < 0) {
    snprintf(out->why, sizeof out->why, "mkstemp: %s", strerror(errno));
    return;
  }
  double t0 = bu_now();
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit rl = {(rlim_t)(mem_cap_gib * 1073741824.0), (rlim_t)(mem_cap_gib * 1073741824.0)};
    setrlimit(RLIMIT_AS, &rl);
    dup2(ofd, 1);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0)
      dup2(devnull, 2);
    execl(tool, tool, "analyze", "--json", dir, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  int killed = 0;
  for (;;) {
    pid_t w = wait4(pid, &st, WNOHANG, &ru);
    if (w == pid)
      break;
    if (w < 0) {
      snprintf(out->why, sizeof out->why, "wait4: %s", strerror(errno));
      close(ofd);
      unlink(outpath);
      return;
    }
    if (!killed && bu_now() - t0 > time_cap_s) {
      kill(pid, SIGKILL);
      killed = 1;
    }
    bu_sleep(0.005);
  }
  out->wall = bu_now() - t0;
  out->cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
             ru.ru_stime.tv_usec * 1e-6;
  out->rss_mib = (double)ru.ru_maxrss / 1024.0;
  /* the verdict must be the planted mismatch */
  char buf[4096] = "";
  ssize_t n = pread(ofd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  close(ofd);
  unlink(outpath);
  if (killed)
    snprintf(out->why, sizeof out->why, "stopped after the %.0f s cap", time_cap_s);
  else if (!WIFEXITED(st) || WEXITSTATUS(st) != 1) /* 1: a fault found, the planted mismatch */
    snprintf(out->why, sizeof out->why, "analyze %s %d (address space capped at %.0f GiB)",
             WIFEXITED(st) ? "exited" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
             mem_cap_gib);
  else if (!strstr(buf, "collective_mismatch"))
    snprintf(out->why, sizeof out->why, "verdict is not the planted collective_mismatch");
  else
    out->ok = 1;
}

int main(int argc, char **argv) {
  const char *tool = NULL, *cache = NULL, *ranks_s = "64,256,1024";
  uint64_t recs = 8192, big_recs = 65536;
  int big_ranks = 1024, reps = 3;
  double mem_cap = 12, time_cap = 120;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc)
      goto usage;
    if (!strcmp(argv[i], "--nccltrace"))
      tool = argv[++i];
    else if (!strcmp(argv[i], "--cache"))
      cache = argv[++i];
    else if (!strcmp(argv[i], "--ranks"))
      ranks_s = argv[++i];
    else if (!strcmp(argv[i], "--recs"))
      recs = (uint64_t)atoll(argv[++i]);
    else if (!strcmp(argv[i], "--big-ranks"))
      big_ranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--big-recs"))
      big_recs = (uint64_t)atoll(argv[++i]);
    else if (!strcmp(argv[i], "--reps"))
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mem-cap-gib"))
      mem_cap = atof(argv[++i]);
    else if (!strcmp(argv[i], "--time-cap-s"))
      time_cap = atof(argv[++i]);
    else
      goto usage;
  }
  if (!tool || !cache || reps < 1 || reps > 15 || recs < 64 || big_recs < 64)
    goto usage;
  int nr[8], n = 0;
  for (const char *p = ranks_s; *p && n < 8;) {
    nr[n++] = atoi(p);
    p = strchr(p, ',');
    if (!p)
      break;
    p++;
  }
  double xs[8], ys[8], yw[8];
  for (int k = 0; k < n; k++) {
    char dir[1024];
    int rc = ensure_job(cache, nr[k], recs, dir, sizeof dir);
    if (rc) {
      fprintf(stderr, "analyze_bench: cannot write synthetic dumps: %s\n", strerror(-rc));
      return 1;
    }
    double w[15], c[15], rss = 0;
    for (int r = 0; r < reps; r++) {
      struct run ru;
      run_analyze(tool, dir, mem_cap, time_cap, &ru);
      if (!ru.ok) {
        fprintf(stderr, "analyze_bench: %d ranks: %s\n", nr[k], ru.why);
        bu_figure("analyze cost growth (exponent k, cost ~ ranks^k)", "k <= 1.1 (linear or better)", 0,
                  "failed at %d ranks: %s", nr[k], ru.why);
        return 0;
      }
      w[r] = ru.wall;
      c[r] = ru.cpu;
      rss = ru.rss_mib > rss ? ru.rss_mib : rss;
    }
    xs[k] = nr[k];
    ys[k] = bu_median(c, reps);
    yw[k] = bu_median(w, reps);
    printf("analyze %5d ranks x %llu records: wall %.3f s, CPU %.3f s, max RSS %.0f MiB (median of %d, load %.1f)\n",
           nr[k], (unsigned long long)recs, yw[k], ys[k], rss, reps, bu_loadavg());
  }
  if (n >= 2) {
    double kc = bu_fit_exponent(xs, ys, n), kw = bu_fit_exponent(xs, yw, n);
    char tgt[64];
    snprintf(tgt, sizeof tgt, "k <= 1.1 (linear or better)");
    bu_figure("analyze cost growth (exponent k, cost ~ ranks^k)", tgt, kc <= 1.1,
              "k = %.2f on CPU time, %.2f on wall (%d..%d ranks x %llu recs)", kc, kw, nr[0], nr[n - 1],
              (unsigned long long)recs);
  }
  if (big_ranks > 0) {
    char dir[1024];
    int rc = ensure_job(cache, big_ranks, big_recs, dir, sizeof dir);
    if (rc) {
      fprintf(stderr, "analyze_bench: cannot write synthetic dumps: %s\n", strerror(-rc));
      return 1;
    }
    struct run ru;
    run_analyze(tool, dir, mem_cap, time_cap, &ru);
    char name[128];
    snprintf(name, sizeof name, "analyze %d ranks x %llu records: time", big_ranks,
             (unsigned long long)big_recs);
    if (!ru.ok) {
      fprintf(stderr, "analyze_bench: %s\n", ru.why);
      bu_figure(name, "<= 10 s", 0, "did not finish: %s (after %.1f s, max RSS %.0f MiB)", ru.why,
                ru.wall, ru.rss_mib);
      snprintf(name, sizeof name, "analyze %d ranks x %llu records: max RSS", big_ranks,
               (unsigned long long)big_recs);
      bu_figure(name, "<= 2 GiB", 0, "%.0f MiB when it stopped", ru.rss_mib);
      return 0;
    }
    printf("analyze %d ranks x %llu records: wall %.2f s, CPU %.2f s, max RSS %.0f MiB (load %.1f)\n",
           big_ranks, (unsigned long long)big_recs, ru.wall, ru.cpu, ru.rss_mib, bu_loadavg());
    bu_figure(name, "<= 10 s", ru.wall <= 10, "%.2f s wall (%.2f s CPU)", ru.wall, ru.cpu);
    snprintf(name, sizeof name, "analyze %d ranks x %llu records: max RSS", big_ranks,
             (unsigned long long)big_recs);
    bu_figure(name, "<= 2 GiB", ru.rss_mib <= 2048, "%.0f MiB", ru.rss_mib);
  }
  return 0;
usage:
  fprintf(stderr, "usage: analyze_bench --nccltrace PATH --cache DIR [--ranks 64,256,1024] [--recs N]\n"
                  "       [--big-ranks N --big-recs N] [--reps R] [--mem-cap-gib G] [--time-cap-s S]\n");
  return 1;
}
