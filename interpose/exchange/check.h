/* check.h -- the coordinator's comparison logic, independent of sockets:
 * clients, communicators, fingerprint windows, send/recv matching, strict
 * waiters, and the time-driven reports (init wait, skew, mismatch grace).
 * The server (coord.c) feeds it decoded messages and delivers what it emits
 * through ntx_check_ops; the tests drive it directly.
 *
 * Thread-safety: one ntx_check belongs to one thread (the coordinator's);
 * no function may be called concurrently on the same instance.
 * Signal-safety: none (allocates).
 *
 * Cost: O(1) per collective fingerprint (a per-comm window of pending seqs,
 * each with a count of arrived ranks and the first fingerprint; the ranks of
 * each variant are materialized only when a seq first disagrees) and O(1)
 * expected per send/recv (hash of pending halves).  Memory is bounded by
 * ntx_check_limits; what does not fit is counted in ntx_check_stats.
 */
#ifndef NTX_CHECK_H
#define NTX_CHECK_H
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/wire.h"

struct ntx_check_limits {
  uint32_t max_clients;     /* connected clients (ids are 0 .. max_clients-1) */
  uint32_t max_comms;       /* communicators tracked */
  uint32_t max_nranks;      /* largest communicator accepted */
  uint32_t window;          /* pending collective seqs per comm (power of two) */
  uint32_t max_p2p;         /* pending send/recv halves, all comms together */
  uint32_t max_p2p_per_comm;
  uint32_t max_waits;       /* strict entries waiting, per client */
  double grace_s;           /* a disagreeing seq with ranks missing is reported after this */
  double skew_s;            /* NCCLTRACE_SKEW_S */
  double init_wait_s;       /* init not complete on all ranks after this: report */
  /* Lateness (lateness.c), host and device arrivals each: a rank last
   * at >= straggler_frac of those of the last straggler_window complete
   * collectives where someone was straggler_ms / 2 or more after the
   * others, median straggler_ms or more after them, is reported at most
   * every straggler_every_s per comm; one host arrival stall_s or more
   * late is reported at once. */
  double straggler_ms;      /* NCCLTRACE_STRAGGLER_MS (10); 0: no straggler reports */
  uint32_t straggler_window; /* NCCLTRACE_STRAGGLER_WINDOW (200) */
  double straggler_frac;    /* 0.75 */
  double straggler_every_s; /* 60 */
  double stall_s;           /* 1 */
  double lateness_every_s;  /* each rank is told its median lateness this often (10) */
};
void ntx_check_default_limits(struct ntx_check_limits *lim);

/* What the checker emits; client ids are the ones given to client_add. */
struct ntx_check_ops {
  void (*verdict)(void *ctx, uint32_t client, uint32_t kind, uint64_t comm_id, uint64_t seq,
                  int32_t peer, int64_t aux, const char *field, const char *text);
  void (*reply)(void *ctx, uint32_t client, uint32_t req_id, int32_t status, const char *text);
};

/* Strict reply status. */
enum ntx_reply_status { NTX_REPLY_OK = 0, NTX_REPLY_MISMATCH = 1, NTX_REPLY_UNCHECKED = 2 };

struct ntx_check_stats {
  uint64_t fps, dup, stale, evicted, unregistered, p2p_evicted, waits_refused;
  uint64_t mismatches, p2p_mismatches, lost, comms_refused;
  uint64_t timed, stragglers, stalls; /* seqs with every arrival timed; reports */
};

struct ntx_check;
struct ntx_check *ntx_check_new(const struct ntx_check_limits *lim, const struct ntx_check_ops *ops,
                                void *ctx);
void ntx_check_free(struct ntx_check *c);

/* A client authenticated.  @return 0, or -1 when id is out of range or in use. */
int ntx_check_client_add(struct ntx_check *c, uint32_t id, const char *host, int32_t pid,
                         int32_t launcher_rank);
/* The client is a node aggregator (HELLO flag NTX_HELLO_AGG): its ranks
 * belong to several processes, it may send GONE, and losing it is losing
 * the process that hosted it (its other ranks come back through another). */
void ntx_check_client_set_agg(struct ntx_check *c, uint32_t id);
/* A client is gone: clean (BYE) or lost (every other client is told). */
void ntx_check_client_gone(struct ntx_check *c, uint32_t id, int clean, double now);
/* GONE from aggregator id: the process (host, pid, launcher rank) that held
 * the n (comm, rank) pairs left, clean or lost; lost is told to every
 * other client.  Pairs the aggregator does not hold are ignored (counted
 * as unregistered).  @return 0, or -1 when id is not an aggregator. */
int ntx_check_gone(struct ntx_check *c, uint32_t id, const char *host, int32_t pid, int32_t launcher_rank,
                   int clean, const uint8_t *pairs, uint32_t n, double now);
/* REGISTER: env is "NAME=VALUE\0..." (NCCL_* only). */
void ntx_check_register(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank,
                        int32_t nranks, int32_t nccl_version, const char *env, uint32_t env_len,
                        double now);
/* The process holding a rank the client registered (REGISTER's pid and
 * launcher rank, v5): an aggregator's members are its host's processes. */
void ntx_check_member_proc(struct ntx_check *c, uint32_t id, uint64_t comm_id, int32_t rank, int32_t pid,
                           int32_t launcher_rank);
void ntx_check_fp(struct ntx_check *c, uint32_t id, const struct ntx_fp *fp, double now);
/* STRICT: like n fingerprints, and a reply when all of them are decided. */
void ntx_check_strict(struct ntx_check *c, uint32_t id, uint32_t req_id, const struct ntx_fp *fps,
                      uint32_t n, double now);
/* The client's clock offset (its realtime - ours, ns) and its uncertainty,
 * from `samples` round trips so far (clocksync.h): fingerprint times are
 * corrected by it; the uncertainty is half its best recent round trip,
 * which also names a host whose link is slow (lateness.c). */
void ntx_check_client_clock(struct ntx_check *c, uint32_t id, int64_t offset_ns, uint64_t uncert_ns,
                            uint32_t samples);
/* Time-driven reports; call every ~100 ms. */
void ntx_check_tick(struct ntx_check *c, double now);
const struct ntx_check_stats *ntx_check_get_stats(const struct ntx_check *c);

/* Formatting shared with the client: "AllReduce(count=64, float32, sum)". */
void ntx_fp_describe(const struct ntx_fp *fp, char *buf, size_t len);
/* The short communicator id printed in every line: its top 32 bits. */
#define NTX_COMM_SHORT(id) ((unsigned)((id) >> 32))
#endif
