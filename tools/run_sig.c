/* run_sig.c -- which signals `nccltrace run` passes on to CMD, and job
 * control through it (docs/user-guide.md "nccltrace run", the rule).
 *
 * Thread-safety: run is single-threaded; these functions run on its one
 * thread.  Signal-safety: run has no handler for these signals: they stay
 * blocked in run and are taken from its queue in ntt_runsig_wait, in the
 * order take_pending explains, so nothing here runs in a handler.
 *
 * The rule.  CMD shares run's process group (terminal job control and
 * `timeout` need that), so a signal sent to the whole group -- `kill -SIG
 * -PGID`, `timeout`'s kill(0), a terminal's Ctrl-C -- reaches CMD from the
 * kernel, and run must not pass it on again; a signal sent to run alone
 * must be.  siginfo tells the terminal (si_code > 0) from kill(2), but not
 * a kill(2) of the group from one of run's pid.  The witness does: a
 * process of run's own (forked, never exec'd) in the same group, which
 * nobody addresses by pid, with the forwarded signals blocked and read
 * from a signalfd.  It gets every group-wide send and nothing sent to run
 * alone.  Linux signals a group's members newest first
 * (__kill_pgrp_info walks the group's list, attach_pid adds at its head),
 * and the witness joined after run: by the time run handles a group-wide
 * signal, the witness has it queued.  So for each signal, run asks the
 * witness "did you get this one too?" (one byte each way on two pipes);
 * the witness claims one of its unclaimed deliveries of that signal and
 * answers yes, or answers no.  A delivery nobody claims within
 * WITNESS_STALE_NS is forgotten: run got two group-wide sends merged into
 * one, and the leftover must not swallow a later send to run alone.
 * Without a witness (it could not start, or stopped answering: said once),
 * run passes on every kill(2)-sent signal, as before.
 *
 * Job control: CMD stopping (SIGTSTP, SIGTTIN, SIGTTOU, SIGSTOP from any
 * sender, or one run passed on) makes run stop itself with the same
 * signal, so the shell sees the job stop; SIGCONT to run continues run and
 * is passed on by the same rule.  SIGSTOP cannot be caught: sent to run
 * alone, it stops run and leaves CMD running; the SIGCONT that resumes run
 * is passed on to CMD (harmless to a running CMD).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tools/run_sig.h"

#define WITNESS_STALE_NS 2000000000ull /* a delivery run never asked about */
#define WITNESS_REPLY_MS 1000          /* run's wait for an answer */
#define NOFD_POLL_MS 20                /* without a signalfd: how often run looks */

