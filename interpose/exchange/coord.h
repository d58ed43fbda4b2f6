/* coord.h -- the coordinator server: one thread, one epoll loop, every
 * client connection non-blocking, feeding check.h.  It runs embedded (a
 * thread in the process with launcher rank 0) or standalone
 * (`nccltrace coord --listen HOST:PORT`, ntx_coord_main).
 *
 * Thread-safety: ntx_coord_listen, ntx_coord_start and ntx_coord_stop are
 * called by one owner thread; the loop runs on its own thread (or on the
 * caller's in ntx_coord_run).  Not signal-safe.
 *
 * Bounds (each enforced, each counted): frame size (NTX_FRAME_MAX), clients
 * (limits.max_clients), bytes queued towards a slow reader (max_out), time to
 * authenticate (hs_timeout_s), time a partial frame may stay partial
 * (slow_timeout_s), silence of an authenticated client (dead_timeout_s).
 * A connection that breaks a rule is closed; everyone else is served on.
 *
 * Status queries (`nccltrace status --job`, HELLO flag NTX_HELLO_QUERY):
 * authenticated like any client, never a rank; at most 4 connections at
 * once, each closed 5 s after HELLO, one QUERY each, answered at most 2 a
 * second (a burst of 4; over it the answer is a one-line refusal), each
 * answer at most NTX_JOB_REPLY_MAX bytes (jobview.h).
 *
 * Budget inside the workload process (an embedded coordinator must never
 * take what the application needs): at most max_pending connections that
 * have not authenticated, all together; when that is full, the oldest one
 * pending for pending_full_s is evicted for a newcomer, else the listening
 * socket leaves the poll set for a backoff and the kernel's backlog holds
 * the rest (no CPU spent on them).  Nothing is accepted while fewer than
 * fd_reserve descriptors would remain to the process (RLIMIT_NOFILE; by
 * default an eighth of its soft limit, 4 to 64: ntx_fd_reserve), and
 * EMFILE/ENFILE back off likewise; when the limit keeps peers out, one
 * line says so, naming it.  A pending peer's frame may not announce
 * more than NTX_COORD_PENDING_FRAME bytes; input buffers grow per frame and
 * all of them together stay under in_total_max.
 *
 * Descriptors are checked by identity before each use (own.h): when the
 * application closed the listening socket, the epoll instance or the wake
 * socket, the loop ends with one line and touches none of them again.
 */
#ifndef NTX_COORD_H
#define NTX_COORD_H
#include <stdint.h>
#include <stdio.h>
#include "interpose/exchange/auth.h"
#include "interpose/exchange/check.h"
#include "interpose/exchange/keys.h"

#define NTX_COORD_PENDING_FRAME 1024u /* largest frame a peer may announce before authenticating */

/* CHALLENGE flags */
#define NTX_COORD_EMBEDDED 1u /* the coordinator lives inside a rank's process */

struct ntx_coord_cfg {
  const char *host;         /* address to bind ("" or "*": all) */
  const char *port;         /* decimal, "0" = any (tests) */
  const struct ntx_keyring *keys; /* the keys a client may name in HELLO (keys.h); NULL: key alone */
  struct ntx_key key;
  struct ntx_check_limits lim;
  int embedded;             /* sent to clients in CHALLENGE */
  double hs_timeout_s;      /* HELLO must arrive within (5) */
  double slow_timeout_s;    /* a started frame must complete within (5) */
  double dead_timeout_s;    /* an authenticated client silent this long is lost (10) */
  uint32_t max_out;         /* bytes queued per client before messages are dropped (1 MiB) */
  uint32_t max_pending;     /* connections not authenticated yet, all together (16) */
  double pending_full_s;    /* with max_pending full, a pending peer this old is evicted (1) */
  uint32_t fd_reserve;      /* descriptors always left to the process (0: ntx_fd_reserve) */
  uint32_t max_ready;       /* authenticated clients (0: lim.max_clients) */
  size_t in_total_max;      /* bytes of all input buffers together (64 MiB) */
  FILE *log;                /* verdicts and rejections (standalone), NULL = quiet */
};
void ntx_coord_default_cfg(struct ntx_coord_cfg *cfg);

struct ntx_coord;
/* Bind and listen.  @return 0, or -errno with a one-line reason in err. */
int ntx_coord_listen(struct ntx_coord **out, const struct ntx_coord_cfg *cfg, char *err, size_t errlen);
/* The port actually bound (useful with port "0"). */
int ntx_coord_port(const struct ntx_coord *co);
/* Run the loop on the calling thread until ntx_coord_request_stop. */
void ntx_coord_run(struct ntx_coord *co);
/* Run the loop on a new thread.  @return 0 or -errno. */
int ntx_coord_start(struct ntx_coord *co);
/* Ask the loop to end (async-signal-safe: an atomic store and one send(2)
 * on our wake socket, when it is still ours). */
void ntx_coord_request_stop(struct ntx_coord *co);
/* Stop: wait up to linger_s for clients to say goodbye (so ranks that
 * outlive the host rank by a moment keep their checks), tell the rest BYE,
 * join the thread and free everything.  A loop thread that does not end
 * within 0.5 s is left running with its memory (one line): exit never
 * waits on it. */
void ntx_coord_stop(struct ntx_coord *co, double linger_s);

struct ntx_coord_stats {
  uint64_t accepted, rejected_auth, rejected_malformed, rejected_full, slow_closed, dead_closed;
  uint64_t frames_in, frames_out, out_dropped;
  uint64_t evicted, backoffs, rejected_budget; /* pending evicted when full; listen backoffs; refused by a budget */
  uint64_t queries, queries_refused;          /* status queries answered; refused (rate, connections) */
  uint32_t clients;         /* authenticated now */
};
/* A snapshot (taken under the loop's lock). */
void ntx_coord_get_stats(struct ntx_coord *co, struct ntx_coord_stats *st, struct ntx_check_stats *cst);

/* `nccltrace coord --listen HOST:PORT [options]`. argv[0] is "coord". */
int ntx_coord_main(int argc, char **argv);

/* Parse "host:port" or "[v6]:port".  @return 0 or -1. */
int ntx_split_hostport(const char *s, char *host, size_t hl, char *port, size_t pl);
#endif
