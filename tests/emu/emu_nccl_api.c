/* emu_nccl_api.c -- the public NCCL API of the emulator: unique ids, init,
 * groups, argument checks, collectives, send/recv and small queries.
 *
 * Thread-safety: as NCCL.  Group state (depth, stored error, pending ops)
 * is thread-local: a GroupStart on one thread is not closed by a GroupEnd
 * on another.  Not async-signal-safe.
 *
 * Exports mirror the real libnccl.so.2: every function is defined as
 * pncclX (GLOBAL) and ncclX is a WEAK alias at the same address. */
#include "emu_nccl.h"
#include "interpose/nccl_newer.h"
#include "emu_nccl_prof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Thread-local group state, as NCCL's ncclGroupDepth/ncclGroupError. */
static __thread int emu_group_depth;
static __thread ncclResult_t emu_group_error;
static __thread struct emu_op *emu_group_head, **emu_group_tail;

EMU_API ncclResult_t pncclGetVersion(int *version)
{
  if (!version)
    return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

EMU_API const char *pncclGetErrorString(ncclResult_t r)
{
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

EMU_API const char *pncclGetLastError(ncclComm_t comm) { return emu_get_last_error(comm); }

/* The id carries a magic and the name of the shared-memory segment the
 * ranks meet in. */
EMU_API ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
  if (!id) {
    emu_set_last_error(NULL, "ncclGetUniqueId: uniqueId is NULL");
    return ncclInvalidArgument;
  }
  uint64_t rnd[2];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    rnd[0] = emu_now_ns() ^ ((uint64_t)getpid() << 32);
    rnd[1] = (uint64_t)(uintptr_t)id ^ emu_now_ns();
  }
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "%s/ncclemu-%016llx%016llx", EMU_ID_MAGIC,
           (unsigned long long)rnd[0], (unsigned long long)rnd[1]);
  return ncclSuccess;
}

static ncclResult_t emu_id_name(const ncclUniqueId *id, char *name, size_t len)
{
  size_t ml = strlen(EMU_ID_MAGIC);
  if (memcmp(id->internal, EMU_ID_MAGIC, ml) != 0 || id->internal[ml] != '/' ||
      strnlen(id->internal + ml, sizeof id->internal - ml) >= len) {
    emu_set_last_error(NULL, "ncclCommInitRank: not an ncclUniqueId from ncclGetUniqueId");
    return ncclInvalidArgument;
  }
  snprintf(name, len, "%s", id->internal + ml);
  return ncclSuccess;
}

static ncclResult_t emu_init_common(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank,
                                    ncclConfig_t *config)
{
  if (!comm) {
    emu_set_last_error(NULL, "ncclCommInitRank: comm is NULL");
    return ncclInvalidArgument;
  }
  *comm = NULL;
  if (nranks < 1 || nranks > EMU_MAX_RANKS || rank < 0 || rank >= nranks) {
    emu_set_last_error(NULL, "ncclCommInitRank: invalid rank %d / nranks %d (emulator: at most %d)", rank, nranks,
                       EMU_MAX_RANKS);
    return ncclInvalidArgument;
  }
  if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize))) {
    emu_set_last_error(NULL, "ncclCommInitRank: config not initialized with NCCL_CONFIG_INITIALIZER");
    return ncclInvalidArgument;
  }
  char name[64];
  ncclResult_t rc = emu_id_name(id, name, sizeof name);
  if (rc != ncclSuccess)
    return rc;
  return emu_comm_init(comm, nranks, name, rank, config, 1);
}

EMU_API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
  return emu_init_common(comm, nranks, &id, rank, NULL);
}

EMU_API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                             ncclConfig_t *config)
{
  return emu_init_common(comm, nranks, &id, rank, config);
}

/* Several ids only speed up NCCL's bootstrap; the first is enough here. */
EMU_API ncclResult_t pncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nid, ncclUniqueId *ids,
                                               ncclConfig_t *config)
{
  if (nid < 1 || !ids) {
    emu_set_last_error(NULL, "ncclCommInitRankScalable: need at least one id");
    return ncclInvalidArgument;
  }
  return emu_init_common(comm, nranks, &ids[0], rank, config);
}

struct emu_initall_arg {
  ncclComm_t *comm;
  int n, rank, dev;
  ncclUniqueId id;
  ncclResult_t rc;
};

