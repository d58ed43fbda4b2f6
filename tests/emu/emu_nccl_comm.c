/* emu_nccl_comm.c -- communicator lifecycle: bootstrap through shared
 * memory, the peer monitor, fault injection, split/shrink, finalize,
 * destroy, abort, revoke.
 *
 * Thread-safety: every function may be called from any thread; waits are
 * futex waits with a bounded timeout (so cancellation is seen) or condvar
 * waits.  The monitor is one detached thread per process.  Nothing here is
 * async-signal-safe. */
#include "emu_nccl.h"
#include "emu_nccl_prof.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define EMU_WAIT_NS 200000000ull   /* longest sleep before re-checking flags */

static __thread char emu_tls_error[256];

void emu_set_last_error(struct ncclComm *c, const char *fmt, ...)
{
  char *buf = c ? c->last_error : emu_tls_error;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, 256, fmt, ap);
  va_end(ap);
  if (c)   /* NCCL also remembers the last error process-wide */
    snprintf(emu_tls_error, sizeof emu_tls_error, "%s", c->last_error);
  if (emu_verbose())
    emu_log("%s", buf);
}

const char *emu_get_last_error(struct ncclComm *c)
{
  if (c && emu_comm_valid(c))
    return c->last_error;
  return emu_tls_error;
}

bool emu_comm_valid(const struct ncclComm *c) { return c && c->magic == EMU_COMM_MAGIC; }

void emu_comm_bell(struct ncclComm *c)
{
  atomic_fetch_add_explicit(&c->shm->bell, 1, memory_order_release);
  emu_futex_wake_all(&c->shm->bell);
}

int emu_comm_cancelled(const struct ncclComm *c)
{
  return atomic_load_explicit(&c->aborted, memory_order_acquire) ||
         atomic_load_explicit(&c->revoked, memory_order_acquire);
}

void emu_comm_put(struct ncclComm *c)
{
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
    return;
  emu_prof_comm_fini(c);
  if (c->shm)
    munmap(c->shm, c->map_len);
  c->magic = 0;
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

void emu_op_finished(struct ncclComm *c)
{
  pthread_mutex_lock(&c->mu);
  atomic_fetch_sub(&c->inflight, 1);
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  emu_comm_put(c);
}

/* ---- peer monitor ------------------------------------------------------ */

static pthread_mutex_t emu_mon_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ncclComm *emu_mon_list;
static pthread_once_t emu_mon_once = PTHREAD_ONCE_INIT;

/* A zombie still answers kill(pid, 0), so the state in /proc decides. */
static bool emu_pid_alive(pid_t pid)
{
  if (kill(pid, 0) != 0 && errno == ESRCH)
    return false;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno != ENOENT;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return true;
  buf[n] = 0;
  const char *rp = strrchr(buf, ')');
  return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

static void *emu_monitor(void *arg)
{
  (void)arg;
  pid_t self = getpid();
  for (;;) {
    struct timespec ts = { 0, 250 * 1000000L };
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&emu_mon_mu);
    for (struct ncclComm *c = emu_mon_list; c; c = c->mon_next) {
      /* NCCL learns of a dead peer from the transport of an operation in
       * progress (ncclRemoteError: "remote process exited or there was a
       * network error"): a rank whose work has all finished its exchange
       * (a slow stream still busy after its last collective, then
       * finalize) is not failed by peers that finalized and exited. */
      if (atomic_load(&c->async_err) == ncclRemoteError || emu_comm_cancelled(c) ||
          atomic_load(&c->inflight) == 0)
        continue;
      for (int p = 0; p < c->nranks; p++) {
        pid_t pid = atomic_load_explicit(&c->shm->pid[p], memory_order_relaxed);
        if (pid <= 0 || pid == self || emu_pid_alive(pid))
          continue;
        int e = atomic_load(&c->async_err);
        if (e == ncclSuccess || e == ncclInProgress) {
          atomic_store(&c->async_err, ncclRemoteError);
          emu_set_last_error(c, "rank %d: peer rank %d (pid %d) is gone", c->rank, p, (int)pid);
        }
        break;
      }
    }
    pthread_mutex_unlock(&emu_mon_mu);
  }
  return NULL;
}

static void emu_mon_start(void) { (void)emu_thread_start(NULL, emu_monitor, NULL, 1); }

static void emu_mon_add(struct ncclComm *c)
{
  pthread_once(&emu_mon_once, emu_mon_start);
  pthread_mutex_lock(&emu_mon_mu);
  /* A handle destroyed while its nonblocking init ran is not watched:
   * destroy marks it dead before it takes this lock to unlink. */
  if (emu_comm_valid(c)) {
    c->mon_next = emu_mon_list;
    emu_mon_list = c;
    c->monitored = 1;
  }
  pthread_mutex_unlock(&emu_mon_mu);
}

static void emu_mon_remove(struct ncclComm *c)
{
  pthread_mutex_lock(&emu_mon_mu);
  if (c->monitored)
    for (struct ncclComm **pp = &emu_mon_list; *pp; pp = &(*pp)->mon_next)
      if (*pp == c) {
        *pp = c->mon_next;
        break;
      }
  c->monitored = 0;
  pthread_mutex_unlock(&emu_mon_mu);
}

/* ---- faults ------------------------------------------------------------ */

static int emu_parse_u64(const char *s, uint64_t *out)
{
  if (!*s)
    return -1;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || *s == '-')
    return -1;
  *out = v;
  return 0;
}

