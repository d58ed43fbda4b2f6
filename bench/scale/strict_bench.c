/* strict_bench.c -- strict-mode latency per collective on 8 local ranks
 * (separate processes, libnccltrace.so preloaded, the no-op NCCL under it,
 * NCCLTRACE_CHECK=strict, the real coordinator in a process of its own),
 * against MPI_Allgather of the same bytes (one 48-byte fingerprint per
 * rank) on the same number of ranks with Open MPI.  The ranks say they are
 * one host (LOCAL_WORLD_SIZE = WORLD_SIZE), so strict calls agree through
 * the shared-memory board (NCCLTRACE_STRICT_SHM=1, the default there); each
 * round also runs them through the coordinator (NCCLTRACE_STRICT_SHM=0) for
 * comparison.  Rounds alternate coordinator, board and MPI runs in one
 * invocation; medians are reported; the target is judged on the board.
 *
 *   strict_bench [--ranks N] [--calls C] [--rounds R] [--mpi-bin PATH]
 *                LIBNCCLTRACE NOOP_DIR
 *
 * Without --mpi-bin (no Open MPI found at build time) the strict figure is
 * printed alone, marked INFO.  mpirun is run as root with
 * --allow-run-as-root --oversubscribe and the shared-memory transport.
 * Exit: 0 when it ran, 1 on failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/scale/bu.h"
#include "bench/scale/coordproc.h"

#define SECRET "nccltrace-bench-secret"

/* One rank: init a comm of n ranks, let the client connect, then time C
 * AllReduces (each waits for every rank's fingerprint). */
static int rank_main(int rank, int n, long calls) {
  ncclUniqueId id;
  ncclComm_t comm;
  memset(&id, 0, sizeof id);
  snprintf(id.internal, sizeof id.internal, "bench-strict");
  if (ncclCommInitRank(&comm, n, id, rank) != ncclSuccess)
    return 1;
  bu_sleep(0.7); /* the exchange client connects in the background */
  static float buf[16];
  for (long i = 0; i < calls / 5 + 20; i++)
    if (ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
      return 1;
  double t0 = bu_now();
  for (long i = 0; i < calls; i++)
    if (ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL) != ncclSuccess)
      return 1;
  double us = (bu_now() - t0) / (double)calls * 1e6;
  ncclCommDestroy(comm);
  printf("%.3f\n", us);
  return 0;
}

