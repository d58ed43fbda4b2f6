/* coord.c -- the coordinator server loop (contract: coord.h). */
#include "interpose/exchange/coord_int.h"
#include "recorder/thread.h"
#include "recorder/heap.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/clocksync.h"
#include "interpose/exchange/frozen.h"
#include "interpose/exchange/own.h"
#include "interpose/exchange/wire.h"
#include "recorder/diag.h"

#define EV_LISTEN UINT64_MAX
#define EV_WAKE (UINT64_MAX - 1)
#define BACKOFF_S 0.25     /* the listening socket rests this long when a budget is full */
#define HEADROOM_S 0.1     /* the descriptor count is taken again after this long */
#define IN_KEEP 16384u     /* an input buffer larger than this is freed once drained */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ntx_coord_default_cfg(struct ntx_coord_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = "";
  cfg->port = "0";
  ntx_check_default_limits(&cfg->lim);
  cfg->hs_timeout_s = 5;
  cfg->slow_timeout_s = 5;
  cfg->dead_timeout_s = 10;
  cfg->max_out = 1u << 20;
  cfg->max_pending = 16;
  cfg->pending_full_s = 1.0;
  cfg->fd_reserve = 0; /* sized to RLIMIT_NOFILE (ntx_fd_reserve) */
  cfg->in_total_max = (size_t)64 << 20;
}

int ntx_split_hostport(const char *s, char *host, size_t hl, char *port, size_t pl) {
  const char *colon;
  size_t n;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':')
      return -1;
    n = (size_t)(close - s - 1);
    s++;
    colon = close + 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon)
      return -1;
    n = (size_t)(colon - s);
  }
  if (n >= hl || strlen(colon + 1) >= pl || !colon[1])
    return -1;
  memcpy(host, s, n);
  host[n] = '\0';
  strcpy(port, colon + 1);
  char *end;
  long p = strtol(port, &end, 10);
  return *end || p < 0 || p > 65535 ? -1 : 0;
}

int ntx_coord_listen(struct ntx_coord **out, const struct ntx_coord_cfg *cfg, char *err, size_t errlen) {
  *out = NULL;
  struct ntx_coord *co = ntr_heap_calloc(1, sizeof *co);
  if (!co) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  co->cfg = *cfg;
  co->lfd = co->ep = co->wake.r = co->wake.w = -1;
  pthread_mutex_init(&co->lock, NULL);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  const char *host = cfg->host && cfg->host[0] && strcmp(cfg->host, "*") ? cfg->host : NULL;
  int rc = getaddrinfo(host, cfg->port, &hints, &ai);
  if (rc) {
    snprintf(err, errlen, "cannot resolve %s:%s: %s", host ? host : "*", cfg->port, gai_strerror(rc));
    ntr_heap_free(co);
    return -EINVAL;
  }
  int e = EADDRNOTAVAIL;
  for (struct addrinfo *a = ai; a && co->lfd < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      e = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      co->lfd = fd;
      struct sockaddr_storage ss;
      socklen_t sl = sizeof ss;
      getsockname(fd, (struct sockaddr *)&ss, &sl);
      co->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
    } else {
      e = errno;
      close(fd);
    }
  }
  freeaddrinfo(ai);
  if (co->lfd < 0) {
    char why[128];
    snprintf(err, errlen, "cannot listen on %s:%s: %s", host ? host : "*", cfg->port, ntx_fd_why(e, why, sizeof why));
    ntr_heap_free(co);
    return -e;
  }
  if (!co->cfg.max_pending)
    co->cfg.max_pending = 16;
  if (!co->cfg.max_ready || co->cfg.max_ready > cfg->lim.max_clients)
    co->cfg.max_ready = cfg->lim.max_clients;
  if (!co->cfg.in_total_max)
    co->cfg.in_total_max = (size_t)64 << 20;
  ntx_fd_take(co->lfd, &co->lid);
  co->conns = ntr_heap_calloc(cfg->lim.max_clients, sizeof *co->conns);
  co->ep = epoll_create1(EPOLL_CLOEXEC);
  ntx_fd_take(co->ep, &co->epid);
  if (!co->conns || co->ep < 0 || ntx_wake_open(&co->wake) < 0) {
    char why[128];
    snprintf(err, errlen, "coordinator setup failed: %s", ntx_fd_why(errno, why, sizeof why));
    ntx_coord_stop(co, 0);
    return -ENOMEM;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
  epoll_ctl(co->ep, EPOLL_CTL_ADD, co->lfd, &ev);
  ev.data.u64 = EV_WAKE;
  epoll_ctl(co->ep, EPOLL_CTL_ADD, co->wake.r, &ev);
  *out = co;
  return 0;
}

