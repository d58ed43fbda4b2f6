/* nti.h -- interposer internals shared by the files of interpose/.
 *
 * Thread-safety: nti_g is written once by the library constructor (and the
 * fork child handler) before any wrapper can race with it; afterwards its
 * fields are read-only except where an atomic is named.  Per-thread state
 * (struct nti_tls) is only touched by its own thread, and by signal handlers
 * running on that thread.
 * Signal-safety: nti_record_begin/nti_record_end, nti_tid() and the TLS guard
 * are async-signal-safe (atomics, plain stores, one gettid syscall the first
 * time); nothing else declared here is.
 */
#ifndef NTI_H
#define NTI_H

#include <errno.h>
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <pthread.h>
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

/* ------------------------------------------------------------ globals -- */

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
extern struct nti_global nti_g;

#define NTI_SITES_NATIVE 1 /* NCCLTRACE_STACKS=1 */
#define NTI_SITES_PY 2     /* a Python process, NCCLTRACE_PYSTACKS on (pyframes.c) */
/* Relaxed: the Python bit appears once, at activation; a call that misses
 * it records no site.  A plain load on the hot path. */
static inline int nti_sites_on(void) {
  return __atomic_load_n(&nti_g.sites, __ATOMIC_RELAXED);
}

/* Is tracing on?  Acquire pairs with the release store in nti_activate: a
 * thread that sees 1 sees the mapped ring.  A plain mov on x86-64 and a
 * load-acquire on arm64: no cost on the hot path.  Async-signal-safe. */
static inline int nti_active(void) {
  return __atomic_load_n(&nti_g.active, __ATOMIC_ACQUIRE);
}
/* May a wrapper take its fast path (nti_g.fast)?  Same pairing as
 * nti_active. */
static inline int nti_fast(void) {
  return __atomic_load_n(&nti_g.fast, __ATOMIC_ACQUIRE);
}

/* Per-thread state.  Initial-exec TLS: no lazy allocation (and so no malloc
 * or lock) on first access, which makes it usable from signal handlers and
 * from wrappers NCCL calls from its own threads. */
#define NTI_GROUP_TRACK 64 /* distinct (comm, stream) pairs evented per group */
struct nti_group_op {
  struct nti_comm *comm;
  void *stream;
  uint64_t seq;   /* highest collective seq on that pair, 0 when only p2p */
  uint64_t pos;   /* its record position */
  uint64_t pos_first; /* first record of the group on that pair */
  uint64_t tsc;
  int p2p_only;
};
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

/* After every change of group_depth (group.c). */
static inline void nti_group_word_sync(void) {
  uint32_t d = nti_tls.group_depth & 0xffffu;
  nti_tls.group_word = d | (d ? (uint32_t)NTR_REC_IN_GROUP << 16 : 0);
}

/* Once per thread, at its first block: at thread exit its block is given
 * back (ntr_ring_release), so lapping writers can use that index again. */
void nti_thread_hook(void);

uint32_t nti_tid_slow(void);
static inline uint32_t nti_tid(void) {
  return NTI_LIKELY(nti_tls.tid) ? nti_tls.tid : nti_tid_slow();
}

/* One `nccltrace: ...` line on stderr: formatted into a stack buffer and
 * written with one write(2) (no stdio buffering, no locks). Not for signal
 * handlers (vsnprintf); those use nti_say_raw. */
void nti_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void nti_say_raw(const char *s); /* async-signal-safe */

/* ---------------------------------------------------------- resolve.c -- */

/* Row index of every table entry (the order of interpose/nccl_api.def). */
enum nti_fn {
#define NT_COLL(name, ...) NTI_FN_##name,
#define NT_P2P(name, ...) NTI_FN_##name,
#define NT_GROUP(name, ...) NTI_FN_##name,
#define NT_LIFE(name, ...) NTI_FN_##name,
#include "interpose/nccl_api.def"
#undef NT_COLL
#undef NT_P2P
#undef NT_GROUP
#undef NT_LIFE
  NTI_FN_COUNT
};

/* Real NCCL entry points: one pointer per table row, resolved on first use
 * and accessed with __atomic builtins only. */
#define NT_COLL(name, KIND, params, ...) typedef ncclResult_t (*nti_fn_##name##_t) params; \
  extern nti_fn_##name##_t nti_real_##name;
