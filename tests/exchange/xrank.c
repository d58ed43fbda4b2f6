/* xrank.c -- one rank of the exchange acceptance tests on the CPU emulator
 * with LD_PRELOAD=libnccltrace.so (driver: accept_exchange.py).
 *
 *   xrank MODE RANK NRANKS IDFILE
 *
 * MODE:
 *   mismatch  3 AllReduce, then collective #4: rank 1 Broadcast(root 0),
 *             the others AllReduce; prints "seq4 <ncclResult_t>".  When the
 *             call was refused everywhere (strict), a 5th AllReduce must give
 *             the right sum: proof that nothing of #4 was enqueued.  When it
 *             was not refused (async) the ranks hang there; "hung" is printed
 *             and the driver kills them.
 *   idle      3 AllReduce, "ready", then sleep (the driver kills some ranks)
 *   loop      3 AllReduce, "ready", then checked AllReduce 20 ms apart
 *             until IDFILE.stop exists (at most 120 s), "calls N" every
 *             50; "done N" and exit 0 (tests/hosts: faults while
 *             collectives run).  When IDFILE.mm exists instead, the
 *             `mismatch` call follows (rank XRANK_ODD Broadcast) in place
 *             of loop call number M, the number the file holds (write it
 *             whole, by rename; empty: the next call); both
 *             modes print "mmcall T" (realtime s) just before that call
 *   noinit    rank NRANKS-1 never calls init; the others block in it
 *   steady    60 AllReduce, 20 ms apart, "ready" after 10; exits 0
 *   runahead  40 rounds of: a barrier of every rank (files IDFILE.b<round>.<rank>),
 *             5 AllReduce issued back to back, one wait for the stream (the
 *             loop of nccl-tests: a slow GPU shows only in device
 *             arrivals); "done" and exit 0
 *   handover  3 AllReduce, "ready", then waits for IDFILE.leaver (written
 *             by the driver: the rank that must leave); all split the world
 *             comm, the leaver with NCCL_SPLIT_NOCOLOR, and it exits 0
 *             ("left").  The others wait 1 s, run 3 AllReduce on the
 *             3-rank comm ("sub ok"), then sub-rank 1 Broadcast where the
 *             others AllReduce: async, so they hang ("hung")
 *   strictkill 3 AllReduce, "ready"; rank NRANKS-2 then sleeps (the driver
 *             SIGKILLs it), the others enqueue a 4th AllReduce (strict
 *             mode: it waits for the killed rank) and print "enqueued
 *             <ncclResult_t>" once the call returns, then sleep
 *   closefds  3 AllReduce, then closes fds 3..1023 (as daemons and
 *             sandboxes do), opens 8 files IDFILE.data.RANK.K, writes 4 KiB
 *             of 'A'+K into each, runs 5 AllReduce 20 ms apart, prints
 *             "closed ok" and exits 0 with the files still open (the driver
 *             checks their content)
 *   openloop  3 AllReduce, "ready", then for XRANK_LOOP_S seconds (4) opens
 *             32 files at a time and closes them again, with an AllReduce
 *             every 10 rounds; prints "open failures N"; exits 0
 *   stalled   3 AllReduce, "ready", then waits for IDFILE.go (the driver
 *             has stopped the coordinator), runs 100 AllReduce printing
 *             "calls N T" after each (T: seconds since the first) and "loop
 *             done T"; waits for IDFILE.cont (the coordinator answers
 *             again), runs 5 AllReduce 20 ms apart, then rank 1 Broadcast
 *             where the others AllReduce: prints "mm <ncclResult_t>", and
 *             "after ok" when that was refused and an AllReduce after it
 *             gives the right sum; "hung" when it was not refused
 *   frozen    3 AllReduce, "ready", then AllReduce 20 ms apart, printing
 *             "calls N" after each, until IDFILE.cont exists (meanwhile
 *             the driver SIGSTOPs a rank for a while and SIGCONTs it),
 *             then as stalled after IDFILE.cont: 5 AllReduce, rank 1
 *             Broadcast where the others AllReduce ("mm ...", "hung")
 *   timed     3 AllReduce, then XRANK_WARM (20) more, then XRANK_CALLS (2000)
 *             back to back, each timed from the call to the end of its
 *             stream synchronize: prints "lat_us P50 P90 MEAN BEST" (BEST:
 *             the least median of 10 batches of them; bench/
 *             hosts_block.py: the application's NCCL call latency); exits 0
 * XRANK_OPEN_FDS=N: N descriptors (/dev/null) held open from before init
 * to exit, as an application's own files are.  XRANK_FREE_FDS=N: every
 * descriptor but the N highest taken the same way.
 * XRANK_ODD=R: the rank that calls Broadcast in `mismatch` (default 1).
 * XRANK_REUSE_ID=1: rank 0 reads IDFILE when it exists instead of making a
 * new id (a second job on the same communicator id).
 *
 * Exit: 0 done, 1 failure (message on stderr).
 * Thread-safety / signal-safety: single-threaded, no handlers.
 */
