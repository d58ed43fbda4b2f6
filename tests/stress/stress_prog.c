/* stress_prog.c -- the application of the reliability tests (tests/stress):
 * one program, compiled against the real nccl.h / cuda_runtime_api.h, run on
 * the CPU emulator with or without LD_PRELOAD=libnccltrace.so.  The drivers
 * (stress_*.py) start it as N ranks and judge what it left behind.
 *
 *   stress_prog MODE RANK NRANKS DIR [ARGS...]
 *
 * MODE:
 *   load T ITERS ACKDIR   T threads, each with its own communicator over the
 *                         NRANKS processes, issue collectives in a tight loop
 *                         (ITERS each, 0 = until killed).  After each call
 *                         returns, "seq\n" is appended to ACKDIR/ack-R-T with
 *                         one write(2): the kernel keeps it through SIGKILL.
 *                         Every field of call #seq of thread t is a function
 *                         of (t, seq) (stress_expect), so a decoder can tell
 *                         an intact record from a torn one.  Prints "ready".
 *   fork T F              T threads issue collectives while F threads each
 *                         fork 8 children (_exit, exit, exec /bin/true,
 *                         stdio+malloc then exit) and reap them; prints the
 *                         tids of its own threads ("tids 12 13 ...").
 *   signal SIG WHEN BEHAV some collectives, then the application's handler for
 *                         SIG (TERM, INT, SEGV, USR1) is installed WHEN
 *                         (early: by libstress_early.so's constructor, which
 *                         runs before the tracer's; after: after NCCL init)
 *                         doing BEHAV (exit: _exit(40+sig); return; reset:
 *                         SIG_DFL and re-raise; default: no handler; ignore:
 *                         SIG_IGN); then the signal arrives (kill(getpid),
 *                         or a real NULL write for SEGV with exit/reset/default);
 *                         prints "after", more collectives, exit 7.
 *   rlimit LIMIT N        init, N collectives, then RLIMIT_FSIZE = LIMIT bytes
 *                         (a "disk full" for every file written from then
 *                         on: SIGXFSZ/EFBIG), 5 more collectives, exit 5.
 *   marks N               init, N nccltrace_mark() calls (if the tracer is
 *                         there), "ready", then sleep until a signal.
 *   ctor                  NCCL from the program's constructor, from
 *                         libstress_early.so's constructor (STRESS_EARLY_NCCL=1)
 *                         and from a dlopen()ed library (libstress_dl.so);
 *                         counts 11, 22, 33 and 44 (main) mark who called.
 *
 * Exit: 0 (or the mode's code) done, 1 failure (message on stderr).
 * Thread-safety: the load/fork threads share nothing but the ack directory.
 * Signal-safety: handlers only write(2) and _exit/raise.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stress_expect.h"

#define EMU_RANK_TAG "stress rank"
#include "../emu_rank.h"

static int g_nranks = 1;
static const char *g_dir = ".";

/* ------------------------------------------------------------------ load -- */

struct worker {
  int t;
  long iters;
  const char *ackdir;
  pthread_t th;
  volatile int ready;
  pid_t tid;
};

