/* sim.c -- simulated ranks over the real wire protocol (sim.h). */
#include "bench/scale/sim.h"
#include "interpose/exchange/clocksync.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/scale/bu.h"
#include "interpose/exchange/agg.h"
#include "interpose/exchange/agg_link.h"
#include "interpose/exchange/wire.h"
#include "recorder/format.h"

#define SIM_COMM 0x5ca1ab1e00c0ffeeull
#define SIM_HIST 1024u
#define SIM_BURST 16              /* frames queued per rank before one send */

struct srank {
  struct ntx_agg_link l;
  const struct sim_cfg *cfg;
  struct sthread *th;
  int rank;
  uint64_t seq;             /* last seq sent */
  double next_t;
  double verdict_t;         /* 0 until the mismatch verdict came */
  double sent_t[SIM_HIST];  /* when seq s was sent, at s % SIM_HIST */
  double mm_sent;           /* when it sent the planted seq (fixed-seq mode) */
};

struct sthread {
  const struct sim_cfg *cfg;
  struct srank *r;          /* ranks lo .. hi-1 of the whole array */
  int lo, hi, ep, done;
  pthread_t th;
  uint64_t fps, frames;
  double mm_last_send;
  uint64_t min_seq;         /* published (atomic): the slowest rank's seq of this thread */
  char text[256];
};

static struct {
  int ready;                /* ranks with WELCOME (atomic) */
  int go, stop;             /* phases (atomic) */
  uint64_t mm_seq;          /* the seq the mismatch was planted at (atomic) */
  double t_go;
  struct sthread *th;
  int nth;
  int no_times;             /* NCCLTRACE_BENCH_NO_TIMES=1: fingerprints without arrival times */
} G;

static int connect_rank(const struct sim_cfg *cfg, int rank) {
  if (cfg->per_host > 0)
    return ntx_agg_connect(cfg->agg_names[rank / cfg->per_host]);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(cfg->tcp_host, cfg->tcp_port, &hints, &ai) != 0 || !ai)
    return -EHOSTUNREACH;
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -errno;
    }
  } else {
    fd = -errno;
  }
  freeaddrinfo(ai);
  return fd;
}

static int on_frame(void *ctx, struct ntx_agg_link *l, const struct ntx_frame *f) {
  struct srank *r = ctx;
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0)
    return 0;
  if (m.type == NTX_MSG_TIME && l->state != NTX_AGG_L_HANDSHAKE) { /* a clock round trip, as a client answers it */
    uint8_t buf[16];
    ntx_agg_link_send(l, NTX_MSG_TIME_ECHO, buf,
                  ntx_enc_time(buf, sizeof buf, NTX_MSG_TIME_ECHO, m.u.time.stamp, ntx_clk_now_ns()));
    return 0;
  }
  if (l->state == NTX_AGG_L_HANDSHAKE) {
    if (m.type == NTX_MSG_CHALLENGE) {
      char host[32];
      snprintf(host, sizeof host, "simhost%d", r->rank / 8);
      ntx_agg_link_on_challenge(l, f, 100000 + r->rank, r->rank, host, "bench-sim");
    } else if (m.type == NTX_MSG_WELCOME) {
      l->state = NTX_AGG_L_READY;
      uint8_t buf[256];
      static const char env[] = "NCCL_PROTO=Simple";
      size_t n = ntx_enc_register(buf, sizeof buf, SIM_COMM, r->rank, r->cfg->nranks, 22800, 100000 + r->rank, r->rank, env,
                                  sizeof env);
      ntx_agg_link_send(l, NTX_MSG_REGISTER, buf, n);
      __atomic_add_fetch(&G.ready, 1, __ATOMIC_RELEASE);
    }
    return 0;
  }
  if (m.type == NTX_MSG_VERDICT && m.u.verdict.kind == NTX_V_MISMATCH && !r->verdict_t) {
    double v = bu_now();
    __atomic_store(&r->verdict_t, &v, __ATOMIC_RELAXED);
    struct sthread *t = r->th;
    if (!t->text[0]) {
      uint32_t tl = m.u.verdict.text_len < sizeof t->text - 1 ? m.u.verdict.text_len : sizeof t->text - 1;
      memcpy(t->text, m.u.verdict.text, tl);
      t->text[tl] = '\0';
    }
  }
  return 0;
}

/* Queue one FP frame of `batch` collectives for rank r (sent by the
 * caller's ntx_agg_link_flush). */
