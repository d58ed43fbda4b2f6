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
/* Convert ticks to ns on the host's monotonic and realtime clocks. */
uint64_t ntr_clock_to_mono_ns(const struct ntr_ring_header *hdr, uint64_t tsc);
uint64_t ntr_clock_to_real_ns(const struct ntr_ring_header *hdr, uint64_t tsc);
#endif