#include <fcntl.h>
#include <libgen.h>

/* Failure macros, sleep_ms and the unique-id rendezvous: ../emu_rank.h. */
#define EMU_RANK_TAG "xrank"
#include "../emu_rank.h"

/* The job's unique id through the file at path (share_id).  With
 * XRANK_REUSE_ID rank 0 reuses an id left there by an earlier job, so that
 * a second job gets the same communicator id. */
static void unique_id(const char *path, int rank, ncclUniqueId *id) {
  if (rank == 0 && getenv("XRANK_REUSE_ID")) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(id, sizeof *id, 1, f) : 0;
    if (f)
      fclose(f);
    if (n == 1)
      return;
  }
  char d[4096], b[4096];
  snprintf(d, sizeof d, "%s", path);
  snprintf(b, sizeof b, "%s", path);
  *id = share_id(dirname(d), basename(b), rank, 30);
}

/* Until the file at path exists (the driver's signal), at most 60 s. */
static void wait_file(const char *path) {
  for (int i = 0; i < 6000 && access(path, F_OK) != 0; i++)
    sleep_ms(10);
  if (access(path, F_OK) != 0)
    NT_DIE("%s never came", path);
}

static double mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static float *dbuf;
static cudaStream_t stream;

/* AllReduce of rank+1 over n ranks: every element must be n(n+1)/2. */
static void allreduce_checked(ncclComm_t comm, int nranks) {
  float h[64];
  for (int i = 0; i < 64; i++)
    h[i] = (float)(g_rank + 1);
  CUDA(cudaMemcpy(dbuf, h, sizeof h, cudaMemcpyHostToDevice));
  NCCL(ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream));
  CUDA(cudaStreamSynchronize(stream));
  CUDA(cudaMemcpy(h, dbuf, sizeof h, cudaMemcpyDeviceToHost));
  float want = (float)(nranks * (nranks + 1) / 2);
  for (int i = 0; i < 64; i++)
    if (h[i] != want)
      NT_DIE("allreduce element %d = %g, want %g", i, (double)h[i], (double)want);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* `timed`: per-call latency (call + stream synchronize) of n AllReduce. */
