/* agg.c -- the node-local aggregator (contract: agg.h). */
#include "interpose/exchange/agg.h"
#include "recorder/thread.h"
#include "recorder/heap.h"
#include "interpose/exchange/addr.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/agg_link.h"
#include "interpose/exchange/check.h"
#include "interpose/exchange/clocksync.h"
#include "interpose/exchange/wire.h"
#include "recorder/diag.h"

#define EV_LISTEN UINT64_MAX
#define EV_WAKE (UINT64_MAX - 1)
#define EV_UP (UINT64_MAX - 2)
#define MAX_REQS 4096u      /* strict requests in flight upstream */
#define PING_S 1.0
#define UP_OUT_MAX (16u << 20)
#define HS_TIMEOUT_S 5.0    /* a local connection that does not say HELLO in time is closed */
#define MAX_PENDING 16u     /* local connections before HELLO, all together */
#define BACKOFF_S 0.25      /* the listening socket rests this long when a budget is full */
#define JOIN_S 0.5          /* ntx_agg_stop waits this long for the loop thread */

struct local {
  struct ntx_agg_link l;
  uint32_t gen;
  int32_t pid, lrank;
  uint32_t last_reg;    /* index of the registration that matched last (a cache) */
  int hello_wait;       /* HELLO received, WELCOME held until the root is reachable */
  double opened;        /* accept time: HELLO must come within HS_TIMEOUT_S */
  uint8_t hello_nonce[NTX_NONCE];
};

struct reg {
  uint64_t comm_id;
  int32_t rank, nranks, nccl_version;
  int32_t pid, lrank;   /* the process holding it (its REGISTER's) */
  uint32_t local, gen, env_len;
  int live;
  char *env;
};

struct req {
  uint32_t up_id, local, gen, local_id;
  int used;
};

struct ntx_agg {
  struct ntx_agg_cfg cfg;
  char host[NTX_HOST], job[NTX_JOB], name[64];
  int lfd, ep;
  struct ntx_fdid lid, epid;
  struct ntx_wake wake;
  int listen_off, dead, said_dead, said_uid;
  double listen_resume;
  uint32_t pending;     /* locals accepted, no HELLO yet */
  struct local *locals;
  uint32_t next_local;
  struct reg *regs;
  uint32_t nregs, capregs;
  struct req reqs[MAX_REQS];
  uint32_t next_req;
  uint32_t cur_local;   /* the local whose frames on_local_frame is given */
  /* upstream */
  struct ntx_agg_link up;
  int up_connecting;
  uint32_t up_key_try;  /* which of cfg.keys the next upstream connection names */
  /* who the root said it is in CHALLENGE (believed once WELCOME verified) */
  char up_chal_host[NTX_HOST], up_root_host[NTX_HOST];
  int32_t up_chal_pid, up_root_pid;
  uint32_t up_chal_flags, up_root_flags;
  uint32_t up_welcome_flags;  /* the root's WELCOME flags: NTX_WELCOME_DEV passed on to our clients */
  int up_bye;           /* the root said BYE: a clean shutdown, not a loss */
  int up_hello;         /* our HELLO went up on this connection: the root may count us a client */
  double up_next_try, up_backoff, up_last_tx, last_sweep;
  /* the FP batch: payload of one FP frame being filled */
  uint8_t *batch;
  uint8_t *scratch;     /* NTX_FRAME_MAX_PAYLOAD: REGISTER and STRICT payloads (per aggregator:
                         * several aggregators may run in one process) */
  uint32_t nbatch;
  double batch_t0;
  uint8_t clock[24];    /* the root's last CLOCK for this host, passed on to every local */
  size_t clock_len;
  pthread_t thread;
  int thread_started, stop;
  pthread_mutex_t lock;
  struct ntx_agg_stats st;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ntx_agg_default_cfg(struct ntx_agg_cfg *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->host = "";
  cfg->job = "";
  cfg->flush_s = 0.005;
  cfg->max_local = 512;
  cfg->lrank = -1;
}

void ntx_agg_name(const struct ntx_key *key, const char *job, char *out, size_t len) {
  struct ntx_sip s;
  uint32_t uid = (uint32_t)getuid();
  ntx_sip_init(&s, key);
  ntx_sip_update(&s, "nccltrace-agg", 13);
  ntx_sip_update(&s, &uid, sizeof uid);
  ntx_sip_update(&s, job ? job : "", job ? strlen(job) : 0);
  snprintf(out, len, "nccltrace-agg-%016llx", (unsigned long long)ntx_sip_final(&s));
}

/* The peer of a Unix socket runs as our user (SO_PEERCRED, as D-Bus and
 * systemd check): another user who bound or connects to our name first is
 * refused.  @return 1 when it does. */
static int peer_is_us(int fd, int32_t *pid, uint32_t *uid) {
  struct ucred cr;
  socklen_t l = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 || l != sizeof cr) {
    *pid = -1;
    *uid = (uint32_t)-1;
    return 0;
  }
  *pid = (int32_t)cr.pid;
  *uid = (uint32_t)cr.uid;
  return cr.uid == geteuid();
}

