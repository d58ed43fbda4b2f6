/* client_link.c -- the exchange client's connection (contract:
 * client_int.h): connecting (straight to the root or through this host's
 * node aggregator, client_conn.h), the handshake, reading and writing
 * frames, losing the peer, and what arrives: verdicts (a stderr line, a ring
 * record, a dump) and strict replies.  Runs on the client thread. */
#include "interpose/exchange/client_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/exchange/keys.h"
#include "interpose/trigger.h"
#include "recorder/clock.h"

static struct ntx_client *const g = &ntx_cl;

/* ------------------------------------------------------------ records -- */

void ntx_cl_record_event(uint16_t kind, uint64_t comm_id, uint64_t seq, int32_t peer, uint64_t aux,
                         const char *field) {
  struct ntr_ring *ring = g->ring;
  if (!ring || !ring->hdr)
    return;
  int32_t rank = -1, nranks = 0;
  struct ntr_comm_state *cs = NULL;
  pthread_mutex_lock(&g->mu);
  struct reg *r = comm_id ? ntx_cl_reg_find(comm_id) : NULL;
  if (r) {
    rank = r->rank;
    nranks = r->nranks;
    cs = r->cs;
  }
  pthread_mutex_unlock(&g->mu);
  uint64_t pos;
  struct ntr_record *rec = ntr_ring_reserve(ring, &pos);
  memset((char *)rec + sizeof rec->commit, 0, sizeof *rec - sizeof rec->commit);
  rec->tsc = ntr_clock_now();
  rec->comm_id = comm_id;
  rec->seq = seq;
  rec->kind = kind;
  rec->phase = NTR_PHASE_EVENT;
  rec->dtype = 0xff;
  rec->redop = -1;
  rec->rank = rank;
  rec->nranks = nranks;
  rec->peer = peer;
  rec->result = -1;
  rec->tid = (uint32_t)syscall(SYS_gettid);
  rec->aux = aux;
  if (field)
    strncpy(rec->u.text, field, sizeof rec->u.text); /* NUL-padded, maybe unterminated */
  ntr_ring_commit(ring, rec, pos, cs);
}

