/* emu_nccl_dev.c -- the rest of NCCL 2.28's host API in the emulator:
 * symmetric-memory windows (ncclCommWindowRegister/Deregister), the host
 * half of the device API (device communicators, teams, resource
 * requirements) and the deprecated debug reset.
 *
 * Thread-safety: as the rest of the library; a communicator's registration
 * counter is taken under comm->mu, and the per-thread list of registrations
 * a group posted is thread-local, like the group itself.
 * Signal-safety: none.
 *
 * Semantics.  Window registration and device-communicator creation are
 * collective over the communicator in NCCL: each rank's n-th such call
 * completes only once every rank made its n-th one, so a rank that never
 * calls it holds its peers there forever (as a missing rank holds an init).
 * Outside a group the call waits; inside a group it posts at once and the
 * outermost ncclGroupEnd waits, so one thread may register a window on
 * each of its communicators in one group (the one-process, many-devices
 * shape).  Deregistration and device-communicator destruction are local.
 * Memory is host memory, so a window is just (buffer, size, flags); a
 * device communicator is left as the caller's zeroed storage -- device code
 * cannot run here.  Teams describe one host: every rank is in the LSA team,
 * the rail team is the rank alone.
 */
#include "emu_nccl.h"
#include "interpose/nccl_devapi.h"

#include <stdlib.h>
#include <string.h>

#define NT_PASS(ret, fail, name, params, args) ret p##name params;
#define NT_PASS_VOID(name, params, args) void p##name params;
#include "interpose/nccl_passthrough.def"
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *out);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
void ncclResetDebugInitInternal(void);

struct ncclWindow_vidmem {
  struct ncclComm *comm;
  void *buff;
  size_t size;
  int flags;
};

/* Registrations posted inside the current group: waited for at its end. */
#define EMU_REG_GROUP_MAX 64
struct emu_reg_wait {
  struct ncclComm *comm;
  uint32_t n;
};
static __thread struct emu_reg_wait emu_reg_pending[EMU_REG_GROUP_MAX];
static __thread int emu_reg_npending;

static bool emu_reg_all_posted(struct ncclComm *c, void *arg)
{
  uint32_t n = *(const uint32_t *)arg;
  for (int p = 0; p < c->nranks; p++)
    if (atomic_load_explicit(&c->shm->coll_reg[p], memory_order_acquire) < n)
      return false;
  return true;
}

static ncclResult_t emu_reg_wait(struct ncclComm *c, uint32_t n)
{
  ncclResult_t rc = emu_wait_bell(c, emu_reg_all_posted, &n) == 0 ? ncclSuccess : ncclInvalidUsage;
  emu_comm_put(c);
  return rc;
}

/* Post this rank's next collective registration on c; wait for the peers
 * now, or at the outermost GroupEnd inside a group. */
static ncclResult_t emu_reg_collective(struct ncclComm *c, const char *nm)
{
  if (emu_comm_cancelled(c)) {
    emu_set_last_error(c, "%s: communicator aborted or revoked", nm);
    return ncclInvalidUsage;
  }
  int in_group = emu_group_depth_now() > 0;
  if (in_group && emu_reg_npending == EMU_REG_GROUP_MAX) {
    emu_set_last_error(c, "%s: more than %d registrations in one group (emulator limit)", nm, EMU_REG_GROUP_MAX);
    return ncclInvalidUsage;
  }
  pthread_mutex_lock(&c->mu);
  uint32_t n = ++c->coll_reg_count;
  pthread_mutex_unlock(&c->mu);
  atomic_fetch_add(&c->refs, 1);
  atomic_store_explicit(&c->shm->coll_reg[c->rank], n, memory_order_release);
  emu_comm_bell(c);
  if (in_group) {
    emu_reg_pending[emu_reg_npending++] = (struct emu_reg_wait){ c, n };
    return ncclSuccess;
  }
  return emu_reg_wait(c, n);
}

ncclResult_t emu_reg_group_end(void)
{
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < emu_reg_npending; i++) {
    ncclResult_t r = emu_reg_wait(emu_reg_pending[i].comm, emu_reg_pending[i].n);
    if (rc == ncclSuccess)
      rc = r;
  }
  emu_reg_npending = 0;
  return rc;
}

EMU_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
  if (!emu_comm_valid(comm) || !win || (size && !buff)) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommWindowRegister: invalid argument");
    return ncclInvalidArgument;
  }
  struct ncclWindow_vidmem *w = calloc(1, sizeof *w);
  if (!w)
    return ncclSystemError;
  *w = (struct ncclWindow_vidmem){ comm, buff, size, winFlags };
  ncclResult_t rc = emu_reg_collective(comm, "ncclCommWindowRegister");
  if (rc != ncclSuccess) {
    free(w);
    return rc;
  }
  *win = w;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
  if (!emu_comm_valid(comm) || !win || win->comm != comm) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclCommWindowDeregister: invalid window");
    return ncclInvalidArgument;
  }
  free(win);
  return ncclSuccess;
}