static socklen_t abstract_addr(const char *name, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  size_t n = strnlen(name, sizeof sa->sun_path - 2);
  memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int ntx_agg_connect_peer(const char *name, int32_t *peer_pid, uint32_t *peer_uid) {
  struct sockaddr_un sa;
  socklen_t sl = abstract_addr(name, &sa);
  int32_t pid;
  uint32_t uid;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  /* EAGAIN: the backlog is full and we are not connected: retry later */
  if (connect(fd, (struct sockaddr *)&sa, sl) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (!peer_is_us(fd, &pid, &uid)) {
    close(fd);
    if (peer_pid)
      *peer_pid = pid;
    if (peer_uid)
      *peer_uid = uid;
    return -EACCES;
  }
  return fd;
}

int ntx_agg_connect(const char *name) { return ntx_agg_connect_peer(name, NULL, NULL); }

int ntx_agg_listen(struct ntx_agg **out, const struct ntx_agg_cfg *cfg, char *err, size_t errlen) {
  *out = NULL;
  struct sockaddr_un sa;
  socklen_t sl = abstract_addr(cfg->name, &sa);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "aggregator socket: %s", strerror(errno));
    return -errno;
  }
  if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 1024) != 0) {
    int e = errno;
    close(fd);
    if (e != EADDRINUSE)
      snprintf(err, errlen, "aggregator cannot listen on @%s: %s", cfg->name, strerror(e));
    return -e;
  }
  struct ntx_agg *a = ntr_heap_calloc(1, sizeof *a);
  if (!a) {
    close(fd);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  a->cfg = *cfg;
  a->cfg.name = NULL; /* not kept: the caller's string */
  snprintf(a->name, sizeof a->name, "%s", cfg->name);
  if (!a->cfg.max_local)
    a->cfg.max_local = 512;
  if (a->cfg.flush_s <= 0)
    a->cfg.flush_s = 0.005;
  snprintf(a->host, sizeof a->host, "%s", cfg->host ? cfg->host : "");
  if (!a->host[0])
    gethostname(a->host, sizeof a->host - 1);
  snprintf(a->job, sizeof a->job, "%s", cfg->job ? cfg->job : "");
  a->lfd = fd;
  ntx_fd_take(fd, &a->lid);
  a->up.fd = -1;
  a->wake.r = a->wake.w = -1;
  pthread_mutex_init(&a->lock, NULL);
  a->locals = ntr_heap_calloc(a->cfg.max_local, sizeof *a->locals);
  a->batch = ntr_heap_alloc(NTX_FRAME_MAX_PAYLOAD);
  a->scratch = ntr_heap_alloc(NTX_FRAME_MAX_PAYLOAD);
  a->ep = epoll_create1(EPOLL_CLOEXEC);
  ntx_fd_take(a->ep, &a->epid);
  if (!a->locals || !a->batch || !a->scratch || a->ep < 0 || ntx_wake_open(&a->wake) < 0) {
    snprintf(err, errlen, "aggregator setup failed");
    ntx_agg_stop(a);
    return -ENOMEM;
  }
  for (uint32_t i = 0; i < a->cfg.max_local; i++)
    a->locals[i].l.fd = -1;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
  epoll_ctl(a->ep, EPOLL_CTL_ADD, a->lfd, &ev);
  ev.data.u64 = EV_WAKE;
  epoll_ctl(a->ep, EPOLL_CTL_ADD, a->wake.r, &ev);
  *out = a;
  return 0;
}

/* ------------------------------------------------------------ upstream -- */

static void up_send(struct ntx_agg *a, uint8_t type, const void *p, size_t n, double now) {
  if (a->up.state != NTX_AGG_L_READY)
    return;
  ntx_agg_link_send(&a->up, type, p, n);
  a->up_last_tx = now;
}

static void batch_flush(struct ntx_agg *a, double now) {
  if (!a->nbatch || a->up.state != NTX_AGG_L_READY)
    return;
  size_t n = ntx_enc_fp_head(a->batch, NTX_FRAME_MAX_PAYLOAD, 0, a->nbatch);
  up_send(a, NTX_MSG_FP, a->batch, n, now);
  a->st.fps_up += a->nbatch;
  a->st.frames_up++;
  a->nbatch = 0;
}

static void up_register(struct ntx_agg *a, const struct reg *r, double now) {
  uint8_t *buf = a->scratch;
  size_t n = ntx_enc_register(buf, NTX_FRAME_MAX_PAYLOAD, r->comm_id, r->rank, r->nranks, r->nccl_version,
                              r->pid, r->lrank, r->env ? r->env : "", r->env_len);
  up_send(a, NTX_MSG_REGISTER, buf, n, now);
}

static void to_local(struct ntx_agg *a, uint32_t i, uint8_t type, const void *p, size_t n);

/* The root was reachable and its connection closed without BYE: this
 * host's processes hear nothing from it any more, and would not know why.
 * Each is told once per loss, as a client connected straight to it is. */
