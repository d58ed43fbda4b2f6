/* ring_budget.c -- the rings' budget in a ring directory (ring_budget.h).
 *
 * Thread-safety and signal-safety: see ring_budget.h.
 */
#include "recorder/ring_budget.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recorder/format.h"

struct ntr_dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

static int is_ring_name(const char *n) {
  size_t l = strlen(n);
  return strncmp(n, "nccltrace-", 10) == 0 && l > 15 && strcmp(n + l - 5, ".ring") == 0;
}

/* 1 when the ring file names a process of this host that no longer exists.
 * Unreadable, foreign or another host's: not dead (we cannot tell). */
static int ring_is_dead(int dirfd, const char *name, const char *host) {
  enum { ID_END = offsetof(struct ntr_ring_header, job_id) };
  char buf[ID_END];
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return 0;
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  close(fd);
  if (n != (ssize_t)sizeof buf || memcmp(buf, NTR_RING_MAGIC, 8) != 0)
    return 0;
  char h[64];
  int32_t pid;
  memcpy(h, buf + offsetof(struct ntr_ring_header, host), sizeof h);
  h[sizeof h - 1] = '\0';
  memcpy(&pid, buf + offsetof(struct ntr_ring_header, pid), sizeof pid);
  if (pid <= 0 || strcmp(h, host) != 0)
    return 0;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int ntr_ring_budget_scan(int dirfd, const char *host, struct ntr_ring_budget *b) {
  memset(b, 0, sizeof *b);
  b->room = UINT64_MAX;
  struct statvfs vs;
  if (fstatvfs(dirfd, &vs) != 0)
    return -errno;
  if (!vs.f_blocks || !vs.f_frsize)
    return 0; /* a file system that says nothing of its size: no budget */
  b->total = (uint64_t)vs.f_blocks * vs.f_frsize;
  b->budget = b->total / NTR_RING_BUDGET_DIV;
  b->reserve = b->total / NTR_RING_RESERVE_DIV;
  if (b->reserve > NTR_RING_RESERVE_MAX)
    b->reserve = NTR_RING_RESERVE_MAX;
  uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
  if (lseek(dirfd, 0, SEEK_SET) != 0)
    return -errno;
  /* Aligned for the 8-byte fields of the records the kernel writes. */
  uint64_t words[512];
  char *buf = (char *)words;
  for (;;) {
    long n = syscall(SYS_getdents64, dirfd, buf, sizeof words);
    if (n < 0)
      return -errno;
    if (n == 0)
      break;
    for (long off = 0; off < n;) {
      const struct ntr_dirent64 *e = (const struct ntr_dirent64 *)(buf + off);
      off += e->reclen;
      if (!is_ring_name(e->name))
        continue;
      struct stat st;
      if (fstatat(dirfd, e->name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
        continue;
      uint64_t bytes = (uint64_t)st.st_blocks * 512u;
      b->rings++;
      b->used += bytes;
      if (ring_is_dead(dirfd, e->name, host)) {
        b->dead++;
        b->dead_bytes += bytes;
      }
    }
  }
  uint64_t left = b->budget > b->used ? b->budget - b->used : 0;
  uint64_t free_room = avail > b->reserve ? avail - b->reserve : 0;
  b->room = left < free_room ? left : free_room;
  return 0;
}

int ntr_ring_budget_lock(int dirfd) {
  /* A holder keeps it for one scan and one posix_fallocate: milliseconds. */
  for (int i = 0; i < 1000; i++) {
    if (flock(dirfd, LOCK_EX | LOCK_NB) == 0)
      return 1;
    if (errno != EWOULDBLOCK && errno != EINTR)
      return 0;
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

void ntr_ring_budget_unlock(int dirfd) { flock(dirfd, LOCK_UN); }
