/* profiler.c -- libnccltrace.so as NCCL's profiler plugin
 * (NCCL_PROFILER_PLUGIN=libnccltrace.so): the ncclProfiler_v1 .. _v6
 * tables NCCL looks up with dlsym (interpose/nccl_profiler.h), recording
 * into the same ring and format as the wrappers.
 *
 * Two roles per communicator, chosen once at the plugin's init:
 * - inside view: a wrapper saw the comm's init (preload or drop-in), so
 *   the wrappers record its calls; the plugin adds only what they cannot
 *   see: proxy operations and steps (channel, peer, step, bytes) and
 *   kernel channels, each tagged with the op's seq;
 * - alone: no wrapper saw it (a statically linked NCCL): the plugin also
 *   records the collective and point-to-point calls, with their seq, on a
 *   comm of its own (NTR_REC_PLUGIN), from NCCL's API events (v5 on: at the
 *   call, with its stream, so the watchdog events its completion) or its
 *   task events (v1-v4: when the stream reaches the op; no stream, no
 *   completion tracking).  What the events never carry: the reduction op
 *   (v2 on), so the plugin alone cannot see a redop mismatch.
 *
 * Thread-safety: NCCL calls start/stop/record from the application's
 * threads and its proxy threads at once, and may stop an event on another
 * thread than the one that started it.  Event objects come from one static
 * pool (claimed with a CAS, freed with a store); a comm's op counters of
 * the inside view are advanced by the thread that starts the comm's task
 * events (NCCL's host stream callback, one at a time per comm).
 * Per-event calls: no lock, no allocation, no syscall of ours (a pool
 * exhausted drops the event and counts it).  init and finalize may lock and
 * allocate (they run inside NCCL's comm init and destroy).
 * Signal-safety: none (NCCL never calls a plugin from a signal handler).
 */
#include <stdlib.h>
#include <string.h>

#include "interpose/nti.h"
#include "interpose/comm.h"
#include "interpose/record.h"
#include "interpose/group.h"
#include "interpose/watchdog.h"
#include "interpose/nccl_profiler.h"

/* One profiler context per communicator (init's *context). */
struct prof_ctx {
  struct nti_comm *c;  /* NULL: nothing recorded (comm table full, tracing off) */
  int alone;           /* the plugin records the calls too */
  int version;
  uint64_t comm_hash;  /* v1-v3: learned from the first op event */
  /* Inside view: this context's own op counters, advanced at task events
   * (the wrappers keep the comm's). */
  uint64_t coll_tasks;
  uint64_t *p2p_tasks; /* [2 * np2p]: sends per peer, then recvs */
  int np2p;
  uint32_t making;     /* v1-v3 alone: the comm is being made (CAS) */
};

enum { EV_FREE = 0, EV_GROUP_API, EV_API, EV_TASK, EV_PROXY_OP, EV_PROXY_STEP, EV_KERNEL, EV_OTHER };

/* One event in flight.  busy: 0 free, 1 taken (atomic). */
struct prof_ev {
  uint32_t busy;
  uint8_t type, chan, is_send, pad;
  struct prof_ctx *x;
  uint64_t seq;    /* the op's seq */
  int32_t kind;    /* enum ntr_kind of the op */
  int32_t peer;    /* proxy: peer; op: peer or root */
  int32_t nsteps;  /* proxy op, and its steps */
  int32_t step;
  uint64_t pos;    /* alone, API event: position + 1 of its CALL record, 0 none */
  uint64_t bytes;  /* proxy step: bytes as last reported */
};
_Static_assert(sizeof(struct prof_ev) <= 64, "one line per event");

#define PROF_EVENTS 16384u /* power of two */
#define PROF_PROBES 8
static struct prof_ev evs[PROF_EVENTS] __attribute__((aligned(64)));
static uint64_t ev_cursor;  /* atomic */
static uint64_t ev_dropped; /* atomic: events the pool had no room for */

