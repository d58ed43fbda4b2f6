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
 * registry lookup (lock-free probe), one fetch_add for the seq, the clock,
 * ring reserve/commit, the real call, a result store, and the completion
 * event (watchdog.c).  No lock, no allocation, no stdio, no syscall of ours.
 */
#include "interpose/nti.h"
#include "interpose/exchange.h"

/* ---------------------------------------------------------- common -- */

/* Fill and publish the CALL record before the real call: a call that never
 * returns (lazy connection to a peer that never comes) is still visible. */
static void op_record(struct nti_op *o) {
  struct nti_comm *c = nti_comm_lookup(o->comm);
  o->c = c;
  int p2p = o->kind == NTR_KIND_SEND || o->kind == NTR_KIND_RECV;
  if (c && !p2p) {
    /* Relaxed: the counter only has to hand out unique, ordered numbers;
     * readers of the mapping accept a stale value. */
    o->seq = __atomic_add_fetch(&c->cs->coll_seq, 1, __ATOMIC_RELAXED);
  } else if (c && p2p && o->peer >= 0 && o->peer < c->np2p) {
    o->seq = __atomic_add_fetch(&c->p2p_seq[o->dir * c->np2p + o->peer], 1, __ATOMIC_RELAXED);
  } else {
    o->seq = 0;
  }
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, o->kind, NTR_PHASE_CALL, c);
  r->seq = o->seq;
  r->count = o->count;
  r->dtype = (uint8_t)o->dtype;
  r->u.buf.sendbuf = (uint64_t)(uintptr_t)o->sendbuf;
  r->u.buf.recvbuf = (uint64_t)(uintptr_t)o->recvbuf;
  r->u.buf.stream = (uint64_t)(uintptr_t)o->stream;
  if (p2p) {
    r->peer = o->peer;
    r->fp = nti_fp_p2p(o->seq, o->count, o->dtype, o->peer, o->dir);
  } else {
    r->redop = o->redop;
    r->peer = o->root;
    r->fp = nti_fp_coll(o->kind, o->count, o->dtype, o->redop, o->root);
  }
  if (NTI_UNLIKELY(ntr_cfg.stacks))
    r->stack_id = nti_stack_id();
  if (!nti_tracked(c))
    r->flags |= NTR_REC_NO_TRACKING; /* said once at startup; no patch later */
  o->tsc = r->tsc;
  o->pos = pos;
  o->rec = r;
  /* Published without the recent[] copy: the watchdog copies collective
   * and p2p records into their comm's recent[] a few ms later
   * (nti_recent_scan), which takes two atomic RMWs and a 128-byte copy off
   * every call.  The main ring has the record at once either way. */
  nti_record_end(r, pos, NULL);
}

/* Store the result into our record.  The watchdog copies a record into
 * recent[] only once its result is set (or after a second); if it already
 * passed this one, its copy is patched too (rare: a call that took long). */
static void op_result(const struct nti_op *o, ncclResult_t res) {
  struct ntr_record *r = o->rec;
  if (__atomic_load_n(&r->commit, __ATOMIC_ACQUIRE) == o->pos + 1)
    __atomic_store_n(&r->result, (int32_t)res, __ATOMIC_RELAXED);
  if (o->c && NTI_UNLIKELY(nti_recent_passed(o->pos)))
    nti_record_patch(o->pos, o->c, (int)res, 0, 0);
}

/* Mark the comm blocked in this call while NCCL has it: a collective can
 * block inside the call (NCCL connects to peers lazily, at the first op
 * that needs them), and the watchdog times that out like a lifecycle call.
 * Plain stores to a line the seq counter already brought in; a blocked
 * mark of a lifecycle call in progress (nonblocking init) is left alone. */
static int op_block(struct nti_op *o) {
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

/* @return 0: forward to NCCL; 1: do not forward, return *res. */
static int op_pre(struct nti_op *o, ncclResult_t *res) {
  op_record(o);
  if (NTI_LIKELY(!nti_strict_on()))
    return op_block(o);
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

static inline int accepted(ncclResult_t r) {
  /* Nonblocking communicators return ncclInProgress for an op NCCL took. */
  return r == ncclSuccess || r == ncclInProgress;
}

static void op_post(struct nti_op *o, ncclResult_t res) {
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
  nti_complete_track(c, o->stream, p2p ? 0 : o->seq, o->pos, o->tsc, p2p, o->rec);
}

/* ------------------------------------------------------- generation -- */

/* The wrapper body shared by collectives and p2p.  `real` is resolved first
 * so that a missing function fails the same way traced or not. */
#define NTI_OP_BODY(name, args)                                              \
  nti_fn_##name##_t real = NTI_REAL(name);                                   \
  if (NTI_UNLIKELY(!real))                                                   \
    return ncclInvalidUsage;                                                 \
  if (NTI_UNLIKELY(!nti_g.active || nti_tls.guard))                          \
    return real args;                                                        \
  int nti_errno = errno;                                                     \
  ncclResult_t nti_res;                                                      \
  nti_tls.guard++;                                                           \
  if (!op_pre(&nti_o, &nti_res)) {                                           \
    errno = nti_errno;                                                       \
    nti_res = real args;                                                     \
    nti_errno = errno;                                                       \
    op_post(&nti_o, nti_res);                                                \
  }                                                                          \
  nti_tls.guard--;                                                           \
  errno = nti_errno;                                                         \
  return nti_res;

#define NT_COLL(name, KIND, params, args, a_send, a_recv, a_count, a_dtype, a_redop, a_root, a_comm, a_stream) \
  NTI_EXPORT ncclResult_t name params {                                      \
    struct nti_op nti_o = {.fn = NTI_FN_##name, .kind = NTR_KIND_##KIND,     \
                           .sendbuf = (const void *)(a_send),                \
                           .recvbuf = (void *)(a_recv),                      \
                           .count = (a_count), .dtype = (int)(a_dtype),      \
                           .redop = (int)(a_redop), .root = (a_root),        \
                           .peer = -1, .comm = (a_comm),                     \
                           .stream = (void *)(a_stream)};                    \
    NTI_OP_BODY(name, args)                                                  \
  }
#define NT_P2P(name, KIND, params, args, a_buf, a_count, a_dtype, a_peer, a_comm, a_stream) \
  NTI_EXPORT ncclResult_t name params {                                      \
    struct nti_op nti_o = {.fn = NTI_FN_##name, .kind = NTR_KIND_##KIND,     \
                           .sendbuf = (const void *)(a_buf),                 \
                           .recvbuf = (void *)(a_buf),                       \
                           .count = (a_count), .dtype = (int)(a_dtype),      \
                           .redop = -1, .root = -1, .peer = (a_peer),        \
                           .dir = NTR_KIND_##KIND == NTR_KIND_RECV,          \
                           .comm = (a_comm), .stream = (void *)(a_stream)};  \
    NTI_OP_BODY(name, args)                                                  \
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