static void send_fps(struct sthread *t, struct srank *r, double now) {
  const struct sim_cfg *cfg = t->cfg;
  static __thread uint8_t payload[NTX_FRAME_MAX_PAYLOAD];
  int n = cfg->batch;
  for (int k = 0; k < n; k++) {
    struct ntx_fp fp = {.comm_id = SIM_COMM, .seq = ++r->seq, .count = 1024, .kind = NTR_KIND_ALLREDUCE,
                        .dtype = 7, .dir = 0, .redop = 0, .peer = -1, .rank = r->rank};
    /* arrival times, as every traced rank sends them: the coordinator's
     * lateness statistics run (NCCLTRACE_BENCH_NO_TIMES=1: the baseline) */
    fp.t_ns = G.no_times ? 0 : ntx_clk_now_ns();
    uint64_t mm = cfg->mm_seq > 1 ? cfg->mm_seq : __atomic_load_n(&G.mm_seq, __ATOMIC_ACQUIRE);
    if (!mm && r->rank == cfg->mm_rank && cfg->mm_seq == 1 && now - G.t_go >= cfg->duration_s / 2) {
      /* planted at half time: the seq this rank is at then */
      __atomic_store_n(&G.mm_seq, fp.seq, __ATOMIC_RELEASE);
      mm = fp.seq;
    }
    r->sent_t[fp.seq % SIM_HIST] = now;
    if (fp.seq == mm)
      r->mm_sent = now;
    if (fp.seq == mm && r->rank == cfg->mm_rank) {
      fp.kind = NTR_KIND_BROADCAST;
      fp.redop = -1;
      fp.peer = 0;
    }
    fp.fp = (uint32_t)(fp.kind * 2654435761u);
    ntx_fp_put(payload + 8, (uint32_t)k, &fp);
  }
  size_t len = ntx_enc_fp_head(payload, sizeof payload, 0, (uint32_t)n);
  if (ntx_agg_link_queue(&r->l, NTX_MSG_FP, payload, len) == 0) {
    t->fps += (uint64_t)n;
    t->frames++;
  }
}

static uint64_t global_min_seq(void) {
  uint64_t m = UINT64_MAX;
  for (int i = 0; i < G.nth; i++) {
    uint64_t v = __atomic_load_n(&G.th[i].min_seq, __ATOMIC_RELAXED);
    m = v < m ? v : m;
  }
  return m;
}

static void *driver(void *arg) {
  struct sthread *t = arg;
  const struct sim_cfg *cfg = t->cfg;
  struct epoll_event evs[1024];
  int sending = 0;
  double period = cfg->rate > 0 ? (double)cfg->batch / cfg->rate : 0;
  for (;;) {
    int stop = __atomic_load_n(&G.stop, __ATOMIC_ACQUIRE);
    if (stop)
      break;
    int n = epoll_wait(t->ep, evs, 1024, sending ? 0 : 1);
    for (int k = 0; k < n; k++) {
      struct srank *r = &t->r[evs[k].data.u64];
      if (r->l.fd >= 0 && ntx_agg_link_read(&r->l, on_frame, r) < 0) {
        epoll_ctl(t->ep, EPOLL_CTL_DEL, r->l.fd, NULL);
        ntx_agg_link_close(&r->l);
      }
    }
    double now = bu_now();
    if (!sending && !t->done && __atomic_load_n(&G.go, __ATOMIC_ACQUIRE)) {
      sending = 1;
      for (int i = t->lo; i < t->hi; i++) /* spread the ranks over one period */
        t->r[i].next_t = G.t_go + period * (double)((i * 7919) % 1000) / 1000.0;
    }
    if (!sending)
      continue;
    if (now - G.t_go >= cfg->duration_s) {
      sending = 0;
      t->done = 1;
      continue;
    }
    uint64_t lim = cfg->rate > 0 ? UINT64_MAX : global_min_seq() + cfg->max_ahead;
    uint64_t mn = UINT64_MAX;
    double next_due = now + 0.001;
    for (int i = t->lo; i < t->hi; i++) {
      struct srank *r = &t->r[i];
      if (r->l.fd < 0 || r->l.state != NTX_AGG_L_READY)
        continue;
      if (r->l.out_len)
        ntx_agg_link_flush(&r->l);
      if (cfg->rate > 0) {
        int q = 0;
        while (now >= r->next_t && r->l.out_len < 65536 && q++ < SIM_BURST) {
          send_fps(t, r, now);
          r->next_t += period;
        }
        if (q)
          ntx_agg_link_flush(&r->l);
        next_due = r->next_t < next_due ? r->next_t : next_due;
      } else if (r->l.out_len < 65536) {
        int q = 0;
        while (r->seq < lim && q++ < SIM_BURST)
          send_fps(t, r, now);
        if (q)
          ntx_agg_link_flush(&r->l);
      }
      mn = r->seq < mn ? r->seq : mn;
    }
    __atomic_store_n(&t->min_seq, mn, __ATOMIC_RELAXED);
    if (cfg->rate > 0) {
      /* Everything due is sent: wait for the next 1 ms tick at least (a
       * driver that spun here would starve the aggregators it feeds). */
      double w = next_due - bu_now();
      {
        int m = epoll_wait(t->ep, evs, 1024, w > 0.001 ? (int)(w * 1000) + 1 : 1);
        for (int k = 0; k < m; k++) {
          struct srank *r = &t->r[evs[k].data.u64];
          if (r->l.fd >= 0 && ntx_agg_link_read(&r->l, on_frame, r) < 0) {
            epoll_ctl(t->ep, EPOLL_CTL_DEL, r->l.fd, NULL);
            ntx_agg_link_close(&r->l);
          }
        }
      }
    }
  }
  for (int i = t->lo; i < t->hi; i++) {
    struct srank *r = &t->r[i];
    if (r->l.fd >= 0) {
      if (r->l.state == NTX_AGG_L_READY) {
        uint8_t b[8];
        size_t bn = ntx_enc_bye(b, sizeof b, 0);
        ntx_agg_link_send(&r->l, NTX_MSG_BYE, b, bn);
      }
      ntx_agg_link_close(&r->l);
    }
  }
  return NULL;
}