static void up_tell_lost(struct ntx_agg *a) {
  char text[320];
  uint32_t kind = NTX_V_NOTE;
  if (a->up_root_flags & 1u) { /* NTX_COORD_EMBEDDED: the root lived in launcher rank 0's process */
    kind = NTX_V_PEER_LOST;
    snprintf(text, sizeof text,
             "lost rank 0 (host %s, pid %d), which hosted the coordinator: the connection of this host's node "
             "aggregator to it closed without goodbye (killed, crashed, hung or cut off); checking is off "
             "(retrying)",
             a->up_root_host, (int)a->up_root_pid);
  } else {
    snprintf(text, sizeof text,
             "lost the coordinator at %s:%s (host %s, pid %d) through this host's node aggregator: its "
             "connection closed without goodbye; ranks continue unchecked (retrying)",
             a->cfg.up_host ? a->cfg.up_host : "?", a->cfg.up_port ? a->cfg.up_port : "?", a->up_root_host,
             (int)a->up_root_pid);
  }
  uint8_t buf[64 + sizeof text];
  size_t n = ntx_enc_verdict(buf, sizeof buf, kind, 0, 0, kind == NTX_V_PEER_LOST ? 0 : -1, a->up_root_pid,
                             "lost", text);
  for (uint32_t i = 0; i < a->cfg.max_local; i++)
    to_local(a, i, NTX_MSG_VERDICT, buf, n);
}

static void up_lost(struct ntx_agg *a, double now) {
  if (a->up.state == NTX_AGG_L_READY && !a->up_bye)
    up_tell_lost(a);
  a->up_bye = 0;
  if (a->up.state == NTX_AGG_L_HANDSHAKE)
    a->up_key_try++; /* not welcomed: the root may not hold that key, try the next */
  if (a->up.fd >= 0 && ntx_fd_is(a->up.fd, &a->up.id))
    epoll_ctl(a->ep, EPOLL_CTL_DEL, a->up.fd, NULL);
  ntx_agg_link_close(&a->up);
  a->up_connecting = 0;
  a->nbatch = 0; /* those fingerprints go unchecked: the root never saw them */
  a->up_backoff = a->up_backoff < 0.05 ? 0.05 : a->up_backoff * 2 > 1 ? 1 : a->up_backoff * 2;
  a->up_next_try = now + a->up_backoff;
  for (uint32_t i = 0; i < MAX_REQS; i++)
    a->reqs[i].used = 0; /* their clients time out, as with a lost coordinator */
}

static void up_connect(struct ntx_agg *a, double now) {
  struct ntx_addr ad;
  a->up_next_try = now + (a->up_backoff < 0.05 ? 0.05 : a->up_backoff);
  struct ntx_key key = a->cfg.key;
  if (a->cfg.keys) { /* no key yet: nothing to prove who we are with */
    uint32_t nk = ntx_keyring_count(a->cfg.keys);
    if (!nk)
      return;
    ntx_keyring_get(a->cfg.keys, a->up_key_try % nk, &key);
  }
  if (!a->cfg.up_host || ntx_addr_get(a->cfg.up_host, a->cfg.up_port, &ad) != 0)
    return;
  int fd = socket(ad.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)&ad.sa, ad.len) == 0 || errno == EINPROGRESS) {
      ntx_agg_link_init(&a->up, fd, 0, &key, UP_OUT_MAX);
      a->up.hello_flags = NTX_HELLO_AGG;
      a->up_hello = 0;
      a->up_connecting = 1;
      struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = EV_UP};
      epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev);
    } else {
      close(fd);
    }
  }
}

static void to_local(struct ntx_agg *a, uint32_t i, uint8_t type, const void *p, size_t n) {
  if (a->locals[i].l.state == NTX_AGG_L_READY)
    ntx_agg_link_send(&a->locals[i].l, type, p, n);
}

/* WELCOME a local client whose HELLO came.  Held while the root is not
 * reachable: a client not welcomed keeps its records in its ring and its
 * strict calls waiting, as it would without a connection, instead of
 * having them dropped or answered "unchecked" here. */
static void local_welcome(struct ntx_agg *a, uint32_t i) {
  struct local *lc = &a->locals[i];
  if (!lc->hello_wait || a->up.state != NTX_AGG_L_READY)
    return;
  struct ntx_msg m;
  memset(&m, 0, sizeof m);
  memcpy(m.u.hello.nonce, lc->hello_nonce, NTX_NONCE);
  lc->hello_wait = 0;
  ntx_agg_link_on_hello(&lc->l, &m, i, a->up_welcome_flags & NTX_WELCOME_DEV);
  a->st.locals++;
  if (a->clock_len) /* the processes of a host share its clock, and so its offset */
    to_local(a, i, NTX_MSG_CLOCK, a->clock, a->clock_len);
}

