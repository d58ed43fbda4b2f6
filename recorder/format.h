/* format.h -- the on-disk contract shared by the recorder and the tools.
 *
 * Contract: pure data definitions, no state.  Safe from any thread and from
 * signal handlers.  Every structure here is written by libnccltrace.so into a
 * file-backed shared mapping (the ring file) or a dump, and read by the
 * `nccltrace` tools, possibly on another machine and long after the writer
 * died.  Readers therefore treat every field as hostile: each offset and count
 * is checked against the file size before use (tools/reader.c, tools/reader_dump.c, tools/reader_fast.c).
 *
 * Rules: fixed-width little-endian fields, explicit padding, no pointers (only
 * offsets from the start of the file), a _Static_assert on every size.  Any
 * change bumps NTR_FORMAT_VERSION and docs/dump-format.md, byte by byte.
 */
#ifndef NTR_FORMAT_H
#define NTR_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define NTR_FORMAT_VERSION 2u /* 2: Python call sites (stack kinds, string table, PYTHREADS); CUDA graph records (GRAPH_*), comm replay counters; clock offset in the header, lateness in comm state, STRAGGLER and DEV_ARRIVE; single-writer blocks (block words, unused), fp derived by readers */

#define NTR_RING_MAGIC "NCTRRING" /* 8 bytes, no NUL stored */
#define NTR_DUMP_MAGIC "NCTRDUMP"

#define NTR_RING_DEFAULT_SLOTS 65536u /* NCCLTRACE_RING default, power of two */
#define NTR_COMM_MAX 256u             /* communicator slots per process */
#define NTR_COMM_RECENT 64u           /* per-communicator retention, power of two */
#define NTR_STACK_MAX 1024u           /* deduplicated stacks per process */
#define NTR_STACK_DEPTH 32u
#define NTR_PYSTACK_DROPPED 0xffffu   /* pystack_id: a Python call site not recorded, the stack table was full */
#define NTR_ENV_BYTES 8192u           /* NCCL_* / CUDA_* environment text */
#define NTR_BT_DEPTH 48u              /* fatal-signal backtrace frames */
#define NTR_SYM_BYTES 64u             /* bytes per symbolized frame name */
#define NTR_STR_BYTES 262144u         /* Python (file, function) string table */
#define NTR_PYTHREAD_MAX 100u         /* Python threads in a dump */
#define NTR_PYTHREAD_DEPTH 100u       /* frames per Python thread in a dump */

/* ---------------------------------------------------------------- kinds -- */

/* The tracer's own event kinds: X(KIND, value, name).  Values are on-disk
 * (append only, from NTR_KIND_FIRST_TRACER_EVENT); the name is what every
 * reader prints (recorder/names.h).
 *
 * CUDA graphs holding NCCL calls (interpose/graph.c, docs/dump-format.md):
 * one record per (graph, communicator), all with the same layout --
 * seq = the last captured collective seq of that comm in the graph,
 * u.buf.sendbuf = the first one, peer = how many NCCL calls of that comm it
 * holds, redop = enum ntr_kind of its first call, fp = the fingerprint of
 * its captured calls in order, aux = the graph id (the CUDA capture id of
 * the capture that made it), u.buf.recvbuf = the graph (CAPTURE,
 * GRAPH_DESTROY) or exec (INSTANTIATE, LAUNCH, EXEC_DESTROY) handle,
 * result = the CUDA call's result. */
