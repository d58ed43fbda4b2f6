/* thread.c -- tracer threads with small stacks (thread.h).
 *
 * Thread-safety and signal-safety: see thread.h.
 */
#include "recorder/thread.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The tracer's threads, for their CPU time (ntr_thread_cpu_ns): a slot per
 * live thread holding its CPU clock; a thread that ends adds its time to
 * cpu_done.  state: 0 free, 1 claimed, 2 running, 3 ending (atomics). */
#define NTR_THREADS 16u
static struct ntr_tslot {
  int state;
  clockid_t clock;
  void *(*fn)(void *);
  void *arg;
} tslots[NTR_THREADS];
static uint64_t cpu_done; /* ns of threads that ended (atomic) */

static uint64_t clock_ns(clockid_t c) {
  struct timespec ts;
  return clock_gettime(c, &ts) == 0 ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec : 0;
}

static void *trampoline(void *p) {
  struct ntr_tslot *s = p;
  void *(*fn)(void *) = s->fn;
  void *arg = s->arg;
  clockid_t c;
  int have = pthread_getcpuclockid(pthread_self(), &c) == 0;
  if (have) {
    s->clock = c;
    __atomic_store_n(&s->state, 2, __ATOMIC_RELEASE); /* pairs with ntr_thread_cpu_ns */
  }
  void *rv = fn(arg);
  if (have) {
    __atomic_store_n(&s->state, 3, __ATOMIC_RELEASE);
    __atomic_add_fetch(&cpu_done, clock_ns(CLOCK_THREAD_CPUTIME_ID), __ATOMIC_RELAXED);
  }
  __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
  return rv;
}

uint64_t ntr_thread_cpu_ns(void) {
  uint64_t ns = __atomic_load_n(&cpu_done, __ATOMIC_RELAXED);
  for (unsigned i = 0; i < NTR_THREADS; i++)
    if (__atomic_load_n(&tslots[i].state, __ATOMIC_ACQUIRE) == 2)
      ns += clock_ns(tslots[i].clock); /* a thread that just ended: its clock fails, 0 */
  return ns;
}

void ntr_thread_reset_child(void) {
  for (unsigned i = 0; i < NTR_THREADS; i++)
    tslots[i].state = 0;
  cpu_done = 0;
}

static int create(pthread_t *t, const pthread_attr_t *at, void *(*fn)(void *), void *arg) {
  /* Our threads take no application signal: its handlers run on its own
   * threads (and stacks), as without us. */
  sigset_t all, old;
  sigfillset(&all);
  struct ntr_tslot *s = NULL;
  for (unsigned i = 0; i < NTR_THREADS && !s; i++) {
    int free_ = 0;
    if (__atomic_compare_exchange_n(&tslots[i].state, &free_, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      s = &tslots[i];
  }
  if (s) { /* else: not counted in ntr_thread_cpu_ns */
    s->fn = fn;
    s->arg = arg;
  }
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = s ? pthread_create(t, at, trampoline, s) : pthread_create(t, at, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc && s)
    __atomic_store_n(&s->state, 0, __ATOMIC_RELEASE);
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