static int on_up_frame(void *ctx, struct ntx_agg_link *l, const struct ntx_frame *f) {
  struct ntx_agg *a = ctx;
  struct ntx_msg m;
  double now = now_s();
  if (ntx_msg_decode(f, &m) < 0) {
    up_lost(a, now);
    return -1;
  }
  if (l->state == NTX_AGG_L_HANDSHAKE) {
    if (m.type == NTX_MSG_CHALLENGE) {
      snprintf(a->up_chal_host, sizeof a->up_chal_host, "%s", m.u.challenge.host);
      a->up_chal_pid = m.u.challenge.pid;
      a->up_chal_flags = m.u.challenge.flags;
      ntx_agg_link_on_challenge(l, f, (int32_t)getpid(), a->cfg.lrank, a->host, a->job);
      a->up_hello = 1;
      return 0;
    }
    if (m.type != NTX_MSG_WELCOME) {
      up_lost(a, now);
      return -1;
    }
    l->state = NTX_AGG_L_READY;
    memcpy(a->up_root_host, a->up_chal_host, sizeof a->up_root_host);
    a->up_root_pid = a->up_chal_pid;
    a->up_root_flags = a->up_chal_flags;
    a->up_welcome_flags = m.u.welcome.flags;
    a->up_backoff = 0;
    a->st.up_connects++;
    for (uint32_t i = 0; i < a->nregs; i++) /* the root knows nothing of us yet */
      if (a->regs[i].live)
        up_register(a, &a->regs[i], now);
    for (uint32_t i = 0; i < a->cfg.max_local; i++)
      local_welcome(a, i);
    return 0;
  }
  if (m.type == NTX_MSG_VERDICT) {
    /* Fan out: once to every local client with a rank in that comm (all of
     * them for a verdict without a comm). */
    a->st.verdicts_in++;
    if (!a->st.first_mismatch_t && m.u.verdict.kind == NTX_V_MISMATCH)
      a->st.first_mismatch_t = now;
    size_t n = f->len;
    const uint8_t *p = f->payload;
    uint64_t comm = m.u.verdict.comm_id;
    for (uint32_t i = 0; i < a->cfg.max_local; i++) {
      if (a->locals[i].l.state != NTX_AGG_L_READY)
        continue;
      int hit = comm == 0;
      for (uint32_t k = 0; k < a->nregs && !hit; k++)
        hit = a->regs[k].live && a->regs[k].local == i && a->regs[k].gen == a->locals[i].gen &&
              a->regs[k].comm_id == comm;
      if (hit) {
        to_local(a, i, NTX_MSG_VERDICT, p, n);
        a->st.verdicts_out++;
      }
    }
  } else if (m.type == NTX_MSG_REPLY) {
    struct req *r = &a->reqs[m.u.reply.req_id % MAX_REQS];
    if (r->used && r->up_id == m.u.reply.req_id) {
      r->used = 0;
      if (a->locals[r->local].gen == r->gen) {
        uint8_t buf[16 + NTX_TEXT_MAX];
        char text[NTX_TEXT_MAX + 1];
        uint32_t tl = m.u.reply.text_len < NTX_TEXT_MAX ? m.u.reply.text_len : NTX_TEXT_MAX;
        memcpy(text, m.u.reply.text, tl);
        text[tl] = '\0';
        size_t n = ntx_enc_reply(buf, sizeof buf, r->local_id, m.u.reply.status, text);
        to_local(a, r->local, NTX_MSG_REPLY, buf, n);
        a->st.replies_out++;
      }
    }
  } else if (m.type == NTX_MSG_TIME) {
    /* The root measures this host's clock through us: answered at once. */
    uint8_t buf[16];
    up_send(a, NTX_MSG_TIME_ECHO, buf,
            ntx_enc_time(buf, sizeof buf, NTX_MSG_TIME_ECHO, m.u.time.stamp, ntx_clk_now_ns()), now);
  } else if (m.type == NTX_MSG_CLOCK) {
    memcpy(a->clock, f->payload, sizeof a->clock);
    a->clock_len = sizeof a->clock;
    for (uint32_t i = 0; i < a->cfg.max_local; i++)
      to_local(a, i, NTX_MSG_CLOCK, a->clock, a->clock_len);
  } else if (m.type == NTX_MSG_BYE) {
    a->up_bye = 1;
    up_lost(a, now); /* the root shut down: retry, as a client does */
    return -1;
  } else {
    up_lost(a, now);
    return -1;
  }
  return 0;
}

/* --------------------------------------------------------------- local -- */

/* GONE upstream for the registrations of local i (pre: still live). */
static void up_gone(struct ntx_agg *a, uint32_t i, int clean, double now) {
  struct local *lc = &a->locals[i];
  if (a->up.state != NTX_AGG_L_READY)
    return; /* the root lost us meanwhile: it marked all our ranks already */
  batch_flush(a, now); /* its last fingerprints before its departure */
  uint8_t *buf = a->scratch;
  uint32_t n = 0;
  for (uint32_t k = 0; k <= a->nregs; k++) {
    if (n == NTX_GONE_MAX || (k == a->nregs && n)) {
      size_t len = ntx_enc_gone_head(buf, NTX_FRAME_MAX_PAYLOAD, lc->pid, lc->lrank, (uint32_t)clean, a->host, n);
      up_send(a, NTX_MSG_GONE, buf, len, now);
      n = 0;
    }
    if (k < a->nregs && a->regs[k].live && a->regs[k].local == i && a->regs[k].gen == lc->gen)
      ntx_gone_put(buf + NTX_GONE_FIXED, n++, a->regs[k].comm_id, a->regs[k].rank);
  }
}