int ntx_coord_port(const struct ntx_coord *co) { return co->port; }

/* ------------------------------------------------------------- output -- */

static void conn_flush(struct ntx_coord *co, uint32_t id) {
  struct ntx_coord_conn *c = &co->conns[id];
  if (c->out_len && !ntx_fd_is(c->fd, &c->id)) {
    c->out_len = 0; /* not our socket any more: conn_read closes the connection */
    return;
  }
  while (c->out_len) {
    ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR))
        break;
      c->out_len = 0; /* broken: the read side will see it and close */
      break;
    }
    memmove(c->out, c->out + n, c->out_len - (size_t)n);
    c->out_len -= (size_t)n;
  }
  int want = c->out_len > 0;
  if (want != c->want_out) {
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0u), .data.u64 = id};
    epoll_ctl(co->ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want;
  }
}

void ntx_coord_send(struct ntx_coord *co, uint32_t id, uint8_t type, const void *payload, size_t plen) {
  struct ntx_coord_conn *c = &co->conns[id];
  size_t need = c->out_len + NTX_FRAME_HDR + plen + NTX_FRAME_MAC;
  if (need > co->cfg.max_out) { /* a client that does not read loses messages, not us */
    co->st.out_dropped++;
    return;
  }
  if (need > c->out_cap) {
    size_t cap = c->out_cap ? c->out_cap : 4096;
    while (cap < need)
      cap *= 2;
    uint8_t *p = ntr_heap_realloc(c->out, cap);
    if (!p) {
      co->st.out_dropped++;
      return;
    }
    c->out = p;
    c->out_cap = cap;
  }
  c->out_len += ntx_frame_encode(c->out + c->out_len, c->out_cap - c->out_len, type, c->tx_seq++,
                                 payload, plen, &c->sess, NTX_DIR_TO_CLIENT);
  co->st.frames_out++;
  conn_flush(co, id);
}

/* One "nccltrace coord:" line into cfg.log.  stderr (the embedded
 * coordinator with NCCLTRACE_VERBOSE, or a standalone one told so) is the
 * tracer's stderr: written as every tracer line is (recorder/diag.h). */
void ntx_coord_log(struct ntx_coord *co, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (co->cfg.log == stderr) {
    ntr_diag_vsay("nccltrace coord: ", fmt, ap);
  } else {
    fputs("nccltrace coord: ", co->cfg.log);
    vfprintf(co->cfg.log, fmt, ap);
    fputc('\n', co->cfg.log);
    fflush(co->cfg.log);
  }
  va_end(ap);
}

static void on_verdict(void *ctx, uint32_t client, uint32_t kind, uint64_t comm_id, uint64_t seq,
                       int32_t peer, int64_t aux, const char *field, const char *text) {
  struct ntx_coord *co = ctx;
  uint8_t buf[64 + NTX_TEXT_MAX];
  size_t n = ntx_enc_verdict(buf, sizeof buf, kind, comm_id, seq, peer, aux, field, text);
  if (co->conns[client].state == C_READY)
    ntx_coord_send(co, client, NTX_MSG_VERDICT, buf, n);
  if (co->cfg.log && text && text[0] && kind != NTX_V_ENV_DONE) {
    /* every rank of a comm is told; the log says it once */
    uint64_t h = ntx_siphash(&co->cfg.key, text, strlen(text));
    if (h != co->last_log_hash)
      ntx_coord_log(co, "%s", text);
    co->last_log_hash = h;
  }
}

