/* graph.h -- CUDA graphs that hold NCCL calls: what was captured, which
 * graph and exec it became, and a record plus a completion event for every
 * launch (graph.c); the interposed CUDA entry points (cuda_graph.c).
 *
 * Thread-safety: captures, graph and exec tables are changed under one
 * mutex (capture, end of capture, instantiate, update, destroy: none of
 * them is a hot path); the launch path reads the exec table without a
 * lock (open addressing over a fixed array, acquire loads) and takes one
 * atomic per launch of an exec that holds NCCL calls.  Entries are pooled,
 * never freed: a lookup racing a destroy reads a stale but valid entry.
 * Signal-safety: none of this runs in a signal handler.
 *
 * No CUDA or NCCL header here: cuda_graph.c defines the CUDA entry points
 * with its own (ABI-equal) prototypes and must not see the real ones.
 */
#ifndef NTI_GRAPH_H
#define NTI_GRAPH_H
#include <stdint.h>

#define NTI_GRAPH_COMMS 8      /* communicators tracked per graph */
#define NTI_GRAPH_MAX 1024     /* graphs holding NCCL calls alive at once */
#define NTI_GMAP_SLOTS 8192u   /* handle -> graph entry, power of two, > 4 x NTI_GRAPH_MAX */
#define NTI_GMAP_TOMB ((uintptr_t)1)

struct nti_graph;
struct nti_gmap_slot {
  uintptr_t key;            /* graph or exec handle (atomic); 0 empty, NTI_GMAP_TOMB removed */
  struct nti_graph *val;    /* (atomic) */
};
extern struct nti_gmap_slot nti_exec_map[NTI_GMAP_SLOTS];
/* Execs in the table: 0 for a program whose graphs hold no NCCL call, so
 * its launches skip even the probe (relaxed: a racing instantiate is a
 * program bug anyway, the launch must follow it). */
extern uint32_t nti_exec_count;

static inline uint32_t nti_gmap_slot_of(uintptr_t key) {
  uint64_t h = (uint64_t)key * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(h >> 40) & (NTI_GMAP_SLOTS - 1);
}
/* Lock-free, allocation-free lookup of an exec: the whole cost a launch of
 * a graph without NCCL calls pays.  NULL when unknown. */
static inline struct nti_graph *nti_graph_exec_find(const void *exec) {
  uintptr_t key = (uintptr_t)exec;
  if (key <= NTI_GMAP_TOMB || !__atomic_load_n(&nti_exec_count, __ATOMIC_RELAXED))
    return 0;
  uint32_t i = nti_gmap_slot_of(key);
  for (uint32_t n = 0; n < NTI_GMAP_SLOTS; n++, i = (i + 1) & (NTI_GMAP_SLOTS - 1)) {
    /* Acquire pairs with the release store of key in gmap_put (graph.c). */
    uintptr_t k = __atomic_load_n(&nti_exec_map[i].key, __ATOMIC_ACQUIRE);
    if (k == key)
      return __atomic_load_n(&nti_exec_map[i].val, __ATOMIC_RELAXED);
    if (k == 0)
      return 0;
  }
  return 0;
}

/* One launch in flight: its records, one per communicator of the graph. */
struct nti_graph_launch {
  struct nti_graph *e;
  int n;                      /* records written (0: not traced) */
  uint64_t replay, tsc;
  uint64_t pos[NTI_GRAPH_COMMS];
};

/* 1: pass straight through (tracing off or disabled, or nested in one of
 * our wrappers). */
int nti_graph_skip(void);
/* Before cudaStreamEndCapture: the capture id when a capture holding NCCL
 * calls is open anywhere, else 0 (no driver call at all). */
uint64_t nti_graph_end_pre(void *stream);
void nti_graph_end_post(void *stream, uint64_t cid, void *graph, int rc);
void nti_graph_instantiated(void *exec, void *graph, int rc);
/* Records of the launch (before the real call) and its results, counters
 * and completion events (after). */
void nti_graph_launch_pre(struct nti_graph *e, void *exec, void *stream, struct nti_graph_launch *l);
void nti_graph_launch_post(struct nti_graph_launch *l, void *stream, int rc);
void nti_graph_exec_destroyed(void *exec);
void nti_graph_destroyed(void *graph);
void nti_graph_updated(void *exec, void *graph, int rc);
void nti_graph_cloned(void *clone, void *orig, int rc);
void nti_graph_child_added(void *parent, void *child, int rc);

struct nti_comm;
/* The records [pos_first, pos] of this thread's op or group on
 * (c, stream) were captured: join them to their capture's graph entry, mark
 * them captured with the capture id. */
void nti_graph_note_captured(struct nti_comm *c, void *stream, uint64_t pos_first, uint64_t pos);
#endif
