/* emu_nccl_red.c -- element-wise reductions for every NCCL data type.
 *
 * Pure functions on caller buffers: thread-safe, async-signal-safe.
 * Integer arithmetic wraps (done in the unsigned type, as a GPU would);
 * 16- and 8-bit floats are widened to float, combined, and rounded back to
 * nearest-even after every step, which is what a chain of __hadd does. */
#include "emu_nccl.h"

#include <math.h>
#include <string.h>

size_t emu_dtype_size(int dtype)
{
  switch (dtype) {
  case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  default: return 0;
  }
}

/* Small IEEE-like formats: E exponent bits, M mantissa bits.  `fn` is the
 * e4m3 "finite" flavour: no infinity, only S.1111.111 is NaN, and overflow
 * saturates to the largest finite value (448). */
struct emu_fmt {
  int e, m, fn;
};

static const struct emu_fmt emu_f16 = { 5, 10, 0 }, emu_bf16 = { 8, 7, 0 }, emu_e4m3 = { 4, 3, 1 },
                            emu_e5m2 = { 5, 2, 0 };

static float emu_decode(unsigned v, struct emu_fmt f)
{
  unsigned sign = (v >> (f.e + f.m)) & 1u;
  unsigned ex = (v >> f.m) & ((1u << f.e) - 1);
  unsigned man = v & ((1u << f.m) - 1);
  int bias = (1 << (f.e - 1)) - 1;
  double r;
  if (ex == 0) {
    r = ldexp((double)man, 1 - bias - f.m);
  } else if (!f.fn && ex == (1u << f.e) - 1) {
    r = man ? NAN : INFINITY;
  } else if (f.fn && ex == (1u << f.e) - 1 && man == (1u << f.m) - 1) {
    r = NAN;
  } else {
    r = ldexp((double)(man | (1u << f.m)), (int)ex - bias - f.m);
  }
  return (float)(sign ? -r : r);
}

static unsigned emu_encode(float x, struct emu_fmt f)
{
  unsigned sign = signbit(x) ? 1u << (f.e + f.m) : 0;
  unsigned exp_all = (1u << f.e) - 1;
  unsigned nan = f.fn ? (exp_all << f.m) | ((1u << f.m) - 1) : (exp_all << f.m) | (1u << (f.m - 1));
  if (isnan(x))
    return sign | nan;
  double a = fabs((double)x);
  int bias = (1 << (f.e - 1)) - 1;
  unsigned maxfin = f.fn ? (exp_all << f.m) | ((1u << f.m) - 2) : ((exp_all - 1) << f.m) | ((1u << f.m) - 1);
  unsigned over = f.fn ? maxfin : exp_all << f.m;
  if (isinf(x))
    return sign | over;
  if (a == 0)
    return sign;
  int e2;
  (void)frexp(a, &e2);
  int ex = e2 - 1;   /* a = 1.f * 2^ex */
  if (ex < 1 - bias) {
    double k = nearbyint(ldexp(a, -(1 - bias - f.m)));   /* subnormal units */
    return sign | (unsigned)k;   /* k == 2^m rolls into the smallest normal */
  }
  double k = nearbyint(ldexp(a, -(ex - f.m)));
  if (k >= ldexp(1.0, f.m + 1)) {
    k /= 2;
    ex++;
  }
  long field = (long)ex + bias;
  unsigned bits = ((unsigned)field << f.m) | ((unsigned)k - (1u << f.m));
  if (field > (long)exp_all || (!f.fn && field == (long)exp_all) || (f.fn && bits > maxfin))
    return sign | over;
  return sign | bits;
}

static const struct emu_fmt *emu_small_fmt(int dtype)
{
  switch (dtype) {
  case ncclFloat16: return &emu_f16;
  case ncclBfloat16: return &emu_bf16;
  case ncclFloat8e4m3: return &emu_e4m3;
  case ncclFloat8e5m2: return &emu_e5m2;
  default: return NULL;
  }
}

static float emu_load_small(const void *p, size_t i, int dtype)
{
  const struct emu_fmt *f = emu_small_fmt(dtype);
  if (emu_dtype_size(dtype) == 2) {
    uint16_t v;
    memcpy(&v, (const char *)p + 2 * i, 2);
    return emu_decode(v, *f);
  }
  return emu_decode(((const uint8_t *)p)[i], *f);
}

static void emu_store_small(void *p, size_t i, int dtype, float x)
{
  unsigned v = emu_encode(x, *emu_small_fmt(dtype));
  if (emu_dtype_size(dtype) == 2) {
    uint16_t h = (uint16_t)v;
    memcpy((char *)p + 2 * i, &h, 2);
  } else {
    ((uint8_t *)p)[i] = (uint8_t)v;
  }
}

