/* nccl_newer.h -- the C view of what NCCL 2.29 to 2.32 added to nccl.h,
 * for a build against an older nccl.h (the toolkit's 2.28): the types the
 * new host functions take, and their prototypes.  The functions are rows of
 * recorder/nccl_api.def and interpose/nccl_passthrough.def like every
 * other; they are resolved from the loaded NCCL only when first called
 * (design §3), so a 2.28 NCCL never needs them.
 *
 * Types the tracer and the emulator only pass along are opaque.  A build
 * against a 2.32 or newer nccl.h takes every declaration from it; an
 * nccl.h of 2.29 to 2.31 has some of them and is not supported (the
 * conflict fails the build, loudly).  The device-side types of the same
 * releases are in interpose/nccl_devapi.h.
 *
 * Thread-safety and signal-safety: declarations only.
 */
#ifndef NCCL_NEWER_H
#define NCCL_NEWER_H

#include <stdint.h>
#include <nccl.h>

#if NCCL_VERSION_CODE < 23200
/* Per-call tuning of the nccl*Config collectives (a versioned struct the
 * caller fills from NCCL's initializer): passed along, never read. */
struct ncclCollConfig_v23200;
typedef struct ncclCollConfig_v23200 ncclCollConfig_t;

/* How many signals to wait for from one peer (ncclWaitSignal). */
typedef struct {
  int opCnt, peer, sigIdx, ctx;
} ncclWaitSignalDesc_t;

/* ncclCommMemStats' statistics. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes that a suspend can release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes a suspend keeps */
  ncclStatGpuMemTotal = 3      /* all GPU bytes NCCL tracks */
} ncclCommMemStat_t;
#define NCCL_SUSPEND_MEM 0x01

struct ncclEncryptionConfig_v23200;
typedef struct ncclEncryptionConfig_v23200 ncclEncryptionConfig_t;
typedef struct ncclParamHandle *ncclParamHandle_t;

#define NT_NEWER_PROTO(name, params) ncclResult_t name params; ncclResult_t p##name params;
#define NT_NEWER_COLL(name, ...)                                                                         \
  NT_NEWER_PROTO(name, (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,      \
                        __VA_ARGS__, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config))
NT_NEWER_COLL(ncclAllReduceConfig, ncclRedOp_t op)
NT_NEWER_COLL(ncclBroadcastConfig, int root)
NT_NEWER_COLL(ncclReduceConfig, ncclRedOp_t op, int root)
NT_NEWER_COLL(ncclReduceScatterConfig, ncclRedOp_t op)
NT_NEWER_COLL(ncclGatherConfig, int root)
NT_NEWER_COLL(ncclScatterConfig, int root)
#undef NT_NEWER_COLL
NT_NEWER_PROTO(ncclAllGatherConfig, (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config))
NT_NEWER_PROTO(ncclAlltoAllConfig, (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t *config))
NT_NEWER_PROTO(ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *uniqueId))
NT_NEWER_PROTO(ncclCommGrow, (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                              ncclComm_t *newcomm, ncclConfig_t *config))
NT_NEWER_PROTO(ncclCommSuspend, (ncclComm_t comm, int flags))
NT_NEWER_PROTO(ncclCommResume, (ncclComm_t comm))
NT_NEWER_PROTO(ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value))
NT_NEWER_PROTO(ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void **outUserPtr))
NT_NEWER_PROTO(ncclPutSignal, (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                               ncclComm_t comm, cudaStream_t stream))
NT_NEWER_PROTO(ncclSignal, (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream))
NT_NEWER_PROTO(ncclWaitSignal, (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream))
NT_NEWER_PROTO(ncclSetEncryption, (const ncclEncryptionConfig_t *config))
NT_NEWER_PROTO(ncclParamBind, (ncclParamHandle_t *out, const char *key))
NT_NEWER_PROTO(ncclParamGetI8, (ncclParamHandle_t h, int8_t *out))
NT_NEWER_PROTO(ncclParamGetI16, (ncclParamHandle_t h, int16_t *out))
NT_NEWER_PROTO(ncclParamGetI32, (ncclParamHandle_t h, int32_t *out))
NT_NEWER_PROTO(ncclParamGetI64, (ncclParamHandle_t h, int64_t *out))
NT_NEWER_PROTO(ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out))
NT_NEWER_PROTO(ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out))
NT_NEWER_PROTO(ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out))
NT_NEWER_PROTO(ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out))
NT_NEWER_PROTO(ncclParamGetStr, (ncclParamHandle_t h, const char **out))
NT_NEWER_PROTO(ncclParamGet, (ncclParamHandle_t h, void *out, int maxLen, int *len))
NT_NEWER_PROTO(ncclParamGetParameter, (const char *key, const char **value, int *valueLen))
NT_NEWER_PROTO(ncclParamGetAllParameterKeys, (const char ***table, int *tableLen))
#undef NT_NEWER_PROTO
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);
#endif

#endif
