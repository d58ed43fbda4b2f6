/* strict_board.c -- a communicator's board file (contract: strict_board.h).
 *
 * Why a file in the ring directory and these steps: the ranks share nothing
 * but the path (job and comm id), so the first to come creates it, under a
 * temporary name, filled, then link()ed into place (nobody maps half a
 * header); what is already there may be a live job's board, a dead job's, or
 * anything else, and only a board no live process uses may be replaced.
 * Attaches of several processes are ordered by flock of the file: one that
 * held the old file when it was replaced sees the path changed and starts
 * over on the new one.
 */
#include "interpose/exchange/strict_board.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "recorder/util.h"

#define ATTACH_TRIES 8     /* open / judge / replace rounds before giving up */
#define LOCK_TRIES 200     /* x 1 ms: the attach lock of a board file */

/* A slot's owner is known dead: only a pid of our pid namespace is asked.
 * A killed process its parent has not reaped yet is a zombie, which
 * kill(pid, 0) still finds: /proc says so. */
int ntx_board_owner_dead(const struct ntx_board_slot *s, uint64_t pidns) {
  int32_t pid = __atomic_load_n(&s->owner, __ATOMIC_RELAXED);
  if (pid <= 1 || !pidns || __atomic_load_n(&s->pidns, __ATOMIC_RELAXED) != pidns)
    return 0;
  if (kill(pid, 0) < 0)
    return errno == ESRCH;
  char path[64], b[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT;
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n <= 0)
    return 0;
  b[n] = '\0';
  const char *p = strrchr(b, ')'); /* "pid (comm) S ...": comm may hold anything but the last ')' */
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

size_t ntx_board_size(uint32_t nranks) { return sizeof(struct ntx_board_hdr) + (size_t)nranks * sizeof(struct ntx_board_slot); }

/* The file's blocks, reserved (posix_fallocate, as the ring's are:
 * recorder/ring_place.c): on a full file system the attach fails here, where
 * the coordinator can take over, never as a SIGBUS on a later store into
 * the mapping.  @return 0, or -1 with *why. */
static int reserve(int fd, size_t size, const char **why) {
  struct ntr_xfsz xfsz;
  ntr_xfsz_block(&xfsz); /* past RLIMIT_FSIZE: EFBIG, not death by SIGXFSZ */
  int e;
  do
    e = posix_fallocate(fd, 0, (off_t)size);
  while (e == EINTR);
  ntr_xfsz_restore(&xfsz);
  if (!e)
    return 0;
  *why = e == ENOSPC || e == EDQUOT || e == EFBIG ? "no room for it there (the file system is full)" : strerror(e);
  return -1;
}

/* A fresh board in a new file next to path (0600, never an existing one),
 * reserved, its header written with pwrite, not through a mapping.
 * @return its fd with *tmp its name, or -1 with *why set (the temporary
 * file is gone then). */
static int make_board(const struct ntx_board *b, uint64_t job_hash, char *tmp, size_t tmplen, const char **why) {
  snprintf(tmp, tmplen, "%s.%d.%ld.tmp", b->path, (int)getpid(), (long)syscall(SYS_gettid));
  int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = strerror(errno);
    return -1;
  }
  if (reserve(fd, ntx_board_size((uint32_t)b->nranks), why) != 0) {
    close(fd);
    unlink(tmp);
    return -1;
  }
  struct ntx_board_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = NTX_BOARD_MAGIC;
  h.version = NTX_BOARD_VERSION;
  h.nranks = (uint32_t)b->nranks;
  h.comm_id = b->comm_id;
  h.job_hash = job_hash;
  h.hdr_size = sizeof(struct ntx_board_hdr);
  h.slot_size = sizeof(struct ntx_board_slot);
  /* One write of the whole header, before the file is linked where others
   * look: nobody sees the magic without the rest. */
  if (pwrite(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
    *why = strerror(errno ? errno : EIO);
    close(fd);
    unlink(tmp);
    return -1;
  }
  return fd;
}

enum { J_USE, J_REPLACE, J_PASS };

/* Is the board file fd (size bytes, attach lock held) one we may use? */
static int judge(int fd, size_t size, const struct ntx_board *b, uint64_t job_hash, uint64_t pidns) {
  if (size < sizeof(struct ntx_board_hdr) || size > ntx_board_size(NTX_BOARD_MAX_RANKS))
    return J_REPLACE;
  /* Read, not mapped: a file cut while we look gives a short read, never a
   * SIGBUS. */
  struct ntx_board_hdr *h = malloc(size);
  if (!h)
    return J_PASS;
  if (pread(fd, h, size, 0) != (ssize_t)size) {
    free(h);
    return J_PASS;
  }
  const struct ntx_board_slot *s = (const struct ntx_board_slot *)(h + 1);
  int rv = J_REPLACE;
  uint32_t n = h->nranks;
  if (h->magic != NTX_BOARD_MAGIC || h->version != NTX_BOARD_VERSION || h->hdr_size != sizeof(struct ntx_board_hdr) ||
      h->slot_size != sizeof(struct ntx_board_slot) || n == 0 || n > NTX_BOARD_MAX_RANKS || size != ntx_board_size(n))
    goto out; /* not a board (garbage, or another version): nobody can be using it */
  int compatible = n == (uint32_t)b->nranks && h->comm_id == b->comm_id && h->job_hash == job_hash;
  int live = 0, used = 0;
  for (uint32_t r = 0; r < n; r++) {
    uint32_t st = s[r].state;
    used |= st != NTX_SL_FREE;
    if (st == NTX_SL_ACTIVE && !ntx_board_owner_dead(&s[r], pidns)) {
      live = 1;
      if (compatible && (int32_t)r == b->rank && s[r].owner != (int32_t)getpid())
        rv = J_PASS; /* our rank is held by a live process: another job of the same name */
    }
  }
  if (rv == J_PASS)
    goto out;
  if (live)
    rv = compatible ? J_USE : J_PASS; /* in use by live ranks: never pulled from under them */
  else
    rv = compatible && !used ? J_USE : J_REPLACE; /* left over by a job that is gone */
out:
  free(h);
  return rv;
}

static int lock_file(int fd) {
  for (int i = 0; i < LOCK_TRIES; i++) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
      return 0;
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
  return -1;
}

/* Open, create or replace the board of b->path, claim our slot.
 * @return 0 (b->h, b->s set) or -1 (use the coordinator). */
static int attach(struct ntx_board *b, uint64_t job_hash, uint64_t pidns, const char **why) {
  char tmp[1300];
  for (int tries = 0; tries < ATTACH_TRIES; tries++) {
    int fd = open(b->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
      if (errno != ENOENT) {
        *why = strerror(errno);
        return -1;
      }
      int t = make_board(b, job_hash, tmp, sizeof tmp, why);
      if (t < 0)
        return -1;
      if (link(tmp, b->path) != 0 && errno != EEXIST) {
        *why = strerror(errno);
        unlink(tmp);
        close(t);
        return -1;
      }
      unlink(tmp);
      close(t);
      continue; /* ours or another rank's: open whatever is there now */
    }
    struct stat a, p;
    int lk = lock_file(fd);
    if (lk < 0 || fstat(fd, &a) != 0 || lstat(b->path, &p) != 0) {
      *why = lk < 0 ? "its lock stayed taken" : "it went while we looked";
      close(fd);
      return -1;
    }
    if (a.st_dev != p.st_dev || a.st_ino != p.st_ino) {
      close(fd); /* replaced while we waited for its lock: take the new one */
      continue;
    }
    int j = S_ISREG(a.st_mode) && a.st_uid == geteuid() ? judge(fd, (size_t)a.st_size, b, job_hash, pidns) : J_REPLACE;
    if (j == J_PASS) {
      close(fd);
      *why = "in use by another job of that name";
      return -1;
    }
    if (j == J_REPLACE) { /* under the old file's lock: attachers of the old file retry on the new one */
      const char *mwhy = NULL;
      int t = make_board(b, job_hash, tmp, sizeof tmp, &mwhy);
      int ok = t >= 0 && rename(tmp, b->path) == 0;
      if (t >= 0) {
        if (!ok)
          unlink(tmp);
        close(t);
      }
      close(fd);
      if (!ok) {
        *why = mwhy ? mwhy : "cannot replace the file there";
        return -1;
      }
      continue;
    }
    size_t size = ntx_board_size((uint32_t)b->nranks);
    /* Reserved again before it is mapped: a no-op for a board made here,
     * the blocks of one that has holes (made by anything else). */
    void *m = reserve(fd, size, why) == 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (m == MAP_FAILED)
      *why = strerror(errno);
    if (!m || m == MAP_FAILED) {
      flock(fd, LOCK_UN);
      close(fd);
      return -1;
    }
    b->h = m;
    b->s = (struct ntx_board_slot *)(b->h + 1);
    b->dev = a.st_dev;
    b->ino = a.st_ino;
    struct ntx_board_slot *me = &b->s[b->rank];
    /* Claim: old publications cleared before the state says ACTIVE, so a
     * reader never takes them for ours. */
    __atomic_store_n(&me->e[0].seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&me->e[1].seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&me->seq, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&me->pidns, pidns, __ATOMIC_RELAXED);
    __atomic_store_n(&me->owner, (int32_t)getpid(), __ATOMIC_RELAXED);
    __atomic_store_n(&me->state, NTX_SL_ACTIVE, __ATOMIC_RELEASE);
    /* Unlock by hand: the mapping holds the open file, so close alone
     * would keep the lock as long as we live. */
    flock(fd, LOCK_UN);
    close(fd);
    return 0;
  }
  *why = "replaced again and again";
  return -1;
}

/* The ring directory, as the recorder made it (recorder/ring.c): ours, a
 * directory, not a link, not writable by others. */
static int dir_ok(const char *dir) {
  struct stat st;
  return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 022);
}

int ntx_board_attach(struct ntx_board *b, uint64_t job_hash, uint64_t pidns, const char **why) {
  if (!dir_ok(b->dir)) {
    *why = "the ring directory is not ours alone";
    return -1;
  }
  return attach(b, job_hash, pidns, why);
}
