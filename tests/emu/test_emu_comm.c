/* test_emu_comm -- communicator lifecycle on 4 ranks:
 * nonblocking init (ncclInProgress, then ncclSuccess through
 * ncclCommGetAsyncError) and finalize; collectives on a nonblocking comm;
 * ncclCommSplit (ranks ordered by key then old rank, NCCL_SPLIT_NOCOLOR
 * gives NULL, blocking and nonblocking configs); ncclCommShrink (the
 * excluded rank does not call it, survivors get a working comm);
 * ncclCommInitRankScalable; and, in one process, ncclCommInitAll with a
 * grouped AllReduce over its communicators. */
#include "emu_test.h"

static int poll_ready(ncclComm_t comm, const char *what)
{
  ncclResult_t st = ncclInProgress;
  double end = t_now() + 10;
  int polls = 0;
  while (st == ncclInProgress && t_now() < end) {
    T_NCCL(ncclCommGetAsyncError(comm, &st));
    polls++;
    if (st == ncclInProgress)
      t_sleep_ms(1);
  }
  NT_RET_CHECK(st == ncclSuccess, "%s: state %d after %d polls", what, (int)st, polls);
  return 0;
}

static int allreduce_check(ncclComm_t comm, cudaStream_t s, float mine, float want, const char *what)
{
  float *a;
  T_CUDA(cudaMalloc((void **)&a, 100 * sizeof(float)));
  for (int i = 0; i < 100; i++)
    a[i] = mine;
  T_NCCL(ncclAllReduce(a, a, 100, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  for (int i = 0; i < 100; i++)
    NT_RET_CHECK(a[i] == want, "%s: got %g want %g", what, a[i], want);
  T_CUDA(cudaFree(a));
  return 0;
}

static int rank_main(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  cudaStream_t s;
  T_CUDA(cudaSetDevice(rank));
  T_CUDA(cudaStreamCreate(&s));

  /* Nonblocking init. */
  ncclComm_t comm;
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, n, id, rank, &nb);
  NT_RET_CHECK(rc == ncclInProgress || rc == ncclSuccess, "nonblocking init returned %d", (int)rc);
  if (poll_ready(comm, "nonblocking init"))
    return 1;
  int dev;
  T_NCCL(ncclCommCuDevice(comm, &dev));
  NT_RET_CHECK(dev == rank, "cuDevice %d", dev);
  if (allreduce_check(comm, s, (float)(rank + 1), (float)(n * (n + 1) / 2), "nonblocking comm"))
    return 1;

  /* Split by parity, keys reversed: within a color the new rank order is
   * the reverse of the old one. Config NULL inherits nonblocking. */
  ncclComm_t half;
  rc = ncclCommSplit(comm, rank % 2, -rank, &half, NULL);
  NT_RET_CHECK(rc == ncclInProgress || rc == ncclSuccess, "split returned %d", (int)rc);
  if (poll_ready(half, "split"))
    return 1;
  int hr, hn;
  T_NCCL(ncclCommUserRank(half, &hr));
  T_NCCL(ncclCommCount(half, &hn));
  int members = (n - rank % 2 + 1) / 2;
  int want_rank = 0;
  for (int p = rank % 2; p < n; p += 2)
    if (p > rank)
      want_rank++;
  NT_RET_CHECK(hn == members && hr == want_rank, "split: rank %d/%d, want %d/%d", hr, hn, want_rank, members);
  float sum = 0;
  for (int p = rank % 2; p < n; p += 2)
    sum += (float)(p + 1);
  if (allreduce_check(half, s, (float)(rank + 1), sum, "split comm"))
    return 1;

  /* NOCOLOR with a blocking config: the last rank gets no communicator. */
  ncclConfig_t bl = NCCL_CONFIG_INITIALIZER;
  bl.blocking = 1;
  ncclComm_t most = (ncclComm_t)&bl;
  rc = ncclCommSplit(comm, rank == n - 1 ? NCCL_SPLIT_NOCOLOR : 7, 0, &most, &bl);
  if (rank == n - 1) {
    NT_RET_CHECK(rc == ncclSuccess || rc == ncclInProgress, "NOCOLOR split returned %d", (int)rc);
    NT_RET_CHECK(most == NULL, "NOCOLOR split gave a communicator");
  } else {
    NT_RET_CHECK(rc == ncclSuccess, "blocking split returned %d", (int)rc);
    if (allreduce_check(most, s, 1, (float)(n - 1), "NOCOLOR split"))
      return 1;
    T_NCCL(ncclCommDestroy(most));
  }

  /* Shrink away the last rank: it does not call shrink at all. */
  if (rank != n - 1) {
    int excl = n - 1;
    ncclComm_t small;
    T_NCCL(ncclCommShrink(comm, &excl, 1, &small, &bl, NCCL_SHRINK_DEFAULT));
    int sr, sn;
    T_NCCL(ncclCommUserRank(small, &sr));
    T_NCCL(ncclCommCount(small, &sn));
    NT_RET_CHECK(sr == rank && sn == n - 1, "shrink: %d/%d", sr, sn);
    if (allreduce_check(small, s, 2, (float)(2 * (n - 1)), "shrunk comm"))
      return 1;
    T_NCCL(ncclCommDestroy(small));
  }

  /* Nonblocking finalize. */
  rc = ncclCommFinalize(half);
  NT_RET_CHECK(rc == ncclInProgress || rc == ncclSuccess, "finalize returned %d", (int)rc);
  if (poll_ready(half, "finalize"))
    return 1;
  T_NCCL(ncclCommDestroy(half));
  rc = ncclCommFinalize(comm);
  if (rc == ncclInProgress && poll_ready(comm, "finalize"))
    return 1;
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

/* Scalable init: two ids, the same for every rank. */
struct ids {
  ncclUniqueId id[2];
};

static int scalable_main(int rank, int n, ncclUniqueId id, void *arg)
{
  struct ids *ids = arg;
  (void)id;
  ncclComm_t comm;
  cudaStream_t s;
  T_CUDA(cudaStreamCreate(&s));
  T_NCCL(ncclCommInitRankScalable(&comm, n, rank, 2, ids->id, NULL));
  if (allreduce_check(comm, s, 3, (float)(3 * n), "scalable"))
    return 1;
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

static int init_all(void)
{
  enum { ND = 3 };
  ncclComm_t comms[ND];
  int devs[ND] = { 2, 0, 1 };
  T_NCCL(ncclCommInitAll(comms, ND, devs));
  cudaStream_t s[ND];
  float *buf[ND];
  for (int i = 0; i < ND; i++) {
    int d, r;
    T_NCCL(ncclCommCuDevice(comms[i], &d));
    T_NCCL(ncclCommUserRank(comms[i], &r));
    NT_RET_CHECK(d == devs[i] && r == i, "InitAll comm %d: device %d rank %d", i, d, r);
    T_CUDA(cudaSetDevice(d));
    T_CUDA(cudaStreamCreate(&s[i]));
    T_CUDA(cudaMalloc((void **)&buf[i], 1000 * sizeof(float)));
    for (int k = 0; k < 1000; k++)
      buf[i][k] = (float)(i + 1);
  }
  T_NCCL(ncclGroupStart());
  for (int i = 0; i < ND; i++)
    T_NCCL(ncclAllReduce(buf[i], buf[i], 1000, ncclFloat, ncclSum, comms[i], s[i]));
  T_NCCL(ncclGroupEnd());
  for (int i = 0; i < ND; i++) {
    T_CUDA(cudaStreamSynchronize(s[i]));
    for (int k = 0; k < 1000; k++)
      NT_RET_CHECK(buf[i][k] == 6, "InitAll AllReduce on comm %d: %g", i, buf[i][k]);
    T_NCCL(ncclCommDestroy(comms[i]));
  }
  return 0;
}

int main(void)
{
  double t0 = t_now();
  int rc = t_fork_ranks(4, rank_main, NULL, 60);
  if (!rc) {
    struct ids ids;
    ncclGetUniqueId(&ids.id[0]);
    ncclGetUniqueId(&ids.id[1]);
    rc = t_fork_ranks(3, scalable_main, &ids, 30);
  }
  if (!rc) {
    /* InitAll in a child: the emulator's threads stay out of this process. */
    pid_t p = fork();
    if (p == 0)
      _exit(init_all());
    int st;
    waitpid(p, &st, 0);
    rc = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  printf("%s (%.1f s)\n", rc ? "FAIL" : "ok", t_now() - t0);
  return rc;
}
