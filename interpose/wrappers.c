/* wrappers.c -- the collective, point-to-point and group wrappers, generated
 * from recorder/nccl_api.def (lifecycle wrappers: lifecycle.c).
 *
 * Thread-safety: every wrapper may run on any thread concurrently.  Shared
 * state is touched with atomics only (comm seq counters, the ring); group
 * state is per thread.
 * Signal-safety: wrappers are not meant to be called from signal handlers
 * (NCCL itself is not signal-safe).
 *
 * Hot path of a collective in the default configuration (nti_proc.fast: not
 * strict, no stacks), inlined into each wrapper with no call of ours: one
 * mode word and the TLS guard tested once, the registry probe (lock-free),
 * the seq (load + store: one thread per comm at a time, see fast_pre), the
 * clock, a slot of the thread's own block (plain stores, recorder/ring.h),
 * the real call, the result stored into the slot, last_enqueued, and the
 * completion event when a driver is loaded (watchdog.c).  No lock, no
 * allocation, no stdio, no syscall, no read-modify-write.  What the call
 * used to do besides and no longer does, and who does it now: the
 * fingerprint hash (readers: ntr_record_fp), the comm's blocked mark (the
 * watchdog infers a call in progress from the comm's newest record), the
 * recent[] copy and its patch (the watchdog).  Everything else -- strict
 * mode, stacks, a comm we never saw, nested calls, tracing off -- takes
 * the slow path, out of line (slow_<name>).
 */
#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/comm.h"
#include "interpose/record.h"
#include "interpose/group.h"
#include "interpose/strict.h"
#include "interpose/watchdog.h"
#include "interpose/exchange.h"

#if defined(__SANITIZE_THREAD__)
#define NTI_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NTI_TSAN 1
#endif
#endif
#ifndef NTI_TSAN
#define NTI_TSAN 0
#endif

/* ---------------------------------------------------------- common -- */

/* The seq of a new op record of comm c.  NCCL forbids using one
 * communicator from several threads at once (its docs: primitives are not
 * thread-safe, threads use separate communicators), so right now this
 * thread is the only writer of these counters: a load and a store hand out
 * unique, ordered numbers without a locked read-modify-write.  Use from
 * another thread later is ordered by whatever synchronization the
 * application needs for NCCL itself.  A program that breaks the rule races
 * inside NCCL anyway; here it could only get a repeated seq, never a torn
 * or lost record.  Atomic (relaxed) so the watchdog and the dump path
 * (nti_comm_seq_sync_all) see whole values. */
static inline __attribute__((always_inline)) uint64_t op_seq(struct nti_comm *c, int p2p, int peer, int dir) {
  uint64_t *ctr;
  if (!p2p)
    ctr = &c->coll_seq;
  else if (peer >= 0 && peer < c->np2p)
    ctr = &c->p2p_seq[dir * c->np2p + peer];
  else
    return 0;
  uint64_t seq = __atomic_load_n(ctr, __ATOMIC_RELAXED) + 1;
  __atomic_store_n(ctr, seq, __ATOMIC_RELAXED);
  return seq;
}

/* The comm of handle h: the thread's last one when it is still bound to h
 * (entries are never freed, and unbinding clears handle, so a stale cache
 * entry fails the compare), else the registry's probe. */
static inline __attribute__((always_inline)) struct nti_comm *nti_comm_lookup_cached(ncclComm_t h) {
  /* Out of fast mode (strict, stacks, Python) the slow path has a cache of
   * its own, which the gate does not look at: tested first, as only the
   * slow path calls this (in fast mode it is NULL: one test). */
  struct nti_comm *c = nti_tls.slow_comm;
  if (c && __atomic_load_n(&c->handle, __ATOMIC_RELAXED) == h)
    return c;
  c = nti_tls.last_comm;
  if (NTI_LIKELY(__atomic_load_n(&c->handle, __ATOMIC_RELAXED) == h))
    return c;
  c = nti_comm_lookup(h);
  if (c && nti_fast())
    nti_tls.last_comm = c;
  else if (c)
    nti_tls.slow_comm = c;
  return c;
}

/* The clock of the fast path: nti_proc.fast is only set with the TSC on
 * x86-64 (nti_activate), so no test; elsewhere ntr_clock_now_inline. */
