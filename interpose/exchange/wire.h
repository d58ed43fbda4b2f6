/* wire.h -- the exchange wire protocol (docs/wire-protocol.md, byte by byte):
 * authenticated, sequenced frames between a client (one per traced process)
 * and the coordinator, and the typed messages inside them.
 *
 * Thread-safety: pure functions over caller memory, no state.
 * Signal-safety: none of this is used from signal handlers (it would be safe:
 * no allocation, no locks).
 *
 * Every parser here treats its input as hostile: lengths are checked before
 * use, strings are bounded, counts are checked against the payload length.
 * ntx_frame_parse and ntx_msg_decode are the libFuzzer entry points
 * (tests/exchange/fuzz_wire.c).
 */
#ifndef NTX_WIRE_H
#define NTX_WIRE_H
#include <stddef.h>
#include <stdint.h>
#include "interpose/exchange/auth.h"

#define NTX_WIRE_VERSION 5u         /* 5: pid and launcher rank in REGISTER, the status query (QUERY, JOB) */
#define NTX_FRAME_HDR 16u            /* "NX", version, type, length, seq */
#define NTX_FRAME_MAC 8u             /* SipHash-2-4 tag after the payload */
#define NTX_FRAME_MAX_PAYLOAD 65536u /* larger frames are rejected before buffering */
#define NTX_FRAME_MAX (NTX_FRAME_HDR + NTX_FRAME_MAX_PAYLOAD + NTX_FRAME_MAC)
#define NTX_NONCE 16u
#define NTX_HOST 64u
#define NTX_JOB 64u
#define NTX_FIELD 24u                /* = sizeof ntr_record.u.text */
#define NTX_TEXT_MAX 2048u           /* verdict / reply text */
#define NTX_ENV_MAX 8192u            /* = NTR_ENV_BYTES */
#define NTX_FP_WIRE 56u              /* bytes per fingerprint entry (v4: + arrival time) */
#define NTX_FP_MAX ((NTX_FRAME_MAX_PAYLOAD - 8u) / NTX_FP_WIRE)
#define NTX_GONE_FIXED (16u + NTX_HOST)
#define NTX_GONE_WIRE 16u            /* bytes per (comm, rank) pair of GONE */
#define NTX_GONE_MAX ((NTX_FRAME_MAX_PAYLOAD - NTX_GONE_FIXED) / NTX_GONE_WIRE)
#define NTX_CHALLENGE_LEN (NTX_NONCE + 8u + NTX_HOST)
#define NTX_BIND 8u                  /* transcript binding mixed into every tag after CHALLENGE */

/* HELLO flags */
#define NTX_HELLO_AGG 1u      /* the client is a node aggregator (speaks for other processes) */
#define NTX_HELLO_QUERY 2u    /* v5: a status query (`nccltrace status --job`), no rank: QUERY only */
/* CHALLENGE flags: NTX_COORD_EMBEDDED (coord.h) = 1 */
/* WELCOME flags: NTX_COORD_EMBEDDED = 1, and */
#define NTX_WELCOME_DEV 2u    /* the server takes device arrivals (FP entries of dir NTX_FP_DEV) */
#define NTX_CHAL_AGG 2u       /* the server is a node aggregator, not the root */
/* BYE reasons */
enum ntx_bye_reason { NTX_BYE_EXIT = 0, NTX_BYE_SHUTDOWN = 1, NTX_BYE_HANDOVER = 2 };

/* Direction byte mixed into every tag: a frame cannot be reflected back. */
enum ntx_dir { NTX_DIR_TO_COORD = 'C', NTX_DIR_TO_CLIENT = 'S' };

