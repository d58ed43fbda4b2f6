/* fixture.c -- see fixture.h. */
#include "fixture.h"
#include "recorder/util.h"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#define FX_COMM_MAX 4u
#define FX_STACK_MAX 4u
#define FX_PAGE 4096u
#define ALIGN(x) (((x) + FX_PAGE - 1) & ~(uint64_t)(FX_PAGE - 1))

static void fill_header(const struct fx_opts *o, struct ntr_ring_header *h, uint32_t slots, uint64_t nrec) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, NTR_RING_MAGIC, 8);
  h->version = NTR_FORMAT_VERSION;
  h->header_size = sizeof *h;
  h->record_size = sizeof(struct ntr_record);
  h->slot_count = slots;
  h->comm_max = FX_COMM_MAX;
  h->comm_recent = NTR_COMM_RECENT;
  h->stack_max = FX_STACK_MAX;
  h->stack_depth = NTR_STACK_DEPTH;
  h->comm_offset = NTR_RING_HEADER_BYTES;
  h->stack_offset = ALIGN(h->comm_offset + FX_COMM_MAX * sizeof(struct ntr_comm_state));
  h->slot_offset = ALIGN(h->stack_offset + FX_STACK_MAX * sizeof(struct ntr_stack));
  h->file_size = ALIGN(h->slot_offset + (uint64_t)slots * sizeof(struct ntr_record));
  h->head = nrec;
  h->comm_count = 1;
  h->stack_count = 1;
  h->pid = o->pid ? o->pid : getpid();
  h->ppid = 1;
  h->rank = o->rank;
  h->local_rank = o->rank;
  h->world_size = 2;
  h->local_world_size = 2;
  h->nccl_version = 22809;
  h->proc_state = NTR_PROC_RUNNING;
  if (o->host)
    snprintf(h->host, sizeof h->host, "%s", o->host);
  else if (gethostname(h->host, sizeof h->host) != 0)
    snprintf(h->host, sizeof h->host, "unknown");
  h->host[sizeof h->host - 1] = '\0';
  snprintf(h->job_id, sizeof h->job_id, "%s", o->job ? o->job : "job-test");
  snprintf(h->tracer_version, sizeof h->tracer_version, "0.1.0");
  snprintf(h->exe, sizeof h->exe, "%s", o->exe ? o->exe : "fixture");
  h->tsc_base = 1000;
  h->mono_base_ns = 5000000000ull;
  h->real_base_ns = FX_REAL_BASE;
  h->tsc_hz = 1000000000ull;
  if (o->bt) {
    h->bt_depth = 2;
    h->bt_signo = SIGSEGV;
    h->bt_tid = 4242;
    h->bt_ip[0] = 0x401000;
    h->bt_ip[1] = 0x402000;
    snprintf(h->bt_sym[0], sizeof h->bt_sym[0], "crash_here+0x12");
    snprintf(h->bt_sym[1], sizeof h->bt_sym[1], "main+0x40");
  }
  static const char env[] = "NCCL_PROTO=Simple\0NCCL_DEBUG=WARN";
  memcpy(h->env, env, sizeof env);
  h->env_len = sizeof env;
}

static void fill_comm(struct ntr_comm_state *c, int rank) {
  memset(c, 0, sizeof *c);
  c->comm_id = FX_COMM_ID;
  c->rank = rank;
  c->nranks = 2;
  c->lifecycle = NTR_COMM_READY;
  c->async_error = 0;
  c->coll_seq = 3;
  c->last_enqueued = 3;
  c->last_completed = 2;
  c->init_kind = NTR_KIND_COMM_INIT_RANK;
}

/* Record number i of the canonical sequence (fixture.h). */
static void fill_record(uint64_t i, const struct fx_opts *o, struct ntr_record *r) {
  int rank = o->rank;
  memset(r, 0, sizeof *r);
  r->commit = i + 1;
  r->tsc = 1000 + (i + 1) * 1000000ull;
  r->comm_id = FX_COMM_ID;
  r->dtype = 0xff;
  r->redop = -1;
  r->rank = rank;
  r->nranks = 2;
  r->peer = -1;
  r->result = -1;
  r->tid = 777;
  r->fp = 0; /* as the recorder writes it: readers derive it (ntr_record_fp) */
  switch (i) {
  case 0:
  case 1:
    r->kind = NTR_KIND_COMM_INIT_RANK;
    r->phase = i == 0 ? NTR_PHASE_ENTER : NTR_PHASE_EXIT;
    r->result = i == 0 ? -1 : 0;
    r->fp = 0;
    return;
  case 3:
    r->kind = NTR_KIND_BROADCAST;
    r->count = 1;
    r->dtype = 7;
    r->peer = 0;
    r->seq = 2;
    r->result = 0;
    r->flags = NTR_REC_COMPLETED;
    r->tsc_done = r->tsc + 500000;
    return;
  case 4:
    r->kind = NTR_KIND_SEND;
    r->count = 8;
    r->dtype = 7;
    r->peer = 1;
    r->seq = 1;
    r->result = 0;
    return;
  case 5:
    r->kind = NTR_KIND_MARK;
    r->phase = NTR_PHASE_EVENT;
    r->comm_id = 0;
    r->rank = -1;
    r->nranks = 0;
    r->count = 1234;
    r->fp = 0;
    snprintf(r->u.text, sizeof r->u.text, "step");
    return;
  default:
    r->kind = NTR_KIND_ALLREDUCE;
    r->count = 64;
    r->dtype = 7;
    r->redop = 0;
    r->seq = i == 2 ? 1 : i - 3;
    r->result = 0;
    if (i == 2) {
      r->flags = NTR_REC_COMPLETED;
      r->tsc_done = r->tsc + 250000;
    }
    if (i == 6 && o->error)
      r->result = 6;
    return;
  }
}

