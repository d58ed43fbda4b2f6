/* client.c -- the exchange client (contract: interpose/exchange.h): one
 * background thread per traced process that reads this process's ring,
 * streams fingerprints to the coordinator in batches, and turns verdicts
 * into a stderr line, a ring record and (mismatch, lost peer) a dump.
 *
 * The application thread never does network I/O in async mode: it writes
 * the ring (interposer) and, at init, puts a registration in a table under
 * a mutex (init is not a hot path).  In strict mode ntx_strict_wait queues a
 * request, nudges the thread through a pipe and waits on a condvar, bounded
 * by NCCLTRACE_STRICT_TIMEOUT.
 */
#include "interpose/exchange.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/trigger.h"
#include "interpose/exchange/coord.h"
#include "interpose/exchange/discover.h"
#include "interpose/exchange/record_fp.h"
#include "interpose/exchange/wire.h"
#include "recorder/clock.h"

#define OUT_CAP (256u * 1024u)    /* bytes queued towards the coordinator */
#define POLL_MIN_MS 1             /* ring poll interval while records flow */
#define POLL_MAX_MS 5             /* ... and when idle: bounds verdict latency */
#define PING_S 1.0                /* idle keepalive (the coordinator's dead timeout is 10 s) */
#define STUCK_S 0.05              /* a slot left half-written this long is skipped */
#define LINGER_S 2.0              /* embedded coordinator waits for the others at exit */

enum { S_OFF = 0, S_DISCONNECTED, S_CONNECTING, S_CHALLENGE, S_WELCOME, S_READY };
enum { ENV_PENDING = 0, ENV_OK = 1, ENV_DIFF = 2 };

struct reg {
  uint64_t comm_id;
  int32_t rank, nranks;
  struct ntr_comm_state *cs;
  int sent, env_state;
};

struct sreq {
  uint32_t id, n;
  struct ntx_fp *fps;
  int sent, done;
  int32_t status;
  char *text;
  size_t text_len;
  struct sreq *next;
};

static struct {
  /* set by ntx_start, read-only afterwards */
  int started, discovered;
  int mode;
  struct ntr_ring *ring;
  struct ntx_discovery disc;
  struct ntx_key key;
  struct ntx_coord *coord;
  pthread_t thread;
  int thread_ok;
  int wake[2];
  char env[NTX_ENV_MAX];
  uint32_t env_len;
  char hostname[NTX_HOST];
  int32_t launcher_rank;

  /* shared with application threads: under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct reg regs[NTR_COMM_MAX];
  int nregs;
  struct sreq *sq;
  uint32_t next_req;

  /* atomics */
  int stop, connected, ever_ready;

  /* client thread only */
  int fd, state, coord_embedded, auth_failed;
  int32_t coord_pid;
  char coord_host[NTX_HOST];
  struct ntx_session sess;
  uint64_t tx, rx;
  uint8_t in[NTX_FRAME_MAX + 4096];
  size_t in_len;
  uint8_t out[OUT_CAP];
  size_t out_len;
  uint64_t cursor, stuck_pos;
  double stuck_since, next_connect, backoff, last_tx, first_try;
  uint64_t lost_records;
  int said_waiting, said_gone;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = {-1, -1}, .fd = -1};

/* say-once flags shared by the application threads (atomic exchange) */
static int said_timeout, said_unchecked, said_nocoord_strict;
/* a strict wait timed out before any connection: later calls do not wait */
static int strict_gave_up;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One `nccltrace:` line with a single write(2): lines of several threads
 * and processes do not interleave mid-line. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char b[NTX_TEXT_MAX + 64];
  int n = snprintf(b, sizeof b, "nccltrace: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(b + n, sizeof b - (size_t)n - 1, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof b - 2)
    len = sizeof b - 2;
  b[len++] = '\n';
  ssize_t w = write(2, b, len);
  (void)w; /* stderr closed: nothing better to do */
}

static int once(int *flag) { return !__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED); }

