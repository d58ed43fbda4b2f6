/* emu_core.h -- the stream/event/device model of the CPU emulator.
 *
 * Thread-safety: every function here may be called from any thread at any
 * time.  Queries (emu_stream_query, emu_event_query) take no lock: they
 * compare two monotonically increasing counters with acquire loads, because a
 * tracer queries one event per collective from its watchdog thread.
 * Everything that waits (sync, enqueue onto a destroyed stream) sleeps on a
 * condition variable; nothing spins.
 *
 * Signal-safety: none of these functions is async-signal-safe (they allocate
 * and take mutexes), except emu_event_query and emu_stream_query, which only
 * perform atomic loads.
 *
 * The model: a stream is a FIFO of work items executed in order by one worker
 * thread owned by the stream.  `enqueued` counts items ever pushed,
 * `completed` counts items ever finished; both only grow, so a stream struct
 * is recycled (never freed) and an event is just (stream, target count).
 * The legacy default stream of each device reproduces CUDA's implicit
 * synchronization with blocking streams by attaching dependencies to items.
 *
 * This header is internal to tests/emu: libcuda.so.1 implements it and
 * exports the emu_* symbols; libcudart.so.13 and libnccl.so.2 link to it.
 */
#ifndef EMU_CORE_H
#define EMU_CORE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <time.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#define EMU_API __attribute__((visibility("default")))

/* A unit of stream work.  The submitter embeds it in a larger struct; the
 * worker calls run(), which may block for as long as it likes (a hung
 * collective blocks forever) and must release its own memory before it
 * returns: the worker never touches the item again after run(). */
struct emu_work {
  struct emu_work *next;
  void (*run)(struct emu_work *w);
  /* Filled by emu_stream_enqueue: work this item must wait for (legacy
   * stream semantics).  Freed by the worker. */
  struct emu_dep *deps;
  int ndeps;
};

struct emu_dep {
  struct CUstream_st *stream;
  uint64_t target;
};

struct CUstream_st {
  pthread_mutex_t mu;
  pthread_cond_t work_cv;   /* worker waits for items */
  pthread_cond_t done_cv;   /* synchronizers wait for `completed` */
  struct emu_work *head, *tail;
  _Atomic uint64_t enqueued;   /* pairs with the acquire in query/sync */
  _Atomic uint64_t completed;  /* release-stored by the worker after run() */
  int device;
  unsigned flags;              /* CU_STREAM_NON_BLOCKING, ... */
  int legacy;                  /* the per-device default stream */
  int destroyed;               /* under mu: drain, then recycle */
  int has_worker;
  struct CUstream_st *dev_next;   /* device's list of live streams */
  struct CUstream_st *pool_next;  /* free pool */
};

struct CUevent_st {
  _Atomic(struct CUstream_st *) stream;
  _Atomic uint64_t target;     /* 0: never recorded (query says complete) */
  unsigned flags;
  _Atomic uint64_t t_ns;       /* completion time, timing events only */
  _Atomic int refs;            /* the handle + pending timing markers */
};

/* Device and context bookkeeping. */
EMU_API int emu_device_count(void);
EMU_API int emu_get_device(void);
EMU_API int emu_set_device(int dev);   /* 0 or -EINVAL */

/* Streams.  `s` may be NULL, CU_STREAM_LEGACY or CU_STREAM_PER_THREAD: those
 * name the current device's default stream. */
EMU_API struct CUstream_st *emu_stream_resolve(struct CUstream_st *s);
EMU_API int emu_stream_create(struct CUstream_st **out, unsigned flags);
EMU_API void emu_stream_destroy(struct CUstream_st *s);
EMU_API void emu_stream_enqueue(struct CUstream_st *s, struct emu_work *w);
EMU_API void emu_stream_sync(struct CUstream_st *s);
EMU_API int emu_stream_query(struct CUstream_st *s);   /* 1 idle, 0 busy */
EMU_API void emu_stream_wait_count(struct CUstream_st *s, uint64_t target);
EMU_API void emu_device_sync(int dev);
/* Enqueue a wait for `ev` (as recorded now) onto `s`. */
EMU_API void emu_stream_wait_event(struct CUstream_st *s, struct CUevent_st *ev);

/* Events. */
EMU_API struct CUevent_st *emu_event_create(unsigned flags);
EMU_API void emu_event_destroy(struct CUevent_st *ev);
EMU_API void emu_event_record(struct CUevent_st *ev, struct CUstream_st *s);
EMU_API int emu_event_query(struct CUevent_st *ev);   /* 1 complete */
EMU_API void emu_event_sync(struct CUevent_st *ev);
/* 0 and *ms set, -EAGAIN not complete, -EINVAL no timing data. */
EMU_API int emu_event_elapsed(struct CUevent_st *a, struct CUevent_st *b, float *ms);

/* Verbose diagnostics (NCCLEMU_VERBOSE=1), one line on stderr. */
EMU_API int emu_verbose(void);
EMU_API void emu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Start a helper thread with every asynchronous signal blocked, so that the
 * application's (and a tracer's) signal handlers run on application threads,
 * as they would with the real driver's internal threads. */
EMU_API int emu_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, int detached);

static inline uint64_t emu_now_ns(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Futex on a 32-bit word that may live in MAP_SHARED memory (hence no
 * FUTEX_PRIVATE_FLAG): cross-process waits and wakes. */
static inline void emu_futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
  struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline void emu_futex_wake_all(_Atomic uint32_t *addr)
{
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#endif
