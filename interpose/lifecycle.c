/* lifecycle.c -- the hand-written NT_LIFE wrappers: unique ids, inits,
 * split/shrink/grow, finalize/destroy/abort/revoke, suspend/resume,
 * ncclCommGetAsyncError, window registration and device communicators.
 *
 * Thread-safety: any thread.  Registry changes and the watchdog's use of
 * comm handles are serialized by nti_life_lock (never held across a real
 * NCCL call that may block, only across registry updates -- and, in the
 * watchdog, across its non-blocking ncclCommGetAsyncError poll).
 * Signal-safety: none of this runs in a signal handler.
 *
 * Every call here records ENTER before and EXIT after the real call, and
 * sets the comm's blocked_since/blocked_kind meanwhile, so a call that never
 * returns is visible in the ring and to the watchdog.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/comm.h"
#include "interpose/ident.h"
#include "interpose/record.h"
#include "interpose/watchdog.h"
#include "interpose/exchange.h"
#include "interpose/trigger.h"

struct life {
  unsigned kind;
  struct nti_comm *c;
  uint64_t comm_id; /* for records without a registered comm */
  int rank, nranks;
  uint64_t aux;
  uint64_t enter_tsc;
  int saved_errno;
};

static void life_fill(struct ntr_record *r, const struct life *l) {
  if (!l->c && l->comm_id) {
    r->comm_id = l->comm_id;
    r->rank = l->rank;
    r->nranks = l->nranks;
  }
  r->aux = l->aux;
}

static void life_enter(struct life *l) {
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, l->kind, NTR_PHASE_ENTER, l->c);
  life_fill(r, l);
  if (NTI_UNLIKELY(nti_sites_on()))
    nti_sites(r, NULL);
  l->enter_tsc = r->tsc;
  nti_record_end(r, pos, l->c);
  if (l->c)
    nti_blocked_mark(l->c->cs, l->kind, nti_tid(), l->enter_tsc);
}

/* The comm whose init this thread is inside (set before the real call,
 * cleared after): NCCL calls the profiler plugin's init from there, and
 * the plugin (profiler.c) takes this comm as the one it profiles. */
static NTI_TLS struct nti_comm *plugin_initing;

static void life_exit(struct life *l, ncclResult_t res) {
  plugin_initing = NULL;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, l->kind, NTR_PHASE_EXIT, l->c);
  life_fill(r, l);
  r->result = res;
  nti_record_end(r, pos, l->c);
  /* A nonblocking call that returned ncclInProgress is still running: it
   * stays "blocked" until ncclCommGetAsyncError reports the end. */
  if (l->c && res != ncclInProgress)
    nti_blocked_clear(l->c->cs);
}

static int config_nonblocking(const ncclConfig_t *config, int dflt) {
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT)
    return config->blocking == 0;
  return dflt;
}

/* NCCL's variable, not a knob of ours: read at comm init, as NCCL reads
 * it, so a value a script sets after load (os.environ) and before its
 * first comm holds for us as it does for NCCL. */
static int env_nonblocking(void) {
  const char *v = getenv("NCCL_COMM_BLOCKING");
  return v && v[0] == '0' && v[1] == 0;
}

void nti_life_slot_reused(const struct ntr_comm_state *cs) {
  /* The final state, as a reader of the slot would have had it. */
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_NOTE, NTR_PHASE_EVENT, NULL);
  r->comm_id = cs->comm_id;
  r->rank = cs->rank;
  r->nranks = cs->nranks;
  r->seq = __atomic_load_n(&cs->coll_seq, __ATOMIC_RELAXED);
  r->count = __atomic_load_n(&cs->last_completed, __ATOMIC_RELAXED);
  r->aux = __atomic_load_n(&cs->lifecycle, __ATOMIC_RELAXED);
  r->result = __atomic_load_n(&cs->async_error, __ATOMIC_RELAXED);
  strncpy(r->u.text, "slot reused", sizeof r->u.text); /* NUL-padded */
  nti_record_end(r, pos, NULL);
  ntx_comm_unregister(cs);
}

