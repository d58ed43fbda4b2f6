/* overhead.c -- what the tracer adds to one ncclAllReduce call.
 *
 * Runs against the no-op NCCL of bench/noop (every call returns at once),
 * so the difference between a traced and an untraced run is the tracer's
 * own cost.  One invocation re-executes itself alternately without and with
 * LD_PRELOAD=libnccltrace.so (several alternations, so drift and noise hit
 * both sides alike) and prints the median ns/call of each and the added ns.
 *
 *   overhead [--calls N] [--rounds R] [--max-ns T] [--minrec LIB] LIBNCCLTRACE NOOP_DIR
 *
 * With --minrec, a third child preloads the minimal recorder
 * (bench/minrec.c) in the same alternation, and the ratio of nccltrace's
 * added ns to the minimal recorder's is printed ("ratio:").
 *
 * With --metrics PORT, both sides are traced (LIBNCCLTRACE) and alternate
 * NCCLTRACE_METRICS unset and =127.0.0.1:PORT, while a scraper thread of
 * this parent (bench/scrape.h) GETs /metrics every second; it prints both
 * medians, how many scrapes were answered, and their ratio ("ratio:", on
 * over off).  Each child must live some seconds to be scraped: give it
 * --calls of tens of millions.  Exit 1 also when no scrape was answered.
 *
 * Exit: 0 (with --max-ns: 0 only when added <= T), 1 on failure.
 * Thread-safety / signal-safety: the measured children are single-threaded
 * (but for the tracer's threads); the parent's scraper thread shares one
 * atomic counter with it.
 */
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/scale/bu.h"
#include "bench/scrape.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The measured side: N calls, repeated, median of the repetitions. */
static int child(long calls) {
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "overhead: no-op NCCL init failed\n");
    return 1;
  }
  static float buf[16];
  enum { REPS = 15 };
  double per[REPS];
  for (long i = 0; i < calls / 4; i++) /* warm up caches and lazy symbol binding */
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ns();
    for (long i = 0; i < calls; i++)
      ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
    per[r] = (now_ns() - t0) / (double)calls;
  }
  ncclCommDestroy(comm);
  /* The minimum is what a call costs when nothing else wants the CPU; the
   * median what it costs on this machine as it is. */
  double lo = per[0];
  for (int r = 1; r < REPS; r++)
    lo = per[r] < lo ? per[r] : lo;
  printf("%.3f %.3f\n", bu_median(per, REPS), lo);
  return 0;
}

static int run_child(long calls, const char *preload, double *out, double *lo) {
  char n[32], buf[64];
  snprintf(n, sizeof n, "%ld", calls);
  char *argv[] = {"/proc/self/exe", "--child", n, NULL};
  int rc = bu_run_capture(argv, preload, buf, sizeof buf);
  if (rc == 0) {
    char *end;
    *out = strtod(buf, &end);
    *lo = strtod(end, NULL);
  }
  return rc;
}

static void rm_dirs(const char *tmpl) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  if (system(cmd) != 0)
    fprintf(stderr, "overhead: could not remove %s\n", tmpl);
}

/* --metrics: traced without the endpoint vs traced with it, scraped every
 * second, alternating.  The children inherit the environment set here
 * (the scraper thread reads none of it). */
