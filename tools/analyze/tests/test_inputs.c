/* test_inputs.c -- `nccltrace analyze` end to end on real files: dumps
 * written with the recorder's dump writer into nested directories, two jobs
 * mixed in one tree, an unreadable file.  Proves recursive discovery, job
 * grouping (most recent job by default, --job picks another, other jobs
 * listed), exit status 2 with the rest still analyzed, and the JSON shape.
 * Exit 0 pass, 1 fail.
 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recorder/dump.h"
#include "tools/analyze/tests/builder.h"

#define W 0x9f2c0123456789abull

static char root[256];

static void write_dump(const char *dir, struct ntt_image *img) {
  struct ntr_ring_header *h = &img->hdr;
  memcpy(h->magic, NTR_RING_MAGIC, 8);
  h->version = NTR_FORMAT_VERSION;
  h->header_size = sizeof(*h);
  h->record_size = sizeof(struct ntr_record);
  h->slot_count = 4096;
  h->comm_max = NTR_COMM_MAX;
  h->comm_recent = NTR_COMM_RECENT;
  h->stack_max = NTR_STACK_MAX;
  h->stack_depth = NTR_STACK_DEPTH;
  h->head = img->nrecs;
  h->comm_count = img->ncomms;
  char path[1024];
  int rc = ntr_dump_write_image(dir, h, img->comms, img->ncomms, NULL, 0, img->recs, img->nrecs, NULL, 0, &img->trigger,
                                path, sizeof(path));
  NT_CHECK(rc == 0, "dump write in %s: %d", dir, rc);
}

/* A job of two ranks; mismatch: rank 1's second AllReduce has another count. */
static void make_job(const char *dir, const char *id, double t0, int mismatch, int pid0) {
  struct nta_job job;
  tb_job(&job);
  for (int r = 0; r < 2; r++) {
    struct ntt_image *img = tb_proc(&job, r, 2, pid0 + r);
    snprintf(img->hdr.job_id, sizeof(img->hdr.job_id), "%s", id);
    tb_comm(img, W, r, 2);
    tb_ar(img, W, 64, t0, t0 + 1);
    if (mismatch) {
      tb_ar(img, W, r ? 128 : 64, t0 + 10, -1);
      tb_timeout(img, W, 2, t0 + 1010);
      tb_signal(img, SIGTERM, t0 + 1100);
    } else {
      tb_ar(img, W, 64, t0 + 10, t0 + 11);
      tb_exit(img, 0, t0 + 20);
    }
    write_dump(dir, img);
  }
  nta_job_free(&job);
}

static char text[65536]; /* the last captured stdout */

/* Run `analyze ARGS` with stdout captured; returns the exit status. */
static int analyze(json_t **out, int argc, char **argv) {
  char cap[300];
  snprintf(cap, sizeof(cap), "%s/out.json", root);
  fflush(stdout);
  int saved = dup(1);
  int fd = open(cap, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 1);
  close(fd);
  int rc = nta_main(argc, argv);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  json_error_t err;
  *out = json_load_file(cap, 0, &err);
  FILE *f = fopen(cap, "r");
  size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[n] = 0;
  if (f)
    fclose(f);
  unlink(cap);
  return rc;
}

static const char *vstr(json_t *doc, const char *key) {
  json_t *v = json_object_get(json_object_get(doc, "verdict"), key);
  return json_is_string(v) ? json_string_value(v) : "";
}

int main(void) {
  const char *tmpdir = getenv("TMPDIR");
  snprintf(root, sizeof(root), "%s/nta-inputs-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (!mkdtemp(root))
    return 1;
  char nested[300], garbage[300];
  snprintf(nested, sizeof(nested), "%s/a", root);
  mkdir(nested, 0700);
  snprintf(nested, sizeof(nested), "%s/a/b", root);
  mkdir(nested, 0700);
  make_job(root, "old-job", 0, 0, 100);
  make_job(nested, "new-job", 60000, 1, 200);
  snprintf(garbage, sizeof(garbage), "%s/garbage.zst", root);
  FILE *g = fopen(garbage, "w");
  fputs("this is not a dump", g);
  fclose(g);

  json_t *doc = NULL;
  char *a1[] = {"analyze", "--json", root, NULL};
  int rc = analyze(&doc, 3, a1);
  NT_CHECK(rc == 2, "an unreadable input makes the status 2, got %d", rc);
  NT_CHECK(doc != NULL, "exactly one JSON object on stdout");
  if (doc) {
    NT_CHECK(!strcmp(vstr(doc, "class"), "collective_mismatch"), "most recent job analyzed: %s", vstr(doc, "class"));
    NT_CHECK(!strcmp(vstr(doc, "field"), "count"), "field %s", vstr(doc, "field"));
    json_t *in = json_object_get(doc, "inputs");
    NT_CHECK(!strcmp(json_string_value(json_object_get(in, "job")), "new-job"), "job");
    NT_CHECK(json_array_size(json_object_get(in, "other_jobs")) == 1 &&
                 !strcmp(json_string_value(json_array_get(json_object_get(in, "other_jobs"), 0)), "old-job"),
             "other jobs listed");
    NT_CHECK(json_array_size(json_object_get(in, "unreadable")) == 1, "one unreadable file");
    NT_CHECK(json_integer_value(json_object_get(in, "files")) == 5, "5 files seen");
    NT_CHECK(json_array_size(json_object_get(doc, "ranks")) == 2, "2 processes of the job");
    NT_CHECK(strstr(vstr(doc, "summary"), "evidence incomplete") != NULL, "summary says evidence is missing");
    json_decref(doc);
  }
  char *a2[] = {"analyze", "--json", "--job", "old-job", root, NULL};
  rc = analyze(&doc, 5, a2);
  NT_CHECK(doc && !strcmp(vstr(doc, "class"), "healthy"), "--job old-job is healthy: %s", doc ? vstr(doc, "class") : "");
  json_decref(doc);
  char *a3[] = {"analyze", "--json", nested, NULL};
  rc = analyze(&doc, 3, a3);
  /* 1: a fault found (new-job's mismatch), every input read (2) of one job (3) */
  NT_CHECK(rc == 1, "readable inputs only, a mismatch: status 1, got %d", rc);
  json_decref(doc);
  char *a4[] = {"analyze", "/nonexistent/nccltrace", NULL};
  rc = analyze(&doc, 2, a4);
  NT_CHECK(rc == 2, "missing path: status 2, got %d", rc);
  json_decref(doc);
  char *a5[] = {"analyze", root, NULL};
  rc = analyze(&doc, 2, a5); /* text mode: not JSON, must not crash */
  NT_CHECK(rc == 2 && doc == NULL, "text report is not JSON, status %d", rc);
  /* Verdict sentence first, then the table, the chain and the next step. */
  NT_CHECK(strncmp(text, "collective mismatch on comm 9f2c0123456789ab seq 2: ", 52) == 0, "first line: %.120s",
           text);
  NT_CHECK(strstr(text, "  rank  host") && strstr(text, "last enq") && strstr(text, "blocked in"), "table");
  NT_CHECK(strstr(text, "evidence (oldest first):") && strstr(text, "\nnext: "), "chain and next step");
  NT_CHECK(strstr(text, "other jobs: old-job") != NULL, "other jobs named");
  json_decref(doc);

  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", root);
  return nt_exit_status();
}
