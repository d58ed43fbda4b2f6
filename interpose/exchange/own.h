/* own.h -- what the exchange owns inside the application's process, and
 * how it makes sure it still owns it (docs/reliability.md, items 2, 3, 5).
 *
 * An application may close every descriptor after init (daemons, sandboxes,
 * launchers that close 3..1023) and open its own files, which then get the
 * numbers our sockets had.  The rule: the tracer never writes to, polls or
 * closes a descriptor it does not still own.  So
 *   - every descriptor the exchange keeps is recorded with its identity
 *     (fstat st_dev + st_ino: sockets have inodes of their own in sockfs)
 *     when it is made, and checked before each use (ntx_fd_is);
 *   - it is closed only while the check holds (ntx_fd_close); a descriptor
 *     that is not ours any more is forgotten, never closed;
 *   - wake-ups go through a socket pair (ntx_wake), written with send(2):
 *     send on a file fails (ENOTSOCK) instead of writing into it, and the
 *     identity check comes first;
 *   - an epoll instance has no inode of its own (anon inodes share one), so
 *     it is checked by a member: EPOLL_CTL_MOD of our wake socket succeeds
 *     only on the instance it was added to (ntx_ep_is).
 * The check and the use are two system calls: an application that closes
 * and reopens a descriptor between them on another thread is not caught.
 * send/recv on a non-socket still fail, so no file is ever written.
 *
 * Joins that never hang: ntx_join_within waits a bounded time for a thread;
 * a thread stuck past it is left (exit must never wait on a tracer thread).
 *
 * The budget of descriptors (ntx_fd_headroom): how many more this process
 * may open before RLIMIT_NOFILE, so that servers accept only while the
 * application keeps a reserve (ntx_fd_reserve, sized to the limit: a fixed
 * 64 would leave a process under `ulimit -n 64` no room to accept anyone).
 *
 * Thread-safety: no shared state; every function works on caller memory.
 * Signal-safety: ntx_fd_is and ntx_wake_poke are async-signal-safe (fstat,
 * send); the others are not meant for handlers.
 */
#ifndef NTX_OWN_H
#define NTX_OWN_H
#include <pthread.h>
#include <stdint.h>

struct ntx_fdid {
  uint64_t dev, ino; /* 0, 0: nothing recorded */
};

/* Record what fd is now.  @return 0, or -1 (fd < 0 or fstat failed). */
int ntx_fd_take(int fd, struct ntx_fdid *id);
/* 1 when fd is still the open file that was recorded in id. */
int ntx_fd_is(int fd, const struct ntx_fdid *id);
/* Close fd when it is still ours, else leave it alone.  Clears id.
 * @return 1 closed, 0 left (not ours, or fd < 0). */
int ntx_fd_close(int fd, struct ntx_fdid *id);

/* A wake-up channel: a non-blocking AF_UNIX socket pair.  r goes into a
 * poll set, w is poked. */
struct ntx_wake {
  int r, w;
  struct ntx_fdid rid, wid;
};
/* @return 0 or -errno; on failure both ends are -1. */
int ntx_wake_open(struct ntx_wake *k);
/* One byte into w, when w is still ours (async-signal-safe).  A full
 * socket already holds a wake-up.  @return 0, or -1 when w is not ours. */
int ntx_wake_poke(struct ntx_wake *k);
/* Take what is queued on r.  @return 0, or -1 when r is not ours. */
int ntx_wake_drain(struct ntx_wake *k);
/* 1 when both ends are still ours. */
int ntx_wake_ok(const struct ntx_wake *k);
/* Close what is still ours; both ends become -1. */
void ntx_wake_close(struct ntx_wake *k);

/* Is ep still our epoll instance?  member: a descriptor of ours (already
 * checked) that was added to ep with events and data u64. */
int ntx_ep_is(int ep, const struct ntx_fdid *epid, int member, uint32_t events, uint64_t data);

/* Wait up to s seconds for t.  @return 0 joined, -1 still running (left). */
int ntx_join_within(pthread_t t, double s);

/* Descriptors this process can still open before RLIMIT_NOFILE (its soft
 * limit), counting /proc/self/fd; 0 when that cannot even be opened (the
 * table is full).  Large limits are clamped to 1 << 20. */
long ntx_fd_headroom(void);
/* RLIMIT_NOFILE's soft limit (clamped as above). */
long ntx_fd_limit(void);
/* Descriptors a server inside the workload leaves to the application: an
 * eighth of the soft limit, at least 4, at most 64 (the default 1024 and
 * more keep 64). */
long ntx_fd_reserve(void);
/* What an errno from opening a descriptor means, for a line: for EMFILE
 * "too many open files: RLIMIT_NOFILE=N reached", else strerror.
 * @return buf. */
const char *ntx_fd_why(int err, char *buf, size_t len);
#endif
