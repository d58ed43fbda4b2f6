/* bu.h -- small helpers shared by the scale benchmarks (bench/scale/):
 * clocks, medians, the one result line bench/run.sh collects, load average,
 * a power-law fit and child-process resource use.
 *
 * Result lines: every benchmark prints, besides its human text, one line per
 * figure
 *   FIGURE|<name>|<measured>|<target>|<PASS|FAIL|INFO>
 * which bench/run.sh gathers into its table.  Nothing else starts with
 * "FIGURE|".
 *
 * Thread-safety: every function is reentrant.  Signal-safety: none needed.
 */
#ifndef BU_H
#define BU_H
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double bu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double bu_thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bu_sleep(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0)
    ;
}

static inline int bu_cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* In a forked child: stdout to the pipe's write end, stderr to /dev/null. */
static inline void bu_child_stdio(int fd[2]) {
  dup2(fd[1], 1);
  close(fd[0]);
  close(fd[1]);
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0)
    dup2(devnull, 2);
}

/* Run argv (argv[0] a path; benchmarks re-execute /proc/self/exe as their
 * measured side) with LD_PRELOAD = preload, or without LD_PRELOAD when
 * NULL, stderr to /dev/null (the tracer's startup lines), and read what it
 * prints on stdout (at most cap - 1 bytes, NUL-terminated) into out.
 * @return 0 when it exited 0 after printing something, else -errno / -EIO. */
static inline int bu_run_capture(char *const argv[], const char *preload, char *out, size_t cap) {
  int fd[2];
  if (pipe(fd) != 0)
    return -errno;
  pid_t pid = fork();
  if (pid < 0)
    return -errno;
  if (pid == 0) {
    bu_child_stdio(fd);
    if (preload)
      setenv("LD_PRELOAD", preload, 1);
    else
      unsetenv("LD_PRELOAD");
    execv(argv[0], argv);
    _exit(127);
  }
  close(fd[1]);
  memset(out, 0, cap);
  ssize_t got = read(fd[0], out, cap - 1);
  close(fd[0]);
  int st;
  waitpid(pid, &st, 0);
  return got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Median of n values (v is sorted in place). */
/* A fresh directory for a benchmark's rings and dumps, where the tracer
 * keeps its rings by default: a tmpfs (/dev/shm) when there is one.  A ring
 * on a disk file system pays for dirty-page writeback (write faults on the
 * hot path every few seconds), which the default configuration does not.
 * name: a short tag.  @return 0, or -1 (errno set). */
static inline int bu_mkdtemp(char *out, size_t cap, const char *name) {
  struct stat st;
  const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
  if ((size_t)snprintf(out, cap, "%s/nccltrace-%s-XXXXXX", base, name) >= cap) {
    errno = ENAMETOOLONG;
    return -1;
  }
  return mkdtemp(out) ? 0 : -1;
}

/* A fresh directory (bu_mkdtemp) for the traced children's rings and
 * dumps, not the cwd: NCCLTRACE_RING_DIR and NCCLTRACE_DIR point under it.
 * @return 0, -1 with errno. */
static inline int bu_trace_dirs(char *out, size_t cap, const char *name) {
  if (bu_mkdtemp(out, cap, name))
    return -1;
  char d[4200];
  snprintf(d, sizeof d, "%s/rings", out);
  setenv("NCCLTRACE_RING_DIR", d, 1);
  snprintf(d, sizeof d, "%s/dumps", out);
  setenv("NCCLTRACE_DIR", d, 1);
  return 0;
}

static inline double bu_median(double *v, int n) {
  if (n <= 0)
    return 0;
  qsort(v, (size_t)n, sizeof *v, bu_cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The p-th quantile (0..1) of sorted values. */
static inline double bu_quantile(const double *sorted, int n, double p) {
  if (n <= 0)
    return 0;
  int i = (int)(p * (n - 1) + 0.5);
  return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static inline double bu_loadavg(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1)
      l = -1;
    fclose(f);
  }
  return l;
}

/* One result line for bench/run.sh. */
static inline void bu_figure(const char *name, const char *target, int verdict, const char *fmt, ...) {
  char m[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  printf("FIGURE|%s|%s|%s|%s\n", name, m, target,
         verdict > 0 ? "PASS" : verdict == 0 ? "FAIL" : "INFO");
  fflush(stdout);
}

/* Least-squares slope of log(y) over log(x): the exponent k of y ~ x^k. */
static inline double bu_fit_exponent(const double *x, const double *y, int n) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    double lx = log(x[i]), ly = log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  double d = n * sxx - sx * sx;
  return d != 0 ? (n * sxy - sx * sy) / d : 0;
}

/* "key value kB" from /proc/PID/<file> (status: VmRSS; smaps_rollup: Pss).
 * @return kB, or -1. */
static inline long bu_proc_kb(int pid, const char *file, const char *key) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
  FILE *f = fopen(path, "r");
  long v = -1;
  size_t kl = strlen(key);
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, kl) && line[kl] == ':') {
      v = atol(line + kl + 1);
      break;
    }
  fclose(f);
  return v;
}
#endif
