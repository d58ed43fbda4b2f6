/* nti.h -- the interposer's core: the process state (nti_proc), the
 * per-thread state (nti_tls), the mode tests of the hot path, messages and
 * process setup.  What each part offers has its own header: resolve.h (the
 * real NCCL and libc functions), comm.h (the registry of comms), record.h
 * (records outside the wrappers' fast path), group.h, strict.h,
 * watchdog.h, trigger.h (dumps), graph.h (CUDA graphs).
 *
 * Thread-safety: nti_proc is written once by the library constructor (and the
 * fork child handler) before any wrapper can race with it; afterwards its
 * fields are read-only except where an atomic is named.  Per-thread state
 * (struct nti_tls) is only touched by its own thread, and by signal handlers
 * running on that thread.
 * Signal-safety: nti_active/nti_fast/nti_sites_on, nti_tid() and the TLS
 * guard are async-signal-safe (atomics, plain stores, one gettid syscall
 * the first time), and so is nti_say_raw; nothing else declared here is.
 */
#ifndef NTI_H
#define NTI_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <nccl.h>
#include "interpose/nccl_devapi.h"

#include "recorder/format.h"
#include "recorder/ring.h"
#include "recorder/clock.h"
#include "interpose/config.h"

#define NTI_EXPORT __attribute__((visibility("default")))
#define NTI_TLS __thread __attribute__((tls_model("initial-exec")))
#define NTI_LIKELY(x) __builtin_expect(!!(x), 1)
#define NTI_UNLIKELY(x) __builtin_expect(!!(x), 0)

struct nti_global {
  int active;           /* 1: wrappers record (not disabled, ring open) */
  /* 1: the wrappers' fast path applies (active, check not strict, no
   * stacks): the one mode word the hot path tests (nti_activate sets it,
   * release; read with acquire like active). */
  int fast;
  int disabled;         /* NCCLTRACE_DISABLE=1: pure pass-through */
  int dump_ready;       /* ntr_dump_init succeeded */
  int sites;            /* NTI_SITES_*: call sites recorded with every call (atomic) */
  struct ntr_ring ring; /* this process's flight recorder */
};
extern struct nti_global nti_proc;

#define NTI_SITES_NATIVE 1 /* NCCLTRACE_STACKS=1 */
#define NTI_SITES_PY 2     /* a Python process, NCCLTRACE_PYSTACKS on (pyframes.c) */
/* Relaxed: the Python bit appears once, at activation; a call that misses
 * it records no site.  A plain load on the hot path. */
static inline int nti_sites_on(void) {
  return __atomic_load_n(&nti_proc.sites, __ATOMIC_RELAXED);
}

/* Is tracing on?  Acquire pairs with the release store in nti_activate: a
 * thread that sees 1 sees the mapped ring.  A plain mov on x86-64 and a
 * load-acquire on arm64: no cost on the hot path.  Async-signal-safe. */
static inline int nti_active(void) {
  return __atomic_load_n(&nti_proc.active, __ATOMIC_ACQUIRE);
}
/* May a wrapper take its fast path (nti_proc.fast)?  Same pairing as
 * nti_active. */
static inline int nti_fast(void) {
  return __atomic_load_n(&nti_proc.fast, __ATOMIC_ACQUIRE);
}

/* Per-thread state.  Initial-exec TLS: no lazy allocation (and so no malloc
 * or lock) on first access, which makes it usable from signal handlers and
 * from wrappers NCCL calls from its own threads. */