static int emu_parse_faults(struct ncclComm *c)
{
  const char *env = getenv("NCCLEMU_FAULT");
  if (!env || !*env)
    return 0;
  char *copy = strdup(env);
  if (!copy)
    return -1;
  int rc = 0;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char t[128];
    snprintf(t, sizeof t, "%s", tok);
    char *f[4] = { 0 };
    int nf = 0;
    char *s2 = NULL;
    for (char *p = strtok_r(t, ":", &s2); p && nf < 4; p = strtok_r(NULL, ":", &s2))
      f[nf++] = p;
    struct emu_fault fl = { 0 };
    uint64_t v = 0;
    bool ok = false;
    if (nf == 2 && !strcmp(f[0], "stall") && !emu_parse_u64(f[1], &fl.n) && fl.n >= 1) {
      fl.kind = 1;
      ok = true;
    } else if (nf == 3 && !strcmp(f[0], "async_error") && !emu_parse_u64(f[1], &fl.n) && fl.n >= 1) {
      fl.kind = 2;
      ok = true;
      if (!strcmp(f[2], "remote"))
        fl.value = ncclRemoteError;
      else if (!strcmp(f[2], "system"))
        fl.value = ncclSystemError;
      else if (!strcmp(f[2], "internal"))
        fl.value = ncclInternalError;
      else
        ok = false;
    } else if (nf == 3 && !strcmp(f[0], "delay") && !emu_parse_u64(f[1], &fl.n) && fl.n >= 1 &&
               !emu_parse_u64(f[2], &v) && v <= 3600000) {
      fl.kind = 3;
      fl.value = (int)v;
      ok = true;
    } else if (nf == 2 && !strcmp(f[0], "slow") && !emu_parse_u64(f[1], &v) && v <= 3600000) {
      fl.kind = 4; /* a throttled GPU: every collective, the host does not wait */
      fl.value = (int)v;
      ok = true;
    } else if (nf == 3 && !strcmp(f[0], "kill_recv") && !emu_parse_u64(f[1], &fl.n) && fl.n >= 1 &&
               !emu_parse_u64(f[2], &v) && v <= 1000000) {
      fl.kind = 5; /* the process dies in the middle of a transfer */
      fl.value = (int)v;
      ok = true;
    }
    if (!ok || c->nfaults == EMU_MAX_FAULTS) {
      fprintf(stderr,
              "ncclemu: NCCLEMU_FAULT: bad token '%s' (expected stall:N, async_error:N:remote|system|internal "
              "delay:N:MS, slow:MS or kill_recv:N:POSTS, N >= 1, at most %d tokens)\n",
              tok, EMU_MAX_FAULTS);
      emu_set_last_error(c, "NCCLEMU_FAULT: bad token '%s'", tok);
      rc = -1;
      break;
    }
    c->faults[c->nfaults++] = fl;
  }
  free(copy);
  return rc;
}

