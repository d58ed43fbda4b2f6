/* emu_stubs.h -- the weak stand-ins of emu_cudart_stubs.c and
 * emu_cuda_stubs.c: one per row of a table of real exports
 * (cudart_exports.def, cuda_exports.def) that the emulator does not model.
 *
 * A stub is weak, so a function the emulator models (a strong definition
 * in another object of the same library) replaces it at link time.  Stubs
 * take no arguments on purpose: on x86-64 and aarch64 a callee that ignores
 * its arguments is safe for any argument list, and the real prototypes
 * would conflict.  A function returning a struct by value cannot be
 * stubbed this way (the caller's hidden pointer would stay unfilled), so
 * such functions are modelled (cudaCreateChannelDesc).  Every stub lives
 * in the section emu_stubs, so that emu_is_stub() can tell a stub from a
 * modelled function by its address (cuGetProcAddress prefers the latter).
 *
 * Thread-safety: the log-once flags are atomic.  Not async-signal-safe. */
#ifndef EMU_STUBS_H
#define EMU_STUBS_H

#include <stdatomic.h>

#define EMU_STUB_ATTR __attribute__((weak, visibility("default"), section("emu_stubs"), noinline))

/* Logs NAME once (FLAG) and returns ANSWER. */
#define EMU_STUB_BODY(flag, name, answer)                                                   \
  do {                                                                                      \
    if (!atomic_flag_test_and_set_explicit(&(flag), memory_order_relaxed))                  \
      emu_log("%s is not modelled by the emulator: it answers %s", name, EMU_STUB_ANSWER); \
    return answer;                                                                          \
  } while (0)

/* Defines one stub per table row; TABLE is the .def file, ROW its macro
 * name, NOT_SUPPORTED() the value of an ERR row. */
#define EMU_STUB_ERR(name) \
  EMU_STUB_ATTR int name(void) { EMU_STUB_BODY(emu_stub_said[EMU_IX_##name], #name, EMU_STUB_NOT_SUPPORTED()); }
#define EMU_STUB_OTHER(name) \
  EMU_STUB_ATTR long name(void) { EMU_STUB_BODY(emu_stub_said[EMU_IX_##name], #name, (EMU_STUB_NOT_SUPPORTED(), 0)); }
#define EMU_STUB_PTR(name) \
  EMU_STUB_ATTR void *name(void) { EMU_STUB_BODY(emu_stub_said[EMU_IX_##name], #name, (EMU_STUB_NOT_SUPPORTED(), (void *)0)); }
#define EMU_STUB_VOID(name)                                                                  \
  EMU_STUB_ATTR void name(void)                                                              \
  {                                                                                          \
    if (!atomic_flag_test_and_set_explicit(&emu_stub_said[EMU_IX_##name], memory_order_relaxed)) \
      emu_log("%s is not modelled by the emulator: it does nothing", #name);                \
  }

#endif