static struct prof_ev *ev_take(uint8_t type, struct prof_ctx *x) {
  for (int i = 0; i < PROF_PROBES; i++) {
    struct prof_ev *e = &evs[__atomic_fetch_add(&ev_cursor, 1, __ATOMIC_RELAXED) & (PROF_EVENTS - 1)];
    uint32_t zero = 0;
    if (__atomic_compare_exchange_n(&e->busy, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      e->type = type;
      e->x = x;
      e->seq = 0;
      e->kind = -1;
      e->peer = -1;
      e->chan = 0;
      e->is_send = 0;
      e->nsteps = 0;
      e->step = 0;
      e->pos = 0;
      e->bytes = 0;
      return e;
    }
  }
  __atomic_fetch_add(&ev_dropped, 1, __ATOMIC_RELAXED);
  return NULL;
}
static void ev_give(struct prof_ev *e) {
  __atomic_store_n(&e->busy, 0, __ATOMIC_RELEASE);
}
/* A parent handle of ours (NCCL passes back what startEvent returned). */
static struct prof_ev *ev_of(void *h) {
  struct prof_ev *e = h;
  if (!e || e < evs || e >= evs + PROF_EVENTS)
    return NULL;
  return e;
}

/* ---------------------------------------------------------- names -- */

/* NCCL's function names (ncclFuncToString) and v1's ncclFunc_t. */
static int kind_of_func(const char *f) {
  static const struct { const char *name; int kind; } t[] = {
      {"AllReduce", NTR_KIND_ALLREDUCE},   {"Broadcast", NTR_KIND_BROADCAST},
      {"Reduce", NTR_KIND_REDUCE},         {"AllGather", NTR_KIND_ALLGATHER},
      {"ReduceScatter", NTR_KIND_REDUCESCATTER}, {"AlltoAll", NTR_KIND_ALLTOALL},
      {"Gather", NTR_KIND_GATHER},         {"Scatter", NTR_KIND_SCATTER},
      {"Send", NTR_KIND_SEND},             {"Recv", NTR_KIND_RECV},
  };
  if (!f)
    return -1;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(f, t[i].name) == 0)
      return t[i].kind;
  return -1;
}
static int kind_of_func_v1(uint8_t f) {
  static const int t[] = {NTR_KIND_BROADCAST, NTR_KIND_REDUCE, NTR_KIND_ALLGATHER, NTR_KIND_REDUCESCATTER,
                          NTR_KIND_ALLREDUCE, -1, NTR_KIND_SEND, NTR_KIND_RECV};
  return f < sizeof t / sizeof t[0] ? t[f] : -1;
}
/* NCCL's datatype names (ncclDatatypeToString): "ncclFloat32" -> ncclFloat32. */
static int dtype_of(const char *d) {
  static const struct { const char *name; int v; } t[] = {
      {"Float32", ncclFloat32}, {"Float16", ncclFloat16}, {"Bfloat16", ncclBfloat16},
      {"Float64", ncclFloat64}, {"Int32", ncclInt32},     {"Int8", ncclInt8},
      {"Uint8", ncclUint8},     {"Uint32", ncclUint32},   {"Int64", ncclInt64},
      {"Uint64", ncclUint64},
  };
  if (!d || strncmp(d, "nccl", 4) != 0)
    return 0xff;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(d + 4, t[i].name) == 0)
      return t[i].v;
  return 0xff;
}

/* ------------------------------------------------------- records -- */

/* This thread is inside a group API event of a comm the plugin alone sees. */
static NTI_TLS int group_open;

/* An op record of a comm the plugin alone sees: as the wrappers' slow
 * path writes it (wrappers.c op_record), from the event's fields. */
static uint64_t call_record(struct nti_comm *c, int kind, size_t count, int dtype, int redop, int peer,
                            const void *sendbuf, const void *recvbuf, void *stream, int result,
                            uint64_t *seq_out) {
  int p2p = kind == NTR_KIND_SEND || kind == NTR_KIND_RECV;
  uint64_t seq = 0;
  if (!p2p) {
    seq = __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&c->coll_seq, seq, __ATOMIC_RELAXED);
  } else if (peer >= 0 && peer < c->np2p) {
    uint64_t *ctr = &c->p2p_seq[(kind == NTR_KIND_RECV ? c->np2p : 0) + peer];
    seq = __atomic_load_n(ctr, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(ctr, seq, __ATOMIC_RELAXED);
  }
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, (unsigned)kind, NTR_PHASE_CALL, c);
  r->dtype = (uint8_t)dtype;
  r->redop = p2p ? -1 : redop;
  r->peer = peer;
  r->count = count;
  r->seq = seq;
  r->result = result;
  r->u.buf.sendbuf = (uint64_t)(uintptr_t)sendbuf;
  r->u.buf.recvbuf = (uint64_t)(uintptr_t)recvbuf;
  r->u.buf.stream = (uint64_t)(uintptr_t)stream;
  r->flags = (uint16_t)(r->flags | NTR_REC_PLUGIN |
                        (__atomic_load_n(&c->rec_flags, __ATOMIC_RELAXED) >> 16));
  if (!stream)
    r->flags |= NTR_REC_NO_TRACKING;
  uint64_t tsc = r->tsc;
  nti_record_end(r, pos, NULL); /* recent[]: the watchdog copies op records */
  if (stream && nti_tls.group_ops && group_open)
    nti_group_note_op(c, stream, seq, pos, tsc, p2p);
  else if (!p2p)
    __atomic_store_n(&c->cs->last_enqueued, seq, __ATOMIC_RELEASE);
  *seq_out = seq;
  return pos;
}

