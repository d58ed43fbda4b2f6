/* clocksync.h -- a client's clock offset from round trips (NTP's idea,
 * without its filters): the coordinator sends TIME with its own realtime
 * t1, the client answers TIME_ECHO with t1 and its realtime tc, the
 * coordinator receives it at t4.  Then offset = tc - (t1 + t4) / 2 within
 * +- (t4 - t1) / 2, whatever the path's asymmetry; the sample with the
 * smallest round trip among the recent ones is the estimate (its bound is
 * the tightest).  docs/wire-protocol.md, "Clocks".
 *
 * Thread-safety: an ntx_clk belongs to the thread that owns its
 * connection.  Signal-safety: none needed.
 */
#ifndef NTX_CLOCKSYNC_H
#define NTX_CLOCKSYNC_H
#include <stdint.h>

#define NTX_CLK_KEEP 16 /* recent samples the estimate is chosen from */

struct ntx_clk {
  uint64_t inflight;   /* t1 of the TIME not answered yet, 0 none */
  double sent_t, next_t; /* monotonic s: when it was sent, when the next one is due */
  uint32_t sent, samples;
  struct { int64_t off; uint64_t rtt; } s[NTX_CLK_KEEP];
  int64_t offset;      /* the estimate: client - coordinator, ns */
  uint64_t uncert;     /* +- ns */
};

/* CLOCK_REALTIME, ns. */
uint64_t ntx_clk_now_ns(void);
/* Is a TIME due at monotonic time now?  @return 1 with *stamp = t1 to send
 * (and remembered), else 0.  Eight round trips 0.2 s apart after the
 * connection, then one every 5 s; one not answered in 5 s is given up. */
int ntx_clk_due(struct ntx_clk *k, double now, uint64_t *stamp);
/* A TIME_ECHO (t1 = stamp, client time tc) received at realtime t4_ns.
 * @return 1 when the estimate changed (send CLOCK), 0 when not, -1 when the
 *         echo answers no TIME of ours (ignored). */
int ntx_clk_echo(struct ntx_clk *k, uint64_t stamp, uint64_t tc, uint64_t t4_ns);
#endif