#define NTR_EVENT_LIST(X)                                                                            \
  X(MARK, 64, "Mark")                 /* nccltrace_mark(): text = what, count = value */            \
  X(ASYNC_ERROR, 65, "AsyncError")    /* async error transition: aux = new ncclResult_t, result = old */ \
  X(TIMEOUT, 66, "Timeout")           /* watchdog: seq did not complete within NCCLTRACE_TIMEOUT */ \
  X(MISMATCH, 67, "Mismatch")         /* coordinator verdict: text = field, aux = other rank, seq */ \
  X(PEER_LOST, 68, "PeerLost")        /* coordinator: a rank's connection was lost; peer = that rank */ \
  X(SKEW, 69, "Skew")                 /* coordinator: a rank stayed behind; peer = that rank */     \
  X(ENV_DIFF, 70, "EnvDiff")          /* coordinator: NCCL_* differs; text = variable */            \
  X(SIGNAL, 71, "Signal")             /* signal received: aux = signo */                            \
  X(EXIT, 72, "Exit")                 /* process exit: aux = exit code */                           \
  X(DUMP, 73, "Dump")                 /* a dump was written: text = trigger */                      \
  X(STRICT_BLOCK, 74, "StrictBlock")  /* strict mode refused a call (returned ncclInvalidUsage) */  \
  X(NOTE, 75, "Note")                 /* free text from the tracer */                               \
  X(EXEC, 76, "Exec")                 /* exec family: ENTER text = path tail, count = path length;  \
                                         EXIT (failed): aux = errno */                              \
  X(GRAPH_CAPTURE, 77, "GraphCapture") /* EVENT: a capture ended; u.buf.stream = captured stream */ \
  X(GRAPH_INSTANTIATE, 78, "GraphInstantiate") /* EVENT: an exec made (or updated) from the graph;  \
                                                  count = graph handle */                           \
  X(GRAPH_LAUNCH, 79, "GraphLaunch")  /* CALL: a replay; count = replay number on this rank (1, 2, ...), \
                                         u.buf.stream = launch stream; completion as for collectives */ \
  X(GRAPH_DESTROY, 80, "GraphDestroy") /* EVENT: exec or graph destroyed; count = replays so far,   \
                                          dtype = 1 exec, 0 graph */                                \
  X(STRAGGLER, 81, "Straggler")       /* coordinator: peer = the late rank, aux = median lateness us, \
                                         count = late collectives, seq = window (0: one long stall; \
                                         then count = its seq) */                                   \
  X(DEV_ARRIVE, 82, "DeviceArrive")   /* watchdog: the stream reached collective seq (start event   \
                                         done) at tsc; count = tsc of the call, aux = ring position \
                                         of its CALL record */                                      \
  X(PROXY_OP, 83, "ProxyOp")          /* profiler plugin: NCCL's proxy works on one channel for an op; \
                                         ENTER start, EXIT stop (layout: docs/dump-format.md) */    \
  X(PROXY_STEP, 84, "ProxyStep")      /* profiler plugin: one network step of a proxy op; ENTER,   \
                                         EVENT (a state: aux), EXIT */                              \
  X(KERNEL_CH, 85, "KernelCh")        /* profiler plugin: the kernel on one channel; ENTER, EXIT */

/* Event kinds.  The NCCL ones come from recorder/nccl_api.def in table order;
 * the tracer's own events follow (NTR_EVENT_LIST).  Values are on-disk:
 * append only. */
enum ntr_kind {
  NTR_KIND_NONE = 0, /* a filler: a reserved position nobody wrote (ring.h) */
#define NT_COLL(name, KIND, ...) NTR_KIND_##KIND,
#define NT_P2P(name, KIND, ...) NTR_KIND_##KIND,
#define NT_GROUP(name, KIND, ...) NTR_KIND_##KIND,
#define NT_LIFE(name, KIND, ...) NTR_KIND_##KIND,
#include "nccl_api.def"
  NTR_KIND_FIRST_TRACER_EVENT = 64,
#define NTR_X_ENUM(KIND, value, name) NTR_KIND_##KIND = value,
  NTR_EVENT_LIST(NTR_X_ENUM)
#undef NTR_X_ENUM
  NTR_KIND_COUNT
};

/* Record phase: calls that may block record ENTER before and EXIT after. */
enum ntr_phase { NTR_PHASE_CALL = 0, NTR_PHASE_ENTER = 1, NTR_PHASE_EXIT = 2, NTR_PHASE_EVENT = 3 };

/* Record flags. */
enum ntr_record_flag {
  NTR_REC_NONBLOCKING = 1u << 0, /* communicator created with config.blocking = 0 */
  NTR_REC_CAPTURED = 1u << 1,    /* stream under CUDA graph capture: not evented */
  NTR_REC_IN_GROUP = 1u << 2,    /* issued inside ncclGroupStart/End */
  NTR_REC_COMPLETED = 1u << 3,   /* completion observed (tsc_done valid) */
  NTR_REC_NO_TRACKING = 1u << 4, /* completion tracking unavailable for this op */
  NTR_REC_STRICT_REFUSED = 1u << 5,
  NTR_REC_PLUGIN = 1u << 6,      /* written by the NCCL profiler plugin (interpose/profiler.c); comm
                                    state: a comm only the plugin saw */
};

/* Fingerprint op: ncclBcast and ncclBroadcast are the same operation. */
static inline unsigned ntr_kind_fp_op(unsigned kind) {
  return kind == NTR_KIND_BCAST ? (unsigned)NTR_KIND_BROADCAST : kind;
}

