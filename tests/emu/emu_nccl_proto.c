/* emu_nccl_proto.c -- the data-movement protocols, run on stream workers.
 *
 * Thread-safety: an op is stepped by exactly one stream worker; it touches
 * its communicator only through atomics and shared-memory mailboxes (see
 * emu_nccl.h for the mailbox handshake).  Not async-signal-safe.
 *
 * Matching is by POSITION: the k-th collective of every rank uses mailbox
 * slot k % EMU_SLOTS and tags its posts with k.  A rank that needs a peer's
 * post and finds a different operation there (another kind, count, dtype,
 * op or root), or a later position, waits forever: as on NCCL, a mismatch
 * is never reported, it hangs -- or completes on the ranks whose protocol
 * needs nothing from the others (a Broadcast root only publishes).
 */
#include "emu_nccl.h"
#include "emu_nccl_prof.h"

#include <signal.h>
#include <unistd.h>

#include <errno.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

static struct emu_mbox *emu_mbox_at(struct ncclComm *c, size_t idx)
{
  return (struct emu_mbox *)((char *)c->shm + emu_shm_coll_off() + idx * sizeof(struct emu_mbox));
}

static struct emu_mbox *emu_coll_mbox(struct ncclComm *c, uint64_t seq, int rank)
{
  return emu_mbox_at(c, (size_t)(seq % EMU_SLOTS) * (size_t)c->nranks + (size_t)rank);
}

static struct emu_mbox *emu_p2p_mbox(struct ncclComm *c, int src, int dst)
{
  return emu_mbox_at(c, (size_t)EMU_SLOTS * (size_t)c->nranks + (size_t)src * (size_t)c->nranks + (size_t)dst);
}

static uint64_t emu_tag(uint64_t seq, uint64_t round) { return (seq << 24) | round; }

static bool emu_is_blocked_kind(int kind)
{
  return kind == EMU_K_REDUCESCATTER || kind == EMU_K_ALLTOALL || kind == EMU_K_SCATTER;
}

static bool emu_is_coll(int kind) { return kind != EMU_K_SEND && kind != EMU_K_RECV; }

/* Elements per round (per destination block for the blocked kinds). */
static size_t emu_round_elems(const struct emu_op *op)
{
  size_t sz = emu_dtype_size(op->dtype);
  size_t e = EMU_CHUNK / sz;
  if (emu_is_blocked_kind(op->kind))
    e /= (size_t)op->comm->nranks;
  return e ? e : 1;
}

/* Who reads my post, and whose posts I need, for this kind and role. */
static uint32_t emu_readers(const struct emu_op *op)
{
  int n = op->comm->nranks, me = op->comm->rank;
  switch (op->kind) {
  case EMU_K_BROADCAST: case EMU_K_SCATTER: return me == op->root ? (uint32_t)(n - 1) : 0;
  case EMU_K_REDUCE: case EMU_K_GATHER: return me == op->root ? 0 : 1;
  default: return (uint32_t)(n - 1);
  }
}

static bool emu_needs(const struct emu_op *op, int p)
{
  int me = op->comm->rank;
  if (p == me)
    return false;
  switch (op->kind) {
  case EMU_K_BROADCAST: case EMU_K_SCATTER: return me != op->root && p == op->root;
  case EMU_K_REDUCE: case EMU_K_GATHER: return me == op->root;
  default: return true;
  }
}

static bool emu_has_root(int kind)
{
  return kind == EMU_K_BROADCAST || kind == EMU_K_REDUCE || kind == EMU_K_GATHER || kind == EMU_K_SCATTER;
}

static bool emu_has_redop(int kind)
{
  return kind == EMU_K_ALLREDUCE || kind == EMU_K_REDUCE || kind == EMU_K_REDUCESCATTER;
}

static bool emu_compatible(const struct emu_op *op, const struct emu_desc *d)
{
  if (d->kind != op->kind || d->count != op->count || d->dtype != op->dtype)
    return false;
  if (emu_has_root(op->kind) && d->root != op->root)
    return false;
  if (emu_has_redop(op->kind) && d->redop != op->redop)
    return false;
  return true;
}

