/* signals.c -- dump triggers on signals, and the application's view of its
 * own handlers (interposed sigaction/signal).
 *
 * Thread-safety: the application's handlers per signal are kept in two
 * copies; a writer (sigaction/signal from any thread, serialized by a
 * mutex) fills the inactive copy and publishes it with one atomic store, so
 * a handler never reads a half-written struct.
 * Signal-safety: the handlers below use only async-signal-safe operations;
 * each step says why.  sigaction()/signal() wrappers are as safe as the
 * real ones: the real functions come from the libc table filled in init
 * before our handlers are installed (resolve.h: NTI_LIBC).
 *
 * Chaining: our handler stays installed; what the application installs
 * (before we installed ours, saved at install time, or after, through
 * these wrappers) is remembered and called after our work, and returned as
 * oldact, so the application sees exactly the handlers it set.
 *
 * When: our handlers go in only once there is something to dump (the ring,
 * nti_activate).  A process that has us preloaded but never calls NCCL
 * (sleep, a shell, a launcher) keeps every disposition as it set it, in
 * the kernel; a fork child whose ring is gone treats each signal as
 * without us (nti_active() is 0: no dump, the application's disposition).
 *
 * vfork: a vfork child (CPython's subprocess, posix_spawn) shares this
 * memory with its parent until it execs, but has a signal table of its own
 * in the kernel.  Whatever it changes (CPython resets handled signals to
 * SIG_DFL before exec) must not land in the parent's app_act: a process
 * whose pid (the raw system call) is not the table's owner passes
 * sigaction and signal() straight to the kernel, and our handler, should it
 * run in such a child, does what the kernel would have done with the
 * application's disposition and writes nothing here.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/record.h"
#include "interpose/trigger.h"
#include "interpose/exchange/strict_shm.h"
#include "recorder/stack.h"
#include "recorder/names.h"

static const int our_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT,
                                  SIGTERM, SIGINT, SIGUSR1};
#define NSIG_OURS (sizeof our_signals / sizeof our_signals[0])


static int installed[NSIG];          /* 1 once our handler is in place */
static struct sigaction app_act[NSIG][2];
static int app_idx[NSIG];            /* which copy is current (atomic) */
static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static int fatal_taken;              /* first fatal signal wins (atomic) */
static int app_touched[NSIG];        /* the application set a disposition after we loaded (atomic) */
static int ring_fault_said;          /* the one line about a cut ring file (atomic) */
static int32_t owner;                /* the pid this table belongs to (atomic; 0: before load) */
static int ign_at_load[NSIG];        /* SIGTERM/SIGINT/SIGUSR1 ignored when we loaded (nohup) */

static void on_fatal(int sig, siginfo_t *si, void *uc);
static void on_term(int sig, siginfo_t *si, void *uc);
static void on_usr1(int sig, siginfo_t *si, void *uc);

static int ours(int sig) {
  return sig > 0 && sig < NSIG && __atomic_load_n(&installed[sig], __ATOMIC_ACQUIRE);
}

static int our_signal(int sig) {
  for (size_t i = 0; i < NSIG_OURS; i++)
    if (our_signals[i] == sig)
      return 1;
  return 0;
}

/* A vfork child of the owner (or a clone without atfork handlers): its
 * memory is not its own.  Async-signal-safe: one getpid system call. */
static int in_vfork_child(void) {
  int32_t o = __atomic_load_n(&owner, __ATOMIC_RELAXED);
  return o && nti_pid_now() != o;
}

static void app_set(int sig, const struct sigaction *act) {
  int cur = __atomic_load_n(&app_idx[sig], __ATOMIC_ACQUIRE);
  app_act[sig][!cur] = *act;
  /* Release pairs with the handler's acquire load of app_idx. */
  __atomic_store_n(&app_idx[sig], !cur, __ATOMIC_RELEASE);
}

static struct sigaction app_get(int sig) {
  return app_act[sig][__atomic_load_n(&app_idx[sig], __ATOMIC_ACQUIRE)];
}

static const char *sig_text(int sig) {
  const char *n = ntr_name_signal(sig);
  return n ? n : "signal";
}

