/* strict_shm.c -- strict mode through a shared-memory board per
 * communicator (contract: strict_shm.h; layout and rules:
 * docs/wire-protocol.md, "Strict mode on one host").
 *
 * Why: on one host a strict collective through the coordinator costs a
 * frame per rank to one process, a decision, a reply per rank and two
 * thread wake-ups per rank.  Here each rank writes its fingerprint into its
 * own slot of a file every rank maps, the last one to arrive wakes the
 * others with one futex call, and every rank compares the same nranks
 * fingerprints itself: the same data gives every rank the same verdict,
 * so a refusal happens on all of them without anybody deciding for them.
 *
 * Ordering: a rank publishes seq k (entry, then slot seq) and waits until
 * every slot is at k or later.  A rank can be at most one publication past
 * a slower one (its next wait needs the slower rank's next publication),
 * so each slot keeps its last two publications and a reader always finds
 * k there unless that rank never published k at all.
 *
 * Here: which comms use a board, the wait and the verdict.  The board's
 * layout and its file (create, judge, replace, claim): strict_board.c.
 */
#include "interpose/exchange/strict_shm.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/trigger.h"
#include "interpose/exchange/check_int.h"
#include "interpose/exchange/client_int.h"
#include "interpose/exchange/record_fp.h"
#include "interpose/exchange/strict_board.h"

#define SLICE_S 0.05       /* a waiter looks for gone peers this often */
#define YIELDS 4           /* sched_yield tries before FUTEX_WAIT */
enum { B_OK = 1, B_PASS = 2, B_DEAD = 3, B_CUT = 4 }; /* a board, for this process */

static struct {
  int on;
  uint64_t pidns;
  pthread_mutex_t mu;
  struct ntx_board b[NTR_COMM_MAX];
  uint32_t n;   /* entries published (release) */
  int stopped;
  int said_timeout, said_pass;
} shm_state = {.mu = PTHREAD_MUTEX_INITIALIZER};

void ntx_shm_init(const struct ntr_ring_header *h, int want) {
  if (want >= 0)
    shm_state.on = want;
  else /* the launcher's word that no rank of the job is elsewhere */
    shm_state.on = h && h->world_size > 0 && h->local_world_size == h->world_size;
  struct stat st;
  shm_state.pidns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* ------------------------------------------------------------ helpers -- */

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static uint64_t fnv(const char *s) {
  uint64_t x = 1469598103934665603ull;
  for (; *s; s++)
    x = (x ^ (uint8_t)*s) * 1099511628211ull;
  return x;
}

static int fp_same(const struct ntx_fp *a, const struct ntx_fp *b) {
  return a->kind == b->kind && a->count == b->count && a->dtype == b->dtype && a->redop == b->redop &&
         a->peer == b->peer;
}

static struct ntx_board *find(uint64_t comm_id, int32_t rank) {
  uint32_t n = __atomic_load_n(&shm_state.n, __ATOMIC_ACQUIRE);
  for (uint32_t i = 0; i < n; i++)
    if (shm_state.b[i].comm_id == comm_id && shm_state.b[i].rank == rank)
      return &shm_state.b[i];
  return NULL;
}

static struct ntx_board *get_board(uint64_t comm_id, int32_t rank, int32_t nranks) {
  struct ntx_board *b = find(comm_id, rank);
  if (b)
    return b;
  pthread_mutex_lock(&shm_state.mu);
  b = find(comm_id, rank);
  if (!b && shm_state.n < NTR_COMM_MAX) {
    b = &shm_state.b[shm_state.n];
    memset(b, 0, sizeof *b);
    b->comm_id = comm_id;
    b->rank = rank;
    b->nranks = nranks;
    const char *job = nti_cfg.job[0] ? nti_cfg.job : "nojob";
    char san[41];
    size_t i = 0;
    for (; job[i] && i < sizeof san - 1; i++)
      san[i] = (job[i] >= 'a' && job[i] <= 'z') || (job[i] >= 'A' && job[i] <= 'Z') ||
                       (job[i] >= '0' && job[i] <= '9') || job[i] == '-' || job[i] == '.'
                   ? job[i]
                   : '_';
    san[i] = '\0';
    uint64_t jh = fnv(job);
    int len = snprintf(b->path, sizeof b->path, "%s/strict-%s-%016llx-%016llx.board", nti_cfg.ring_dir, san,
                       (unsigned long long)jh, (unsigned long long)comm_id);
    const char *why = "the path is too long";
    b->dir = nti_cfg.ring_dir;
    int ok = len > 0 && (size_t)len < sizeof b->path && ntx_board_attach(b, jh, shm_state.pidns, &why) == 0;
    b->state = ok ? B_OK : B_PASS;
    if (ok) /* the tests' and analyze's evidence that this comm's strict calls go through shared memory */
      ntx_cl_record_event(NTR_KIND_NOTE, comm_id, 0, rank, (uint64_t)nranks, "strict-shm");
    else if (ntx_cl_once(&shm_state.said_pass))
      ntx_cl_say("strict check: no shared-memory board for comm %08x at %s: %s; it goes through the coordinator",
                 NTX_COMM_SHORT(comm_id), b->path, why);
    __atomic_store_n(&shm_state.n, shm_state.n + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&shm_state.mu);
  return b;
}

/* ------------------------------------------------------------ the wait -- */

/* A call on a board that is gone for us.  @return 0 (proceed). */
static int cut_said(struct ntx_board *b) {
  if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) == B_CUT && !b->said_cut++)
    ntx_cl_say("strict check: comm %08x: its board file %s was cut under this process (SIGBUS on its mapping, "
               "taken by the tracer); calls on this comm proceed unchecked", NTX_COMM_SHORT(b->comm_id), b->path);
  return 0;
}