/* Start the n ranks; @return the median of their us/call, or -1. */
static double strict_round(const char *lib, const char *noop, int n, long calls, int port, const char *tmp,
                           int shm) {
  int fds[64];
  pid_t pids[64];
  char coord[64], nb[16], cb[32];
  snprintf(coord, sizeof coord, "127.0.0.1:%d", port);
  snprintf(nb, sizeof nb, "%d", n);
  snprintf(cb, sizeof cb, "%ld", calls);
  for (int r = 0; r < n; r++) {
    int fd[2];
    if (pipe(fd) != 0)
      return -1;
    pids[r] = fork();
    if (pids[r] == 0) {
      bu_child_stdio(fd);
      char rb[16], d1[600], d2[600];
      snprintf(rb, sizeof rb, "%d", r);
      snprintf(d1, sizeof d1, "%s/rings", tmp);
      snprintf(d2, sizeof d2, "%s/dumps", tmp);
      setenv("LD_PRELOAD", lib, 1);
      setenv("LD_LIBRARY_PATH", noop, 1);
      setenv("NCCLTRACE_CHECK", "strict", 1);
      setenv("NCCLTRACE_COORD", coord, 1);
      setenv("NCCLTRACE_SECRET", SECRET, 1);
      setenv("NCCLTRACE_JOB", "bench-strict", 1);
      setenv("NCCLTRACE_RING_DIR", d1, 1);
      setenv("NCCLTRACE_DIR", d2, 1);
      setenv("RANK", rb, 1);
      setenv("WORLD_SIZE", nb, 1);
      setenv("LOCAL_WORLD_SIZE", nb, 1);
      setenv("NCCLTRACE_STRICT_SHM", shm ? "1" : "0", 1);
      execl("/proc/self/exe", "strict_bench", "--rank", rb, nb, cb, (char *)NULL);
      _exit(127);
    }
    close(fd[1]);
    fds[r] = fd[0];
  }
  double v[64];
  int ok = 1;
  for (int r = 0; r < n; r++) {
    char buf[64] = {0};
    ssize_t got = read(fds[r], buf, sizeof buf - 1);
    close(fds[r]);
    int st;
    waitpid(pids[r], &st, 0);
    if (got <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      ok = 0;
    v[r] = strtod(buf, NULL);
  }
  return ok ? bu_median(v, n) : -1;
}

static double mpi_round(const char *bin, int n, long calls) {
  char cmd[1400];
  snprintf(cmd, sizeof cmd,
           "OMPI_MCA_btl=self,vader OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
           "mpirun --allow-run-as-root --oversubscribe -np %d '%s' %ld 2>/dev/null",
           n, bin, calls);
  FILE *p = popen(cmd, "r");
  if (!p)
    return -1;
  double us = -1;
  if (fscanf(p, "%lf", &us) != 1)
    us = -1;
  return pclose(p) == 0 ? us : -1;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--rank"))
    return rank_main(atoi(argv[2]), atoi(argv[3]), atol(argv[4]));
  int n = 8, rounds = 3, i = 1;
  long calls = 2000;
  const char *mpi = NULL;
  for (; i < argc && argv[i][0] == '-'; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
      n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--mpi-bin") && i + 1 < argc)
      mpi = argv[++i];
    else
      break;
  }
  if (argc - i != 2 || n < 2 || n > 64 || calls < 10 || rounds < 1 || rounds > 15) {
    fprintf(stderr, "usage: strict_bench [--ranks N] [--calls C] [--rounds R] [--mpi-bin PATH] LIBNCCLTRACE NOOP_DIR\n");
    return 1;
  }
  const char *lib = argv[i], *noop = argv[i + 1];
  char tmp[] = "/tmp/nccltrace-strict-XXXXXX";
  if (!mkdtemp(tmp))
    return 1;
  struct ntx_key key;
  ntx_key_derive(SECRET, &key, NULL, 0);
  double s[15], c[15], m[15];
  int nm = 0;
  for (int r = 0; r < rounds; r++) {
    struct coordproc cp;
    if (coordproc_start(&cp, &key, 256) != 0) {
      fprintf(stderr, "strict_bench: cannot start the coordinator\n");
      return 1;
    }
    c[r] = strict_round(lib, noop, n, calls, cp.port, tmp, 0);
    s[r] = c[r] < 0 ? -1 : strict_round(lib, noop, n, calls, cp.port, tmp, 1);
    coordproc_stop(&cp);
    if (s[r] < 0) {
      fprintf(stderr, "strict_bench: a strict-mode rank failed\n");
      return 1;
    }
    if (mpi) {
      double v = mpi_round(mpi, n, calls);
      if (v > 0)
        m[nm++] = v;
    }
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  if (system(cmd) != 0)
    fprintf(stderr, "strict_bench: could not remove %s\n", tmp);
  double S = bu_median(s, rounds), C = bu_median(c, rounds);
  char name[96];
  snprintf(name, sizeof name, "strict-mode latency per collective, %d local ranks", n);
  if (!nm) {
    printf("strict mode: %.1f us per collective through shared memory, %.1f us through the coordinator (median "
           "of %d rounds x %ld calls; no MPI baseline%s; load %.1f)\n",
           S, C, rounds, calls, mpi ? ": mpirun failed" : " built", bu_loadavg());
    bu_figure(name, "<= 1.5x MPI_Allgather (no MPI here)", -1, "%.1f us", S);
    return 0;
  }
  double M = bu_median(m, nm);
  printf("strict mode: %.1f us per collective through shared memory (%.2fx MPI), %.1f us through the coordinator "
         "(%.2fx); MPI_Allgather(48 B): %.1f us (medians of %d/%d rounds x %ld calls, alternating; load %.1f)\n",
         S, S / M, C, C / M, M, rounds, nm, calls, bu_loadavg());
  bu_figure(name, "<= 1.5x MPI_Allgather, same ranks", S <= 1.5 * M, "%.1f us = %.2fx MPI (%.1f us)", S, S / M, M);
  return 0;
}
