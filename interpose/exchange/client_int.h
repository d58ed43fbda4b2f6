/* client_int.h -- internals of the exchange client, shared by client.c
 * (the thread, the ring reader, the API of interpose/exchange.h) and
 * client_link.c (the connection to the coordinator or to this host's node
 * aggregator, and the verdicts and replies that arrive on it).
 *
 * Thread-safety: as interpose/exchange.h says; ntx_cl's fields are grouped
 * by who may touch them (set once at start / under mu / atomics / the
 * client thread only).  The ntx_cl_* functions of client_link.c run on the
 * client thread, except ntx_cl_say, ntx_cl_once and ntx_cl_now (any
 * thread) and ntx_cl_reg_find (mu held).  Signal-safety: none.
 */
#ifndef NTX_CLIENT_INT_H
#define NTX_CLIENT_INT_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "interpose/exchange.h"
#include "interpose/exchange/client_conn.h"
#include "interpose/exchange/coord.h"
#include "interpose/exchange/discover.h"
#include "interpose/exchange/frozen.h"
#include "interpose/exchange/own.h"
#include "interpose/exchange/wire.h"

#define NTX_OUT_CAP (256u * 1024u)    /* bytes queued towards the coordinator */
#define NTX_POLL_MIN_MS 1             /* ring poll interval while records flow */
#define NTX_POLL_MAX_MS 5             /* ... and when idle: bounds verdict latency */
#define NTX_PING_S 1.0                /* idle keepalive (the coordinator's dead timeout is 10 s) */
#define NTX_STUCK_S 0.05              /* a slot left half-written this long is skipped */
#define NTX_HOLE_S 0.02               /* a hole holding up later records this long is filled */
/* Records streamed per second at most, and the burst allowed above it.  A
 * real job issues well under 100k NCCL calls per second per rank; only a
 * loop on a no-op NCCL goes past this, and there the stream would only keep
 * a core busy for records the ring overwrites anyway (counted as lost). */
#define NTX_STREAM_RATE 5e5 /* 5x that bound (docs/wire-protocol.md) */
#define NTX_STREAM_BURST 2e4
#define NTX_LINGER_S 2.0              /* embedded coordinator waits for the others at exit */
#define NTX_JOIN_S 1.0                /* ntx_stop waits this long for the client thread */
#define NTX_HS_TIMEOUT_S 5.0          /* connect + CHALLENGE + WELCOME must be done within */
/* Strict waits that may end at NCCLTRACE_STRICT_TIMEOUT in a process's
 * life, all paths together (no connection yet, a coordinator that stopped
 * answering, a board whose peers did not come): after that many strict
 * checking is off in the process, so strict mode never adds more than this
 * many timeouts to a job (docs/wire-protocol.md, "Strict"). */
#define NTX_STRICT_TIMEOUTS_MAX 4
/* Strict requests sent without a waiter (the coordinator stopped
 * answering) that may wait for room in the out buffer; more are dropped
 * (the coordinator counts a rank's skipped seqs as arrived unseen). */
#define NTX_DETACHED_MAX 1024

enum { NTX_CL_OFF = 0, NTX_CL_DISCONNECTED, NTX_CL_CONNECTING, NTX_CL_CHALLENGE, NTX_CL_WELCOME, NTX_CL_READY };
enum { NTX_ENV_PENDING = 0, NTX_ENV_OK = 1, NTX_ENV_DIFF = 2 };

struct ntx_reg {
  uint64_t comm_id;
  int32_t rank, nranks;
  struct ntr_comm_state *cs;
  int sent, env_state;
};

struct ntx_sreq {
  uint32_t id, n, cap; /* cap: room in fps (a detached request gathers calls until sent) */
  struct ntx_fp *fps;
  int sent, done;
  int detached;   /* nobody waits: the client thread frees it (with fps) once it is queued */
  int32_t status;
  char *text;
  size_t text_len;
  struct ntx_sreq *next;
};

struct ntx_client {
  /* set by ntx_start, read-only afterwards */
  int started, discovered;
  int mode;
  struct ntr_ring *ring;
  struct ntx_discovery disc;
  struct ntx_key key;       /* names only (the aggregator's socket): keys.h authenticates */
  struct ntx_coord *coord;
  struct ntx_cagg cagg;     /* the node aggregator: used by the client thread after start */
  pthread_t thread;
  int thread_ok;
  struct ntx_wake wake;     /* nudges the client thread (own.h: checked before each use) */
  char env[NTX_ENV_MAX];
  uint32_t env_len;
  char hostname[NTX_HOST];
  int32_t launcher_rank;

