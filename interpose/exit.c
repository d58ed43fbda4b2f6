/* exit.c -- process exit as a dump trigger: exit()/return from main (an
 * on_exit handler, which receives the status) and _exit/_Exit (interposed,
 * so Python's os._exit(42) leaves a dump saying 42).
 *
 * Thread-safety: the first exit path to run wins (atomic flag); others pass
 * straight to the real call.
 * Signal-safety: the _exit/_Exit wrappers may be called from signal
 * handlers (they are async-signal-safe in libc); their work here is too:
 * a ring record, plain stores into the mapping, nti_dump_now (signal-safe),
 * unlink(2)/rmdir(2), and the real function read from the libc table
 * filled in init (resolve.h: NTI_LIBC; no dlsym in a handler or a fork
 * child).  The on_exit handler also stops our threads (not signal-safe,
 * but exit() is not either).
 */
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/record.h"
#include "interpose/watchdog.h"
#include "interpose/trigger.h"
#include "interpose/exchange.h"

static int exit_done; /* atomic: one exit dump per process */

/* @return 1 when this call should do the exit work. */
static int take_exit(void) {
  if (!nti_active())
    return 0;
  /* A vfork child shares our memory and ring until it execs or _exits:
   * it must not write evidence as if it were us (the raw getpid system
   * call: a cached pid would be the parent's). */
  if (nti_proc.ring.hdr->pid != nti_pid_now())
    return 0;
  return !__atomic_exchange_n(&exit_done, 1, __ATOMIC_ACQ_REL);
}

static void exit_evidence(int status, const char *how) {
  struct ntr_ring_header *h = nti_proc.ring.hdr;
  nti_record_event(NTR_KIND_EXIT, NULL, how, 0, (uint64_t)(uint32_t)status, 0);
  h->exit_code = status;
  /* Release: exit_code is visible to a reader that sees EXITED. */
  __atomic_store_n(&h->proc_state, NTR_PROC_EXITED, __ATOMIC_RELEASE);
  if (nti_dump_now(NTR_TRIG_EXIT, 0, status, how) == 0) {
    /* The dump supersedes the ring; a failed dump leaves the ring for
     * `nccltrace collect`.  The mapping stays valid for threads still
     * running until the process is gone. */
    ntr_ring_unlink(&nti_proc.ring);
  }
}

/* A libnccl mapped that is not the one our wrappers call: its calls were
 * never recorded.  Said once and noted in the ring ("nccl unseen"), so
 * analyze does not take this process's silence for a rank without NCCL
 * work (dlopen.c). */
static void note_unseen_nccl(void) {
  char path[256];
  if (!nti_dlopen_unseen(path, sizeof path))
    return;
  nti_say("%s is loaded but the tracer never called it (a second NCCL, dlmopen, or a dlopen it could "
          "not route): this process's calls into it are not recorded", path);
  nti_record_event(NTR_KIND_NOTE, NULL, "nccl unseen", 0, 0, 0);
}

static void on_exit_handler(int status, void *arg) {
  (void)arg;
  if (!take_exit())
    return;
  note_unseen_nccl();
  /* Flush what the exchange has pending and stop polling; the watchdog's
   * last pass marks ops that completed since its previous poll. */
  ntx_stop();
  nti_watchdog_stop();
  exit_evidence(status, "exit");
}

void nti_exit_install(void) {
  /* on_exit rather than atexit: the handler gets the exit status of both
   * exit(n) and return-from-main. */
  if (on_exit(on_exit_handler, NULL) != 0)
    nti_say("cannot register the exit handler; no dump at exit");
}

/* _exit skips on_exit: the watchdog's last pass is asked of its thread
 * (exit() joins it and runs the pass itself, which a handler may not).
 * Without it a process that ends with _exit right after its last ops
 * (Python's multiprocessing children, os._exit) dumped them incomplete. */
static void exit_quick(int status, const char *how) {
  (void)nti_watchdog_last_pass();
  exit_evidence(status, how);
}

NTI_EXPORT void _exit(int status) {
  void (*real)(int) = NTI_LIBC(_exit);
  if (take_exit())
    exit_quick(status, "_exit");
  if (real)
    real(status);
  /* Without a next _exit the process must still end with this status. */
  for (;;)
    syscall(SYS_exit_group, status);
}

NTI_EXPORT void _Exit(int status) {
  void (*real)(int) = NTI_LIBC(_Exit);
  if (take_exit())
    exit_quick(status, "_Exit");
  if (real)
    real(status);
  for (;;)
    syscall(SYS_exit_group, status);
}
