/* dump_bench.c -- how long a dump of a full default ring takes (snapshot,
 * zstd, write, fsync, rename: ntr_dump_write, the code a trigger runs) and
 * how much smaller it is than the raw records.
 *
 *   dump_bench [--slots N] [--reps R] [--dir D]
 *
 * The ring is filled with plausible collectives (synth.h) so that the
 * compression ratio is the one a training loop gets; dumps go to D (default
 * /tmp: a real disk, so fsync costs what it costs).
 * Exit: 0 when it ran (the verdicts are in the FIGURE lines), 1 on failure.
 * Single-threaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/scale/bu.h"
#include "bench/scale/synth.h"

int main(int argc, char **argv) {
  uint32_t slots = NTR_RING_DEFAULT_SLOTS;
  int reps = 7;
  const char *base = "/tmp";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--slots") && i + 1 < argc)
      slots = (uint32_t)atol(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      base = argv[++i];
    else {
      fprintf(stderr, "usage: dump_bench [--slots N] [--reps R] [--dir D]\n");
      return 1;
    }
  }
  if (reps < 1 || reps > 99 || slots < 64 || (slots & (slots - 1))) {
    fprintf(stderr, "dump_bench: bad --reps or --slots (power of two >= 64)\n");
    return 1;
  }
  char tmp[600], dumps[700];
  snprintf(tmp, sizeof tmp, "%s/nccltrace-dumpbench-XXXXXX", base);
  if (!mkdtemp(tmp)) {
    perror("dump_bench: mkdtemp");
    return 1;
  }
  snprintf(dumps, sizeof dumps, "%s/dumps", tmp);
  struct synth s;
  int rc = synth_open(&s, tmp, dumps, slots);
  if (rc) {
    fprintf(stderr, "dump_bench: ring: %s\n", strerror(-rc));
    return 1;
  }
  synth_fill(&s, 3, 8, slots, 0, -1);
  /* The ring must really be full: every slot holds its record (a writer
   * that took a block per record once left 1 in 64 and the dump looked
   * 60x smaller than it is). */
  uint64_t full = 0;
  for (uint64_t i = 0; i < slots; i++)
    full += s.ring.slots[i].commit == i + 1;
  if (full != slots) {
    fprintf(stderr, "dump_bench: the ring holds %llu of %u records\n", (unsigned long long)full, slots);
    synth_close(&s);
    return 1;
  }
  double t[99], cpu[99];
  long long size = 0;
  for (int r = 0; r < reps && !rc; r++) {
    char path[1200];
    double t0 = bu_now(), c0 = bu_thread_cpu();
    rc = synth_dump(&s, path, sizeof path);
    t[r] = bu_now() - t0;
    cpu[r] = bu_thread_cpu() - c0;
    struct stat st;
    if (!rc && stat(path, &st) == 0)
      size = st.st_size;
    if (!rc)
      unlink(path);
  }
  synth_close(&s);
  rmdir(dumps);
  rmdir(tmp);
  if (rc) {
    fprintf(stderr, "dump_bench: dump failed: %s\n", strerror(-rc));
    return 1;
  }
  double raw = (double)slots * sizeof(struct ntr_record);
  double med = bu_median(t, reps), cmed = bu_median(cpu, reps);
  double ratio = size ? raw / (double)size : 0;
  printf("dump of a full ring: %u records, raw %.1f MiB, dump %.2f MiB (%.1fx smaller)\n", slots,
         raw / 1048576, (double)size / 1048576, ratio);
  printf("dump time: median %.1f ms, min %.1f, max %.1f over %d dumps; CPU time of the dumping "
         "thread: median %.1f ms (load %.1f)\n",
         med * 1e3, t[0] * 1e3, t[reps - 1] * 1e3, reps, cmed * 1e3, bu_loadavg());
  bu_figure("dump of a full default ring: time", "<= 100 ms", med <= 0.1, "%.1f ms", med * 1e3);
  bu_figure("dump of a full default ring: CPU time of the dump", "(info: wall minus this = waiting for CPU/disk)",
            -1, "%.1f ms", cmed * 1e3);
  bu_figure("dump of a full default ring: size vs raw records", ">= 8x smaller", ratio >= 8,
            "%.1fx (%.2f of %.1f MiB)", ratio, (double)size / 1048576, raw / 1048576);
  return 0;
}
