/* test_coord.c -- the coordinator over real sockets, driven by simulated
 * clients that speak the wire protocol directly: a mismatch reaches every
 * rank; a client that disappears without BYE is named to the others within
 * 1 s and a BYE is silent; garbage, wrong keys, replays, oversized and
 * dribbled (slowloris) frames are cut off while the others are served on;
 * the client limit holds; a status query (v5) gets the whole job's view
 * -- each rank's process as its REGISTER named it -- and a query that
 * breaks its rules is cut off without disturbing the ranks or counting as
 * a lost one. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/coord.h"
#include "interpose/exchange/wire.h"
#include "recorder/format.h"

#include "tests/nt_test.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int port;
static struct ntx_key key = {0x1111, 0x2222};
#define COMM 0x9f2c0123456789abull

struct rc {
  int fd;
  struct ntx_session s;
  uint64_t tx, rx;
  uint8_t in[NTX_FRAME_MAX * 2];
  size_t in_len;
  uint8_t frame[NTX_FRAME_MAX];
};

static int raw_connect(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* @return 1 with a message (payload copied to c->frame), 0 on timeout, -1 when closed. */
static int rc_recv(struct rc *c, struct ntx_msg *m, int timeout_ms) {
  double end = now_s() + timeout_ms / 1000.0;
  for (;;) {
    struct ntx_frame f;
    int r = ntx_frame_parse(c->in, c->in_len, &c->s, NTX_DIR_TO_CLIENT, c->rx, &f);
    if (r < 0)
      return -1;
    if (r > 0) {
      memcpy(c->frame, f.payload, f.len);
      f.payload = c->frame;
      memmove(c->in, c->in + r, c->in_len - (size_t)r);
      c->in_len -= (size_t)r;
      c->rx++;
      return ntx_msg_decode(&f, m) == 0 ? 1 : -1;
    }
    int left = (int)((end - now_s()) * 1000);
    if (left <= 0)
      return 0;
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    if (poll(&p, 1, left) <= 0)
      return 0;
    ssize_t n = recv(c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);
    if (n <= 0)
      return -1;
    c->in_len += (size_t)n;
  }
}

static void rc_send(struct rc *c, uint8_t type, const void *p, size_t n) {
  uint8_t buf[NTX_FRAME_MAX];
  size_t l = ntx_frame_encode(buf, sizeof buf, type, c->tx++, p, n, &c->s, NTX_DIR_TO_COORD);
  ssize_t w = send(c->fd, buf, l, MSG_NOSIGNAL);
  (void)w;
}

static int rc_open_flags(struct rc *c, const struct ntx_key *k, int lrank, uint32_t flags) {
  memset(c, 0, sizeof *c);
  c->fd = raw_connect();
  ntx_sess_challenge(&c->s);
  struct ntx_msg m;
  if (c->fd < 0 || rc_recv(c, &m, 2000) != 1 || m.type != NTX_MSG_CHALLENGE)
    return -1;
  ntx_sess_bind(&c->s, k, c->frame); /* rc_recv left the CHALLENGE payload there */
  uint8_t nonce[NTX_NONCE], p[256];
  for (int i = 0; i < (int)NTX_NONCE; i++)
    nonce[i] = (uint8_t)(rand());
  size_t n = ntx_enc_hello(p, sizeof p, nonce, 4000 + lrank, lrank, flags, "simhost", "job", ntx_key_id(k));
  rc_send(c, NTX_MSG_HELLO, p, n);
  memcpy(c->s.nonce + NTX_NONCE, nonce, NTX_NONCE);
  if (rc_recv(c, &m, 2000) != 1 || m.type != NTX_MSG_WELCOME)
    return -1;
  return 0;
}

static int rc_open(struct rc *c, const struct ntx_key *k, int lrank) { return rc_open_flags(c, k, lrank, 0); }

/* What a status query sees: counts of its entries. */
struct seen {
  int procs, members, connected, pids_ok, parts, busy;
  char summary[NTX_JOB_TEXT_MAX + 1];
};

/* Open a query connection, send QUERY, read every JOB part.
 * @return 0, or -1 when the protocol was not followed. */
