/* env.c -- environment capture for the ring header (see env.h). */
#include "recorder/env.h"

#include <string.h>
#include <unistd.h>

extern char **environ;

/* What is recorded: one row per variable (env_vars.def). */
static const char *const recorded_vars[] = {
#define NTR_ENV(name) #name,
#include "recorder/env_vars.def"
};

/* Words that make a name look like it holds a secret (matched anywhere in
 * the name, case-insensitively): PASS covers PASSWORD, PASSWD, PASSPHRASE;
 * CRED covers CREDS and CREDENTIALS. */
static const char *const secret_words[] = {
    "PASS", "PWD", "SECRET", "TOKEN", "KEY", "CRED", "AUTH",
};

/* What a masked value is replaced with. */
#define NTR_ENV_MASK "***"

static size_t name_len(const char *s) {
  size_t n = 0;
  while (s[n] && s[n] != '=')
    n++;
  return n;
}

static char up(char c) { return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c; }

int ntr_env_is_secret(const char *name) {
  size_t n = name_len(name);
  for (size_t w = 0; w < sizeof secret_words / sizeof secret_words[0]; w++) {
    const char *word = secret_words[w];
    size_t wl = strlen(word);
    for (size_t i = 0; i + wl <= n; i++) {
      size_t j = 0;
      while (j < wl && up(name[i + j]) == word[j])
        j++;
      if (j == wl)
        return 1;
    }
  }
  return 0;
}

int ntr_env_is_recorded(const char *name) {
  size_t n = name_len(name);
  if (n == 0)
    return 0;
  for (size_t i = 0; i < sizeof recorded_vars / sizeof recorded_vars[0]; i++)
    if (strlen(recorded_vars[i]) == n && memcmp(name, recorded_vars[i], n) == 0)
      return 1;
  return 0;
}

uint32_t ntr_env_capture(char *buf, size_t cap) {
  size_t used = 0;
  if (!environ)
    return 0;
  for (char **e = environ; *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq || !ntr_env_is_recorded(*e))
      continue;
    size_t nl = (size_t)(eq - *e) + 1; /* NAME= */
    int mask = ntr_env_is_secret(*e);
    const char *val = mask ? NTR_ENV_MASK : eq + 1;
    size_t len = nl + strlen(val) + 1;
    if (len > cap - used)
      continue; /* whole entries only: a cut value would be a wrong value */
    memcpy(buf + used, *e, nl);
    memcpy(buf + used + nl, val, len - nl);
    used += len;
  }
  return (uint32_t)used;
}

const char *ntr_env_get(const char *name) {
  size_t n = strlen(name);
  if (!environ)
    return NULL;
  for (char **e = environ; *e; e++)
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
      return *e + n + 1;
  return NULL;
}

int32_t ntr_env_int(const char *name, int32_t dflt) {
  const char *v = ntr_env_get(name);
  if (!v || !*v)
    return dflt;
  int neg = 0;
  if (*v == '-') {
    neg = 1;
    v++;
  }
  int64_t x = 0;
  if (!*v)
    return dflt;
  for (; *v; v++) {
    if (*v < '0' || *v > '9')
      return dflt;
    x = x * 10 + (*v - '0');
    if (x > INT32_MAX)
      return dflt;
  }
  return (int32_t)(neg ? -x : x);
}

/* FNV-1a 64 of n bytes, then mixed (splitmix64's finalizer) so that the
 * sum of several stays a good hash. */
static uint64_t entry_hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

uint64_t ntr_env_settings_hash(void) {
  static const char prefix[] = "NCCLTRACE_", said[] = "NCCLTRACE_SETTINGS_SAID=", secret[] = "NCCLTRACE_SECRET=";
  uint64_t sum = 0;
  if (!environ)
    return 0;
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, prefix, sizeof prefix - 1) != 0 || strncmp(*e, said, sizeof said - 1) == 0)
      continue;
    size_t n = strlen(*e);
    if (strncmp(*e, secret, sizeof secret - 1) == 0) {
      /* its value never leaves the process, not even hashed */
      n = sizeof secret - 1;
      sum += entry_hash(*e, n) + (uint64_t)strlen(*e + n) * 0x9e3779b97f4a7c15ull;
      continue;
    }
    sum += entry_hash(*e, n);
  }
  return sum;
}

/* First variable of the list that is set and parses. */
static int32_t first_int(const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int32_t v = ntr_env_int(names[i], -1);
    if (v >= 0)
      return v;
  }
  return -1;
}

void ntr_env_launcher(int32_t *rank, int32_t *local_rank, int32_t *world_size,
                      int32_t *local_world_size) {
  static const char *const r[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                  "SLURM_PROCID"};
  static const char *const lr[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "PMI_LOCAL_RANK", "SLURM_LOCALID"};
  static const char *const ws[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                   "SLURM_NTASKS"};
  static const char *const lws[] = {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"};
  *rank = first_int(r, sizeof r / sizeof r[0]);
  *local_rank = first_int(lr, sizeof lr / sizeof lr[0]);
  *world_size = first_int(ws, sizeof ws / sizeof ws[0]);
  *local_world_size = first_int(lws, sizeof lws / sizeof lws[0]);
}

int ntr_env_speaks_for_job(void) {
  int32_t rank, local_rank, world, local_world;
  ntr_env_launcher(&rank, &local_rank, &world, &local_world);
  return rank == 0 || (rank < 0 && local_rank <= 0);
}

void ntr_env_job(char *out, size_t cap) {
  static const char *const launchers[] = {
      "NCCLTRACE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID",
      "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE",
  };
  if (!cap)
    return;
  out[0] = 0;
  for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
    const char *v = ntr_env_get(launchers[i]);
    if (!v || !*v || (i > 0 && !strcmp(v, "none")))
      continue;
    size_t n = 0;
    for (; v[n] && n < cap - 1; n++) {
      char ch = v[n];
      int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '.' || ch == '-' || ch == '_';
      out[n] = ok ? ch : '_';
    }
    out[n] = 0;
    return;
  }
}