enum ntx_msg_type {
  NTX_MSG_CHALLENGE = 1, /* coord -> client, seq 0: the coordinator's nonce */
  NTX_MSG_HELLO = 2,     /* client -> coord, seq 0: the client's nonce and identity */
  NTX_MSG_WELCOME = 3,   /* coord -> client, seq 1: authenticated, client id */
  NTX_MSG_REGISTER = 4,  /* client -> coord: a communicator init was entered */
  NTX_MSG_FP = 5,        /* client -> coord: a batch of fingerprints */
  NTX_MSG_STRICT = 6,    /* client -> coord: fingerprints that wait for agreement */
  NTX_MSG_REPLY = 7,     /* coord -> client: answer to one STRICT request */
  NTX_MSG_VERDICT = 8,   /* coord -> client: something to report */
  NTX_MSG_PING = 9,      /* client -> coord: liveness while idle */
  NTX_MSG_BYE = 10,      /* either way: clean exit (client) or shutdown (coord) */
  NTX_MSG_GONE = 11,     /* aggregator -> coord (v2): one of its processes left (clean or lost) */
  NTX_MSG_TIME = 12,     /* coord -> client (v4): a clock round trip starts: the coordinator's time */
  NTX_MSG_TIME_ECHO = 13, /* client -> coord (v4): that time back, with the client's own */
  NTX_MSG_CLOCK = 14,    /* coord -> client (v4): the client's clock offset as estimated */
  NTX_MSG_QUERY = 15,    /* query -> coord (v5): send the whole job's view */
  NTX_MSG_JOB = 16,      /* coord -> query (v5): one part of that view (entries below) */
  NTX_MSG_TYPE_END
};

/* Error values of the parsers (negative). */
enum ntx_wire_err {
  NTX_E_MAGIC = -1, NTX_E_VERSION = -2, NTX_E_TYPE = -3, NTX_E_SIZE = -4,
  NTX_E_MAC = -5, NTX_E_REPLAY = -6, NTX_E_MALFORMED = -7,
};
const char *ntx_wire_strerror(int err);

/* Per-connection authentication state: the key the client named, both
 * nonces and the CHALLENGE binding.  The tag covers the nonces, so a frame
 * recorded on one connection is refused on any other, and the per-direction
 * seq refuses it on its own; the binding makes every frame after CHALLENGE
 * depend on what CHALLENGE said (docs/wire-protocol.md, "Handshake"). */
struct ntx_session {
  struct ntx_key key;
  uint8_t nonce[2 * NTX_NONCE]; /* coordinator's, then client's (zero until HELLO) */
  uint8_t bind[NTX_BIND];       /* keyed hash of the CHALLENGE payload (zero for CHALLENGE) */
};

/* The session CHALLENGE is sent and parsed under: a fixed public key, zero
 * nonces and binding.  Its tag is a checksum, not a proof: the coordinator
 * does not know yet which key the client holds.  What it said is proved
 * later, by ntx_sess_bind. */
void ntx_sess_challenge(struct ntx_session *s);
/* After CHALLENGE: key k (the one HELLO names), nonce_coord from the
 * CHALLENGE payload chal (NTX_CHALLENGE_LEN bytes), the binding
 * SipHash_k("ntx3-challenge" || chal), client nonce zero. */
void ntx_sess_bind(struct ntx_session *s, const struct ntx_key *k, const uint8_t *chal);

struct ntx_frame {
  uint8_t type;
  uint32_t len;          /* payload bytes */
  uint64_t seq;
  const uint8_t *payload; /* into the parsed buffer */
};

/* Check the tag of a frame that ntx_frame_parse accepted with sess NULL
 * (the coordinator learns the key of a HELLO from its payload).
 * @return 0 or NTX_E_MAC. */
int ntx_frame_verify(const struct ntx_frame *f, const struct ntx_session *sess, uint8_t dir);

/* Parse one frame at the start of buf.
 * sess NULL skips the tag check (fuzzing and tests only).
 * expect_seq: the only seq accepted (0, 1, 2, ... per direction).
 * @return frame bytes (> 0), 0 when buf holds a valid prefix of a frame (read
 *         more), or an ntx_wire_err.  The size is checked from the header
 *         alone, so an oversized frame is refused before it is buffered. */