/* ---- bootstrap ------------------------------------------------------------ */

static uint64_t emu_fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* Wait on the shared bell until pred(arg) holds or the comm is cancelled
 * (then -1).  Bounded sleeps: the monitor and abort need no extra wake. */
int emu_wait_bell(struct ncclComm *c, bool (*pred)(struct ncclComm *, void *), void *arg)
{
  for (;;) {
    uint32_t snap = atomic_load_explicit(&c->shm->bell, memory_order_acquire);
    if (pred(c, arg))
      return 0;
    if (emu_comm_cancelled(c))
      return -1;
    emu_futex_wait(&c->shm->bell, snap, EMU_WAIT_NS);
  }
}

struct emu_p2p_wait {
  int dir, peer;
};

static bool emu_p2p_peer_posted(struct ncclComm *c, void *arg)
{
  const struct emu_p2p_wait *w = arg;
  return atomic_load_explicit(&c->shm->p2p_want[!w->dir][w->peer][c->rank], memory_order_acquire) != 0;
}

int emu_p2p_connect(struct emu_op *ops, struct ncclComm ***held)
{
  int n = 0;
  *held = NULL;
  for (struct emu_op *op = ops; op; op = op->next) {
    int dir = op->kind == EMU_K_RECV;
    if ((op->kind == EMU_K_SEND || op->kind == EMU_K_RECV) && !op->comm->p2p_conn[dir][op->peer])
      n++;
  }
  if (!n)
    return 0;
  /* A reference per waiting op: another thread may ncclCommAbort the comm
   * to break this very wait (PyTorch's watchdog does), and the caller still
   * launches the (then cancelled) ops on it. */
  struct ncclComm **h = malloc((size_t)n * sizeof *h); /* NULL (no memory): wait without references */
  int k = 0;
  for (struct emu_op *op = ops; op; op = op->next) {
    int dir = op->kind == EMU_K_RECV;
    if ((op->kind != EMU_K_SEND && op->kind != EMU_K_RECV) || op->comm->p2p_conn[dir][op->peer])
      continue;
    if (h) {
      atomic_fetch_add(&op->comm->refs, 1);
      h[k++] = op->comm;
    }
    /* Release pairs with the peer's acquire in emu_p2p_peer_posted. */
    atomic_store_explicit(&op->comm->shm->p2p_want[dir][op->comm->rank][op->peer], 1, memory_order_release);
    emu_comm_bell(op->comm);
  }
  for (struct emu_op *op = ops; op; op = op->next) {
    int dir = op->kind == EMU_K_RECV;
    if ((op->kind != EMU_K_SEND && op->kind != EMU_K_RECV) || op->comm->p2p_conn[dir][op->peer])
      continue;
    struct emu_p2p_wait w = { .dir = dir, .peer = op->peer };
    if (emu_verbose() && !emu_p2p_peer_posted(op->comm, &w))
      emu_log("rank %d waits in ncclGroupEnd to connect to rank %d for %s (NCCL's p2p setup)", op->comm->rank,
              op->peer, dir ? "receiving" : "sending");
    /* Cancelled (abort, revoke): stop waiting; the launched ops then end
     * at once as cancelled. */
    if (emu_wait_bell(op->comm, emu_p2p_peer_posted, &w) == 0)
      op->comm->p2p_conn[dir][op->peer] = true;
  }
  *held = h;
  return k;
}

