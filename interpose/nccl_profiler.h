/* nccl_profiler.h -- the C view of NCCL's profiler plugin ABI, versions 1
 * to 6: the event types, the states, the event descriptors, the state
 * arguments and the function table NCCL finds by dlsym("ncclProfiler_vN").
 * Declared here from the documented layout (NCCL's ext-profiler and
 * plugins/profiler headers); names are ours (ntp_), layouts are NCCL's,
 * member for member, so that one definition serves the plugin
 * (interpose/profiler.c) and the emulator that calls it (tests/emu).
 *
 * Which NCCL looks for which table, newest first, falling back to older:
 * 2.23 v1; 2.24-2.25 v2; 2.26 v3; 2.27 v4; 2.28 v5; 2.29-2.31 v6.
 *
 * Thread-safety and signal-safety: declarations only.
 */
#ifndef NTP_NCCL_PROFILER_H
#define NTP_NCCL_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <nccl.h>

/* Event types (bit masks: the plugin returns the ones it wants from init). */
enum {
  NTP_GROUP = 1 << 0,
  NTP_COLL = 1 << 1,
  NTP_P2P = 1 << 2,
  NTP_PROXY_OP = 1 << 3,
  NTP_PROXY_STEP = 1 << 4,
  NTP_PROXY_CTRL = 1 << 5,
  NTP_KERNEL_CH = 1 << 6,     /* v3 on */
  NTP_NET_PLUGIN = 1 << 7,    /* v3 on */
  NTP_GROUP_API = 1 << 8,     /* v5 on */
  NTP_COLL_API = 1 << 9,      /* v5 on */
  NTP_P2P_API = 1 << 10,      /* v5 on */
  NTP_KERNEL_LAUNCH = 1 << 11, /* v5 on */
  NTP_CE_COLL = 1 << 12,      /* v6 */
  NTP_CE_SYNC = 1 << 13,
  NTP_CE_BATCH = 1 << 14,
};

/* Event states passed to recordEventState (one numbering for every
 * version; v1 to v3 use 0..18). */
enum {
  NTP_OP_SEND_POSTED = 0, NTP_OP_SEND_REM_FIFO_WAIT = 1, NTP_OP_SEND_TRANSMITTED = 2,
  NTP_OP_SEND_DONE = 3, NTP_OP_RECV_POSTED = 4, NTP_OP_RECV_RECEIVED = 5,
  NTP_OP_RECV_TRANSMITTED = 6, NTP_OP_RECV_DONE = 7,
  NTP_STEP_SEND_GPU_WAIT = 8, NTP_STEP_SEND_WAIT = 9, NTP_STEP_RECV_WAIT = 10,
  NTP_STEP_RECV_FLUSH_WAIT = 11, NTP_STEP_RECV_GPU_WAIT = 12,
  NTP_CTRL_IDLE = 13, NTP_CTRL_ACTIVE = 14, NTP_CTRL_SLEEP = 15, NTP_CTRL_WAKEUP = 16,
  NTP_CTRL_APPEND = 17, NTP_CTRL_APPEND_END = 18,
  NTP_OP_IN_PROGRESS_V4 = 19, NTP_STEP_SEND_PEER_WAIT_V4 = 20, NTP_NET_PLUGIN_UPDATE = 21,
  NTP_KERNEL_CH_STOP = 22, NTP_GROUP_START_API_STOP = 23, NTP_GROUP_END_API_START = 24,
  NTP_STATE_MAX = 31,
};

typedef void (*ntp_logger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);

/* The members every version shares after its header. */
struct ntp_proxy_op { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; };
struct ntp_proxy_step { int step; };
struct ntp_net_plugin { int64_t id; void *data; };

/* ---- v1 (2.23) ---- */
struct ntp_descr_v1 {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      const char *name; uint64_t commHash; uint64_t seqNumber; uint8_t func;
      const void *sendBuff; void *recvBuff; size_t count; int root; uint8_t datatype;
      uint32_t op; size_t trafficBytes; uint8_t nMaxChannels, nWarps, algo, proto;
      int isCollnet, isNvls;
    } coll;
    struct { const char *name; uint64_t commHash; uint8_t func; void *buff; uint8_t datatype; size_t count; int peer; } p2p;
    struct ntp_proxy_op proxyOp;
    struct ntp_proxy_step proxyStep;
  };
};
/* State arguments of v1 to v3. */
union ntp_state_v1 {
  struct { size_t transSize; int steps; } proxyOp;
  struct { int appendedProxyOps; } proxyCtrl;
};

/* ---- v2 (2.24, 2.25): strings instead of enums ---- */
struct ntp_descr_v2 {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      const char *name; uint64_t commHash; uint64_t seqNumber; const char *func;
      const void *sendBuff; void *recvBuff; size_t count; int root; const char *datatype;
      size_t trafficBytes; uint8_t nMaxChannels, nWarps; const char *algo, *proto;
    } coll;
    struct { const char *name; uint64_t commHash; const char *func; void *buff; const char *datatype; size_t count; int peer; } p2p;
    struct ntp_proxy_op proxyOp;
    struct ntp_proxy_step proxyStep;
  };
};