/* A record of the inside view: not linked into the comm's chain (the
 * watchdog's recent[] copy is for calls; steps would crowd them out). */
static void inside_record(const struct prof_ev *e, unsigned kind, unsigned phase, uint64_t aux) {
  struct nti_comm *c = e->x->c;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, kind, phase, NULL);
  r->comm_id = c->cs->comm_id;
  r->rank = c->cs->rank;
  r->nranks = c->cs->nranks;
  r->seq = e->seq;
  r->redop = e->kind;
  r->peer = kind == NTR_KIND_KERNEL_CH ? -1 : e->peer;
  r->dtype = e->chan;
  r->count = kind == NTR_KIND_PROXY_STEP ? (uint64_t)e->step : kind == NTR_KIND_PROXY_OP ? (uint64_t)e->nsteps : 0;
  r->u.buf.sendbuf = (uint64_t)e->nsteps;
  r->u.buf.recvbuf = e->is_send;
  r->u.buf.stream = e->bytes;
  r->aux = aux;
  r->flags = (uint16_t)(NTR_REC_PLUGIN | (r->flags & NTR_REC_IN_GROUP));
  r->result = 0;
  nti_record_end(r, pos, NULL);
}

/* ------------------------------------------------ the comm's side -- */

static struct prof_ctx *ctx_new(int version, uint64_t hash, int rank, int nranks, int known) {
  if (!nti_active() && !nti_proc.disabled)
    nti_activate();
  if (!nti_active())
    return NULL;
  struct prof_ctx *x = calloc(1, sizeof *x);
  if (!x)
    return NULL;
  x->version = version;
  x->comm_hash = hash;
  pthread_mutex_lock(&nti_life_lock);
  struct nti_comm *c = known ? nti_plugin_claim(rank, nranks) : NULL;
  pthread_mutex_unlock(&nti_life_lock);
  if (c) {
    x->c = c;
    int n = c->cs->nranks > 0 ? c->cs->nranks : nranks;
    if (n > 0 && n < (1 << 24) && (x->p2p_tasks = calloc(2 * (size_t)n, sizeof *x->p2p_tasks)))
      x->np2p = n;
  } else if (known) {
    x->alone = 1;
    x->c = nti_plugin_comm_new(hash, rank, nranks);
  } else {
    x->alone = 1; /* v1-v3: identity from the first op event (comm_make) */
  }
  return x;
}

/* v1-v3, a comm the plugin alone sees: its identity comes with the first
 * op event (name, commHash, rank); its size never does.  Made once, by the
 * first thread there (the others skip their events meanwhile).  Out of the
 * per-event rules once per comm: it locks and allocates. */
