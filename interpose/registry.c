/* registry.c -- ncclComm_t -> struct nti_comm, lock-free for readers.
 *
 * Thread-safety: nti_comm_lookup (inline, in nti.h) is lock-free and may
 * run on any thread concurrently with everything; nti_comm_create/bind/unbind run only in
 * lifecycle wrappers, serialized by nti_life_lock.
 * Signal-safety: nti_comm_lookup is async-signal-safe (atomic loads only);
 * the rest allocates and is not.
 *
 * Table: open addressing, linear probing, keyed by the handle pointer.
 * A removed entry becomes a tombstone (key = NTI_REG_TOMB) so probe chains stay
 * intact; nti_comm structs are never freed, so a reader that raced with an
 * unbind holds a pointer to a dead but valid struct (its live flag is 0).
 *
 * Ring slots (ntr_comm_state) are NTR_COMM_MAX per process: fresh ones
 * first; then the slot of the comm the watchdog retired longest ago
 * (destroyed, aborted or failed, nothing in flight: nti_comm_retire), so a
 * process that makes and destroys comms all its life keeps every new one
 * watched, and the latest dead ones keep their state longest.  Its old
 * owner's final state goes into the main ring first, a NOTE "slot reused"
 * (docs/dump-format.md), then the owner is pointed at a private state
 * nobody reads and the slot wiped for readers (ntr_ring_comm_wipe).  Past
 * NTR_COMM_MAX comms alive at once a new one gets no slot: said once,
 * and each such comm leaves a NOTE "unwatched" naming it.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/nti.h"
#include "interpose/comm.h"

struct nti_reg_slot nti_reg_table[NTI_REG_SLOTS]; /* lookup: nti.h */
static struct nti_comm *all_comms; /* newest first (atomic head) */
pthread_mutex_t nti_life_lock = PTHREAD_MUTEX_INITIALIZER;

/* Retired comms whose slots may be reused, oldest first (under
 * nti_life_lock): at most one per slot, so NTR_COMM_MAX entries hold them. */
static struct nti_comm *retired[NTR_COMM_MAX];
static uint32_t ret_head, ret_tail;
/* What a retired comm's cs points at once its slot is reused: stray
 * stores of a late writer land here, and nobody reads it. */
static struct ntr_comm_state grave;
/* Threads inside nti_comm_seq_sync_all (atomic): a slot is reused only
 * when none may still hold its old owner's cs. */
static uint32_t sync_active;

void nti_comm_retire(struct nti_comm *c) {
  pthread_mutex_lock(&nti_life_lock);
  if (!__atomic_load_n(&c->retired, __ATOMIC_RELAXED) && ret_tail - ret_head < NTR_COMM_MAX) {
    /* Release: the watchdog's last writes to cs come before the slot's reuse. */
    __atomic_store_n(&c->retired, 1, __ATOMIC_RELEASE);
    retired[ret_tail++ % NTR_COMM_MAX] = c;
  }
  pthread_mutex_unlock(&nti_life_lock);
}

/* The oldest retired comm's slot, wiped, its final state in the main ring
 * first.  Under nti_life_lock.  NULL when none (or a sync never ends). */
static struct ntr_comm_state *slot_reuse(void) {
  if (ret_head == ret_tail)
    return NULL;
  struct nti_comm *old = retired[ret_head % NTR_COMM_MAX];
  struct ntr_comm_state *cs = old->cs;
  /* From here a new sync reads the grave; one that loaded cs before is
   * waited for (each is a short loop of atomics, never blocked). */
  __atomic_store_n(&old->cs, &grave, __ATOMIC_SEQ_CST);
  for (int i = 0; __atomic_load_n(&sync_active, __ATOMIC_SEQ_CST); i++) {
    if (i == 100000) {
      __atomic_store_n(&old->cs, cs, __ATOMIC_SEQ_CST);
      return NULL;
    }
    sched_yield();
  }
  ret_head++;
  nti_life_slot_reused(cs);
  ntr_ring_comm_wipe(cs);
  return cs;
}

