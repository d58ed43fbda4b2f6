/* exec.c -- the exec family: a process image that replaces itself leaves
 * an `Exec` record and proc_state = exec in its ring (docs/interposer.md,
 * "Exec").
 *
 * Thread-safety: any thread.  Concurrent execs are counted (in_flight), so
 * a failing one does not set the state back to running while another may
 * be replacing the image.
 * Signal-safety: every wrapper is async-signal-safe, as POSIX requires of
 * execl/execle/execv/execve/fexecve: a ring record (atomics and plain
 * stores into the mapping), atomics on the header, an argv array on the
 * stack for the execl forms (no malloc, as in glibc), getpid(2), and the
 * real function read from the libc table filled in init before any handler
 * of ours exists (resolve.h: NTI_LIBC; dlsym only for an exec made before
 * our constructor, from another library's).
 *
 * Why every member: glibc 2.36 implements execv, execl, execle, execlp,
 * execvp, execvpe and fexecve with direct calls to its internal __execve,
 * not through the PLT, so wrapping execve alone misses os.execv, execlp
 * and friends (checked with objdump; test interpose_exec exercises each).
 *
 * No dump is taken at exec: an exec that fails returns to the caller (and
 * execvp-style callers try one PATH entry after the other), so a dump per
 * attempt would be wrong, and exec must stay cheap and signal-safe.  The
 * ring is a MAP_SHARED file: what was written is in it after the image is
 * gone, and the file is left in place for analyze and `nccltrace collect`.
 */
#include <stdarg.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "interpose/nti.h"
#include "interpose/resolve.h"
#include "interpose/record.h"

static int in_flight; /* atomic: execs of this image between record and return */

/* Record the attempt and mark the ring.  what: the path as given (execvp's
 * file name is not resolved: the search happens inside libc).
 * @return 1 when recorded (exec_end must follow), 0 when not tracing. */
static int exec_begin(const char *what) {
  if (!nti_active())
    return 0;
  /* A vfork child (posix_spawn, CPython's subprocess) shares our memory and
   * mapping until it execs: its exec is not ours.  A fork child has no
   * ring (init.c), so nti_active() is already 0 there. */
  struct ntr_ring_header *h = nti_proc.ring.hdr;
  if (h->pid != nti_pid_now())
    return 0;
  size_t n = what ? strlen(what) : 0;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_EXEC, NTR_PHASE_ENTER, NULL);
  /* 24 bytes of text: a longer path keeps its tail, the part that names
   * the program; count says how long the whole path was. */
  const char *tail = n > sizeof r->u.text ? what + n - sizeof r->u.text : what;
  memset(r->u.text, 0, sizeof r->u.text);
  if (n)
    memcpy(r->u.text, tail, n < sizeof r->u.text ? n : sizeof r->u.text);
  r->count = n;
  nti_record_end(r, pos, NULL);
  __atomic_add_fetch(&in_flight, 1, __ATOMIC_ACQ_REL);
  /* Only a running image becomes exec'd: an exit or signal already being
   * recorded by another thread keeps its state. */
  uint32_t running = NTR_PROC_RUNNING;
  __atomic_compare_exchange_n(&h->proc_state, &running, NTR_PROC_EXEC, 0, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
  return 1;
}

/* The exec returned: it failed.  An EXIT-phase record carries errno in aux
 * (an ENTER without EXIT is an exec that replaced the image); the state
 * goes back to running once no other exec is in flight.  errno is kept. */
static int exec_end(int rc) {
  int err = errno;
  uint64_t pos;
  struct ntr_record *r = nti_record_begin(&pos, NTR_KIND_EXEC, NTR_PHASE_EXIT, NULL);
  r->aux = (uint64_t)(uint32_t)err;
  nti_record_end(r, pos, NULL);
  if (__atomic_sub_fetch(&in_flight, 1, __ATOMIC_ACQ_REL) == 0) {
    uint32_t exec = NTR_PROC_EXEC;
    __atomic_compare_exchange_n(&nti_proc.ring.hdr->proc_state, &exec, NTR_PROC_RUNNING, 0,
                                __ATOMIC_RELEASE, __ATOMIC_RELAXED);
  }
  errno = err;
  return rc;
}

