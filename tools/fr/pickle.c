/* pickle.c -- the data opcodes of pickle protocols 2..5, as torch's c10
 * pickler and Python's pickle.dumps write dicts, lists, tuples, str, int,
 * float, None and bool, decoded into jansson values (fr.h).
 *
 * Hostile input: no opcode that imports or calls is run -- each is refused
 * by name and offset.  c10's pickler shares containers through the memo
 * (a Python frame dict used by many entries), so a container may be
 * fetched back, but only once it is closed (off the stack), and what is
 * fetched is frozen: nothing can be added to it.  So no cycle can form
 * (the result is a DAG; dump.c bounds the work of walking it); nesting is capped at
 * NTF_MAX_DEPTH (jansson frees recursively), the stack and memo at
 * NTF_MAX_STACK, a string at NTF_MAX_STR, and the values' estimated memory
 * at the caller's limit.
 *
 * Thread-safety: no shared state.  Not signal-safe (allocates).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/fr/fr.h"

enum kind { K_SCALAR, K_LIST, K_TUPLE, K_DICT };

struct item {
  json_t *v;
  unsigned char kind, depth;
  unsigned char mut;            /* a container built here, still open to SETITEM/APPEND */
  long memo;                    /* the memo slot it was last PUT in, -1 none */
};

struct slot {
  struct item it;
  int open;                     /* the container is still on the stack, mutable: no GET of it */
};

#define NTF_MAX_MARKS (NTF_MAX_DEPTH + 8)
#define VALUE_COST 64            /* bytes a jansson value takes, about */

struct pk {
  const uint8_t *b;
  size_t len, pos, op_at;
  uint64_t used, limit;
  struct item *st;
  size_t nst, capst;
  struct slot *memo;
  size_t nmemo, capmemo;
  size_t marks[NTF_MAX_MARKS];
  int nmarks;
  char *err;
  size_t errlen;
};

static const char *op_name(uint8_t op) {
  switch (op) {
  case 'c': return "GLOBAL";
  case 0x93: return "STACK_GLOBAL";
  case 'R': return "REDUCE";
  case 'b': return "BUILD";
  case 'i': return "INST";
  case 'o': return "OBJ";
  case 0x81: return "NEWOBJ";
  case 0x92: return "NEWOBJ_EX";
  case 'P': return "PERSID";
  case 'Q': return "BINPERSID";
  case 0x82: return "EXT1";
  case 0x83: return "EXT2";
  case 0x84: return "EXT4";
  case 0x97: return "NEXT_BUFFER";
  case 0x98: return "READONLY_BUFFER";
  case 'I': return "INT";
  case 'L': return "LONG";
  case 'F': return "FLOAT";
  case 'S': return "STRING";
  case 'V': return "UNICODE";
  case 'p': return "PUT";
  case 'g': return "GET";
  case 'C': return "SHORT_BINBYTES";
  case 'B': return "BINBYTES";
  case 0x8e: return "BINBYTES8";
  case 0x96: return "BYTEARRAY8";
  case 0x8f: return "EMPTY_SET";
  case 0x90: return "ADDITEMS";
  case 0x91: return "FROZENSET";
  default: return NULL;
  }
}

static int fail(struct pk *p, const char *fmt, const char *what) {
  char m[160];
  snprintf(m, sizeof m, fmt, what);
  snprintf(p->err, p->errlen, "pickle: %s at offset %zu", m, p->op_at);
  return -1;
}

static int need(struct pk *p, size_t n) {
  if (p->len - p->pos < n)
    return fail(p, "%struncated", "");
  return 0;
}

static uint64_t le(const uint8_t *b, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | b[i];
  return v;
}

static int charge(struct pk *p, uint64_t n) {
  p->used += n;
  if (p->used > p->limit)
    return fail(p, "the decoded values would take more than the memory limit%s", "");
  return 0;
}

