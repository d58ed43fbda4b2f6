/* client.c -- the exchange client (contract: interpose/exchange.h): one
 * background thread per traced process that reads this process's ring,
 * streams fingerprints to the coordinator in batches, and turns verdicts
 * into a stderr line, a ring record and (mismatch, lost peer) a dump.
 *
 * The application thread never does network I/O in async mode: it writes
 * the ring (interposer) and, at init, puts a registration in a table under
 * a mutex (init is not a hot path).  In strict mode ntx_strict_wait queues
 * a request, nudges the thread through a socket pair (own.h) and waits on
 * a condvar, bounded by NCCLTRACE_STRICT_TIMEOUT.  On one host a single strict call agrees
 * through a shared-memory board instead (strict_shm.c), without this
 * thread or the coordinator.
 *
 * Here: the state, the thread, the ring reader and the API.  The
 * connection and what arrives on it: client_link.c; the way to the checker
 * (TCP to the root, or this host's node aggregator and its election):
 * client_conn.c.  Shared internals: client_int.h.
 */
#include "interpose/exchange.h"
#include "recorder/diag.h"
#include "recorder/thread.h"
#include "recorder/heap.h"
#include "interpose/exchange/addr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/trigger.h"
#include "interpose/exchange/client_int.h"
#include "interpose/exchange/keys.h"
#include "interpose/exchange/record_fp.h"
#include "interpose/exchange/strict_shm.h"
#include "interpose/exchange/wire.h"
#include "recorder/clock.h"
#include "recorder/env.h"

struct ntx_client ntx_cl = {.mu = PTHREAD_MUTEX_INITIALIZER, .txmu = PTHREAD_MUTEX_INITIALIZER,
                             .wake = {.r = -1, .w = -1}, .fd = -1};
static struct ntx_client *const client = &ntx_cl;

/* say-once flags shared by the application threads (atomic exchange) */
static int said_timeout, said_unchecked, said_nocoord_strict;
/* a strict wait timed out before any connection: later calls do not wait */
static int strict_gave_up;

double ntx_cl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One `nccltrace:` line with a single write (recorder/diag.h): lines of
 * several threads and processes do not interleave mid-line. */
void ntx_cl_say(const char *fmt, ...) {
  _Static_assert(NTX_TEXT_MAX + 64 <= NTR_DIAG_LINE_MAX, "a verdict's text fits one diag line");
  va_list ap;
  va_start(ap, fmt);
  ntr_diag_vsay("nccltrace: ", fmt, ap);
  va_end(ap);
}

int ntx_cl_once(int *flag) { return !__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED); }

int ntx_cl_strict_timed_out(void) {
  if (__atomic_add_fetch(&client->strict_timeouts, 1, __ATOMIC_RELAXED) < NTX_STRICT_TIMEOUTS_MAX)
    return 0;
  if (!__atomic_exchange_n(&client->strict_off, 1, __ATOMIC_RELAXED))
    ntx_cl_say("strict check off in this process: %d strict waits ran out at NCCLTRACE_STRICT_TIMEOUT=%gs, the "
               "most strict mode may cost a process; calls proceed without waiting from now on (a mismatch is "
               "still reported, no longer refused)",
               NTX_STRICT_TIMEOUTS_MAX, nti_cfg.strict_timeout_s);
  return 1;
}

void ntx_cl_sreq_drop(struct ntx_sreq **pp) { /* pre: mu held */
  struct ntx_sreq *q = *pp;
  *pp = q->next;
  if (client->det_open == q)
    client->det_open = NULL;
  client->ndetached--;
  ntr_heap_free(q);
}

struct ntx_reg *ntx_cl_reg_find(uint64_t comm_id) { /* pre: mu held */
  for (int i = 0; i < client->nregs; i++)
    if (client->regs[i].comm_id == comm_id)
      return &client->regs[i];
  return NULL;
}

/* ---------------------------------------------------------- ring reader -- */

/* Walk committed slots from the cursor (seqlock reads, recorder/ring.h) and
 * queue FP frames while there is room.  @return records consumed. */
