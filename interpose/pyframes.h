/* pyframes.h -- Python call sites and Python thread stacks, read from
 * CPython's own data structures without the GIL (docs/user-guide.md,
 * "Python call sites").
 *
 * Thread-safety: nti_py_setup and nti_py_poll run under a lock of their
 * own (activation, the watchdog) until one of them decides; afterwards the
 * layout is read-only.  nti_py_site may run on any thread
 * concurrently (lock-free site cache; the ring's stack and string tables are
 * lock-free).  nti_py_threads may run concurrently with application threads
 * (it reads their state through fault-safe copies only).
 * Signal-safety: nti_py_threads is async-signal-safe (syscalls, atomics,
 * no allocation, no lock, bounded stack use); nti_py_site is not meant for
 * signal handlers (the wrappers are not either).
 */
#ifndef NTI_PYFRAMES_H
#define NTI_PYFRAMES_H
#include <stdint.h>
#include "recorder/format.h"

/* Look for a CPython in the process (dlsym(RTLD_DEFAULT)); when it is one
 * this version reads and NCCLTRACE_PYSTACKS allows, turn call sites on
 * (nti_proc.sites) and register the dump's thread-stack source.  An
 * unsupported Python says so in one line; no Python says nothing. */
void nti_py_setup(void);

/* The watchdog's poll: while setup has not decided (no Python seen yet),
 * look again when the process loaded a new object (dl_iterate_phdr's
 * count) or its Python is not initialized yet.  Nothing once decided. */
void nti_py_poll(void);

/* The calling thread's Python call site as a stack id (index + 1 in the
 * ring's stack table), 0 when the thread runs no Python code or the site
 * cannot be read, NTR_PYSTACK_DROPPED for a site the full stack table
 * could not take (said once, counted in the ring header).  Keeps errno. */
uint32_t nti_py_site(void);

/* Fork child: the known sites name the parent's stack table; forget
 * them.  Async-signal-safe (memset). */
void nti_py_forget(void);

/* Every Python thread's stack into out[0..max): for dumps.
 * @return threads written. */
uint32_t nti_py_threads(struct ntr_pythread *out, uint32_t max);
#endif