static int rc_query(struct seen *s) {
  struct rc q;
  struct ntx_msg m;
  uint8_t p[16];
  memset(s, 0, sizeof *s);
  if (rc_open_flags(&q, &key, -1, NTX_HELLO_QUERY) < 0)
    return -1;
  rc_send(&q, NTX_MSG_QUERY, p, ntx_enc_query(p, sizeof p, NTX_QUERY_JOB));
  for (;;) {
    if (rc_recv(&q, &m, 2000) != 1 || m.type != NTX_MSG_JOB || m.u.job.part != (uint32_t)s->parts) {
      close(q.fd);
      return -1;
    }
    s->parts++;
    s->busy |= (m.u.job.flags & NTX_JOB_BUSY) != 0;
    struct ntx_job_ent e;
    uint32_t off = 0;
    while (ntx_job_next(m.u.job.ents, m.u.job.len, &off, &e)) {
      if (e.kind == NTX_JE_PROC)
        s->procs++;
      if (e.kind == NTX_JE_MEMBER && e.u.member.comm_id == COMM) {
        s->members++;
        s->connected += e.u.member.state == NTX_JS_CONNECTED;
        s->pids_ok += e.u.member.pid == 1000 + e.u.member.rank && !strcmp(e.u.member.host, "simhost");
      }
      if (e.kind == NTX_JE_TEXT && e.u.text.vkind == NTX_JT_SUMMARY)
        snprintf(s->summary, sizeof s->summary, "%s", e.u.text.text);
    }
    if (m.u.job.flags & NTX_JOB_LAST)
      break;
  }
  close(q.fd); /* without BYE: a query's close is no lost rank */
  return 0;
}

static void rc_register(struct rc *c, uint64_t comm, int rank, int nranks) {
  uint8_t p[256];
  size_t n = ntx_enc_register(p, sizeof p, comm, rank, nranks, 22809, 1000 + rank, rank, "NCCL_PROTO=Simple", 18);
  rc_send(c, NTX_MSG_REGISTER, p, n);
}

static void rc_fp(struct rc *c, int rank, uint64_t seq, unsigned kind) {
  uint8_t p[128];
  size_t n = ntx_enc_fp_head(p, sizeof p, 0, 1);
  struct ntx_fp fp = {.comm_id = COMM, .seq = seq, .count = 64, .kind = (uint16_t)kind, .dtype = 7,
                      .dir = NTX_FP_COLL, .redop = kind == NTR_KIND_ALLREDUCE ? 0 : -1,
                      .peer = kind == NTR_KIND_ALLREDUCE ? -1 : 0, .rank = rank};
  ntx_fp_put(p + 8, 0, &fp);
  rc_send(c, NTX_MSG_FP, p, n);
}

/* Wait for a verdict of this kind (other messages are skipped). */
static int wait_verdict(struct rc *c, uint32_t kind, int timeout_ms, char *text, size_t tl) {
  double end = now_s() + timeout_ms / 1000.0;
  struct ntx_msg m;
  while (now_s() < end) {
    int r = rc_recv(c, &m, (int)((end - now_s()) * 1000) + 1);
    if (r < 0)
      return -1;
    if (r == 1 && m.type == NTX_MSG_VERDICT && m.u.verdict.kind == kind) {
      if (text)
        snprintf(text, tl, "%.*s", (int)m.u.verdict.text_len, m.u.verdict.text);
      return 1;
    }
  }
  return 0;
}

/* 1 when the coordinator closed this raw socket within timeout_ms. */
static int closed_within(int fd, int timeout_ms) {
  double end = now_s() + timeout_ms / 1000.0;
  char b[4096];
  while (now_s() < end) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) > 0) {
      ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN))
        return 1;
    }
  }
  return 0;
}

static struct rc cl[4];

