/* emu_nccl_prof.c -- the emulator loads NCCL_PROFILER_PLUGIN and calls it
 * as NCCL does (interpose/nccl_profiler.h has the ABI): the library named
 * (dlopen as given, then libnccl-profiler-NAME.so), its newest
 * ncclProfiler_vN first, back to v1 (NCCLEMU_PROFILER_VERSION=N forces
 * one); init at comm init, finalize when the comm is freed; group API,
 * collective and p2p API events at the call (v5 on), task events at the
 * launch, and for what the emulator's transport really moves -- 64 KiB
 * mailbox posts -- a proxy op per op on channel 0 with one step per post
 * (its peer, index and bytes), in the states it waits in; kernel channel
 * events around the op (v3 on).
 *
 * Thread-safety: the table is loaded once (pthread_once); API events are
 * per calling thread (NCCL's group state is thread-local too); an op's
 * proxy events come from the one stream worker stepping it.
 * Not async-signal-safe.
 */
#include "emu_nccl_prof.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/nccl_profiler.h"

static pthread_once_t emu_prof_once = PTHREAD_ONCE_INIT;
static int emu_prof_ver; /* 0: no plugin */
static const void *emu_prof_tab;

/* The members every table version shares, at the same offsets. */
struct emu_prof_common {
  const char *name;
  void *init;
  ncclResult_t (*start)(void *, void **, void *);
  ncclResult_t (*stop)(void *);
  ncclResult_t (*state)(void *, int, void *);
  ncclResult_t (*finalize)(void *);
};

static void emu_prof_load(void)
{
  const char *name = getenv("NCCL_PROFILER_PLUGIN");
  if (!name || !*name || !strcasecmp(name, "none"))
    return;
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h && !strchr(name, '/') && strncmp(name, "lib", 3) != 0) {
    char alt[512];
    snprintf(alt, sizeof alt, "libnccl-profiler-%s.so", name);
    h = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
  }
  if (!h) {
    emu_log("profiler plugin %s: %s", name, dlerror());
    return;
  }
  int force = 0;
  const char *fv = getenv("NCCLEMU_PROFILER_VERSION");
  if (fv && *fv)
    force = atoi(fv);
  for (int v = 6; v >= 1; v--) {
    if (force && v != force)
      continue;
    char sym[32];
    snprintf(sym, sizeof sym, "ncclProfiler_v%d", v);
    const void *t = dlsym(h, sym);
    if (t) {
      emu_prof_tab = t;
      emu_prof_ver = v;
      if (emu_verbose())
        emu_log("profiler plugin %s: %s", name, sym);
      return;
    }
  }
  emu_log("profiler plugin %s: no ncclProfiler_v1..v6%s", name, force ? " of the version forced" : "");
}

static const struct emu_prof_common *emu_tab(void)
{
  return emu_prof_ver ? (const struct emu_prof_common *)emu_prof_tab : NULL;
}

int emu_prof_version(void)
{
  pthread_once(&emu_prof_once, emu_prof_load);
  return emu_prof_ver;
}

