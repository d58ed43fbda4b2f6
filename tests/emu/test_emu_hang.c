/* test_emu_hang -- acceptance (b) and friends: hangs behave as on NCCL.
 *   skip:      rank 1 skips a collective; every enqueue returns; rank 0's
 *              cudaStreamSynchronize is still blocked after 2 s, and
 *              ncclCommAbort releases it.
 *   mismatch:  rank 0 Broadcasts (root 0) while rank 1 AllReduces at the
 *              same position: the root completes, rank 1 stays blocked
 *              (and its event never completes) until abort.
 *   count:     AllReduce of 4 vs 8 elements: both ranks block until abort.
 *   init:      rank 1 never joins; rank 0's nonblocking init stays
 *              ncclInProgress; abort ends it.
 *   death:     of 3 ranks, rank 2 exits; within ~1 s the survivors'
 *              ncclCommGetAsyncError says ncclRemoteError while their
 *              pending AllReduce never completes; abort releases it.
 *   revoke:    a hung collective is cancelled by ncclCommRevoke; the async
 *              state goes ncclInProgress -> ncclSuccess.
 *   p2p:       NCCL connects a send/recv pair at its first exchange, on the
 *              host: rank 0's first ncclSend to rank 1 does not return until
 *              rank 1 posts its ncclRecv.  Once connected, a small send
 *              completes (its stream too) before the receive is posted.
 * Usage: test_emu_hang CASE */
#include "emu_test.h"

#include <pthread.h>

struct syncer {
  cudaStream_t s;
  volatile int done;
  pthread_t th;
};