static void *emu_initall_thread(void *p)
{
  struct emu_initall_arg *a = p;
  emu_set_device(a->dev);
  a->rc = emu_init_common(a->comm, a->n, &a->id, a->rank, NULL);
  return NULL;
}

/* One process, ndev ranks: one thread per rank joins, since init blocks
 * until every rank has joined. */
EMU_API ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
  if (!comms || ndev < 1 || ndev > EMU_MAX_RANKS) {
    emu_set_last_error(NULL, "ncclCommInitAll: invalid argument");
    return ncclInvalidArgument;
  }
  for (int i = 0; i < ndev; i++)
    if (devlist && (devlist[i] < 0 || devlist[i] >= emu_device_count())) {
      emu_set_last_error(NULL, "ncclCommInitAll: invalid device %d", devlist[i]);
      return ncclInvalidArgument;
    }
  struct emu_initall_arg *a = calloc((size_t)ndev, sizeof *a);
  pthread_t *t = calloc((size_t)ndev, sizeof *t);
  if (!a || !t) {
    free(a);
    free(t);
    return ncclSystemError;
  }
  ncclUniqueId id;
  pncclGetUniqueId(&id);
  int started = 0;
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < ndev; i++) {
    a[i] = (struct emu_initall_arg){ &comms[i], ndev, i, devlist ? devlist[i] : i % emu_device_count(), id,
                                     ncclSuccess };
    if (emu_thread_start(&t[i], emu_initall_thread, &a[i], 0) != 0) {
      rc = ncclSystemError;
      break;
    }
    started++;
  }
  if (started < ndev) {
    /* The started ranks wait for the others forever: run the missing ones
     * here, one after the other would deadlock, so give up loudly. */
    emu_log("ncclCommInitAll: cannot start init threads");
    abort();
  }
  for (int i = 0; i < started; i++) {
    pthread_join(t[i], NULL);
    if (a[i].rc != ncclSuccess && rc == ncclSuccess)
      rc = a[i].rc;
  }
  free(a);
  free(t);
  return rc;
}

EMU_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
  if (!emu_comm_valid(comm) || !err) {
    emu_set_last_error(NULL, "ncclCommGetAsyncError: invalid argument");
    return ncclInvalidArgument;
  }
  *err = (ncclResult_t)atomic_load_explicit(&comm->async_err, memory_order_acquire);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
  if (!emu_comm_valid(comm) || !count)
    return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
  if (!emu_comm_valid(comm) || !rank)
    return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *dev)
{
  if (!emu_comm_valid(comm) || !dev)
    return ncclInvalidArgument;
  *dev = comm->device;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
  if (!ptr)
    return ncclInvalidArgument;
  *ptr = NULL;
  if (size == 0)
    return ncclSuccess;
  return posix_memalign(ptr, 4096, size) == 0 ? ncclSuccess : ncclSystemError;
}

EMU_API ncclResult_t pncclMemFree(void *ptr)
{
  free(ptr);
  return ncclSuccess;
}

/* Registration is a no-op on host memory; the handle only has to be
 * non-NULL and unique. */