/* 16 bytes, as the hot path moves them (one load, one OR, one store). */
typedef uint32_t nti_v4 __attribute__((vector_size(16)));
struct nti_tls {
  int guard;             /* >0 while inside a wrapped call: nested calls pass through */
  uint32_t group_depth;  /* ncclGroupStart nesting, as we saw it */
  /* In the record's order from its tid on (tid, group_id, group_depth and
   * flags, fp): the hot path ORs the comm's flags in and stores the four
   * words at once (wrappers.c). */
  union __attribute__((aligned(16))) {
    struct {
      uint32_t tid;        /* gettid() cached, 0 until first use */
      uint32_t group_id;   /* current outermost group's id, 0 outside */
      /* The record's group_depth and flags words as one: group_depth, and
       * NTR_REC_IN_GROUP << 16 inside a group (nti_group_word_sync). */
      uint32_t group_word;
      uint32_t tail_zero;  /* the record's fp: 0 */
    };
    nti_v4 rec_tail;
  };
  uint32_t group_seq;    /* outermost groups started by this thread */
  int group_nops;        /* entries used in group_ops */
  int group_overflow;    /* more distinct pairs than NTI_GROUP_TRACK */
  /* NTI_GROUP_TRACK entries, allocated at the thread's first GroupStart:
   * initial-exec TLS must stay small, or a drop-in dlopen of the library
   * fails with "cannot allocate memory in static TLS block". */
  struct nti_group_op *group_ops;
  struct nti_strict_buf *strict; /* strict-mode deferral (heap, strict only) */
  /* This thread's block of ring positions (recorder/ring.h); reset in a
   * fork child, whose ring starts again at 0. */
  struct ntr_ring_cursor ring_cur;
  /* Depth of our signal handlers running on this thread (signals.c):
   * their records never touch ring_cur, which the interrupted code may be
   * in the middle of using; the outermost handler has a block of its own
   * (sig_cur), nested ones take one per record (ntr_ring_reserve). */
  int internal;
  struct ntr_ring_cursor sig_cur;
  int exit_hooked;       /* the thread-exit release of ring_cur is registered (init.c) */
  /* The comm of this thread's last fast-path call (wrappers.c), cached
   * only while nti_fast(): a match implies the fast mode.  Never NULL:
   * &nti_comm_none until the first. */
  struct nti_comm *last_comm;
  struct nti_comm *slow_comm; /* the same for the slow path out of fast mode; NULL: none */
};
extern NTI_TLS struct nti_tls nti_tls;

/* Once per thread, at its first block: at thread exit its block is given
 * back (ntr_ring_release), so lapping writers can use that index again. */
void nti_thread_hook(void);

uint32_t nti_tid_slow(void);
static inline uint32_t nti_tid(void) {
  return NTI_LIKELY(nti_tls.tid) ? nti_tls.tid : nti_tid_slow();
}

/* One `nccltrace: ...` line on stderr: formatted into a stack buffer and
 * written with one write (no stdio buffering, no locks) by recorder/diag.h,
 * which never writes into an fd 2 that is not the process's stderr any
 * more (say_route.c takes those lines), never blocks and never raises
 * SIGPIPE or SIGXFSZ.  Not for signal handlers (vsnprintf); those use
 * nti_say_raw, which takes a whole line, "nccltrace: " and newline included. */
void nti_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void nti_say_raw(const char *s); /* async-signal-safe */
/* Lines that fd 2 may no longer take go to the ring and the dump
 * directory's log from now on (say_route.c); once the ring is open. */
void nti_say_route_on(void);

/* ----------------------------------------------------- setup (init.c) -- */

/* signals.c: nti_signals_load at load (who owns the table, what was
 * ignored); nti_signals_install once the ring exists (nti_activate): until
 * there is something to dump, every signal keeps the application's
 * disposition in the kernel, untouched.  nti_signals_fork_child from the
 * atfork child handler (the child owns its copy of the table). */
void nti_signals_load(void);
void nti_signals_install(void);
void nti_signals_fork_child(void);
/* The pid of this process now: the raw system call, never a cached value
 * (a vfork child shares our memory, cached pids included).
 * Async-signal-safe. */
static inline int32_t nti_pid_now(void) { return (int32_t)syscall(SYS_getpid); }
void nti_exit_install(void);    /* exit.c */
void nti_fork_install(void);
void nti_first_comm(void); /* start watchdog + exchange once */
/* Create the ring on first use (lifecycle wrappers, nccltrace_dump); once
 * per process image, thread-safe, not signal-safe. */
void nti_activate(void);

#endif /* NTI_H */