/* ---------------------------------------------------------- fingerprint -- */

/* The fingerprint hash of a record, derived from its fields by whoever
 * reads it (the recorder stores 0 in ntr_record.fp, so that the calling
 * thread does not pay for it).  A few multiplies: two dependent
 * rounds, not one per field: the small fields are packed into one word
 * first (op 8 bits, dtype 8, redop 16, root 32; a custom redop that differs
 * only above bit 15 would collide, which a 32-bit hash allows anyway).
 * The hash is informational (docs/wire-protocol.md): the exchange and the
 * tools compare the fields themselves.  Pure functions, any thread, signal
 * handlers included. */
static inline uint32_t ntr_fp_mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return (uint32_t)(h ^ (h >> 32));
}
static inline uint32_t ntr_fp_coll(unsigned kind, uint64_t count, int dtype, int redop, int root) {
  uint64_t packed = (uint64_t)(ntr_kind_fp_op(kind) & 0xffu) | (uint64_t)((uint32_t)dtype & 0xffu) << 8 |
                    (uint64_t)((uint32_t)redop & 0xffffu) << 16 | (uint64_t)(uint32_t)root << 32;
  return ntr_fp_mix(ntr_fp_mix(0x6e63636cull, packed), count);
}
static inline uint32_t ntr_fp_p2p(uint64_t seq, uint64_t count, int dtype, int peer, int dir) {
  uint64_t packed = (uint64_t)((uint32_t)dtype & 0xffu) | (uint64_t)(dir & 1) << 8 | (uint64_t)(uint32_t)peer << 32;
  return ntr_fp_mix(ntr_fp_mix(ntr_fp_mix(0x70327032ull, packed), count), seq);
}

/* --------------------------------------------------------------- record -- */

/* One event, 128 bytes (two cache lines).  Published seqlock-style:
 * the writer claims the slot (main ring: commit = NTR_COMMIT_WRITING; a
 * comm's recent[]: commit = 0), fills the body, then release-stores
 * commit = pos + 1 where pos is the free-running position it reserved.
 * A reader copies the slot between two loads of commit; the copy is valid
 * only if both loads are equal, neither 0 nor NTR_COMMIT_WRITING, and (for
 * the main ring) map to the slot's index.  commit therefore doubles as the
 * record's global position.  A main-ring slot whose commit is 0 was never
 * written.  A committed record of kind NTR_KIND_NONE is a filler: a position
 * that a writer reserved and never used, settled by a reader (ring.h); it
 * carries nothing and readers drop it. */
#define NTR_COMMIT_WRITING UINT64_MAX
struct ntr_record {
  uint64_t commit;    /* 0: never written (recent[]: or being written);
                         NTR_COMMIT_WRITING: being written; else position + 1 */
  uint64_t tsc;       /* time of the call (clock ticks, see ntr_clock) */
  uint64_t tsc_done;  /* completion time (watchdog writes it); valid only with NTR_REC_COMPLETED:
                         op records leave it as the slot had it, readers clear it */
  uint64_t comm_id;   /* 0 for records without a communicator */
  uint64_t count;     /* element count; MARK: value */
  union {
    struct {
      uint64_t sendbuf, recvbuf, stream;
    } buf;
    char text[24]; /* MARK/MISMATCH/ENV_DIFF/DUMP: NUL-padded, not always NUL-terminated */
  } u;
  uint64_t seq;       /* collective seq; SEND/RECV: per-(peer,direction) seq */
  uint16_t kind;      /* enum ntr_kind */
  uint8_t phase;      /* enum ntr_phase */
  uint8_t dtype;      /* ncclDataType_t, 0xff when none */
  int32_t redop;      /* ncclRedOp_t, -1 when none */
  int32_t rank;       /* rank in comm, -1 when none */
  int32_t nranks;     /* comm size, 0 when none */
  int32_t peer;       /* root for rooted collectives, peer for send/recv, -1 */
  int32_t result;     /* ncclResult_t returned (EXIT/CALL phases), -1 unknown */
  uint32_t tid;       /* kernel thread id of the caller */
  uint32_t group_id;  /* per-thread outermost group counter, 0 outside groups */
  uint16_t group_depth;
  uint16_t flags;     /* enum ntr_record_flag */
  uint32_t fp;        /* fingerprint hash: written 0; readers fill in ntr_record_fp(r) */
  uint16_t stack_id;  /* native stack (NCCLTRACE_STACKS): index+1 into the stack table, 0 = none */
  uint16_t pystack_id; /* Python call site: index+1 into the stack table, 0 = none */
  uint32_t prev_gap;  /* position - position of the previous record of the same comm written
                         by an application thread; 0: none or unknown (interpose/record.h) */
  uint64_t aux;       /* kind-specific: split color<<32|key, signal, exit code, error;
                         op CALL records leave it as the slot had it, readers clear it */
};
_Static_assert(sizeof(struct ntr_record) == 128, "record is two cache lines");

