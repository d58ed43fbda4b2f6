/* names.c -- names of event kinds, data types, reduction ops and results
 * (recorder/reader.h).  Kind names come from recorder/nccl_api.def, so a row
 * added there is named here without another edit.
 *
 * Thread-safety: reentrant; names of unknown values are formatted into a small
 * ring of thread-local buffers, valid until four more such names are asked for
 * on the same thread.  Not signal-safe.
 */
#include <stdio.h>
#include "recorder/reader.h"

/* NCCL names without their "nccl" prefix: &#name[4] is an address constant. */
static const char *const kind_names[NTR_KIND_COUNT] = {
    [NTR_KIND_NONE] = "None",
#define NT_COLL(name, KIND, ...) [NTR_KIND_##KIND] = &#name[4],
#define NT_P2P(name, KIND, ...) [NTR_KIND_##KIND] = &#name[4],
#define NT_GROUP(name, KIND, ...) [NTR_KIND_##KIND] = &#name[4],
#define NT_LIFE(name, KIND, ...) [NTR_KIND_##KIND] = &#name[4],
#include "recorder/nccl_api.def"
    [NTR_KIND_MARK] = "Mark",
    [NTR_KIND_ASYNC_ERROR] = "AsyncError",
    [NTR_KIND_TIMEOUT] = "Timeout",
    [NTR_KIND_MISMATCH] = "Mismatch",
    [NTR_KIND_PEER_LOST] = "PeerLost",
    [NTR_KIND_SKEW] = "Skew",
    [NTR_KIND_ENV_DIFF] = "EnvDiff",
    [NTR_KIND_SIGNAL] = "Signal",
    [NTR_KIND_EXIT] = "Exit",
    [NTR_KIND_DUMP] = "Dump",
    [NTR_KIND_STRICT_BLOCK] = "StrictBlock",
    [NTR_KIND_NOTE] = "Note",
    [NTR_KIND_EXEC] = "Exec",
    [NTR_KIND_GRAPH_CAPTURE] = "GraphCapture",
    [NTR_KIND_GRAPH_INSTANTIATE] = "GraphInstantiate",
    [NTR_KIND_GRAPH_LAUNCH] = "GraphLaunch",
    [NTR_KIND_GRAPH_DESTROY] = "GraphDestroy",
    [NTR_KIND_STRAGGLER] = "Straggler",
    [NTR_KIND_DEV_ARRIVE] = "DeviceArrive",
};

static const unsigned char kind_class[NTR_KIND_COUNT] = {
#define NT_COLL(name, KIND, ...) [NTR_KIND_##KIND] = 1,
#define NT_P2P(name, KIND, ...) [NTR_KIND_##KIND] = 2,
#include "recorder/nccl_api.def"
};

static const char *const dtype_names[] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
    "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2",
};

static const char *const redop_names[] = {"sum", "prod", "max", "min", "avg"};

static const char *const result_names[] = {
    "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
    "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
};

/* Unknown values still get a distinct, greppable name ("dtype#99"). */
static const char *fmt_unknown(const char *what, long long v) {
  static _Thread_local char bufs[4][32];
  static _Thread_local unsigned next;
  char *b = bufs[next++ & 3];
  snprintf(b, sizeof bufs[0], "%s#%lld", what, v);
  return b;
}

const char *ntr_kind_name(unsigned kind) {
  if (kind < NTR_KIND_COUNT && kind_names[kind])
    return kind_names[kind];
  return fmt_unknown("kind", kind);
}

const char *ntr_dtype_name(unsigned dtype) {
  if (dtype < sizeof dtype_names / sizeof dtype_names[0])
    return dtype_names[dtype];
  return fmt_unknown("dtype", dtype);
}

/* Ops >= ncclNumOps are created by ncclRedOpCreatePreMulSum: name them by
 * their handle so two ranks using different handles show the difference. */
const char *ntr_redop_name(int redop) {
  if (redop >= 0 && redop < (int)(sizeof redop_names / sizeof redop_names[0]))
    return redop_names[redop];
  if (redop >= 5)
    return fmt_unknown("premulsum", redop);
  return fmt_unknown("redop", redop);
}

const char *ntr_result_name(int result) {
  if (result >= 0 && result < (int)(sizeof result_names / sizeof result_names[0]))
    return result_names[result];
  return fmt_unknown("ncclResult", result);
}

int ntr_kind_is_collective(unsigned kind) { return kind < NTR_KIND_COUNT && kind_class[kind] == 1; }
int ntr_kind_is_p2p(unsigned kind) { return kind < NTR_KIND_COUNT && kind_class[kind] == 2; }

/* ns = real_base_ns + (tsc - tsc_base) * 1e9 / tsc_hz, split into quotient
 * and remainder so that the multiplication cannot overflow for any clock
 * rate below 18 GHz.  tsc_hz 0 means the ticks already are nanoseconds. */
uint64_t ntr_image_ns(const struct ntr_image *img, uint64_t tsc) {
  const struct ntr_ring_header *h = &img->hdr;
  uint64_t hz = h->tsc_hz ? h->tsc_hz : 1000000000ull;
  int neg = tsc < h->tsc_base;
  uint64_t d = neg ? h->tsc_base - tsc : tsc - h->tsc_base;
  uint64_t ns = (d / hz) * 1000000000ull + (d % hz) * 1000000000ull / hz;
  return neg ? h->real_base_ns - ns : h->real_base_ns + ns;
}
