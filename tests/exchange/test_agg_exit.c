/* test_agg_exit.c -- a node aggregator stopped between its HELLO and the
 * root's WELCOME (agg.c, ntx_agg_stop) still says BYE upstream.  The root
 * counts an aggregator as a client from its HELLO on; one that closed
 * without BYE there was reported to every rank as a lost host (an
 * aggregator elected at a hand-over by a process exiting at once:
 * exchange_client_agg_mismatch's rare "second dump").
 *
 * This process plays the root on loopback: CHALLENGE, then after the
 * aggregator's HELLO it stops the aggregator from another thread and
 * sends WELCOME 50 ms later; the aggregator must answer with BYE before it
 * closes.  Tags of the aggregator's frames are not checked (the key and
 * session are this test's own); WELCOME carries a right one.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no loopback sockets).
 * Thread-safety: the stopper thread only calls ntx_agg_stop.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/agg.h"
#include "interpose/exchange/auth.h"
#include "interpose/exchange/wire.h"

#include "tests/nt_test.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct ntx_agg *agg;
static double stopped_in;

static void *stopper(void *arg) {
  (void)arg;
  double t = now_s();
  ntx_agg_stop(agg);
  stopped_in = now_s() - t;
  return NULL;
}

static int fd = -1;
static uint8_t in[NTX_FRAME_MAX];
static size_t in_len;
static uint64_t rx, tx;

/* The next frame from the aggregator within ms, unchecked: its type, 0 on
 * timeout, -1 when it closed. */
static int next_frame(int ms, struct ntx_msg *m) {
  double end = now_s() + ms / 1000.0;
  for (;;) {
    struct ntx_frame f;
    int r = ntx_frame_parse(in, in_len, NULL, NTX_DIR_TO_COORD, rx, &f);
    if (r < 0)
      return -1;
    if (r > 0) {
      rx++;
      int type = f.type;
      if (ntx_msg_decode(&f, m) < 0)
        type = -2;
      memmove(in, in + r, in_len - (size_t)r);
      in_len -= (size_t)r;
      return type;
    }
    int left = (int)((end - now_s()) * 1000);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, left) <= 0)
      return 0;
    ssize_t n = recv(fd, in + in_len, sizeof in - in_len, 0);
    if (n <= 0)
      return -1;
    in_len += (size_t)n;
  }
}

static void send_frame(const struct ntx_session *s, uint8_t type, const void *p, size_t n) {
  static uint8_t buf[NTX_FRAME_MAX];
  size_t l = ntx_frame_encode(buf, sizeof buf, type, tx++, p, n, s, NTX_DIR_TO_CLIENT);
  ssize_t w = send(fd, buf, l, MSG_NOSIGNAL);
  (void)w; /* a closed aggregator is what the check below sees */
}

int main(void) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 4) != 0 ||
      getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
    printf("no loopback sockets: skipped\n");
    return 77;
  }
  char port[16], name[64], err[256] = "";
  snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
  snprintf(name, sizeof name, "nccltrace-agg-exit-test-%d", (int)getpid());
  struct ntx_key key = {0x0123456789abcdefull, 0xfedcba9876543210ull};
  struct ntx_agg_cfg cfg;
  ntx_agg_default_cfg(&cfg);
  cfg.name = name;
  cfg.up_host = "127.0.0.1";
  cfg.up_port = port;
  cfg.keys = NULL;
  cfg.key = key;
  cfg.host = "hostT";
  cfg.job = "agg-exit";
  cfg.lrank = 3;
  NT_CHECK(ntx_agg_listen(&agg, &cfg, err, sizeof err) == 0);
  NT_CHECK(ntx_agg_start(agg) == 0);
  struct pollfd lp = {.fd = lfd, .events = POLLIN};
  NT_CHECK(poll(&lp, 1, 5000) == 1);
  fd = accept(lfd, NULL, NULL);
  NT_CHECK(fd >= 0);
  if (nt_failures)
    return nt_exit_status();

  /* the root's side of the handshake, as coord.c does it */
  struct ntx_session sess;
  uint8_t chal[NTX_CHALLENGE_LEN], nonce[NTX_NONCE] = {42};
  NT_CHECK(ntx_enc_challenge(chal, sizeof chal, nonce, 0, (int32_t)getpid(), "root") == NTX_CHALLENGE_LEN);
  ntx_sess_challenge(&sess);
  send_frame(&sess, NTX_MSG_CHALLENGE, chal, sizeof chal);
  struct ntx_msg m;
  int t = next_frame(5000, &m);
  NT_CHECK(t == NTX_MSG_HELLO);
  if (t != NTX_MSG_HELLO)
    return nt_exit_status();
  NT_CHECK(m.u.hello.flags & NTX_HELLO_AGG);
  ntx_sess_bind(&sess, &key, chal);
  memcpy(sess.nonce + NTX_NONCE, m.u.hello.nonce, NTX_NONCE);

  /* HELLO is here, WELCOME is not there yet: the hosting process exits */
  pthread_t th;
  NT_CHECK(pthread_create(&th, NULL, stopper, NULL) == 0);
  struct timespec d = {0, 50 * 1000000L};
  nanosleep(&d, NULL);
  uint8_t w[64];
  send_frame(&sess, NTX_MSG_WELCOME, w, ntx_enc_welcome(w, sizeof w, 1, 0));
  int bye = 0, closed = 0, other = 0;
  for (double end = now_s() + 3; now_s() < end && !closed;) {
    t = next_frame(200, &m);
    if (t == NTX_MSG_BYE)
      bye = 1;
    else if (t < 0)
      closed = 1;
    else if (t > 0)
      other++;
  }
  pthread_join(th, NULL);
  printf("stop took %.3f s; upstream: BYE %s, %d other frames, %s\n", stopped_in, bye ? "said" : "NOT said", other,
         closed ? "closed" : "still open");
  NT_CHECK(bye);
  NT_CHECK(closed);
  NT_CHECK(stopped_in < 1.0); /* bounded: ~200 ms at most for the handshake, ~200 ms for the BYE */
  close(fd);
  close(lfd);
  return nt_exit_status();
}
