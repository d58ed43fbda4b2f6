/* trigger.h -- ask the interposer for a dump (used by the exchange module on
 * a mismatch or a lost peer, and by the interposer's own triggers).
 *
 * Thread-safety: any thread; one dump runs at a time per process (a second
 * concurrent request returns -EBUSY at once instead of waiting).
 * Signal-safety: nti_trigger_dump is not async-signal-safe (it formats
 * text); signal handlers use the interposer's internal signal path.
 */
#ifndef NTI_TRIGGER_H
#define NTI_TRIGGER_H

/* Write a dump now.  trigger_kind: enum ntr_trigger_kind (recorder/format.h),
 * e.g. NTR_TRIG_MISMATCH or NTR_TRIG_PEER_LOST; reason: one human line,
 * up to 95 bytes kept.  A DUMP record naming the trigger is added to the
 * ring.  @return 0, -EBUSY (another dump in progress), -ENODEV (tracing off),
 * or the dump writer's -errno. */
int nti_trigger_dump(int trigger_kind, const char *reason);

/* A straggler was reported on comm_id: device start events before every
 * collective of it from now on (watchdog.c).  Any thread. */
void nti_start_boost(unsigned long long comm_id);

#endif