struct nti_comm *nti_comm_create(uint64_t comm_id, int rank, int nranks, uint32_t init_kind) {
  if (!nti_active())
    return NULL;
  struct ntr_comm_state *cs = ntr_ring_comm_alloc(&nti_proc.ring);
  if (!cs)
    cs = slot_reuse();
  if (!cs) {
    nti_life_unwatched(comm_id, rank, nranks);
    return NULL;
  }
  /* sizeof is a multiple of the alignment (64): see struct nti_comm */
  struct nti_comm *c = aligned_alloc(_Alignof(struct nti_comm), sizeof *c);
  if (!c)
    return NULL;
  memset(c, 0, sizeof *c);
  c->cs = cs;
  c->rec_flags = (uint32_t)NTR_REC_NO_TRACKING << 16; /* until the watchdog knows its context */
  c->fast_handle = (ncclComm_t)NTI_REG_TOMB;            /* until bound (fast_on) */
  /* Vyukov queue: cell i is free for the producer of position i. */
  for (uint64_t i = 0; i < NTI_EVQ; i++)
    c->pend[i].turn = i;
  cs->comm_id = comm_id;
  cs->rank = rank;
  cs->nranks = nranks;
  cs->init_kind = init_kind;
  cs->async_error = ncclSuccess;
  __atomic_store_n(&cs->lifecycle, NTR_COMM_INIT, __ATOMIC_RELEASE);
  if (nranks > 0 && nranks < (1 << 24)) {
    c->p2p_seq = calloc(2 * (size_t)nranks, sizeof *c->p2p_seq);
    if (c->p2p_seq)
      c->np2p = nranks;
  }
  c->next_all = all_comms;
  /* Release pairs with the watchdog's acquire of the list head. */
  __atomic_store_n(&all_comms, c, __ATOMIC_RELEASE);
  return c;
}

struct nti_comm nti_comm_none = {.handle = (ncclComm_t)NTI_REG_TOMB, .fast_handle = (ncclComm_t)NTI_REG_TOMB};

void nti_comm_seq_sync_all(void) {
  /* Seq-cst against slot_reuse: it either sees us here, or we see the
   * grave it stored in the old owner's cs. */
  __atomic_add_fetch(&sync_active, 1, __ATOMIC_SEQ_CST);
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all) {
    struct ntr_comm_state *cs = __atomic_load_n(&c->cs, __ATOMIC_SEQ_CST);
    /* Relaxed: a statistic of the mapping, each value a whole word. */
    uint64_t seq = __atomic_load_n(&c->coll_seq, __ATOMIC_RELAXED);
    uint64_t old = __atomic_load_n(&cs->coll_seq, __ATOMIC_RELAXED);
    while (old < seq &&
           !__atomic_compare_exchange_n(&cs->coll_seq, &old, seq, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      ;
  }
  __atomic_sub_fetch(&sync_active, 1, __ATOMIC_SEQ_CST);
}

void nti_comm_fast_off(struct nti_comm *c) {
  __atomic_store_n(&c->fast_handle, (ncclComm_t)NTI_REG_TOMB, __ATOMIC_SEQ_CST);
}

void nti_comm_flags_update(struct nti_comm *c) {
  uint32_t f = (uint32_t)((c->nonblocking ? NTR_REC_NONBLOCKING : 0) |
                          (nti_tracked(c) ? 0 : NTR_REC_NO_TRACKING)) << 16;
  /* The pointer goes through an empty asm: GCC's -Wstringop-overflow
   * (with -fsanitize=address) takes the member of the anonymous union
   * inside this aligned struct for a zero-size region and rejects the
   * atomic store; the asm hides nothing else. */
  uint32_t *flags = &c->rec_flags;
  __asm__("" : "+r"(flags));
  __atomic_store_n(flags, f, __ATOMIC_RELAXED);
  if (nti_tracked(c) && __atomic_load_n(&c->start_every, __ATOMIC_RELAXED))
    nti_comm_fast_off(c);
}

void nti_fast_off_all(void) {
  __atomic_store_n(&nti_proc.fast, 0, __ATOMIC_SEQ_CST);
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all)
    nti_comm_fast_off(c);
}

/* Bound in fast mode: the fast path may take c.  Sequentially consistent
 * against nti_fast_off_all: a bind racing with it either sees fast off
 * here, or its comm is on the list that function walks after its store. */