static void *load_thread(void *arg) {
  struct worker *w = arg;
  w->tid = (pid_t)syscall(SYS_gettid);
  CUDA(cudaSetDevice(g_rank % 8));
  cudaStream_t s;
  CUDA(cudaStreamCreate(&s));
  void *a, *b;
  size_t bytes = (size_t)STRESS_MAX_COUNT * 4;
  CUDA(cudaMalloc(&a, bytes));
  CUDA(cudaMalloc(&b, bytes));
  CUDA(cudaMemset(a, 0, bytes));
  char name[32];
  snprintf(name, sizeof name, "id-%d", w->t);
  ncclUniqueId id = share_id(g_dir, name, g_rank, 60);
  ncclComm_t comm;
  NCCL(ncclCommInitRank(&comm, g_nranks, id, g_rank));
  int ack = -1;
  if (w->ackdir) {
    char path[1100];
    snprintf(path, sizeof path, "%s/ack-%d-%d", w->ackdir, g_rank, w->t);
    ack = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (ack < 0)
      NT_DIE("open %s: %s", path, strerror(errno));
  }
  __atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
  for (uint64_t seq = 1; w->iters == 0 || (long)seq <= w->iters; seq++) {
    struct stress_call c;
    stress_expect(w->t, seq, g_nranks, &c);
    if (c.bcast)
      NCCL(ncclBroadcast(a, b, c.count, (ncclDataType_t)c.dtype, c.root, comm, s));
    else
      NCCL(ncclAllReduce(a, b, c.count, (ncclDataType_t)c.dtype, (ncclRedOp_t)c.redop, comm, s));
    if (ack >= 0) {
      char line[32];
      int n = snprintf(line, sizeof line, "%llu\n", (unsigned long long)seq);
      if (write(ack, line, (size_t)n) != n)
        NT_DIE("ack write: %s", strerror(errno));
    }
    if (seq % 8 == 0)
      CUDA(cudaStreamSynchronize(s));
  }
  CUDA(cudaStreamSynchronize(s));
  NCCL(ncclCommDestroy(comm));
  if (ack >= 0)
    close(ack);
  return NULL;
}

static struct worker *start_workers(int n, long iters, const char *ackdir) {
  struct worker *ws = calloc((size_t)n, sizeof *ws);
  if (!ws)
    NT_DIE("no memory");
  for (int t = 0; t < n; t++) {
    ws[t].t = t;
    ws[t].iters = iters;
    ws[t].ackdir = ackdir;
    if (pthread_create(&ws[t].th, NULL, load_thread, &ws[t]) != 0)
      NT_DIE("pthread_create");
  }
  for (int t = 0; t < n; t++)
    while (!__atomic_load_n(&ws[t].ready, __ATOMIC_ACQUIRE))
      sleep_ms(2);
  return ws;
}

static int mode_load(int argc, char **argv) {
  if (argc < 3)
    NT_DIE("load T ITERS ACKDIR");
  int n = atoi(argv[0]);
  long iters = atol(argv[1]);
  struct worker *ws = start_workers(n, iters, argv[2]);
  say("ready\n");
  for (int t = 0; t < n; t++)
    pthread_join(ws[t].th, NULL);
  free(ws);
  return 0;
}

/* ------------------------------------------------------------------ fork -- */