static struct reg *reg_find(uint64_t comm_id) { /* pre: mu held */
  for (int i = 0; i < g.nregs; i++)
    if (g.regs[i].comm_id == comm_id)
      return &g.regs[i];
  return NULL;
}

/* ------------------------------------------------------------ records -- */

static void record_event(uint16_t kind, uint64_t comm_id, uint64_t seq, int32_t peer, uint64_t aux,
                         const char *field) {
  struct ntr_ring *ring = g.ring;
  if (!ring || !ring->hdr)
    return;
  int32_t rank = -1, nranks = 0;
  struct ntr_comm_state *cs = NULL;
  pthread_mutex_lock(&g.mu);
  struct reg *r = comm_id ? reg_find(comm_id) : NULL;
  if (r) {
    rank = r->rank;
    nranks = r->nranks;
    cs = r->cs;
  }
  pthread_mutex_unlock(&g.mu);
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
    pthread_mutex_lock(&g.mu);
    struct reg *r = reg_find(m->u.verdict.comm_id);
    if (r)
      r->env_state = m->u.verdict.aux > 0 ? ENV_DIFF : ENV_OK;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    return;
  }
  say("%s", text);
  static const uint16_t kinds[] = {
      [NTX_V_MISMATCH] = NTR_KIND_MISMATCH, [NTX_V_P2P_MISMATCH] = NTR_KIND_MISMATCH,
      [NTX_V_PEER_LOST] = NTR_KIND_PEER_LOST, [NTX_V_SKEW] = NTR_KIND_SKEW,
      [NTX_V_INIT_WAIT] = NTR_KIND_SKEW, [NTX_V_ENV_DIFF] = NTR_KIND_ENV_DIFF,
      [NTX_V_NOTE] = NTR_KIND_NOTE,
  };
  record_event(kinds[kind], m->u.verdict.comm_id, m->u.verdict.seq, m->u.verdict.peer,
               (uint64_t)m->u.verdict.aux, m->u.verdict.field);
  if (kind == NTX_V_MISMATCH || kind == NTX_V_P2P_MISMATCH)
    nti_trigger_dump(NTR_TRIG_MISMATCH, text);
  else if (kind == NTX_V_PEER_LOST)
    nti_trigger_dump(NTR_TRIG_PEER_LOST, text);
}

static void on_reply(const struct ntx_msg *m) {
  pthread_mutex_lock(&g.mu);
  for (struct sreq *q = g.sq; q; q = q->next)
    if (q->id == m->u.reply.req_id) {
      q->status = m->u.reply.status;
      if (m->u.reply.text_len) /* chunks of one call share the text: keep what says something */
        snprintf(q->text, q->text_len, "%.*s", (int)m->u.reply.text_len, m->u.reply.text);
      q->done = 1;
      pthread_cond_broadcast(&g.cv);
      break;
    }
  pthread_mutex_unlock(&g.mu);
}

/* --------------------------------------------------------- connection -- */

static int queue_frame(uint8_t type, const void *payload, size_t plen) {
  if (g.out_len + NTX_FRAME_HDR + plen + NTX_FRAME_MAC > sizeof g.out)
    return -1;
  g.out_len += ntx_frame_encode(g.out + g.out_len, sizeof g.out - g.out_len, type, g.tx++, payload,
                                plen, &g.sess, NTX_DIR_TO_COORD);
  g.last_tx = now_s();
  return 0;
}

/* Answer every strict request already sent: the coordinator that would have
 * answered is gone, so its callers proceed unchecked now, not at timeout. */
static void fail_sent_requests(int all) {
  pthread_mutex_lock(&g.mu);
  for (struct sreq *q = g.sq; q; q = q->next)
    if ((q->sent || all) && !q->done) {
      q->status = NTX_REPLY_UNCHECKED;
      q->done = 1;
    }
  for (int i = 0; i < g.nregs; i++)
    g.regs[i].sent = 0; /* a reconnect registers again */
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
}

