/* healthy.c -- a healthy job: every rank runs the same ring of collectives
 * (AllReduce, Broadcast, AllGather, ReduceScatter), checks every result, and
 * shuts down cleanly.  `nccltrace analyze` must call it healthy.
 *
 *   examples/launch.sh 4 ./healthy [STEPS]
 * Single-threaded; not signal-safe.
 */
#include "common.h"

static void fill(float *h, size_t n, float v) {
  for (size_t i = 0; i < n; i++)
    h[i] = v;
}

static int check(const float *h, size_t n, float want, const char *what, int step) {
  for (size_t i = 0; i < n; i++)
    if (h[i] != want) {
      fprintf(stderr, "rank %d: step %d %s: element %zu is %g, want %g\n", ex_rank, step, what, i,
              (double)h[i], (double)want);
      return 1;
    }
  return 0;
}

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int steps = argc > 1 ? atoi(argv[1]) : 8;
  const size_t n = 1024;
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  float *d_in, *d_out, *h = malloc(n * (size_t)ex_size * sizeof(float));
  CUDA_CHECK(cudaMalloc((void **)&d_in, n * (size_t)ex_size * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&d_out, n * (size_t)ex_size * sizeof(float)));
  int bad = 0;
  for (int step = 1; step <= steps && !bad; step++) {
    /* AllReduce(sum) of rank+1: (n(n+1)/2) everywhere. */
    fill(h, n, (float)(ex_rank + 1));
    CUDA_CHECK(cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(d_in, d_out, n, ncclFloat32, ncclSum, comm, s));
    ex_wait(s, comm);
    CUDA_CHECK(cudaMemcpy(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad |= check(h, n, (float)(ex_size * (ex_size + 1) / 2), "AllReduce", step);
    /* Broadcast from a rotating root. */
    int root = step % ex_size;
    fill(h, n, ex_rank == root ? (float)step : -1.0f);
    CUDA_CHECK(cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclBroadcast(d_in, d_in, n, ncclFloat32, root, comm, s));
    ex_wait(s, comm);
    CUDA_CHECK(cudaMemcpy(h, d_in, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad |= check(h, n, (float)step, "Broadcast", step);
    /* AllGather: block r holds r. */
    fill(h, n, (float)ex_rank);
    CUDA_CHECK(cudaMemcpy(d_in, h, n * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllGather(d_in, d_out, n, ncclFloat32, comm, s));
    ex_wait(s, comm);
    CUDA_CHECK(cudaMemcpy(h, d_out, n * (size_t)ex_size * sizeof(float), cudaMemcpyDeviceToHost));
    for (int r = 0; r < ex_size && !bad; r++)
      bad |= check(h + (size_t)r * n, n, (float)r, "AllGather", step);
    /* ReduceScatter(sum) of ones: ex_size everywhere. */
    fill(h, n * (size_t)ex_size, 1.0f);
    CUDA_CHECK(cudaMemcpy(d_in, h, n * (size_t)ex_size * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclReduceScatter(d_in, d_out, n, ncclFloat32, ncclSum, comm, s));
    ex_wait(s, comm);
    CUDA_CHECK(cudaMemcpy(h, d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    bad |= check(h, n, (float)ex_size, "ReduceScatter", step);
  }
  CUDA_CHECK(cudaFree(d_in));
  CUDA_CHECK(cudaFree(d_out));
  CUDA_CHECK(cudaStreamDestroy(s));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  free(h);
  if (!bad && ex_rank == 0)
    printf("healthy: %d ranks, %d steps, every result checked\n", ex_size, steps);
  return bad;
}
