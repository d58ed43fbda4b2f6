/* agg.h -- the node-local aggregator: one per host, between the traced
 * processes of that host and the root coordinator (docs/performance.md,
 * "Beyond one coordinator").
 *
 * Local clients reach it over an abstract Unix socket whose name is derived
 * from the job key (ntx_agg_name); the election is the bind itself: the first
 * process on the host to bind the name hosts the aggregator, every other one
 * gets EADDRINUSE and connects to it.  Nobody configures anything.
 *
 * Towards its local clients it IS a coordinator (same wire protocol, same
 * handshake, same key: docs/wire-protocol.md); towards the root coordinator
 * it is ONE client that registered every (comm, rank) of its host, which the
 * protocol already allows (a process may hold several ranks).  It
 *   - forwards REGISTER at once (and replays them after a reconnect),
 *   - batches the FP entries of all its clients into one FP frame, sent when
 *     it holds NTX_FP_MAX entries or its oldest entry is flush_s old,
 *   - forwards STRICT at once with its own req_id and routes the REPLY back,
 *   - fans a VERDICT out to every local client registered on its comm (the
 *     coordinator tells a multi-rank client once per comm),
 *   - PINGs upstream when idle; it drops entries for a (comm, rank) the
 *     sending client did not register (counted).
 *   - reports a local client that leaves to the root with GONE
 *     (its host, pid, launcher rank, clean or lost, and its (comm, rank)
 *     pairs), so a process that dies is named to remote ranks at once; a
 *     lost one is also told to the other local clients directly,
 *   - says HELLO with NTX_HELLO_AGG upstream and CHALLENGE with NTX_CHAL_AGG
 *     to its clients, so both ends know what they talk to.
 * Hand-over: ntx_agg_stop reads what its clients sent last (the hosting
 * process's own BYE becomes a clean GONE), says BYE upstream and BYE with
 * reason NTX_BYE_HANDOVER to the clients, which then re-run the election.
 *
 * Thread-safety: ntx_agg_listen/start/stop are called by one owner thread;
 * the loop runs on its own thread.  ntx_agg_get_stats takes the loop's lock.
 * Not signal-safe.
 */
#ifndef NTX_AGG_H
#define NTX_AGG_H
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/auth.h"
#include "interpose/exchange/keys.h"

struct ntx_agg_cfg {
  const char *name;      /* abstract socket name (no leading NUL): ntx_agg_name() */
  const char *up_host;   /* root coordinator */
  const char *up_port;
  const struct ntx_keyring *keys; /* the keys of this process (keys.h): local clients may name any,
                          * upstream names one (NULL: key alone, both ways) */
  struct ntx_key key;    /* the only key when keys is NULL */
  const char *host;      /* this host's name ("" = gethostname) */
  const char *job;       /* sent upstream in HELLO */
  double flush_s;        /* oldest batched FP entry waits at most this (default 0.005) */
  uint32_t max_local;    /* local clients (default 512) */
  double poll_s;         /* 0: wake on every local frame; > 0: after each round of work,
                          * sleep this long and take what queued up meanwhile in one go
                          * (fewer wake-ups on a busy host; adds <= poll_s per hop) */
  int32_t lrank;         /* launcher rank of the hosting process, sent upstream in HELLO (-1) */
};
void ntx_agg_default_cfg(struct ntx_agg_cfg *cfg);

/* "nccltrace-agg-<16 hex>": SipHash of (real uid, job) under key (the
 * naming key of auth.h: public values, or NCCLTRACE_SECRET), so two jobs
 * (or two users) on one host do not meet by accident.  The name is no
 * secret: a client's key, not the name, keeps others out. */
void ntx_agg_name(const struct ntx_key *key, const char *job, char *out, size_t len);

struct ntx_agg;
/* Bind the abstract name and listen: winning the election.
 * @return 0; -EADDRINUSE when another process of the host holds the name
 *         (connect to it with ntx_agg_connect); other -errno with err set. */
int ntx_agg_listen(struct ntx_agg **out, const struct ntx_agg_cfg *cfg, char *err, size_t errlen);
/* Run the loop on a new thread.  @return 0 or -errno. */
int ntx_agg_start(struct ntx_agg *a);
/* Join the thread, take the clients' last frames, say BYE upstream and
 * BYE (hand-over) to every local client, free. */
void ntx_agg_stop(struct ntx_agg *a);
/* In a fork child: close the child's copies of every descriptor (the
 * listening one above all: a copy would keep the name bound and the host
 * could never elect again) and leave the memory alone (the thread is the
 * parent's).  a may be NULL. */
void ntx_agg_forget_in_child(struct ntx_agg *a);

/* A local client's connection to the aggregator of this host (non-blocking
 * fd; the peer sends CHALLENGE first).  The process holding the name must
 * run as our user (SO_PEERCRED); the aggregator checks its clients the same
 * way at accept.  @return fd or -errno: -EACCES when the name is held by
 * another user (its pid and uid in *peer_pid, *peer_uid when not NULL),
 * -EAGAIN when its backlog is full. */
int ntx_agg_connect_peer(const char *name, int32_t *peer_pid, uint32_t *peer_uid);
int ntx_agg_connect(const char *name);

struct ntx_agg_stats {
  uint64_t local_accepted, local_lost, local_bye;
  uint64_t frames_in, fps_in, fps_up, frames_up, fps_refused, fps_dropped;
  uint64_t verdicts_in, verdicts_out, strict_up, replies_out, up_connects;
  uint64_t refused_uid;  /* local connections from another user (SO_PEERCRED), refused */
  double first_mismatch_t; /* CLOCK_MONOTONIC seconds of the first MISMATCH verdict from the root, 0 = none */
  uint32_t locals;       /* authenticated local clients now */
  int up_ready;          /* the upstream link is authenticated */
};
void ntx_agg_get_stats(struct ntx_agg *a, struct ntx_agg_stats *st);
#endif
