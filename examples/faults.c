/* faults.c -- the classic distributed-training faults, one per argument, for
 * trying `nccltrace analyze` (and for the scenario tests).  Every rank runs
 * healthy AllReduce steps; at step K (--step, default 3) rank R (--rank,
 * default 1), or each of ranks R..R2 (--rank-to R2), injects the fault:
 *
 *   none      no fault (pair with NCCLEMU_FAULT=stall:N / async_error:N:remote)
 *   op        R calls Broadcast(root 0) where the others call AllReduce
 *   raw_op    R calls Broadcast with itself as root: R's call returns
 *   shape     R's AllReduce has twice the count
 *   order     R calls Broadcast then AllReduce, the others the reverse order
 *   dtype     R's AllReduce uses int32 instead of float32
 *   redop     R's AllReduce uses max instead of sum
 *   root      everyone Broadcasts, R names a different root
 *   skip      R leaves the loop before collective K and exits 0
 *   lazy      R never creates the communicator (lazy init skipped), exits 0
 *   lazy_group after step K-1 the others create 8 more nonblocking
 *             communicators of every rank (a framework's new groups, made
 *             at their first use); R never uses them and waits: the
 *             others wait in their inits (R must not be 0, which hands out
 *             the ids)
 *   exit42    R exits with code 42 before step K
 *   app_error R hits an application error and exits 1
 *   abort     R aborts the communicator (ncclCommAbort) and exits 3
 *   segv      R dereferences NULL
 *   sigkill   R is SIGKILLed (as by the OOM killer); with --rank-to, every
 *             rank of R..R2 at the same step (a node-wide kill)
 *   group     inside a group of two AllReduces, R's second has twice the count
 *   split     on a communicator split by rank parity, R's AllReduce differs in count
 *   split_skip R never calls ncclCommSplit (the others wait in it), exits 0
 *   p2p       ring exchange: R sends twice the count its neighbour receives
 *   p2p_peer  ring exchange: R sends to the rank after its neighbour (needs 3 ranks)
 *   ring      ring exchange of 1 MiB (16 steps of 64 KiB on the emulator), the
 *             same on every rank: pair with RANKENV_R="NCCLEMU_FAULT=kill_recv:1:P"
 *             (R dies after P steps of its first receive)
 *   window_skip R never registers the symmetric-memory window the others
 *             register (collective: they wait in it) and goes on to step 1
 *   loader_exit R ends as the dynamic linker ends a process whose symbol is
 *             missing: "symbol lookup error" on stderr, exit_group(127)
 *             without exit() (no atexit, no exit record)
 *   bad_rank  R passes rank WORLD_SIZE+3 to ncclCommInitRank, which NCCL
 *             rejects (ncclInvalidArgument), and exits 1
 *
 *   examples/launch.sh 4 ./faults op --step 2 --rank 3
 * Single-threaded; not signal-safe.
 */
#include <signal.h>
#include <sys/syscall.h>
#include "common.h"

/* Application markers land on nccltrace's timeline when it is preloaded;
 * without it the weak symbol is NULL and nothing happens. */
extern void nccltrace_mark(const char *what, long long value) __attribute__((weak));

static void mark(const char *what, long long v) {
  if (nccltrace_mark)
    nccltrace_mark(what, v);
}

static const char *const cases[] = {"none", "stall", "op", "raw_op", "shape", "order", "dtype",
                                    "redop", "root", "skip", "lazy", "exit42", "app_error", "abort",
                                    "segv", "sigkill", "group", "split", "split_skip", "p2p", "p2p_peer",
                                    "ring", "window_skip", "bad_rank", "loader_exit", "lazy_group", NULL};

/* lazy_group: eight communicators of every rank, nonblocking, that R never
 * joins.  Eight, so that at least one of them has a smaller id than the
 * world communicator's (8 in 9 runs): a tracer that let an unfinished
 * comm decide the derived job id split the job (docs/identity.md). */
static void lazy_groups(const char *idfile, int me) {
  enum { NLAZY = 8 };
  ncclComm_t lazy[NLAZY];
  for (int i = 0; i < NLAZY; i++) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s.lazy%d", idfile, i) >= (int)sizeof path) {
      fprintf(stderr, "rank %d: unique id path too long\n", ex_rank);
      exit(2);
    }
    ncclUniqueId id;
    ex_unique_id(path, &id);
    if (me)
      continue;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&lazy[i], ex_size, id, ex_rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
      fprintf(stderr, "rank %d: lazy init %d: %s\n", ex_rank, i, ncclGetErrorString(r));
      exit(1);
    }
  }
  if (me)
    fprintf(stderr, "rank %d: never uses the new groups (their lazy inits are skipped)\n", ex_rank);
  for (;;) {
    if (!me)
      for (int i = 0; i < NLAZY; i++) {
        ncclResult_t st = ncclSuccess;
        ncclCommGetAsyncError(lazy[i], &st);
      }
    ex_sleep_ms(100);
  }
}

