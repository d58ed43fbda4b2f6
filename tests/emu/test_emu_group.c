/* test_emu_group -- NCCL group and argument-error semantics on 2 ranks:
 * GroupEnd without Start -> ncclInvalidUsage; nested groups launch only at
 * the outermost End, and End returns before completion; an argument error
 * inside a group is returned by the call and again by the outer End, which
 * drops the group, and the communicator stays usable; argument errors
 * outside groups (null/invalid comm, null buffers, bad dtype/op/root/peer);
 * send+recv to the same peer in one group; two streams in one group;
 * ncclGroupSimulateEnd; error strings; group state is per thread. */
#include "emu_test.h"

#include <pthread.h>

static void *other_thread_end(void *arg)
{
  *(ncclResult_t *)arg = ncclGroupEnd();
  return NULL;
}

static int check_sum(const float *buf, size_t n, float want, const char *what)
{
  for (size_t i = 0; i < n; i++)
    if (buf[i] != want)
      NT_RET_FAIL("%s[%zu] = %g, want %g", what, i, buf[i], want);
  return 0;
}

static int rank_main(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  const size_t cnt = 1024;
  ncclComm_t comm;
  cudaStream_t s, s2;
  float *a, *b, *c;
  T_CUDA(cudaStreamCreate(&s));
  T_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  T_CUDA(cudaMalloc((void **)&a, cnt * sizeof(float)));
  T_CUDA(cudaMalloc((void **)&b, cnt * sizeof(float)));
  T_CUDA(cudaMalloc((void **)&c, cnt * sizeof(float)));
  for (size_t i = 0; i < cnt; i++)
    a[i] = 1;

  /* 1. End without Start. */
  T_NCCL_IS(ncclGroupEnd(), ncclInvalidUsage);
  T_NCCL(ncclCommInitRank(&comm, n, id, rank));

  /* 2. Nested groups: nothing reaches the stream before the outer End.
   * Rank 1 launches 500 ms late, so rank 0's work cannot have completed
   * when its outer End returns: End means enqueued, not done. */
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, comm, s));
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclAllReduce(a, c, cnt, ncclFloat, ncclSum, comm, s));
  T_NCCL(ncclGroupEnd());
  NT_RET_CHECK(cudaStreamQuery(s) == cudaSuccess, "inner GroupEnd launched work");
  if (rank == 1)
    t_sleep_ms(500);
  T_NCCL(ncclGroupEnd());
  if (rank == 0)
    NT_RET_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "outer GroupEnd waited for completion");
  T_CUDA(cudaStreamSynchronize(s));
  if (check_sum(b, cnt, (float)n, "nested b") || check_sum(c, cnt, (float)n, "nested c"))
    return 1;

  /* 3. Invalid root inside a group: the call fails, the outer End returns
   * the same error and drops the group (the valid AllReduce never runs). */
  memset(b, 0, cnt * sizeof(float));
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, comm, s));
  T_NCCL_IS(ncclBroadcast(a, b, cnt, ncclFloat, n, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclGroupEnd(), ncclInvalidArgument);
  T_CUDA(cudaStreamSynchronize(s));
  NT_RET_CHECK(b[0] == 0, "a dropped group still ran");
  /* ... and the communicator keeps working after the cleanup. */
  T_NCCL(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  if (check_sum(b, cnt, (float)n, "after cleanup"))
    return 1;
  /* Errors stick for the whole outer group, nested or not. */
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclGroupStart());
  T_NCCL_IS(ncclSend(a, cnt, ncclFloat, n + 3, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclGroupEnd(), ncclSuccess);
  T_NCCL_IS(ncclGroupEnd(), ncclInvalidArgument);
  T_NCCL_IS(ncclGroupEnd(), ncclInvalidUsage);

  /* 4. Argument errors outside a group. */
  T_NCCL_IS(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, NULL, s), ncclInvalidArgument);
  T_NCCL_IS(ncclAllReduce(NULL, b, cnt, ncclFloat, ncclSum, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclAllReduce(a, NULL, cnt, ncclFloat, ncclSum, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclAllReduce(a, b, cnt, (ncclDataType_t)ncclNumTypes, ncclSum, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclAllReduce(a, b, cnt, ncclFloat, (ncclRedOp_t)(ncclNumOps + 7), comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclReduce(a, b, cnt, ncclFloat, ncclSum, -1, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclRecv(b, cnt, ncclFloat, -1, comm, s), ncclInvalidArgument);
  T_NCCL_IS(ncclCommCount(NULL, &(int){ 0 }), ncclInvalidArgument);
  T_NCCL_IS(ncclCommGetAsyncError(comm, NULL), ncclInvalidArgument);
  /* A non-root Broadcast may pass a NULL send buffer. */
  T_NCCL(ncclBroadcast(rank == 0 ? a : NULL, b, cnt, ncclFloat, 0, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  NT_RET_CHECK(b[0] == 1, "broadcast with NULL non-root sendbuff");
  NT_RET_CHECK(strlen(ncclGetLastError(comm)) > 0, "ncclGetLastError is empty after errors");

  /* 5. Send and recv with the same peer in one group, both ranks sending
   * first: must not deadlock. Plus two streams in one group. */
  int peer = 1 - rank;
  for (size_t i = 0; i < cnt; i++)
    a[i] = (float)(rank + 10);
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclSend(a, cnt, ncclFloat, peer, comm, s));
  T_NCCL(ncclRecv(b, cnt, ncclFloat, peer, comm, s));
  T_NCCL(ncclAllReduce(a, c, cnt, ncclFloat, ncclMax, comm, s2));
  T_NCCL(ncclGroupEnd());
  T_CUDA(cudaStreamSynchronize(s));
  T_CUDA(cudaStreamSynchronize(s2));
  if (check_sum(b, cnt, (float)(peer + 10), "sendrecv") || check_sum(c, cnt, (float)(n - 1 + 10), "max s2"))
    return 1;

  /* 6. Simulate: nothing runs, an estimate comes back. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  T_NCCL(ncclGroupStart());
  T_NCCL(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, comm, s));
  T_NCCL(ncclGroupSimulateEnd(&sim));
  NT_RET_CHECK(sim.estimatedTime > 0, "no estimated time");
  NT_RET_CHECK(cudaStreamQuery(s) == cudaSuccess, "simulated group ran");

  /* 7. Group state is per thread: another thread's End has no Start. */
  T_NCCL(ncclGroupStart());
  ncclResult_t other = ncclSuccess;
  pthread_t th;
  pthread_create(&th, NULL, other_thread_end, &other);
  pthread_join(th, NULL);
  NT_RET_CHECK(other == ncclInvalidUsage, "GroupEnd on another thread returned %d", (int)other);
  T_NCCL(ncclGroupEnd());

  /* 8. Strings. */
  NT_RET_CHECK(strstr(ncclGetErrorString(ncclRemoteError), "remote") != NULL, "remote error string");
  NT_RET_CHECK(strstr(ncclGetErrorString(ncclInProgress), "progress") != NULL, "in-progress string");
  int v;
  T_NCCL(ncclGetVersion(&v));
  NT_RET_CHECK(v == NCCL_VERSION_CODE, "version %d", v);

  /* Everyone still agrees on the sequence: one last checked AllReduce. */
  for (size_t i = 0; i < cnt; i++)
    a[i] = 2;
  T_NCCL(ncclAllReduce(a, b, cnt, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  if (check_sum(b, cnt, (float)(2 * n), "final"))
    return 1;
  T_NCCL(ncclCommFinalize(comm));
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

int main(void)
{
  int rc = t_fork_ranks(2, rank_main, NULL, 60);
  printf("%s\n", rc ? "FAIL" : "ok");
  return rc;
}