void nti_life_unwatched(uint64_t comm_id, int rank, int nranks) {
  static int said; /* under nti_life_lock */
  if (!said++)
    nti_say("more than %u communicators alive at once: comm %016llx rank %d and later ones are not watched "
            "(no timeout, no cross-rank check; their calls are recorded without a comm id)",
            NTR_COMM_MAX, (unsigned long long)comm_id, rank);
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_NOTE, NTR_PHASE_EVENT, NULL);
  r->comm_id = comm_id;
  r->rank = rank;
  r->nranks = nranks;
  strncpy(r->u.text, "unwatched", sizeof r->u.text); /* NUL-padded */
  nti_record_end(r, pos, NULL);
}

static struct nti_comm *new_comm(uint64_t id, int rank, int nranks, unsigned kind, int nonblocking,
                                 uint64_t parent, uint64_t aux) {
  pthread_mutex_lock(&nti_life_lock);
  struct nti_comm *c = nti_comm_create(id, rank, nranks, kind);
  nti_job_from_comm(id);
  pthread_mutex_unlock(&nti_life_lock);
  nti_first_comm();
  if (c) {
    c->nonblocking = nonblocking;
    nti_comm_flags_update(c);
    c->cs->parent_id = parent;
    c->cs->aux = aux;
    if (nonblocking)
      c->cs->flags |= NTR_REC_NONBLOCKING;
    ntx_comm_register(c->cs);
  }
  plugin_initing = c;
  return c;
}

struct nti_comm *nti_plugin_claim(int rank, int nranks) {
  struct nti_comm *c = plugin_initing;
  if (c && !__atomic_exchange_n(&c->plugin_claimed, 1, __ATOMIC_ACQ_REL))
    return c;
  /* A nonblocking init runs on NCCL's thread: the newest comm of this rank
   * and size still in its init that no plugin context claimed yet. */
  for (c = nti_comm_list(); c; c = c->next_all) {
    struct ntr_comm_state *cs = c->cs;
    if (cs->rank == rank && cs->nranks == nranks &&
        __atomic_load_n(&cs->lifecycle, __ATOMIC_ACQUIRE) == NTR_COMM_INIT &&
        !__atomic_exchange_n(&c->plugin_claimed, 1, __ATOMIC_ACQ_REL))
      return c;
  }
  return NULL;
}

struct nti_comm *nti_plugin_comm_new(uint64_t id, int rank, int nranks) {
  if (NTI_UNLIKELY(!nti_active()))
    nti_activate();
  if (!nti_active())
    return NULL;
  struct nti_comm *c = new_comm(id, rank, nranks, NTR_KIND_COMM_INIT_RANK, 0, 0, 0);
  plugin_initing = NULL;
  if (!c)
    return NULL;
  c->plugin_claimed = 2;
  c->cs->flags |= NTR_REC_PLUGIN;
  __atomic_store_n(&c->live, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&c->cs->lifecycle, NTR_COMM_READY, __ATOMIC_RELEASE);
  nti_job_comm_ready(c->cs->comm_id);
  nti_watchdog_comm_ready(c);
  return c;
}

void nti_plugin_comm_end(struct nti_comm *c) {
  if (!c || c->plugin_claimed != 2)
    return;
  __atomic_store_n(&c->live, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&c->cs->lifecycle, NTR_COMM_DESTROYED, __ATOMIC_RELEASE);
}

/* Size known only after split/shrink returned: fill it before the comm is
 * published in the registry (no concurrent reader of p2p_seq yet). */
static void learn_size(struct nti_comm *c, ncclComm_t h) {
  if (!c || !h || c->np2p)
    return;
  ncclResult_t (*count_fn)(ncclComm_t, int *) =
      (ncclResult_t(*)(ncclComm_t, int *))nti_nccl_symbol("ncclCommCount");
  ncclResult_t (*rank_fn)(ncclComm_t, int *) =
      (ncclResult_t(*)(ncclComm_t, int *))nti_nccl_symbol("ncclCommUserRank");
  int n = 0, r = -1;
  if (count_fn && count_fn(h, &n) == ncclSuccess && n > 0 && n < (1 << 24)) {
    c->cs->nranks = n;
    c->p2p_seq = calloc(2 * (size_t)n, sizeof *c->p2p_seq);
    if (c->p2p_seq)
      c->np2p = n;
  }
  if (rank_fn && rank_fn(h, &r) == ncclSuccess)
    c->cs->rank = r;
}

