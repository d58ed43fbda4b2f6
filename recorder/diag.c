/* diag.c -- the tracer's own lines: to the stderr the process started
 * with, without blocking or raising a signal, or to a route of its own
 * (contract: diag.h). */
#include "recorder/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { FD2_UNKNOWN, FD2_RECORDED, FD2_NONE };

/* Written by ntr_diag_init (at load, one thread), read by any writer. */
static struct {
  int state;
  uint64_t dev, ino;
} fd2;
static ntr_diag_route_fn route; /* atomic */

void ntr_diag_init(void) {
  struct stat st;
  if (fstat(2, &st) != 0) {
    fd2.state = FD2_NONE; /* closed at load: no later fd 2 is that stderr */
    return;
  }
  fd2.dev = (uint64_t)st.st_dev;
  fd2.ino = (uint64_t)st.st_ino;
  fd2.state = FD2_RECORDED;
}

void ntr_diag_set_route(ntr_diag_route_fn fn) {
  /* Release pairs with the acquire in ntr_diag_write. */
  __atomic_store_n(&route, fn, __ATOMIC_RELEASE);
}

static int same_file(const struct stat *st) {
  return (uint64_t)st->st_dev == fd2.dev && (uint64_t)st->st_ino == fd2.ino;
}

int ntr_diag_fd2_ours(void) {
  if (fd2.state == FD2_UNKNOWN)
    return 1;
  struct stat st;
  return fd2.state == FD2_RECORDED && fstat(2, &st) == 0 && same_file(&st);
}

/* ------------------------------------------------- signals held off -- */

/* SIGPIPE and SIGXFSZ (the write's own signals, whose default kills) and
 * SIGTTOU (a background job's write to a TOSTOP terminal, whose default
 * stops: blocked, the kernel lets the write through) are blocked in this
 * thread only; pthread_sigmask and sigpending are async-signal-safe. */
struct quiet {
  sigset_t old;
  int pipe_was, xfsz_was; /* pending before: someone else's, left alone */
};

static void quiet_begin(struct quiet *q) {
  sigset_t set, pend;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigaddset(&set, SIGXFSZ);
  sigaddset(&set, SIGTTOU);
  pthread_sigmask(SIG_BLOCK, &set, &q->old);
  sigemptyset(&pend);
  sigpending(&pend);
  q->pipe_was = sigismember(&pend, SIGPIPE) == 1;
  q->xfsz_was = sigismember(&pend, SIGXFSZ) == 1;
}

static void quiet_end(struct quiet *q) {
  /* A signal our write raised is pending now (the kernel directs both at
   * the writing thread): taken with a zero timeout before the old mask
   * could deliver it. */
  struct timespec zero = {0, 0};
  sigset_t one;
  if (!q->pipe_was) {
    sigemptyset(&one);
    sigaddset(&one, SIGPIPE);
    while (sigtimedwait(&one, NULL, &zero) == SIGPIPE) {
    }
  }
  if (!q->xfsz_was) {
    sigemptyset(&one);
    sigaddset(&one, SIGXFSZ);
    while (sigtimedwait(&one, NULL, &zero) == SIGXFSZ) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &q->old, NULL);
}

/* ------------------------------------------------------------ writes -- */

/* A pipe, FIFO or terminal through a description of its own, opened
 * O_NONBLOCK: full means EAGAIN, and the application's fd 2 keeps its
 * flags.  @return bytes written, or -1 (-2: cannot open one, try poll). */
static ssize_t write_own_description(const struct stat *st, const char *line, size_t len) {
  int fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENXIO ? -1 : -2; /* ENXIO: a FIFO nobody reads any more */
  struct stat now;
  ssize_t n = -1;
  /* the same file as fd 2 (it could have been replaced in between) */
  if (fstat(fd, &now) == 0 && now.st_dev == st->st_dev && now.st_ino == st->st_ino)
    n = write(fd, line, len);
  close(fd);
  return n;
}

static ssize_t write_fd2(const char *line, size_t len) {
  struct stat st;
  if (fstat(2, &st) != 0)
    return -1;
  struct quiet q;
  quiet_begin(&q);
  ssize_t n;
  if (S_ISSOCK(st.st_mode)) {
    n = send(2, line, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
    n = write(2, line, len); /* never waits for a reader; RLIMIT_FSIZE: EFBIG */
  } else {
    /* FIFO, terminal, other character devices: only a terminal or a FIFO
     * is opened again (opening some devices does something) */
    n = -2;
    if (S_ISFIFO(st.st_mode) || isatty(2))
      n = write_own_description(&st, line, len);
    if (n == -2) {
      struct pollfd p = {.fd = 2, .events = POLLOUT, .revents = 0};
      n = -1;
      if (poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) == POLLOUT)
        n = write(2, line, len);
    }
  }
  quiet_end(&q);
  return n;
}

int ntr_diag_write(const char *line, size_t len) {
  int saved = errno; /* callable from a handler: errno is the interrupted code's */
  int rc = -1;
  if (ntr_diag_fd2_ours()) {
    rc = write_fd2(line, len) == (ssize_t)len ? 1 : -1;
  } else {
    ntr_diag_route_fn fn = __atomic_load_n(&route, __ATOMIC_ACQUIRE);
    if (fn) {
      fn(line, len);
      rc = 0;
    }
  }
  errno = saved;
  return rc;
}

int ntr_diag_write_file(int fd, const char *line, size_t len) {
  struct quiet q;
  quiet_begin(&q);
  ssize_t n = write(fd, line, len);
  int e = errno;
  quiet_end(&q);
  if (n == (ssize_t)len)
    return 0;
  return n < 0 ? -e : -EIO;
}

void ntr_diag_vsay(const char *prefix, const char *fmt, va_list ap) {
  char buf[NTR_DIAG_LINE_MAX];
  int saved = errno;
  int n = snprintf(buf, sizeof buf, "%s", prefix ? prefix : "");
  if (n < 0 || n > (int)sizeof buf - 2)
    n = 0;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  if (m < 0)
    m = 0;
  n += m;
  if (n > (int)sizeof buf - 2)
    n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  ntr_diag_write(buf, (size_t)n);
  errno = saved;
}

void ntr_diag_say(const char *prefix, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ntr_diag_vsay(prefix, fmt, ap);
  va_end(ap);
}