  /* shared with application threads: under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct ntx_reg regs[NTR_COMM_MAX];
  int nregs;
  struct ntx_sreq *sq;
  uint32_t next_req;

  /* atomics */
  int stop, connected, ever_ready;
  /* The coordinator stopped answering while connected (a strict wait ran
   * out): strict calls send their request without waiting for it, until a
   * REPLY to request stall_id or a later one arrives. */
  int strict_stalled;
  uint32_t stall_id;
  int strict_timeouts, strict_off; /* waits that ran out (NTX_STRICT_TIMEOUTS_MAX); strict off for good */
  uint32_t ndetached;       /* detached requests not queued yet (under mu) */
  struct ntx_sreq *det_open; /* the last request of sq when it is detached, unsent and has room (under mu) */

  /* the connection (fd, state, session, out buffer, tx seq): the client
   * thread holds txmu except while it sleeps in poll; a strict caller that
   * gets it (trylock) sends its own request at once instead of waking the
   * thread for it (one thread hand-off less per strict collective) */
  pthread_mutex_t txmu;

  /* client thread only (or txmu held, see above) */
  int fd, state, coord_embedded, via_agg;
  uint32_t welcome_flags;   /* the server's WELCOME flags (NTX_WELCOME_DEV: send device arrivals) */
  int auth_failed;          /* the peer could not prove it holds our key (atomic: strict callers read it) */
  struct ntx_fdid fd_id;    /* what fd was when connected: checked before every use */
  int fds_lost;             /* the application closed our descriptors: checking is off */
  uint32_t key_try;         /* which of the process's keys (keys.h) the next connection names */
  struct ntx_key ckey;      /* the key of this connection */
  uint64_t ckey_id;
  int32_t coord_pid;
  char coord_host[NTX_HOST];
  struct ntx_session sess;
  uint64_t tx, rx;
  uint8_t in[NTX_FRAME_MAX + 4096];
  size_t in_len;
  uint8_t out[NTX_OUT_CAP];
  size_t out_len;
  uint64_t cursor, stuck_pos;
  double stuck_since, next_connect, backoff, last_tx, first_try, conn_t0;
  uint64_t lost_records;
  double stream_tokens, stream_t; /* read_ring's rate limit (NTX_STREAM_RATE) */
  int said_waiting, said_gone, said_agg;
  int said_fds;             /* no descriptor for a socket (RLIMIT_NOFILE): said once, instead of "no coordinator answers" */
  /* This process was stopped (frozen.h): when, and for how long.  A
   * connection the peer dropped meanwhile is no loss of the peer. */
  struct ntx_freeze frz;
  double woke_at, away;
};
extern struct ntx_client ntx_cl;

double ntx_cl_now(void);
/* One `nccltrace:` line with a single write (recorder/diag.h). */
void ntx_cl_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ntx_cl_once(int *flag); /* 1 the first time for *flag (atomic exchange) */
struct ntx_reg *ntx_cl_reg_find(uint64_t comm_id); /* pre: mu held */
/* A strict wait ran out (any thread, any path).  @return 1 when that spent
 * the process's NTX_STRICT_TIMEOUTS_MAX: strict checking is off from now
 * on (said once). */
int ntx_cl_strict_timed_out(void);
/* Unlink and free a detached request.  pre: mu held, *pp == q. */
void ntx_cl_sreq_drop(struct ntx_sreq **pp);

/* client_link.c */
void ntx_cl_record_event(uint16_t kind, uint64_t comm_id, uint64_t seq, int32_t peer, uint64_t aux,
                         const char *field);
int ntx_cl_queue_frame(uint8_t type, const void *payload, size_t plen); /* -1: no room */
void ntx_cl_fail_sent(int all);    /* strict requests sent (all: every one) answered "unchecked" */
void ntx_cl_disconnect(int clean_bye);
void ntx_cl_connect(double now);   /* start a connection: TCP to the root, or the aggregator */
void ntx_cl_read(void);
void ntx_cl_flush(void);
/* One non-blocking send of what is queued; errors are left for the client
 * thread (no disconnect, no dump here).  For a strict caller holding txmu. */
void ntx_cl_flush_once(void);
/* 1 when client->fd (if any) and the wake socket are still ours; else checking
 * goes off: said once, fds_lost set, client->fd forgotten, never closed. */
int ntx_cl_fds_ok(void);
#endif