static int metrics_pair(long calls, int rounds, const char *lib, int port, const char *tmpl) {
  char addr[32];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  if (bsc_start(port) != 0) {
    fprintf(stderr, "overhead: no scraper thread\n");
    return 1;
  }
  double off[50], on[50], off_lo = 1e30, on_lo = 1e30;
  for (int r = 0; r < rounds; r++) {
    double a, b;
    unsetenv("NCCLTRACE_METRICS");
    int rc = run_child(calls, lib, &off[r], &a);
    setenv("NCCLTRACE_METRICS", addr, 1);
    if (rc || run_child(calls, lib, &on[r], &b)) {
      fprintf(stderr, "overhead: a child run failed\n");
      return 1;
    }
    off_lo = a < off_lo ? a : off_lo;
    on_lo = b < on_lo ? b : on_lo;
  }
  unsetenv("NCCLTRACE_METRICS");
  long answered = bsc_count();
  double f = bu_median(off, rounds), o = bu_median(on, rounds);
  printf("metrics off: %.2f ns/call (traced; median of %d runs x %ld calls)\n", f, rounds, calls);
  printf("metrics on:  %.2f ns/call (NCCLTRACE_METRICS=%s, %ld scrapes answered, 1 s apart)\n", o, addr,
         answered);
  printf("best:        off %.2f, on %.2f ns/call (fastest repetition)\n", off_lo, on_lo);
  printf("ratio:       %.3f on / off (fastest repetitions: %.3f)\n", o / f, on_lo / off_lo);
  rm_dirs(tmpl);
  if (answered == 0) {
    fprintf(stderr, "overhead: the endpoint never answered a scrape\n");
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  long calls = 2000000;
  int rounds = 5;
  double max_ns = -1;
  const char *minrec = NULL;
  int i = 1, port = 0;
  if (argc == 3 && !strcmp(argv[1], "--child"))
    return child(atol(argv[2]));
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-ns") && i + 1 < argc)
      max_ns = atof(argv[++i]);
    else if (!strcmp(argv[i], "--minrec") && i + 1 < argc)
      minrec = argv[++i];
    else if (!strcmp(argv[i], "--metrics") && i + 1 < argc)
      port = atoi(argv[++i]);
    else
      break;
  }
  if (argc - i != 2 || calls < 1000 || rounds < 1 || rounds > 50) {
    fprintf(stderr, "usage: overhead [--calls N] [--rounds R] [--max-ns T] [--minrec LIB] [--metrics PORT] "
                    "LIBNCCLTRACE NOOP_DIR\n");
    return 1;
  }
  const char *lib = argv[i], *noop = argv[i + 1];
  /* The traced children write their ring and dump here, not in the cwd. */
  char tmpl[64];
  if (bu_trace_dirs(tmpl, sizeof tmpl, "bench"))
    return 1;
  setenv("LD_LIBRARY_PATH", noop, 1); /* both sides run on the no-op NCCL */
  if (port > 0)
    return metrics_pair(calls, rounds, lib, port, tmpl);
  double plain[50], traced[50], mr[50], plain_lo = 1e30, traced_lo = 1e30, mr_lo = 1e30;
  for (int r = 0; r < rounds; r++) {
    double a, b, c;
    if (run_child(calls, NULL, &plain[r], &a) || run_child(calls, lib, &traced[r], &b) ||
        (minrec && run_child(calls, minrec, &mr[r], &c))) {
      fprintf(stderr, "overhead: a child run failed\n");
      return 1;
    }
    plain_lo = a < plain_lo ? a : plain_lo;
    if (minrec)
      mr_lo = c < mr_lo ? c : mr_lo;
    traced_lo = b < traced_lo ? b : traced_lo;
  }
  double p = bu_median(plain, rounds), t = bu_median(traced, rounds);
  printf("untraced: %.2f ns/call (median of %d runs x %ld calls)\n", p, rounds, calls);
  printf("traced:   %.2f ns/call\n", t);
  printf("added:    %.2f ns/call (target <= 25)\n", t - p);
  printf("best:     untraced %.2f, traced %.2f, added %.2f ns/call (fastest repetition)\n", plain_lo,
         traced_lo, traced_lo - plain_lo);
  if (minrec) {
    double m = bu_median(mr, rounds);
    printf("minrec:   %.2f ns/call, added %.2f ns/call (bench/minrec.c, same alternation)\n", m, m - p);
    printf("ratio:    %.2f x the minimal recorder's added ns (fastest repetitions: %.2f)\n",
           m - p > 0 ? (t - p) / (m - p) : 0.0,
           mr_lo - plain_lo > 0 ? (traced_lo - plain_lo) / (mr_lo - plain_lo) : 0.0);
  }
  rm_dirs(tmpl);
  return max_ns >= 0 && t - p > max_ns ? 1 : 0;
}