/* An init that never completed leaves its segment's name behind; whoever
 * gives up on it removes the name so /dev/shm does not fill with them.  A
 * rank arriving later creates a fresh segment and waits there: a hang
 * either way, as on NCCL. */
static void emu_forget_name(struct ncclComm *c)
{
  if (c->shm && !atomic_exchange(&c->shm->unlinked, 1))
    shm_unlink(c->name);
}

static bool emu_all_joined(struct ncclComm *c, void *arg)
{
  (void)arg;
  return atomic_load_explicit(&c->shm->joined, memory_order_acquire) >= (uint32_t)c->nranks;
}

/* The first half of NCCL's bootstrap: map the segment and post this rank. */
static ncclResult_t emu_comm_post(struct ncclComm *c)
{
  size_t size = emu_shm_size(c->nranks);
  emu_sweep_stale_segments();
  int fd = shm_open(c->name, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    emu_set_last_error(c, "shm_open(%s): %s", c->name, strerror(errno));
    return ncclSystemError;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && (size_t)st.st_size < size && ftruncate(fd, (off_t)size) != 0) {
    emu_set_last_error(c, "ftruncate(%s): %s", c->name, strerror(errno));
    close(fd);
    return ncclSystemError;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    emu_set_last_error(c, "mmap(%s): %s", c->name, strerror(errno));
    return ncclSystemError;
  }
  c->shm = p;
  c->map_len = size;
  uint32_t expect = 0;
  if (!atomic_compare_exchange_strong(&c->shm->nranks, &expect, (uint32_t)c->nranks) &&
      expect != (uint32_t)c->nranks) {
    emu_set_last_error(c, "rank %d: nranks %d differs from %u given by a peer", c->rank, c->nranks, expect);
    return ncclInvalidUsage;
  }
  c->shm->magic = EMU_SHM_MAGIC;
  atomic_store(&c->shm->pid[c->rank], (int32_t)getpid());
  uint32_t before = atomic_fetch_add(&c->shm->joined, 1);
  emu_comm_bell(c);
  if (before + 1 == (uint32_t)c->nranks)
    emu_forget_name(c);   /* everyone has it mapped: the name is no longer needed */
  return ncclSuccess;
}

/* The second half: as NCCL's bootstrap, wait for every rank, with no timeout. */
static ncclResult_t emu_comm_wait_joined(struct ncclComm *c)
{
  if (emu_wait_bell(c, emu_all_joined, NULL) != 0) {
    emu_forget_name(c);
    return ncclInvalidUsage;
  }
  atomic_store(&c->ready, 1);
  emu_mon_add(c);
  emu_prof_comm_init(c);
  return ncclSuccess;
}

static ncclResult_t emu_comm_join(struct ncclComm *c)
{
  ncclResult_t rc = emu_comm_post(c);
  return rc != ncclSuccess ? rc : emu_comm_wait_joined(c);
}

/* Inits called inside a group (ncclGroupStart ... ncclCommInitRank ...
 * ncclGroupEnd), as NCCL defers them: the call only creates the handle;
 * the outermost ncclGroupEnd runs every deferred init of the thread
 * together (NCCL's ncclAsyncJob list, joined in groupLaunch), so one
 * thread can init several ranks of one communicator, one per device, as
 * nccl-tests -g does.  Per thread, in call order. */
#define EMU_MAX_GROUP_INITS 64
static __thread struct ncclComm *emu_group_inits[EMU_MAX_GROUP_INITS];
static __thread int emu_ngroup_inits;

/* All deferred inits of one group: post every rank first, then wait for
 * each, so ranks of one communicator initialized by one thread meet. */
struct emu_init_batch {
  int n;
  struct ncclComm *c[EMU_MAX_GROUP_INITS];
};