static void init_done(struct nti_comm *c, ncclResult_t res, ncclComm_t h) {
  if (!c)
    return;
  if ((res == ncclSuccess || res == ncclInProgress) && h) {
    learn_size(c, h);
    /* Before the bind: once bound, a poll may record the end of the init,
     * and a later store would undo it. */
    if (res == ncclInProgress)
      __atomic_store_n(&c->cs->async_error, ncclInProgress, __ATOMIC_RELEASE);
    pthread_mutex_lock(&nti_life_lock);
    int rc = nti_comm_bind(c, h);
    pthread_mutex_unlock(&nti_life_lock);
    if (rc < 0)
      nti_say("communicator registry full: comm %016llx is recorded without its id",
              (unsigned long long)c->cs->comm_id);
    __atomic_store_n(&c->cs->lifecycle, res == ncclSuccess ? NTR_COMM_READY : NTR_COMM_INIT,
                     __ATOMIC_RELEASE);
    if (res == ncclSuccess)
      nti_job_comm_ready(c->cs->comm_id);
    nti_watchdog_comm_ready(c);
  } else {
    __atomic_store_n(&c->cs->lifecycle, NTR_COMM_INIT_FAILED, __ATOMIC_RELEASE);
    nti_blocked_clear(c->cs);
  }
}

/* Shared prologue: pass through when inactive or nested. */
#define LIFE_PROLOGUE(name, args)                                            \
  nti_fn_##name##_t real = NTI_REAL(name);                                   \
  if (NTI_UNLIKELY(!real))                                                   \
    return ncclInvalidUsage;                                                 \
  if (NTI_UNLIKELY(!nti_active()) && !nti_tls.guard)                       \
    nti_activate();                                                          \
  if (!nti_active() || nti_tls.guard)                                      \
    return real args;                                                        \
  int nti_errno = errno;                                                     \
  nti_tls.guard++

#define LIFE_CALL(res, call)                                                 \
  do {                                                                       \
    errno = nti_errno;                                                       \
    res = call;                                                              \
    nti_errno = errno;                                                       \
  } while (0)

#define LIFE_EPILOGUE(res)                                                   \
  nti_tls.guard--;                                                           \
  errno = nti_errno;                                                         \
  return res

NTI_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId) {
  LIFE_PROLOGUE(ncclGetUniqueId, (uniqueId));
  struct life l = {.kind = NTR_KIND_GET_UNIQUE_ID};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(uniqueId));
  /* aux: the id every rank will compute for a comm made from this. */
  if (res == ncclSuccess && uniqueId) {
    l.aux = nti_hash_bytes(uniqueId, sizeof *uniqueId);
    ntx_keys_learn_uid(uniqueId, sizeof *uniqueId); /* the root of a comm holds its key first */
  }
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

/* Arguments NCCL rejects before any bootstrap (ncclInvalidArgument): the
 * call is recorded as the rejected call it is, with no comm id, rank or
 * size, so that it never counts as membership of the comm its unique id
 * names (a rank 5 of 2 would make analyze see a 6-rank comm).
 * aux = (rank << 32) | nranks as passed. */
static ncclResult_t init_rejected(unsigned kind, int nranks, int rank, ncclResult_t (*call)(void *), void *arg,
                                  int *nti_errno) {
  struct life l = {.kind = kind, .aux = ((uint64_t)(uint32_t)rank << 32) | (uint32_t)nranks};
  life_enter(&l);
  errno = *nti_errno;
  ncclResult_t res = call(arg);
  *nti_errno = errno;
  life_exit(&l, res);
  return res;
}