static __attribute__((noinline)) void inject_segfault(volatile int *p) {
  *p = 42; /* the backtrace names this function */
}

int main(int argc, char **argv) {
  const char *idfile = ex_setup(&argc, argv);
  const char *kase = NULL;
  int K = 3, R = 1, R2 = -1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--step") == 0 && i + 1 < argc)
      K = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc)
      R = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rank-to") == 0 && i + 1 < argc)
      R2 = atoi(argv[++i]);
    else
      kase = argv[i];
  }
  int known = 0;
  for (int i = 0; kase && cases[i]; i++)
    known |= strcmp(kase, cases[i]) == 0;
  if (R2 < 0)
    R2 = R;
  if (!known || K < 1 || R < 0 || R >= ex_size || R2 < R || R2 >= ex_size) {
    fprintf(stderr, "usage: faults CASE [--step K>=1] [--rank R<WORLD_SIZE] [--rank-to R2]\ncases:");
    for (int i = 0; cases[i]; i++)
      fprintf(stderr, " %s", cases[i]);
    fprintf(stderr, "\n");
    return 2;
  }
#define IS(x) (strcmp(kase, x) == 0)
  int me = ex_rank >= R && ex_rank <= R2;
  if (IS("p2p_peer") && ex_size < 3) {
    fprintf(stderr, "p2p_peer needs WORLD_SIZE >= 3\n");
    return 2;
  }
  if (IS("lazy_group") && R == 0) {
    fprintf(stderr, "lazy_group needs --rank other than 0 (rank 0 hands out the ids)\n");
    return 2;
  }
  if (IS("split") && ex_size < 4) {
    fprintf(stderr, "split needs WORLD_SIZE >= 4 (two ranks per half)\n");
    return 2;
  }
  ncclUniqueId id;
  ex_unique_id(idfile, &id);
  mark("start", ex_rank);
  if (IS("lazy") && me) {
    /* The communicator would have been created at the first collective,
     * which this rank skips: its peers wait in init for it forever. */
    fprintf(stderr, "rank %d: skipping the first collective (and with it the lazy init)\n", ex_rank);
    return 0;
  }
  ncclComm_t comm, sub = NULL;
  if (IS("bad_rank") && me) {
    ncclResult_t r = ncclCommInitRank(&comm, ex_size, id, ex_size + 3);
    fprintf(stderr, "rank %d: ncclCommInitRank(nranks=%d, rank=%d): %s\n", ex_rank, ex_size, ex_size + 3,
            ncclGetErrorString(r));
    return 1;
  }
  NCCL_CHECK(ncclCommInitRank(&comm, ex_size, id, ex_rank));
  if (IS("split"))
    NCCL_CHECK(ncclCommSplit(comm, ex_rank % 2, ex_rank, &sub, NULL));
  if (IS("split_skip")) {
    if (me) {
      fprintf(stderr, "rank %d: skipping ncclCommSplit\n", ex_rank);
      return 0; /* leaves the communicator undestroyed, like an early return */
    }
    NCCL_CHECK(ncclCommSplit(comm, 0, ex_rank, &sub, NULL));
  }
  ncclWindow_t win = NULL;
  void *wbuf = NULL;
  if (IS("window_skip")) {
    CUDA_CHECK(cudaMalloc(&wbuf, 1 << 16));
    if (me)
      fprintf(stderr, "rank %d: skipping ncclCommWindowRegister\n", ex_rank);
    else
      NCCL_CHECK(ncclCommWindowRegister(comm, wbuf, 1 << 16, &win, NCCL_WIN_COLL_SYMMETRIC));
  }
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreate(&s));
  const size_t n = 256;
  float *a, *b;
  CUDA_CHECK(cudaMalloc((void **)&a, 4 * n * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void **)&b, 4 * n * sizeof(float)));
  CUDA_CHECK(cudaMemset(a, 0, 4 * n * sizeof(float)));
  int next = (ex_rank + 1) % ex_size, prev = (ex_rank + ex_size - 1) % ex_size;
  const size_t nbig = (size_t)1 << 18; /* 1 MiB of float32 */
  float *ba = NULL, *bb = NULL;
  if (IS("ring")) {
    CUDA_CHECK(cudaMalloc((void **)&ba, nbig * sizeof(float)));
    CUDA_CHECK(cudaMalloc((void **)&bb, nbig * sizeof(float)));
    CUDA_CHECK(cudaMemset(ba, 0, nbig * sizeof(float)));
  }
  for (int step = 1; step <= K + 2; step++) {
    mark("step", step);
    if (step != K) {
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
      if (sub)
        NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, sub, s));
      ex_wait(s, comm);
      continue;
    }
    if (me)
      fprintf(stderr, "rank %d: injecting '%s' at step %d\n", ex_rank, kase, step);
    if (IS("lazy_group"))
      lazy_groups(idfile, me); /* never returns */
    if (IS("none") || IS("stall")) {
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("op") || IS("raw_op")) {
      if (me)
        NCCL_CHECK(ncclBroadcast(a, b, n, ncclFloat32, IS("op") ? 0 : R, comm, s));
      else
        NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("shape")) {
      NCCL_CHECK(ncclAllReduce(a, b, me ? 2 * n : n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("order")) {
      if (me) {
        NCCL_CHECK(ncclBroadcast(a, b, n, ncclFloat32, 0, comm, s));
        NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
      } else {
        NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
        NCCL_CHECK(ncclBroadcast(a, b, n, ncclFloat32, 0, comm, s));
      }
    } else if (IS("dtype")) {
      NCCL_CHECK(ncclAllReduce(a, b, n, me ? ncclInt32 : ncclFloat32, ncclSum, comm, s));
    } else if (IS("redop")) {
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, me ? ncclMax : ncclSum, comm, s));
    } else if (IS("root")) {
      NCCL_CHECK(ncclBroadcast(a, b, n, ncclFloat32, me ? (R == 0 ? 1 : R) : 0, comm, s));
    } else if (IS("skip")) {
      if (me) {
        fprintf(stderr, "rank %d: leaving the loop early (skipped collective %d)\n", ex_rank, step);
        break;
      }
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("exit42") || IS("app_error")) {
      if (me) {
        mark(IS("exit42") ? "fault_exit" : "fault_app_error", step);
        if (IS("app_error"))
          fprintf(stderr, "rank %d: RuntimeError: injected application failure before collective\n", ex_rank);
        exit(IS("exit42") ? 42 : 1);
      }
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("abort")) {
      if (me) {
        ncclCommAbort(comm);
        exit(3);
      }
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("loader_exit")) {
      if (me) {
        fprintf(stderr, "./faults: symbol lookup error: ./faults: undefined symbol: cudaMissingCall\n");
        syscall(SYS_exit_group, 127);
      }
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("segv") || IS("sigkill")) {
      if (me) {
        if (IS("segv"))
          inject_segfault(NULL);
        else
          raise(SIGKILL);
      }
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
    } else if (IS("group")) {
      NCCL_CHECK(ncclGroupStart());
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
      NCCL_CHECK(ncclAllReduce(a + 2 * n, b + 2 * n, me ? 2 * n : n, ncclFloat32, ncclSum, comm, s));
      NCCL_CHECK(ncclGroupEnd());
    } else if (IS("split")) {
      NCCL_CHECK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, comm, s));
      NCCL_CHECK(ncclAllReduce(a, b, me ? 2 * n : n, ncclFloat32, ncclSum, sub, s));
    } else if (IS("p2p") || IS("p2p_peer")) {
      NCCL_CHECK(ncclGroupStart());
      if (IS("p2p_peer"))
        NCCL_CHECK(ncclSend(a, n, ncclFloat32, me ? (next + 1) % ex_size : next, comm, s));
      else
        NCCL_CHECK(ncclSend(a, me ? 2 * n : n, ncclFloat32, next, comm, s));
      NCCL_CHECK(ncclRecv(b, n, ncclFloat32, prev, comm, s));
      NCCL_CHECK(ncclGroupEnd());
    } else if (IS("ring")) {
      NCCL_CHECK(ncclGroupStart());
      NCCL_CHECK(ncclSend(ba, nbig, ncclFloat32, next, comm, s));
      NCCL_CHECK(ncclRecv(bb, nbig, ncclFloat32, prev, comm, s));
      NCCL_CHECK(ncclGroupEnd());
    }
    ex_wait(s, comm);
  }
  CUDA_CHECK(cudaFree(a));
  CUDA_CHECK(cudaFree(b));
  if (ba) {
    CUDA_CHECK(cudaFree(ba));
    CUDA_CHECK(cudaFree(bb));
  }
  if (sub)
    NCCL_CHECK(ncclCommDestroy(sub));
  if (!(IS("skip") && me))
    NCCL_CHECK(ncclCommDestroy(comm));
  mark("done", ex_rank);
  return 0;
}