/* The fingerprint of an operation record (collective or point-to-point
 * CALL/ENTER), 0 for any other: what readers put in fp. */
static inline uint32_t ntr_record_fp(const struct ntr_record *r) {
  if (r->kind == NTR_KIND_SEND || r->kind == NTR_KIND_RECV)
    return ntr_fp_p2p(r->seq, r->count, r->dtype, r->peer, r->kind == NTR_KIND_RECV);
  switch (r->kind) {
#define NT_COLL(name, KIND, ...) case NTR_KIND_##KIND:
#include "nccl_api.def"
    return ntr_fp_coll(r->kind, r->count, r->dtype, r->redop, r->peer);
  default:
    return 0;
  }
}
_Static_assert(offsetof(struct ntr_record, seq) == 64, "record layout");
_Static_assert(offsetof(struct ntr_record, aux) == 120, "record layout");
_Static_assert(offsetof(struct ntr_record, stack_id) == 112, "record layout");
_Static_assert(offsetof(struct ntr_record, pystack_id) == 114, "stack_id and pystack_id: one word");
_Static_assert(offsetof(struct ntr_record, tid) == 96 && offsetof(struct ntr_record, group_depth) == 104 &&
               offsetof(struct ntr_record, fp) == 108, "record layout: the hot path stores 96..112 at once");
_Static_assert(offsetof(struct ntr_record, kind) == 72 && offsetof(struct ntr_record, dtype) == 75 &&
               offsetof(struct ntr_record, peer) == 88 && offsetof(struct ntr_record, result) == 92,
               "record layout: the hot path stores kind..dtype and peer..result as words");

/* ------------------------------------------------------------ comm state -- */

enum ntr_comm_lifecycle {
  NTR_COMM_FREE = 0,
  NTR_COMM_INIT = 1,      /* init entered, not returned (or ncclInProgress) */
  NTR_COMM_READY = 2,
  NTR_COMM_INIT_FAILED = 3,
  NTR_COMM_FINALIZING = 4,
  NTR_COMM_DESTROYED = 5,
  NTR_COMM_ABORTED = 6,
  NTR_COMM_REVOKED = 7,
};

/* Per-communicator state, in the ring mapping (so it survives SIGKILL).
 * The fields are written by the application thread (enqueue side) and the
 * watchdog (completion side); readers accept that a snapshot may be a few
 * nanoseconds stale. */
struct ntr_comm_state {
  uint64_t comm_id;
  uint64_t parent_id;      /* split/shrink parent, 0 otherwise */
  uint64_t handle;         /* ncclComm_t value in the writer's address space */
  int32_t rank, nranks;
  uint32_t lifecycle;      /* enum ntr_comm_lifecycle */
  int32_t async_error;     /* last ncclResult_t seen from ncclCommGetAsyncError */
  uint64_t coll_seq;       /* seq of the last collective issued (atomic): exact in a dump;
                              in a live or killed process's ring, as of the watchdog's last
                              poll (15 ms), the op records being the exact account */
  uint64_t last_enqueued;  /* seq of the last collective the real NCCL accepted */
  uint64_t last_completed; /* seq of the last collective known complete */
  uint64_t rec_count;      /* records of this comm written so far (atomic): recent[] index */
  uint64_t blocked_since;  /* tsc at which a thread entered a blocking call, 0 = none */
  uint32_t blocked_kind;   /* enum ntr_kind of that call */
  uint32_t blocked_tid;
  uint64_t last_enqueue_tsc;
  uint64_t last_complete_tsc;
  uint32_t flags;          /* NTR_REC_NONBLOCKING, ... */
  uint32_t init_kind;      /* which init created it (enum ntr_kind) */
  uint64_t aux;            /* split: color<<32|key; shrink: excluded count */
  uint64_t replays;        /* graph launches holding this comm's captured calls (atomic) */
  uint64_t replays_done;   /* of those, completed (watchdog) */
  /* Lateness as the coordinator measured it (async/strict checks), written
   * by the exchange client thread; 0 until the first report. */
  uint32_t late_med_us;    /* this rank's median arrival after the earliest rank, us */
  uint32_t late_window;    /* collectives that median covers */
  uint32_t late_last;      /* of those, how many this rank arrived last at */
  uint32_t late_reports;   /* lateness reports received (exchange client; atomic) */
  /* Counters for the metrics endpoint (interpose/metrics.c), written by
   * tracer threads only, never by a wrapper: */
  uint32_t mismatches;     /* MISMATCH verdicts received for this comm (exchange client; atomic) */
  uint32_t stalls;         /* watchdog timeouts of this rank and stall verdicts naming it (atomic) */
  uint64_t p2p_issued;     /* send/recv records the watchdog copied into recent[] (atomic) */
  uint64_t p2p_completed;  /* send/recv records the watchdog saw complete (atomic) */
  uint64_t bytes_issued;   /* count x dtype size of the op records it copied (atomic) */
  uint8_t reserved[8];
  struct ntr_record recent[NTR_COMM_RECENT]; /* last records of this comm, by rec_count & mask */
};
_Static_assert(offsetof(struct ntr_comm_state, recent) == 192, "comm state layout");
_Static_assert(sizeof(struct ntr_comm_state) == 192 + NTR_COMM_RECENT * 128, "comm state layout");

