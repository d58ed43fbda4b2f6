/* auth.c -- SipHash-2-4 and the job key (contract: auth.h).
 *
 * SipHash is a keyed PRF designed for short messages: with a secret 128-bit
 * key an attacker who sees any number of tags cannot forge the 64-bit tag of
 * a new message short of ~2^64 online guesses, which the coordinator answers
 * by closing the connection after the first bad tag. */
#include "interpose/exchange/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline void sip_round(struct ntx_sip *s) {
  s->v0 += s->v1; s->v1 = rotl(s->v1, 13); s->v1 ^= s->v0; s->v0 = rotl(s->v0, 32);
  s->v2 += s->v3; s->v3 = rotl(s->v3, 16); s->v3 ^= s->v2;
  s->v0 += s->v3; s->v3 = rotl(s->v3, 21); s->v3 ^= s->v0;
  s->v2 += s->v1; s->v1 = rotl(s->v1, 17); s->v1 ^= s->v2; s->v2 = rotl(s->v2, 32);
}

static inline void sip_block(struct ntx_sip *s, uint64_t m) {
  s->v3 ^= m;
  sip_round(s);
  sip_round(s);
  s->v0 ^= m;
}

void ntx_sip_init(struct ntx_sip *s, const struct ntx_key *key) {
  /* The constants spell "somepseudorandomlygeneratedbytes" (paper, §2.4). */
  s->v0 = key->k0 ^ 0x736f6d6570736575ull;
  s->v1 = key->k1 ^ 0x646f72616e646f6dull;
  s->v2 = key->k0 ^ 0x6c7967656e657261ull;
  s->v3 = key->k1 ^ 0x7465646279746573ull;
  s->tail = 0;
  s->ntail = 0;
  s->total = 0;
}

void ntx_sip_update(struct ntx_sip *s, const void *data, size_t len) {
  const uint8_t *p = data;
  s->total += len;
  while (len > 0 && s->ntail > 0) { /* finish a pending partial block first */
    s->tail |= (uint64_t)*p++ << (8 * s->ntail);
    len--;
    if (++s->ntail == 8) {
      sip_block(s, s->tail);
      s->tail = 0;
      s->ntail = 0;
    }
  }
  for (; len >= 8; p += 8, len -= 8) {
    uint64_t m = 0;
    for (int i = 0; i < 8; i++) /* little-endian regardless of the host */
      m |= (uint64_t)p[i] << (8 * i);
    sip_block(s, m);
  }
  for (; len > 0; len--)
    s->tail |= (uint64_t)*p++ << (8 * s->ntail++);
}

uint64_t ntx_sip_final(struct ntx_sip *s) {
  uint64_t b = (s->total << 56) | s->tail;
  sip_block(s, b);
  s->v2 ^= 0xff;
  for (int i = 0; i < 4; i++)
    sip_round(s);
  return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t ntx_siphash(const struct ntx_key *key, const void *data, size_t len) {
  struct ntx_sip s;
  ntx_sip_init(&s, key);
  ntx_sip_update(&s, data, len);
  return ntx_sip_final(&s);
}

int ntx_ct_equal(const void *a, const void *b, size_t n) {
  const volatile uint8_t *x = a, *y = b; /* volatile: no early-exit rewrite */
  uint8_t d = 0;
  for (size_t i = 0; i < n; i++)
    d |= x[i] ^ y[i];
  return d == 0;
}

/* Fixed, public domain-separation keys for turning secret text into a key:
 * the secrecy is all in the input text. */
static const struct ntx_key kdf_lo = {0x6e6363c174726163ull, 0x652d6b65792d6c6full};
static const struct ntx_key kdf_hi = {0x6e6363c174726163ull, 0x652d6b65792d6869ull};

uint64_t ntx_key_id(const struct ntx_key *key) { return ntx_siphash(key, "nccltrace key id v3", 19); }

/* Domain separation for unique-id keys: a key of a unique id is never the
 * key of a secret text with the same bytes. */
static const struct ntx_key uid_lo = {0x2d7669752d78746eull, 0x6f6c2d33762d7965ull};
static const struct ntx_key uid_hi = {0x2d7669752d78746eull, 0x69682d33762d7965ull};

void ntx_key_from_uid(const void *uid, size_t len, struct ntx_key *key) {
  key->k0 = ntx_siphash(&uid_lo, uid, len);
  key->k1 = ntx_siphash(&uid_hi, uid, len);
}

/* The raw environment text, not a parsed setting (NCCLTRACE_JOB is one of
 * the names): every process of a job, the interposer's or a program
 * without its config, must derive the same key from the same text. */
static void absorb_var(struct ntx_sip *lo, struct ntx_sip *hi, const char *name) {
  const char *v = getenv(name);
  /* name and a separator are absorbed too, so "A=xy,B=" != "A=x,B=y" */
  size_t nl = strlen(name) + 1;
  ntx_sip_update(lo, name, nl);
  ntx_sip_update(hi, name, nl);
  if (v) {
    size_t vl = strlen(v) + 1;
    ntx_sip_update(lo, v, vl);
    ntx_sip_update(hi, v, vl);
  } else {
    ntx_sip_update(lo, "", 1);
    ntx_sip_update(hi, "", 1);
  }
}

int ntx_key_derive(const char *secret, struct ntx_key *key, char *what, size_t what_len) {
  struct ntx_sip lo, hi;
  ntx_sip_init(&lo, &kdf_lo);
  ntx_sip_init(&hi, &kdf_hi);
  if (secret && secret[0]) {
    size_t n = strlen(secret);
    ntx_sip_update(&lo, secret, n);
    ntx_sip_update(&hi, secret, n);
    key->k0 = ntx_sip_final(&lo);
    key->k1 = ntx_sip_final(&hi);
    if (what && what_len)
      snprintf(what, what_len, "NCCLTRACE_SECRET");
    return NTX_KEY_SECRET;
  }
  /* Values every rank of one job has in its environment, most of which
   * anyone who can see the job list can guess: this names things (the
   * aggregator's socket), it proves nothing. */
  static const char *const vars[] = {
      "NCCLTRACE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid",
      "PMIX_NAMESPACE", "LSB_JOBID", "PBS_JOBID", "MASTER_ADDR", "MASTER_PORT",
  };
  char uid[32];
  int n = snprintf(uid, sizeof uid, "uid=%u", (unsigned)getuid());
  ntx_sip_update(&lo, uid, (size_t)n + 1);
  ntx_sip_update(&hi, uid, (size_t)n + 1);
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    absorb_var(&lo, &hi, vars[i]);
  key->k0 = ntx_sip_final(&lo);
  key->k1 = ntx_sip_final(&hi);
  if (what && what_len)
    snprintf(what, what_len, "derived from uid, launcher job ids and MASTER_ADDR/PORT");
  return NTX_KEY_DERIVED;
}
