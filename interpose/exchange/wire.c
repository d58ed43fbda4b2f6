/* wire.c -- frame and message encoding (contract: wire.h; format:
 * docs/wire-protocol.md).  All multi-byte fields are little-endian and
 * written byte by byte, so the code is independent of host order and
 * alignment. */
#include "interpose/exchange/wire.h"

#include <string.h>

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++)
    v |= (uint32_t)p[i] << (8 * i);
  return v;
}
static uint64_t get64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

const char *ntx_wire_strerror(int err) {
  switch (err) {
  case NTX_E_MAGIC: return "bad magic";
  case NTX_E_VERSION:
    return "wire protocol version differs (a peer of another nccltrace build: use one build on every host)";
  case NTX_E_TYPE: return "unknown message type";
  case NTX_E_SIZE: return "frame too large";
  case NTX_E_MAC: return "authentication failed";
  case NTX_E_REPLAY: return "out-of-sequence (replayed) frame";
  case NTX_E_MALFORMED: return "malformed message";
  default: return "unknown error";
  }
}

static uint64_t frame_tag(const struct ntx_session *sess, uint8_t dir, const uint8_t *frame,
                          size_t hdr_payload_len) {
  struct ntx_sip s;
  ntx_sip_init(&s, &sess->key);
  ntx_sip_update(&s, &dir, 1);
  ntx_sip_update(&s, sess->nonce, sizeof sess->nonce);
  ntx_sip_update(&s, sess->bind, sizeof sess->bind);
  ntx_sip_update(&s, frame, hdr_payload_len);
  return ntx_sip_final(&s);
}

/* Fixed and public on purpose: CHALLENGE proves nothing by its tag. */
static const struct ntx_key key_public = {0x33762d6563636e6eull, 0x6d75736b63656863ull};

void ntx_sess_challenge(struct ntx_session *s) {
  memset(s, 0, sizeof *s);
  s->key = key_public;
}

void ntx_sess_bind(struct ntx_session *s, const struct ntx_key *k, const uint8_t *chal) {
  memset(s, 0, sizeof *s);
  s->key = *k;
  memcpy(s->nonce, chal, NTX_NONCE); /* the payload starts with nonce_coord */
  struct ntx_sip h;
  ntx_sip_init(&h, k);
  ntx_sip_update(&h, "ntx3-challenge", 14);
  ntx_sip_update(&h, chal, NTX_CHALLENGE_LEN);
  put64(s->bind, ntx_sip_final(&h));
}

int ntx_frame_verify(const struct ntx_frame *f, const struct ntx_session *sess, uint8_t dir) {
  /* ntx_frame_parse left the payload between its header and its tag */
  const uint8_t *frame = f->payload - NTX_FRAME_HDR;
  uint8_t want[8];
  put64(want, frame_tag(sess, dir, frame, NTX_FRAME_HDR + f->len));
  return ntx_ct_equal(want, f->payload + f->len, 8) ? 0 : NTX_E_MAC;
}

int ntx_frame_parse(const uint8_t *buf, size_t len, const struct ntx_session *sess, uint8_t dir,
                    uint64_t expect_seq, struct ntx_frame *out) {
  /* Judge every header byte as soon as it is there: garbage is refused
   * after its first bytes instead of after a frame's worth of waiting. */
  if (len >= 1 && buf[0] != 'N')
    return NTX_E_MAGIC;
  if (len >= 2 && buf[1] != 'X')
    return NTX_E_MAGIC;
  if (len >= 3 && buf[2] != NTX_WIRE_VERSION)
    return NTX_E_VERSION;
  if (len >= 4 && (buf[3] == 0 || buf[3] >= NTX_MSG_TYPE_END))
    return NTX_E_TYPE;
  if (len < NTX_FRAME_HDR)
    return 0;
  uint32_t plen = get32(buf + 4);
  if (plen > NTX_FRAME_MAX_PAYLOAD)
    return NTX_E_SIZE;
  size_t total = NTX_FRAME_HDR + (size_t)plen + NTX_FRAME_MAC;
  if (len < total)
    return 0;
  /* The tag is checked before the seq: an unauthenticated frame must not
   * learn anything about the connection's sequence state. */
  if (sess) {
    uint8_t want[8];
    put64(want, frame_tag(sess, dir, buf, NTX_FRAME_HDR + plen));
    if (!ntx_ct_equal(want, buf + NTX_FRAME_HDR + plen, 8))
      return NTX_E_MAC;
  }
  uint64_t seq = get64(buf + 8);
  if (seq != expect_seq)
    return NTX_E_REPLAY;
  out->type = buf[3];
  out->len = plen;
  out->seq = seq;
  out->payload = buf + NTX_FRAME_HDR;
  return (int)total;
}

