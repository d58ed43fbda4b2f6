/* auth.h -- message authentication for the exchange wire protocol:
 * SipHash-2-4 (Aumasson & Bernstein, 2012), implemented here from the paper,
 * a per-job key derived from NCCLTRACE_SECRET or from values every rank of the
 * job shares, and a constant-time tag comparison.
 *
 * Thread-safety: no shared state; every function works on caller memory.
 * Signal-safety: ntx_sip_* and ntx_ct_equal are async-signal-safe;
 * ntx_key_derive reads the environment and is not.
 */
#ifndef NTX_AUTH_H
#define NTX_AUTH_H
#include <stddef.h>
#include <stdint.h>

/* A 128-bit SipHash key, as the two little-endian halves of the paper. */
struct ntx_key {
  uint64_t k0, k1;
};

/* Incremental SipHash-2-4: init, any number of updates, final. */
struct ntx_sip {
  uint64_t v0, v1, v2, v3;
  uint64_t tail;   /* up to 7 pending bytes, little-endian */
  size_t ntail;
  uint64_t total;  /* bytes absorbed (only the low 8 bits reach the tag) */
};
void ntx_sip_init(struct ntx_sip *s, const struct ntx_key *key);
void ntx_sip_update(struct ntx_sip *s, const void *data, size_t len);
uint64_t ntx_sip_final(struct ntx_sip *s);
/* One-shot convenience. */
uint64_t ntx_siphash(const struct ntx_key *key, const void *data, size_t len);

/* 1 when the n bytes are equal.  Runs in time independent of where they
 * differ, so a forger learns nothing from response timing. */
int ntx_ct_equal(const void *a, const void *b, size_t n);

/* The public name of a key (sent in HELLO): SipHash under the key of a
 * fixed text.  Reveals nothing of the key; two keys differ in name but for
 * a 2^-64 chance. */
uint64_t ntx_key_id(const struct ntx_key *key);

/* The key of a communicator: a PRF of its ncclUniqueId bytes under fixed
 * domain-separation keys (docs/wire-protocol.md, "Keys").  Anyone holding
 * the id holds the key, and nobody else. */
void ntx_key_from_uid(const void *uid, size_t len, struct ntx_key *key);

/* Where the key came from (for the one line said at startup and the docs). */
enum ntx_key_source { NTX_KEY_SECRET = 1, NTX_KEY_DERIVED = 2 };

/* Derive the job key.  secret: NCCLTRACE_SECRET, or "" to derive from the
 * environment: the real uid, NCCLTRACE_JOB, the launcher's run/job ids and
 * MASTER_ADDR/MASTER_PORT.  The derived key only scopes names (the node
 * aggregator's socket name): it authenticates nothing, since anyone can
 * compute it (docs/wire-protocol.md, "Keys").  Writes a short
 * description of what was used into what (may be NULL).
 * @return the source. */
int ntx_key_derive(const char *secret, struct ntx_key *key, char *what, size_t what_len);
#endif
