/* run_sig.h -- `nccltrace run`'s signals: which ones it passes on to CMD
 * (each send reaches CMD once), and job control through it (run_sig.c has
 * the rule).
 *
 * Thread-safety: run's one thread only.  Signal-safety: no handler; run
 * keeps these signals blocked and takes them in ntt_runsig_wait.
 */
#ifndef NTT_RUN_SIG_H
#define NTT_RUN_SIG_H
#include <signal.h>
#include <sys/types.h>

/* Start the witness (a process of run's in its group that tells a
 * group-wide send from one to run alone).  Before CMD is forked.
 * @return 0, or -errno: run then passes on every kill(2)-sent signal. */
int ntt_runsig_start(void);
/* Adds to *mask the signals run passes on (SIGINT SIGTERM SIGHUP SIGQUIT
 * SIGUSR1 SIGUSR2 SIGTSTP SIGTTIN SIGTTOU SIGCONT) and SIGCHLD, which run
 * keeps blocked from then on (set *mask as run's mask before CMD is
 * forked's copy needs them), and opens the signalfd that wakes the wait.
 * @return 0, or -errno: no signalfd, and the wait looks every 20 ms. */
int ntt_runsig_install(sigset_t *mask);
/* In the forked CMD before exec: those signals back to SIG_DFL. */
void ntt_runsig_child_reset(void);
/* The pid signals are passed on to (0: none). */
void ntt_runsig_set_child(pid_t pid);
/* waitpid(pid) until it ends, passing on run's signals as they come and
 * stopping run whenever CMD stops.
 * @return 0 (*st: its status) or -errno. */
int ntt_runsig_wait(pid_t pid, int *st);
/* CMD has ended: nothing is passed on any more; the witness is ended. */
void ntt_runsig_stop(void);

#endif /* NTT_RUN_SIG_H */
