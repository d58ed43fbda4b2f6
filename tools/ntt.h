/* ntt.h -- internals shared by the `nccltrace` subcommands: formatting of
 * records for humans, the JSON form of an image (docs/decode-json.md), input
 * discovery (files or directories of rings and dumps), and the subcommand
 * entry points.
 *
 * Thread-safety: the tools are single-threaded.  The formatting helpers write
 * into caller buffers and are reentrant; the JSON builders allocate (jansson).
 * Nothing here is signal-safe.
 */
#ifndef NTT_H
#define NTT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "tools/reader.h"

/* Exit statuses shared by every subcommand: the one table (nccltrace.1
 * "EXIT STATUS"; analyze's in docs/analyze.md "Exit status").  analyze
 * returns the first that holds of INPUT, OTHER_JOBS, FAIL, OK. */
#define NTT_EXIT_OK 0
#define NTT_EXIT_FAIL 1       /* the command ran and found a problem (analyze: a verdict not healthy) / failed */
#define NTT_EXIT_INPUT 2      /* unreadable input or bad usage (analyze: also input left out) */
#define NTT_EXIT_OTHER_JOBS 3 /* analyze: other jobs in the inputs, and none chosen with --job */

/* Versions of the JSON documents, their "schema" key: raised when a key is
 * removed or renamed or changes type, not when one is added
 * (docs/analyze.schema.json, docs/decode-json.md). */
#define NTT_ANALYZE_SCHEMA 1 /* analyze --json */
#define NTT_DECODE_SCHEMA 1  /* decode --json */

/* ---- subcommands (one file each) ---------------------------------------- */
int ntt_decode_main(int argc, char **argv);
int ntt_collect_main(int argc, char **argv);
int ntt_collect_via_main(int argc, char **argv); /* collect --host/--via (collect_via.c) */
int ntt_status_main(int argc, char **argv);
/* status --job: the coordinator's view of the whole job (status_job.c);
 * coord: --coord's HOST:PORT or NULL (discovered as ranks do). */
int ntt_status_job(const char *coord, int json);
int ntt_export_main(int argc, char **argv);
int ntt_run_main(int argc, char **argv);
int ntt_bundle_main(int argc, char **argv);
/* The trigger collect gives the dump of a dead process's ring: kind
 * COLLECTED, the reason from the ring's process state (collect.c). */
void ntt_collect_trigger(const struct ntt_image *img, struct ntr_trigger *t);
void ntt_usage(FILE *out);
/* One command's part of that text, as its --help (main.c). */
void ntt_usage_cmd(FILE *out, const char *cmd);

/* ---- progress line (progress.c) ------------------------------------------ */
/* "nccltrace: analyze: reading 37/1024 files" on stderr, rewritten in place,
 * while a command works through NTT_PROGRESS_MIN or more inputs; only when
 * stderr is a terminal.  One thread calls these for a given struct. */
#define NTT_PROGRESS_MIN 2
struct ntt_progress {
  int on, total;
  int shown;        /* columns on screen now, 0 when erased */
  uint64_t last_ns; /* CLOCK_MONOTONIC of the last update */
  char what[48], unit[16];
};
/* Show "WHAT 0/TOTAL UNIT" when stderr is a terminal and TOTAL is enough. */
void ntt_progress_begin(struct ntt_progress *p, const char *what, const char *unit, int total);
/* Update to DONE (at most ten times a second; DONE == TOTAL always shows). */
void ntt_progress_show(struct ntt_progress *p, int done);
/* Erase the line (before printing anything else); the next show redraws it. */
void ntt_progress_erase(struct ntt_progress *p);
/* Erase it for good. */
void ntt_progress_end(struct ntt_progress *p);

/* ---- formatting (fmt.c) ------------------------------------------------- */
/* "2026-12-02T11:00:00.123456Z" (UTC, microseconds); "-" for 0. */
void ntt_fmt_time(uint64_t real_ns, char *buf, size_t len);
/* Human description of a record: "AllReduce(count=64, float32, sum)",
 * "Send(count=8, float32, peer=1)", "Mark(step=1234)", "CommInitRank(nranks=4) enter". */
