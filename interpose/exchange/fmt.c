/* fmt.c -- names and descriptions in the lines the coordinator writes
 * (contract: check.h).  Kind names come from recorder/nccl_api.def. */
#include "interpose/exchange/check_int.h"

#include <stdio.h>
#include <string.h>

#include "recorder/names.h"

static const char *kind_name(unsigned kind) {
  const char *n = ntr_name_kind(kind);
  return n ? n : "Op?";
}

static const char *dtype_name(unsigned d) {
  const char *n = ntr_name_dtype(d);
  return n ? n : "dtype?";
}

static void redop_str(int32_t op, char *b, size_t len) {
  const char *n = ntr_name_redop(op);
  if (n)
    snprintf(b, len, "%s", n);
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

