/* config.c -- read every NCCLTRACE_* variable once (interpose/config.h).
 *
 * Thread-safety: nti_config_load runs in the library constructor before any
 * thread of ours exists (in `nccltrace run`: its one thread); nti_cfg is
 * read-only afterwards.  nti_config_say_kept runs under the interposer's
 * activation lock (init.c), once.
 * Signal-safety: not signal-safe (getenv, snprintf); never called from a
 * handler.
 *
 * Said once per job: every process of a job reads the same settings, so
 * what is wrong with them is said by one of them (docs/user-guide.md,
 * "Settings"):
 *  - under `nccltrace run`, run itself says it before CMD starts and sets
 *    NCCLTRACE_SETTINGS_SAID to a hash of the settings it read
 *    (recorder/env.h, ntr_env_settings_hash); a process whose NCCLTRACE_*
 *    variables still hash to that stays quiet;
 *  - otherwise, when the launcher rank is known (recorder/env.c,
 *    ntr_env_launcher: RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
 *    SLURM_PROCID; else the local rank, once per host) only rank 0 says it;
 *  - a process of unknown rank keeps it until its first NCCL call
 *    (nti_config_say_kept): a shell, date or a launcher that never calls
 *    NCCL says nothing.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interpose/config.h"
#include "recorder/diag.h"
#include "recorder/env.h"
#include "recorder/format.h"

struct nti_config nti_cfg;

/* What becomes of a line about the settings (see the top). */
enum { CFG_SAY, CFG_QUIET, CFG_KEEP };
static int cfg_when;
/* CFG_KEEP: the lines, each with its newline, said at the first NCCL call;
 * a line that does not fit is dropped (the settings have at most a line
 * per variable). */
static struct {
  char text[4096];
  size_t len;
} kept;

static void __attribute__((format(printf, 1, 2))) cfg_say(const char *fmt, ...) {
  if (cfg_when == CFG_QUIET)
    return;
  va_list ap;
  va_start(ap, fmt);
  if (cfg_when == CFG_SAY) {
    ntr_diag_vsay("nccltrace: ", fmt, ap);
  } else {
    char line[512];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n > 0 && (size_t)n < sizeof line && kept.len + (size_t)n + 1 < sizeof kept.text) {
      memcpy(kept.text + kept.len, line, (size_t)n);
      kept.len += (size_t)n;
      kept.text[kept.len++] = '\n';
    }
  }
  va_end(ap);
}

void nti_config_say_kept(void) {
  size_t at = 0;
  while (at < kept.len) {
    const char *nl = memchr(kept.text + at, '\n', kept.len - at);
    size_t n = nl ? (size_t)(nl - (kept.text + at)) : kept.len - at;
    ntr_diag_say("nccltrace: ", "%.*s", (int)n, kept.text + at);
    at += n + 1;
  }
  kept.len = 0;
}

/* A bad value is reported once (each variable is read once) and the
 * default kept. */
static void bad(const char *name, const char *val, const char *dflt) {
  cfg_say("%s=\"%s\" is not valid; using %s", name, val, dflt);
}

/* The bools' own line: what they take, and what the value is taken as. */
static void bad_bool(const char *name, const char *val, const char *dflt) {
  cfg_say("%s=\"%s\" is not valid (it takes 1/yes/true/on or 0/no/false/off); using %s", name, val, dflt);
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : NULL;
}

/* The one bool parser: 1/yes/true/on and 0/no/false/off, any case.  Unset
 * or empty: dflt.  Anything else is said, naming dflt_said (NULL: dflt as a
 * digit), and dflt used.  dflt -1 leaves the choice to the reader. */
static int parse_bool(const char *name, int dflt, const char *dflt_said) {
  const char *v = env(name);
  if (!v)
    return dflt;
  if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
    return 1;
  if (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
    return 0;
  bad_bool(name, v, dflt_said ? dflt_said : dflt ? "1" : "0");
  return dflt;
}

static double parse_seconds(const char *name, double dflt) {
  const char *v = env(name);
  if (!v)
    return dflt;
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d > 0) || d > 1e9) {
    char buf[32];
    snprintf(buf, sizeof buf, "%g", dflt);
    bad(name, v, buf);
    return dflt;
  }
  return d;
}

/* The one integer parser: base 10 or 8, within [lo, hi]. */
static long parse_long(const char *name, long dflt, long lo, long hi, int base) {
  const char *v = env(name);
  if (!v)
    return dflt;
  char *end;
  long l = strtol(v, &end, base);
  if (end == v || *end || l < lo || l > hi) {
    char buf[32];
    snprintf(buf, sizeof buf, base == 8 ? "0%lo" : "%ld", dflt);
    bad(name, v, buf);
    return dflt;
  }
  return l;
}

static void copy_str(char *dst, size_t cap, const char *name, const char *dflt) {
  const char *v = env(name);
  if (v && strlen(v) >= cap) {
    cfg_say("%s is longer than %zu bytes; using the default", name, cap - 1);
    v = NULL;
  }
  snprintf(dst, cap, "%s", v ? v : dflt);
}

