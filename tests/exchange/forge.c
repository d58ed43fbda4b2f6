/* forge.c -- a forger of the exchange protocol for the acceptance tests
 * accept_exchange.py squat and forge: it speaks the current wire
 * protocol perfectly but holds only what anyone can compute, the key
 * derived from public values (uid, TORCHELASTIC_RUN_ID/NCCLTRACE_JOB,
 * MASTER_ADDR, MASTER_PORT: ntx_key_derive("")), never a unique id.
 *
 *   forge squat HOST PORT REPORT
 *     Bind HOST:PORT before rank 0 does and play the coordinator: CHALLENGE,
 *     WELCOME under the public key to every HELLO, then a forged MISMATCH
 *     and PEER_LOST verdict, and "mismatch" to every STRICT request.  It
 *     reads what clients send without checking tags (an eavesdropper's
 *     view) and counts it into REPORT ("hello N", "register N", "strict N",
 *     "fp N"), rewritten after each event.  Runs until SIGTERM or 60 s.
 *   forge flood HOST PORT N REPORT
 *     N connections to a real coordinator, one after another: each says
 *     HELLO with launcher rank 0 (half naming the public key, half a random
 *     key name), then REGISTER and fingerprints without waiting, and
 *     closes without BYE -- what made every rank report "lost rank 0" and
 *     dump.  REPORT gets "welcomed W of N".
 *
 * Exit: 0 done, 1 setup failure.
 * Thread-safety / signal-safety: single-threaded; the SIGTERM handler sets
 * a flag.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "interpose/exchange/auth.h"
#include "interpose/exchange/wire.h"

static volatile sig_atomic_t stop;
static void on_term(int sig) {
  (void)sig;
  stop = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct ntx_key public_key; /* what a forger can compute */

struct peer {
  int fd;
  struct ntx_session sess;
  uint8_t chal[NTX_CHALLENGE_LEN];
  uint64_t rx, tx;
  int hello;
  uint8_t frame[NTX_FRAME_MAX_PAYLOAD]; /* flood: the payload of the frame read last */
  uint8_t in[NTX_FRAME_MAX];
  size_t in_len;
};

static void send_frame(struct peer *p, uint8_t type, const void *payload, size_t n, uint8_t dir) {
  static uint8_t buf[NTX_FRAME_MAX];
  size_t l = ntx_frame_encode(buf, sizeof buf, type, p->tx++, payload, n, &p->sess, dir);
  ssize_t w = send(p->fd, buf, l, MSG_NOSIGNAL);
  (void)w; /* a peer that went away: nothing to do */
}

/* ------------------------------------------------------------- squat -- */

static unsigned long counts[NTX_MSG_TYPE_END];

static void report(const char *path) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return;
  fprintf(f, "hello %lu\nregister %lu\nstrict %lu\nfp %lu\n", counts[NTX_MSG_HELLO], counts[NTX_MSG_REGISTER],
          counts[NTX_MSG_STRICT], counts[NTX_MSG_FP]);
  fclose(f);
  rename(tmp, path);
}

static void squat_frame(struct peer *p, const struct ntx_frame *f) {
  struct ntx_msg m;
  if (ntx_msg_decode(f, &m) < 0)
    return;
  counts[m.type]++;
  uint8_t buf[512];
  if (m.type == NTX_MSG_HELLO && !p->hello) {
    p->hello = 1;
    ntx_sess_bind(&p->sess, &public_key, p->chal);
    memcpy(p->sess.nonce + NTX_NONCE, m.u.hello.nonce, NTX_NONCE);
    send_frame(p, NTX_MSG_WELCOME, buf, ntx_enc_welcome(buf, sizeof buf, 1, 1), NTX_DIR_TO_CLIENT);
    size_t n = ntx_enc_verdict(buf, sizeof buf, NTX_V_MISMATCH, 0x1234, 4, 1, 0, "op",
                               "mismatch on comm 00001234 seq 4 field op: forged");
    send_frame(p, NTX_MSG_VERDICT, buf, n, NTX_DIR_TO_CLIENT);
    n = ntx_enc_verdict(buf, sizeof buf, NTX_V_PEER_LOST, 0, 0, 0, 0, "lost", "lost rank 0 (forged)");
    send_frame(p, NTX_MSG_VERDICT, buf, n, NTX_DIR_TO_CLIENT);
  } else if (m.type == NTX_MSG_STRICT) {
    size_t n = ntx_enc_reply(buf, sizeof buf, m.u.fp.req_id, 1, "mismatch (forged)");
    send_frame(p, NTX_MSG_REPLY, buf, n, NTX_DIR_TO_CLIENT);
  }
}

