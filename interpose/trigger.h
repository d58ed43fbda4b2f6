/* trigger.h -- ask the interposer for a dump (used by the exchange module on
 * a mismatch or a lost peer, and by the interposer's own triggers).
 *
 * Thread-safety: any thread; one dump runs at a time per process (a second
 * concurrent request returns -EBUSY at once instead of waiting).
 * Signal-safety: nti_dump_now is async-signal-safe once the library is
 * initialized (preallocated dump buffers, open/write/rename, one write(2));
 * nti_start_boost is not.
 */
#ifndef NTI_TRIGGER_H
#define NTI_TRIGGER_H

/* Write a dump now.  trigger_kind: enum ntr_trigger_kind (recorder/format.h),
 * e.g. NTR_TRIG_MISMATCH or NTR_TRIG_PEER_LOST; signo and exit_code: the
 * signal or exit status that caused it (0 for others); reason: one human
 * line, cut to the trigger's field (NULL: the trigger's name).  A DUMP
 * record naming the trigger is added to the ring.  @return 0, -EBUSY
 * (another dump in progress), -ENODEV (tracing off), -EAGAIN (over the
 * dump budget or a total: NCCLTRACE_MAX_DUMPS, NCCLTRACE_DIR_MAX_DUMPS),
 * or the dump writer's -errno. */
int nti_dump_now(int trigger_kind, int signo, int exit_code, const char *reason);
/* Fork child (atfork, single-threaded): a process of its own, so its dump
 * total (NCCLTRACE_MAX_DUMPS) starts again. */
void nti_trigger_fork_child(void);

/* A straggler was reported on comm_id: device start events before every
 * collective of it from now on (watchdog.c).  Any thread. */
void nti_start_boost(unsigned long long comm_id);

#endif
