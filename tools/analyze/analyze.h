/* analyze.h -- `nccltrace analyze`: read the evidence every rank left (dumps,
 * rings), align communicators across ranks and name the root cause
 * (design.md §1 evidence priority, §7 verdict vocabulary; docs/analyze.md).
 *
 * Thread-safety: load.c runs nta_reduce_proc on worker threads (one per CPU,
 * at most NTA_MAX_WORKERS), each on
 * its own process (its own images, its own nta_proc; nothing else is shared
 * but an atomic work counter).  Everything after loading -- align, detect,
 * verdict, reports -- runs on one thread, and one nta_job is used by one
 * thread at a time.  Not signal-safe (allocates, stdio).
 *
 * Memory: records are never all held at once.  Files are grouped by process
 * (host, pid) from their headers alone; one process at a time is loaded,
 * merged and reduced (reduce.c, pack.c) to about 3 bytes per collective, and its
 * records are freed before the next (docs/analyze.md "Scale").
 *
 * Pipeline, one file per stage:
 *   load.c     inputs (owners checked) -> process groups -> worker threads;
 *              job choice; jobs.c: attempt choice, duplicate launcher ranks
 *   merge.c    which image is latest; the union of a process's records by
 *              position (walked, not copied); the arena
 *   reduce.c   one process's union -> compact per-(comm, rank) calls
 *   pack.c     collectives into bit-packed blocks (ops.c decodes them)
 *   align.c    per communicator: members by comm rank, fingerprint ids
 *   detect.c   per-communicator findings: collective mismatch, missing
 *              collective, stall; detect_init.c (init and split hangs),
 *              detect_p2p.c (send/recv), detect_env.c (NCCL_* differences)
 *   fates.c    per-process findings: exits, signals, vanished ranks, aborts,
 *              async errors; tracer events for the evidence chain; how a
 *              process is named (the comm ranks it holds)
 *   runexit.c  the exit statuses `nccltrace run` recorded: parsed (hostile
 *              input), matched to the processes they belong to
 *   inside.c   the profiler plugin's open proxy ops: where inside its
 *              call a member waits, and what its peer shows
 *   verdict.c  pick the earliest independent cause (time first, priority
 *              for ties and for telling effects from causes)
 *   report_text.c / report_json.c   the two outputs
 *   main.c     argument parsing, nta_main
 * Unit tests build nta_jobs from synthetic images (no files) and call
 * nta_analyze directly (it reduces them first).
 */
#ifndef NTA_ANALYZE_H
#define NTA_ANALYZE_H
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "tools/reader.h"

struct ntf_dump;

/* Entry point for `nccltrace analyze ...` (argv[0] is "analyze"). */
int nta_main(int argc, char **argv);

/* What became of a process, from its ring/dump state. */
enum nta_fate {
  NTA_ALIVE = 0,     /* ring of a live process: still running */
  NTA_EXITED,        /* exit() / return from main, code known */
  NTA_SIGNALED,      /* died of a signal it recorded (dumped, then re-raised) */
  NTA_VANISHED,      /* ring left behind, no exit record, pid gone: SIGKILL / OOM */
  NTA_UNKNOWN,       /* a dump taken while running (timeout, SIGUSR1...) and nothing later */
  NTA_EXECED,        /* replaced its program by exec (ring state exec): left NCCL, did not die */
};

/* The fingerprint fields of one call, plus what a report says about it.
 * Interned per process (nta_proc.fps): a training loop repeats a handful. */
struct nta_fp {
  uint64_t count;
  int32_t redop, peer, result;
  uint16_t op;                  /* ntr_kind_fp_op(kind) (Bcast == Broadcast) */
  uint16_t flags;               /* NTR_REC_IN_GROUP / STRICT_REFUSED / ... of the record */
  uint8_t dtype;
  uint8_t pad0;
  uint16_t pystack;             /* the record's Python call site (pystack_id in the process's latest image) */
  uint8_t pad[4];
};

/* The collectives of one member, compact (reduce.c writes, ops.c reads):
 * blocks of 64 in seq order, each a 20-byte header -- the absolute issue
 * ticks of its first call, and a base and a bit width for each field --
 * then, per call, three bit fields: the fingerprint index, the issue ticks
 * since the previous call minus the base, and the completion ticks since
 * issue plus one (0: not completed) minus the base.  Widths adapt per block
 * (a training loop's calls take about 20 bits).  A call whose values do not
 * fit (a gap over 2^26 ticks, about 20 ms, between two collectives; an index
 * over 4094) is escaped: the all-ones fingerprint code, and its values are
 * kept whole in nta_mdata.esc.  Decoded, escaped fields read as the *_ESC
 * values below. */
