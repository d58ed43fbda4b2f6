/* main.c -- the `nccltrace` command: usage, version, subcommand dispatch.
 *
 * Thread-safety: single-threaded (the coordinator entry point may start its
 * own threads).  Not signal-safe.
 *
 * `analyze` and `coord` live in other modules (tools/analyze/,
 * interpose/exchange/); their entry points are weak references so that this
 * command links and says so plainly when a module is not built.
 */
#include <stdio.h>
#include <string.h>
#include "ntr_config.h"
#include "tools/ntt.h"

int nta_main(int argc, char **argv) __attribute__((weak));
int ntx_coord_main(int argc, char **argv) __attribute__((weak));

/* One entry per usage form; a command may have several (collect). */
static const struct {
  const char *cmd, *text;
} ntt_sections[] = {
    {"run",
     "  run [--dir D] [--ring-dir R] [--check off|async|strict] [--timeout S] [--coord] -- CMD [ARGS...]\n"
     "      Run CMD with libnccltrace.so preloaded (prepended to any LD_PRELOAD).\n"
     "      --dir D         dumps go to D (NCCLTRACE_DIR)\n"
     "      --ring-dir R    ring files go to R (NCCLTRACE_RING_DIR)\n"
     "      --check MODE    cross-rank check: off, async or strict (NCCLTRACE_CHECK)\n"
     "      --timeout S     dump when an operation does not finish in S seconds (NCCLTRACE_TIMEOUT)\n"
     "      --coord         start a standalone coordinator on 127.0.0.1 for the ranks\n"
     "                      CMD starts (NCCLTRACE_COORD); without one, run anyway\n"
     "      The library is found through NCCLTRACE_LIB, else the build tree, else the\n"
     "      install prefix (pip: the package's own).  The exit status is CMD's; 2 when\n"
     "      CMD was not started: bad usage, or a dump directory that cannot take a file\n"
     "      or cannot be made (run does not make it; the tracer does at the first\n"
     "      dump).  Bad NCCLTRACE_* values are reported here, once for the job\n"
     "      (NCCLTRACE_SETTINGS_SAID).\n"},
    {"decode",
     "  decode FILE... [--json] [--salvage]\n"
     "      Print ring files and dumps (a bundle: each dump in it): header (host, pid,\n"
     "      ranks, job, versions, state, lost/torn records, trigger, environment), the\n"
     "      backtrace of a fatal signal, the communicator table, then one line per\n"
     "      record, oldest first.\n"
     "      --json          one JSON object per file (docs/decode-json.md); several\n"
     "                      files print {\"files\": [...]}\n"
     "      --salvage       keep whatever is intact in a damaged file\n"},
    {"analyze",
     "  analyze PATH... [--json] [--job ID] [--attempt N] [--max-memory SIZE]\n"
     "                 [--allow-owner USER]... [--any-owner]\n"
     "      Name the root cause of a failed or hung job from its dumps and ring files\n"
     "      (files, directories or bundles).  See `nccltrace analyze --help`.\n"},
    {"export",
     "  export --chrome PATH... -o|--output FILE [--job ID] [--rank LIST] [--comm HEX[,HEX...]]\n"
     "         [--since S] [--until S]\n"
     "      Write a Chrome trace event file (Perfetto, chrome://tracing): one process\n"
     "      per rank, one track per communicator, one slice per operation from enqueue\n"
     "      to completion (one never completed runs to the last timestamp of the job's\n"
     "      evidence, args.incomplete), instant events for markers, errors, signals and\n"
     "      exits.  PATH: dumps (*.zst), ring files (*.ring), bundles or directories\n"
     "      (recursive).\n"
     "      --job ID        export job ID; default the most recent (said on stderr\n"
     "                      when the evidence holds several jobs), as analyze picks\n"
     "      --rank LIST     only these launcher ranks (0,2,5-7)\n"
     "      --comm HEX      only these communicators (id prefixes as status shows\n"
     "                      them); process-wide events stay\n"
     "      --since S, --until S  only events that touch that window: seconds after\n"
     "                      the job's first record, or before its last when negative\n"
     "                      (--since -30: the last 30 s)\n"},
    {"collect",
     "  collect [--rings R] [--dir D] [--job ID]\n"
     "      Turn the ring file of every process that no longer exists into a dump in D\n"
     "      and remove the ring.  Rings of live processes, or written on another host,\n"
     "      are left alone.  R defaults to NCCLTRACE_RING_DIR, else\n"
     "      /dev/shm/nccltrace-<uid>; D to NCCLTRACE_DIR, else ./nccltrace-dumps.\n"
     "      --job ID        only job ID's rings and unfinished dumps; others left alone\n"},
    {"collect",
     "  collect --host H[,H...] [--via 'CMD {host}'] [--rings R] [--dir D] [--out O]\n"
     "      Gather many hosts' evidence into O/<host>/ (O: ./nccltrace-collected).\n"
     "      Per host, CMD (e.g. 'ssh {host}', 'ip netns exec ns-{host}') runs\n"
     "      `sh -s` there: it collects that host's rings, then sends every dump\n"
     "      of D and every ring left in R.  Without --via, R and D are read here\n"
     "      (a shared file system).  R and D may contain {host}.\n"},
    {"bundle",
     "  bundle [--job ID] [--out FILE] [--rings R] [--no-rings] [PATH...]\n"
     "      Put one job's evidence into one file for a ticket: its dumps, its rings (as\n"
     "      dumps; a live process's ring as a snapshot, nothing removed), the exit files\n"
     "      of `nccltrace run`, PyTorch Flight Recorder dumps given, the verdict of\n"
     "      analyze (verdict.txt, verdict.json) and a MANIFEST (version, host, time,\n"
     "      each file's size and XXH64, what was left out and why).  A tar archive:\n"
     "      `tar xf FILE` opens it; analyze, decode and export read it as it is.\n"
     "      PATH: dumps, exit files, FR dumps or directories (recursive); default\n"
     "      NCCLTRACE_DIR, else ./nccltrace-dumps.\n"
     "      --job ID        bundle job ID; default the most recent (said on stderr\n"
     "                      when the evidence holds several jobs), as analyze picks\n"
     "      --out FILE      write FILE: .tar.zst (zstd) or .tar; default\n"
     "                      ./nccltrace-bundle-<job>-<UTC time>.tar.zst, mode 0600\n"
     "      --rings R       rings from R (default NCCLTRACE_RING_DIR, else\n"
     "                      /dev/shm/nccltrace-<uid>, and the tracer's fallbacks)\n"
     "      --no-rings      no rings, only the files of PATH\n"},
    {"status",
     "  status [--rings R] [--watch SECONDS]\n"
     "      Show every traced process on this host from its ring, without signalling\n"
     "      it.  Per job: how many ranks have a ring here and which are missing (of\n"
     "      WORLD_SIZE, LOCAL_WORLD_SIZE when the job spans hosts, else of its largest\n"
     "      communicator), and the live verdict (the analyze engine on these rings).\n"
     "      Per communicator: rank, lifecycle, last enqueued and completed collective,\n"
     "      age of the oldest operation in flight (named on an \"in flight:\" line: op,\n"
     "      seq, comm, for how long), a blocked call and for how long, the async error\n"
     "      and LATE: the coordinator's measure (--check async or strict) of the rank,\n"
     "      its median arrival after the earliest rank over the last N collectives\n"
     "      (NCCLTRACE_STRAGGLER_WINDOW) and in how many of those N it came last; \"-\"\n"
     "      without a coordinator.  --watch refreshes every SECONDS until interrupted.\n"
     "      A --rings directory that does not exist is an error (exit 2).\n"
     "  status --job [--coord HOST:PORT] [--json] [--watch SECONDS]\n"
     "      Ask the job's coordinator for the whole job across hosts, from any node:\n"
     "      per host its ranks (pid, launcher rank, connected, stopped, LOST, exited\n"
     "      or missing, last seq, LATE), per communicator who never registered and who\n"
     "      is lost, the latest mismatch, skew, init-wait and straggler report, and the\n"
     "      coordinator's live verdict; --json for a program; --watch 0.5 s or more.\n"
     "      Needs the job's NCCLTRACE_SECRET, and the coordinator's address: --coord,\n"
     "      else NCCLTRACE_COORD, else MASTER_ADDR:MASTER_PORT+NCCLTRACE_COORD_PORT_OFFSET\n"
     "      (17), as the ranks find it.  Exit 0 answered; 1 refused by its rate limit\n"
     "      (2 queries a second); 2 no secret, no address, or the coordinator\n"
     "      unreachable, silent or refusing the key (one line, within 2 s).\n"},
    {"coord",
     "  coord --listen HOST:PORT [--skew S] [--init-wait S] [--max-clients N] [--quiet]\n"
     "      Run a standalone coordinator for the cross-rank check (NCCLTRACE_SECRET\n"
     "      required, the same as the ranks').  See `nccltrace coord --help`.\n"},
};

