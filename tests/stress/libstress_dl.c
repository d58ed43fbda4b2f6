/* libstress_dl.c -- a library that links NCCL, dlopen()ed by stress_prog
 * ctor mode: stress_dl_run(count) runs a one-rank communicator and one
 * AllReduce of that count.  @return 0 or the step that failed.
 * Thread-safety: one caller at a time.  Not signal-safe. */
#include <cuda_runtime_api.h>
#include <nccl.h>

int stress_dl_run(int count);

int stress_dl_run(int count) {
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t s;
  void *a;
  if (cudaSetDevice(0) != cudaSuccess || ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
    return 1;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&a, 4096) != cudaSuccess ||
      ncclAllReduce(a, a, (size_t)count, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return 2;
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 3;
}