static inline __attribute__((always_inline)) uint64_t nti_fast_clock(void) {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return ntr_clock_now_inline();
#endif
}

/* The slow path's first question: is a new block all the fast path
 * lacks?  Then take one (and cache the comm): @return 1 to go round again.
 * Also caches the thread id, so the fast path can read nti_tls.tid as it
 * is (a thread's first record always comes through here: its cursor is
 * empty). */
static __attribute__((noinline)) int fast_refill_do(ncclComm_t h, int dtype) {
  if ((unsigned)dtype > 0xffu)
    return 0;
  struct nti_comm *c = nti_comm_lookup_cached(h);
  if (!c || nti_tls.last_comm != c || __atomic_load_n(&c->fast_handle, __ATOMIC_RELAXED) != h)
    return 0; /* not a fast comm: a refill would only come back here */
  (void)nti_tid();
  if (NTI_UNLIKELY(!nti_tls.exit_hooked))
    nti_thread_hook();
  return ntr_ring_refill(&nti_proc.ring, &nti_tls.ring_cur) == 0 &&
         nti_tls.ring_cur.next >= __atomic_load_n(&c->next_pos, __ATOMIC_RELAXED);
}
static inline int fast_refill(ncclComm_t h, int dtype) {
  return nti_fast() && fast_refill_do(h, dtype);
}

/* Fill and publish the CALL record of an op of comm c in slot r (position
 * pos) before the real call (a call that never returns -- lazy connection
 * to a peer that never comes -- is still visible).  Each field is stored
 * once; the caller's arguments first, so they need not live on. */
static inline __attribute__((always_inline)) void fast_fill(struct nti_comm *c, struct ntr_record *r, uint64_t pos,
                                                            uint64_t prev, unsigned kind, int p2p, int dir, const void *send,
                                                            void *recv, size_t count, int dtype, int redop,
                                                            int rootpeer, void *stream) {
  r->count = count;
  r->u.buf.sendbuf = (uint64_t)(uintptr_t)send;
  r->u.buf.recvbuf = (uint64_t)(uintptr_t)recv;
  r->u.buf.stream = (uint64_t)(uintptr_t)stream;
  /* kind, phase, dtype and redop: one word (the gate took only a dtype
   * that fits its byte); peer and result (-1: in the call): one word */
  uint64_t kpd = (uint32_t)kind | (uint32_t)NTR_PHASE_CALL << 16 | (uint32_t)dtype << 24 |
                 (uint64_t)(uint32_t)(p2p ? -1 : redop) << 32;
  memcpy(&r->kind, &kpd, sizeof kpd);
  uint64_t pr = (uint64_t)(uint32_t)rootpeer | (uint64_t)UINT32_MAX << 32;
  memcpy(&r->peer, &pr, sizeof pr);
  /* A compiler barrier (no instruction): the arguments are stored first,
   * so their registers are free for what follows and need no saving. */
  __asm__ __volatile__("" ::: "memory");
  /* Release: the watchdog that reads this newest position walks the chain
   * back from it (its own record's commit orders the rest). */
  __atomic_store_n(&c->next_pos, pos + 1, __ATOMIC_RELEASE);
  /* prev = 0 (none) or more than 2^32 back: the watchdog's walk stops at
   * a link that does not lead to a record of c */
  /* stack_id and pystack_id (no sites in fast mode) and prev_gap: one word */
  uint64_t sites_gap = (uint64_t)(uint32_t)(pos + 1 - prev) << 32;
  r->seq = op_seq(c, p2p, rootpeer, dir);
  struct ntr_comm_state *cs = c->cs; /* the one load through c->cs */
  r->tsc = nti_fast_clock();
  /* tsc_done and aux are not written: tsc_done counts only with
   * NTR_REC_COMPLETED, aux means nothing for an op (recorder/format.h);
   * readers clear both (tools/reader.c). */
  r->comm_id = cs->comm_id;
  /* rank, nranks: adjacent in both structs, one word */
  uint64_t rn;
  memcpy(&rn, &cs->rank, sizeof rn);
  memcpy(&r->rank, &rn, sizeof rn);
  /* tid, group_id, group_depth | flags, fp (0: readers derive it): the
   * thread's words ORed with the comm's flags, 16 bytes at once (nti.h).
   * The tid is cached: a thread's first record always takes the slow path
   * (its cursor is empty), which caches it.  The comm's flags change only
   * when the watchdog learns its context: a racing record has the old
   * ones, as it would have a moment earlier. */
#if NTI_TSAN
  /* TSan sees the vector load of rec_flags as a plain read racing with the
   * watchdog's atomic store: the same words, through an atomic load. */
  nti_v4 tail = nti_tls.rec_tail;
  tail[2] |= __atomic_load_n(&c->rec_flags, __ATOMIC_RELAXED);
#else
  nti_v4 tail = nti_tls.rec_tail | c->rec_tail_or;
#endif
  memcpy(&r->tid, &tail, sizeof tail);
  memcpy(&r->stack_id, &sites_gap, sizeof sites_gap);
  /* Published without the recent[] copy: the watchdog copies op records
   * into their comm's recent[] a few ms later (recent_scan in
   * watchdog.c). */
  ntr_ring_publish(r, pos);
}