static void on_reply(void *ctx, uint32_t client, uint32_t req_id, int32_t status, const char *text) {
  struct ntx_coord *co = ctx;
  uint8_t buf[16 + NTX_TEXT_MAX];
  size_t n = ntx_enc_reply(buf, sizeof buf, req_id, status, text);
  if (co->conns[client].state == C_READY)
    ntx_coord_send(co, client, NTX_MSG_REPLY, buf, n);
}

/* -------------------------------------------------------------- input -- */

void ntx_coord_close(struct ntx_coord *co, uint32_t id, int lost, const char *why) {
  struct ntx_coord_conn *c = &co->conns[id];
  if (c->state == C_READY) {
    co->st.clients--;
    ntx_check_client_gone(co->chk, id, !lost, now_s());
  }
  if (why && co->cfg.log)
    ntx_coord_log(co, "closed connection %u: %s", id, why);
  if (c->state == C_HANDSHAKE)
    co->pending--;
  if (c->state == C_QUERY)
    co->queries--;
  co->in_total -= c->in_cap;
  if (ntx_fd_is(c->fd, &c->id)) /* else: the application's now, left alone */
    epoll_ctl(co->ep, EPOLL_CTL_DEL, c->fd, NULL);
  ntx_fd_close(c->fd, &c->id);
  ntr_heap_free(c->in);
  ntr_heap_free(c->out);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* The listening socket rests (out of the poll set) for BACKOFF_S: the
 * kernel's backlog holds who comes meanwhile, at no cost to us. */
static void listen_rest(struct ntx_coord *co, double now) {
  if (!co->listen_off && ntx_fd_is(co->lfd, &co->lid))
    epoll_ctl(co->ep, EPOLL_CTL_DEL, co->lfd, NULL);
  co->listen_off = 1;
  co->listen_resume = now + BACKOFF_S;
  co->st.backoffs++;
}

static void listen_wake(struct ntx_coord *co, double now) {
  if (!co->listen_off || now < co->listen_resume)
    return;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
  if (ntx_fd_is(co->lfd, &co->lid))
    epoll_ctl(co->ep, EPOLL_CTL_ADD, co->lfd, &ev);
  co->listen_off = 0;
}

/* Room for one more pending peer: below max_pending, or the oldest pending
 * one has had pending_full_s and is evicted (OpenSSH's MaxStartups, oldest
 * first).  @return 1 when there is room now. */
static int pending_room(struct ntx_coord *co, double now) {
  if (co->pending < co->cfg.max_pending)
    return 1;
  uint32_t oldest = UINT32_MAX;
  for (uint32_t i = 0; i < co->cfg.lim.max_clients; i++)
    if (co->conns[i].state == C_HANDSHAKE &&
        (oldest == UINT32_MAX || co->conns[i].opened < co->conns[oldest].opened))
      oldest = i;
  if (oldest == UINT32_MAX || now - co->conns[oldest].opened < co->cfg.pending_full_s)
    return 0;
  co->st.evicted++;
  co->st.rejected_auth++;
  ntx_coord_close(co, oldest, 1, "evicted: not authenticated while the pending budget was full");
  return 1;
}

/* The descriptor limit keeps peers out: one line per coordinator (its
 * ranks would otherwise only say that nobody answers). */
static void say_fds(struct ntx_coord *co, int emfile) {
  if (co->said_fds)
    return;
  co->said_fds = 1;
  /* through the one diagnostic writer: fd 2 checked, never blocking */
  if (emfile)
    ntr_diag_say("nccltrace: ", "the coordinator cannot accept connections: too many open files, RLIMIT_NOFILE=%ld "
                 "reached (ulimit -n); ranks that cannot connect run unchecked", ntx_fd_limit());
  else
    ntr_diag_say("nccltrace: ", "the coordinator accepts no connection while %ld descriptors are left under "
                 "RLIMIT_NOFILE=%ld and %ld are kept for the application (ulimit -n); ranks that cannot connect "
                 "run unchecked", co->headroom, ntx_fd_limit(), co->reserve);
}

/* Descriptors left to the process, counted at most every HEADROOM_S
 * (minus what we accepted since). */
static int fd_room(struct ntx_coord *co, double now) {
  if (now - co->headroom_t >= HEADROOM_S) {
    co->headroom = ntx_fd_headroom();
    co->reserve = co->cfg.fd_reserve ? (long)co->cfg.fd_reserve : ntx_fd_reserve();
    co->headroom_t = now;
  }
  if (co->headroom <= co->reserve) {
    say_fds(co, 0);
    return 0;
  }
  /* the pending peers together may take a small share of what is free */
  return co->pending < 2 || (long)co->pending < co->headroom / 16;
}

static void do_accept(struct ntx_coord *co, double now) {
  if (!ntx_fd_is(co->lfd, &co->lid)) {
    co->dead = 1; /* said by the loop */
    return;
  }
  for (;;) {
    if (!pending_room(co, now) || !fd_room(co, now)) {
      co->st.rejected_budget++;
      listen_rest(co, now);
      return;
    }
    int fd = accept4(co->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE)
        say_fds(co, 1);
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        listen_rest(co, now); /* no spinning on a listen socket we cannot serve */
      return;
    }
    co->headroom--;
    uint32_t id = co->cfg.lim.max_clients;
    for (uint32_t k = 0; k < co->cfg.lim.max_clients; k++) {
      uint32_t i = (co->next_id + k) % co->cfg.lim.max_clients;
      if (co->conns[i].state == C_FREE) {
        id = i;
        break;
      }
    }
    if (id == co->cfg.lim.max_clients) {
      co->st.rejected_full++;
      close(fd);
      continue;
    }
    co->next_id = id + 1;
    co->st.accepted++;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct ntx_coord_conn *c = &co->conns[id];
    memset(c, 0, sizeof *c);
    c->fd = fd;
    ntx_fd_take(fd, &c->id);
    c->state = C_HANDSHAKE;
    co->pending++;
    c->opened = c->last_rx = now;
    ntx_sess_challenge(&c->sess);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = id};
    epoll_ctl(co->ep, EPOLL_CTL_ADD, fd, &ev);
    uint8_t nonce[NTX_NONCE], buf[128];
    if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
      /* no entropy source: a clock-based nonce still differs per connection */
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t v[2] = {(uint64_t)ts.tv_nsec ^ ((uint64_t)id << 32), (uint64_t)ts.tv_sec ^ co->st.accepted};
      memcpy(nonce, v, sizeof nonce);
    }
    char host[NTX_HOST] = "";
    gethostname(host, sizeof host - 1);
    size_t n = ntx_enc_challenge(buf, sizeof buf, nonce, co->cfg.embedded ? NTX_COORD_EMBEDDED : 0,
                                 (int32_t)getpid(), host);
    ntx_coord_send(co, id, NTX_MSG_CHALLENGE, buf, n); /* under the public session: seq 0 */
    memcpy(c->chal, buf, NTX_CHALLENGE_LEN);
  }
}

