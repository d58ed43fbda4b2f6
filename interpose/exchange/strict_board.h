/* strict_board.h -- the shared-memory board of one communicator for strict
 * mode on one host: its layout, and finding, creating, replacing and
 * joining its file (docs/wire-protocol.md, "Strict mode on one host").
 * Internal to strict_shm.c and strict_board.c.
 *
 * Thread-safety: ntx_board_attach is called with strict_shm.c's mutex held
 * (one attach at a time per process); between processes the file's flock
 * orders attaches.  ntx_board_owner_dead: any thread.  Signal-safety: none.
 * Everything read from a board file is checked before use: a file there that
 * is not a board is replaced, never trusted.
 */
#ifndef NTX_STRICT_BOARD_H
#define NTX_STRICT_BOARD_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "interpose/exchange/wire.h"

#define NTX_BOARD_MAGIC 0x316d68732d78746eull /* "ntx-shm1" */
#define NTX_BOARD_VERSION 2u /* bumped at any layout change: fingerprints with their arrival time (56 bytes) */
#define NTX_BOARD_MAX_RANKS 4096     /* a larger comm uses the coordinator */

enum { NTX_SL_FREE = 0, NTX_SL_ACTIVE = 1, NTX_SL_LEFT = 2 };      /* slot state */

struct ntx_board_hdr {
  uint64_t magic;
  uint32_t version, nranks;
  uint64_t comm_id, job_hash;
  uint32_t hdr_size, slot_size;
  uint32_t gen;     /* futex word: bumped when a seq is complete or a rank leaves */
  uint32_t waiters; /* ranks in FUTEX_WAIT: the completer skips the wake without any */
  uint8_t pad[80];
};
/* One publication: seq 0 while being written (a seqlock of one writer). */
struct ntx_board_ent {
  uint64_t seq;
  uint64_t w[7]; /* struct ntx_fp, copied word by word */
};
struct ntx_board_slot {
  int32_t owner;  /* pid */
  uint32_t state; /* SL_* */
  uint64_t pidns; /* inode of the owner's pid namespace: liveness by kill(2) only in ours */
  uint64_t seq;   /* last seq published */
  uint64_t pad0;
  struct ntx_board_ent e[2];
  uint8_t pad[192 - 32 - 2 * sizeof(struct ntx_board_ent)];
};
_Static_assert(sizeof(struct ntx_board_hdr) == 128, "board header");
_Static_assert(sizeof(struct ntx_board_slot) == 192, "board slot");
_Static_assert(sizeof(struct ntx_fp) == 56, "fingerprint words");

struct ntx_board {
  uint64_t comm_id;
  int32_t rank, nranks;
  int state; /* strict_shm.c's B_*, atomic once the entry is published */
  struct ntx_board_hdr *h;
  struct ntx_board_slot *s;
  dev_t dev;
  ino_t ino;
  uint64_t npub; /* our publications: entry npub & 1 is the next */
  int reported, said_gone, said_skip, said_cut;
  const char *dir;
  char path[1200];
};

size_t ntx_board_size(uint32_t nranks);
/* Open, create or replace the board at b->path (b->dir its directory),
 * and claim slot b->rank.  @return 0 with b->h, b->s, b->dev, b->ino set,
 * or -1 with *why saying why (the caller uses the coordinator). */
int ntx_board_attach(struct ntx_board *b, uint64_t job_hash, uint64_t pidns, const char **why);
/* 1 when the owner of slot s is known dead (gone, or a zombie); only a pid
 * of our pid namespace (pidns: its inode) is looked at. */
int ntx_board_owner_dead(const struct ntx_board_slot *s, uint64_t pidns);
#endif
