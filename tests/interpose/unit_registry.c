/* unit_registry.c -- the communicator registry under concurrent lookups,
 * and the identity/fingerprint rules, without preloading anything (so it
 * also runs under ASan and TSan).
 *
 * Proves: a lookup never returns another handle's comm while lifecycle
 * code binds and unbinds (readers race with a writer, as wrappers race
 * with init/destroy); unknown handles give NULL; ids follow docs/identity.md
 * (split by color and n, scalable with one id == InitRank id); ncclBcast
 * and ncclBroadcast fingerprint alike, other fields do not; without a
 * launcher job id, the derived job id follows the job communicator (most
 * ranks, then smallest id, InitRank family before InitAll, never a split,
 * only comms whose init completed once one has) whatever the creation
 * order, and the ring file is renamed after it;
 * past NTR_COMM_MAX comms, a new one takes the slot of the comm retired
 * longest ago (wiped: no old recent[] entry, no old id), its old owner is
 * told (final state) and points elsewhere from then on, and with every
 * slot alive a new comm gets none and is said unwatched.
 * Exit: 0 pass, 1 fail.
 * Thread-safety: four reader threads and the main thread as the writer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/comm.h"
#include "interpose/ident.h"
#include "interpose/nti.h"
#include "tests/nt_test.h"

/* The library's globals live in init.c, which is not linked here. */
struct nti_global nti_proc;
NTI_TLS struct nti_tls nti_tls;
void nti_first_comm(void) {}
/* lifecycle.c's hooks: what they were told */
static uint64_t reused_id, unwatched_id;
static int nreused, nunwatched;
void nti_life_slot_reused(const struct ntr_comm_state *cs) {
  reused_id = cs->comm_id;
  nreused++;
}
void nti_life_unwatched(uint64_t comm_id, int rank, int nranks) {
  (void)rank;
  (void)nranks;
  unwatched_id = comm_id;
  nunwatched++;
}

#define NCOMMS 64
#define HANDLE(i) ((ncclComm_t)(uintptr_t)(0x10000 + (i) * 0x40))

static struct nti_comm *comms[NCOMMS];
static int stop; /* atomic */
static int bad;  /* atomic */

static void *reader(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    int i = (int)(rand_r(&seed) % (NCOMMS + 8));
    struct nti_comm *c = nti_comm_lookup(i < NCOMMS ? HANDLE(i) : HANDLE(1000 + i));
    if (i >= NCOMMS && c)
      __atomic_store_n(&bad, 1, __ATOMIC_RELAXED); /* a handle never bound */
    if (i < NCOMMS && c && c != comms[i])
      __atomic_store_n(&bad, 2, __ATOMIC_RELAXED); /* another handle's comm */
  }
  return NULL;
}

static int identity(void) {
  ncclUniqueId id;
  memset(&id, 7, sizeof id);
  uint64_t a = nti_hash_bytes(&id, sizeof id);
  if (a != nti_hash_bytes(&id, sizeof id) || a == 0)
    NT_RET_FAIL("hash not deterministic");
  id.internal[127] ^= 1;
  if (nti_hash_bytes(&id, sizeof id) == a)
    NT_RET_FAIL("hash ignores the last byte");
  if (nti_id_scalable(&id, 1) != nti_hash_bytes(&id, sizeof id))
    NT_RET_FAIL("scalable init with one id differs from InitRank");
  ncclUniqueId two[2] = {id, id};
  if (nti_id_scalable(two, 2) == nti_id_scalable(two, 1))
    NT_RET_FAIL("scalable ids ignore the second id");
  if (nti_id_split(a, 1, 0) == nti_id_split(a, 1, 1) || nti_id_split(a, 1, 0) == nti_id_split(a, 2, 0) ||
      nti_id_split(a, 1, 0) != nti_id_split(a, 1, 0))
    NT_RET_FAIL("split ids do not follow (parent, n, color)");
  int ex1[] = {1, 3}, ex2[] = {1, 2};
  if (nti_id_shrink(a, 1, ex1, 2) == nti_id_shrink(a, 1, ex2, 2))
    NT_RET_FAIL("shrink ids ignore the excluded ranks");
  if (nti_fp_coll(NTR_KIND_BCAST, 8, 7, -1, 0) != nti_fp_coll(NTR_KIND_BROADCAST, 8, 7, -1, 0))
    NT_RET_FAIL("Bcast and Broadcast fingerprint differently");
  if (nti_fp_coll(NTR_KIND_ALLREDUCE, 8, 7, 0, -1) == nti_fp_coll(NTR_KIND_ALLREDUCE, 9, 7, 0, -1) ||
      nti_fp_coll(NTR_KIND_ALLREDUCE, 8, 7, 0, -1) == nti_fp_coll(NTR_KIND_ALLREDUCE, 8, 7, 1, -1) ||
      nti_fp_coll(NTR_KIND_BROADCAST, 8, 7, -1, 0) == nti_fp_coll(NTR_KIND_BROADCAST, 8, 7, -1, 1))
    NT_RET_FAIL("fingerprint ignores count, redop or root");
  if (nti_fp_p2p(1, 8, 7, 2, 0) == nti_fp_p2p(1, 8, 7, 2, 1))
    NT_RET_FAIL("p2p fingerprint ignores the direction");
  return 0;
}

