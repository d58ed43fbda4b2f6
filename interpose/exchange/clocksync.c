/* clocksync.c -- clock offset from round trips (contract: clocksync.h). */
#include "interpose/exchange/clocksync.h"

#include <time.h>

uint64_t ntx_clk_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int ntx_clk_due(struct ntx_clk *k, double now, uint64_t *stamp) {
  if (k->inflight && now - k->sent_t < 5.0)
    return 0;
  if (now < k->next_t)
    return 0;
  k->inflight = ntx_clk_now_ns();
  if (!k->inflight)
    k->inflight = 1;
  k->sent_t = now;
  k->sent++;
  k->next_t = now + (k->sent < 8 ? 0.2 : 5.0);
  *stamp = k->inflight;
  return 1;
}

int ntx_clk_echo(struct ntx_clk *k, uint64_t stamp, uint64_t tc, uint64_t t4_ns) {
  if (!k->inflight || stamp != k->inflight || t4_ns < stamp)
    return -1;
  k->inflight = 0;
  uint64_t rtt = t4_ns - stamp;
  /* offset = tc - (t1 + t4) / 2, without overflow */
  int64_t off = (int64_t)(tc - stamp) - (int64_t)(rtt / 2);
  k->s[k->samples % NTX_CLK_KEEP].off = off;
  k->s[k->samples % NTX_CLK_KEEP].rtt = rtt;
  k->samples++;
  uint32_t n = k->samples < NTX_CLK_KEEP ? k->samples : NTX_CLK_KEEP, best = 0;
  for (uint32_t i = 1; i < n; i++)
    if (k->s[i].rtt < k->s[best].rtt)
      best = i;
  uint64_t unc = k->s[best].rtt / 2 + 1;
  int changed = k->samples == 1 || k->s[best].off != k->offset || unc != k->uncert;
  k->offset = k->s[best].off;
  k->uncert = unc;
  return changed;
}
