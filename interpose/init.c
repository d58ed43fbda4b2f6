/* init.c -- library constructor, first-communicator startup, fork.
 *
 * Thread-safety: the constructor runs before main (or inside the dlopen that
 * loaded us) with no thread of ours alive; nti_first_comm is once-only via
 * an atomic flag; the fork child handler runs single-threaded in the child.
 * Signal-safety: the fork child handler only makes syscalls and plain
 * stores (ntr_ring_reopen_child is designed for that); nothing else here
 * runs in a signal handler.
 *
 * Ring creation is lazy: the constructor only reads the configuration and
 * installs the exit/fork hooks; the ring file, and with it our signal
 * handlers (signals.c: nothing to dump before), appear at the first NCCL
 * lifecycle call (ncclGetUniqueId, an init, ...) or nccltrace_dump.
 * Collectives always follow an init, so nothing of NCCL is missed; an
 * nccltrace_mark before the first NCCL call is not recorded.
 *
 * Fork policy: the child unmaps the parent's ring in the atfork child
 * handler (it never writes into it) and gets a ring of its own, named after
 * its pid, at its first NCCL lifecycle call.  Communicators are not
 * inherited by the child's tracer: NCCL comms cannot be used across fork.
 * A fork+exec child thus leaves no ring behind.  A child that makes comms
 * of its own gets the watchdog again at its first (nti_first_comm), so its
 * ops are completed and timed out as anywhere; the exchange client is not
 * restarted: the child is no member of the launcher's world (it inherited
 * the parent's RANK, and a rank 0's child would try to host the
 * coordinator on the parent's port), so its comms go unchecked across
 * ranks, as the exchange's atfork handler says (exchange/client.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "interpose/nti.h"
#include "interpose/errfile.h"
#include "interpose/resolve.h"
#include "interpose/comm.h"
#include "interpose/group.h"
#include "interpose/watchdog.h"
#include "interpose/trigger.h"
#include "interpose/exchange.h"
#include "interpose/metrics.h"
#include "interpose/pyframes.h"
#include "recorder/diag.h"
#include "recorder/dump.h"
#include "recorder/thread.h"
#include "recorder/stack.h"

struct nti_global nti_proc;
/* A comm no handle matches (registry.c: nti_comm_none): the cache of the
 * wrappers' fast path starts there, so its test needs no NULL check. */
NTI_TLS struct nti_tls nti_tls = {.last_comm = &nti_comm_none};

static int first_comm_done; /* atomic */

void nti_first_comm(void) {
  if (__atomic_exchange_n(&first_comm_done, 1, __ATOMIC_ACQ_REL))
    return;
  /* The NCCL version is known for sure only now that NCCL is in use (in
   * drop-in mode it may not even be loaded at constructor time). */
  nti_proc.ring.hdr->nccl_version = nti_real_nccl_version();
  /* Threads start here rather than in the constructor: a process that
   * loads us but never creates a communicator (a launcher, a shell) gets
   * no extra thread. */
  nti_watchdog_start();
  ntx_start(&nti_proc.ring);
  nti_met_start();
}

static struct ntr_ring_config ring_config(void) {
  struct ntr_ring_config rc = {
      .dir = nti_cfg.ring_dir, .job_id = nti_cfg.job, .slots = nti_cfg.ring_slots, .fallback = 1};
  return rc;
}

/* The tracer's address space for a ring of slots records: the ring, the
 * dump buffers, four thread stacks (recorder/thread.h, with room for the C
 * library's static TLS) and a chunk of the threads' heap
 * (recorder/heap.h). */
static uint64_t as_cost(uint32_t slots) {
  return ntr_ring_bytes(slots) + ntr_dump_bytes(slots) + 4u * (NTR_THREAD_STACK + (64u << 10)) + (1u << 20);
}

/* Under a finite RLIMIT_AS (`ulimit -v`) the tracer takes at most half of
 * the address space left when it starts; the rest stays the application's
 * (NCCL's init among it): a ring that fits, else none.  @return the ring
 * size to use (want when there is no limit), 0 for tracing off; *line
 * receives what to say ("" for nothing). */
