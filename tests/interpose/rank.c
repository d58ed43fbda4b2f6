/* rank.c -- one rank of the interposer's end-to-end tests, run on the CPU
 * emulator (or anything that looks like CUDA + NCCL).  The test driver
 * (interpose_e2e.py) starts N of these as separate processes, the way a
 * launcher does; rank 0 publishes the ncclUniqueId through a file.
 *
 *   rank MODE RANK NRANKS DIR
 *
 * MODE:
 *   all      every wrapped kind of call (test 1); prints the calls it made
 *   kill     N=5 collectives, synchronize, print "ready", sleep (SIGKILL)
 *   hang     rank 1 skips collective #3: rank 0 waits for it forever
 *   segv     5 collectives, then a NULL write in crash_here()
 *   term     5 collectives, "ready", wait for SIGTERM
 *   exit42   5 collectives, then _exit(42)
 *   strict   (NCCLTRACE_CHECK=strict) one agreed AllReduce, then one with a
 *            count rank 1 disagrees on, then a group that disagrees; prints
 *            what NCCL (or nccltrace) returned for each
 *   handlers app SIGTERM/SIGUSR1 handlers before (constructor) and after
 *            init; raises SIGUSR1 then SIGTERM; each handler prints a line
 *   exec     5 collectives, then exec RANK_EXEC_TARGET (default /bin/true)
 *            with argv {target, "uid", RANK, "1", DIR} through the exec
 *            family member named by RANK_EXEC_HOW (default execve)
 *   execfail 5 collectives; every exec family member on a path that does
 *            not exist (fexecve on fd -1), printing "HOW rc errno"; then 5
 *            more collectives and a normal exit (0)
 *   nbdefer  a nonblocking comm: one AllReduce outside a group and one in a
 *            group, each polled to ncclSuccess (NCCLEMU_NB_DEFER_MS makes
 *            NCCL's enqueue late), "nb issued", 300 ms, then _exit(0)
 *   uid      no communicator: one ncclGetUniqueId, exit 0 (what "exec"
 *            runs when it execs this program)
 *   vm       5 collectives, destroy, print "vmpeak KB" (VmPeak of
 *            /proc/self/status), exit 0
 *   usr1storm 5 collectives, then raise(SIGUSR1) 40 times (each one asks
 *            for a dump, synchronously), "storm done", exit 0
 *   manycomms RANK_COMMS (default 300) one-rank comms (ncclCommInitAll of
 *            this rank's device), each with one AllReduce, then destroyed
 *            (kept alive with RANK_KEEP=1);
 *            then a split of the world comm on which rank 1 issues an
 *            AllReduce of another count (a mismatch that hangs), "issued",
 *            sleep until killed
 *   manyops  RANK_OPS (default 1100) collectives, synchronized every 100,
 *            then one more (NCCLEMU_FAULT=stall:RANK_OPS+1 never completes
 *            it), "issued", sleep until killed
 *
 * Exit: 0 done, 1 failure (message on stderr).
 * Thread-safety / signal-safety: single-threaded; the handlers only write(2).
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Nonblocking communicators: ncclInProgress is a success here. */
#define EMU_RANK_NCCL_OK(r) ((r) == ncclSuccess || (r) == ncclInProgress)
#include "../emu_rank.h"

/* ---------------------------------------------------------- handlers -- */

static void app_term(int sig) {
  (void)sig;
  say("app SIGTERM handler\n");
  _exit(3);
}
static void app_usr1_before(int sig) {
  (void)sig;
  say("app SIGUSR1 handler (before)\n");
}
static void app_usr1_after(int sig, siginfo_t *si, void *uc) {
  (void)sig; (void)si; (void)uc;
  say("app SIGUSR1 handler (after)\n");
}

/* Installed while the libraries load, before nccltrace's constructor?  No:
 * a preloaded library's constructor runs before the program's.  This one
 * stands for "installed before any NCCL call". */
__attribute__((constructor)) static void early_handlers(void) {
  if (getenv("RANK_EARLY_HANDLERS"))
    signal(SIGUSR1, app_usr1_before);
}

/* ------------------------------------------------------------ modes -- */

struct ctx {
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t s;
  float *a, *b;
};

static void setup(struct ctx *c, const char *dir) {
  CUDA(cudaSetDevice(c->rank));
  CUDA(cudaStreamCreate(&c->s));
  CUDA(cudaMalloc((void **)&c->a, 1 << 20));
  CUDA(cudaMalloc((void **)&c->b, 1 << 20));
  CUDA(cudaMemset(c->a, 0, 1 << 20));
  ncclUniqueId id = share_id(dir, "id0", c->rank, 20);
  NCCL(ncclCommInitRank(&c->comm, c->nranks, id, c->rank));
}