static void *sync_thread(void *p)
{
  struct syncer *sy = p;
  cudaStreamSynchronize(sy->s);
  __atomic_store_n(&sy->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void start_sync(struct syncer *sy, cudaStream_t s)
{
  sy->s = s;
  sy->done = 0;
  pthread_create(&sy->th, NULL, sync_thread, sy);
}

static int wait_done(struct syncer *sy, double secs)
{
  double end = t_now() + secs;
  while (!__atomic_load_n(&sy->done, __ATOMIC_ACQUIRE) && t_now() < end)
    t_sleep_ms(20);
  return __atomic_load_n(&sy->done, __ATOMIC_ACQUIRE);
}

/* The blocked-then-released check shared by the cases. */
static int blocked_until_abort(int rank, ncclComm_t comm, cudaStream_t s)
{
  struct syncer sy;
  start_sync(&sy, s);
  NT_RET_CHECK(!wait_done(&sy, 2.0), "rank %d: stream completed, expected a hang", rank);
  NT_RET_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "rank %d: stream query not NotReady", rank);
  T_NCCL(ncclCommAbort(comm));
  NT_RET_CHECK(wait_done(&sy, 5.0), "rank %d: abort did not release the stream", rank);
  pthread_join(sy.th, NULL);
  return 0;
}

static int setup(int rank, int n, ncclUniqueId id, ncclComm_t *comm, cudaStream_t *s, float **a, float **b)
{
  T_CUDA(cudaStreamCreate(s));
  T_CUDA(cudaMalloc((void **)a, 64 * sizeof(float)));
  T_CUDA(cudaMalloc((void **)b, 64 * sizeof(float)));
  for (int i = 0; i < 64; i++)
    (*a)[i] = 1;
  T_NCCL(ncclCommInitRank(comm, n, id, rank));
  /* One healthy collective first: init and the data path work. */
  T_NCCL(ncclAllReduce(*a, *b, 64, ncclFloat, ncclSum, *comm, *s));
  T_CUDA(cudaStreamSynchronize(*s));
  NT_RET_CHECK((*b)[0] == (float)n, "warm-up AllReduce wrong");
  return 0;
}

static int case_skip(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  if (rank == 1) {   /* skips collective #2, stays alive */
    t_sleep_ms(4000);
    T_NCCL(ncclCommAbort(comm));
    return 0;
  }
  T_NCCL(ncclAllReduce(a, b, 64, ncclFloat, ncclSum, comm, s));   /* returns */
  return blocked_until_abort(rank, comm, s);
}

static int case_mismatch(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  cudaEvent_t ev;
  T_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  if (rank == 0) {
    T_NCCL(ncclBroadcast(a, a, 64, ncclFloat, 0, comm, s));
    T_CUDA(cudaEventRecord(ev, s));
    T_CUDA(cudaStreamSynchronize(s));   /* the root completes */
    NT_RET_CHECK(cudaEventQuery(ev) == cudaSuccess, "root event not complete");
    t_sleep_ms(3000);   /* peer is still waiting: stay alive */
    T_NCCL(ncclCommAbort(comm));
    return 0;
  }
  T_NCCL(ncclAllReduce(a, b, 64, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaEventRecord(ev, s));
  t_sleep_ms(200);
  NT_RET_CHECK(cudaEventQuery(ev) == cudaErrorNotReady, "mismatched AllReduce event completed");
  return blocked_until_abort(rank, comm, s);
}

static int case_count(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  T_NCCL(ncclAllReduce(a, b, rank == 0 ? 4 : 8, ncclFloat, ncclSum, comm, s));
  return blocked_until_abort(rank, comm, s);
}

static int case_init(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  if (rank == 1) {   /* never joins */
    t_sleep_ms(2500);
    return 0;
  }
  ncclComm_t comm;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclResult_t rc = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
  NT_RET_CHECK(rc == ncclInProgress, "nonblocking init returned %d", (int)rc);
  double end = t_now() + 2.0;
  ncclResult_t st = ncclSuccess;
  while (t_now() < end) {
    T_NCCL(ncclCommGetAsyncError(comm, &st));
    NT_RET_CHECK(st == ncclInProgress, "init with a missing rank reached state %d", (int)st);
    t_sleep_ms(50);
  }
  T_NCCL(ncclCommAbort(comm));
  return 0;
}

static int case_death(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  if (rank == n - 1)
    _exit(0);   /* leaves without a word */
  T_NCCL(ncclAllReduce(a, b, 64, ncclFloat, ncclSum, comm, s));
  double t0 = t_now();
  ncclResult_t st = ncclSuccess;
  while (t_now() - t0 < 3.0) {
    T_NCCL(ncclCommGetAsyncError(comm, &st));
    if (st != ncclSuccess)
      break;
    t_sleep_ms(20);
  }
  NT_RET_CHECK(st == ncclRemoteError, "rank %d: async error %d after %.1f s, want ncclRemoteError", rank, (int)st,
          t_now() - t0);
  NT_RET_CHECK(t_now() - t0 < 1.5, "rank %d: peer death noticed after %.2f s", rank, t_now() - t0);
  NT_RET_CHECK(cudaStreamQuery(s) == cudaErrorNotReady, "rank %d: pending work completed without the dead peer", rank);
  return blocked_until_abort(rank, comm, s);
}

static int case_revoke(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  if (rank == 0)
    T_NCCL(ncclAllReduce(a, b, 64, ncclFloat, ncclSum, comm, s));   /* rank 1 never joins it */
  t_sleep_ms(300);
  T_NCCL(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  T_CUDA(cudaStreamSynchronize(s));   /* released */
  ncclResult_t st = ncclInProgress;
  double end = t_now() + 5;
  while (st == ncclInProgress && t_now() < end) {
    T_NCCL(ncclCommGetAsyncError(comm, &st));
    t_sleep_ms(10);
  }
  NT_RET_CHECK(st == ncclSuccess, "revoked comm state %d", (int)st);
  NT_RET_CHECK(ncclAllReduce(a, b, 64, ncclFloat, ncclSum, comm, s) == ncclInvalidUsage,
          "collective on a revoked comm accepted");
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

struct sender {
  float *a;
  ncclComm_t comm;
  cudaStream_t s;
  volatile int returned;
};

static void *send_thread(void *p)
{
  struct sender *x = p;
  if (ncclSend(x->a, 64, ncclFloat, 1, x->comm, x->s) == ncclSuccess)
    __atomic_store_n(&x->returned, 1, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&x->returned, -1, __ATOMIC_RELEASE);
  return NULL;
}

static int case_p2p(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
  if (setup(rank, n, id, &comm, &s, &a, &b))
    return 1;
  if (rank == 0) {
    /* 1. First exchange: the call itself waits for the peer's side. */
    struct sender x = { .a = a, .comm = comm, .s = s, .returned = 0 };
    pthread_t th;
    double t0 = t_now();
    pthread_create(&th, NULL, send_thread, &x);
    pthread_join(th, NULL);
    NT_RET_CHECK(x.returned == 1, "first ncclSend failed");
    NT_RET_CHECK(t_now() - t0 > 0.8, "first ncclSend returned after %.2f s, before the peer posted its recv",
            t_now() - t0);
    T_CUDA(cudaStreamSynchronize(s));
    /* 2. Connected: a small send completes before the receive exists. */
    T_NCCL(ncclSend(a, 64, ncclFloat, 1, comm, s));
    struct syncer sy;
    start_sync(&sy, s);
    NT_RET_CHECK(wait_done(&sy, 1.0), "connected small send did not complete without the receive");
    pthread_join(sy.th, NULL);
  } else {
    t_sleep_ms(1000);   /* rank 0 is inside its first ncclSend meanwhile */
    T_NCCL(ncclRecv(b, 64, ncclFloat, 0, comm, s));
    T_CUDA(cudaStreamSynchronize(s));
    NT_RET_CHECK(b[0] == 1, "first recv got %g", (double)b[0]);
    t_sleep_ms(1500);   /* rank 0's second send completes meanwhile */
    b[0] = 0;
    T_NCCL(ncclRecv(b, 64, ncclFloat, 0, comm, s));
    T_CUDA(cudaStreamSynchronize(s));
    NT_RET_CHECK(b[0] == 1, "second recv got %g", (double)b[0]);
  }
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

int main(int argc, char **argv)
{
  static const struct {
    const char *name;
    t_rank_fn fn;
    int n;
  } cases[] = { { "skip", case_skip, 2 },   { "mismatch", case_mismatch, 2 }, { "count", case_count, 2 },
                { "init", case_init, 2 },   { "death", case_death, 3 },       { "revoke", case_revoke, 2 },
                { "p2p", case_p2p, 2 } };
  const char *want = argc > 1 ? argv[1] : "";
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (!strcmp(want, cases[i].name)) {
      double t0 = t_now();
      int rc = t_fork_ranks(cases[i].n, cases[i].fn, NULL, 30);
      printf("%s: %s (%.1f s)\n", rc ? "FAIL" : "ok", cases[i].name, t_now() - t0);
      return rc;
    }
  fprintf(stderr, "usage: %s skip|mismatch|count|init|death|revoke|p2p\n", argv[0]);
  return 1;
}
