/* analyze.h -- `nccltrace analyze`: read the evidence every rank left (dumps,
 * rings), align communicators across ranks and name the root cause
 * (design.md §1 evidence priority, §7 verdict vocabulary; docs/analyze.md).
 *
 * Thread-safety: none needed; the command is single-threaded.  One nta_job is
 * built and read by one thread.  Not signal-safe (allocates, stdio).
 *
 * Pipeline, one file per stage:
 *   load.c     inputs -> ntr_images, grouped by job, merged per process
 *   align.c    per communicator: members by comm rank, collectives by seq,
 *              point-to-point by (peer, direction, seq)
 *   detect.c   per-communicator findings: mismatches, missing collectives,
 *              init hangs, env differences, stalls
 *   fates.c    per-process findings: exits, signals, vanished ranks, aborts,
 *              async errors; tracer events for the evidence chain
 *   verdict.c  pick the earliest independent cause (time first, priority
 *              for ties and for telling effects from causes)
 *   report_text.c / report_json.c   the two outputs
 *   main.c     argument parsing, ntr_analyze_main
 * Unit tests build nta_jobs from synthetic images (no files) and call
 * nta_job_build + nta_analyze directly.
 */
#ifndef NTA_ANALYZE_H
#define NTA_ANALYZE_H
#include <stdint.h>
#include <stdio.h>
#include "recorder/reader.h"

/* Entry point for `nccltrace analyze ...` (argv[0] is "analyze"). */
int ntr_analyze_main(int argc, char **argv);

/* What became of a process, from its ring/dump state. */
enum nta_fate {
  NTA_ALIVE = 0,     /* ring of a live process: still running */
  NTA_EXITED,        /* exit() / return from main, code known */
  NTA_SIGNALED,      /* died of a signal it recorded (dumped, then re-raised) */
  NTA_VANISHED,      /* ring left behind, no exit record, pid gone: SIGKILL / OOM */
  NTA_UNKNOWN,       /* a dump taken while running (timeout, SIGUSR1...) and nothing later */
};

/* One process: every image of the same host+pid of the job, merged. */
struct nta_proc {
  struct ntr_image *img;        /* the latest image: header, comms, trigger */
  struct ntr_record *recs;      /* union of all images' records (and comm recent[]) by position */
  uint64_t nrecs;
  int nfiles;
  const char *first_path;
  int lrank;                    /* launcher rank (hdr.rank), -1 unknown */
  enum nta_fate fate;
  int exit_code, signo;
  uint64_t fate_ns;             /* when it died/exited (realtime ns), 0 unknown */
  uint64_t first_ns, last_ns;   /* first and last record time */
  uint64_t lost;                /* records overwritten before the latest snapshot */
  int fatal;                    /* signal is a crash (SEGV, BUS, ILL, FPE, ABRT) */
  uint64_t async_ns;            /* first async error seen by this process, 0 none */
  int async_err;
  uint64_t timeout_ns;          /* first watchdog timeout record, 0 none */
};

/* One collective or p2p call of one member. */
struct nta_op {
  const struct ntr_record *rec;
  uint64_t t_ns;                /* issue time */
  uint64_t done_ns;             /* completion time, 0 not seen */
  unsigned op;                  /* ntr_kind_fp_op(kind) */
};

struct nta_p2p {                /* SEND/RECV keyed by (peer, dir, seq) */
  int peer, dir;                /* dir 0 send, 1 recv */
  uint64_t seq;
  struct nta_op op;
};

/* One rank of one communicator. */
struct nta_member {
  struct nta_proc *proc;
  const struct ntr_comm_state *cs; /* NULL when only records are known */
  int rank;
  struct nta_op *colls;         /* sorted by seq, one per seq */
  uint64_t ncolls;
  struct nta_p2p *p2p;
  uint64_t np2p;
  uint64_t issued;              /* highest collective seq issued */
  uint64_t enqueued, completed; /* last_enqueued / last_completed */
  int tracking;                 /* completion tracking worked for this member */
  uint64_t init_enter_ns;       /* 0 unknown */
  int in_init;                  /* init entered, never returned */
  uint64_t init_fail_ns;        /* init returned an error (or the comm says it failed), 0 none */
  uint64_t abort_ns;            /* CommAbort entered, 0 none */
  uint64_t first_ns;
};

struct nta_comm {
  uint64_t id, parent;
  int nranks;
  struct nta_member **by_rank;  /* nranks entries, NULL where no evidence */
  struct nta_member *members;   /* nmembers, dense */
  int nmembers;
  uint64_t first_ns;
};

/* Verdict classes (design §7), in evidence-priority order for ties. */
enum nta_class {
  NTA_HEALTHY = 0,
  NTA_RANK_EXIT, NTA_RANK_CRASH, NTA_RANK_KILLED, NTA_APP_ABORT,
  NTA_COLL_MISMATCH, NTA_P2P_MISMATCH,
  NTA_MISSING_COLL, NTA_INIT_HANG,
  NTA_NCCL_ERROR,
  NTA_ENV_MISMATCH, NTA_STALL,
  NTA_CLASS_COUNT
};
const char *nta_class_name(enum nta_class c);

