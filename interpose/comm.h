/* comm.h -- the interposer's view of each communicator (struct nti_comm)
 * and the registry of handles (registry.c); the comm's blocked mark.
 *
 * Thread-safety: the handle table is written under nti_life_lock and read
 * lock-free (acquire on the key, release at bind); each nti_comm field
 * says who writes it.  Comms are never freed.
 * Signal-safety: nti_comm_lookup and the blocked-mark helpers are
 * async-signal-safe (loads and stores only); nothing else here is.
 */
#ifndef NTI_COMM_H
#define NTI_COMM_H

#include "interpose/nti.h"

#define NTI_EVQ 256 /* per-comm event queues, power of two */

/* Our private view of one communicator; cs lives in the ring mapping.
 * Cache-line aligned, and allocated so (registry.c): the first line holds
 * what the comm's own thread reads and writes on every call (next_pos),
 * and no other comm's fields share it: with 8 threads on 8 comms, one
 * comm's next_pos next to another's cs pointer costs a cross-core miss per
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
  /* The seq of the comm's last collective (atomic, relaxed; written by the
   * thread that issues its ops, wrappers.c op_seq).  cs->coll_seq, what
   * the mapping and the dumps show, is its copy: kept by the watchdog at
   * every poll and by each dump (nti_comm_seq_sync_all), so the hot path
   * stores the counter once, on this line (docs/performance.md). */
  uint64_t coll_seq;
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
  /* 1 once the watchdog is done with this dead comm (destroyed, aborted or
   * failed init, nothing in flight): its slot may go to a new comm, and no
   * tracer thread touches cs from then on (atomic; registry.c). */
  uint32_t retired;
  uint32_t async_poller; /* 1 while one thread polls ncclCommGetAsyncError and
                            records the change (atomic exchange; others skip) */
  /* The profiler plugin's claim (profiler.c, nti_plugin_claim): 0 none,
   * 1 a plugin context adds the inside view to this wrapped comm, 2 a
   * comm the plugin alone records (no wrapper saw it). */
  uint32_t plugin_claimed;
  uint32_t nsplit;       /* splits of this parent on this rank (NCCL's childCount) */
  uint32_t nshrink;
  uint32_t ngrow;        /* grows of this comm on this rank (docs/identity.md "Grow") */
  uint64_t *p2p_seq;     /* [2 * nranks]: send seq per peer, then recv seq per peer */
  int np2p;
  /* completion tracking (watchdog.c) */
  void *cu_ctx;                   /* CUcontext the comm was created in */
  uint32_t start_every;           /* a start event every Nth collective, 0 none (atomic) */
  uint64_t ev_free_head, ev_free_tail; /* SPMC free-event ring (atomics) */
  void *ev_free[NTI_EVQ];
  /* The pool's overflow (watchdog.c "tail events"): two more events,
   * which ops that find the pool empty (a burst between two polls) record
   * again, so the newest such op is still timed.  Writers (the op's
   * thread, or a poller flushing deferred ops) take tail_busy with an
   * exchange and give up when another holds it; a tail's gen is odd while
   * one writes, its fields are atomics (relaxed) read between two loads of
   * it; the watchdog acknowledges a gen it saw complete in done. */
#define NTI_TAILS 2
  uint32_t tail_busy;
  struct nti_tail {
    void *ev;                     /* (atomic) */
    uint64_t gen;
    uint64_t done;                /* gen last seen complete (watchdog; writers read it) */
    uint64_t seq, pos, pos_first, tsc, stream;
    uint32_t tid, gid;
    int p2p;
  } tail[NTI_TAILS];
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
/* Lifecycle.c's part of a slot's change of hands (under nti_life_lock):
 * the old owner's final state into the main ring, a NOTE "slot reused",
 * and out of the exchange's table, before the slot is wiped; and a comm
 * that got no slot: said once, a NOTE "unwatched" naming it. */
