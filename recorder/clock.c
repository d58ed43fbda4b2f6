/* clock.c -- TSC ticks on x86-64 with an invariant TSC, CLOCK_MONOTONIC ns
 * elsewhere; calibrated once against CLOCK_MONOTONIC (see clock.h). */
#include "recorder/clock.h"

#include <time.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

/* -1: not decided yet, 0: monotonic ns, 1: rdtsc.  Decided by the first
 * caller (ntr_clock_calibrate in practice); every thread that races to decide
 * computes the same value, so relaxed loads and stores suffice (pairs with
 * nothing). */
int ntr_clock_use_tsc = -1;

static uint64_t mono_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The TSC is usable only when it ticks at a constant rate through P- and
 * C-states (CPUID 0x80000007 EDX bit 8, "invariant TSC"); otherwise ticks
 * would not convert to time with one rate. */
static int tsc_invariant(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
    return 0;
  if (!__get_cpuid(0x80000007u, &a, &b, &c, &d))
    return 0;
  return (d >> 8) & 1u;
#else
  return 0;
#endif
}

static int decide(void) {
  int v = __atomic_load_n(&ntr_clock_use_tsc, __ATOMIC_RELAXED);
  if (v < 0) {
    v = tsc_invariant();
    __atomic_store_n(&ntr_clock_use_tsc, v, __ATOMIC_RELAXED);
  }
  return v;
}

uint64_t ntr_clock_now(void) {
#if defined(__x86_64__)
  int v = __atomic_load_n(&ntr_clock_use_tsc, __ATOMIC_RELAXED);
  if (v > 0 || (v < 0 && decide()))
    return __rdtsc();
#endif
  return mono_ns(CLOCK_MONOTONIC);
}

/* One (tsc, mono) pair with the smallest window around the monotonic read,
 * so the pair is accurate to a few tens of ns. */
static void paired_read(uint64_t *tsc, uint64_t *mono) {
  uint64_t best = UINT64_MAX;
  /* The loop runs at least once; set anyway, so that -O3 (which cannot see
   * that) has no maybe-uninitialized path to warn about. */
  *tsc = 0;
  *mono = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = ntr_clock_now();
    uint64_t m = mono_ns(CLOCK_MONOTONIC);
    uint64_t t1 = ntr_clock_now();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *tsc = t0 + (t1 - t0) / 2;
      *mono = m;
    }
  }
}

void ntr_clock_calibrate(struct ntr_ring_header *hdr) {
  uint64_t tsc0, mono0, tsc1, mono1;
  int tsc = decide();
  paired_read(&tsc0, &mono0);
  /* realtime base taken right after, so mono_base and real_base are the same
   * instant to within a few hundred ns */
  uint64_t real0 = mono_ns(CLOCK_REALTIME);
  uint64_t mono0b = mono_ns(CLOCK_MONOTONIC);
  hdr->tsc_base = tsc0;
  hdr->mono_base_ns = mono0;
  hdr->real_base_ns = real0 - (mono0b - mono0);
  if (!tsc) {
    hdr->tsc_hz = 1000000000ull;
    return;
  }
  struct timespec ten_ms = {0, 10 * 1000 * 1000};
  while (nanosleep(&ten_ms, &ten_ms) != 0) {
  }
  paired_read(&tsc1, &mono1);
  uint64_t dns = mono1 - mono0;
  if (dns == 0 || tsc1 <= tsc0) {
    hdr->tsc_hz = 1000000000ull; /* cannot happen with an invariant TSC */
    return;
  }
  hdr->tsc_hz = (uint64_t)((unsigned __int128)(tsc1 - tsc0) * 1000000000u / dns);
}

