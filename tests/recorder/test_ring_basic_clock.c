/* test_ring_basic_clock -- the header's clocks: ticks convert to the
 * monotonic and the real-time clock within 2 ms, and a tick before the
 * base converts to no later than the base. */
#include <time.h>

#include "helpers.h"
#include "recorder/clock.h"

int main(void) {
  char base[64], dir[128];
  static struct ntr_ring ring;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);
  struct ntr_ring_header *h = ring.hdr;

  NT_ASSERT(h->tsc_hz > 0);
  struct timespec ts;
  uint64_t t = ntr_clock_now();
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t mono = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  uint64_t conv = ntr_clock_to_mono_ns(h, t);
  NT_ASSERT(conv <= mono + 2000000 && conv + 2000000 >= mono);
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  conv = ntr_clock_to_real_ns(h, t);
  NT_ASSERT(conv <= real + 2000000 && conv + 2000000 >= real);
  NT_ASSERT(ntr_clock_to_mono_ns(h, h->tsc_base - 1000) <= h->mono_base_ns);
  /* tsc_hz 0 (uncalibrated or damaged header): the ticks are ns (clock.h) */
  static struct ntr_ring_header h0;
  h0 = *h;
  h0.tsc_hz = 0;
  NT_ASSERT_EQ(ntr_clock_to_mono_ns(&h0, h0.tsc_base + 1500), h0.mono_base_ns + 1500);
  NT_ASSERT_EQ(ntr_clock_to_real_ns(&h0, h0.tsc_base - 1500), h0.real_base_ns - 1500);

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}