static inline int accepted(ncclResult_t r) {
  /* Nonblocking communicators return ncclInProgress for an op NCCL took. */
  return r == ncclSuccess || r == ncclInProgress;
}

/* After the real call.  The slot is still ours: its block stays this
 * thread's until the thread's next claim, and nothing on this thread
 * reserves meanwhile (nested wrapped calls pass through; signal handlers
 * take blocks of their own).  So the result is stored without a check.
 * The watchdog copies a record into recent[] once its result is set (or
 * after a second, and then patches its copy itself). */
/* Out of line: an op inside a group (its event and last_enqueued wait
 * for the outermost GroupEnd, group.c), or on a comm with completion
 * tracking (its event; last_enqueued).  The driver may set errno: the
 * application gets NCCL's. */
static __attribute__((noinline)) void fast_post_more(struct nti_comm *c, struct ntr_record *r, int p2p,
                                                      ncclResult_t res) {
  if (!accepted(res))
    return;
  uint64_t seq = p2p ? 0 : r->seq, pos = r->commit - 1;
  void *stream = (void *)(uintptr_t)r->u.buf.stream;
  if (nti_tls.group_depth) {
    nti_group_note_op(c, stream, seq, pos, r->tsc, p2p);
    return;
  }
  if (!p2p)
    __atomic_store_n(&c->cs->last_enqueued, seq, __ATOMIC_RELEASE);
  int saved = errno;
  /* ncclInProgress on a nonblocking comm: NCCL enqueues from its own
   * thread later; an event recorded now would precede the work. */
  if (NTI_UNLIKELY(res == ncclInProgress))
    nti_complete_defer(c, stream, seq, pos, pos, r->tsc, p2p);
  else
    nti_complete_track(c, stream, seq, pos, r->tsc, p2p, r);
  errno = saved;
}

static inline __attribute__((always_inline)) void fast_post(struct ntr_record *r, int p2p, ncclResult_t res) {
  /* Relaxed: readers copy it under the slot's seqlock. */
  __atomic_store_n(&r->result, (int32_t)res, __ATOMIC_RELAXED);
  /* Outside a group, on a comm without tracking (no driver), nothing else:
   * last_enqueued of such a comm is kept by the watchdog from the records
   * (recent_scan_comm).  Both facts are in the record's flags: one load of
   * a line just written, and c is not needed after the call. */
  if (NTI_UNLIKELY((r->flags & (NTR_REC_IN_GROUP | NTR_REC_NO_TRACKING)) != NTR_REC_NO_TRACKING))
    fast_post_more(nti_tls.last_comm, r, p2p, res); /* the comm of this call (the lookup cached it) */
}

/* ------------------------------------------------------ slow path -- */

/* Fill and publish the CALL record (slow path: strict mode, stacks, a comm
 * we do not know).  Same record as fast_pre, through nti_reserve. */