/* --------------------------------------------------------------- stacks -- */

/* One deduplicated stack, innermost frame first.  kind says what ip[]
 * holds: instruction pointers (native) or Python frames, each
 * NTR_PYFRAME(line, string-table offset) (see ntr_pystr below). */
enum ntr_stack_kind { NTR_STACK_NATIVE = 0, NTR_STACK_PYTHON = 1 };
struct ntr_stack {
  uint64_t hash;           /* 0 = free slot */
  uint32_t depth, kind;    /* enum ntr_stack_kind */
  uint64_t ip[NTR_STACK_DEPTH];
};
_Static_assert(sizeof(struct ntr_stack) == 16 + 8 * NTR_STACK_DEPTH, "stack layout");

/* A Python frame word: line (upper 32 bits, 0 = unknown) and offset + 1 of
 * its (file, function) entry in the string table (lower 32, 0 = unknown). */
static inline uint64_t ntr_pyframe(uint32_t line, uint32_t str_off1) {
  return (uint64_t)line << 32 | str_off1;
}
static inline uint32_t ntr_pyframe_line(uint64_t w) { return (uint32_t)(w >> 32); }
static inline uint32_t ntr_pyframe_str(uint64_t w) { return (uint32_t)w; }

/* String table entry, 4-byte aligned: the header, then file_len bytes of
 * the file name, a NUL, func_len bytes of the (qualified) function name, a
 * NUL.  Entries are appended, never changed; the used part of the table
 * (str_used bytes) is what a dump's STRINGS section holds.  Readers check
 * both lengths and both NULs against the table's end. */
struct ntr_pystr {
  uint16_t file_len, func_len;
};
#define NTR_PYSTR_FILE_MAX 240u
#define NTR_PYSTR_FUNC_MAX 120u

/* A Python thread's stack as a dump saw it (dump section PYTHREADS). */
enum ntr_pythread_flag {
  NTR_PYT_TRUNCATED = 1u << 0, /* more than NTR_PYTHREAD_DEPTH frames */
  NTR_PYT_DUMPER = 1u << 1,    /* the thread that wrote the dump */
};
struct ntr_pythread {
  uint32_t tid;            /* kernel thread id (native_thread_id), 0 unknown */
  uint32_t depth;          /* frames used, <= NTR_PYTHREAD_DEPTH */
  uint32_t flags;          /* enum ntr_pythread_flag */
  uint32_t reserved;
  uint64_t thread_id;      /* pthread_t of the thread (Python's threading.get_ident()) */
  char name[16];           /* /proc/self/task/<tid>/comm, NUL-padded */
  uint64_t frame[NTR_PYTHREAD_DEPTH]; /* ntr_pyframe words, innermost first */
};
_Static_assert(sizeof(struct ntr_pythread) == 40 + 8 * NTR_PYTHREAD_DEPTH, "pythread layout");

/* ------------------------------------------------------------- ring file -- */

enum ntr_proc_state { NTR_PROC_RUNNING = 0, NTR_PROC_EXITED = 1, NTR_PROC_SIGNALED = 2, NTR_PROC_EXEC = 3 };

