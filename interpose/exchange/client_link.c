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

static struct ntx_client *const client = &ntx_cl;

/* ------------------------------------------------------------ records -- */

void ntx_cl_record_event(uint16_t kind, uint64_t comm_id, uint64_t seq, int32_t peer, uint64_t aux,
                         const char *field) {
  struct ntr_ring *ring = client->ring;
  if (!ring || !ring->hdr)
    return;
  int32_t rank = -1, nranks = 0;
  struct ntr_comm_state *cs = NULL;
  pthread_mutex_lock(&client->mu);
  struct ntx_reg *r = comm_id ? ntx_cl_reg_find(comm_id) : NULL;
  if (r) {
    rank = r->rank;
    nranks = r->nranks;
    cs = r->cs;
  }
  pthread_mutex_unlock(&client->mu);
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

/* The comm state's counters the metrics endpoint exports (interpose/
 * metrics.c): a mismatch on the comm, a stall the coordinator names this
 * process's rank in. */
static void count_verdict(const struct ntx_msg *m) {
  uint32_t kind = m->u.verdict.kind;
  int stall = kind == NTX_V_STRAGGLER && !strncmp(m->u.verdict.field, "stall", sizeof m->u.verdict.field);
  if (kind != NTX_V_MISMATCH && kind != NTX_V_P2P_MISMATCH && !stall)
    return;
  pthread_mutex_lock(&client->mu);
  struct ntx_reg *r = ntx_cl_reg_find(m->u.verdict.comm_id);
  if (r && r->cs && !stall)
    __atomic_add_fetch(&r->cs->mismatches, 1, __ATOMIC_RELAXED);
  else if (r && r->cs && r->rank == m->u.verdict.peer)
    __atomic_add_fetch(&r->cs->stalls, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&client->mu);
}

static void on_verdict(const struct ntx_msg *m) {
  char text[NTX_TEXT_MAX + 1];
  uint32_t kind = m->u.verdict.kind;
  snprintf(text, sizeof text, "%.*s", (int)m->u.verdict.text_len, m->u.verdict.text);
  if (kind == NTX_V_ENV_DONE) {
    pthread_mutex_lock(&client->mu);
    struct ntx_reg *r = ntx_cl_reg_find(m->u.verdict.comm_id);
    if (r)
      r->env_state = m->u.verdict.aux > 0 ? NTX_ENV_DIFF : NTX_ENV_OK;
    pthread_cond_broadcast(&client->cv);
    pthread_mutex_unlock(&client->mu);
    return;
  }
  if (kind == NTX_V_LATENESS) {
    /* This rank's median lateness, for `nccltrace status`: into its comm
     * state (an aggregator fans every rank's line out to each process of
     * the comm on its host: only the one holding that rank keeps it). */
    pthread_mutex_lock(&client->mu);
    struct ntx_reg *r = ntx_cl_reg_find(m->u.verdict.comm_id);
    if (r && r->cs && r->rank == m->u.verdict.peer && m->u.verdict.aux >= 0) {
      int64_t us = m->u.verdict.aux;
      __atomic_store_n(&r->cs->late_med_us, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us, __ATOMIC_RELAXED);
      __atomic_store_n(&r->cs->late_last, (uint32_t)m->u.verdict.seq, __ATOMIC_RELAXED);
      __atomic_store_n(&r->cs->late_window, (uint32_t)(m->u.verdict.seq >> 32), __ATOMIC_RELAXED);
      /* after the three: the metrics thread takes a new count for a new report */
      __atomic_add_fetch(&r->cs->late_reports, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&client->mu);
    return;
  }
  ntx_cl_say("%s", text);
  count_verdict(m);
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
  const struct ntr_ring_header *h = client->ring ? client->ring->hdr : NULL;
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
  struct ntr_ring_header *h = client->ring ? client->ring->hdr : NULL;
  if (!h)
    return;
  h->clock_offset_ns = m->u.clock.offset_ns;
  h->clock_uncert_ns = m->u.clock.uncert_ns;
  h->clock_sync_tsc = ntr_clock_now();
  /* Release: a reader that sees the count sees the estimate. */
  __atomic_store_n(&h->clock_samples, m->u.clock.samples ? m->u.clock.samples : 1, __ATOMIC_RELEASE);
}

static void on_reply(const struct ntx_msg *m) {
  /* A round trip the stall began with, or a later one: the coordinator
   * answers again, strict calls wait for it again (client.c). */
  if (__atomic_load_n(&client->strict_stalled, __ATOMIC_ACQUIRE) &&
      (int32_t)(m->u.reply.req_id - __atomic_load_n(&client->stall_id, __ATOMIC_RELAXED)) >= 0 &&
      __atomic_exchange_n(&client->strict_stalled, 0, __ATOMIC_ACQ_REL) &&
      !__atomic_load_n(&client->strict_off, __ATOMIC_RELAXED))
    ntx_cl_say("strict check: the coordinator at %s:%s answers again; strict calls wait for it again",
               client->disc.host, client->disc.port);
  pthread_mutex_lock(&client->mu);
  for (struct ntx_sreq *q = client->sq; q; q = q->next)
    if (q->id == m->u.reply.req_id) {
      q->status = m->u.reply.status;
      if (m->u.reply.text_len) /* chunks of one call share the text: keep what says something */
        snprintf(q->text, q->text_len, "%.*s", (int)m->u.reply.text_len, m->u.reply.text);
      q->done = 1;
      pthread_cond_broadcast(&client->cv);
      break;
    }
  pthread_mutex_unlock(&client->mu);
}

/* --------------------------------------------------------- connection -- */

int ntx_cl_queue_frame(uint8_t type, const void *payload, size_t plen) {
  if (client->out_len + NTX_FRAME_HDR + plen + NTX_FRAME_MAC > sizeof client->out)
    return -1;
  client->out_len += ntx_frame_encode(client->out + client->out_len, sizeof client->out - client->out_len, type, client->tx++, payload,
                                plen, &client->sess, NTX_DIR_TO_COORD);
  client->last_tx = ntx_cl_now();
  return 0;
}

/* Answer every strict request already sent: the coordinator that would have
 * answered is gone, so its callers proceed unchecked now, not at timeout. */
void ntx_cl_fail_sent(int all) {
  pthread_mutex_lock(&client->mu);
  for (struct ntx_sreq **pp = &client->sq; *pp;) {
    struct ntx_sreq *q = *pp;
    if (q->detached && all) {
      ntx_cl_sreq_drop(pp); /* nobody to tell */
      continue;
    }
    if ((q->sent || all) && !q->done) {
      q->status = NTX_REPLY_UNCHECKED;
      q->done = 1;
    }
    pp = &q->next;
  }
  for (int i = 0; i < client->nregs; i++)
    client->regs[i].sent = 0; /* a reconnect registers again */
  pthread_cond_broadcast(&client->cv);
  pthread_mutex_unlock(&client->mu);
}

/* Hand-over: the requests sent to the old aggregator go again through the
 * new one (after the registrations): the root answers a seq it decided
 * already from what it remembers, so the caller still gets its verdict. */
static void requeue_sent(void) {
  pthread_mutex_lock(&client->mu);
  for (struct ntx_sreq *q = client->sq; q; q = q->next)
    if (!q->done)
      q->sent = 0;
  for (int i = 0; i < client->nregs; i++)
    client->regs[i].sent = 0; /* a reconnect registers again */
  pthread_cond_broadcast(&client->cv);
  pthread_mutex_unlock(&client->mu);
}

/* The aggregator of this host went: by hand-over (BYE), or with the process
 * that hosted it (no BYE).  Either way the next connect elects again, at
 * once; only the second is news: a process of this host was lost. */
static void agg_gone(int clean_bye) {
  client->backoff = 0;
  client->next_connect = ntx_cl_now() + (clean_bye ? 0 : 0.02); /* a dead holder's name takes a moment to go */
  if (clean_bye) {
    if (nti_cfg.verbose)
      ntx_cl_say("the node aggregator (pid %d) handed over; electing a new one", (int)client->coord_pid);
    return;
  }
  char text[256];
  snprintf(text, sizeof text,
           "lost a process of this host (host %s, pid %d), which hosted the node aggregator: its connection "
           "closed without goodbye (killed, crashed or hung); electing a new one",
           client->coord_host, (int)client->coord_pid);
  ntx_cl_say("%s", text);
  ntx_cl_record_event(NTR_KIND_PEER_LOST, 0, 0, -1, (uint64_t)client->coord_pid, "lost");
  nti_dump_now(NTR_TRIG_PEER_LOST, 0, 0, text);
}

int ntx_cl_fds_ok(void) {
  if (client->fds_lost)
    return 0;
  int wake_ok = ntx_wake_ok(&client->wake), fd_ok = client->fd < 0 || ntx_fd_is(client->fd, &client->fd_id);
  if (wake_ok && fd_ok)
    return 1;
  client->fds_lost = 1;
  ntx_cl_say("the application closed the exchange's descriptors (%s, fd %d); cross-rank check off in this "
             "process, and none of those descriptors is used again",
             fd_ok ? "its wake-up socket" : "its connection to the coordinator", fd_ok ? client->wake.r : client->fd);
  client->fd = -1; /* forgotten, not closed: the number may be the application's file now */
  client->state = NTX_CL_OFF;
  client->in_len = client->out_len = 0;
  __atomic_store_n(&client->connected, 0, __ATOMIC_RELEASE);
  return 0;
}

void ntx_cl_disconnect(int clean_bye) {
  int was_ready = client->state == NTX_CL_READY;
  if (client->state == NTX_CL_WELCOME)
    client->key_try++; /* HELLO went unanswered: the peer does not hold that key, try the next one */
  ntx_fd_close(client->fd, &client->fd_id); /* only while it is ours */
  client->fd = -1;
  client->state = NTX_CL_DISCONNECTED;
  client->in_len = client->out_len = 0;
  __atomic_store_n(&client->connected, 0, __ATOMIC_RELEASE);
  if (client->via_agg && clean_bye && was_ready && !__atomic_load_n(&client->stop, __ATOMIC_RELAXED))
    requeue_sent();
  else
    ntx_cl_fail_sent(0);
  double now = ntx_cl_now();
  if (__atomic_load_n(&client->auth_failed, __ATOMIC_RELAXED))
    client->backoff = 5.0;
  else
    client->backoff = client->backoff < 0.05 ? 0.05 : client->backoff * 2 > 1.0 ? 1.0 : client->backoff * 2;
  client->next_connect = now + client->backoff;
  if (!was_ready || __atomic_load_n(&client->stop, __ATOMIC_RELAXED))
    return;
  if (!clean_bye && client->woke_at > 0 && now - client->woke_at < 10.0) {
    /* We were the silent one: the peer dropped us after its dead timeout
     * (it could not look at our process: another host).  Nobody was lost;
     * the reconnect registers our comms again and checking goes on. */
    ntx_cl_say("this process was stopped for %.0f s (SIGSTOP, a debugger, a job suspend) and %s closed its "
               "connection meanwhile; reconnecting", client->away,
               client->via_agg ? "the node aggregator" : "the coordinator");
    client->woke_at = 0;
    return;
  }
  if (client->via_agg) {
    agg_gone(clean_bye);
  } else if (clean_bye) {
    if (ntx_cl_once(&client->said_gone))
      ntx_cl_say("the coordinator at %s:%s shut down; ranks continue unchecked", client->disc.host, client->disc.port);
  } else if (client->coord_embedded && !client->disc.host_here) {
    /* The coordinator lived in another rank's process: losing it without
     * goodbye is losing that rank. */
    char text[256];
    snprintf(text, sizeof text,
             "lost rank %d (host %s, pid %d), which hosted the coordinator: its connection closed "
             "without goodbye (killed, crashed or hung); checking is off",
             0, client->coord_host, (int)client->coord_pid);
    ntx_cl_say("%s", text);
    ntx_cl_record_event(NTR_KIND_PEER_LOST, 0, 0, 0, (uint64_t)client->coord_pid, "lost");
    nti_dump_now(NTR_TRIG_PEER_LOST, 0, 0, text);
    client->said_gone = 1;
  } else if (ntx_cl_once(&client->said_gone)) {
    ntx_cl_say("lost the coordinator at %s:%s; ranks continue unchecked (retrying)", client->disc.host,
               client->disc.port);
  }
}

void ntx_cl_connect(double now) {
  client->next_connect = now + (client->backoff < 0.05 ? 0.05 : client->backoff);
  /* No key before the first communicator's unique id: nothing to prove who
   * we are with.  The ring keeps the records meanwhile. */
  uint32_t nk = ntx_keyring_count(&ntx_keys);
  if (!nk)
    return;
  int fd;
  if (client->cagg.on) {
    char err[256];
    int hosted = 0;
    fd = ntx_cagg_connect(&client->cagg, &hosted, err, sizeof err);
    if (fd == -EACCES) {
      /* Another user took the election (SO_PEERCRED, client_conn.h): never
       * talk to it; this process goes straight to the coordinator. */
      ntx_cl_say("node aggregator: %s; connecting straight to the coordinator at %s:%s", err, client->disc.host,
                 client->disc.port);
      client->cagg.on = 0;
      fd = ntx_conn_tcp(client->disc.host, client->disc.port);
    } else if (err[0] && ntx_cl_once(&client->said_agg))
      ntx_cl_say("node aggregator: %s; still trying", err);
    if (hosted && nti_cfg.verbose)
      ntx_cl_say("node aggregator for host %s started in this process (pid %d), upstream %s:%s",
                 client->cagg.host, (int)getpid(), client->disc.host, client->disc.port);
  } else {
    fd = ntx_conn_tcp(client->disc.host, client->disc.port);
  }
  if (fd < 0) {
    char why[128];
    if (fd == -EMFILE && ntx_cl_once(&client->said_fds))
      ntx_cl_say("cross-rank check: no socket for the coordinator: %s; this process runs unchecked until a "
                 "descriptor is free (still trying)", ntx_fd_why(EMFILE, why, sizeof why));
    return;
  }
  client->fd = fd;
  ntx_fd_take(fd, &client->fd_id);
  client->state = NTX_CL_CONNECTING;
  client->conn_t0 = now;
  client->ckey_id = ntx_keyring_get(&ntx_keys, client->key_try % nk, &client->ckey);
  ntx_sess_challenge(&client->sess);
  client->tx = client->rx = 0;
  client->in_len = client->out_len = 0;
}

static void send_hello(void) {
  uint8_t nonce[NTX_NONCE], buf[256];
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    uint64_t v[2] = {(uint64_t)getpid() * 0x9e3779b97f4a7c15ull, (uint64_t)(ntx_cl_now() * 1e9)};
    memcpy(nonce, v, sizeof nonce);
  }
  const char *job = client->ring && client->ring->hdr ? client->ring->hdr->job_id : "";
  size_t n = ntx_enc_hello(buf, sizeof buf, nonce, (int32_t)getpid(), client->launcher_rank, 0, client->hostname, job,
                           client->ckey_id);
  ntx_cl_queue_frame(NTX_MSG_HELLO, buf, n); /* under our key, bound to CHALLENGE, client nonce zero */
  memcpy(client->sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
}

/* @return -1 when the connection must go. */
static int on_frame(const struct ntx_frame *f) {
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0)
    return -1;
  switch (client->state) {
  case NTX_CL_CHALLENGE:
    if (m.type != NTX_MSG_CHALLENGE)
      return -1;
    client->coord_embedded = (m.u.challenge.flags & NTX_COORD_EMBEDDED) != 0;
    client->via_agg = (m.u.challenge.flags & NTX_CHAL_AGG) != 0;
    client->coord_pid = m.u.challenge.pid;
    memcpy(client->coord_host, m.u.challenge.host, sizeof client->coord_host);
    /* From here on every frame both ways is tagged under our key and bound
     * to what CHALLENGE said: only a holder of the key can WELCOME us. */
    ntx_sess_bind(&client->sess, &client->ckey, f->payload);
    send_hello();
    client->state = NTX_CL_WELCOME;
    return 0;
  case NTX_CL_WELCOME:
    if (m.type != NTX_MSG_WELCOME)
      return -1;
    client->state = NTX_CL_READY;
    client->welcome_flags = m.u.welcome.flags;
    client->backoff = 0;
    __atomic_store_n(&client->auth_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&client->connected, 1, __ATOMIC_RELEASE);
    if (!__atomic_exchange_n(&client->ever_ready, 1, __ATOMIC_RELAXED) && nti_cfg.verbose)
      ntx_cl_say("cross-rank check %s: coordinator %s%s", client->mode == NTI_CHECK_STRICT ? "strict" : "async",
                 client->disc.how, client->via_agg ? ", through this host's node aggregator" : "");
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
    ssize_t n = recv(client->fd, client->in + client->in_len, sizeof client->in - client->in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      ntx_cl_disconnect(0);
      return;
    }
    if (n < 0)
      return;
    client->in_len += (size_t)n;
    size_t off = 0;
    for (;;) {
      struct ntx_frame f;
      int r = ntx_frame_parse(client->in + off, client->in_len - off, &client->sess, NTX_DIR_TO_CLIENT, client->rx, &f);
      if (r == 0)
        break;
      if (r < 0) {
        if (r == NTX_E_VERSION && ntx_cl_once(&client->said_gone))
          ntx_cl_say("the coordinator at %s:%s: %s; ranks continue unchecked", client->disc.host, client->disc.port,
                     ntx_wire_strerror(r));
        if (r == NTX_E_MAC && client->state != NTX_CL_READY) {
          /* Nothing it sent counts: no verdict, no refusal, no dump; strict
           * callers waiting for a first connection proceed now. */
          __atomic_store_n(&client->auth_failed, 1, __ATOMIC_RELAXED);
          ntx_cl_fail_sent(1);
          if (ntx_cl_once(&client->said_gone))
            ntx_cl_say("the coordinator at %s:%s could not prove it holds this job's key (a coordinator of "
                       "another job, a different NCCLTRACE_SECRET, or another process on that port); ranks "
                       "continue unchecked, strict calls too", client->disc.host, client->disc.port);
        }
        ntx_cl_disconnect(0);
        return;
      }
      client->rx++;
      off += (size_t)r;
      int rc = on_frame(&f);
      if (rc < 0)
        ntx_cl_disconnect(0);
      if (rc != 0)
        return;
    }
    memmove(client->in, client->in + off, client->in_len - off);
    client->in_len -= off;
  }
}

void ntx_cl_flush_once(void) {
  if (client->fd < 0 || !client->out_len || !ntx_fd_is(client->fd, &client->fd_id)) /* not ours: the client thread says so */
    return;
  ssize_t n = send(client->fd, client->out, client->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n <= 0)
    return;
  memmove(client->out, client->out + n, client->out_len - (size_t)n);
  client->out_len -= (size_t)n;
}

void ntx_cl_flush(void) {
  if (client->fd >= 0 && !ntx_cl_fds_ok())
    return;
  while (client->out_len && client->fd >= 0) {
    ssize_t n = send(client->fd, client->out, client->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return;
    if (n <= 0) {
      ntx_cl_disconnect(0);
      return;
    }
    memmove(client->out, client->out + n, client->out_len - (size_t)n);
    client->out_len -= (size_t)n;
  }
}