static int push(struct pk *p, json_t *v, enum kind k, int depth) {
  if (!v)
    return fail(p, "out of memory%s", "");
  if (charge(p, VALUE_COST) != 0 || p->nst >= NTF_MAX_STACK) {
    json_decref(v);
    return p->nst >= NTF_MAX_STACK ? fail(p, "more than %s values on the stack", "2^20") : -1;
  }
  if (p->nst == p->capst) {
    size_t cap = p->capst ? 2 * p->capst : 64;
    struct item *s = realloc(p->st, cap * sizeof(*s));
    if (!s) {
      json_decref(v);
      return fail(p, "out of memory%s", "");
    }
    p->st = s;
    p->capst = cap;
  }
  p->st[p->nst++] = (struct item){v, (unsigned char)k, (unsigned char)depth, k != K_SCALAR, -1};
  return 0;
}

/* Item it leaves the stack: a container it was PUT as may now be fetched. */
static void leave(struct pk *p, const struct item *it) {
  if (it->memo >= 0 && (size_t)it->memo < p->nmemo && p->memo[it->memo].it.v == it->v)
    p->memo[it->memo].open = 0;
}

static void drop(struct pk *p, size_t from) {
  for (size_t i = from; i < p->nst; i++) {
    leave(p, &p->st[i]);
    json_decref(p->st[i].v);
  }
  p->nst = from;
}

/* Values above the top mark: as in Python, an opcode never reaches below it. */
static size_t avail(const struct pk *p) {
  return p->nst - (p->nmarks ? p->marks[p->nmarks - 1] : 0);
}

static size_t mark_pop(struct pk *p, int *ok) {
  if (p->nmarks == 0) {
    *ok = 0;
    fail(p, "no MARK before a %s opcode", "mark-taking");
    return 0;
  }
  size_t from = p->marks[--p->nmarks];
  if (from > p->nst) { /* cannot be: POP below a mark takes the mark */
    *ok = 0;
    fail(p, "a MARK above the %s", "stack");
    return 0;
  }
  *ok = 1;
  return from;
}

/* The container under the top items from, taking child depths. */
static int adopt(struct pk *p, struct item *c, const struct item *child) {
  if (child->depth + 1 > NTF_MAX_DEPTH)
    return fail(p, "containers nested more than %s deep", "32");
  if (child->depth + 1 > c->depth)
    c->depth = (unsigned char)(child->depth + 1);
  return 0;
}

static int set_items(struct pk *p, size_t from) {
  if (from <= (p->nmarks ? p->marks[p->nmarks - 1] : 0) || p->st[from - 1].kind != K_DICT)
    return fail(p, "SETITEM%s without a dict under it", "(S)");
  if (!p->st[from - 1].mut)
    return fail(p, "SETITEM%s into a dict fetched from the memo", "(S)");
  if ((p->nst - from) % 2)
    return fail(p, "a key without a value%s", "");
  struct item *d = &p->st[from - 1];
  for (size_t i = from; i < p->nst; i += 2) {
    const struct item *k = &p->st[i], *v = &p->st[i + 1];
    char num[24];
    const char *key;
    if (json_is_string(k->v)) {
      key = json_string_value(k->v);
      if (strlen(key) != json_string_length(k->v))
        return fail(p, "a dict key with a NUL byte%s", "");
    } else if (json_is_integer(k->v)) {
      snprintf(num, sizeof num, "%lld", (long long)json_integer_value(k->v));
      key = num;
    } else {
      return fail(p, "a dict key that is not a str or an int%s", "");
    }
    if (adopt(p, d, v) != 0)
      return -1;
    if (json_object_set(d->v, key, v->v) != 0)
      return fail(p, "out of memory%s", "");
  }
  drop(p, from);
  return 0;
}

static int append_items(struct pk *p, size_t from) {
  if (from <= (p->nmarks ? p->marks[p->nmarks - 1] : 0) || p->st[from - 1].kind != K_LIST)
    return fail(p, "APPEND%s without a list under it", "(S)");
  if (!p->st[from - 1].mut)
    return fail(p, "APPEND%s into a list fetched from the memo", "(S)");
  struct item *l = &p->st[from - 1];
  for (size_t i = from; i < p->nst; i++) {
    if (adopt(p, l, &p->st[i]) != 0)
      return -1;
    if (json_array_append(l->v, p->st[i].v) != 0)
      return fail(p, "out of memory%s", "");
  }
  drop(p, from);
  return 0;
}