/* Job id rule (docs/identity.md "Job id").  The registry already holds the
 * 64 four-rank InitRank comms 0x1000..0x103f of the registry test. */
static int expect_job(const char *want) {
  if (strcmp(nti_cfg.job, want) != 0 || strcmp(nti_proc.ring.hdr->job_id, want) != 0)
    NT_RET_FAIL("job id %s (ring %s), expected %s", nti_cfg.job, nti_proc.ring.hdr->job_id, want);
  if (!strstr(nti_proc.ring.path, want) || access(nti_proc.ring.path, F_OK) != 0)
    NT_RET_FAIL("ring file %s not named after job %s", nti_proc.ring.path, want);
  return 0;
}

static int job_rule(void) {
  static const struct {
    uint64_t id;
    int nranks;
    unsigned kind;
    int ready; /* its init completes */
    const char *want;
  } steps[] = {
      /* a later comm with a smaller id and the same size wins */
      {0x0fff, 4, NTR_KIND_COMM_INIT_RANK_CONFIG, 1, "c0000000000000fff"},
      /* ... but not while its init has not completed: a comm some ranks
       * enter and others never will must not move the id */
      {0x0ffe, 4, NTR_KIND_COMM_INIT_RANK, 0, "c0000000000000fff"},
      {0x7000, 64, NTR_KIND_COMM_INIT_RANK, 0, "c0000000000000fff"},
      /* a larger one wins over smaller ids; the first-created does not matter */
      {0x9000, 8, NTR_KIND_COMM_INIT_RANK, 1, "c0000000000009000"},
      {0x8000, 8, NTR_KIND_COMM_INIT_RANK_SCALABLE, 1, "c0000000000008000"},
      /* a sub-communicator of the job, made with its own unique id */
      {0x0001, 2, NTR_KIND_COMM_INIT_RANK, 1, "c0000000000008000"},
      /* process-local InitAll ids and split children never replace it */
      {0x0002, 16, NTR_KIND_COMM_INIT_ALL, 1, "c0000000000008000"},
      {0x0003, 16, NTR_KIND_COMM_SPLIT, 1, "c0000000000008000"},
  };
  /* No comm has completed its init: the best of those in theirs decides,
   * provisionally. */
  pthread_mutex_lock(&nti_life_lock);
  nti_job_from_comm(0x1000);
  pthread_mutex_unlock(&nti_life_lock);
  if (expect_job("c0000000000001000"))
    return 1;
  /* The registry test's comms complete their init. */
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all)
    c->cs->lifecycle = NTR_COMM_READY;
  nti_job_comm_ready(0x1000);
  if (expect_job("c0000000000001000"))
    return 1;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    pthread_mutex_lock(&nti_life_lock);
    struct nti_comm *c = nti_comm_create(steps[i].id, 0, steps[i].nranks, steps[i].kind);
    if (!c)
      NT_RET_FAIL("create %#llx", (unsigned long long)steps[i].id);
    nti_job_from_comm(steps[i].id);
    pthread_mutex_unlock(&nti_life_lock);
    if (steps[i].ready) {
      c->cs->lifecycle = NTR_COMM_READY;
      nti_job_comm_ready(steps[i].id);
    }
    if (expect_job(steps[i].want))
      return 1;
  }
  /* A comm that completes its init late decides then: the 64-rank one. */
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all)
    if (c->cs->comm_id == 0x7000)
      c->cs->lifecycle = NTR_COMM_READY;
  nti_job_comm_ready(0x7000);
  return expect_job("c0000000000007000");
}

/* Fill every slot, then retire and reuse (the comms of the earlier
 * tests hold the first slots; none of them is retired). */
