/* fmt.c -- names and descriptions in the lines the coordinator writes
 * (contract: check.h).  Kind names come from recorder/nccl_api.def. */
#include "interpose/exchange/check_int.h"

#include <stdio.h>
#include <string.h>

#include "recorder/format.h"

static const char *kind_name(unsigned kind) {
  switch (kind) {
#define NT_COLL(name, KIND, ...) case NTR_KIND_##KIND: return &#name[4]; /* "ncclAllReduce" -> "AllReduce" */
#define NT_P2P(name, KIND, ...) case NTR_KIND_##KIND: return &#name[4]; /* "ncclAllReduce" -> "AllReduce" */
#include "recorder/nccl_api.def"
  default: return "Op?";
  }
}

/* ncclDataType_t and ncclRedOp_t values of nccl.h (stable since NCCL 2.0;
 * the float8 types since 2.24). */
static const char *dtype_name(unsigned d) {
  static const char *const n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                  "float16", "float32", "float64", "bfloat16", "float8e4m3",
                                  "float8e5m2"};
  return d < sizeof n / sizeof n[0] ? n[d] : "dtype?";
}

static void redop_str(int32_t op, char *b, size_t len) {
  static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < 5)
    snprintf(b, len, "%s", n[op]);
  else
    snprintf(b, len, "premulsum#%d", (int)op); /* user-created ops */
}

void ntx_fp_describe(const struct ntx_fp *fp, char *buf, size_t len) {
  char op[32] = "";
  int n = snprintf(buf, len, "%s(count=%llu, %s", kind_name(fp->kind),
                   (unsigned long long)fp->count, dtype_name(fp->dtype));
  if (n < 0 || (size_t)n >= len)
    return;
  if (fp->dir == NTX_FP_COLL && fp->redop >= 0) {
    redop_str(fp->redop, op, sizeof op);
    n += snprintf(buf + n, len - (size_t)n, ", %s", op);
  }
  if (fp->dir == NTX_FP_COLL && fp->peer >= 0 && (size_t)n < len)
    n += snprintf(buf + n, len - (size_t)n, ", root=%d", (int)fp->peer);
  if ((size_t)n < len)
    snprintf(buf + n, len - (size_t)n, ")");
}

/* "0,2-5,9" from the ranks r with sel[r] == v. */
void ntx_rank_list(const uint8_t *sel, int32_t n, uint8_t v, char *b, size_t len, int *count) {
  size_t o = 0;
  int k = 0;
  b[0] = '\0';
  for (int32_t r = 0; r < n; r++) {
    if (sel[r] != v)
      continue;
    int32_t e = r;
    while (e + 1 < n && sel[e + 1] == v)
      e++;
    if (o + 24 < len)
      o += (size_t)snprintf(b + o, len - o, e > r + 1 ? "%s%d-%d" : e == r + 1 ? "%s%d,%d" : "%s%d",
                            k ? "," : "", (int)r, (int)e);
    else if (o + 4 < len && b[o - 1] != '.')
      o += (size_t)snprintf(b + o, len - o, "...");
    k += e - r + 1;
    r = e;
  }
  if (count)
    *count = k;
}

