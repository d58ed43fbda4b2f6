/* metrics.c -- the endpoint's thread: bind, accept, read a request head,
 * answer it (contract: metrics.h).
 *
 * One poll() loop over the listening socket and at most NTI_MET_CONNS
 * connections.  A connection is read until its head ends (a blank line),
 * answered, and closed: no keep-alive, so a scraper holds one slot for one
 * request at most.  Memory: NTI_MET_CONNS heads of NTI_MET_HEAD bytes, and
 * the unsent part of answers, NTI_MET_OUT_MAX in all (a connection that
 * would pass it gets 503).  Everything is allocated on the tracer heap.
 */
#include "interpose/metrics.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/exchange/addr.h"
#include "interpose/exchange/own.h"
#include "interpose/nti.h"
#include "recorder/heap.h"
#include "recorder/thread.h"

struct conn {
  int fd;
  struct ntx_fdid id;
  double t0;          /* accepted */
  size_t got;         /* head bytes read */
  char *head;         /* NTI_MET_HEAD + 1 */
  struct nti_met_buf out;
  size_t sent;        /* 0 < out.len: answering */
};

static struct {
  int lfd;
  struct ntx_fdid lid;
  struct conn c[NTI_MET_CONNS];
  size_t out_total;
  struct nti_met_self self;
  pthread_t thread;
  int started;
  char host[256], port[16];
} met = {.lfd = -1};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int nti_met_parse_head(const char *h, size_t len, int *om) {
  *om = 0;
  const char *eol = memchr(h, '\n', len);
  if (!eol)
    return 400;
  size_t l = (size_t)(eol - h);
  const char *sp1 = memchr(h, ' ', l);
  if (!sp1 || sp1 == h)
    return 400;
  const char *sp2 = memchr(sp1 + 1, ' ', l - (size_t)(sp1 + 1 - h));
  if (!sp2 || (size_t)(eol - sp2) < 9 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0)
    return 400;
  for (const char *p = h; p < sp1; p++)
    if (*p < 'A' || *p > 'Z')
      return 400;
  /* Accept: application/openmetrics-text (Prometheus asks for it first) */
  for (const char *p = eol + 1; p < h + len;) {
    const char *e = memchr(p, '\n', (size_t)(h + len - p));
    size_t n = e ? (size_t)(e - p) : (size_t)(h + len - p);
    if (n > 7 && !strncasecmp(p, "accept:", 7)) {
      for (size_t k = 7; k + 28 <= n; k++)
        if (!strncasecmp(p + k, "application/openmetrics-text", 28))
          *om = 1;
    }
    p += n + 1;
  }
  if ((size_t)(sp1 - h) != 3 || memcmp(h, "GET", 3) != 0)
    return 405;
  size_t plen = (size_t)(sp2 - sp1 - 1);
  const char *path = sp1 + 1;
  if (plen >= 8 && !memcmp(path, "/metrics", 8) && (plen == 8 || path[8] == '?'))
    return 200;
  return 404;
}

static void conn_close(struct conn *c) {
  ntx_fd_close(c->fd, &c->id);
  c->fd = -1;
  met.out_total -= c->out.len;
  ntr_heap_free(c->out.p);
  c->out = (struct nti_met_buf){0};
  c->got = c->sent = 0;
}

static void answer_short(struct conn *c, int code, const char *why) {
  nti_met_printf(&c->out,
                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n\r\n%s\n",
                 code, why, strlen(why) + 1, why);
}

static void answer(struct conn *c) {
  int om;
  int code = nti_met_parse_head(c->head, c->got, &om);
  if (code != 200) {
    met.self.bad_requests++;
    answer_short(c, code, code == 404 ? "Not Found" : code == 405 ? "Method Not Allowed" : "Bad Request");
  } else {
    met.self.scrapes++;
    struct nti_met_buf body = {0};
    nti_met_collect(&body, om, &met.self);
    if (body.oom || met.out_total + body.len + 256 > NTI_MET_OUT_MAX) {
      answer_short(c, 503, "Service Unavailable");
    } else {
      nti_met_printf(&c->out, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                     om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                        : "text/plain; version=0.0.4; charset=utf-8",
                     body.len);
      nti_met_printf(&c->out, "%.*s", (int)body.len, body.p);
    }
    ntr_heap_free(body.p);
  }
  met.out_total += c->out.len;
  if (c->out.oom) {
    conn_close(c);
    return;
  }
  shutdown(c->fd, SHUT_RD);
}

static void on_readable(struct conn *c) {
  ssize_t n = recv(c->fd, c->head + c->got, NTI_MET_HEAD - c->got, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    conn_close(c);
    return;
  }
  if (n < 0)
    return;
  c->got += (size_t)n;
  c->head[c->got] = '\0';
  if (memmem(c->head, c->got, "\r\n\r\n", 4) || memmem(c->head, c->got, "\n\n", 2)) /* NULs too */
    answer(c);
  else if (c->got == NTI_MET_HEAD) { /* a head that never ends */
    met.self.bad_requests++;
    answer_short(c, 431, "Request Header Fields Too Large");
    met.out_total += c->out.len;
    shutdown(c->fd, SHUT_RD);
  }
}

static void on_writable(struct conn *c) {
  ssize_t n = send(c->fd, c->out.p + c->sent, c->out.len - c->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN && errno != EINTR) {
    conn_close(c);
    return;
  }
  if (n > 0)
    c->sent += (size_t)n;
  if (c->sent == c->out.len)
    conn_close(c);
}

