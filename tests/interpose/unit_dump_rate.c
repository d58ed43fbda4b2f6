/* unit_dump_rate.c -- the dump budget per trigger kind (interpose/dump_rate.h)
 * on a fake clock, and under threads racing for the same kind.
 *
 * Proves: a storm of one kind (200 lost-peer verdicts within a second) gets NTI_RATE_BURST dumps and counts the other
 * 195, with one "first" refusal; the budget refills at one per period and
 * fully after a quiet spell; another kind keeps its own budget; exit and
 * signal dumps are never refused; 8 threads taking at once get exactly the
 * burst between them.
 * Exit: 0 pass, 1 fail.
 * Thread-safety: 8 threads on one struct nti_rate in the last case.
 */
#include <pthread.h>
#include <stdio.h>

#include "interpose/dump_rate.h"
#include "recorder/format.h"
#include "tests/nt_test.h"

#define S 1000000000ull

static struct nti_rate shared;
static int granted; /* atomic */

static void *taker(void *arg) {
  (void)arg;
  for (int i = 0; i < 100; i++)
    if (nti_rate_take(&shared, NTR_TRIG_MISMATCH, 7 * S, NULL, NULL))
      __atomic_add_fetch(&granted, 1, __ATOMIC_RELAXED);
  return NULL;
}

int main(void) {
  struct nti_rate r = {0};
  int ok = 0, firsts = 0;
  uint64_t count = 0;
  for (int i = 0; i < 200; i++) { /* 200 verdicts in one second */
    int first = 0;
    ok += nti_rate_take(&r, NTR_TRIG_PEER_LOST, 100 * S + (uint64_t)i * (S / 200), &count, &first);
    firsts += first;
  }
  NT_CHECK(ok == (int)NTI_RATE_BURST);
  NT_CHECK(count == 200 - NTI_RATE_BURST);
  NT_CHECK(firsts == 1);
  /* another kind has its own budget */
  NT_CHECK(nti_rate_take(&r, NTR_TRIG_MISMATCH, 100 * S, NULL, NULL) == 1);
  /* one more per period */
  NT_CHECK(nti_rate_take(&r, NTR_TRIG_PEER_LOST, 101 * S + NTI_RATE_PERIOD_NS, NULL, NULL) == 1);
  NT_CHECK(nti_rate_take(&r, NTR_TRIG_PEER_LOST, 101 * S + NTI_RATE_PERIOD_NS, NULL, NULL) == 0);
  /* a quiet spell gives the whole burst back */
  ok = 0;
  for (int i = 0; i < 20; i++)
    ok += nti_rate_take(&r, NTR_TRIG_PEER_LOST, 1000 * S, NULL, NULL);
  NT_CHECK(ok == (int)NTI_RATE_BURST);
  /* the last evidence of a process is never refused */
  for (int i = 0; i < 50; i++) {
    NT_CHECK(nti_rate_take(&r, NTR_TRIG_EXIT, 5 * S, NULL, NULL) == 1);
    NT_CHECK(nti_rate_take(&r, NTR_TRIG_FATAL_SIGNAL, 5 * S, NULL, NULL) == 1);
    NT_CHECK(nti_rate_take(&r, NTR_TRIG_SIGNAL, 5 * S, NULL, NULL) == 1);
  }
  /* at time 0 too (a clock that starts there) */
  struct nti_rate z = {0};
  NT_CHECK(nti_rate_take(&z, NTR_TRIG_USER, 0, NULL, NULL) == 1);
  pthread_t t[8];
  for (int i = 0; i < 8; i++)
    pthread_create(&t[i], NULL, taker, NULL);
  for (int i = 0; i < 8; i++)
    pthread_join(t[i], NULL);
  NT_CHECK(granted == (int)NTI_RATE_BURST);
  NT_CHECK(shared.suppressed[NTR_TRIG_MISMATCH] == 800 - NTI_RATE_BURST);
  if (nt_failures)
    return 1;
  printf("dump budget: %u at once, one per %llu s, per kind\n", NTI_RATE_BURST,
         (unsigned long long)(NTI_RATE_PERIOD_NS / S));
  return 0;
}
