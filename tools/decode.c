/* decode.c -- `nccltrace decode FILE... [--json] [--salvage]`: print a ring
 * file or a dump for a human, or as JSON (docs/decode-json.md).
 *
 * Thread-safety: single-threaded command.  Not signal-safe.
 * Exit status: 0 when every file decoded, 2 when any could not be read
 * (each such file named on stderr with its reason; the others still print).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools/bundle.h"
#include "tools/ntt.h"

static void print_env(FILE *out, const struct ntr_ring_header *h) {
  size_t len = h->env_len <= NTR_ENV_BYTES ? h->env_len : NTR_ENV_BYTES;
  size_t i = 0;
  int any = 0;
  while (i < len) {
    size_t n = strnlen(h->env + i, len - i);
    if (n) {
      char line[512];
      ntt_field_str(h->env + i, n, line, sizeof line);
      fprintf(out, "%s  %s\n", any ? "    " : "env:", line);
      any = 1;
    }
    i += n + 1;
  }
  if (!any)
    fprintf(out, "env:    (none recorded)\n");
}

static void print_header(FILE *out, const struct ntt_image *img) {
  const struct ntr_ring_header *h = &img->hdr;
  char sig[32], tb[48];
  struct ntt_ident id;
  ntt_ident_of(h, &id);
  char path[sizeof img->path];
  fprintf(out, "== %s (%s%s)\n", ntt_esc(img->path, path, sizeof path), img->is_dump ? "dump" : "ring file",
          img->is_dump ? "" : img->pid_alive ? ", process alive" : ", process gone");
  fprintf(out, "host:     %s  pid %d  ppid %d  exe %s\n", id.host, h->pid, h->ppid, id.exe);
  fprintf(out, "ranks:    rank %d  local_rank %d  world_size %d  local_world_size %d\n", h->rank,
          h->local_rank, h->world_size, h->local_world_size);
  /* Comm ranks per communicator of the table, each once: a process of
   * ncclCommInitAll or a thread per device holds several of one comm. */
  for (uint32_t i = 0; i < img->ncomms; i++) {
    uint64_t cid = img->comms[i].comm_id;
    int r[NTR_COMM_MAX];
    int n = ntt_held_ranks_at(img, i, r, NTR_COMM_MAX);
    if (n < 1)
      continue;
    char rl[128];
    ntt_rank_ranges(r, n, rl, sizeof rl);
    fprintf(out, "holds:    %s %s of comm %016llx%s\n", n > 1 ? "ranks" : "rank", rl, (unsigned long long)cid,
            n > 1 ? " (several ranks in this one process)" : "");
  }
  fprintf(out, "job:      %s\n", id.job[0] ? id.job : "(unknown)");
  fprintf(out, "versions: nccltrace %s  NCCL %d.%d.%d  format %u\n", id.version[0] ? id.version : "?",
          h->nccl_version / 10000, h->nccl_version / 100 % 100, h->nccl_version % 100, h->version);
  fprintf(out, "state:    %s", ntt_proc_state_name(h->proc_state));
  if (h->proc_state == NTR_PROC_EXITED)
    fprintf(out, " (exit code %d)", h->exit_code);
  if (h->proc_state == NTR_PROC_SIGNALED)
    fprintf(out, " (%s)", ntt_signal_name(h->signo, sig, sizeof sig));
  fprintf(out, "\n");
  if (h->ring_place == NTR_PLACE_ANON)
    fprintf(out, "ring:     anonymous memory (gone with the process: nothing of it survives a SIGKILL)\n");
  else if (h->ring_place)
    fprintf(out, "ring:     a file (%s)\n", ntt_ring_place_name(h->ring_place));
  ntt_fmt_time(h->real_base_ns, tb, sizeof tb);
  fprintf(out, "clock:    base %s  %llu ticks/s\n", tb, (unsigned long long)h->tsc_hz);
  fprintf(out, "records:  %llu kept  %llu lost (overwritten)  %llu torn  %llu dropped  %u slots%s\n",
          (unsigned long long)img->nrecs, (unsigned long long)img->lost, (unsigned long long)img->torn,
          (unsigned long long)h->dropped, h->slot_count, img->salvaged ? "  (salvaged: damaged parts skipped)" : "");
  if (img->has_trigger) {
    char kb[32];
    ntt_fmt_time(img->trigger.tsc ? ntt_image_ns(img, img->trigger.tsc) : 0, tb, sizeof tb);
    fprintf(out, "trigger:  %s at %s", ntt_trigger_name(&img->trigger, kb, sizeof kb), tb);
    if (img->trigger.signo)
      fprintf(out, "  %s", ntt_signal_name(img->trigger.signo, sig, sizeof sig));
    if (img->trigger.kind == NTR_TRIG_EXIT)
      fprintf(out, "  exit code %d", img->trigger.exit_code);
    char reason[sizeof img->trigger.reason];
    ntt_field_str(img->trigger.reason, sizeof img->trigger.reason, reason, sizeof reason);
    if (reason[0])
      fprintf(out, "  \"%s\"", reason);
    fprintf(out, "\n");
  }
  print_env(out, h);
}

