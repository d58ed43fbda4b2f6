/* group_init.c -- nccl-tests' "-g N" shape: one process, one thread, N
 * devices.  ncclGroupStart, then cudaSetDevice(i) and
 * ncclCommInitRankConfig for each rank i of one communicator, then
 * ncclGroupEnd, which NCCL defers the inits to; then one AllReduce per
 * rank in one group, checked.  Built against the real headers and
 * libraries; runs on the emulator.  Usage: group_init [N] [nonblocking]
 * Prints "group_init: N ranks ok" and exits 0, else 1. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 8
#define CHECK(x)                                                              \
  do {                                                                        \
    int r_ = (int)(x);                                                        \
    if (r_ != 0 && r_ != (int)ncclInProgress) {                               \
      fprintf(stderr, "group_init: %s failed: %d\n", #x, r_);                 \
      return 1;                                                               \
    }                                                                         \
  } while (0)

static int wait_ready(ncclComm_t c)
{
  ncclResult_t st;
  do {
    if (ncclCommGetAsyncError(c, &st) != ncclSuccess)
      return 1;
  } while (st == ncclInProgress);
  return st != ncclSuccess;
}

int main(int argc, char **argv)
{
  int n = argc > 1 ? atoi(argv[1]) : 4;
  int nonblocking = argc > 2 && strcmp(argv[2], "nonblocking") == 0;
  if (n < 1 || n > MAXR)
    return 2;
  ncclUniqueId id;
  ncclComm_t comm[MAXR];
  cudaStream_t s[MAXR];
  float *buf[MAXR];
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = !nonblocking;
    CHECK(cudaSetDevice(i));
    CHECK(ncclCommInitRankConfig(&comm[i], n, id, i, &cfg));
  }
  CHECK(ncclGroupEnd());
  for (int i = 0; i < n; i++)
    if (wait_ready(comm[i])) {
      fprintf(stderr, "group_init: comm %d failed its init\n", i);
      return 1;
    }
  float host[16];
  for (int i = 0; i < n; i++) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamCreate(&s[i]));
    CHECK(cudaMalloc((void **)&buf[i], sizeof host));
    for (int k = 0; k < 16; k++)
      host[k] = (float)(i + 1);
    CHECK(cudaMemcpy(buf[i], host, sizeof host, cudaMemcpyHostToDevice));
  }
  CHECK(ncclGroupStart());
  for (int i = 0; i < n; i++)
    CHECK(ncclAllReduce(buf[i], buf[i], 16, ncclFloat, ncclSum, comm[i], s[i]));
  CHECK(ncclGroupEnd());
  for (int i = 0; i < n; i++) {
    CHECK(cudaSetDevice(i));
    CHECK(cudaStreamSynchronize(s[i]));
    CHECK(cudaMemcpy(host, buf[i], sizeof host, cudaMemcpyDeviceToHost));
    if (host[0] != (float)(n * (n + 1) / 2)) {
      fprintf(stderr, "group_init: rank %d got %g, want %d\n", i, host[0], n * (n + 1) / 2);
      return 1;
    }
  }
  for (int i = 0; i < n; i++)
    CHECK(ncclCommDestroy(comm[i]));
  printf("group_init: %d ranks ok\n", n);
  return 0;
}