static const int fwd_sigs[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1,
                               SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
#define NFWD (sizeof fwd_sigs / sizeof fwd_sigs[0])

static pid_t child_pid;
static pid_t witness_pid = -1;
static int ask_fd = -1, reply_fd = -1; /* run's ends; -1: no witness */
static int witness_gone_said;
static int sig_fd = -1; /* readable while one of run's signals is pending */

static void fwd_set(sigset_t *s) {
  sigemptyset(s);
  for (size_t i = 0; i < NFWD; i++)
    sigaddset(s, fwd_sigs[i]);
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The witness: counts the group-wide deliveries, answers run's questions.
 * Never returns. */
static void witness_main(int ask, int reply, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    _exit(0);
  /* Holds no fd of the job's: a reader of run's stdout sees EOF when run
   * and CMD are done, whatever the witness does. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd = 0; fd < 3; fd++)
    if (null >= 0)
      dup2(null, fd);
  for (int fd = 3; fd < 1024; fd++)
    if (fd != ask && fd != reply)
      close(fd);
  sigset_t set;
  fwd_set(&set);
  int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0)
    _exit(1);
  unsigned count[NSIG] = {0};
  uint64_t last[NSIG] = {0};
  for (;;) {
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = ask, .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      _exit(1);
    }
    /* Every delivery queued so far is counted before any answer. */
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (si.ssi_signo < NSIG) {
        count[si.ssi_signo]++;
        last[si.ssi_signo] = mono_ns();
      }
    }
    if (!(p[1].revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    unsigned char q;
    ssize_t n = read(ask, &q, 1);
    if (n == 0)
      _exit(0); /* run is gone */
    if (n < 0)
      continue;
    unsigned char a = 0;
    if (q < NSIG && count[q] > 0) {
      if (mono_ns() - last[q] > WITNESS_STALE_NS) {
        count[q] = 0;
      } else {
        count[q]--;
        a = 1;
      }
    }
    if (write(reply, &a, 1) < 0)
      _exit(1);
  }
}

int ntt_runsig_start(void) {
  int a[2], r[2];
  if (pipe2(a, O_CLOEXEC) != 0)
    return -errno;
  if (pipe2(r, O_CLOEXEC) != 0) {
    int e = errno;
    close(a[0]);
    close(a[1]);
    return -e;
  }
  /* Blocked from birth: a signal that comes before its signalfd must stay
   * pending, not kill or stop it. */
  sigset_t set, old;
  fwd_set(&set);
  sigprocmask(SIG_BLOCK, &set, &old);
  pid_t parent = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(a[1]);
    close(r[0]);
    witness_main(a[0], r[1], parent);
  }
  int e = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(a[0]);
  close(r[1]);
  if (pid < 0) {
    close(a[1]);
    close(r[0]);
    return -e;
  }
  witness_pid = pid;
  ask_fd = a[1];
  reply_fd = r[0];
  return 0;
}

/* @return 1 when the witness got sig too (a group-wide send), 0 when not,
 * -1 without a witness.  sig 0 only makes the witness take in every
 * delivery queued to it so far. */
static int witness_saw(int sig) {
  if (ask_fd < 0)
    return -1;
  unsigned char q = (unsigned char)sig, a = 0;
  int ok = write(ask_fd, &q, 1) == 1;
  if (ok) {
    struct pollfd p = {.fd = reply_fd, .events = POLLIN};
    int n;
    while ((n = poll(&p, 1, WITNESS_REPLY_MS)) < 0 && errno == EINTR)
      ;
    ok = n == 1 && read(reply_fd, &a, 1) == 1;
  }
  if (!ok) {
    ask_fd = -1;
    if (!witness_gone_said) {
      witness_gone_said = 1;
      fprintf(stderr, "nccltrace: run: the signal witness stopped answering; signals sent to the "
                      "whole process group may now reach CMD twice\n");
    }
    return -1;
  }
  return a;
}

/* One delivery of sig to run, already taken from its queue: passed on to
 * CMD unless the same send reached CMD from the kernel. */
static void pass_on(int sig, const siginfo_t *info) {
  int group = witness_saw(sig); /* asked first: each delivery is claimed once */
  pid_t c = (pid_t)child_pid;
  if (c <= 0)
    return;
  int reached;
  if (getpgid(c) != getpgrp())
    reached = 0; /* CMD left our group: nothing sent to it reaches CMD */
  else if (info->si_code > 0)
    reached = 1; /* the kernel's: a terminal signals the whole group */
  else
    reached = group > 0;
  if (!reached)
    kill(c, sig);
}

/* Every signal pending for run, each passed on or not.  The order is the
 * point: the set pending is read first, then the witness takes in its
 * queue, then only signals of that set are taken from run's.  A group-wide
 * send reaches the witness before run, so each delivery run takes is
 * already counted by the witness, and a later send the witness gets merges
 * with nothing of its own that run has not taken too: the witness never
 * holds fewer deliveries of a group-wide send than run takes (taking first
 * and asking after let a send land between, merged at the witness alone:
 * CMD got it twice). */
static void take_pending(void) {
  sigset_t pend, fwd;
  if (sigpending(&pend) != 0)
    return;
  fwd_set(&fwd);
  int any = 0;
  for (size_t i = 0; i < NFWD; i++)
    any |= sigismember(&pend, fwd_sigs[i]) == 1;
  if (!any)
    return;
  witness_saw(0);
  for (size_t i = 0; i < NFWD; i++) {
    int sig = fwd_sigs[i];
    if (sigismember(&pend, sig) != 1)
      continue;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    siginfo_t info;
    const struct timespec zero = {0, 0};
    if (sigtimedwait(&one, &info, &zero) == sig)
      pass_on(sig, &info);
  }
}

int ntt_runsig_install(sigset_t *mask) {
  sigset_t set;
  fwd_set(&set);
  sigaddset(&set, SIGCHLD); /* only to wake the wait: CMD stopped or ended */
  for (int s = 1; s < NSIG; s++)
    if (sigismember(&set, s) == 1)
      sigaddset(mask, s);
  /* A blocked SIGCHLD left at SIG_DFL is still queued (the kernel ignores
   * no blocked signal), so the signalfd sees it. */
  sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  return sig_fd < 0 ? -errno : 0;
}

void ntt_runsig_child_reset(void) {
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigemptyset(&dfl.sa_mask);
  for (size_t i = 0; i < NFWD; i++)
    sigaction(fwd_sigs[i], &dfl, NULL);
}

void ntt_runsig_set_child(pid_t pid) {
  child_pid = pid;
}

/* CMD stopped with sig: stop run the same way, so whoever waits for run
 * (a shell's job control) sees it; returns once run is continued. */
static void stop_self(int sig) {
  if (sig != SIGTSTP && sig != SIGTTIN && sig != SIGTTOU) {
    raise(SIGSTOP);
    return;
  }
  struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, &old);
  sigset_t one, prev;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, &prev);
  /* The default action of a stop signal stops run here (the kernel drops
   * it in an orphaned process group, as it would have for CMD). */
  raise(sig);
  sigprocmask(SIG_SETMASK, &prev, NULL);
  sigaction(sig, &old, NULL);
}

int ntt_runsig_wait(pid_t pid, int *st) {
  for (;;) {
    take_pending();
    pid_t r = waitpid(pid, st, WUNTRACED | WNOHANG);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    if (r == pid) {
      if (!WIFSTOPPED(*st))
        return 0;
      stop_self(WSTOPSIG(*st));
      continue;
    }
    /* Readable means pending: nothing is taken here (take_pending does,
     * in its order); SIGCHLD is taken and dropped, the waitpid above
     * reads what it said. */
    struct pollfd p = {.fd = sig_fd, .events = POLLIN};
    if (poll(&p, sig_fd >= 0 ? 1 : 0, sig_fd >= 0 ? -1 : NOFD_POLL_MS) < 0 && errno != EINTR)
      return -errno;
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    const struct timespec zero = {0, 0};
    while (sigtimedwait(&chld, NULL, &zero) == SIGCHLD)
      ;
  }
}

void ntt_runsig_stop(void) {
  child_pid = 0;
  if (witness_pid <= 0)
    return;
  int a = ask_fd;
  ask_fd = -1;
  if (a >= 0)
    close(a); /* EOF: the witness exits */
  if (reply_fd >= 0)
    close(reply_fd);
  reply_fd = -1;
  if (sig_fd >= 0)
    close(sig_fd);
  sig_fd = -1;
  kill(witness_pid, SIGKILL);
  while (waitpid(witness_pid, NULL, 0) < 0 && errno == EINTR)
    ;
  witness_pid = -1;
}