static void disconnect(int clean_bye) {
  int was_ready = g.state == S_READY;
  if (g.fd >= 0)
    close(g.fd);
  g.fd = -1;
  g.state = S_DISCONNECTED;
  g.in_len = g.out_len = 0;
  __atomic_store_n(&g.connected, 0, __ATOMIC_RELEASE);
  fail_sent_requests(0);
  double now = now_s();
  g.backoff = g.auth_failed ? 5.0 : g.backoff < 0.05 ? 0.05 : g.backoff * 2 > 1.0 ? 1.0 : g.backoff * 2;
  g.next_connect = now + g.backoff;
  if (!was_ready || __atomic_load_n(&g.stop, __ATOMIC_RELAXED))
    return;
  if (clean_bye) {
    if (once(&g.said_gone))
      say("the coordinator at %s:%s shut down; ranks continue unchecked", g.disc.host, g.disc.port);
  } else if (g.coord_embedded && !g.disc.host_here) {
    /* The coordinator lived in another rank's process: losing it without
     * goodbye is losing that rank. */
    char text[256];
    snprintf(text, sizeof text,
             "lost rank %d (host %s, pid %d), which hosted the coordinator: its connection closed "
             "without goodbye (killed, crashed or hung); checking is off",
             0, g.coord_host, (int)g.coord_pid);
    say("%s", text);
    record_event(NTR_KIND_PEER_LOST, 0, 0, 0, (uint64_t)g.coord_pid, "lost");
    nti_trigger_dump(NTR_TRIG_PEER_LOST, text);
    g.said_gone = 1;
  } else if (once(&g.said_gone)) {
    say("lost the coordinator at %s:%s; ranks continue unchecked (retrying)", g.disc.host, g.disc.port);
  }
}

static void start_connect(double now) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  g.next_connect = now + (g.backoff < 0.05 ? 0.05 : g.backoff);
  if (getaddrinfo(g.disc.host, g.disc.port, &hints, &ai) != 0 || !ai)
    return;
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      g.fd = fd;
      g.state = S_CONNECTING;
      memset(&g.sess, 0, sizeof g.sess);
      g.sess.key = g.key;
      g.tx = g.rx = 0;
      g.in_len = g.out_len = 0;
    } else {
      close(fd);
    }
  }
  freeaddrinfo(ai);
}

static void send_hello(void) {
  uint8_t nonce[NTX_NONCE], buf[256];
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    uint64_t v[2] = {(uint64_t)getpid() * 0x9e3779b97f4a7c15ull, (uint64_t)(now_s() * 1e9)};
    memcpy(nonce, v, sizeof nonce);
  }
  const char *job = g.ring && g.ring->hdr ? g.ring->hdr->job_id : "";
  size_t n = ntx_enc_hello(buf, sizeof buf, nonce, (int32_t)getpid(), g.launcher_rank, 0, g.hostname, job);
  queue_frame(NTX_MSG_HELLO, buf, n); /* tagged with (coordinator nonce, zeros) */
  memcpy(g.sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
}

/* @return -1 when the connection must go. */
static int on_frame(const struct ntx_frame *f) {
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0)
    return -1;
  switch (g.state) {
  case S_CHALLENGE:
    if (m.type != NTX_MSG_CHALLENGE)
      return -1;
    g.coord_embedded = (m.u.challenge.flags & NTX_COORD_EMBEDDED) != 0;
    g.coord_pid = m.u.challenge.pid;
    memcpy(g.coord_host, m.u.challenge.host, sizeof g.coord_host);
    memcpy(g.sess.nonce, m.u.challenge.nonce, NTX_NONCE);
    send_hello();
    g.state = S_WELCOME;
    return 0;
  case S_WELCOME:
    if (m.type != NTX_MSG_WELCOME)
      return -1;
    g.state = S_READY;
    g.backoff = 0;
    g.auth_failed = 0;
    __atomic_store_n(&g.connected, 1, __ATOMIC_RELEASE);
    if (!__atomic_exchange_n(&g.ever_ready, 1, __ATOMIC_RELAXED) && ntr_cfg.verbose)
      say("cross-rank check %s: coordinator %s", g.mode == NTR_CHECK_STRICT ? "strict" : "async", g.disc.how);
    return 0;
  default:
    break;
  }
  switch (m.type) {
  case NTX_MSG_VERDICT: on_verdict(&m); return 0;
  case NTX_MSG_REPLY: on_reply(&m); return 0;
  case NTX_MSG_BYE: disconnect(1); return 1;
  default: return -1;
  }
}