/* Copy (or premultiply) `m` elements of this rank's contribution. */
static void emu_put(const struct emu_op *op, void *dst, const void *src, size_t m)
{
  if (op->premul)
    emu_red_premul(dst, src, m, op->dtype, op->scalar);
  else
    memcpy(dst, src, m * emu_dtype_size(op->dtype));
}

static int emu_post(struct emu_op *op, size_t lo, size_t m)
{
  struct ncclComm *c = op->comm;
  struct emu_mbox *mb = emu_coll_mbox(c, op->seq, c->rank);
  /* Pairs with the readers' release increment of acks. */
  if (atomic_load_explicit(&mb->acks, memory_order_acquire) != atomic_load_explicit(&mb->readers, memory_order_relaxed))
    return EMU_STEP_BLOCKED;
  size_t sz = emu_dtype_size(op->dtype);
  int n = c->nranks, me = c->rank;
  const char *sb = op->sendbuff;
  size_t bytes = 0;
  switch (op->kind) {
  case EMU_K_ALLREDUCE: case EMU_K_REDUCE: case EMU_K_ALLGATHER: case EMU_K_GATHER:
    emu_put(op, mb->data, sb + lo * sz, m);
    bytes = m * sz;
    break;
  case EMU_K_BROADCAST:
    if (me == op->root) {
      memcpy(mb->data, sb + lo * sz, m * sz);
      bytes = m * sz;
      if (op->recvbuff != op->sendbuff)
        memmove((char *)op->recvbuff + lo * sz, sb + lo * sz, m * sz);
    }
    break;
  case EMU_K_SCATTER:
    if (me != op->root)
      break;
    memmove((char *)op->recvbuff + lo * sz, sb + ((size_t)me * op->count + lo) * sz, m * sz);
    /* the root posts every destination's block */
    __attribute__((fallthrough));
  case EMU_K_REDUCESCATTER: case EMU_K_ALLTOALL:
    for (int d = 0; d < n; d++)
      emu_put(op, mb->data + (size_t)d * m * sz, sb + ((size_t)d * op->count + lo) * sz, m);
    bytes = (size_t)n * m * sz;
    break;
  default:
    break;
  }
  mb->desc.kind = op->kind;
  mb->desc.count = op->count;
  mb->desc.dtype = op->dtype;
  mb->desc.redop = op->redop;
  mb->desc.root = op->root;
  mb->bytes = bytes;
  atomic_store_explicit(&mb->acks, 0, memory_order_relaxed);
  atomic_store_explicit(&mb->readers, emu_readers(op), memory_order_relaxed);
  /* Publishes desc, data, readers and acks to the peers' acquire of tag. */
  atomic_store_explicit(&mb->tag, emu_tag(op->seq, op->round), memory_order_release);
  emu_comm_bell(c);
  return EMU_STEP_PROGRESS;
}

/* Returns BLOCKED until every needed peer posted this round; marks the op
 * hung if a peer posted something else at this position. */