size_t ntx_frame_encode(uint8_t *out, size_t cap, uint8_t type, uint64_t seq, const void *payload,
                        size_t plen, const struct ntx_session *sess, uint8_t dir) {
  size_t total = NTX_FRAME_HDR + plen + NTX_FRAME_MAC;
  if (plen > NTX_FRAME_MAX_PAYLOAD || total > cap)
    return 0;
  out[0] = 'N';
  out[1] = 'X';
  out[2] = NTX_WIRE_VERSION;
  out[3] = type;
  put32(out + 4, (uint32_t)plen);
  put64(out + 8, seq);
  if (plen && payload != out + NTX_FRAME_HDR)
    memmove(out + NTX_FRAME_HDR, payload, plen);
  put64(out + NTX_FRAME_HDR + plen, frame_tag(sess, dir, out, NTX_FRAME_HDR + plen));
  return total;
}

/* ------------------------------------------------------------ messages -- */

/* Copy a fixed-size, NUL-padded string field and force termination. */
static void get_str(char *dst, const uint8_t *src, size_t n) {
  memcpy(dst, src, n);
  dst[n - 1] = '\0';
}
static void put_str(uint8_t *dst, const char *src, size_t n) {
  size_t l = src ? strnlen(src, n - 1) : 0;
  memset(dst, 0, n);
  if (l)
    memcpy(dst, src, l);
}

#define CHALLENGE_LEN NTX_CHALLENGE_LEN
#define HELLO_LEN (NTX_NONCE + 12 + NTX_HOST + NTX_JOB + 8)
#define REGISTER_FIXED 32u
#define REPLY_FIXED 12u
#define VERDICT_FIXED (4 + 4 + 8 + 8 + 8 + NTX_FIELD + 4)

static int decode_env(const uint8_t *p, uint32_t n) {
  /* Every entry is "NAME=VALUE" terminated by NUL, names non-empty. */
  uint32_t start = 0;
  int has_eq = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (p[i] == '=' && i > start)
      has_eq = 1;
    if (p[i] == '\0') {
      if (!has_eq)
        return -1;
      start = i + 1;
      has_eq = 0;
    }
  }
  return start == n ? 0 : -1;
}

/* One JOB entry at e (avail bytes left): its length fits and is its
 * kind's, its enumerations and reserved fields are in range.
 * @return 0 or -1. */
static int job_check(const uint8_t *e, uint32_t avail) {
  if (avail < 4)
    return -1;
  uint32_t kind = get16(e), len = get16(e + 2);
  const uint8_t *b = e + 4;
  if (len > avail - 4)
    return -1;
  switch (kind) {
  case NTX_JE_PROC:
    return len == NTX_JE_PROC_LEN && b[12] <= NTX_JS_LOST && !(b[13] & ~(NTX_JP_AGG | NTX_JP_STOPPED)) &&
                   get16(b + 14) == 0 ? 0 : -1;
  case NTX_JE_COMM:
    return len == NTX_JE_COMM_LEN && (int32_t)get32(b + 24) > 0 &&
                   !(get32(b + 32) & ~(NTX_JC_MISMATCH | NTX_JC_INIT_WAIT | NTX_JC_ENV_DONE)) ? 0 : -1;
  case NTX_JE_MEMBER:
    return len == NTX_JE_MEMBER_LEN && (int32_t)get32(b + 16) >= 0 && b[28] <= NTX_JS_LOST && b[29] <= 1 &&
                   get16(b + 30) == 0 && get32(b + 44) == 0 ? 0 : -1;
  case NTX_JE_TEXT:
    return len >= NTX_JE_TEXT_FIXED && len - NTX_JE_TEXT_FIXED <= NTX_JOB_TEXT_MAX && get32(b) <= NTX_V_LATENESS
           ? 0 : -1;
  default:
    return -1;
  }
}

