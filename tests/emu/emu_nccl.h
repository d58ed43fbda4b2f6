/* emu_nccl.h -- internals of the emulator's libnccl.so.2.
 *
 * Thread-safety: a communicator may be used from several threads; its
 * sequence counters are assigned under comm->mu at launch (outermost group
 * end), its state flags are atomics.  Group state is thread-local, as in
 * NCCL.  Stream work (emu_nccl_proto.c) runs on the stream worker threads of
 * libcuda.so.1 and only touches a communicator through atomics and the
 * shared-memory area.  Nothing here is async-signal-safe.
 *
 * Cross-process model: every communicator has one POSIX shared-memory
 * segment named from the ncclUniqueId (children of split/shrink derive
 * their name from the parent's).  Its all-zero state is a valid initial
 * state, so every rank can create-or-open it without a creator role.  It
 * holds the bootstrap area (pids, join counter), a control exchange used by
 * ncclCommSplit, one mailbox per (collective slot, rank) and one mailbox per
 * ordered (sender, receiver) pair.  All waits are futex waits on `bell`,
 * which every state change increments.
 */
#ifndef EMU_NCCL_H
#define EMU_NCCL_H

#include "emu_core.h"

#include <nccl.h>
#include <stdbool.h>

#define EMU_MAX_RANKS 64
#define EMU_SLOTS 4                   /* collectives a rank may run ahead */
#define EMU_CHUNK (64 * 1024)         /* payload bytes per mailbox post */
#define EMU_SHM_MAGIC 0x4e43454d55310000ull   /* "NCEMU1" */
#define EMU_ID_MAGIC "NCCLEMU1"
#define EMU_MAX_USER_OPS 32
#define EMU_MAX_FAULTS 8

/* Collective kinds in mailbox descriptors (Bcast is posted as Broadcast:
 * the same protocol). */
enum emu_kind {
  EMU_K_NONE = 0,
  EMU_K_ALLREDUCE, EMU_K_BROADCAST, EMU_K_REDUCE, EMU_K_ALLGATHER,
  EMU_K_REDUCESCATTER, EMU_K_ALLTOALL, EMU_K_GATHER, EMU_K_SCATTER,
  EMU_K_SEND, EMU_K_RECV
};

struct emu_desc {
  int32_t kind, dtype, redop, root;
  uint64_t count;
};

/* A mailbox: the poster waits until acks == readers (previous post fully
 * consumed), writes desc and data, sets readers/acks, then release-stores
 * tag.  A reader acquire-loads tag, reads, then increments acks. */
struct emu_mbox {
  _Atomic uint64_t tag;
  _Atomic uint32_t readers;
  _Atomic uint32_t acks;
  struct emu_desc desc;
  uint64_t bytes;
  char pad[64 - 8 - 8 - sizeof(struct emu_desc) - 8];
  char data[EMU_CHUNK];
};
_Static_assert(sizeof(struct emu_mbox) == 64 + EMU_CHUNK, "mailbox layout");

struct emu_ctrl {
  _Atomic uint32_t tag;   /* n-th control exchange of this rank */
  _Atomic uint32_t ack;   /* it has read exchange n */
  int32_t color, key;
};

struct emu_shm {
  _Atomic uint64_t magic;        /* EMU_SHM_MAGIC once a rank has joined */
  _Atomic uint32_t nranks;      /* set by the first joiner */
  _Atomic uint32_t joined;      /* futex word: join counter */
  _Atomic uint32_t bell;        /* futex word: any state change */
  _Atomic uint32_t unlinked;
  _Atomic int32_t pid[EMU_MAX_RANKS];
  struct emu_ctrl ctrl[EMU_MAX_RANKS];
  /* p2p connection requests, never cleared (a connection stays):
   * p2p_want[0][a][b]: rank a has asked to connect for sending to b;
   * p2p_want[1][a][b]: rank a has asked to connect for receiving from b.
   * a -> b is connected once both [0][a][b] and [1][b][a] are set. */
  _Atomic uint8_t p2p_want[2][EMU_MAX_RANKS][EMU_MAX_RANKS];
  /* coll_reg[r]: collective registrations (windows, device comms) rank r
   * has posted; the n-th completes once every rank posted n (emu_nccl_dev.c). */
  _Atomic uint32_t coll_reg[EMU_MAX_RANKS];
  /* followed at emu_shm_coll_off by mailboxes */
};

