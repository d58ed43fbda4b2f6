/* thread.c -- tracer threads with small stacks (thread.h).
 *
 * Thread-safety and signal-safety: see thread.h.
 */
#include "recorder/thread.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>

static int create(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg) {
  /* Our threads take no application signal: its handlers run on its own
   * threads (and stacks), as without us. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(t, at, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

int ntr_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
  pthread_attr_t at;
  if (pthread_attr_init(&at) != 0)
    return create(t, NULL, fn, arg);
  /* glibc carves the static TLS of every module out of the thread's stack:
   * a program with much of it would leave us little (GLIBC_PRIVATE, the
   * same call other runtimes make for their threads). */
  size_t (*minstack)(const pthread_attr_t *) =
      (size_t (*)(const pthread_attr_t *))dlsym(RTLD_DEFAULT, "__pthread_get_minstack");
  size_t size = NTR_THREAD_STACK + (minstack ? minstack(&at) : 0);
  int rc = pthread_attr_setstacksize(&at, size);
  if (rc == 0)
    rc = create(t, &at, fn, arg);
  pthread_attr_destroy(&at);
  if (rc == EINVAL)
    rc = create(t, NULL, fn, arg);
  return rc;
}
