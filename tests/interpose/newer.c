/* newer.c -- one rank of test interpose_newer: what NCCL added after 2.28,
 * through libnccltrace.so on the CPU emulator.
 *
 *   nti_newer RANK NRANKS DIR
 *
 * Each per-call-config collective right after its plain twin with the
 * same arguments, then one inside a group, one more plain AllReduce, each
 * printed as "kind count dtype redop root" (the twin's kind: the driver
 * expects the same records); then the comm-life calls: ncclCommGetUniqueId
 * (rank 0), suspend, ncclCommMemStats, resume, a grow the emulator does not
 * model ("grow RESULT"), a last AllReduce and destroy.
 *
 * Exit: 0 done, 1 failure (message on stderr).
 * Thread-safety / signal-safety: single-threaded, no handlers.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/nccl_newer.h"
#include "../emu_rank.h"

int main(int argc, char **argv) {
  if (argc != 4)
    NT_DIE("usage: nti_newer RANK NRANKS DIR");
  int rank = atoi(argv[1]), n = atoi(argv[2]);
  g_rank = rank;
  setvbuf(stdout, NULL, _IOLBF, 0);
  cudaStream_t s;
  float *a, *b;
  ncclComm_t comm;
  CUDA(cudaSetDevice(rank));
  CUDA(cudaStreamCreate(&s));
  CUDA(cudaMalloc((void **)&a, 1 << 16));
  CUDA(cudaMalloc((void **)&b, 1 << 16));
  CUDA(cudaMemset(a, 0, 1 << 16));
  ncclUniqueId id = share_id(argv[3], "id0", rank, 20);
  NCCL(ncclCommInitRank(&comm, n, id, rank));
  /* A config as NCCL's initializer starts it: size, magic, version; the
   * rest is the emulator's to ignore. */
  struct {
    size_t size;
    unsigned magic, version;
    unsigned char rest[56];
  } cfg = {sizeof cfg, 0xcafebeefu, 23206u, {0}};
  const ncclCollConfig_t *cc = (const ncclCollConfig_t *)(const void *)&cfg;
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclAllReduceConfig(a, b, 1024, ncclFloat, ncclSum, comm, s, cc));
    else
      NCCL(ncclAllReduce(a, b, 1024, ncclFloat, ncclSum, comm, s));
    printf("AllReduce 1024 float32 sum -\n");
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclBroadcastConfig(a, b, 512, ncclFloat, 1 % n, comm, s, cc));
    else
      NCCL(ncclBroadcast(a, b, 512, ncclFloat, 1 % n, comm, s));
    printf("Broadcast 512 float32 - %d\n", 1 % n);
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclReduceConfig(a, b, 128, ncclFloat, ncclMax, 1 % n, comm, s, cc));
    else
      NCCL(ncclReduce(a, b, 128, ncclFloat, ncclMax, 1 % n, comm, s));
    printf("Reduce 128 float32 max %d\n", 1 % n);
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclAllGatherConfig(a, b, 64, ncclFloat, comm, s, cc));
    else
      NCCL(ncclAllGather(a, b, 64, ncclFloat, comm, s));
    printf("AllGather 64 float32 - -\n");
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclReduceScatterConfig(a, b, 32, ncclDouble, ncclProd, comm, s, cc));
    else
      NCCL(ncclReduceScatter(a, b, 32, ncclDouble, ncclProd, comm, s));
    printf("ReduceScatter 32 float64 prod -\n");
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclAlltoAllConfig(a, b, 16, ncclInt8, comm, s, cc));
    else
      NCCL(ncclAlltoAll(a, b, 16, ncclInt8, comm, s));
    printf("AlltoAll 16 int8 - -\n");
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclGatherConfig(a, b, 8, ncclUint8, 0, comm, s, cc));
    else
      NCCL(ncclGather(a, b, 8, ncclUint8, 0, comm, s));
    printf("Gather 8 uint8 - 0\n");
  }
  for (int twin = 0; twin < 2; twin++) {
    if (twin)
      NCCL(ncclScatterConfig(a, b, 8, ncclInt64, 0, comm, s, cc));
    else
      NCCL(ncclScatter(a, b, 8, ncclInt64, 0, comm, s));
    printf("Scatter 8 int64 - 0\n");
  }
  NCCL(ncclGroupStart());
  NCCL(ncclAllReduceConfig(a, b, 4, ncclInt32, ncclSum, comm, s, cc));
  NCCL(ncclGroupEnd());
  printf("AllReduce 4 int32 sum -\n");
  NCCL(ncclAllReduce(a, b, 4, ncclInt32, ncclSum, comm, s));
  printf("AllReduce 4 int32 sum -\n");
  CUDA(cudaStreamSynchronize(s));

  ncclUniqueId gid;
  memset(&gid, 0, sizeof gid);
  if (rank == 0)
    NCCL(ncclCommGetUniqueId(comm, &gid));
  NCCL(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  uint64_t v = 0;
  NCCL(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v));
  if (v != 1)
    NT_DIE("ncclStatGpuMemSuspended is %llu while suspended", (unsigned long long)v);
  NCCL(ncclCommResume(comm));
  ncclComm_t grown = NULL;
  ncclResult_t g = ncclCommGrow(comm, n + 1, rank == 0 ? &gid : NULL, -1, &grown, NULL);
  fprintf(stderr, "grow %d\n", (int)g);
  NCCL(ncclAllReduce(a, b, 2, ncclFloat, ncclSum, comm, s));
  printf("AllReduce 2 float32 sum -\n");
  CUDA(cudaStreamSynchronize(s));
  NCCL(ncclCommDestroy(comm));
  return 0;
}