static void do_accept(double now) {
  for (int k = 0; k < 64; k++) {
    int fd = accept4(met.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    struct conn *c = NULL;
    for (unsigned i = 0; i < NTI_MET_CONNS && !c; i++)
      if (met.c[i].fd < 0)
        c = &met.c[i];
    /* Full, or the process near its descriptor limit: closed at once, so
     * the backlog drains and a later scrape finds room. */
    if (!c || ntx_fd_headroom() <= ntx_fd_reserve()) {
      met.self.refused++;
      close(fd);
      continue;
    }
    c->fd = fd;
    ntx_fd_take(fd, &c->id);
    c->t0 = now;
    c->got = c->sent = 0;
  }
}

static int try_bind(int *said) {
  struct ntx_addr a;
  if (ntx_addr_get(met.host, met.port, &a) != 0) {
    if (!(*said)++)
      nti_say("NCCLTRACE_METRICS: cannot resolve %s; no metrics endpoint", met.host);
    return -1;
  }
  int fd = socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (const struct sockaddr *)&a.sa, a.len) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    if (e != EADDRINUSE && !(*said)++)
      nti_say("NCCLTRACE_METRICS: cannot listen on %s:%s (%s); trying again every %.0f s", met.host, met.port,
              strerror(e), NTI_MET_RETRY_S);
    return -1;
  }
  met.lfd = fd;
  ntx_fd_take(fd, &met.lid);
  if (nti_cfg.verbose)
    nti_say("metrics endpoint on %s:%s/metrics", met.host, met.port);
  return 0;
}

static void *met_thread(void *arg) {
  (void)arg;
  struct pollfd pf[1 + NTI_MET_CONNS];
  double next_bind = 0, next_tick = 0;
  int said = 0;
  for (;;) {
    double now = now_s();
    if (now >= next_tick) {
      next_tick = now + 1.0;
      nti_met_tick();
    }
    if (met.lfd >= 0 && !ntx_fd_is(met.lfd, &met.lid)) /* the application closed it: bind again */
      met.lfd = -1;
    if (met.lfd < 0 && now >= next_bind) {
      next_bind = now + NTI_MET_RETRY_S;
      try_bind(&said);
    }
    int n = 0;
    if (met.lfd >= 0)
      pf[n++] = (struct pollfd){.fd = met.lfd, .events = POLLIN};
    int idx[NTI_MET_CONNS];
    for (unsigned i = 0; i < NTI_MET_CONNS; i++) {
      struct conn *c = &met.c[i];
      if (c->fd < 0)
        continue;
      if (!ntx_fd_is(c->fd, &c->id)) { /* not ours any more: forgotten, never closed */
        c->fd = -1;
        conn_close(c);
        continue;
      }
      double age = now - c->t0;
      if ((!c->out.len && age > NTI_MET_HEAD_S) || age > NTI_MET_HEAD_S + NTI_MET_SEND_S) {
        met.self.timeouts++;
        conn_close(c);
        continue;
      }
      idx[n] = (int)i;
      /* answering: what the peer sends now is not read (its side is shut) */
      pf[n++] = (struct pollfd){.fd = c->fd, .events = c->out.len ? POLLOUT : POLLIN};
    }
    int r = poll(pf, (nfds_t)n, 250);
    if (r <= 0)
      continue;
    now = now_s();
    for (int k = 0; k < n; k++) {
      if (!pf[k].revents)
        continue;
      if (pf[k].fd == met.lfd) {
        do_accept(now);
        continue;
      }
      struct conn *c = &met.c[idx[k]];
      if (c->fd < 0)
        continue;
      if (!c->out.len && (pf[k].revents & (POLLIN | POLLHUP | POLLERR)))
        on_readable(c);
      else if (c->out.len && (pf[k].revents & POLLERR))
        conn_close(c);
      if (c->fd >= 0 && c->out.len)
        on_writable(c); /* at once after the answer is made: most fit the socket buffer */
    }
  }
  return NULL;
}

void nti_met_start(void) {
  if (!nti_cfg.metrics[0] || met.started)
    return;
  const char *v = nti_cfg.metrics, *colon;
  size_t hl;
  if (v[0] == '[') { /* [v6]:port */
    const char *close = strchr(v, ']');
    hl = (size_t)(close - v - 1);
    v++;
    colon = close + 1;
  } else {
    colon = strrchr(v, ':');
    hl = (size_t)(colon - v);
  }
  snprintf(met.host, sizeof met.host, "%.*s", (int)hl, v);
  snprintf(met.port, sizeof met.port, "%s", colon + 1);
  struct ntx_addr a;
  ntx_addr_get(met.host, met.port, &a); /* primed here: the thread then resolves without malloc */
  for (unsigned i = 0; i < NTI_MET_CONNS; i++) {
    met.c[i].fd = -1;
    met.c[i].head = ntr_heap_alloc(NTI_MET_HEAD + 1);
    if (!met.c[i].head) {
      nti_say("NCCLTRACE_METRICS: out of memory; no metrics endpoint");
      return;
    }
  }
  int rc = ntr_thread_create(&met.thread, met_thread, NULL);
  if (rc) {
    nti_say("NCCLTRACE_METRICS: cannot start the metrics thread (%s); no metrics endpoint", strerror(rc));
    return;
  }
  met.started = 1;
}

void nti_met_forget_in_child(void) {
  if (!met.started)
    return;
  /* The child must not keep the port bound: a copy would outlive the
   * serving parent and no other process could take over. */
  ntx_fd_close(met.lfd, &met.lid);
  met.lfd = -1;
  for (unsigned i = 0; i < NTI_MET_CONNS; i++) {
    ntx_fd_close(met.c[i].fd, &met.c[i].id);
    met.c[i].fd = -1;
  }
  met.started = 0;
}