static uint64_t read_ring(double now) {
  struct ntr_ring *ring = client->ring;
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
  uint64_t slots = ring->mask + 1, used = 0;
  if (head - client->cursor > slots) { /* lapped: those records are gone */
    client->lost_records += head - slots - client->cursor;
    client->cursor = head - slots;
  }
  static uint8_t payload[NTX_FRAME_MAX_PAYLOAD];
  uint32_t n = 0;
  int settled = 0; /* the slot at the cursor was settled once already */
  client->stream_tokens += (now - client->stream_t) * NTX_STREAM_RATE;
  if (client->stream_tokens > NTX_STREAM_BURST || client->stream_t == 0)
    client->stream_tokens = NTX_STREAM_BURST;
  client->stream_t = now;
  while (client->cursor < head && client->stream_tokens >= 1) {
    if (client->out_len + NTX_FRAME_HDR + 8 + (size_t)(n + 1) * NTX_FP_WIRE + NTX_FRAME_MAC > sizeof client->out)
      break; /* the ring holds the rest until the socket drains */
    struct ntr_record rec;
    uint64_t c = ntr_ring_read_slot(&ring->slots[client->cursor & ring->mask], &rec);
    if (c == 0 || c - 1 < client->cursor) { /* not written yet, being written, or a hole */
      if (client->stuck_pos != client->cursor + 1) {
        client->stuck_pos = client->cursor + 1;
        client->stuck_since = now;
      }
      /* A quiet thread's unused block positions hold up the records after
       * them: filled after NTX_HOLE_S (recorder/ring.h, holes and fillers). */
      int st = ntr_ring_settle(ring, client->cursor, head, now - client->stuck_since >= NTX_HOLE_S);
      if (st == NTR_SETTLED && !settled) {
        settled = 1;
        continue; /* read it again */
      }
      if (st == NTR_HOLE_FRONTIER || (st != NTR_SETTLED && now - client->stuck_since < NTX_STUCK_S))
        break;
      if (st != NTR_SETTLED)
        client->lost_records++; /* a writer died mid-record: skip it */
    } else if (c - 1 > client->cursor) {
      client->lost_records++; /* overwritten since we looked */
    } else if (rec.kind == NTR_KIND_DEV_ARRIVE) {
      /* the watchdog's record of a device arrival: to a server that takes
       * them (an older one would refuse the entry and close) */
      struct ntx_fp fp;
      if ((client->welcome_flags & NTX_WELCOME_DEV) && ntx_fp_dev(&rec, ring->hdr, &fp) == 0)
        ntx_fp_put(payload + 8, n++, &fp);
    } else if (client->mode == NTI_CHECK_ASYNC) {
      struct ntx_fp fp;
      if (ntx_fp_from_record(&rec, &fp) == 0) {
        ntx_fp_time(&fp, &rec, ring->hdr);
        ntx_fp_put(payload + 8, n++, &fp);
      }
    }
    /* strict mode: fingerprints travel through ntx_strict_wait only, so
     * the coordinator sees each once and in call order */
    client->cursor++;
    used++;
    settled = 0;
    client->stream_tokens -= 1;
    if (n == NTX_FP_MAX) {
      ntx_cl_queue_frame(NTX_MSG_FP, payload, ntx_enc_fp_head(payload, sizeof payload, 0, n));
      n = 0;
    }
  }
  if (n)
    ntx_cl_queue_frame(NTX_MSG_FP, payload, ntx_enc_fp_head(payload, sizeof payload, 0, n));
  return used;
}