static uint64_t emu_prof_hash(const char *s)
{
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void emu_prof_comm_init(struct ncclComm *c)
{
  if (!emu_prof_version())
    return;
  int mask = 0;
  void *ctx = NULL;
  ncclResult_t rc;
  uint64_t hash = emu_prof_hash(c->name);
  if (emu_prof_ver >= 5) {
    const struct ntp_table_v5 *t = emu_prof_tab;
    rc = t->init(&ctx, hash, &mask, NULL, 1, c->nranks, c->rank, NULL);
  } else if (emu_prof_ver == 4) {
    const struct ntp_table_v4 *t = emu_prof_tab;
    rc = t->init(&ctx, &mask, NULL, hash, 1, c->nranks, c->rank, NULL);
  } else {
    const struct ntp_table_v1 *t = emu_prof_tab;
    rc = t->init(&ctx, &mask);
  }
  if (rc != ncclSuccess)
    return;
  c->prof_ctx = ctx;
  c->prof_mask = mask;
  c->prof_hash = hash;
}

void emu_prof_comm_fini(struct ncclComm *c)
{
  const struct emu_prof_common *t = emu_tab();
  if (t && c->prof_ctx)
    t->finalize(c->prof_ctx);
  c->prof_ctx = NULL;
}

/* ---- descriptors: one generic event, written in the version's layout ---- */

enum { EMU_D_GROUP_API, EMU_D_COLL_API, EMU_D_P2P_API, EMU_D_TASK, EMU_D_PROXY_OP, EMU_D_STEP, EMU_D_KERNEL };

static const char *const emu_func[] = { "", "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                        "AlltoAll", "Gather", "Scatter", "Send", "Recv" };
/* v1's ncclFunc_t: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4, Send 6, Recv 7 */
static const uint8_t emu_func_v1[] = { 0, 4, 0, 1, 2, 3, 8, 8, 8, 6, 7 };

static const char *emu_dtype_name(int d)
{
  static const char *const n[] = { "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64",
                                   "ncclUint64", "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16" };
  return d >= 0 && d < (int)(sizeof n / sizeof n[0]) ? n[d] : "Unknown";
}

static bool emu_is_p2p(int kind) { return kind == EMU_K_SEND || kind == EMU_K_RECV; }

static void *emu_prof_start(struct ncclComm *c, int what, void *parent, const struct emu_op *op, int a, int b)
{
  const struct emu_prof_common *t = emu_tab();
  if (!t || !c->prof_ctx)
    return NULL;
  void *h = NULL;
  int v = emu_prof_ver;
  bool p2p = op && emu_is_p2p(op->kind);
  if (v >= 5) {
    struct ntp_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.parentObj = parent;
    d.rank = c->rank;
    switch (what) {
    case EMU_D_GROUP_API: d.type = NTP_GROUP_API; d.groupApi.groupDepth = a; break;
    case EMU_D_COLL_API:
      d.type = NTP_COLL_API; d.collApi.func = emu_func[op->kind]; d.collApi.count = op->count;
      d.collApi.datatype = emu_dtype_name(op->dtype); d.collApi.root = op->root; d.collApi.stream = op->stream;
      break;
    case EMU_D_P2P_API:
      d.type = NTP_P2P_API; d.p2pApi.func = emu_func[op->kind]; d.p2pApi.count = op->count;
      d.p2pApi.datatype = emu_dtype_name(op->dtype); d.p2pApi.stream = op->stream;
      break;
    case EMU_D_TASK:
      if (p2p) {
        d.type = NTP_P2P; d.p2p.func = emu_func[op->kind]; d.p2p.buff = op->kind == EMU_K_SEND ? (void *)op->sendbuff : op->recvbuff;
        d.p2p.datatype = emu_dtype_name(op->dtype); d.p2p.count = op->count; d.p2p.peer = op->peer; d.p2p.nChannels = 1;
      } else {
        d.type = NTP_COLL; d.coll.seqNumber = (uint64_t)a; d.coll.func = emu_func[op->kind]; d.coll.sendBuff = op->sendbuff;
        d.coll.recvBuff = op->recvbuff; d.coll.count = op->count; d.coll.root = op->root;
        d.coll.datatype = emu_dtype_name(op->dtype); d.coll.nChannels = 1; d.coll.algo = "Ring"; d.coll.proto = "Simple";
      }
      break;
    case EMU_D_PROXY_OP:
      d.type = NTP_PROXY_OP; d.proxyOp.pid = getpid(); d.proxyOp.channelId = 0; d.proxyOp.peer = b;
      d.proxyOp.nSteps = a; d.proxyOp.chunkSize = EMU_CHUNK; d.proxyOp.isSend = op->kind == EMU_K_SEND;
      break;
    case EMU_D_STEP: d.type = NTP_PROXY_STEP; d.proxyStep.step = a; break;
    case EMU_D_KERNEL: d.type = NTP_KERNEL_CH; d.kernelCh.channelId = 0; break;
    }
    t->start(c->prof_ctx, &h, &d);
    return h;
  }
  if (what == EMU_D_GROUP_API || what == EMU_D_COLL_API || what == EMU_D_P2P_API)
    return NULL; /* API events: v5 on */
  if (what == EMU_D_KERNEL && v < 3)
    return NULL;
  if (v == 4) {
    struct ntp_descr_v4 d;
    memset(&d, 0, sizeof d);
    d.parentObj = parent;
    d.rank = c->rank;
    if (what == EMU_D_TASK && p2p) {
      d.type = NTP_P2P; d.p2p.func = emu_func[op->kind]; d.p2p.datatype = emu_dtype_name(op->dtype);
      d.p2p.count = op->count; d.p2p.peer = op->peer; d.p2p.nChannels = 1;
    } else if (what == EMU_D_TASK) {
      d.type = NTP_COLL; d.coll.seqNumber = (uint64_t)a; d.coll.func = emu_func[op->kind]; d.coll.count = op->count;
      d.coll.root = op->root; d.coll.datatype = emu_dtype_name(op->dtype); d.coll.nChannels = 1;
    } else if (what == EMU_D_PROXY_OP) {
      d.type = NTP_PROXY_OP; d.proxyOp.pid = getpid(); d.proxyOp.peer = b; d.proxyOp.nSteps = a;
      d.proxyOp.chunkSize = EMU_CHUNK; d.proxyOp.isSend = op->kind == EMU_K_SEND;
    } else if (what == EMU_D_STEP) {
      d.type = NTP_PROXY_STEP; d.proxyStep.step = a;
    } else {
      d.type = NTP_KERNEL_CH;
    }
    t->start(c->prof_ctx, &h, &d);
    return h;
  }
  /* v1 to v3: the comm's name and hash ride on each op descriptor */
  union { struct ntp_descr_v1 v1; struct ntp_descr_v2 v2; struct ntp_descr_v3 v3; } u;
  memset(&u, 0, sizeof u);
  u.v1.parentObj = parent;
  u.v1.rank = c->rank;
  if (what == EMU_D_TASK) {
    if (v == 1) {
      if (p2p) {
        u.v1.type = NTP_P2P; u.v1.p2p.commHash = c->prof_hash; u.v1.p2p.func = emu_func_v1[op->kind];
        u.v1.p2p.datatype = (uint8_t)op->dtype; u.v1.p2p.count = op->count; u.v1.p2p.peer = op->peer;
      } else {
        u.v1.type = NTP_COLL; u.v1.coll.commHash = c->prof_hash; u.v1.coll.seqNumber = (uint64_t)a;
        u.v1.coll.func = emu_func_v1[op->kind]; u.v1.coll.count = op->count; u.v1.coll.root = op->root;
        u.v1.coll.datatype = (uint8_t)op->dtype; u.v1.coll.op = (uint32_t)op->redop;
      }
    } else if (v == 2) {
      if (p2p) {
        u.v2.type = NTP_P2P; u.v2.p2p.commHash = c->prof_hash; u.v2.p2p.func = emu_func[op->kind];
        u.v2.p2p.datatype = emu_dtype_name(op->dtype); u.v2.p2p.count = op->count; u.v2.p2p.peer = op->peer;
      } else {
        u.v2.type = NTP_COLL; u.v2.coll.commHash = c->prof_hash; u.v2.coll.seqNumber = (uint64_t)a;
        u.v2.coll.func = emu_func[op->kind]; u.v2.coll.count = op->count; u.v2.coll.root = op->root;
        u.v2.coll.datatype = emu_dtype_name(op->dtype);
      }
    } else {
      if (p2p) {
        u.v3.type = NTP_P2P; u.v3.p2p.commHash = c->prof_hash; u.v3.p2p.func = emu_func[op->kind];
        u.v3.p2p.datatype = emu_dtype_name(op->dtype); u.v3.p2p.count = op->count; u.v3.p2p.peer = op->peer;
      } else {
        u.v3.type = NTP_COLL; u.v3.coll.commHash = c->prof_hash; u.v3.coll.seqNumber = (uint64_t)a;
        u.v3.coll.func = emu_func[op->kind]; u.v3.coll.count = op->count; u.v3.coll.root = op->root;
        u.v3.coll.datatype = emu_dtype_name(op->dtype);
      }
    }
  } else if (what == EMU_D_PROXY_OP) {
    /* proxyOp sits at the same offset in v1 to v3 */
    u.v1.type = NTP_PROXY_OP; u.v1.proxyOp.pid = getpid(); u.v1.proxyOp.peer = b; u.v1.proxyOp.nSteps = a;
    u.v1.proxyOp.chunkSize = EMU_CHUNK; u.v1.proxyOp.isSend = op->kind == EMU_K_SEND;
  } else if (what == EMU_D_STEP) {
    u.v1.type = NTP_PROXY_STEP; u.v1.proxyStep.step = a;
  } else {
    u.v3.type = NTP_KERNEL_CH;
  }
  t->start(c->prof_ctx, &h, &u);
  return h;
}

static void emu_prof_stop(void *h)
{
  const struct emu_prof_common *t = emu_tab();
  if (t && h)
    t->stop(h);
}

static void emu_prof_state(void *h, int state, size_t bytes)
{
  const struct emu_prof_common *t = emu_tab();
  if (!t || !h)
    return;
  if (emu_prof_ver >= 4) {
    union ntp_state_v4 a = { .proxyStep = { .transSize = bytes } };
    t->state(h, state, &a);
  } else {
    union ntp_state_v1 a = { .proxyOp = { .transSize = bytes, .steps = 1 } };
    t->state(h, state, &a);
  }
}

/* ---- API events (the calling thread) ---- */

static __thread void *emu_group_api; /* this thread's open group API event */

void emu_prof_api(struct emu_op *op, int user_depth)
{
  struct ncclComm *c = op->comm;
  if (!c->prof_ctx || emu_prof_ver < 5)
    return;
  if (!emu_group_api)
    emu_group_api = emu_prof_start(c, EMU_D_GROUP_API, NULL, NULL, user_depth + 1, 0);
  if (emu_group_api && user_depth == 0)
    emu_prof_state(emu_group_api, NTP_GROUP_START_API_STOP, 0);
  void *h = emu_prof_start(c, emu_is_p2p(op->kind) ? EMU_D_P2P_API : EMU_D_COLL_API, emu_group_api, op, 0, 0);
  op->prof_api = h;
  emu_prof_stop(h); /* the API call ends with its append */
}

void emu_prof_group_end(void)
{
  void *g = emu_group_api;
  emu_group_api = NULL;
  emu_prof_stop(g);
}

/* ---- task and proxy events ---- */

void emu_prof_task(struct emu_op *op)
{
  struct ncclComm *c = op->comm;
  if (!c->prof_ctx)
    return;
  uint64_t fseq = emu_is_p2p(op->kind) ? 0 : ++c->prof_func_seq[op->kind];
  op->prof_task = emu_prof_start(c, EMU_D_TASK, op->prof_api, op, (int)(fseq - 1), 0);
}

void emu_prof_op_begin(struct emu_op *op, int nsteps, int peer)
{
  struct ncclComm *c = op->comm;
  if (!c->prof_ctx || op->prof_op)
    return;
  op->prof_kernel = emu_prof_start(c, EMU_D_KERNEL, op->prof_task, op, 0, 0);
  op->prof_op = emu_prof_start(c, EMU_D_PROXY_OP, op->prof_task, op, nsteps, peer);
  op->prof_step_no = -1;
}

void emu_prof_step_begin(struct emu_op *op, int step, size_t bytes)
{
  struct ncclComm *c = op->comm;
  if (!c->prof_ctx || !op->prof_op || op->prof_step_no == step)
    return;
  op->prof_step = emu_prof_start(c, EMU_D_STEP, op->prof_op, op, step, 0);
  op->prof_step_no = step;
  int st;
  if (op->kind == EMU_K_SEND)
    st = emu_prof_ver >= 4 ? NTP_STEP_SEND_PEER_WAIT_V4 : NTP_STEP_SEND_WAIT;
  else
    st = NTP_STEP_RECV_WAIT;
  emu_prof_state(op->prof_step, st, bytes);
}

void emu_prof_step_end(struct emu_op *op)
{
  if (op->prof_step) {
    emu_prof_stop(op->prof_step);
    op->prof_step = NULL;
  }
}

void emu_prof_op_end(struct emu_op *op)
{
  emu_prof_step_end(op);
  if (op->prof_kernel) {
    const struct emu_prof_common *t = emu_tab();
    if (t && emu_prof_ver >= 4) {
      union ntp_state_v4 a = { .kernelCh = { .pTimer = emu_now_ns() } };
      t->state(op->prof_kernel, NTP_KERNEL_CH_STOP, &a);
    }
    emu_prof_stop(op->prof_kernel);
    op->prof_kernel = NULL;
  }
  emu_prof_stop(op->prof_op);
  op->prof_op = NULL;
  emu_prof_stop(op->prof_task);
  op->prof_task = NULL;
}