static __attribute__((noinline)) struct nti_comm *comm_make(struct prof_ctx *x, uint64_t hash, int rank) {
  uint32_t zero = 0;
  if (!__atomic_compare_exchange_n(&x->making, &zero, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
    return __atomic_load_n(&x->c, __ATOMIC_ACQUIRE);
  x->comm_hash = hash;
  struct nti_comm *c = nti_plugin_comm_new(hash, rank, 0);
  if (c && !c->p2p_seq && (c->p2p_seq = calloc(2 * 1024, sizeof *c->p2p_seq)))
    c->np2p = 1024;
  __atomic_store_n(&x->c, c, __ATOMIC_RELEASE);
  return c;
}

static ncclResult_t prof_finalize(void *context) {
  struct prof_ctx *x = context;
  if (x) {
    nti_plugin_comm_end(x->c);
    /* The context stays: a proxy thread may still stop an event of it. */
  }
  uint64_t d = __atomic_load_n(&ev_dropped, __ATOMIC_RELAXED);
  static uint64_t said;
  if (d && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    nti_say("profiler plugin: %llu events not recorded (more than %u in flight)", (unsigned long long)d,
            PROF_EVENTS);
  return ncclSuccess;
}

/* --------------------------------------------------------- events -- */

/* What every version's descriptor says, in one shape. */
struct prof_in {
  uint64_t type;
  void *parent;
  int rank;
  /* op (API or task) */
  int kind, dtype, redop, root_or_peer;
  size_t count;
  const void *sendbuf, *recvbuf;
  void *stream;
  uint64_t hash; /* v1-v3 */
  int depth;     /* group API */
  /* proxy */
  int chan, peer, nsteps, is_send, step;
};

/* The mask every version gets: what we record (API events only in v5 on,
 * kernel channels from v3). */
static int prof_mask(int version) {
  int m = NTP_GROUP | NTP_COLL | NTP_P2P | NTP_PROXY_OP | NTP_PROXY_STEP;
  if (version >= 3)
    m |= NTP_KERNEL_CH;
  if (version >= 5)
    m |= NTP_GROUP_API | NTP_COLL_API | NTP_P2P_API;
  return m;
}


static uint64_t task_seq(struct prof_ctx *x, int kind, int peer) {
  if (kind == NTR_KIND_SEND || kind == NTR_KIND_RECV) {
    if (peer < 0 || peer >= x->np2p)
      return 0;
    uint64_t *ctr = &x->p2p_tasks[(kind == NTR_KIND_RECV ? x->np2p : 0) + peer];
    uint64_t s = *ctr + 1;
    *ctr = s;
    return s;
  }
  return ++x->coll_tasks;
}

static void prof_start(struct prof_ctx *x, void **handle, const struct prof_in *in) {
  *handle = NULL;
  if (NTI_UNLIKELY(!x || !nti_active()))
    return;
  struct nti_comm *c = __atomic_load_n(&x->c, __ATOMIC_ACQUIRE);
  struct prof_ev *e;
  switch (in->type) {
  case NTP_GROUP_API:
    if (!x->alone || !c || group_open)
      return;
    if (!(e = ev_take(EV_GROUP_API, x)))
      return;
    group_open = 1;
    nti_group_plugin_open(in->depth > 1);
    *handle = e;
    return;
  case NTP_COLL_API:
  case NTP_P2P_API:
    if (!x->alone || !c || in->kind < 0)
      return;
    if (!(e = ev_take(EV_API, x)))
      return;
    e->kind = in->kind;
    e->peer = in->root_or_peer;
    /* A p2p API event has no peer: its record waits for the task (which
     * runs where no CUDA call may be made: no completion event). */
    if (in->type == NTP_COLL_API)
      e->pos = 1 + call_record(c, in->kind, in->count, in->dtype, -1, in->root_or_peer, NULL, NULL, in->stream,
                               -1, &e->seq);
    *handle = e;
    return;
  case NTP_COLL:
  case NTP_P2P: {
    if (in->kind < 0)
      return;
    if (!c && x->alone && x->version <= 3 && in->hash)
      c = comm_make(x, in->hash, in->rank);
    if (!c)
      return;
    if (!(e = ev_take(EV_TASK, x)))
      return;
    e->kind = in->kind;
    e->peer = in->root_or_peer;
    struct prof_ev *api = ev_of(in->parent);
    if (x->alone && api && api->type == EV_API && api->pos) {
      e->seq = api->seq; /* v5 on: the API event recorded the call */
    } else if (x->alone) {
      /* v1-v4: the task is all NCCL shows; the stream reached the op */
      call_record(c, in->kind, in->count, in->dtype, in->redop, in->root_or_peer, in->sendbuf, in->recvbuf,
                  NULL, ncclSuccess, &e->seq);
    } else {
      e->seq = task_seq(x, in->kind, in->root_or_peer);
    }
    *handle = e;
    return;
  }
  case NTP_PROXY_OP:
  case NTP_PROXY_STEP:
  case NTP_KERNEL_CH: {
    if (!c)
      return;
    struct prof_ev *p = ev_of(in->parent);
    uint8_t type = in->type == NTP_PROXY_OP ? EV_PROXY_OP : in->type == NTP_PROXY_STEP ? EV_PROXY_STEP : EV_KERNEL;
    if (!(e = ev_take(type, x)))
      return;
    if (p) { /* the op (task) or, for a step, its proxy op */
      e->seq = p->seq;
      e->kind = p->kind;
      e->peer = p->peer;
      e->chan = p->chan;
      e->is_send = p->is_send;
      e->nsteps = p->nsteps;
    }
    if (type == EV_PROXY_OP) {
      e->chan = (uint8_t)in->chan;
      e->peer = in->peer;
      e->nsteps = in->nsteps;
      e->is_send = (uint8_t)(in->is_send != 0);
      e->bytes = 0;
      inside_record(e, NTR_KIND_PROXY_OP, NTR_PHASE_ENTER, (uint64_t)(uint32_t)in->nsteps);
    } else if (type == EV_PROXY_STEP) {
      e->step = in->step;
      inside_record(e, NTR_KIND_PROXY_STEP, NTR_PHASE_ENTER, 0);
    } else {
      e->chan = (uint8_t)in->chan;
      inside_record(e, NTR_KIND_KERNEL_CH, NTR_PHASE_ENTER, 0);
    }
    *handle = e;
    return;
  }
  default:
    return; /* group tasks, proxy control, net plugin, copy engine: not recorded */
  }
}

static ncclResult_t prof_stop(void *handle) {
  struct prof_ev *e = ev_of(handle);
  if (!e)
    return ncclSuccess;
  struct prof_ctx *x = e->x;
  if (NTI_LIKELY(nti_active()) && x && x->c) {
    switch (e->type) {
    case EV_GROUP_API:
      if (group_open) {
        group_open = 0;
        nti_group_plugin_close();
      }
      break;
    case EV_API:
      /* NCCL took the call (an event stops only after its append). */
      if (e->pos)
        nti_record_patch(e->pos - 1, x->c, ncclSuccess, 0, 0);
      break;
    case EV_PROXY_OP:
      inside_record(e, NTR_KIND_PROXY_OP, NTR_PHASE_EXIT, 0);
      break;
    case EV_PROXY_STEP:
      inside_record(e, NTR_KIND_PROXY_STEP, NTR_PHASE_EXIT, 0);
      break;
    case EV_KERNEL:
      inside_record(e, NTR_KIND_KERNEL_CH, NTR_PHASE_EXIT, 0);
      break;
    default:
      break;
    }
  }
  ev_give(e);
  return ncclSuccess;
}

/* bytes: v4 on report a step's size with its state; v1-v3 a proxy op's. */
static ncclResult_t prof_state(void *handle, int state, uint64_t bytes, int has_bytes) {
  struct prof_ev *e = ev_of(handle);
  if (!e || !NTI_LIKELY(nti_active()) || !e->x || !e->x->c)
    return ncclSuccess;
  if (e->type == EV_PROXY_STEP) {
    if (has_bytes)
      e->bytes = bytes;
    inside_record(e, NTR_KIND_PROXY_STEP, NTR_PHASE_EVENT, (uint64_t)(uint32_t)state);
  } else if (e->type == EV_PROXY_OP) {
    if (has_bytes)
      e->bytes = bytes;
    inside_record(e, NTR_KIND_PROXY_OP, NTR_PHASE_EVENT, (uint64_t)(uint32_t)state);
  } else if (e->type == EV_KERNEL && state == NTP_KERNEL_CH_STOP) {
    e->bytes = bytes; /* the kernel's stop timer */
  }
  return ncclSuccess;
}

/* -------------------------------------------- the version tables -- */

static void in_proxy(struct prof_in *in, const struct ntp_proxy_op *op, const struct ntp_proxy_step *st) {
  in->chan = op->channelId;
  in->peer = op->peer;
  in->nsteps = op->nSteps;
  in->is_send = op->isSend;
  in->step = st->step;
}

/* The task events' fields, named alike in every version's struct from v2
 * on (their layouts differ, hence macros over the struct at hand). */
#define IN_COLL(in, c)                                                                   \
  ((in).kind = kind_of_func((c).func), (in).dtype = dtype_of((c).datatype), (in).redop = -1, \
   (in).root_or_peer = (c).root, (in).count = (c).count, (in).sendbuf = (c).sendBuff,    \
   (in).recvbuf = (c).recvBuff)
#define IN_P2P(in, p)                                                                    \
  ((in).kind = kind_of_func((p).func), (in).dtype = dtype_of((p).datatype), (in).redop = -1, \
   (in).root_or_peer = (p).peer, (in).count = (p).count)

/* v1 */
static ncclResult_t init_v1(void **context, int *mask) {
  *context = ctx_new(1, 0, -1, 0, 0);
  *mask = prof_mask(1);
  return ncclSuccess;
}
static ncclResult_t start_v1(void *context, void **handle, struct ntp_descr_v1 *d) {
  struct prof_in in = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .kind = -1};
  if (d->type == NTP_COLL) {
    in.kind = kind_of_func_v1(d->coll.func);
    in.dtype = d->coll.datatype;
    in.redop = (int)d->coll.op;
    in.root_or_peer = d->coll.root;
    in.count = d->coll.count;
    in.sendbuf = d->coll.sendBuff;
    in.recvbuf = d->coll.recvBuff;
    in.hash = d->coll.commHash;
  } else if (d->type == NTP_P2P) {
    in.kind = kind_of_func_v1(d->p2p.func);
    in.dtype = d->p2p.datatype;
    in.redop = -1;
    in.root_or_peer = d->p2p.peer;
    in.count = d->p2p.count;
    in.hash = d->p2p.commHash;
  } else if (d->type == NTP_PROXY_OP || d->type == NTP_PROXY_STEP) {
    in_proxy(&in, &d->proxyOp, &d->proxyStep);
  }
  prof_start(context, handle, &in);
  return ncclSuccess;
}
static ncclResult_t state_v1(void *handle, int state, union ntp_state_v1 *a) {
  return prof_state(handle, state, a ? a->proxyOp.transSize : 0, a != NULL && state <= NTP_OP_RECV_DONE);
}

/* v2 and v3: strings; v3 adds kernel channels */
#define START_V23(ver)                                                                          \
  static ncclResult_t start_##ver(void *context, void **handle, struct ntp_descr_##ver *d) {    \
    struct prof_in in = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .kind = -1}; \
    if (d->type == NTP_COLL) {                                                                  \
      IN_COLL(in, d->coll);                                                                     \
      in.hash = d->coll.commHash;                                                               \
    } else if (d->type == NTP_P2P) {                                                            \
      IN_P2P(in, d->p2p);                                                                       \
      in.hash = d->p2p.commHash;                                                                \
    } else if (d->type == NTP_PROXY_OP || d->type == NTP_PROXY_STEP) {                          \
      in_proxy(&in, &d->proxyOp, &d->proxyStep);                                                \
    } START_V23_KERNEL                                                                          \
    prof_start(context, handle, &in);                                                           \
    return ncclSuccess;                                                                         \
  }
