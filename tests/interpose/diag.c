/* diag.c -- one traced process of hostile_e2e.py's round-two cases on the
 * tracer's own stderr lines and its signal handling (docs/reliability.md,
 * "Hostile world, round two", items 5, 6, 7 and 12).
 *
 *   diag fd2 PATH   ncclGetUniqueId, then stderr closed and PATH opened in
 *                   its place (fd 2), "data" lines written to it, a
 *                   SIGUSR1 dump (a tracer line), exit 0 (another line)
 *   diag lines      ncclGetUniqueId, a SIGUSR1 dump when traced (a line), then
 *                   checks that fd 2's file status flags are unchanged,
 *                   exit 0 (the exit dump's line)
 *   diag vfork      ncclGetUniqueId, SIGTERM and SIGUSR1 handlers; a vfork
 *                   child resets both to SIG_DFL (sigaction and signal(),
 *                   as CPython's _posixsubprocess does) and execs true
 *                   (false when its oldact was not the parent's handler);
 *                   then the parent sends itself both signals: exit 0 when
 *                   its handlers ran
 *   diag idle       no NCCL call: prints "ready", waits for a signal
 *   diag forkidle   ncclGetUniqueId, then a fork child that makes no NCCL
 *                   call prints "ready PID" and waits; the parent prints
 *                   "child signal N" or "child exit N" when it ends
 *   diag forkcomm N ncclCommInitRank (one rank) and 5 AllReduce, a unique
 *                   id for the child; then a fork child (no exec) makes a
 *                   one-rank comm of its own with it, runs N AllReduce,
 *                   synchronizes and ends with _exit(0), as Python's
 *                   multiprocessing children do (destroying nothing: its
 *                   exit dump holds the comm); the parent prints "child
 *                   PID exit N" and destroys its comm
 *
 * Exit: 0 done, 1 failure (message on stdout: stderr is under test), 2
 * vfork: a handler did not run, 3 lines: fd 2's flags were changed.
 * Thread-safety / signal-safety: single-threaded; the handlers only store
 * into a volatile sig_atomic_t.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got_term, got_usr1;
static void on_term(int s) { (void)s; got_term = 1; }
static void on_usr1(int s) { (void)s; got_usr1 = 1; }

static int start_nccl(void) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    printf("ncclGetUniqueId failed\n");
    return -1;
  }
  return 0;
}

static int fd2(const char *path) {
  if (start_nccl())
    return 1;
  close(2);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd != 2) {
    printf("the data file got fd %d, not 2\n", fd);
    return 1;
  }
  if (write(2, "data 1\n", 7) != 7)
    return 1;
  raise(SIGUSR1); /* the tracer dumps and says so */
  if (write(2, "data 2\n", 7) != 7)
    return 1;
  printf("ok\n");
  return 0; /* the exit dump says so too */
}

static int lines(void) {
  if (start_nccl())
    return 1;
  int before = fcntl(2, F_GETFL);
  /* Traced: a SIGUSR1 dump, whose line comes from the signal handler.
   * Untraced (no nccltrace_dump in the process) SIGUSR1 would kill. */
  if (dlsym(RTLD_DEFAULT, "nccltrace_dump"))
    raise(SIGUSR1);
  int after = fcntl(2, F_GETFL);
  if (before != after) {
    printf("fd 2's flags changed: %#x -> %#x\n", before, after);
    return 3;
  }
  printf("ok\n");
  return 0;
}

static int do_vfork(void) {
  if (start_nccl())
    return 1;
  struct sigaction a;
  memset(&a, 0, sizeof a);
  sigemptyset(&a.sa_mask);
  a.sa_handler = on_term;
  sigaction(SIGTERM, &a, NULL);
  signal(SIGUSR1, on_usr1);
  pid_t pid = vfork();
  if (pid == 0) {
    /* The child may only call async-signal-safe functions and exec. */
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    sigemptyset(&dfl.sa_mask);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &dfl, &old);
    sighandler_t prev = signal(SIGUSR1, SIG_DFL);
    int same = old.sa_handler == on_term && prev == on_usr1;
    execlp(same ? "true" : "false", same ? "true" : "false", (char *)NULL);
    _exit(127);
  }
  if (pid < 0) {
    printf("vfork: %s\n", strerror(errno));
    return 1;
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("the vfork child saw other handlers than its parent's (status %#x)\n", st);
    return 1;
  }
  struct sigaction now;
  sigaction(SIGTERM, NULL, &now);
  if (now.sa_handler != on_term) {
    printf("after the vfork child, sigaction reports another SIGTERM handler\n");
    return 2;
  }
  kill(getpid(), SIGTERM);
  kill(getpid(), SIGUSR1);
  if (!got_term || !got_usr1) {
    printf("handlers ran: SIGTERM %d, SIGUSR1 %d\n", (int)got_term, (int)got_usr1);
    return 2;
  }
  printf("ok\n");
  return 0;
}

static int idle(void) {
  printf("ready\n");
  fflush(stdout);
  for (;;)
    pause();
  return 0;
}

static int forkidle(void) {
  if (start_nccl())
    return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
      pause();
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) {
    printf("fork/wait failed\n");
    return 1;
  }
  if (WIFSIGNALED(st))
    printf("child signal %d\n", WTERMSIG(st));
  else
    printf("child exit %d\n", WEXITSTATUS(st));
  return 0;
}

/* A one-rank comm and n AllReduce on a stream of its own, synchronized. */
static int comm_run(ncclComm_t *comm, int n, const ncclUniqueId *given) {
  ncclUniqueId id;
  cudaStream_t s;
  float *buf;
  if (given)
    id = *given;
  if ((!given && ncclGetUniqueId(&id) != ncclSuccess) || ncclCommInitRank(comm, 1, id, 0) != ncclSuccess ||
      cudaStreamCreate(&s) != cudaSuccess || cudaMalloc((void **)&buf, 4096) != cudaSuccess) {
    printf("init failed\n");
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, *comm, s) != ncclSuccess) {
      printf("AllReduce failed\n");
      return -1;
    }
  if (cudaStreamSynchronize(s) != cudaSuccess) {
    printf("cudaStreamSynchronize failed\n");
    return -1;
  }
  return 0;
}

static int forkcomm(int n) {
  ncclComm_t parent, child;
  ncclUniqueId cid; /* made by the parent, as multiprocessing launchers do */
  if (comm_run(&parent, 5, NULL) || ncclGetUniqueId(&cid) != ncclSuccess)
    return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    _exit(comm_run(&child, n, &cid) ? 1 : 0); /* as multiprocessing children end */
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) {
    printf("fork/waitpid failed\n");
    return 1;
  }
  printf("child %d exit %d\n", (int)pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  ncclCommDestroy(parent);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && !strcmp(argv[1], "fd2"))
    return fd2(argv[2]);
  if (argc == 2 && !strcmp(argv[1], "lines"))
    return lines();
  if (argc == 2 && !strcmp(argv[1], "vfork"))
    return do_vfork();
  if (argc == 2 && !strcmp(argv[1], "idle"))
    return idle();
  if (argc == 2 && !strcmp(argv[1], "forkidle"))
    return forkidle();
  if (argc == 3 && !strcmp(argv[1], "forkcomm"))
    return forkcomm(atoi(argv[2]));
  printf("usage: diag fd2 PATH | lines | vfork | idle | forkidle | forkcomm N\n");
  return 1;
}
