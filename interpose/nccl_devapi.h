/* nccl_devapi.h -- the C view of the host half of NCCL 2.28's device API
 * (nccl_device/core.h and friends), which NCCL exports from libnccl.so.2
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

#include <nccl.h>

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

#endif