static const char ntt_exit_text[] =
    "Exit status: 0 success; 1 failure; 2 unreadable input or bad usage (one line\n"
    "per unreadable file on stderr: \"nccltrace: FILE: reason\").\n";

void ntt_usage(FILE *out) {
  fputs(
      "usage: nccltrace COMMAND [OPTIONS] [ARGS]\n"
      "\n"
      "A flight recorder for NCCL.  libnccltrace.so (loaded with LD_PRELOAD) records\n"
      "every NCCL call of every rank into a ring file that survives the process,\n"
      "checks that ranks agree on each collective, and leaves dumps behind when a job\n"
      "hangs, crashes or is killed.  This command reads that evidence.\n"
      "\n"
      "Commands:\n",
      out);
  for (size_t i = 0; i < sizeof ntt_sections / sizeof ntt_sections[0]; i++) {
    fputs(ntt_sections[i].text, out);
    fputc('\n', out);
  }
  fputs("  help, --help       this text\n"
        "  version, --version the version\n"
        "\n",
        out);
  fputs(ntt_exit_text, out);
  fputs(
      "\n"
      "Environment of traced processes (read once at start; the README's table says\n"
      "what each does and its default): NCCLTRACE_DISABLE, NCCLTRACE_DIR,\n"
      "NCCLTRACE_RING_DIR, NCCLTRACE_JOB, NCCLTRACE_RING, NCCLTRACE_TIMEOUT,\n"
      "NCCLTRACE_CHECK, NCCLTRACE_COORD, NCCLTRACE_COORD_PORT_OFFSET,\n"
      "NCCLTRACE_STRICT_TIMEOUT, NCCLTRACE_STRICT_SHM, NCCLTRACE_SKEW_S,\n"
      "NCCLTRACE_STRAGGLER_MS, NCCLTRACE_STRAGGLER_WINDOW, NCCLTRACE_START_EVERY,\n"
      "NCCLTRACE_METRICS, NCCLTRACE_AGG, NCCLTRACE_AGG_HOST, NCCLTRACE_ENV_CHECK,\n"
      "NCCLTRACE_SECRET, NCCLTRACE_STACKS, NCCLTRACE_PYSTACKS, NCCLTRACE_REAL_NCCL,\n"
      "NCCLTRACE_DUMP_MODE, NCCLTRACE_MAX_DUMPS, NCCLTRACE_DIR_MAX_DUMPS,\n"
      "NCCLTRACE_VERBOSE.\n"
      "Of this command: NCCLTRACE_LIB (run: the library to preload),\n"
      "NCCLTRACE_ANALYZE_TIMING (analyze: phase times on stderr), and\n"
      "NCCLTRACE_DIR, NCCLTRACE_RING_DIR as defaults of collect, bundle and status.\n",
      out);
}

