/* ident.c -- communicator identity (design §4, docs/identity.md).
 *
 * Thread-safety: the hash functions are pure.  nti_job_from_comm runs in a
 * lifecycle wrapper under nti_life_lock (it walks the registry and may
 * rewrite nti_cfg.job and the ring's job id); nti_job_comm_ready takes
 * that lock, from an application thread or the watchdog's (no allocation:
 * snprintf into the stack, link/unlink).
 * Signal-safety: the hash functions are async-signal-safe; nti_job_from_comm
 * is not (renames the ring file).
 *
 * The hash is NCCL's own (src/include/utils.h in NCCL 2.19+: eatHash /
 * digestHash over a two-word accumulator, seeded {1, 1}), re-implemented
 * here from its description, so that a communicator created with
 * ncclCommInitRank gets the same 64-bit id as NCCL's comm->commHash (the
 * "commHash" in NCCL_DEBUG=INFO lines and NCCL's profiler/RAS output).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "interpose/nti.h"
#include "interpose/comm.h"
#include "interpose/ident.h"

/* Fold `size` bytes into the accumulator, 8 bytes at a time.  The split of
 * the input into calls matters (the size is mixed in first), as in NCCL. */
static void eat(uint64_t acc[2], const void *bytes, size_t size) {
  const unsigned char *p = bytes;
  acc[0] ^= size;
  while (size) {
    acc[0] += acc[1];
    acc[1] ^= acc[0];
    acc[0] ^= acc[0] >> 31;
    acc[0] *= 0x9de62bbc8cef3ce3ull;
    acc[1] ^= acc[1] >> 32;
    acc[1] *= 0x485cd6311b599e79ull;
    size_t chunk = size < 8 ? size : 8;
    uint64_t x = 0;
    memcpy(&x, p, chunk); /* little-endian hosts only, like NCCL */
    p += chunk;
    size -= chunk;
    acc[0] += x;
  }
}

static uint64_t digest(const uint64_t acc[2]) {
  uint64_t h = acc[0];
  h ^= h >> 31;
  h *= 0xbac3bd562846de6bull;
  h += acc[1];
  h ^= h >> 32;
  h *= 0x995a187a14e7b445ull;
  return h;
}

uint64_t nti_hash_bytes(const void *p, size_t n) {
  uint64_t acc[2] = {1, 1};
  eat(acc, p, n);
  return digest(acc);
}

uint64_t nti_id_split(uint64_t parent, int nth, int color) {
  /* NCCL: eatHash(parent->commHash); eatHash(childCount); eatHash(color),
   * each with sizeof its type (uint64_t, int, int). */
  uint64_t acc[2] = {1, 1};
  eat(acc, &parent, sizeof parent);
  eat(acc, &nth, sizeof nth);
  eat(acc, &color, sizeof color);
  return digest(acc);
}

uint64_t nti_id_shrink(uint64_t parent, int nth, const int *excl, int nexcl) {
  /* NCCL derives a shrunk comm's hash like a split's (parent, childCount,
   * color); ranks of a shrink have no color, so we feed the excluded rank
   * list instead: every surviving rank passes the same list. */
  uint64_t acc[2] = {1, 1};
  eat(acc, &parent, sizeof parent);
  eat(acc, &nth, sizeof nth);
  if (excl && nexcl > 0)
    eat(acc, excl, (size_t)nexcl * sizeof *excl);
  else
    eat(acc, &nexcl, sizeof nexcl);
  return digest(acc);
}

uint64_t nti_id_grow(uint64_t parent, int nth) {
  /* The fallback of an existing rank that passed no unique id and could
   * not ask NCCL for the grown comm's hash: (parent, n-th grow) is what
   * every such rank shares; the ranks holding the id use its hash instead
   * (docs/identity.md "Grow"), so this id names the comm for these only. */
  uint64_t acc[2] = {1, 1};
  int tag = 0x67726f77; /* "grow": never the id of a split or shrink of the same parent and n */
  eat(acc, &parent, sizeof parent);
  eat(acc, &nth, sizeof nth);
  eat(acc, &tag, sizeof tag);
  return digest(acc);
}

uint64_t nti_id_init_all(int nth) {
  /* ncclCommInitAll creates every rank in this process: (host, pid, n-th
   * call) is unique and needs no agreement with anyone. */
  char host[64] = {0};
  gethostname(host, sizeof host - 1);
  int pid = (int)getpid();
  uint64_t acc[2] = {1, 1};
  eat(acc, host, strlen(host));
  eat(acc, &pid, sizeof pid);
  eat(acc, &nth, sizeof nth);
  return digest(acc);
}

uint64_t nti_id_scalable(const ncclUniqueId *ids, int n) {
  /* NCCL hashes only the first id; we hash all of them (design §4), and for
   * one id this equals the ncclCommInitRank id. */
  if (!ids || n <= 0)
    return 0;
  if (n == 1)
    return nti_hash_bytes(ids, sizeof *ids);
  uint64_t acc[2] = {1, 1};
  for (int i = 0; i < n; i++)
    eat(acc, &ids[i], sizeof ids[i]);
  return digest(acc);
}

