/* main.c -- `nccltrace analyze PATH... [--json] [--job ID] [--attempt N]
 * [--max-memory SIZE] [--allow-owner USER] [--any-owner]`.
 * Exit status (exit_status below; docs/analyze.md "Exit status"): 0 healthy,
 * 1 a fault found, 2 input unreadable or left out or a usage error, 3 other
 * jobs in the inputs and none chosen with --job; the first that holds of 2,
 * 3, 1, 0.  Other attempts and duplicate ranks do not change it.
 *
 * Thread-safety: one call at a time (nta_load starts and joins its own
 * threads).  Not signal-safe.
 */
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/bundle.h"
#include "tools/ntt.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: nccltrace analyze PATH... [--json] [--job ID] [--attempt N] [--max-memory SIZE]\n"
          "                         [--allow-owner USER]... [--any-owner]\n"
          "  PATH     dumps (*.zst), ring files (*.ring), PyTorch Flight Recorder dumps (pickle or\n"
          "           JSON, named <prefix><rank>), bundles (nccltrace bundle) or directories\n"
          "           (searched recursively)\n"
          "  --json   print one JSON object (docs/analyze.md)\n"
          "  --job ID analyze job ID instead of the most recent job found\n"
          "  --attempt N  analyze restart attempt N of the job (TORCHELASTIC_RESTART_COUNT,\n"
          "           SLURM_RESTART_COUNT) instead of the latest\n"
          "  --max-memory SIZE  evidence held in memory at once (K, M, G, T suffixes; default a quarter\n"
          "           of physical memory): a file past it is refused with a line\n"
          "  --allow-owner USER  also read files of USER (a name or uid); by default only yours and\n"
          "           those of the named directory's owner are read, the others left out with a line\n"
          "  --any-owner  read files of every owner\n"
          "Exit status: 0 healthy; 1 a fault found (any verdict class but healthy); 2 some input\n"
          "  unreadable or left out, or bad usage; 3 other jobs in the inputs, none chosen with --job\n"
          "  (the most recent was analyzed).  When several hold: 2, then 3, then 1.\n");
}

/* Trouble before answers, as diff and grep do: a verdict on incomplete
 * evidence (2) or on a job the caller did not choose (3) is not one a
 * script should act on alone; the JSON says every fact. */
static int exit_status(const struct nta_job *job) {
  if (job->nunreadable || job->nleft_out)
    return NTT_EXIT_INPUT;
  if (job->nother_jobs && !job->job_chosen)
    return NTT_EXIT_OTHER_JOBS;
  return job->v.cls == NTA_HEALTHY ? NTT_EXIT_OK : NTT_EXIT_FAIL;
}

/* "512M", "2G", "1048576": bytes (suffixes are powers of 1024).
 * @return 0, or -1 when it does not parse or is 0. */
static int parse_size(const char *s, uint64_t *out) {
  char *end;
  if (!s || !*s || *s == '-')
    return -1;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s)
    return -1;
  int shift = 0;
  switch (*end) {
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  case '\0': break;
  default: return -1;
  }
  if (shift && *++end == 'i')
    end++;
  if ((*end == 'B' || *end == 'b') && shift)
    end++;
  if (*end || v == 0 || v > (UINT64_MAX >> shift))
    return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

/* "1001" or a user name: the uid.  @return 0, or -1. */
static int parse_owner(const char *s, long *uid) {
  char *end;
  if (!s || !*s)
    return -1;
  long v = strtol(s, &end, 10);
  if (!*end && v >= 0 && s[0] != '-') {
    *uid = v;
    return 0;
  }
  struct passwd *pw = getpwnam(s);
  if (!pw)
    return -1;
  *uid = (long)pw->pw_uid;
  return 0;
}

static int parse_attempt(const char *s, int *out) {
  char *end;
  if (!s || !*s || *s == '-')
    return -1;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > 100000000)
    return -1;
  *out = (int)v;
  return 0;
}