static void on_verdict(const struct ntx_msg *m) {
  char text[NTX_TEXT_MAX + 1];
  uint32_t kind = m->u.verdict.kind;
  snprintf(text, sizeof text, "%.*s", (int)m->u.verdict.text_len, m->u.verdict.text);
  if (kind == NTX_V_ENV_DONE) {
    pthread_mutex_lock(&g->mu);
    struct reg *r = ntx_cl_reg_find(m->u.verdict.comm_id);
    if (r)
      r->env_state = m->u.verdict.aux > 0 ? ENV_DIFF : ENV_OK;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return;
  }
  if (kind == NTX_V_LATENESS) {
    /* This rank's median lateness, for `nccltrace status`: into its comm
     * state (an aggregator fans every rank's line out to each process of
     * the comm on its host: only the one holding that rank keeps it). */
    pthread_mutex_lock(&g->mu);
    struct reg *r = ntx_cl_reg_find(m->u.verdict.comm_id);
    if (r && r->cs && r->rank == m->u.verdict.peer && m->u.verdict.aux >= 0) {
      int64_t us = m->u.verdict.aux;
      __atomic_store_n(&r->cs->late_med_us, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us, __ATOMIC_RELAXED);
      __atomic_store_n(&r->cs->late_last, (uint32_t)m->u.verdict.seq, __ATOMIC_RELAXED);
      __atomic_store_n(&r->cs->late_window, (uint32_t)(m->u.verdict.seq >> 32), __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&g->mu);
    return;
  }
  ntx_cl_say("%s", text);
  static const uint16_t kinds[] = {
      [NTX_V_MISMATCH] = NTR_KIND_MISMATCH, [NTX_V_P2P_MISMATCH] = NTR_KIND_MISMATCH,
      [NTX_V_PEER_LOST] = NTR_KIND_PEER_LOST, [NTX_V_SKEW] = NTR_KIND_SKEW,
      [NTX_V_INIT_WAIT] = NTR_KIND_SKEW, [NTX_V_ENV_DIFF] = NTR_KIND_ENV_DIFF,
      [NTX_V_NOTE] = NTR_KIND_NOTE, [NTX_V_STRAGGLER] = NTR_KIND_STRAGGLER,
  };
  ntx_cl_record_event(kinds[kind], m->u.verdict.comm_id, m->u.verdict.seq, m->u.verdict.peer,
               (uint64_t)m->u.verdict.aux, m->u.verdict.field);
  if (kind == NTX_V_STRAGGLER)
    nti_start_boost(m->u.verdict.comm_id); /* its device arrivals, at every collective from now on */
  if (kind == NTX_V_MISMATCH || kind == NTX_V_P2P_MISMATCH)
    nti_dump_now(NTR_TRIG_MISMATCH, 0, 0, text);
  else if (kind == NTX_V_PEER_LOST)
    nti_dump_now(NTR_TRIG_PEER_LOST, 0, 0, text);
}

/* The time the fingerprints carry (record_fp.h): the ring's clock. */
static uint64_t ring_real_ns(void) {
  const struct ntr_ring_header *h = g->ring ? g->ring->hdr : NULL;
  return h && h->tsc_hz ? ntr_clock_to_real_ns(h, ntr_clock_now()) : 0;
}

/* A clock round trip: answered at once, on this thread. */
static void on_time(const struct ntx_msg *m) {
  uint8_t buf[16];
  uint64_t t = ring_real_ns();
  if (t)
    ntx_cl_queue_frame(NTX_MSG_TIME_ECHO, buf, ntx_enc_time(buf, sizeof buf, NTX_MSG_TIME_ECHO, m->u.time.stamp, t));
}

/* The coordinator's estimate of our offset: kept in the ring header for
 * the tools (analyze corrects arrival times across hosts with it). */
static void on_clock(const struct ntx_msg *m) {
  struct ntr_ring_header *h = g->ring ? g->ring->hdr : NULL;
  if (!h)
    return;
  h->clock_offset_ns = m->u.clock.offset_ns;
  h->clock_uncert_ns = m->u.clock.uncert_ns;
  h->clock_sync_tsc = ntr_clock_now();
  /* Release: a reader that sees the count sees the estimate. */
  __atomic_store_n(&h->clock_samples, m->u.clock.samples ? m->u.clock.samples : 1, __ATOMIC_RELEASE);
}

static void on_reply(const struct ntx_msg *m) {
  pthread_mutex_lock(&g->mu);
  for (struct sreq *q = g->sq; q; q = q->next)
    if (q->id == m->u.reply.req_id) {
      q->status = m->u.reply.status;
      if (m->u.reply.text_len) /* chunks of one call share the text: keep what says something */
        snprintf(q->text, q->text_len, "%.*s", (int)m->u.reply.text_len, m->u.reply.text);
      q->done = 1;
      pthread_cond_broadcast(&g->cv);
      break;
    }
  pthread_mutex_unlock(&g->mu);
}

/* --------------------------------------------------------- connection -- */

int ntx_cl_queue_frame(uint8_t type, const void *payload, size_t plen) {
  if (g->out_len + NTX_FRAME_HDR + plen + NTX_FRAME_MAC > sizeof g->out)
    return -1;
  g->out_len += ntx_frame_encode(g->out + g->out_len, sizeof g->out - g->out_len, type, g->tx++, payload,
                                plen, &g->sess, NTX_DIR_TO_COORD);
  g->last_tx = ntx_cl_now();
  return 0;
}

/* Answer every strict request already sent: the coordinator that would have
 * answered is gone, so its callers proceed unchecked now, not at timeout. */
void ntx_cl_fail_sent(int all) {
  pthread_mutex_lock(&g->mu);
  for (struct sreq *q = g->sq; q; q = q->next)
    if ((q->sent || all) && !q->done) {
      q->status = NTX_REPLY_UNCHECKED;
      q->done = 1;
    }
  for (int i = 0; i < g->nregs; i++)
    g->regs[i].sent = 0; /* a reconnect registers again */
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* Hand-over: the requests sent to the old aggregator go again through the
 * new one (after the registrations): the root answers a seq it decided
 * already from what it remembers, so the caller still gets its verdict. */
static void requeue_sent(void) {
  pthread_mutex_lock(&g->mu);
  for (struct sreq *q = g->sq; q; q = q->next)
    if (!q->done)
      q->sent = 0;
  for (int i = 0; i < g->nregs; i++)
    g->regs[i].sent = 0; /* a reconnect registers again */
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* The aggregator of this host went: by hand-over (BYE), or with the process
 * that hosted it (no BYE).  Either way the next connect elects again, at
 * once; only the second is news: a process of this host was lost. */
static void agg_gone(int clean_bye) {
  g->backoff = 0;
  g->next_connect = ntx_cl_now() + (clean_bye ? 0 : 0.02); /* a dead holder's name takes a moment to go */
  if (clean_bye) {
    if (ntr_cfg.verbose)
      ntx_cl_say("the node aggregator (pid %d) handed over; electing a new one", (int)g->coord_pid);
    return;
  }
  char text[256];
  snprintf(text, sizeof text,
           "lost a process of this host (host %s, pid %d), which hosted the node aggregator: its connection "
           "closed without goodbye (killed, crashed or hung); electing a new one",
           g->coord_host, (int)g->coord_pid);
  ntx_cl_say("%s", text);
  ntx_cl_record_event(NTR_KIND_PEER_LOST, 0, 0, -1, (uint64_t)g->coord_pid, "lost");
  nti_dump_now(NTR_TRIG_PEER_LOST, 0, 0, text);
}

int ntx_cl_fds_ok(void) {
  if (g->fds_lost)
    return 0;
  int wake_ok = ntx_wake_ok(&g->wake), fd_ok = g->fd < 0 || ntx_fd_is(g->fd, &g->fd_id);
  if (wake_ok && fd_ok)
    return 1;
  g->fds_lost = 1;
  ntx_cl_say("the application closed the exchange's descriptors (%s, fd %d); cross-rank check off in this "
             "process, and none of those descriptors is used again",
             fd_ok ? "its wake-up socket" : "its connection to the coordinator", fd_ok ? g->wake.r : g->fd);
  g->fd = -1; /* forgotten, not closed: the number may be the application's file now */
  g->state = S_OFF;
  g->in_len = g->out_len = 0;
  __atomic_store_n(&g->connected, 0, __ATOMIC_RELEASE);
  return 0;
}

void ntx_cl_disconnect(int clean_bye) {
  int was_ready = g->state == S_READY;
  if (g->state == S_WELCOME)
    g->key_try++; /* HELLO went unanswered: the peer does not hold that key, try the next one */
  ntx_fd_close(g->fd, &g->fd_id); /* only while it is ours */
  g->fd = -1;
  g->state = S_DISCONNECTED;
  g->in_len = g->out_len = 0;
  __atomic_store_n(&g->connected, 0, __ATOMIC_RELEASE);
  if (g->via_agg && clean_bye && was_ready && !__atomic_load_n(&g->stop, __ATOMIC_RELAXED))
    requeue_sent();
  else
    ntx_cl_fail_sent(0);
  double now = ntx_cl_now();
  if (__atomic_load_n(&g->auth_failed, __ATOMIC_RELAXED))
    g->backoff = 5.0;
  else
    g->backoff = g->backoff < 0.05 ? 0.05 : g->backoff * 2 > 1.0 ? 1.0 : g->backoff * 2;
  g->next_connect = now + g->backoff;
  if (!was_ready || __atomic_load_n(&g->stop, __ATOMIC_RELAXED))
    return;
  if (g->via_agg) {
    agg_gone(clean_bye);
  } else if (clean_bye) {
    if (ntx_cl_once(&g->said_gone))
      ntx_cl_say("the coordinator at %s:%s shut down; ranks continue unchecked", g->disc.host, g->disc.port);
  } else if (g->coord_embedded && !g->disc.host_here) {
    /* The coordinator lived in another rank's process: losing it without
     * goodbye is losing that rank. */
    char text[256];
    snprintf(text, sizeof text,
             "lost rank %d (host %s, pid %d), which hosted the coordinator: its connection closed "
             "without goodbye (killed, crashed or hung); checking is off",
             0, g->coord_host, (int)g->coord_pid);
    ntx_cl_say("%s", text);
    ntx_cl_record_event(NTR_KIND_PEER_LOST, 0, 0, 0, (uint64_t)g->coord_pid, "lost");
    nti_dump_now(NTR_TRIG_PEER_LOST, 0, 0, text);
    g->said_gone = 1;
  } else if (ntx_cl_once(&g->said_gone)) {
    ntx_cl_say("lost the coordinator at %s:%s; ranks continue unchecked (retrying)", g->disc.host,
               g->disc.port);
  }
}

void ntx_cl_connect(double now) {
  g->next_connect = now + (g->backoff < 0.05 ? 0.05 : g->backoff);
  /* No key before the first communicator's unique id: nothing to prove who
   * we are with.  The ring keeps the records meanwhile. */
  uint32_t nk = ntx_keyring_count(&ntx_keys);
  if (!nk)
    return;
  int fd;
  if (g->cagg.on) {
    char err[256];
    int hosted = 0;
    fd = ntx_cagg_connect(&g->cagg, &hosted, err, sizeof err);
    if (fd == -EACCES) {
      /* Another user took the election (SO_PEERCRED, client_conn.h): never
       * talk to it; this process goes straight to the coordinator. */
      ntx_cl_say("node aggregator: %s; connecting straight to the coordinator at %s:%s", err, g->disc.host,
                 g->disc.port);
      g->cagg.on = 0;
      fd = ntx_conn_tcp(g->disc.host, g->disc.port);
    } else if (err[0] && ntx_cl_once(&g->said_agg))
      ntx_cl_say("node aggregator: %s; still trying", err);
    if (hosted && ntr_cfg.verbose)
      ntx_cl_say("node aggregator for host %s started in this process (pid %d), upstream %s:%s",
                 g->cagg.host, (int)getpid(), g->disc.host, g->disc.port);
  } else {
    fd = ntx_conn_tcp(g->disc.host, g->disc.port);
  }
  if (fd < 0)
    return;
  g->fd = fd;
  ntx_fd_take(fd, &g->fd_id);
  g->state = S_CONNECTING;
  g->conn_t0 = now;
  g->ckey_id = ntx_keyring_get(&ntx_keys, g->key_try % nk, &g->ckey);
  ntx_sess_challenge(&g->sess);
  g->tx = g->rx = 0;
  g->in_len = g->out_len = 0;
}

static void send_hello(void) {
  uint8_t nonce[NTX_NONCE], buf[256];
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    uint64_t v[2] = {(uint64_t)getpid() * 0x9e3779b97f4a7c15ull, (uint64_t)(ntx_cl_now() * 1e9)};
    memcpy(nonce, v, sizeof nonce);
  }
  const char *job = g->ring && g->ring->hdr ? g->ring->hdr->job_id : "";
  size_t n = ntx_enc_hello(buf, sizeof buf, nonce, (int32_t)getpid(), g->launcher_rank, 0, g->hostname, job,
                           g->ckey_id);
  ntx_cl_queue_frame(NTX_MSG_HELLO, buf, n); /* under our key, bound to CHALLENGE, client nonce zero */
  memcpy(g->sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
}

/* @return -1 when the connection must go. */
static int on_frame(const struct ntx_frame *f) {
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0)
    return -1;
  switch (g->state) {
  case S_CHALLENGE:
    if (m.type != NTX_MSG_CHALLENGE)
      return -1;
    g->coord_embedded = (m.u.challenge.flags & NTX_COORD_EMBEDDED) != 0;
    g->via_agg = (m.u.challenge.flags & NTX_CHAL_AGG) != 0;
    g->coord_pid = m.u.challenge.pid;
    memcpy(g->coord_host, m.u.challenge.host, sizeof g->coord_host);
    /* From here on every frame both ways is tagged under our key and bound
     * to what CHALLENGE said: only a holder of the key can WELCOME us. */
    ntx_sess_bind(&g->sess, &g->ckey, f->payload);
    send_hello();
    g->state = S_WELCOME;
    return 0;
  case S_WELCOME:
    if (m.type != NTX_MSG_WELCOME)
      return -1;
    g->state = S_READY;
    g->backoff = 0;
    __atomic_store_n(&g->auth_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g->connected, 1, __ATOMIC_RELEASE);
    if (!__atomic_exchange_n(&g->ever_ready, 1, __ATOMIC_RELAXED) && ntr_cfg.verbose)
      ntx_cl_say("cross-rank check %s: coordinator %s%s", g->mode == NTR_CHECK_STRICT ? "strict" : "async",
                 g->disc.how, g->via_agg ? ", through this host's node aggregator" : "");
    return 0;
  default:
    break;
  }
  switch (m.type) {
  case NTX_MSG_VERDICT: on_verdict(&m); return 0;
  case NTX_MSG_REPLY: on_reply(&m); return 0;
  case NTX_MSG_TIME: on_time(&m); return 0;
  case NTX_MSG_CLOCK: on_clock(&m); return 0;
  case NTX_MSG_BYE: ntx_cl_disconnect(1); return 1;
  default: return -1;
  }
}

void ntx_cl_read(void) {
  if (!ntx_cl_fds_ok())
    return;
  for (;;) {
    ssize_t n = recv(g->fd, g->in + g->in_len, sizeof g->in - g->in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      ntx_cl_disconnect(0);
      return;
    }
    if (n < 0)
      return;
    g->in_len += (size_t)n;
    size_t off = 0;
    for (;;) {
      struct ntx_frame f;
      int r = ntx_frame_parse(g->in + off, g->in_len - off, &g->sess, NTX_DIR_TO_CLIENT, g->rx, &f);
      if (r == 0)
        break;
      if (r < 0) {
        if (r == NTX_E_VERSION && ntx_cl_once(&g->said_gone))
          ntx_cl_say("the coordinator at %s:%s: %s; ranks continue unchecked", g->disc.host, g->disc.port,
                     ntx_wire_strerror(r));
        if (r == NTX_E_MAC && g->state != S_READY) {
          /* Nothing it sent counts: no verdict, no refusal, no dump; strict
           * callers waiting for a first connection proceed now. */
          __atomic_store_n(&g->auth_failed, 1, __ATOMIC_RELAXED);
          ntx_cl_fail_sent(1);
          if (ntx_cl_once(&g->said_gone))
            ntx_cl_say("the coordinator at %s:%s could not prove it holds this job's key (a coordinator of "
                       "another job, a different NCCLTRACE_SECRET, or another process on that port); ranks "
                       "continue unchecked, strict calls too", g->disc.host, g->disc.port);
        }
        ntx_cl_disconnect(0);
        return;
      }
      g->rx++;
      off += (size_t)r;
      int rc = on_frame(&f);
      if (rc < 0)
        ntx_cl_disconnect(0);
      if (rc != 0)
        return;
    }
    memmove(g->in, g->in + off, g->in_len - off);
    g->in_len -= off;
  }
}

void ntx_cl_flush_once(void) {
  if (g->fd < 0 || !g->out_len || !ntx_fd_is(g->fd, &g->fd_id)) /* not ours: the client thread says so */
    return;
  ssize_t n = send(g->fd, g->out, g->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n <= 0)
    return;
  memmove(g->out, g->out + n, g->out_len - (size_t)n);
  g->out_len -= (size_t)n;
}

void ntx_cl_flush(void) {
  if (g->fd >= 0 && !ntx_cl_fds_ok())
    return;
  while (g->out_len && g->fd >= 0) {
    ssize_t n = send(g->fd, g->out, g->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return;
    if (n <= 0) {
      ntx_cl_disconnect(0);
      return;
    }
    memmove(g->out, g->out + n, g->out_len - (size_t)n);
    g->out_len -= (size_t)n;
  }
}
