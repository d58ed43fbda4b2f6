/* wrappers.c -- the collective, point-to-point and group wrappers, generated
 * from interpose/nccl_api.def (lifecycle wrappers: lifecycle.c).
 *
 * Thread-safety: every wrapper may run on any thread concurrently.  Shared
 * state is touched with atomics only (comm seq counters, the ring); group
 * state is per thread.
 * Signal-safety: wrappers are not meant to be called from signal handlers
 * (NCCL itself is not signal-safe).
 *
 * Hot path of a collective in the default configuration: TLS guard check,
 * registry lookup (lock-free probe), the seq (load + store: one thread per
 * comm at a time, see op_record), the clock, ring reserve/commit, the real
 * call, a result store, and the completion event when a driver is loaded
 * (watchdog.c).  No lock, no allocation, no stdio, no syscall of ours; all
 * of it inlined into each wrapper.
 */
#include "interpose/nti.h"
#include "interpose/exchange.h"

/* ---------------------------------------------------------- common -- */

/* Fill and publish the CALL record before the real call: a call that never
 * returns (lazy connection to a peer that never comes) is still visible.
 * Inlined into every wrapper; each field of the record is stored once. */
static inline __attribute__((always_inline)) void op_record(struct nti_op *o) {
  struct nti_comm *c = nti_comm_lookup(o->comm);
  o->c = c;
  int p2p = o->kind == NTR_KIND_SEND || o->kind == NTR_KIND_RECV;
  uint64_t *ctr = NULL;
  if (c && !p2p)
    ctr = &c->cs->coll_seq;
  else if (c && p2p && o->peer >= 0 && o->peer < c->np2p)
    ctr = &c->p2p_seq[o->dir * c->np2p + o->peer];
  /* NCCL forbids using one communicator from several threads at once
   * (its docs: primitives are not thread-safe, threads use separate
   * communicators), so right now this thread is the only writer of these
   * counters: a load and a store hand out unique, ordered numbers without
   * a locked read-modify-write.  Use from another thread later is ordered
   * by whatever synchronization the application needs for NCCL itself.  A
   * program that breaks the rule races inside NCCL anyway; here it could
   * only get a repeated seq, never a torn or lost record.  Atomic (relaxed)
   * so the watchdog and readers of the mapping see whole values. */
  o->seq = 0;
  if (ctr) {
    o->seq = __atomic_load_n(ctr, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(ctr, o->seq, __ATOMIC_RELAXED);
  }
  uint64_t pos;
  struct ntr_record *r = nti_reserve(&pos, c);
  uint64_t tsc = ntr_clock_now_inline();
  uint16_t flags = nti_tls.group_depth ? NTR_REC_IN_GROUP : 0;
  if (!nti_tracked(c))
    flags |= NTR_REC_NO_TRACKING; /* said once at startup; no patch later */
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
  if (NTI_UNLIKELY(nti_sites_on()))
    nti_sites(r); /* native stack and/or Python call site */
  r->u.buf.sendbuf = (uint64_t)(uintptr_t)o->sendbuf;
  r->u.buf.recvbuf = (uint64_t)(uintptr_t)o->recvbuf;
  r->u.buf.stream = (uint64_t)(uintptr_t)o->stream;
  r->tid = nti_tid();
  r->group_depth = (uint16_t)nti_tls.group_depth;
  r->group_id = nti_tls.group_id;
  if (p2p) {
    r->redop = -1;
    r->peer = o->peer;
    r->fp = nti_fp_p2p(o->seq, o->count, o->dtype, o->peer, o->dir);
  } else {
    r->redop = o->redop;
    r->peer = o->root;
    r->fp = nti_fp_coll(o->kind, o->count, o->dtype, o->redop, o->root);
  }
  if (c) {
    r->comm_id = c->cs->comm_id;
    r->rank = c->cs->rank;
    r->nranks = c->cs->nranks;
    if (c->nonblocking)
      flags |= NTR_REC_NONBLOCKING;
  } else {
    r->comm_id = 0;
    r->rank = -1;
    r->nranks = 0;
  }
  r->flags = flags;
  o->tsc = tsc;
  o->pos = pos;
  o->rec = r;
  /* Published without the recent[] copy: the watchdog copies collective
   * and p2p records into their comm's recent[] a few ms later
   * (recent_scan in watchdog.c), which takes two atomic RMWs and a 128-byte copy off
   * every call.  The main ring has the record at once either way. */
  nti_record_end(r, pos, NULL);
}

/* Store the result into our record.  The watchdog copies a record into
 * recent[] only once its result is set (or after a second); if it already
 * passed this one, its copy is patched too (rare: a call that took long). */
static inline __attribute__((always_inline)) void op_result(const struct nti_op *o, ncclResult_t res) {
  struct ntr_record *r = o->rec;
  if (__atomic_load_n(&r->commit, __ATOMIC_ACQUIRE) == o->pos + 1)
    __atomic_store_n(&r->result, (int32_t)res, __ATOMIC_RELAXED);
  if (o->c && NTI_UNLIKELY(nti_recent_passed(o->c, o->pos)))
    nti_record_patch(o->pos, o->c, (int)res, 0, 0);
}

/* Mark the comm blocked in this call while NCCL has it: a collective can
 * block inside the call (NCCL connects to peers lazily, at the first op
 * that needs them), and the watchdog times that out like a lifecycle call.
 * Plain stores to a line the seq counter already brought in; a blocked
 * mark of a lifecycle call in progress (nonblocking init) is left alone. */
static inline __attribute__((always_inline)) int op_block(struct nti_op *o) {
  struct ntr_comm_state *cs = o->c ? o->c->cs : NULL;
  if (cs && !__atomic_load_n(&cs->blocked_since, __ATOMIC_RELAXED)) {
    cs->blocked_kind = o->kind;
    cs->blocked_tid = nti_tid();
    /* Release: kind/tid are visible to a reader that sees blocked_since. */
    __atomic_store_n(&cs->blocked_since, o->tsc, __ATOMIC_RELEASE);
    o->blocked = 1;
  }
  return 0;
}

/* Strict mode's part of op_pre, out of line: the default path never
 * enters it. */
static __attribute__((noinline)) int op_pre_strict_inner(struct nti_op *o, ncclResult_t *res) {
  if (nti_tls.group_depth) {
    if (nti_strict_defer(o) == 0) {
      *res = ncclSuccess;
      return 1;
    }
    return op_block(o);
  }
  if (nti_strict_single(o) < 0) {
    *res = ncclInvalidUsage;
    op_result(o, ncclInvalidUsage);
    return 1;
  }
  return op_block(o);
}

/* Sockets and futexes may set errno: NCCL still gets the caller's. */
static __attribute__((noinline)) int op_pre_strict(struct nti_op *o, ncclResult_t *res) {
  int saved = errno;
  int rv = op_pre_strict_inner(o, res);
  errno = saved;
  return rv;
}

/* @return 0: forward to NCCL; 1: do not forward, return *res. */
static inline __attribute__((always_inline)) int op_pre(struct nti_op *o, ncclResult_t *res) {
  op_record(o);
  if (NTI_LIKELY(!nti_strict_on()))
    return op_block(o);
  /* A copy goes out of line, so the wrapper's op never has its address
   * taken on the default path and stays in registers. */
  struct nti_op copy = *o;
  int rv = op_pre_strict(&copy, res);
  *o = copy;
  return rv;
}

/* Device arrival: a start event on the op's stream before the call, for a
 * collective outside a group when one is due (watchdog.c). */
static inline __attribute__((always_inline)) void op_start(const struct nti_op *o) {
  struct nti_comm *c = o->c;
  if (c && o->seq && !nti_tls.group_depth && o->kind != NTR_KIND_SEND && o->kind != NTR_KIND_RECV &&
      nti_tracked(c) && nti_start_due(c, o->seq)) {
    int saved = errno; /* the driver may set it: NCCL gets the application's */
    nti_start_track(c, o->stream, o->seq, o->pos, o->tsc);
    errno = saved;
  }
}

static inline int accepted(ncclResult_t r) {
  /* Nonblocking communicators return ncclInProgress for an op NCCL took. */
  return r == ncclSuccess || r == ncclInProgress;
}

static inline __attribute__((always_inline)) void op_post(struct nti_op *o, ncclResult_t res) {
  op_result(o, res);
  struct nti_comm *c = o->c;
  if (o->blocked && __atomic_load_n(&c->cs->blocked_since, __ATOMIC_RELAXED) == o->tsc)
    __atomic_store_n(&c->cs->blocked_since, 0, __ATOMIC_RELEASE);
  if (!c || !accepted(res))
    return;
  int p2p = o->kind == NTR_KIND_SEND || o->kind == NTR_KIND_RECV;
  if (nti_tls.group_depth) {
    /* Inside a group nothing reaches the stream before the outermost
     * GroupEnd: the event is recorded there (group.c). */
    nti_group_note_op(c, o->stream, p2p ? 0 : o->seq, o->pos, o->tsc, p2p);
    return;
  }
  if (!p2p) {
    __atomic_store_n(&c->cs->last_enqueued, o->seq, __ATOMIC_RELEASE);
    __atomic_store_n(&c->cs->last_enqueue_tsc, o->tsc, __ATOMIC_RELAXED);
  }
  /* Without a driver (or a context) there is no event work at all.  The
   * driver may set errno: the application gets NCCL's. */
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

/* ------------------------------------------------------- generation -- */

/* The wrapper body shared by collectives and p2p.  `real` is resolved first
 * so that a missing function fails the same way traced or not.  errno: the
 * default path makes no call that can set it (no syscall, no libc call), so
 * NCCL sees the application's errno and the application sees NCCL's without
 * a save and restore here (two __errno_location calls through the PLT); the
 * paths that can touch it (strict mode, stacks, completion events) keep it
 * themselves (op_pre_strict, op_post, nti_stack_id).  The op is
 * filled field by field after the pass-through test: an initializer would
 * zero the whole struct first (a `rep stos` on every call, traced or not);
 * the fields left out here are written by op_record before any use. */
#define NTI_OP_BODY(name, args, fill)                                        \
  nti_fn_##name##_t real = NTI_REAL(name);                                   \
  if (NTI_UNLIKELY(!real))                                                   \
    return ncclInvalidUsage;                                                 \
  if (NTI_UNLIKELY(!nti_active() || nti_tls.guard))                        \
    return real args;                                                        \
  ncclResult_t nti_res;                                                      \
  struct nti_op nti_o;                                                       \
  fill;                                                                      \
  nti_o.blocked = 0;                                                         \
  nti_tls.guard++;                                                           \
  if (!op_pre(&nti_o, &nti_res)) {                                           \
    op_start(&nti_o);                                                        \
    nti_res = real args;                                                     \
    op_post(&nti_o, nti_res);                                                \
  }                                                                          \
  nti_tls.guard--;                                                           \
  return nti_res;

#define NT_COLL(name, KIND, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm, a_stream) \
  NTI_EXPORT ncclResult_t name params {                                      \
    NTI_OP_BODY(name, args,                                                  \
                (nti_o.fn = NTI_FN_##name, nti_o.kind = NTR_KIND_##KIND,     \
                 nti_o.sendbuf = (const void *)(a_send),                     \
                 nti_o.recvbuf = (void *)(a_recv),                           \
                 nti_o.count = (a_count), nti_o.dtype = (int)(a_dtype),      \
                 nti_o.redop = (int)(a_redop), nti_o.root = (a_root),        \
                 nti_o.peer = -1, nti_o.dir = 0, nti_o.comm = (a_comm),      \
                 nti_o.stream = (void *)(a_stream)))                         \
  }
#define NT_P2P(name, KIND, params, args, a_buf, a_count, a_dtype, a_peer, a_comm, a_stream) \
  NTI_EXPORT ncclResult_t name params {                                      \
    NTI_OP_BODY(name, args,                                                  \
                (nti_o.fn = NTI_FN_##name, nti_o.kind = NTR_KIND_##KIND,     \
                 nti_o.sendbuf = (const void *)(a_buf),                      \
                 nti_o.recvbuf = (void *)(a_buf),                            \
                 nti_o.count = (a_count), nti_o.dtype = (int)(a_dtype),      \
                 nti_o.redop = -1, nti_o.root = -1, nti_o.peer = (a_peer),   \
                 nti_o.dir = NTR_KIND_##KIND == NTR_KIND_RECV,               \
                 nti_o.comm = (a_comm), nti_o.stream = (void *)(a_stream)))  \
  }
#define NT_GROUP(...)
#define NT_LIFE(...)
#include "interpose/nccl_api.def"
#undef NT_COLL
#undef NT_P2P
#undef NT_GROUP
#undef NT_LIFE

/* ----------------------------------------------------------- replay -- */

/* Strict mode replays a buffered call at the outermost GroupEnd.  The row's
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
  (void)sendbuff; (void)recvbuff; (void)buff; (void)count; (void)sendcount;  \
  (void)recvcount; (void)datatype; (void)op; (void)root; (void)peer;         \
  (void)comm; (void)stream;

#define NT_COLL(name, KIND, params, args, ...)                               \
  static ncclResult_t replay_##name(const struct nti_op *o) {                \
    NTI_REPLAY_LOCALS(o)                                                     \
    nti_fn_##name##_t real = NTI_REAL(name);                                 \
    return real ? real args : ncclInvalidUsage;                              \
  }
#define NT_P2P NT_COLL
#define NT_GROUP(...)
#define NT_LIFE(...)
#include "interpose/nccl_api.def"
#undef NT_COLL
#undef NT_P2P
#undef NT_GROUP
#undef NT_LIFE

ncclResult_t nti_replay(const struct nti_op *o) {
  ncclResult_t res;
  switch (o->fn) {
#define NT_COLL(name, ...)                                                   \
  case NTI_FN_##name:                                                        \
    res = replay_##name(o);                                                  \
    break;
#define NT_P2P NT_COLL
#define NT_GROUP(...)
#define NT_LIFE(...)
#include "interpose/nccl_api.def"
#undef NT_COLL
#undef NT_P2P
#undef NT_GROUP
#undef NT_LIFE
  default:
    return ncclInternalError;
  }
  /* The deferred call returned ncclSuccess to the application; what NCCL
   * says now is recorded on the original record and folded into GroupEnd's
   * result by the caller. */
  op_post((struct nti_op *)o, res);
  return res;
}
