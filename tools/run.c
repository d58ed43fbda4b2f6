/* run.c -- `nccltrace run [options] -- CMD ...`: run CMD with libnccltrace.so
 * preloaded and the options passed as NCCLTRACE_* variables.
 *
 * Thread-safety: single-threaded command.  Its signal handler is
 * run_sig.c's (async-signal-safe).
 * CMD runs in a forked child (and, with --coord, a coordinator in another):
 * this process waits for it, passes on the signals a launcher or a user
 * sends it alone (run_sig.c: a signal sent to the whole process group
 * reaches CMD from the kernel and is not passed on again; CMD stopping
 * stops run), and then records
 * CMD's exit status in the dump directory (recorder/format.h "run
 * exit-status file"): what a launcher knows and a rank that ends without
 * running exit() -- the dynamic linker's exit 127, SIGKILL -- cannot
 * record itself.  It exits as CMD did: CMD's code, or CMD's signal raised
 * again on itself.  The child dies with this process (PR_SET_PDEATHSIG),
 * as it would have had it been started directly.  When CMD is itself a
 * launcher (torchrun, mpirun), the status is the launcher's: its ranks are
 * its children, not ours.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ntr_config.h"
#include "interpose/config.h"
#include "recorder/env.h"
#include "recorder/format.h"
#include "recorder/safedir.h"
#include "recorder/util.h"
#include "tools/ntt.h"
#include "tools/run_job.h"
#include "tools/run_sig.h"

int ntx_coord_main(int argc, char **argv) __attribute__((weak));

static const char run_usage[] =
    "usage: nccltrace run [--dir D] [--ring-dir R] [--check off|async|strict] [--timeout S] [--coord] -- CMD [ARGS...]\n";

/* @return 0, or -1 when src does not fit (a path we must not cut). */
static int copy_path(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len)
    return -1;
  memcpy(dst, src, n + 1);
  return 0;
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* NCCLTRACE_LIB, the build tree next to this executable, the libdir next to
 * this executable's bindir (an install, wherever DESTDIR or a move put it),
 * the configured libdir, ../lib next to the executable, and last the build
 * tree this command was built in.  An installed command must preload its own
 * library, never a build tree that happens to still exist.  A wheel's command
 * (-Dwheel=true) lives in the Python package with the library at ../lib, and
 * pip decides where that is: the configured libdir and build tree (meson-python's
 * temporary one) are not looked at.  @return 0 or -1. */
static int find_lib(char *out, size_t len) {
  const char *e = getenv("NCCLTRACE_LIB");
  if (e && *e) {
    if (!is_file(e)) {
      fprintf(stderr, "nccltrace: NCCLTRACE_LIB=%s: no such file\n", e);
      return -1;
    }
    return copy_path(out, len, e);
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char dir[PATH_MAX] = "";
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
      *slash = '\0';
      copy_path(dir, sizeof dir, exe);
    }
  }
  const char *rel = NULL; /* the libdir below the prefix, e.g. "/lib/x86_64-linux-gnu" */
  size_t pl = strlen(NTT_PREFIX);
  if (strncmp(NTT_LIBDIR, NTT_PREFIX, pl) == 0 && NTT_LIBDIR[pl] == '/')
    rel = &NTT_LIBDIR[pl];
  char cand[5][PATH_MAX + 64];
  int nc = 0;
  if (dir[0])
    snprintf(cand[nc++], sizeof cand[0], "%s/../interpose/libnccltrace.so", dir);
  if (dir[0] && rel)
    snprintf(cand[nc++], sizeof cand[0], "%s/..%s/libnccltrace.so", dir, rel);
  if (!NTT_WHEEL)
    snprintf(cand[nc++], sizeof cand[0], "%s/libnccltrace.so", NTT_LIBDIR);
  if (dir[0])
    snprintf(cand[nc++], sizeof cand[0], "%s/../lib/libnccltrace.so", dir);
  if (!NTT_WHEEL)
    snprintf(cand[nc++], sizeof cand[0], "%s/interpose/libnccltrace.so", NTT_BUILD_ROOT);
  for (int i = 0; i < nc; i++) {
    if (is_file(cand[i])) {
      char real[PATH_MAX];
      return copy_path(out, len, realpath(cand[i], real) ? real : cand[i]);
    }
  }
  fprintf(stderr, "nccltrace: cannot find libnccltrace.so (looked in");
  for (int i = 0; i < nc; i++)
    fprintf(stderr, "%s %s", i ? "," : "", cand[i]);
  fprintf(stderr, "%s); set NCCLTRACE_LIB\n", nc ? "" : " nothing: /proc/self/exe is unreadable");
  return -1;
}

