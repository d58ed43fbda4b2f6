/* symbolize.c -- malloc-free symbol lookup in this process's ELF objects
 * (see symbolize.h).  The file is hostile as far as bounds go: every offset
 * and size read from it is checked against its length before use, because a
 * fault here would happen inside a fatal-signal handler. */
#include "recorder/symbolize.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recorder/util.h"

void ntr_symbolize_done(struct ntr_sym_cache *cache) {
  if (cache->map)
    munmap((void *)cache->map, cache->len);
  cache->map = NULL;
  cache->len = 0;
  cache->path[0] = '\0';
}

static int map_file(struct ntr_sym_cache *cache, const char *path) {
  if (cache->map && strcmp(cache->path, path) == 0)
    return 0;
  ntr_symbolize_done(cache);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0)
    rc = -errno;
  else if (st.st_size < (off_t)sizeof(ElfW(Ehdr)))
    rc = -ENOEXEC;
  void *m = MAP_FAILED;
  if (!rc) {
    m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
      rc = -errno;
  }
  close(fd);
  if (rc)
    return rc;
  cache->map = m;
  cache->len = (size_t)st.st_size;
  ntr_strlcpy(cache->path, path, sizeof cache->path);
  return 0;
}

/* A bounds-checked pointer to [off, off + size) of the mapped file. */
static const void *at(const struct ntr_sym_cache *c, uint64_t off, uint64_t size) {
  if (off > c->len || size > c->len - off)
    return NULL;
  return c->map + off;
}

/* Find the symbol whose [value, value + size) holds vaddr in the table of
 * the given type.  @return 0 and name/start, or -ENOENT. */
static int find_in(const struct ntr_sym_cache *c, const ElfW(Ehdr) *eh, uint32_t type,
                   uint64_t vaddr, const char **name, uint64_t *start) {
  const ElfW(Shdr) *sh = at(c, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(ElfW(Shdr)));
  if (!sh || eh->e_shentsize != sizeof(ElfW(Shdr)))
    return -ENOENT;
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != type || sh[i].sh_entsize != sizeof(ElfW(Sym)) ||
        sh[i].sh_link >= eh->e_shnum)
      continue;
    const ElfW(Sym) *sym = at(c, sh[i].sh_offset, sh[i].sh_size);
    const ElfW(Shdr) *strsh = &sh[sh[i].sh_link];
    const char *str = at(c, strsh->sh_offset, strsh->sh_size);
    if (!sym || !str || strsh->sh_size == 0)
      continue;
    size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
    for (size_t k = 0; k < n; k++) {
      unsigned t = ELF64_ST_TYPE(sym[k].st_info);
      if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym[k].st_shndx == SHN_UNDEF)
        continue;
      if (vaddr < sym[k].st_value || vaddr - sym[k].st_value >= sym[k].st_size)
        continue;
      if (sym[k].st_name >= strsh->sh_size)
        continue;
      /* the name must end inside the string table */
      if (!memchr(str + sym[k].st_name, '\0', strsh->sh_size - sym[k].st_name))
        continue;
      *name = str + sym[k].st_name;
      *start = sym[k].st_value;
      return 0;
    }
  }
  return -ENOENT;
}

static int lookup(struct ntr_sym_cache *c, const char *path, uint64_t vaddr, const char **name,
                  uint64_t *start) {
  if (map_file(c, path) != 0)
    return -ENOENT;
  const ElfW(Ehdr) *eh = at(c, 0, sizeof *eh);
  if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    return -ENOENT;
  if (find_in(c, eh, SHT_SYMTAB, vaddr, name, start) == 0)
    return 0;
  return find_in(c, eh, SHT_DYNSYM, vaddr, name, start);
}

int ntr_symbolize(uintptr_t ip, int is_return_address, char *out, size_t cap,
                  struct ntr_sym_cache *cache) {
  struct ntr_sb sb;
  ntr_sb_init(&sb, out, cap);
  uintptr_t look = is_return_address && ip ? ip - 1 : ip;
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1((void *)look, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) {
    ntr_sb_str(&sb, "?");
    return -ENOENT;
  }
  /* the main program's link map has an empty name: read it through /proc */
  const char *path = (lm->l_name && lm->l_name[0]) ? lm->l_name : "/proc/self/exe";
  uint64_t vaddr = (uint64_t)(look - lm->l_addr); /* l_addr: the load bias */
  const char *name = NULL;
  uint64_t start = 0;
  if (lookup(cache, path, vaddr, &name, &start) == 0) {
    char cut[48]; /* leave room for "+0x..." in NTR_SYM_BYTES */
    ntr_strlcpy(cut, name, sizeof cut);
    ntr_sb_str(&sb, cut);
    ntr_sb_str(&sb, "+");
    ntr_sb_hex(&sb, (uint64_t)(ip - lm->l_addr) - start);
    return 0;
  }
  const char *base = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
  base = base ? base + 1 : (info.dli_fname && info.dli_fname[0] ? info.dli_fname : "?");
  char cut[40];
  ntr_strlcpy(cut, base, sizeof cut);
  ntr_sb_str(&sb, cut);
  ntr_sb_str(&sb, "+");
  ntr_sb_hex(&sb, (uint64_t)(ip - lm->l_addr));
  return -ENOENT;
}