static int emu_gather(struct emu_op *op, size_t lo, size_t m)
{
  struct ncclComm *c = op->comm;
  int n = c->nranks, me = c->rank;
  uint64_t want = emu_tag(op->seq, op->round);
  for (int p = 0; p < n; p++) {
    if (!emu_needs(op, p))
      continue;
    struct emu_mbox *mb = emu_coll_mbox(c, op->seq, p);
    uint64_t t = atomic_load_explicit(&mb->tag, memory_order_acquire);
    if (t < want)
      return EMU_STEP_BLOCKED;
    if (t > want || !emu_compatible(op, &mb->desc)) {
      if (!op->hung && emu_verbose())
        emu_log("rank %d: collective #%llu does not match rank %d's post: waiting forever", me,
                (unsigned long long)op->seq, p);
      op->hung = true;
      return EMU_STEP_BLOCKED;
    }
  }
  size_t sz = emu_dtype_size(op->dtype);
  char *rb = op->recvbuff;
  switch (op->kind) {
  case EMU_K_ALLREDUCE: case EMU_K_REDUCE: case EMU_K_REDUCESCATTER: {
    if (op->kind == EMU_K_REDUCE && me != op->root)
      break;
    /* Rank order, so every rank computes bit-identical results. */
    size_t off = op->kind == EMU_K_REDUCESCATTER ? (size_t)me * m * sz : 0;
    char *acc = rb + lo * sz;
    memcpy(acc, emu_coll_mbox(c, op->seq, 0)->data + off, m * sz);
    int rop = op->premul ? ncclSum : op->redop;
    for (int p = 1; p < n; p++)
      emu_red_accum(acc, emu_coll_mbox(c, op->seq, p)->data + off, m, op->dtype, rop);
    if (rop == ncclAvg)
      emu_red_avg(acc, m, op->dtype, n);
    break;
  }
  case EMU_K_ALLGATHER: case EMU_K_GATHER:
    if (op->kind == EMU_K_GATHER && me != op->root)
      break;
    for (int p = 0; p < n; p++)
      memmove(rb + ((size_t)p * op->count + lo) * sz, emu_coll_mbox(c, op->seq, p)->data, m * sz);
    break;
  case EMU_K_ALLTOALL:
    for (int p = 0; p < n; p++)
      memcpy(rb + ((size_t)p * op->count + lo) * sz, emu_coll_mbox(c, op->seq, p)->data + (size_t)me * m * sz,
             m * sz);
    break;
  case EMU_K_BROADCAST:
    if (me != op->root)
      memcpy(rb + lo * sz, emu_coll_mbox(c, op->seq, op->root)->data, m * sz);
    break;
  case EMU_K_SCATTER:
    if (me != op->root)
      memcpy(rb + lo * sz, emu_coll_mbox(c, op->seq, op->root)->data + (size_t)me * m * sz, m * sz);
    break;
  default:
    break;
  }
  for (int p = 0; p < n; p++)
    if (emu_needs(op, p))   /* pairs with the poster's acquire of acks */
      atomic_fetch_add_explicit(&emu_coll_mbox(c, op->seq, p)->acks, 1, memory_order_release);
  emu_comm_bell(c);
  return EMU_STEP_PROGRESS;
}

static int emu_coll_step(struct emu_op *op, uint64_t *wake_ns)
{
  struct ncclComm *c = op->comm;
  if (op->phase == 0) {
    /* NCCL runs a communicator's operations in order, whatever the
     * streams: collective k waits for k-1 to finish on this rank. */
    if (atomic_load_explicit(&c->done_seq, memory_order_acquire) + 1 < op->seq)
      return EMU_STEP_BLOCKED;
    if (op->delay_ms) {
      uint64_t now = emu_now_ns();
      if (!op->delay_until)
        op->delay_until = now + (uint64_t)op->delay_ms * 1000000ull;
      if (now < op->delay_until) {
        if (op->delay_until < *wake_ns)
          *wake_ns = op->delay_until;
        return EMU_STEP_BLOCKED;
      }
    }
    size_t e = emu_round_elems(op);
    op->nrounds = (op->count + e - 1) / e;
    op->round = 0;
    op->phase = 1;
    emu_prof_op_begin(op, (int)op->nrounds, -1);
  }
  size_t e = emu_round_elems(op);
  while (op->round < op->nrounds) {
    size_t lo = (size_t)op->round * e;
    size_t m = op->count - lo < e ? op->count - lo : e;
    emu_prof_step_begin(op, (int)op->round, m * emu_dtype_size(op->dtype));
    if (op->phase == 1) {
      if (emu_post(op, lo, m) == EMU_STEP_BLOCKED)
        return EMU_STEP_BLOCKED;
      op->phase = 2;
    }
    if (emu_gather(op, lo, m) == EMU_STEP_BLOCKED)
      return EMU_STEP_BLOCKED;
    emu_prof_step_end(op);
    op->round++;
    op->phase = 1;
  }
  atomic_store_explicit(&c->done_seq, op->seq, memory_order_release);
  emu_comm_bell(c);
  return EMU_STEP_DONE;
}

