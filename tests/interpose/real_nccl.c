/* real_nccl.c -- snippet for test (7): the REAL libnccl.so.2 on a GPU-less
 * machine.  Prints what NCCL returns for GetVersion, GetUniqueId and
 * CommInitRank, so the test can compare a preloaded run with a plain one. */
#include <stdio.h>
#include <string.h>
#include <nccl.h>

int main(void) {
  int v = 0;
  ncclResult_t r = ncclGetVersion(&v);
  printf("ncclGetVersion=%d version=%d\n", (int)r, v);
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  r = ncclGetUniqueId(&id);
  printf("ncclGetUniqueId=%d\n", (int)r);
  ncclComm_t comm = NULL;
  r = ncclCommInitRank(&comm, 1, id, 0);
  printf("ncclCommInitRank=%d\n", (int)r);
  fflush(stdout);
  return 0;
}