static ncclResult_t emu_batch_run(struct emu_init_batch *b)
{
  ncclResult_t first = ncclSuccess;
  ncclResult_t rcs[EMU_MAX_GROUP_INITS];
  for (int i = 0; i < b->n; i++)
    rcs[i] = emu_comm_post(b->c[i]);
  for (int i = 0; i < b->n; i++) {
    if (rcs[i] == ncclSuccess)
      rcs[i] = emu_comm_wait_joined(b->c[i]);
    if (rcs[i] != ncclSuccess && first == ncclSuccess)
      first = rcs[i];
    int expect = ncclInProgress;
    atomic_compare_exchange_strong(&b->c[i]->async_err, &expect, rcs[i]);
    if (rcs[i] != ncclSuccess)
      atomic_store(&b->c[i]->async_err, rcs[i]);
  }
  return first;
}

static void *emu_batch_thread(void *arg)
{
  struct emu_init_batch *b = arg;
  (void)emu_batch_run(b);
  for (int i = 0; i < b->n; i++)
    emu_comm_put(b->c[i]);
  free(b);
  return NULL;
}

ncclResult_t emu_group_run_inits(void)
{
  if (emu_ngroup_inits == 0)
    return ncclSuccess;
  struct emu_init_batch *b = calloc(1, sizeof *b);
  int nonblocking = 0;
  for (int i = 0; i < emu_ngroup_inits; i++) {
    nonblocking |= !emu_group_inits[i]->blocking;
    if (b)
      b->c[b->n++] = emu_group_inits[i];
  }
  emu_ngroup_inits = 0;
  if (!b)
    return ncclSystemError;
  if (nonblocking) {
    /* A group holding a nonblocking init returns ncclInProgress; each comm
     * says ncclInProgress until its init finished. */
    for (int i = 0; i < b->n; i++) {
      atomic_store(&b->c[i]->async_err, ncclInProgress);
      atomic_fetch_add(&b->c[i]->refs, 1);
    }
    if (emu_thread_start(NULL, emu_batch_thread, b, 1) == 0)
      return ncclInProgress;
    for (int i = 0; i < b->n; i++)
      emu_comm_put(b->c[i]);
  }
  ncclResult_t rc = emu_batch_run(b);
  free(b);
  return rc;
}

static struct ncclComm *emu_comm_alloc(int nranks, int rank, const ncclConfig_t *config, int inherit_blocking)
{
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->magic = EMU_COMM_MAGIC;
  atomic_init(&c->refs, 1);
  c->rank = rank;
  c->nranks = nranks;
  c->device = emu_get_device();
  c->blocking = inherit_blocking;
  if (config && config->blocking != NCCL_CONFIG_UNDEF_INT)
    c->blocking = config->blocking != 0;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  return c;
}

/* A nonblocking init, split or shrink finishes here, on its own thread. */
struct emu_job {
  struct ncclComm *child;    /* NULL for a NOCOLOR split participant */
  struct ncclComm *parent;   /* split only */
  int color, key;
};

static ncclResult_t emu_split_finish(struct emu_job *j);

static void *emu_job_thread(void *arg)
{
  struct emu_job *j = arg;
  ncclResult_t rc = j->parent ? emu_split_finish(j) : emu_comm_join(j->child);
  if (j->child) {
    int expect = ncclInProgress;
    atomic_compare_exchange_strong(&j->child->async_err, &expect, rc);
    emu_comm_put(j->child);
  }
  if (j->parent)
    emu_comm_put(j->parent);
  free(j);
  return NULL;
}

static ncclResult_t emu_run_job(struct emu_job *j, bool blocking)
{
  if (j->child)
    atomic_fetch_add(&j->child->refs, 1);
  if (j->parent)
    atomic_fetch_add(&j->parent->refs, 1);
  if (!blocking) {
    if (j->child)
      atomic_store(&j->child->async_err, ncclInProgress);
    if (emu_thread_start(NULL, emu_job_thread, j, 1) == 0)
      return ncclInProgress;
  }
  ncclResult_t rc = j->parent ? emu_split_finish(j) : emu_comm_join(j->child);
  if (j->child)
    emu_comm_put(j->child);
  if (j->parent)
    emu_comm_put(j->parent);
  free(j);
  return rc;
}

