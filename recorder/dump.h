/* dump.h -- write a dump (format.h: preamble + one zstd frame of sections)
 * from a live ring, atomically (temp file + rename) into NCCLTRACE_DIR.
 *
 * Thread-safety: one dump at a time per process (an atomic flag; a second
 * concurrent request returns -EBUSY instead of waiting).
 * Signal-safety: ntr_dump_write is async-signal-safe once ntr_dump_init has
 * run: it uses only preallocated memory (a static zstd context), open/
 * write/fsync/rename/close, and no locks.
 */
#ifndef NTR_DUMP_H
#define NTR_DUMP_H
#include "recorder/ring.h"

/* Preallocate the compression context and buffers for a ring of this size. */
int ntr_dump_init(const struct ntr_ring *ring, const char *dir, unsigned mode);

/* Snapshot the ring and write <dir>/nccltrace-<job>-r<rank>-<host>-<pid>-<n>-<trigger>.zst.
 * path (optional) receives the file name.  @return 0 or -errno. */
int ntr_dump_write(const struct ntr_ring *ring, const struct ntr_trigger *trig,
                   char *path, size_t path_len);

/* Same, from an already-read image (nccltrace collect): hdr/comms/stacks/records
 * as a reader produced them.  Not signal-safe (allocates). */
int ntr_dump_write_image(const char *dir, const struct ntr_ring_header *hdr,
                         const struct ntr_comm_state *comms, uint32_t ncomms,
                         const struct ntr_stack *stacks, uint32_t nstacks,
                         const struct ntr_record *recs, uint64_t nrecs,
                         const struct ntr_trigger *trig, char *path, size_t path_len);
#endif
