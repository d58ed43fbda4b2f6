/* emu_cudart_stubs.c -- every function of the real libcudart.so.13 that the
 * emulator does not model (cudart_exports.def, emu_stubs.h), so that a
 * library linked against the real runtime and loaded with RTLD_NOW
 * (PyTorch's) finds every name it imports.  An ERR stub answers
 * cudaErrorNotSupported, which also becomes the thread's last error.
 * Thread-safety and signal-safety: emu_stubs.h. */
#include "emu_core.h"
#include "emu_stubs.h"

enum {
#define EMU_CUDART(name, kind) EMU_IX_##name,
#include "cudart_exports.def"
#undef EMU_CUDART
  EMU_CUDART_N
};

static atomic_flag emu_stub_said[EMU_CUDART_N];

/* cudaErrorNotSupported, set as the last error (emu_cudart.c). */
int emu_cudart_not_supported(void) __attribute__((visibility("hidden")));

#define EMU_STUB_NOT_SUPPORTED() emu_cudart_not_supported()
#define EMU_STUB_ANSWER "cudaErrorNotSupported"
#define EMU_CUDART(name, kind) EMU_STUB_##kind(name)
#include "cudart_exports.def"
#undef EMU_CUDART