/* HELLO names the client's key: one this process holds, or the connection
 * goes (the client tries another key later).  Its tag, under that key and
 * bound to our CHALLENGE, proves the client holds it.
 * @return 0, or -1 when the connection was closed. */
int ntx_coord_hello_auth(struct ntx_coord *co, uint32_t id, const struct ntx_frame *f, const struct ntx_msg *m) {
  struct ntx_coord_conn *c = &co->conns[id];
  struct ntx_key k;
  if (!ntx_keys_lookup(co->cfg.keys, co->cfg.keys ? NULL : &co->cfg.key, m->u.hello.key_id, &k)) {
    co->st.rejected_auth++;
    ntx_coord_close(co, id, 1, "HELLO names a key this coordinator does not hold");
    return -1;
  }
  ntx_sess_bind(&c->sess, &k, c->chal);
  if (ntx_frame_verify(f, &c->sess, NTX_DIR_TO_COORD) < 0) {
    co->st.rejected_auth++;
    ntx_coord_close(co, id, 1, ntx_wire_strerror(NTX_E_MAC));
    return -1;
  }
  return 0;
}

/* @return 0 to keep the connection, -1 when it was closed. */
static int handle_frame(struct ntx_coord *co, uint32_t id, const struct ntx_frame *f, double now) {
  struct ntx_coord_conn *c = &co->conns[id];
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0) {
    co->st.rejected_malformed++;
    ntx_coord_close(co, id, 1, "malformed message");
    return -1;
  }
  if (c->state == C_HANDSHAKE) {
    if (m.type != NTX_MSG_HELLO) {
      co->st.rejected_malformed++;
      ntx_coord_close(co, id, 1, "expected HELLO");
      return -1;
    }
    if (m.u.hello.flags & NTX_HELLO_QUERY)
      return ntx_coord_query_hello(co, id, f, &m, now);
    if (co->st.clients >= co->cfg.max_ready) {
      co->st.rejected_budget++;
      ntx_coord_close(co, id, 1, "more clients than the job has ranks");
      return -1;
    }
    if (ntx_coord_hello_auth(co, id, f, &m) < 0)
      return -1;
    memcpy(c->sess.nonce + NTX_NONCE, m.u.hello.nonce, NTX_NONCE);
    c->state = C_READY;
    co->pending--;
    co->st.clients++;
    ntx_check_client_add(co->chk, id, m.u.hello.host, m.u.hello.pid, m.u.hello.launcher_rank);
    snprintf(c->host, sizeof c->host, "%s", m.u.hello.host);
    c->pid = m.u.hello.pid;
    if (m.u.hello.flags & NTX_HELLO_AGG)
      ntx_check_client_set_agg(co->chk, id);
    uint8_t buf[16];
    size_t n = ntx_enc_welcome(buf, sizeof buf, id, (co->cfg.embedded ? NTX_COORD_EMBEDDED : 0) | NTX_WELCOME_DEV);
    ntx_coord_send(co, id, NTX_MSG_WELCOME, buf, n);
    memset(&c->clk, 0, sizeof c->clk);
    c->clk.next_t = now; /* the first round trip at the next sweep */
    return 0;
  }
  if (c->state == C_QUERY)
    return ntx_coord_query_frame(co, id, &m, now);
  switch (m.type) {
  case NTX_MSG_REGISTER:
    ntx_check_register(co->chk, id, m.u.reg.comm_id, m.u.reg.rank, m.u.reg.nranks,
                       m.u.reg.nccl_version, m.u.reg.env, m.u.reg.env_len, now);
    ntx_check_member_proc(co->chk, id, m.u.reg.comm_id, m.u.reg.rank, m.u.reg.pid, m.u.reg.launcher_rank);
    return 0;
  case NTX_MSG_FP:
  case NTX_MSG_STRICT: {
    /* STRICT entries are decoded into one array (at most NTX_FP_MAX, the
     * decoder checked); FP entries go one by one */
    struct ntx_fp one, *fps = m.type == NTX_MSG_STRICT ? ntr_heap_alloc((m.u.fp.n + 1) * sizeof *fps) : NULL;
    if (!fps) {
      for (uint32_t i = 0; i < m.u.fp.n; i++) {
        ntx_fp_get(m.u.fp.entries, i, &one);
        ntx_check_fp(co->chk, id, &one, now);
      }
      if (m.type == NTX_MSG_STRICT) /* no memory to wait with: checked, not waited on */
        on_reply(co, id, m.u.fp.req_id, NTX_REPLY_UNCHECKED, "");
      return 0;
    }
    for (uint32_t i = 0; i < m.u.fp.n; i++)
      ntx_fp_get(m.u.fp.entries, i, &fps[i]);
    ntx_check_strict(co->chk, id, m.u.fp.req_id, fps, m.u.fp.n, now);
    ntr_heap_free(fps);
    return 0;
  }
  case NTX_MSG_GONE:
    if (ntx_check_gone(co->chk, id, m.u.gone.host, m.u.gone.pid, m.u.gone.launcher_rank, (int)m.u.gone.clean,
                       m.u.gone.pairs, m.u.gone.n, now) < 0) {
      co->st.rejected_malformed++;
      ntx_coord_close(co, id, 1, "GONE from a client that did not say it is a node aggregator");
      return -1;
    }
    return 0;
  case NTX_MSG_PING:
    return 0;
  case NTX_MSG_TIME_ECHO:
  {
    int changed = ntx_clk_echo(&c->clk, m.u.time.stamp, m.u.time.client_ns, ntx_clk_now_ns());
    if (changed >= 0) /* every sample counts for the link check (lateness.c), only a change is sent */
      ntx_check_client_clock(co->chk, id, c->clk.offset, c->clk.uncert, c->clk.samples);
    if (changed == 1) {
      uint8_t buf[24];
      size_t n = ntx_enc_clock(buf, sizeof buf, c->clk.offset, c->clk.uncert, c->clk.samples);
      ntx_coord_send(co, id, NTX_MSG_CLOCK, buf, n);
    }
    return 0;
  }
  case NTX_MSG_BYE:
    ntx_coord_close(co, id, 0, NULL);
    return -1;
  default: /* a coordinator-to-client type sent to us */
    co->st.rejected_malformed++;
    ntx_coord_close(co, id, 1, "message type not allowed from a client");
    return -1;
  }
}

