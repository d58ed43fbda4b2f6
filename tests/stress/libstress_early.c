/* libstress_early.c -- a library the stress program links (DT_NEEDED), whose
 * constructor runs before libnccltrace.so's (the loader initializes needed
 * libraries before a preloaded one that does not depend on them).  From there
 * it installs the application's signal handler (STRESS_EARLY_SIG, through
 * the program's stress_early_install hook) and, with STRESS_EARLY_NCCL=1,
 * runs a one-rank communicator and an AllReduce of count 22: NCCL called
 * before the tracer's constructor.
 * Thread-safety: constructor only.  Not signal-safe. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>

int stress_early_result(void);

static int early_rc = 0;

int stress_early_result(void) { return early_rc; }

__attribute__((constructor)) static void early_ctor(void) {
  void (*hook)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "stress_early_install");
  if (hook)
    hook();
  if (!getenv("STRESS_EARLY_NCCL"))
    return;
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t s;
  void *a;
  early_rc = 1;
  if (cudaSetDevice(0) != cudaSuccess || ncclGetUniqueId(&id) != ncclSuccess ||
      ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess)
    return;
  early_rc = 2;
  if (cudaStreamCreate(&s) != cudaSuccess || cudaMalloc(&a, 4096) != cudaSuccess ||
      ncclAllReduce(a, a, 22, ncclFloat, ncclSum, comm, s) != ncclSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return;
  early_rc = ncclCommDestroy(comm) == ncclSuccess ? 0 : 3;
}