static void publish(struct ntx_board *b, const struct ntx_fp *fp) {
  struct ntx_board_ent *e = &b->s[b->rank].e[b->npub++ & 1];
  uint64_t w[7];
  memcpy(w, fp, sizeof w);
  __atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  for (int i = 0; i < 7; i++)
    __atomic_store_n(&e->w[i], w[i], __ATOMIC_RELAXED);
  __atomic_store_n(&e->seq, fp->seq, __ATOMIC_RELEASE);
  /* seq_cst with the loads of all_here: of two ranks arriving last at once,
   * at least one sees the other (and wakes everybody) */
  __atomic_store_n(&b->s[b->rank].seq, fp->seq, __ATOMIC_SEQ_CST);
}

/* Rank r's publication of seq, if its slot still holds it.  @return 0 or -1. */
static int read_entry(const struct ntx_board_slot *s, uint64_t seq, struct ntx_fp *out) {
  for (int i = 0; i < 2; i++) {
    const struct ntx_board_ent *e = &s->e[i];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != seq)
      continue;
    uint64_t w[7];
    for (int k = 0; k < 7; k++)
      w[k] = __atomic_load_n(&e->w[k], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq)
      continue;
    memcpy(out, w, sizeof w);
    return 0;
  }
  return -1;
}

/* @return 1 when every other rank published seq or later; *gone = a rank
 * that left (or died) before publishing it, else -1. */
static int all_here(const struct ntx_board *b, uint64_t seq, int check_alive, int32_t *gone) {
  int here = 1;
  for (int32_t r = 0; r < b->nranks; r++) {
    if (r == b->rank)
      continue;
    const struct ntx_board_slot *s = &b->s[r];
    uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
    if ((st == NTX_SL_ACTIVE || st == NTX_SL_LEFT) && __atomic_load_n(&s->seq, __ATOMIC_SEQ_CST) >= seq)
      continue; /* a rank that left after publishing seq still counts for it */
    here = 0;
    if (st == NTX_SL_LEFT || (check_alive && st == NTX_SL_ACTIVE && ntx_board_owner_dead(s, shm_state.pidns))) {
      *gone = r;
      return 0;
    }
    if (!check_alive)
      return 0;
  }
  return here;
}

static double now_s(void) { return ntx_cl_now(); }

/* Compare every rank's fingerprint of seq with ours.  @return 0 agree (or
 * not comparable: said once), -1 refuse with msg. */