int main(void) {
  struct ntx_coord_cfg cfg;
  ntx_coord_default_cfg(&cfg);
  cfg.host = "127.0.0.1";
  cfg.port = "0";
  cfg.key = key;
  cfg.hs_timeout_s = 1;
  cfg.slow_timeout_s = 1;
  cfg.lim.max_clients = 12;
  struct ntx_coord *co;
  char err[256];
  if (ntx_coord_listen(&co, &cfg, err, sizeof err) < 0) {
    fprintf(stderr, "listen: %s\n", err);
    return 77;
  }
  port = ntx_coord_port(co);
  ntx_coord_start(co);

  for (int r = 0; r < 4; r++) {
    NT_CHECK(rc_open(&cl[r], &key, r) == 0);
    rc_register(&cl[r], COMM, r, 4);
  }
  /* hostile neighbours connect while the job runs */
  int garbage = raw_connect();
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ssize_t w = send(garbage, junk, sizeof junk, MSG_NOSIGNAL);
  (void)w;
  struct rc wrong;
  struct ntx_key bad = {0x1111, 0x2223};
  NT_CHECK(rc_open(&wrong, &bad, 9) < 0); /* HELLO names a key the coordinator does not hold ... */
  int slow = raw_connect();
  w = send(slow, "NX\1", 3, MSG_NOSIGNAL); /* ... and a frame that never completes */
  int big = raw_connect();
  uint8_t hdr[16] = {'N', 'X', NTX_WIRE_VERSION, NTX_MSG_HELLO, 0, 0, 0, 0x10}; /* 256 MiB payload */
  w = send(big, hdr, sizeof hdr, MSG_NOSIGNAL);
  /* an impostor that knows the protocol and the name of the job's key (it
   * is public in HELLO), but not the key, sends a HELLO naming it */
  struct rc imp;
  memset(&imp, 0, sizeof imp);
  imp.fd = raw_connect();
  ntx_sess_challenge(&imp.s);
  struct ntx_msg m;
  NT_CHECK(rc_recv(&imp, &m, 2000) == 1 && m.type == NTX_MSG_CHALLENGE);
  ntx_sess_bind(&imp.s, &bad, imp.frame);
  uint8_t p[256], nonce[NTX_NONCE] = {1};
  size_t n = ntx_enc_hello(p, sizeof p, nonce, 1, 1, 0, "evil", "job", ntx_key_id(&key));
  rc_send(&imp, NTX_MSG_HELLO, p, n);

  NT_CHECK(closed_within(garbage, 1500));
  NT_CHECK(closed_within(big, 1500));
  NT_CHECK(closed_within(imp.fd, 1500));
  NT_CHECK(closed_within(slow, 2500)); /* slowloris: cut at the 1 s handshake/partial limit */

  /* status queries: the view names every rank with the pid its REGISTER
   * gave (1000 + rank, not its HELLO's 4000 + rank) ... */
  struct seen sn;
  NT_CHECK(rc_query(&sn) == 0);
  NT_CHECK(sn.procs == 4 && sn.members == 4 && sn.connected == 4 && sn.pids_ok == 4 && !sn.busy);
  NT_CHECK(strstr(sn.summary, "4 connections, 1 host, 1 communicator (4 ranks): no problem seen") != NULL);
  printf("status query: %s\n", sn.summary);
  /* ... and a query that breaks the rules is cut off: a rank's message, a
   * second QUERY, a HELLO that is both aggregator and query */
  struct rc q;
  NT_CHECK(rc_open_flags(&q, &key, -1, NTX_HELLO_QUERY) == 0);
  rc_register(&q, COMM, 3, 4);
  NT_CHECK(closed_within(q.fd, 1500));
  close(q.fd);
  NT_CHECK(rc_open_flags(&q, &key, -1, NTX_HELLO_QUERY) == 0);
  rc_send(&q, NTX_MSG_QUERY, p, ntx_enc_query(p, sizeof p, NTX_QUERY_JOB));
  rc_send(&q, NTX_MSG_QUERY, p, ntx_enc_query(p, sizeof p, NTX_QUERY_JOB));
  NT_CHECK(closed_within(q.fd, 1500));
  close(q.fd);
  NT_CHECK(rc_open_flags(&q, &key, -1, NTX_HELLO_QUERY | NTX_HELLO_AGG) < 0);
  close(q.fd);
  /* the rate limit: a burst of 4 (2 used above), 2 a second after it */
  int busy = 0;
  for (int i = 0; i < 8; i++) {
    NT_CHECK(rc_query(&sn) == 0);
    busy += sn.busy;
  }
  NT_CHECK(busy >= 1 && busy <= 6);
  usleep(600 * 1000); /* a token back */
  NT_CHECK(rc_query(&sn) == 0 && !sn.busy && sn.members == 4 && sn.connected == 4 && sn.pids_ok == 4);

  /* the job is served all along: seq 1 agrees, seq 2 rank 1 differs */
  for (int r = 0; r < 4; r++)
    rc_fp(&cl[r], r, 1, NTR_KIND_ALLREDUCE);
  for (int r = 0; r < 4; r++)
    rc_fp(&cl[r], r, 2, r == 1 ? NTR_KIND_BROADCAST : NTR_KIND_ALLREDUCE);
  double t0 = now_s();
  char text[2048];
  for (int r = 0; r < 4; r++) {
    NT_CHECK(wait_verdict(&cl[r], NTX_V_MISMATCH, 1000, text, sizeof text) == 1);
    NT_CHECK(strstr(text, "seq 2 field op: rank 1 Broadcast") != NULL);
  }
  printf("mismatch to all 4 in %.1f ms: %s\n", (now_s() - t0) * 1e3, text);

  /* replay: client 3 resends an old frame verbatim -> cut off (and reported lost) */
  {
    uint8_t buf[NTX_FRAME_MAX];
    size_t l = ntx_frame_encode(buf, sizeof buf, NTX_MSG_PING, cl[3].tx - 1, NULL, 0, &cl[3].s, NTX_DIR_TO_COORD);
    w = send(cl[3].fd, buf, l, MSG_NOSIGNAL);
    NT_CHECK(closed_within(cl[3].fd, 1500));
    close(cl[3].fd);
  }
  for (int r = 0; r < 3; r++)
    NT_CHECK(wait_verdict(&cl[r], NTX_V_PEER_LOST, 1000, NULL, 0) == 1);

  /* clean exit: BYE, nobody is told */
  uint8_t bye[4] = {0};
  rc_send(&cl[2], NTX_MSG_BYE, bye, 4);
  close(cl[2].fd);
  /* killed: the socket just closes; the survivors hear it within 1 s */
  t0 = now_s();
  close(cl[1].fd);
  NT_CHECK(wait_verdict(&cl[0], NTX_V_PEER_LOST, 1000, text, sizeof text) == 1);
  double lost_ms = (now_s() - t0) * 1e3;
  NT_CHECK(strstr(text, "lost rank 1 (host simhost, pid 4001)") != NULL);
  NT_CHECK(lost_ms < 1000);
  printf("peer lost reported in %.1f ms: %s\n", lost_ms, text);
  NT_CHECK(!strstr(text, "rank 2"));

  /* the client limit: 12 slots, 1 in use: 11 more fit, the 12th is refused */
  int extra[12];
  for (int i = 0; i < 12; i++)
    extra[i] = raw_connect();
  NT_CHECK(closed_within(extra[11], 1000));
  for (int i = 0; i < 12; i++)
    close(extra[i]);
  struct ntx_coord_stats st;
  struct ntx_check_stats cst;
  ntx_coord_get_stats(co, &st, &cst);
  /* before authentication every rule broken counts as auth: garbage, oversized,
   * impostor, slowloris; after it the replay counts as malformed */
  NT_CHECK(st.rejected_full >= 1 && st.rejected_auth >= 4 && st.rejected_malformed >= 1);
  printf("stats: accepted %llu, auth %llu, malformed %llu, slow %llu, full %llu, lost %llu\n",
         (unsigned long long)st.accepted, (unsigned long long)st.rejected_auth,
         (unsigned long long)st.rejected_malformed, (unsigned long long)st.slow_closed,
         (unsigned long long)st.rejected_full, (unsigned long long)cst.lost);
  NT_CHECK(cst.lost == 2); /* the query connections closed without BYE are not lost ranks */
  NT_CHECK(st.queries >= 3 && st.queries_refused >= 1);

  /* and it still serves a newcomer once the extra connections are gone */
  usleep(300 * 1000);
  struct rc late;
  NT_CHECK(rc_open(&late, &key, 5) == 0);
  close(late.fd);
  close(cl[0].fd);
  close(garbage);
  close(slow);
  close(big);
  close(imp.fd);
  ntx_coord_stop(co, 0);
  if (nt_failures)
    fprintf(stderr, "test_coord: %d nt_failures\n", nt_failures);
  else
    printf("test_coord: ok\n");
  return nt_exit_status();
}