void ntt_fmt_op(const struct ntr_record *r, char *buf, size_t len);
void ntt_fmt_graph(const struct ntr_record *r, char *buf, size_t len); /* GRAPH_* records */
/* "completed", "pending", "untracked", "captured", "refused" or "-" (not an op). */
const char *ntt_rec_state(const struct ntr_record *r);
/* 1 when the record carries NUL-padded text in u.text (MARK, MISMATCH, ...). */
int ntt_rec_has_text(const struct ntr_record *r);
/* Copy the record's text, NUL-terminated, non-printable bytes replaced. */
void ntt_rec_text(const struct ntr_record *r, char *buf, size_t len);
/* "SIGTERM", or "signal 77". */
const char *ntt_signal_name(int signo, char *buf, size_t len);
/* "rank 3" for a launcher rank, "rank ?" for -1: a process that had no
 * launcher rank (a launcher script, one started outside a launcher). */
const char *ntt_rank_label(int32_t rank, char *buf, size_t len);
const char *ntt_lifecycle_name(unsigned lifecycle);      /* "ready", ... */
const char *ntt_proc_state_name(unsigned state);         /* "running", ... */
const char *ntt_ring_place_name(unsigned place);         /* enum ntr_ring_place: "dir", ..., "anonymous" */
/* Trigger kind for docs/decode-json.md: "exit", "sigterm", "timeout", ... */
const char *ntt_trigger_name(const struct ntr_trigger *t, char *buf, size_t len);
/* Copy a fixed-size char field up to its first NUL, printable ASCII only:
 * THE escaping of every human-readable output (decode, analyze, status,
 * collect, export's messages).  Anything read from an input -- header
 * fields, record text, stack frames, even file names -- passes through it
 * (or ntt_esc) before it reaches a terminal, so a hostile file cannot send
 * escape sequences or fake lines. */
void ntt_field_str(const char *field, size_t field_len, char *buf, size_t len);
/* ntt_field_str of a NUL-terminated string.  @return buf. */
const char *ntt_esc(const char *s, char *buf, size_t len);
/* The identity strings of a header, printable (a hostile file must not
 * send escape sequences to a terminal). */
struct ntt_ident {
  char host[64], job[64], exe[128], version[16];
};
void ntt_ident_of(const struct ntr_ring_header *h, struct ntt_ident *id);
/* Reference "now" of an image in realtime ns: the wall clock for a ring of a
 * live process, the trigger time for a dump, else the latest time in the
 * evidence (a dead ring says nothing about when its writer died). */
uint64_t ntt_image_now_ns(const struct ntt_image *img);
/* Latest timestamp (tsc) among the records and comm state of an image. */
uint64_t ntt_image_last_tsc(const struct ntt_image *img);
uint64_t ntt_wall_now_ns(void);

/* "0-3", "0,2,5-7": ranks r[0..n) (ascending, distinct) with runs as
 * ranges; ",..." when buf is full. */
void ntt_rank_ranges(const int *r, int n, char *buf, size_t len);
/* The distinct comm ranks of comm_id in img's table, ascending, at most
 * max: a process of ncclCommInitAll or of a thread per device holds
 * several.  @return how many. */
int ntt_held_ranks(const struct ntt_image *img, uint64_t comm_id, int *out, int max);
/* The same for the communicator of table entry i when it is the first
 * entry of its comm_id (0 for a later one): each comm once, in table
 * order, for the per-communicator lists of decode and its JSON. */
int ntt_held_ranks_at(const struct ntt_image *img, uint32_t i, int *out, int max);

/* ---- JSON (json.c) ------------------------------------------------------ */
/* A JSON string from bytes that may be neither terminated nor UTF-8. */
json_t *ntt_json_str(const char *s, size_t max);
json_t *ntt_json_hex64(uint64_t v); /* "9f2c0123456789ab" */
json_t *ntt_json_u64(uint64_t v);   /* integer; values above INT64_MAX as their signed reinterpretation */
/* The decode --json object of one image (docs/decode-json.md). */
json_t *ntt_image_json(const struct ntt_image *img);
json_t *ntt_record_json(const struct ntt_image *img, const struct ntr_record *r);

/* ---- Python call sites (pyfmt.c) -------------------------------------- */
/* The Python stack with this id (a record's pystack_id), NULL when none. */
const struct ntr_stack *ntt_py_stack(const struct ntt_image *img, uint32_t id);
/* One frame: "path/train.py:87 bad_branch", or with short_file
 * "train.py:87 in bad_branch"; control bytes replaced. */
