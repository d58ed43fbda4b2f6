/* coord_int.h -- internals of the coordinator shared by coord.c (the loop,
 * the ranks' connections) and coord_query.c (status queries): its state
 * and the few helpers both use.  Same contract as coord.h: everything here
 * runs on the loop's thread, under co->lock.
 */
#ifndef NTX_COORD_INT_H
#define NTX_COORD_INT_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "interpose/exchange/clocksync.h"
#include "interpose/exchange/coord.h"
#include "interpose/exchange/frozen.h"
#include "interpose/exchange/own.h"
#include "interpose/exchange/wire.h"

/* Status queries (protocol v5, jobview.h): a few at once, a few a second,
 * each connection short-lived; none of them is a rank. */
#define QUERY_CONNS 4      /* query connections at once */
#define QUERY_RATE 2.0     /* answers a second, sustained ... */
#define QUERY_BURST 4.0    /* ... after a burst of this many */
#define QUERY_LIFE_S 5.0   /* a query connection is closed this long after it opened */

enum { C_FREE = 0, C_HANDSHAKE = 1, C_READY = 2, C_CLOSING = 3 /* shutdown: nobody is told */,
       C_QUERY = 4 /* an authenticated status query: QUERY, then it goes */ };

struct ntx_coord_conn {
  int fd, state;
  struct ntx_fdid id;   /* what fd was at accept: checked before every use */
  struct ntx_session sess;
  uint8_t chal[NTX_CHALLENGE_LEN]; /* what CHALLENGE said: bound into the session at HELLO */
  uint64_t rx_seq, tx_seq;
  double opened, last_rx, partial_since;
  uint8_t *in;
  size_t in_len, in_cap;
  uint8_t *out;
  size_t out_len, out_cap;
  int want_out;
  struct ntx_clk clk;   /* its clock offset (clocksync.h) */
  char host[NTX_HOST];  /* its HELLO's, for the stopped-peer check (frozen.h) */
  int32_t pid;
  int said_stopped;     /* a stop past the dead timeout: logged once */
  int heard;            /* it sent a byte: a close before HELLO is then logged */
  int answered;         /* C_QUERY: its one QUERY was answered */
};

struct ntx_coord {
  struct ntx_coord_cfg cfg;
  int lfd, ep;
  struct ntx_fdid lid, epid;
  struct ntx_wake wake;
  int port;
  /* the budget (coord.h) */
  uint32_t pending;     /* connections in C_HANDSHAKE */
  size_t in_total;      /* bytes of all input buffers */
  int listen_off;       /* the listening socket is out of the poll set until listen_resume */
  double listen_resume;
  long headroom;        /* descriptors left to the process, as of headroom_t, minus accepts since */
  long reserve;         /* descriptors left to the application (cfg.fd_reserve, else sized to the limit) */
  double headroom_t;
  int said_fds;         /* the descriptor limit stopped accepts: said once */
  int dead, said_dead;  /* a descriptor of ours was closed under us: the loop ended for good */
  struct ntx_coord_conn *conns;
  uint32_t next_id;
  struct ntx_check *chk;
  pthread_t thread;
  int thread_started;
  pthread_mutex_t lock; /* held by the loop while it works; stats readers take it */
  struct ntx_coord_stats st;
  int stop;             /* atomic: ntx_coord_request_stop */
  uint64_t last_log_hash;
  struct ntx_freeze frz; /* the loop's own passes (frozen.h) */
  uint32_t queries;     /* connections in C_QUERY */
  double q_tokens, q_t; /* the query rate limit: a token bucket */
};

/* Queue one frame to connection id (dropped and counted past max_out). */
void ntx_coord_send(struct ntx_coord *co, uint32_t id, uint8_t type, const void *payload, size_t plen);
/* Close connection id; lost: a rank gone without BYE (the checker is told). */
void ntx_coord_close(struct ntx_coord *co, uint32_t id, int lost, const char *why);
/* One "nccltrace coord:" line into cfg.log. */
void ntx_coord_log(struct ntx_coord *co, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Check HELLO's key and tag.  @return 0, or -1 when the connection was closed. */
int ntx_coord_hello_auth(struct ntx_coord *co, uint32_t id, const struct ntx_frame *f, const struct ntx_msg *m);

/* Status queries (coord_query.c).  @return 0, or -1 when the connection
 * was closed. */
int ntx_coord_query_hello(struct ntx_coord *co, uint32_t id, const struct ntx_frame *f, const struct ntx_msg *m,
                          double now);
int ntx_coord_query_frame(struct ntx_coord *co, uint32_t id, const struct ntx_msg *m, double now);
#endif