static void do_read(void) {
  for (;;) {
    ssize_t n = recv(g.fd, g.in + g.in_len, sizeof g.in - g.in_len, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      disconnect(0);
      return;
    }
    if (n < 0)
      return;
    g.in_len += (size_t)n;
    size_t off = 0;
    for (;;) {
      struct ntx_frame f;
      int r = ntx_frame_parse(g.in + off, g.in_len - off, &g.sess, NTX_DIR_TO_CLIENT, g.rx, &f);
      if (r == 0)
        break;
      if (r < 0) {
        if (r == NTX_E_MAC && g.state != S_READY) {
          g.auth_failed = 1;
          if (once(&g.said_gone))
            say("the coordinator at %s:%s failed authentication (another job, or a different "
                "NCCLTRACE_SECRET); ranks continue unchecked", g.disc.host, g.disc.port);
        }
        disconnect(0);
        return;
      }
      g.rx++;
      off += (size_t)r;
      int rc = on_frame(&f);
      if (rc < 0)
        disconnect(0);
      if (rc != 0)
        return;
    }
    memmove(g.in, g.in + off, g.in_len - off);
    g.in_len -= off;
  }
}

static void do_flush(void) {
  while (g.out_len && g.fd >= 0) {
    ssize_t n = send(g.fd, g.out, g.out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return;
    if (n <= 0) {
      disconnect(0);
      return;
    }
    memmove(g.out, g.out + n, g.out_len - (size_t)n);
    g.out_len -= (size_t)n;
  }
}

/* ---------------------------------------------------------- ring reader -- */

/* Walk committed slots from the cursor (seqlock reads, recorder/ring.h) and
 * queue FP frames while there is room.  @return records consumed. */
static uint64_t read_ring(double now) {
  struct ntr_ring *ring = g.ring;
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
  uint64_t slots = ring->mask + 1, used = 0;
  if (head - g.cursor > slots) { /* lapped: those records are gone */
    g.lost_records += head - slots - g.cursor;
    g.cursor = head - slots;
  }
  static uint8_t payload[NTX_FRAME_MAX_PAYLOAD];
  uint32_t n = 0;
  while (g.cursor < head) {
    if (g.out_len + NTX_FRAME_HDR + 8 + (size_t)(n + 1) * NTX_FP_WIRE + NTX_FRAME_MAC > sizeof g.out)
      break; /* the ring holds the rest until the socket drains */
    struct ntr_record rec;
    uint64_t c = ntr_ring_read_slot(&ring->slots[g.cursor & ring->mask], &rec);
    if (c == 0 || c - 1 < g.cursor) { /* being written (or not yet started) */
      if (g.stuck_pos != g.cursor + 1) {
        g.stuck_pos = g.cursor + 1;
        g.stuck_since = now;
      }
      if (now - g.stuck_since < STUCK_S)
        break;
      g.lost_records++; /* a writer died mid-record: skip it */
    } else if (c - 1 > g.cursor) {
      g.lost_records++; /* overwritten since we looked */
    } else if (g.mode == NTR_CHECK_ASYNC) {
      struct ntx_fp fp;
      if (ntx_fp_from_record(&rec, &fp) == 0)
        ntx_fp_put(payload + 8, n++, &fp);
    }
    /* strict mode: fingerprints travel through ntx_strict_wait only, so
     * the coordinator sees each once and in call order */
    g.cursor++;
    used++;
    if (n == NTX_FP_MAX) {
      queue_frame(NTX_MSG_FP, payload, ntx_enc_fp_head(payload, sizeof payload, 0, n));
      n = 0;
    }
  }
  if (n)
    queue_frame(NTX_MSG_FP, payload, ntx_enc_fp_head(payload, sizeof payload, 0, n));
  return used;
}

/* Registrations and strict requests not sent yet. */
static void send_pending(void) {
  static uint8_t buf[NTX_FRAME_MAX_PAYLOAD];
  pthread_mutex_lock(&g.mu);
  for (int i = 0; i < g.nregs; i++) {
    struct reg *r = &g.regs[i];
    if (r->sent)
      continue;
    int32_t ver = g.ring && g.ring->hdr ? g.ring->hdr->nccl_version : 0;
    size_t n = ntx_enc_register(buf, sizeof buf, r->comm_id, r->rank, r->nranks, ver, g.env, g.env_len);
    if (queue_frame(NTX_MSG_REGISTER, buf, n) < 0)
      break;
    r->sent = 1;
  }
  for (struct sreq *q = g.sq; q; q = q->next) {
    if (q->sent)
      continue;
    size_t n = ntx_enc_fp_head(buf, sizeof buf, q->id, q->n);
    for (uint32_t i = 0; i < q->n; i++)
      ntx_fp_put(buf + 8, i, &q->fps[i]);
    if (queue_frame(NTX_MSG_STRICT, buf, n) < 0)
      break;
    q->sent = 1;
  }
  pthread_mutex_unlock(&g.mu);
}

static void *client_thread(void *arg) {
  (void)arg;
  int interval = POLL_MIN_MS;
  g.first_try = now_s();
  while (!__atomic_load_n(&g.stop, __ATOMIC_ACQUIRE)) {
    double now = now_s();
    if (g.state == S_DISCONNECTED && now >= g.next_connect)
      start_connect(now);
    if (g.state == S_DISCONNECTED && !g.ever_ready && now - g.first_try > 10 && once(&g.said_waiting))
      say("no coordinator answers at %s:%s yet (%s); ranks run unchecked meanwhile, still trying",
          g.disc.host, g.disc.port, g.disc.how);
    struct pollfd p[2] = {{.fd = g.wake[0], .events = POLLIN}, {.fd = g.fd, .events = 0}};
    if (g.fd >= 0)
      p[1].events = (short)(POLLIN | (g.state == S_CONNECTING || g.out_len ? POLLOUT : 0));
    poll(p, g.fd >= 0 ? 2 : 1, interval);
    if (p[0].revents & POLLIN) {
      char b[64];
      while (read(g.wake[0], b, sizeof b) > 0)
        ;
    }
    now = now_s();
    if (g.fd >= 0 && g.state == S_CONNECTING && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      int err = 0;
      socklen_t l = sizeof err;
      getsockopt(g.fd, SOL_SOCKET, SO_ERROR, &err, &l);
      if (err)
        disconnect(0);
      else
        g.state = S_CHALLENGE;
    }
    if (g.fd >= 0 && g.state >= S_CHALLENGE && (p[1].revents & (POLLIN | POLLERR | POLLHUP)))
      do_read();
    uint64_t used = 0;
    if (g.state == S_READY) {
      send_pending();
      used = read_ring(now);
      if (!g.out_len && now - g.last_tx >= PING_S)
        queue_frame(NTX_MSG_PING, NULL, 0);
    }
    if (g.fd >= 0 && g.out_len)
      do_flush();
    /* adaptive: 1 ms while records flow, doubling to 5 ms when idle */
    interval = used ? POLL_MIN_MS : interval * 2 > POLL_MAX_MS ? POLL_MAX_MS : interval * 2;
  }
  /* Exit: verdicts already received (recorded before we go), what the ring
   * still holds, then goodbye, bounded to ~200 ms. */
  if (g.state == S_READY)
    do_read();
  if (g.state == S_READY) {
    read_ring(now_s());
    queue_frame(NTX_MSG_BYE, "\0\0\0\0", 4);
    for (int i = 0; i < 20 && g.out_len && g.fd >= 0; i++) {
      struct pollfd p = {.fd = g.fd, .events = POLLOUT};
      poll(&p, 1, 10);
      do_flush();
    }
  }
  if (g.lost_records && g.ever_ready)
    say("cross-rank check: %llu records were overwritten in the ring before they could be sent "
        "(checked as gaps)", (unsigned long long)g.lost_records);
  if (g.fd >= 0)
    close(g.fd);
  g.fd = -1;
  g.state = S_OFF;
  __atomic_store_n(&g.connected, 0, __ATOMIC_RELEASE);
  fail_sent_requests(1);
  return NULL;
}

/* ---------------------------------------------------------------- API -- */

static void nudge(void) {
  if (g.wake[1] >= 0) {
    ssize_t w = write(g.wake[1], "x", 1);
    (void)w; /* a full pipe is already a nudge */
  }
}

/* In a fork child our thread does not exist: checking is off there (a
 * child that calls NCCL is a new participant the coordinator never met).
 * The child's copies of our descriptors are closed; the parent's stay. */
static void atfork_child(void) {
  __atomic_store_n(&g.discovered, 0, __ATOMIC_RELAXED);
  g.thread_ok = 0;
  g.coord = NULL; /* its thread is the parent's; its memory is left alone */
  if (g.fd >= 0)
    close(g.fd);
  if (g.wake[0] >= 0) {
    close(g.wake[0]);
    close(g.wake[1]);
  }
  g.fd = g.wake[0] = g.wake[1] = -1;
  pthread_mutex_init(&g.mu, NULL); /* another thread may have held it at fork */
}

void ntx_start(struct ntr_ring *ring) {
  if (__atomic_exchange_n(&g.started, 1, __ATOMIC_ACQ_REL))
    return;
  if (ntr_cfg.disable || (ntr_cfg.check == NTR_CHECK_OFF))
    return;
  g.ring = ring;
  g.launcher_rank = ring && ring->hdr ? ring->hdr->rank : -1;
  ntx_discover(ntr_cfg.coord, ntr_cfg.coord_port_offset, g.launcher_rank, &g.disc);
  if (!g.disc.found) {
    say("cross-rank check off: %s (set NCCLTRACE_COORD=host:port, or run under a launcher that "
        "sets MASTER_ADDR/MASTER_PORT)", g.disc.how);
    return;
  }
  if (!ring || !ring->hdr) {
    say("cross-rank check off: no ring to read fingerprints from");
    return;
  }
  char what[128];
  ntx_key_derive(ntr_cfg.secret, &g.key, what, sizeof what);
  gethostname(g.hostname, sizeof g.hostname - 1);
  /* NCCL_* of the ring header's environment block (the recorder already
   * left out anything that looks like a secret) */
  const struct ntr_ring_header *h = ring->hdr;
  for (uint32_t o = 0; o < h->env_len && o < sizeof h->env;) {
    const char *e = h->env + o;
    size_t l = strnlen(e, sizeof h->env - o);
    if (!strncmp(e, "NCCL_", 5) && memchr(e, '=', l) && g.env_len + l + 1 <= sizeof g.env) {
      memcpy(g.env + g.env_len, e, l + 1);
      g.env_len += (uint32_t)l + 1;
    }
    o += (uint32_t)l + 1;
  }
  if (g.disc.host_here) {
    struct ntx_coord_cfg cc;
    char err[256];
    ntx_coord_default_cfg(&cc);
    cc.host = g.disc.host;
    cc.port = g.disc.port;
    cc.key = g.key;
    cc.embedded = 1;
    cc.lim.skew_s = ntr_cfg.skew_s;
    cc.lim.init_wait_s = ntr_cfg.skew_s < ntr_cfg.strict_timeout_s ? ntr_cfg.skew_s : ntr_cfg.strict_timeout_s;
    cc.log = ntr_cfg.verbose ? stderr : NULL;
    if (ntx_coord_listen(&g.coord, &cc, err, sizeof err) < 0) {
      say("cannot host the coordinator: %s; checking still tries to connect there", err);
    } else if (ntx_coord_start(g.coord) < 0) {
      say("cannot start the coordinator thread; checking still tries to connect");
      ntx_coord_stop(g.coord, 0);
      g.coord = NULL;
    }
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g.cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pipe2(g.wake, O_NONBLOCK | O_CLOEXEC) < 0) {
    say("cross-rank check off: pipe: %s", strerror(errno));
    return;
  }
  g.mode = ntr_cfg.check;
  g.state = S_DISCONNECTED;
  /* from the oldest record still in the ring: nothing before start is "lost" */
  uint64_t head = __atomic_load_n(&ring->hdr->head, __ATOMIC_ACQUIRE);
  g.cursor = head > ring->mask + 1 ? head - ring->mask - 1 : 0;
  /* our thread takes no application signal: handlers and sigwait users
   * keep the behaviour they had without us */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&g.thread, NULL, client_thread, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) {
    say("cross-rank check off: cannot start its thread: %s", strerror(rc));
    return;
  }
  g.thread_ok = 1;
  pthread_atfork(NULL, NULL, atfork_child);
  __atomic_store_n(&g.discovered, 1, __ATOMIC_RELEASE);
}

