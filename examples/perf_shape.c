/* perf_shape.c -- the loop of a collective benchmark such as nccl-tests'
 * all_reduce_perf: WARMUP AllReduces at the largest size, then per size
 * (doubling from 8 bytes, SIZES of them) ITERS AllReduces issued back to
 * back without waiting (the host runs ahead of its stream), one wait for
 * the stream and a host barrier, one more AllReduce for the data check, a
 * wait and a barrier again (nccl-tests waits, then MPI_Barrier).  The
 * barrier is a counter in a file next to UNIQUE_ID_FILE, mapped shared.
 * Defaults: 21 sizes x (5 + 1) + 5 warmup = 131 collectives, the shape of
 * `all_reduce_perf -b 8 -e 8M -f 2 -n 5 -w 5`.  --slow-seq N --slow-ms MS
 * makes this rank's host wait MS ms before its N-th collective (a rank that
 * every other waits for, once); a slow device is NCCLEMU_FAULT=slow:MS or
 * delay:N:MS on one rank.
 *
 *   examples/launch.sh 4 ./perf_shape [--sizes N] [--iters N] [--warmup N]
 *                                     [--slow-rank R --slow-seq N --slow-ms MS]
 * Prints one line per size on rank 0 (size, time per op).
 * Single-threaded; not signal-safe.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include "common.h"

static unsigned *bar_word, bar_gen;

/* Rank 0 makes the counter before it publishes the unique id, so every
 * other rank finds it once it has the id. */
static void bar_open(const char *idfile, int create) {
  char path[4200];
  snprintf(path, sizeof path, "%s.barrier", idfile);
  int fd = open(path, create ? O_RDWR | O_CREAT | O_TRUNC : O_RDWR, 0600);
  if (fd < 0 || (create && ftruncate(fd, 4096) != 0)) {
    fprintf(stderr, "rank %d: barrier file %s: %s\n", ex_rank, path, strerror(errno));
    exit(1);
  }
  bar_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (bar_word == MAP_FAILED) {
    fprintf(stderr, "rank %d: mmap of the barrier: %s\n", ex_rank, strerror(errno));
    exit(1);
  }
}

static void bar_wait(void) {
  unsigned want = ++bar_gen * (unsigned)ex_size;
  __atomic_add_fetch(bar_word, 1, __ATOMIC_ACQ_REL);
  while (__atomic_load_n(bar_word, __ATOMIC_ACQUIRE) < want) {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  int sizes = 21, iters = 5, warmup = 5, slow_rank = -1, slow_seq = 0, slow_ms = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (more && !strcmp(a, "--sizes")) sizes = atoi(argv[++i]);
    else if (more && !strcmp(a, "--iters")) iters = atoi(argv[++i]);
    else if (more && !strcmp(a, "--warmup")) warmup = atoi(argv[++i]);
    else if (more && !strcmp(a, "--slow-rank")) slow_rank = atoi(argv[++i]);
    else if (more && !strcmp(a, "--slow-seq")) slow_seq = atoi(argv[++i]);
    else if (more && !strcmp(a, "--slow-ms")) slow_ms = atoi(argv[++i]);
    else {
      fprintf(stderr, "perf_shape: unknown argument '%s'\n", a);
      return 2;
    }
  }
  if (sizes < 1 || sizes > 24 || iters < 1 || warmup < 0) {
    fprintf(stderr, "perf_shape: --sizes 1..24, --iters >= 1, --warmup >= 0\n");
    return 2;
  }
  const size_t maxn = ((size_t)8 << (sizes - 1)) / sizeof(float) + 2;
  ncclUniqueId id;
  if (ex_rank == 0)
    bar_open(idfile, 1);
  ex_unique_id(idfile, &id);
  if (ex_rank != 0)
    bar_open(idfile, 0);
  ncclComm_t comm;
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  float *d;
  CUDA_CHECK(cudaMalloc((void **)&d, maxn * sizeof(float)));
  CUDA_CHECK(cudaMemset(d, 0, maxn * sizeof(float)));
  int seq = 0;
#define ALLREDUCE(n)                                                             \
  do {                                                                           \
    if (++seq == slow_seq && ex_rank == slow_rank)                               \
      ex_sleep_ms(slow_ms);                                                      \
    NCCL_CHECK(ncclAllReduce(d, d, (n), ncclFloat32, ncclSum, comm, s));         \
  } while (0)
  for (int w = 0; w < warmup; w++)
    ALLREDUCE(maxn - 2);
  ex_wait(s, comm);
  bar_wait();
  for (int k = 0; k < sizes; k++) {
    size_t n = ((size_t)8 << k) / sizeof(float);
    if (!n)
      n = 1;
    double t0 = now_s();
    for (int it = 0; it < iters; it++)
      ALLREDUCE(n);
    ex_wait(s, comm);
    double us = (now_s() - t0) * 1e6 / iters;
    bar_wait();
    ALLREDUCE(n); /* the data check's run */
    ex_wait(s, comm);
    bar_wait();
    if (ex_rank == 0)
      printf("%12zu bytes %10.1f us\n", n * sizeof(float), us);
  }
#undef ALLREDUCE
  if (ex_rank == 0) { /* everyone has it mapped: the last barrier passed */
    char path[4200];
    snprintf(path, sizeof path, "%s.barrier", idfile);
    unlink(path);
  }
  CUDA_CHECK(cudaFree(d));
  CUDA_CHECK(cudaStreamDestroy(s));
  NCCL_CHECK(ncclCommFinalize(comm));
  NCCL_CHECK(ncclCommDestroy(comm));
  if (ex_rank == 0)
    printf("perf_shape: %d ranks, %d collectives\n", ex_size, seq);
  return 0;
}