EMU_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
  (void)size;
  if (!emu_comm_valid(comm) || !handle)
    return ncclInvalidArgument;
  *handle = buff ? buff : (void *)comm;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
  if (!emu_comm_valid(comm) || !handle)
    return ncclInvalidArgument;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t dtype,
                                               ncclScalarResidence_t residence, ncclComm_t comm)
{
  if (!emu_comm_valid(comm) || !op || !scalar || (int)dtype < 0 || dtype >= ncclNumTypes ||
      (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclRedOpCreatePreMulSum: invalid argument");
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&comm->mu);
  int i = 0;
  while (i < EMU_MAX_USER_OPS && comm->user_ops[i].used)
    i++;
  if (i == EMU_MAX_USER_OPS) {
    pthread_mutex_unlock(&comm->mu);
    emu_set_last_error(comm, "ncclRedOpCreatePreMulSum: too many ops (emulator limit %d)", EMU_MAX_USER_OPS);
    return ncclInvalidUsage;
  }
  struct emu_user_op *u = &comm->user_ops[i];
  u->used = 1;
  u->dtype = dtype;
  u->residence = residence;
  u->ptr = scalar;
  emu_red_scalar_copy(u->value, scalar, dtype);
  pthread_mutex_unlock(&comm->mu);
  *op = (ncclRedOp_t)(ncclNumOps + i);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
  int i = (int)op - ncclNumOps;
  if (!emu_comm_valid(comm) || i < 0 || i >= EMU_MAX_USER_OPS || !comm->user_ops[i].used) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclRedOpDestroy: invalid op %d", (int)op);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&comm->mu);
  comm->user_ops[i].used = 0;
  pthread_mutex_unlock(&comm->mu);
  return ncclSuccess;
}

/* ---- groups ------------------------------------------------------------ */

static void emu_group_drop(void)
{
  while (emu_group_head) {
    struct emu_op *op = emu_group_head;
    emu_group_head = op->next;
    free(op);
  }
  emu_group_tail = &emu_group_head;
}

EMU_API ncclResult_t pncclGroupStart(void)
{
  if (emu_group_depth == 0) {
    emu_group_error = ncclSuccess;
    emu_group_head = NULL;
    emu_group_tail = &emu_group_head;
  }
  emu_group_depth++;
  return ncclSuccess;
}

int emu_group_depth_now(void) { return emu_group_depth; }

/* NCCLEMU_NB_DEFER_MS=N: NCCL launches a nonblocking communicator's group
 * from a helper thread (group.cc, groupLaunchNonBlocking) and its GroupEnd
 * returns ncclInProgress before the work is on the stream; the comm says
 * ncclInProgress until it is.  Modeled on demand: the ops reach their
 * streams N ms later, from a thread.  0 (default): enqueued at once. */
struct emu_nb_job {
  struct emu_op *ops;
  int ms;
};

static void *emu_nb_launch(void *arg)
{
  struct emu_nb_job *j = arg;
  struct timespec ts = { j->ms / 1000, (long)(j->ms % 1000) * 1000000L };
  nanosleep(&ts, NULL);
  struct ncclComm *c = j->ops->comm;
  struct ncclComm **held;
  int nheld = emu_p2p_connect(j->ops, &held);
  emu_launch(j->ops);
  for (int i = 0; i < nheld; i++)
    emu_comm_put(held[i]);
  free(held);
  int expect = ncclInProgress;
  atomic_compare_exchange_strong(&c->async_err, &expect, ncclSuccess);
  emu_comm_put(c);
  free(j);
  return NULL;
}

static int emu_nb_defer(struct emu_op *ops)
{
  /* Threads of one process may end groups at once: read the setting once,
   * published atomically (getenv is safe to race; the cache is not). */
  static _Atomic int ms_cached = -1;
  int ms = atomic_load_explicit(&ms_cached, memory_order_relaxed);
  if (ms < 0) {
    const char *e = getenv("NCCLEMU_NB_DEFER_MS");
    ms = e ? atoi(e) : 0;
    if (ms < 0)
      ms = 0;
    atomic_store_explicit(&ms_cached, ms, memory_order_relaxed);
  }
  struct ncclComm *c = ops->comm;
  if (!ms || !emu_comm_valid(c) || c->blocking)
    return 0;
  for (struct emu_op *o = ops; o; o = o->next)
    if (o->comm != c)
      return 0;   /* one communicator per deferred group: enough for the tests */
  struct emu_nb_job *j = malloc(sizeof *j);
  if (!j)
    return 0;
  j->ops = ops;
  j->ms = ms;
  int expect = ncclSuccess;
  if (!atomic_compare_exchange_strong(&c->async_err, &expect, ncclInProgress)) {
    free(j);
    return 0;
  }
  atomic_fetch_add(&c->refs, 1);
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &a, emu_nb_launch, j);
  pthread_attr_destroy(&a);
  if (rc != 0) {
    atomic_store(&c->async_err, ncclSuccess);
    emu_comm_put(c);
    free(j);
    return 0;
  }
  return 1;
}

static ncclResult_t emu_group_end_inner(bool simulate);
/* The outermost end closes the group's profiler API event, after the launch. */
static ncclResult_t emu_group_end(bool simulate)
{
  int outer = emu_group_depth == 1;
  ncclResult_t rc = emu_group_end_inner(simulate);
  if (outer)
    emu_prof_group_end();
  return rc;
}

