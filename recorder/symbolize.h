/* symbolize.h -- "func+0xoff" for an instruction pointer of this process,
 * without malloc: the fatal-signal path (stack.c) uses it instead of
 * unw_get_proc_name, which mallocs (a crash inside malloc would deadlock).
 *
 * Thread-safety: a cache belongs to one caller at a time.
 * Signal-safety: malloc-free and lock-free of our own; dladdr1 takes the
 * dynamic loader's recursive lock (the same one unwinding itself needs), and
 * the ELF file is read with open/fstat/mmap/munmap/close only.
 */
#ifndef NTR_SYMBOLIZE_H
#define NTR_SYMBOLIZE_H
#include <stddef.h>
#include <stdint.h>

/* The last ELF file mapped, reused while consecutive frames stay in it. */
struct ntr_sym_cache {
  char path[256];
  const unsigned char *map;
  size_t len;
};

/* Name the function containing ip (lookup at ip - 1 when is_return_address,
 * so a call that ends a function is attributed to it): "func+0xoff" from the
 * object's .symtab (else .dynsym), else "object+0xoff" relative to the load
 * bias (feed that to addr2line), else "?".  out is always NUL-terminated.
 * @return 0 when a function name was found, -ENOENT otherwise. */
int ntr_symbolize(uintptr_t ip, int is_return_address, char *out, size_t cap,
                  struct ntr_sym_cache *cache);

/* Unmap the cached file. */
void ntr_symbolize_done(struct ntr_sym_cache *cache);
#endif