#define NTA_FPI_ESC 4095u
#define NTA_T_ESC ((1u << 26) - 1)
#define NTA_BLK 64              /* calls per block */
#define NTA_BLK_HDR 20          /* ck u64, dt_base u32, dd_base u32, fw, tw, dw u8, pad */

struct nta_run {                /* collectives idx0.. have seqs seq0, seq0+1, ... */
  uint64_t seq0, idx0;
};
struct nta_esc {                /* collective idx in full (done 0: not completed) */
  uint64_t idx, tsc, done;
  uint32_t fpi;
};

struct nta_dev {                /* device arrival at collective seq (DeviceArrive events) */
  uint64_t seq, t_ns;
};

struct nta_p2p {                /* SEND/RECV keyed by (peer, dir, seq) */
  int32_t peer, dir;            /* dir 0 send, 1 recv */
  uint64_t seq;
  uint64_t tsc, done;           /* ticks; done 0 not completed */
  uint32_t fpi;
};

/* A call decoded from the compact store (nta_coll_at / nta_p2p_op). */
struct nta_op {
  uint64_t seq;
  uint64_t t_ns;                /* issue time, 0 unknown */
  uint64_t done_ns;             /* completion time, 0 not seen */
  uint64_t count;
  unsigned op;                  /* ntr_kind_fp_op(kind) */
  int dtype, redop, peer, result;
  unsigned flags;
  unsigned pystack;             /* Python call site: stack id in the member's process image, 0 none */
};

/* The launches of one CUDA graph on one member (GRAPH_LAUNCH records,
 * reduce.c).  Across ranks a graph is known by the collective seqs it
 * captured (the same on every rank), never by the local capture id. */
#define NTA_GRAPHS 4            /* graphs followed per member */
struct nta_mdata;
struct nta_comm;
struct nta_job;
struct nta_replays {
  uint64_t seq_first, seq_last; /* captured collective seqs of this comm (0: only send/recv) */
  uint32_t first_kind, ncalls, fp;
  uint64_t launched;            /* highest replay number launched */
  uint64_t completed;           /* highest replay number completed */
  uint64_t completed_ns;        /* when that one completed */
  uint64_t pending;             /* lowest launched and not completed (tracked), 0 none */
  uint64_t pending_ns;
};
/* The graph member m is blocked in a replay of (*n: that replay), the
 * oldest; NULL when none.  A completion seen only once the comm had failed
 * (an async error, ncclCommAbort) is the abort draining the stream, not the
 * peers arriving: that replay still counts as blocked. */
struct nta_member;
const struct nta_replays *nta_replay_pending(const struct nta_member *m, uint64_t *n);
/* The graph of d with these captured seqs, NULL when it launched none. */
const struct nta_replays *nta_replay_find(const struct nta_mdata *d, uint64_t first, uint64_t last);
void nta_detect_replays(struct nta_job *job, const struct nta_comm *c);   /* detect_replay.c */
/* "AllReduce #5" (the graph's first call on the comm), "Send" for send/recv only. */
void nta_replay_op(const struct nta_replays *g, char *buf, size_t len);

/* A proxy op of the profiler plugin still open at the member's last
 * evidence (ProxyOp / ProxyStep records, reduce.c): where inside its call
 * it waits (docs/analyze.md "Inside a stuck call"). */
#define NTA_WAITS 8             /* open proxy ops kept per member (the latest) */
struct nta_wait {
  uint64_t seq;                 /* the op's seq (collective, or send/recv with that peer) */
  uint64_t t_ns;                /* its latest record */
  uint64_t bytes;               /* of the open step, as last reported */
  int32_t kind;                 /* enum ntr_kind of the op, -1 unknown */
  int32_t peer, chan;           /* peer -1: none (a collective) */
  int32_t step;                 /* index of the open step, -1 none open */
  int32_t nsteps, done;         /* steps of the op; steps finished */
  int32_t state;                /* NCCL's state number of the open step, -1 none */
  int32_t is_send;
};

/* What one (comm id, comm rank) of one process left, reduced from its
 * records (reduce.c); owned by the process, read through nta_member.d. */
