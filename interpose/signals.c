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
 * (before we loaded, saved at install time, or after, through these
 * wrappers) is remembered and called after our work, and returned as
 * oldact, so the application sees exactly the handlers it set.
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

static int ours(int sig) {
  return sig > 0 && sig < NSIG && __atomic_load_n(&installed[sig], __ATOMIC_ACQUIRE);
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

/* Call what the application installed.  @return 1 when it had a function
 * (called), 0 for SIG_DFL, -1 for SIG_IGN. */
static int chain(int sig, siginfo_t *si, void *uc) {
  struct sigaction a = app_get(sig);
  if (a.sa_flags & SA_SIGINFO) {
    if (!a.sa_sigaction)
      return 0;
    if (a.sa_flags & SA_RESETHAND) {
      /* One-shot handler: the next delivery gets the default (plain store
       * into our own table, async-signal-safe). */
      struct sigaction dfl = {.sa_handler = SIG_DFL};
      app_set(sig, &dfl);
    }
    a.sa_sigaction(sig, si, uc);
    return 1;
  }
  if (a.sa_handler == SIG_IGN)
    return -1;
  if (a.sa_handler == SIG_DFL)
    return 0;
  if (a.sa_flags & SA_RESETHAND) {
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    app_set(sig, &dfl);
  }
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

static void on_fatal(int sig, siginfo_t *si, void *uc) {
  int rc = -1;
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
  if (nti_active()) {
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
    if (real_sigaction(sig, &act, &old) == 0) {
      if ((sig == SIGTERM || sig == SIGINT || sig == SIGUSR1) && !(old.sa_flags & SA_SIGINFO) &&
          old.sa_handler == SIG_IGN) {
        /* nohup'ed or ignored by the parent: keep it ignored, no dump. */
        real_sigaction(sig, &old, NULL);
        pthread_mutex_unlock(&app_lock);
        continue;
      }
      app_set(sig, &old);
      __atomic_store_n(&installed[sig], 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&app_lock);
  }
}

NTI_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact) {
  __typeof__(nti_libc.sigaction) real_sigaction = NTI_LIBC(sigaction);
  if (!real_sigaction) {
    errno = ENOSYS;
    return -1;
  }
  if (!ours(sig))
    return real_sigaction(sig, act, oldact);
  /* One of our signals: the application's handler becomes the chained one;
   * ours stays installed.  SIGKILL/SIGSTOP never reach here (not ours). */
  pthread_mutex_lock(&app_lock);
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
  if (!ours(sig))
    return real_signal(sig, handler);
  /* glibc's signal() is BSD semantics: SA_RESTART, handler stays. */
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  sigemptyset(&act.sa_mask);
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;
  sigaction(sig, &act, &old);
  /* An SA_SIGINFO handler is reported through signal() as its address, as
   * glibc does (through void (*)(void), the generic function pointer). */
  return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)(void (*)(void))old.sa_sigaction : old.sa_handler;
}
