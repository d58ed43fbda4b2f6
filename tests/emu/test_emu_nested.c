/* test_emu_nested.c -- the emulator calls its own public symbols where NCCL
 * 2.28 does, through the PLT, so an interposer sees the nested calls:
 * ncclBcast calls ncclBroadcast; every enqueue asks ncclCommGetAsyncError
 * (NCCL's ncclCommEnsureReady) and, on a nonblocking communicator, asks it
 * again for the result it returns.
 *
 * This program defines ncclBroadcast and ncclCommGetAsyncError itself: the
 * executable comes first in symbol lookup, so the library's PLT calls land
 * here, are counted, and are forwarded to the profiling names.  A call the
 * library made directly (not through its exported name) would not be seen.
 * One rank, one process.
 *
 * Thread-safety: single-threaded test.  Exit: 0 pass, 1 fail. */
#include "emu_test.h"

static int n_bcast_nested, n_async;

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream)
{
  n_bcast_nested++;
  return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
  n_async++;
  return pncclCommGetAsyncError(comm, err);
}

int main(void)
{
  ncclUniqueId id;
  ncclComm_t comm, nb;
  cudaStream_t s;
  float *buf;
  T_CUDA(cudaStreamCreate(&s));
  T_CUDA(cudaMalloc((void **)&buf, 64 * sizeof(float)));
  T_NCCL(ncclGetUniqueId(&id));
  T_NCCL(ncclCommInitRank(&comm, 1, id, 0));

  /* 1. ncclBcast is ncclBroadcast in place, called by its exported name. */
  n_bcast_nested = 0;
  T_NCCL(ncclBcast(buf, 64, ncclFloat, 0, comm, s));
  NT_RET_CHECK(n_bcast_nested == 1, "ncclBcast called the exported ncclBroadcast %d times, want 1", n_bcast_nested);
  T_CUDA(cudaStreamSynchronize(s));

  /* 2. A blocking communicator: ncclCommEnsureReady asks once per call. */
  n_async = 0;
  T_NCCL(ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, comm, s));
  NT_RET_CHECK(n_async == 1, "AllReduce on a blocking comm asked ncclCommGetAsyncError %d times, want 1", n_async);
  T_CUDA(cudaStreamSynchronize(s));

  /* 3. A nonblocking communicator: asked at the start and for the result. */
  ncclUniqueId id2;
  T_NCCL(ncclGetUniqueId(&id2));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&nb, 1, id2, 0, &cfg);
  NT_RET_CHECK(r == ncclSuccess || r == ncclInProgress, "nonblocking init returned %d", (int)r);
  ncclResult_t st = ncclInProgress;
  for (int i = 0; i < 10000 && st == ncclInProgress; i++) {
    T_NCCL(ncclCommGetAsyncError(nb, &st));
    if (st == ncclInProgress)
      usleep(1000);
  }
  NT_RET_CHECK(st == ncclSuccess, "nonblocking init ended in %d", (int)st);
  n_async = 0;
  r = ncclAllReduce(buf, buf, 64, ncclFloat, ncclSum, nb, s);
  NT_RET_CHECK(r == ncclSuccess || r == ncclInProgress, "AllReduce on the nonblocking comm returned %d", (int)r);
  NT_RET_CHECK(n_async == 2, "AllReduce on a nonblocking comm asked ncclCommGetAsyncError %d times, want 2", n_async);
  T_CUDA(cudaStreamSynchronize(s));

  T_NCCL(ncclCommDestroy(nb));
  T_NCCL(ncclCommDestroy(comm));
  T_CUDA(cudaFree(buf));
  printf("emu_nested: ok\n");
  return 0;
}