static ncclResult_t init_rank(unsigned kind, ncclComm_t *comm, int nranks, ncclUniqueId *id, int rank,
                              ncclConfig_t *config, int nid, ncclResult_t (*call)(void *), void *arg,
                              int *nti_errno) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return init_rejected(kind, nranks, rank, call, arg, nti_errno);
  uint64_t cid = kind == NTR_KIND_COMM_INIT_RANK_SCALABLE ? nti_id_scalable(id, nid)
                                                          : nti_hash_bytes(id, sizeof *id);
  int nb = config_nonblocking(config, env_nonblocking());
  /* Every rank of a scalable init holds the whole array: the first id names
   * the key (the one its root made with ncclGetUniqueId). */
  ntx_keys_learn_uid(id, sizeof *id);
  struct nti_comm *c = new_comm(cid, rank, nranks, kind, nb, 0, 0);
  struct life l = {.kind = kind, .c = c, .comm_id = cid, .rank = rank, .nranks = nranks};
  life_enter(&l);
  ncclResult_t res;
  /* NCCLTRACE_ENV_CHECK=abort: the coordinator compared NCCL_* across the
   * ranks of this comm; a difference fails the init before NCCL sees it (the
   * exchange module already printed which variable differs). */
  if (c && ntx_comm_env_verdict(c->cs) < 0) {
    res = ncclInvalidUsage;
  } else {
    errno = *nti_errno;
    res = call(arg);
    *nti_errno = errno;
  }
  init_done(c, res, comm ? *comm : NULL);
  life_exit(&l, res);
  return res;
}

struct init_args {
  ncclComm_t *comm;
  int nranks, rank, nid;
  ncclUniqueId id, *ids;
  ncclConfig_t *config;
  void *real;
};
static ncclResult_t call_init_rank(void *p) {
  struct init_args *a = p;
  return ((nti_fn_ncclCommInitRank_t)a->real)(a->comm, a->nranks, a->id, a->rank);
}
static ncclResult_t call_init_config(void *p) {
  struct init_args *a = p;
  return ((nti_fn_ncclCommInitRankConfig_t)a->real)(a->comm, a->nranks, a->id, a->rank, a->config);
}
static ncclResult_t call_init_scalable(void *p) {
  struct init_args *a = p;
  return ((nti_fn_ncclCommInitRankScalable_t)a->real)(a->comm, a->nranks, a->rank, a->nid, a->ids,
                                                      a->config);
}