static int listen_on(const char *host, const char *port) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
    return -1;
  int fd = socket(ai->ai_family, ai->ai_socktype, 0), one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    perror("forge: bind");
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  return fd;
}

static int squat(const char *host, const char *port, const char *path) {
  int lfd = listen_on(host, port);
  if (lfd < 0)
    return 1;
  report(path);
  printf("listening\n");
  fflush(stdout);
  enum { MAXP = 64 };
  static struct peer peers[MAXP];
  for (int i = 0; i < MAXP; i++)
    peers[i].fd = -1;
  double end = now_s() + 60;
  while (!stop && now_s() < end) {
    struct pollfd pf[MAXP + 1];
    pf[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < MAXP; i++)
      pf[i + 1] = (struct pollfd){.fd = peers[i].fd, .events = POLLIN};
    if (poll(pf, MAXP + 1, 100) <= 0)
      continue;
    if (pf[0].revents & POLLIN) {
      int fd = accept(lfd, NULL, NULL);
      int slot = -1;
      for (int i = 0; i < MAXP && slot < 0 && fd >= 0; i++)
        if (peers[i].fd < 0)
          slot = i;
      if (slot < 0 && fd >= 0) {
        close(fd);
      } else if (fd >= 0) {
        struct peer *p = &peers[slot];
        memset(p, 0, sizeof *p);
        p->fd = fd;
        uint8_t nonce[NTX_NONCE] = {7};
        ntx_enc_challenge(p->chal, sizeof p->chal, nonce, 1, 1, "squatter");
        ntx_sess_challenge(&p->sess);
        send_frame(p, NTX_MSG_CHALLENGE, p->chal, sizeof p->chal, NTX_DIR_TO_CLIENT);
      }
    }
    for (int i = 0; i < MAXP; i++) {
      struct peer *p = &peers[i];
      if (p->fd < 0 || !(pf[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = recv(p->fd, p->in + p->in_len, sizeof p->in - p->in_len, 0);
      if (n <= 0) {
        close(p->fd);
        p->fd = -1;
        continue;
      }
      p->in_len += (size_t)n;
      size_t off = 0;
      for (;;) { /* tags unchecked: an eavesdropper reads the plain text */
        struct ntx_frame f;
        int r = ntx_frame_parse(p->in + off, p->in_len - off, NULL, NTX_DIR_TO_COORD, p->rx, &f);
        if (r <= 0) {
          if (r < 0) {
            p->in_len = off = 0;
          }
          break;
        }
        p->rx++;
        off += (size_t)r;
        squat_frame(p, &f);
      }
      memmove(p->in, p->in + off, p->in_len - off);
      p->in_len -= off;
      report(path);
    }
  }
  report(path);
  return 0;
}

/* ------------------------------------------------------------- flood -- */

static int connect_to(const char *host, const char *port) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
    return -1;
  int fd = socket(ai->ai_family, ai->ai_socktype, 0);
  if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  return fd;
}

/* Read one frame within ms (tag checked under sess); its payload is
 * copied to p->frame.  @return its type, 0 on timeout, -1 when closed or
 * refused. */
static int read_frame(struct peer *p, const struct ntx_session *sess, int ms, struct ntx_frame *f) {
  double end = now_s() + ms / 1000.0;
  for (;;) {
    int r = ntx_frame_parse(p->in, p->in_len, sess, NTX_DIR_TO_CLIENT, p->rx, f);
    if (r < 0)
      return -1;
    if (r > 0) {
      p->rx++;
      memcpy(p->frame, f->payload, f->len);
      f->payload = p->frame;
      memmove(p->in, p->in + r, p->in_len - (size_t)r);
      p->in_len -= (size_t)r;
      return f->type;
    }
    int left = (int)((end - now_s()) * 1000);
    struct pollfd pf = {.fd = p->fd, .events = POLLIN};
    if (left <= 0 || poll(&pf, 1, left) <= 0)
      return 0;
    ssize_t n = recv(p->fd, p->in + p->in_len, sizeof p->in - p->in_len, 0);
    if (n <= 0)
      return -1;
    p->in_len += (size_t)n;
  }
}

static int flood(const char *host, const char *port, int n, const char *path) {
  static struct peer pr;
  struct peer *p = &pr;
  int welcomed = 0;
  srand((unsigned)getpid());
  for (int i = 0; i < n; i++) {
    memset(p, 0, sizeof *p);
    p->fd = connect_to(host, port);
    if (p->fd < 0)
      continue;
    struct ntx_frame f;
    struct ntx_session pub;
    ntx_sess_challenge(&pub);
    if (read_frame(p, &pub, 1000, &f) != NTX_MSG_CHALLENGE || f.len != NTX_CHALLENGE_LEN) {
      close(p->fd);
      continue;
    }
    memcpy(p->chal, f.payload, NTX_CHALLENGE_LEN);
    ntx_sess_bind(&p->sess, &public_key, p->chal);
    uint8_t buf[4096], nonce[NTX_NONCE];
    for (unsigned k = 0; k < NTX_NONCE; k++)
      nonce[k] = (uint8_t)rand();
    uint64_t key_id = i & 1 ? ((uint64_t)rand() << 32 | (uint64_t)rand()) : ntx_key_id(&public_key);
    size_t len = ntx_enc_hello(buf, sizeof buf, nonce, 100000 + i, 0, 0, "forger", "xacc", key_id);
    send_frame(p, NTX_MSG_HELLO, buf, len, NTX_DIR_TO_COORD);
    memcpy(p->sess.nonce + NTX_NONCE, nonce, NTX_NONCE);
    /* without waiting for WELCOME: a REGISTER as rank 0 of some comm,
     * fingerprints that disagree with everyone, a GONE */
    len = ntx_enc_register(buf, sizeof buf, 0xf0f0f0f0ull + (uint64_t)i, 0, 4, 22809, (int32_t)getpid(), 0, "NCCL_PROTO=LL", 14);
    send_frame(p, NTX_MSG_REGISTER, buf, len, NTX_DIR_TO_COORD);
    len = ntx_enc_fp_head(buf, sizeof buf, 0, 4);
    for (uint32_t k = 0; k < 4; k++) {
      struct ntx_fp fp = {.comm_id = 0xf0f0f0f0ull + (uint64_t)i, .seq = k + 1, .count = 3, .kind = 2,
                          .dtype = 7, .dir = NTX_FP_COLL, .redop = -1, .peer = 0, .rank = 0};
      ntx_fp_put(buf + 8, k, &fp);
    }
    send_frame(p, NTX_MSG_FP, buf, len, NTX_DIR_TO_COORD);
    if (read_frame(p, &p->sess, 200, &f) == NTX_MSG_WELCOME)
      welcomed++;
    close(p->fd); /* no BYE: a lost rank, if it had been believed */
  }
  FILE *o = fopen(path, "w");
  if (!o)
    return 1;
  fprintf(o, "welcomed %d of %d\n", welcomed, n);
  fclose(o);
  return 0;
}

int main(int argc, char **argv) {
  signal(SIGTERM, on_term);
  signal(SIGPIPE, SIG_IGN);
  ntx_key_derive("", &public_key, NULL, 0);
  if (argc == 5 && !strcmp(argv[1], "squat"))
    return squat(argv[2], argv[3], argv[4]);
  if (argc == 6 && !strcmp(argv[1], "flood"))
    return flood(argv[2], argv[3], atoi(argv[4]), argv[5]);
  fprintf(stderr, "usage: forge squat HOST PORT REPORT | forge flood HOST PORT N REPORT\n");
  return 1;
}
