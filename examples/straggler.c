/* straggler.c -- a synchronous job with one slow rank: STEPS AllReduces,
 * each rank sleeping a random 0..JITTER ms before every call (a data loader
 * that jitters), one rank sleeping SLOW ms more (a slow host), or one rank
 * stalling STALL ms once at step STALL_STEP.  With --no-sync the host does
 * not wait for each AllReduce (it runs ahead; a slow *device* then shows
 * only in device arrivals: run it with NCCLEMU_FAULT=slow:MS on one rank).
 *
 *   examples/launch.sh 4 ./straggler [--steps N] [--jitter-ms J] [--slow-rank R --slow-ms MS]
 *                                    [--stall-rank R --stall-step S --stall-ms MS] [--no-sync]
 * `nccltrace analyze` says `straggler` (ranks [R]) or `healthy`.
 * Single-threaded; not signal-safe.
 */
#include "common.h"

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int steps = 300, jitter = 4, slow_rank = -1, slow_ms = 0, stall_rank = -1, stall_step = 0, stall_ms = 0,
      sync = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--no-sync")) sync = 0;
    else if (more && !strcmp(a, "--steps")) steps = atoi(argv[++i]);
    else if (more && !strcmp(a, "--jitter-ms")) jitter = atoi(argv[++i]);
    else if (more && !strcmp(a, "--slow-rank")) slow_rank = atoi(argv[++i]);
    else if (more && !strcmp(a, "--slow-ms")) slow_ms = atoi(argv[++i]);
    else if (more && !strcmp(a, "--stall-rank")) stall_rank = atoi(argv[++i]);
    else if (more && !strcmp(a, "--stall-step")) stall_step = atoi(argv[++i]);
    else if (more && !strcmp(a, "--stall-ms")) stall_ms = atoi(argv[++i]);
    else {
      fprintf(stderr, "straggler: unknown argument '%s'\n", a);
      return 2;
    }
  }
  const size_t n = 256;
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  float *d;
  CUDA_CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
  CUDA_CHECK(cudaMemset(d, 0, n * sizeof(float)));
  srand((unsigned)(ex_rank * 7919 + 17));
  for (int step = 1; step <= steps; step++) {
    int ms = jitter > 0 ? rand() % (jitter + 1) : 0;
    if (ex_rank == slow_rank)
      ms += slow_ms;
    if (ex_rank == stall_rank && step == stall_step)
      ms += stall_ms;
    if (ms)
      ex_sleep_ms(ms);
    NCCL_CHECK(ncclAllReduce(d, d, n, ncclFloat32, ncclSum, comm, s));
    if (sync)
      ex_wait(s, comm);
  }
  ex_wait(s, comm);
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaStreamDestroy(s));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  if (ex_rank == 0)
    printf("straggler: %d ranks, %d steps done\n", ex_size, steps);
  return 0;
}