NTI_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank) {
  LIFE_PROLOGUE(ncclCommInitRank, (comm, nranks, commId, rank));
  struct init_args a = {.comm = comm, .nranks = nranks, .rank = rank, .id = commId, .real = (void *)real};
  ncclResult_t res = init_rank(NTR_KIND_COMM_INIT_RANK, comm, nranks, &a.id, rank, NULL, 1,
                               call_init_rank, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                               ncclConfig_t *config) {
  LIFE_PROLOGUE(ncclCommInitRankConfig, (comm, nranks, commId, rank, config));
  struct init_args a = {.comm = comm, .nranks = nranks, .rank = rank, .id = commId, .config = config,
                        .real = (void *)real};
  ncclResult_t res = init_rank(NTR_KIND_COMM_INIT_RANK_CONFIG, comm, nranks, &a.id, rank, config, 1,
                               call_init_config, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                                 ncclUniqueId *commIds, ncclConfig_t *config) {
  LIFE_PROLOGUE(ncclCommInitRankScalable, (newcomm, nranks, myrank, nId, commIds, config));
  struct init_args a = {.comm = newcomm, .nranks = nranks, .rank = myrank, .nid = nId, .ids = commIds,
                        .config = config, .real = (void *)real};
  ncclResult_t res;
  if (commIds && nId > 0) {
    res = init_rank(NTR_KIND_COMM_INIT_RANK_SCALABLE, newcomm, nranks, commIds, myrank, config, nId,
                    call_init_scalable, &a, &nti_errno);
  } else {
    LIFE_CALL(res, real(newcomm, nranks, myrank, nId, commIds, config));
  }
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist) {
  LIFE_PROLOGUE(ncclCommInitAll, (comm, ndev, devlist));
  static int calls; /* n-th InitAll of this process, under nti_life_lock */
  pthread_mutex_lock(&nti_life_lock);
  int nth = ++calls;
  pthread_mutex_unlock(&nti_life_lock);
  uint64_t cid = nti_id_init_all(nth);
  ntx_keys_learn_local();
  int n = ndev > 0 && ndev <= 1024 ? ndev : 0;
  struct nti_comm **cs = n ? calloc((size_t)n, sizeof *cs) : NULL;
  for (int i = 0; cs && i < n; i++)
    cs[i] = new_comm(cid, i, n, NTR_KIND_COMM_INIT_ALL, env_nonblocking(), 0, 0);
  struct life l = {.kind = NTR_KIND_COMM_INIT_ALL, .comm_id = cid, .rank = -1, .nranks = ndev};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, ndev, devlist));
  for (int i = 0; cs && i < n; i++)
    init_done(cs[i], res, comm ? comm[i] : NULL);
  free(cs);
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                      ncclConfig_t *config) {
  LIFE_PROLOGUE(ncclCommSplit, (comm, color, key, newcomm, config));
  struct nti_comm *p = nti_comm_lookup(comm);
  int nth = 0;
  if (p) {
    pthread_mutex_lock(&nti_life_lock);
    nth = (int)++p->nsplit; /* every split call counts, NOCOLOR ones too */
    pthread_mutex_unlock(&nti_life_lock);
  }
  uint64_t parent = p ? p->cs->comm_id : 0;
  uint64_t aux = ((uint64_t)(uint32_t)color << 32) | (uint32_t)key;
  struct nti_comm *c = NULL;
  if (color != NCCL_SPLIT_NOCOLOR && p)
    c = new_comm(nti_id_split(parent, nth, color), -1, 0, NTR_KIND_COMM_SPLIT,
                 config_nonblocking(config, p->nonblocking), parent, aux);
  /* ENTER/EXIT go on the parent: that is the comm whose ranks must all
   * arrive for the split to return. */
  struct life l = {.kind = NTR_KIND_COMM_SPLIT, .c = p, .aux = aux};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, color, key, newcomm, config));
  init_done(c, res, newcomm ? *newcomm : NULL);
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