struct nta_mdata {
  uint64_t comm_id;
  int rank;
  int is_member;                /* a non-tracer record registered it (align order below) */
  uint64_t reg_order;           /* order of its first registering record */
  int reg_nranks;               /* largest valid nranks of its registering records, 0 none */
  uint8_t *pk;                  /* collectives by seq, one per seq (the first seen), packed */
  uint64_t ncolls;
  uint64_t *boff;               /* byte offset in pk of each block of NTA_BLK */
  struct nta_run *runs;
  uint64_t nruns;
  struct nta_esc *esc;
  uint64_t nesc;
  struct nta_p2p *p2p;          /* sorted by (peer, dir, seq, position) */
  uint64_t np2p;
  uint64_t min_tsc;             /* smallest non-zero issue ticks of its records, 0 none */
  uint64_t first_ns;
  uint64_t init_enter_ns, init_fail_ns, abort_ns;
  uint16_t init_pystack;        /* Python call sites (stack ids, 0 none): its first init's, */
  uint16_t abort_pystack;       /* its first CommAbort's, */
  uint16_t life_pystack;        /* its latest other lifecycle call's (split, window register) */
  int tracking;
  struct nta_replays gr[NTA_GRAPHS];
  int ngr;
  uint64_t nreplays;            /* GRAPH_LAUNCH records (every graph) */
  struct nta_dev *dev;          /* device arrivals, in record order (straggler.c sorts) */
  uint64_t ndev, devcap;
  struct nta_wait waits[NTA_WAITS]; /* open proxy ops, in the order they opened */
  int nwaits;
};

/* Bump allocation for the compact calls, in 64 MiB mappings advised for
 * transparent huge pages: at 1,024 ranks they are most of the memory, and
 * faulting them in 4 KiB at a time cost seconds.  One per loading thread;
 * freed with the job. */
struct nta_arena {
  struct nta_chunk *chunks;
};
void *nta_arena_alloc(struct nta_arena *a, size_t n);
/* Give back the end of the most recent allocation p (now n bytes long). */
void nta_arena_shrink(struct nta_arena *a, void *p, size_t n);
void nta_arena_free(struct nta_arena *a);

/* One process: every image of the same host+pid of the job, merged and
 * reduced (reduce.c): only the latest image's header and comm table and the
 * compact per-communicator data stay; the records themselves are freed. */
struct nta_proc {
  struct ntt_image *img;        /* the latest image: header, comms, trigger (records freed) */
  struct ntt_image *pyimg;      /* the newest image with Python threads when it is not img (a
                                 * ring newer than the last dump): its threads, string table and
                                 * trigger only, owned; NULL otherwise (nta_py_image) */
  int own_img;                  /* img was allocated by load.c and goes with the process */
  int in_arena;                 /* md[].pk and .boff live in an nta_arena, not malloc */
  char job[64];                 /* job id of its images */
  int attempt;                  /* restart attempt of its images (nta_hdr_attempt) */
  uint64_t latest_ns;           /* latest record or trigger over its images (picks the job) */
  uint64_t nrecs;               /* records in the union of its images */
  struct ntr_record *keep;      /* the records findings quote (exits, signals, tracer events, aborts), by position */
  uint64_t nkeep;
  uint64_t nmarks;              /* MARK records in the union; only the last NTA_MARKS_SHOWN are kept */
  struct nta_fp *fps;           /* interned fingerprints of its calls */
  uint32_t nfps;
  uint32_t *gfp;                /* fps[i] -> job-wide fingerprint id (align.c) */
  struct nta_mdata *md;         /* per (comm, rank) of its records */
  int nmd;
  struct nta_member **mems;     /* its members, one per (comm, rank) (align.c) */
  int nmems;
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
  const struct nta_runexit *run; /* how nccltrace run saw it end, when it left no exit record; NULL none */
  const struct nta_runexit *launcher; /* the nccltrace run command that was its parent, NULL none */
};

/* What `nccltrace run` saw of a command it started (its exit-status file,
 * recorder/format.h; runexit.c parses it as hostile input). */
struct nta_runexit {
  char host[64], job[64], exe[64]; /* [A-Za-z0-9._-] only; job "" unknown */
  int pid, ppid, rank;          /* rank: launcher rank in run's environment, -1 none */
  uint64_t start_ns, end_ns;    /* realtime, 0 unknown */
  int signaled;                 /* 1: code is the signal that killed it; 0: its exit code */
  int code;
  int matched;                  /* it is a process of the evidence (runexit.c) */
};
/* Parse one exit-status file's bytes.  @return 0, or -1 with why. */
int nta_runexit_parse(const char *buf, size_t len, struct nta_runexit *out, char *why, size_t whylen);
/* Read and parse the file at path (regular, at most NTR_RUNEXIT_MAX bytes).
 * @return 0, or -1 with why. */
int nta_runexit_read(const char *path, struct nta_runexit *out, char *why, size_t whylen);
/* Give each process without an exit record the status nccltrace run saw
 * (its fate becomes an exit with that code, or a kill by that signal);
 * mark the rest matched when they are the launcher of some process. */
void nta_runexit_apply(struct nta_job *job);
/* 1 when an exit status of the job names launcher rank lrank. */
int nta_runexit_has_rank(const struct nta_job *job, int lrank);
/* The statuses of commands that left no ring or dump at all: evidence
 * ("no evidence from it") and a candidate when they failed. */
