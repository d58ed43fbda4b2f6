/* own.c -- descriptors checked by identity, a wake-up without a pipe,
 * bounded joins, the descriptor budget (contract: own.h). */
#include "interpose/exchange/own.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int ntx_fd_take(int fd, struct ntx_fdid *id) {
  struct stat st;
  id->dev = id->ino = 0;
  if (fd < 0 || fstat(fd, &st) != 0)
    return -1;
  id->dev = (uint64_t)st.st_dev;
  id->ino = (uint64_t)st.st_ino;
  return 0;
}

int ntx_fd_is(int fd, const struct ntx_fdid *id) {
  struct stat st;
  if (fd < 0 || (!id->dev && !id->ino) || fstat(fd, &st) != 0)
    return 0;
  return (uint64_t)st.st_dev == id->dev && (uint64_t)st.st_ino == id->ino;
}

int ntx_fd_close(int fd, struct ntx_fdid *id) {
  int ours = ntx_fd_is(fd, id);
  if (ours)
    close(fd);
  id->dev = id->ino = 0;
  return ours;
}

int ntx_wake_open(struct ntx_wake *k) {
  int sv[2];
  memset(k, 0, sizeof *k);
  k->r = k->w = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
    return -errno;
  k->r = sv[0];
  k->w = sv[1];
  if (ntx_fd_take(k->r, &k->rid) != 0 || ntx_fd_take(k->w, &k->wid) != 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    k->r = k->w = -1;
    return -e;
  }
  return 0;
}

int ntx_wake_poke(struct ntx_wake *k) {
  if (!ntx_fd_is(k->w, &k->wid))
    return -1;
  int saved = errno; /* callable from a handler: errno is the interrupted code's */
  ssize_t n = send(k->w, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)n; /* EAGAIN: a wake-up is queued already */
  errno = saved;
  return 0;
}

int ntx_wake_drain(struct ntx_wake *k) {
  if (!ntx_fd_is(k->r, &k->rid))
    return -1;
  char b[64];
  while (recv(k->r, b, sizeof b, MSG_DONTWAIT) > 0)
    ;
  return 0;
}

int ntx_wake_ok(const struct ntx_wake *k) { return ntx_fd_is(k->r, &k->rid) && ntx_fd_is(k->w, &k->wid); }

void ntx_wake_close(struct ntx_wake *k) {
  ntx_fd_close(k->r, &k->rid);
  ntx_fd_close(k->w, &k->wid);
  k->r = k->w = -1;
}

int ntx_ep_is(int ep, const struct ntx_fdid *epid, int member, uint32_t events, uint64_t data) {
  if (!ntx_fd_is(ep, epid))
    return 0; /* closed, or now a file, socket, pipe ... */
  /* Another epoll instance at that number has no entry for our member:
   * ENOENT, and nothing of it changes. */
  struct epoll_event ev = {.events = events, .data.u64 = data};
  return epoll_ctl(ep, EPOLL_CTL_MOD, member, &ev) == 0;
}

int ntx_join_within(pthread_t t, double s) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); /* pthread_timedjoin_np's clock */
  double end = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + s;
  ts.tv_sec = (time_t)end;
  ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
  int rc;
  while ((rc = pthread_timedjoin_np(t, NULL, &ts)) == EINTR)
    ;
  return rc == 0 ? 0 : -1;
}

long ntx_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20) ? 1L << 20 : (long)rl.rlim_cur;
}

long ntx_fd_reserve(void) {
  long r = ntx_fd_limit() / 8;
  return r < 4 ? 4 : r > 64 ? 64 : r;
}

const char *ntx_fd_why(int err, char *buf, size_t len) {
  if (err == EMFILE)
    snprintf(buf, len, "too many open files: RLIMIT_NOFILE=%ld reached (ulimit -n)", ntx_fd_limit());
  else
    snprintf(buf, len, "%s", strerror(err));
  return buf;
}

long ntx_fd_headroom(void) {
  long lim = ntx_fd_limit();
  if (!lim)
    return 0;
  int d = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d < 0)
    return errno == EMFILE || errno == ENFILE ? 0 : lim / 2; /* no /proc: assume half is free */
  long used = 0;
  char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, d, buf, sizeof buf);
    if (n <= 0)
      break;
    for (long off = 0; off < n;) {
      unsigned short reclen;
      memcpy(&reclen, buf + off + 16, sizeof reclen); /* struct linux_dirent64: d_ino, d_off, d_reclen */
      const char *name = buf + off + 19;
      if (name[0] != '.')
        used++;
      off += reclen;
    }
  }
  close(d);
  used--; /* the directory's own descriptor */
  return lim > used ? lim - used : 0;
}
