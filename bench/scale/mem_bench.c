/* mem_bench.c -- resident memory of a traced process, by default settings,
 * two ways, each run with and without LD_PRELOAD=libnccltrace.so,
 * alternating, medians over the rounds:
 *  1. two ranks of an emulator program (docs/emulator.md): after --settle
 *     seconds of running, rank 0's VmRSS (/proc/PID/status) and Pss
 *     (/proc/PID/smaps_rollup) are read; the ranks then run to their end
 *     (killing them would leak the emulator's shared memory);
 *  2. the worst case the emulator is too slow to reach in a benchmark: a
 *     process on the no-op NCCL that wrapped the whole default ring
 *     (100,000 collectives) and then took a dump (SIGUSR1), so every page
 *     of the ring and of the dump buffers has been touched.
 *
 *   mem_bench [--rounds R] [--settle S] [--fill-calls N] LIBNCCLTRACE NOOP_DIR EMU_DIR PROGRAM [ARGS...]
 *
 * The figures are what tracing adds to a process (traced minus untraced);
 * the traced totals are printed too.
 * Exit: 0 when it ran, 1 on failure.
 */
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/scale/bu.h"

static int sample(const char *lib, const char *emu, char **prog, double settle, const char *tmp, long *rss,
                  long *pss) {
  char idf[700], d1[700], d2[700];
  snprintf(idf, sizeof idf, "%s/uid-%d", tmp, lib ? 1 : 0);
  snprintf(d1, sizeof d1, "%s/rings", tmp);
  snprintf(d2, sizeof d2, "%s/dumps", tmp);
  unlink(idf);
  pid_t p[2];
  for (int r = 0; r < 2; r++) {
    p[r] = fork();
    if (p[r] == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      if (devnull >= 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
      }
      char rb[8];
      snprintf(rb, sizeof rb, "%d", r);
      setenv("RANK", rb, 1);
      setenv("LOCAL_RANK", rb, 1);
      setenv("WORLD_SIZE", "2", 1);
      setenv("LOCAL_WORLD_SIZE", "2", 1);
      setenv("UNIQUE_ID_FILE", idf, 1);
      setenv("LD_LIBRARY_PATH", emu, 1);
      setenv("NCCLEMU_DEVICES", "8", 1);
      setenv("NCCLTRACE_RING_DIR", d1, 1);
      setenv("NCCLTRACE_DIR", d2, 1);
      if (lib)
        setenv("LD_PRELOAD", lib, 1);
      else
        unsetenv("LD_PRELOAD");
      execv(prog[0], prog);
      _exit(127);
    }
  }
  bu_sleep(settle);
  *rss = bu_proc_kb(p[0], "status", "VmRSS");
  *pss = bu_proc_kb(p[0], "smaps_rollup", "Pss");
  int alive = 1;
  for (int r = 0; r < 2; r++) {
    int st;
    if (waitpid(p[r], &st, WNOHANG) == p[r])
      alive = 0; /* it ended before the sample: the numbers may be gone */
  }
  /* let them finish (a killed emulator rank leaves its shared memory) */
  double t0 = bu_now();
  for (int r = 0; r < 2; r++) {
    int st;
    while (waitpid(p[r], &st, WNOHANG) == 0) {
      if (bu_now() - t0 > 60)
        kill(p[r], SIGKILL);
      bu_sleep(0.02);
    }
  }
  return alive && *rss > 0 ? 0 : -1;
}

/* Mode 2, the child: fill the ring, dump, then wait to be measured. */
static int fill_child(long calls) {
  ncclUniqueId id;
  ncclComm_t comm;
  memset(&id, 0, sizeof id);
  snprintf(id.internal, sizeof id.internal, "bench-mem");
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
    return 1;
  static float buf[16];
  for (long i = 0; i < calls; i++)
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  raise(SIGUSR1); /* traced: dump and continue; untraced: ignored (below) */
  bu_sleep(1.0);
  printf("ready\n");
  fflush(stdout);
  bu_sleep(60);
  return 0;
}