static void timed(ncclComm_t comm, int nranks) {
  const char *w = getenv("XRANK_WARM"), *c = getenv("XRANK_CALLS");
  int warm = w ? atoi(w) : 20, n = c ? atoi(c) : 2000;
  if (n < 1)
    NT_DIE("XRANK_CALLS=%s", c);
  for (int i = 0; i < warm; i++)
    allreduce_checked(comm, nranks);
  double *lat = malloc((size_t)n * sizeof *lat), sum = 0;
  if (!lat)
    NT_DIE("out of memory");
  for (int i = 0; i < n; i++) {
    double t = mono_s();
    NCCL(ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream));
    CUDA(cudaStreamSynchronize(stream));
    lat[i] = (mono_s() - t) * 1e6;
    sum += lat[i];
  }
  /* the least of 10 batches' medians: what the calls cost when nothing
   * else on the machine took the CPU meanwhile */
  int nb = n >= 100 ? 10 : 1, bl = n / nb;
  double best = 0;
  for (int b = 0; b < nb; b++) {
    qsort(lat + b * bl, (size_t)bl, sizeof *lat, cmp_double);
    double m = lat[b * bl + bl / 2];
    if (b == 0 || m < best)
      best = m;
  }
  qsort(lat, (size_t)n, sizeof *lat, cmp_double);
  printf("lat_us %.2f %.2f %.2f %.2f\n", lat[n / 2], lat[n * 9 / 10], sum / n, best);
  free(lat);
}

