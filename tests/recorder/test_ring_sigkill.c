/* test_ring_sigkill -- the ring survives its process: a child writes N
 * records and SIGKILLs itself; the parent maps the file with plain
 * format.h code and finds all N committed and intact.  Also fork: a child
 * that calls ntr_ring_reopen_child writes into its own new file and leaves
 * the parent's ring untouched. */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "helpers.h"
#include "recorder/ring.h"

#define N 5000u

/* Map a ring file read-only and check the header against the file size. */
static const struct ntr_ring_header *map_ring(const char *path, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  NT_ASSERT(fd >= 0);
  struct stat st;
  NT_ASSERT_EQ(fstat(fd, &st), 0);
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  NT_ASSERT(m != MAP_FAILED);
  close(fd);
  const struct ntr_ring_header *h = m;
  NT_ASSERT(!memcmp(h->magic, NTR_RING_MAGIC, 8));
  NT_ASSERT_EQ(h->file_size, (unsigned long long)st.st_size);
  NT_ASSERT(h->slot_offset + (uint64_t)h->slot_count * h->record_size <= h->file_size);
  *len = (size_t)st.st_size;
  return h;
}

int main(void) {
  char dir[64];
  t_tmpdir(dir, sizeof dir);
  int pfd[2];
  NT_ASSERT_EQ(pipe(pfd), 0);
  pid_t pid = fork();
  NT_ASSERT(pid >= 0);
  if (pid == 0) {
    static struct ntr_ring ring;
    struct ntr_ring_config cfg = {.dir = dir, .job_id = "kill", .slots = 8192};
    if (ntr_ring_open(&ring, &cfg) != 0)
      _exit(3);
    for (unsigned i = 0; i < N; i++) {
      uint64_t pos;
      struct ntr_record *r = t_reserve(&ring, &pos);
      t_fill(r, 7, i);
      ntr_ring_commit(&ring, r, pos, NULL);
    }
    if (write(pfd[1], ring.path, sizeof ring.path) != (ssize_t)sizeof ring.path)
      _exit(4);
    raise(SIGKILL); /* no msync, no munmap, no exit handlers */
    _exit(5);
  }
  close(pfd[1]);
  char path[256];
  NT_ASSERT_EQ(read(pfd[0], path, sizeof path), (ssize_t)sizeof path);
  close(pfd[0]);
  int status;
  NT_ASSERT_EQ(waitpid(pid, &status, 0), pid);
  NT_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  size_t len;
  const struct ntr_ring_header *h = map_ring(path, &len);
  NT_ASSERT_EQ(h->pid, pid);
  NT_ASSERT(h->head >= N && h->head - N < h->block_positions); /* the rest of the last block */
  const struct ntr_record *slots = (const void *)((const char *)h + h->slot_offset);
  for (unsigned i = 0; i < N; i++) {
    NT_ASSERT_EQ(slots[i].commit, i + 1);
    NT_ASSERT(t_intact(&slots[i]));
    NT_ASSERT_EQ(slots[i].count, (7ull << 40) | i);
  }
  munmap((void *)h, len);

  /* fork child switching rings */
  static struct ntr_ring parent;
  struct ntr_ring_config cfg = {.dir = dir, .job_id = "fork", .slots = 1024};
  NT_ASSERT_EQ(ntr_ring_open(&parent, &cfg), 0);
  for (unsigned i = 0; i < 10; i++) {
    uint64_t pos;
    struct ntr_record *r = t_reserve(&parent, &pos);
    t_fill(r, 1, i);
    ntr_ring_commit(&parent, r, pos, NULL);
  }
  NT_ASSERT_EQ(pipe(pfd), 0);
  pid = fork();
  NT_ASSERT(pid >= 0);
  if (pid == 0) {
    if (ntr_ring_reopen_child(&parent, &cfg) != 0)
      _exit(3);
    t_cursor_reset(); /* its block was in the parent's ring */
    for (unsigned i = 0; i < 100; i++) {
      uint64_t pos;
      struct ntr_record *r = t_reserve(&parent, &pos);
      t_fill(r, 2, i);
      ntr_ring_commit(&parent, r, pos, NULL);
    }
    if (write(pfd[1], parent.path, sizeof parent.path) != (ssize_t)sizeof parent.path)
      _exit(4);
    _exit(0);
  }
  close(pfd[1]);
  NT_ASSERT_EQ(read(pfd[0], path, sizeof path), (ssize_t)sizeof path);
  close(pfd[0]);
  NT_ASSERT_EQ(waitpid(pid, &status, 0), pid);
  NT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  NT_ASSERT(strcmp(path, parent.path) != 0);
  NT_ASSERT_EQ(parent.hdr->head, parent.block); /* 10 records in one block */
  for (unsigned i = 0; i < 10; i++)
    NT_ASSERT_EQ(parent.slots[i].count, (1ull << 40) | i);
  h = map_ring(path, &len);
  NT_ASSERT_EQ(h->pid, pid);
  NT_ASSERT_EQ(h->ppid, getpid());
  NT_ASSERT(h->head >= 100 && h->head - 100 < h->block_positions);
  NT_ASSERT_EQ(h->tsc_hz, parent.hdr->tsc_hz);
  NT_ASSERT_EQ(h->tsc_base, parent.hdr->tsc_base);
  slots = (const void *)((const char *)h + h->slot_offset);
  for (unsigned i = 0; i < 100; i++)
    NT_ASSERT_EQ(slots[i].count, (2ull << 40) | i);
  munmap((void *)h, len);
  ntr_ring_close(&parent, 1);
  t_rmtree(dir);
  printf("ok\n");
  return 0;
}
