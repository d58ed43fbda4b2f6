/* test_wire.c -- the wire encoder and parser: SipHash-2-4 reference
 * vectors, round trips of every message, and hostile input: garbage,
 * every truncation, oversized frames, any flipped bit (bad MAC), replayed
 * and cross-connection frames, malformed payloads; the v3 handshake: keys
 * of unique ids, key names, the CHALLENGE binding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/exchange/auth.h"
#include "interpose/exchange/wire.h"

#include "tests/nt_test.h"

static void test_siphash(void) {
  /* Appendix A of the SipHash paper: key 00..0f, messages 00..(n-1). */
  struct ntx_key k = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint8_t m[64];
  for (int i = 0; i < 64; i++)
    m[i] = (uint8_t)i;
  NT_CHECK(ntx_siphash(&k, m, 0) == 0x726fdb47dd0e0e31ull);
  NT_CHECK(ntx_siphash(&k, m, 1) == 0x74f839c593dc67fdull);
  NT_CHECK(ntx_siphash(&k, m, 8) == 0x93f5f5799a932462ull);
  NT_CHECK(ntx_siphash(&k, m, 15) == 0xa129ca6149be45e5ull);
  /* incremental in odd pieces equals one shot */
  for (size_t split = 0; split <= 63; split += 7) {
    struct ntx_sip s;
    ntx_sip_init(&s, &k);
    ntx_sip_update(&s, m, split);
    ntx_sip_update(&s, m + split, 63 - split);
    NT_CHECK(ntx_sip_final(&s) == ntx_siphash(&k, m, 63));
  }
  NT_CHECK(ntx_ct_equal("abcd", "abcd", 4));
  NT_CHECK(!ntx_ct_equal("abcd", "abce", 4));
  struct ntx_key a, b;
  NT_CHECK(ntx_key_derive("s3cret", &a, NULL, 0) == NTX_KEY_SECRET);
  ntx_key_derive("s3cres", &b, NULL, 0);
  NT_CHECK(a.k0 != b.k0 && a.k1 != b.k1);
}

static struct ntx_session sess(uint64_t k) {
  struct ntx_session s;
  memset(&s, 0, sizeof s);
  s.key.k0 = k;
  s.key.k1 = ~k;
  for (unsigned i = 0; i < sizeof s.nonce; i++)
    s.nonce[i] = (uint8_t)(i * 7 + 1);
  return s;
}

static uint8_t frame[NTX_FRAME_MAX];

static size_t make_fp_frame(const struct ntx_session *s, uint64_t seq, uint32_t n) {
  static uint8_t payload[NTX_FRAME_MAX_PAYLOAD];
  size_t pl = ntx_enc_fp_head(payload, sizeof payload, 0, n);
  for (uint32_t i = 0; i < n; i++) {
    struct ntx_fp fp = {.comm_id = 0x9f2c0123456789abull, .seq = i + 1, .count = 64, .fp = 7,
                        .kind = 1, .dtype = 7, .dir = NTX_FP_COLL, .redop = 0, .peer = -1, .rank = 3,
                        .t_ns = 1700000000123456789ull + i};
    ntx_fp_put(payload + 8, i, &fp);
  }
  return ntx_frame_encode(frame, sizeof frame, NTX_MSG_FP, seq, payload, pl, s, NTX_DIR_TO_COORD);
}