void nta_runexit_detect(struct nta_job *job);

#define NTA_MARKS_SHOWN 4       /* application markers per process in the chain */

/* One rank of one communicator. */
struct nta_member {
  struct nta_proc *proc;
  const struct nta_comm *comm;
  const struct ntr_comm_state *cs; /* NULL when only records are known */
  const struct nta_mdata *d;    /* its calls (never NULL: an empty one when it left none) */
  int rank;
  uint64_t ncolls, np2p;        /* d->ncolls, d->np2p */
  uint64_t issued;              /* highest collective seq issued */
  uint64_t enqueued, completed; /* last_enqueued / last_completed */
  int tracking;                 /* completion tracking worked for this member */
  int lags;                     /* its completions may lag its issues (a ring of a killed process, a
                                 * signal's dump: align.c view_lags) and it issued past completed */
  int lag_sure;                 /* lags, and completed + 1 completed nowhere, or its watchdog polled it
                                 * pending long before the evidence was taken: blocked_in is exact */
  int lag_ring;                 /* its evidence is the ring of a process that left no final dump */
  uint64_t init_enter_ns;       /* 0 unknown */
  int in_init;                  /* init entered, never returned */
  uint64_t init_fail_ns;        /* init returned an error (or the comm says it failed), 0 none */
  uint64_t abort_ns;            /* CommAbort entered, 0 none */
  uint64_t first_ns;
};

/* Members are indexed by rank through `ranked` (sorted, one per rank in
 * [0, nranks)), never by an array of nranks entries: nranks comes from the
 * input (up to NTA_MAX_NRANKS), and no work or memory may follow it rather
 * than the evidence present (hostile input: docs/reliability.md). */
struct nta_comm {
  uint64_t id, parent;
  int nranks;
  struct nta_member **ranked;   /* nranked members by ascending rank; ranks without evidence absent */
  int nranked;
  struct nta_member *members;   /* nmembers, dense */
  int nmembers;
  uint64_t first_ns;
};
#define NTA_MAX_NRANKS (1 << 20)
/* Ranks without evidence a report lists one by one, over all communicators:
 * one communicator of the largest size is listed in full; past that the
 * reports say how many more there are. */
#define NTA_LIST_BUDGET (1 << 20)

/* Verdict classes (design §7), in evidence-priority order for ties. */
enum nta_class {
  NTA_HEALTHY = 0,
  NTA_RANK_EXIT, NTA_RANK_CRASH, NTA_RANK_KILLED, NTA_APP_ABORT,
  NTA_COLL_MISMATCH, NTA_P2P_MISMATCH,
  NTA_MISSING_COLL, NTA_INIT_HANG,
  NTA_NCCL_ERROR,
  NTA_ENV_MISMATCH, NTA_STALL,
  NTA_STRAGGLER,                /* only when nothing else is found (straggler.c) */
  NTA_SLOW_COLL,                /* one collective held every rank (straggler.c), nothing else found */
  NTA_CLASS_COUNT
};
const char *nta_class_name(enum nta_class c);

#define NTA_MAX_VRANKS 64

struct nta_verdict {
  enum nta_class cls;
  uint64_t replay;              /* the graph replay the verdict names, 0 none */
  const struct nta_comm *comm;  /* NULL when none applies */
  uint64_t seq;                 /* 0 when none */
  char field[64];               /* mismatch field or env variable, "" none */
  int ranks[NTA_MAX_VRANKS];    /* comm ranks of comm, else launcher ranks */
  int nranks;
  int exit_code, signo, error;  /* as applicable */
  int has_exit, has_signal, has_error;
  uint64_t t_ns;                /* when the cause happened */
  const struct nta_proc *stack_proc; /* the faulty call's Python call site: stack_id of */
  uint32_t stack_id;            /* stack_proc's image, 0 none (verdict.stack) */
  const struct ntt_image *stack_img;     /* or, for a death, the Python stack of the thread that */
  const struct ntr_pythread *stack_thread; /* exited or crashed, from its last dump (stack_id 0) */
  char summary[1024];
  int silent;                   /* as in nta_cand */
  char next[512];               /* what to do next, one line */
  const struct nta_strag *strag; /* class straggler: its finding */
  char pg[64];                  /* a verdict from Flight Recorder evidence alone: its process group, "" none */
#define NTA_FR_STACK 4
  char fr_stack[NTA_FR_STACK][208]; /* and the faulty call's Python frames, "file:line func" (fr.c) */
  int fr_nstack;
};

/* A candidate cause found by detect.c; verdict.c picks one. */
/* A rank everyone waits for (straggler.c): consistently last on a comm, or
 * seconds late at a few seqs (stalls). */