static void print_backtrace(FILE *out, const struct ntr_ring_header *h) {
  if (!h->bt_depth)
    return;
  char sig[32];
  fprintf(out, "backtrace (%s, thread %u):\n", ntt_signal_name((int)h->bt_signo, sig, sizeof sig), h->bt_tid);
  for (uint32_t i = 0; i < h->bt_depth && i < NTR_BT_DEPTH; i++) {
    char sym[NTR_SYM_BYTES + 1];
    ntt_field_str(h->bt_sym[i], sizeof h->bt_sym[i], sym, sizeof sym);
    fprintf(out, "  #%-2u 0x%016llx %s\n", i, (unsigned long long)h->bt_ip[i], sym[0] ? sym : "??");
  }
}

static void print_comms(FILE *out, const struct ntt_image *img) {
  if (!img->ncomms) {
    fprintf(out, "communicators: none\n");
    return;
  }
  uint64_t now = ntt_image_now_ns(img);
  fprintf(out, "communicators:\n  %-16s  %-9s  %-11s  %9s  %9s  %-16s  %s\n", "ID", "RANK", "STATE", "ENQUEUED",
          "COMPLETED", "ASYNC ERROR", "BLOCKED");
  for (uint32_t i = 0; i < img->ncomms; i++) {
    const struct ntr_comm_state *c = &img->comms[i];
    char rk[24], blocked[96] = "-";
    snprintf(rk, sizeof rk, "%d/%d", c->rank, c->nranks);
    if (c->blocked_since) {
      uint64_t since = ntt_image_ns(img, c->blocked_since);
      double s = now > since ? (double)(now - since) / 1e9 : 0.0;
      snprintf(blocked, sizeof blocked, "in %s for %.3f s", ntt_kind_name(c->blocked_kind), s);
    }
    fprintf(out, "  %016llx  %-9s  %-11s  %9llu  %9llu  %-16s  %s\n", (unsigned long long)c->comm_id, rk,
            ntt_lifecycle_name(c->lifecycle), (unsigned long long)c->last_enqueued,
            (unsigned long long)c->last_completed, ntt_result_name(c->async_error), blocked);
  }
}

/* Ring positions are handed out to threads in blocks, so position order is
 * not time order across threads: the listing sorts by time (position breaks
 * ties, which keeps one thread's records in its own order). */
static const struct ntr_record *sort_recs;
static int by_time(const void *a, const void *b) {
  uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
  uint64_t ti = sort_recs[i].tsc, tj = sort_recs[j].tsc;
  if (ti != tj)
    return ti < tj ? -1 : 1;
  return (i > j) - (i < j);
}

static void print_records(FILE *out, const struct ntt_image *img) {
  fprintf(out, "records (oldest first, by time):\n  %-27s  %-8s  %-5s  %6s  %-44s  %-9s  %s\n", "TIME", "COMM", "RANK",
          "SEQ", "OP", "STATE", "RESULT");
  uint64_t *order = img->nrecs ? malloc(img->nrecs * sizeof *order) : NULL;
  for (uint64_t i = 0; order && i < img->nrecs; i++)
    order[i] = i;
  if (order) {
    sort_recs = img->recs;
    qsort(order, img->nrecs, sizeof *order, by_time);
  }
  for (uint64_t k = 0; k < img->nrecs; k++) {
    /* without memory for the index: position order, as stored */
    const struct ntr_record *r = &img->recs[order ? order[k] : k];
    char tb[48], comm[12] = "-", rank[12] = "-", op[160], seq[24] = "-";
    ntt_fmt_time(ntt_image_ns(img, r->tsc), tb, sizeof tb);
    if (r->comm_id)
      snprintf(comm, sizeof comm, "%08llx", (unsigned long long)(r->comm_id >> 32));
    if (r->rank >= 0)
      snprintf(rank, sizeof rank, "%d", r->rank);
    if (r->seq)
      snprintf(seq, sizeof seq, "%llu", (unsigned long long)r->seq);
    ntt_fmt_op(r, op, sizeof op);
    char site[NTR_PYSTR_FILE_MAX + NTR_PYSTR_FUNC_MAX + 40] = "";
    if (ntt_py_site(img, r->pystack_id, site + 4, sizeof site - 4))
      memcpy(site, " at ", 4);
    else if (r->pystack_id == NTR_PYSTACK_DROPPED)
      snprintf(site, sizeof site, " at (Python call site not recorded: the stack table was full)");
    fprintf(out, "  %-27s  %-8s  %-5s  %6s  %-44s  %-9s  %s%s\n", tb, comm, rank, seq, op, ntt_rec_state(r),
            r->result >= 0 ? ntt_result_name(r->result) : "-", site);
  }
  free(order);
}