static void op_record(struct nti_op *o) {
  struct nti_comm *c = nti_comm_lookup_cached(o->comm);
  o->c = c;
  int p2p = o->kind == NTR_KIND_SEND || o->kind == NTR_KIND_RECV;
  o->seq = c ? op_seq(c, p2p, o->peer, o->dir) : 0;
  uint64_t pos;
  struct ntr_record *r = nti_reserve(&pos, c);
  uint64_t tsc = ntr_clock_now_inline();
  uint16_t flags = nti_tls.group_depth ? NTR_REC_IN_GROUP : 0;
  r->tsc = tsc;
  r->tsc_done = 0;
  r->kind = (uint16_t)o->kind;
  r->phase = NTR_PHASE_CALL;
  r->dtype = (uint8_t)o->dtype;
  r->result = -1;
  r->count = o->count;
  r->seq = o->seq;
  r->aux = 0;
  r->stack_id = 0;
  r->pystack_id = 0;
  int sites = nti_sites_on();
  if (NTI_UNLIKELY(sites)) {
    if (sites == NTI_SITES_NATIVE) /* a C program's stacks: the site cache, at once */
      r->stack_id = (uint16_t)nti_stack_id_at(o->site);
    else
      nti_sites(r, o->site); /* Python call site (and native stack) */
  }
  r->u.buf.sendbuf = (uint64_t)(uintptr_t)o->sendbuf;
  r->u.buf.recvbuf = (uint64_t)(uintptr_t)o->recvbuf;
  r->u.buf.stream = (uint64_t)(uintptr_t)o->stream;
  r->tid = nti_tid();
  r->group_depth = (uint16_t)nti_tls.group_depth;
  r->group_id = nti_tls.group_id;
  r->redop = p2p ? -1 : o->redop;
  r->peer = p2p ? o->peer : o->root;
  r->fp = 0; /* derived by readers (ntr_record_fp) */
  if (c) {
    struct ntr_comm_state *cs = c->cs;
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
    flags |= (uint16_t)(__atomic_load_n(&c->rec_flags, __ATOMIC_RELAXED) >> 16);
  } else {
    r->comm_id = 0;
    r->rank = -1;
    r->nranks = 0;
    flags |= NTR_REC_NO_TRACKING;
  }
  r->flags = flags;
  o->tsc = tsc;
  o->pos = pos;
  o->rec = r;
  nti_record_end(r, pos, NULL);
}

/* Store the result into our record.  Right after the call the slot is
 * still ours (as on the fast path) and recent[] holds a copy only if the
 * watchdog passed it (a call that took long); strict mode's replay at
 * GroupEnd comes long after, so then the slot is checked to still hold
 * the record, and recent[] too. */
static void op_result(const struct nti_op *o, ncclResult_t res, int later) {
  if (later || (o->c && NTI_UNLIKELY(nti_recent_passed(o->c, o->pos)))) {
    nti_record_patch(o->pos, o->c, (int)res, 0, 0);
    return;
  }
  /* Relaxed: readers copy it under the slot's seqlock. */
  __atomic_store_n(&o->rec->result, (int32_t)res, __ATOMIC_RELAXED);
}

static void op_post(struct nti_op *o, ncclResult_t res, int later);

/* Strict mode's replay of a buffered call (struct nti_op.replay): the
 * deferred call returned ncclSuccess to the application; what NCCL says
 * now is recorded on the original record and folded into GroupEnd's
 * result by strict.c. */
static ncclResult_t op_replay(struct nti_op *o) {
  ncclResult_t res = o->call(o);
  op_post(o, res, 1);
  return res;
}

/* Strict mode's part of op_pre, out of line: the default path never
 * enters it.  Sockets and futexes may set errno: NCCL still gets the
 * caller's. */
static __attribute__((noinline)) int op_pre_strict(struct nti_op *o, ncclResult_t (*call)(const struct nti_op *),
                                                   ncclResult_t *res) {
  int saved = errno;
  o->call = call;
  o->replay = op_replay;
  int rv = nti_strict_pre(o, res);
  if (rv && *res == ncclInvalidUsage)
    op_result(o, ncclInvalidUsage, 0);
  errno = saved;
  return rv;
}

/* @return 0: forward to NCCL; 1: do not forward, return *res. */
static int op_pre(struct nti_op *o, ncclResult_t (*call)(const struct nti_op *), ncclResult_t *res) {
  op_record(o);
  if (!nti_strict_on())
    return 0;
  return op_pre_strict(o, call, res);
}