static void local_close(struct ntx_agg *a, uint32_t i, int lost) {
  struct local *lc = &a->locals[i];
  int was_ready = lc->l.state == NTX_AGG_L_READY;
  if (lc->l.state == NTX_AGG_L_HANDSHAKE && !lc->hello_wait)
    a->pending--;
  if (ntx_fd_is(lc->l.fd, &lc->l.id)) /* else: the application's now, left alone */
    epoll_ctl(a->ep, EPOLL_CTL_DEL, lc->l.fd, NULL);
  ntx_agg_link_close(&lc->l);
  if (!was_ready)
    return;
  a->st.locals--;
  if (lost)
    a->st.local_lost++;
  else
    a->st.local_bye++;
  up_gone(a, i, !lost, now_s());
  uint64_t comm = 0;
  int32_t rank = -1;
  for (uint32_t k = 0; k < a->nregs; k++)
    if (a->regs[k].live && a->regs[k].local == i && a->regs[k].gen == lc->gen) {
      a->regs[k].live = 0;
      if (!comm) {
        comm = a->regs[k].comm_id;
        rank = a->regs[k].rank;
      }
    }
  lc->gen++;
  if (!lost)
    return;
  /* The root tells the other hosts (GONE above); this host's other
   * processes hear it from here, without the round trip. */
  char text[256];
  if (lc->lrank >= 0)
    snprintf(text, sizeof text,
             "lost rank %d (host %s, pid %d): its connection closed without goodbye (killed, crashed or "
             "hung)%s",
             (int)lc->lrank, a->host, (int)lc->pid, comm ? "" : " (it had no communicator)");
  else
    snprintf(text, sizeof text,
             "lost a process (host %s, pid %d): its connection closed without goodbye (killed, crashed or "
             "hung)%s",
             a->host, (int)lc->pid, comm ? "" : " (it had no communicator)");
  uint8_t buf[64 + 256];
  size_t n = ntx_enc_verdict(buf, sizeof buf, NTX_V_PEER_LOST, comm, 0, rank, lc->pid, "lost", text);
  for (uint32_t o = 0; o < a->cfg.max_local; o++)
    to_local(a, o, NTX_MSG_VERDICT, buf, n);
}

static void listen_rest(struct ntx_agg *a, double now) {
  if (!a->listen_off && ntx_fd_is(a->lfd, &a->lid))
    epoll_ctl(a->ep, EPOLL_CTL_DEL, a->lfd, NULL);
  a->listen_off = 1;
  a->listen_resume = now + BACKOFF_S;
}

static void listen_wake(struct ntx_agg *a, double now) {
  if (!a->listen_off || now < a->listen_resume)
    return;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN};
  if (ntx_fd_is(a->lfd, &a->lid))
    epoll_ctl(a->ep, EPOLL_CTL_ADD, a->lfd, &ev);
  a->listen_off = 0;
}

/* Accept while the budget allows (coord.h says the same of the
 * coordinator): MAX_PENDING peers before HELLO, ntx_fd_reserve() descriptors left
 * to the process; else, or on EMFILE, the listening socket rests. */
static void local_accept(struct ntx_agg *a) {
  double now = now_s();
  if (!ntx_fd_is(a->lfd, &a->lid)) {
    a->dead = 1;
    return;
  }
  long room = -1;
  for (;;) {
    if (room < 0)
      room = ntx_fd_headroom(); /* once per call: a call accepts at most MAX_PENDING */
    if (a->pending >= MAX_PENDING || room <= ntx_fd_reserve()) {
      listen_rest(a, now);
      return;
    }
    int fd = accept4(a->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        listen_rest(a, now);
      return;
    }
    room--;
    int32_t pid;
    uint32_t uid;
    if (!peer_is_us(fd, &pid, &uid)) {
      if (!a->said_uid)
        ntr_diag_say("nccltrace: ", "node aggregator @%s: refused a connection from pid %d of uid %u (not "
                     "ours: only processes of uid %u are served)",
                a->name, (int)pid, (unsigned)uid, (unsigned)geteuid());
      a->said_uid = 1;
      a->st.refused_uid++;
      close(fd);
      continue;
    }
    uint32_t id = a->cfg.max_local;
    for (uint32_t k = 0; k < a->cfg.max_local; k++) {
      uint32_t i = (a->next_local + k) % a->cfg.max_local;
      if (a->locals[i].l.fd < 0) {
        id = i;
        break;
      }
    }
    if (id == a->cfg.max_local) {
      close(fd);
      continue;
    }
    a->next_local = id + 1;
    struct local *lc = &a->locals[id];
    uint32_t gen = lc->gen;
    memset(lc, 0, sizeof *lc);
    lc->gen = gen;
    lc->opened = now;
    ntx_agg_link_init(&lc->l, fd, 1, &a->cfg.key, 1u << 20);
    a->pending++;
    lc->l.keys = a->cfg.keys;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = id};
    epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev);
    ntx_agg_link_accept(&lc->l, NTX_CHAL_AGG, (int32_t)getpid(), a->host);
    a->st.local_accepted++;
  }
}

