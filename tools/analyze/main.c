/* main.c -- `nccltrace analyze PATH... [--json] [--job ID]`.
 * Exit status: 0 when the analysis ran on readable input; 2 when some input
 * was unreadable (one `nccltrace: FILE: reason` line each on stderr; the rest
 * is still analyzed and the verdict says evidence was missing) or on a usage
 * error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/analyze/analyze.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: nccltrace analyze PATH... [--json] [--job ID]\n"
          "  PATH     dumps (*.zst), ring files (*.ring) or directories (searched recursively)\n"
          "  --json   print one JSON object (docs/analyze.md)\n"
          "  --job ID analyze job ID instead of the most recent job found\n");
}

int ntr_analyze_main(int argc, char **argv) {
  int json = 0;
  const char *job_id = NULL;
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
  int lrc = nta_load(&job, paths, npaths, job_id);
  free(paths);
  for (int i = 0; i < job.nunreadable; i++)
    fprintf(stderr, "nccltrace: %s: %s\n", job.unreadable[i].path, job.unreadable[i].reason);
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