static int emu_p2p_step(struct emu_op *op)
{
  struct ncclComm *c = op->comm;
  size_t sz = emu_dtype_size(op->dtype);
  size_t e = EMU_CHUNK / sz;
  _Atomic uint64_t *done = op->kind == EMU_K_SEND ? &c->send_done[op->peer] : &c->recv_done[op->peer];
  if (op->phase == 0) {
    if (atomic_load_explicit(done, memory_order_acquire) + 1 < op->seq)
      return EMU_STEP_BLOCKED;
    op->nrounds = (op->count + e - 1) / e;
    op->phase = 1;
    emu_prof_op_begin(op, (int)op->nrounds, op->peer);
  }
  int moved = 0;
  while (op->round < op->nrounds) {
    size_t lo = (size_t)op->round * e;
    size_t m = op->count - lo < e ? op->count - lo : e;
    emu_prof_step_begin(op, (int)op->round, m * sz);
    uint64_t want = emu_tag(op->seq, op->round);
    if (op->kind == EMU_K_SEND) {
      struct emu_mbox *mb = emu_p2p_mbox(c, c->rank, op->peer);
      if (atomic_load_explicit(&mb->acks, memory_order_acquire) !=
          atomic_load_explicit(&mb->readers, memory_order_relaxed))
        break;
      memcpy(mb->data, (const char *)op->sendbuff + lo * sz, m * sz);
      mb->desc.kind = EMU_K_SEND;
      mb->desc.count = op->count;
      mb->desc.dtype = op->dtype;
      mb->bytes = m * sz;
      atomic_store_explicit(&mb->acks, 0, memory_order_relaxed);
      atomic_store_explicit(&mb->readers, 1, memory_order_relaxed);
      atomic_store_explicit(&mb->tag, want, memory_order_release);
    } else {
      struct emu_mbox *mb = emu_p2p_mbox(c, op->peer, c->rank);
      uint64_t t = atomic_load_explicit(&mb->tag, memory_order_acquire);
      if (t < want)
        break;
      if (t > want || mb->desc.count != op->count || mb->desc.dtype != op->dtype) {
        op->hung = true;   /* a send of another size: never completes */
        break;
      }
      memcpy((char *)op->recvbuff + lo * sz, mb->data, m * sz);
      atomic_fetch_add_explicit(&mb->acks, 1, memory_order_release);
      for (int i = 0; i < c->nfaults; i++)
        if (c->faults[i].kind == 5 && c->faults[i].n == op->seq && op->round + 1 == (uint64_t)c->faults[i].value) {
          if (emu_verbose())
            emu_log("rank %d: fault kill_recv: killed after post %llu of recv #%llu", c->rank,
                    (unsigned long long)op->round + 1, (unsigned long long)op->seq);
          kill(getpid(), SIGKILL);
        }
    }
    emu_prof_step_end(op);
    op->round++;
    moved = 1;
  }
  if (op->round == op->nrounds)
    atomic_store_explicit(done, op->seq, memory_order_release);
  if (moved)
    emu_comm_bell(c);
  if (op->round == op->nrounds)
    return EMU_STEP_DONE;
  return moved ? EMU_STEP_PROGRESS : EMU_STEP_BLOCKED;
}

int emu_op_step(struct emu_op *op, uint64_t *wake_ns)
{
  if (emu_comm_cancelled(op->comm)) {
    op->cancelled = true;
    return EMU_STEP_DONE;
  }
  if (op->stalled || op->hung)
    return EMU_STEP_BLOCKED;
  return emu_is_coll(op->kind) ? emu_coll_step(op, wake_ns) : emu_p2p_step(op);
}

/* ---- launch: one stream work item per (group, stream) ----------------- */

struct emu_fused {
  struct emu_work w;
  struct emu_op *ops;
};