void ntt_usage_cmd(FILE *out, const char *cmd) {
  int first = 1;
  for (size_t i = 0; i < sizeof ntt_sections / sizeof ntt_sections[0]; i++) {
    if (strcmp(ntt_sections[i].cmd, cmd) != 0)
      continue;
    /* "  run [--dir D] ..." reads "usage: nccltrace run [--dir D] ..." */
    fprintf(out, "%s nccltrace %s", first ? "usage:" : "   or:", ntt_sections[i].text + 2);
    first = 0;
  }
  if (first) {
    ntt_usage(out);
    return;
  }
  fputc('\n', out);
  if (strcmp(cmd, "run") != 0) /* run's section states its own: CMD's */
    fputs(ntt_exit_text, out);
}

static int run_module(int (*fn)(int, char **), const char *what, int argc, char **argv) {
  if (!fn) {
    fprintf(stderr, "nccltrace: %s is not built\n", what);
    return NTT_EXIT_FAIL;
  }
  return fn(argc, argv);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    ntt_usage(stderr);
    return NTT_EXIT_INPUT;
  }
  const char *cmd = argv[1];
  /* Subcommands see argv[0] = their own name, as getopt expects. */
  int sargc = argc - 1;
  char **sargv = argv + 1;
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    ntt_usage(stdout);
    return NTT_EXIT_OK;
  }
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("nccltrace %s\n", NTR_VERSION);
    return NTT_EXIT_OK;
  }
  if (!strcmp(cmd, "decode"))
    return ntt_decode_main(sargc, sargv);
  if (!strcmp(cmd, "collect"))
    return ntt_collect_main(sargc, sargv);
  if (!strcmp(cmd, "status"))
    return ntt_status_main(sargc, sargv);
  if (!strcmp(cmd, "export"))
    return ntt_export_main(sargc, sargv);
  if (!strcmp(cmd, "run"))
    return ntt_run_main(sargc, sargv);
  if (!strcmp(cmd, "bundle"))
    return ntt_bundle_main(sargc, sargv);
  if (!strcmp(cmd, "analyze"))
    return run_module(nta_main, "analyze", sargc, sargv);
  if (!strcmp(cmd, "coord"))
    return run_module(ntx_coord_main, "coord", sargc, sargv);
  fprintf(stderr, "nccltrace: unknown command '%s' (try nccltrace --help)\n", cmd);
  return NTT_EXIT_INPUT;
}