static void test_roundtrip(void) {
  struct ntx_session s = sess(42);
  struct ntx_frame f;
  struct ntx_msg m;
  uint8_t p[NTX_FRAME_MAX_PAYLOAD];
  uint8_t nonce[NTX_NONCE];
  memset(nonce, 0xab, sizeof nonce);

  size_t len = make_fp_frame(&s, 5, 3);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 5, &f) == (int)len);
  NT_CHECK(f.type == NTX_MSG_FP && f.seq == 5);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.fp.n == 3);
  struct ntx_fp fp;
  ntx_fp_get(m.u.fp.entries, 2, &fp);
  NT_CHECK(fp.seq == 3 && fp.count == 64 && fp.dtype == 7 && fp.peer == -1 && fp.rank == 3 &&
         fp.comm_id == 0x9f2c0123456789abull);
  NT_CHECK(fp.t_ns == 1700000000123456789ull + 2); /* v4: the arrival time travels */
  NT_CHECK(m.u.fp.n * NTX_FP_WIRE + 8 == f.len && NTX_FP_WIRE == 56);
  /* v4 device arrivals: dir 3 in FP only (a STRICT entry of dir 3, or dir 4 anywhere, is malformed) */
  {
    uint8_t dp[8 + 2 * NTX_FP_WIRE];
    struct ntx_fp dev = {.comm_id = 0x9f2c0123456789abull, .seq = 9, .dir = NTX_FP_DEV, .rank = 1,
                         .t_ns = 1700000000000000042ull};
    struct ntx_frame df = {.type = NTX_MSG_FP, .payload = dp};
    df.len = (uint32_t)ntx_enc_fp_head(dp, sizeof dp, 0, 1);
    ntx_fp_put(dp + 8, 0, &dev);
    NT_CHECK(ntx_msg_decode(&df, &m) == 0);
    ntx_fp_get(m.u.fp.entries, 0, &fp);
    NT_CHECK(fp.dir == NTX_FP_DEV && fp.seq == 9 && fp.rank == 1 && fp.t_ns == 1700000000000000042ull);
    df.type = NTX_MSG_STRICT;
    NT_CHECK(ntx_msg_decode(&df, &m) == NTX_E_MALFORMED);
    df.type = NTX_MSG_FP;
    dp[8 + 31] = 4;
    NT_CHECK(ntx_msg_decode(&df, &m) == NTX_E_MALFORMED);
  }
  /* v4 clock messages: TIME, TIME_ECHO, CLOCK; anything else of theirs is malformed */
  {
    uint8_t tp[24];
    struct ntx_frame tf = {.type = NTX_MSG_TIME_ECHO, .payload = tp};
    tf.len = (uint32_t)ntx_enc_time(tp, sizeof tp, NTX_MSG_TIME_ECHO, 111, 222);
    NT_CHECK(tf.len == 16 && ntx_msg_decode(&tf, &m) == 0 && m.u.time.stamp == 111 && m.u.time.client_ns == 222);
    tf.type = NTX_MSG_TIME;
    tf.len = (uint32_t)ntx_enc_time(tp, sizeof tp, NTX_MSG_TIME, 333, 0);
    NT_CHECK(tf.len == 8 && ntx_msg_decode(&tf, &m) == 0 && m.u.time.stamp == 333);
    tf.len = 9;
    NT_CHECK(ntx_msg_decode(&tf, &m) == NTX_E_MALFORMED);
    tf.type = NTX_MSG_CLOCK;
    tf.len = (uint32_t)ntx_enc_clock(tp, sizeof tp, -5000, 700, 8);
    NT_CHECK(tf.len == 24 && ntx_msg_decode(&tf, &m) == 0 && m.u.clock.offset_ns == -5000 &&
           m.u.clock.uncert_ns == 700 && m.u.clock.samples == 8);
    tp[20] = 1; /* reserved */
    NT_CHECK(ntx_msg_decode(&tf, &m) == NTX_E_MALFORMED);
  }

  size_t n = ntx_enc_hello(p, sizeof p, nonce, 1234, 7, 0, "node-a", "job-1", 0x0123456789abcdefull);
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_HELLO, 0, p, n, &s, NTX_DIR_TO_COORD);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 0, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.hello.pid == 1234 && m.u.hello.launcher_rank == 7 &&
         !strcmp(m.u.hello.host, "node-a") && !strcmp(m.u.hello.job, "job-1") &&
         m.u.hello.key_id == 0x0123456789abcdefull);

  static const char env[] = "NCCL_PROTO=Simple\0NCCL_ALGO=Ring";
  n = ntx_enc_register(p, sizeof p, 99, 2, 4, 22809, 4321, 6, env, sizeof env);
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_REGISTER, 1, p, n, &s, NTX_DIR_TO_COORD);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 1, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.reg.comm_id == 99 && m.u.reg.rank == 2 &&
         m.u.reg.nranks == 4 && m.u.reg.env_len == sizeof env &&
         m.u.reg.pid == 4321 && m.u.reg.launcher_rank == 6);

  n = ntx_enc_verdict(p, sizeof p, NTX_V_MISMATCH, 99, 4, 1, 0, "op", "mismatch on comm ...");
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_VERDICT, 9, p, n, &s, NTX_DIR_TO_CLIENT);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_CLIENT, 9, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.verdict.kind == NTX_V_MISMATCH && m.u.verdict.seq == 4 &&
         !strcmp(m.u.verdict.field, "op") && m.u.verdict.text_len == 20);
  /* a frame is bound to its direction: reflected back it does not verify */
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 9, &f) == NTX_E_MAC);

  n = ntx_enc_reply(p, sizeof p, 77, 1, "differs");
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_REPLY, 2, p, n, &s, NTX_DIR_TO_CLIENT);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_CLIENT, 2, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.reply.req_id == 77 && m.u.reply.status == 1);

  n = ntx_enc_challenge(p, sizeof p, nonce, 1, 55, "coord-host");
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_CHALLENGE, 0, p, n, &s, NTX_DIR_TO_CLIENT);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_CLIENT, 0, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.challenge.flags == 1 && m.u.challenge.pid == 55);

  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_PING, 3, NULL, 0, &s, NTX_DIR_TO_COORD);
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 3, &f) == (int)len);
  NT_CHECK(ntx_msg_decode(&f, &m) == 0);
}