/* A real function that is missing (execveat before glibc 2.34): the call
 * fails as the kernel would for an unknown system call. */
static int missing(void) {
  errno = ENOSYS;
  return -1;
}

NTI_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  __typeof__(nti_libc.execve) f = NTI_LIBC(execve);
  int traced = exec_begin(path);
  int rc = f ? f(path, argv, envp) : (int)syscall(SYS_execve, path, argv, envp);
  return traced ? exec_end(rc) : rc;
}

NTI_EXPORT int execv(const char *path, char *const argv[]) {
  __typeof__(nti_libc.execv) f = NTI_LIBC(execv);
  int traced = exec_begin(path);
  int rc = f ? f(path, argv) : missing();
  return traced ? exec_end(rc) : rc;
}

NTI_EXPORT int execvp(const char *file, char *const argv[]) {
  __typeof__(nti_libc.execvp) f = NTI_LIBC(execvp);
  int traced = exec_begin(file);
  int rc = f ? f(file, argv) : missing();
  return traced ? exec_end(rc) : rc;
}

NTI_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  __typeof__(nti_libc.execvpe) f = NTI_LIBC(execvpe);
  int traced = exec_begin(file);
  int rc = f ? f(file, argv, envp) : missing();
  return traced ? exec_end(rc) : rc;
}

NTI_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  __typeof__(nti_libc.fexecve) f = NTI_LIBC(fexecve);
  /* "fd N" without snprintf (not async-signal-safe): digits backwards. */
  char what[16], *p = what + sizeof what;
  unsigned v = fd < 0 ? 0u - (unsigned)fd : (unsigned)fd;
  *--p = 0;
  do
    *--p = (char)('0' + v % 10);
  while (v /= 10);
  if (fd < 0)
    *--p = '-';
  *--p = ' ';
  *--p = 'd';
  *--p = 'f';
  int traced = exec_begin(p);
  int rc = f ? f(fd, argv, envp) : missing();
  return traced ? exec_end(rc) : rc;
}

NTI_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags) {
  __typeof__(nti_libc.execveat) f = NTI_LIBC(execveat);
  int traced = exec_begin(path);
  int rc = f ? f(dirfd, path, argv, envp, flags) : missing();
  return traced ? exec_end(rc) : rc;
}

/* The execl forms: their argument lists become an argv on the stack (a
 * VLA, counted first, as glibc does: no malloc), then our v form records
 * and calls the real one.  ap is consumed here (the caller only va_ends). */
enum exec_list_kind { EXEC_L, EXEC_LP, EXEC_LE };
static int exec_list(enum exec_list_kind kind, const char *path, const char *arg, va_list ap) {
  va_list cp;
  va_copy(cp, ap);
  int n = 0; /* arguments before the terminating NULL, arg included */
  if (arg)
    for (n = 1; va_arg(cp, const char *); n++)
      ;
  va_end(cp);
  char *argv[n + 1];
  argv[0] = (char *)arg;
  /* Reading argv[n] consumes the terminating NULL: execle's envp is next. */
  for (int i = 1; i <= n; i++)
    argv[i] = va_arg(ap, char *);
  argv[n] = NULL;
  switch (kind) {
  case EXEC_LP:
    return execvp(path, argv);
  case EXEC_LE:
    return execve(path, argv, va_arg(ap, char *const *));
  default:
    return execv(path, argv);
  }
}

NTI_EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(EXEC_L, path, arg, ap);
  va_end(ap);
  return rc;
}

NTI_EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(EXEC_LP, file, arg, ap);
  va_end(ap);
  return rc;
}

NTI_EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_list(EXEC_LE, path, arg, ap);
  va_end(ap);
  return rc;
}