int ntx_msg_decode(const struct ntx_frame *f, struct ntx_msg *m) {
  const uint8_t *p = f->payload;
  uint32_t n = f->len;
  memset(m, 0, sizeof *m);
  m->type = f->type;
  switch (f->type) {
  case NTX_MSG_CHALLENGE:
    if (n != CHALLENGE_LEN)
      return NTX_E_MALFORMED;
    memcpy(m->u.challenge.nonce, p, NTX_NONCE);
    m->u.challenge.flags = get32(p + 16);
    m->u.challenge.pid = (int32_t)get32(p + 20);
    get_str(m->u.challenge.host, p + 24, NTX_HOST);
    return 0;
  case NTX_MSG_HELLO:
    if (n != HELLO_LEN)
      return NTX_E_MALFORMED;
    memcpy(m->u.hello.nonce, p, NTX_NONCE);
    m->u.hello.pid = (int32_t)get32(p + 16);
    m->u.hello.launcher_rank = (int32_t)get32(p + 20);
    m->u.hello.flags = get32(p + 24);
    get_str(m->u.hello.host, p + 28, NTX_HOST);
    get_str(m->u.hello.job, p + 28 + NTX_HOST, NTX_JOB);
    m->u.hello.key_id = get64(p + 28 + NTX_HOST + NTX_JOB);
    return 0;
  case NTX_MSG_WELCOME:
    if (n != 8)
      return NTX_E_MALFORMED;
    m->u.welcome.client_id = get32(p);
    m->u.welcome.flags = get32(p + 4);
    return 0;
  case NTX_MSG_REGISTER: {
    if (n < REGISTER_FIXED)
      return NTX_E_MALFORMED;
    m->u.reg.comm_id = get64(p);
    m->u.reg.rank = (int32_t)get32(p + 8);
    m->u.reg.nranks = (int32_t)get32(p + 12);
    m->u.reg.nccl_version = (int32_t)get32(p + 16);
    m->u.reg.env_len = get32(p + 20);
    m->u.reg.pid = (int32_t)get32(p + 24);
    m->u.reg.launcher_rank = (int32_t)get32(p + 28);
    if (m->u.reg.env_len != n - REGISTER_FIXED || m->u.reg.env_len > NTX_ENV_MAX)
      return NTX_E_MALFORMED;
    if (m->u.reg.nranks <= 0 || m->u.reg.rank < 0 || m->u.reg.rank >= m->u.reg.nranks)
      return NTX_E_MALFORMED;
    if (decode_env(p + REGISTER_FIXED, m->u.reg.env_len) < 0)
      return NTX_E_MALFORMED;
    m->u.reg.env = (const char *)(p + REGISTER_FIXED);
    return 0;
  }
  case NTX_MSG_FP:
  case NTX_MSG_STRICT:
    if (n < 8)
      return NTX_E_MALFORMED;
    m->u.fp.req_id = get32(p);
    m->u.fp.n = get32(p + 4);
    /* count against length without overflow: both sides are < 2^17 */
    if (m->u.fp.n > NTX_FP_MAX || (uint64_t)m->u.fp.n * NTX_FP_WIRE != n - 8)
      return NTX_E_MALFORMED;
    m->u.fp.entries = p + 8;
    for (uint32_t i = 0; i < m->u.fp.n; i++)
      if (p[8 + i * NTX_FP_WIRE + 31] > (f->type == NTX_MSG_FP ? NTX_FP_DEV : NTX_FP_RECV) || /* dir byte */
          get32(p + 8 + i * NTX_FP_WIRE + 44) != 0)     /* reserved */
        return NTX_E_MALFORMED;
    return 0;
  case NTX_MSG_REPLY:
    if (n < REPLY_FIXED)
      return NTX_E_MALFORMED;
    m->u.reply.req_id = get32(p);
    m->u.reply.status = (int32_t)get32(p + 4);
    m->u.reply.text_len = get32(p + 8);
    if (m->u.reply.text_len > NTX_TEXT_MAX || m->u.reply.text_len != n - REPLY_FIXED)
      return NTX_E_MALFORMED;
    m->u.reply.text = (const char *)(p + REPLY_FIXED);
    return 0;
  case NTX_MSG_VERDICT:
    if (n < VERDICT_FIXED)
      return NTX_E_MALFORMED;
    m->u.verdict.kind = get32(p);
    if (m->u.verdict.kind < NTX_V_MISMATCH || m->u.verdict.kind > NTX_V_LATENESS)
      return NTX_E_MALFORMED;
    m->u.verdict.peer = (int32_t)get32(p + 4);
    m->u.verdict.comm_id = get64(p + 8);
    m->u.verdict.seq = get64(p + 16);
    m->u.verdict.aux = (int64_t)get64(p + 24);
    memcpy(m->u.verdict.field, p + 32, NTX_FIELD);
    m->u.verdict.field[NTX_FIELD] = '\0';
    m->u.verdict.text_len = get32(p + 32 + NTX_FIELD);
    if (m->u.verdict.text_len > NTX_TEXT_MAX || m->u.verdict.text_len != n - VERDICT_FIXED)
      return NTX_E_MALFORMED;
    m->u.verdict.text = (const char *)(p + VERDICT_FIXED);
    return 0;
  case NTX_MSG_PING:
    return n == 0 ? 0 : NTX_E_MALFORMED;
  case NTX_MSG_TIME:
    if (n != 8)
      return NTX_E_MALFORMED;
    m->u.time.stamp = get64(p);
    return 0;
  case NTX_MSG_TIME_ECHO:
    if (n != 16)
      return NTX_E_MALFORMED;
    m->u.time.stamp = get64(p);
    m->u.time.client_ns = get64(p + 8);
    return 0;
  case NTX_MSG_CLOCK:
    if (n != 24 || get32(p + 20) != 0)
      return NTX_E_MALFORMED;
    m->u.clock.offset_ns = (int64_t)get64(p);
    m->u.clock.uncert_ns = get64(p + 8);
    m->u.clock.samples = get32(p + 16);
    return 0;
  case NTX_MSG_BYE:
    if (n != 4)
      return NTX_E_MALFORMED;
    m->u.bye.reason = get32(p);
    return 0;
  case NTX_MSG_GONE:
    if (n < NTX_GONE_FIXED)
      return NTX_E_MALFORMED;
    m->u.gone.pid = (int32_t)get32(p);
    m->u.gone.launcher_rank = (int32_t)get32(p + 4);
    m->u.gone.clean = get32(p + 8);
    m->u.gone.n = get32(p + 12);
    get_str(m->u.gone.host, p + 16, NTX_HOST);
    if (m->u.gone.clean > 1 || m->u.gone.n > NTX_GONE_MAX ||
        (uint64_t)m->u.gone.n * NTX_GONE_WIRE != n - NTX_GONE_FIXED)
      return NTX_E_MALFORMED;
    m->u.gone.pairs = p + NTX_GONE_FIXED;
    for (uint32_t i = 0; i < m->u.gone.n; i++)
      if (get32(m->u.gone.pairs + i * NTX_GONE_WIRE + 12) != 0) /* reserved */
        return NTX_E_MALFORMED;
    return 0;
  case NTX_MSG_QUERY:
    if (n != 8 || get32(p) != NTX_QUERY_JOB || get32(p + 4) != 0)
      return NTX_E_MALFORMED;
    m->u.query.what = get32(p);
    return 0;
  case NTX_MSG_JOB: {
    if (n < NTX_JOB_HEAD || get32(p + 12) != 0)
      return NTX_E_MALFORMED;
    m->u.job.part = get32(p);
    m->u.job.flags = get32(p + 4);
    m->u.job.n = get32(p + 8);
    m->u.job.len = n - NTX_JOB_HEAD;
    m->u.job.ents = p + NTX_JOB_HEAD;
    if (m->u.job.flags & ~(uint32_t)(NTX_JOB_LAST | NTX_JOB_TRUNCATED | NTX_JOB_BUSY))
      return NTX_E_MALFORMED;
    /* every entry checked here, so ntx_job_next never meets a bad one */
    uint32_t off = 0, k = 0;
    while (off < m->u.job.len) {
      if (job_check(m->u.job.ents + off, m->u.job.len - off) < 0 || ++k > m->u.job.n)
        return NTX_E_MALFORMED;
      off += 4u + get16(m->u.job.ents + off + 2);
    }
    return k == m->u.job.n ? 0 : NTX_E_MALFORMED;
  }
  default:
    return NTX_E_MALFORMED;
  }
}

