/* dump_rate.h -- how often a dump trigger may write a dump: per trigger
 * kind, a token bucket of NTI_RATE_BURST dumps refilled at one per
 * NTI_RATE_PERIOD_NS (GCRA form: one 64-bit "theoretical arrival time" per
 * kind).  A storm of one kind (lost-peer verdicts, SIGUSR1, nccltrace_dump
 * in a loop) writes a handful of dumps and counts the rest; other kinds
 * keep their own budget.  The once-per-process triggers (exit, terminating
 * and fatal signals) and `collect` are never limited: they are the last
 * evidence a process leaves.
 *
 * Thread-safety: lock-free (one compare-and-swap per decision), any thread.
 * Signal-safety: async-signal-safe (atomics on caller memory only; the
 * caller passes the time).
 */
#ifndef NTI_DUMP_RATE_H
#define NTI_DUMP_RATE_H
#include <stdint.h>

#define NTI_RATE_BURST 5u                    /* dumps of one kind at once */
#define NTI_RATE_PERIOD_NS 12000000000ull    /* then one per 12 s: 5 a minute */
#define NTI_RATE_KINDS 16u                   /* trigger kinds are 1..11 (recorder/format.h) */

struct nti_rate {
  uint64_t tat[NTI_RATE_KINDS];        /* when the bucket of each kind is full again, ns */
  uint64_t suppressed[NTI_RATE_KINDS]; /* dumps refused, per kind */
  int said[NTI_RATE_KINDS];            /* the one line about it was printed */
};

/* 1 when kind is subject to the limit (see above). */
int nti_rate_limited_kind(unsigned kind);

/* Take one dump of kind at now_ns (a monotonic clock; 0 is allowed).
 * @return 1 allowed; 0 refused (its suppressed count was raised: *count,
 *         when not NULL, gets the new count, and *first is 1 the first
 *         time for that kind). */
int nti_rate_take(struct nti_rate *r, unsigned kind, uint64_t now_ns, uint64_t *count, int *first);
#endif