static void test_hostile(void) {
  struct ntx_session s = sess(42), other = sess(43);
  struct ntx_frame f;
  struct ntx_msg m;
  size_t len = make_fp_frame(&s, 1, 10);

  /* every truncation: "need more", never a frame */
  for (size_t l = 0; l < len; l++)
    NT_CHECK(ntx_frame_parse(frame, l, &s, NTX_DIR_TO_COORD, 1, &f) == 0);
  /* any single flipped bit anywhere is refused */
  for (size_t i = 0; i < len; i += 3) {
    frame[i] ^= 0x10;
    int r = ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 1, &f);
    NT_CHECK(r < 0 || (r == 0 && i >= 4 && i < 8)); /* a bigger length field waits for more */
    frame[i] ^= 0x10;
  }
  /* wrong key, other connection's nonces */
  NT_CHECK(ntx_frame_parse(frame, len, &other, NTX_DIR_TO_COORD, 1, &f) == NTX_E_MAC);
  struct ntx_session s2 = s;
  s2.nonce[31] ^= 1;
  NT_CHECK(ntx_frame_parse(frame, len, &s2, NTX_DIR_TO_COORD, 1, &f) == NTX_E_MAC);
  /* replay: the same valid frame when seq 2 is expected */
  NT_CHECK(ntx_frame_parse(frame, len, &s, NTX_DIR_TO_COORD, 2, &f) == NTX_E_REPLAY);
  /* oversized: refused from the header alone */
  uint8_t big[16] = {'N', 'X', NTX_WIRE_VERSION, NTX_MSG_FP, 0x01, 0x00, 0x02, 0x00};
  NT_CHECK(ntx_frame_parse(big, sizeof big, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_SIZE);
  NT_CHECK(ntx_frame_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_MAGIC);
  /* v1 to v4 peers (before the pid in REGISTER of v5) are refused from
   * their third byte, with a reason that says what to do */
  uint8_t v1[4] = {'N', 'X', 1, 1}, v2[4] = {'N', 'X', 2, 1}, v3[4] = {'N', 'X', 4, 1}, v5[4] = {'N', 'X', 6, 1};
  NT_CHECK(ntx_frame_parse(v3, 4, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_VERSION);
  NT_CHECK(ntx_frame_parse(v1, 4, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_VERSION);
  NT_CHECK(ntx_frame_parse(v2, 4, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_VERSION);
  NT_CHECK(strstr(ntx_wire_strerror(NTX_E_VERSION), "another nccltrace build") != NULL);
  NT_CHECK(ntx_frame_parse(v5, 4, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_VERSION);
  uint8_t badtype[4] = {'N', 'X', NTX_WIRE_VERSION, 200};
  NT_CHECK(ntx_frame_parse(badtype, 4, &s, NTX_DIR_TO_COORD, 0, &f) == NTX_E_TYPE);
  /* random garbage never yields a frame with the wrong key */
  srand(7);
  for (int t = 0; t < 20000; t++) {
    uint8_t g[128];
    size_t gl = (size_t)(rand() % (int)sizeof g);
    for (size_t i = 0; i < gl; i++)
      g[i] = (uint8_t)rand();
    if (t & 1 && gl >= 4) { /* a plausible header makes the parser go deeper */
      g[0] = 'N'; g[1] = 'X'; g[2] = NTX_WIRE_VERSION; g[3] = (uint8_t)(1 + rand() % (NTX_MSG_TYPE_END - 1));
    }
    NT_CHECK(ntx_frame_parse(g, gl, &s, NTX_DIR_TO_COORD, 0, &f) <= 0);
    /* and unauthenticated decoding never reads out of bounds (ASan) */
    if (ntx_frame_parse(g, gl, NULL, NTX_DIR_TO_COORD, (uint64_t)-1, &f) > 0)
      ntx_msg_decode(&f, &m);
  }
  /* malformed payloads under a valid tag */
  uint8_t p[64] = {0};
  struct ntx_frame mf = {.type = NTX_MSG_FP, .len = 8, .payload = p};
  p[4] = 1; /* claims one entry, has none */
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED);
  mf.type = NTX_MSG_REGISTER;
  mf.len = 38;
  memset(p, 0, sizeof p);
  p[12] = 4;                /* nranks 4, rank 0 */
  p[20] = 6;                /* env_len 6 (pid, launcher rank at 24, 28) */
  memcpy(p + 32, "NCCL_X", 6); /* no '=' and no NUL */
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED);
  memcpy(p + 32, "A=b\0C=", 6);
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED); /* last entry unterminated */
  memcpy(p + 32, "A=b\0C\0", 6);
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED); /* entry without '=' */
  memcpy(p + 32, "A=\0C=\0", 6);
  NT_CHECK(ntx_msg_decode(&mf, &m) == 0);
  p[8] = 5; /* rank 5 of 4 */
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED);
  mf.type = NTX_MSG_VERDICT;
  mf.len = 10;
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED);
  mf.type = NTX_MSG_PING;
  mf.len = 1;
  NT_CHECK(ntx_msg_decode(&mf, &m) == NTX_E_MALFORMED);
  /* GONE: fixed part, count against length, clean is 0/1, reserved is 0 */
  static uint8_t gp[NTX_GONE_FIXED + 2 * NTX_GONE_WIRE];
  struct ntx_frame gf = {.type = NTX_MSG_GONE, .payload = gp};
  gf.len = (uint32_t)ntx_enc_gone_head(gp, sizeof gp, 4242, 3, 0, "hostB", 2);
  ntx_gone_put(gp + NTX_GONE_FIXED, 0, 0xabcdef0123456789ull, 3);
  ntx_gone_put(gp + NTX_GONE_FIXED, 1, 77, 0);
  NT_CHECK(gf.len == sizeof gp);
  NT_CHECK(ntx_msg_decode(&gf, &m) == 0);
  NT_CHECK(m.u.gone.pid == 4242 && m.u.gone.launcher_rank == 3 && m.u.gone.clean == 0 && m.u.gone.n == 2 &&
         !strcmp(m.u.gone.host, "hostB"));
  uint64_t gc;
  int32_t gr;
  ntx_gone_get(m.u.gone.pairs, 0, &gc, &gr);
  NT_CHECK(gc == 0xabcdef0123456789ull && gr == 3);
  ntx_gone_get(m.u.gone.pairs, 1, &gc, &gr);
  NT_CHECK(gc == 77 && gr == 0);
  gf.len -= 1; /* count and length disagree */
  NT_CHECK(ntx_msg_decode(&gf, &m) == NTX_E_MALFORMED);
  gf.len = NTX_GONE_FIXED - 1;
  NT_CHECK(ntx_msg_decode(&gf, &m) == NTX_E_MALFORMED);
  gf.len = sizeof gp;
  gp[8] = 2; /* clean must be 0 or 1 */
  NT_CHECK(ntx_msg_decode(&gf, &m) == NTX_E_MALFORMED);
  gp[8] = 1;
  gp[NTX_GONE_FIXED + 12] = 1; /* reserved */
  NT_CHECK(ntx_msg_decode(&gf, &m) == NTX_E_MALFORMED);
  gp[NTX_GONE_FIXED + 12] = 0;
  gp[12] = 0xff; gp[13] = 0xff; gp[14] = 0xff; gp[15] = 0xff; /* n huge: no overflow */
  NT_CHECK(ntx_msg_decode(&gf, &m) == NTX_E_MALFORMED);
  NT_CHECK(ntx_enc_gone_head(gp, sizeof gp, 1, 1, 1, "h", NTX_GONE_MAX + 1) == 0);
}