/* Python call-site capture of the process (ring header py_state). */
enum ntr_py_state {
  NTR_PY_NONE = 0,        /* no Python in the process (or not looked yet) */
  NTR_PY_ON = 1,          /* call sites and thread stacks captured */
  NTR_PY_UNSUPPORTED = 2, /* a Python this version cannot read: capture off */
  NTR_PY_DISABLED = 3,    /* NCCLTRACE_PYSTACKS=0 */
};

/* Where a process's ring was placed (ring header ring_place;
 * recorder/ring_place.c).  Only a file survives the process: after a
 * SIGKILL, an anonymous ring is gone, and readers must not take the missing
 * evidence for a rank that never came. */
enum ntr_ring_place {
  NTR_PLACE_UNKNOWN = 0,  /* written before the field existed (the reserved word was 0) */
  NTR_PLACE_DIR = 1,      /* a file in NCCLTRACE_RING_DIR */
  NTR_PLACE_SIBLING = 2,  /* a file in a private sibling <dir>-XXXXXX (the directory was refused) */
  NTR_PLACE_FALLBACK = 3, /* a file in $TMPDIR (else /tmp)/nccltrace-<uid> or its private sibling */
  NTR_PLACE_ANON = 4,     /* anonymous memory: gone with the process */
};

/* The ring file: [header 16 KiB][comm table][stack table][strings][block words][slots].  Offsets are
 * absolute file offsets; readers validate each against file_size. */
struct ntr_ring_header {
  char magic[8];            /* NTR_RING_MAGIC */
  uint32_t version;         /* NTR_FORMAT_VERSION */
  uint32_t header_size;     /* sizeof(struct ntr_ring_header) */
  uint32_t record_size;     /* sizeof(struct ntr_record) */
  uint32_t slot_count;      /* power of two */
  uint32_t comm_max, comm_recent;
  uint32_t stack_max, stack_depth;
  uint64_t comm_offset, stack_offset, slot_offset, file_size;
  uint64_t head;            /* next position to reserve, free-running (atomic) */
  uint64_t dropped;         /* records not written (tracer errors) (atomic) */
  uint32_t comm_count;      /* comm slots handed out (atomic) */
  uint32_t stack_count;     /* stack slots used (atomic) */
  uint64_t unused;          /* positions never written: skipped blocks, the rest of released
                               ones (atomic; recorder/ring.h) */
  uint64_t block_offset;    /* block ownership words, block_count x uint64 (recorder/ring.h) */
  uint32_t block_count;     /* slot_count / block_positions */
  uint32_t block_positions; /* positions per block, a power of two */

  /* identity */
  int32_t pid, ppid;
  int32_t rank, local_rank, world_size, local_world_size; /* launcher vars, -1 unknown */
  int32_t nccl_version;     /* ncclGetVersion() of the loaded NCCL, 0 unknown */
  uint32_t proc_state;      /* enum ntr_proc_state */
  int32_t exit_code;        /* valid when EXITED */
  int32_t signo;            /* valid when SIGNALED */
  char host[64];
  char job_id[64];
  char tracer_version[16];
  char exe[128];            /* argv[0] / comm name of the process */

  /* clocks: ns = mono_base_ns + (tsc - tsc_base) * 1e9 / tsc_hz */
  uint64_t tsc_base, mono_base_ns, real_base_ns, tsc_hz;

  /* fatal-signal backtrace of the faulting thread, written by the handler */
  uint32_t bt_depth, bt_signo;
  uint32_t bt_tid;
  uint32_t ring_place;      /* enum ntr_ring_place: where this ring lived (0: a writer before the field) */
  uint64_t bt_ip[NTR_BT_DEPTH];
  char bt_sym[NTR_BT_DEPTH][NTR_SYM_BYTES]; /* "func+0xoff" */

  /* environment: "NAME=VALUE\0NAME=VALUE\0...", NCCL_*, CUDA_* and launcher ranks only */
  uint32_t env_len;
  uint32_t dumps_written;   /* dumps renamed into place (atomic; signal-safe add) */
  char env[NTR_ENV_BYTES];