void ntx_fp_get(const uint8_t *e, uint32_t i, struct ntx_fp *out) {
  e += (size_t)i * NTX_FP_WIRE;
  out->comm_id = get64(e);
  out->seq = get64(e + 8);
  out->count = get64(e + 16);
  out->fp = get32(e + 24);
  out->kind = get16(e + 28);
  out->dtype = e[30];
  out->dir = e[31];
  out->redop = (int32_t)get32(e + 32);
  out->peer = (int32_t)get32(e + 36);
  out->rank = (int32_t)get32(e + 40);
  out->t_ns = get64(e + 48);
}

void ntx_fp_put(uint8_t *e, uint32_t i, const struct ntx_fp *fp) {
  e += (size_t)i * NTX_FP_WIRE;
  put64(e, fp->comm_id);
  put64(e + 8, fp->seq);
  put64(e + 16, fp->count);
  put32(e + 24, fp->fp);
  put16(e + 28, fp->kind);
  e[30] = fp->dtype;
  e[31] = fp->dir;
  put32(e + 32, (uint32_t)fp->redop);
  put32(e + 36, (uint32_t)fp->peer);
  put32(e + 40, (uint32_t)fp->rank);
  put32(e + 44, 0); /* reserved */
  put64(e + 48, fp->t_ns);
}

