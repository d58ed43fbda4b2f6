/* test_ring_blocks -- per-thread blocks of positions (ntr_ring_reserve_in),
 * the holes a quiet thread leaves and the fillers readers settle them with
 * (recorder/ring.h, holes and fillers).
 *
 * Single-threaded cases first (exact outcomes), then writers on blocks with
 * a reader that follows positions in order and fills every hole it meets at
 * once (the most hostile reader): no body is ever torn, every record a
 * writer wrote is read exactly once or overwritten, and per writer the
 * positions follow program order.  Runs under TSan in CI (suite tsan). */
#include <pthread.h>

#include "helpers.h"
#include "recorder/ring.h"

#define SLOTS 4096u /* full-size blocks (ring.h) */
#define BIG_SLOTS (1u << 17) /* > WRITERS x per_writer + unused positions */

static struct ntr_ring ring;

static uint64_t put(struct ntr_ring_cursor *cur, uint64_t floor, unsigned long long id,
                    unsigned long long i) {
  uint64_t pos;
  struct ntr_record *r = ntr_ring_reserve_in(&ring, cur, floor, &pos);
  t_fill(r, id, i);
  ntr_ring_commit(&ring, r, pos, NULL);
  return pos;
}

static uint64_t head(void) { return __atomic_load_n(&ring.hdr->head, __ATOMIC_ACQUIRE); }

/* Thread A writes 2 records and goes quiet; B writes after it. */
static void test_quiet_thread(void) {
  struct ntr_ring_cursor a = {0, 0}, b = {0, 0};
  uint64_t base = head();
  CHECK_EQ(put(&a, 0, 1, 0), base);
  CHECK_EQ(put(&a, 0, 1, 1), base + 1);
  /* A's block: nothing after its next position yet -> the frontier */
  CHECK_EQ(ntr_ring_settle(&ring, base + 2, head(), 1), NTR_HOLE_FRONTIER);
  uint64_t pb = put(&b, 0, 2, 0);
  CHECK_EQ(pb, base + ring.block); /* B's own block, after A's */
  /* now A's unused positions hold B's record up */
  CHECK_EQ(ntr_ring_settle(&ring, base + 2, head(), 0), NTR_HOLE_BLOCKING);
  CHECK_EQ(ntr_ring_settle(&ring, base + 2, head(), 1), NTR_SETTLED);
  for (uint64_t p = base + 2; p < base + ring.block; p++) {
    struct ntr_record copy;
    CHECK_EQ(ntr_ring_read_slot(&ring.slots[p & ring.mask], &copy), p + 1);
    CHECK_EQ(copy.kind, NTR_KIND_NONE); /* a filler */
    CHECK_EQ(ntr_ring_settle(&ring, p, head(), 1), NTR_SETTLED);
  }
  /* A comes back: its claim fails on the filler, it moves to a new block,
   * past B's, and its record is intact there */
  uint64_t pa = put(&a, 0, 1, 2);
  CHECK(pa > pb);
  CHECK_EQ(pa % ring.block, 0);
  struct ntr_record copy;
  CHECK_EQ(ntr_ring_read_slot(&ring.slots[pa & ring.mask], &copy), pa + 1);
  CHECK(t_intact(&copy));
}

/* The same position taken twice (a signal handler that interrupted its
 * thread between reading and advancing the block): one record each. */
static void test_same_position(void) {
  struct ntr_ring_cursor a = {0, 0};
  put(&a, 0, 3, 0);
  struct ntr_ring_cursor copy_of_a = a;
  uint64_t p1 = put(&a, 0, 3, 1);
  uint64_t p2 = put(&copy_of_a, 0, 4, 0);
  CHECK(p1 != p2);
  CHECK(p2 > p1);
  struct ntr_record r;
  CHECK_EQ(ntr_ring_read_slot(&ring.slots[p1 & ring.mask], &r), p1 + 1);
  CHECK(t_intact(&r) && r.count >> 40 == 3);
  CHECK_EQ(ntr_ring_read_slot(&ring.slots[p2 & ring.mask], &r), p2 + 1);
  CHECK(t_intact(&r) && r.count >> 40 == 4);
}