/* Device arrival: a start event on the op's stream before the call, for a
 * collective outside a group when one is due (watchdog.c).  Slow path
 * only: a comm that gets start events never takes the fast one
 * (nti_comm_fast_off). */
static void op_start(const struct nti_op *o) {
  struct nti_comm *c = o->c;
  if (nti_tracked(c) && o->seq && !nti_tls.group_depth && o->kind != NTR_KIND_SEND &&
      o->kind != NTR_KIND_RECV && nti_start_due(c, o->seq)) {
    int saved = errno; /* the driver may set it: NCCL gets the application's */
    nti_start_track(c, o->stream, o->seq, o->pos, o->tsc);
    errno = saved;
  }
}

static void op_post(struct nti_op *o, ncclResult_t res, int later) {
  op_result(o, res, later);
  struct nti_comm *c = o->c;
  if (!c || !accepted(res))
    return;
  int p2p = o->kind == NTR_KIND_SEND || o->kind == NTR_KIND_RECV;
  if (nti_tls.group_depth) {
    nti_group_note_op(c, o->stream, p2p ? 0 : o->seq, o->pos, o->tsc, p2p);
    return;
  }
  if (!p2p)
    __atomic_store_n(&c->cs->last_enqueued, o->seq, __ATOMIC_RELEASE);
  if (nti_tracked(c)) {
    int saved = errno;
    /* ncclInProgress on a nonblocking comm: NCCL enqueues from its own
     * thread later; an event recorded now would precede the work. */
    if (NTI_UNLIKELY(res == ncclInProgress))
      nti_complete_defer(c, o->stream, p2p ? 0 : o->seq, o->pos, o->pos, o->tsc, p2p);
    else
      nti_complete_track(c, o->stream, p2p ? 0 : o->seq, o->pos, o->tsc, p2p, o->rec);
    errno = saved;
  }
}

/* The whole slow path of one wrapper call, out of line. */
static __attribute__((noinline)) ncclResult_t op_slow(struct nti_op *o, ncclResult_t (*call)(const struct nti_op *)) {
  ncclResult_t res;
  nti_tls.guard++;
  if (!op_pre(o, call, &res)) {
    op_start(o);
    res = call(o);
    op_post(o, res, 0);
  }
  nti_tls.guard--;
  return res;
}

/* ------------------------------------------------------- generation -- */

/* The real call's arguments, read back from the record just written (and
 * the comm handle from c, which the lookup matched against it): the
 * caller's argument registers then need not survive the record code, and
 * the wrapper keeps two values across the call instead of every argument.
 * The values are the caller's exactly: the record holds them whole (the
 * data type too: the fast path takes only one that fits its byte).  Every
 * parameter name the table uses is declared, as for strict mode's replay;
 * for a row, the names it does not use are unused. */
#define NTI_RECORD_ARGS(r, c)                                                    \
  const void *sendbuff = (const void *)(uintptr_t)(r)->u.buf.sendbuf;           \
  void *recvbuff = (void *)(uintptr_t)(r)->u.buf.recvbuf;                        \
  void *buff = recvbuff;                                                         \
  size_t count = (r)->count, sendcount = count, recvcount = count;               \
  ncclDataType_t datatype = (ncclDataType_t)(r)->dtype;                          \
  ncclRedOp_t op = (ncclRedOp_t)(r)->redop;                                      \
  int root = (r)->peer, peer = (r)->peer;                                        \
  ncclComm_t comm = (c)->handle;                                                 \
  cudaStream_t stream = (cudaStream_t)(uintptr_t)(r)->u.buf.stream;              \
  (void)sendbuff; (void)recvbuff; (void)buff; (void)count; (void)sendcount;      \
  (void)recvcount; (void)datatype; (void)op; (void)root; (void)peer;             \
  (void)comm; (void)stream;

/* A wrapper: `real` is resolved first so that a missing function fails the
 * same way traced or not.  Then the one test of the default path: fast
 * mode, not nested, a comm we know.  errno: the fast path makes no call
 * that can set it (no syscall, no libc call), so NCCL sees the
 * application's errno and the application sees NCCL's without a save and
 * restore (two __errno_location calls through the PLT); the paths that can
 * touch it (strict mode, stacks, completion events) keep it themselves.
 * The slow path builds a struct nti_op (everything the slow path and
 * strict mode's replay need) and goes out of line; the replay function
 * (below) makes the real call from it. */