size_t fx_build_ring(const struct fx_opts *o, unsigned char **out) {
  uint32_t slots = o->slots ? o->slots : 64;
  uint64_t nrec = 7 + o->extra;
  struct ntr_ring_header h;
  fill_header(o, &h, slots, nrec);
  unsigned char *b = calloc(1, (size_t)h.file_size);
  if (!b)
    return 0;
  struct ntr_comm_state *c = (struct ntr_comm_state *)(b + h.comm_offset);
  fill_comm(c, o->rank);
  if (o->extra)
    c->coll_seq = c->last_enqueued = 3 + o->extra;
  struct ntr_stack *st = (struct ntr_stack *)(b + h.stack_offset);
  st->hash = 0x1234;
  st->depth = 2;
  st->ip[0] = 0x401000;
  st->ip[1] = 0x402000;
  struct ntr_record *slot = (struct ntr_record *)(b + h.slot_offset);
  for (uint64_t i = 0; i < nrec; i++) {
    struct ntr_record r;
    fill_record(i, o, &r);
    slot[i & (slots - 1)] = r;
    if (r.comm_id)
      c->recent[c->rec_count++ & (NTR_COMM_RECENT - 1)] = r;
  }
  memcpy(b, &h, sizeof h);
  *out = b;
  return (size_t)h.file_size;
}

static unsigned char *put_section(unsigned char *p, uint32_t type, const void *data, uint64_t len) {
  struct ntr_section s = {.type = type, .length = len};
  memcpy(p, &s, sizeof s);
  memcpy(p + sizeof s, data, (size_t)len);
  return p + sizeof s + len;
}

size_t fx_build_dump(const struct fx_opts *o, unsigned char **out) {
  uint32_t slots = o->slots ? o->slots : 64;
  uint64_t nrec = 7 + o->extra;
  uint64_t keep = nrec > slots ? slots : nrec; /* the dump keeps what the main ring holds */
  struct ntr_ring_header h;
  fill_header(o, &h, slots, nrec);
  struct ntr_comm_state *c = calloc(1, sizeof *c);
  struct ntr_record *recs = calloc((size_t)keep, sizeof *recs);
  struct ntr_stack st = {.hash = 0x1234, .depth = 2, .ip = {0x401000, 0x402000}};
  struct ntr_trigger trig = {.kind = o->trigger ? o->trigger : NTR_TRIG_EXIT, .tsc = 1000 + (o->trigger_ms ? o->trigger_ms : 20) * 1000000ull};
  size_t plen = 5 * sizeof(struct ntr_section) + sizeof h + sizeof *c + sizeof st + keep * sizeof *recs + sizeof trig;
  unsigned char *pl = malloc(plen);
  if (!c || !recs || !pl) {
    free(c);
    free(recs);
    free(pl);
    return 0;
  }
  fill_comm(c, o->rank);
  for (uint64_t i = nrec - keep; i < nrec; i++) {
    fill_record(i, o, &recs[i - (nrec - keep)]);
    c->recent[c->rec_count++ & (NTR_COMM_RECENT - 1)] = recs[i - (nrec - keep)];
  }
  trig.lost = nrec - keep;
  if (trig.kind == NTR_TRIG_EXIT)
    snprintf(trig.reason, sizeof trig.reason, "process exit");
  else
    snprintf(trig.reason, sizeof trig.reason, "fixture trigger %u", trig.kind);
  if (trig.kind == NTR_TRIG_SIGNAL)
    trig.signo = SIGTERM;
  unsigned char *p = pl;
  p = put_section(p, NTR_SEC_HEADER, &h, sizeof h);
  p = put_section(p, NTR_SEC_COMMS, c, sizeof *c);
  p = put_section(p, NTR_SEC_STACKS, &st, sizeof st);
  p = put_section(p, NTR_SEC_RECORDS, recs, keep * sizeof *recs);
  p = put_section(p, NTR_SEC_TRIGGER, &trig, sizeof trig);
  free(c);
  free(recs);
  size_t cap = ZSTD_compressBound(plen);
  unsigned char *b = malloc(sizeof(struct ntr_dump_preamble) + cap);
  if (!b) {
    free(pl);
    return 0;
  }
  size_t z = ZSTD_compress(b + sizeof(struct ntr_dump_preamble), cap, pl, plen, 3);
  if (ZSTD_isError(z)) {
    free(pl);
    free(b);
    return 0;
  }
  struct ntr_dump_preamble pre = {.version = NTR_FORMAT_VERSION, .preamble_size = sizeof pre,
                                  .payload_size = plen, .compressed_size = z,
                                  .checksum = XXH64(pl, plen, 0), .section_count = 5};
  memcpy(pre.magic, NTR_DUMP_MAGIC, 8);
  memcpy(b, &pre, sizeof pre);
  free(pl);
  *out = b;
  return sizeof pre + z;
}