int ntx_frame_parse(const uint8_t *buf, size_t len, const struct ntx_session *sess, uint8_t dir,
                    uint64_t expect_seq, struct ntx_frame *out);

/* Write a whole frame (header, payload, tag) into out.
 * @return bytes written, or 0 when cap is too small or plen too large. */
size_t ntx_frame_encode(uint8_t *out, size_t cap, uint8_t type, uint64_t seq, const void *payload,
                        size_t plen, const struct ntx_session *sess, uint8_t dir);

/* ------------------------------------------------------------ messages -- */

/* NTX_FP_DEV: the device reached collective seq (a DeviceArrive record):
 * comm_id, seq, rank, t_ns, the rest 0; only in FP, only to a server whose
 * WELCOME said NTX_WELCOME_DEV. */
enum ntx_fp_dir { NTX_FP_COLL = 0, NTX_FP_SEND = 1, NTX_FP_RECV = 2, NTX_FP_DEV = 3 };

/* One fingerprint.  Collectives: (comm, seq, fp, kind, count, dtype, redop,
 * root in peer).  P2P: (comm, peer, dir, p2p seq, count, dtype). */
struct ntx_fp {
  uint64_t comm_id, seq, count;
  uint32_t fp;
  uint16_t kind;  /* enum ntr_kind, Bcast already mapped to Broadcast */
  uint8_t dtype;
  uint8_t dir;    /* enum ntx_fp_dir */
  int32_t redop;
  int32_t peer;   /* root, or the p2p peer */
  int32_t rank;   /* the sender's rank in the communicator */
  uint64_t t_ns;  /* v4: the call's time, the sender's CLOCK_REALTIME in ns; 0 unknown */
};

enum ntx_verdict_kind {
  NTX_V_MISMATCH = 1,     /* collective fingerprints differ */
  NTX_V_P2P_MISMATCH = 2, /* a send and its recv differ */
  NTX_V_PEER_LOST = 3,    /* a client connection was lost without BYE */
  NTX_V_SKEW = 4,         /* a rank stayed behind on a comm */
  NTX_V_INIT_WAIT = 5,    /* a comm's init is still missing ranks */
  NTX_V_ENV_DIFF = 6,     /* NCCL_* differs (field = variable) */
  NTX_V_ENV_DONE = 7,     /* every rank registered: env verdict complete, aux = diffs */
  NTX_V_NOTE = 8,         /* informational line */
  NTX_V_STRAGGLER = 9,    /* v4: a rank arrives last (peer; aux = median lateness us; field "straggler") */
  NTX_V_LATENESS = 10,    /* v4: rank peer's median lateness (aux, us), late count (seq), window (field) */
};

struct ntx_msg {
  uint8_t type;
  union {
    struct { uint8_t nonce[NTX_NONCE]; uint32_t flags; int32_t pid; char host[NTX_HOST]; } challenge;
    struct {
      uint8_t nonce[NTX_NONCE];
      int32_t pid, launcher_rank;
      uint32_t flags;
      char host[NTX_HOST], job[NTX_JOB];
      uint64_t key_id; /* ntx_key_id of the key the client tags with (v3) */
    } hello;
    struct { uint32_t client_id, flags; } welcome;
    struct {
      uint64_t comm_id;
      int32_t rank, nranks, nccl_version;
      int32_t pid, launcher_rank; /* v5: the process holding the rank (behind an aggregator too) */
      uint32_t env_len;
      const char *env; /* "NAME=VALUE\0..." validated: every entry terminated */
    } reg;
    struct { uint32_t req_id, n; const uint8_t *entries; } fp; /* FP and STRICT */
    struct { uint32_t req_id; int32_t status; uint32_t text_len; const char *text; } reply;
    struct {
      uint32_t kind;
      int32_t peer;
      uint64_t comm_id, seq;
      int64_t aux;
      char field[NTX_FIELD + 1];
      uint32_t text_len;
      const char *text; /* not NUL-terminated */
    } verdict;
    struct { uint32_t reason; } bye;
    struct { uint64_t stamp, client_ns; } time;                         /* TIME (client_ns 0), TIME_ECHO */
    struct { int64_t offset_ns; uint64_t uncert_ns; uint32_t samples; } clock; /* CLOCK */
    struct {
      int32_t pid, launcher_rank;
      uint32_t clean, n;
      char host[NTX_HOST];
      const uint8_t *pairs; /* n x (comm_id u64, rank i32, 0 u32): ntx_gone_get */
    } gone;
    struct { uint32_t what; } query;                                    /* QUERY: NTX_QUERY_JOB */
    struct { uint32_t part, flags, n, len; const uint8_t *ents; } job;  /* JOB: ntx_job_next */
  } u;
};

