/* test_emu_fault -- NCCLEMU_FAULT injection, one case per run:
 *   stall:    rank 1 has stall:2: collective #1 completes everywhere, #2
 *             never completes (on rank 1, nor on rank 0 that waits for it).
 *   async:    rank 0 has async_error:2:system: enqueuing #2 turns the async
 *             error to ncclSystemError at once and #2 never completes;
 *             `remote` and `internal` map to their codes (1-rank comms).
 *   delay:    rank 1 has delay:2:700: collective #2 takes >= 0.7 s longer,
 *             #1 and #3 do not.
 *   bad:      malformed values fail ncclCommInitRank with
 *             ncclInvalidArgument and a stderr line naming the token.
 * Usage: test_emu_fault CASE */
#include "emu_test.h"

#include <fcntl.h>
#include <sys/mman.h>

static int init2(int rank, int n, ncclUniqueId id, const char *fault_on_1, int fault_rank, ncclComm_t *comm,
                 cudaStream_t *s, float **a)
{
  if (rank == fault_rank)
    setenv("NCCLEMU_FAULT", fault_on_1, 1);
  T_CUDA(cudaStreamCreate(s));
  T_CUDA(cudaMalloc((void **)a, 256 * sizeof(float)));
  for (int i = 0; i < 256; i++)
    (*a)[i] = 1;
  T_NCCL(ncclCommInitRank(comm, n, id, rank));
  return 0;
}

static int still_pending(cudaStream_t s, int ms)
{
  t_sleep_ms(ms);
  return cudaStreamQuery(s) == cudaErrorNotReady;
}

