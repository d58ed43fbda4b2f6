/* names.h -- the one place that names what the on-disk format numbers:
 * event kinds (recorder/nccl_api.def and NTR_EVENT_LIST), dump triggers
 * (NTR_TRIGGER_LIST), signals (NTR_SIGNAL_LIST), data types, reduction ops
 * and results.  Used by the recorder, the interposer, the exchange and the
 * tools alike, so every output says the same name for the same value.
 *
 * Contract: pure functions over constant tables, no state.  Safe from any
 * thread and async-signal-safe.  Each answers NULL (file tags: "unknown")
 * for a value this version does not name; what to print then is the
 * caller's choice (the tools write "kind#99", the tracer a generic word).
 */
#ifndef NTR_NAMES_H
#define NTR_NAMES_H

#include <signal.h>
#include <stddef.h>
#include "recorder/format.h"

/* "AllReduce", "Send", "CommInitRank" (NCCL's names without "nccl"),
 * "None", "Mark", "PeerLost", ... */
static inline const char *ntr_name_kind(unsigned kind) {
  switch (kind) {
  case NTR_KIND_NONE: return "None";
  /* &#name[4]: "ncclAllReduce" -> "AllReduce" */
#define NT_COLL(name, KIND, ...) case NTR_KIND_##KIND: return &#name[4];
#define NT_P2P NT_COLL
#define NT_GROUP NT_COLL
#define NT_LIFE NT_COLL
#include "recorder/nccl_api.def"
#define NTR_X_NAME(KIND, value, name) case NTR_KIND_##KIND: return name;
  NTR_EVENT_LIST(NTR_X_NAME)
#undef NTR_X_NAME
  default: return NULL;
  }
}

/* 1 for a collective of nccl_api.def, 2 for send/recv, 0 for any other. */
static inline int ntr_name_kind_class(unsigned kind) {
  switch (kind) {
#define NT_COLL(name, KIND, ...) case NTR_KIND_##KIND: return 1;
#define NT_P2P(name, KIND, ...) case NTR_KIND_##KIND: return 2;
#include "recorder/nccl_api.def"
  default: return 0;
  }
}

/* What the tracer's DUMP event, `nccltrace decode` and the JSON say. */
static inline const char *ntr_name_trigger(unsigned kind) {
  switch (kind) {
#define NTR_X_NAME(k, v, name, tag) case v: return name;
  NTR_TRIGGER_LIST(NTR_X_NAME)
#undef NTR_X_NAME
  default: return NULL;
  }
}

/* The end of a dump's file name; "unknown" for a kind this version does
 * not know. */
static inline const char *ntr_name_trigger_tag(unsigned kind) {
  switch (kind) {
#define NTR_X_TAG(k, v, name, tag) case v: return tag;
  NTR_TRIGGER_LIST(NTR_X_TAG)
#undef NTR_X_TAG
  default: return "unknown";
  }
}

/* "SIGSEGV" */
static inline const char *ntr_name_signal(int signo) {
  switch (signo) {
#define NTR_X_NAME(SIG, tag) case SIG: return #SIG;
  NTR_SIGNAL_LIST(NTR_X_NAME)
#undef NTR_X_NAME
  default: return NULL;
  }
}

/* "sigsegv": a signal dump's file tag. */
static inline const char *ntr_name_signal_tag(int signo) {
  switch (signo) {
#define NTR_X_TAG(SIG, tag) case SIG: return tag;
  NTR_SIGNAL_LIST(NTR_X_TAG)
#undef NTR_X_TAG
  default: return NULL;
  }
}

/* ncclDataType_t, ncclRedOp_t and ncclResult_t values of nccl.h (stable
 * since NCCL 2.0; the float8 types since 2.24).  Reduction ops from
 * ncclNumOps (5) on are made by ncclRedOpCreatePreMulSum: not named here. */
static inline const char *ntr_name_dtype(unsigned dtype) {
  static const char *const n[] = {"int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
                                  "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return dtype < sizeof n / sizeof n[0] ? n[dtype] : NULL;
}
static inline const char *ntr_name_redop(int redop) {
  static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
  return redop >= 0 && redop < (int)(sizeof n / sizeof n[0]) ? n[redop] : NULL;
}
static inline const char *ntr_name_result(int result) {
  static const char *const n[] = {"ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError",
                                  "ncclInternalError",   "ncclInvalidArgument",    "ncclInvalidUsage",
                                  "ncclRemoteError",     "ncclInProgress"};
  return result >= 0 && result < (int)(sizeof n / sizeof n[0]) ? n[result] : NULL;
}

#endif /* NTR_NAMES_H */