/* v3: a key per unique id, public key names, and every frame after
 * CHALLENGE bound to the key and to what CHALLENGE said. */
static void test_handshake(void) {
  uint8_t uid[128], uid2[128];
  for (int i = 0; i < 128; i++)
    uid[i] = uid2[i] = (uint8_t)(i * 13);
  uid2[127] ^= 1;
  struct ntx_key k, k2, again, secret;
  ntx_key_from_uid(uid, sizeof uid, &k);
  ntx_key_from_uid(uid2, sizeof uid2, &k2);
  ntx_key_from_uid(uid, sizeof uid, &again);
  NT_CHECK(k.k0 == again.k0 && k.k1 == again.k1);
  NT_CHECK(k.k0 != k2.k0 && k.k1 != k2.k1 && ntx_key_id(&k) != ntx_key_id(&k2));
  NT_CHECK(ntx_key_id(&k) != k.k0 && ntx_key_id(&k) != k.k1);
  /* a unique id's key is not the key of a secret with the same bytes */
  char text[129];
  memcpy(text, "0123456789abcdef", 17);
  ntx_key_derive(text, &secret, NULL, 0);
  ntx_key_from_uid(text, 16, &again);
  NT_CHECK(secret.k0 != again.k0);

  uint8_t chal[NTX_CHALLENGE_LEN], nonce[NTX_NONCE], p[256];
  memset(nonce, 0x5a, sizeof nonce);
  NT_CHECK(ntx_enc_challenge(chal, sizeof chal, nonce, 1, 4242, "rank0-host") == NTX_CHALLENGE_LEN);
  /* CHALLENGE: the public session, which anyone can parse (and make) */
  struct ntx_session pub, pub2, cl, co;
  ntx_sess_challenge(&pub);
  ntx_sess_challenge(&pub2);
  struct ntx_frame f;
  size_t len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_CHALLENGE, 0, chal, sizeof chal, &pub,
                                NTX_DIR_TO_CLIENT);
  NT_CHECK(ntx_frame_parse(frame, len, &pub2, NTX_DIR_TO_CLIENT, 0, &f) == (int)len);
  /* HELLO under the client's key, bound to that CHALLENGE; the coordinator
   * parses it without a session, then verifies under the key it names */
  ntx_sess_bind(&cl, &k, chal);
  NT_CHECK(!memcmp(cl.nonce, nonce, NTX_NONCE));
  size_t n = ntx_enc_hello(p, sizeof p, nonce, 1, 1, 0, "h", "j", ntx_key_id(&k));
  len = ntx_frame_encode(frame, sizeof frame, NTX_MSG_HELLO, 0, p, n, &cl, NTX_DIR_TO_COORD);
  NT_CHECK(ntx_frame_parse(frame, len, NULL, NTX_DIR_TO_COORD, 0, &f) == (int)len);
  ntx_sess_bind(&co, &k, chal);
  NT_CHECK(ntx_frame_verify(&f, &co, NTX_DIR_TO_COORD) == 0);
  /* another key (a forger computing one from public values) fails */
  ntx_sess_bind(&co, &k2, chal);
  NT_CHECK(ntx_frame_verify(&f, &co, NTX_DIR_TO_COORD) == NTX_E_MAC);
  /* a CHALLENGE altered on the way (flags, pid, host) changes the binding:
   * the right key bound to what the other end saw does not verify */
  for (size_t i = NTX_NONCE; i < NTX_CHALLENGE_LEN; i += 5) {
    uint8_t alt[NTX_CHALLENGE_LEN];
    memcpy(alt, chal, sizeof alt);
    alt[i] ^= 0x01;
    ntx_sess_bind(&co, &k, alt);
    NT_CHECK(ntx_frame_verify(&f, &co, NTX_DIR_TO_COORD) == NTX_E_MAC);
  }
  /* and the public session never verifies a keyed frame */
  NT_CHECK(ntx_frame_verify(&f, &pub, NTX_DIR_TO_COORD) == NTX_E_MAC);
}