static void load_dirs(void) {
  const char *d = env("NCCLTRACE_DIR");
  if (d && strlen(d) < sizeof nti_cfg.dir) {
    snprintf(nti_cfg.dir, sizeof nti_cfg.dir, "%s", d);
  } else {
    char cwd[900];
    if (d)
      cfg_say("NCCLTRACE_DIR is too long; using ./nccltrace-dumps");
    /* Absolute, so a later chdir() of the application does not move the
     * dumps. */
    if (getcwd(cwd, sizeof cwd))
      snprintf(nti_cfg.dir, sizeof nti_cfg.dir, "%s/nccltrace-dumps", cwd);
    else
      snprintf(nti_cfg.dir, sizeof nti_cfg.dir, "nccltrace-dumps");
  }
  const char *r = env("NCCLTRACE_RING_DIR");
  if (r && strlen(r) < sizeof nti_cfg.ring_dir) {
    snprintf(nti_cfg.ring_dir, sizeof nti_cfg.ring_dir, "%s", r);
  } else {
    struct stat st;
    if (r)
      cfg_say("NCCLTRACE_RING_DIR is too long; using the default");
    /* A local tmpfs survives the process but not the machine; /tmp when
     * the container has no /dev/shm. */
    const char *base = (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) ? "/dev/shm" : "/tmp";
    snprintf(nti_cfg.ring_dir, sizeof nti_cfg.ring_dir, "%s/nccltrace-%u", base, (unsigned)getuid());
  }
}

static void load_job(void) {
  ntr_env_job(nti_cfg.job, sizeof nti_cfg.job);
}

static void load_check(void) {
  const char *v = env("NCCLTRACE_CHECK");
  nti_cfg.check_explicit = v != NULL;
  /* Without an explicit mode the exchange module turns async on when it
   * finds a coordinator (ntx_start); the value here is the request. */
  nti_cfg.check = NTI_CHECK_ASYNC;
  if (!v)
    return;
  if (!strcasecmp(v, "off") || !strcmp(v, "0"))
    nti_cfg.check = NTI_CHECK_OFF;
  else if (!strcasecmp(v, "async"))
    nti_cfg.check = NTI_CHECK_ASYNC;
  else if (!strcasecmp(v, "strict"))
    nti_cfg.check = NTI_CHECK_STRICT;
  else {
    bad("NCCLTRACE_CHECK", v, "async (off without a coordinator)");
    nti_cfg.check_explicit = 0;
  }
}

static void load_env_check(void) {
  const char *v = env("NCCLTRACE_ENV_CHECK");
  nti_cfg.env_check = NTI_ENV_CHECK_WARN;
  if (!v)
    return;
  if (!strcasecmp(v, "off") || !strcmp(v, "0"))
    nti_cfg.env_check = NTI_ENV_CHECK_OFF;
  else if (!strcasecmp(v, "warn"))
    nti_cfg.env_check = NTI_ENV_CHECK_WARN;
  else if (!strcasecmp(v, "abort"))
    nti_cfg.env_check = NTI_ENV_CHECK_ABORT;
  else
    bad("NCCLTRACE_ENV_CHECK", v, "warn");
}

/* Why NCCLTRACE_COORD is not host:port or [v6]:port with a port from 1 to
 * 65535 (what the exchange's discovery takes), NULL when it is: checked at
 * load so that a bad value is said at once, not when the first connection
 * would have been tried. */
static const char *coord_problem(const char *v) {
  const char *colon;
  if (v[0] == '[') {
    const char *close = strchr(v, ']');
    if (!close)
      return "no closing ']'";
    if (close == v + 1)
      return "no host";
    if (close[1] != ':')
      return "no \":port\" after ']'";
    colon = close + 1;
  } else {
    colon = strrchr(v, ':');
    if (!colon)
      return "no \":port\"";
    if (colon == v)
      return "no host before ':'";
  }
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || port < 1 || port > 65535)
    return "the port is not a number from 1 to 65535";
  return NULL;
}

static void load_coord(void) {
  copy_str(nti_cfg.coord, sizeof nti_cfg.coord, "NCCLTRACE_COORD", "");
  const char *why = nti_cfg.coord[0] ? coord_problem(nti_cfg.coord) : NULL;
  if (why) {
    cfg_say("NCCLTRACE_COORD=\"%s\" is not valid (%s; it wants host:port); using discovery from "
            "MASTER_ADDR/MASTER_PORT instead", nti_cfg.coord, why);
    nti_cfg.coord[0] = '\0';
  }
}

/* NCCLTRACE_METRICS: ADDR:PORT as NCCLTRACE_COORD takes it, or a port
 * alone for loopback (an endpoint is never opened beyond the host unless
 * the address says so). */
