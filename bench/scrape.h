/* scrape.h -- a scraper of the NCCLTRACE_METRICS endpoint for the
 * benchmarks (bench/icount.c, bench/overhead.c): a thread that GETs
 * http://127.0.0.1:PORT/metrics every second, as Prometheus would with a
 * 1 s scrape interval, and counts the answers "200" with a body.
 *
 * Thread-safety: bsc_start() once per process; bsc_count() from any
 * thread (one atomic counter).  Signal-safety: none needed.
 */
#ifndef BSC_H
#define BSC_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int bsc_port;
static atomic_long bsc_answers;

/* One request on a fresh connection (the endpoint closes after each).
 * @return 1 when the answer is HTTP 200 with more than a head, else 0. */
static inline int bsc_once(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  static const char req[] = "GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
  char buf[4096], first[16] = "";
  size_t total = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      if (total == 0)
        memcpy(first, buf, n < 15 ? (size_t)n : 15);
      total += (size_t)n;
    }
  }
  close(fd);
  return total > 100 && !strncmp(first, "HTTP/1.", 7) && !strncmp(first + 8, " 200", 4);
}

static inline void *bsc_loop(void *arg) {
  (void)arg;
  for (;;) {
    if (bsc_once(bsc_port))
      atomic_fetch_add(&bsc_answers, 1);
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* Start the scraper thread (detached; it runs until the process exits).
 * @return 0, or -1. */
static inline int bsc_start(int port) {
  pthread_t t;
  bsc_port = port;
  if (pthread_create(&t, NULL, bsc_loop, NULL) != 0)
    return -1;
  pthread_detach(t);
  return 0;
}

static inline long bsc_count(void) { return atomic_load(&bsc_answers); }
#endif
