/* clock.h -- the recorder's clock: raw TSC ticks on x86-64 (a few ns, no
 * syscall), CLOCK_MONOTONIC ns elsewhere, with bases recorded once so tools
 * convert ticks to wall time and align hosts.
 *
 * Thread-safety: ntr_clock_calibrate once at startup; ntr_clock_now and the
 * conversions from any thread.  Signal-safety: ntr_clock_now and the
 * conversions are async-signal-safe.
 */
#ifndef NTR_CLOCK_H
#define NTR_CLOCK_H
#include <stdint.h>
#include "recorder/format.h"

/* Measure tsc_hz (~10 ms) and fill the clock fields of hdr. */
void ntr_clock_calibrate(struct ntr_ring_header *hdr);
uint64_t ntr_clock_now(void);
/* 1: the clock is rdtsc, 0: CLOCK_MONOTONIC, -1: not decided yet (clock.c;
 * relaxed atomic, written once by the first caller). */
extern int ntr_clock_use_tsc __attribute__((visibility("hidden")));
/* ntr_clock_now for hot paths: once calibrated on x86-64, one relaxed load
 * and rdtsc inline, with no call; otherwise ntr_clock_now.  Same value. */
static inline uint64_t ntr_clock_now_inline(void) {
#if defined(__x86_64__)
  if (__builtin_expect(__atomic_load_n(&ntr_clock_use_tsc, __ATOMIC_RELAXED) > 0, 1))
    return __builtin_ia32_rdtsc();
#endif
  return ntr_clock_now();
}

/* The one tick -> ns rule, a pure function of a header's clock fields, so
 * the tools (which have no recorder state) call it too:
 *   ns = base_ns + (tsc - tsc_base) * 1e9 / tsc_hz
 * computed exactly as quotient and remainder (no overflow for any rate
 * below 18 GHz and any interval below 584 years); ticks before tsc_base
 * (another thread read the clock first) give base_ns minus the interval.
 * The result is modulo 2^64; ntr_clock_ns_exact says whether it wrapped.
 * tsc_hz == 0 means the ticks already are nanoseconds (hz = 1e9, what the
 * CLOCK_MONOTONIC clock records): a header written before calibration or
 * damaged still orders its records, and converts without dividing by 0.
 * Any thread, async-signal-safe. */
#define NTR_CLOCK_NS_PER_S 1000000000ull
/* @return 1 and *ns when the result neither wrapped past 2^64 nor fell to
 * or below 0, else 0 (and *ns modulo 2^64). */
static inline int ntr_clock_ns_exact(uint64_t base_ns, uint64_t tsc_base, uint64_t tsc_hz, uint64_t tsc,
                                     uint64_t *ns) {
  uint64_t hz = tsc_hz ? tsc_hz : NTR_CLOCK_NS_PER_S;
  int before = tsc < tsc_base;
  uint64_t d = before ? tsc_base - tsc : tsc - tsc_base;
  int ok = d / hz <= (UINT64_MAX - NTR_CLOCK_NS_PER_S) / NTR_CLOCK_NS_PER_S;
  uint64_t e = (d / hz) * NTR_CLOCK_NS_PER_S + (d % hz) * NTR_CLOCK_NS_PER_S / hz;
  if (before) {
    ok = ok && e < base_ns;
    *ns = base_ns - e;
  } else {
    ok = ok && e <= UINT64_MAX - base_ns;
    *ns = base_ns + e;
  }
  return ok;
}
/* Ticks to ns on the writer host's monotonic and realtime clocks. */
static inline uint64_t ntr_clock_to_mono_ns(const struct ntr_ring_header *hdr, uint64_t tsc) {
  uint64_t ns;
  (void)ntr_clock_ns_exact(hdr->mono_base_ns, hdr->tsc_base, hdr->tsc_hz, tsc, &ns);
  return ns;
}
static inline uint64_t ntr_clock_to_real_ns(const struct ntr_ring_header *hdr, uint64_t tsc) {
  uint64_t ns;
  (void)ntr_clock_ns_exact(hdr->real_base_ns, hdr->tsc_base, hdr->tsc_hz, tsc, &ns);
  return ns;
}
#endif