NTI_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                                       ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags) {
  LIFE_PROLOGUE(ncclCommShrink, (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
  struct nti_comm *p = nti_comm_lookup(comm);
  struct nti_comm *c = NULL;
  uint64_t aux = (uint64_t)(uint32_t)excludeRanksCount;
  if (p) {
    pthread_mutex_lock(&nti_life_lock);
    int nth = (int)++p->nshrink;
    pthread_mutex_unlock(&nti_life_lock);
    /* Ranks may list the excluded ranks in any order: hash them sorted. */
    int n = excludeRanksList && excludeRanksCount > 0 ? excludeRanksCount : 0;
    int *sorted = n ? malloc((size_t)n * sizeof *sorted) : NULL;
    if (sorted) {
      memcpy(sorted, excludeRanksList, (size_t)n * sizeof *sorted);
      qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
    }
    uint64_t id = nti_id_shrink(p->cs->comm_id, nth, sorted, sorted ? n : 0);
    free(sorted);
    c = new_comm(id, -1, 0, NTR_KIND_COMM_SHRINK, config_nonblocking(config, p->nonblocking),
                 p->cs->comm_id, aux);
  }
  struct life l = {.kind = NTR_KIND_COMM_SHRINK, .c = p, .aux = aux};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
  init_done(c, res, newcomm ? *newcomm : NULL);
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  LIFE_PROLOGUE(ncclCommFinalize, (comm));
  struct nti_comm *c = nti_comm_lookup(comm);
  struct life l = {.kind = NTR_KIND_COMM_FINALIZE, .c = c};
  if (c)
    __atomic_store_n(&c->cs->lifecycle, NTR_COMM_FINALIZING, __ATOMIC_RELEASE);
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm));
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

/* Destroy and abort free the comm: take it away from the watchdog first
 * (under nti_life_lock, so a poll in progress finishes before NCCL frees
 * anything), put it back if NCCL refused. */
static ncclResult_t end_comm(unsigned kind, ncclComm_t comm, ncclResult_t (*real)(ncclComm_t),
                             int *nti_errno) {
  struct nti_comm *c = nti_comm_lookup(comm);
  if (c) {
    pthread_mutex_lock(&nti_life_lock);
    nti_comm_unbind(c);
    pthread_mutex_unlock(&nti_life_lock);
  }
  struct life l = {.kind = kind, .c = c};
  life_enter(&l);
  errno = *nti_errno;
  ncclResult_t res = real(comm);
  *nti_errno = errno;
  if (c) {
    if (res == ncclSuccess || res == ncclInProgress || kind == NTR_KIND_COMM_ABORT) {
      __atomic_store_n(&c->cs->lifecycle,
                       kind == NTR_KIND_COMM_ABORT ? NTR_COMM_ABORTED : NTR_COMM_DESTROYED,
                       __ATOMIC_RELEASE);
    } else {
      pthread_mutex_lock(&nti_life_lock);
      nti_comm_bind(c, comm);
      pthread_mutex_unlock(&nti_life_lock);
    }
  }
  life_exit(&l, res);
  if (c)
    nti_blocked_clear(c->cs);
  return res;
}

NTI_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  LIFE_PROLOGUE(ncclCommDestroy, (comm));
  ncclResult_t res = end_comm(NTR_KIND_COMM_DESTROY, comm, real, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  LIFE_PROLOGUE(ncclCommAbort, (comm));
  /* The application gave up on this comm: its evidence goes to disk before
   * NCCL tears anything down (design §6). */
  struct nti_comm *c = nti_comm_lookup(comm);
  char reason[96];
  snprintf(reason, sizeof reason, "ncclCommAbort comm %016llx",
           (unsigned long long)(c ? c->cs->comm_id : 0));
  nti_record_event(NTR_KIND_NOTE, c, "abort", 0, 0, c ? __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED) : 0);
  nti_dump_now(NTR_TRIG_ABORT, 0, 0, reason);
  ncclResult_t res = end_comm(NTR_KIND_COMM_ABORT, comm, real, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  LIFE_PROLOGUE(ncclCommRevoke, (comm, revokeFlags));
  struct nti_comm *c = nti_comm_lookup(comm);
  struct life l = {.kind = NTR_KIND_COMM_REVOKE, .c = c, .aux = (uint64_t)(uint32_t)revokeFlags};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, revokeFlags));
  if (c && (res == ncclSuccess || res == ncclInProgress))
    __atomic_store_n(&c->cs->lifecycle, NTR_COMM_REVOKED, __ATOMIC_RELEASE);
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  LIFE_PROLOGUE(ncclCommGetAsyncError, (comm, asyncError));
  /* Polled in loops by applications: only a change of value is recorded.
   * The poll and its record are one step under async_poller, so records
   * follow the order of the observations; a thread that finds another
   * polling returns its value unrecorded (never waits) and the next poll
   * catches up. */
  struct nti_comm *c = nti_comm_lookup(comm);
  int mine = c && !__atomic_exchange_n(&c->async_poller, 1, __ATOMIC_ACQUIRE);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, asyncError));
  if (mine) {
    if (res == ncclSuccess && asyncError && __atomic_load_n(&c->live, __ATOMIC_ACQUIRE))
      nti_async_transition(c, *asyncError);
    __atomic_store_n(&c->async_poller, 0, __ATOMIC_RELEASE);
  }
  LIFE_EPILOGUE(res);
}

/* Window registration and device-communicator creation are collective over
 * the communicator (NCCL 2.28): recorded on it with ENTER and EXIT, and the
 * comm is "blocked" meanwhile, so a rank whose peers never call them shows
 * as waiting in them (analyze: init_hang).  aux = the window's size. */
