/* dlopen_cost.c -- what the dlopen interposition (interpose/dlopen.c) costs
 * a process: ns per dlopen+dlclose of a library already loaded (libm: the
 * common case, routed straight to the real dlopen) and of libnccl.so.2
 * (routed to the NCCL path, which hands back libnccltrace.so when
 * preloaded).  bench/run.sh runs it with and without the preload in
 * alternation and prints the ratios.
 *
 *   dlopen_cost [--calls N]     prints "other: NS" and "nccl: NS"
 * Single-threaded.  Not signal-safe.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double per_pair(const char *name, long calls) {
  void *keep = dlopen(name, RTLD_NOW); /* loaded once: the loop measures the lookup */
  if (!keep) {
    fprintf(stderr, "dlopen_cost: %s: %s\n", name, dlerror());
    exit(1);
  }
  double t0 = now_ns();
  for (long i = 0; i < calls; i++) {
    void *h = dlopen(name, RTLD_NOW);
    if (!h) {
      fprintf(stderr, "dlopen_cost: %s: %s\n", name, dlerror());
      exit(1);
    }
    dlclose(h);
  }
  return (now_ns() - t0) / (double)calls;
}

int main(int argc, char **argv) {
  long calls = 20000;
  if (argc == 3 && strcmp(argv[1], "--calls") == 0)
    calls = atol(argv[2]);
  if (calls <= 0) {
    fprintf(stderr, "usage: dlopen_cost [--calls N]\n");
    return 2;
  }
  printf("other: %.1f\n", per_pair("libm.so.6", calls));
  printf("nccl: %.1f\n", per_pair("libnccl.so.2", calls));
  return 0;
}
