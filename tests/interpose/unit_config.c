/* unit_config.c -- the configuration's one bool parser on the exchange's
 * knobs (interpose/config.c), without preloading anything.
 *
 * Proves: NCCLTRACE_AGG and NCCLTRACE_STRICT_SHM take what every other
 * NCCLTRACE_* bool takes (1/yes/true/on, 0/no/false/off, any case), say
 * nothing for those, leave the choice to the exchange (-1) when unset or
 * empty, and for a value that is no bool say exactly one `nccltrace:` line
 * naming the variable and the value, and keep -1; NCCLTRACE_AGG_HOST is
 * copied as given; NCCLTRACE_DISABLE=2 is said with what it is taken as;
 * a process of unknown rank says nothing at load, and says it at its
 * first NCCL call (nti_config_say_kept).
 * Exit: 0 pass, 1 fail.
 * Thread-safety: one thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/config.h"
#include "interpose/nti.h"
#include "tests/nt_test.h"

/* The library's globals live in init.c, which is not linked here. */
NTI_TLS struct nti_tls nti_tls;

static FILE *said; /* our stderr while the configuration loads */

/* Load the configuration with name=value (NULL: unset); what it said
 * goes to out. */
static void load(const char *name, const char *value, char *out, size_t cap) {
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
  rewind(said);
  if (ftruncate(fileno(said), 0) != 0)
    abort();
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(said), 2);
  nti_config_load();
  /* of unknown rank: kept until the first NCCL call, which this is */
  nti_config_say_kept();
  dup2(saved, 2);
  close(saved);
  rewind(said);
  size_t n = fread(out, 1, cap - 1, said);
  out[n] = '\0';
  unsetenv(name);
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

static int bool_knob(const char *name, const int *field) {
  static const char *const on[] = {"1", "yes", "true", "on", "YES", "True", "ON"};
  static const char *const off[] = {"0", "no", "false", "off", "No", "FALSE", "Off"};
  char out[2048];
  for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
    load(name, on[i], out, sizeof out);
    if (*field != 1 || out[0])
      NT_RET_FAIL("%s=%s: %d (want 1), said \"%s\"", name, on[i], *field, out);
  }
  for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
    load(name, off[i], out, sizeof out);
    if (*field != 0 || out[0])
      NT_RET_FAIL("%s=%s: %d (want 0), said \"%s\"", name, off[i], *field, out);
  }
  load(name, NULL, out, sizeof out);
  if (*field != -1 || out[0])
    NT_RET_FAIL("%s unset: %d (want -1), said \"%s\"", name, *field, out);
  load(name, "", out, sizeof out);
  if (*field != -1 || out[0])
    NT_RET_FAIL("%s empty: %d (want -1), said \"%s\"", name, *field, out);
  load(name, "bogus", out, sizeof out);
  char want[128];
  snprintf(want, sizeof want, "nccltrace: %s=\"bogus\" is not valid", name);
  if (*field != -1 || lines(out) != 1 || strncmp(out, want, strlen(want)) != 0)
    NT_RET_FAIL("%s=bogus: %d (want -1), said \"%s\" (want one line starting \"%s\")", name, *field, out, want);
  return 0;
}

int main(void) {
  /* A process of unknown launcher rank says what is wrong itself. */
  static const char *const ranks[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                                      "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_LOCAL_RANK", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++)
    unsetenv(ranks[i]);
  unsetenv("NCCLTRACE_DISABLE");
  said = tmpfile();
  if (!said)
    NT_RET_FAIL("tmpfile");
  if (bool_knob("NCCLTRACE_AGG", &nti_cfg.agg) || bool_knob("NCCLTRACE_STRICT_SHM", &nti_cfg.strict_shm))
    return 1;
  char out[2048];
  load("NCCLTRACE_AGG_HOST", "hostA", out, sizeof out);
  if (strcmp(nti_cfg.agg_host, "hostA") != 0 || out[0])
    NT_RET_FAIL("NCCLTRACE_AGG_HOST=hostA: \"%s\", said \"%s\"", nti_cfg.agg_host, out);
  /* DISABLE is a bool like the others: "2" is said, once, with what it
   * takes and what it is taken as, and tracing stays on */
  load("NCCLTRACE_DISABLE", "2", out, sizeof out);
  if (nti_cfg.disable != 0 || lines(out) != 1 ||
      !strstr(out, "NCCLTRACE_DISABLE=\"2\" is not valid (it takes 1/yes/true/on or 0/no/false/off); using 0: "
                   "tracing stays on"))
    NT_RET_FAIL("NCCLTRACE_DISABLE=2: disable %d, said \"%s\"", nti_cfg.disable, out);
  /* Kept, not said, until the first NCCL call: a shell that never makes
   * one says nothing. */
  setenv("NCCLTRACE_TIMEOUT", "bogus", 1);
  rewind(said);
  fflush(stderr);
  int saved = dup(2);
  dup2(fileno(said), 2);
  nti_config_load();
  fflush(stderr);
  long at_load = ftell(said);
  nti_config_say_kept(); /* its first NCCL call */
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  unsetenv("NCCLTRACE_TIMEOUT");
  rewind(said);
  size_t n = fread(out, 1, sizeof out - 1, said);
  out[n] = '\0';
  if (at_load != 0 || !strstr(out, "nccltrace: NCCLTRACE_TIMEOUT=\"bogus\" is not valid; using 300\n"))
    NT_RET_FAIL("unknown rank: %ld bytes said at load (want 0), then \"%s\"", at_load, out);
  load("NCCLTRACE_AGG_HOST", NULL, out, sizeof out);
  if (nti_cfg.agg_host[0])
    NT_RET_FAIL("NCCLTRACE_AGG_HOST unset: \"%s\"", nti_cfg.agg_host);
  printf("ok\n");
  return 0;
}