/* Registrations and strict requests not sent yet. */
static void send_pending(void) {
  static uint8_t buf[NTX_FRAME_MAX_PAYLOAD];
  pthread_mutex_lock(&client->mu);
  for (int i = 0; i < client->nregs; i++) {
    struct ntx_reg *r = &client->regs[i];
    if (r->sent)
      continue;
    /* A comm made by split or shrink is registered before NCCL said its
     * size and our rank (lifecycle.c fills them when the call returns):
     * wait for them; a REGISTER without them is malformed and would cost
     * the connection. */
    if (r->cs) {
      r->rank = __atomic_load_n(&r->cs->rank, __ATOMIC_RELAXED);
      r->nranks = __atomic_load_n(&r->cs->nranks, __ATOMIC_RELAXED);
    }
    if (r->nranks <= 0 || r->rank < 0 || r->rank >= r->nranks)
      continue;
    int32_t ver = client->ring && client->ring->hdr ? client->ring->hdr->nccl_version : 0;
    size_t n = ntx_enc_register(buf, sizeof buf, r->comm_id, r->rank, r->nranks, ver, (int32_t)getpid(),
                                client->launcher_rank, client->env, client->env_len);
    if (ntx_cl_queue_frame(NTX_MSG_REGISTER, buf, n) < 0)
      break;
    r->sent = 1;
  }
  for (struct ntx_sreq **pp = &client->sq; *pp;) {
    struct ntx_sreq *q = *pp;
    if (q->sent) {
      pp = &q->next;
      continue;
    }
    size_t n = ntx_enc_fp_head(buf, sizeof buf, q->id, q->n);
    for (uint32_t i = 0; i < q->n; i++)
      ntx_fp_put(buf + 8, i, &q->fps[i]);
    if (ntx_cl_queue_frame(NTX_MSG_STRICT, buf, n) < 0)
      break;
    q->sent = 1;
    if (client->det_open == q)
      client->det_open = NULL; /* sent: nothing more joins it */
    if (q->detached)
      ntx_cl_sreq_drop(pp); /* nobody waits for its REPLY */
    else
      pp = &q->next;
  }
  pthread_mutex_unlock(&client->mu);
}

static void *client_thread(void *arg) {
  (void)arg;
  int interval = NTX_POLL_MIN_MS;
  client->first_try = ntx_cl_now();
  pthread_mutex_lock(&client->txmu);
  while (!__atomic_load_n(&client->stop, __ATOMIC_ACQUIRE) && ntx_cl_fds_ok()) {
    double now = ntx_cl_now();
    if (client->state == NTX_CL_DISCONNECTED && now >= client->next_connect)
      ntx_cl_connect(now);
    if (client->state != NTX_CL_READY && !client->ever_ready && now - client->first_try > 10 && !client->said_fds &&
        ntx_cl_once(&client->said_waiting))
      ntx_cl_say("no coordinator answers at %s:%s yet (%s); ranks run unchecked meanwhile, still trying",
                 client->disc.host, client->disc.port, client->disc.how);
    struct pollfd p[2] = {{.fd = client->wake.r, .events = POLLIN}, {.fd = client->fd, .events = 0}};
    if (client->fd >= 0)
      p[1].events = (short)(POLLIN | (client->state == NTX_CL_CONNECTING || client->out_len ? POLLOUT : 0));
    pthread_mutex_unlock(&client->txmu);
    poll(p, client->fd >= 0 ? 2 : 1, interval);
    pthread_mutex_lock(&client->txmu);
    if (p[0].revents & POLLIN)
      ntx_wake_drain(&client->wake);
    if ((p[0].revents | p[1].revents) & POLLNVAL)
      continue; /* closed under us: ntx_cl_fds_ok says so */
    now = ntx_cl_now();
    /* passes are NTX_POLL_MAX_MS apart at most: a long gap is a stop */
    double away = ntx_freeze_gap(&client->frz, now, 2.0);
    if (away > 0) {
      client->woke_at = now;
      client->away = away;
    }
    if (client->fd >= 0 && client->state == NTX_CL_CONNECTING && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      int err = 0;
      socklen_t l = sizeof err;
      getsockopt(client->fd, SOL_SOCKET, SO_ERROR, &err, &l);
      if (err)
        ntx_cl_disconnect(0);
      else
        client->state = NTX_CL_CHALLENGE;
    }
    if (client->fd >= 0 && client->state >= NTX_CL_CHALLENGE && (p[1].revents & (POLLIN | POLLERR | POLLHUP)))
      ntx_cl_read();
    if (client->fd >= 0 && client->state != NTX_CL_READY && now - client->conn_t0 > NTX_HS_TIMEOUT_S)
      ntx_cl_disconnect(0); /* a peer that accepts and says nothing (or a backlog nobody accepts from) */
    uint64_t used = 0;
    if (client->state == NTX_CL_READY) {
      send_pending();
      used = read_ring(now);
      if (!client->out_len && now - client->last_tx >= NTX_PING_S)
        ntx_cl_queue_frame(NTX_MSG_PING, NULL, 0);
    }
    if (client->fd >= 0 && client->out_len)
      ntx_cl_flush();
    /* adaptive: 1 ms while records flow, doubling to 5 ms when idle */
    interval = used ? NTX_POLL_MIN_MS : interval * 2 > NTX_POLL_MAX_MS ? NTX_POLL_MAX_MS : interval * 2;
  }
  /* Exit: verdicts already received (recorded before we go), what the ring
   * still holds, then goodbye, bounded to ~200 ms. */
  if (client->state == NTX_CL_READY)
    ntx_cl_read();
  if (client->state == NTX_CL_READY) {
    read_ring(ntx_cl_now());
    ntx_cl_queue_frame(NTX_MSG_BYE, "\0\0\0\0", 4);
    for (int i = 0; i < 20 && client->out_len && client->fd >= 0; i++) {
      struct pollfd p = {.fd = client->fd, .events = POLLOUT};
      poll(&p, 1, 10);
      ntx_cl_flush();
    }
  }
  if (client->lost_records && client->ever_ready)
    ntx_cl_say("cross-rank check: %llu records were overwritten in the ring before they could be sent "
               "(checked as gaps)", (unsigned long long)client->lost_records);
  ntx_fd_close(client->fd, &client->fd_id);
  client->fd = -1;
  client->state = NTX_CL_OFF;
  __atomic_store_n(&client->connected, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&client->txmu);
  if (client->fds_lost) /* checking is off: later calls go straight through */
    __atomic_store_n(&client->discovered, 0, __ATOMIC_RELEASE);
  ntx_cl_fail_sent(1);
  return NULL;
}

