/* pyline.c -- the location table decoder (see pyline.h).
 *
 * Facts used (CPython's InternalDocs/locations.md): the table is a
 * sequence of entries, each covering a run of code units.  An entry's first
 * byte has bit 7 set; bits 3-6 are its code, bits 0-2 its length in code
 * units minus one.  Codes 0-9: short form, same line, one more byte;
 * 10-12: one-line form, line += code - 10, two more bytes; 13: no column
 * info, line += signed varint; 14: long form, line += signed varint, then
 * three varints (end line delta, column, end column); 15: no location for
 * these units (line unchanged).  A varint is 6-bit chunks, least
 * significant first, bit 6 set on every chunk but the last; a signed
 * varint is a varint v meaning -(v >> 1) when v & 1, else v >> 1.
 */
#include "interpose/pyline.h"

#include <stdint.h>

struct lt {
  nti_pyline_read_fn read;
  const unsigned char *src;
  size_t len, pos;          /* bytes of the table, next one to decode */
  unsigned char buf[256];
  size_t buf_at, buf_len;   /* buf holds src[buf_at, buf_at + buf_len) */
  int bad;
};

static int next_byte(struct lt *t) {
  if (t->pos >= t->len) {
    t->bad = 1;
    return -1;
  }
  if (t->pos < t->buf_at || t->pos >= t->buf_at + t->buf_len) {
    size_t n = t->len - t->pos < sizeof t->buf ? t->len - t->pos : sizeof t->buf;
    if (t->read(t->src + t->pos, t->buf, n) != 0) {
      t->bad = 1;
      return -1;
    }
    t->buf_at = t->pos;
    t->buf_len = n;
  }
  return t->buf[t->pos++ - t->buf_at];
}

static uint32_t varint(struct lt *t) {
  uint32_t v = 0;
  for (int shift = 0; shift < 32; shift += 6) {
    int b = next_byte(t);
    if (b < 0)
      return 0;
    v |= (uint32_t)(b & 63) << shift;
    if (!(b & 64))
      return v;
  }
  t->bad = 1;
  return 0;
}

static int32_t svarint(struct lt *t) {
  uint32_t v = varint(t);
  return (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
}

int nti_pyline(nti_pyline_read_fn read, const void *table, size_t len, int firstlineno, int lasti) {
  if (lasti < 0)
    return firstlineno > 0 ? firstlineno : 0;
  struct lt t = {.read = read, .src = table, .len = len};
  int64_t line = firstlineno;
  int64_t addr = 0;
  /* a table has at most one entry per code unit up to lasti */
  for (int64_t n = 0; n <= (int64_t)lasti + 1 && t.pos < t.len; n++) {
    int b = next_byte(&t);
    if (b < 0 || !(b & 0x80))
      return 0; /* not at an entry's first byte: malformed */
    int code = (b >> 3) & 15;
    int units = (b & 7) + 1;
    int located = 1;
    if (code == 15) {
      located = 0;
    } else if (code == 14) {
      line += svarint(&t);
      varint(&t);
      varint(&t);
      varint(&t);
    } else if (code == 13) {
      line += svarint(&t);
    } else if (code >= 10) {
      line += code - 10;
      next_byte(&t);
      next_byte(&t);
    } else {
      next_byte(&t);
    }
    if (t.bad)
      return 0;
    if (lasti < addr + units)
      return located && line > 0 && line < INT32_MAX ? (int)line : 0;
    addr += units;
  }
  return 0;
}