static void *fork_thread(void *arg) {
  int f = (int)(intptr_t)arg;
  for (int i = 0; i < 8; i++) {
    pid_t p = fork();
    if (p < 0)
      NT_DIE("fork: %s", strerror(errno));
    if (p == 0) {
      switch ((f + i) % 4) {
      case 0:
        _exit(0);
      case 1:
        exit(0); /* runs atexit/on_exit handlers: the tracer's too */
      case 2:
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
      default: {
        char *m = malloc(1000);
        snprintf(m, 1000, "child %d of thread %d\n", (int)getpid(), f);
        fputs(m, stderr == NULL ? stdout : stderr);
        free(m);
        exit(0);
      }
      }
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      NT_DIE("child %d of fork thread %d: status %#x", (int)p, f, st);
  }
  return NULL;
}

static int mode_fork(int argc, char **argv) {
  if (argc < 2)
    NT_DIE("fork T F");
  int n = atoi(argv[0]), nf = atoi(argv[1]);
  struct worker *ws = start_workers(n, 400, NULL);
  pthread_t fth[16];
  if (nf > 16)
    nf = 16;
  for (int f = 0; f < nf; f++)
    if (pthread_create(&fth[f], NULL, fork_thread, (void *)(intptr_t)f) != 0)
      NT_DIE("pthread_create");
  for (int f = 0; f < nf; f++)
    pthread_join(fth[f], NULL);
  printf("tids %d", (int)getpid());
  for (int t = 0; t < n; t++) {
    pthread_join(ws[t].th, NULL);
    printf(" %d", (int)ws[t].tid);
  }
  printf("\n");
  fflush(stdout);
  free(ws);
  return 0;
}

/* ------------------------------------------------------------ one comm -- */

struct one {
  ncclComm_t comm;
  cudaStream_t s;
  void *a, *b;
};

static void one_init(struct one *o) {
  CUDA(cudaSetDevice(g_rank % 8));
  CUDA(cudaStreamCreate(&o->s));
  CUDA(cudaMalloc(&o->a, 1 << 16));
  CUDA(cudaMalloc(&o->b, 1 << 16));
  CUDA(cudaMemset(o->a, 0, 1 << 16));
  ncclUniqueId id = share_id(g_dir, "id-one", g_rank, 60);
  NCCL(ncclCommInitRank(&o->comm, g_nranks, id, g_rank));
}

static void one_colls(struct one *o, int n, size_t count) {
  for (int i = 0; i < n; i++)
    NCCL(ncclAllReduce(o->a, o->b, count, ncclFloat, ncclSum, o->comm, o->s));
  CUDA(cudaStreamSynchronize(o->s));
}

/* ---------------------------------------------------------------- signal -- */

static volatile sig_atomic_t g_behav; /* 0 exit, 1 return, 2 reset */

static void app_handler(int sig) {
  char m[48];
  int n = snprintf(m, sizeof m, "app handler %d\n", sig);
  ssize_t w = write(1, m, (size_t)n);
  (void)w;
  if (g_behav == 0)
    _exit(40 + sig);
  if (g_behav == 2) {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

static int sig_of(const char *s) {
  if (!strcmp(s, "TERM")) return SIGTERM;
  if (!strcmp(s, "INT")) return SIGINT;
  if (!strcmp(s, "SEGV")) return SIGSEGV;
  if (!strcmp(s, "USR1")) return SIGUSR1;
  NT_DIE("unknown signal %s", s);
}

static void install(int sig, const char *behav) {
  if (!strcmp(behav, "default"))
    return;
  if (!strcmp(behav, "ignore")) {
    signal(sig, SIG_IGN);
    return;
  }
  g_behav = !strcmp(behav, "exit") ? 0 : !strcmp(behav, "return") ? 1 : 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = app_handler;
  sigemptyset(&sa.sa_mask);
  if (sigaction(sig, &sa, NULL) != 0)
    NT_DIE("sigaction");
}

/* Early installation: libstress_early.so calls this hook from its
 * constructor (before libnccltrace.so's) when STRESS_EARLY_SIG is set. */
void stress_early_install(void);
void stress_early_install(void) {
  const char *s = getenv("STRESS_EARLY_SIG"), *b = getenv("STRESS_EARLY_BEHAV");
  if (s && b)
    install(sig_of(s), b);
}

static volatile int *volatile g_null; /* NULL, through a volatile: no warning */

__attribute__((noinline)) static void null_write(void) { *g_null = 42; }

static int mode_signal(int argc, char **argv) {
  if (argc < 3)
    NT_DIE("signal SIG WHEN BEHAV");
  int sig = sig_of(argv[0]);
  struct one o;
  one_init(&o);
  one_colls(&o, 3, 64);
  if (!strcmp(argv[1], "after"))
    install(sig, argv[2]);
  say("before\n");
  int real_fault = sig == SIGSEGV && strcmp(argv[2], "return") != 0 && strcmp(argv[2], "ignore") != 0;
  if (real_fault)
    null_write();
  else
    kill(getpid(), sig);
  say("after\n");
  one_colls(&o, 2, 64);
  NCCL(ncclCommDestroy(o.comm));
  return 7;
}

/* ---------------------------------------------------------------- rlimit -- */

static int mode_rlimit(int argc, char **argv) {
  rlim_t lim = argc > 0 ? (rlim_t)atol(argv[0]) : 0;
  int n = argc > 1 ? atoi(argv[1]) : 5;
  struct one o;
  one_init(&o);
  one_colls(&o, n, 64);
  struct rlimit rl = {lim, lim};
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    NT_DIE("setrlimit: %s", strerror(errno));
  one_colls(&o, 5, 64);
  say("alive\n");
  NCCL(ncclCommDestroy(o.comm));
  return 5;
}

/* ----------------------------------------------------------------- marks -- */

static int mode_marks(int argc, char **argv) {
  long n = argc > 0 ? atol(argv[0]) : 1000;
  struct one o;
  one_init(&o);
  one_colls(&o, 3, 64);
  void (*mark)(const char *, long long) = (void (*)(const char *, long long))dlsym(RTLD_DEFAULT, "nccltrace_mark");
  for (long i = 0; mark && i < n; i++)
    mark("fill", i);
  say("ready\n");
  for (;;)
    pause();
  return 0;
}

/* ------------------------------------------------------------------ ctor -- */

static ncclResult_t ctor_result = ncclSuccess;

__attribute__((constructor)) static void prog_ctor(void) {
  if (!getenv("STRESS_CTOR"))
    return;
  /* NCCL before main: a one-rank communicator of our own */
  if (cudaSetDevice(0) != cudaSuccess) {
    ctor_result = ncclSystemError;
    return;
  }
  ncclUniqueId id;
  ncclComm_t comm;
  void *a;
  cudaStream_t s;
  if ((ctor_result = ncclGetUniqueId(&id)) != ncclSuccess ||
      (ctor_result = ncclCommInitRank(&comm, 1, id, 0)) != ncclSuccess)
    return;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&a, 4096) != cudaSuccess) {
    ctor_result = ncclSystemError;
    return;
  }
  if ((ctor_result = ncclAllReduce(a, a, 11, ncclFloat, ncclSum, comm, s)) != ncclSuccess)
    return;
  if (cudaStreamSynchronize(s) != cudaSuccess)
    ctor_result = ncclSystemError;
  else
    ctor_result = ncclCommDestroy(comm);
}

int stress_early_result(void); /* libstress_early.so: a real DT_NEEDED dependency */

static int mode_ctor(void) {
  if (ctor_result != ncclSuccess)
    NT_DIE("NCCL from the program's constructor: %d", (int)ctor_result);
  if (stress_early_result() != 0)
    NT_DIE("NCCL from libstress_early.so's constructor: step %d failed", stress_early_result());
  const char *lib = getenv("STRESS_DL_LIB");
  if (!lib)
    NT_DIE("STRESS_DL_LIB not set");
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    NT_DIE("dlopen %s: %s", lib, dlerror());
  int (*run)(int) = (int (*)(int))dlsym(h, "stress_dl_run");
  if (!run || run(33) != 0)
    NT_DIE("NCCL from the dlopen()ed library failed");
  struct one o;
  one_init(&o);
  one_colls(&o, 1, 44);
  NCCL(ncclCommDestroy(o.comm));
  say("ctor ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: stress_prog MODE RANK NRANKS DIR [ARGS...]\n");
    return 2;
  }
  g_rank = atoi(argv[2]);
  g_nranks = atoi(argv[3]);
  g_dir = argv[4];
  const char *m = argv[1];
  if (!strcmp(m, "load"))
    return mode_load(argc - 5, argv + 5);
  if (!strcmp(m, "fork"))
    return mode_fork(argc - 5, argv + 5);
  if (!strcmp(m, "signal"))
    return mode_signal(argc - 5, argv + 5);
  if (!strcmp(m, "rlimit"))
    return mode_rlimit(argc - 5, argv + 5);
  if (!strcmp(m, "marks"))
    return mode_marks(argc - 5, argv + 5);
  if (!strcmp(m, "ctor"))
    return mode_ctor();
  NT_DIE("unknown mode %s", m);
}
