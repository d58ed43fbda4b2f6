/* pyfmt.c -- Python call sites and thread stacks of an image, for humans
 * (decode, analyze, export) and for JSON.  Every string comes from a
 * hostile file: frames are resolved by the reader's checked lookup
 * (ntt_image_pyframe) and control bytes are replaced before printing.
 *
 * Thread-safety: reentrant (caller buffers); the JSON builders allocate.
 */
#include <string.h>
#include "tools/ntt.h"

const struct ntr_stack *ntt_py_stack(const struct ntt_image *img, uint32_t id) {
  if (!id || id > img->nstacks || img->stacks[id - 1].kind != NTR_STACK_PYTHON || !img->stacks[id - 1].depth)
    return NULL;
  return &img->stacks[id - 1];
}

static void clean(const char *s, char *out, size_t cap) {
  size_t n = 0;
  for (; *s && n + 1 < cap; s++)
    out[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
  out[n] = '\0';
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s && s[1] ? s + 1 : p;
}

void ntt_py_frame_str(const struct ntt_image *img, uint64_t word, int short_file, char *buf, size_t len) {
  const char *file, *func;
  uint32_t line;
  ntt_image_pyframe(img, word, &file, &func, &line);
  char f[NTR_PYSTR_FILE_MAX + 1], fn[NTR_PYSTR_FUNC_MAX + 1];
  clean(short_file ? base_name(file) : file, f, sizeof f);
  clean(func, fn, sizeof fn);
  if (line)
    snprintf(buf, len, short_file ? "%s:%u in %s" : "%s:%u %s", f, line, fn);
  else
    snprintf(buf, len, short_file ? "%s in %s" : "%s %s", f, fn);
}

/* A frame of an installed package or of Python's standard library
 * (torch.distributed, CuPy, a logger's wrapper): the application's line is
 * further out. */
static int library_frame(const struct ntt_image *img, uint64_t word) {
  const char *file, *func;
  uint32_t line;
  ntt_image_pyframe(img, word, &file, &func, &line);
  if (strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") || file[0] == '<')
    return 1;
  const char *l = strstr(file, "/lib/python");
  return l && strchr(l + 11, '/') && !strchr(strchr(l + 11, '/') + 1, '/'); /* .../lib/python3.X/mod.py */
}

int ntt_py_site_frames(const struct ntt_image *img, const uint64_t *w, uint32_t depth, char *buf, size_t len) {
  if (!depth) {
    if (len)
      buf[0] = '\0';
    return 0;
  }
  /* Called through a library: name the application's innermost frame, and
   * the library function it called. */
  uint32_t app = 0;
  while (app < depth && library_frame(img, w[app]))
    app++;
  if (app > 0 && app < depth) {
    ntt_py_frame_str(img, w[app], 1, buf, len);
    size_t n = strlen(buf);
    if (n + 6 < len) {
      memcpy(buf + n, " via ", 5);
      ntt_py_frame_str(img, w[0], 1, buf + n + 5, len - n - 5);
    }
    return 1;
  }
  ntt_py_frame_str(img, w[0], 1, buf, len);
  /* The innermost frame is often a thin wrapper of the application's own
   * (pynccl's NCCLLibrary): its caller names the application's line. */
  if (depth > 1) {
    size_t n = strlen(buf);
    if (n + 14 < len) {
      memcpy(buf + n, " called from ", 13);
      ntt_py_frame_str(img, w[1], 1, buf + n + 13, len - n - 13);
    }
  }
  return 1;
}

int ntt_py_site(const struct ntt_image *img, uint32_t id, char *buf, size_t len) {
  const struct ntr_stack *s = ntt_py_stack(img, id);
  if (!s) {
    if (len)
      buf[0] = '\0';
    return 0;
  }
  return ntt_py_site_frames(img, s->ip, s->depth < NTR_STACK_DEPTH ? s->depth : NTR_STACK_DEPTH, buf, len);
}

json_t *ntt_pyframes_json(const struct ntt_image *img, const uint64_t *w, uint32_t depth) {
  json_t *a = json_array();
  for (uint32_t i = 0; i < depth; i++) {
    char b[NTR_PYSTR_FILE_MAX + NTR_PYSTR_FUNC_MAX + 32];
    ntt_py_frame_str(img, w[i], 0, b, sizeof b);
    json_array_append_new(a, ntt_json_str(b, sizeof b));
  }
  return a;
}

json_t *ntt_pystack_json(const struct ntt_image *img, uint32_t id) {
  const struct ntr_stack *s = ntt_py_stack(img, id);
  return s ? ntt_pyframes_json(img, s->ip, s->depth < NTR_STACK_DEPTH ? s->depth : NTR_STACK_DEPTH) : json_null();
}

json_t *ntt_pythreads_json(const struct ntt_image *img) {
  json_t *a = json_array();
  for (uint32_t i = 0; i < img->npythreads; i++) {
    const struct ntr_pythread *t = &img->pythreads[i];
    char name[sizeof t->name + 1];
    ntt_field_str(t->name, sizeof t->name, name, sizeof name);
    json_t *o = json_object();
    json_object_set_new(o, "tid", json_integer(t->tid));
    json_object_set_new(o, "thread_id", ntt_json_u64(t->thread_id));
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "dumping", json_boolean(t->flags & NTR_PYT_DUMPER));
    json_object_set_new(o, "truncated", json_boolean(t->flags & NTR_PYT_TRUNCATED));
    json_object_set_new(o, "frames", ntt_pyframes_json(img, t->frame, t->depth));
    json_array_append_new(a, o);
  }
  return a;
}

void ntt_print_pythreads(FILE *out, const struct ntt_image *img, const char *indent) {
  for (uint32_t i = 0; i < img->npythreads; i++) {
    const struct ntr_pythread *t = &img->pythreads[i];
    char name[sizeof t->name + 1];
    ntt_field_str(t->name, sizeof t->name, name, sizeof name);
    fprintf(out, "%sthread %u (%s)%s%s\n", indent, t->tid, name[0] ? name : "?",
            t->flags & NTR_PYT_DUMPER ? ", wrote the dump" : "", t->depth ? "" : ": no Python frames");
    for (uint32_t k = 0; k < t->depth; k++) {
      char b[NTR_PYSTR_FILE_MAX + NTR_PYSTR_FUNC_MAX + 32];
      ntt_py_frame_str(img, t->frame[k], 0, b, sizeof b);
      fprintf(out, "%s  %s\n", indent, b);
    }
    if (t->flags & NTR_PYT_TRUNCATED)
      fprintf(out, "%s  ... (more frames not kept)\n", indent);
  }
}

const char *ntt_py_state_name(uint32_t state) {
  switch (state) {
  case NTR_PY_ON: return "on";
  case NTR_PY_UNSUPPORTED: return "unsupported";
  case NTR_PY_DISABLED: return "disabled";
  default: return "none";
  }
}