#define START_V23_KERNEL
START_V23(v2)
#undef START_V23_KERNEL
#define START_V23_KERNEL else if (d->type == NTP_KERNEL_CH) { in.chan = d->kernelCh.channelId; }
START_V23(v3)
#undef START_V23_KERNEL
#define INIT_V23(n)                                                  \
  static ncclResult_t init_v##n(void **context, int *mask) {         \
    *context = ctx_new(n, 0, -1, 0, 0);                              \
    *mask = prof_mask(n);                                            \
    return ncclSuccess;                                              \
  }
INIT_V23(2)
INIT_V23(3)

/* v4 to v6 */
static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t hash, int nnodes, int nranks,
                            int rank, ntp_logger_t logfn) {
  (void)name, (void)nnodes, (void)logfn;
  *context = ctx_new(4, hash, rank, nranks, 1);
  *mask = prof_mask(4);
  return ncclSuccess;
}
/* v5 and v6 take the comm's id where v4 took its hash */
#define INIT_V56(n)                                                                                  \
  static ncclResult_t init_v##n(void **context, uint64_t id, int *mask, const char *name, int nnodes, \
                                int nranks, int rank, ntp_logger_t logfn) {                           \
    (void)name, (void)nnodes, (void)logfn;                                                           \
    *context = ctx_new(n, id, rank, nranks, 1);                                                      \
    *mask = prof_mask(n);                                                                            \
    return ncclSuccess;                                                                              \
  }
