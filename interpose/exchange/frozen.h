/* frozen.h -- a silent peer that is only stopped, and a loop that was
 * itself stopped (docs/wire-protocol.md, *Liveness*).
 *
 * A debugger, a job suspend (Slurm's scontrol suspend sends SIGSTOP), a
 * SIGSTOP by hand or a paused VM freezes a process whole: its exchange
 * thread sends nothing, and after the dead timeout it would read as lost.
 * Two cases are told apart here:
 *   - the peer is a process of this host: /proc/PID/stat says whether it
 *     is stopped ('T', or 't' in a tracer's stop); a stopped peer is
 *     waited for, never reported lost.  Another host's process cannot be
 *     looked at: it stays subject to the timeout (a node aggregator does
 *     this check for the processes of its own host, which it never times
 *     out);
 *   - the loop itself was frozen (the process that hosts it was stopped):
 *     a pass that comes long after the previous one means nobody could be
 *     heard meanwhile, so silence timers move on by the time it was away.
 *
 * Thread-safety: no shared state; the struct is its caller's.
 * Signal-safety: not for handlers (open/read, snprintf).
 */
#ifndef NTX_FROZEN_H
#define NTX_FROZEN_H
#include <stdint.h>

/* 1 when host names this host (gethostname), pid exists, belongs to our
 * effective uid and is stopped; 0 in every other case (another host, no such
 * process, running, sleeping, a zombie, unreadable). */
int ntx_peer_stopped(const char *host, int32_t pid);

/* Passes of a polling loop. */
struct ntx_freeze {
  double last; /* the previous pass (monotonic seconds), 0 before the first */
};

/* Call once per pass with the loop's clock.  @return the seconds since the
 * previous pass beyond slack (the loop was frozen that long), else 0. */
double ntx_freeze_gap(struct ntx_freeze *f, double now, double slack);

#endif /* NTX_FROZEN_H */