int nta_main(int argc, char **argv) {
  int json = 0;
  const char *job_id = NULL, *maxmem = NULL, *attempt = NULL;
  char **paths = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*paths));
  char **owners = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*owners));
  int npaths = 0, nowners = 0, any_owner = 0;
  if (!paths || !owners) {
    free(paths);
    free(owners);
    return NTT_EXIT_INPUT;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc) {
      job_id = argv[++i];
    } else if (strncmp(argv[i], "--job=", 6) == 0) {
      job_id = argv[i] + 6;
    } else if (strcmp(argv[i], "--max-memory") == 0 && i + 1 < argc) {
      maxmem = argv[++i];
    } else if (strncmp(argv[i], "--max-memory=", 13) == 0) {
      maxmem = argv[i] + 13;
    } else if (strcmp(argv[i], "--attempt") == 0 && i + 1 < argc) {
      attempt = argv[++i];
    } else if (strncmp(argv[i], "--attempt=", 10) == 0) {
      attempt = argv[i] + 10;
    } else if (strcmp(argv[i], "--allow-owner") == 0 && i + 1 < argc) {
      owners[nowners++] = argv[++i];
    } else if (strncmp(argv[i], "--allow-owner=", 14) == 0) {
      owners[nowners++] = argv[i] + 14;
    } else if (strcmp(argv[i], "--any-owner") == 0) {
      any_owner = 1;
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      free(paths);
      free(owners);
      return NTT_EXIT_OK;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "nccltrace: analyze: unknown option %s\n", argv[i]);
      usage(stderr);
      free(paths);
      free(owners);
      return NTT_EXIT_INPUT;
    } else {
      paths[npaths++] = argv[i];
    }
  }
  if (npaths == 0) {
    usage(stderr);
    free(paths);
    free(owners);
    return NTT_EXIT_INPUT;
  }
  struct nta_job job;
  memset(&job, 0, sizeof(job));
  char shown[64];
  const char *bad = NULL;
  if (maxmem && parse_size(maxmem, &job.max_memory) != 0) {
    fprintf(stderr, "nccltrace: analyze: --max-memory wants a size such as 512M or 4G, not '%s'\n",
            ntt_esc(maxmem, shown, sizeof shown));
    bad = maxmem;
  } else if (attempt && parse_attempt(attempt, &job.attempt_wanted) != 0) {
    fprintf(stderr, "nccltrace: analyze: --attempt wants a restart count such as 0 or 1, not '%s'\n",
            ntt_esc(attempt, shown, sizeof shown));
    bad = attempt;
  }
  job.want_attempt = attempt != NULL;
  job.any_owner = any_owner;
  job.allow_uids = calloc((size_t)(nowners ? nowners : 1), sizeof(*job.allow_uids));
  for (int i = 0; !bad && job.allow_uids && i < nowners; i++) {
    if (parse_owner(owners[i], &job.allow_uids[job.nallow_uids]) == 0) {
      job.nallow_uids++;
      continue;
    }
    fprintf(stderr, "nccltrace: analyze: --allow-owner wants a user name or uid, not '%s'\n",
            ntt_esc(owners[i], shown, sizeof shown));
    bad = owners[i];
  }
  free(owners);
  if (bad || !job.allow_uids) {
    free(paths);
    nta_job_free(&job);
    return NTT_EXIT_INPUT;
  }
  /* a bundle (nccltrace bundle) stands for the directory it extracts to */
  char **inputs = NULL;
  int ninputs = ntb_open_inputs("analyze", paths, npaths, 0, &inputs);
  free(paths);
  if (ninputs < 0) {
    nta_job_free(&job);
    return NTT_EXIT_INPUT;
  }
  int lrc = nta_load(&job, inputs, ninputs, job_id);
  ntt_paths_free(inputs, ninputs);
  for (int i = 0; i < job.nleft_out; i++) {
    char p[sizeof job.left_out[i].path], r[sizeof job.left_out[i].reason];
    fprintf(stderr, "nccltrace: %s: left out: %s\n", ntt_esc(job.left_out[i].path, p, sizeof p),
            ntt_esc(job.left_out[i].reason, r, sizeof r));
  }
  for (int i = 0; i < job.nunreadable; i++) {
    char p[sizeof job.unreadable[i].path], r[sizeof job.unreadable[i].reason];
    fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(job.unreadable[i].path, p, sizeof p),
            ntt_esc(job.unreadable[i].reason, r, sizeof r));
  }
  if (lrc != 0) {
    if (job.nunreadable == 0 && job.nleft_out)
      fprintf(stderr, "nccltrace: analyze: every input was left out (other owners: --allow-owner or --any-owner)\n");
    else if (job.nunreadable == 0)
      fprintf(stderr, "nccltrace: analyze: no dumps or ring files found in the given paths\n");
    else
      fprintf(stderr, "nccltrace: analyze: nothing to analyze: %d input%s unreadable (above), no ring, dump or "
              "exit status read\n", job.nunreadable, job.nunreadable > 1 ? "s" : "");
    nta_job_free(&job);
    return NTT_EXIT_INPUT;
  }
  if (nta_analyze(&job) != 0) {
    fprintf(stderr, "nccltrace: analyze: out of memory\n");
    nta_job_free(&job);
    return NTT_EXIT_INPUT;
  }
  int rc = exit_status(&job);
  if (json && nta_report_json(&job, stdout) != 0)
    rc = NTT_EXIT_INPUT;
  else if (!json)
    nta_report_text(&job, stdout);
  fflush(stdout);
  nta_phase("report written");
  nta_job_free(&job);
  nta_phase("freed");
  return rc;
}
