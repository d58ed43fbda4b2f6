/* noop.c -- a no-op NCCL generated from recorder/nccl_api.def: every row
 * is an exported function that returns ncclSuccess and does nothing else.
 * The definitions are weak so that noop_life.c can give the few calls that
 * must hand back a handle (inits, split, shrink) and the query functions a
 * real body.  With -DNOOP_NESTED the library also calls its own public
 * symbols the way NCCL 2.28 does (ncclBcast -> ncclBroadcast through the
 * PLT, ncclCommGetAsyncError from inside other calls), for the interposer's
 * reentrancy test.
 *
 * Thread-safety: stateless.  Signal-safety: every function is.
 */
#include <nccl.h>
#include "interpose/nccl_devapi.h"

#define NOOP_API __attribute__((visibility("default"), weak))

#define NT_COLL(name, KIND, params, ...) NOOP_API ncclResult_t name params { return ncclSuccess; }
#define NT_P2P NT_COLL
#define NT_GROUP NT_COLL
#define NT_LIFE NT_COLL
#include "recorder/nccl_api.def"