/* The Python call sites (each distinct stack once) and the threads. */
static void print_python(FILE *out, const struct ntt_image *img) {
  int any = 0;
  for (uint32_t i = 0; i < img->nstacks; i++) {
    const struct ntr_stack *s = ntt_py_stack(img, i + 1);
    if (!s)
      continue;
    if (!any++)
      fprintf(out, "Python call sites (innermost frame first):\n");
    fprintf(out, "  site %u:\n", i + 1);
    for (uint32_t k = 0; k < s->depth && k < NTR_STACK_DEPTH; k++) {
      char b[NTR_PYSTR_FILE_MAX + NTR_PYSTR_FUNC_MAX + 32];
      ntt_py_frame_str(img, s->ip[k], 0, b, sizeof b);
      fprintf(out, "    %s\n", b);
    }
  }
  if (img->hdr.py_sites_dropped)
    fprintf(out, "Python call sites past the first %u distinct stacks are not recorded (%u not recorded)\n",
            img->hdr.stack_max, img->hdr.py_sites_dropped);
  if (img->npythreads) {
    fprintf(out, "Python threads (at the dump):\n");
    ntt_print_pythreads(out, img, "  ");
  } else if (img->is_dump && img->hdr.py_state == NTR_PY_ON) {
    fprintf(out, "Python threads: none readable at the dump\n");
  }
}

static void print_text(FILE *out, const struct ntt_image *img) {
  print_header(out, img);
  print_backtrace(out, &img->hdr);
  print_comms(out, img);
  print_records(out, img);
  print_python(out, img);
}

int ntt_decode_main(int argc, char **argv) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, 'j'}, {"salvage", no_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {0}};
  int json = 0, salvage = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "jsh", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = 1; break;
    case 's': salvage = 1; break;
    case 'h': ntt_usage_cmd(stdout, "decode"); return NTT_EXIT_OK;
    default: fprintf(stderr, "usage: nccltrace decode FILE... [--json] [--salvage]\n"); return NTT_EXIT_INPUT;
    }
  }
  if (optind >= argc) {
    fprintf(stderr, "usage: nccltrace decode FILE... [--json] [--salvage]\n");
    return NTT_EXIT_INPUT;
  }
  /* a bundle (nccltrace bundle) stands for its dumps */
  char **files = NULL;
  int nfiles = ntb_open_inputs("decode", argv + optind, argc - optind, 1, &files), bad = 0;
  if (nfiles < 0)
    return NTT_EXIT_INPUT;
  json_t *all = json && nfiles > 1 ? json_array() : NULL;
  json_t *single = NULL;
  for (int i = 0; i < nfiles; i++) {
    struct ntt_image img;
    char err[512], shown[4096];
    if (ntt_image_load(files[i], salvage, &img, err, sizeof err)) {
      fprintf(stderr, "nccltrace: %s\n", ntt_esc(err, shown, sizeof shown));
      bad++;
      continue;
    }
    if (img.salvaged)
      fprintf(stderr, "nccltrace: %s: damaged; showing what could be salvaged\n",
              ntt_esc(files[i], shown, sizeof shown));
    if (json) {
      json_t *o = ntt_image_json(&img);
      if (all)
        json_array_append_new(all, o);
      else
        single = o;
    } else {
      if (i > 0)
        fputc('\n', stdout);
      print_text(stdout, &img);
    }
    ntt_image_free(&img);
  }
  if (json) {
    json_t *top = all ? json_pack("{s:i,s:o}", "schema", NTT_DECODE_SCHEMA, "files", all) : single;
    if (top) {
      json_dumpf(top, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII);
      fputc('\n', stdout);
      json_decref(top);
    }
  }
  ntt_paths_free(files, nfiles);
  if (fflush(stdout) != 0)
    return NTT_EXIT_FAIL;
  return bad ? NTT_EXIT_INPUT : NTT_EXIT_OK;
}