static void emu_fused_run(struct emu_work *w)
{
  struct emu_fused *f = (struct emu_fused *)w;
  uint64_t backoff = 1000000ull;   /* 1 ms, for groups spanning shm areas */
  for (;;) {
    struct emu_op *first = NULL;
    bool single = true;
    for (struct emu_op *op = f->ops; op; op = op->next)
      if (!op->done) {
        if (!first)
          first = op;
        else if (strcmp(op->comm->name, first->comm->name) != 0)
          single = false;
      }
    if (!first)
      break;
    /* Snapshot the bell before looking at any state: a change after this
     * load makes the futex wait return at once (no lost wake-up). */
    uint32_t snap = atomic_load_explicit(&first->comm->shm->bell, memory_order_acquire);
    uint64_t now = emu_now_ns();
    uint64_t wake = now + 200000000ull;   /* re-check cancellation at 5 Hz */
    bool progress = false;
    for (struct emu_op *op = f->ops; op; op = op->next) {
      if (op->done)
        continue;
      int r = emu_op_step(op, &wake);
      if (r != EMU_STEP_BLOCKED)
        progress = true;
      if (r == EMU_STEP_DONE) {
        emu_prof_op_end(op);
        op->done = true;
        emu_op_finished(op->comm);
      }
    }
    if (progress) {
      backoff = 1000000ull;
      continue;
    }
    uint64_t t = wake > now ? wake - now : 0;
    if (!single) {
      if (backoff < t)
        t = backoff;
      if (backoff < 64000000ull)
        backoff *= 2;
    }
    if (t)
      emu_futex_wait(&first->comm->shm->bell, snap, t);
  }
  /* slow fault: the stream stays busy after the collective, as behind a
   * slow kernel, so it reaches the next one late; the host is not held */
  int slow = 0;
  for (struct emu_op *op = f->ops; op; op = op->next)
    if (op->slow_ms > slow && !op->cancelled)
      slow = op->slow_ms;
  if (slow) {
    struct timespec ts = {slow / 1000, (long)(slow % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  while (f->ops) {
    struct emu_op *op = f->ops;
    f->ops = op->next;
    free(op);
  }
  free(f);
}

static void emu_assign(struct emu_op *op)
{
  struct ncclComm *c = op->comm;
  pthread_mutex_lock(&c->mu);
  if (emu_is_coll(op->kind)) {
    op->seq = ++c->coll_seq;
    for (int i = 0; i < c->nfaults; i++) {
      const struct emu_fault *f = &c->faults[i];
      if (f->kind == 4) {
        op->slow_ms = f->value;
        continue;
      }
      if (f->n != op->seq)
        continue;
      if (f->kind == 1) {
        op->stalled = true;
      } else if (f->kind == 2) {
        op->stalled = true;
        int expect = ncclSuccess;
        atomic_compare_exchange_strong(&c->async_err, &expect, f->value);
      } else {
        op->delay_ms = f->value;
      }
      if (emu_verbose())
        emu_log("rank %d: fault %d injected at collective #%llu", c->rank, f->kind, (unsigned long long)op->seq);
    }
  } else if (op->kind == EMU_K_SEND) {
    op->seq = ++c->send_seq[op->peer];
  } else {
    op->seq = ++c->recv_seq[op->peer];
  }
  pthread_mutex_unlock(&c->mu);
  atomic_fetch_add(&c->inflight, 1);
  atomic_fetch_add(&c->refs, 1);   /* dropped by emu_op_finished */
}

/* Assign sequence numbers now and put one work item per stream. */
static void emu_launch_now(struct emu_op *ops)
{
  for (struct emu_op *op = ops; op; op = op->next) {
    emu_assign(op);
    emu_prof_task(op);
  }
  /* Partition by stream, keeping call order within each stream. */
  while (ops) {
    struct CUstream_st *s = ops->stream;
    struct emu_op *mine = NULL, **mt = &mine, *rest = NULL, **rt = &rest;
    for (struct emu_op *op = ops, *nx; op; op = nx) {
      nx = op->next;
      op->next = NULL;
      if (op->stream == s) {
        *mt = op;
        mt = &op->next;
      } else {
        *rt = op;
        rt = &op->next;
      }
    }
    ops = rest;
    struct emu_fused *f = calloc(1, sizeof *f);
    if (!f) {
      /* Losing enqueued operations would corrupt every peer's sequence. */
      emu_log("out of memory launching a group");
      abort();
    }
    f->w.run = emu_fused_run;
    f->ops = mine;
    emu_stream_enqueue(s, &f->w);
  }
}

/* ---- capture: NCCL's persistent plans ----------------------------------- */

/* The operations of one (group, capturing stream), kept as templates: each
 * launch of the graph clones them onto the launch stream and assigns their
 * sequence numbers then, in order with every other operation of their
 * communicators -- so a rank that stops launching leaves its peers waiting
 * in their next launch, as on a GPU. */
struct emu_plan_node {
  struct CUgraphNode_st n;
  struct emu_op *ops;   /* templates; each holds a reference on its comm */
};

static int emu_plan_launch(struct CUgraphNode_st *n, struct CUstream_st *s)
{
  struct emu_plan_node *p = (struct emu_plan_node *)n;
  struct emu_op *head = NULL, **tail = &head;
  for (const struct emu_op *t = p->ops; t; t = t->next) {
    struct emu_op *op = malloc(sizeof *op);
    if (!op) {
      emu_log("out of memory launching a captured NCCL operation");
      abort();   /* as emu_launch_now: a lost op corrupts every peer's sequence */
    }
    *op = (struct emu_op){ .comm = t->comm, .kind = t->kind, .sendbuff = t->sendbuff, .recvbuff = t->recvbuff,
                           .count = t->count, .dtype = t->dtype, .redop = t->redop, .root = t->root,
                           .peer = t->peer, .stream = s, .premul = t->premul };
    memcpy(op->scalar, t->scalar, sizeof op->scalar);
    *tail = op;
    tail = &op->next;
  }
  emu_launch_now(head);
  return EMU_OK;
}

static void emu_plan_destroy(struct CUgraphNode_st *n)
{
  struct emu_plan_node *p = (struct emu_plan_node *)n;
  while (p->ops) {
    struct emu_op *op = p->ops;
    p->ops = op->next;
    emu_comm_put(op->comm);
    free(op);
  }
  free(p);
}

/* Take the ops on capturing streams out of *ops into one node per stream. */
static void emu_capture_ops(struct emu_op **ops)
{
  while (*ops) {
    struct emu_op **pp = ops;
    while (*pp && !emu_stream_capturing((*pp)->stream))
      pp = &(*pp)->next;
    if (!*pp)
      return;
    struct CUstream_st *s = (*pp)->stream;
    struct emu_plan_node *p = calloc(1, sizeof *p);
    if (!p) {
      emu_log("out of memory capturing a group");
      abort();
    }
    struct emu_op **pt = &p->ops;
    while (*pp) {
      struct emu_op *op = *pp;
      if (op->stream != s) {
        pp = &op->next;
        continue;
      }
      *pp = op->next;
      op->next = NULL;
      atomic_fetch_add(&op->comm->refs, 1);   /* dropped by emu_plan_destroy */
      *pt = op;
      pt = &op->next;
    }
    p->n.type = EMU_NODE_KERNEL;
    p->n.launch = emu_plan_launch;
    p->n.destroy = emu_plan_destroy;
    /* An invalidated capture refuses the node (and frees it): NCCL would
     * see the failed kernel launch; the emulator just drops it. */
    int rc = emu_capture_add(s, &p->n);
    if (rc != EMU_OK && emu_verbose())
      emu_log("NCCL operation on a capturing stream not captured (error %d)", rc);
  }
}

void emu_launch(struct emu_op *ops)
{
  for (struct emu_op *op = ops; op; op = op->next)
    op->stream = emu_stream_resolve(op->stream);
  emu_capture_ops(&ops);
  emu_launch_now(ops);
}
