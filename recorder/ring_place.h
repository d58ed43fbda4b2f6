/* ring_place.h -- where a ring lives (internal to recorder/): the file's
 * directory, its size and the fallbacks (see ring_place.c).
 *
 * Thread-safety: called once per ring creation (not thread-safe, like
 * ntr_ring_open).  Signal-safety: async-signal-safe (syscalls and ntr_sb
 * only), as ntr_ring_reopen_child needs.
 */
#ifndef NTR_RING_PLACE_H
#define NTR_RING_PLACE_H
#include "recorder/ring.h"

/* Fill h's offsets and file_size for a ring of slots records. */
void ntr_ring_layout(struct ntr_ring_header *h, uint32_t slots);

/* [<dir>/]nccltrace-<job>-<host>-<pid>[~n].ring (dir NULL: the name alone). */
int ntr_ring_name(char *out, size_t cap, const char *dir, const char *job, const char *host,
                  int pid, int attempt);

/* Create, reserve and map the ring: sets ring->path, dir, anon, own_dir,
 * note; *slots comes in as wanted and goes out as mapped; *map receives the
 * zeroed mapping of ntr_ring_layout(*slots)'s file_size bytes.
 * @return 0 or -errno. */
int ntr_ring_place(struct ntr_ring *ring, const struct ntr_ring_config *cfg, uint32_t *slots,
                   void **map);
#endif
