/* keys.h -- the keys this process may authenticate exchange connections
 * with (protocol v3, docs/wire-protocol.md "Keys"): one per communicator
 * unique id the process has seen (ncclGetUniqueId's output on a root, the id
 * handed to every ncclCommInitRank*), a random one per ncclCommInitAll
 * (every rank of such a comm is in this process), or -- when
 * NCCLTRACE_SECRET is set -- that secret's key and nothing else.  A client
 * names one by its public id in HELLO; a coordinator or node aggregator
 * accepts the names its own process holds.
 *
 * The table is small and fixed (NTX_KEYS_MAX): the first keys of a job are
 * the ones every rank shares (the world comm); later ones are dropped and
 * counted.
 *
 * Thread-safety: writers (application threads in init calls) serialize on
 * a mutex; readers (the client, coordinator and aggregator threads) take
 * no lock: an entry is written before the count that publishes it
 * (release), and readers load the count with acquire.  Entries never
 * change once published, except that ntx_keyring_fix (at start, before
 * any reader) replaces the table.  Signal-safety: none.
 */
#ifndef NTX_KEYS_H
#define NTX_KEYS_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/auth.h"

#define NTX_KEYS_MAX 32u

struct ntx_keyring {
  pthread_mutex_t mu;  /* writers only */
  uint32_t n;          /* published entries (atomic: release by writers, acquire by readers) */
  int fixed;           /* a secret is the only key: learning is off */
  uint64_t dropped;    /* keys not kept: the table was full */
  struct {
    uint64_t id;
    struct ntx_key key;
  } e[NTX_KEYS_MAX];
};
#define NTX_KEYRING_INIT {.mu = PTHREAD_MUTEX_INITIALIZER}

/* This process's keys (the interposer's). */
extern struct ntx_keyring ntx_keys;

/* Add a key.  @return 1 added, 0 known already or learning is off, -1 full. */
int ntx_keyring_add(struct ntx_keyring *kr, const struct ntx_key *k);
/* Make k the only key (NCCLTRACE_SECRET).  Before any reader runs. */
void ntx_keyring_fix(struct ntx_keyring *kr, const struct ntx_key *k);
uint32_t ntx_keyring_count(const struct ntx_keyring *kr);
/* Entry i (< count).  @return its id. */
uint64_t ntx_keyring_get(const struct ntx_keyring *kr, uint32_t i, struct ntx_key *k);

/* The key named id: in kr when kr is not NULL, else `single` when its id
 * is id.  @return 1 found (*out set), 0 not. */
int ntx_keys_lookup(const struct ntx_keyring *kr, const struct ntx_key *single, uint64_t id,
                    struct ntx_key *out);

/* Interposer hooks (interpose/exchange.h): the bytes of a unique id, or a
 * fresh random key for an InitAll comm. */
void ntx_keys_learn_uid(const void *uid, size_t len);
void ntx_keys_learn_local(void);
#endif