/* Join c's bootstrap on a job thread (blocking: waited for here).  On
 * failure c is released; else *out = c and the result is ncclSuccess or,
 * nonblocking, ncclInProgress. */
static ncclResult_t emu_start_join(struct ncclComm *c, ncclComm_t *out)
{
  struct emu_job *j = calloc(1, sizeof *j);
  if (!j) {
    emu_comm_put(c);
    return ncclSystemError;
  }
  j->child = c;
  ncclResult_t rc = emu_run_job(j, c->blocking);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    emu_mon_remove(c);
    emu_comm_put(c);
    return rc;
  }
  *out = c;
  return rc;
}

ncclResult_t emu_comm_init(struct ncclComm **out, int nranks, const char *name, int rank,
                           const ncclConfig_t *config, int inherit_blocking)
{
  struct ncclComm *c = emu_comm_alloc(nranks, rank, config, inherit_blocking);
  if (!c)
    return ncclSystemError;
  snprintf(c->name, sizeof c->name, "%s", name);
  if (emu_parse_faults(c) != 0) {
    emu_comm_put(c);
    return ncclInvalidArgument;
  }
  if (emu_group_depth_now() > 0) {
    if (emu_ngroup_inits == EMU_MAX_GROUP_INITS) {
      emu_set_last_error(c, "ncclCommInitRank: more than %d inits in one group (emulator limit)", EMU_MAX_GROUP_INITS);
      emu_comm_put(c);
      return ncclInvalidUsage;
    }
    emu_group_inits[emu_ngroup_inits++] = c;
    if (!c->blocking)
      atomic_store(&c->async_err, ncclInProgress);
    *out = c;
    return c->blocking ? ncclSuccess : ncclInProgress;
  }
  return emu_start_join(c, out);
}

/* ---- split and shrink ----------------------------------------------------- */

struct emu_ctrl_wait {
  uint32_t t;
  int ack;
};

static bool emu_ctrl_ready(struct ncclComm *c, void *arg)
{
  struct emu_ctrl_wait *w = arg;
  for (int p = 0; p < c->nranks; p++) {
    uint32_t v = w->ack ? atomic_load_explicit(&c->shm->ctrl[p].ack, memory_order_acquire)
                        : atomic_load_explicit(&c->shm->ctrl[p].tag, memory_order_acquire);
    if (v < w->t)
      return false;
  }
  return true;
}

/* All ranks of the parent publish (color, key); everyone reads all. */
static ncclResult_t emu_split_finish(struct emu_job *j)
{
  struct ncclComm *pc = j->parent;
  pthread_mutex_lock(&pc->mu);
  uint32_t t = ++pc->ctrl_count;
  pthread_mutex_unlock(&pc->mu);
  struct emu_ctrl_wait w = { t - 1, 1 };
  if (emu_wait_bell(pc, emu_ctrl_ready, &w) != 0)
    return ncclInvalidUsage;
  struct emu_ctrl *me = &pc->shm->ctrl[pc->rank];
  me->color = j->color;
  me->key = j->key;
  atomic_store_explicit(&me->tag, t, memory_order_release);
  emu_comm_bell(pc);
  w.t = t;
  w.ack = 0;
  if (emu_wait_bell(pc, emu_ctrl_ready, &w) != 0)
    return ncclInvalidUsage;
  int color[EMU_MAX_RANKS], key[EMU_MAX_RANKS];
  for (int p = 0; p < pc->nranks; p++) {
    color[p] = pc->shm->ctrl[p].color;
    key[p] = pc->shm->ctrl[p].key;
  }
  atomic_store_explicit(&me->ack, t, memory_order_release);
  emu_comm_bell(pc);
  if (!j->child)
    return ncclSuccess;
  /* New rank: position among the same color ordered by (key, old rank). */
  int n = 0, r = 0;
  for (int p = 0; p < pc->nranks; p++) {
    if (color[p] != j->color)
      continue;
    n++;
    if (key[p] < j->key || (key[p] == j->key && p < pc->rank))
      r++;
  }
  uint64_t h = emu_fnv(0xcbf29ce484222325ull, pc->name, strlen(pc->name));
  h = emu_fnv(h, "split", 5);
  h = emu_fnv(h, &t, sizeof t);
  h = emu_fnv(h, &j->color, sizeof j->color);
  snprintf(j->child->name, sizeof j->child->name, "/ncclemu-%016llx", (unsigned long long)h);
  j->child->rank = r;
  j->child->nranks = n;
  return emu_comm_join(j->child);
}