/* A floor above the block (the communicator was last used by another
 * thread further on): a new block. */
static void test_floor(void) {
  struct ntr_ring_cursor a = {0, 0}, b = {0, 0};
  uint64_t pa = put(&a, 0, 5, 0);
  uint64_t pb = put(&b, 0, 6, 0);
  CHECK(pb > pa);
  uint64_t pa2 = put(&a, pb + 1, 5, 1);
  CHECK(pa2 > pb);
}

/* ---------------------------------------------------- concurrent part -- */

#define WRITERS 4
static unsigned long per_writer = 20000;
static int done; /* atomic */
static unsigned long long seen[WRITERS], fillers, bad;
static unsigned long long last_seen[WRITERS];
static uint64_t start_pos;

static void *writer(void *arg) {
  unsigned long long id = (unsigned long long)(uintptr_t)arg;
  struct ntr_ring_cursor cur = {0, 0};
  for (unsigned long long i = 0; i < per_writer; i++) {
    put(&cur, 0, id, i);
    if (i % 1000 == id) /* go quiet now and then: holes for the reader */
      usleep(200);
  }
  return NULL;
}

/* Follows positions in order like the exchange client; fills at once. */
static void *reader(void *arg) {
  (void)arg;
  uint64_t cursor = start_pos; /* the single-threaded cases wrote before it */
  for (;;) {
    int fin = __atomic_load_n(&done, __ATOMIC_ACQUIRE);
    uint64_t h = head();
    while (cursor < h) {
      struct ntr_record copy;
      uint64_t c = ntr_ring_read_slot(&ring.slots[cursor & ring.mask], &copy);
      if (c == 0 || c - 1 < cursor) {
        int st = ntr_ring_settle(&ring, cursor, h, 1);
        if (st == NTR_SETTLED)
          continue;
        if (st == NTR_HOLE_FRONTIER && fin)
          cursor = h; /* nobody will write the rest */
        break;
      }
      if (c - 1 == cursor) {
        if (copy.kind == NTR_KIND_NONE) {
          fillers++;
        } else if (!t_intact(&copy)) {
          bad++;
        } else {
          unsigned long long w = copy.count >> 40, i = copy.count & ((1ull << 40) - 1);
          if (w >= WRITERS || (last_seen[w] != ~0ull && i <= last_seen[w]))
            bad++; /* a writer's records out of program order, or twice */
          else
            seen[w]++, last_seen[w] = i;
        }
      }
      cursor++;
    }
    if (fin && cursor >= h)
      return NULL;
  }
}

static void test_concurrent(void) {
  start_pos = head();
  memset(last_seen, 0xff, sizeof last_seen);
  t_run_writers(WRITERS, writer, reader, &done);
  unsigned long long total = 0;
  for (int i = 0; i < WRITERS; i++)
    total += seen[i];
  printf("concurrent: %llu records read of %llu written, %llu fillers, head %llu, %llu bad\n", total,
         (unsigned long long)WRITERS * per_writer, fillers, (unsigned long long)head(), bad);
  CHECK_EQ(bad, 0);
  CHECK(total > 0);
  /* the ring is larger than everything written: nothing was overwritten,
   * so the reader, which never skips a position, read every record (in
   * order and once each: checked above) -- none was written into a
   * position it had already passed */
  CHECK_EQ(total, (unsigned long long)WRITERS * per_writer);
}

int main(int argc, char **argv) {
  if (argc > 1)
    per_writer = strtoul(argv[1], NULL, 10);
  char dir[64];
  T_RING_OPEN(&ring, dir, "blocks", SLOTS);
  test_quiet_thread();
  test_same_position();
  test_floor();
  ntr_ring_close(&ring, 1);
  struct ntr_ring_config big = {.dir = dir, .job_id = "blocks", .slots = BIG_SLOTS};
  CHECK_EQ(ntr_ring_open(&ring, &big), 0);
  if (per_writer > 25000)
    per_writer = 25000;
  test_concurrent();
  ntr_ring_close(&ring, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}