#define NTA_MAX_STALLS 16
#define NTA_MAX_SLOW 16
struct nta_strag {
  const struct nta_comm *comm;
  int rank;                     /* comm rank; -1: stalls only, of several ranks */
  int device;                   /* 1: from device arrivals (start events), 0: host (call time) */
  int consistent;               /* last at most of the window by a clear margin */
  double lateness_ms;           /* median margin after the others when it was last */
  double late_fraction;         /* of the window's seqs it was last at */
  int window;                   /* complete seqs judged (the last NTA_STRAG_WINDOW) */
  double uncert_ms;             /* clock uncertainty between the hosts involved */
  uint64_t t_ns;                /* the window's last seq (or the first stall) */
  struct { uint64_t seq, t_ns; int rank; double late_ms; } stalls[NTA_MAX_STALLS];
  int nstalls, more_stalls;
  /* Collectives that held every rank far longer than the comm's others
   * of the same op and count (usual: their median): held = first
   * completion - first arrival; the rank last at the device, by last_ms
   * after the others; took = first completion - last arrival. */
  struct nta_slow { uint64_t seq, t_ns; int rank; double held_ms, usual_ms, last_ms, took_ms; } slow[NTA_MAX_SLOW];
  int nslow, more_slow;
  char summary[512];
};
/* straggler, or slow_collective when g found only slow collectives. */
enum nta_class nta_strag_class(const struct nta_strag *g);
#define NTA_MAX_STRAG 16

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
  uint64_t replay;              /* missing_collective of a graph replay: its number (seq: the graph's first call) */
  char replay_op[48];           /* "AllReduce #5": what that replay runs first */
  int refused;                  /* env_mismatch that failed the comm's init (NCCLTRACE_ENV_CHECK=abort):
                                 * a cause, and the deaths after that failed init are its effects */
  const struct nta_proc *stack_proc; /* as in nta_verdict */
  uint32_t stack_id;
  int silent;                   /* missing_collective of ranks that left nothing at all: 1 the
                                 * evidence cannot tell why; 2 a peer's ring was in anonymous
                                 * memory, so theirs likely were: lost to a kill, not a code path */
  char summary[1024];
};

struct nta_event {              /* one line of the evidence chain */
  uint64_t t_ns;
  int rank;                     /* launcher rank, -1 unknown */
  int order;                    /* insertion order: ties keep detection order */
  char kind[24];
  char text[256];
  char source[12];              /* whose evidence: "nccltrace", or "torch-fr" (a Flight Recorder dump) */
};

struct nta_input_error {
  char path[4096];
  char reason[256];
  long uid;                     /* left_out: the file's owner; unreadable: -1 */
};

/* A launcher rank of the analyzed job and attempt that more than one
 * process claims (load.c): never merged; the claimant with the latest
 * evidence is analyzed, the others are left out and listed. */
#define NTA_DUP_SHOWN 8         /* claimants listed per rank */
struct nta_dup {
  int rank;
  int n;                        /* claimants; the first min(n, NTA_DUP_SHOWN) are listed */
  struct {
    char host[64];
    int pid, nfiles, analyzed;
    uint64_t latest_ns;
  } p[NTA_DUP_SHOWN];
};

#define NTA_MAX_WORKERS 8       /* loading threads at most (load.c) */

/* One job: what the analysis reads and produces. */
struct nta_job {
  char job_id[64];
  struct ntt_image *imgs;       /* images built in memory (tests, fuzzers): nta_analyze reduces them */
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
  struct nta_strag strag[NTA_MAX_STRAG]; /* straggler findings (the verdict, or secondary) */
  int nstrag;
  uint64_t stuck_ns;            /* first watchdog timeout anywhere: the job was stuck */
  uint64_t t0_ns;               /* first event, for relative times */
  /* inputs */
  int nfiles;
  struct nta_input_error *unreadable;
  int nunreadable;
  struct nta_runexit *runexits; /* exit-status files of nccltrace run (of this job or of none) */
  int nrunexits;
  char (*other_jobs)[64];
  int nother_jobs;
  int job_chosen;               /* 1 when picked by --job */
  int attempt;                  /* restart attempt analyzed (nta_hdr_attempt) */
  int *other_attempts;          /* the job's other attempts present, ascending */
  int nother_attempts;
  struct nta_input_error *left_out; /* files of other owners, not read (load.c "trust") */
  int nleft_out;
  struct nta_dup *dups;         /* launcher ranks claimed by several processes */
  int ndups;
  /* what to read (set before nta_load) */
  uint64_t max_memory;          /* --max-memory: bytes of evidence loaded at once (0: nta_default_memory) */
  int want_attempt;             /* --attempt N: 1, with the attempt in attempt_wanted */
  int attempt_wanted;
  int any_owner;                /* --any-owner: read files of every owner */
  long *allow_uids;             /* --allow-owner: owners read besides you and the directory's */
  int nallow_uids;
  struct nta_arena arenas[NTA_MAX_WORKERS]; /* the loading threads' (load.c) */
  struct ntf_dump *fr;          /* PyTorch Flight Recorder dumps read (load.c, tools/fr/fr.h) */
  int nfr;
};