static ncclResult_t comm_reg_call(unsigned kind, ncclComm_t comm, uint64_t aux, ncclResult_t (*call)(void *),
                                  void *arg, int *nti_errno) {
  struct life l = {.kind = kind, .c = nti_comm_lookup(comm), .aux = aux};
  life_enter(&l);
  errno = *nti_errno;
  ncclResult_t res = call(arg);
  *nti_errno = errno;
  life_exit(&l, res);
  return res;
}

struct reg_args {
  void *real;
  ncclComm_t comm;
  void *buff;
  size_t size;
  ncclWindow_t *winp, win;
  int flags;
  const ncclDevCommRequirements_t *reqs;
  ncclDevComm_t *dev;
  const ncclDevComm_t *cdev;
};
static ncclResult_t call_win_reg(void *p) {
  struct reg_args *a = p;
  return ((nti_fn_ncclCommWindowRegister_t)a->real)(a->comm, a->buff, a->size, a->winp, a->flags);
}
static ncclResult_t call_win_dereg(void *p) {
  struct reg_args *a = p;
  return ((nti_fn_ncclCommWindowDeregister_t)a->real)(a->comm, a->win);
}
static ncclResult_t call_dev_create(void *p) {
  struct reg_args *a = p;
  return ((nti_fn_ncclDevCommCreate_t)a->real)(a->comm, a->reqs, a->dev);
}
static ncclResult_t call_dev_destroy(void *p) {
  struct reg_args *a = p;
  return ((nti_fn_ncclDevCommDestroy_t)a->real)(a->comm, a->cdev);
}