/* Decode the payload of a parsed frame.  Pointers in *m point into the frame.
 * @return 0 or NTX_E_MALFORMED. */
int ntx_msg_decode(const struct ntx_frame *f, struct ntx_msg *m);
/* Entry i (< n) of an FP or STRICT message. */
void ntx_fp_get(const uint8_t *entries, uint32_t i, struct ntx_fp *out);

/* Payload encoders: write into out (cap bytes), @return bytes or 0 when it
 * does not fit. */
size_t ntx_enc_challenge(uint8_t *out, size_t cap, const uint8_t nonce[NTX_NONCE], uint32_t flags,
                         int32_t pid, const char *host);
size_t ntx_enc_hello(uint8_t *out, size_t cap, const uint8_t nonce[NTX_NONCE], int32_t pid,
                     int32_t launcher_rank, uint32_t flags, const char *host, const char *job,
                     uint64_t key_id);
size_t ntx_enc_welcome(uint8_t *out, size_t cap, uint32_t client_id, uint32_t flags);
size_t ntx_enc_register(uint8_t *out, size_t cap, uint64_t comm_id, int32_t rank, int32_t nranks,
                        int32_t nccl_version, int32_t pid, int32_t launcher_rank, const char *env,
                        uint32_t env_len);
/* FP (req_id ignored) and STRICT: header only; append entries with ntx_fp_put. */
size_t ntx_enc_fp_head(uint8_t *out, size_t cap, uint32_t req_id, uint32_t n);
void ntx_fp_put(uint8_t *entries, uint32_t i, const struct ntx_fp *fp);
size_t ntx_enc_reply(uint8_t *out, size_t cap, uint32_t req_id, int32_t status, const char *text);
size_t ntx_enc_verdict(uint8_t *out, size_t cap, uint32_t kind, uint64_t comm_id, uint64_t seq,
                       int32_t peer, int64_t aux, const char *field, const char *text);
size_t ntx_enc_bye(uint8_t *out, size_t cap, uint32_t reason);
/* TIME (client_ns ignored, 8 bytes) and TIME_ECHO (16 bytes). */
size_t ntx_enc_time(uint8_t *out, size_t cap, uint8_t type, uint64_t stamp, uint64_t client_ns);
size_t ntx_enc_clock(uint8_t *out, size_t cap, int64_t offset_ns, uint64_t uncert_ns, uint32_t samples);
/* GONE: header only (n <= NTX_GONE_MAX); append pairs with ntx_gone_put. */
size_t ntx_enc_gone_head(uint8_t *out, size_t cap, int32_t pid, int32_t launcher_rank, uint32_t clean,
                         const char *host, uint32_t n);
void ntx_gone_put(uint8_t *pairs, uint32_t i, uint64_t comm_id, int32_t rank);
void ntx_gone_get(const uint8_t *pairs, uint32_t i, uint64_t *comm_id, int32_t *rank);

/* ------------------------------------------------- the status query (v5) --
 * A connection whose HELLO sets NTX_HELLO_QUERY is no rank: after WELCOME
 * it may send one QUERY, answered by JOB frames (part 0, 1, ... the last
 * with NTX_JOB_LAST), then it closes.  A JOB payload is a 16-byte head
 * (part u32, flags u32, n u32, reserved u32) and n entries, each a kind
 * u16, a body length u16 and the body (docs/wire-protocol.md, "Status
 * query"). */
