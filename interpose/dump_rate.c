/* dump_rate.c -- the dump budget per trigger kind (contract: dump_rate.h).
 *
 * GCRA: a dump at `now` is allowed when now >= tat - (BURST - 1) * PERIOD,
 * and moves tat to max(tat, now) + PERIOD.  So BURST dumps pass at once,
 * then one per PERIOD, and a kind that stays quiet for BURST periods has
 * its whole burst back. */
#include "interpose/dump_rate.h"

#include "recorder/format.h"

int nti_rate_limited_kind(unsigned kind) {
  switch (kind) {
  case NTR_TRIG_EXIT:
  case NTR_TRIG_SIGNAL:
  case NTR_TRIG_FATAL_SIGNAL:
  case NTR_TRIG_COLLECTED:
    return 0;
  default:
    return kind < NTI_RATE_KINDS;
  }
}

int nti_rate_take(struct nti_rate *r, unsigned kind, uint64_t now_ns, uint64_t *count, int *first) {
  if (first)
    *first = 0;
  if (!nti_rate_limited_kind(kind))
    return 1;
  const uint64_t slack = (uint64_t)(NTI_RATE_BURST - 1) * NTI_RATE_PERIOD_NS;
  uint64_t tat = __atomic_load_n(&r->tat[kind], __ATOMIC_RELAXED);
  for (;;) {
    if (tat > slack && now_ns < tat - slack)
      break; /* over budget */
    uint64_t next = (tat > now_ns ? tat : now_ns) + NTI_RATE_PERIOD_NS;
    /* Relaxed is enough: the word orders nothing else, it only counts. */
    if (__atomic_compare_exchange_n(&r->tat[kind], &tat, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      return 1;
  }
  uint64_t n = __atomic_add_fetch(&r->suppressed[kind], 1, __ATOMIC_RELAXED);
  if (count)
    *count = n;
  if (first)
    *first = !__atomic_exchange_n(&r->said[kind], 1, __ATOMIC_RELAXED);
  return 0;
}