/* ---- v3 (2.26): no trafficBytes, kernel channel and net plugin events ---- */
struct ntp_descr_v3 {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      const char *name; uint64_t commHash; uint64_t seqNumber; const char *func;
      const void *sendBuff; void *recvBuff; size_t count; int root; const char *datatype;
      uint8_t nMaxChannels, nWarps; const char *algo, *proto;
    } coll;
    struct { const char *name; uint64_t commHash; const char *func; void *buff; const char *datatype; size_t count; int peer; } p2p;
    struct ntp_proxy_op proxyOp;
    struct ntp_proxy_step proxyStep;
    struct { uint8_t channelId; } kernelCh;
    struct ntp_net_plugin netPlugin;
  };
};

/* ---- v4 (2.27): the comm's identity moves to init ---- */
struct ntp_descr_v4 {
  uint8_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber; const char *func; const void *sendBuff; void *recvBuff; size_t count;
      int root; const char *datatype; uint8_t nChannels, nWarps; const char *algo, *proto;
    } coll;
    struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels; } p2p;
    struct ntp_proxy_op proxyOp;
    struct ntp_proxy_step proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct ntp_net_plugin netPlugin;
  };
};
/* State arguments of v4 to v6. */
union ntp_state_v4 {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void *data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
};

/* ---- v5 (2.28): API events; type widens to 64 bits.  v6 (2.29 on)
 * appends copy-engine descriptors to the same union. ---- */
struct ntp_descr_v5 {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char *func; size_t count; const char *datatype; int root; void *stream; bool graphCaptured; } collApi;
    struct { const char *func; size_t count; const char *datatype; void *stream; bool graphCaptured; } p2pApi;
    struct { void *stream; } kernelLaunch;
    struct {
      uint64_t seqNumber; const char *func; const void *sendBuff; void *recvBuff; size_t count;
      int root; const char *datatype; uint8_t nChannels, nWarps; const char *algo, *proto;
      void *parentGroup;
    } coll;
    struct { const char *func; void *buff; const char *datatype; size_t count; int peer; uint8_t nChannels; void *parentGroup; } p2p;
    struct ntp_proxy_op proxyOp;
    struct ntp_proxy_step proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct ntp_net_plugin netPlugin;
    /* v6 only: */
    struct {
      uint64_t seqNumber; const char *func; const void *sendBuff; void *recvBuff; size_t count;
      int root; const char *datatype; const char *syncStrategy; bool intraBatchSync;
      uint32_t batchSize, numBatches, ceSeqNum; void *stream;
    } ceColl;
    struct { bool isComplete; int nRanks; } ceCollSync;
    struct { int numOps; size_t totalBytes; bool useIntraSync; } ceCollBatch;
  };
};
#define ntp_descr_v6 ntp_descr_v5

/* The function tables.  v1 to v3 have the short init. */
#define NTP_TABLE(ver, descr, state, ...)                                            \
  struct ntp_table_##ver {                                                           \
    const char *name;                                                                \
    ncclResult_t (*init)(void **context, __VA_ARGS__);                                \
    ncclResult_t (*startEvent)(void *context, void **eHandle, struct descr *eDescr); \
    ncclResult_t (*stopEvent)(void *eHandle);                                        \
    ncclResult_t (*recordEventState)(void *eHandle, int eState, state *eStateArgs);  \
    ncclResult_t (*finalize)(void *context);                                         \
  }
NTP_TABLE(v1, ntp_descr_v1, union ntp_state_v1, int *eActivationMask);
NTP_TABLE(v2, ntp_descr_v2, union ntp_state_v1, int *eActivationMask);
NTP_TABLE(v3, ntp_descr_v3, union ntp_state_v1, int *eActivationMask);
NTP_TABLE(v4, ntp_descr_v4, union ntp_state_v4, int *eActivationMask, const char *commName, uint64_t commHash,
          int nNodes, int nranks, int rank, ntp_logger_t logfn);
NTP_TABLE(v5, ntp_descr_v5, union ntp_state_v4, uint64_t commId, int *eActivationMask, const char *commName,
          int nNodes, int nranks, int rank, ntp_logger_t logfn);
NTP_TABLE(v6, ntp_descr_v5, union ntp_state_v4, uint64_t commId, int *eActivationMask, const char *commName,
          int nNodes, int nranks, int rank, ntp_logger_t logfn);
#undef NTP_TABLE

/* Offsets NCCL's layout gives (x86-64 and arm64 LP64). */
_Static_assert(offsetof(struct ntp_descr_v1, coll) == 24 && sizeof(struct ntp_descr_v1) == 24 + 96, "v1 descr");
_Static_assert(offsetof(struct ntp_descr_v5, coll.parentGroup) == 24 + 80, "v5 descr");
_Static_assert(offsetof(struct ntp_descr_v4, proxyOp.isSend) == 24 + 20, "v4 descr");

#endif /* NTP_NCCL_PROFILER_H */
