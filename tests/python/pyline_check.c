/* pyline_check.c -- drives interpose/pyline.c: reads cases from stdin, one
 * per line, "HEXTABLE FIRSTLINE LASTI EXPECTED", and checks each.  The
 * cases come from CPython itself (test_pyline.py: co_lines() of real code
 * objects).  Exit 0 all passed, 1 otherwise (the first failures printed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "interpose/pyline.h"

static int mem_read(const void *src, void *dst, size_t n) {
  memcpy(dst, src, n);
  return 0;
}

int main(void) {
  static char line[1 << 20];
  static unsigned char table[1 << 19];
  long n = 0, bad = 0;
  while (fgets(line, sizeof line, stdin)) {
    char *hex = strtok(line, " ");
    char *f = strtok(NULL, " "), *l = strtok(NULL, " "), *e = strtok(NULL, " \n");
    if (!hex || !f || !l || !e)
      continue;
    size_t len = strlen(hex) / 2;
    for (size_t i = 0; i < len; i++)
      sscanf(hex + 2 * i, "%2hhx", &table[i]);
    int got = nti_pyline(mem_read, table, len, atoi(f), atoi(l));
    n++;
    if (got != atoi(e) && bad++ < 10)
      fprintf(stderr, "FAIL: firstline %s lasti %s: line %d, expected %s\n", f, l, got, e);
  }
  printf("%ld cases, %ld wrong\n", n, bad);
  return bad || !n;
}
