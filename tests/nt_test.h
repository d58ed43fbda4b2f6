/* nt_test.h -- the assertions of every C test (header-only).
 *
 * Thread-safety: every macro may be used from any thread; nt_failures is
 * counted atomically and each report is written with one fputs.
 * Signal-safety: none (reports use stdio).
 *
 * A test is a standalone program whose exit status is its result:
 *   NT_EXIT_PASS  0  every check held
 *   NT_EXIT_FAIL  1  a check failed (its report on stderr says where)
 *   NT_EXIT_SKIP 77  the test cannot run here; meson counts it as Skipped
 *
 * The assertions differ only in what a failed one does after reporting:
 *   NT_CHECK(cond[, fmt, ...])    check and continue: count the failure in
 *                                 nt_failures and go on; main ends with
 *                                 `return nt_exit_status();` (1 after any
 *                                 failed check, else 0)
 *   NT_ASSERT(cond[, fmt, ...])   fatal: exit(1) at once
 *   NT_ASSERT_EQ(a, b)            fatal: a == b as long long, both values
 *                                 reported
 *   NT_DIE(fmt, ...)              fatal, unconditional: exit(1)
 *   NT_RET_CHECK(cond[, fmt, ...])  fatal to the enclosing int function:
 *                                 `return 1`; its caller passes the 1 on
 *                                 (main, or a forked rank's exit status)
 *   NT_RET_FAIL(fmt, ...)         the same, unconditional
 * fmt is a string literal.  A report is one line on stderr:
 *   [WHO ]FAIL file:line: cond[: message]
 * where WHO is what NT_WHO(buf, cap) writes (snprintf-like, nothing by
 * default): a program with several processes defines it before including
 * this header to say which one failed (tests/emu_rank.h: "rank 3").
 */
#ifndef NT_TEST_H
#define NT_TEST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define NT_EXIT_PASS 0
#define NT_EXIT_FAIL 1
#define NT_EXIT_SKIP 77

#ifndef NT_WHO
#define NT_WHO(buf, cap) ((void)(buf), (void)(cap), 0)
#endif

__attribute__((unused)) static int nt_failures; /* failed NT_CHECKs so far (atomic) */

/* Report a failure at file:line; cond may be NULL, fmt starts with the
 * space the macros put before the caller's text (" " alone: no message). */
__attribute__((format(printf, 4, 5), unused)) static void nt_report(const char *file, int line,
                                                                   const char *cond,
                                                                   const char *fmt, ...) {
  char buf[1024];
  int n = NT_WHO(buf, sizeof buf);
  size_t at = n > 0 && (size_t)n < sizeof buf ? (size_t)n : 0;
  n = snprintf(buf + at, sizeof buf - at, "FAIL %s:%d:%s%s%s", file, line, cond ? " " : "",
               cond ? cond : "", cond && fmt[1] ? ":" : "");
  at += n > 0 ? (size_t)n : 0;
  if (fmt[1] && at < sizeof buf) {
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(buf + at, sizeof buf - at, fmt, ap);
    va_end(ap);
    at += n > 0 ? (size_t)n : 0;
  }
  if (at > sizeof buf - 2)
    at = sizeof buf - 2;
  buf[at] = '\n';
  buf[at + 1] = '\0';
  fputs(buf, stderr);
}

/* The exit status of a test whose checks are NT_CHECKs. */
__attribute__((unused)) static int nt_exit_status(void) {
  return __atomic_load_n(&nt_failures, __ATOMIC_RELAXED) ? NT_EXIT_FAIL : NT_EXIT_PASS;
}

#define NT_CHECK(cond, ...)                                                    \
  do {                                                                         \
    if (!(cond)) {                                                             \
      nt_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                   \
      __atomic_fetch_add(&nt_failures, 1, __ATOMIC_RELAXED);                   \
    }                                                                          \
  } while (0)

#define NT_ASSERT(cond, ...)                                                   \
  do {                                                                         \
    if (!(cond)) {                                                             \
      nt_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                   \
      exit(NT_EXIT_FAIL);                                                      \
    }                                                                          \
  } while (0)

#define NT_ASSERT_EQ(a, b)                                                     \
  do {                                                                         \
    long long a_ = (long long)(a), b_ = (long long)(b);                        \
    if (a_ != b_) {                                                            \
      nt_report(__FILE__, __LINE__, NULL, " %s == %lld, expected %s == %lld", #a, a_, #b, b_); \
      exit(NT_EXIT_FAIL);                                                      \
    }                                                                          \
  } while (0)

#define NT_DIE(...)                                                            \
  do {                                                                         \
    nt_report(__FILE__, __LINE__, NULL, " " __VA_ARGS__);                      \
    exit(NT_EXIT_FAIL);                                                        \
  } while (0)

#define NT_RET_CHECK(cond, ...)                                                \
  do {                                                                         \
    if (!(cond)) {                                                             \
      nt_report(__FILE__, __LINE__, #cond, " " __VA_ARGS__);                   \
      return NT_EXIT_FAIL;                                                     \
    }                                                                          \
  } while (0)

#define NT_RET_FAIL(...)                                                       \
  do {                                                                         \
    nt_report(__FILE__, __LINE__, NULL, " " __VA_ARGS__);                      \
    return NT_EXIT_FAIL;                                                       \
  } while (0)

#endif
