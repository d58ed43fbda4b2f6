/* synth.h -- synthetic evidence written by the REAL recorder code: a ring
 * opened with ntr_ring_open, records reserved and committed with
 * ntr_ring_reserve/ntr_ring_commit, dumps written with ntr_dump_write.  One
 * process plays every rank in turn: the ring is cleared between ranks and
 * its header given that rank's identity (pid, launcher rank).
 *
 * The records are a plausible training loop on one world communicator:
 * CommInitRank (enter/exit), then AllReduce / AllGather / Broadcast /
 * ReduceScatter / AllReduce ... with completions, 200 us apart.  One rank
 * may disagree at one seq (Broadcast where the others AllReduce).
 *
 * Thread-safety: one synth at a time per process (the dump writer is
 * process-global).  Signal-safety: none.
 */
#ifndef SYNTH_H
#define SYNTH_H
#include <stdint.h>
#include "recorder/ring.h"

struct synth {
  struct ntr_ring ring;
  struct ntr_ring_cursor cur; /* the writer's block, as an application thread's */
  char ringdir[512];
  uint32_t slots;
};

/* Open a ring of `slots` records (power of two) in a fresh directory under
 * tmpdir and prepare the dump writer for dumpdir.  @return 0 or -errno. */
int synth_open(struct synth *s, const char *tmpdir, const char *dumpdir, uint32_t slots);

/* Clear the ring and fill it as rank `rank` of `nranks`: nrecs records
 * (<= slots; all of them stay in the ring).  mismatch_seq 0: none. */
void synth_fill(struct synth *s, int rank, int nranks, uint64_t nrecs, uint64_t mismatch_seq,
                int mismatch_rank);

/* Dump the ring (trigger: exit 0).  @return 0 or -errno. */
int synth_dump(struct synth *s, char *path, size_t path_len);

/* Write nranks dumps into dumpdir.  @return 0 or -errno. */
int synth_write_job(const char *tmpdir, const char *dumpdir, int nranks, uint64_t nrecs,
                    uint64_t mismatch_seq, int mismatch_rank);

void synth_close(struct synth *s);
#endif