int sim_run(const struct sim_cfg *cfg, double verdict_wait_s, struct sim_result *res) {
  memset(res, 0, sizeof *res);
  memset(&G, 0, sizeof G);
  const char *nt = getenv("NCCLTRACE_BENCH_NO_TIMES");
  G.no_times = nt && nt[0] == '1';
  if (cfg->nranks <= 0 || cfg->nranks > 1000000)
    return -1;
  int nth = cfg->threads < 1 ? 1 : cfg->threads;
  struct srank *r = calloc((size_t)(unsigned)cfg->nranks, sizeof *r);
  struct sthread *th = calloc((size_t)nth, sizeof *th);
  if (!r || !th) {
    free(r);
    free(th);
    return -1;
  }
  G.th = th;
  G.nth = nth;
  double t0 = bu_now();
  for (int i = 0; i < nth; i++) {
    th[i].cfg = cfg;
    th[i].r = r;
    th[i].lo = (int)((long)cfg->nranks * i / nth);
    th[i].hi = (int)((long)cfg->nranks * (i + 1) / nth);
    th[i].ep = epoll_create1(EPOLL_CLOEXEC);
    for (int k = th[i].lo; k < th[i].hi; k++) {
      r[k].cfg = cfg;
      r[k].th = &th[i];
      r[k].rank = k;
      int fd = connect_rank(cfg, k);
      if (fd < 0) {
        fprintf(stderr, "sim: rank %d cannot connect: %s\n", k, strerror(-fd));
        r[k].l.fd = -1;
        continue;
      }
      ntx_agg_link_init(&r[k].l, fd, 0, &cfg->key, 1u << 20);
      struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)k};
      epoll_ctl(th[i].ep, EPOLL_CTL_ADD, fd, &ev);
    }
  }
  for (int i = 0; i < nth; i++)
    pthread_create(&th[i].th, NULL, driver, &th[i]);
  while (__atomic_load_n(&G.ready, __ATOMIC_ACQUIRE) < cfg->nranks && bu_now() - t0 < 60)
    bu_sleep(0.005);
  res->connected = __atomic_load_n(&G.ready, __ATOMIC_ACQUIRE);
  bu_sleep(0.2); /* registrations reach the coordinator */
  res->setup_s = bu_now() - t0;
  G.t_go = bu_now();
  __atomic_store_n(&G.go, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < nth; i++)
    while (!__atomic_load_n(&th[i].done, __ATOMIC_ACQUIRE))
      bu_sleep(0.002);
  double t_end = bu_now();
  res->send_s = t_end - G.t_go;
  double deadline = t_end + verdict_wait_s;
  for (;;) {
    int seen = 0;
    for (int k = 0; k < cfg->nranks; k++) {
      double v;
      __atomic_load(&r[k].verdict_t, &v, __ATOMIC_RELAXED);
      seen += v != 0;
    }
    if (seen == cfg->nranks || bu_now() > deadline || !cfg->mm_seq)
      break;
    bu_sleep(0.005);
  }
  res->wait_s = bu_now() - t_end;
  __atomic_store_n(&G.stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < nth; i++) {
    pthread_join(th[i].th, NULL);
    close(th[i].ep);
    res->fps_sent += th[i].fps;
    res->frames_sent += th[i].frames;
    if (!res->mm_text[0] && th[i].text[0])
      snprintf(res->mm_text, sizeof res->mm_text, "%s", th[i].text);
  }
  uint64_t mm = cfg->mm_seq > 1 ? cfg->mm_seq : G.mm_seq;
  res->mm_planted = mm;
  int all_sent = 1;
  for (int k = 0; mm && k < cfg->nranks; k++) {
    double t = r[k].mm_sent; /* sent after the planting; else from the history */
    if (!t && r[k].seq >= mm && r[k].seq - mm < SIM_HIST)
      t = r[k].sent_t[mm % SIM_HIST];
    if (!t)
      all_sent = 0; /* never sent it, or too long ago to know when */
    if (t > res->mm_last_send)
      res->mm_last_send = t;
  }
  if (!all_sent)
    res->mm_last_send = 0; /* latency unknown: reported as not measured */
  double *lat = calloc((size_t)(unsigned)cfg->nranks, sizeof *lat);
  int n = 0;
  for (int k = 0; lat && res->mm_last_send > 0 && k < cfg->nranks; k++)
    if (r[k].verdict_t)
      lat[n++] = r[k].verdict_t - res->mm_last_send;
  res->mm_seen = n;
  if (n) {
    qsort(lat, (size_t)n, sizeof *lat, bu_cmp_d);
    res->mm_lat_p50 = bu_quantile(lat, n, 0.5);
    res->mm_lat_max = lat[n - 1];
  }
  free(lat);
  free(r);
  free(th);
  return 0;
}
