/* bench_ring -- not a test: ns per reserve+commit on one thread (main ring
 * only, and with the per-communicator recent[] copy), and ns per
 * ntr_clock_now.  Usage: bench_ring [records [slots]] */
#include <time.h>

#include "helpers.h"
#include "recorder/clock.h"
#include "recorder/ring.h"

static struct ntr_ring ring;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double run(unsigned long n, struct ntr_comm_state *cs) {
  double t0 = now_s();
  for (unsigned long i = 0; i < n; i++) {
    uint64_t pos;
    struct ntr_record *r = ntr_ring_reserve(&ring, &pos);
    r->tsc = i;
    r->comm_id = 1;
    r->count = i;
    r->kind = 1;
    r->seq = i;
    ntr_ring_commit(&ring, r, pos, cs);
  }
  return (now_s() - t0) * 1e9 / (double)n;
}

int main(int argc, char **argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000000ul;
  char dir[64];
  t_tmpdir(dir, sizeof dir);
  uint32_t slots = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 65536u;
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "bench", .slots = slots};
  if (ntr_ring_open(&ring, &cfg) != 0)
    return 1;
  struct ntr_comm_state *cs = ntr_ring_comm_alloc(&ring);
  run(n / 10, NULL); /* warm the mapping */
  double plain = run(n, NULL), with_cs = run(n, cs);
  double t0 = now_s();
  uint64_t acc = 0;
  for (unsigned long i = 0; i < n; i++)
    acc += ntr_clock_now();
  double clk = (now_s() - t0) * 1e9 / (double)n;
  printf("slots %u\n", slots);
  printf("reserve+commit: %.1f ns/record\n", plain);
  printf("reserve+commit+recent[]: %.1f ns/record\n", with_cs);
  printf("ntr_clock_now: %.1f ns (checksum %llu)\n", clk, (unsigned long long)(acc & 1));
  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  return 0;
}
