/* keys.c -- the process's exchange keys (contract: keys.h). */
#include "interpose/exchange/keys.h"

#include <string.h>
#include <sys/random.h>

struct ntx_keyring ntx_keys = NTX_KEYRING_INIT;

int ntx_keyring_add(struct ntx_keyring *kr, const struct ntx_key *k) {
  uint64_t id = ntx_key_id(k);
  int rc = 0;
  pthread_mutex_lock(&kr->mu);
  uint32_t n = kr->n;
  int known = kr->fixed;
  for (uint32_t i = 0; i < n && !known; i++)
    known = kr->e[i].id == id;
  if (!known && n == NTX_KEYS_MAX) {
    kr->dropped++;
    rc = -1;
  } else if (!known) {
    kr->e[n].id = id;
    kr->e[n].key = *k;
    /* Release: a reader that sees the count sees the entry. */
    __atomic_store_n(&kr->n, n + 1, __ATOMIC_RELEASE);
    rc = 1;
  }
  pthread_mutex_unlock(&kr->mu);
  return rc;
}

void ntx_keyring_fix(struct ntx_keyring *kr, const struct ntx_key *k) {
  pthread_mutex_lock(&kr->mu);
  kr->e[0].id = ntx_key_id(k);
  kr->e[0].key = *k;
  kr->fixed = 1;
  __atomic_store_n(&kr->n, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&kr->mu);
}

uint32_t ntx_keyring_count(const struct ntx_keyring *kr) {
  return __atomic_load_n(&kr->n, __ATOMIC_ACQUIRE); /* pairs with the writers' release */
}

uint64_t ntx_keyring_get(const struct ntx_keyring *kr, uint32_t i, struct ntx_key *k) {
  *k = kr->e[i].key;
  return kr->e[i].id;
}

int ntx_keys_lookup(const struct ntx_keyring *kr, const struct ntx_key *single, uint64_t id,
                    struct ntx_key *out) {
  if (!kr) {
    if (!single || ntx_key_id(single) != id)
      return 0;
    *out = *single;
    return 1;
  }
  uint32_t n = ntx_keyring_count(kr);
  for (uint32_t i = 0; i < n; i++)
    if (kr->e[i].id == id) {
      *out = kr->e[i].key;
      return 1;
    }
  return 0;
}

void ntx_keys_learn_uid(const void *uid, size_t len) {
  if (!uid || !len)
    return;
  struct ntx_key k;
  ntx_key_from_uid(uid, len, &k);
  ntx_keyring_add(&ntx_keys, &k);
}

void ntx_keys_learn_local(void) {
  struct ntx_key k;
  /* Without an entropy source no key: a guessable one would let anyone in.
   * The comm's ranks are all in this process, so nothing else needs it. */
  if (getrandom(&k, sizeof k, 0) == (ssize_t)sizeof k)
    ntx_keyring_add(&ntx_keys, &k);
}