void ntt_py_frame_str(const struct ntt_image *img, uint64_t word, int short_file, char *buf, size_t len);
/* Innermost frame of stack id, short form.  @return 0 (buf "") when none. */
int ntt_py_site(const struct ntt_image *img, uint32_t id, char *buf, size_t len);
/* ["file:line function", ...] innermost first, or JSON null. */
json_t *ntt_pystack_json(const struct ntt_image *img, uint32_t id);
/* The same two forms for frame words w[0..depth) (a dump's Python thread). */
int ntt_py_site_frames(const struct ntt_image *img, const uint64_t *w, uint32_t depth, char *buf, size_t len);
json_t *ntt_pyframes_json(const struct ntt_image *img, const uint64_t *w, uint32_t depth);
/* The dump's Python threads (docs/decode-json.md). */
json_t *ntt_pythreads_json(const struct ntt_image *img);
void ntt_print_pythreads(FILE *out, const struct ntt_image *img, const char *indent);
const char *ntt_py_state_name(uint32_t state); /* "on", "unsupported", ... */

/* ---- inputs (inputs.c) -------------------------------------------------- */
/* Expand files and directories (recursively: *.zst dumps and *.ring files)
 * into a sorted list of paths.  Missing paths are reported on stderr and
 * counted in *bad.  @return number of paths in *out (caller frees with
 * ntt_paths_free), -1 on out of memory. */
int ntt_expand_inputs(char *const *args, int nargs, char ***out, int *bad);
void ntt_paths_free(char **paths, int n);
/* Default directories: $NCCLTRACE_RING_DIR else /dev/shm/nccltrace-<uid>;
 * $NCCLTRACE_DIR else ./nccltrace-dumps.  @return 1 when the ring directory
 * was named ($NCCLTRACE_RING_DIR), 0 for the default. */
int ntt_default_ring_dir(char *buf, size_t len);
void ntt_default_dump_dir(char *buf, size_t len);
/* The tracer's fallback ring directories (recorder/ring_place.c):
 * $TMPDIR/nccltrace-<euid> when TMPDIR is an absolute path, and
 * /tmp/nccltrace-<euid>.  @return how many (1 or 2) are in out. */
int ntt_ring_fallback_dirs(char out[2][4096]);
/* "DIR (and DIR-*), T/nccltrace-U (and ...-*)": every place
 * ntt_list_rings looks for dir, escaped, for a "nothing found" line. */
void ntt_ring_places(const char *dir, char *buf, size_t len);
/* Ring files (*.ring) directly in dir and in the places the tracer falls
 * back to when dir is refused or full (a private sibling <dir>-XXXXXX, then
 * ntt_ring_fallback_dirs and their siblings), sorted:
 * only a directory that is the
 * caller's alone, and in it only rings its owner wrote that nobody else can
 * write (inputs.c, dir_trust: the rule, and root's); every other ring gets
 * one "nccltrace: PATH: why" line on stderr and is left out.  named: the
 * user pointed at dir (--rings, $NCCLTRACE_RING_DIR).
 * @return count, or -1 with errno (EPERM: dir not trusted) and why. */
int ntt_list_rings(const char *dir, int named, char ***out, char *why, size_t whylen);

/* ---- job choice (jobpick.c) -------------------------------------------- */
/* The jobs seen in some evidence, in order of first appearance, each with
 * its latest time.  Zero-init; ntt_jobs_free. */
struct ntt_jobs {
  char (*id)[64];
  uint64_t *latest;
  int n, cap;
};
/* Latest moment an image knows about: its last record or its trigger (the
 * time that makes a job "the most recent"). */
uint64_t ntt_image_latest_ns(const struct ntt_image *img);
/* Note evidence of job id ("" unknown) at t_ns.  @return its index, -1 out
 * of memory. */
int ntt_jobs_add(struct ntt_jobs *j, const char *id, uint64_t t_ns);
/* The job to read: want's index when want is named (-1 when it is not
 * among them), else the one with the latest evidence (the first of a tie;
 * -1 when there is none). */
int ntt_jobs_pick(const struct ntt_jobs *j, const char *want);
/* One line on out when the choice needs saying: pick < 0 (want absent,
 * with the jobs present), or several jobs and none named (which was read,
 * the others, and --job).  cmd names the command.  @return 1 when it
 * printed. */
int ntt_jobs_say(FILE *out, const char *cmd, const struct ntt_jobs *j, int pick, const char *want);
void ntt_jobs_free(struct ntt_jobs *j);

/* A set of files by (st_dev, st_ino): walks visit each directory and file
 * once (link loops end, a file reached twice is read once).  Zero-init.
 * @return 1 added, 0 already there, -1 out of memory. */
struct ntt_seen {
  uint64_t *v;
  size_t n, cap;
};
struct stat;
int ntt_seen_add(struct ntt_seen *s, const struct stat *st);
void ntt_seen_free(struct ntt_seen *s);

#endif
