/* metrics_job.c -- the job the metrics tests scrape: STEPS AllReduces on
 * the CPU emulator, one rank sleeping SLOW ms before each (a straggler),
 * and at step MISMATCH rank MRANK calling it with twice the count (a
 * mismatch the cross-rank check reports); the job goes on after it.
 * Prints "steps N" at the end (what the hostile-scraper test counts).
 *   launch.sh 4 ./metrics_job [--steps N] [--slow-rank R --slow-ms MS]
 *                             [--mismatch-step K --mismatch-rank R]
 * Single-threaded; not signal-safe.
 */
#include "common.h"

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int steps = 2000, slow_rank = -1, slow_ms = 0, mm_step = 0, mm_rank = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i];
    int v = atoi(argv[i + 1]);
    if (!strcmp(a, "--steps")) steps = v;
    else if (!strcmp(a, "--slow-rank")) slow_rank = v;
    else if (!strcmp(a, "--slow-ms")) slow_ms = v;
    else if (!strcmp(a, "--mismatch-step")) mm_step = v;
    else if (!strcmp(a, "--mismatch-rank")) mm_rank = v;
    else {
      fprintf(stderr, "metrics_job: unknown argument '%s'\n", a);
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
  CUDA_CHECK(cudaMalloc((void **)&d, 2 * n * sizeof(float)));
  CUDA_CHECK(cudaMemset(d, 0, 2 * n * sizeof(float)));
  int step;
  for (step = 1; step <= steps; step++) {
    if (ex_rank == slow_rank && slow_ms)
      ex_sleep_ms(slow_ms);
    size_t count = step == mm_step && ex_rank == mm_rank ? 2 * n : n;
    NCCL_CHECK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, s));
    ex_wait(s, comm);
  }
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaStreamDestroy(s));
  NCCL_CHECK(ncclCommDestroy(comm));
  printf("rank %d steps %d\n", ex_rank, step - 1);
  return 0;
}
