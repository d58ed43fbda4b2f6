/* agg_link.c -- a framed wire-protocol connection, either end (agg_link.h). */
#include "interpose/exchange/agg_link.h"
#include "recorder/heap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void ntx_agg_nonce(uint8_t nonce[NTX_NONCE]) {
  if (getrandom(nonce, NTX_NONCE, 0) == (ssize_t)NTX_NONCE)
    return;
  static uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t v[2] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32),
                   (uint64_t)ts.tv_sec ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED)};
  memcpy(nonce, v, NTX_NONCE);
}

void ntx_agg_link_init(struct ntx_agg_link *l, int fd, int server, const struct ntx_key *key, size_t out_max) {
  memset(l, 0, sizeof *l);
  l->fd = fd;
  ntx_fd_take(fd, &l->id);
  l->state = NTX_AGG_L_HANDSHAKE;
  l->dir_out = server ? NTX_DIR_TO_CLIENT : NTX_DIR_TO_COORD;
  l->dir_in = server ? NTX_DIR_TO_COORD : NTX_DIR_TO_CLIENT;
  l->key = *key;
  ntx_sess_challenge(&l->sess); /* CHALLENGE, either way, is under the public session */
  l->out_max = out_max ? out_max : (size_t)4 << 20;
}

void ntx_agg_link_close(struct ntx_agg_link *l) {
  ntx_fd_close(l->fd, &l->id);
  ntr_heap_free(l->in);
  ntr_heap_free(l->out);
  memset(l, 0, sizeof *l);
  l->fd = -1;
}

int ntx_agg_link_flush(struct ntx_agg_link *l) {
  size_t off = 0;
  int rc = 0;
  if (l->out_len && !ntx_fd_is(l->fd, &l->id))
    return -EBADF;
  while (off < l->out_len) {
    ssize_t n = send(l->fd, l->out + off, l->out_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n < 0 && errno != EAGAIN)
        rc = -errno;
      break;
    }
    off += (size_t)n;
  }
  if (off) {
    memmove(l->out, l->out + off, l->out_len - off);
    l->out_len -= off;
  }
  return rc;
}

int ntx_agg_link_queue(struct ntx_agg_link *l, uint8_t type, const void *payload, size_t plen) {
  size_t need = l->out_len + NTX_FRAME_HDR + plen + NTX_FRAME_MAC;
  if (need > l->out_max) {
    l->dropped++;
    return -ENOBUFS;
  }
  if (need > l->out_cap) {
    size_t cap = l->out_cap ? l->out_cap : 8192;
    while (cap < need)
      cap *= 2;
    uint8_t *p = ntr_heap_realloc(l->out, cap);
    if (!p) {
      l->dropped++;
      return -ENOMEM;
    }
    l->out = p;
    l->out_cap = cap;
  }
  l->out_len += ntx_frame_encode(l->out + l->out_len, l->out_cap - l->out_len, type, l->tx++, payload,
                                 plen, &l->sess, l->dir_out);
  return 0;
}

int ntx_agg_link_send(struct ntx_agg_link *l, uint8_t type, const void *payload, size_t plen) {
  int rc = ntx_agg_link_queue(l, type, payload, plen);
  return rc ? rc : ntx_agg_link_flush(l);
}

int ntx_agg_link_read(struct ntx_agg_link *l, int (*on_frame)(void *ctx, struct ntx_agg_link *l, const struct ntx_frame *f),
                  void *ctx) {
  if (!ntx_fd_is(l->fd, &l->id))
    return -EBADF;
  for (int rounds = 0; rounds < 16; rounds++) { /* bounded: other links get their turn */
    if (l->in_cap - l->in_len < 4096) {
      size_t cap = l->in_cap ? 2 * l->in_cap : 16384;
      if (cap > 2 * NTX_FRAME_MAX)
        cap = 2 * NTX_FRAME_MAX;
      if (cap > l->in_cap) {
        uint8_t *p = ntr_heap_realloc(l->in, cap);
        if (!p)
          return -ENOMEM;
        l->in = p;
        l->in_cap = cap;
      }
    }
    ssize_t n = recv(l->fd, l->in + l->in_len, l->in_cap - l->in_len, MSG_DONTWAIT);
    if (n == 0)
      return -ECONNRESET;
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno == EAGAIN ? 0 : -errno;
    }
    l->in_len += (size_t)n;
    size_t off = 0;
    for (;;) {
      struct ntx_frame f;
      /* A server end learns the key from HELLO: ntx_agg_link_hello_auth checks its tag. */
      int hello = l->dir_in == NTX_DIR_TO_COORD && l->state == NTX_AGG_L_HANDSHAKE;
      int r = ntx_frame_parse(l->in + off, l->in_len - off, hello ? NULL : &l->sess, l->dir_in, l->rx, &f);
      if (r == 0)
        break;
      if (r < 0)
        return r;
      l->rx++;
      off += (size_t)r;
      if (on_frame(ctx, l, &f) < 0)
        return 1;
    }
    memmove(l->in, l->in + off, l->in_len - off);
    l->in_len -= off;
    if ((size_t)n < 4096)
      break; /* drained */
  }
  return 0;
}

int ntx_agg_link_accept(struct ntx_agg_link *l, uint32_t flags, int32_t pid, const char *host) {
  uint8_t nonce[NTX_NONCE], buf[128];
  ntx_agg_nonce(nonce);
  size_t n = ntx_enc_challenge(buf, sizeof buf, nonce, flags, pid, host);
  int rc = ntx_agg_link_send(l, NTX_MSG_CHALLENGE, buf, n); /* under the public session */
  memcpy(l->chal, buf, NTX_CHALLENGE_LEN);
  return rc;
}

int ntx_agg_link_hello_auth(struct ntx_agg_link *l, const struct ntx_frame *f, const struct ntx_msg *m) {
  struct ntx_key k;
  if (!ntx_keys_lookup(l->keys, l->keys ? NULL : &l->key, m->u.hello.key_id, &k))
    return -ENOKEY;
  ntx_sess_bind(&l->sess, &k, l->chal);
  return ntx_frame_verify(f, &l->sess, NTX_DIR_TO_COORD);
}

int ntx_agg_link_on_hello(struct ntx_agg_link *l, const struct ntx_msg *m, uint32_t client_id, uint32_t flags) {
  memcpy(l->sess.nonce + NTX_NONCE, m->u.hello.nonce, NTX_NONCE);
  l->state = NTX_AGG_L_READY;
  uint8_t buf[16];
  size_t n = ntx_enc_welcome(buf, sizeof buf, client_id, flags);
  return ntx_agg_link_send(l, NTX_MSG_WELCOME, buf, n);
}

int ntx_agg_link_on_challenge(struct ntx_agg_link *l, const struct ntx_frame *f, int32_t pid, int32_t launcher_rank,
                          const char *host, const char *job) {
  uint8_t nonce[NTX_NONCE], buf[256];
  ntx_sess_bind(&l->sess, &l->key, f->payload);
  ntx_agg_nonce(nonce);
  size_t n = ntx_enc_hello(buf, sizeof buf, nonce, pid, launcher_rank, l->hello_flags, host, job,
                           ntx_key_id(&l->key));
  int rc = ntx_agg_link_send(l, NTX_MSG_HELLO, buf, n); /* under our key, bound to CHALLENGE, client nonce zero */
  memcpy(l->sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
  return rc;
}