int ntx_enabled(void) { return __atomic_load_n(&g.discovered, __ATOMIC_ACQUIRE); }

void ntx_comm_register(struct ntr_comm_state *cs) {
  if (!cs || !ntx_enabled())
    return;
  pthread_mutex_lock(&g.mu);
  struct reg *r = NULL;
  for (int i = 0; i < g.nregs && !r; i++)
    if (g.regs[i].comm_id == cs->comm_id && g.regs[i].rank == cs->rank)
      r = &g.regs[i];
  if (!r && g.nregs < (int)NTR_COMM_MAX)
    r = &g.regs[g.nregs++];
  if (r) {
    r->comm_id = cs->comm_id;
    r->rank = cs->rank;
    r->nranks = cs->nranks;
    r->cs = cs;
    r->sent = 0;
    r->env_state = ENV_PENDING;
  }
  pthread_mutex_unlock(&g.mu);
  nudge(); /* init is no hot path: register at once */
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
  if (!cs || !ntx_enabled() || ntr_cfg.env_check != NTR_ENV_CHECK_ABORT)
    return 0;
  struct timespec dl = deadline_after(ntr_cfg.strict_timeout_s);
  int state = ENV_PENDING;
  pthread_mutex_lock(&g.mu);
  for (;;) {
    struct reg *r = reg_find(cs->comm_id);
    state = r ? r->env_state : ENV_OK;
    if (state != ENV_PENDING || __atomic_load_n(&g.stop, __ATOMIC_RELAXED))
      break;
    if (pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT)
      break;
  }
  pthread_mutex_unlock(&g.mu);
  if (state == ENV_DIFF)
    say("comm %08x init refused: NCCL_* environment differs between ranks (NCCLTRACE_ENV_CHECK=abort)",
        NTX_COMM_SHORT(cs->comm_id));
  return state == ENV_DIFF ? -1 : 0;
}