static int sample_full(const char *lib, const char *noop, long calls, const char *tmp, long *rss, long *pss) {
  char d1[700], d2[700], cb[32];
  snprintf(d1, sizeof d1, "%s/rings", tmp);
  snprintf(d2, sizeof d2, "%s/dumps", tmp);
  snprintf(cb, sizeof cb, "%ld", calls);
  int fd[2];
  if (pipe(fd) != 0)
    return -1;
  pid_t p = fork();
  if (p == 0) {
    bu_child_stdio(fd);
    signal(SIGUSR1, SIG_IGN); /* the tracer installs its own handler over it */
    setenv("LD_LIBRARY_PATH", noop, 1);
    setenv("NCCLTRACE_RING_DIR", d1, 1);
    setenv("NCCLTRACE_DIR", d2, 1);
    if (lib)
      setenv("LD_PRELOAD", lib, 1);
    else
      unsetenv("LD_PRELOAD");
    execl("/proc/self/exe", "mem_bench", "--fill-child", cb, (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  char buf[16] = "";
  ssize_t got = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  *rss = bu_proc_kb(p, "status", "VmRSS");
  *pss = bu_proc_kb(p, "smaps_rollup", "Pss");
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  return got > 0 && *rss > 0 ? 0 : -1;
}

static void rm_tree(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "mem_bench: could not remove %s\n", dir);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--fill-child"))
    return fill_child(atol(argv[2]));
  int rounds = 3, i = 1;
  long fill = 100000;
  double settle = 1.5;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--fill-calls") && i + 1 < argc)
      fill = atol(argv[++i]);
    else if (!strcmp(argv[i], "--settle") && i + 1 < argc)
      settle = atof(argv[++i]);
    else
      break;
  }
  if (argc - i < 4 || rounds < 1 || rounds > 15 || settle <= 0 || fill < 1) {
    fprintf(stderr, "usage: mem_bench [--rounds R] [--settle S] [--fill-calls N] LIBNCCLTRACE NOOP_DIR EMU_DIR "
                    "PROGRAM [ARGS...]\n");
    return 1;
  }
  const char *lib = argv[i], *noop = argv[i + 1], *emu = argv[i + 2];
  char **prog = &argv[i + 3];
  char tmp[] = "/tmp/nccltrace-mem-XXXXXX";
  if (!mkdtemp(tmp))
    return 1;
  double tr[15], tp[15], ur[15], up[15], ftr[15], ftp[15], fur[15], fup[15];
  for (int r = 0; r < rounds; r++) {
    long a, b, c, d, e, f, g, h;
    if (sample(NULL, emu, prog, settle, tmp, &a, &b) || sample(lib, emu, prog, settle, tmp, &c, &d)) {
      fprintf(stderr, "mem_bench: a rank was not running at the sample (too short a run, or it failed)\n");
      rm_tree(tmp);
      return 1;
    }
    if (sample_full(NULL, noop, fill, tmp, &e, &f) || sample_full(lib, noop, fill, tmp, &g, &h)) {
      fprintf(stderr, "mem_bench: the full-ring process failed\n");
      rm_tree(tmp);
      return 1;
    }
    ur[r] = (double)a / 1024;
    up[r] = (double)b / 1024;
    tr[r] = (double)c / 1024;
    tp[r] = (double)d / 1024;
    fur[r] = (double)e / 1024;
    fup[r] = (double)f / 1024;
    ftr[r] = (double)g / 1024;
    ftp[r] = (double)h / 1024;
  }
  rm_tree(tmp);
  double TR = bu_median(tr, rounds), TP = bu_median(tp, rounds), UR = bu_median(ur, rounds),
         UP = bu_median(up, rounds);
  printf("emulator rank 0 after %.1f s: untraced VmRSS %.1f MiB Pss %.1f MiB; traced VmRSS %.1f MiB Pss %.1f MiB "
         "(medians of %d rounds; load %.1f)\n",
         settle, UR, UP, TR, TP, rounds, bu_loadavg());
  double FTR = bu_median(ftr, rounds), FTP = bu_median(ftp, rounds), FUR = bu_median(fur, rounds),
         FUP = bu_median(fup, rounds);
  printf("no-op NCCL process after %ld collectives and a dump: untraced VmRSS %.1f MiB Pss %.1f MiB; traced "
         "VmRSS %.1f MiB Pss %.1f MiB\n",
         fill, FUR, FUP, FTR, FTP);
  bu_figure("memory per traced process: added resident, emulator rank (VmRSS)", "<= 16 MiB", TR - UR <= 16,
            "+%.1f MiB (traced %.1f, untraced %.1f; Pss +%.1f)", TR - UR, TR, UR, TP - UP);
  bu_figure("memory per traced process: added resident, ring wrapped + a dump taken (VmRSS)", "<= 16 MiB",
            FTR - FUR <= 16, "+%.1f MiB (traced %.1f, untraced %.1f; Pss +%.1f)", FTR - FUR, FTR, FUR,
            FTP - FUP);
  return 0;
}