/* ---------------------------------------------------------------- API -- */

/* The thread polls every NTX_POLL_MAX_MS anyway: a nudge only shortens that,
 * and a wake socket that is not ours any more is never written. */
static void nudge(void) { ntx_wake_poke(&client->wake); }

/* In a fork child our thread does not exist: checking is off there (a
 * child that calls NCCL is a new participant the coordinator never met).
 * The child's copies of our descriptors are closed; the parent's stay. */
static void atfork_child(void) {
  __atomic_store_n(&client->discovered, 0, __ATOMIC_RELAXED);
  client->thread_ok = 0;
  client->coord = NULL; /* its thread is the parent's; its memory is left alone */
  ntx_fd_close(client->fd, &client->fd_id);
  ntx_wake_close(&client->wake);
  client->fd = -1;
  ntx_cagg_forget_in_child(&client->cagg);
  pthread_mutex_init(&client->mu, NULL); /* another thread may have held it at fork */
  pthread_mutex_init(&client->txmu, NULL);
}

void ntx_start(struct ntr_ring *ring) {
  if (__atomic_exchange_n(&client->started, 1, __ATOMIC_ACQ_REL))
    return;
  if (nti_cfg.disable || (nti_cfg.check == NTI_CHECK_OFF))
    return;
  client->ring = ring;
  client->launcher_rank = ring && ring->hdr ? ring->hdr->rank : -1;
  ntx_discover(nti_cfg.coord, nti_cfg.coord_port_offset, client->launcher_rank, &client->disc);
  if (!client->disc.found) {
    /* Why none was found comes from settings every rank shares: said once
     * per job, by the rank that speaks for it (recorder/env.h). */
    if (ntr_env_speaks_for_job())
      ntx_cl_say("cross-rank check off: %s (set NCCLTRACE_COORD=host:port, or run under a launcher that "
                 "sets MASTER_ADDR/MASTER_PORT)", client->disc.how);
    return;
  }
  if (!ring || !ring->hdr) {
    ntx_cl_say("cross-rank check off: no ring to read fingerprints from");
    return;
  }
  char what[128];
  /* NCCLTRACE_SECRET, when set, is the only key; otherwise the keys come
   * from the communicators' unique ids (keys.h) and client->key, derived from
   * public values, only names the node aggregator's socket. */
  if (ntx_key_derive(nti_cfg.secret, &client->key, what, sizeof what) == NTX_KEY_SECRET)
    ntx_keyring_fix(&ntx_keys, &client->key);
  gethostname(client->hostname, sizeof client->hostname - 1);
  /* NCCL_* of the ring header's environment block (the recorder already
   * left out anything that looks like a secret) */
  const struct ntr_ring_header *h = ring->hdr;
  for (uint32_t o = 0; o < h->env_len && o < sizeof h->env;) {
    const char *e = h->env + o;
    size_t l = strnlen(e, sizeof h->env - o);
    if (!strncmp(e, "NCCL_", 5) && memchr(e, '=', l) && client->env_len + l + 1 <= sizeof client->env) {
      memcpy(client->env + client->env_len, e, l + 1);
      client->env_len += (uint32_t)l + 1;
    }
    o += (uint32_t)l + 1;
  }
  if (client->disc.host_here) {
    struct ntx_coord_cfg cc;
    char err[256];
    ntx_coord_default_cfg(&cc);
    cc.host = client->disc.host;
    cc.port = client->disc.port;
    cc.keys = &ntx_keys;
    cc.key = client->key;
    cc.embedded = 1;
    cc.lim.skew_s = nti_cfg.skew_s;
    cc.lim.straggler_ms = nti_cfg.straggler_ms;
    cc.lim.straggler_window = nti_cfg.straggler_window;
    if (nti_cfg.metrics[0]) /* the lateness histogram of the metrics endpoint: a sample a second */
      cc.lim.lateness_every_s = 1;
    cc.lim.init_wait_s = nti_cfg.skew_s < nti_cfg.strict_timeout_s ? nti_cfg.skew_s : nti_cfg.strict_timeout_s;
    cc.log = nti_cfg.verbose ? stderr : NULL;
    /* inside the workload: as many authenticated clients as the job has
     * processes (and a few for reconnects and aggregators), no more */
    if (h->world_size > 0)
      cc.max_ready = (uint32_t)h->world_size + 16;
    if (ntx_coord_listen(&client->coord, &cc, err, sizeof err) < 0) {
      ntx_cl_say("cannot host the coordinator: %s; checking still tries to connect there", err);
    } else if (ntx_coord_start(client->coord) < 0) {
      ntx_cl_say("cannot start the coordinator thread; checking still tries to connect");
      ntx_coord_stop(client->coord, 0);
      client->coord = NULL;
    }
  }
  ntx_cagg_init(&client->cagg, &client->key, h->job_id, nti_cfg.agg_host, client->disc.host, client->disc.port, client->launcher_rank,
                h->world_size, h->local_world_size, nti_cfg.agg);
  /* Resolved here, on the application's thread: our threads reuse it
   * (interpose/exchange/addr.h: getaddrinfo would cost them an arena). */
  struct ntx_addr primed;
  (void)ntx_addr_get(client->disc.host, client->disc.port, &primed);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&client->cv, &ca);
  pthread_condattr_destroy(&ca);
  int wrc = ntx_wake_open(&client->wake);
  if (wrc < 0) {
    char why[128];
    ntx_cl_say("cross-rank check off: socketpair: %s", ntx_fd_why(-wrc, why, sizeof why));
    return;
  }
  client->mode = nti_cfg.check;
  client->state = NTX_CL_DISCONNECTED;
  if (client->mode == NTI_CHECK_STRICT)
    ntx_shm_init(h, nti_cfg.strict_shm);
  /* from the oldest record still in the ring: nothing before start is "lost" */
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
  client->cursor = head > ring->mask + 1 ? head - ring->mask - 1 : 0;
  /* our thread takes no application signal: handlers and sigwait users
   * keep the behaviour they had without us */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = ntr_thread_create(&client->thread, client_thread, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    ntx_cl_say("cross-rank check off: cannot start its thread: %s", strerror(rc));
    return;
  }
  client->thread_ok = 1;
  pthread_atfork(NULL, NULL, atfork_child);
  __atomic_store_n(&client->discovered, 1, __ATOMIC_RELEASE);
}

