/* mkfix.c -- write a synthetic ring file or dump (fixture.h) for the
 * script-driven tests.
 *
 *   mkfix ring|dump|bomb OUT [--pid N] [--host H] [--exe E] [--job J] [--slots N] [--extra N] [--bt] [--error]
 *         [--trigger K] [--trigger-ms MS] [--rank R] [--zeros N]
 *
 * bomb: a dump whose RECORDS section also holds --zeros N empty records
 * (fixture.h, fx_write_bomb).
 *
 * Exit status: 0 written, 1 failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fixture.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: mkfix ring|dump|bomb OUT [--pid N] [--host H] [--exe E] [--job J] [--slots N] [--extra N]"
                    " [--bt] [--error] [--trigger K] [--trigger-ms MS] [--rank R] [--zeros N]\n");
    return 1;
  }
  struct fx_opts o = {0};
  unsigned long long zeros = 0;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--bt")) {
      o.bt = 1;
      continue;
    }
    if (!strcmp(a, "--error")) {
      o.error = 1;
      continue;
    }
    if (!v) {
      fprintf(stderr, "mkfix: %s wants a value\n", a);
      return 1;
    }
    i++;
    if (!strcmp(a, "--pid"))
      o.pid = atoi(v);
    else if (!strcmp(a, "--host"))
      o.host = v;
    else if (!strcmp(a, "--exe"))
      o.exe = v;
    else if (!strcmp(a, "--job"))
      o.job = v;
    else if (!strcmp(a, "--zeros"))
      zeros = strtoull(v, NULL, 0);
    else if (!strcmp(a, "--slots"))
      o.slots = (uint32_t)strtoul(v, NULL, 0);
    else if (!strcmp(a, "--extra"))
      o.extra = (uint32_t)strtoul(v, NULL, 0);
    else if (!strcmp(a, "--rank"))
      o.rank = atoi(v);
    else if (!strcmp(a, "--trigger-ms"))
      o.trigger_ms = (uint32_t)strtoul(v, NULL, 0);
    else if (!strcmp(a, "--trigger"))
      o.trigger = (uint32_t)strtoul(v, NULL, 0);
    else {
      fprintf(stderr, "mkfix: unknown option %s\n", a);
      return 1;
    }
  }
  if (!strcmp(argv[1], "bomb")) {
    if (fx_write_bomb(&o, zeros, argv[2]) == 0)
      return 0;
    perror("mkfix");
    return 1;
  }
  unsigned char *buf = NULL;
  size_t len = !strcmp(argv[1], "dump") ? fx_build_dump(&o, &buf) : fx_build_ring(&o, &buf);
  if (!len || fx_write(argv[2], buf, len)) {
    perror("mkfix");
    free(buf);
    return 1;
  }
  free(buf);
  return 0;
}
