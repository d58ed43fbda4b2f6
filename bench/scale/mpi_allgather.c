/* mpi_allgather.c -- the baseline of the strict-mode figure: MPI_Allgather
 * of one fingerprint (48 bytes) per rank, the exchange strict mode must do
 * before every collective.  Prints rank 0's mean microseconds per call.
 *
 *   mpirun -np 8 mpi_allgather [CALLS]
 * Single-threaded.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long calls = argc > 1 ? atol(argv[1]) : 2000;
  char mine[48] = {0};
  char *all = malloc((size_t)size * sizeof mine);
  for (long i = 0; i < calls / 10 + 1; i++)
    MPI_Allgather(mine, 48, MPI_BYTE, all, 48, MPI_BYTE, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t = MPI_Wtime();
  for (long i = 0; i < calls; i++)
    MPI_Allgather(mine, 48, MPI_BYTE, all, 48, MPI_BYTE, MPI_COMM_WORLD);
  t = MPI_Wtime() - t;
  if (rank == 0)
    printf("%.3f\n", t / (double)calls * 1e6);
  free(all);
  MPI_Finalize();
  return 0;
}
