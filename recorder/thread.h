/* thread.h -- start a tracer thread with a small stack (prefix ntr_thread_).
 *
 * Thread-safety: thread-safe.  Not async-signal-safe (pthread_create).
 *
 * A default pthread stack is 8 MiB of address space (RLIMIT_STACK), which
 * `ulimit -v` counts; the tracer's threads need a few dozen KiB (their
 * deepest path, a dump written from a fatal signal on that thread with
 * zstd and libunwind, measured 14 KiB without the signal frame).  So each
 * gets NTR_THREAD_STACK plus what the C library keeps in the stack for
 * static TLS (__pthread_get_minstack, when the C library has it).
 */
#ifndef NTR_THREAD_H
#define NTR_THREAD_H
#include <pthread.h>

#define NTR_THREAD_STACK (256u << 10)

/* pthread_create with that stack and every signal blocked in the new
 * thread; when the C library refuses the size (EINVAL), once more with its
 * default attributes.
 * @return 0 or the error number of pthread_create (EAGAIN: no memory or
 *         thread limit): the caller says so in one line and goes on. */
int ntr_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);

/* CPU time of the threads started here (running ones by their CPU clocks,
 * ended ones as they left), ns; the first 16 live at once are counted.
 * Thread-safe; not async-signal-safe. */
#include <stdint.h>
uint64_t ntr_thread_cpu_ns(void);
/* In a fork child: the parent's threads are not there. */
void ntr_thread_reset_child(void);
#endif