static void allreduces(struct ctx *c, int n) {
  for (int i = 0; i < n; i++)
    NCCL(ncclAllReduce(c->a, c->b, 256, ncclFloat, ncclSum, c->comm, c->s));
  CUDA(cudaStreamSynchronize(c->s));
}

static void wait_async(ncclComm_t comm) {
  ncclResult_t e = ncclInProgress;
  for (int i = 0; i < 3000 && e == ncclInProgress; i++) {
    NCCL(ncclCommGetAsyncError(comm, &e));
    if (e == ncclInProgress)
      sleep_ms(2);
  }
  if (e != ncclSuccess)
    NT_DIE("comm state %d", (int)e);
}

/* Test 1: each call is printed as one line the driver compares with the
 * decoded dump: "kind seq count dtype redop root/peer". */
static int mode_all(struct ctx *c, const char *dir) {
  int r = c->rank, n = c->nranks;
  allreduces(c, 0);
  NCCL(ncclAllReduce(c->a, c->b, 1024, ncclFloat, ncclSum, c->comm, c->s));
  printf("AllReduce 1024 float32 sum -\n");
  NCCL(ncclBroadcast(c->a, c->b, 512, ncclFloat, 1 % n, c->comm, c->s));
  printf("Broadcast 512 float32 - %d\n", 1 % n);
  NCCL(ncclBcast(c->b, 256, ncclInt32, 0, c->comm, c->s));
  printf("Bcast 256 int32 - 0\n");
  NCCL(ncclReduce(c->a, c->b, 128, ncclFloat, ncclMax, 2 % n, c->comm, c->s));
  printf("Reduce 128 float32 max %d\n", 2 % n);
  NCCL(ncclAllGather(c->a, c->b, 64, ncclFloat, c->comm, c->s));
  printf("AllGather 64 float32 - -\n");
  NCCL(ncclReduceScatter(c->a, c->b, 32, ncclDouble, ncclProd, c->comm, c->s));
  printf("ReduceScatter 32 float64 prod -\n");
  NCCL(ncclAlltoAll(c->a, c->b, 16, ncclInt8, c->comm, c->s));
  printf("AlltoAll 16 int8 - -\n");
  NCCL(ncclGather(c->a, c->b, 8, ncclUint8, 3 % n, c->comm, c->s));
  printf("Gather 8 uint8 - %d\n", 3 % n);
  NCCL(ncclScatter(c->a, c->b, 8, ncclInt64, 0, c->comm, c->s));
  printf("Scatter 8 int64 - 0\n");
  /* p2p ring in a group */
  NCCL(ncclGroupStart());
  NCCL(ncclSend(c->a, 100, ncclInt32, (r + 1) % n, c->comm, c->s));
  NCCL(ncclRecv(c->b, 100, ncclInt32, (r + n - 1) % n, c->comm, c->s));
  NCCL(ncclGroupEnd());
  printf("Send 100 int32 - %d\n", (r + 1) % n);
  printf("Recv 100 int32 - %d\n", (r + n - 1) % n);
  /* nested group of collectives */
  NCCL(ncclGroupStart());
  NCCL(ncclGroupStart());
  NCCL(ncclAllReduce(c->a, c->b, 4, ncclInt32, ncclMin, c->comm, c->s));
  NCCL(ncclGroupEnd());
  NCCL(ncclAllReduce(c->a, c->b, 8, ncclInt32, ncclSum, c->comm, c->s));
  NCCL(ncclGroupEnd());
  printf("AllReduce 4 int32 min -\n");
  printf("AllReduce 8 int32 sum -\n");
  CUDA(cudaStreamSynchronize(c->s));
  /* split by parity */
  ncclComm_t sub;
  NCCL(ncclCommSplit(c->comm, r % 2, r, &sub, NULL));
  NCCL(ncclAllReduce(c->a, c->b, 2, ncclDouble, ncclSum, sub, c->s));
  printf("split AllReduce 2 float64 sum -\n");
  CUDA(cudaStreamSynchronize(c->s));
  /* nonblocking init of a second comm */
  ncclUniqueId id1 = share_id(dir, "id1", r, 20);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t nb;
  NCCL(ncclCommInitRankConfig(&nb, n, id1, r, &cfg));
  wait_async(nb);
  NCCL(ncclAllReduce(c->a, c->b, 3, ncclFloat, ncclAvg, nb, c->s));
  wait_async(nb);
  printf("nb AllReduce 3 float32 avg -\n");
  CUDA(cudaStreamSynchronize(c->s));
  fflush(stdout);
  NCCL(ncclCommDestroy(sub));
  NCCL(ncclCommFinalize(nb));
  wait_async(nb);
  NCCL(ncclCommDestroy(nb));
  NCCL(ncclCommFinalize(c->comm));
  NCCL(ncclCommDestroy(c->comm));
  return 0;
}

