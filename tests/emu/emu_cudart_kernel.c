/* emu_cudart_kernel.c -- what a program built by `nvcc -cudart shared`
 * calls to register and launch its kernels: fat-binary and function
 * registration from its static constructors, and the launch path of the
 * `<<<...>>>` syntax (push/pop of the call configuration, then
 * __cudaLaunchKernel, or cudaLaunchKernel for legacy launches).
 *
 * Device code cannot run on a CPU.  A launch is therefore stream-ordered
 * work that does nothing: it waits for what was queued before it on its
 * stream, and what is queued after it waits for it, so events, stream and
 * device synchronization, graph capture and hangs behave around it as on a
 * GPU.  Registration remembers nothing but the handle.
 *
 * Thread-safety: the call configuration is a per-thread stack, as in the
 * real runtime (a launch pops what the same thread pushed); the rest is
 * stateless.  Signal-safety: none is async-signal-safe.
 */
#include "emu_core.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>

/* The prototypes live in crt/host_runtime.h and crt/device_functions.h,
 * which are C++ only; these match them. */
EMU_API void **__cudaRegisterFatBinary(void *fatCubin);
EMU_API void __cudaRegisterFatBinaryEnd(void **handle);
EMU_API void __cudaUnregisterFatBinary(void **handle);
EMU_API char __cudaInitModule(void **handle);
EMU_API void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                                    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
EMU_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                               int ext, size_t size, int constant, int global);
EMU_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
EMU_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
EMU_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
EMU_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream);
EMU_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream);
EMU_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                          size_t sharedMem, cudaStream_t stream);

/* A fat binary's handle only has to be a unique non-NULL pointer: the
 * program keeps it and hands it back to the calls below. */
EMU_API void **__cudaRegisterFatBinary(void *fatCubin)
{
  void **h = malloc(sizeof *h);
  if (h)
    *h = fatCubin;
  return h;
}

EMU_API void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }

EMU_API void __cudaUnregisterFatBinary(void **handle) { free(handle); }

EMU_API char __cudaInitModule(void **handle) { return handle != NULL; }

EMU_API void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                                    int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
  (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
  (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

/* __device__ variables: their host shadow stays the program's own memory. */
EMU_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                               int ext, size_t size, int constant, int global)
{
  (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName;
  (void)ext, (void)size, (void)constant, (void)global;
}

#define EMU_CALL_DEPTH 8
struct emu_call_cfg {
  dim3 grid, block;
  size_t shmem;
  struct CUstream_st *stream;
};
static __thread struct emu_call_cfg emu_cfg[EMU_CALL_DEPTH] __attribute__((tls_model("initial-exec")));
static __thread int emu_ncfg __attribute__((tls_model("initial-exec")));

EMU_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream)
{
  if (emu_ncfg >= EMU_CALL_DEPTH)
    return 1;
  emu_cfg[emu_ncfg++] = (struct emu_call_cfg){ gridDim, blockDim, sharedMem, stream };
  return 0;
}

EMU_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
  if (emu_ncfg <= 0)
    return cudaErrorMissingConfiguration;
  struct emu_call_cfg c = emu_cfg[--emu_ncfg];
  *gridDim = c.grid;
  *blockDim = c.block;
  *sharedMem = c.shmem;
  *(struct CUstream_st **)stream = c.stream;
  return cudaSuccess;
}

/* The kernel handle is the address of the host-side function nvcc
 * generates for the kernel: every launch of a kernel
 * the emulator does not know is the same no-op. */
EMU_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
  if (!kernel || !func)
    return cudaErrorInvalidDeviceFunction;
  *kernel = (cudaKernel_t)(uintptr_t)func;
  return cudaSuccess;
}

static void emu_kernel_run(struct emu_work *w) { free(w); }

static cudaError_t emu_launch(const void *fn, dim3 grid, dim3 block, cudaStream_t stream)
{
  if (!fn)
    return cudaErrorInvalidDeviceFunction;
  if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
      (uint64_t)block.x * block.y * block.z > 1024)
    return cudaErrorInvalidConfiguration;
  struct emu_work *w = calloc(1, sizeof *w);
  if (!w)
    return cudaErrorMemoryAllocation;
  w->run = emu_kernel_run;
  emu_stream_enqueue(stream, w);
  return cudaSuccess;
}

EMU_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream)
{
  (void)args, (void)sharedMem;
  return emu_launch((const void *)kernel, gridDim, blockDim, stream);
}

EMU_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                            size_t sharedMem, cudaStream_t stream)
{
  return __cudaLaunchKernel(kernel, gridDim, blockDim, args, sharedMem, stream);
}

EMU_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                     cudaStream_t stream)
{
  (void)args, (void)sharedMem;
  return emu_launch(func, gridDim, blockDim, stream);
}

EMU_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                          size_t sharedMem, cudaStream_t stream)
{
  return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}
