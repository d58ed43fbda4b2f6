/* hostile.c -- one traced process of hostile_e2e.py: it starts the tracer with one NCCL lifecycle call, writes records,
 * and exits normally, so the test sees what the tracer did with its ring
 * and dump directories.
 *
 *   hostile fill N    ncclGetUniqueId, N application markers (enough to lap
 *                     the ring when N > NCCLTRACE_RING), exit 0
 *   hostile wait N    ncclGetUniqueId, print "ready", wait for a line on
 *                     stdin, then N markers, print "done", exit 0
 *
 * Exit: 0 done, 1 failure (message on stderr).
 * Thread-safety / signal-safety: single-threaded, no handlers.
 */
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: hostile fill|wait N\n");
    return 1;
  }
  long n = atol(argv[2]);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId failed\n");
    return 1;
  }
  /* Resolved at run time: a no-op when the tracer is not preloaded. */
  void (*mark)(const char *, long long) = (void (*)(const char *, long long))dlsym(RTLD_DEFAULT, "nccltrace_mark");
  if (!strcmp(argv[1], "wait")) {
    printf("ready\n");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin))
      return 1;
  }
  for (long i = 0; mark && i < n; i++)
    mark("fill", i);
  printf("done\n");
  return 0;
}
