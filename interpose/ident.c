/* ident.c -- communicator identity (design §4, docs/identity.md).
 *
 * Thread-safety: the hash functions are pure.  nti_job_from_comm runs in a
 * lifecycle wrapper under nti_life_lock.
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

void nti_job_from_comm(uint64_t comm_id) {
  if (ntr_cfg.job[0] || !comm_id || !nti_active())
    return;
  /* "c" + the first communicator id: every rank of a job that starts with
   * the same communicator derives the same job id without talking. */
  snprintf(ntr_cfg.job, sizeof ntr_cfg.job, "c%016llx", (unsigned long long)comm_id);
  int rc = ntr_ring_set_job(&nti_g.ring, ntr_cfg.job);
  if (rc < 0)
    nti_say("cannot record job id %s in the ring: %s", ntr_cfg.job, strerror(-rc));
}
