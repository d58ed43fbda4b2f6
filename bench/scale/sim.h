/* sim.h -- simulated ranks that speak the real wire protocol (agg_link.h on
 * wire.h) over real sockets: TCP straight to a coordinator, or the abstract
 * Unix socket of a node aggregator (agg.h).  Every simulated rank is one
 * connection, as one traced process would be; a few driver threads
 * multiplex them with epoll.
 *
 * Every rank registers rank r of one world communicator of nranks, then
 * sends collective fingerprints seq 1, 2, ... (AllReduce, count 1024,
 * float32, sum), `batch` per FP frame, paced at `rate` collectives per
 * second per rank (0: as fast as the sockets take them).  Rank mm_rank
 * sends a Broadcast at seq mm_seq (or at the seq it is at half-way
 * through): the coordinator
 * must report it; each rank notes when its MISMATCH verdict arrived, and
 * the latency is counted from the moment the LAST rank sent that seq (the
 * earliest the mismatch can be decided).  A rank that is behind queues up
 * to 16 frames and writes them with one send (a kernel would coalesce
 * them the same way on a busy socket).
 *
 * Thread-safety: sim_run drives its own threads and returns when done;
 * one sim at a time per struct sim.  Signal-safety: none.
 */
#ifndef SIM_H
#define SIM_H
#include <stdint.h>
#include "interpose/exchange/auth.h"

struct sim_cfg {
  int nranks;
  int threads;              /* driver threads */
  const char *tcp_host, *tcp_port; /* direct to the coordinator, or: */
  int per_host;             /* > 0: rank r connects to the aggregator of host r / per_host */
  char agg_names[1024][64]; /* the per-host aggregator names (agg mode) */
  struct ntx_key key;
  double rate;              /* collectives per second per rank; 0 = unpaced */
  double duration_s;        /* sending phase */
  int batch;                /* fingerprints per FP frame */
  uint64_t mm_seq;          /* 0: no mismatch; 1: planted at half time, at the seq mm_rank is at;
                             * > 1: planted at that seq */
  int mm_rank;
  uint64_t max_ahead;       /* unpaced: a thread stays within this many seqs of the slowest */
};

struct sim_result {
  int connected;            /* ranks that got WELCOME */
  double setup_s;           /* connect + handshake + register, all ranks */
  double send_s;            /* the sending phase, measured */
  uint64_t fps_sent, frames_sent;
  uint64_t mm_planted;      /* the seq of the planted mismatch (0: none) */
  double mm_last_send;      /* when the last rank sent that seq (bu_now clock) */
  int mm_seen;              /* ranks that got the MISMATCH verdict */
  double mm_lat_p50, mm_lat_max; /* verdict arrival minus mm_last_send, over ranks */
  double wait_s;            /* after sending: how long until every verdict was in */
  char mm_text[256];        /* the verdict text one rank got */
};

/* Run the simulation.  verdict_wait_s: how long to wait for the verdicts
 * after the sending phase.  @return 0, or -1 with a reason on stderr. */
int sim_run(const struct sim_cfg *cfg, double verdict_wait_s, struct sim_result *res);
#endif