  /* Python: string table of the Python stacks (ntr_pystr entries) */
  uint64_t str_offset;      /* absolute file offset */
  uint32_t str_size;        /* NTR_STR_BYTES */
  uint32_t str_used;        /* bytes handed out (atomic); may pass str_size for a moment */
  uint32_t py_version;      /* PY_VERSION_HEX of the interpreter seen, 0 none */
  uint32_t py_state;        /* enum ntr_py_state */
  /* Clock offset to the coordinator (check async/strict), from the round
   * trip with the smallest RTT: coordinator realtime = this realtime -
   * clock_offset_ns, within +-clock_uncert_ns.  clock_samples 0: none yet.
   * Written by the exchange client thread (plain stores; clock_samples
   * last, release). */
  int64_t clock_offset_ns;
  uint64_t clock_uncert_ns;
  uint64_t clock_sync_tsc;  /* when the estimate was taken (tsc) */
  uint32_t clock_samples;   /* round trips the estimate chose from */
  uint32_t py_sites_dropped; /* Python call sites not recorded: the stack table was full
                               (atomic; each record of one says NTR_PYSTACK_DROPPED) */
};
/* The header occupies the first NTR_RING_HEADER_BYTES of the file; the comm
 * table starts at comm_offset (>= that). */
#define NTR_RING_HEADER_BYTES 16384u
_Static_assert(sizeof(struct ntr_ring_header) <= NTR_RING_HEADER_BYTES, "ring header fits its pages");
_Static_assert(sizeof(struct ntr_ring_header) % 8 == 0, "ring header alignment");

/* Live words of a ring file, after the header struct inside its 16 KiB:
 * what only a live reader of the file needs (the metrics endpoint reads
 * them from the rings of its job's other processes).  Zero in files made
 * before they existed; not part of the header a dump copies. */
struct ntr_ring_live {
  uint32_t tracer_cpu_ms;   /* CPU time of the tracer's own threads, ms, refreshed every
                               second by the metrics thread (NCCLTRACE_METRICS); 0 without */
  uint32_t reserved;
};
#define NTR_RING_LIVE_OFFSET ((sizeof(struct ntr_ring_header) + 63u) & ~(size_t)63u)
_Static_assert(NTR_RING_LIVE_OFFSET + sizeof(struct ntr_ring_live) <= NTR_RING_HEADER_BYTES,
               "the live words fit the header's pages");

/* ----------------------------------------------------------------- dump -- */

/* A dump file: a fixed 64-byte preamble, then one zstd frame holding a
 * sequence of sections.  checksum = XXH64 of the uncompressed payload. */
struct ntr_dump_preamble {
  char magic[8];            /* NTR_DUMP_MAGIC */
  uint32_t version;         /* NTR_FORMAT_VERSION */
  uint32_t preamble_size;   /* 64 */
  uint64_t payload_size;    /* uncompressed bytes */
  uint64_t compressed_size; /* bytes of the zstd frame that follows */
  uint64_t checksum;        /* XXH64(payload, seed 0) */
  uint32_t section_count;
  uint32_t flags;           /* bit 0: payload stored raw (compression failed) */
  uint8_t reserved[16];
};
_Static_assert(sizeof(struct ntr_dump_preamble) == 64, "dump preamble");

enum ntr_section_type {
  NTR_SEC_HEADER = 1,   /* struct ntr_ring_header (as of the dump) */
  NTR_SEC_COMMS = 2,    /* comm_count x struct ntr_comm_state */
  NTR_SEC_STACKS = 3,   /* stack_count x struct ntr_stack */
  NTR_SEC_RECORDS = 4,  /* n x struct ntr_record, oldest first, deduplicated */
  NTR_SEC_TRIGGER = 5,  /* struct ntr_trigger */
  NTR_SEC_PYTHREADS = 6, /* n x struct ntr_pythread: every Python thread at the dump */
  NTR_SEC_STRINGS = 7,  /* the used part of the string table (ntr_pystr entries), zero-padded to 8 */
};

struct ntr_section {
  uint32_t type;        /* enum ntr_section_type */
  uint32_t reserved;
  uint64_t length;      /* bytes that follow this section header */
};
_Static_assert(sizeof(struct ntr_section) == 16, "section header");

/* Every dump trigger: X(KIND, value, name, file tag).  The name is what the
 * tracer's DUMP event, `nccltrace decode` and the JSON say; the file tag ends
 * the dump's file name (a signal's own name takes its place when known). */