/* Bytes the input buffer must hold for the frame being received: its
 * header first, then the whole frame it announces (grown per frame, never
 * 64 KiB up front).  @return 0 for a pending peer that announces more than
 * NTX_COORD_PENDING_FRAME. */
static size_t in_need(const struct ntx_coord_conn *c) {
  if (c->in_len < NTX_FRAME_HDR)
    return c->state == C_HANDSHAKE ? 512 : 4096;
  uint32_t len = (uint32_t)c->in[4] | (uint32_t)c->in[5] << 8 | (uint32_t)c->in[6] << 16 | (uint32_t)c->in[7] << 24;
  size_t frame = NTX_FRAME_HDR + (size_t)len + NTX_FRAME_MAC;
  if (c->state == C_HANDSHAKE && frame > NTX_COORD_PENDING_FRAME)
    return 0;
  if (frame > NTX_FRAME_MAX)
    frame = NTX_FRAME_MAX; /* the parser refuses it */
  return frame + (c->state == C_HANDSHAKE ? 0 : 4096); /* room for what follows it */
}

/* @return 0, or -1 when the connection was closed. */
static int in_grow(struct ntx_coord *co, uint32_t id) {
  struct ntx_coord_conn *c = &co->conns[id];
  size_t need = in_need(c);
  if (!need) {
    co->st.rejected_auth++;
    ntx_coord_close(co, id, 1, "frame too large before authenticating");
    return -1;
  }
  if (need <= c->in_cap)
    return 0;
  if (co->in_total - c->in_cap + need > co->cfg.in_total_max) {
    co->st.rejected_budget++;
    ntx_coord_close(co, id, 1, "over the coordinator's input memory budget");
    return -1;
  }
  uint8_t *p = ntr_heap_realloc(c->in, need);
  if (!p) {
    ntx_coord_close(co, id, 1, "out of memory");
    return -1;
  }
  co->in_total += need - c->in_cap;
  c->in = p;
  c->in_cap = need;
  return 0;
}

