/* icount.c -- the program bench/icount.sh runs under callgrind: N
 * ncclAllReduce calls on the no-op NCCL with instrumentation on for the
 * loop only, so the calling thread's count holds the calls and nothing of
 * start-up, first-call resolution or the exit dump.  Whatever preload the
 * caller set (nccltrace, the minimal recorder, none) is what is counted.
 *
 *   icount N      (exit 0, or 1 when the no-op NCCL refused init)
 *
 * Thread-safety / signal-safety: a single-threaded program.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/callgrind.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 10000;
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "icount: no-op NCCL init failed\n");
    return 1;
  }
  static float buf[16];
  /* Warm up: first-call symbol resolution, the first block claim. */
  for (long i = 0; i < 256; i++)
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  CALLGRIND_TOGGLE_COLLECT;
  for (long i = 0; i < n; i++)
    ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
  CALLGRIND_TOGGLE_COLLECT;
  ncclCommDestroy(comm);
  return 0;
}