EMU_API ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr)
{
  if (!emu_comm_valid(comm) || !win || win->comm != comm || !outUserPtr)
    return ncclInvalidArgument;
  *outUserPtr = win->buff;
  return ncclSuccess;
}

EMU_API ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs, ncclDevComm_t *out)
{
  if (!emu_comm_valid(comm) || !reqs || !out) {
    emu_set_last_error(emu_comm_valid(comm) ? comm : NULL, "ncclDevCommCreate: invalid argument");
    return ncclInvalidArgument;
  }
  return emu_reg_collective(comm, "ncclDevCommCreate");
}

EMU_API ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm)
{
  return emu_comm_valid(comm) && devComm ? ncclSuccess : ncclInvalidArgument;
}

EMU_API ncclTeam_t pncclTeamWorld(ncclComm_t comm)
{
  return emu_comm_valid(comm) ? (ncclTeam_t){ comm->nranks, comm->rank, 1 } : (ncclTeam_t){ 0, 0, 0 };
}

EMU_API ncclTeam_t pncclTeamLsa(ncclComm_t comm) { return pncclTeamWorld(comm); }

EMU_API ncclTeam_t pncclTeamRail(ncclComm_t comm)
{
  return emu_comm_valid(comm) ? (ncclTeam_t){ 1, 0, comm->nranks } : (ncclTeam_t){ 0, 0, 0 };
}

/* World rank of member `rank` of a team that holds this rank. */
EMU_API int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank)
{
  if (!emu_comm_valid(comm))
    return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}

/* The LSA team is the world: LSA ranks are world ranks. */
EMU_API int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank)
{
  return pncclTeamRankToWorld(comm, team, rank);
}

/* Requirements only describe device resources: none are needed here. */
static ncclResult_t emu_no_requirement(void *handle, size_t hsize, ncclDevResourceRequirements_t *outReq)
{
  if (!handle || !outReq)
    return ncclInvalidArgument;
  memset(handle, 0, hsize);
  return ncclSuccess;
}

/* Sizes of the handles in nccl_device/impl/ *__types.h (two 32-bit words each). */
#define EMU_DEV_HANDLE_BYTES 8

EMU_API ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t *outHandle,
                                                      ncclDevResourceRequirements_t *outReq)
{
  (void)team;
  return nBarriers < 0 ? ncclInvalidArgument : emu_no_requirement(outHandle, EMU_DEV_HANDLE_BYTES, outReq);
}

EMU_API ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                                      ncclGinBarrierHandle_t *outHandle,
                                                      ncclDevResourceRequirements_t *outReq)
{
  (void)team;
  if (!emu_comm_valid(comm) || nBarriers < 0)
    return ncclInvalidArgument;
  return emu_no_requirement(outHandle, EMU_DEV_HANDLE_BYTES, outReq);
}

EMU_API int pncclLLA2ACalcSlots(int maxElts, int maxEltSize)
{
  if (maxElts <= 0 || maxEltSize <= 0)
    return 0;
  /* one 16-byte LL slot carries 8 payload bytes */
  long slots = ((long)maxElts * maxEltSize + 7) / 8;
  return slots > 0x7fffffff ? 0x7fffffff : (int)slots;
}

EMU_API ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                                 ncclDevResourceRequirements_t *outReq)
{
  if (nBlocks < 0 || nSlots < 0)
    return ncclInvalidArgument;
  return emu_no_requirement(outHandle, EMU_DEV_HANDLE_BYTES, outReq);
}

/* NCCL re-reads NCCL_DEBUG*; the emulator reads nothing of the kind. */
EMU_API void pncclResetDebugInit(void) {}
EMU_API void ncclResetDebugInitInternal(void) {}

EMU_ALIAS(ncclCommWindowRegister)
EMU_ALIAS(ncclCommWindowDeregister)
EMU_ALIAS(ncclWinGetUserPtr)
EMU_ALIAS(ncclDevCommCreate)
EMU_ALIAS(ncclDevCommDestroy)
EMU_ALIAS(ncclTeamWorld)
EMU_ALIAS(ncclTeamLsa)
EMU_ALIAS(ncclTeamRail)
EMU_ALIAS(ncclTeamRankToWorld)
EMU_ALIAS(ncclTeamRankToLsa)
EMU_ALIAS(ncclLsaBarrierCreateRequirement)
EMU_ALIAS(ncclGinBarrierCreateRequirement)
EMU_ALIAS(ncclLLA2ACalcSlots)
EMU_ALIAS(ncclLLA2ACreateRequirement)
/* The alias names the deprecated declaration of nccl.h: that is the point. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
EMU_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop
