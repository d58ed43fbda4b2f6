/* status_job.c -- `nccltrace status --job [--coord HOST:PORT] [--json]`:
 * the whole job as its coordinator sees it, from any host, as NCCL's RAS
 * client (ncclras) gives one view of a job from any of its nodes.  One
 * status query of the exchange protocol (docs/wire-protocol.md, "Status
 * query"): a connection authenticated with NCCLTRACE_SECRET like any
 * rank's, one QUERY, the JOB parts back, then BYE.  Read-only: the
 * coordinator answers from what it holds; no rank is asked anything.
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * Exit status: 0 answered; 1 the coordinator refused (its rate limit);
 * 2 no secret, no address, the coordinator unreachable, silent, refusing
 * the key, or answering what is not a view -- each within NTT_JOB_WAIT_S.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/auth.h"
#include "interpose/exchange/check.h"
#include "interpose/exchange/discover.h"
#include "interpose/exchange/wire.h"
#include "tools/ntt.h"

#define NTT_JOB_WAIT_S 2.0 /* connect, handshake and the whole answer */

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct qconn {
  int fd;
  double deadline;
  struct ntx_session sess;
  uint64_t tx, rx;
  uint8_t in[NTX_FRAME_MAX];
  size_t in_len, used;
  char where[512]; /* "HOST:PORT (how it was found)" for every message */
};

/* Connect within the deadline.  @return 0, or -1 with why set. */
static int q_connect(struct qconn *q, const char *host, const char *port, char *why, size_t wl) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc) {
    snprintf(why, wl, "cannot resolve %.100s: %s", host, gai_strerror(rc));
    return -1;
  }
  int err = ECONNREFUSED;
  for (struct addrinfo *a = ai; a && q->fd < 0; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      err = errno;
      close(fd);
      continue;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int ms = (int)((q->deadline - mono_s()) * 1000);
    int n = ms > 0 ? poll(&p, 1, ms) : 0;
    socklen_t sl = sizeof err;
    if (n <= 0) {
      err = ETIMEDOUT;
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) == 0 && err == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      q->fd = fd;
      break;
    }
    close(fd);
  }
  freeaddrinfo(ai);
  if (q->fd < 0) {
    snprintf(why, wl, "%s", err == ETIMEDOUT ? "no answer to the connection within 2 s" : strerror(err));
    return -1;
  }
  return 0;
}

static int q_send(struct qconn *q, uint8_t type, const void *payload, size_t plen) {
  uint8_t buf[NTX_FRAME_HDR + 256 + NTX_FRAME_MAC];
  size_t n = ntx_frame_encode(buf, sizeof buf, type, q->tx++, payload, plen, &q->sess, NTX_DIR_TO_COORD);
  for (size_t off = 0; n && off < n;) {
    ssize_t w = send(q->fd, buf + off, n - off, MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      struct pollfd p = {.fd = q->fd, .events = POLLOUT};
      int ms = (int)((q->deadline - mono_s()) * 1000);
      if (ms <= 0 || poll(&p, 1, ms) <= 0)
        return -1;
      continue;
    }
    if (w <= 0)
      return -1;
    off += (size_t)w;
  }
  return n ? 0 : -1;
}

/* The next frame (its tag checked under sess unless sess is NULL).
 * @return 0, -1 closed by the peer, -2 the deadline, or an ntx_wire_err. */
