/* main.c -- `nccltrace analyze PATH... [--json] [--job ID]`.
 * Exit status: 0 when the analysis ran on readable input; 2 when some input
 * was unreadable (one `nccltrace: FILE: reason` line each on stderr; the rest
 * is still analyzed and the verdict says evidence was missing) or on a usage
 * error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"
#include "tools/ntt.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: nccltrace analyze PATH... [--json] [--job ID] [--max-memory SIZE]\n"
          "  PATH     dumps (*.zst), ring files (*.ring) or directories (searched recursively)\n"
          "  --json   print one JSON object (docs/analyze.md)\n"
          "  --job ID analyze job ID instead of the most recent job found\n"
          "  --max-memory SIZE  evidence held in memory at once (K, M, G, T suffixes; default a quarter\n"
          "           of physical memory): a file past it is refused with a line\n");
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

int nta_main(int argc, char **argv) {
  int json = 0;
  const char *job_id = NULL, *maxmem = NULL;
  char **paths = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*paths));
  int npaths = 0;
  if (!paths)
    return 2;
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
    } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      free(paths);
      return 0;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "nccltrace: analyze: unknown option %s\n", argv[i]);
      usage(stderr);
      free(paths);
      return 2;
    } else {
      paths[npaths++] = argv[i];
    }
  }
  if (npaths == 0) {
    usage(stderr);
    free(paths);
    return 2;
  }
  struct nta_job job;
  memset(&job, 0, sizeof(job));
  if (maxmem && parse_size(maxmem, &job.max_memory) != 0) {
    char shown[64];
    fprintf(stderr, "nccltrace: analyze: --max-memory wants a size such as 512M or 4G, not '%s'\n",
            ntt_esc(maxmem, shown, sizeof shown));
    free(paths);
    return 2;
  }
  int lrc = nta_load(&job, paths, npaths, job_id);
  free(paths);
  for (int i = 0; i < job.nunreadable; i++) {
    char p[sizeof job.unreadable[i].path], r[sizeof job.unreadable[i].reason];
    fprintf(stderr, "nccltrace: %s: %s\n", ntt_esc(job.unreadable[i].path, p, sizeof p),
            ntt_esc(job.unreadable[i].reason, r, sizeof r));
  }
  if (lrc != 0) {
    if (job.nunreadable == 0)
      fprintf(stderr, "nccltrace: analyze: no dumps or ring files found in the given paths\n");
    nta_job_free(&job);
    return 2;
  }
  if (nta_analyze(&job) != 0) {
    fprintf(stderr, "nccltrace: analyze: out of memory\n");
    nta_job_free(&job);
    return 2;
  }
  int rc = 0;
  if (json)
    rc = nta_report_json(&job, stdout) == 0 ? 0 : 2;
  else
    nta_report_text(&job, stdout);
  fflush(stdout);
  nta_phase("report written");
  if (job.nunreadable)
    rc = 2;
  nta_job_free(&job);
  nta_phase("freed");
  return rc;
}