static __attribute__((noinline)) void crash_here(volatile int *p) {
  *p = 42;
}

static int mode_handlers(struct ctx *c) {
  /* After init: the app replaces SIGUSR1's handler and adds SIGTERM's. */
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = app_usr1_after;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGUSR1, &sa, &old) != 0)
    NT_DIE("sigaction");
  /* The app must see what it installed before, not nccltrace's handler. */
  if (getenv("RANK_EARLY_HANDLERS") && (old.sa_flags & SA_SIGINFO || old.sa_handler != app_usr1_before))
    NT_DIE("oldact is not the app's previous SIGUSR1 handler");
  if (signal(SIGTERM, app_term) != SIG_DFL)
    NT_DIE("previous SIGTERM handler is not SIG_DFL");
  allreduces(c, 2);
  raise(SIGUSR1);
  raise(SIGTERM); /* app_term exits 3 */
  NT_DIE("still alive after SIGTERM");
}

/* ------------------------------------------------------------- exec -- */

/* Exec `path` through family member `how`; returns only if it failed. */
static int exec_by(const char *how, const char *path, char *const argv[]) {
  extern char **environ;
  if (!strcmp(how, "execve"))
    return execve(path, argv, environ);
  if (!strcmp(how, "execv"))
    return execv(path, argv);
  if (!strcmp(how, "execvp"))
    return execvp(path, argv);
  if (!strcmp(how, "execvpe"))
    return execvpe(path, argv, environ);
  if (!strcmp(how, "execl"))
    return execl(path, argv[0], argv[1], argv[2], argv[3], argv[4], (char *)NULL);
  if (!strcmp(how, "execlp"))
    return execlp(path, argv[0], argv[1], argv[2], argv[3], argv[4], (char *)NULL);
  if (!strcmp(how, "execle"))
    return execle(path, argv[0], argv[1], argv[2], argv[3], argv[4], (char *)NULL, environ);
  if (!strcmp(how, "execveat"))
    return execveat(AT_FDCWD, path, argv, environ, 0);
  if (!strcmp(how, "fexecve")) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT)
      return -1;
    return fexecve(fd, argv, environ); /* fd -1 when missing: EBADF */
  }
  NT_DIE("unknown exec function %s", how);
}

static const char *const exec_hows[] = {"execve", "execv",  "execvp",   "execvpe", "execl",
                                        "execlp", "execle", "execveat", "fexecve"};

static int mode_exec(struct ctx *c, const char *dir, int fail_all) {
  char rank[16];
  snprintf(rank, sizeof rank, "%d", c->rank);
  allreduces(c, 5);
  if (fail_all) {
    char *argv[] = {"missing", "uid", rank, "1", (char *)dir, NULL};
    for (size_t i = 0; i < sizeof exec_hows / sizeof exec_hows[0]; i++) {
      errno = 0;
      int rc = exec_by(exec_hows[i], "/nonexistent/nccltrace-exec-test", argv);
      printf("%s %d %d\n", exec_hows[i], rc, errno);
    }
    allreduces(c, 5);
    NCCL(ncclCommDestroy(c->comm));
    return 0;
  }
  const char *target = getenv("RANK_EXEC_TARGET") ? getenv("RANK_EXEC_TARGET") : "/bin/true";
  const char *how = getenv("RANK_EXEC_HOW") ? getenv("RANK_EXEC_HOW") : "execve";
  char *argv[] = {(char *)target, "uid", rank, "1", (char *)dir, NULL};
  exec_by(how, target, argv);
  NT_DIE("%s %s: %s", how, target, strerror(errno));
}