/* A free loopback port: bind port 0, read it back, release it.  The
 * coordinator binds it a moment later; a collision makes it fail to start,
 * which is reported and survived like any other unavailability. */
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  int port = -1;
  if (bind(s, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(s, (struct sockaddr *)&a, &al) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

static int can_connect(int port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int ok = connect(s, (struct sockaddr *)&a, sizeof a) == 0;
  close(s);
  return ok;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* A per-run secret shared by the coordinator and the ranks (environment
 * only: readable by this uid, not by other users). */
static void set_secret(void) {
  const char *e = getenv("NCCLTRACE_SECRET");
  if (e && *e)
    return;
  unsigned char b[16] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
  if (fd >= 0)
    close(fd);
  if (got != (ssize_t)sizeof b) {
    /* No secret: the coordinator refuses to start (it needs one) and the
     * run goes on without the cross-rank check, said once. */
    return;
  }
  char hex[33];
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", b[i]);
  setenv("NCCLTRACE_SECRET", hex, 1);
}

/* @return the coordinator's pid (NCCLTRACE_COORD set), or -1 when it could
 * not be started (said on stderr; the run goes on without it). */
static pid_t start_coord(void) {
  if (!ntx_coord_main) {
    fprintf(stderr, "nccltrace: the coordinator is not built into this nccltrace; running without the cross-rank check\n");
    return -1;
  }
  int port = free_port();
  if (port <= 0) {
    fprintf(stderr, "nccltrace: no free loopback port for the coordinator; running without it\n");
    return -1;
  }
  set_secret();
  char listen[64];
  snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "nccltrace: cannot start the coordinator: %s; running without it\n", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    char *args[] = {"coord", "--listen", listen, NULL};
    _exit(ntx_coord_main(3, args));
  }
  for (int i = 0; i < 100; i++) { /* up to 5 s */
    if (can_connect(port)) {
      setenv("NCCLTRACE_COORD", listen, 1);
      return pid;
    }
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      fprintf(stderr, "nccltrace: the coordinator exited at start; running without the cross-rank check\n");
      return -1;
    }
    sleep_ms(50);
  }
  fprintf(stderr, "nccltrace: the coordinator did not listen on %s; running without it\n", listen);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static uint64_t real_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A file-name component: [A-Za-z0-9._-] kept, the rest '_' (as dumps). */
static void component(char *dst, size_t len, const char *src) {
  size_t n = 0;
  for (; src[n] && n + 1 < len; n++) {
    char c = src[n];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
             c == '-' || c == '_';
    dst[n] = ok ? c : '_';
  }
  dst[n] = 0;
}

/* NCCLTRACE_DUMP_MODE as the tracer reads it (interpose/config.c: octal,
 * at most 0777, 0 or unset: 0600); a bad value is the tracer's to report. */
static unsigned dump_mode(void) {
  const char *e = getenv("NCCLTRACE_DUMP_MODE");
  char *end;
  long m = e && *e ? strtol(e, &end, 8) : 0;
  return e && *e && !*end && m > 0 && m <= 0777 ? (unsigned)m : 0600;
}

/* Record how CMD (pid) ended next to the dumps (recorder/format.h).  A
 * failure always gets a file (the directory is made, as the tracer would,
 * with the mode NCCLTRACE_DUMP_MODE gives dump directories); a clean exit
 * only where the directory already exists, so `nccltrace run -- true`
 * leaves nothing behind.  The file has the dumps' mode and is named after
 * the job id CMD's evidence carries (run_job.c), else run's environment's,
 * else "nojob".  Failing to write is one line on stderr, never a change of
 * the exit status. */
static void write_exit_file(pid_t pid, const char *cmd0, int st, uint64_t start_ns) {
  int failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const char *e = getenv("NCCLTRACE_DIR");
  char dir[PATH_MAX + 32], cwd[PATH_MAX];
  if (e && *e)
    snprintf(dir, sizeof dir, "%s", e);
  else
    snprintf(dir, sizeof dir, "%s/nccltrace-dumps", getcwd(cwd, sizeof cwd) ? cwd : ".");
  unsigned mode = dump_mode();
  struct ntr_safedir d;
  int rc = ntr_safedir_open_mode(&d, dir, NTR_SAFEDIR_GROUP_OK | (failed ? NTR_SAFEDIR_CREATE : 0),
                                 ntr_safedir_dump_mode(mode));
  if (rc == -ENOENT && !failed)
    return;
  char host[64] = "", job[64], hc[64], jc[64], name[256], tmp[300], exe[128], rings[4096];
  gethostname(host, sizeof host - 1);
  ntt_default_ring_dir(rings, sizeof rings);
  if (!ntt_run_evidence_job(pid, start_ns, dir, rings, job, sizeof job))
    ntr_env_job(job, sizeof job);
  component(hc, sizeof hc, host);
  component(jc, sizeof jc, job[0] ? job : "nojob");
  const char *base = strrchr(cmd0, '/');
  component(exe, sizeof exe, base ? base + 1 : cmd0);
  /* named as the dumps are (recorder/dump.c): '-' separates the fields */
  struct ntr_sb sb;
  ntr_sb_init(&sb, name, sizeof name);
  ntr_sb_str(&sb, "nccltrace-");
  ntr_sb_component(&sb, job[0] ? job : "nojob", sizeof job);
  ntr_sb_str(&sb, "-");
  ntr_sb_component(&sb, host, sizeof host);
  ntr_sb_str(&sb, "-");
  ntr_sb_i64(&sb, pid);
  ntr_sb_str(&sb, NTR_RUNEXIT_SUFFIX);
  snprintf(tmp, sizeof tmp, ".%s.tmp", name);
  int32_t rank, lr, ws, lws;
  ntr_env_launcher(&rank, &lr, &ws, &lws);
  char body[NTR_RUNEXIT_MAX];
  int n = snprintf(body, sizeof body,
                   "%s\nhost %s\npid %d\nppid %d\nrank %d\njob %s\nexe %s\nstart_ns %llu\nend_ns %llu\n%s %d\n",
                   NTR_RUNEXIT_MAGIC, hc, (int)pid, (int)getpid(), (int)rank, job[0] ? jc : "-", exe,
                   (unsigned long long)start_ns, (unsigned long long)real_ns(),
                   WIFSIGNALED(st) ? "signaled" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  int fd = -1;
  if (rc == 0) {
    fd = openat(d.fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    rc = fd < 0 ? -errno : 0;
  }
  if (rc == 0 && (n < 0 || write(fd, body, (size_t)n) != n))
    rc = -EIO;
  if (fd >= 0 && close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc == 0 && renameat(d.fd, tmp, d.fd, name) != 0)
    rc = -errno;
  if (rc != 0 && fd >= 0)
    unlinkat(d.fd, tmp, 0);
  if (d.fd >= 0)
    close(d.fd);
  if (rc != 0)
    fprintf(stderr, "nccltrace: run: cannot record the exit status of %s in %s: %s\n", exe, dir, strerror(-rc));
}

/* Exit as the child did: its code, or its signal raised on ourselves (a
 * launcher above us tells a signal from an exit code), without a core of
 * our own. */
static int exit_like(int st) {
  if (WIFEXITED(st))
    return WEXITSTATUS(st);
  if (!WIFSIGNALED(st))
    return NTT_EXIT_FAIL;
  int sig = WTERMSIG(st);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
  return 128 + sig; /* a signal that does not kill */
}

/* A relative --dir is made absolute here: the ranks may change directory,
 * and the paths they print ("dump written: ...") must work from anywhere. */
static void set_dir_env(const char *var, const char *dir) {
  char cwd[PATH_MAX], abs[2 * PATH_MAX + 2];
  if (dir[0] != '/' && getcwd(cwd, sizeof cwd)) {
    snprintf(abs, sizeof abs, "%s/%s", cwd, dir);
    setenv(var, abs, 1);
  } else {
    setenv(var, dir, 1);
  }
}

/* The dump directory CMD's processes will use, and where that came from. */
static const char *dump_dir(char *buf, size_t len, const char **from) {
  const char *e = getenv("NCCLTRACE_DIR");
  char cwd[PATH_MAX];
  if (e && *e) {
    *from = "NCCLTRACE_DIR";
    return e;
  }
  *from = "the default";
  snprintf(buf, len, "%s/nccltrace-dumps", getcwd(cwd, sizeof cwd) ? cwd : ".");
  return buf;
}

/* Can the tracer write dumps into dir?  An existing directory is tried with
 * a file made and removed again; a missing one is not made here (a clean
 * exit leaves nothing behind, as without run): the tracer makes it at the
 * first dump as mkdir -p does, so the nearest existing parent is tried
 * with a directory made and removed again.  A directory that is not ours
 * but writable passes: the tracer puts its dumps into a private one next
 * to it instead and says so (recorder/dump.c).  @return 0, or -errno with what[] saying what failed. */
static int dir_usable(const char *dir, char *what, size_t wlen) {
  char probe[64];
  snprintf(probe, sizeof probe, ".nccltrace-probe-%d", (int)getpid());
  struct ntr_safedir d;
  int rc = ntr_safedir_open(&d, dir, NTR_SAFEDIR_GROUP_OK);
  if (rc == -EPERM && faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
    rc = -errno; /* not ours, and not even writable: no private one makes up for that */
    snprintf(what, wlen, "is not writable");
    return rc;
  }
  if (rc == -EPERM || rc == -ELOOP)
    return 0;
  if (rc == 0) {
    int fd = openat(d.fd, probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    rc = fd < 0 ? -errno : 0;
    if (fd >= 0) {
      close(fd);
      unlinkat(d.fd, probe, 0);
    }
    close(d.fd);
    snprintf(what, wlen, "is not writable");
    return rc;
  }
  if (rc != -ENOENT) {
    snprintf(what, wlen, "cannot be opened");
    return rc;
  }
  /* missing: the nearest existing parent must take a new directory */
  char parent[PATH_MAX];
  if (copy_path(parent, sizeof parent, dir)) {
    snprintf(what, wlen, "cannot be opened");
    return -ENAMETOOLONG;
  }
  for (;;) {
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == '\0') { /* trailing slashes */
      *slash = '\0';
      slash = strrchr(parent, '/');
    }
    if (!slash)
      snprintf(parent, sizeof parent, ".");
    else if (slash == parent)
      parent[1] = '\0';
    else
      *slash = '\0';
    struct stat st;
    if (stat(parent, &st) == 0 || errno != ENOENT || !slash || slash == parent)
      break;
  }
  snprintf(what, wlen, "cannot be made in %s", parent);
  rc = ntr_safedir_open(&d, parent, NTR_SAFEDIR_GROUP_OK | NTR_SAFEDIR_SHARED);
  if (rc != 0)
    return rc == -EPERM || rc == -ELOOP ? 0 : rc;
  rc = mkdirat(d.fd, probe, 0700) == 0 ? 0 : -errno;
  if (rc == 0)
    unlinkat(d.fd, probe, AT_REMOVEDIR);
  close(d.fd);
  return rc;
}

int ntt_run_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"dir", required_argument, NULL, 'd'},     {"ring-dir", required_argument, NULL, 'r'},
      {"check", required_argument, NULL, 'c'},   {"timeout", required_argument, NULL, 't'},
      {"coord", no_argument, NULL, 'C'},         {"help", no_argument, NULL, 'h'},
      {0}};
  int coord = 0, dir_opt = 0, c;
  optind = 1;
  /* "+": stop at the first non-option, so CMD's own options stay CMD's. */
  while ((c = getopt_long(argc, argv, "+d:r:c:t:Ch", opts, NULL)) != -1) {
    switch (c) {
    case 'd':
      set_dir_env("NCCLTRACE_DIR", optarg);
      dir_opt = 1;
      break;
    case 'r': set_dir_env("NCCLTRACE_RING_DIR", optarg); break;
    case 'c':
      if (strcmp(optarg, "off") && strcmp(optarg, "async") && strcmp(optarg, "strict")) {
        fprintf(stderr, "nccltrace: run: --check wants off, async or strict, not '%s'\n", optarg);
        return NTT_EXIT_INPUT;
      }
      setenv("NCCLTRACE_CHECK", optarg, 1);
      break;
    case 't': {
      char *end;
      double t = strtod(optarg, &end);
      if (*end || !(t > 0)) {
        fprintf(stderr, "nccltrace: run: --timeout wants seconds > 0, not '%s'\n", optarg);
        return NTT_EXIT_INPUT;
      }
      setenv("NCCLTRACE_TIMEOUT", optarg, 1);
      break;
    }
    case 'C': coord = 1; break;
    case 'h': ntt_usage_cmd(stdout, "run"); return NTT_EXIT_OK;
    default: fputs(run_usage, stderr); return NTT_EXIT_INPUT;
    }
  }
  if (optind >= argc) {
    fputs(run_usage, stderr);
    return NTT_EXIT_INPUT;
  }
  char lib[PATH_MAX + 64];
  if (find_lib(lib, sizeof lib))
    return NTT_EXIT_FAIL;
  const char *old = getenv("LD_PRELOAD");
  size_t plen = strlen(lib) + (old ? strlen(old) : 0) + 2;
  char *preload = malloc(plen);
  if (!preload)
    return NTT_EXIT_FAIL;
  snprintf(preload, plen, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "");
  setenv("LD_PRELOAD", preload, 1);
  free(preload);

  /* What is wrong with the settings is said here, once for the job
   * (interpose/config.c). */
  nti_config_load_as(NTI_CONFIG_RUN);
  /* Before CMD runs: a job whose dumps cannot be written is better not
   * started than found out at its first failure (NCCLTRACE_DISABLE=1
   * writes none). */
  const char *from;
  char dbuf[PATH_MAX + 32], what[PATH_MAX + 64];
  const char *dir = dump_dir(dbuf, sizeof dbuf, &from);
  int drc = nti_cfg.disable ? 0 : dir_usable(dir, what, sizeof what);
  if (drc != 0) {
    fprintf(stderr, "nccltrace: run: the dump directory %s (%s) %s: %s; CMD not started: give --dir "
            "(NCCLTRACE_DIR) a directory you can write\n", dir, dir_opt ? "--dir" : from, what, strerror(-drc));
    return NTT_EXIT_INPUT;
  }

  char **cmd = argv + optind;
  pid_t cpid = coord ? start_coord() : -1;
  /* exec's errno comes back through a close-on-exec pipe: a command that
   * never ran has no exit status to record */
  int ep[2] = {-1, -1};
  if (pipe2(ep, O_CLOEXEC) != 0)
    ep[0] = ep[1] = -1;
  int wrc = ntt_runsig_start();
  if (wrc != 0)
    fprintf(stderr, "nccltrace: run: cannot start the signal witness (%s): signals sent to the whole "
                    "process group may reach CMD twice\n", strerror(-wrc));
  /* Blocked before CMD exists (a signal in between would kill run) and
   * from then on in run: ntt_runsig_wait takes them.  All blocked across
   * the fork, so the forked copy handles none before exec. */
  sigset_t all, old_mask, run_mask;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &old_mask);
  run_mask = old_mask;
  int irc = ntt_runsig_install(&run_mask);
  if (irc != 0)
    fprintf(stderr, "nccltrace: run: no signalfd (%s): signals reach CMD up to 20 ms late\n",
            strerror(-irc));
  /* The settings as CMD gets them (with the coordinator's): the processes
   * under CMD whose settings are still these stay quiet about them. */
  char said[32];
  snprintf(said, sizeof said, "%016" PRIx64, ntr_env_settings_hash());
  setenv(NTI_SETTINGS_SAID, said, 1);
  uint64_t start_ns = real_ns();
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "nccltrace: run: fork: %s\n", strerror(errno));
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    ntt_runsig_stop();
    if (cpid > 0) {
      kill(cpid, SIGTERM);
      waitpid(cpid, NULL, 0);
    }
    return NTT_EXIT_FAIL;
  }
  if (pid == 0) {
    ntt_runsig_child_reset();
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(NTT_EXIT_FAIL); /* we died before the line above took effect */
    if (ep[0] >= 0)
      close(ep[0]);
    execvp(cmd[0], cmd);
    int err = errno;
    fprintf(stderr, "nccltrace: run: %s: %s\n", cmd[0], strerror(err));
    if (ep[1] >= 0 && write(ep[1], &err, sizeof err) < 0)
      err = errno;
    _exit(err == ENOENT ? 127 : 126);
  }
  ntt_runsig_set_child(pid);
  sigprocmask(SIG_SETMASK, &run_mask, NULL);
  int exec_err = 0;
  if (ep[1] >= 0)
    close(ep[1]);
  if (ep[0] >= 0) {
    while (read(ep[0], &exec_err, sizeof exec_err) < 0 && errno == EINTR)
      ;
    close(ep[0]);
  }
  int st = 0;
  ntt_runsig_wait(pid, &st);
  ntt_runsig_stop();
  if (cpid > 0) {
    kill(cpid, SIGTERM);
    for (int i = 0; i < 40 && waitpid(cpid, NULL, WNOHANG) == 0; i++)
      sleep_ms(50);
    if (waitpid(cpid, NULL, WNOHANG) == 0) {
      kill(cpid, SIGKILL);
      waitpid(cpid, NULL, 0);
    }
  }
  if (!exec_err)
    write_exit_file(pid, cmd[0], st, start_ns);
  return exit_like(st);
}
