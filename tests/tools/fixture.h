/* fixture.h -- synthetic ring files and dumps for the tools' tests, built
 * from recorder/format.h alone (an implementation independent of the
 * recorder's, so a disagreement between the two shows up as a failing test).
 *
 * Thread-safety: not thread-safe (tests are single-threaded).  Not
 * signal-safe.
 *
 * The canonical content (tests check it): host as given (default: this
 * host), pid as given, launcher rank as given (0) of 2, job "job-test", exe "fixture",
 * env NCCL_PROTO=Simple and NCCL_DEBUG=WARN, clock tsc_hz 1e9 with
 * real_base_ns 1700000000000000000 (2023-11-14T22:13:20Z) at tsc_base 1000,
 * one communicator 9f2c0123456789ab (that rank of 2), and these records, 1 ms
 * apart starting at tsc 1000 + 1 ms:
 *   pos 0 CommInitRank enter, 1 CommInitRank exit ncclSuccess,
 *   2 AllReduce(count=64, float32, sum) seq 1 completed,
 *   3 Broadcast(count=1, float32, root=0) seq 2 completed,
 *   4 Send(count=8, float32, peer=1) seq 1 pending,
 *   5 Mark(step=1234), 6 AllReduce(count=64, float32, sum) seq 3 pending,
 * then, with extra > 0, that many more AllReduce records (seq 4, 5, ...).
 * With error, record 6 returned ncclRemoteError.
 */
#ifndef NTT_FIXTURE_H
#define NTT_FIXTURE_H
#include <stddef.h>
#include <stdint.h>
#include "recorder/format.h"

#define FX_COMM_ID 0x9f2c0123456789abull
#define FX_REAL_BASE 1700000000000000000ull

struct fx_opts {
  int pid;            /* 0: getpid() */
  const char *host;   /* NULL: this host */
  uint32_t slots;     /* main ring slots (power of two), 0: 64 */
  uint32_t extra;     /* extra AllReduce records after the canonical 7 */
  int bt;             /* give the header a 2-frame backtrace of SIGSEGV */
  uint32_t trigger;   /* dumps: trigger kind (0: NTR_TRIG_EXIT) */
  uint32_t trigger_ms; /* dumps: trigger time, ms after tsc_base (0: 20) */
  int rank;           /* launcher rank and rank in the communicator (0) */
  int error;          /* record 6 (AllReduce seq 3) returned ncclRemoteError */
  const char *exe;    /* NULL: "fixture" (any bytes: hostile-input tests) */
  const char *job;    /* NULL: "job-test" */
};

/* The ring file as bytes (malloc'd).  @return its length, 0 on failure. */
size_t fx_build_ring(const struct fx_opts *o, unsigned char **out);
/* A dump holding the same content.  @return its length, 0 on failure. */
size_t fx_build_dump(const struct fx_opts *o, unsigned char **out);
/* A decompression bomb: the dump of fx_build_dump whose RECORDS section
 * also carries nzero all-zero records (dropped by any reader, but decompressed
 * first), compressed as a stream straight to path, checksum valid: a few
 * KiB on disk per GiB claimed.  @return 0 or -1. */
int fx_write_bomb(const struct fx_opts *o, uint64_t nzero, const char *path);
/* Write bytes to path.  @return 0 or -1. */
int fx_write(const char *path, const unsigned char *buf, size_t len);
#endif