static void fast_on(struct nti_comm *c, ncclComm_t handle) {
  if (!__atomic_load_n(&nti_proc.fast, __ATOMIC_SEQ_CST))
    return;
  __atomic_store_n(&c->fast_handle, handle, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&nti_proc.fast, __ATOMIC_SEQ_CST) ||
      (nti_tracked(c) && __atomic_load_n(&c->start_every, __ATOMIC_RELAXED)))
    nti_comm_fast_off(c);
}

int nti_comm_bind(struct nti_comm *c, ncclComm_t handle) {
  uintptr_t key = (uintptr_t)handle;
  if (!c || key <= NTI_REG_TOMB)
    return -EINVAL;
  c->handle = handle;
  c->cs->handle = key;
  /* A stale entry for the same address (NCCL reused a freed comm's memory
   * and we missed the destroy) is replaced. */
  uint32_t i = nti_reg_slot_of(key), tomb = UINT32_MAX;
  for (uint32_t n = 0; n < NTI_REG_SLOTS; n++, i = (i + 1) & (NTI_REG_SLOTS - 1)) {
    uintptr_t k = nti_reg_table[i].key;
    if (k == key) {
      __atomic_store_n(&nti_reg_table[i].comm, c, __ATOMIC_RELEASE);
      __atomic_store_n(&c->live, 1, __ATOMIC_RELEASE);
      fast_on(c, handle);
      return 0;
    }
    if (k == NTI_REG_TOMB && tomb == UINT32_MAX)
      tomb = i;
    if (k == 0) {
      if (tomb != UINT32_MAX)
        i = tomb;
      /* comm first, then key with release (pairs with lookup's acquire). */
      __atomic_store_n(&nti_reg_table[i].comm, c, __ATOMIC_RELAXED);
      __atomic_store_n(&nti_reg_table[i].key, key, __ATOMIC_RELEASE);
      __atomic_store_n(&c->live, 1, __ATOMIC_RELEASE);
      fast_on(c, handle);
      return 0;
    }
  }
  if (tomb != UINT32_MAX) {
    __atomic_store_n(&nti_reg_table[tomb].comm, c, __ATOMIC_RELAXED);
    __atomic_store_n(&nti_reg_table[tomb].key, key, __ATOMIC_RELEASE);
    __atomic_store_n(&c->live, 1, __ATOMIC_RELEASE);
    fast_on(c, handle);
    return 0;
  }
  return -ENOSPC;
}

void nti_comm_unbind(struct nti_comm *c) {
  if (!c)
    return;
  __atomic_store_n(&c->live, 0, __ATOMIC_RELEASE);
  uintptr_t key = (uintptr_t)c->handle;
  /* A thread's cached comm (wrappers.c) compares handle: set to a value
   * no handle has, it no longer matches the value a new comm may reuse.  Relaxed: the cache is
   * a hint checked against the handle the caller passes. */
  __atomic_store_n(&c->handle, (ncclComm_t)NTI_REG_TOMB, __ATOMIC_RELAXED);
  nti_comm_fast_off(c);
  if (key <= NTI_REG_TOMB)
    return;
  uint32_t i = nti_reg_slot_of(key);
  for (uint32_t n = 0; n < NTI_REG_SLOTS; n++, i = (i + 1) & (NTI_REG_SLOTS - 1)) {
    uintptr_t k = nti_reg_table[i].key;
    if (k == key && nti_reg_table[i].comm == c) {
      /* Readers that already loaded the key keep a valid (dead) comm. */
      __atomic_store_n(&nti_reg_table[i].key, NTI_REG_TOMB, __ATOMIC_RELEASE);
      return;
    }
    if (k == 0)
      return;
  }
}

struct nti_comm *nti_comm_list(void) {
  return __atomic_load_n(&all_comms, __ATOMIC_ACQUIRE);
}

void nti_registry_forget_all(void) {
  /* Fork child, single-threaded: plain stores are enough. */
  memset(nti_reg_table, 0, sizeof nti_reg_table);
  all_comms = NULL;
  ret_head = ret_tail = 0;
  sync_active = 0;
}