int ntx_strict_wait(const struct ntr_record *const *recs, int n, char *msg, size_t msg_len) {
  if (msg && msg_len)
    msg[0] = '\0';
  if (g.mode != NTR_CHECK_STRICT || !ntx_enabled() || n <= 0)
    return 0;
  if (!__atomic_load_n(&g.connected, __ATOMIC_ACQUIRE) &&
      (__atomic_load_n(&g.ever_ready, __ATOMIC_RELAXED) || __atomic_load_n(&strict_gave_up, __ATOMIC_RELAXED))) {
    if (once(&said_nocoord_strict))
      say("strict check: no coordinator connection; calls proceed unchecked");
    return 0;
  }
  struct ntx_fp *fps = calloc((size_t)n, sizeof *fps);
  char text[NTX_TEXT_MAX + 1] = "";
  if (!fps)
    return 0;
  uint32_t k = 0;
  for (int i = 0; i < n; i++)
    if (recs[i] && ntx_fp_from_record(recs[i], &fps[k]) == 0)
      k++;
  if (k == 0) {
    free(fps);
    return 0;
  }
  /* One request per NTX_FP_MAX entries (a frame's worth), queued in call
   * order at the tail: the coordinator must see a rank's seqs in order. */
  uint32_t nq = (k + NTX_FP_MAX - 1) / NTX_FP_MAX;
  struct sreq *qs = calloc(nq, sizeof *qs);
  if (!qs) {
    free(fps);
    return 0;
  }
  struct timespec dl = deadline_after(ntr_cfg.strict_timeout_s);
  pthread_mutex_lock(&g.mu);
  struct sreq **tail = &g.sq;
  while (*tail)
    tail = &(*tail)->next;
  for (uint32_t i = 0; i < nq; i++) {
    qs[i].fps = fps + (size_t)i * NTX_FP_MAX;
    qs[i].n = i + 1 < nq ? NTX_FP_MAX : k - i * NTX_FP_MAX;
    qs[i].text = text;
    qs[i].text_len = sizeof text;
    qs[i].id = ++g.next_req;
    *tail = &qs[i];
    tail = &qs[i].next;
  }
  pthread_mutex_unlock(&g.mu);
  nudge();
  pthread_mutex_lock(&g.mu);
  int timed_out = 0, done = 0, status = NTX_REPLY_OK;
  while (!timed_out) {
    done = 1;
    for (uint32_t i = 0; i < nq; i++)
      done &= qs[i].done;
    if (done)
      break;
    timed_out = pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT;
  }
  for (uint32_t i = 0; i < nq; i++) {
    for (struct sreq **pp = &g.sq; *pp; pp = &(*pp)->next)
      if (*pp == &qs[i]) {
        *pp = qs[i].next;
        break;
      }
    if (qs[i].done && qs[i].status != NTX_REPLY_OK && status != NTX_REPLY_MISMATCH)
      status = qs[i].status;
  }
  pthread_mutex_unlock(&g.mu);
  free(qs);
  free(fps);
  if (!done) {
    if (!__atomic_load_n(&g.connected, __ATOMIC_ACQUIRE))
      __atomic_store_n(&strict_gave_up, 1, __ATOMIC_RELAXED);
    if (once(&said_timeout))
      say("strict check: no answer within NCCLTRACE_STRICT_TIMEOUT=%gs; calls proceed unchecked "
          "when that happens", ntr_cfg.strict_timeout_s);
    return 0;
  }
  if (status == NTX_REPLY_MISMATCH) {
    if (msg && msg_len)
      snprintf(msg, msg_len, "%s", text);
    return -1;
  }
  if (status != NTX_REPLY_OK && once(&said_unchecked))
    say("strict check: the coordinator could not check some calls (gone or over its limits); "
        "they proceed unchecked");
  return 0;
}

void ntx_stop(void) {
  if (!g.thread_ok)
    return;
  g.thread_ok = 0;
  __atomic_store_n(&g.stop, 1, __ATOMIC_RELEASE);
  nudge();
  pthread_join(g.thread, NULL);
  pthread_mutex_lock(&g.mu);
  pthread_cond_broadcast(&g.cv);
  pthread_mutex_unlock(&g.mu);
  if (g.coord) {
    ntx_coord_stop(g.coord, LINGER_S);
    g.coord = NULL;
  }
  __atomic_store_n(&g.discovered, 0, __ATOMIC_RELEASE);
}
