/* reader.h -- load a ring file (live or left behind) or a dump into memory,
 * validating everything: rings and dumps are hostile input.
 *
 * Thread-safety: independent images may be loaded from different threads;
 * one image is not shared while being loaded.  Not signal-safe (allocates).
 */
#ifndef NTR_READER_H
#define NTR_READER_H
#include <stddef.h>
#include <stdint.h>
#include "recorder/format.h"

struct ntr_image {
  char path[4096];
  int is_dump;                  /* 1: dump file, 0: ring file */
  int pid_alive;                /* ring of a process still running on this host */
  struct ntr_ring_header hdr;   /* identity, clocks, env, backtrace */
  struct ntr_comm_state *comms; /* ncomms entries (recent[] included) */
  uint32_t ncomms;
  struct ntr_stack *stacks;
  uint32_t nstacks;
  char *strs;                   /* Python string table (ntr_pystr entries), str_len bytes */
  uint32_t str_len;
  struct ntr_pythread *pythreads; /* dumps: every Python thread's stack at the dump */
  uint32_t npythreads;
  struct ntr_record *recs;      /* committed records, oldest first, deduplicated by position */
  uint64_t nrecs;
  int has_trigger;
  struct ntr_trigger trigger;   /* dumps only */
  uint64_t lost;                /* records overwritten before the snapshot */
  uint64_t torn;                /* slots skipped: being written or torn */
  int salvaged;                 /* 1 when --salvage skipped damaged parts */
};

/* Load PATH (format detected by magic).  salvage: keep what is intact past
 * damage instead of failing.  @return 0, or -1 with a one-line reason in err
 * ("truncated: header says 8413184 bytes, file has 4096", ...). */
int ntr_image_load(const char *path, int salvage, struct ntr_image *img, char *err, size_t errlen);
/* Same from memory (fuzzers); name is used in messages. */
int ntr_image_load_mem(const void *buf, size_t len, const char *name, int salvage,
                       struct ntr_image *img, char *err, size_t errlen);
void ntr_image_free(struct ntr_image *img);

/* A Python frame word of img (ntr_pyframe) resolved: file and function
 * point into img->strs (NUL-terminated, not yet escaped).  @return 0, or -1
 * when the word names no valid entry (then both are "?"). */
int ntr_image_pyframe(const struct ntr_image *img, uint64_t word, const char **file,
                      const char **func, uint32_t *line);

/* Names for the tools (from recorder/nccl_api.def and nccl.h values). */
const char *ntr_kind_name(unsigned kind);       /* "AllReduce", "Send", "CommInitRank", "Mark" */
const char *ntr_dtype_name(unsigned dtype);     /* "float32", "bfloat16", ... */
const char *ntr_redop_name(int redop);          /* "sum", "prod", "max", "min", "avg", "premulsum#5" */
const char *ntr_result_name(int result);        /* "ncclSuccess", "ncclRemoteError", ... */
int ntr_kind_is_collective(unsigned kind);
int ntr_kind_is_p2p(unsigned kind);
uint64_t ntr_image_ns(const struct ntr_image *img, uint64_t tsc); /* realtime ns */
#endif