int main(int argc, char **argv) {
  if (argc != 5)
    NT_DIE("usage: xrank MODE RANK NRANKS IDFILE");
  const char *mode = argv[1];
  g_rank = atoi(argv[2]);
  int nranks = atoi(argv[3]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  CUDA(cudaSetDevice(g_rank % 8));
  CUDA(cudaStreamCreate(&stream));
  CUDA(cudaMalloc((void **)&dbuf, 64 * sizeof(float)));
  const char *ofds = getenv("XRANK_OPEN_FDS"), *ffds = getenv("XRANK_FREE_FDS");
  for (int i = 0, n = ofds ? atoi(ofds) : 0; i < n; i++)
    if (open("/dev/null", O_RDONLY) < 0)
      NT_DIE("open /dev/null #%d: %s", i, strerror(errno));
  if (ffds) { /* every descriptor but N taken: open until EMFILE, give N back */
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0)
      last = fd;
    for (int i = 0, n = atoi(ffds); i < n && last >= 3; i++)
      close(last--);
  }
  ncclUniqueId id;
  unique_id(argv[4], g_rank, &id);
  if (!strcmp(mode, "noinit") && g_rank == nranks - 1) {
    printf("not joining\n");
    sleep_ms(60000);
    return 0;
  }
  ncclComm_t comm;
  NCCL(ncclCommInitRank(&comm, nranks, id, g_rank));
  if (!strcmp(mode, "runahead")) {
    for (int round = 0; round < 40; round++) {
      char path[4200];
      snprintf(path, sizeof path, "%s.b%d.%d", argv[4], round, g_rank);
      FILE *f = fopen(path, "w");
      if (!f || fclose(f) != 0)
        NT_DIE("barrier file %s: %s", path, strerror(errno));
      for (int r = 0, waited = 0; r < nranks; waited++) {
        snprintf(path, sizeof path, "%s.b%d.%d", argv[4], round, r);
        if (!access(path, F_OK))
          r++;
        else if (waited > 60000)
          NT_DIE("barrier %d: rank %d never came", round, r);
        else
          sleep_ms(1);
      }
      for (int i = 0; i < 5; i++)
        NCCL(ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream));
      CUDA(cudaStreamSynchronize(stream));
    }
    printf("done\n");
    NCCL(ncclCommDestroy(comm));
    return 0;
  }
  if (!strcmp(mode, "steady")) {
    for (int i = 0; i < 60; i++) {
      allreduce_checked(comm, nranks);
      if (i == 10)
        printf("ready\n");
      sleep_ms(20);
    }
    printf("done\n");
    NCCL(ncclCommDestroy(comm));
    return 0;
  }
  for (int i = 0; i < 3; i++)
    allreduce_checked(comm, nranks);
  if (!strcmp(mode, "timed")) {
    timed(comm, nranks);
    NCCL(ncclCommDestroy(comm));
    return 0;
  }
  if (!strcmp(mode, "strictkill")) {
    printf("ready\n");
    if (g_rank == nranks - 2) {
      sleep_ms(60000);
      return 0;
    }
    ncclResult_t r = ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream);
    printf("enqueued %s\n", ncclGetErrorString(r));
    sleep_ms(60000);
    return 0;
  }
  if (!strcmp(mode, "frozen")) {
    printf("ready\n");
    char path[4200];
    snprintf(path, sizeof path, "%s.cont", argv[4]);
    for (int i = 1; access(path, F_OK) != 0; i++) {
      allreduce_checked(comm, nranks);
      printf("calls %d\n", i);
      sleep_ms(20);
    }
    for (int i = 0; i < 5; i++) {
      allreduce_checked(comm, nranks);
      sleep_ms(20);
    }
    ncclResult_t r = g_rank == 1 ? ncclBroadcast(dbuf, dbuf, 64, ncclFloat32, 0, comm, stream)
                                 : ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream);
    printf("mm %s\n", ncclGetErrorString(r));
    printf("hung\n");
    sleep_ms(60000);
    return 0;
  }
  if (!strcmp(mode, "stalled")) {
    printf("ready\n");
    char path[4200];
    snprintf(path, sizeof path, "%s.go", argv[4]);
    wait_file(path);
    double t0 = mono_s();
    for (int i = 1; i <= 100; i++) {
      allreduce_checked(comm, nranks);
      printf("calls %d %.3f\n", i, mono_s() - t0);
    }
    printf("loop done %.3f\n", mono_s() - t0);
    snprintf(path, sizeof path, "%s.cont", argv[4]);
    wait_file(path);
    for (int i = 0; i < 5; i++) {
      allreduce_checked(comm, nranks);
      sleep_ms(20);
    }
    ncclResult_t r = g_rank == 1 ? ncclBroadcast(dbuf, dbuf, 64, ncclFloat32, 0, comm, stream)
                                 : ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream);
    printf("mm %s\n", ncclGetErrorString(r));
    if (r != ncclInvalidUsage) {
      printf("hung\n");
      sleep_ms(60000);
      return 0;
    }
    allreduce_checked(comm, nranks);
    printf("after ok\n");
    NCCL(ncclCommDestroy(comm));
    return 0;
  }
  if (!strcmp(mode, "handover")) {
    printf("ready\n");
    char path[4200];
    snprintf(path, sizeof path, "%s.leaver", argv[4]);
    int leaver = -1;
    for (int i = 0; i < 3000 && leaver < 0; i++) {
      FILE *f = fopen(path, "r");
      if (f) {
        if (fscanf(f, "%d", &leaver) != 1)
          leaver = -1;
        fclose(f);
      }
      if (leaver < 0)
        sleep_ms(10);
    }
    if (leaver < 0)
      NT_DIE("no leaver named");
    ncclComm_t sub = NULL;
    NCCL(ncclCommSplit(comm, g_rank == leaver ? NCCL_SPLIT_NOCOLOR : 0, g_rank, &sub, NULL));
    if (g_rank == leaver) {
      NCCL(ncclCommDestroy(comm));
      printf("left\n");
      return 0; /* exit: its aggregator hands over */
    }
    sleep_ms(1000);
    int sr;
    NCCL(ncclCommUserRank(sub, &sr));
    for (int i = 0; i < 3; i++) {
      NCCL(ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, sub, stream));
      CUDA(cudaStreamSynchronize(stream));
    }
    printf("sub ok\n");
    ncclResult_t r;
    if (sr == 1)
      r = ncclBroadcast(dbuf, dbuf, 64, ncclFloat32, 0, sub, stream);
    else
      r = ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, sub, stream);
    printf("sub seq4 %s\n", ncclGetErrorString(r));
    printf("hung\n");
    sleep_ms(60000);
    return 0;
  }
  if (!strcmp(mode, "closefds")) {
    sleep_ms(300); /* the exchange is connected and has nudged its thread */
    for (int fd = 3; fd < 1024; fd++)
      close(fd);
    int fds[8];
    char buf[4096];
    for (int k = 0; k < 8; k++) {
      char path[4200];
      snprintf(path, sizeof path, "%s.data.%d.%d", argv[4], g_rank, k);
      fds[k] = open(path, O_CREAT | O_TRUNC | O_RDWR, 0600);
      if (fds[k] < 0)
        NT_DIE("open %s: %s", path, strerror(errno));
      memset(buf, 'A' + k, sizeof buf);
      if (write(fds[k], buf, sizeof buf) != (ssize_t)sizeof buf)
        NT_DIE("write %s", path);
    }
    for (int i = 0; i < 5; i++) {
      allreduce_checked(comm, nranks);
      sleep_ms(20);
    }
    printf("closed ok\n");
    return 0; /* exit with the files open: whatever the tracer does at exit lands there */
  }
  if (!strcmp(mode, "openloop")) {
    printf("ready\n");
    const char *ls = getenv("XRANK_LOOP_S");
    double secs = ls ? atof(ls) : 4.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long failures = 0, opened = 0;
    for (int round = 0;; round++) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > secs)
        break;
      int fds[32];
      for (int k = 0; k < 32; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s.loop.%d", argv[4], k);
        fds[k] = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
        if (fds[k] < 0)
          failures++;
        else
          opened++;
      }
      for (int k = 0; k < 32; k++)
        if (fds[k] >= 0)
          close(fds[k]);
      if (round % 10 == 0)
        allreduce_checked(comm, nranks);
      sleep_ms(5);
    }
    printf("open failures %ld of %ld\n", failures, failures + opened);
    return 0;
  }
  if (!strcmp(mode, "idle")) {
    printf("ready\n");
    sleep_ms(60000);
    return 0;
  }
  if (!strcmp(mode, "loop")) {
    char stop[4096], mm[4096];
    snprintf(stop, sizeof stop, "%s.stop", argv[4]);
    snprintf(mm, sizeof mm, "%s.mm", argv[4]);
    printf("ready\n");
    long n = 0, at = -1;
    int odd = 0;
    for (double end = mono_s() + 120; access(stop, F_OK) != 0 && mono_s() < end;) {
      /* IDFILE.mm names the call the mismatch replaces: every rank switches
       * at the same one, whichever iteration it saw the file at (a rank
       * switching earlier would join the others' loop AllReduce with an
       * unfilled buffer).  Empty: at once. */
      if (at < 0 && access(mm, F_OK) == 0) {
        FILE *f = fopen(mm, "r");
        long v;
        at = f && fscanf(f, "%ld", &v) == 1 ? v : n;
        if (f)
          fclose(f);
      }
      if (at >= 0 && n >= at) { /* only XRANK_ODD's call differs: the mismatch is at its seq */
        odd = 1;
        break;
      }
      allreduce_checked(comm, nranks);
      if (++n % 50 == 0)
        printf("calls %ld\n", n);
      sleep_ms(20);
    }
    if (!odd) {
      printf("done %ld\n", n);
      NCCL(ncclCommDestroy(comm));
      return 0;
    }
  }
  if (!strcmp(mode, "mismatch") || !strcmp(mode, "loop")) {
    ncclResult_t r;
    const char *odd = getenv("XRANK_ODD");
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    printf("mmcall %.6f\n", (double)rt.tv_sec + rt.tv_nsec * 1e-9); /* when this rank made the call */
    if (g_rank == (odd ? atoi(odd) : 1))
      r = ncclBroadcast(dbuf, dbuf, 64, ncclFloat32, 0, comm, stream);
    else
      r = ncclAllReduce(dbuf, dbuf, 64, ncclFloat32, ncclSum, comm, stream);
    printf("seq4 %s\n", ncclGetErrorString(r));
    if (r == ncclInvalidUsage) {
      allreduce_checked(comm, nranks); /* nothing of #4 was enqueued anywhere */
      printf("after ok\n");
      NCCL(ncclCommDestroy(comm));
      return 0;
    }
    printf("hung\n");
    sleep_ms(60000);
    return 0;
  }
  NT_DIE("unknown mode %s", mode);
}