static void conn_read(struct ntx_coord *co, uint32_t id, double now) {
  struct ntx_coord_conn *c = &co->conns[id];
  if (!ntx_fd_is(c->fd, &c->id)) { /* the application closed it (and maybe reused the number) */
    ntx_coord_close(co, id, 1, "its descriptor was closed by the application");
    return;
  }
  for (int rounds = 0; rounds < 16; rounds++) { /* bounded: others get their turn */
    if (in_grow(co, id) < 0)
      return;
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      /* A connection that closes without a byte is a port probe (run's own
       * readiness check, a Kubernetes tcpSocket probe): not worth a line. */
      ntx_coord_close(co, id, 1, c->state == C_READY || c->state == C_QUERY || !c->heard ? NULL
                                                                                      : "closed before authenticating");
      return;
    }
    if (n < 0)
      break;
    c->in_len += (size_t)n;
    c->heard = 1;
    c->last_rx = now;
    size_t off = 0;
    for (;;) {
      struct ntx_frame f;
      /* Before HELLO the key is not known: the frame's tag is checked by
       * hello_auth once HELLO named it. */
      const struct ntx_session *s = c->state == C_HANDSHAKE ? NULL : &c->sess;
      int r = ntx_frame_parse(c->in + off, c->in_len - off, s, NTX_DIR_TO_COORD, c->rx_seq, &f);
      if (r == 0)
        break;
      if (r < 0) {
        if (c->state == C_HANDSHAKE || r == NTX_E_MAC)
          co->st.rejected_auth++;
        else
          co->st.rejected_malformed++;
        ntx_coord_close(co, id, 1, ntx_wire_strerror(r));
        return;
      }
      c->rx_seq++;
      co->st.frames_in++;
      off += (size_t)r;
      if (handle_frame(co, id, &f, now) < 0)
        return;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    /* slowloris guard: the clock runs from the first byte of a frame */
    if (!c->in_len)
      c->partial_since = 0;
    else if (off || !c->partial_since)
      c->partial_since = now;
    if (!c->in_len && c->in_cap > IN_KEEP) { /* an idle client keeps no large buffer */
      co->in_total -= c->in_cap;
      ntr_heap_free(c->in);
      c->in = NULL;
      c->in_cap = 0;
    }
  }
}