/* The top n items (from index from) into one new tuple or list. */
static int collect(struct pk *p, size_t from, enum kind k) {
  struct item c = {json_array(), (unsigned char)k, 0, 0, -1};
  if (!c.v)
    return fail(p, "out of memory%s", "");
  for (size_t i = from; i < p->nst; i++) {
    if (adopt(p, &c, &p->st[i]) != 0 || json_array_append(c.v, p->st[i].v) != 0) {
      json_decref(c.v);
      return p->err[0] ? -1 : fail(p, "out of memory%s", "");
    }
  }
  drop(p, from);
  if (push(p, c.v, k, c.depth) != 0)
    return -1;
  p->st[p->nst - 1].mut = 0; /* a tuple is complete; a LIST built here may still be appended to */
  if (k == K_LIST)
    p->st[p->nst - 1].mut = 1;
  return 0;
}

static int memo_put(struct pk *p, uint64_t idx) {
  if (avail(p) == 0)
    return fail(p, "PUT%s with an empty stack", "");
  if (idx > p->nmemo || idx >= NTF_MAX_STACK)
    return fail(p, "a memo index past the next free one%s", "");
  if (idx == p->nmemo) {
    if (p->nmemo == p->capmemo) {
      size_t cap = p->capmemo ? 2 * p->capmemo : 64;
      struct slot *m = realloc(p->memo, cap * sizeof(*m));
      if (!m)
        return fail(p, "out of memory%s", "");
      p->memo = m;
      p->capmemo = cap;
    }
    p->memo[p->nmemo++] = (struct slot){{NULL, K_SCALAR, 0, 0, -1}, 0};
    if (charge(p, sizeof(struct slot)) != 0)
      return -1;
  }
  struct slot *m = &p->memo[idx];
  json_decref(m->it.v);
  struct item *top = &p->st[p->nst - 1];
  m->it = *top;
  m->it.mut = 0;
  m->open = top->mut;
  json_incref(m->it.v);
  if (top->mut)
    top->memo = (long)idx;
  return 0;
}

static int memo_get(struct pk *p, uint64_t idx) {
  if (idx >= p->nmemo || !p->memo[idx].it.v)
    return fail(p, "GET of a memo index never PUT%s", "");
  const struct slot *m = &p->memo[idx];
  if (m->open)
    return fail(p, "GET of a container still being built (a cycle) is %s", "not read");
  if (push(p, json_incref(m->it.v), (enum kind)m->it.kind, m->it.depth) != 0)
    return -1;
  p->st[p->nst - 1].mut = 0; /* frozen: shared, nothing is added to it */
  return 0;
}

static int string(struct pk *p, uint64_t n) {
  if (n > NTF_MAX_STR)
    return fail(p, "a string over %s", "1 MiB");
  if (need(p, (size_t)n) != 0 || charge(p, n) != 0)
    return -1;
  json_t *s = json_stringn((const char *)p->b + p->pos, (size_t)n);
  p->pos += (size_t)n;
  if (!s)
    return fail(p, "a string that is not %s", "UTF-8");
  return push(p, s, K_SCALAR, 0);
}