static void load_metrics(void) {
  char v[sizeof nti_cfg.metrics];
  copy_str(v, sizeof v, "NCCLTRACE_METRICS", "");
  if (!v[0])
    return;
  if (v[strspn(v, "0123456789")] == '\0' && strlen(v) < 6)
    snprintf(nti_cfg.metrics, sizeof nti_cfg.metrics, "127.0.0.1:%s", v);
  else
    snprintf(nti_cfg.metrics, sizeof nti_cfg.metrics, "%s", v);
  const char *why = coord_problem(nti_cfg.metrics);
  if (why) {
    cfg_say("NCCLTRACE_METRICS=\"%s\" is not valid (%s; it wants ADDR:PORT or PORT); no metrics endpoint", v, why);
    nti_cfg.metrics[0] = '\0';
  }
}

/* 1 when `nccltrace run` said what is wrong with exactly these settings. */
static int said_by_run(void) {
  const char *v = env(NTI_SETTINGS_SAID);
  char mine[32];
  snprintf(mine, sizeof mine, "%016" PRIx64, ntr_env_settings_hash());
  return v && !strcmp(v, mine);
}

void nti_config_load_as(int who) {
  memset(&nti_cfg, 0, sizeof nti_cfg);
  kept.len = 0;
  int32_t rank, local_rank, world, local_world;
  ntr_env_launcher(&rank, &local_rank, &world, &local_world);
  if (!ntr_env_speaks_for_job())
    cfg_when = CFG_QUIET; /* the job's rank 0 (its host's local rank 0) says it */
  else if (said_by_run())
    cfg_when = CFG_QUIET; /* run (an outer run, for a run) said it */
  else if (who == NTI_CONFIG_TRACER && rank < 0 && local_rank < 0)
    cfg_when = CFG_KEEP; /* said at the first NCCL call, if one comes */
  else
    cfg_when = CFG_SAY;
  nti_cfg.disable = parse_bool("NCCLTRACE_DISABLE", 0, "0: tracing stays on");
  if (nti_cfg.disable)
    return; /* pass-through: nothing else is consulted */
  load_dirs();
  load_job();
  long slots = parse_long("NCCLTRACE_RING", NTR_RING_DEFAULT_SLOTS, 64, 1L << 24, 10);
  uint32_t p2 = 64;
  while (p2 < (uint64_t)slots)
    p2 <<= 1; /* rounded up to a power of two, as the ring needs */
  nti_cfg.ring_slots = p2;
  nti_cfg.timeout_s = parse_seconds("NCCLTRACE_TIMEOUT", 300);
  nti_cfg.max_dumps = (uint32_t)parse_long("NCCLTRACE_MAX_DUMPS", 100, 1, 1L << 20, 10);
  nti_cfg.dir_max_dumps = (uint32_t)parse_long("NCCLTRACE_DIR_MAX_DUMPS", 5000, 0, 1L << 24, 10);
  load_check();
  load_coord();
  nti_cfg.strict_timeout_s = parse_seconds("NCCLTRACE_STRICT_TIMEOUT", 10);
  nti_cfg.skew_s = parse_seconds("NCCLTRACE_SKEW_S", 30);
  load_env_check();
  copy_str(nti_cfg.secret, sizeof nti_cfg.secret, "NCCLTRACE_SECRET", "");
  nti_cfg.stacks = parse_bool("NCCLTRACE_STACKS", 0, NULL);
  nti_cfg.pystacks = parse_bool("NCCLTRACE_PYSTACKS", 1, NULL);
  copy_str(nti_cfg.real_nccl, sizeof nti_cfg.real_nccl, "NCCLTRACE_REAL_NCCL", "");
  nti_cfg.dump_mode = (unsigned)parse_long("NCCLTRACE_DUMP_MODE", 0600, 0, 0777, 8);
  nti_cfg.coord_port_offset = (int)parse_long("NCCLTRACE_COORD_PORT_OFFSET", 17, -65535, 65535, 10);
  nti_cfg.verbose = (int)parse_long("NCCLTRACE_VERBOSE", 0, 0, 9, 10);
  nti_cfg.straggler_ms = (double)parse_long("NCCLTRACE_STRAGGLER_MS", 10, 0, 3600000, 10);
  nti_cfg.straggler_window = (uint32_t)parse_long("NCCLTRACE_STRAGGLER_WINDOW", 200, 20, 4096, 10);
  nti_cfg.start_every = (uint32_t)parse_long("NCCLTRACE_START_EVERY", 1, 0, 1 << 20, 10);
  nti_cfg.agg = parse_bool("NCCLTRACE_AGG", -1, "the default (1 when WORLD_SIZE > LOCAL_WORLD_SIZE)");
  nti_cfg.strict_shm = parse_bool("NCCLTRACE_STRICT_SHM", -1, "the default (1 when WORLD_SIZE = LOCAL_WORLD_SIZE)");
  copy_str(nti_cfg.agg_host, sizeof nti_cfg.agg_host, "NCCLTRACE_AGG_HOST", "");
  load_metrics();
}

void nti_config_load(void) { nti_config_load_as(NTI_CONFIG_TRACER); }