size_t ntx_enc_challenge(uint8_t *out, size_t cap, const uint8_t nonce[NTX_NONCE], uint32_t flags,
                         int32_t pid, const char *host) {
  if (cap < CHALLENGE_LEN)
    return 0;
  memcpy(out, nonce, NTX_NONCE);
  put32(out + 16, flags);
  put32(out + 20, (uint32_t)pid);
  put_str(out + 24, host, NTX_HOST);
  return CHALLENGE_LEN;
}

size_t ntx_enc_hello(uint8_t *out, size_t cap, const uint8_t nonce[NTX_NONCE], int32_t pid,
                     int32_t launcher_rank, uint32_t flags, const char *host, const char *job,
                     uint64_t key_id) {
  if (cap < HELLO_LEN)
    return 0;
  memcpy(out, nonce, NTX_NONCE);
  put32(out + 16, (uint32_t)pid);
  put32(out + 20, (uint32_t)launcher_rank);
  put32(out + 24, flags);
  put_str(out + 28, host, NTX_HOST);
  put_str(out + 28 + NTX_HOST, job, NTX_JOB);
  put64(out + 28 + NTX_HOST + NTX_JOB, key_id);
  return HELLO_LEN;
}

size_t ntx_enc_welcome(uint8_t *out, size_t cap, uint32_t client_id, uint32_t flags) {
  if (cap < 8)
    return 0;
  put32(out, client_id);
  put32(out + 4, flags);
  return 8;
}

size_t ntx_enc_register(uint8_t *out, size_t cap, uint64_t comm_id, int32_t rank, int32_t nranks,
                        int32_t nccl_version, int32_t pid, int32_t launcher_rank, const char *env,
                        uint32_t env_len) {
  if (env_len > NTX_ENV_MAX || cap < REGISTER_FIXED + env_len)
    return 0;
  put64(out, comm_id);
  put32(out + 8, (uint32_t)rank);
  put32(out + 12, (uint32_t)nranks);
  put32(out + 16, (uint32_t)nccl_version);
  put32(out + 20, env_len);
  put32(out + 24, (uint32_t)pid);
  put32(out + 28, (uint32_t)launcher_rank);
  if (env_len)
    memcpy(out + REGISTER_FIXED, env, env_len);
  return REGISTER_FIXED + env_len;
}

size_t ntx_enc_fp_head(uint8_t *out, size_t cap, uint32_t req_id, uint32_t n) {
  if (n > NTX_FP_MAX || cap < 8 + (size_t)n * NTX_FP_WIRE)
    return 0;
  put32(out, req_id);
  put32(out + 4, n);
  return 8 + (size_t)n * NTX_FP_WIRE;
}

size_t ntx_enc_reply(uint8_t *out, size_t cap, uint32_t req_id, int32_t status, const char *text) {
  size_t tl = text ? strnlen(text, NTX_TEXT_MAX) : 0;
  if (cap < REPLY_FIXED + tl)
    return 0;
  put32(out, req_id);
  put32(out + 4, (uint32_t)status);
  put32(out + 8, (uint32_t)tl);
  if (tl)
    memcpy(out + REPLY_FIXED, text, tl);
  return REPLY_FIXED + tl;
}