static int run(struct pk *p, json_t **out) {
  while (p->pos < p->len) {
    p->op_at = p->pos;
    uint8_t op = p->b[p->pos++];
    uint64_t n;
    int ok;
    size_t from;
    switch (op) {
    case 0x80: /* PROTO */
      if (need(p, 1) != 0)
        return -1;
      if (p->b[p->pos] < 2 || p->b[p->pos] > 5)
        return fail(p, "protocol %s: only 2 to 5 are read", p->b[p->pos] < 2 ? "below 2" : "above 5");
      p->pos++;
      break;
    case 0x95: /* FRAME: a length, the opcodes run on through it */
      if (need(p, 8) != 0)
        return -1;
      n = le(p->b + p->pos, 8);
      p->pos += 8;
      if (n > p->len - p->pos)
        return fail(p, "a FRAME longer than the %s", "file");
      break;
    case '.': /* STOP */
      if (avail(p) == 0)
        return fail(p, "STOP with an empty %s", "stack");
      leave(p, &p->st[p->nst - 1]);
      *out = p->st[--p->nst].v;
      return 0;
    case '(': /* MARK */
      if (p->nmarks == NTF_MAX_MARKS)
        return fail(p, "more than %s open MARKs", "40");
      p->marks[p->nmarks++] = p->nst;
      break;
    case '0': /* POP: as Python's, the top mark when nothing is above it */
      if (p->nmarks && p->marks[p->nmarks - 1] == p->nst) {
        p->nmarks--;
        break;
      }
      if (avail(p) == 0)
        return fail(p, "POP of an empty %s", "stack");
      drop(p, p->nst - 1);
      break;
    case '1': /* POP_MARK */
      from = mark_pop(p, &ok);
      if (!ok)
        return -1;
      drop(p, from);
      break;
    case '2': /* DUP */
      if (avail(p) == 0 || p->st[p->nst - 1].kind != K_SCALAR)
        return fail(p, "DUP of %s", avail(p) ? "a container" : "nothing");
      if (push(p, json_incref(p->st[p->nst - 1].v), K_SCALAR, 0) != 0)
        return -1;
      break;
    case 'N':
      if (push(p, json_null(), K_SCALAR, 0) != 0)
        return -1;
      break;
    case 0x88:
    case 0x89:
      if (push(p, json_boolean(op == 0x88), K_SCALAR, 0) != 0)
        return -1;
      break;
    case 'K': case 'M': case 'J': {
      int w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
      if (need(p, (size_t)w) != 0)
        return -1;
      int64_t v = (int64_t)le(p->b + p->pos, w);
      if (w == 4)
        v = (int32_t)(uint32_t)v;
      p->pos += (size_t)w;
      if (push(p, json_integer(v), K_SCALAR, 0) != 0)
        return -1;
      break;
    }
    case 0x8a: case 0x8b: { /* LONG1, LONG4: little-endian two's complement */
      int w = op == 0x8a ? 1 : 4;
      if (need(p, (size_t)w) != 0)
        return -1;
      n = le(p->b + p->pos, w);
      p->pos += (size_t)w;
      if (n > 8)
        return fail(p, "an integer wider than %s", "64 bits");
      if (need(p, (size_t)n) != 0)
        return -1;
      uint64_t u = le(p->b + p->pos, (int)n);
      if (n && n < 8 && (p->b[p->pos + n - 1] & 0x80))
        u |= ~0ull << (8 * n);
      p->pos += (size_t)n;
      if (push(p, json_integer((json_int_t)u), K_SCALAR, 0) != 0)
        return -1;
      break;
    }
    case 'G': { /* BINFLOAT: big-endian double */
      if (need(p, 8) != 0)
        return -1;
      uint64_t u = 0;
      for (int i = 0; i < 8; i++)
        u = u << 8 | p->b[p->pos + i];
      p->pos += 8;
      double d;
      memcpy(&d, &u, sizeof d);
      if (push(p, d == d && d - d == 0 ? json_real(d) : json_null(), K_SCALAR, 0) != 0)
        return -1;
      break;
    }
    case 0x8c: case 'U': /* SHORT_BINUNICODE, SHORT_BINSTRING */
      if (need(p, 1) != 0)
        return -1;
      n = p->b[p->pos++];
      if (string(p, n) != 0)
        return -1;
      break;
    case 'X': case 'T': /* BINUNICODE, BINSTRING */
      if (need(p, 4) != 0)
        return -1;
      n = le(p->b + p->pos, 4);
      p->pos += 4;
      if (string(p, n) != 0)
        return -1;
      break;
    case 0x8d: /* BINUNICODE8 */
      if (need(p, 8) != 0)
        return -1;
      n = le(p->b + p->pos, 8);
      p->pos += 8;
      if (string(p, n) != 0)
        return -1;
      break;
    case '}':
      if (push(p, json_object(), K_DICT, 0) != 0)
        return -1;
      break;
    case ']':
      if (push(p, json_array(), K_LIST, 0) != 0)
        return -1;
      break;
    case ')':
      if (push(p, json_array(), K_TUPLE, 0) != 0)
        return -1;
      break;
    case 'd': case 'l': case 't': /* DICT, LIST, TUPLE: the items since the mark */
      from = mark_pop(p, &ok);
      if (!ok)
        return -1;
      if (op == 't' || op == 'l') {
        if (collect(p, from, op == 't' ? K_TUPLE : K_LIST) != 0)
          return -1;
        break;
      }
      if (push(p, json_object(), K_DICT, 0) != 0)
        return -1;
      /* the new dict goes under its items: rotate it down */
      {
        struct item d = p->st[p->nst - 1];
        memmove(&p->st[from + 1], &p->st[from], (p->nst - 1 - from) * sizeof(*p->st));
        p->st[from] = d;
        if (set_items(p, from + 1) != 0)
          return -1;
      }
      break;
    case 0x85: case 0x86: case 0x87: { /* TUPLE1..3 */
      size_t k = (size_t)(op - 0x84);
      if (avail(p) < k)
        return fail(p, "TUPLE%s with too few values", k == 1 ? "1" : k == 2 ? "2" : "3");
      if (collect(p, p->nst - k, K_TUPLE) != 0)
        return -1;
      break;
    }
    case 's': /* SETITEM */
      if (avail(p) < 3)
        return fail(p, "SETITEM with too few %s", "values");
      if (set_items(p, p->nst - 2) != 0)
        return -1;
      break;
    case 'u': /* SETITEMS */
      from = mark_pop(p, &ok);
      if (!ok || set_items(p, from) != 0)
        return -1;
      break;
    case 'a': /* APPEND */
      if (avail(p) < 2)
        return fail(p, "APPEND with too few %s", "values");
      if (append_items(p, p->nst - 1) != 0)
        return -1;
      break;
    case 'e': /* APPENDS */
      from = mark_pop(p, &ok);
      if (!ok || append_items(p, from) != 0)
        return -1;
      break;
    case 'q': case 'r': /* BINPUT, LONG_BINPUT */
      if (need(p, op == 'q' ? 1 : 4) != 0)
        return -1;
      n = le(p->b + p->pos, op == 'q' ? 1 : 4);
      p->pos += op == 'q' ? 1 : 4;
      if (memo_put(p, n) != 0)
        return -1;
      break;
    case 0x94: /* MEMOIZE */
      if (memo_put(p, p->nmemo) != 0)
        return -1;
      break;
    case 'h': case 'j': /* BINGET, LONG_BINGET */
      if (need(p, op == 'h' ? 1 : 4) != 0)
        return -1;
      n = le(p->b + p->pos, op == 'h' ? 1 : 4);
      p->pos += op == 'h' ? 1 : 4;
      if (memo_get(p, n) != 0)
        return -1;
      break;
    default: {
      const char *name = op_name(op);
      char what[64];
      if (name)
        snprintf(what, sizeof what, "%s (opcode 0x%02x)", name, op);
      else
        snprintf(what, sizeof what, "unknown opcode 0x%02x", op);
      return fail(p, "%s: not read (an FR dump holds only data; this is no Python interpreter)", what);
    }
    }
  }
  return fail(p, "no STOP: %s", "truncated");
}

int ntf_pickle_decode(const uint8_t *buf, size_t len, uint64_t limit, json_t **out, char *err, size_t errlen) {
  struct pk p = {.b = buf, .len = len, .limit = limit, .err = err, .errlen = errlen};
  *out = NULL;
  if (errlen)
    err[0] = 0;
  int rc = run(&p, out);
  for (size_t i = 0; i < p.nst; i++)
    json_decref(p.st[i].v);
  for (size_t i = 0; i < p.nmemo; i++)
    json_decref(p.memo[i].it.v);
  free(p.st);
  free(p.memo);
  if (rc != 0 && *out) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}
