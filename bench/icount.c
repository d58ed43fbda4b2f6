/* icount.c -- the program bench/icount.sh runs under callgrind: N
 * ncclAllReduce calls on the no-op NCCL with instrumentation on for the
 * loop only, so the calling thread's count holds the calls and nothing of
 * start-up, first-call resolution or the exit dump.  Whatever preload the
 * caller set (nccltrace, the minimal recorder, none) is what is counted.
 *
 *   icount N                   one collected loop of N calls
 *   icount --chunked N         N calls in collected chunks of CHUNK
 *   icount --scrape PORT K N   chunks until at least N calls and K scrapes
 *
 * --scrape starts a scraper thread (bench/scrape.h) that GETs
 * http://127.0.0.1:PORT/metrics every second, waits for its first
 * answer, then loops chunk by chunk until K more answers came while the
 * calls ran; --chunked is the same loop without it (the baseline: the
 * same calls, the same toggles).  Both print "calls C scrapes S".  The
 * scraper is another thread, so callgrind's count of thread 1 holds only
 * what the endpoint costs the calling thread.
 *
 * Exit 0, or 1 when the no-op NCCL refused init or the endpoint never
 * answered or answered fewer than K times in 40 s of calls.
 * Thread-safety / signal-safety: the main thread calls NCCL; the scraper
 * thread shares one atomic counter with it (bench/scrape.h).
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <valgrind/callgrind.h>

#include "bench/scrape.h"

enum { CHUNK = 1000 };

int main(int argc, char **argv) {
  int chunked = argc == 3 && !strcmp(argv[1], "--chunked");
  int scrape = argc == 5 && !strcmp(argv[1], "--scrape");
  long n = 10000, want = 0;
  int port = 0;
  if (chunked)
    n = atol(argv[2]);
  else if (scrape) {
    port = atoi(argv[2]);
    want = atol(argv[3]);
    n = atol(argv[4]);
  } else if (argc > 1)
    n = atol(argv[1]);
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
  if (!chunked && !scrape) {
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < n; i++)
      ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
    CALLGRIND_TOGGLE_COLLECT;
    ncclCommDestroy(comm);
    return 0;
  }
  long s0 = 0;
  if (scrape) {
    if (bsc_start(port) != 0)
      return 1;
    /* The endpoint binds on its own thread: wait for it, calling NCCL
     * meanwhile (uncollected) as an application would. */
    for (int w = 0; w < 2000 && bsc_count() == 0; w++) {
      for (long i = 0; i < CHUNK; i++)
        ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    s0 = bsc_count();
    if (s0 == 0) {
      fprintf(stderr, "icount: the endpoint on port %d never answered\n", port);
      return 1;
    }
  }
  long calls = 0;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    CALLGRIND_TOGGLE_COLLECT;
    for (long i = 0; i < CHUNK; i++)
      ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comm, NULL);
    CALLGRIND_TOGGLE_COLLECT;
    calls += CHUNK;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (calls >= n && t.tv_sec - t0.tv_sec > 40) {
      fprintf(stderr, "icount: %ld of %ld scrapes in 40 s\n", bsc_count() - s0, want);
      return 1;
    }
  } while (calls < n || bsc_count() - s0 < want);
  printf("calls %ld scrapes %ld\n", calls, bsc_count() - s0);
  fflush(stdout);
  ncclCommDestroy(comm);
  return 0;
}