/* load.c: find every input (files, directories recursively), group the
 * files by process from their headers, load and reduce one process at a
 * time (a thread per CPU), keep job_id (or the most recent job when NULL/empty).
 * The chosen job's processes end up in job->procs; the rest are freed.
 * @return 0, or -1 when no input could be read at all (errors recorded). */
int nta_load(struct nta_job *job, char *const *paths, int npaths, const char *job_id);
/* jobs.c.  The restart attempt a header's environment names:
 * TORCHELASTIC_RESTART_COUNT, else SLURM_RESTART_COUNT, else 0 (the first
 * run sets neither). */
int nta_hdr_attempt(const struct ntr_ring_header *h);
/* job->attempt (--attempt, else the highest of v) and job->other_attempts
 * from v[0..n), the attempts of job id's processes; takes v.  @return 0, or
 * -1 when --attempt names one that is not there (an input error). */
int nta_pick_attempt(struct nta_job *job, int *v, int n, const char *id);
/* With several attempts: keep the exit statuses of nccltrace run whose
 * command ran while the analyzed attempt's processes did. */
void nta_keep_attempt_runexits(struct nta_job *job);
/* One process per launcher rank of job->procs (the latest evidence); every
 * rank claimed twice goes to job->dups.  @return 0 or -1 (out of memory). */
int nta_dedupe_ranks(struct nta_job *job);
/* Append (path, reason, uid) to an input list (unreadable, left out). */
void nta_input_add(struct nta_input_error **v, int *n, const char *path, const char *reason, long uid);
/* The default memory budget of a load: a quarter of the physical memory,
 * or of the cgroup's limit (memory.max) when that is lower. */
uint64_t nta_default_memory(void);
/* Phase timing on stderr when NCCLTRACE_ANALYZE_TIMING=1. */
void nta_phase(const char *what);

/* Align communicators, detect, decide -- from job->procs (nta_load), or
 * first from job->imgs (images built in memory: tests, fuzzers), which are
 * grouped by process and reduced here.  @return 0 or -ENOMEM. */
int nta_analyze(struct nta_job *job);
void nta_job_free(struct nta_job *job);

/* reduce.c: merge imgs[0..n) (one process, in input order) into p: latest
 * state, union of records by position, reduced.  The records are not read
 * again: the caller frees them (or returns them to their load buffer); the
 * latest image's header and comms stay (p->img).  arena: where
 * the compact calls go (NULL: malloc).  sorted: the images come from the
 * reader (records in position order); others are sorted here if need be.
 * Thread-safe for distinct processes and distinct arenas.  @return 0 or -1 (out of memory). */
int nta_reduce_proc(struct nta_proc *p, struct ntt_image **imgs, int n, struct nta_arena *arena, int sorted);
void nta_proc_free(struct nta_proc *p);
/* merge.c: the union of a process's images' records by position, in
 * position order; copies of one position: the first one seen, unless a
 * later one knows about completion and it does not.  sorted: as in
 * nta_reduce_proc.  Records stay valid while the images do. */
struct nta_walker {
  struct nta_src *s;
  int ns;
  const struct ntr_record *pend;
};
int nta_walker_init(struct nta_walker *w, struct ntt_image **imgs, int n, int sorted); /* 0 or -1 */
const struct ntr_record *nta_walker_next(struct nta_walker *w);                       /* NULL: done */
void nta_walker_free(struct nta_walker *w);
/* Is image b a later state of the process than image a? */
int nta_image_later(const struct ntt_image *a, const struct ntt_image *b);

/* pack.c: a collective as reduce.c collects it, in seq order after its sort
 * (order: its position in the process's union of records, for ties). */
struct nta_tcoll {
  uint64_t seq, tsc, done, order;
  uint32_t fpi;
};
/* Pack c[0..n) into d->pk / d->boff / d->esc (arena: where pk goes, NULL:
 * malloc).  @return 0 or -1 (out of memory). */
int nta_pack_colls(struct nta_mdata *d, const struct nta_tcoll *c, uint64_t n, struct nta_arena *arena);

/* ops.c: the compact calls, decoded.  Collectives are indexed 0..ncolls-1
 * in seq order. */