#define NTI_WRAP(name, KIND, P2P, DIR, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_rootpeer,  \
                 a_comm, a_stream, fill)                                                                      \
  static ncclResult_t replay_##name(const struct nti_op *o);                                                \
  static __attribute__((noinline, cold)) ncclResult_t slow_##name params {                                     \
    nti_fn_##name##_t real = NTI_REAL(name);                                                                 \
    if (NTI_UNLIKELY(!real))                                                                                 \
      return ncclInvalidUsage;                                                                               \
    if (!nti_active() || nti_tls.guard)                                                                      \
      return real args;                                                                                      \
    /* Only the thread's block ran out (once per NTR_RING_BLOCK calls): a  \
     * fresh one, and the fast path again. */                              \
    if (fast_refill(a_comm, a_dtype))                                                                        \
      return name args;                                                                                      \
    struct nti_op nti_o;                                                                                     \
    fill;                                                                                                    \
    /* The wrapper reached us by a tail call: our return address is the  \
     * application's call site (for the stack cache). */                  \
    nti_o.site = __builtin_return_address(0);                                                                \
    return op_slow(&nti_o, replay_##name);                                                                   \
  }                                                                                                          \
  /* The one test of the default path (the cached comm, which implies    \
   * fast mode; not nested; a slot in the thread's block), then the       \
   * record, the call and                                                  \
   * the result; anything else goes to the slow path by a tail call. */    \
  NTI_EXPORT ncclResult_t name params {                                                                      \
    nti_fn_##name##_t real = __atomic_load_n(&nti_real_##name, __ATOMIC_ACQUIRE);                           \
    struct nti_comm *c = nti_tls.last_comm; /* cached only in fast mode */                                   \
    uint64_t pos = nti_tls.ring_cur.next, prev;                                                              \
    if (NTI_UNLIKELY(__atomic_load_n(&c->fast_handle, __ATOMIC_RELAXED) != (a_comm) || !real || nti_tls.guard || \
                     (unsigned)(a_dtype) > 0xffu ||                                                          \
                     pos >= nti_tls.ring_cur.end ||                                                          \
                     pos < (prev = __atomic_load_n(&c->next_pos, __ATOMIC_RELAXED)) ||                       \
                     __atomic_load_n(nti_tls.ring_cur.word, __ATOMIC_RELAXED) != nti_tls.ring_cur.open))     \
      return slow_##name args;                                                                               \
    nti_tls.ring_cur.next = pos + 1;                                                                         \
    struct ntr_record *r = nti_tls.ring_cur.slot++;                                                          \
    /* Relaxed: ordered by the fence (recorder/ring.h: ntr_ring_open_slot). */                               \
    __atomic_store_n(&r->commit, NTR_COMMIT_WRITING, __ATOMIC_RELAXED);                                      \
    NTR_FENCE_RELEASE();                                                                                     \
    nti_tls.guard = 1;                                                                                       \
    fast_fill(c, r, pos, prev, NTR_KIND_##KIND, P2P, DIR, (const void *)(a_send), (void *)(a_recv),         \
              (a_count), (int)(a_dtype), (int)(a_redop), (a_rootpeer), (void *)(a_stream));                  \
    ncclResult_t res;                                                                                        \
    {                                                                                                        \
      NTI_RECORD_ARGS(r, c)                                                                                  \
      res = real args;                                                                                       \
    }                                                                                                        \
    fast_post(r, P2P, res);                                                                                  \
    nti_tls.guard = 0;                                                                                       \
    return res;                                                                                              \
  }

#define NT_COLL(name, KIND, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm, a_stream) \
  NTI_WRAP(name, KIND, 0, 0, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm,      \
           a_stream,                                                                                         \
           (nti_o.kind = NTR_KIND_##KIND,                                          \
            nti_o.sendbuf = (const void *)(a_send), nti_o.recvbuf = (void *)(a_recv),                        \
            nti_o.count = (a_count), nti_o.dtype = (int)(a_dtype), nti_o.redop = (int)(a_redop),             \
            nti_o.root = (a_root), nti_o.peer = -1, nti_o.dir = 0, nti_o.comm = (a_comm),                    \
            nti_o.stream = (void *)(a_stream), nti_o.config = NULL, nti_o.config_kept = 0))