/* The status query (v5): QUERY is 8 bytes, what 0; a JOB part's entries
 * round-trip, and every entry is checked before ntx_job_next reads it. */
static void test_job(void) {
  uint8_t p[1024];
  struct ntx_msg m;
  struct ntx_frame f = {.type = NTX_MSG_QUERY, .payload = p};
  f.len = (uint32_t)ntx_enc_query(p, sizeof p, NTX_QUERY_JOB);
  NT_CHECK(f.len == 8 && ntx_msg_decode(&f, &m) == 0 && m.u.query.what == NTX_QUERY_JOB);
  p[0] = 1; /* no other view is defined */
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[0] = 0;
  f.len = 7;
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);

  struct ntx_job_ent in[4], out;
  memset(in, 0, sizeof in);
  in[0].kind = NTX_JE_TEXT;
  in[0].u.text.vkind = NTX_JT_SUMMARY;
  in[0].u.text.peer = -1;
  strcpy(in[0].u.text.text, "4 connections: no problem seen");
  in[1].kind = NTX_JE_PROC;
  in[1].u.proc.client = 3;
  in[1].u.proc.pid = 4242;
  in[1].u.proc.lrank = 2;
  in[1].u.proc.state = NTX_JS_CONNECTED;
  in[1].u.proc.flags = NTX_JP_AGG | NTX_JP_STOPPED;
  strcpy(in[1].u.proc.host, "hostB");
  in[2].kind = NTX_JE_COMM;
  in[2].u.comm.comm_id = 0xabcdef0123456789ull;
  in[2].u.comm.nranks = 4;
  in[2].u.comm.nreg = 3;
  in[2].u.comm.base = 17;
  in[2].u.comm.newest = 20;
  in[2].u.comm.flags = NTX_JC_MISMATCH;
  in[2].u.comm.judged = 200;
  in[3].kind = NTX_JE_MEMBER;
  in[3].u.member.comm_id = 0xabcdef0123456789ull;
  in[3].u.member.rank = 3;
  in[3].u.member.pid = 4243;
  in[3].u.member.lrank = 3;
  in[3].u.member.state = NTX_JS_LOST;
  in[3].u.member.last_seq = 19;
  in[3].u.member.late_med_us = 1500;
  in[3].u.member.late_last = 150;
  in[3].u.member.late_n = 200;
  strcpy(in[3].u.member.host, "hostB");
  size_t n = ntx_enc_job_head(p, sizeof p, 0, NTX_JOB_LAST, 4);
  for (int i = 0; i < 4; i++) {
    size_t w = ntx_job_put(p + n, sizeof p - n, &in[i]);
    NT_CHECK(w > 0);
    n += w;
  }
  f.type = NTX_MSG_JOB;
  f.len = (uint32_t)n;
  NT_CHECK(ntx_msg_decode(&f, &m) == 0 && m.u.job.n == 4 && m.u.job.flags == NTX_JOB_LAST && m.u.job.part == 0);
  uint32_t off = 0;
  NT_CHECK(ntx_job_next(m.u.job.ents, m.u.job.len, &off, &out) == 1 && out.kind == NTX_JE_TEXT &&
           !strcmp(out.u.text.text, in[0].u.text.text) && out.u.text.peer == -1);
  NT_CHECK(ntx_job_next(m.u.job.ents, m.u.job.len, &off, &out) == 1 && out.kind == NTX_JE_PROC &&
           out.u.proc.pid == 4242 && out.u.proc.lrank == 2 && out.u.proc.flags == (NTX_JP_AGG | NTX_JP_STOPPED) &&
           !strcmp(out.u.proc.host, "hostB") && out.u.proc.client == 3);
  NT_CHECK(ntx_job_next(m.u.job.ents, m.u.job.len, &off, &out) == 1 && out.kind == NTX_JE_COMM &&
           out.u.comm.comm_id == in[2].u.comm.comm_id && out.u.comm.nranks == 4 && out.u.comm.nreg == 3 &&
           out.u.comm.base == 17 && out.u.comm.newest == 20 && out.u.comm.judged == 200);
  NT_CHECK(ntx_job_next(m.u.job.ents, m.u.job.len, &off, &out) == 1 && out.kind == NTX_JE_MEMBER &&
           out.u.member.rank == 3 && out.u.member.pid == 4243 && out.u.member.state == NTX_JS_LOST &&
           out.u.member.last_seq == 19 && out.u.member.late_med_us == 1500 && out.u.member.late_last == 150 &&
           out.u.member.late_n == 200 && !strcmp(out.u.member.host, "hostB"));
  NT_CHECK(ntx_job_next(m.u.job.ents, m.u.job.len, &off, &out) == 0);
  /* count and entries disagree; an entry runs past the payload; a bad kind,
   * state or length; unknown flags */
  p[8] = 5;
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[8] = 4;
  f.len -= 1;
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  f.len += 1;
  size_t proc_at = NTX_JOB_HEAD + 4 + NTX_JE_TEXT_FIXED + strlen(in[0].u.text.text);
  p[proc_at] = 9; /* kind */
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[proc_at] = NTX_JE_PROC;
  p[proc_at + 4 + 12] = 7; /* state */
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[proc_at + 4 + 12] = NTX_JS_CONNECTED;
  p[proc_at + 2] = 79; /* a PROC body is 80 bytes */
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[proc_at + 2] = 80;
  NT_CHECK(ntx_msg_decode(&f, &m) == 0);
  p[4] = 8; /* flags: undefined bit */
  NT_CHECK(ntx_msg_decode(&f, &m) == NTX_E_MALFORMED);
  p[4] = NTX_JOB_LAST;
  /* a text entry's length is bounded */
  uint8_t big[NTX_JOB_HEAD + 4 + NTX_JE_TEXT_FIXED + NTX_JOB_TEXT_MAX + 1] = {0};
  ntx_enc_job_head(big, sizeof big, 0, 0, 1);
  big[NTX_JOB_HEAD] = NTX_JE_TEXT;
  uint32_t tl = NTX_JE_TEXT_FIXED + NTX_JOB_TEXT_MAX + 1;
  big[NTX_JOB_HEAD + 2] = (uint8_t)tl;
  big[NTX_JOB_HEAD + 3] = (uint8_t)(tl >> 8);
  struct ntx_frame bf = {.type = NTX_MSG_JOB, .len = sizeof big, .payload = big};
  NT_CHECK(ntx_msg_decode(&bf, &m) == NTX_E_MALFORMED);
}

int main(void) {
  test_siphash();
  test_job();
  test_roundtrip();
  test_hostile();
  test_handshake();
  if (nt_failures)
    fprintf(stderr, "test_wire: %d nt_failures\n", nt_failures);
  else
    printf("test_wire: ok\n");
  return nt_exit_status();
}
