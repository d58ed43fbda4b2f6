/* heap.h -- the tracer threads' own heap (prefix ntr_heap_).
 *
 * Thread-safety: every function is thread-safe (one mutex; no hot path
 * allocates).  Fork-safe: the mutex is taken around fork (pthread_atfork),
 * so a child finds it free.  Not async-signal-safe.
 *
 * Why: glibc gives each thread an arena at its first malloc or free, and an
 * arena reserves 64 MiB of address space.  The tracer's threads (exchange
 * client, coordinator, node aggregator) would add 64 MiB each to a rank's
 * VmSize, which `ulimit -v` counts, and M_ARENA_MAX is the application's
 * to set, not ours.  So what those threads allocate and free comes from
 * here: size classes of 16 B to 64 KiB carved from 1 MiB chunks of
 * anonymous memory (never returned: the exchange's budgets bound them),
 * larger blocks mapped one by one.  Under ASan or TSan these are plain
 * malloc/free, so the sanitizers keep seeing every block.
 *
 * A block from here goes back here (ntr_heap_free), never to free(3).
 */
#ifndef NTR_HEAP_H
#define NTR_HEAP_H
#include <stddef.h>

void *ntr_heap_alloc(size_t n);             /* malloc: NULL with errno ENOMEM */
void *ntr_heap_calloc(size_t n, size_t sz); /* calloc (zeroed; n * sz checked) */
void *ntr_heap_realloc(void *p, size_t n);  /* realloc (p NULL: alloc; n 0: free, NULL) */
void ntr_heap_free(void *p);                /* free (NULL: nothing) */

/* Bytes of address space the heap holds (chunks and large blocks). */
size_t ntr_heap_mapped(void);
#endif
