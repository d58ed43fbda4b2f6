/* accept_real -- an ordinary CUDA + NCCL program written for real GPUs.
 *
 * It is linked against the REAL libcudart.so.13 and libnccl.so.2 (see
 * meson.build: real_cuda_link_args, no rpath) and runs unchanged on a GPU
 * machine or, with LD_LIBRARY_PATH pointing at the emulator build
 * directory, on the CPU emulator.  That is the acceptance test of the
 * emulator: nothing here knows about it.
 *
 * Usage: accept_real RANK NRANKS IDFILE
 * Rank 0 writes the ncclUniqueId to IDFILE (atomically, by rename); the
 * others wait for the file.  Exit 0 when every result is correct. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CUDACHECK(cmd)                                                                      \
  do {                                                                                      \
    cudaError_t e = (cmd);                                                                  \
    if (e != cudaSuccess) {                                                                 \
      fprintf(stderr, "rank %d: %s:%d CUDA error %s\n", rank, __FILE__, __LINE__,           \
              cudaGetErrorString(e));                                                       \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

#define NCCLCHECK(cmd)                                                                      \
  do {                                                                                      \
    ncclResult_t r = (cmd);                                                                 \
    if (r != ncclSuccess) {                                                                 \
      fprintf(stderr, "rank %d: %s:%d NCCL error %s\n", rank, __FILE__, __LINE__,           \
              ncclGetErrorString(r));                                                       \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

static int rank;

static int share_id(const char *path, ncclUniqueId *id)
{
  if (rank == 0) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
      perror(path);
      return 1;
    }
    return 0;
  }
  for (int tries = 0; tries < 3000; tries++) {   /* up to 30 s */
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (n == 1)
        return 0;
    }
    struct timespec ts = { 0, 10 * 1000000L };
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "rank %d: no unique id in %s\n", rank, path);
  return 1;
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: %s RANK NRANKS IDFILE\n", argv[0]);
    return 2;
  }
  rank = atoi(argv[1]);
  int nranks = atoi(argv[2]);
  const size_t count = 1 << 16;
  int ndev = 0;
  CUDACHECK(cudaGetDeviceCount(&ndev));
  if (ndev < 1)
    return 77;
  CUDACHECK(cudaSetDevice(rank % ndev));

  ncclUniqueId id;
  if (rank == 0)
    NCCLCHECK(ncclGetUniqueId(&id));
  if (share_id(argv[3], &id))
    return 1;
  ncclComm_t comm;
  NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));

  cudaStream_t stream;
  CUDACHECK(cudaStreamCreate(&stream));
  float *send, *recv, *gathered, *host;
  CUDACHECK(cudaMalloc((void **)&send, count * sizeof(float)));
  CUDACHECK(cudaMalloc((void **)&recv, count * sizeof(float)));
  CUDACHECK(cudaMalloc((void **)&gathered, count * (size_t)nranks * sizeof(float)));
  host = malloc(count * (size_t)nranks * sizeof(float));
  if (!host)
    return 1;
  for (size_t i = 0; i < count; i++)
    host[i] = (float)(rank + 1) * (float)(i % 7);
  CUDACHECK(cudaMemcpy(send, host, count * sizeof(float), cudaMemcpyHostToDevice));

  /* AllReduce(sum): sum over r of (r+1)*(i%7) */
  NCCLCHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  CUDACHECK(cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost));
  float tri = (float)(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < count; i++)
    if (host[i] != tri * (float)(i % 7)) {
      fprintf(stderr, "rank %d: AllReduce[%zu] = %g, want %g\n", rank, i, host[i], tri * (float)(i % 7));
      return 1;
    }

  /* AllGather: block r is rank r's send buffer. */
  NCCLCHECK(ncclAllGather(send, gathered, count, ncclFloat, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  CUDACHECK(cudaMemcpy(host, gathered, count * (size_t)nranks * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++)
      if (host[(size_t)r * count + i] != (float)(r + 1) * (float)(i % 7)) {
        fprintf(stderr, "rank %d: AllGather block %d [%zu] wrong\n", rank, r, i);
        return 1;
      }

  /* Broadcast from the last rank, in place. */
  NCCLCHECK(ncclBroadcast(send, send, count, ncclFloat, nranks - 1, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  CUDACHECK(cudaMemcpy(host, send, count * sizeof(float), cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; i++)
    if (host[i] != (float)nranks * (float)(i % 7)) {
      fprintf(stderr, "rank %d: Broadcast[%zu] = %g\n", rank, i, host[i]);
      return 1;
    }

  NCCLCHECK(ncclCommFinalize(comm));
  NCCLCHECK(ncclCommDestroy(comm));
  CUDACHECK(cudaFree(send));
  CUDACHECK(cudaFree(recv));
  CUDACHECK(cudaFree(gathered));
  CUDACHECK(cudaStreamDestroy(stream));
  free(host);
  printf("rank %d: ok\n", rank);
  return 0;
}