EMU_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
  if (!emu_comm_valid(comm) || !newcomm) {
    emu_set_last_error(NULL, "ncclCommSplit: invalid %s", newcomm ? "comm" : "newcomm");
    return ncclInvalidArgument;
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    emu_set_last_error(comm, "ncclCommSplit: invalid color %d", color);
    return ncclInvalidArgument;
  }
  *newcomm = NULL;
  struct emu_job *j = calloc(1, sizeof *j);
  if (!j)
    return ncclSystemError;
  j->parent = comm;
  j->color = color;
  j->key = key;
  /* A rank that leaves with NOCOLOR gets no communicator to poll, so the
   * mode its config asks for decides whether it waits for the split here
   * (else the parent's mode).  Running it in the background instead let the
   * rank go on, even exit, before publishing its color: its peers' split
   * then waited forever (seen under load in emu_comm). */
  bool blocking = comm->blocking;
  if (color == NCCL_SPLIT_NOCOLOR && config && config->blocking != NCCL_CONFIG_UNDEF_INT)
    blocking = config->blocking != 0;
  if (color != NCCL_SPLIT_NOCOLOR) {
    j->child = emu_comm_alloc(0, 0, config, comm->blocking);
    if (!j->child) {
      free(j);
      return ncclSystemError;
    }
    j->child->device = comm->device;
    j->child->nfaults = comm->nfaults;
    memcpy(j->child->faults, comm->faults, sizeof comm->faults);
    blocking = j->child->blocking;
  }
  struct ncclComm *child = j->child;
  ncclResult_t rc = emu_run_job(j, blocking);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    if (child) {
      emu_mon_remove(child);
      emu_comm_put(child);
    }
    return rc;
  }
  *newcomm = child;
  return rc;
}

EMU_API ncclResult_t pncclCommShrink(ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm,
                                     ncclConfig_t *config, int flags)
{
  if (!emu_comm_valid(comm) || !newcomm || nexcl < 0 || (nexcl > 0 && !excl)) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommShrink: invalid argument");
    return ncclInvalidArgument;
  }
  bool out[EMU_MAX_RANKS] = { 0 };
  for (int i = 0; i < nexcl; i++) {
    if (excl[i] < 0 || excl[i] >= comm->nranks || excl[i] == comm->rank) {
      emu_set_last_error(comm, "ncclCommShrink: invalid excluded rank %d", excl[i]);
      return ncclInvalidArgument;
    }
    out[excl[i]] = true;
  }
  if (flags & NCCL_SHRINK_ABORT) {
    /* Terminate the parent's pending operations first (they may wait for
     * the very ranks being excluded). */
    atomic_store(&comm->revoked, 1);
    emu_comm_bell(comm);
  }
  *newcomm = NULL;
  struct ncclComm *c = emu_comm_alloc(0, 0, config, comm->blocking);
  if (!c)
    return ncclSystemError;
  int n = 0, r = 0;
  for (int p = 0; p < comm->nranks; p++)
    if (!out[p]) {
      if (p < comm->rank)
        r++;
      n++;
    }
  pthread_mutex_lock(&comm->mu);
  uint32_t k = ++comm->shrink_count;
  pthread_mutex_unlock(&comm->mu);
  uint64_t h = emu_fnv(0xcbf29ce484222325ull, comm->name, strlen(comm->name));
  h = emu_fnv(h, "shrink", 6);
  h = emu_fnv(h, &k, sizeof k);
  h = emu_fnv(h, out, sizeof out);
  snprintf(c->name, sizeof c->name, "/ncclemu-%016llx", (unsigned long long)h);
  c->rank = r;
  c->nranks = n;
  c->device = comm->device;
  c->nfaults = comm->nfaults;
  memcpy(c->faults, comm->faults, sizeof c->faults);
  return emu_start_join(c, newcomm);
}

