/* test_ring_basic_symlink -- symlinks are never followed: a symlink planted
 * at the ring path fails the open (O_NOFOLLOW|O_EXCL) with its target
 * untouched, a ring directory that is a symlink is refused, and with
 * fallback it is replaced by a private sibling (0700, ours) the note names,
 * removed with its ring. */
#include <errno.h>

#include "helpers.h"

int main(void) {
  char base[64], dir[128], path[512];
  static struct ntr_ring ring, r2;
  T_BASIC_OPEN(&ring, base, dir, "job/1 x", 256);

  /* a symlink planted at the ring path: open fails, target untouched */
  char victim[256];
  snprintf(victim, sizeof victim, "%s/victim", base);
  t_ring_path(path, sizeof path, dir, "evil");
  NT_ASSERT_EQ(symlink(victim, path), 0);
  struct ntr_ring_config cfg3 = {.dir = dir, .job_id = "evil", .slots = 64};
  int rc = ntr_ring_open(&r2, &cfg3);
  NT_ASSERT_EQ(rc, -EEXIST);
  NT_ASSERT(r2.hdr == NULL);
  NT_ASSERT(access(victim, F_OK) != 0);

  /* a ring directory that is a symlink: refused */
  char link_dir[256];
  snprintf(link_dir, sizeof link_dir, "%s/linkdir", base);
  NT_ASSERT_EQ(symlink(dir, link_dir), 0);
  struct ntr_ring_config cfg4 = {.dir = link_dir, .job_id = "x", .slots = 64};
  NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg4), -ELOOP);

  /* with fallback: the refused symlinked directory is replaced by a private
   * sibling (0700, ours), and the note says so */
  struct ntr_ring_config cfg5 = {.dir = link_dir, .job_id = "fb", .slots = 64, .fallback = 1};
  NT_ASSERT_EQ(ntr_ring_open(&r2, &cfg5), 0);
  NT_ASSERT(strstr(r2.note, "symlink") != NULL && strstr(r2.note, link_dir) != NULL);
  NT_ASSERT(!strncmp(r2.dir, link_dir, strlen(link_dir)) && r2.dir[strlen(link_dir)] == '-');
  NT_ASSERT_EQ(r2.own_dir, 1);
  struct stat st;
  NT_ASSERT_EQ(lstat(r2.dir, &st), 0);
  NT_ASSERT(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
  NT_ASSERT_EQ(t_count_files(dir, "nccltrace-fb"), 0); /* nothing through the link */
  char fbdir[1024];
  snprintf(fbdir, sizeof fbdir, "%s", r2.dir);
  ntr_ring_close(&r2, 1);
  NT_ASSERT(access(fbdir, F_OK) != 0); /* the private directory goes with its ring */

  ntr_ring_close(&ring, 1);
  t_rmtree(base);
  printf("ok\n");
  return 0;
}