static int reg_of(struct ntx_agg *a, uint32_t i, uint64_t comm, int32_t rank) {
  struct local *lc = &a->locals[i];
  uint32_t k = lc->last_reg;
  if (k < a->nregs && a->regs[k].live && a->regs[k].local == i && a->regs[k].gen == lc->gen &&
      a->regs[k].comm_id == comm && a->regs[k].rank == rank)
    return 1;
  for (k = 0; k < a->nregs; k++)
    if (a->regs[k].live && a->regs[k].local == i && a->regs[k].gen == lc->gen &&
        a->regs[k].comm_id == comm && a->regs[k].rank == rank) {
      lc->last_reg = k;
      return 1;
    }
  return 0;
}

static int on_local_frame(void *ctx, struct ntx_agg_link *l, const struct ntx_frame *f) {
  struct ntx_agg *a = ctx;
  uint32_t i = a->cur_local;
  struct local *lc = &a->locals[i];
  struct ntx_msg m;
  double now = now_s();
  a->st.frames_in++;
  if (ntx_msg_decode(f, &m) < 0) {
    local_close(a, i, 1);
    return -1;
  }
  if (l->state == NTX_AGG_L_HANDSHAKE) {
    if (m.type != NTX_MSG_HELLO) {
      local_close(a, i, 1);
      return -1;
    }
    if (lc->hello_wait || ntx_agg_link_hello_auth(l, f, &m) != 0) { /* a second HELLO, or not one of our keys */
      local_close(a, i, 1);
      return -1;
    }
    lc->pid = m.u.hello.pid;
    lc->lrank = m.u.hello.launcher_rank;
    memcpy(lc->hello_nonce, m.u.hello.nonce, NTX_NONCE);
    lc->hello_wait = 1;
    a->pending--;
    local_welcome(a, i);
    return 0;
  }
  switch (m.type) {
  case NTX_MSG_REGISTER: {
    if (a->nregs == a->capregs) {
      uint32_t nc = a->capregs ? 2 * a->capregs : 64;
      struct reg *p = ntr_heap_realloc(a->regs, nc * sizeof *p);
      if (!p)
        return 0;
      a->regs = p;
      a->capregs = nc;
    }
    struct reg *r = &a->regs[a->nregs++];
    memset(r, 0, sizeof *r);
    r->comm_id = m.u.reg.comm_id;
    r->rank = m.u.reg.rank;
    r->nranks = m.u.reg.nranks;
    r->nccl_version = m.u.reg.nccl_version;
    r->pid = lc->pid; /* its HELLO's: the coordinator names the rank's process by it */
    r->lrank = lc->lrank;
    r->local = i;
    r->gen = lc->gen;
    r->live = 1;
    r->env_len = m.u.reg.env_len;
    r->env = r->env_len ? ntr_heap_alloc(r->env_len) : NULL;
    if (r->env)
      memcpy(r->env, m.u.reg.env, r->env_len);
    else
      r->env_len = 0;
    batch_flush(a, now); /* keep the order: fingerprints after their registration */
    up_register(a, r, now);
    return 0;
  }
  case NTX_MSG_FP:
    for (uint32_t k = 0; k < m.u.fp.n; k++) {
      const uint8_t *e = m.u.fp.entries + (size_t)k * NTX_FP_WIRE;
      struct ntx_fp fp;
      ntx_fp_get(m.u.fp.entries, k, &fp);
      a->st.fps_in++;
      if (!reg_of(a, i, fp.comm_id, fp.rank)) {
        a->st.fps_refused++;
        continue;
      }
      if (fp.dir == NTX_FP_DEV && !(a->up_welcome_flags & NTX_WELCOME_DEV))
        continue; /* a root that does not take them (welcomed by one that did) */
      if (a->up.state != NTX_AGG_L_READY) {
        a->st.fps_dropped++; /* as a client without a connection: unchecked */
        continue;
      }
      if (!a->nbatch)
        a->batch_t0 = now;
      memcpy(a->batch + 8 + (size_t)a->nbatch * NTX_FP_WIRE, e, NTX_FP_WIRE);
      if (++a->nbatch == NTX_FP_MAX)
        batch_flush(a, now);
    }
    return 0;
  case NTX_MSG_STRICT: {
    for (uint32_t k = 0; k < m.u.fp.n; k++) {
      struct ntx_fp fp;
      ntx_fp_get(m.u.fp.entries, k, &fp);
      if (!reg_of(a, i, fp.comm_id, fp.rank)) {
        a->st.fps_refused++;
        uint8_t buf[64];
        size_t n = ntx_enc_reply(buf, sizeof buf, m.u.fp.req_id, NTX_REPLY_UNCHECKED, "");
        ntx_agg_link_send(l, NTX_MSG_REPLY, buf, n);
        return 0;
      }
    }
    uint32_t up_id = ++a->next_req;
    struct req *r = &a->reqs[up_id % MAX_REQS];
    if (r->used || a->up.state != NTX_AGG_L_READY) { /* full, or nobody to ask */
      uint8_t buf[64];
      size_t n = ntx_enc_reply(buf, sizeof buf, m.u.fp.req_id, NTX_REPLY_UNCHECKED, "");
      ntx_agg_link_send(l, NTX_MSG_REPLY, buf, n);
      return 0;
    }
    *r = (struct req){.up_id = up_id, .local = i, .gen = lc->gen, .local_id = m.u.fp.req_id, .used = 1};
    batch_flush(a, now);
    /* the entries are forwarded verbatim; only req_id changes */
    uint8_t *buf = a->scratch;
    size_t n = ntx_enc_fp_head(buf, NTX_FRAME_MAX_PAYLOAD, up_id, m.u.fp.n);
    memcpy(buf + 8, m.u.fp.entries, (size_t)m.u.fp.n * NTX_FP_WIRE);
    up_send(a, NTX_MSG_STRICT, buf, n, now);
    a->st.strict_up++;
    return 0;
  }
  case NTX_MSG_PING:
    return 0;
  case NTX_MSG_BYE:
    local_close(a, i, 0);
    return -1;
  default:
    local_close(a, i, 1);
    return -1;
  }
}