/* ---- finalize, destroy, abort, revoke -------------------------------------- */

static void emu_wait_quiet(struct ncclComm *c)
{
  pthread_mutex_lock(&c->mu);
  while (atomic_load(&c->inflight) > 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 200000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
}

static void *emu_quiet_thread(void *arg)
{
  struct ncclComm *c = arg;
  emu_wait_quiet(c);
  int expect = ncclInProgress;
  atomic_compare_exchange_strong(&c->async_err, &expect, ncclSuccess);
  emu_comm_put(c);
  return NULL;
}

/* Blocking: wait here.  Nonblocking: report ncclInProgress until a helper
 * thread has seen every pending operation finish. */
static ncclResult_t emu_quiesce(struct ncclComm *c)
{
  if (c->blocking) {
    emu_wait_quiet(c);
    return ncclSuccess;
  }
  int e = atomic_load(&c->async_err);
  if (e != ncclSuccess && e != ncclInProgress)
    return (ncclResult_t)e;
  atomic_store(&c->async_err, ncclInProgress);
  atomic_fetch_add(&c->refs, 1);
  if (emu_thread_start(NULL, emu_quiet_thread, c, 1) != 0) {
    emu_comm_put(c);
    emu_wait_quiet(c);
    atomic_store(&c->async_err, ncclSuccess);
    return ncclSuccess;
  }
  return ncclInProgress;
}

EMU_API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
  if (!emu_comm_valid(comm)) {
    emu_set_last_error(NULL, "ncclCommFinalize: invalid comm");
    return ncclInvalidArgument;
  }
  if (atomic_load(&comm->revoked)) {
    emu_set_last_error(comm, "ncclCommFinalize: communicator was revoked");
    return ncclInvalidUsage;
  }
  return emu_quiesce(comm);
}

EMU_API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
  if (!comm)
    return ncclSuccess;
  if (!emu_comm_valid(comm)) {
    emu_set_last_error(NULL, "ncclCommDestroy: invalid comm");
    return ncclInvalidArgument;
  }
  comm->magic = EMU_COMM_MAGIC ^ 1;   /* the handle is dead from now on */
  emu_mon_remove(comm);
  emu_forget_name(comm);
  emu_comm_put(comm);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
  if (!comm)
    return ncclSuccess;
  if (!emu_comm_valid(comm)) {
    emu_set_last_error(NULL, "ncclCommAbort: invalid comm");
    return ncclInvalidArgument;
  }
  /* Pending work sees the flag within one futex wait and is cancelled, so
   * the streams it blocked complete. */
  atomic_store(&comm->aborted, 1);
  if (comm->shm)
    emu_comm_bell(comm);
  comm->magic = EMU_COMM_MAGIC ^ 1;
  emu_mon_remove(comm);
  emu_forget_name(comm);
  emu_comm_put(comm);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int flags)
{
  if (!emu_comm_valid(comm) || flags != NCCL_REVOKE_DEFAULT) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommRevoke: invalid argument");
    return ncclInvalidArgument;
  }
  atomic_store(&comm->revoked, 1);
  if (comm->shm)
    emu_comm_bell(comm);
  return emu_quiesce(comm);
}

EMU_ALIAS(ncclCommSplit)
EMU_ALIAS(ncclCommShrink)
EMU_ALIAS(ncclCommFinalize)
EMU_ALIAS(ncclCommDestroy)
EMU_ALIAS(ncclCommAbort)
EMU_ALIAS(ncclCommRevoke)