static int slot_reuse(void) {
  static struct nti_comm *more[NTR_COMM_MAX];
  int n = 0;
  struct nti_comm *c;
  pthread_mutex_lock(&nti_life_lock);
  while (n < (int)NTR_COMM_MAX && (c = nti_comm_create(0x50000 + (uint64_t)n, 0, 2, NTR_KIND_COMM_INIT_RANK)))
    more[n++] = c;
  pthread_mutex_unlock(&nti_life_lock);
  if (n == 0 || n == (int)NTR_COMM_MAX || nunwatched != 1 || unwatched_id != 0x50000 + (uint64_t)n)
    NT_RET_FAIL("%d comms fit, %d unwatched (last %#llx)", n, nunwatched, (unsigned long long)unwatched_id);
  /* two retired, the second first: the older retirement is reused first */
  struct ntr_comm_state *s3 = more[3]->cs, *s1 = more[1]->cs;
  s3->lifecycle = NTR_COMM_DESTROYED;
  s3->recent[7].commit = 99;
  nti_comm_retire(more[3]);
  nti_comm_retire(more[1]);
  nti_comm_retire(more[1]); /* twice: one entry */
  pthread_mutex_lock(&nti_life_lock);
  struct nti_comm *a = nti_comm_create(0x60000, 1, 2, NTR_KIND_COMM_INIT_RANK);
  struct nti_comm *b = nti_comm_create(0x60001, 1, 2, NTR_KIND_COMM_INIT_RANK);
  struct nti_comm *none = nti_comm_create(0x60002, 1, 2, NTR_KIND_COMM_INIT_RANK);
  pthread_mutex_unlock(&nti_life_lock);
  if (!a || a->cs != s3 || !b || b->cs != s1 || none)
    NT_RET_FAIL("reuse: %p %p (slots %p %p), third %p", (void *)a, (void *)b, (void *)s3, (void *)s1, (void *)none);
  if (nreused != 2 || reused_id != 0x50001)
    NT_RET_FAIL("told of %d reuses, last %#llx", nreused, (unsigned long long)reused_id);
  if (s3->comm_id != 0x60000 || s3->rank != 1 || s3->lifecycle != NTR_COMM_INIT || s3->recent[7].commit ||
      s3->rec_count)
    NT_RET_FAIL("reused slot not fresh: id %#llx rank %d lifecycle %u commit %llu", (unsigned long long)s3->comm_id,
                s3->rank, s3->lifecycle, (unsigned long long)s3->recent[7].commit);
  if (more[3]->cs == s3 || more[3]->cs->comm_id || !more[3]->retired)
    NT_RET_FAIL("the old owner still points at its slot");
  more[3]->coll_seq = 77;
  nti_comm_seq_sync_all(); /* writes through every comm's cs: the old owner's no longer lands in s3 */
  if (s3->coll_seq != 0)
    NT_RET_FAIL("the old owner's seq %llu reached the reused slot", (unsigned long long)s3->coll_seq);
  if (nunwatched != 2 || unwatched_id != 0x60002)
    NT_RET_FAIL("third comm not said unwatched");
  return 0;
}

int main(void) {
  if (identity())
    return 1;
  char dir[] = "/tmp/nti-unit-XXXXXX";
  if (!mkdtemp(dir))
    NT_RET_FAIL("mkdtemp");
  struct ntr_ring_config rc = {.dir = dir, .job_id = "unit", .slots = 64};
  int r = ntr_ring_open(&nti_proc.ring, &rc);
  if (r < 0)
    NT_RET_FAIL("ntr_ring_open: %d", r);
  nti_proc.active = 1;
  if (nti_comm_lookup(HANDLE(0)) || nti_comm_lookup(NULL))
    NT_RET_FAIL("lookup of an unbound handle");
  for (int i = 0; i < NCOMMS; i++) {
    comms[i] = nti_comm_create(0x1000 + (uint64_t)i, i % 4, 4, NTR_KIND_COMM_INIT_RANK);
    if (!comms[i] || comms[i]->np2p != 4 || comms[i]->cs->comm_id != 0x1000 + (uint64_t)i)
      NT_RET_FAIL("create %d", i);
  }
  pthread_t th[4];
  for (int t = 0; t < 4; t++)
    pthread_create(&th[t], NULL, reader, (void *)(uintptr_t)(t + 1));
  /* The writer: bind everything, then churn unbind/rebind (destroy and a
   * new comm at a recycled address), as lifecycle wrappers do. */
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < NCOMMS; i++) {
      pthread_mutex_lock(&nti_life_lock);
      if (round % 2 == 0)
        r = nti_comm_bind(comms[i], HANDLE(i));
      else
        nti_comm_unbind(comms[i]);
      pthread_mutex_unlock(&nti_life_lock);
      if (r < 0)
        NT_RET_FAIL("bind %d: %d", i, r);
    }
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < 4; t++)
    pthread_join(th[t], NULL);
  if (bad)
    NT_RET_FAIL("a reader saw %s", bad == 1 ? "a comm for a never-bound handle" : "another handle's comm");
  /* Final state: the last round unbound everything. */
  for (int i = 0; i < NCOMMS; i++)
    if (nti_comm_lookup(HANDLE(i)) || comms[i]->live)
      NT_RET_FAIL("comm %d still bound after unbind", i);
  pthread_mutex_lock(&nti_life_lock);
  r = nti_comm_bind(comms[5], HANDLE(5));
  pthread_mutex_unlock(&nti_life_lock);
  if (r < 0 || nti_comm_lookup(HANDLE(5)) != comms[5])
    NT_RET_FAIL("rebind after tombstones");
  if (job_rule())
    return 1;
  if (slot_reuse())
    return 1;
  ntr_ring_close(&nti_proc.ring, 1);
  rmdir(dir);
  puts("PASS unit_registry");
  return 0;
}