void nti_life_slot_reused(const struct ntr_comm_state *cs);
void nti_life_unwatched(uint64_t comm_id, int rank, int nranks);
/* Fork child only: drop every entry (they pointed into the parent's ring). */
void nti_registry_forget_all(void);
/* The watchdog is done with dead comm c (see retired): its ring slot joins
 * the slots nti_comm_create may reuse, oldest retired first.  Takes
 * nti_life_lock. */
void nti_comm_retire(struct nti_comm *c);
/* Every comm (watchdog iteration), newest first; entries are never freed. */
struct nti_comm *nti_comm_list(void);
/* cs->coll_seq of every comm brought up to its counter, c->coll_seq
 * (never lowered: two syncs may race).  Any thread; async-signal-safe
 * (atomics only): the dump path calls it before it copies the comm
 * states. */
void nti_comm_seq_sync_all(void);
/* Profiler plugin (lifecycle.c, for profiler.c): the wrapped comm a new
 * plugin context profiles -- the one whose init this thread is in, else
 * an unclaimed comm of that rank and size still in its init -- or NULL
 * (NCCL called no wrapper: a statically linked NCCL).  Then a comm of the
 * plugin's own, recorded by the plugin alone (ready at once), and its end
 * at the plugin's finalize.  Not hot path: init and finalize only. */
struct nti_comm *nti_plugin_claim(int rank, int nranks);
struct nti_comm *nti_plugin_comm_new(uint64_t id, int rank, int nranks);
void nti_plugin_comm_end(struct nti_comm *c);

/* Shared by lifecycle wrappers and the watchdog: a comm handle is never
 * handed to NCCL by the watchdog while a destroy/abort may be running. */
extern pthread_mutex_t nti_life_lock;

/* The fast path no longer applies to c (registry.c): its ops get start
 * events (tracked, NCCLTRACE_START_EVERY), which only the slow path
 * records, or the process left fast mode.  Any thread. */
void nti_comm_fast_off(struct nti_comm *c);
/* The process leaves fast mode for good (a Python found late: every call
 * now records its call site): nti_proc.fast and every comm's fast_handle.
 * Any thread. */
void nti_fast_off_all(void);
/* Refresh c->rec_flags from c's state (nonblocking, tracking): at bind,
 * and when the watchdog learns the comm's CUDA context (registry.c). */
void nti_comm_flags_update(struct nti_comm *c);

/* 1 when ops of this comm get completion events (driver loaded, context
 * known): otherwise records carry NTR_REC_NO_TRACKING from the start. */
static inline int nti_tracked(const struct nti_comm *c) {
  return c && __atomic_load_n(&c->cu_ctx, __ATOMIC_ACQUIRE);
}

/* The comm's blocked mark (ntr_comm_state.blocked_*): a thread entered a
 * blocking call of this kind at tsc `since`, so the watchdog and analyze
 * can time it out.  kind and tid are stored first, then since with release:
 * a reader that sees blocked_since (acquire) sees the kind and tid. */
static inline void nti_blocked_mark(struct ntr_comm_state *cs, uint32_t kind, uint32_t tid,
                                    uint64_t since) {
  cs->blocked_kind = kind;
  cs->blocked_tid = tid;
  __atomic_store_n(&cs->blocked_since, since, __ATOMIC_RELEASE);
}
/* The same, only when no mark is set (a CAS from 0; kind and tid may then
 * briefly name our call while another mark stays: a snapshot reader
 * accepts that).  @return 1 when set. */
static inline int nti_blocked_mark_if_clear(struct ntr_comm_state *cs, uint32_t kind, uint32_t tid,
                                            uint64_t since) {
  if (__atomic_load_n(&cs->blocked_since, __ATOMIC_RELAXED) != 0)
    return 0;
  cs->blocked_kind = kind;
  cs->blocked_tid = tid;
  uint64_t zero = 0;
  return __atomic_compare_exchange_n(&cs->blocked_since, &zero, since, 0, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED);
}
/* The blocking call returned. */
static inline void nti_blocked_clear(struct ntr_comm_state *cs) {
  __atomic_store_n(&cs->blocked_since, 0, __ATOMIC_RELEASE);
}

#endif /* NTI_COMM_H */
