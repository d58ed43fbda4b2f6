/* emu_nccl_prof.h -- the emulator's calls into an NCCL profiler plugin
 * (emu_nccl_prof.c).  Thread-safety: as NCCL's -- API events on the
 * calling thread, proxy events on the op's stream worker.  Not
 * async-signal-safe. */
#ifndef EMU_NCCL_PROF_H
#define EMU_NCCL_PROF_H

#include "emu_nccl.h"

int emu_prof_version(void); /* 0: no plugin loaded */
void emu_prof_comm_init(struct ncclComm *c);
void emu_prof_comm_fini(struct ncclComm *c);
void emu_prof_api(struct emu_op *op, int user_depth);
void emu_prof_group_end(void);
void emu_prof_task(struct emu_op *op);
void emu_prof_op_begin(struct emu_op *op, int nsteps, int peer);
void emu_prof_step_begin(struct emu_op *op, int step, size_t bytes);
void emu_prof_step_end(struct emu_op *op);
void emu_prof_op_end(struct emu_op *op);

#endif