/* A one-shot handler ran: the next delivery gets the default.  A plain
 * store into our own table (async-signal-safe); in a vfork child, its own
 * kernel table instead (sigaction is async-signal-safe too). */
static void reset_hand(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (!in_vfork_child())
    app_set(sig, &dfl);
  else if (real_sigaction)
    real_sigaction(sig, &dfl, NULL);
}

/* Call what the application installed.  @return 1 when it had a function
 * (called), 0 for SIG_DFL, -1 for SIG_IGN. */
static int chain(int sig, siginfo_t *si, void *uc) {
  struct sigaction a = app_get(sig);
  if (a.sa_flags & SA_SIGINFO) {
    if (!a.sa_sigaction)
      return 0;
    if (a.sa_flags & SA_RESETHAND)
      reset_hand(sig);
    a.sa_sigaction(sig, si, uc);
    return 1;
  }
  if (a.sa_handler == SIG_IGN)
    return -1;
  if (a.sa_handler == SIG_DFL)
    return 0;
  if (a.sa_flags & SA_RESETHAND)
    reset_hand(sig);
  a.sa_handler(sig);
  return 1;
}

/* Die of sig exactly as without us: default action restored (sigaction is
 * async-signal-safe), the signal re-raised (raise is too); it is blocked
 * while we run, so it is delivered when the handler returns. */
static void die_by(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (real_sigaction)
    real_sigaction(sig, &dfl, NULL);
  if (!in_vfork_child()) /* the parent's table is not the child's to change */
    __atomic_store_n(&installed[sig], 0, __ATOMIC_RELEASE);
  raise(sig);
  /* Deliver it now, while the other trigger signals are still blocked by
   * our sa_mask: a SIGINT that arrived during a SIGTERM dump must not decide
   * what the process dies of (pthread_sigmask: one rt_sigprocmask syscall). */
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, NULL);
}

static void mark_signaled(int sig) {
  /* Plain stores into the shared mapping: what `collect` reads if even the
   * dump below fails. */
  nti_proc.ring.hdr->signo = sig;
  __atomic_store_n(&nti_proc.ring.hdr->proc_state, NTR_PROC_SIGNALED, __ATOMIC_RELEASE);
}

/* Our handler ran in a vfork child: what the kernel would have done with
 * the application's disposition (copied into the child's table at vfork),
 * no evidence (the ring is the parent's).  @return 1 when handled here. */
static int vfork_child_signal(int sig, siginfo_t *si, void *uc) {
  if (!in_vfork_child())
    return 0;
  int c = chain(sig, si, uc);
  int fault = sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
  if (c == 1 || (c == -1 && !(fault && si && si->si_code > 0)))
    return 1; /* its handler ran, or it is ignored (a real fault is not ignorable) */
  die_by(sig);
  return 1;
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
  int rc = -1;
  if (vfork_child_signal(sig, si, uc))
    return;
  /* A SIGBUS on the ring's own mapping (its file was truncated under us)
   * is ours, never the application's: the page becomes anonymous memory
   * (mmap, a syscall) and the faulting access runs again on return. */
  if (sig == SIGBUS && si && si->si_code > 0 && ntr_ring_repair_fault(&nti_proc.ring, si->si_addr)) {
    if (!__atomic_exchange_n(&ring_fault_said, 1, __ATOMIC_RELAXED))
      nti_say_raw("nccltrace: the ring file was cut under this process (SIGBUS on its mapping); "
                  "its lost pages are kept in memory only from now on\n");
    return;
  }
  /* The same for a strict board's mapping (strict_shm.h): its comm's strict
   * calls proceed unchecked from there, said by the next one. */
  if (sig == SIGBUS && si && si->si_code > 0 && ntx_shm_repair_fault(si->si_addr))
    return;
  /* Sent by kill/raise (si_code <= 0) to a signal the application ignores:
   * the kernel drops it, and so do we.  A real fault (si_code > 0) is not
   * ignorable; the kernel forces the default then. */
  struct sigaction app = app_get(sig);
  if (!(app.sa_flags & SA_SIGINFO) && app.sa_handler == SIG_IGN && si && si->si_code <= 0)
    return;
  /* Evidence once per process: a second fault (maybe inside our own dump,
   * or on another thread) goes straight to the chaining below. */
  if (nti_active() && !__atomic_exchange_n(&fatal_taken, 1, __ATOMIC_ACQ_REL)) {
    /* Records of a handler take a block of their own: the interrupted
     * thread may be in the middle of using its cursor (nti.h).  Left set:
     * the thread dies, or the application's handler may not return. */
    nti_tls.internal++;
    nti_record_event(NTR_KIND_SIGNAL, NULL, sig_text(sig), 0, (uint64_t)sig, 0);
    mark_signaled(sig);
    /* libunwind from the interrupted context; see recorder/stack.h for its
     * signal-safety (local unwinding, preallocated, best-effort names). */
    ntr_stack_fatal(nti_proc.ring.hdr, sig, uc);
    rc = nti_dump_now(NTR_TRIG_FATAL_SIGNAL, sig, 0, sig_text(sig));
  }
  /* The application's handler was designed for this signal: it runs. */
  int c = chain(sig, si, uc);
  if (c == 1)
    return;
  if (c == -1 && sig == SIGABRT)
    return; /* abort() itself restores the default and raises again */
  /* Default action (or an ignored fault, which the kernel would turn into
   * the default too): the dump holds everything, unlink(2) is
   * async-signal-safe, then die of the same signal. */
  if (rc == 0)
    ntr_ring_unlink(&nti_proc.ring);
  die_by(sig);
}

static void on_term(int sig, siginfo_t *si, void *uc) {
  if (vfork_child_signal(sig, si, uc))
    return;
  if (nti_active()) {
    /* A block of its own for the handler's records (see on_fatal). */
    nti_tls.internal++;
    nti_record_event(NTR_KIND_SIGNAL, NULL, sig_text(sig), 0, (uint64_t)sig, 0);
    struct sigaction a = app_get(sig);
    int default_action = !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL;
    if (default_action)
      mark_signaled(sig);
    int rc = nti_dump_now(NTR_TRIG_SIGNAL, sig, 0, sig_text(sig));
    nti_tls.internal--;
    if (default_action) {
      if (rc == 0)
        ntr_ring_unlink(&nti_proc.ring);
      die_by(sig);
      return;
    }
  }
  if (chain(sig, si, uc) == 0)
    die_by(sig);
}

static void on_usr1(int sig, siginfo_t *si, void *uc) {
  int rc = -1;
  if (vfork_child_signal(sig, si, uc))
    return;
  if (!nti_active()) {
    /* Nothing to dump (a fork child without a ring of its own): the
     * application's disposition, its default included, as without us. */
    if (chain(sig, si, uc) == 0)
      die_by(sig);
    return;
  }
  {
    nti_tls.internal++; /* a block of its own (see on_fatal) */
    nti_record_event(NTR_KIND_SIGNAL, NULL, "SIGUSR1", 0, (uint64_t)sig, 0);
    rc = nti_dump_now(NTR_TRIG_SIGUSR1, sig, 0, "SIGUSR1");
    nti_tls.internal--;
  }
  /* Dump and continue: SIGUSR1's default (terminate) is NOT applied; only
   * an application handler is called -- unless the application itself set
   * SIG_DFL after we loaded (a handler that resets and re-raises): then it
   * dies of SIGUSR1 as it would without us. */
  if (chain(sig, si, uc) == 0 && __atomic_load_n(&app_touched[sig], __ATOMIC_ACQUIRE)) {
    if (nti_active()) {
      mark_signaled(sig);
      if (rc == 0)
        ntr_ring_unlink(&nti_proc.ring);
    }
    die_by(sig);
  }
}

void nti_signals_load(void) {
  __atomic_store_n(&owner, nti_pid_now(), __ATOMIC_RELAXED);
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (!real_sigaction)
    return;
  /* nohup'ed or ignored by the parent: stays ignored, never dumped on,
   * whatever the application does before we install (as when we
   * installed at load). */
  static const int term_like[] = {SIGTERM, SIGINT, SIGUSR1};
  for (size_t i = 0; i < sizeof term_like / sizeof term_like[0]; i++) {
    struct sigaction old;
    int sig = term_like[i];
    if (real_sigaction(sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
      ign_at_load[sig] = 1;
  }
}

void nti_signals_fork_child(void) {
  /* The child has its own copy of this memory now: its table is its own
   * (a vfork child never gets here: no atfork handler runs in it). */
  __atomic_store_n(&owner, nti_pid_now(), __ATOMIC_RELAXED);
}

void nti_signals_install(void) {
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (!real_sigaction) {
    nti_say("sigaction not found; signal triggers are off");
    return;
  }
  for (size_t i = 0; i < NSIG_OURS; i++) {
    int sig = our_signals[i];
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    sigemptyset(&act.sa_mask);
    /* While a handler dumps, the other trigger signals wait: the first one
     * decides, as it would without us (die_by unblocks only its own). */
    sigaddset(&act.sa_mask, SIGTERM);
    sigaddset(&act.sa_mask, SIGINT);
    sigaddset(&act.sa_mask, SIGUSR1);
    /* SA_ONSTACK: a stack overflow SIGSEGV can only be handled on the
     * application's alternate stack, if it set one. */
    act.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    act.sa_sigaction = sig == SIGUSR1 ? on_usr1 : (sig == SIGTERM || sig == SIGINT) ? on_term : on_fatal;
    pthread_mutex_lock(&app_lock);
    /* Ours already: a fork child that activates its own ring (the handler
     * came with the fork; saving it as the application's would chain to
     * ourselves).  Ignored at load: left alone (nti_signals_load). */
    if (__atomic_load_n(&installed[sig], __ATOMIC_ACQUIRE) || ign_at_load[sig]) {
      pthread_mutex_unlock(&app_lock);
      continue;
    }
    if (real_sigaction(sig, &act, &old) == 0) {
      app_set(sig, &old);
      __atomic_store_n(&installed[sig], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&app_lock);
  }
}

/* A vfork child's sigaction: its own kernel table, the only one it has;
 * oldact as the application would see it (our handler, still in the
 * child's table until it sets one, stands for the parent's app_act, which
 * is only read). */
static int child_sigaction(__typeof__(nti_libc.sigaction) real_sigaction, int sig, const struct sigaction *act,
                           struct sigaction *oldact) {
  struct sigaction k;
  int rc = real_sigaction(sig, act, &k);
  if (rc == 0 && oldact) {
    int mine = (k.sa_flags & SA_SIGINFO) &&
               (k.sa_sigaction == on_fatal || k.sa_sigaction == on_term || k.sa_sigaction == on_usr1);
    *oldact = mine ? app_get(sig) : k;
  }
  return rc;
}

NTI_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact) {
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (!real_sigaction) {
    errno = ENOSYS;
    return -1;
  }
  if (!our_signal(sig))
    return real_sigaction(sig, act, oldact);
  if (in_vfork_child())
    return child_sigaction(real_sigaction, sig, act, oldact);
  pthread_mutex_lock(&app_lock);
  if (!ours(sig)) {
    /* Not installed (yet, or not at all): the kernel holds the
     * application's disposition.  Under the lock, so nti_signals_install
     * cannot swap in ours between this call's read and write. */
    int rc = real_sigaction(sig, act, oldact);
    if (rc == 0 && act)
      __atomic_store_n(&app_touched[sig], 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&app_lock);
    return rc;
  }
  /* One of our signals: the application's handler becomes the chained one;
   * ours stays installed.  SIGKILL/SIGSTOP never reach here (not ours). */
  struct sigaction prev = app_get(sig);
  if (act) {
    app_set(sig, act);
    __atomic_store_n(&app_touched[sig], 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&app_lock);
  if (oldact)
    *oldact = prev;
  return 0;
}

NTI_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  __typeof__(nti_libc.signal) real_signal = NTI_LIBC(signal);
  if (!NTI_LIBC(sigaction) || !real_signal) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  if (!our_signal(sig))
    return real_signal(sig, handler);
  /* Through our sigaction, installed or not (a vfork child's goes to its
   * kernel table there).  glibc's signal() is BSD semantics: SA_RESTART,
   * handler stays. */
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  memset(&old, 0, sizeof old);
  sigemptyset(&act.sa_mask);
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) != 0)
    return SIG_ERR;
  /* An SA_SIGINFO handler is reported through signal() as its address, as
   * glibc does (through void (*)(void), the generic function pointer). */
  return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))old.sa_sigaction : old.sa_handler;
}