INIT_V56(5)
INIT_V56(6)
static ncclResult_t start_v4(void *context, void **handle, struct ntp_descr_v4 *d) {
  struct prof_in in = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .kind = -1};
  if (d->type == NTP_COLL) {
    IN_COLL(in, d->coll);
  } else if (d->type == NTP_P2P) {
    IN_P2P(in, d->p2p);
  } else if (d->type == NTP_PROXY_OP || d->type == NTP_PROXY_STEP) {
    in_proxy(&in, &d->proxyOp, &d->proxyStep);
  } else if (d->type == NTP_KERNEL_CH) {
    in.chan = d->kernelCh.channelId;
  }
  prof_start(context, handle, &in);
  return ncclSuccess;
}
static ncclResult_t start_v5(void *context, void **handle, struct ntp_descr_v5 *d) {
  struct prof_in in = {.type = d->type, .parent = d->parentObj, .rank = d->rank, .kind = -1};
  switch (d->type) {
  case NTP_GROUP_API:
    in.depth = d->groupApi.groupDepth;
    break;
  case NTP_COLL_API:
    in.kind = kind_of_func(d->collApi.func);
    in.dtype = dtype_of(d->collApi.datatype);
    in.root_or_peer = d->collApi.root;
    in.count = d->collApi.count;
    in.stream = d->collApi.stream;
    if (in.kind == NTR_KIND_ALLREDUCE || in.kind == NTR_KIND_ALLGATHER || in.kind == NTR_KIND_REDUCESCATTER ||
        in.kind == NTR_KIND_ALLTOALL)
      in.root_or_peer = -1;
    break;
  case NTP_P2P_API:
    in.kind = kind_of_func(d->p2pApi.func);
    in.dtype = dtype_of(d->p2pApi.datatype);
    in.count = d->p2pApi.count;
    in.stream = d->p2pApi.stream;
    in.root_or_peer = -1; /* the API event has no peer: taken from the task (below) */
    break;
  case NTP_COLL:
    IN_COLL(in, d->coll);
    break;
  case NTP_P2P:
    IN_P2P(in, d->p2p);
    break;
  case NTP_PROXY_OP:
  case NTP_PROXY_STEP:
    in_proxy(&in, &d->proxyOp, &d->proxyStep);
    break;
  case NTP_KERNEL_CH:
    in.chan = d->kernelCh.channelId;
    break;
  default:
    break;
  }
  prof_start(context, handle, &in);
  return ncclSuccess;
}
static ncclResult_t state_v4(void *handle, int state, union ntp_state_v4 *a) {
  if (state == NTP_KERNEL_CH_STOP)
    return prof_state(handle, state, a ? a->kernelCh.pTimer : 0, a != NULL);
  int step_state = state >= NTP_STEP_SEND_GPU_WAIT && state <= NTP_STEP_RECV_GPU_WAIT;
  step_state |= state == NTP_STEP_SEND_PEER_WAIT_V4;
  return prof_state(handle, state, a && step_state ? a->proxyStep.transSize : 0, a != NULL && step_state);
}

#define NTP_NAME "nccltrace"
NTI_EXPORT const struct ntp_table_v1 ncclProfiler_v1 = {NTP_NAME, init_v1, start_v1, prof_stop, state_v1, prof_finalize};
NTI_EXPORT const struct ntp_table_v2 ncclProfiler_v2 = {NTP_NAME, init_v2, start_v2, prof_stop, state_v1, prof_finalize};
NTI_EXPORT const struct ntp_table_v3 ncclProfiler_v3 = {NTP_NAME, init_v3, start_v3, prof_stop, state_v1, prof_finalize};
NTI_EXPORT const struct ntp_table_v4 ncclProfiler_v4 = {NTP_NAME, init_v4, start_v4, prof_stop, state_v4, prof_finalize};
NTI_EXPORT const struct ntp_table_v5 ncclProfiler_v5 = {NTP_NAME, init_v5, start_v5, prof_stop, state_v4, prof_finalize};
NTI_EXPORT const struct ntp_table_v6 ncclProfiler_v6 = {NTP_NAME, init_v6, start_v5, prof_stop, state_v4, prof_finalize};