static int q_recv(struct qconn *q, const struct ntx_session *sess, struct ntx_frame *f) {
  memmove(q->in, q->in + q->used, q->in_len - q->used);
  q->in_len -= q->used;
  q->used = 0;
  for (;;) {
    int r = ntx_frame_parse(q->in, q->in_len, sess, NTX_DIR_TO_CLIENT, q->rx, f);
    if (r > 0) {
      q->used = (size_t)r;
      q->rx++;
      return 0;
    }
    if (r < 0)
      return r;
    struct pollfd p = {.fd = q->fd, .events = POLLIN};
    int ms = (int)((q->deadline - mono_s()) * 1000);
    if (ms <= 0 || poll(&p, 1, ms) <= 0)
      return -2;
    ssize_t n = recv(q->fd, q->in + q->in_len, sizeof q->in - q->in_len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      continue;
    if (n <= 0)
      return -1;
    q->in_len += (size_t)n;
  }
}

/* The answer: every entry of every part, in order. */
struct view {
  struct ntx_job_ent *e;
  size_t n, cap;
  int truncated, busy;
};

static int view_add(struct view *v, const struct ntx_job_ent *e) {
  if (v->n == v->cap) {
    size_t nc = v->cap ? 2 * v->cap : 256;
    struct ntx_job_ent *p = realloc(v->e, nc * sizeof *p);
    if (!p)
      return -1;
    v->e = p;
    v->cap = nc;
  }
  v->e[v->n++] = *e;
  return 0;
}

static int fail(const struct qconn *q, const char *what) {
  char e[400];
  fprintf(stderr, "nccltrace: status --job: the coordinator at %s: %s\n", ntt_esc(q->where, e, sizeof e), what);
  return NTT_EXIT_INPUT;
}

/* Handshake (wire.h), QUERY, the JOB parts.  @return an exit status. */
static int q_ask(struct qconn *q, const struct ntx_key *key, struct view *v) {
  struct ntx_frame f;
  struct ntx_msg m;
  ntx_sess_challenge(&q->sess);
  int r = q_recv(q, &q->sess, &f);
  if (r == -2)
    return fail(q, "no CHALLENGE within 2 s (not an nccltrace coordinator, or its process is stopped)");
  if (r == -1)
    return fail(q, "closed the connection at once (its connection budget is full, or not a coordinator)");
  if (r < 0 || ntx_msg_decode(&f, &m) < 0 || m.type != NTX_MSG_CHALLENGE) {
    char b[160];
    snprintf(b, sizeof b, "not an nccltrace coordinator of this version (%s)",
             r < 0 ? ntx_wire_strerror(r) : "its first message is no CHALLENGE");
    return fail(q, b);
  }
  uint8_t nonce[NTX_NONCE], buf[256];
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    uint64_t t[2] = {(uint64_t)mono_s() * 1000000000ull, (uint64_t)getpid()};
    memcpy(nonce, t, sizeof nonce);
  }
  ntx_sess_bind(&q->sess, key, f.payload);
  char host[NTX_HOST] = "";
  gethostname(host, sizeof host - 1);
  size_t n = ntx_enc_hello(buf, sizeof buf, nonce, (int32_t)getpid(), -1, NTX_HELLO_QUERY, host, "",
                           ntx_key_id(key));
  if (q_send(q, NTX_MSG_HELLO, buf, n) < 0)
    return fail(q, "the connection broke during the handshake");
  memcpy(q->sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
  r = q_recv(q, &q->sess, &f);
  if (r == -1)
    return fail(q, "refused this query after HELLO: it does not hold the key of this NCCLTRACE_SECRET (set the "
                   "job's value), or it has 4 status queries at once");
  if (r == -2)
    return fail(q, "no WELCOME within 2 s");
  if (r == NTX_E_MAC)
    return fail(q, "could not prove it holds the key of NCCLTRACE_SECRET: not this job's coordinator");
  if (r < 0 || ntx_msg_decode(&f, &m) < 0 || m.type != NTX_MSG_WELCOME)
    return fail(q, "broke the protocol during the handshake");
  n = ntx_enc_query(buf, sizeof buf, NTX_QUERY_JOB);
  if (q_send(q, NTX_MSG_QUERY, buf, n) < 0)
    return fail(q, "the connection broke before the query was sent");
  for (uint32_t part = 0;; part++) {
    r = q_recv(q, &q->sess, &f);
    if (r == -1)
      return fail(q, "closed the connection before the whole answer (a coordinator older than status queries?)");
    if (r == -2)
      return fail(q, "the answer did not come within 2 s");
    if (r < 0 || ntx_msg_decode(&f, &m) < 0 || m.type != NTX_MSG_JOB || m.u.job.part != part)
      return fail(q, r < 0 ? ntx_wire_strerror(r) : "answered something that is no job view");
    uint32_t off = 0;
    struct ntx_job_ent e;
    while (ntx_job_next(m.u.job.ents, m.u.job.len, &off, &e))
      if (view_add(v, &e) < 0)
        return fail(q, "out of memory for the answer");
    v->truncated |= (m.u.job.flags & NTX_JOB_TRUNCATED) != 0;
    v->busy |= (m.u.job.flags & NTX_JOB_BUSY) != 0;
    if (m.u.job.flags & NTX_JOB_LAST)
      break;
  }
  n = ntx_enc_bye(buf, sizeof buf, 0);
  q_send(q, NTX_MSG_BYE, buf, n); /* a courtesy: it closes query connections anyway */
  return NTT_EXIT_OK;
}

/* ------------------------------------------------------------- output -- */

static const char *state_name(uint32_t s) {
  switch (s) {
  case NTX_JS_CONNECTED: return "connected";
  case NTX_JS_EXITED: return "exited";
  case NTX_JS_LOST: return "LOST";
  default: return "missing";
  }
}

static const char *report_name(uint32_t k) {
  switch (k) {
  case NTX_V_MISMATCH: return "mismatch";
  case NTX_V_P2P_MISMATCH: return "p2p-mismatch";
  case NTX_V_SKEW: return "skew";
  case NTX_V_INIT_WAIT: return "init-wait";
  case NTX_V_STRAGGLER: return "straggler";
  default: return "note";
  }
}

static const char *summary_of(const struct view *v) {
  for (size_t i = 0; i < v->n; i++)
    if (v->e[i].kind == NTX_JE_TEXT && v->e[i].u.text.vkind == NTX_JT_SUMMARY)
      return v->e[i].u.text.text;
  return "";
}

static void late_str(const struct ntx_job_ent *m, char *b, size_t len) {
  if (m->u.member.late_n)
    snprintf(b, len, "%.1f ms; last at %u/%u", m->u.member.late_med_us / 1000.0, m->u.member.late_last,
             m->u.member.late_n);
  else
    snprintf(b, len, "-");
}

/* Distinct hosts of the members and connections, in order of appearance. */
static int hosts_of(const struct view *v, const char ***out) {
  const char **h = calloc(v->n + 1, sizeof *h);
  int nh = 0;
  if (!h)
    return -1;
  for (size_t i = 0; i < v->n; i++) {
    const char *s = v->e[i].kind == NTX_JE_PROC     ? v->e[i].u.proc.host
                    : v->e[i].kind == NTX_JE_MEMBER ? v->e[i].u.member.host
                                                    : NULL;
    if (!s || !s[0])
      continue;
    int k = 0;
    while (k < nh && strcmp(h[k], s))
      k++;
    if (k == nh)
      h[nh++] = s;
  }
  *out = h;
  return nh;
}

static void print_view(const struct view *v, const char *where) {
  char e[1200], e2[200];
  const char **hosts = NULL;
  int nh = hosts_of(v, &hosts);
  printf("job view from the coordinator at %s\n", ntt_esc(where, e, sizeof e));
  printf("  live verdict (the coordinator's, the whole job): %s\n", ntt_esc(summary_of(v), e, sizeof e));
  if (v->truncated)
    printf("  (the answer was cut at %u KiB: the ranks below are not all of them)\n", NTX_JOB_REPLY_MAX / 1024);
  for (int h = 0; h < nh; h++) {
    printf("host %s:", ntt_esc(hosts[h], e, sizeof e));
    int nconn = 0;
    for (size_t i = 0; i < v->n; i++) {
      const struct ntx_job_ent *p = &v->e[i];
      if (p->kind != NTX_JE_PROC || strcmp(p->u.proc.host, hosts[h]))
        continue;
      printf("%s pid %d%s%s", nconn++ ? "," : " connection", (int)p->u.proc.pid,
             p->u.proc.flags & NTX_JP_AGG ? " (node aggregator)" : "",
             p->u.proc.flags & NTX_JP_STOPPED ? " (stopped)" : "");
    }
    if (!nconn)
      printf(" no connection now");
    printf("\n  %-8s  %-9s  %-9s  %-7s  %8s  %8s  %s\n", "COMM", "RANK", "STATE", "PID", "LAUNCHER", "LAST SEQ",
           "LATE (median after the first; last at)");
    for (size_t i = 0; i < v->n; i++) {
      const struct ntx_job_ent *m = &v->e[i];
      if (m->kind != NTX_JE_MEMBER || strcmp(m->u.member.host, hosts[h]))
        continue;
      int32_t nranks = 0;
      for (size_t k = 0; k < v->n; k++)
        if (v->e[k].kind == NTX_JE_COMM && v->e[k].u.comm.comm_id == m->u.member.comm_id)
          nranks = v->e[k].u.comm.nranks;
      char rk[24], pid[16], lr[16], late[64], st[24];
      snprintf(rk, sizeof rk, "%d/%d", (int)m->u.member.rank, (int)nranks);
      snprintf(pid, sizeof pid, "%d", (int)m->u.member.pid);
      if (m->u.member.lrank >= 0)
        snprintf(lr, sizeof lr, "%d", (int)m->u.member.lrank);
      else
        snprintf(lr, sizeof lr, "-");
      snprintf(st, sizeof st, "%s", m->u.member.stopped ? "stopped" : state_name(m->u.member.state));
      late_str(m, late, sizeof late);
      printf("  %08x  %-9s  %-9s  %-7s  %8s  %8llu  %s\n", NTX_COMM_SHORT(m->u.member.comm_id), rk, st, pid, lr,
             (unsigned long long)m->u.member.last_seq, late);
    }
  }
  for (size_t i = 0; i < v->n; i++) {
    const struct ntx_job_ent *c = &v->e[i];
    if (c->kind != NTX_JE_COMM)
      continue;
    int *miss = malloc(((size_t)c->u.comm.nranks + 1) * sizeof *miss), *lost = malloc(((size_t)c->u.comm.nranks + 1) * sizeof *lost);
    int nm = 0, nl = 0;
    for (size_t k = 0; miss && lost && k < v->n; k++) {
      const struct ntx_job_ent *m = &v->e[k];
      if (m->kind != NTX_JE_MEMBER || m->u.member.comm_id != c->u.comm.comm_id || m->u.member.rank >= c->u.comm.nranks)
        continue;
      if (m->u.member.state == NTX_JS_NONE)
        miss[nm++] = (int)m->u.member.rank;
      else if (m->u.member.state == NTX_JS_LOST)
        lost[nl++] = (int)m->u.member.rank;
    }
    printf("comm %08x: %d ranks, %u registered; decided below seq %llu, newest seq seen %llu", NTX_COMM_SHORT(c->u.comm.comm_id),
           (int)c->u.comm.nranks, c->u.comm.nreg, (unsigned long long)c->u.comm.base,
           (unsigned long long)c->u.comm.newest);
    if (nm) {
      ntt_rank_ranges(miss, nm, e2, sizeof e2);
      printf("; missing (never registered): rank%s %s", nm == 1 ? "" : "s", e2);
    }
    if (nl) {
      ntt_rank_ranges(lost, nl, e2, sizeof e2);
      printf("; lost: rank%s %s", nl == 1 ? "" : "s", e2);
    }
    printf("\n");
    free(miss);
    free(lost);
    for (size_t k = i + 1; k < v->n && v->e[k].kind != NTX_JE_COMM; k++)
      if (v->e[k].kind == NTX_JE_TEXT && v->e[k].u.text.vkind != NTX_JT_SUMMARY)
        printf("  reported (%s): %s\n", report_name(v->e[k].u.text.vkind), ntt_esc(v->e[k].u.text.text, e, sizeof e));
  }
  free(hosts);
}

/* A JSON string of what the coordinator sent, escaped as every output is
 * (ntt_esc: printable ASCII, so always valid UTF-8). */
static json_t *jstr(const char *s) {
  char b[NTX_JOB_TEXT_MAX + 8];
  return json_string(ntt_esc(s, b, sizeof b));
}

static json_t *view_json(const struct view *v, const char *where) {
  json_t *root = json_object(), *conns = json_array(), *comms = json_array(), *cur = NULL;
  char b[32];
  json_object_set_new(root, "coordinator", jstr(where));
  json_object_set_new(root, "summary", jstr(summary_of(v)));
  json_object_set_new(root, "truncated", json_boolean(v->truncated));
  for (size_t i = 0; i < v->n; i++) {
    const struct ntx_job_ent *x = &v->e[i];
    if (x->kind == NTX_JE_PROC) {
      json_t *o = json_object();
      json_object_set_new(o, "host", jstr(x->u.proc.host));
      json_object_set_new(o, "pid", json_integer(x->u.proc.pid));
      json_object_set_new(o, "launcher_rank", json_integer(x->u.proc.lrank));
      json_object_set_new(o, "aggregator", json_boolean(x->u.proc.flags & NTX_JP_AGG));
      json_object_set_new(o, "stopped", json_boolean(x->u.proc.flags & NTX_JP_STOPPED));
      json_array_append_new(conns, o);
    } else if (x->kind == NTX_JE_COMM) {
      cur = json_object();
      snprintf(b, sizeof b, "%08x", NTX_COMM_SHORT(x->u.comm.comm_id));
      json_object_set_new(cur, "comm", json_string(b));
      snprintf(b, sizeof b, "0x%016llx", (unsigned long long)x->u.comm.comm_id);
      json_object_set_new(cur, "comm_id", json_string(b));
      json_object_set_new(cur, "nranks", json_integer(x->u.comm.nranks));
      json_object_set_new(cur, "registered", json_integer(x->u.comm.nreg));
      json_object_set_new(cur, "decided_below", json_integer((json_int_t)x->u.comm.base));
      json_object_set_new(cur, "newest_seq", json_integer((json_int_t)x->u.comm.newest));
      json_object_set_new(cur, "ranks", json_array());
      json_object_set_new(cur, "reports", json_array());
      json_array_append_new(comms, cur);
    } else if (x->kind == NTX_JE_MEMBER && cur) {
      json_t *o = json_object();
      json_object_set_new(o, "rank", json_integer(x->u.member.rank));
      json_object_set_new(o, "state", json_string(x->u.member.state == NTX_JS_LOST ? "lost" : state_name(x->u.member.state)));
      json_object_set_new(o, "stopped", json_boolean(x->u.member.stopped));
      json_object_set_new(o, "host", jstr(x->u.member.host));
      json_object_set_new(o, "pid", json_integer(x->u.member.pid));
      json_object_set_new(o, "launcher_rank", json_integer(x->u.member.lrank));
      json_object_set_new(o, "last_seq", json_integer((json_int_t)x->u.member.last_seq));
      json_object_set_new(o, "late_median_us", json_integer(x->u.member.late_med_us));
      json_object_set_new(o, "late_last", json_integer(x->u.member.late_last));
      json_object_set_new(o, "late_window", json_integer(x->u.member.late_n));
      json_array_append_new(json_object_get(cur, "ranks"), o);
    } else if (x->kind == NTX_JE_TEXT && x->u.text.vkind != NTX_JT_SUMMARY && cur) {
      json_t *o = json_object();
      json_object_set_new(o, "kind", json_string(report_name(x->u.text.vkind)));
      json_object_set_new(o, "seq", json_integer((json_int_t)x->u.text.seq));
      json_object_set_new(o, "peer", json_integer(x->u.text.peer));
      json_object_set_new(o, "text", jstr(x->u.text.text));
      json_array_append_new(json_object_get(cur, "reports"), o);
    }
  }
  json_object_set_new(root, "connections", conns);
  json_object_set_new(root, "comms", comms);
  return root;
}

int ntt_status_job(const char *coord, int json) {
  const char *secret = getenv("NCCLTRACE_SECRET");
  if (!secret || !secret[0]) {
    fprintf(stderr, "nccltrace: status --job: NCCLTRACE_SECRET is not set: the coordinator answers only a holder "
                    "of the job's key; export the job's NCCLTRACE_SECRET (a job without one authenticates with "
                    "its communicators' unique ids, which no other process holds)\n");
    return NTT_EXIT_INPUT;
  }
  struct ntx_key key;
  ntx_key_derive(secret, &key, NULL, 0);
  const char *off_s = getenv("NCCLTRACE_COORD_PORT_OFFSET");
  char *end = NULL;
  long off = off_s && off_s[0] ? strtol(off_s, &end, 10) : 17;
  if (off_s && off_s[0] && (*end || off < -65535 || off > 65535)) {
    fprintf(stderr, "nccltrace: status --job: NCCLTRACE_COORD_PORT_OFFSET='%.40s' is not a number\n", off_s);
    return NTT_EXIT_INPUT;
  }
  struct ntx_discovery d;
  ntx_discover(coord ? coord : getenv("NCCLTRACE_COORD"), (int)off, -1, &d);
  if (!d.found) {
    char e[400];
    fprintf(stderr, "nccltrace: status --job: no coordinator address (%s): give --coord HOST:PORT, or set "
                    "NCCLTRACE_COORD, or MASTER_ADDR and MASTER_PORT as the job's ranks have them\n",
            ntt_esc(d.how, e, sizeof e));
    return NTT_EXIT_INPUT;
  }
  struct qconn *q = calloc(1, sizeof *q);
  struct view v = {0};
  if (!q)
    return NTT_EXIT_FAIL;
  q->fd = -1;
  q->deadline = mono_s() + NTT_JOB_WAIT_S;
  snprintf(q->where, sizeof q->where, "%s%s%s:%s (%s)", strchr(d.host, ':') ? "[" : "", d.host,
           strchr(d.host, ':') ? "]" : "", d.port, coord ? "--coord" : d.how);
  char why[256];
  int rc;
  if (q_connect(q, d.host, d.port, why, sizeof why) < 0) {
    char b[300];
    snprintf(b, sizeof b, "unreachable: %.250s", why);
    rc = fail(q, b);
  } else {
    rc = q_ask(q, &key, &v);
  }
  if (q->fd >= 0)
    close(q->fd);
  if (rc == NTT_EXIT_OK && v.busy) {
    char e[1200];
    fprintf(stderr, "nccltrace: status --job: %s\n", ntt_esc(summary_of(&v), e, sizeof e));
    rc = NTT_EXIT_FAIL;
  } else if (rc == NTT_EXIT_OK && json) {
    json_t *j = view_json(&v, q->where);
    json_dumpf(j, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(j);
  } else if (rc == NTT_EXIT_OK) {
    print_view(&v, q->where);
  }
  free(v.e);
  free(q);
  return rc;
}
