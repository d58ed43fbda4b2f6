/* tools/reader.h -- the tools' reader (tools/reader*.c, tools/names.c):
 * load a ring file (live or left behind) or a dump into memory, validating
 * everything, since rings and dumps are hostile input; or read only a
 * file's identity, for callers that must group many files before loading
 * any of them whole (`nccltrace analyze`).
 *
 * Thread-safety: independent images may be loaded from different threads
 * (no shared state); one image is not shared while being loaded.  Not
 * signal-safe (allocates).
 */
#ifndef NTT_READER_H
#define NTT_READER_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "recorder/format.h"

struct ntt_image {
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
int ntt_image_load(const char *path, int salvage, struct ntt_image *img, char *err, size_t errlen);
/* Same from memory (fuzzers); name is used in messages. */
int ntt_image_load_mem(const void *buf, size_t len, const char *name, int salvage,
                       struct ntt_image *img, char *err, size_t errlen);
void ntt_image_free(struct ntt_image *img);

/* A Python frame word of img (ntr_pyframe) resolved: file and function
 * point into img->strs (NUL-terminated, not yet escaped).  @return 0, or -1
 * when the word names no valid entry (then both are "?"). */
int ntt_image_pyframe(const struct ntt_image *img, uint64_t word, const char **file,
                      const char **func, uint32_t *line);

/* Names for the tools: recorder/names.h, and "kind#99"-style names for
 * values it does not know. */
const char *ntt_kind_name(unsigned kind);       /* "AllReduce", "Send", "CommInitRank", "Mark" */
const char *ntt_dtype_name(unsigned dtype);     /* "float32", "bfloat16", ... */
const char *ntt_redop_name(int redop);          /* "sum", "prod", "max", "min", "avg", "premulsum#5" */
const char *ntt_result_name(int result);        /* "ncclSuccess", "ncclRemoteError", ... */
int ntt_kind_is_collective(unsigned kind);
int ntt_kind_is_p2p(unsigned kind);
uint64_t ntt_image_ns(const struct ntt_image *img, uint64_t tsc); /* realtime ns */

/* Read the ring header of a ring file or dump (format detected by magic)
 * without reading its records: for a dump, only as much of the zstd frame
 * as it takes to reach the HEADER section.  As lenient as a --salvage load
 * (string fields terminated, counts clamped), so every file that loads at
 * all also peeks; the reverse need not hold.
 * @return 0, or -1 with a one-line reason in err. */
int ntt_image_peek(const char *path, struct ntr_ring_header *hdr, char *err, size_t errlen);
/* ntt_image_peek, and *need: the bytes a load of the file may allocate at
 * most (the file read into memory, a dump's payload as far as its header's
 * geometry allows, a ring's windows and records), so that a caller can
 * budget memory before loading.  Set (to the file size) even when the
 * header cannot be read. */
int ntt_image_probe(const char *path, struct ntr_ring_header *hdr, uint64_t *need, char *err, size_t errlen);

/* The file the calling thread's next opens must be (device and inode, as
 * a directory listing saw it; NULL: any).  A caller that judged a file by
 * its stat (analyze: its owner) makes the reader refuse another file put
 * under the same name in between.  Thread-local: set before, cleared
 * after, on the thread that reads. */
void ntt_input_expect(dev_t dev, ino_t ino, int on);

/* A buffer a caller keeps across loads (one per thread, per image it
 * holds at once) so that a dump is decompressed in one call straight into
 * memory that is already mapped.  Zero-initialize; ntt_loadbuf_free. */
struct ntt_loadbuf {
  unsigned char *p;
  size_t cap;
};
void ntt_loadbuf_free(struct ntt_loadbuf *lb);

/* Strict ntt_image_load that may decompress a valid dump into lb: then
 * *borrowed = 1 and img->recs points into lb->p -- valid until lb is used
 * again or freed; set img->recs = NULL before ntt_image_free.  Otherwise
 * (a ring, an unusual or damaged dump) exactly ntt_image_load's result,
 * *borrowed = 0.  @return 0, or -1 with a reason in err. */
int ntt_image_load_buf(const char *path, struct ntt_image *img, struct ntt_loadbuf *lb, int *borrowed, char *err,
                       size_t errlen);
#endif
