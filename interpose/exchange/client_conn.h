/* client_conn.h -- how the exchange client (client.c) reaches the checker:
 * straight to the root coordinator over TCP, or through this host's node
 * aggregator (agg.h) over an abstract Unix socket, elected here without
 * user action: the first process of the host to bind the name hosts the
 * aggregator (a thread of that process, upstream to the root), every
 * process, the winner included, connects to it.  When the hosting process
 * goes, the others run the same election again on their next connect.
 *
 * Thread-safety: one owner, the client thread (ntx_cagg_init and
 * ntx_cagg_stop run on the thread that starts and stops the client, while
 * the client thread is not running).  Signal-safety: none.
 * ntx_cagg_forget_in_child is for the fork child handler only.
 */
#ifndef NTX_CLIENT_CONN_H
#define NTX_CLIENT_CONN_H
#include <stdint.h>
#include "interpose/exchange/agg.h"
#include "interpose/exchange/auth.h"
#include "interpose/exchange/wire.h"

/* A non-blocking TCP connection under way to host:port (TCP_NODELAY).
 * @return fd, or -errno (-EHOSTUNREACH when the name does not resolve). */
int ntx_conn_tcp(const char *host, const char *port);

struct ntx_cagg {
  int on;                   /* connect through the node aggregator */
  char name[64];            /* abstract socket name, ntx_agg_name() */
  char host[NTX_HOST];      /* host part: gethostname, or NCCLTRACE_AGG_HOST (tests) */
  char job[NTX_JOB];
  char up_host[256], up_port[16];
  struct ntx_key key;
  int32_t lrank;
  struct ntx_agg *agg;      /* the aggregator this process hosts, or NULL */
};

/* Decide whether to use an aggregator (want: NCCLTRACE_AGG, 0 or 1; -1
 * unset: on when world_size > local_world_size, both known, i.e. a
 * multi-host job) and derive its name from job and host_label
 * (NCCLTRACE_AGG_HOST; "" or NULL: this host). */
void ntx_cagg_init(struct ntx_cagg *ca, const struct ntx_key *key, const char *job, const char *host_label,
                   const char *up_host, const char *up_port, int32_t lrank, int32_t world_size,
                   int32_t local_world_size, int want);

/* Run the election (host the aggregator when the name is free) and connect
 * to this host's aggregator.  *hosted is set to 1 when this call started one.
 * @return a non-blocking connected fd (the aggregator speaks first:
 *         CHALLENGE), or -errno: retry later; -EACCES (err names the
 *         peer) when another user holds the name: do not use it. */
int ntx_cagg_connect(struct ntx_cagg *ca, int *hosted, char *err, size_t errlen);

/* Stop the aggregator this process hosts (hand-over: its clients elect
 * again).  Call after the client thread said BYE. */
void ntx_cagg_stop(struct ntx_cagg *ca);
void ntx_cagg_forget_in_child(struct ntx_cagg *ca);
#endif