size_t ntx_enc_verdict(uint8_t *out, size_t cap, uint32_t kind, uint64_t comm_id, uint64_t seq,
                       int32_t peer, int64_t aux, const char *field, const char *text) {
  size_t tl = text ? strnlen(text, NTX_TEXT_MAX) : 0;
  if (cap < VERDICT_FIXED + tl)
    return 0;
  put32(out, kind);
  put32(out + 4, (uint32_t)peer);
  put64(out + 8, comm_id);
  put64(out + 16, seq);
  put64(out + 24, (uint64_t)aux);
  memset(out + 32, 0, NTX_FIELD);
  if (field)
    memcpy(out + 32, field, strnlen(field, NTX_FIELD));
  put32(out + 32 + NTX_FIELD, (uint32_t)tl);
  if (tl)
    memcpy(out + VERDICT_FIXED, text, tl);
  return VERDICT_FIXED + tl;
}

size_t ntx_enc_bye(uint8_t *out, size_t cap, uint32_t reason) {
  if (cap < 4)
    return 0;
  put32(out, reason);
  return 4;
}

size_t ntx_enc_time(uint8_t *out, size_t cap, uint8_t type, uint64_t stamp, uint64_t client_ns) {
  size_t n = type == NTX_MSG_TIME_ECHO ? 16 : 8;
  if (cap < n)
    return 0;
  put64(out, stamp);
  if (n == 16)
    put64(out + 8, client_ns);
  return n;
}

size_t ntx_enc_clock(uint8_t *out, size_t cap, int64_t offset_ns, uint64_t uncert_ns, uint32_t samples) {
  if (cap < 24)
    return 0;
  put64(out, (uint64_t)offset_ns);
  put64(out + 8, uncert_ns);
  put32(out + 16, samples);
  put32(out + 20, 0); /* reserved */
  return 24;
}

size_t ntx_enc_gone_head(uint8_t *out, size_t cap, int32_t pid, int32_t launcher_rank, uint32_t clean,
                         const char *host, uint32_t n) {
  if (n > NTX_GONE_MAX || cap < NTX_GONE_FIXED + (size_t)n * NTX_GONE_WIRE)
    return 0;
  put32(out, (uint32_t)pid);
  put32(out + 4, (uint32_t)launcher_rank);
  put32(out + 8, clean ? 1u : 0u);
  put32(out + 12, n);
  put_str(out + 16, host, NTX_HOST);
  return NTX_GONE_FIXED + (size_t)n * NTX_GONE_WIRE;
}

void ntx_gone_put(uint8_t *pairs, uint32_t i, uint64_t comm_id, int32_t rank) {
  uint8_t *e = pairs + (size_t)i * NTX_GONE_WIRE;
  put64(e, comm_id);
  put32(e + 8, (uint32_t)rank);
  put32(e + 12, 0); /* reserved */
}

void ntx_gone_get(const uint8_t *pairs, uint32_t i, uint64_t *comm_id, int32_t *rank) {
  const uint8_t *e = pairs + (size_t)i * NTX_GONE_WIRE;
  *comm_id = get64(e);
  *rank = (int32_t)get32(e + 8);
}

size_t ntx_enc_query(uint8_t *out, size_t cap, uint32_t what) {
  if (cap < 8)
    return 0;
  put32(out, what);
  put32(out + 4, 0); /* reserved */
  return 8;
}

size_t ntx_enc_job_head(uint8_t *out, size_t cap, uint32_t part, uint32_t flags, uint32_t n) {
  if (cap < NTX_JOB_HEAD)
    return 0;
  put32(out, part);
  put32(out + 4, flags);
  put32(out + 8, n);
  put32(out + 12, 0); /* reserved */
  return NTX_JOB_HEAD;
}

