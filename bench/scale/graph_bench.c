/* graph_bench.c -- what the tracer adds to one cudaGraphLaunch, for a graph
 * without NCCL calls (a captured memset: the tracer's whole cost is one
 * lookup) and for a graph holding one captured AllReduce (records, a
 * replay counter, a completion event).
 *
 * Runs on the CPU emulator (tests/emu: libcudart, libcuda, libnccl on one
 * rank); launches are real emulator launches, so the figures are the
 * difference of two runs of the same program, untraced and traced,
 * alternated like bench/overhead.  --callgrind also counts the
 * instructions of the launch loop on the launching thread (valgrind's
 * callgrind, --toggle-collect on the loop), a figure that does not move
 * with the machine's load.
 *
 *   graph_bench [--launches N] [--rounds R] [--callgrind] LIBNCCLTRACE EMU_DIR
 *
 * Exit: 0, 1 on failure.  Thread-safety / signal-safety: single-threaded
 * (the emulator's stream threads are its own).
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/scale/bu.h"

#define BATCH 64 /* launches between synchronizations: the stream queue stays short */

/* The measured loop, by name for callgrind's --toggle-collect. */
__attribute__((noinline)) void graph_bench_loop(cudaGraphExec_t x, cudaStream_t s, long n) {
  for (long i = 0; i < n; i++) {
    cudaGraphLaunch(x, s);
    if (i % BATCH == BATCH - 1)
      cudaStreamSynchronize(s);
  }
  cudaStreamSynchronize(s);
}

static int child(long n, int nccl) {
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t s;
  float *buf;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMalloc((void **)&buf, 64 * sizeof(float)) != cudaSuccess) {
    fprintf(stderr, "graph_bench: emulator setup failed\n");
    return 1;
  }
  cudaGraph_t g;
  cudaGraphExec_t x;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  cudaMemsetAsync(buf, 0, 64 * sizeof(float), s);
  if (nccl)
    ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comm, s);
  if (cudaStreamEndCapture(s, &g) != cudaSuccess || cudaGraphInstantiate(&x, g, 0) != cudaSuccess) {
    fprintf(stderr, "graph_bench: capture failed\n");
    return 1;
  }
  enum { REPS = 9 };
  double per[REPS];
  graph_bench_loop(x, s, n / 4); /* warm up */
  for (int r = 0; r < REPS; r++) {
    double t0 = bu_now();
    graph_bench_loop(x, s, n);
    per[r] = (bu_now() - t0) * 1e9 / (double)n;
  }
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  ncclCommDestroy(comm);
  printf("%.3f\n", bu_median(per, REPS));
  return 0;
}

static int run_child(long n, int nccl, const char *preload, double *out) {
  char a[32], buf[64];
  snprintf(a, sizeof a, "%ld", n);
  char *argv[] = {"/proc/self/exe", "--child", a, nccl ? "nccl" : "plain", NULL};
  int rc = bu_run_capture(argv, preload, buf, sizeof buf);
  if (rc == 0)
    *out = strtod(buf, NULL);
  return rc;
}

