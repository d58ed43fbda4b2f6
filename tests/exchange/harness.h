/* harness.h -- test stand-ins for the interposer (see harness.c).
 * Thread-safety: the counters are updated atomically. */
#ifndef NTX_TEST_HARNESS_H
#define NTX_TEST_HARNESS_H
extern int harness_dumps;            /* nti_dump_now calls */
extern int harness_last_dump_kind;   /* enum ntr_trigger_kind of the last one */
#endif
