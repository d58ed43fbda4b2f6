/* exec_bench.c -- what the preload adds to every exec of a program that
 * never calls NCCL (a launcher's shell, a data loader's helpers, git or
 * nvidia-smi started by a training script): fork + execve + wait of a
 * trivial program, side by side with and without LD_PRELOAD=libnccltrace.so.
 *
 *   exec_bench [--execs N] [--rounds R] [--prog PATH] LIBNCCLTRACE
 *
 * N x R execs (PATH, default /bin/true) each side, untraced and traced
 * alternating one by one; the medians of the wall time and of the child's
 * CPU time (wait4) give ms per exec, the added ms and the ratios.  Only the child is traced (LD_PRELOAD is in the
 * environment it is given), so the figure is the dynamic loader's cost of
 * our library and its dependencies plus our constructor.
 *
 * Exit: 0 when it ran (the figures are INFO lines: a timing is no test on
 * a shared machine), 1 on failure.
 * Thread-safety / signal-safety: single-threaded, no handlers.
 */
#include "bu.h"

#include <sys/resource.h>

extern char **environ;

/* One fork+exec+wait of prog with the environment env: its wall time and
 * the child's CPU time (user + system, from wait4), in seconds.
 * @return 0, or -1 when it failed. */
static int one(const char *prog, char **env, double *wall, double *cpu) {
  char *argv[] = {(char *)prog, NULL};
  double t0 = bu_now();
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    execve(prog, argv, env);
    _exit(127);
  }
  int st;
  struct rusage ru;
  if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return -1;
  *wall = bu_now() - t0;
  *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
  return 0;
}

static double median(double *v, long n) {
  qsort(v, (size_t)n, sizeof *v, bu_cmp_d);
  return v[n / 2];
}

/* environ without LD_PRELOAD, plus LD_PRELOAD=lib when lib is given. */
static char **make_env(const char *lib) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **e = calloc(n + 2, sizeof *e);
  size_t k = 0;
  if (!e)
    return NULL;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) && strncmp(environ[i], "NCCLTRACE_", 10))
      e[k++] = environ[i];
  if (lib) {
    size_t l = strlen(lib) + 12;
    char *s = malloc(l);
    if (!s)
      return NULL;
    snprintf(s, l, "LD_PRELOAD=%s", lib);
    e[k++] = s;
  }
  e[k] = NULL;
  return e;
}

int main(int argc, char **argv) {
  long execs = 500, rounds = 5;
  const char *prog = "/bin/true", *lib = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--execs") && i + 1 < argc)
      execs = atol(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atol(argv[++i]);
    else if (!strcmp(argv[i], "--prog") && i + 1 < argc)
      prog = argv[++i];
    else
      lib = argv[i];
  }
  if (!lib || execs < 1 || rounds < 1 || rounds > 99) {
    fprintf(stderr, "usage: exec_bench [--execs N] [--rounds R] [--prog PATH] LIBNCCLTRACE\n");
    return 1;
  }
  char **plain = make_env(NULL), **traced = make_env(lib);
  long n = execs * rounds;
  double *uw = calloc((size_t)n, sizeof *uw), *uc = calloc((size_t)n, sizeof *uc);
  double *tw = calloc((size_t)n, sizeof *tw), *tc = calloc((size_t)n, sizeof *tc);
  if (!plain || !traced || !uw || !uc || !tw || !tc)
    return 1;
  /* untraced and traced alternate exec by exec: a load spike of the
   * machine falls on both sides alike; medians leave the spikes out */
  for (long i = 0; i < n; i++)
    if (one(prog, plain, &uw[i], &uc[i]) || one(prog, traced, &tw[i], &tc[i])) {
      fprintf(stderr, "exec_bench: an exec of %s failed\n", prog);
      return 1;
    }
  double muw = median(uw, n) * 1e3, mtw = median(tw, n) * 1e3, muc = median(uc, n) * 1e3, mtc = median(tc, n) * 1e3;
  printf("%ld x fork+exec+wait of %s each side, alternating: median wall untraced %.3f ms, traced %.3f ms; "
         "median CPU of the child untraced %.3f ms, traced %.3f ms\n", n, prog, muw, mtw, muc, mtc);
  printf("FIGURE|added ms per exec, LD_PRELOAD and no NCCL call (fork+exec of %s), wall|%.3f ms|-|INFO\n", prog,
         mtw - muw);
  printf("FIGURE|exec wall time traced / untraced, side by side|%.2f x|-|INFO\n", mtw / muw);
  printf("FIGURE|exec CPU time of the child traced / untraced, side by side|%.2f x|-|INFO\n", mtc / muc);
  return 0;
}