static ncclResult_t emu_group_end_inner(bool simulate)
{
  if (emu_group_depth == 0) {
    emu_set_last_error(NULL, "ncclGroupEnd: not in a group call.");
    return ncclInvalidUsage;
  }
  if (--emu_group_depth > 0)
    return ncclSuccess;
  ncclResult_t inits = simulate ? ncclSuccess : emu_group_run_inits();
  if (inits != ncclSuccess && inits != ncclInProgress && emu_group_error == ncclSuccess)
    emu_group_error = inits;
  ncclResult_t reg = emu_reg_group_end();
  ncclResult_t rc = emu_group_error != ncclSuccess ? emu_group_error : reg;
  emu_group_error = ncclSuccess;
  if (rc != ncclSuccess || simulate) {
    /* The group's operations are dropped: nothing reaches a stream. */
    emu_group_drop();
    return rc;
  }
  struct emu_op *ops = emu_group_head;
  emu_group_head = NULL;
  emu_group_tail = &emu_group_head;
  if (ops && emu_nb_defer(ops))
    return ncclInProgress;
  if (inits == ncclInProgress && !ops)
    return ncclInProgress;
  if (ops) {
    struct ncclComm **held;
    int nheld = emu_p2p_connect(ops, &held);
    emu_launch(ops);
    for (int i = 0; i < nheld; i++)
      emu_comm_put(held[i]);
    free(held);
  }
  return ncclSuccess;
}

EMU_API ncclResult_t pncclGroupEnd(void) { return emu_group_end(false); }

EMU_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *info)
{
  if (info && info->magic != 0x74685283) {
    emu_set_last_error(NULL, "ncclGroupSimulateEnd: simInfo not initialized with NCCL_SIM_INFO_INITIALIZER");
    if (emu_group_depth > 0)
      emu_group_error = ncclInvalidArgument;
    return ncclInvalidArgument;
  }
  /* "Time" of a group on the emulator: proportional to the bytes queued. */
  size_t bytes = 0;
  for (struct emu_op *op = emu_group_head; op; op = op->next)
    bytes += op->count * emu_dtype_size(op->dtype);
  ncclResult_t rc = emu_group_end(true);
  if (info && rc == ncclSuccess)
    info->estimatedTime = 5.0f + (float)bytes / 10000.0f;   /* microseconds, a 10 GB/s link */
  return rc;
}

/* ---- enqueue ------------------------------------------------------------ */

