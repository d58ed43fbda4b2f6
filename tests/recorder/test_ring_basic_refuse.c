/* test_ring_basic_refuse -- ntr_ring_open refuses a ring directory that is
 * not a directory or (as root) not ours, and slot counts that are not a
 * power of two or are below the minimum. */
#include <errno.h>

#include "helpers.h"

int main(void) {
  char base[64], dir[128], path[256];
  static struct ntr_ring ring, r2;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);

  /* not a directory */
  snprintf(path, sizeof path, "%s/file", base);
  FILE *f = fopen(path, "w");
  NT_ASSERT(f != NULL);
  fclose(f);
  struct ntr_ring_config cfg4 = {.dir = path, .job_id = "x", .slots = 64};
  NT_ASSERT(ntr_ring_open(&r2, &cfg4) < 0);
  /* not owned by us (only testable as root: chown to nobody) */
  if (geteuid() == 0) {
    char other[256];
    snprintf(other, sizeof other, "%s/other", base);
    NT_ASSERT_EQ(mkdir(other, 0700), 0);
    NT_ASSERT_EQ(chown(other, 65534, 65534), 0);
    cfg4.dir = other;
    NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg4), -EPERM);
  }
  /* bad slot counts */
  cfg4.dir = dir;
  cfg4.slots = 100;
  NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg4), -EINVAL);
  cfg4.slots = 32;
  NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg4), -EINVAL);

  ntr_ring_close(&ring, 1);
  NT_ASSERT(access(ring.path, F_OK) != 0);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}
