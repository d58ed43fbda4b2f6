/* dropin.c -- test (10): drop-in mode.  This program is linked with no
 * NCCL at all; it loads libnccltrace.so (argv[1]) with dlopen and calls the
 * NCCL API through dlsym on that handle, so every call reaches nccltrace's
 * wrappers first and nccltrace must find the real NCCL itself
 * (NCCLTRACE_REAL_NCCL, or libnccl.so.2 on the loader path).
 * Exit: 0 ok, 1 failure.  Single-threaded, no signal use. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>

#define SYM(h, name) ((__typeof__(&name))dlsym(h, #name))

int main(int argc, char **argv) {
  if (argc != 2)
    return 1;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  __typeof__(&ncclGetUniqueId) get_id = SYM(h, ncclGetUniqueId);
  __typeof__(&ncclCommInitRank) init = SYM(h, ncclCommInitRank);
  __typeof__(&ncclAllReduce) allreduce = SYM(h, ncclAllReduce);
  __typeof__(&ncclCommDestroy) destroy = SYM(h, ncclCommDestroy);
  const char *(*version)(void) = (const char *(*)(void))dlsym(h, "nccltrace_version");
  int (*enabled)(void) = (int (*)(void))dlsym(h, "nccltrace_enabled");
  if (!get_id || !init || !allreduce || !destroy || !version || !enabled) {
    fprintf(stderr, "missing symbol\n");
    return 1;
  }
  /* nccltrace must not hand back a libnccl symbol for these: they are its. */
  Dl_info a, b;
  if (!dladdr((void *)allreduce, &a) || !dladdr((void *)version, &b) || a.dli_fbase != b.dli_fbase) {
    fprintf(stderr, "ncclAllReduce does not come from libnccltrace.so\n");
    return 1;
  }
  /* What vLLM's pynccl looks up first: the non-recorded API, forwarded to
   * the real library (interpose/nccl_passthrough.def). */
  __typeof__(&ncclGetVersion) get_version = SYM(h, ncclGetVersion);
  __typeof__(&ncclGetErrorString) err_string = SYM(h, ncclGetErrorString);
  int nccl_version = 0;
  if (!get_version || !err_string || get_version(&nccl_version) != ncclSuccess || nccl_version < 20000 ||
      !err_string(ncclInvalidUsage) || !err_string(ncclInvalidUsage)[0]) {
    fprintf(stderr, "pass-through ncclGetVersion/ncclGetErrorString failed (version %d)\n", nccl_version);
    return 1;
  }
  ncclUniqueId id;
  ncclComm_t comm;
  float *buf;
  cudaStream_t s;
  if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess ||
      cudaMalloc((void **)&buf, 4096) != cudaSuccess)
    return 1;
  ncclResult_t r = get_id(&id);
  if (r == ncclSuccess)
    r = init(&comm, 1, id, 0);
  for (int i = 0; r == ncclSuccess && i < 3; i++)
    r = allreduce(buf, buf, 16, ncclFloat, ncclSum, comm, s);
  if (r != ncclSuccess || cudaStreamSynchronize(s) != cudaSuccess || destroy(comm) != ncclSuccess) {
    fprintf(stderr, "NCCL through nccltrace failed: %d\n", (int)r);
    return 1;
  }
  printf("dropin ok %s enabled=%d\n", version(), enabled());
  return 0;
}