/* ---------------------------------------------------------------- loop -- */

static void agg_run(struct ntx_agg *a) {
  struct epoll_event evs[64];
  pthread_mutex_lock(&a->lock);
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
    if (a->dead || !ntx_wake_ok(&a->wake) || !ntx_ep_is(a->ep, &a->epid, a->wake.r, EPOLLIN, EV_WAKE) ||
        !ntx_fd_is(a->lfd, &a->lid)) {
      /* the application closed our descriptors: stop, touching none of them */
      ntr_diag_say("nccltrace: ", "the node aggregator's descriptors were closed by the application (listening "
                   "socket fd %d, epoll fd %d); it stops", a->lfd, a->ep);
      a->dead = 1;
      break;
    }
    double now = now_s();
    int timeout = 50;
    if (a->nbatch) {
      double left = a->batch_t0 + a->cfg.flush_s - now;
      timeout = left <= 0 ? 0 : (int)(left * 1000) + 1;
    }
    pthread_mutex_unlock(&a->lock);
    int n = epoll_wait(a->ep, evs, 64, timeout);
    pthread_mutex_lock(&a->lock);
    now = now_s();
    for (int k = 0; k < n; k++) {
      uint64_t d = evs[k].data.u64;
      if (d == EV_LISTEN) {
        local_accept(a);
      } else if (d == EV_WAKE) {
        ntx_wake_drain(&a->wake); /* the stop flag says why */
      } else if (d == EV_UP) {
        if (a->up.fd < 0)
          continue;
        if (a->up_connecting && (evs[k].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
          int err = 0;
          socklen_t el = sizeof err;
          getsockopt(a->up.fd, SOL_SOCKET, SO_ERROR, &err, &el);
          if (err) {
            up_lost(a, now);
            continue;
          }
          a->up_connecting = 0;
          struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_UP};
          epoll_ctl(a->ep, EPOLL_CTL_MOD, a->up.fd, &ev);
        }
        if (evs[k].events & EPOLLOUT)
          ntx_agg_link_flush(&a->up);
        if (evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          int r = ntx_agg_link_read(&a->up, on_up_frame, a);
          if (r < 0)
            up_lost(a, now);
        }
      } else if (d < a->cfg.max_local && a->locals[d].l.fd >= 0) {
        a->cur_local = (uint32_t)d;
        int r = ntx_agg_link_read(&a->locals[d].l, on_local_frame, a);
        if (r < 0)
          local_close(a, (uint32_t)d, 1);
      }
    }
    listen_wake(a, now);
    if (a->up.fd < 0 && now >= a->up_next_try)
      up_connect(a, now);
    if (now - a->last_sweep > 0.1) { /* anybody on the host can connect to an abstract name */
      a->last_sweep = now;
      for (uint32_t i = 0; i < a->cfg.max_local; i++)
        if (a->locals[i].l.state == NTX_AGG_L_HANDSHAKE && !a->locals[i].hello_wait &&
            now - a->locals[i].opened > HS_TIMEOUT_S)
          local_close(a, i, 1);
    }
    if (a->nbatch && now - a->batch_t0 >= a->cfg.flush_s)
      batch_flush(a, now);
    if (a->up.state == NTX_AGG_L_READY) {
      if (now - a->up_last_tx >= PING_S)
        up_send(a, NTX_MSG_PING, NULL, 0, now);
      if (a->up.out_len) { /* a slow root: wait for the socket, bounded by UP_OUT_MAX */
        int r = ntx_agg_link_flush(&a->up);
        if (r < 0)
          up_lost(a, now);
      }
    }
    a->st.up_ready = a->up.state == NTX_AGG_L_READY;
    if (a->cfg.poll_s > 0 && n > 0 && !__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
      pthread_mutex_unlock(&a->lock);
      struct timespec ts = {0, (long)(a->cfg.poll_s * 1e9)};
      nanosleep(&ts, NULL);
      pthread_mutex_lock(&a->lock);
    }
  }
  pthread_mutex_unlock(&a->lock);
}

static void *agg_thread(void *arg) {
  agg_run(arg);
  return NULL;
}

int ntx_agg_start(struct ntx_agg *a) {
  int rc = ntr_thread_create(&a->thread, agg_thread, a);
  if (rc)
    return -rc;
  a->thread_started = 1;
  return 0;
}

void ntx_agg_stop(struct ntx_agg *a) {
  if (!a)
    return;
  if (a->thread_started) {
    __atomic_store_n(&a->stop, 1, __ATOMIC_RELEASE);
    ntx_wake_poke(&a->wake); /* not ours any more: the loop sees the flag within 50 ms */
    if (ntx_join_within(a->thread, JOIN_S) != 0) {
      ntr_diag_say("nccltrace: ", "the node aggregator thread did not stop within %.1f s; left running", JOIN_S);
      return; /* its memory and descriptors stay with it */
    }
  }
  /* Release the name first: a client told to hand over binds it at once;
   * while we hold it, its connect would wait in a backlog nobody accepts. */
  ntx_fd_close(a->lfd, &a->lid);
  a->lfd = -1;
  /* The loop is gone; what the clients sent last is still in the sockets:
   * the hosting process's own BYE (a clean GONE upstream) above all. */
  for (uint32_t i = 0; a->locals && i < a->cfg.max_local; i++)
    if (a->locals[i].l.fd >= 0) {
      a->cur_local = i;
      if (ntx_agg_link_read(&a->locals[i].l, on_local_frame, a) < 0)
        local_close(a, i, 1);
    }
  uint8_t b[8];
  /* The root counts us a client from our HELLO on, before its WELCOME
   * reaches us: closing in between, without the BYE that only a welcomed
   * link can send, reads as a lost host at every rank (an aggregator
   * elected at a hand-over by a process that exits at once).  So a
   * handshake whose HELLO went up is finished first, bounded: ~200 ms. */
  for (int t = 0; t < 20 && a->up.fd >= 0 && a->up.state == NTX_AGG_L_HANDSHAKE && a->up_hello; t++) {
    ntx_agg_link_flush(&a->up);
    struct pollfd p = {.fd = a->up.fd, .events = POLLIN};
    if (poll(&p, 1, 10) > 0 && ntx_agg_link_read(&a->up, on_up_frame, a) < 0) {
      if (a->up.fd >= 0)
        up_lost(a, now_s());
      break;
    }
  }
  if (a->up.fd >= 0) {
    batch_flush(a, now_s());
    if (a->up.state == NTX_AGG_L_READY) {
      /* a clean BYE: the ranks it still holds are "exited" at the root until
       * their processes register again through the next aggregator */
      size_t bn = ntx_enc_bye(b, sizeof b, NTX_BYE_EXIT);
      ntx_agg_link_send(&a->up, NTX_MSG_BYE, b, bn);
      for (int t = 0; t < 20 && a->up.out_len; t++) { /* bounded: ~200 ms */
        struct pollfd p = {.fd = a->up.fd, .events = POLLOUT};
        poll(&p, 1, 10);
        if (ntx_agg_link_flush(&a->up) < 0)
          break;
      }
    }
    ntx_agg_link_close(&a->up);
  }
  size_t n = ntx_enc_bye(b, sizeof b, NTX_BYE_HANDOVER);
  for (uint32_t i = 0; a->locals && i < a->cfg.max_local; i++)
    if (a->locals[i].l.fd >= 0) {
      to_local(a, i, NTX_MSG_BYE, b, n);
      ntx_agg_link_close(&a->locals[i].l);
    }
  for (uint32_t k = 0; k < a->nregs; k++)
    ntr_heap_free(a->regs[k].env);
  ntr_heap_free(a->regs);
  ntr_heap_free(a->locals);
  ntr_heap_free(a->batch);
  ntr_heap_free(a->scratch);
  ntx_fd_close(a->lfd, &a->lid);
  ntx_fd_close(a->ep, &a->epid);
  ntx_wake_close(&a->wake);
  pthread_mutex_destroy(&a->lock);
  ntr_heap_free(a);
}

void ntx_agg_forget_in_child(struct ntx_agg *a) {
  if (!a)
    return;
  ntx_fd_close(a->lfd, &a->lid);
  ntx_fd_close(a->ep, &a->epid);
  ntx_wake_close(&a->wake);
  ntx_fd_close(a->up.fd, &a->up.id);
  a->lfd = a->ep = a->up.fd = -1;
  for (uint32_t i = 0; a->locals && i < a->cfg.max_local; i++) {
    ntx_fd_close(a->locals[i].l.fd, &a->locals[i].l.id);
    a->locals[i].l.fd = -1;
  }
}

void ntx_agg_get_stats(struct ntx_agg *a, struct ntx_agg_stats *st) {
  pthread_mutex_lock(&a->lock);
  *st = a->st;
  pthread_mutex_unlock(&a->lock);
}
