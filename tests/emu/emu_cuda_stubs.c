/* emu_cuda_stubs.c -- every function of the CUDA driver (the toolkit's
 * lib64/stubs/libcuda.so lists them: cuda_exports.def) that the emulator
 * does not model (emu_stubs.h), so that a client resolving driver entry
 * points by name (PyTorch's DriverAPI through cudaGetDriverEntryPointByVersion,
 * its dlopen("libcuda.so.1") device guards) finds every one.  A stub answers
 * CUDA_ERROR_NOT_SUPPORTED (801).
 * Thread-safety and signal-safety: emu_stubs.h. */
#include "emu_core.h"
#include "emu_stubs.h"

enum {
#define EMU_CU(name, kind) EMU_IX_##name,
#include "cuda_exports.def"
#undef EMU_CU
  EMU_CU_N
};

static atomic_flag emu_stub_said[EMU_CU_N];

#define EMU_STUB_NOT_SUPPORTED() 801
#define EMU_STUB_ANSWER "CUDA_ERROR_NOT_SUPPORTED"
#define EMU_CU(name, kind) EMU_STUB_##kind(name)
#include "cuda_exports.def"
#undef EMU_CU

/* The bounds of this library's section emu_stubs (made by the linker). */
extern const char __start_emu_stubs[] __attribute__((visibility("hidden")));
extern const char __stop_emu_stubs[] __attribute__((visibility("hidden")));

EMU_API int emu_is_stub(const void *fn)
{
  return (const char *)fn >= __start_emu_stubs && (const char *)fn < __stop_emu_stubs;
}