#define NT_P2P NT_COLL
#define NT_GROUP NT_COLL
#define NT_LIFE NT_COLL
#include "interpose/nccl_api.def"
#undef NT_COLL
#undef NT_P2P
#undef NT_GROUP
#undef NT_LIFE

/* Resolve row fn (enum nti_fn) and store it in its pointer.
 * @return the function, or NULL when the loaded NCCL lacks it (said once). */
void *nti_resolve(enum nti_fn fn);
#define NTI_REAL(name)                                                      \
  ({                                                                        \
    nti_fn_##name##_t nti_fn_ =                                             \
        __atomic_load_n(&nti_real_##name, __ATOMIC_ACQUIRE);                \
    if (NTI_UNLIKELY(!nti_fn_))                                             \
      nti_fn_ = (__typeof__(nti_fn_))nti_resolve(NTI_FN_##name);   \
    nti_fn_;                                                                \
  })
/* Resolve a libc/libdl symbol of the next object (our interposed sigaction,
 * signal, _exit, _Exit).  NULL when absent. */
void *nti_next_symbol(const char *name);
/* Any symbol of the real NCCL (not a table row: ncclCommCount, ...),
 * found the same way as the rows.  NULL when absent. */
void *nti_nccl_symbol(const char *name);
/* ncclGetVersion of the real library, 0 when unavailable. */
int nti_real_nccl_version(void);

/* ---------------------------------------------------------- registry.c -- */

#define NTI_EVQ 256 /* per-comm event queues, power of two */

/* Our private view of one communicator; cs lives in the ring mapping. */
/* Cache-line aligned, and allocated so (registry.c): the first line holds
 * what the comm's own thread reads and writes on every call (next_pos),
 * and no other comm's fields share it -- with 8 threads on 8 comms, one
 * comm's next_pos next to another's cs pointer cost a cross-core miss per
 * call (bench/scale/threads). */
struct __attribute__((aligned(64))) nti_comm {
  struct ntr_comm_state *cs;
  uint64_t next_pos;     /* position + 1 of its newest record (atomic, relaxed):
                            the floor of the next one (ntr_ring_reserve_in) */
  ncclComm_t handle;
  /* handle while the wrappers' fast path may record this comm's ops, else
   * NTI_REG_TOMB (atomic): set once at bind in fast mode, only ever taken
   * back after (nti_comm_fast_off), so a thread's cached comm can be sent
   * to the slow path from any thread without touching its TLS. */
  ncclComm_t fast_handle;
  /* What the comm adds to the record's words from its tid on (nti_tls
   * rec_tail): rec_flags, NTR_REC_NONBLOCKING / NTR_REC_NO_TRACKING for
   * its op records shifted 16 left (the flags half of the group_depth and
   * flags word; atomic, relaxed: nti_comm_flags_update); the rest 0. */
  union __attribute__((aligned(16))) {
    struct {
      uint32_t rf_zero0, rf_zero1;
      uint32_t rec_flags;
      uint32_t rf_zero3;
    };
    nti_v4 rec_tail_or;
  };
  int nonblocking;
  int live;              /* 0 once destroy/abort began: watchdog leaves it alone */
  uint32_t async_poller; /* 1 while one thread polls ncclCommGetAsyncError and
                            records the change (atomic exchange; others skip) */
  uint32_t nsplit;       /* splits of this parent on this rank (NCCL's childCount) */
  uint32_t nshrink;
  uint64_t *p2p_seq;     /* [2 * nranks]: send seq per peer, then recv seq per peer */
  int np2p;
  /* completion tracking (watchdog.c) */
  void *cu_ctx;                   /* CUcontext the comm was created in */
  uint32_t start_every;           /* a start event every Nth collective, 0 none (atomic) */
  uint64_t ev_free_head, ev_free_tail; /* SPMC free-event ring (atomics) */
  void *ev_free[NTI_EVQ];
  struct nti_pending {
    uint64_t turn;                /* Vyukov cell sequence (atomic) */
    void *ev;
    uint64_t seq, pos, tsc;
    uint64_t pos_first;           /* a group: its first record on this comm/stream */
    uint64_t stream;
    uint32_t tid, group_id;       /* which records of [pos_first, pos] are ours */
    int p2p;
    int replay;                   /* a graph launch (graph.c): counts in cs->replays_done */
    int start;                    /* a start event (device arrival), not a completion */
  } pend[NTI_EVQ];
  /* Ops a nonblocking comm accepted with ncclInProgress: NCCL enqueues
   * them later, from its own thread, so they are evented once the comm
   * reports ncclSuccess (nti_complete_flush_deferred).  NCCL refuses the
   * next op before that, so a handful per comm is enough. */
#define NTI_DEFER 8
  struct nti_deferred {
    void *stream;
    uint64_t seq, pos_first, pos, tsc;
    uint32_t tid, group_id;
    int p2p;
  } defer[NTI_DEFER];
  uint32_t ndefer;                /* entries in defer[] (under defer_lock; atomic for the quick test) */
  uint32_t defer_lock;            /* spin flag: app thread adding, a poller flushing */
  uint64_t pend_tail;             /* producers (atomic) */
  uint64_t pend_head;             /* watchdog only */
  uint64_t timeout_reported_pos;  /* watchdog only: position + 1 of the op last reported */
  uint64_t life_reported_since;   /* watchdog only */
  uint64_t recent_upto;           /* position + 1 up to which the watchdog copied its op
                                     records into recent[] (atomic: wrappers read it) */
  uint64_t stall_pos, stall_polls; /* watchdog only: its newest record, waited for */
  uint64_t recent_patch_pos;      /* watchdog only: position + 1 of a record copied into
                                     recent[] before its result was known, 0 = none */
  uint64_t incall_mark;           /* watchdog only: blocked_since it set for an op in progress */
  uint64_t incall_reported_pos;   /* watchdog only: position + 1 of the op last timed out */
  struct nti_comm *next_all;      /* list of every comm ever registered */
};

/* The handle -> comm table (registry.c): open addressing, linear probing,
 * keyed by the handle pointer; 0 = empty, NTI_REG_TOMB = removed.  Here so
 * that the lookup inlines into every wrapper (a call and a return are a
 * measurable part of the hot path, docs/performance.md). */
#define NTI_REG_SLOTS 1024u /* > 4 x NTR_COMM_MAX: probes stay short */
#define NTI_REG_TOMB ((uintptr_t)1)
struct nti_reg_slot {
  uintptr_t key;         /* handle (atomic) */
  struct nti_comm *comm; /* (atomic) */
};
extern struct nti_reg_slot nti_reg_table[NTI_REG_SLOTS];
static inline uint32_t nti_reg_slot_of(uintptr_t key) {
  uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(h >> 40) & (NTI_REG_SLOTS - 1);
}
/* Lock-free lookup, async-signal-safe.  NULL when unknown. */
static inline struct nti_comm *nti_comm_lookup(ncclComm_t handle) {
  uintptr_t key = (uintptr_t)handle;
  if (key <= NTI_REG_TOMB)
    return NULL;
  uint32_t i = nti_reg_slot_of(key);
  for (uint32_t n = 0; n < NTI_REG_SLOTS; n++, i = (i + 1) & (NTI_REG_SLOTS - 1)) {
    /* Acquire pairs with the release store of key in nti_comm_bind: the
     * comm pointer stored before it is visible. */
    uintptr_t k = __atomic_load_n(&nti_reg_table[i].key, __ATOMIC_ACQUIRE);
    if (NTI_LIKELY(k == key))
      return __atomic_load_n(&nti_reg_table[i].comm, __ATOMIC_RELAXED);
    if (k == 0)
      return NULL;
  }
  return NULL;
}
/* Matches no handle (its handle is NTI_REG_TOMB): the wrappers' cache
 * starts there. */
extern struct nti_comm nti_comm_none;
/* Lifecycle only (under nti_life_lock). */
struct nti_comm *nti_comm_create(uint64_t comm_id, int rank, int nranks, uint32_t init_kind);
int nti_comm_bind(struct nti_comm *c, ncclComm_t handle);
void nti_comm_unbind(struct nti_comm *c);
/* Fork child only: drop every entry (they pointed into the parent's ring). */
void nti_registry_forget_all(void);
/* Every comm (watchdog iteration), newest first; entries are never freed. */
struct nti_comm *nti_comm_list(void);
/* Shared by lifecycle wrappers and the watchdog: a comm handle is never
 * handed to NCCL by the watchdog while a destroy/abort may be running. */
extern pthread_mutex_t nti_life_lock;

/* ------------------------------------------------------------- ident.c -- */

uint64_t nti_hash_bytes(const void *p, size_t n);     /* NCCL getHash() */
uint64_t nti_id_split(uint64_t parent, int nth, int color);
uint64_t nti_id_shrink(uint64_t parent, int nth, const int *excl, int nexcl);
uint64_t nti_id_init_all(int nth);
uint64_t nti_id_scalable(const ncclUniqueId *ids, int n);
/* Called once the first comm id is known: derive the job id if none. */
void nti_job_from_comm(uint64_t comm_id);

/* The fingerprint is derived by readers (recorder/format.h: ntr_fp_coll,
 * ntr_fp_p2p, ntr_record_fp). */
#define nti_fp_coll ntr_fp_coll
#define nti_fp_p2p ntr_fp_p2p
#define nti_mix ntr_fp_mix

/* ------------------------------------------------------------ record.c -- */

/* A position for a record of comm c (or none), outside the wrappers' fast
 * path: from the thread's block, keeping c's records in position order;
 * signal handlers' from theirs (nti_tls.internal).  Also links the record to c's
 * previous one (prev_gap): the watchdog walks that chain back from c's
 * newest record to copy recent[] (watchdog.c). */
static inline __attribute__((always_inline)) struct ntr_record *nti_reserve(uint64_t *pos, const struct nti_comm *c) {
  struct ntr_record *r;
  if (NTI_UNLIKELY(nti_tls.internal)) {
    r = nti_tls.internal == 1 ? ntr_ring_reserve_in(&nti_g.ring, &nti_tls.sig_cur, 0, pos)
                              : ntr_ring_reserve(&nti_g.ring, pos);
    r->prev_gap = 0;
    return r;
  }
  uint64_t *next = c ? (uint64_t *)&c->next_pos : NULL; /* written by its user thread only */
  uint64_t prev = next ? __atomic_load_n(next, __ATOMIC_RELAXED) : 0;
  r = ntr_ring_reserve_in(&nti_g.ring, &nti_tls.ring_cur, prev, pos);
  if (NTI_UNLIKELY(!nti_tls.exit_hooked))
    nti_thread_hook();
  /* prev = position + 1 of c's newest record, 0 when none; the gap is at
   * least 1 (the floor above) */
  uint64_t gap = *pos + 1 - prev;
  r->prev_gap = prev && gap <= UINT32_MAX ? (uint32_t)gap : 0;
  if (next)
    /* Release: the watchdog that reads this newest position walks the
     * chain from it (its own record's commit orders the rest). */
    __atomic_store_n(next, *pos + 1, __ATOMIC_RELEASE);
  return r;
}

static inline struct ntr_record *nti_record_begin(uint64_t *pos, unsigned kind, unsigned phase,
                                                  const struct nti_comm *c) {
  struct ntr_record *r = nti_reserve(pos, c);
  r->tsc = ntr_clock_now();
  r->tsc_done = 0;
  r->kind = (uint16_t)kind;
  r->phase = (uint8_t)phase;
  r->dtype = 0xff;
  r->redop = -1;
  r->peer = -1;
  r->result = -1;
  r->count = 0;
  r->seq = 0;
  r->aux = 0;
  r->fp = 0;
  r->stack_id = 0;
  r->pystack_id = 0;
  r->u.buf.sendbuf = r->u.buf.recvbuf = r->u.buf.stream = 0;
  r->tid = nti_tid();
  r->group_depth = (uint16_t)nti_tls.group_depth;
  r->group_id = nti_tls.group_id;
  r->flags = nti_tls.group_depth ? NTR_REC_IN_GROUP : 0;
  if (c) {
    struct ntr_comm_state *cs = c->cs;
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
    if (c->nonblocking)
      r->flags |= NTR_REC_NONBLOCKING;
  } else {
    r->comm_id = 0;
    r->rank = -1;
    r->nranks = 0;
  }
  return r;
}
static inline void nti_record_end(struct ntr_record *r, uint64_t pos, const struct nti_comm *c) {
  ntr_ring_commit(&nti_g.ring, r, pos, c ? c->cs : NULL);
}
/* Set aux of a committed record, as nti_record_patch does the rest (only
 * while the slot and recent[] copy still hold position pos). */
void nti_record_patch_aux(uint64_t pos, const struct nti_comm *c, uint64_t aux);
/* Patch a committed record (ring slot and recent[] copy) if it still holds
 * position pos (a record pointer would not do: a lapping writer may have
 * reused the slot since): result (NTI_KEEP_RESULT = leave), flags OR'ed, tsc_done
 * (0 = leave).  Async-signal-safe. */
#define NTI_KEEP_RESULT (-0x7fffffff)
void nti_record_patch(uint64_t pos, const struct nti_comm *c, int result, uint16_t flags,
                      uint64_t tsc_done);
/* Name of a kind for messages: "AllReduce", "CommInitRank", "Mark". */
const char *nti_kind_name(unsigned kind);
/* A tracer event (MARK, TIMEOUT, ...) with text; async-signal-safe. */
void nti_record_event(unsigned kind, const struct nti_comm *c, const char *text,
                      uint64_t count, uint64_t aux, uint64_t seq);
/* Stack id for NCCLTRACE_STACKS=1 (0 when off). */
uint32_t nti_stack_id(void);
/* The call sites nti_sites_on() asks for into r: native stack_id (cached
 * by site, the return address into the application, when not NULL),
 * Python pystack_id.  Out of line: C programs without NCCLTRACE_STACKS
 * never call it.  Keeps errno. */
void nti_sites(struct ntr_record *r, const void *site);
/* The same, cached by call site (the return address into the caller of
 * the wrapper): a known site costs a probe (record.c). */
uint32_t nti_stack_id_at(const void *site);

/* ------------------------------------------------------------- group.c -- */

void nti_group_note_op(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos,
                       uint64_t tsc, int p2p);
/* One NCCL operation as the wrappers see it: enough to record it, and in
 * strict mode to replay it later (wrappers.c: nti_replay). */
struct nti_op {
  enum nti_fn fn;
  unsigned kind;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  int dtype, redop, root, peer; /* root for rooted collectives, peer for p2p */
  int dir;                      /* p2p: 0 send, 1 recv */
  ncclComm_t comm;
  void *stream;
  /* filled by the wrapper */
  struct nti_comm *c;
  uint64_t seq, pos, tsc;
  struct ntr_record *rec;
  const void *site;             /* return address into the application (stacks) */
};
ncclResult_t nti_replay(const struct nti_op *op); /* wrappers.c */

/* Strict mode (group.c).  1 when calls must wait for the coordinator.
 * The mode check comes first so the default path makes no call. */
int nti_strict_connected(void);
static inline int nti_strict_on(void) {
  return NTI_UNLIKELY(ntr_cfg.check == NTR_CHECK_STRICT) && nti_strict_connected();
}
/* Outside a group: wait for agreement on one record.  0 go, -1 refused. */
int nti_strict_single(struct nti_op *op);
/* Inside a group: buffer the call (replayed at the outermost GroupEnd).
 * 0 buffered, -ENOMEM when it could not be (the call is then forwarded). */
int nti_strict_defer(const struct nti_op *op);
/* At the outermost GroupEnd, before the caller forwards it: wait over the
 * buffered records; agreed: replay them into NCCL's open group and return
 * ncclSuccess (or the first error NCCL gave a replayed call); refused:
 * replay nothing and return ncclInvalidUsage. */
ncclResult_t nti_strict_group_end(int *had_deferred);
void nti_group_reset(void);

/* ---------------------------------------------------------- watchdog.c -- */

/* Attach a completion event after an op was enqueued (hot path). */
void nti_complete_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos,
                        uint64_t tsc, int p2p, struct ntr_record *r);
/* Same for the ops of an outermost group on one (comm, stream): records
 * pos_first..pos of this thread and group complete with the event. */
void nti_complete_track_group(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first,
                              uint64_t pos, uint64_t tsc, int p2p);
/* An op or group the comm accepted with ncclInProgress: not evented yet
 * (its work is not on the stream); evented by the flush. */
void nti_complete_defer(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos_first, uint64_t pos,
                        uint64_t tsc, int p2p);
/* The comm reported ncclSuccess: its deferred ops are enqueued now; event
 * them.  Any thread (the application's ncclCommGetAsyncError, the
 * watchdog's poll). */
void nti_complete_flush_deferred(struct nti_comm *c);
/* Device arrival: a start event recorded on the stream before collective
 * seq (outside groups) when it is due: every c->start_every-th seq
 * (NCCLTRACE_START_EVERY, 1 after a straggler report on the comm).  The
 * watchdog writes an NTR_KIND_DEV_ARRIVE event when the stream reaches it. */
void nti_start_track(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc);
static inline int nti_start_due(const struct nti_comm *c, uint64_t seq) {
  uint32_t every = __atomic_load_n(&c->start_every, __ATOMIC_RELAXED);
  return every == 1 || (every && seq % every == 1);
}
/* Lateness suspected on comm_id (a straggler report): a start event before
 * every collective of it from now on.  Any thread. */
void nti_start_boost(unsigned long long comm_id); /* also in trigger.h, for the exchange */
/* 1 when ops of this comm get completion events (driver loaded, context
 * known): otherwise records carry NTR_REC_NO_TRACKING from the start. */
static inline int nti_tracked(const struct nti_comm *c) {
  return c && __atomic_load_n(&c->cu_ctx, __ATOMIC_ACQUIRE);
}
/* recent[] copies of collective/p2p records are made by the watchdog
 * (wrappers publish them with cs = NULL): 1 when it already handled c's
 * record at position pos.  One relaxed load. */
static inline int nti_recent_passed(const struct nti_comm *c, uint64_t pos) {
  return __atomic_load_n(&c->recent_upto, __ATOMIC_RELAXED) > pos;
}
/* The fast path no longer applies to c (registry.c): its ops get start
 * events (tracked, NCCLTRACE_START_EVERY), which only the slow path
 * records, or the process left fast mode.  Any thread. */
void nti_comm_fast_off(struct nti_comm *c);
/* The process leaves fast mode for good (a Python found late: every call
 * now records its call site): nti_g.fast and every comm's fast_handle.
 * Any thread. */
void nti_fast_off_all(void);
/* Refresh c->rec_flags from c's state (nonblocking, tracking): at bind,
 * and when the watchdog learns the comm's CUDA context (registry.c). */
void nti_comm_flags_update(struct nti_comm *c);
/* Is the stream capturing?  1 yes, 0 no or unknown. */
int nti_stream_capturing(void *stream);
/* The capture id of a capturing stream (and the graph being built, NULL
 * when the driver does not say).  @return 1 capturing, 0 not or unknown. */
int nti_capture_id(void *stream, uint64_t *id, void **graph);
/* A replay's completion event (graph.c): seq = the last captured collective
 * of c in the graph (0: only send/recv). */
void nti_complete_track_replay(struct nti_comm *c, void *stream, uint64_t seq, uint64_t pos, uint64_t tsc);
/* graph.c: the records [pos_first, pos] of this thread's op or group on
 * (c, stream) were captured: join them to their capture's graph entry, mark
 * them captured with the capture id. */
void nti_graph_note_captured(struct nti_comm *c, void *stream, uint64_t pos_first, uint64_t pos);
/* Per-comm event pool filled at init exit (app thread, context current). */
void nti_watchdog_comm_ready(struct nti_comm *c);
void nti_watchdog_start(void);
void nti_watchdog_stop(void);
/* Fork child: the watchdog thread did not survive; forget its state. */
void nti_watchdog_forget(void);

/* lifecycle.c: record an async-error change (CAS on cs->async_error, one
 * recorder wins), finish nonblocking inits, dump on a new error. */
void nti_async_transition(struct nti_comm *c, ncclResult_t now);

/* ------------------------------------------------------------- other -- */

void nti_signals_install(void);
void nti_exit_install(void);
void nti_fork_install(void);
void nti_first_comm(void); /* start watchdog + exchange once */
/* Create the ring on first use (lifecycle wrappers, nccltrace_dump); once
 * per process image, thread-safe, not signal-safe. */
void nti_activate(void);

#endif /* NTI_H */