static const char *const emu_kind_names[] = { "", "AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                              "AlltoAll", "Gather", "Scatter", "Send", "Recv" };

static ncclResult_t emu_check(const struct emu_op *op)
{
  const char *nm = emu_kind_names[op->kind];
  struct ncclComm *c = op->comm;
  if (!emu_comm_valid(c)) {
    emu_set_last_error(NULL, "%s: invalid communicator", nm);
    return ncclInvalidArgument;
  }
  if (!atomic_load(&c->ready)) {
    emu_set_last_error(c, "%s: communicator is not initialized (yet)", nm);
    return ncclInvalidUsage;
  }
  if (emu_comm_cancelled(c)) {
    emu_set_last_error(c, "%s: communicator was revoked", nm);
    return ncclInvalidUsage;
  }
  if (op->dtype < 0 || op->dtype >= ncclNumTypes) {
    emu_set_last_error(c, "%s: invalid type %d", nm, op->dtype);
    return ncclInvalidArgument;
  }
  bool reduces = op->kind == EMU_K_ALLREDUCE || op->kind == EMU_K_REDUCE || op->kind == EMU_K_REDUCESCATTER;
  if (reduces && op->redop >= ncclNumOps) {
    int i = op->redop - ncclNumOps;
    if (i >= EMU_MAX_USER_OPS || !c->user_ops[i].used || c->user_ops[i].dtype != op->dtype) {
      emu_set_last_error(c, "%s: invalid reduction op %d", nm, op->redop);
      return ncclInvalidArgument;
    }
  } else if (reduces && op->redop < 0) {
    emu_set_last_error(c, "%s: invalid reduction op %d", nm, op->redop);
    return ncclInvalidArgument;
  }
  bool rooted = op->kind == EMU_K_BROADCAST || op->kind == EMU_K_REDUCE || op->kind == EMU_K_GATHER ||
                op->kind == EMU_K_SCATTER;
  if (rooted && (op->root < 0 || op->root >= c->nranks)) {
    emu_set_last_error(c, "%s : invalid root %d (root should be in the 0..%d range)", nm, op->root, c->nranks - 1);
    return ncclInvalidArgument;
  }
  if ((op->kind == EMU_K_SEND || op->kind == EMU_K_RECV) && (op->peer < 0 || op->peer >= c->nranks)) {
    emu_set_last_error(c, "%s : invalid peer %d (peer should be in the 0..%d range)", nm, op->peer, c->nranks - 1);
    return ncclInvalidArgument;
  }
  if (op->count == 0)
    return ncclSuccess;
  bool me_root = op->root == c->rank;
  bool need_send = op->kind != EMU_K_RECV &&
                   !((op->kind == EMU_K_BROADCAST || op->kind == EMU_K_SCATTER) && !me_root);
  bool need_recv = op->kind != EMU_K_SEND &&
                   !((op->kind == EMU_K_REDUCE || op->kind == EMU_K_GATHER) && !me_root);
  if (need_send && !op->sendbuff) {
    emu_set_last_error(c, "%s : sendbuff is NULL", nm);
    return ncclInvalidArgument;
  }
  if (need_recv && !op->recvbuff) {
    emu_set_last_error(c, "%s : recvbuff is NULL", nm);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t emu_enqueue_one(int kind, const void *sendbuff, void *recvbuff, size_t count,
                                    ncclDataType_t dtype, int redop, int root, int peer, ncclComm_t comm,
                                    cudaStream_t stream);

/* NCCL's ncclCommEnsureReady, at the start of every enqueue: it asks
 * ncclCommGetAsyncError -- the exported symbol, through the PLT, so an
 * interposer sees a nested call -- and refuses a communicator whose
 * nonblocking init/split is still in progress (ncclInvalidArgument).  An
 * async error does not fail the enqueue here (see docs/emulator.md). */
static ncclResult_t emu_ensure_ready(ncclComm_t comm, const char *nm)
{
  if (!emu_comm_valid(comm))
    return ncclSuccess;   /* emu_check names the invalid handle */
  ncclResult_t st = ncclSuccess;
  if (ncclCommGetAsyncError(comm, &st) == ncclSuccess && st == ncclInProgress) {
    emu_set_last_error(comm, "%s: attempt to use communicator before the previous operation returned ncclSuccess",
                       nm);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t emu_enqueue(int kind, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dtype,
                                int redop, int root, int peer, ncclComm_t comm, cudaStream_t stream)
{
  ncclResult_t rc = emu_enqueue_one(kind, sendbuff, recvbuff, count, dtype, redop, root, peer, comm, stream);
  /* NCCL's ncclEnqueueCheck ends, for a nonblocking communicator, by
   * returning ncclCommGetAsyncError's state (again the exported symbol). */
  if (rc == ncclSuccess && emu_comm_valid(comm) && !comm->blocking && ncclCommGetAsyncError(comm, &rc) != ncclSuccess)
    rc = ncclInvalidArgument;
  return rc;
}

static ncclResult_t emu_enqueue_one(int kind, const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dtype,
                                    int redop, int root, int peer, ncclComm_t comm, cudaStream_t stream)
{
  struct emu_op probe = { .comm = comm, .kind = kind, .sendbuff = sendbuff, .recvbuff = recvbuff,
                          .count = count, .dtype = (int)dtype, .redop = redop, .root = root, .peer = peer,
                          .stream = stream };
  ncclResult_t rc = emu_ensure_ready(comm, emu_kind_names[kind]);
  if (rc == ncclSuccess)
    rc = emu_check(&probe);
  if (rc == ncclSuccess && count > 0) {
    struct emu_op *op = malloc(sizeof *op);
    if (!op) {
      rc = ncclSystemError;
    } else {
      *op = probe;
      if (redop >= ncclNumOps && (kind == EMU_K_ALLREDUCE || kind == EMU_K_REDUCE || kind == EMU_K_REDUCESCATTER)) {
        const struct emu_user_op *u = &comm->user_ops[redop - ncclNumOps];
        op->premul = true;
        /* A device-resident scalar is read at enqueue here: the emulator
         * has no kernel to dereference it later. */
        emu_red_scalar_copy(op->scalar, u->residence == ncclScalarDevice ? u->ptr : u->value, (int)dtype);
      }
      if (emu_group_depth == 0) {
        emu_group_head = NULL;
        emu_group_tail = &emu_group_head;
      }
      *emu_group_tail = op;
      emu_group_tail = &op->next;
      emu_prof_api(op, emu_group_depth);
    }
  }
  if (emu_group_depth > 0) {
    if (rc != ncclSuccess && emu_group_error == ncclSuccess)
      emu_group_error = rc;
    return rc;
  }
  if (rc != ncclSuccess)
    return rc;
  /* Outside a group a call is its own group (NCCL's implicit scope). */
  emu_group_depth = 1;
  emu_group_error = ncclSuccess;
  return emu_group_end(false);
}

EMU_API ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

/* NCCL 2.28's ncclBcast is ncclBroadcast in place, called by its exported
 * name: through the PLT, so an interposer (or a program defining
 * ncclBroadcast) sees the nested call. */
EMU_API ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

EMU_API ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                                    ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, -1, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                   ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_ALLTOALL, sendbuff, recvbuff, count, datatype, -1, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                 int root, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_GATHER, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                  int root, ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_SCATTER, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

/* The per-call-config collectives (NCCL 2.32) are the plain ones here: a
 * config only tunes how NCCL runs the collective (CTAs, algorithm, a
 * profiler tag, a launch event), none of which the emulator has. */
EMU_API ncclResult_t pncclAllReduceConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_ALLREDUCE, sendbuff, recvbuff, count, datatype, (int)op, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclBroadcastConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_BROADCAST, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclReduceConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                                       const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_REDUCE, sendbuff, recvbuff, count, datatype, (int)op, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclAllGatherConfig(const void *sendbuff, void *recvbuff, size_t sendcount,
                                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, -1, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclReduceScatterConfig(const void *sendbuff, void *recvbuff, size_t recvcount,
                                              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                              cudaStream_t stream, const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, (int)op, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclAlltoAllConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_ALLTOALL, sendbuff, recvbuff, count, datatype, -1, -1, -1, comm, stream);
}

EMU_API ncclResult_t pncclGatherConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_GATHER, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclScatterConfig(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                        int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config)
{
  (void)config;
  return emu_enqueue(EMU_K_SCATTER, sendbuff, recvbuff, count, datatype, -1, root, -1, comm, stream);
}

EMU_API ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclComm_t comm, cudaStream_t stream)
{
  return emu_enqueue(EMU_K_SEND, sendbuff, NULL, count, datatype, -1, -1, peer, comm, stream);
}

EMU_API ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                               cudaStream_t stream)
{
  return emu_enqueue(EMU_K_RECV, NULL, recvbuff, count, datatype, -1, -1, peer, comm, stream);
}

EMU_ALIAS(ncclGetVersion)
EMU_ALIAS(ncclGetErrorString)
EMU_ALIAS(ncclGetLastError)
EMU_ALIAS(ncclGetUniqueId)
EMU_ALIAS(ncclCommInitRank)
EMU_ALIAS(ncclCommInitRankConfig)
EMU_ALIAS(ncclCommInitRankScalable)
EMU_ALIAS(ncclCommInitAll)
EMU_ALIAS(ncclCommGetAsyncError)
EMU_ALIAS(ncclCommCount)
EMU_ALIAS(ncclCommUserRank)
EMU_ALIAS(ncclCommCuDevice)
EMU_ALIAS(ncclMemAlloc)
EMU_ALIAS(ncclMemFree)
EMU_ALIAS(ncclCommRegister)
EMU_ALIAS(ncclCommDeregister)
EMU_ALIAS(ncclRedOpCreatePreMulSum)
EMU_ALIAS(ncclRedOpDestroy)
EMU_ALIAS(ncclGroupStart)
EMU_ALIAS(ncclGroupEnd)
EMU_ALIAS(ncclGroupSimulateEnd)
EMU_ALIAS(ncclAllReduce)
EMU_ALIAS(ncclBroadcast)
EMU_ALIAS(ncclBcast)
EMU_ALIAS(ncclReduce)
EMU_ALIAS(ncclAllGather)
EMU_ALIAS(ncclReduceScatter)
EMU_ALIAS(ncclAlltoAll)
EMU_ALIAS(ncclGather)
EMU_ALIAS(ncclScatter)
EMU_ALIAS(ncclSend)
EMU_ALIAS(ncclRecv)
EMU_ALIAS(ncclAllReduceConfig)
EMU_ALIAS(ncclBroadcastConfig)
EMU_ALIAS(ncclReduceConfig)
EMU_ALIAS(ncclAllGatherConfig)
EMU_ALIAS(ncclReduceScatterConfig)
EMU_ALIAS(ncclAlltoAllConfig)
EMU_ALIAS(ncclGatherConfig)
EMU_ALIAS(ncclScatterConfig)