#define NTX_QUERY_JOB 0u      /* QUERY.what: the whole job (the only one) */
#define NTX_JOB_HEAD 16u
#define NTX_JOB_LAST 1u       /* JOB flags: the last part */
#define NTX_JOB_TRUNCATED 2u  /* the view was cut at the reply bound (NTX_JOB_REPLY_MAX) */
#define NTX_JOB_BUSY 4u       /* refused by the rate limit: no view, one TEXT entry says so */
#define NTX_JOB_REPLY_MAX (512u * 1024u) /* bytes of all parts of one answer */
#define NTX_JOB_TEXT_MAX 1024u

enum ntx_job_kind {
  NTX_JE_PROC = 1,   /* a connection of the coordinator: a rank's process or a node aggregator */
  NTX_JE_COMM = 2,   /* a communicator */
  NTX_JE_MEMBER = 3, /* one rank of a communicator */
  NTX_JE_TEXT = 4,   /* a report (mismatch, straggler, ...) or the coordinator's verdict */
};
#define NTX_JE_PROC_LEN (16u + NTX_HOST)
#define NTX_JE_COMM_LEN 40u
#define NTX_JE_MEMBER_LEN (48u + NTX_HOST)
#define NTX_JE_TEXT_FIXED 24u

/* PROC and MEMBER states */
enum ntx_job_state { NTX_JS_NONE = 0, NTX_JS_CONNECTED = 1, NTX_JS_EXITED = 2, NTX_JS_LOST = 3 };
/* PROC flags */
#define NTX_JP_AGG 1u      /* a node aggregator (its ranks are the members naming its host) */
#define NTX_JP_STOPPED 2u  /* silent and stopped (SIGSTOP, a debugger): waited for, not lost */
/* COMM flags */
#define NTX_JC_MISMATCH 1u /* a collective or p2p mismatch was reported */
#define NTX_JC_INIT_WAIT 2u /* its init waited past init_wait for ranks (reported) */
#define NTX_JC_ENV_DONE 4u /* every rank registered once (the environment verdict is out) */
/* TEXT kinds: a verdict kind (enum ntx_verdict_kind), or this: */
#define NTX_JT_SUMMARY 0u  /* the coordinator's live verdict on the whole job, one line */

struct ntx_job_ent {
  uint16_t kind;
  union {
    struct { uint32_t client, state, flags; int32_t pid, lrank; char host[NTX_HOST]; } proc;
    struct { uint64_t comm_id, base, newest; int32_t nranks; uint32_t nreg, flags, judged; } comm;
    struct {
      uint64_t comm_id, last_seq;
      int32_t rank, pid, lrank;
      uint32_t state, stopped, late_med_us, late_last, late_n;
      char host[NTX_HOST];
    } member;
    struct { uint32_t vkind; int32_t peer; uint64_t comm_id, seq; uint32_t len; char text[NTX_JOB_TEXT_MAX + 1]; } text;
  } u;
};

size_t ntx_enc_query(uint8_t *out, size_t cap, uint32_t what);
/* JOB head; append entries with ntx_job_put after it. */
size_t ntx_enc_job_head(uint8_t *out, size_t cap, uint32_t part, uint32_t flags, uint32_t n);
/* One entry (text longer than NTX_JOB_TEXT_MAX is cut).
 * @return bytes written, 0 when cap is too small. */
size_t ntx_job_put(uint8_t *out, size_t cap, const struct ntx_job_ent *e);
/* The entry at *off of a decoded JOB (m.u.job.ents, m.u.job.len: the
 * decoder checked every entry).  @return 1 and *off moved on, 0 at the end. */
int ntx_job_next(const uint8_t *ents, uint32_t len, uint32_t *off, struct ntx_job_ent *e);
#endif
