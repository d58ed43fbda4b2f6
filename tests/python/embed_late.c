/* embed_late.c -- a C program that calls NCCL first and embeds Python
 * later (a Python loaded after the first NCCL call): two
 * AllReduces from C, then libpython dlopen'ed (RTLD_GLOBAL, as embedders
 * and ctypes extension modules need) and initialized, whose code issues two
 * AllReduces through ctypes from late_step after 0.5 s (the watchdog's
 * poll, every 15 ms, has noticed the new Python by then), then two more
 * from C.  One rank, on the CPU emulator, under LD_PRELOAD.
 *
 *   embed_late LIBPYTHON
 *
 * Exit: 0 done, 1 failure (message on stderr).  Single-threaded.
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../nt_test.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: embed_late LIBPYTHON\n");
    return 1;
  }
  ncclUniqueId id;
  ncclComm_t comm;
  cudaStream_t s;
  float *buf;
  NT_ASSERT(ncclGetUniqueId(&id) == 0);
  NT_ASSERT(ncclCommInitRank(&comm, 1, id, 0) == 0);
  NT_ASSERT(cudaStreamCreate(&s) == 0);
  NT_ASSERT(cudaMalloc((void **)&buf, 1024) == 0);
  for (int i = 0; i < 2; i++)
    NT_ASSERT(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s) == 0);
  NT_ASSERT(cudaStreamSynchronize(s) == 0);

  void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (!py) {
    fprintf(stderr, "embed_late: %s\n", dlerror());
    return 1;
  }
  void (*init)(int) = (void (*)(int))dlsym(py, "Py_InitializeEx");
  int (*run)(const char *) = (int (*)(const char *))dlsym(py, "PyRun_SimpleString");
  if (!init || !run) {
    fprintf(stderr, "embed_late: no Py_InitializeEx/PyRun_SimpleString\n");
    return 1;
  }
  init(0);
  char code[1024];
  snprintf(code, sizeof code,
           "import ctypes, time\n"
           "nccl = ctypes.CDLL(None)\n"
           "def late_step():\n"
           "    rc = nccl.ncclAllReduce(ctypes.c_void_p(%llu), ctypes.c_void_p(%llu), ctypes.c_size_t(16), 7, 0,\n"
           "                            ctypes.c_void_p(%llu), ctypes.c_void_p(%llu))\n"
           "    assert rc == 0, rc\n"
           "time.sleep(0.5)\n"
           "for _ in range(2):\n"
           "    late_step()\n",
           (unsigned long long)(uintptr_t)buf, (unsigned long long)(uintptr_t)buf,
           (unsigned long long)(uintptr_t)comm, (unsigned long long)(uintptr_t)s);
  if (run(code) != 0) {
    fprintf(stderr, "embed_late: the Python part failed\n");
    return 1;
  }
  for (int i = 0; i < 2; i++)
    NT_ASSERT(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, s) == 0);
  NT_ASSERT(cudaStreamSynchronize(s) == 0);
  NT_ASSERT(ncclCommDestroy(comm) == 0);
  printf("done\n");
  return 0;
}