int ntx_enabled(void) { return __atomic_load_n(&client->discovered, __ATOMIC_ACQUIRE); }

void ntx_comm_register(struct ntr_comm_state *cs) {
  if (!cs || !ntx_enabled())
    return;
  pthread_mutex_lock(&client->mu);
  struct ntx_reg *r = NULL;
  for (int i = 0; i < client->nregs && !r; i++)
    if (client->regs[i].comm_id == cs->comm_id && client->regs[i].rank == cs->rank)
      r = &client->regs[i];
  if (!r && client->nregs < (int)NTR_COMM_MAX)
    r = &client->regs[client->nregs++];
  if (r) {
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
    r->cs = cs;
    r->sent = 0;
    r->env_state = NTX_ENV_PENDING;
  }
  pthread_mutex_unlock(&client->mu);
  nudge(); /* init is no hot path: register at once */
}

void ntx_comm_unregister(const struct ntr_comm_state *cs) {
  if (!cs || !ntx_enabled())
    return;
  pthread_mutex_lock(&client->mu);
  for (int i = 0; i < client->nregs;)
    if (client->regs[i].cs == cs)
      client->regs[i] = client->regs[--client->nregs];
    else
      i++;
  pthread_mutex_unlock(&client->mu);
}

static struct timespec deadline_after(double s) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + s;
  ts.tv_sec = (time_t)t;
  ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
  return ts;
}

int ntx_comm_env_verdict(struct ntr_comm_state *cs) {
  if (!cs || !ntx_enabled() || nti_cfg.env_check != NTI_ENV_CHECK_ABORT)
    return 0;
  struct timespec dl = deadline_after(nti_cfg.strict_timeout_s);
  int state = NTX_ENV_PENDING;
  pthread_mutex_lock(&client->mu);
  for (;;) {
    struct ntx_reg *r = ntx_cl_reg_find(cs->comm_id);
    state = r ? r->env_state : NTX_ENV_OK;
    if (state != NTX_ENV_PENDING || __atomic_load_n(&client->stop, __ATOMIC_RELAXED))
      break;
    if (pthread_cond_timedwait(&client->cv, &client->mu, &dl) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&client->mu);
  if (state == NTX_ENV_DIFF)
    ntx_cl_say("comm %08x init refused: NCCL_* environment differs between ranks (NCCLTRACE_ENV_CHECK=abort)",
               NTX_COMM_SHORT(cs->comm_id));
  return state == NTX_ENV_DIFF ? -1 : 0;
}

/* Send what is queued now when the client thread is asleep in poll (it
 * holds txmu otherwise): the request leaves now instead of after a wake-up
 * write and the thread's wake-up (a third of the strict latency on 8
 * ranks).  The REPLY arrives through the thread: reading it here too would
 * hold txmu while waiting, for no gain (docs/performance.md has both
 * figures).  Whatever does not go out at once (a full socket, an error) is
 * left to the client thread, which is woken for it. */
static void send_now(void) {
  int sent = 0;
  if (pthread_mutex_trylock(&client->txmu) == 0) {
    if (client->state == NTX_CL_READY) {
      send_pending();
      ntx_cl_flush_once();
      sent = client->out_len == 0;
    }
    pthread_mutex_unlock(&client->txmu);
  }
  if (!sent)
    nudge();
}

/* Strict requests of k fingerprints with nobody waiting (each with its own
 * copy, freed by whoever queues or fails it).  Calls until the client
 * thread's next pass (NTX_POLL_MAX_MS at most) gather in one request of up
 * to NTX_DETACHED_FPS fingerprints, the queue's last (det_open): one frame,
 * one MAC, one check and one REPLY for them on the coordinator, and no walk
 * of the queue per call.  Past NTX_DETACHED_MAX unsent requests the rest is
 * dropped: a gap the coordinator counts as arrived unseen.  No send and no
 * wake-up on the calling thread, whose calls would otherwise each pay a
 * syscall and a context switch while the coordinator does not answer (and,
 * through the collective, every other rank with it: bench/hosts_block.py).
 * The seqs stay in call order: a request only ever grows at the queue's
 * tail. */
#define NTX_DETACHED_FPS 64u
static void send_detached(const struct ntx_fp *fps, uint32_t k) {
  pthread_mutex_lock(&client->mu);
  uint32_t i = 0;
  struct ntx_sreq *q = client->det_open;
  if (q) {
    uint32_t m = q->cap - q->n < k ? q->cap - q->n : k;
    memcpy(q->fps + q->n, fps, (size_t)m * sizeof *fps);
    q->n += m;
    i = m;
  }
  struct ntx_sreq **tail = NULL;
  while (i < k && client->ndetached < NTX_DETACHED_MAX) {
    if (!tail) {
      tail = q ? &q->next : &client->sq;
      while (*tail)
        tail = &(*tail)->next;
    }
    uint32_t left = k - i, cap = left > NTX_DETACHED_FPS ? (left < NTX_FP_MAX ? left : NTX_FP_MAX) : NTX_DETACHED_FPS;
    struct ntx_sreq *nq = ntr_heap_calloc(1, sizeof *nq + (size_t)cap * sizeof *fps);
    if (!nq)
      break;
    uint32_t m = left < cap ? left : cap;
    nq->fps = (struct ntx_fp *)(nq + 1);
    memcpy(nq->fps, fps + i, (size_t)m * sizeof *fps);
    nq->n = m;
    nq->cap = cap;
    nq->id = ++client->next_req;
    nq->detached = 1;
    *tail = nq;
    tail = &nq->next;
    client->ndetached++;
    i += m;
    q = nq;
  }
  client->det_open = q && q->detached && !q->sent && !q->next && q->n < q->cap ? q : NULL;
  pthread_mutex_unlock(&client->mu);
}

int ntx_strict_wait(const struct ntr_record *const *recs, int n, char *msg, size_t msg_len) {
  if (msg && msg_len)
    msg[0] = '\0';
  if (client->mode != NTI_CHECK_STRICT || !ntx_enabled() || n <= 0)
    return 0;
  int off = __atomic_load_n(&client->strict_off, __ATOMIC_RELAXED);
  /* One host: a single call agrees through shared memory (strict_shm.h);
   * groups and what that path does not take go to the coordinator. */
  if (n == 1 && recs[0] && !off) {
    int v = ntx_shm_wait(recs[0], msg, msg_len);
    if (v != NTX_SHM_PASS)
      return v;
  }
  /* Fail open: without a verified coordinator nothing is refused. */
  if (!__atomic_load_n(&client->connected, __ATOMIC_ACQUIRE) &&
      (__atomic_load_n(&client->ever_ready, __ATOMIC_RELAXED) || __atomic_load_n(&strict_gave_up, __ATOMIC_RELAXED) ||
       __atomic_load_n(&client->auth_failed, __ATOMIC_RELAXED))) {
    if (ntx_cl_once(&said_nocoord_strict))
      ntx_cl_say("strict check: no coordinator connection; calls proceed unchecked");
    return 0;
  }
  struct ntx_fp *fps = ntr_heap_calloc((size_t)n, sizeof *fps);
  char text[NTX_TEXT_MAX + 1] = "";
  if (!fps)
    return 0;
  uint32_t k = 0;
  for (int i = 0; i < n; i++)
    if (recs[i] && ntx_fp_from_record(recs[i], &fps[k]) == 0) {
      ntx_fp_time(&fps[k], recs[i], client->ring ? client->ring->hdr : NULL);
      k++;
    }
  if (k == 0) {
    ntr_heap_free(fps);
    return 0;
  }
  /* The coordinator stopped answering (or strict checking is spent): the
   * request goes without a waiter.  It keeps the coordinator's view of our
   * seqs whole, a mismatch in it is still reported (a verdict), and its
   * REPLY is the round trip that re-arms strict checking. */
  if (off || __atomic_load_n(&client->strict_stalled, __ATOMIC_ACQUIRE)) {
    send_detached(fps, k);
    ntr_heap_free(fps);
    return 0;
  }
  /* One request per NTX_FP_MAX entries (a frame's worth), queued in call
   * order at the tail: the coordinator must see a rank's seqs in order. */
  uint32_t nq = (k + NTX_FP_MAX - 1) / NTX_FP_MAX;
  struct ntx_sreq *qs = ntr_heap_calloc(nq, sizeof *qs);
  if (!qs) {
    ntr_heap_free(fps);
    return 0;
  }
  struct timespec dl = deadline_after(nti_cfg.strict_timeout_s);
  uint32_t first_id;
  pthread_mutex_lock(&client->mu);
  first_id = client->next_req + 1;
  client->det_open = NULL; /* a waited request goes after it: nothing joins it now */
  struct ntx_sreq **tail = &client->sq;
  while (*tail)
    tail = &(*tail)->next;
  for (uint32_t i = 0; i < nq; i++) {
    qs[i].fps = fps + (size_t)i * NTX_FP_MAX;
    qs[i].n = i + 1 < nq ? NTX_FP_MAX : k - i * NTX_FP_MAX;
    qs[i].text = text;
    qs[i].text_len = sizeof text;
    qs[i].id = ++client->next_req;
    *tail = &qs[i];
    tail = &qs[i].next;
  }
  pthread_mutex_unlock(&client->mu);
  send_now();
  pthread_mutex_lock(&client->mu);
  int timed_out = 0, done = 0, status = NTX_REPLY_OK;
  while (!timed_out) {
    done = 1;
    for (uint32_t i = 0; i < nq; i++)
      done &= qs[i].done;
    if (done)
      break;
    timed_out = pthread_cond_timedwait(&client->cv, &client->mu, &dl) == ETIMEDOUT;
  }
  for (uint32_t i = 0; i < nq; i++) {
    for (struct ntx_sreq **pp = &client->sq; *pp; pp = &(*pp)->next)
      if (*pp == &qs[i]) {
        *pp = qs[i].next;
        break;
      }
    if (qs[i].done && qs[i].status != NTX_REPLY_OK && status != NTX_REPLY_MISMATCH)
      status = qs[i].status;
  }
  pthread_mutex_unlock(&client->mu);
  ntr_heap_free(qs);
  ntr_heap_free(fps);
  if (!done) {
    if (!__atomic_load_n(&client->connected, __ATOMIC_ACQUIRE)) {
      __atomic_store_n(&strict_gave_up, 1, __ATOMIC_RELAXED);
      if (ntx_cl_once(&said_timeout))
        ntx_cl_say("strict check: no answer within NCCLTRACE_STRICT_TIMEOUT=%gs; calls proceed unchecked "
                   "when that happens", nti_cfg.strict_timeout_s);
    } else {
      /* Connected, and nothing came back: treated as gone until a REPLY to
       * this request or a later one proves otherwise (client_link.c). */
      __atomic_store_n(&client->stall_id, first_id, __ATOMIC_RELAXED);
      if (!__atomic_exchange_n(&client->strict_stalled, 1, __ATOMIC_RELEASE))
        ntx_cl_say("strict check: the coordinator at %s:%s did not answer within NCCLTRACE_STRICT_TIMEOUT=%gs "
                   "although connected (stopped, frozen or cut off, or a rank that never made this call); strict "
                   "calls proceed without waiting until it answers again",
                   client->disc.host, client->disc.port, nti_cfg.strict_timeout_s);
    }
    ntx_cl_strict_timed_out();
    return 0;
  }
  if (status == NTX_REPLY_MISMATCH) {
    if (msg && msg_len)
      snprintf(msg, msg_len, "%s", text);
    return -1;
  }
  if (status != NTX_REPLY_OK && ntx_cl_once(&said_unchecked))
    ntx_cl_say("strict check: the coordinator could not check some calls (gone or over its limits); "
               "they proceed unchecked");
  return 0;
}

void ntx_stop(void) {
  if (!client->thread_ok)
    return;
  client->thread_ok = 0;
  ntx_shm_stop();
  __atomic_store_n(&client->stop, 1, __ATOMIC_RELEASE);
  nudge();
  /* Its exit path is bounded (~200 ms of goodbye); past NTX_JOIN_S it is stuck
   * and left: exit never waits on a tracer thread. */
  int joined = ntx_join_within(client->thread, NTX_JOIN_S) == 0;
  if (!joined)
    ntx_cl_say("the exchange thread did not stop within %.1f s; left running", NTX_JOIN_S);
  pthread_mutex_lock(&client->mu);
  pthread_cond_broadcast(&client->cv);
  pthread_mutex_unlock(&client->mu);
  if (joined) /* (the thread may be using it otherwise) */
    ntx_cagg_stop(&client->cagg); /* after our BYE: the aggregator reports us as a clean GONE */
  if (client->coord) {
    ntx_coord_stop(client->coord, NTX_LINGER_S);
    client->coord = NULL;
  }
  __atomic_store_n(&client->discovered, 0, __ATOMIC_RELEASE);
}
