/* agg_link.h -- one non-blocking, framed, authenticated connection of the
 * exchange wire protocol (docs/wire-protocol.md), either end: the
 * node-local aggregator (agg.h) uses it towards its local clients (server
 * end) and towards the root coordinator (client end); the scale benchmarks
 * use it to simulate clients.  Frames are built with wire.h's encoders and
 * parsed with ntx_frame_parse: nothing of the protocol is re-implemented.
 *
 * Thread-safety: a link belongs to one thread.  Signal-safety: none
 * (allocates).
 *
 * Handshake (protocol v3), as the coordinator and the client do it:
 *   server end: ntx_agg_link_accept() sends CHALLENGE (seq 0, public session);
 *     ntx_agg_link_hello_auth() looks up the key HELLO names among l->keys and
 *     checks HELLO's tag under it; ntx_agg_link_on_hello() takes the client's
 *     nonce and sends WELCOME.
 *   client end: ntx_agg_link_on_challenge() binds the session to the link's
 *     key and CHALLENGE, and sends HELLO naming that key; WELCOME (tagged
 *     under it) then makes the link ready.
 */
#ifndef NTX_AGG_LINK_H
#define NTX_AGG_LINK_H
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/own.h"
#include "interpose/exchange/keys.h"
#include "interpose/exchange/wire.h"

enum ntx_agg_link_state { NTX_AGG_L_FREE = 0, NTX_AGG_L_HANDSHAKE = 1, NTX_AGG_L_READY = 2 };

struct ntx_agg_link {
  int fd, state;
  struct ntx_fdid id;           /* what fd was at init: checked before every use (own.h) */
  uint8_t dir_out, dir_in;      /* NTX_DIR_* of what we send and what we accept */
  struct ntx_session sess;
  struct ntx_key key;           /* client end: the key we name; server end: the only one accepted
                                 * when keys is NULL */
  const struct ntx_keyring *keys; /* server end: the keys a client may name (keys.h), or NULL */
  uint8_t chal[NTX_CHALLENGE_LEN]; /* server end: what our CHALLENGE said */
  uint64_t tx, rx;              /* next seq out, next seq expected in */
  uint8_t *in;
  size_t in_len, in_cap;
  uint8_t *out;
  size_t out_len, out_cap, out_max;
  uint64_t dropped;             /* frames not queued: out_max reached */
  uint32_t hello_flags;         /* client end: HELLO flags (NTX_HELLO_AGG); 0 after init */
};

/* Set up a link on a connected non-blocking fd.  server: 1 for the
 * coordinator-like end.  out_max bounds the bytes queued (0: 4 MiB). */
void ntx_agg_link_init(struct ntx_agg_link *l, int fd, int server, const struct ntx_key *key, size_t out_max);
/* Close the fd (when it is still ours: own.h) and free the buffers; the
 * link becomes NTX_AGG_L_FREE.  Flush and read on a link whose fd is not ours
 * any more return -EBADF without touching it. */
void ntx_agg_link_close(struct ntx_agg_link *l);

/* Queue one frame (type, payload) and try to send.  @return 0, -ENOBUFS
 * when it would pass out_max (dropped, counted), -ENOMEM. */
int ntx_agg_link_send(struct ntx_agg_link *l, uint8_t type, const void *payload, size_t plen);
/* Queue one frame without sending (several frames, one send: call
 * ntx_agg_link_flush after).  @return as ntx_agg_link_send. */
int ntx_agg_link_queue(struct ntx_agg_link *l, uint8_t type, const void *payload, size_t plen);
/* Write what is queued.  @return 0, or -errno when the peer is gone. */
int ntx_agg_link_flush(struct ntx_agg_link *l);

/* Read what the socket holds and call on_frame for every complete frame
 * (the frame's payload is valid during the call only).  on_frame returns 0
 * to go on, < 0 to stop (the link was closed by it).
 * @return 0, 1 when the link was closed by on_frame, or a negative value:
 *         -errno (peer gone) or an ntx_wire_err (bad frame); the caller
 *         closes the link then. */
int ntx_agg_link_read(struct ntx_agg_link *l, int (*on_frame)(void *ctx, struct ntx_agg_link *l, const struct ntx_frame *f),
                  void *ctx);

/* Server end: send CHALLENGE with a fresh nonce. */
int ntx_agg_link_accept(struct ntx_agg_link *l, uint32_t flags, int32_t pid, const char *host);
/* Server end: HELLO f received (m decoded from it): find its key, check its
 * tag.  @return 0, -ENOKEY (a key we do not hold), NTX_E_MAC. */
int ntx_agg_link_hello_auth(struct ntx_agg_link *l, const struct ntx_frame *f, const struct ntx_msg *m);
/* Server end: HELLO authenticated; send WELCOME(client_id). */
int ntx_agg_link_on_hello(struct ntx_agg_link *l, const struct ntx_msg *m, uint32_t client_id, uint32_t flags);
/* Client end: CHALLENGE f received (and decoded: its length is right); send HELLO. */
int ntx_agg_link_on_challenge(struct ntx_agg_link *l, const struct ntx_frame *f, int32_t pid, int32_t launcher_rank,
                          const char *host, const char *job);

/* A fresh 16-byte nonce (getrandom, else clock and a counter). */
void ntx_agg_nonce(uint8_t nonce[NTX_NONCE]);
#endif