/* The per-call-config collectives: the twin's kind, seq and fingerprint,
 * through the same code; the config goes to NCCL as the caller passed it
 * (the fast path keeps it live across the record, the slow path in the op). */
#define NT_COLL_CFG(name, KIND, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm,     \
                    a_stream, a_config)                                                                       \
  NTI_WRAP(name, KIND, 0, 0, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm,      \
           a_stream,                                                                                         \
           (nti_o.kind = NTR_KIND_##KIND,                                                                   \
            nti_o.sendbuf = (const void *)(a_send), nti_o.recvbuf = (void *)(a_recv),                        \
            nti_o.count = (a_count), nti_o.dtype = (int)(a_dtype), nti_o.redop = (int)(a_redop),             \
            nti_o.root = (a_root), nti_o.peer = -1, nti_o.dir = 0, nti_o.comm = (a_comm),                    \
            nti_o.stream = (void *)(a_stream), nti_o.config = (const void *)(a_config),                     \
            nti_o.config_kept = 0))
#define NT_P2P(name, KIND, params, args, a_buf, a_count, a_dtype, a_peer, a_comm, a_stream)                 \
  NTI_WRAP(name, KIND, 1, NTR_KIND_##KIND == NTR_KIND_RECV, params, args, a_buf, a_buf, a_count, a_dtype,   \
           -1, a_peer, a_comm, a_stream,                                                                     \
           (nti_o.kind = NTR_KIND_##KIND,                                          \
            nti_o.sendbuf = (const void *)(a_buf), nti_o.recvbuf = (void *)(a_buf),                          \
            nti_o.count = (a_count), nti_o.dtype = (int)(a_dtype), nti_o.redop = -1, nti_o.root = -1,        \
            nti_o.peer = (a_peer), nti_o.dir = NTR_KIND_##KIND == NTR_KIND_RECV, nti_o.comm = (a_comm),      \
            nti_o.stream = (void *)(a_stream), nti_o.config = NULL, nti_o.config_kept = 0))
#include "recorder/nccl_api.def"

/* ----------------------------------------------------------- replay -- */

/* The real call from an op's fields (struct nti_op.call): the slow path's
 * call, and strict mode's replay at the outermost GroupEnd.  The row's
 * argument list names NCCL's parameters; these locals carry every name the
 * table uses, so `real args` compiles for each row (a row with a new name
 * fails to build here, loudly, instead of replaying garbage). */
#define NTI_REPLAY_LOCALS(o)                                                 \
  const void *sendbuff = (o)->sendbuf;                                       \
  void *recvbuff = (o)->recvbuf;                                             \
  void *buff = (o)->recvbuf;                                                 \
  size_t count = (o)->count, sendcount = (o)->count, recvcount = (o)->count; \
  ncclDataType_t datatype = (ncclDataType_t)(o)->dtype;                      \
  ncclRedOp_t op = (ncclRedOp_t)(o)->redop;                                  \
  int root = (o)->root, peer = (o)->peer;                                    \
  ncclComm_t comm = (o)->comm;                                               \
  cudaStream_t stream = (cudaStream_t)(o)->stream;                           \
  const ncclCollConfig_t *config = (o)->config_kept                          \
      ? (const ncclCollConfig_t *)(const void *)(o)->config_copy             \
      : (const ncclCollConfig_t *)(o)->config;                               \
  (void)sendbuff; (void)recvbuff; (void)buff; (void)count; (void)sendcount;  \
  (void)recvcount; (void)datatype; (void)op; (void)root; (void)peer;         \
  (void)comm; (void)stream; (void)config;

#define NT_COLL(name, KIND, params, args, ...)                               \
  static ncclResult_t replay_##name(const struct nti_op *o) {                \
    NTI_REPLAY_LOCALS(o)                                                     \
    nti_fn_##name##_t real = NTI_REAL(name);                                 \
    return real ? real args : ncclInvalidUsage;                              \
  }
#define NT_P2P NT_COLL
#define NT_COLL_CFG NT_COLL
#include "recorder/nccl_api.def"
