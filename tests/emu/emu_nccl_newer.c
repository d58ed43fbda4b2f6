/* emu_nccl_newer.c -- what NCCL 2.29 to 2.32 added to the host API, in the
 * emulator (the per-call-config collectives live with the plain ones in
 * emu_nccl_api.c, ncclWinGetUserPtr with the windows in emu_nccl_dev.c).
 *
 * Thread-safety: as the rest of the library; a comm's suspended mark is
 * atomic, each not-modelled function's log-once flag too.
 * Signal-safety: none.
 *
 * Modelled: ncclCommSuspend/Resume (a mark on the comm, success),
 * ncclCommGetUniqueId (a fresh unique id, as ncclGetUniqueId makes), and
 * ncclCommMemStats (no GPU memory here: every byte count is 0, the
 * suspended statistic follows the mark).  Everything else -- growing a
 * comm, one-sided signals, encryption, NCCL's parameter store, the device
 * pointers and teams of the device API -- is not modelled: each answers
 * ncclInvalidUsage (a team: the empty team) and says its name once.
 */
#include "emu_nccl.h"
#include "interpose/nccl_devapi.h"

#include <stdatomic.h>

EMU_API ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags)
{
  if (!emu_comm_valid(comm) || (flags & ~NCCL_SUSPEND_MEM)) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommSuspend: invalid argument");
    return ncclInvalidArgument;
  }
  atomic_store(&comm->suspended, 1);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommResume(ncclComm_t comm)
{
  if (!emu_comm_valid(comm))
    return ncclInvalidArgument;
  atomic_store(&comm->suspended, 0);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
  if (!emu_comm_valid(comm) || !uniqueId) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommGetUniqueId: invalid argument");
    return ncclInvalidArgument;
  }
  return pncclGetUniqueId(uniqueId);
}

EMU_API ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
  if (!emu_comm_valid(comm) || !value || (unsigned)stat > (unsigned)ncclStatGpuMemTotal)
    return ncclInvalidArgument;
  *value = stat == ncclStatGpuMemSuspended ? (uint64_t)atomic_load(&comm->suspended) : 0;
  return ncclSuccess;
}

/* A function the emulator does not model: its name once, then ANSWER. */
#define EMU_UNMODELLED(ret, answer, name, params)                                      \
  EMU_API ret p##name params                                                           \
  {                                                                                    \
    static atomic_flag said = ATOMIC_FLAG_INIT;                                        \
    if (!atomic_flag_test_and_set_explicit(&said, memory_order_relaxed))               \
      emu_log("%s is not modelled by the emulator: it answers %s", #name, #answer);    \
    return answer;                                                                     \
  }                                                                                    \
  EMU_ALIAS(name)

/* The stand-ins ignore their arguments. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define EMU_NOT_MODELLED(name, params) EMU_UNMODELLED(ncclResult_t, ncclInvalidUsage, name, params)
EMU_NOT_MODELLED(ncclCommGrow, (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                                ncclComm_t *newcomm, ncclConfig_t *config))
EMU_NOT_MODELLED(ncclPutSignal, (const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                                 ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
                                 ncclComm_t comm, cudaStream_t stream))
EMU_NOT_MODELLED(ncclSignal, (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream))
EMU_NOT_MODELLED(ncclWaitSignal, (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream))
EMU_NOT_MODELLED(ncclSetEncryption, (const ncclEncryptionConfig_t *config))
EMU_NOT_MODELLED(ncclParamBind, (ncclParamHandle_t *out, const char *key))
EMU_NOT_MODELLED(ncclParamGetI8, (ncclParamHandle_t h, int8_t *out))
EMU_NOT_MODELLED(ncclParamGetI16, (ncclParamHandle_t h, int16_t *out))
EMU_NOT_MODELLED(ncclParamGetI32, (ncclParamHandle_t h, int32_t *out))
EMU_NOT_MODELLED(ncclParamGetI64, (ncclParamHandle_t h, int64_t *out))
EMU_NOT_MODELLED(ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out))
EMU_NOT_MODELLED(ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out))
EMU_NOT_MODELLED(ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out))
EMU_NOT_MODELLED(ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out))
EMU_NOT_MODELLED(ncclParamGetStr, (ncclParamHandle_t h, const char **out))
EMU_NOT_MODELLED(ncclParamGet, (ncclParamHandle_t h, void *out, int maxLen, int *len))
EMU_NOT_MODELLED(ncclParamGetParameter, (const char *key, const char **value, int *valueLen))
EMU_NOT_MODELLED(ncclParamGetAllParameterKeys, (const char ***table, int *tableLen))
EMU_NOT_MODELLED(ncclCommQueryProperties, (ncclComm_t comm, ncclCommProperties_t *props))
EMU_NOT_MODELLED(ncclGetLsaMultimemDevicePointer, (ncclWindow_t window, size_t offset, void **outPtr))
EMU_NOT_MODELLED(ncclGetMultimemDevicePointer, (ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                                void **outPtr))
EMU_NOT_MODELLED(ncclGetLsaDevicePointer, (ncclWindow_t window, size_t offset, int lsaRank, void **outPtr))
EMU_NOT_MODELLED(ncclGetPeerDevicePointer, (ncclWindow_t window, size_t offset, int peer, void **outPtr))
EMU_NOT_MODELLED(ncclGetMultimemDeviceLeInfo, (ncclWindow_t window, size_t offset, ncclCftLeId *leId,
                                               size_t *leOffset))
EMU_NOT_MODELLED(ncclGetCftDeviceLeInfo, (ncclWindow_t window, size_t offset, int peerCft, ncclTeam_t cftTeam,
                                          ncclCftLeId *leId, size_t *leOffset))
EMU_NOT_MODELLED(ncclGetPeerDeviceLeInfo, (ncclWindow_t window, size_t offset, int peerWorld, ncclCftLeId *leId,
                                           size_t *leOffset))
EMU_NOT_MODELLED(ncclGinOutboxCreateRequirement, (int nBlocks, int size_log2, ncclGinOutboxHandle_t *outHandle,
                                                  ncclDevResourceRequirements_t *outReq))
EMU_NOT_MODELLED(ncclGinInboxA2ACreateRequirement, (ncclTeam_t peers, int nBlocks, int size_log2,
                                                    ncclGinInboxA2AHandle_t *outHandle,
                                                    ncclDevResourceRequirements_t *outReq))
EMU_UNMODELLED(ncclTeam_t, ((ncclTeam_t){ 0, 0, 0 }), ncclTeamCft, (ncclComm_t comm, ncclCftTeamMode_t mode))
EMU_UNMODELLED(ncclTeam_t, ((ncclTeam_t){ 0, 0, 0 }), ncclTeamCftMultimem, (ncclComm_t comm))

EMU_API void pncclParamDumpAll(void)
{
  static atomic_flag said = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set_explicit(&said, memory_order_relaxed))
    emu_log("ncclParamDumpAll is not modelled by the emulator: it prints nothing");
}

EMU_ALIAS(ncclCommSuspend)
EMU_ALIAS(ncclCommResume)
EMU_ALIAS(ncclCommGetUniqueId)
EMU_ALIAS(ncclCommMemStats)
EMU_ALIAS(ncclParamDumpAll)