static uint32_t as_fit(uint32_t want, char *line, size_t cap) {
  line[0] = '\0';
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return want;
  char buf[64] = "";
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return want; /* cannot tell what is used: as without a limit */
  buf[n] = '\0';
  uint64_t used = strtoull(buf, NULL, 10) * (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t left = (uint64_t)rl.rlim_cur > used ? (uint64_t)rl.rlim_cur - used : 0, allow = left / 2;
  uint32_t s = want;
  while (s > 64 && as_cost(s) > allow)
    s /= 2;
  if (as_cost(s) > allow) {
    snprintf(line, cap, "ulimit -v leaves %.1f MiB of address space; the tracer's smallest ring, dump buffers "
             "and threads need %.1f MiB, more than half of it: tracing is off, the job runs as untraced",
             (double)left / 1048576.0, (double)as_cost(s) / 1048576.0);
    return 0;
  }
  if (s < want)
    snprintf(line, cap, "ring of %u records instead of %u: ulimit -v leaves %.1f MiB of address space and the "
             "tracer takes at most half of it (%.1f MiB with its dump buffers and threads)",
             s, want, (double)left / 1048576.0, (double)as_cost(s) / 1048576.0);
  return s;
}

static pthread_mutex_t activate_lock = PTHREAD_MUTEX_INITIALIZER;
static int activate_tried; /* atomic: one attempt per process image */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void nti_init(void);

/* ------------------------------------------------------ thread exit -- */

static pthread_key_t exit_key;
static int exit_key_ok;

static void thread_exit(void *v) {
  (void)v;
  /* TLS is still ours while key destructors run. */
  if (nti_active()) {
    ntr_ring_release(&nti_proc.ring, &nti_tls.ring_cur);
    ntr_ring_release(&nti_proc.ring, &nti_tls.sig_cur);
  }
}

void nti_thread_hook(void) {
  nti_tls.exit_hooked = 1;
  /* A small key: no allocation in pthread_setspecific. */
  if (__atomic_load_n(&exit_key_ok, __ATOMIC_ACQUIRE))
    (void)pthread_setspecific(exit_key, (void *)1);
}

void nti_activate(void) {
  /* NCCL may be called before our constructor ran: from the constructor of
   * a library the loader initializes before us (a needed library of the
   * program).  The configuration is read once, whoever comes first. */
  pthread_once(&init_once, nti_init);
  if (nti_proc.disabled || __atomic_load_n(&activate_tried, __ATOMIC_ACQUIRE))
    return;
  pthread_mutex_lock(&activate_lock);
  if (!activate_tried) {
    /* A process of unknown rank is a rank now: what is wrong with its
     * settings is said (config.c, "Said once per job"). */
    nti_config_say_kept();
    struct ntr_ring_config rc = ring_config();
    char asline[320];
    rc.slots = as_fit(rc.slots, asline, sizeof asline);
    if (asline[0])
      nti_say("%s", asline);
    int r = rc.slots ? ntr_ring_open(&nti_proc.ring, &rc) : -ENOMEM;
    if (!rc.slots) {
      /* said above */
    } else if (r < 0) {
      nti_say("cannot create the ring in %s (%s); tracing is off", nti_cfg.ring_dir, strerror(-r));
    } else {
      nti_say_route_on(); /* lines fd 2 cannot take go to the ring from now on */
      int dump_rc = ntr_dump_init(&nti_proc.ring, nti_cfg.dir, nti_cfg.dump_mode);
      if (dump_rc == 0)
        nti_proc.dump_ready = 1;
      nti_py_setup(); /* a Python process: call sites and thread stacks */
      /* libunwind is opened here, not linked (recorder/stack.c): before
       * the handlers, which must find it loaded for a crash backtrace */
      if (ntr_stack_load() != 0)
        nti_say("libunwind.so.8 cannot be loaded; crash dumps have no backtrace%s",
                nti_cfg.stacks ? " and NCCLTRACE_STACKS records no stacks" : "");
      /* Now that there is something to dump (before: every disposition the
       * application's, untouched). */
      nti_signals_install();
      /* Release pairs with nti_active()'s acquire: a thread that sees 1
       * sees the mapped ring; a thread that sees 0 merely passes one more
       * call through unrecorded. */
      __atomic_store_n(&nti_proc.active, 1, __ATOMIC_RELEASE);
      /* The wrappers' fast path: everything but strict mode and stacks.
       * Release pairs with nti_fast()'s acquire, as for active. */
      /* ... and Python call sites (nti_py_setup above; one found later
       * turns it off, nti_fast_off_all). */
      int fast = nti_cfg.check != NTI_CHECK_STRICT && !nti_cfg.stacks && !nti_sites_on();
#if defined(__x86_64__)
      fast = fast && __atomic_load_n(&ntr_clock_use_tsc, __ATOMIC_RELAXED) > 0; /* its clock: rdtsc */
#endif
      __atomic_store_n(&nti_proc.fast, fast, __ATOMIC_RELEASE);
      /* Said once the ring is active: a line that fd 2 may not take is kept
       * there (say_route.c). */
      if (nti_proc.ring.note[0])
        nti_say("%s", nti_proc.ring.note); /* the fallback taken, and why */
      if (dump_rc < 0)
        nti_say("dumps to %s are unavailable (%s); the ring is still recorded", nti_cfg.dir,
                strerror(-dump_rc));
      else if (ntr_dump_note()[0])
        nti_say("%s", ntr_dump_note()); /* the private directory taken, and why */
    }
    __atomic_store_n(&activate_tried, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&activate_lock);
}

static void fork_child(void) {
  nti_signals_fork_child();
  if (!nti_active())
    return;
  /* Nothing may be written from here on: the parent's ring is still mapped
   * shared.  Unmapping it (a syscall) makes that impossible; the child gets
   * a ring of its own at its first NCCL lifecycle call, like any process --
   * and a child that execs at once (fork+exec) leaves no ring at all. */
  __atomic_store_n(&nti_proc.fast, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&nti_proc.active, 0, __ATOMIC_RELAXED);
  ntr_ring_close(&nti_proc.ring, 0);
  nti_proc.dump_ready = 0;
  nti_registry_forget_all();
  __atomic_store_n(&first_comm_done, 0, __ATOMIC_RELAXED);
  nti_group_reset();
  nti_tls.tid = 0; /* the child's thread has its own id */
  nti_tls.last_comm = &nti_comm_none;
  nti_tls.slow_comm = NULL;
  nti_tls.exit_hooked = 0; /* keys survive fork; the value is set again */
  nti_tls.ring_cur = (struct ntr_ring_cursor){0, 0, NULL, 0, NULL}; /* a block of the parent's ring */
  nti_tls.sig_cur = (struct ntr_ring_cursor){0, 0, NULL, 0, NULL};
  nti_watchdog_forget();
  nti_met_forget_in_child();
  ntr_thread_reset_child();
  nti_py_forget();
  ntr_dump_reset_child();
  nti_trigger_fork_child();
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  activate_lock = m; /* may have been held by another parent thread */
  activate_tried = 0;
}

void nti_fork_install(void) {
  pthread_atfork(NULL, NULL, fork_child);
}

__attribute__((constructor)) static void nti_constructor(void) {
  pthread_once(&init_once, nti_init);
}

static void nti_init(void) {
  /* First: the real libc functions, before any handler of ours exists
   * (resolve.h: NTI_LIBC), and even when disabled (the wrappers still
   * forward). */
  /* fd 2 now is the stderr our lines may go to (recorder/diag.h) */
  ntr_diag_init();
  nti_libc_resolve();
  nti_config_load();
  if (nti_cfg.disable) {
    /* Pure pass-through, decided once: no ring, no thread, no handler. */
    nti_proc.disabled = 1;
    return;
  }
  /* The ring itself is created at the first NCCL lifecycle call
   * (nti_activate): a launcher, a shell or a helper process that has us
   * preloaded but never uses NCCL leaves nothing behind. */
  if (nti_cfg.stacks)
    nti_proc.sites = NTI_SITES_NATIVE;
  nti_signals_load(); /* the handlers themselves come with the ring */
  nti_errfile_init();
  nti_exit_install();
  nti_fork_install();
  if (pthread_key_create(&exit_key, thread_exit) == 0)
    __atomic_store_n(&exit_key_ok, 1, __ATOMIC_RELEASE);
}