/* Instructions of graph_bench_loop on the launching thread, per launch. */
static double callgrind(long n, int nccl, const char *preload, const char *dir) {
  char out[200], a[32], cmd[600], line[512];
  snprintf(out, sizeof out, "%s/cg.%d.%d", dir, nccl, preload != NULL);
  snprintf(a, sizeof a, "%ld", n);
  snprintf(cmd, sizeof cmd,
           "%s%s valgrind --tool=callgrind --callgrind-out-file=%s --collect-atstart=no "
           "--toggle-collect=graph_bench_loop /proc/%d/exe --child %s %s >/dev/null 2>&1",
           preload ? "LD_PRELOAD=" : "env -u LD_PRELOAD", preload ? preload : "", out, (int)getpid(), a,
           nccl ? "nccl" : "plain");
  if (system(cmd) != 0)
    return -1;
  FILE *f = fopen(out, "r");
  double ir = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "totals:", 7) || !strncmp(line, "summary:", 8))
      ir = strtod(strchr(line, ':') + 1, NULL);
  if (f)
    fclose(f);
  return ir < 0 ? -1 : ir / (double)(n + n / 4 + 9 * n);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--child"))
    return child(atol(argv[2]), !strcmp(argv[3], "nccl"));
  long n = 20000;
  int rounds = 5, cg = 0, i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--launches") && i + 1 < argc)
      n = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--callgrind"))
      cg = 1;
    else
      break;
  }
  if (argc - i != 2 || n < 100 || rounds < 1 || rounds > 50) {
    fprintf(stderr, "usage: graph_bench [--launches N] [--rounds R] [--callgrind] LIBNCCLTRACE EMU_DIR\n");
    return 1;
  }
  const char *lib = argv[i], *emu = argv[i + 1];
  char tmpl[64];
  if (bu_trace_dirs(tmpl, sizeof tmpl, "graphbench"))
    return 1;
  setenv("LD_LIBRARY_PATH", emu, 1);
  setenv("NCCLEMU_DEVICES", "8", 1);
  unsetenv("NCCLTRACE_CHECK");
  double added[2] = {0, 0}, base[2] = {0, 0};
  for (int nccl = 0; nccl < 2; nccl++) {
    double p[50], t[50];
    for (int r = 0; r < rounds; r++)
      if (run_child(n, nccl, NULL, &p[r]) || run_child(n, nccl, lib, &t[r])) {
        fprintf(stderr, "graph_bench: a child run failed\n");
        return 1;
      }
    base[nccl] = bu_median(p, rounds);
    added[nccl] = bu_median(t, rounds) - base[nccl];
  }
  printf("launch of a graph without NCCL calls: untraced %.1f ns, added %.1f ns (%.3fx)\n", base[0], added[0],
         (base[0] + added[0]) / base[0]);
  printf("launch of a graph with one AllReduce:  untraced %.1f ns, added %.1f ns (%.3fx)\n", base[1], added[1],
         (base[1] + added[1]) / base[1]);
  printf("with NCCL / without: %.1fx the added cost\n", added[0] > 1 ? added[1] / added[0] : 0.0);
  bu_figure("added ns per graph launch, no NCCL in the graph", "report only", -1, "%.1f ns (%.3fx)", added[0],
            (base[0] + added[0]) / base[0]);
  bu_figure("added ns per graph launch, one AllReduce in the graph", "report only", -1, "%.1f ns (%.3fx)", added[1],
            (base[1] + added[1]) / base[1]);
  if (cg) {
    long cn = n / 10 > 1000 ? n / 10 : 1000;
    double ir[2][2];
    for (int nccl = 0; nccl < 2; nccl++) {
      ir[nccl][0] = callgrind(cn, nccl, NULL, tmpl);
      ir[nccl][1] = callgrind(cn, nccl, lib, tmpl);
    }
    if (ir[0][0] < 0 || ir[0][1] < 0 || ir[1][0] < 0 || ir[1][1] < 0) {
      printf("callgrind: did not run (valgrind missing?)\n");
    } else {
      printf("callgrind, instructions per launch (launching thread): no NCCL %.0f -> %.0f (+%.0f), "
             "one AllReduce %.0f -> %.0f (+%.0f)\n",
             ir[0][0], ir[0][1], ir[0][1] - ir[0][0], ir[1][0], ir[1][1], ir[1][1] - ir[1][0]);
      bu_figure("added instructions per graph launch, no NCCL (callgrind)", "report only", -1, "%.0f", ir[0][1] - ir[0][0]);
      bu_figure("added instructions per graph launch, one AllReduce (callgrind)", "report only", -1, "%.0f",
                ir[1][1] - ir[1][0]);
    }
  }
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
  if (system(cmd) != 0)
    fprintf(stderr, "graph_bench: could not remove %s\n", tmpl);
  return 0;
}