static int decide(struct ntx_board *b, const struct ntx_fp *mine, char *msg, size_t msg_len) {
  struct ntx_fp v[NTX_NVAR];
  uint32_t cnt[NTX_NVAR] = {0}, nvar = 1;
  uint8_t *rv = malloc((size_t)b->nranks);
  int differ = 0;
  v[0] = *mine;
  for (int32_t r = 0; r < b->nranks; r++) {
    struct ntx_fp f;
    if (r == b->rank)
      f = *mine;
    else if (read_entry(&b->s[r], mine->seq, &f) != 0) {
      if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) == B_CUT) {
        free(rv);
        return cut_said(b);
      }
      if (!b->said_skip++)
        ntx_cl_say("strict check: comm %08x seq %llu: rank %d's calls on it went another way (a group, "
                   "or unchecked); this one proceeds unchecked", NTX_COMM_SHORT(b->comm_id),
                   (unsigned long long)mine->seq, (int)r);
      free(rv);
      return 0;
    }
    uint32_t k = 0;
    while (k < nvar && !fp_same(&f, &v[k]))
      k++;
    if (k == nvar) {
      differ = 1;
      if (nvar < NTX_NVAR)
        v[nvar++] = f;
      else
        k = NTX_NVAR - 1; /* more variants than kept: counted with the last, as the coordinator does */
    }
    cnt[k]++;
    if (rv)
      rv[r] = (uint8_t)k;
  }
  if (!differ || __atomic_load_n(&b->state, __ATOMIC_ACQUIRE) == B_CUT) {
    free(rv);
    return differ ? cut_said(b) : 0; /* a zero page read is no verdict */
  }
  char text[NTX_TEXT_MAX];
  const char *field = "op";
  int32_t culprit = -1, majlow = 0;
  if (!rv || !ntx_mismatch_text(v, nvar, cnt, rv, b->nranks, b->comm_id, mine->seq, 0, text, sizeof text,
                                &field, &culprit, &majlow))
    snprintf(text, sizeof text, "mismatch on comm %08x seq %llu", NTX_COMM_SHORT(b->comm_id),
             (unsigned long long)mine->seq);
  free(rv);
  if (msg && msg_len)
    snprintf(msg, msg_len, "%s", text);
  /* As the coordinator's first verdict on a comm: one line, a record, a dump. */
  if (!b->reported) {
    b->reported = 1;
    ntx_cl_say("%s", text);
    ntx_cl_record_event(NTR_KIND_MISMATCH, b->comm_id, mine->seq, culprit, (uint64_t)majlow, field);
    nti_dump_now(NTR_TRIG_MISMATCH, 0, 0, text);
  }
  return -1;
}

