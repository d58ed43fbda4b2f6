/* pipeline.c -- a send/recv pipeline, as pipeline-parallel training runs it:
 * micro-batch m enters at rank 0, every stage receives it from the previous
 * stage, adds 1, and sends it on; the last stage checks it arrived with value
 * m + WORLD_SIZE - 1.  A final AllReduce counts the checks.
 *
 *   examples/launch.sh 4 ./pipeline [MICROBATCHES]
 * Single-threaded; not signal-safe.
 */
#include "common.h"

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int mb = argc > 1 ? atoi(argv[1]) : 8;
  const size_t n = 512;
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  float *d, *h = malloc(n * sizeof(float));
  CUDA_CHECK(cudaMalloc((void **)&d, n * sizeof(float)));
  int bad = 0;
  for (int m = 0; m < mb; m++) {
    if (ex_rank == 0) {
      for (size_t i = 0; i < n; i++)
        h[i] = (float)m;
    } else {
      NCCL_CHECK(ncclRecv(d, n, ncclFloat32, ex_rank - 1, comm, s));
      ex_wait(s, comm);
      CUDA_CHECK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n; i++)
        h[i] += 1.0f; /* this stage's "layer" */
    }
    if (ex_rank == ex_size - 1) {
      for (size_t i = 0; i < n && !bad; i++)
        if (h[i] != (float)(m + ex_size - 1)) {
          fprintf(stderr, "rank %d: micro-batch %d element %zu is %g\n", ex_rank, m, i, (double)h[i]);
          bad = 1;
        }
      continue;
    }
    CUDA_CHECK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclSend(d, n, ncclFloat32, ex_rank + 1, comm, s));
    ex_wait(s, comm);
  }
  /* Every rank learns whether the last stage saw a wrong value. */
  float flag = (float)bad, *dflag;
  CUDA_CHECK(cudaMalloc((void **)&dflag, sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dflag, &flag, sizeof(float), cudaMemcpyHostToDevice));
  NCCL_CHECK(ncclAllReduce(dflag, dflag, 1, ncclFloat32, ncclSum, comm, s));
  ex_wait(s, comm);
  CUDA_CHECK(cudaMemcpy(&flag, dflag, sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaFree(dflag));
  NCCL_CHECK(ncclCommDestroy(comm));
  free(h);
  if (ex_rank == 0 && flag == 0.0f)
    printf("pipeline: %d stages, %d micro-batches, all values checked\n", ex_size, mb);
  return flag != 0.0f;
}