int main(int argc, char **argv) {
  if (argc != 5)
    NT_DIE("usage: rank MODE RANK NRANKS DIR");
  const char *mode = argv[1], *dir = argv[4];
  struct ctx c = {.rank = atoi(argv[2]), .nranks = atoi(argv[3])};
  g_rank = c.rank;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!strcmp(mode, "uid")) {
    ncclUniqueId id;
    NCCL(ncclGetUniqueId(&id));
    say("uid done\n");
    return 0;
  }
  setup(&c, dir);
  if (!strcmp(mode, "exec") || !strcmp(mode, "execfail"))
    return mode_exec(&c, dir, !strcmp(mode, "execfail"));
  if (!strcmp(mode, "all"))
    return mode_all(&c, dir);
  if (!strcmp(mode, "handlers"))
    return mode_handlers(&c);
  if (!strcmp(mode, "strict")) {
    allreduces(&c, 1);
    ncclResult_t r1 = ncclAllReduce(c.a, c.b, c.rank == 1 ? 128 : 256, ncclFloat, ncclSum, c.comm, c.s);
    printf("strict single %d\n", (int)r1);
    NCCL(ncclGroupStart());
    NCCL(ncclAllReduce(c.a, c.b, c.rank == 1 ? 64 : 32, ncclFloat, ncclSum, c.comm, c.s));
    ncclResult_t r2 = ncclGroupEnd();
    printf("strict group %d\n", (int)r2);
    allreduces(&c, 1); /* agreed again: runs */
    printf("strict after ok\n");
    NCCL(ncclCommDestroy(c.comm));
    return 0;
  }
  if (!strcmp(mode, "nbdefer")) {
    ncclUniqueId id1 = share_id(dir, "id1", c.rank, 20);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t nb;
    NCCL(ncclCommInitRankConfig(&nb, c.nranks, id1, c.rank, &cfg));
    wait_async(nb);
    NCCL(ncclAllReduce(c.a, c.b, 4, ncclFloat, ncclSum, nb, c.s));
    wait_async(nb);
    NCCL(ncclGroupStart());
    NCCL(ncclAllReduce(c.a, c.b, 8, ncclFloat, ncclSum, nb, c.s));
    NCCL(ncclGroupEnd());
    wait_async(nb);
    say("nb issued\n");
    sleep_ms(300);
    _exit(0);
  }
  if (!strcmp(mode, "manycomms")) {
    const char *v = getenv("RANK_COMMS");
    int n = v ? atoi(v) : 300, dev = c.rank;
    for (int i = 0; i < n; i++) {
      ncclComm_t one;
      NCCL(ncclCommInitAll(&one, 1, &dev));
      NCCL(ncclAllReduce(c.a, c.b, 64, ncclFloat, ncclSum, one, c.s));
      CUDA(cudaStreamSynchronize(c.s));
      if (!getenv("RANK_KEEP"))
        NCCL(ncclCommDestroy(one));
    }
    ncclComm_t sub;
    NCCL(ncclCommSplit(c.comm, 0, c.rank, &sub, NULL));
    NCCL(ncclAllReduce(c.a, c.b, c.rank == 1 ? 128 : 256, ncclFloat, ncclSum, sub, c.s));
    say("issued\n");
    for (;;)
      sleep_ms(1000);
  }
  if (!strcmp(mode, "manyops")) {
    const char *v = getenv("RANK_OPS");
    int n = v ? atoi(v) : 1100;
    for (int done = 0; done < n; done += 100)
      allreduces(&c, n - done < 100 ? n - done : 100);
    NCCL(ncclAllReduce(c.a, c.b, 256, ncclFloat, ncclSum, c.comm, c.s));
    say("issued\n");
    for (;;)
      sleep_ms(1000);
  }
  if (!strcmp(mode, "hang")) {
    allreduces(&c, 2);
    if (c.rank != 1) {
      /* Collective #3: rank 1 never issues it, so it cannot complete. */
      NCCL(ncclAllReduce(c.a, c.b, 256, ncclFloat, ncclSum, c.comm, c.s));
      say("issued\n");
      CUDA(cudaStreamSynchronize(c.s));
    } else {
      say("issued\n");
    }
    for (;;)
      sleep_ms(1000);
  }
  allreduces(&c, 5);
  if (!strcmp(mode, "kill") || !strcmp(mode, "term")) {
    say("ready\n");
    for (;;)
      sleep_ms(1000);
  }
  if (!strcmp(mode, "segv"))
    crash_here((volatile int *)(uintptr_t)(argc - 5)); /* NULL, opaque to the compiler */
  if (!strcmp(mode, "exit42"))
    _exit(42);
  if (!strcmp(mode, "vm")) {
    NCCL(ncclCommDestroy(c.comm));
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
      if (!strncmp(line, "VmPeak:", 7))
        printf("vmpeak %ld\n", atol(line + 7));
    if (f)
      fclose(f);
    return 0;
  }
  if (!strcmp(mode, "usr1storm")) {
    for (int i = 0; i < 40; i++)
      raise(SIGUSR1);
    printf("storm done\n");
    NCCL(ncclCommDestroy(c.comm));
    return 0;
  }
  NT_DIE("unknown mode %s", mode);
}
