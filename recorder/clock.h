/* clock.h -- the recorder's clock: raw TSC ticks on x86-64 (a few ns, no
 * syscall), CLOCK_MONOTONIC ns elsewhere, with bases recorded once so tools
 * convert ticks to wall time and align hosts.
 *
 * Thread-safety: ntr_clock_calibrate once at startup; ntr_clock_now from any
 * thread.  Signal-safety: ntr_clock_now is async-signal-safe.
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
/* Convert ticks to ns on the host's monotonic and realtime clocks. */
uint64_t ntr_clock_to_mono_ns(const struct ntr_ring_header *hdr, uint64_t tsc);
uint64_t ntr_clock_to_real_ns(const struct ntr_ring_header *hdr, uint64_t tsc);
#endif