/* Rank of a creation call as evidence of "the job": only calls every
 * process of the job makes with the same id across processes count
 * (InitRank family); an InitAll id is local to its process, so it serves
 * only a process that has nothing better; a split or shrink child is
 * always preceded by its root parent, which ranks higher anyway. */
static int job_class(uint32_t init_kind) {
  switch (init_kind) {
  case NTR_KIND_COMM_INIT_RANK:
  case NTR_KIND_COMM_INIT_RANK_CONFIG:
  case NTR_KIND_COMM_INIT_RANK_SCALABLE:
    return 2;
  case NTR_KIND_COMM_INIT_ALL:
    return 1;
  default:
    return 0;
  }
}

/* 1 when (cls, nranks, id) is a better job communicator than the best so
 * far: a higher class, then more ranks (the world communicator beats any
 * sub-communicator made with its own unique id), then the smaller id.  A
 * total order over facts every member of a communicator shares, so the
 * choice does not depend on which thread created its comm first. */
static int job_better(int cls, int32_t nranks, uint64_t id, int bcls, int32_t bn, uint64_t bid) {
  if (cls != bcls)
    return cls > bcls;
  if (nranks != bn)
    return nranks > bn;
  return id < bid;
}

/* Set once a launcher-less job id was derived: nti_cfg.job then holds our
 * own choice, which later communicators may still improve.  Under
 * nti_life_lock, like every call of nti_job_from_comm. */
static int job_derived;
/* The best comm seen so far whose init completed: kept here, since a
 * retired comm's state goes with its slot (registry.c) and the choice must
 * not go back. */
static int best_cls = -1;
static int32_t best_n;
static uint64_t best_id;

/* Init returned ncclSuccess (or its nonblocking init finished): the comm
 * exists on every member, not only on the ranks that entered its init. */
static int init_completed(uint32_t lc) {
  return lc == NTR_COMM_READY || lc == NTR_COMM_FINALIZING || lc == NTR_COMM_REVOKED;
}

void nti_job_from_comm(uint64_t comm_id) {
  if ((nti_cfg.job[0] && !job_derived) || !nti_active())
    return;
  /* The best communicator this process has created so far (the list
   * includes the one just created; it only grows, under nti_life_lock).
   * design §6 / docs/identity.md "Job id": deriving from the first comm
   * made ranks whose threads create comms concurrently disagree.  Only a
   * comm whose init completed decides: a comm some ranks entered and
   * others never will (a lazily created comm of a rank that went another
   * way) must not move those ranks to another id than their peers'.  Comms
   * still in their init give a provisional id only while no comm has
   * completed one. */
  int bcls = best_cls, pcls = -1;
  int32_t bn = best_n, pn = 0;
  uint64_t bid = best_id, pid = 0;
  for (struct nti_comm *c = nti_comm_list(); c; c = c->next_all) {
    const struct ntr_comm_state *cs = c->cs;
    int cls = job_class(cs->init_kind);
    if (!cs->comm_id || cls <= 0)
      continue;
    uint32_t lc = __atomic_load_n(&cs->lifecycle, __ATOMIC_ACQUIRE);
    if (init_completed(lc) && job_better(cls, cs->nranks, cs->comm_id, bcls, bn, bid)) {
      bcls = cls;
      bn = cs->nranks;
      bid = cs->comm_id;
    } else if (lc == NTR_COMM_INIT && job_better(cls, cs->nranks, cs->comm_id, pcls, pn, pid)) {
      pcls = cls;
      pn = cs->nranks;
      pid = cs->comm_id;
    }
  }
  best_cls = bcls;
  best_n = bn;
  best_id = bid;
  if (!bid)
    bid = pid;
  /* Registry full (the comm got no slot) or only split/shrink children of
   * comms we never saw: the comm at hand is all we know. */
  if (!bid && !job_derived)
    bid = comm_id;
  if (!bid)
    return;
  char job[sizeof nti_cfg.job];
  snprintf(job, sizeof job, "c%016llx", (unsigned long long)bid);
  if (job_derived && strcmp(job, nti_cfg.job) == 0)
    return;
  memcpy(nti_cfg.job, job, sizeof job);
  job_derived = 1;
  /* Renames the ring file (link + unlink: never over another file) and
   * rewrites hdr->job_id.  Every candidate id has the same length, so a
   * dump taken by a signal handler during the copy sees at worst a mix of
   * two of our own ids, never garbage. */
  int rc = ntr_ring_set_job(&nti_proc.ring, nti_cfg.job);
  if (rc < 0)
    nti_say("cannot record job id %s in the ring: %s", nti_cfg.job, strerror(-rc));
}

void nti_job_comm_ready(uint64_t comm_id) {
  pthread_mutex_lock(&nti_life_lock);
  nti_job_from_comm(comm_id);
  pthread_mutex_unlock(&nti_life_lock);
}
