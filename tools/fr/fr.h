/* fr.h -- PyTorch Flight Recorder (FR) dumps as evidence for `nccltrace
 * analyze` (docs/analyze.md "PyTorch Flight Recorder dumps"): the files
 * ProcessGroupNCCL writes on a watchdog timeout (TORCH_NCCL_TRACE_BUFFER_SIZE
 * or TORCH_FR_BUFFER_SIZE, TORCH_NCCL_DUMP_ON_TIMEOUT), one per rank, in
 * either of the forms it writes: a pickle (the default) or JSON.
 *
 * pickle.c: a small decoder of the pickle opcodes such a file holds (the
 * data opcodes of protocols 2 to 5: dicts, lists, tuples, str, int, float,
 * None, bool), into jansson values.  It is no Python interpreter: every
 * opcode that would import or call anything (GLOBAL, STACK_GLOBAL, REDUCE,
 * BUILD, INST, OBJ, NEWOBJ, ...) is refused, naming it and its offset.
 * dump.c: such a value (or a JSON file's) checked field by field into an
 * ntf_dump; the file recognised by its first bytes; every version FR has
 * written since PyTorch 2.4 ("2.3" to "2.10").
 *
 * Both read hostile input: every size, count and depth is bounded, and a
 * load never takes more memory than the limit it is given (analyze's
 * --max-memory).
 *
 * Thread-safety: no shared state; one dump is not shared while loading.
 * Not signal-safe (allocates).
 */
#ifndef NTF_FR_H
#define NTF_FR_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/* Decoder bounds: no real FR dump comes near them. */
#define NTF_MAX_DEPTH 32         /* nested containers */
#define NTF_MAX_STACK (1u << 20) /* values on the pickle stack and memo */
#define NTF_MAX_STR (1u << 20)   /* bytes in one string */

/* Decode the pickle buf[0..len) into *out (a new reference).  limit: bytes
 * the decoded values may take at most (an estimate per value plus string
 * bytes).  @return 0, or -1 with a one-line reason in err naming the
 * offset ("GLOBAL (opcode 'c') at offset 12: not read: ..."). */
int ntf_pickle_decode(const uint8_t *buf, size_t len, uint64_t limit, json_t **out, char *err, size_t errlen);

enum ntf_form { NTF_PICKLE = 1, NTF_JSON = 2 };
/* Does a file starting with these bytes look like an FR dump?  A pickle
 * (protocol 2..5) whose first value is a dict, or a JSON object.
 * @return its form, 0 when it is neither. */
int ntf_sniff(const uint8_t *head, size_t n);

enum ntf_state { NTF_SCHEDULED = 0, NTF_STARTED = 1, NTF_COMPLETED = 2 };

#define NTF_FRAMES 4             /* Python frames kept per entry: the innermost outside torch */

struct ntf_frame {
  char file[128];                /* the path's last 127 bytes */
  char func[64];
  int line;
};

/* One entry of the FR ring: a collective or p2p op, as FR saw it. */
struct ntf_entry {
  int64_t record_id, pg_id;
  char pg_name[64], pg_desc[64]; /* process_group: (name, desc) */
  uint64_t coll_seq, p2p_seq, op_id;
  char op[48];                   /* profiling_name without its "nccl:" */
  int is_p2p;                    /* is_p2p, or told by op (send/recv) */
  int p2p_dir;                   /* 0 send, 1 recv, -1 neither */
  int peer;                      /* the other global rank of a send/recv ("0->1"), -1 unknown */
  int self;                      /* this side's global rank as the name says, -1 unknown */
  int64_t in_numel, out_numel;   /* elements over every input / output tensor, -1 unknown */
  char in_sizes[64], out_sizes[64]; /* "[[4, 8]]", cut */
  char dtype[16];                /* first input dtype ("Float"), "" none */
  int ndtypes_differ;            /* the inputs' dtypes are not all the same */
  enum ntf_state state;
  uint64_t t_created, t_started, t_completed; /* wall clock ns, 0 unknown */
  int64_t timeout_ms;            /* -1 unknown */
  int retired;
  struct ntf_frame frames[NTF_FRAMES]; /* innermost outside torch first */
  int nframes;
};

/* A process group this rank belongs to (pg_config, pg_status). */
struct ntf_pg {
  char name[64], desc[64];
  int *ranks;                    /* global ranks, in group-rank order */
  int nranks;
  int has_status;
  int64_t last_enqueued, last_started, last_completed; /* -1 none */
};

struct ntf_dump {
  char path[4096];
  enum ntf_form form;
  int rank;                      /* global rank: the number the file name ends in, -1 none */
  char version[16];
  int major, minor;
  uint64_t mtime_ns;             /* when the file was written (its mtime) */
  struct ntf_pg *pgs;
  int npgs;
  struct ntf_entry *e;           /* in record order */
  int ne;
  int skipped;                   /* entries refused (a field of the wrong type), counted */
};

/* Check the decoded value root into d (path, form, rank set by the caller
 * or left).  @return 0, or -1 with why (not an FR dump, a version this
 * reader does not know). */
int ntf_dump_from_json(json_t *root, struct ntf_dump *d, char *err, size_t errlen);
/* Decode buf (of the given form) and check it: ntf_pickle_decode or
 * json_loadb, then ntf_dump_from_json.  @return 0, or -1 with why. */
int ntf_dump_parse(const uint8_t *buf, size_t len, enum ntf_form form, uint64_t limit, struct ntf_dump *d,
                   char *err, size_t errlen);
/* The global rank a file name ends in ("rank_3", "nccl_trace_rank_12"),
 * -1 when it ends in no number. */
int ntf_rank_of_name(const char *path);
void ntf_dump_free(struct ntf_dump *d);
#endif
