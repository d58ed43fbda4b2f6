/* mpi_shape.c -- one device per process under MPI, the shape of NVIDIA's
 * MPI example: rank 0 makes the unique id, MPI_Bcast hands it out, each
 * process takes device local_rank and runs an AllReduce.
 *
 *   mpirun -np 4 ./mpi_shape      (Debian's openmpi as root: --allow-run-as-root)
 * Prints one "ok" line per rank.  Single-threaded; not signal-safe.
 */
#include <mpi.h>
#include "common.h"

#define N 1024

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &ex_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ex_size);
  int local = ex_env_int("OMPI_COMM_WORLD_LOCAL_RANK", ex_rank), ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  CUDA_CHECK(cudaSetDevice(ndev > 0 ? local % ndev : 0));
  ncclUniqueId id;
  if (ex_rank == 0)
    NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  static float host[N];
  float *buf;
  CUDA_CHECK(cudaMalloc((void **)&buf, sizeof host));
  for (int i = 0; i < N; i++)
    host[i] = (float)(ex_rank + 1);
  CUDA_CHECK(cudaMemcpy(buf, host, sizeof host, cudaMemcpyHostToDevice));
  NCCL_CHECK(ncclAllReduce(buf, buf, N, ncclFloat, ncclSum, comm, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaMemcpy(host, buf, sizeof host, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < N; i++)
    bad += host[i] != (float)(ex_size * (ex_size + 1) / 2);
  printf("mpi rank %d: %s (%g)\n", ex_rank, bad ? "WRONG" : "ok", host[0]);
  NCCL_CHECK(ncclCommDestroy(comm));
  CUDA_CHECK(cudaFree(buf));
  MPI_Finalize();
  return bad != 0;
}
