/* stress_expect.h -- what call #seq of load thread t looks like (stress_prog
 * load mode), so a checker can tell an intact record from a torn one: every
 * field is a function of (t, seq).  stress_kill.py carries the same formula.
 * Pure function: thread-safe and signal-safe. */
#ifndef STRESS_EXPECT_H
#define STRESS_EXPECT_H
#include <stdint.h>

#define STRESS_MAX_COUNT 1024u

struct stress_call {
  int bcast;       /* 1: ncclBroadcast from root, 0: ncclAllReduce with redop */
  uint64_t count;
  int dtype;       /* ncclInt32 (2) or ncclFloat32 (7) */
  int redop;       /* ncclSum (0) or ncclMax (2) */
  int root;
};

static inline void stress_expect(int t, uint64_t seq, int nranks, struct stress_call *c) {
  c->bcast = seq % 3 == 0;
  c->count = 1 + (seq * 131u + (uint64_t)t * 977u) % STRESS_MAX_COUNT;
  c->dtype = seq % 2 ? 7 : 2;
  c->redop = seq % 4 == 1 ? 2 : 0;
  c->root = (int)((seq / 3) % (uint64_t)nranks);
}
#endif
