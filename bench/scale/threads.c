/* threads.c -- what the tracer adds per collective call when 8 threads
 * each drive their own communicator, against 1 thread: the ring is shared
 * by every thread of a process (one fetch-add on its head per record), so
 * this is where contention would show.
 *
 *   threads [--calls N] [--rounds R] [--threads T] LIBNCCLTRACE
 *
 * Runs against the no-op NCCL (bench/noop): one invocation re-executes
 * itself with and without LD_PRELOAD=LIBNCCLTRACE, with 1 and with T
 * threads, alternating (R rounds), and takes medians.  Cost per call is the
 * calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) over its calls: with
 * 8 threads on 2 cores, wall time would only measure the time sharing.
 * Exit: 0 when it ran, 1 on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/scale/bu.h"

struct worker {
  int idx;
  long calls;
  double ns;
  pthread_t th;
  pthread_barrier_t *bar;
};

static void *work(void *arg) {
  struct worker *w = arg;
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  snprintf(id.internal, sizeof id.internal, "bench-threads-%d", w->idx); /* a comm of its own */
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    w->ns = -1;
    return NULL;
  }
  static float buf[16];
  for (long i = 0; i < w->calls / 4; i++)
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  pthread_barrier_wait(w->bar);
  double c0 = bu_thread_cpu();
  for (long i = 0; i < w->calls; i++)
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  w->ns = (bu_thread_cpu() - c0) * 1e9 / (double)w->calls;
  ncclCommDestroy(comm);
  return NULL;
}

static int child(int nth, long calls) {
  struct worker w[64];
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, (unsigned)nth);
  for (int i = 0; i < nth; i++) {
    w[i] = (struct worker){.idx = i, .calls = calls, .bar = &bar};
    pthread_create(&w[i].th, NULL, work, &w[i]);
  }
  double v[64];
  for (int i = 0; i < nth; i++) {
    pthread_join(w[i].th, NULL);
    if (w[i].ns < 0)
      return 1;
    v[i] = w[i].ns;
  }
  printf("%.3f\n", bu_median(v, nth));
  return 0;
}

static int run_child(int nth, long calls, const char *preload, double *out) {
  char a[32], b[32], buf[64];
  snprintf(a, sizeof a, "%d", nth);
  snprintf(b, sizeof b, "%ld", calls);
  char *argv[] = {"/proc/self/exe", "--child", a, b, NULL};
  int rc = bu_run_capture(argv, preload, buf, sizeof buf);
  if (rc == 0)
    *out = strtod(buf, NULL);
  return rc;
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return child(atoi(argv[2]), atol(argv[3]));
  long calls = 1000000;
  int rounds = 5, nth = 8, i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
      nth = atoi(argv[++i]);
    else
      break;
  }
  if (argc - i != 1 || calls < 1000 || rounds < 1 || rounds > 25 || nth < 2 || nth > 64) {
    fprintf(stderr, "usage: threads [--calls N] [--rounds R] [--threads T] LIBNCCLTRACE\n");
    return 1;
  }
  const char *lib = argv[i];
  char tmpl[64];
  if (bu_trace_dirs(tmpl, sizeof tmpl, "threads"))
    return 1;
  double p1[25], t1[25], pn[25], tn[25];
  for (int r = 0; r < rounds; r++) {
    if (run_child(1, calls, NULL, &p1[r]) || run_child(1, calls, lib, &t1[r]) ||
        run_child(nth, calls, NULL, &pn[r]) || run_child(nth, calls, lib, &tn[r])) {
      fprintf(stderr, "threads: a child run failed\n");
      return 1;
    }
  }
  double P1 = bu_median(p1, rounds), T1 = bu_median(t1, rounds), PN = bu_median(pn, rounds),
         TN = bu_median(tn, rounds);
  printf("1 thread:   untraced %.1f ns/call, traced %.1f ns/call, added %.1f\n", P1, T1, T1 - P1);
  printf("%d threads: untraced %.1f ns/call, traced %.1f ns/call, added %.1f (each thread on its own comm; "
         "CPU time per call, median over threads, median of %d rounds x %ld calls; load %.1f)\n",
         nth, PN, TN, TN - PN, rounds, calls, bu_loadavg());
  char name[96], tgt[64];
  snprintf(name, sizeof name, "threads: traced cost per call, %d threads vs 1", nth);
  snprintf(tgt, sizeof tgt, "<= 2x of 1 thread");
  bu_figure(name, tgt, TN <= 2 * T1, "%.2fx (%.1f vs %.1f ns; added %.1f vs %.1f ns)", TN / T1, TN, T1, TN - PN,
            T1 - P1);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  if (system(cmd) != 0)
    fprintf(stderr, "threads: could not remove %s\n", tmpl);
  return 0;
}