uint64_t nta_coll_seq(const struct nta_member *m, uint64_t i);
uint32_t nta_cop_fpi(const struct nta_mdata *d, uint64_t i); /* fingerprint index of collective i */
/* Block b (collectives b*NTA_BLK...) decoded: n calls; fpi/dt/dd as packed,
 * escaped calls resolved through the side table for fpi (dt and dd read
 * NTA_T_ESC there).  @return n. */
unsigned nta_blk_decode(const struct nta_mdata *d, uint64_t b, uint64_t *ck, uint32_t *fpi, uint32_t *dt, uint32_t *dd);
/* 1 when no call of block b was completed (read from its header alone). */
int nta_blk_none_done(const struct nta_mdata *d, uint64_t b);
void nta_coll_at(const struct nta_member *m, uint64_t i, struct nta_op *o);
int nta_coll_find(const struct nta_member *m, uint64_t seq, struct nta_op *o); /* 1 found */
uint64_t nta_coll_upper(const struct nta_member *m, uint64_t seq); /* first index with seq > seq */
uint64_t nta_coll_t_ns(const struct nta_member *m, uint64_t i);
void nta_p2p_op(const struct nta_member *m, const struct nta_p2p *x, struct nta_op *o);
uint64_t nta_ns(const struct nta_proc *p, uint64_t tsc); /* 0 for tsc 0 */

/* align.c */
int nta_align(struct nta_job *job);
/* The member of c with comm rank r (through c->ranked), or NULL. */
struct nta_member *nta_rank(const struct nta_comm *c, int r);

/* detect.c + detect_p2p.c + verdict.c */
int nta_detect(struct nta_job *job);
void nta_detect_p2p(struct nta_job *job, const struct nta_comm *c);
void nta_detect_env(struct nta_job *job, const struct nta_comm *c);
void nta_detect_init(struct nta_job *job, const struct nta_comm *c);       /* detect_init.c */
/* ncclCommWindowRegister / ncclDevCommCreate: collective over the comm. */
int nta_kind_collective_reg(unsigned kind);
void nta_detect_split_hang(struct nta_job *job, const struct nta_comm *c); /* detect_init.c */
void nta_rank_list(const int *r, int n, char *buf, size_t len);
/* r[0..n) of total ranks (n <= total, the rest not kept): what does not fit
 * in buf, or was not kept, ends as ",... and K more" (detect.c). */
void nta_rank_list_of(const int *r, int n, int total, char *buf, size_t len);
/* "code 137 (128+9, SIGKILL)": an exit status, with the signal a shell or
 * launcher encodes as 128+N named; "code 1" otherwise (fates.c). */
void nta_exit_text(int code, char *buf, size_t len);
const char *nta_plural(int n);
/* The first ranks of [0, c->nranks) without evidence, at most max, into out
 * (work: members + max, whatever nranks says).  @return how many. */
int nta_absent_ranks(const struct nta_comm *c, int *out, int max);
void nta_detect_fates(struct nta_job *job);  /* fates.c */
/* straggler.c: who everyone waits for, from host and device arrivals
 * (job->strag; thresholds in docs/analyze.md). */
void nta_detect_straggler(struct nta_job *job);
void nta_set_fate(struct nta_proc *p);       /* fates.c, from reduce.c */
void nta_detect_errors(struct nta_job *job); /* fates.c */
/* The comm ranks p holds in c, ascending, at most max.  @return how many
 * (a process of one rank: 1; ncclCommInitAll or a thread per device: more). */
int nta_proc_ranks(const struct nta_comm *c, const struct nta_proc *p, int *out, int max);
/* How reports name a process: "rank 3 (pid 12 on h)", "pid 12 on h (holds
 * ranks 0-3 of comm 483dcaec)", "rank 1 (pid 12 on h, holds ranks 0-3 of
 * comm 483dcaec)", "pid 12 on h". */
