/* dump.h -- write a dump (format.h: preamble + one zstd frame of sections)
 * from a live ring, atomically (temp file + rename) into NCCLTRACE_DIR.
 *
 * Thread-safety: one dump at a time per process (an atomic flag; a second
 * concurrent request returns -EBUSY instead of waiting).
 * Signal-safety: ntr_dump_write is async-signal-safe once ntr_dump_init has
 * run: it uses only preallocated memory (a static zstd context), openat/
 * write/fsync/renameat2/close on the directory fd (fstat'ed first: it is
 * used only while it is still the directory opened at init), and no locks.
 */
#ifndef NTR_DUMP_H
#define NTR_DUMP_H
#include "recorder/ring.h"

/* Preallocate the compression context and buffers for a ring of this size
 * (anonymous mmap: nothing is malloc'd, so ntr_dump_write may run in a
 * signal handler).  Called again with the same slot count it only updates
 * dir and mode.  Not thread-safe: call before any dump can be requested.
 * The dump directory is created (0700) and opened here, once, under the
 * rules of recorder/safedir.h (a symlink owned by someone else is not
 * followed; the directory must be ours and not writable by group or
 * others).  A refused one is replaced by a private directory
 * (<dir>-XXXXXX, else $TMPDIR/nccltrace-dumps-<uid>-XXXXXX) and
 * ntr_dump_note() says so; any other failure is reported by the dumps.
 * @return 0 or -errno (-ENAMETOOLONG for a dir over 900 bytes). */
int ntr_dump_init(const struct ntr_ring *ring, const char *dir, unsigned mode);

/* Bytes of anonymous memory ntr_dump_init maps for a ring of slots records
 * (compression context, payload, output, extra records): part of the
 * tracer's address space (docs/reliability.md, round two, item 8). */
size_t ntr_dump_bytes(uint32_t slots);

/* "" or the one line (without "nccltrace: ") saying which dump directory
 * was refused at init, why, and where dumps go instead. */
const char *ntr_dump_note(void);

/* The dump directory in use: NCCLTRACE_DIR, or its private replacement. */
const char *ntr_dump_dir(void);
/* Dump files (nccltrace-*.zst) in the dump directory, counted up to
 * stop_at.  Async-signal-safe (openat, getdents64, close); lock-free: a
 * directory fd replaced meanwhile by the dumping thread makes it fail.
 * @return the count, or -errno. */
long ntr_dump_dir_count(long stop_at);

/* Append one line (the tracer's own, which the stderr of the process
 * could not take: recorder/diag.h) to <dir>/nccltrace-<job>-<host>-<pid>.log,
 * created with the dumps' mode.  The file is opened for each line and
 * closed again (no descriptor is kept); O_NOFOLLOW and O_NONBLOCK, and it
 * is written only when it is a regular file of ours with one link (a
 * planted symlink, FIFO or hard link is never written through).  SIGXFSZ
 * is held off as for dumps.  Async-signal-safe once ntr_dump_init ran; it
 * uses the directory fd only while it is still the one opened (no reopen:
 * that is a dump's, under its busy flag).  @return 0 or -errno. */
int ntr_dump_log(const struct ntr_ring_header *hdr, const char *line, size_t len);

/* In a fork child: forget a dump another parent thread had in progress
 * (its busy flag was copied by fork; no dump runs in the child yet). */
void ntr_dump_reset_child(void);

/* Snapshot the ring and write <dir>/nccltrace-<job>-r<rank>-<host>-<pid>-<n>-<trigger>.zst.
 * <job> is "nojob" while unknown, <rank> the launcher rank (else the first
 * communicator's rank, else "na"), <n> a per-process dump counter, <trigger>
 * ntr_name_signal_tag(trig->signo) for signal triggers (when named), else
 * ntr_name_trigger_tag(trig->kind) (recorder/names.h).  The file is written as .<name>.tmp,
 * fsync'd and renamed (never replacing an existing dump: n is bumped).
 * trig->tsc (when 0) and trig->lost are filled in the written copy.
 * SIGXFSZ is blocked around the write (an RLIMIT_FSIZE overrun then fails
 * with -EFBIG instead of killing the process) and a SIGXFSZ it raised is
 * consumed before the mask is restored.  On any failure the temp file is
 * removed.  path (optional) receives the final path.
 * @return 0 or -errno (-EBUSY: another dump is running, -EINVAL: not
 *         initialized). */
int ntr_dump_write(const struct ntr_ring *ring, const struct ntr_trigger *trig,
                   char *path, size_t path_len);

/* The Python threads of the process for a dump: fills out[0..max) and
 * returns how many.  Called by the dumping thread, possibly in a signal
 * handler: it must be async-signal-safe (interpose/pyframes.c is). */
typedef uint32_t (*ntr_dump_pythreads_fn)(struct ntr_pythread *out, uint32_t max);
void ntr_dump_set_pythreads(ntr_dump_pythreads_fn fn);

/* Same, from an already-read image (nccltrace collect): hdr/comms/stacks/records
 * as a reader produced them.  Not signal-safe (allocates). */
int ntr_dump_write_image(const char *dir, const struct ntr_ring_header *hdr,
                         const struct ntr_comm_state *comms, uint32_t ncomms,
                         const struct ntr_stack *stacks, uint32_t nstacks,
                         const struct ntr_record *recs, uint64_t nrecs,
                         const char *strs, uint32_t str_len,
                         const struct ntr_trigger *trig, char *path, size_t path_len);
#endif