static void sweep(struct ntx_coord *co, double now) {
  for (uint32_t id = 0; id < co->cfg.lim.max_clients; id++) {
    struct ntx_coord_conn *c = &co->conns[id];
    if (c->state == C_FREE)
      continue;
    if (c->state == C_QUERY && now - c->opened > QUERY_LIFE_S) {
      ntx_coord_close(co, id, 0, c->answered ? NULL : "status query: no QUERY in time");
    } else if (c->state == C_HANDSHAKE && now - c->opened > co->cfg.hs_timeout_s) {
      co->st.rejected_auth++;
      ntx_coord_close(co, id, 1, "no HELLO in time");
    } else if (c->partial_since && now - c->partial_since > co->cfg.slow_timeout_s) {
      co->st.slow_closed++;
      ntx_coord_close(co, id, 1, "partial frame timed out");
    } else if (c->state == C_READY && now - c->last_rx > co->cfg.dead_timeout_s &&
               ntx_peer_stopped(c->host, c->pid)) {
      /* Stopped, not dead (a debugger, a suspend): waited for; looked at
       * again in a second.  Its PINGs resume with it. */
      if (!c->said_stopped && co->cfg.log)
        ntx_coord_log(co, "connection %u (host %s, pid %d) silent for %.0f s: the process is stopped; waiting for it",
                  id, c->host, (int)c->pid, now - c->last_rx);
      c->said_stopped = 1;
      c->last_rx = now - co->cfg.dead_timeout_s + 1.0;
    } else if (c->state == C_READY && now - c->last_rx > co->cfg.dead_timeout_s) {
      co->st.dead_closed++;
      ntx_coord_close(co, id, 1, "silent past the dead timeout");
    } else if (c->state == C_READY) {
      uint64_t stamp;
      if (ntx_clk_due(&c->clk, now, &stamp)) {
        uint8_t buf[8];
        ntx_coord_send(co, id, NTX_MSG_TIME, buf, ntx_enc_time(buf, sizeof buf, NTX_MSG_TIME, stamp, 0));
      }
    }
  }
}

/* Are the loop's own descriptors still ours?  The application may have
 * closed them (and reused the numbers): then the loop must end without
 * touching them, said once. */
static int loop_fds_ok(struct ntx_coord *co) {
  if (!co->dead && ntx_wake_ok(&co->wake) && ntx_ep_is(co->ep, &co->epid, co->wake.r, EPOLLIN, EV_WAKE) &&
      ntx_fd_is(co->lfd, &co->lid))
    return 1;
  if (!co->said_dead)
    ntr_diag_say("nccltrace: ", "the coordinator's descriptors were closed by the application (listening socket "
                 "fd %d, epoll fd %d); the coordinator stops and its ranks continue unchecked", co->lfd, co->ep);
  co->said_dead = 1;
  co->dead = 1;
  return 0;
}

