/* expect.h -- the exchange tests' check: EXPECT(c) counts a failure in the
 * including file's `failures` and says where, and the test goes on.
 *
 * Thread-safety: call from the test's main thread only.  Not signal-safe. */
#ifndef NTX_TEST_EXPECT_H
#define NTX_TEST_EXPECT_H

#include <stdio.h>

static int failures;
#define EXPECT(c)                                                                  \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);             \
      failures++;                                                                  \
    }                                                                              \
  } while (0)

#endif
