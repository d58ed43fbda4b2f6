/* harness.c -- stand-ins for what the interposer provides to the exchange
 * client in libnccltrace.so (the parsed configuration and the dump
 * trigger), so the client can be tested in plain processes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/trigger.h"
#include "tests/exchange/harness.h"

struct nti_config nti_cfg;
int harness_dumps;
int harness_last_dump_kind;

void nti_start_boost(unsigned long long comm_id) { (void)comm_id; }

int nti_dump_now(int trigger_kind, int signo, int exit_code, const char *reason) {
  (void)signo;
  (void)exit_code;
  /* The kind first: a test that sees the count (acquire) sees the kind. */
  __atomic_store_n(&harness_last_dump_kind, trigger_kind, __ATOMIC_RELAXED);
  __atomic_add_fetch(&harness_dumps, 1, __ATOMIC_RELEASE);
  char b[256];
  int n = snprintf(b, sizeof b, "harness: dump trigger %d: %.95s\n", trigger_kind, reason ? reason : "");
  ssize_t w = write(2, b, (size_t)(n < (int)sizeof b ? n : (int)sizeof b - 1));
  (void)w;
  return 0;
}