static inline size_t emu_shm_coll_off(void) { return (sizeof(struct emu_shm) + 4095) & ~(size_t)4095; }

static inline size_t emu_shm_size(int nranks)
{
  return emu_shm_coll_off() + (size_t)(EMU_SLOTS * nranks + nranks * nranks) * sizeof(struct emu_mbox);
}

struct emu_fault {
  int kind;        /* 1 stall, 2 async_error, 3 delay, 4 slow (every collective),
                      5 kill_recv (SIGKILL after `value` posts of recv #n from any peer) */
  uint64_t n;
  int value;       /* ncclResult_t for async_error, ms for delay */
};

struct emu_user_op {
  int used;
  int dtype;
  int residence;
  unsigned char value[8];   /* immediate scalar */
  const void *ptr;          /* device-resident scalar */
};

/* The real libnccl.so.2 exports pncclX GLOBAL and ncclX WEAK at the same
 * address (profiling names, as MPI's PMPI): define pncclX, then this. */
#define EMU_ALIAS(name) \
  extern __typeof__(p##name) name __attribute__((weak, alias("p" #name), visibility("default")));

#define EMU_COMM_MAGIC 0x636f6d6d454d5531ull

struct ncclComm {
  _Atomic uint64_t magic;        /* EMU_COMM_MAGIC while the handle is valid */
  _Atomic int refs;               /* handle + each op in flight */
  int rank, nranks, device, blocking;
  char name[64];                  /* shm name, "/ncclemu-..." */
  struct emu_shm *shm;
  size_t map_len;
  _Atomic int async_err;          /* ncclResult_t */
  _Atomic int aborted;            /* cancel everything, handle gone */
  _Atomic int revoked;            /* cancel everything, handle valid */
  _Atomic int ready;              /* init finished successfully */
  _Atomic int suspended;          /* between ncclCommSuspend and ncclCommResume */
  _Atomic uint64_t done_seq;      /* last collective finished locally */
  _Atomic uint64_t inflight;      /* ops enqueued, not finished */
  pthread_mutex_t mu;             /* seq counters, user ops, finalize cv */
  pthread_cond_t cv;
  uint64_t coll_seq;
  uint64_t send_seq[EMU_MAX_RANKS], recv_seq[EMU_MAX_RANKS];
  /* Last send/recv with each peer fully posted/consumed: the mailbox of a
   * pair carries one message at a time, in order. */
  _Atomic uint64_t send_done[EMU_MAX_RANKS], recv_done[EMU_MAX_RANKS];
  /* p2p_conn[0][p]: connected for sending to p; [1][p]: for receiving
   * from p.  Only the thread using the comm touches it (NCCL's rule). */
  bool p2p_conn[2][EMU_MAX_RANKS];
  uint32_t ctrl_count, split_count, shrink_count;
  uint32_t coll_reg_count;        /* under mu: registrations this rank posted */
  struct emu_fault faults[EMU_MAX_FAULTS];
  int nfaults;
  struct emu_user_op user_ops[EMU_MAX_USER_OPS];
  char last_error[256];
  void *prof_ctx;                 /* profiler plugin context (emu_nccl_prof.c), NULL none */
  int prof_mask;
  uint64_t prof_hash;
  uint64_t prof_func_seq[16];     /* NCCL's per-function seqNumber, by emu_kind */
  struct ncclComm *mon_next;      /* monitor list, under the monitor lock */
  int monitored;
};

/* A queued operation of one communicator (a "task" in NCCL terms). */
struct emu_op {
  struct emu_op *next;
  struct ncclComm *comm;
  int kind;                   /* emu_kind */
  const void *sendbuff;
  void *recvbuff;
  size_t count;
  int dtype, redop, root, peer;
  struct CUstream_st *stream;
  /* launch-time state */
  uint64_t seq;               /* collective seq, or p2p seq with that peer */
  uint64_t round, nrounds;
  int phase;
  bool stalled, cancelled, hung, done;
  int delay_ms;
  int slow_ms;     /* slow fault: the stream stays busy this long after the op */
  uint64_t delay_until;
  unsigned char scalar[8];    /* PreMulSum scalar, this rank's */
  /* profiler plugin handles (emu_nccl_prof.c) */
  void *prof_api, *prof_task, *prof_op, *prof_step, *prof_kernel;
  int prof_step_no;
  bool premul;
};

/* emu_nccl_comm.c */
ncclResult_t emu_comm_init(struct ncclComm **out, int nranks, const char *name, int rank,
                           const ncclConfig_t *config, int inherit_blocking);
void emu_comm_put(struct ncclComm *c);
/* The inits this thread deferred inside its group, run by the outermost
 * ncclGroupEnd: ncclSuccess, ncclInProgress (a nonblocking one among them:
 * they finish on a thread) or the first init's error. */
ncclResult_t emu_group_run_inits(void);
bool emu_comm_valid(const struct ncclComm *c);
void emu_comm_bell(struct ncclComm *c);
int emu_comm_cancelled(const struct ncclComm *c);
void emu_set_last_error(struct ncclComm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *emu_get_last_error(struct ncclComm *c);
/* Wait on c's bell until pred holds: 0, or -1 once c is aborted/revoked. */
int emu_wait_bell(struct ncclComm *c, bool (*pred)(struct ncclComm *, void *), void *arg);
void emu_op_finished(struct ncclComm *c);

/* emu_nccl_sweep.c: once per process, remove the bootstrap segments whose
 * init never completed and whose joined ranks are all gone. */
void emu_sweep_stale_segments(void);

/* Connect the p2p pairs the ops of a group need and that are not connected
 * yet, as NCCL's ncclTransportP2pSetup does at the outermost GroupEnd: post
 * this rank's side, then wait on the host until each peer has posted its
 * side (a peer that never posts the matching direction keeps us here).
 * Ends early when a communicator is aborted or revoked.  *held gets the
 * comms it took a reference on (malloc'ed, NULL when none): the caller
 * launches the ops, then emu_comm_put()s each and frees the array.
 * @return the number of entries in *held. */
int emu_p2p_connect(struct emu_op *ops, struct ncclComm ***held);

/* emu_nccl_proto.c: one step of an op's protocol: EMU_STEP_DONE when it is
 * finished (or cancelled by abort/revoke), EMU_STEP_PROGRESS when it moved
 * and should be stepped again at once, EMU_STEP_BLOCKED when it waits for
 * a peer.  *wake_ns is lowered to the time the op wants to be stepped again
 * at the latest (fault delays). */
enum { EMU_STEP_BLOCKED = 0, EMU_STEP_PROGRESS = 1, EMU_STEP_DONE = 2 };
int emu_op_step(struct emu_op *op, uint64_t *wake_ns);
void emu_launch(struct emu_op *ops);
/* The calling thread's ncclGroupStart depth (emu_nccl_api.c). */
int emu_group_depth_now(void);

/* emu_nccl_dev.c: the registrations a group posted complete at its
 * outermost ncclGroupEnd, which waits for them here.
 * @return ncclSuccess, or ncclInvalidUsage when a comm was aborted meanwhile. */
ncclResult_t emu_reg_group_end(void);

/* emu_nccl_red.c */
size_t emu_dtype_size(int dtype);
/* dst[i] = src[i] * scalar (PreMulSum's per-rank premultiplication). */
void emu_red_premul(void *dst, const void *src, size_t n, int dtype, const void *scalar);
/* acc[i] = acc[i] OP src[i]; op is a built-in ncclRedOp_t (avg sums). */
void emu_red_accum(void *acc, const void *src, size_t n, int dtype, int op);
/* Finish an average: acc[i] /= nranks. */
void emu_red_avg(void *acc, size_t n, int dtype, int nranks);
void emu_red_scalar_copy(void *dst, const void *src, int dtype);

#endif