int ntx_shm_wait(const struct ntr_record *rec, char *msg, size_t msg_len) {
  struct ntx_fp mine;
  if (!shm_state.on || __atomic_load_n(&shm_state.stopped, __ATOMIC_ACQUIRE) || ntx_fp_from_record(rec, &mine) != 0 ||
      mine.dir != NTX_FP_COLL || rec->nranks <= 0 || rec->nranks > NTX_BOARD_MAX_RANKS || rec->rank < 0 ||
      rec->rank >= rec->nranks || mine.seq == 0)
    return NTX_SHM_PASS;
  if (rec->nranks == 1)
    return 0;
  struct ntx_board *b = get_board(rec->comm_id, rec->rank, rec->nranks);
  if (!b || b->nranks != rec->nranks)
    return NTX_SHM_PASS;
  int st = __atomic_load_n(&b->state, __ATOMIC_ACQUIRE);
  if (st == B_PASS)
    return NTX_SHM_PASS;
  if (st == B_DEAD || st == B_CUT)
    return cut_said(b); /* a rank of it is gone, or its file was cut: said once, calls proceed unchecked */
  publish(b, &mine);
  if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) == B_CUT)
    return cut_said(b);
  struct ntx_board_hdr *h = b->h;
  int32_t gone = -1;
  if (all_here(b, mine.seq, 0, &gone)) {
    __atomic_add_fetch(&h->gen, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&h->waiters, __ATOMIC_SEQ_CST))
      futex(&h->gen, FUTEX_WAKE, INT_MAX, NULL);
    return decide(b, &mine, msg, msg_len);
  }
  /* A few yields before sleeping: when ranks outnumber cores the ones not
   * there yet get the core now, and a rank that finds them there skips
   * both the futex sleep and its wake-up (docs/performance.md has the
   * figures, and why more yields gain nothing).  On idle cores a yield
   * returns at once: a spin of a few hundred ns. */
  for (int i = 0; i < YIELDS; i++) {
    sched_yield();
    if (all_here(b, mine.seq, 0, &gone))
      return decide(b, &mine, msg, msg_len);
  }
  double t0 = now_s(), end = t0 + nti_cfg.strict_timeout_s, next_alive = t0 + SLICE_S;
  for (;;) {
    __atomic_add_fetch(&h->waiters, 1, __ATOMIC_SEQ_CST);
    uint32_t g = __atomic_load_n(&h->gen, __ATOMIC_SEQ_CST);
    double t = now_s();
    int check = t >= next_alive;
    if (check)
      next_alive = t + SLICE_S;
    gone = -1;
    int here = all_here(b, mine.seq, check, &gone);
    if (__atomic_load_n(&b->state, __ATOMIC_ACQUIRE) == B_CUT) {
      __atomic_sub_fetch(&h->waiters, 1, __ATOMIC_SEQ_CST);
      return cut_said(b); /* what we read may be the zero page now */
    }
    if (here) {
      __atomic_sub_fetch(&h->waiters, 1, __ATOMIC_SEQ_CST);
      return decide(b, &mine, msg, msg_len);
    }
    if (gone >= 0 || t >= end) {
      __atomic_sub_fetch(&h->waiters, 1, __ATOMIC_SEQ_CST);
      break;
    }
    double d = end - t < SLICE_S ? end - t : SLICE_S;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    futex(&h->gen, FUTEX_WAIT, g, &ts);
    __atomic_sub_fetch(&h->waiters, 1, __ATOMIC_SEQ_CST);
  }
  if (gone >= 0) {
    __atomic_store_n(&b->state, B_DEAD, __ATOMIC_RELEASE);
    if (!b->said_gone++)
      ntx_cl_say("strict check: comm %08x seq %llu: rank %d (pid %d) is gone; calls on this comm proceed "
                 "unchecked", NTX_COMM_SHORT(b->comm_id), (unsigned long long)mine.seq, (int)gone,
                 (int)__atomic_load_n(&b->s[gone].owner, __ATOMIC_RELAXED));
    return 0;
  }
  if (ntx_cl_once(&shm_state.said_timeout))
    ntx_cl_say("strict check: comm %08x seq %llu: not every rank there within NCCLTRACE_STRICT_TIMEOUT=%gs; "
               "calls proceed unchecked when that happens", NTX_COMM_SHORT(b->comm_id),
               (unsigned long long)mine.seq, nti_cfg.strict_timeout_s);
  ntx_cl_strict_timed_out(); /* counted with the coordinator path's: one bound for the process */
  return 0;
}

int ntx_shm_repair_fault(void *addr) {
  uint32_t n = __atomic_load_n(&shm_state.n, __ATOMIC_ACQUIRE);
  long pg = sysconf(_SC_PAGESIZE); /* async-signal-safe in glibc: a cached value */
  for (uint32_t i = 0; i < n; i++) {
    struct ntx_board *b = &shm_state.b[i];
    char *base = (char *)b->h, *a = addr;
    if (!base || a < base || a >= base + ntx_board_size((uint32_t)b->nranks))
      continue;
    char *page = base + (size_t)(a - base) / (size_t)pg * (size_t)pg;
    /* Zeroes, private: the other ranks see the cut file, not this page.
     * Every wait on this board ends by the state (ntx_shm_wait). */
    if (mmap(page, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != page)
      return 0;
    __atomic_store_n(&b->state, B_CUT, __ATOMIC_RELEASE);
    return 1;
  }
  return 0;
}

void ntx_shm_stop(void) {
  if (__atomic_exchange_n(&shm_state.stopped, 1, __ATOMIC_ACQ_REL))
    return;
  pthread_mutex_lock(&shm_state.mu);
  for (uint32_t i = 0; i < shm_state.n; i++) {
    struct ntx_board *b = &shm_state.b[i];
    if (!b->h)
      continue;
    /* Waiters on us stop at once; the mapping stays (another thread may
     * still be in a wait: it ends by the state, not by a fault). */
    __atomic_store_n(&b->s[b->rank].state, NTX_SL_LEFT, __ATOMIC_RELEASE);
    __atomic_add_fetch(&b->h->gen, 1, __ATOMIC_SEQ_CST);
    futex(&b->h->gen, FUTEX_WAKE, INT_MAX, NULL);
    struct stat st; /* unlink only the file we used, not a newer job's */
    if (lstat(b->path, &st) == 0 && st.st_dev == b->dev && st.st_ino == b->ino)
      unlink(b->path);
  }
  pthread_mutex_unlock(&shm_state.mu);
}