static int case_stall(int rank, int n, ncclUniqueId id, void *arg)
{
  ncclComm_t comm;
  cudaStream_t s;
  float *a;
  if (init2(rank, n, id, "stall:2", 1, &comm, &s, &a))
    return 1;
  T_NCCL(ncclAllReduce(a, a, 256, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  NT_RET_CHECK(a[0] == 2, "collective #1 wrong: %g", a[0]);
  T_NCCL(ncclAllReduce(a, a, 256, ncclFloat, ncclSum, comm, s));
  NT_RET_CHECK(still_pending(s, 1500), "rank %d: collective #2 completed despite stall:2 on rank 1", rank);
  ncclResult_t st;
  T_NCCL(ncclCommGetAsyncError(comm, &st));
  NT_RET_CHECK(st == ncclSuccess, "a stall is silent, but async error is %d", (int)st);
  /* Both ranks look before either aborts: an abort (and the exit after it)
   * is a dead peer to the other rank, which would rightly turn its async
   * error to ncclRemoteError if it looked later (a race under load).  The
   * stalled comm cannot serve as the barrier, so a shared counter does. */
  unsigned *checked = arg;
  __atomic_add_fetch(checked, 1, __ATOMIC_ACQ_REL);
  for (int i = 0; i < 1000 && __atomic_load_n(checked, __ATOMIC_ACQUIRE) < (unsigned)n; i++)
    t_sleep_ms(10);
  T_NCCL(ncclCommAbort(comm));
  T_CUDA(cudaStreamSynchronize(s));
  return 0;
}

static int one_rank_async(const char *spec, ncclResult_t want)
{
  setenv("NCCLEMU_FAULT", spec, 1);
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t s;
  float *a;
  T_NCCL(ncclGetUniqueId(&id));
  T_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  T_CUDA(cudaStreamCreate(&s));
  T_CUDA(cudaMalloc((void **)&a, 16));
  T_NCCL(ncclAllReduce(a, a, 4, ncclFloat, ncclSum, comm, s));
  ncclResult_t st;
  T_NCCL(ncclCommGetAsyncError(comm, &st));
  NT_RET_CHECK(st == want, "%s: async error %d, want %d", spec, (int)st, (int)want);
  NT_RET_CHECK(still_pending(s, 300), "%s: the failed collective completed", spec);
  T_NCCL(ncclCommAbort(comm));
  T_CUDA(cudaStreamSynchronize(s));
  unsetenv("NCCLEMU_FAULT");
  return 0;
}

static int case_async(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a;
  if (init2(rank, n, id, "async_error:2:system", 0, &comm, &s, &a))
    return 1;
  T_NCCL(ncclAllReduce(a, a, 256, ncclFloat, ncclSum, comm, s));
  T_CUDA(cudaStreamSynchronize(s));
  ncclResult_t st;
  T_NCCL(ncclCommGetAsyncError(comm, &st));
  NT_RET_CHECK(st == ncclSuccess, "async error before the fault: %d", (int)st);
  T_NCCL(ncclAllReduce(a, a, 256, ncclFloat, ncclSum, comm, s));
  if (rank == 0) {
    T_NCCL(ncclCommGetAsyncError(comm, &st));
    NT_RET_CHECK(st == ncclSystemError, "async error %d right after enqueue, want ncclSystemError", (int)st);
  }
  NT_RET_CHECK(still_pending(s, 1000), "rank %d: collective #2 completed", rank);
  T_NCCL(ncclCommAbort(comm));
  T_CUDA(cudaStreamSynchronize(s));
  if (rank == 0 && (one_rank_async("async_error:1:remote", ncclRemoteError) ||
                    one_rank_async("async_error:1:internal", ncclInternalError)))
    return 1;
  return 0;
}

static int case_delay(int rank, int n, ncclUniqueId id, void *arg)
{
  (void)arg;
  ncclComm_t comm;
  cudaStream_t s;
  float *a;
  if (init2(rank, n, id, "delay:2:700", 1, &comm, &s, &a))
    return 1;
  double took[3];
  for (int k = 0; k < 3; k++) {
    double t0 = t_now();
    T_NCCL(ncclAllReduce(a, a, 256, ncclFloat, ncclSum, comm, s));
    NT_RET_CHECK(t_now() - t0 < 0.3, "enqueue blocked for %.2f s", t_now() - t0);
    T_CUDA(cudaStreamSynchronize(s));
    took[k] = t_now() - t0;
  }
  NT_RET_CHECK(a[0] == 8, "results wrong after delays: %g", a[0]);
  NT_RET_CHECK(took[1] >= 0.69, "rank %d: delayed collective took %.3f s", rank, took[1]);
  NT_RET_CHECK(took[0] < 0.5 && took[2] < 0.5, "rank %d: undelayed collectives took %.3f/%.3f s", rank, took[0], took[2]);
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

/* Run ncclCommInitRank with a bad NCCLEMU_FAULT, stderr captured. */
static int bad_value(const char *spec, const char *token)
{
  char path[] = "/tmp/ncclemu_fault_XXXXXX";
  int fd = mkstemp(path);
  NT_RET_CHECK(fd >= 0, "mkstemp");
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("NCCLEMU_FAULT", spec, 1);
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclGetUniqueId(&id);
  ncclResult_t rc = ncclCommInitRank(&comm, 1, id, 0);
  unsetenv("NCCLEMU_FAULT");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char buf[1024] = { 0 };
  ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  NT_RET_CHECK(rc == ncclInvalidArgument, "'%s': init returned %d, want ncclInvalidArgument", spec, (int)rc);
  NT_RET_CHECK(got > 0 && strstr(buf, token), "'%s': stderr does not name '%s': %s", spec, token, buf);
  return 0;
}

static int case_bad(void)
{
  if (bad_value("stall:x", "stall:x") || bad_value("delay:1", "delay:1") ||
      bad_value("stall:1,async_error:3:cosmic", "async_error:3:cosmic") || bad_value("explode:1", "explode:1") ||
      bad_value("stall:0", "stall:0"))
    return 1;
  /* A good multi-token value still initializes. */
  setenv("NCCLEMU_FAULT", "delay:5:10,stall:9", 1);
  ncclUniqueId id;
  ncclComm_t comm;
  T_NCCL(ncclGetUniqueId(&id));
  T_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  T_NCCL(ncclCommDestroy(comm));
  return 0;
}

int main(int argc, char **argv)
{
  const char *c = argc > 1 ? argv[1] : "";
  int rc;
  double t0 = t_now();
  if (!strcmp(c, "stall"))
  {
    unsigned *checked = mmap(NULL, sizeof *checked, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (checked == MAP_FAILED)
      return 1;
    rc = t_fork_ranks(2, case_stall, checked, 30);
  }
  else if (!strcmp(c, "async"))
    rc = t_fork_ranks(2, case_async, NULL, 30);
  else if (!strcmp(c, "delay"))
    rc = t_fork_ranks(2, case_delay, NULL, 30);
  else if (!strcmp(c, "bad"))
    rc = case_bad();
  else {
    fprintf(stderr, "usage: %s stall|async|delay|bad\n", argv[0]);
    return 1;
  }
  printf("%s: %s (%.1f s)\n", rc ? "FAIL" : "ok", c, t_now() - t0);
  return rc;
}