size_t ntx_job_put(uint8_t *out, size_t cap, const struct ntx_job_ent *e) {
  size_t len;
  switch (e->kind) {
  case NTX_JE_PROC: len = NTX_JE_PROC_LEN; break;
  case NTX_JE_COMM: len = NTX_JE_COMM_LEN; break;
  case NTX_JE_MEMBER: len = NTX_JE_MEMBER_LEN; break;
  case NTX_JE_TEXT: len = NTX_JE_TEXT_FIXED + strnlen(e->u.text.text, NTX_JOB_TEXT_MAX); break;
  default: return 0;
  }
  if (cap < 4 + len)
    return 0;
  memset(out, 0, 4 + len);
  put16(out, e->kind);
  put16(out + 2, (uint16_t)len);
  uint8_t *b = out + 4;
  switch (e->kind) {
  case NTX_JE_PROC:
    put32(b, e->u.proc.client);
    put32(b + 4, (uint32_t)e->u.proc.pid);
    put32(b + 8, (uint32_t)e->u.proc.lrank);
    b[12] = (uint8_t)e->u.proc.state;
    b[13] = (uint8_t)e->u.proc.flags;
    put_str(b + 16, e->u.proc.host, NTX_HOST);
    break;
  case NTX_JE_COMM:
    put64(b, e->u.comm.comm_id);
    put64(b + 8, e->u.comm.base);
    put64(b + 16, e->u.comm.newest);
    put32(b + 24, (uint32_t)e->u.comm.nranks);
    put32(b + 28, e->u.comm.nreg);
    put32(b + 32, e->u.comm.flags);
    put32(b + 36, e->u.comm.judged);
    break;
  case NTX_JE_MEMBER:
    put64(b, e->u.member.comm_id);
    put64(b + 8, e->u.member.last_seq);
    put32(b + 16, (uint32_t)e->u.member.rank);
    put32(b + 20, (uint32_t)e->u.member.pid);
    put32(b + 24, (uint32_t)e->u.member.lrank);
    b[28] = (uint8_t)e->u.member.state;
    b[29] = e->u.member.stopped ? 1 : 0;
    put32(b + 32, e->u.member.late_med_us);
    put32(b + 36, e->u.member.late_last);
    put32(b + 40, e->u.member.late_n);
    put_str(b + 48, e->u.member.host, NTX_HOST);
    break;
  default:
    put32(b, e->u.text.vkind);
    put32(b + 4, (uint32_t)e->u.text.peer);
    put64(b + 8, e->u.text.comm_id);
    put64(b + 16, e->u.text.seq);
    memcpy(b + NTX_JE_TEXT_FIXED, e->u.text.text, len - NTX_JE_TEXT_FIXED);
    break;
  }
  return 4 + len;
}

int ntx_job_next(const uint8_t *ents, uint32_t len, uint32_t *off, struct ntx_job_ent *e) {
  if (*off + 4 > len)
    return 0;
  const uint8_t *p = ents + *off, *b = p + 4;
  uint32_t bl = get16(p + 2);
  if (bl > len - *off - 4)
    return 0;
  memset(e, 0, sizeof *e);
  e->kind = get16(p);
  switch (e->kind) {
  case NTX_JE_PROC:
    e->u.proc.client = get32(b);
    e->u.proc.pid = (int32_t)get32(b + 4);
    e->u.proc.lrank = (int32_t)get32(b + 8);
    e->u.proc.state = b[12];
    e->u.proc.flags = b[13];
    get_str(e->u.proc.host, b + 16, NTX_HOST);
    break;
  case NTX_JE_COMM:
    e->u.comm.comm_id = get64(b);
    e->u.comm.base = get64(b + 8);
    e->u.comm.newest = get64(b + 16);
    e->u.comm.nranks = (int32_t)get32(b + 24);
    e->u.comm.nreg = get32(b + 28);
    e->u.comm.flags = get32(b + 32);
    e->u.comm.judged = get32(b + 36);
    break;
  case NTX_JE_MEMBER:
    e->u.member.comm_id = get64(b);
    e->u.member.last_seq = get64(b + 8);
    e->u.member.rank = (int32_t)get32(b + 16);
    e->u.member.pid = (int32_t)get32(b + 20);
    e->u.member.lrank = (int32_t)get32(b + 24);
    e->u.member.state = b[28];
    e->u.member.stopped = b[29];
    e->u.member.late_med_us = get32(b + 32);
    e->u.member.late_last = get32(b + 36);
    e->u.member.late_n = get32(b + 40);
    get_str(e->u.member.host, b + 48, NTX_HOST);
    break;
  default:
    e->u.text.vkind = get32(b);
    e->u.text.peer = (int32_t)get32(b + 4);
    e->u.text.comm_id = get64(b + 8);
    e->u.text.seq = get64(b + 16);
    e->u.text.len = bl - NTX_JE_TEXT_FIXED;
    if (e->u.text.len > NTX_JOB_TEXT_MAX)
      e->u.text.len = NTX_JOB_TEXT_MAX;
    memcpy(e->u.text.text, b + NTX_JE_TEXT_FIXED, e->u.text.len);
    e->u.text.text[e->u.text.len] = '\0';
    break;
  }
  *off += 4 + bl;
  return 1;
}