#define NTA_MAX_VRANKS 64

struct nta_verdict {
  enum nta_class cls;
  const struct nta_comm *comm;  /* NULL when none applies */
  uint64_t seq;                 /* 0 when none */
  char field[64];               /* mismatch field or env variable, "" none */
  int ranks[NTA_MAX_VRANKS];    /* comm ranks of comm, else launcher ranks */
  int nranks;
  int exit_code, signo, error;  /* as applicable */
  int has_exit, has_signal, has_error;
  uint64_t t_ns;                /* when the cause happened */
  char summary[1024];
  char next[512];               /* what to do next, one line */
};

/* A candidate cause found by detect.c; verdict.c picks one. */
struct nta_cand {
  enum nta_class cls;
  uint64_t t_ns;                /* when it happened (or became real) */
  const struct nta_comm *comm;
  uint64_t seq;
  char field[64];
  int ranks[NTA_MAX_VRANKS];    /* comm ranks of comm, else launcher ranks */
  int nranks;
  const struct nta_proc *proc;  /* rank_* / app_abort / nccl_error: the process */
  int exit_code, signo, error;
  int victim;                   /* the process was itself stuck first: an effect */
  int noise;                    /* launcher SIGTERM / SIGINT: an effect unless alone */
  int refused;                  /* env_mismatch that failed the comm's init (NCCLTRACE_ENV_CHECK=abort):
                                 * a cause, and the deaths after that failed init are its effects */
  char summary[1024];
};

struct nta_event {              /* one line of the evidence chain */
  uint64_t t_ns;
  int rank;                     /* launcher rank, -1 unknown */
  int order;                    /* insertion order: ties keep detection order */
  char kind[24];
  char text[256];
};

struct nta_input_error {
  char path[4096];
  char reason[256];
};

/* One job: what the analysis reads and produces. */
struct nta_job {
  char job_id[64];
  struct ntr_image *imgs;       /* owned images of this job */
  int nimgs;
  struct nta_proc *procs;
  int nprocs;
  struct nta_comm *comms;
  int ncomms;
  int world_size;               /* launcher world size if known, else -1 */
  struct nta_event *ev;
  int nev, cap_ev;
  struct nta_verdict v;
  struct nta_cand *cands;
  int ncands, cap_cands;
  uint64_t stuck_ns;            /* first watchdog timeout anywhere: the job was stuck */
  uint64_t t0_ns;               /* first event, for relative times */
  /* inputs */
  int nfiles;
  struct nta_input_error *unreadable;
  int nunreadable;
  char (*other_jobs)[64];
  int nother_jobs;
  int job_chosen;               /* 1 when picked by --job */
};

/* load.c: find and load every input (files, directories recursively), group
 * by job, keep job_id (or the most recent job when NULL/empty).  Images of
 * the chosen job are moved into job->imgs; the rest are freed.
 * @return 0, or -1 when no input could be read at all (errors recorded). */
int nta_load(struct nta_job *job, char *const *paths, int npaths, const char *job_id);

/* From job->imgs: merge processes, align communicators, detect, decide.
 * Safe to call on images built in memory (tests). @return 0 or -ENOMEM. */
int nta_analyze(struct nta_job *job);
void nta_job_free(struct nta_job *job);

/* align.c */
int nta_merge_procs(struct nta_job *job);
int nta_align(struct nta_job *job);
uint64_t nta_rec_ns(const struct nta_proc *p, const struct ntr_record *r);

/* detect.c + verdict.c */
int nta_detect(struct nta_job *job);
void nta_detect_fates(struct nta_job *job);  /* fates.c */
void nta_detect_errors(struct nta_job *job); /* fates.c */
void nta_event_add(struct nta_job *job, uint64_t t_ns, int rank, const char *kind,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void nta_describe_op(const struct nta_op *op, char *buf, size_t len);
const struct nta_member *nta_member_of(const struct nta_comm *c, const struct nta_proc *p);

struct nta_cand *nta_cand_add(struct nta_job *job, enum nta_class cls, uint64_t t_ns);
void nta_decide(struct nta_job *job);
int nta_proc_comm_rank(const struct nta_comm *c, const struct nta_proc *p);

/* report_text.c / report_json.c */
void nta_report_text(const struct nta_job *job, FILE *out);
int nta_report_json(const struct nta_job *job, FILE *out);
const char *nta_fate_name(enum nta_fate f);
void nta_blocked_in(const struct nta_member *m, char *buf, size_t len);
void nta_member_state(const struct nta_member *m, char *buf, size_t len);
void nta_comm_hex(uint64_t id, char out[17]);
#endif