void nta_proc_label(const struct nta_proc *p, char *buf, size_t len);
void nta_event_add(struct nta_job *job, uint64_t t_ns, int rank, const char *kind,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The same, from evidence of another source ("torch-fr"). */
void nta_event_add_src(struct nta_job *job, uint64_t t_ns, int rank, const char *kind, const char *source,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* fr.c: the verdict from Flight Recorder dumps alone (job->fr, no process
 * of ours), or, beside ours, their entries in the one timeline. */
void nta_fr_detect(struct nta_job *job);
void nta_fr_merge(struct nta_job *job);
void nta_fr_report_text(const struct nta_job *job, FILE *out); /* the dumps, one row per (rank, group) */
json_t *nta_fr_json(const struct nta_job *job);                  /* "torch_fr" of --json */
/* load.c -> fr.c: read the Flight Recorder dump at path (the file the
 * listing saw: dev, ino when check) into job->fr, within limit bytes.
 * @return 1 read, 0 not an FR dump (nothing said), -1 unreadable (why). */
int nta_fr_read(struct nta_job *job, const char *path, dev_t dev, ino_t ino, int check, uint64_t limit, char *why,
                size_t whylen);
void nta_describe_op(const struct nta_op *op, char *buf, size_t len);
const char *nta_fp_diff(const struct nta_op *a, const struct nta_op *b);
const struct nta_member *nta_member_of(const struct nta_comm *c, const struct nta_proc *p);

struct nta_cand *nta_cand_add(struct nta_job *job, enum nta_class cls, uint64_t t_ns);
void nta_decide(struct nta_job *job);
/* Times below this (1973) are no wall-clock times: ticks of a process whose
 * header has no realtime base.  Reports give them no offset. */
#define NTA_WALL_MIN_NS 100000000000000000ull
int nta_time_placed(uint64_t t_ns);
int nta_proc_comm_rank(const struct nta_comm *c, const struct nta_proc *p);

/* inside.c: the inside view of a stuck call (open proxy ops). */
/* NCCL's proxy step state as a name and what it waits for, NULL unknown. */
const char *nta_step_state_name(int state);
const char *nta_step_state_what(int state);
/* What the peer of w (a wait of m) shows: "gone" (its process ended by
 * itself -- or, without the matching op open, at all), "waiting" (it has
 * the matching op open: *pw; it may have been stopped since by SIGTERM,
 * SIGINT or SIGHUP, as launchers stop survivors), "absent" (no evidence
 * from it), "idle" (alive, no matching op open); NULL for a collective. */
const char *nta_wait_peer(const struct nta_member *m, const struct nta_wait *w, const struct nta_wait **pw,
                          const struct nta_member **pm);
/* "rank 0, Send #1 to rank 1, channel 0: step 7 of 16 (SendPeerWait: ...); rank 1 never received it (process gone: vanished)" */
void nta_wait_text(const struct nta_member *m, const struct nta_wait *w, char *buf, size_t len);

/* report_text.c / report_json.c */
void nta_report_text(const struct nta_job *job, FILE *out);
int nta_report_json(const struct nta_job *job, FILE *out);
const char *nta_fate_name(enum nta_fate f);
void nta_blocked_in(const struct nta_member *m, char *buf, size_t len);
void nta_member_state(const struct nta_member *m, char *buf, size_t len);
void nta_comm_hex(uint64_t id, char out[17]);
/* 1 when r is the tracer's NOTE "unwatched": comm r->comm_id (rank
 * r->rank) got no ring slot, so it had no timeout and no cross-rank check
 * (reduce.c keeps these records). */
int nta_note_unwatched(const struct ntr_record *r);
int nta_note_unseen(const struct ntr_record *r);
/* pysite.c: Python call sites in reports. */
/* " at train.py:80 in train_step" for a call of m's process, "" when none. */
void nta_site_text(const struct nta_proc *p, unsigned pystack, char *buf, size_t len);
/* The collective m is blocked in (or last issued without tracking).
 * @return 1 with *o, 0 when none is known. */
int nta_blocked_op(const struct nta_member *m, struct nta_op *o);
/* ["file:line function", ...] of stack id in p's image, or JSON null. */
json_t *nta_stack_json(const struct nta_proc *p, unsigned pystack);
/* Every rank's Python threads from its last dump (hangs and exits). */
void nta_report_pythreads(const struct nta_job *job, FILE *out);
json_t *nta_pythreads_json(const struct nta_proc *p);
/* {"trigger", "path", "time_ns", "latest"} of the image they come from, or null. */
json_t *nta_pythreads_from_json(const struct nta_proc *p);
/* The newest image of p with Python threads (p->pyimg, else p->img when it
 * has some), NULL when none. */
const struct ntt_image *nta_py_image(const struct nta_proc *p);
/* reduce.c, after choosing p->img: keep the Python part of the newest of
 * imgs[0..n) that has threads when p->img has none.  @return 0 or -1. */
int nta_py_keep(struct nta_proc *p, struct ntt_image **imgs, int n);
void nta_py_free(struct nta_proc *p);
/* m's last call on its comm: the later of its last collective and its
 * last send/recv.  @return 1 with *o. */
int nta_member_last_op(const struct nta_member *m, struct nta_op *o);
/* k's verdict.stack: stack id pystack of p's image, when it names a stack. */
void nta_cand_site(struct nta_cand *k, const struct nta_proc *p, unsigned pystack);
/* A death, abort or error verdict (k->proc): where that process's Python
 * code was (see pysite.c) into v's stack, " at ..." text into buf. */
void nta_death_site(const struct nta_cand *k, struct nta_verdict *v, char *buf, size_t len);
/* verdict.stack, NULL when there is none. */
json_t *nta_verdict_stack_json(const struct nta_verdict *v);
#endif