#define NTR_TRIGGER_LIST(X)                                  \
  X(EXIT, 1, "exit", "exit")                                 \
  X(SIGNAL, 2, "signal", "signal")                           \
  X(FATAL_SIGNAL, 3, "fatal_signal", "fatal")                \
  X(TIMEOUT, 4, "timeout", "timeout")                        \
  X(ASYNC_ERROR, 5, "async_error", "async_error")            \
  X(ABORT, 6, "abort", "abort")                              \
  X(MISMATCH, 7, "mismatch", "mismatch")                     \
  X(PEER_LOST, 8, "peer_lost", "peer_lost")                  \
  X(USER, 9, "user", "user")                                 \
  X(COLLECTED, 10, "collected", "collected")                 \
  X(SIGUSR1, 11, "sigusr1", "sigusr1")

enum ntr_trigger_kind {
#define NTR_X_ENUM(k, v, name, tag) NTR_TRIG_##k = v,
  NTR_TRIGGER_LIST(NTR_X_ENUM)
#undef NTR_X_ENUM
};

/* Every signal a reader or the tracer names: X(SIGNAME, file tag).  The
 * on-disk fields (ntr_trigger.signo, bt_signo, SIGNAL's aux, the header's
 * signo) hold the writer's Linux signal numbers, so a consumer expands the
 * list where <signal.h> gives SIGNAME its number (recorder/names.h).  The
 * name ("SIGSEGV") is what the tracer's SIGNAL event and the tools print,
 * the tag ends a signal dump's file name.  Which signals the tracer handles
 * is interpose/signals.c's choice, not this list's. */
#define NTR_SIGNAL_LIST(X)                                                     \
  X(SIGHUP, "sighup")                                                          \
  X(SIGINT, "sigint")                                                          \
  X(SIGQUIT, "sigquit")                                                        \
  X(SIGILL, "sigill")                                                          \
  X(SIGTRAP, "sigtrap")                                                        \
  X(SIGABRT, "sigabrt")                                                        \
  X(SIGBUS, "sigbus")                                                          \
  X(SIGFPE, "sigfpe")                                                          \
  X(SIGKILL, "sigkill")                                                        \
  X(SIGUSR1, "sigusr1")                                                        \
  X(SIGSEGV, "sigsegv")                                                        \
  X(SIGUSR2, "sigusr2")                                                        \
  X(SIGPIPE, "sigpipe")                                                        \
  X(SIGALRM, "sigalrm")                                                        \
  X(SIGTERM, "sigterm")                                                        \
  X(SIGXCPU, "sigxcpu")                                                        \
  X(SIGXFSZ, "sigxfsz")                                                        \
  X(SIGSYS, "sigsys")

struct ntr_trigger {
  uint32_t kind;        /* enum ntr_trigger_kind */
  int32_t signo;        /* when a signal */
  int32_t exit_code;    /* when EXIT */
  uint32_t flags;       /* NTR_TRIG_F_*; 0 in dumps of writers before this field, whose word was reserved and 0 */
  uint64_t tsc;         /* when the dump was taken */
  uint64_t lost;        /* records overwritten in the main ring before the dump */
  char reason[96];      /* human text */
};
_Static_assert(sizeof(struct ntr_trigger) == 128, "trigger layout");
/* A COLLECTED dump made from the ring of a process that was still running
 * (`nccltrace bundle`): a snapshot, tsc the moment it was taken; readers
 * treat the process as alive then, not vanished. */
#define NTR_TRIG_F_ALIVE 1u

/* ------------------------------------------------ run exit-status file -- */

/* What a launcher saw: `nccltrace run` writes one per command it started,
 * in the dump directory, once that command has ended (docs/dump-format.md
 * "Exit-status file").  Text, not binary: lines "KEY VALUE\n", the first
 * one NTR_RUNEXIT_MAGIC, the whole file at most NTR_RUNEXIT_MAX bytes.
 * Keys: host, pid (the command's), ppid (nccltrace run's), rank (the
 * launcher rank in run's environment, -1 none), job, exe (the command's
 * file name), start_ns, end_ns (realtime), and one of "exited CODE" or
 * "signaled SIGNO".  Readers (tools/analyze/runexit.c) treat it as hostile:
 * unknown keys are skipped, a value out of range or a missing status makes
 * the file unreadable, never a guess.  Name:
 * nccltrace-<job>-<host>-<pid>.exit (fields as in dump names; <job> the id
 * the command's evidence carries, tools/run_job.c), written as .<name>.tmp
 * with the dumps' mode and renamed. */
#define NTR_RUNEXIT_MAGIC "nccltrace-run-exit 1"
#define NTR_RUNEXIT_SUFFIX ".exit"
#define NTR_RUNEXIT_MAX 4096u

#endif /* NTR_FORMAT_H */