NTI_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                               int winFlags) {
  LIFE_PROLOGUE(ncclCommWindowRegister, (comm, buff, size, win, winFlags));
  struct reg_args a = {.real = (void *)real, .comm = comm, .buff = buff, .size = size, .winp = win,
                       .flags = winFlags};
  ncclResult_t res = comm_reg_call(NTR_KIND_COMM_WINDOW_REGISTER, comm, size, call_win_reg, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  LIFE_PROLOGUE(ncclCommWindowDeregister, (comm, win));
  struct reg_args a = {.real = (void *)real, .comm = comm, .win = win};
  ncclResult_t res = comm_reg_call(NTR_KIND_COMM_WINDOW_DEREGISTER, comm, 0, call_win_dereg, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                                          ncclDevComm_t *outDevComm) {
  LIFE_PROLOGUE(ncclDevCommCreate, (comm, reqs, outDevComm));
  struct reg_args a = {.real = (void *)real, .comm = comm, .reqs = reqs, .dev = outDevComm};
  ncclResult_t res = comm_reg_call(NTR_KIND_DEV_COMM_CREATE, comm, 0, call_dev_create, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm) {
  LIFE_PROLOGUE(ncclDevCommDestroy, (comm, devComm));
  struct reg_args a = {.real = (void *)real, .comm = comm, .cdev = devComm};
  ncclResult_t res = comm_reg_call(NTR_KIND_DEV_COMM_DESTROY, comm, 0, call_dev_destroy, &a, &nti_errno);
  LIFE_EPILOGUE(res);
}

/* ------------------------------------------- added after NCCL 2.28 -- */

/* The unique id a grow consumes, made by the grown comm's root from its
 * comm: recorded on that comm; aux = the id the grown comm gets from it. */
NTI_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId) {
  LIFE_PROLOGUE(ncclCommGetUniqueId, (comm, uniqueId));
  struct life l = {.kind = NTR_KIND_COMM_GET_UNIQUE_ID, .c = nti_comm_lookup(comm)};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, uniqueId));
  if (res == ncclSuccess && uniqueId) {
    l.aux = nti_hash_bytes(uniqueId, sizeof *uniqueId);
    ntx_keys_learn_uid(uniqueId, sizeof *uniqueId);
  }
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

/* NCCL's own hash of comm h (ncclCommQueryProperties, NCCL 2.29 and
 * later), 0 when it cannot tell. */
static uint64_t nccl_comm_hash(ncclComm_t h) {
  ncclResult_t (*query)(ncclComm_t, ncclCommProperties_t *) =
      (ncclResult_t(*)(ncclComm_t, ncclCommProperties_t *))nti_nccl_symbol("ncclCommQueryProperties");
  ncclCommProperties_t p;
  memset(&p, 0, sizeof p);
  p.size = sizeof p;
  p.magic = NT_NCCL_API_MAGIC;
  p.version = NT_NCCL_PROPERTIES_VERSION;
  return query && query(h, &p) == ncclSuccess ? p.commHash : 0;
}

/* Three kinds of caller (nccl.h): an existing rank passes its comm and no
 * unique id, the existing root its comm and the id from
 * ncclCommGetUniqueId, a joining rank no comm, the id and its rank in the
 * grown comm.  ENTER/EXIT go on the comm whose ranks must all arrive: the
 * parent for existing ranks (as for a split), the new comm for a joining
 * rank (as for an init).  aux = rank << 32 | nRanks as passed.  The grown
 * comm's id: docs/identity.md "Grow". */
NTI_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                                     ncclComm_t *newcomm, ncclConfig_t *config) {
  LIFE_PROLOGUE(ncclCommGrow, (comm, nRanks, uniqueId, rank, newcomm, config));
  struct nti_comm *p = comm ? nti_comm_lookup(comm) : NULL;
  uint64_t parent = p ? p->cs->comm_id : 0;
  uint64_t aux = ((uint64_t)(uint32_t)rank << 32) | (uint32_t)nRanks;
  int nth = 0;
  if (p) {
    pthread_mutex_lock(&nti_life_lock);
    nth = (int)++p->ngrow;
    pthread_mutex_unlock(&nti_life_lock);
  }
  int nb = config_nonblocking(config, p ? p->nonblocking : env_nonblocking());
  int joining = !comm && nRanks > 0 && rank >= 0 && rank < nRanks;
  uint64_t uid_id = uniqueId ? nti_hash_bytes(uniqueId, sizeof *uniqueId) : 0;
  struct nti_comm *c = NULL;
  if (uniqueId && (comm || joining)) {
    ntx_keys_learn_uid(uniqueId, sizeof *uniqueId);
    c = new_comm(uid_id, joining ? rank : -1, joining ? nRanks : 0, NTR_KIND_COMM_GROW, nb, parent, aux);
  }
  struct life l = {.kind = NTR_KIND_COMM_GROW, .c = comm ? p : c, .aux = aux};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, nRanks, uniqueId, rank, newcomm, config));
  ncclComm_t h = newcomm && (res == ncclSuccess || res == ncclInProgress) ? *newcomm : NULL;
  if (h) {
    uint64_t hash = nccl_comm_hash(h);
    if (!c) {
      /* An existing rank without the id: NCCL's hash, else its fallback. */
      uint64_t id = hash ? hash : p ? nti_id_grow(parent, nth) : 0;
      if (id)
        c = new_comm(id, -1, 0, NTR_KIND_COMM_GROW, nb, parent, aux);
    } else if (hash && hash != uid_id) {
      static int said;
      if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        nti_say("grown comm %016llx: NCCL's commHash is %016llx, so ranks that passed no unique id name it "
                "differently (docs/identity.md \"Grow\")",
                (unsigned long long)uid_id, (unsigned long long)hash);
    }
  }
  init_done(c, res, h);
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

/* Suspend releases a comm's resources (aux = the flags), resume restores
 * them; the comm cannot be used in between. */
NTI_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  LIFE_PROLOGUE(ncclCommSuspend, (comm, flags));
  struct life l = {.kind = NTR_KIND_COMM_SUSPEND, .c = nti_comm_lookup(comm), .aux = (uint64_t)(uint32_t)flags};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm, flags));
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}

NTI_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  LIFE_PROLOGUE(ncclCommResume, (comm));
  struct life l = {.kind = NTR_KIND_COMM_RESUME, .c = nti_comm_lookup(comm)};
  life_enter(&l);
  ncclResult_t res;
  LIFE_CALL(res, real(comm));
  life_exit(&l, res);
  LIFE_EPILOGUE(res);
}