void ntx_coord_run(struct ntx_coord *co) {
  double last_tick = 0;
  struct epoll_event evs[64];
  pthread_mutex_lock(&co->lock);
  if (!co->chk) {
    struct ntx_check_ops ops = {.verdict = on_verdict, .reply = on_reply};
    co->chk = ntx_check_new(&co->cfg.lim, &ops, co);
  }
  while (!__atomic_load_n(&co->stop, __ATOMIC_ACQUIRE) && co->chk && loop_fds_ok(co)) {
    pthread_mutex_unlock(&co->lock);
    int n = epoll_wait(co->ep, evs, 64, 50);
    pthread_mutex_lock(&co->lock);
    double now = now_s();
    /* This process was stopped (or descheduled for long): nobody could be
     * heard meanwhile, so every silence timer moves on by the time away. */
    double away = ntx_freeze_gap(&co->frz, now, 2.0);
    for (uint32_t id = 0; away > 0 && id < co->cfg.lim.max_clients; id++) {
      struct ntx_coord_conn *c = &co->conns[id];
      c->opened += away;
      c->last_rx += away;
      if (c->partial_since)
        c->partial_since += away;
    }
    for (int i = 0; i < n && !co->dead; i++) {
      uint64_t d = evs[i].data.u64;
      if (d == EV_LISTEN) {
        do_accept(co, now);
      } else if (d == EV_WAKE) {
        ntx_wake_drain(&co->wake); /* the stop flag says why */
      } else if (co->conns[d].state != C_FREE) {
        if (evs[i].events & EPOLLOUT)
          conn_flush(co, (uint32_t)d);
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
          conn_read(co, (uint32_t)d, now);
      }
    }
    listen_wake(co, now);
    if (now - last_tick >= 0.1 && !co->dead) {
      last_tick = now;
      ntx_check_tick(co->chk, now);
      sweep(co, now);
    }
  }
  if (co->dead)
    loop_fds_ok(co); /* the line, once */
  pthread_mutex_unlock(&co->lock);
}

static void *coord_thread(void *arg) {
  ntx_coord_run(arg);
  return NULL;
}

int ntx_coord_start(struct ntx_coord *co) {
  int rc = ntr_thread_create(&co->thread, coord_thread, co);
  if (rc)
    return -rc;
  co->thread_started = 1;
  return 0;
}

void ntx_coord_request_stop(struct ntx_coord *co) {
  int zero = 0;
  __atomic_compare_exchange_n(&co->stop, &zero, 1, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  ntx_wake_poke(&co->wake); /* not ours any more: the loop sees the flag within 50 ms */
}

void ntx_coord_stop(struct ntx_coord *co, double linger_s) {
  if (!co)
    return;
  if (co->thread_started) {
    for (double t = 0; t < linger_s; t += 0.02) {
      pthread_mutex_lock(&co->lock);
      uint32_t n = co->dead ? 0 : co->st.clients; /* a dead loop reads nobody's goodbye */
      pthread_mutex_unlock(&co->lock);
      if (n == 0)
        break;
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    ntx_coord_request_stop(co);
    if (ntx_join_within(co->thread, 0.5) != 0) {
      /* stuck (or descheduled for long): left running with its memory and
       * descriptors; the process is going anyway */
      ntr_diag_say("nccltrace: ", "the coordinator thread did not stop within 0.5 s; left running");
      return;
    }
  }
  for (uint32_t id = 0; co->conns && id < co->cfg.lim.max_clients; id++) {
    if (co->conns[id].state == C_READY) {
      uint8_t b[8];
      size_t n = ntx_enc_bye(b, sizeof b, 1);
      ntx_coord_send(co, id, NTX_MSG_BYE, b, n);
    }
    if (co->conns[id].state != C_FREE) {
      if (co->conns[id].state == C_HANDSHAKE)
        co->pending--;
      co->conns[id].state = C_CLOSING; /* a shutdown is no loss: nobody is told */
      ntx_coord_close(co, id, 0, NULL);
    }
  }
  ntx_fd_close(co->lfd, &co->lid);
  ntx_fd_close(co->ep, &co->epid);
  ntx_wake_close(&co->wake);
  ntx_check_free(co->chk);
  ntr_heap_free(co->conns);
  pthread_mutex_destroy(&co->lock);
  ntr_heap_free(co);
}

void ntx_coord_get_stats(struct ntx_coord *co, struct ntx_coord_stats *st, struct ntx_check_stats *cst) {
  pthread_mutex_lock(&co->lock);
  *st = co->st;
  if (cst) {
    if (co->chk)
      *cst = *ntx_check_get_stats(co->chk);
    else
      memset(cst, 0, sizeof *cst);
  }
  pthread_mutex_unlock(&co->lock);
}