static float emu_fop(float a, float b, int op)
{
  switch (op) {
  case ncclProd: return a * b;
  case ncclMax: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
  case ncclMin: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
  default: return a + b;   /* sum, avg (divided later), premulsum */
  }
}

static double emu_dop(double a, double b, int op)
{
  switch (op) {
  case ncclProd: return a * b;
  case ncclMax: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
  case ncclMin: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
  default: return a + b;
  }
}

#define EMU_INT_ACCUM(T, UT)                                                  \
  do {                                                                        \
    T *d = acc;                                                               \
    const T *s = src;                                                         \
    for (size_t i = 0; i < n; i++) {                                          \
      switch (op) {                                                           \
      case ncclProd: d[i] = (T)((UT)d[i] * (UT)s[i]); break;                  \
      case ncclMax: d[i] = d[i] > s[i] ? d[i] : s[i]; break;                  \
      case ncclMin: d[i] = d[i] < s[i] ? d[i] : s[i]; break;                  \
      default: d[i] = (T)((UT)d[i] + (UT)s[i]); break;                        \
      }                                                                       \
    }                                                                         \
  } while (0)

void emu_red_accum(void *acc, const void *src, size_t n, int dtype, int op)
{
  switch (dtype) {
  case ncclInt8: EMU_INT_ACCUM(int8_t, uint8_t); break;
  case ncclUint8: EMU_INT_ACCUM(uint8_t, uint8_t); break;
  case ncclInt32: EMU_INT_ACCUM(int32_t, uint32_t); break;
  case ncclUint32: EMU_INT_ACCUM(uint32_t, uint32_t); break;
  case ncclInt64: EMU_INT_ACCUM(int64_t, uint64_t); break;
  case ncclUint64: EMU_INT_ACCUM(uint64_t, uint64_t); break;
  case ncclFloat32: {
    float *d = acc;
    const float *s = src;
    for (size_t i = 0; i < n; i++)
      d[i] = emu_fop(d[i], s[i], op);
    break;
  }
  case ncclFloat64: {
    double *d = acc;
    const double *s = src;
    for (size_t i = 0; i < n; i++)
      d[i] = emu_dop(d[i], s[i], op);
    break;
  }
  default:
    for (size_t i = 0; i < n; i++)
      emu_store_small(acc, i, dtype, emu_fop(emu_load_small(acc, i, dtype), emu_load_small(src, i, dtype), op));
    break;
  }
}

#define EMU_INT_AVG(T)                                                        \
  do {                                                                        \
    T *d = acc;                                                               \
    for (size_t i = 0; i < n; i++)                                            \
      d[i] = (T)(d[i] / (T)nranks);                                           \
  } while (0)

void emu_red_avg(void *acc, size_t n, int dtype, int nranks)
{
  switch (dtype) {
  case ncclInt8: EMU_INT_AVG(int8_t); break;
  case ncclUint8: EMU_INT_AVG(uint8_t); break;
  case ncclInt32: EMU_INT_AVG(int32_t); break;
  case ncclUint32: EMU_INT_AVG(uint32_t); break;
  case ncclInt64: EMU_INT_AVG(int64_t); break;
  case ncclUint64: EMU_INT_AVG(uint64_t); break;
  case ncclFloat32: {
    float *d = acc;
    for (size_t i = 0; i < n; i++)
      d[i] /= (float)nranks;
    break;
  }
  case ncclFloat64: {
    double *d = acc;
    for (size_t i = 0; i < n; i++)
      d[i] /= (double)nranks;
    break;
  }
  default:
    for (size_t i = 0; i < n; i++)
      emu_store_small(acc, i, dtype, emu_load_small(acc, i, dtype) / (float)nranks);
    break;
  }
}

void emu_red_premul(void *dst, const void *src, size_t n, int dtype, const void *scalar)
{
  size_t sz = emu_dtype_size(dtype);
  if (dst != src)
    memmove(dst, src, n * sz);
  /* Multiply in place by a 1-element buffer holding the scalar, reusing the
   * product kernel so every type rounds the same way. */
  for (size_t i = 0; i < n; i++)
    emu_red_accum((char *)dst + i * sz, scalar, 1, dtype, ncclProd);
}

void emu_red_scalar_copy(void *dst, const void *src, int dtype)
{
  memcpy(dst, src, emu_dtype_size(dtype));
}