int fx_write(const char *path, const unsigned char *buf, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  if (ntr_write_all(fd, buf, len) != 0) {
    close(fd);
    return -1;
  }
  return close(fd);
}

/* Compress and hash n bytes of src into the stream (src NULL: zeros). */
static int bomb_put(ZSTD_CCtx *z, XXH64_state_t *x, FILE *f, const void *src, size_t n, ZSTD_EndDirective end) {
  static unsigned char zeros[1u << 17], out[1u << 17];
  do {
    size_t k = n < sizeof zeros ? n : sizeof zeros;
    const void *p = src ? src : zeros;
    XXH64_update(x, p, k);
    ZSTD_inBuffer in = {p, k, 0};
    ZSTD_EndDirective e = k == n ? end : ZSTD_e_continue;
    for (;;) {
      ZSTD_outBuffer ob = {out, sizeof out, 0};
      size_t r = ZSTD_compressStream2(z, &ob, &in, e);
      if (ZSTD_isError(r) || fwrite(out, 1, ob.pos, f) != ob.pos)
        return -1;
      if (e == ZSTD_e_end ? r == 0 : in.pos == in.size)
        break;
    }
    if (src)
      src = (const unsigned char *)src + k;
    n -= k;
  } while (n);
  return 0;
}

int fx_write_bomb(const struct fx_opts *o, uint64_t nzero, const char *path) {
  unsigned char *d = NULL;
  size_t dl = fx_build_dump(o, &d);
  if (!dl)
    return -1;
  /* Rebuild the payload of the ordinary dump, then widen its RECORDS. */
  struct ntr_dump_preamble pre;
  memcpy(&pre, d, sizeof pre);
  unsigned char *pl = malloc((size_t)pre.payload_size);
  if (!pl || ZSTD_decompress(pl, (size_t)pre.payload_size, d + sizeof pre, (size_t)pre.compressed_size) !=
                 pre.payload_size) {
    free(pl);
    free(d);
    return -1;
  }
  free(d);
  FILE *f = fopen(path, "wb");
  ZSTD_CCtx *z = ZSTD_createCCtx();
  XXH64_state_t *x = XXH64_createState();
  int rc = -1;
  if (!f || !z || !x || XXH64_reset(x, 0) != XXH_OK)
    goto out;
  ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setPledgedSrcSize(z, pre.payload_size + nzero * sizeof(struct ntr_record));
  if (fseek(f, (long)sizeof pre, SEEK_SET) != 0)
    goto out;
  size_t off = 0;
  int bad = 0;
  for (uint32_t k = 0; k < pre.section_count && !bad; k++) {
    struct ntr_section s;
    memcpy(&s, pl + off, sizeof s);
    off += sizeof s;
    struct ntr_section w = s;
    if (s.type == NTR_SEC_RECORDS)
      w.length += nzero * sizeof(struct ntr_record);
    if (s.type == NTR_SEC_HEADER) /* the ring claims to have written them all */
      ((struct ntr_ring_header *)(void *)(pl + off))->head += nzero;
    int last = k + 1 == pre.section_count;
    bad |= bomb_put(z, x, f, &w, sizeof w, ZSTD_e_continue);
    bad |= bomb_put(z, x, f, pl + off, (size_t)s.length, last && s.type != NTR_SEC_RECORDS ? ZSTD_e_end : ZSTD_e_continue);
    if (s.type == NTR_SEC_RECORDS && nzero)
      bad |= bomb_put(z, x, f, NULL, (size_t)(nzero * sizeof(struct ntr_record)), last ? ZSTD_e_end : ZSTD_e_continue);
    off += (size_t)s.length;
  }
  long end = ftell(f);
  if (bad || end < 0)
    goto out;
  pre.payload_size += nzero * sizeof(struct ntr_record);
  pre.compressed_size = (uint64_t)end - sizeof pre;
  pre.checksum = XXH64_digest(x);
  if (fseek(f, 0, SEEK_SET) == 0 && fwrite(&pre, sizeof pre, 1, f) == 1)
    rc = 0;
out:
  if (f && fclose(f) != 0)
    rc = -1;
  ZSTD_freeCCtx(z);
  XXH64_freeState(x);
  free(pl);
  return rc;
}
