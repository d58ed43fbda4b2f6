/* nccl_devapi.h -- the C view of the host half of NCCL's device API as of
 * 2.28, and what 2.29 to 2.32 added to it (nccl_device/core.h and friends), which NCCL exports from libnccl.so.2
 * with C linkage but declares in headers that only C++ compiles.  The
 * types here are opaque where nccltrace and the emulator only pass
 * pointers along, and copied member for member where a value crosses the
 * call (struct ncclTeam, returned by value).  The functions
 * themselves are rows of recorder/nccl_api.def (the collective ones,
 * recorded) and interpose/nccl_passthrough.def (the rest), which declare
 * them for their consumers; this header is included by both tables.
 *
 * Thread-safety and signal-safety: declarations only.
 */
#ifndef NCCL_DEVAPI_H
#define NCCL_DEVAPI_H

#include <stdbool.h>
#include <stdint.h>
#include <nccl.h>
#include "interpose/nccl_newer.h"

struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;
struct ncclDevCommRequirements;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
struct ncclDevResourceRequirements;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
struct ncclLsaBarrierHandle;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
struct ncclGinBarrierHandle;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
struct ncclLLA2AHandle;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

/* nccl_device/core.h: a team is (size, my rank in it, stride in world ranks). */
struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

/* Added after 2.28.  A multimem handle crosses ncclGetMultimemDevicePointer
 * by value: one pointer (nccl_device/impl/core__types.h). */
struct ncclMultimemHandle {
  void *mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
typedef uint32_t ncclCftLeId;
typedef enum { NCCL_CFT_TEAM_FLAT, NCCL_CFT_TEAM_HIER_MULTIMEM, NCCL_CFT_TEAM_HIER_LSA } ncclCftTeamMode_t;
struct ncclGinOutboxHandle;
typedef struct ncclGinOutboxHandle ncclGinOutboxHandle_t;
struct ncclGinInboxA2AHandle;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle_t;

/* ncclCommQueryProperties' answer, member for member as of 2.32 (the
 * caller sets size, magic and version; NCCL fills the rest).  The tracer
 * reads commHash of a grown communicator (docs/identity.md). */
#define NT_NCCL_API_MAGIC 0xcafebeefu
#define NT_NCCL_PROPERTIES_VERSION 23206u
typedef struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
  uint64_t commHash;
  int ginMinStride;
  int ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
} ncclCommProperties_t;

#endif
