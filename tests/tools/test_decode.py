#!/usr/bin/env python3
"""test_decode.py NCCLTRACE MKFIX -- decode of synthetic rings and dumps.

Proves: `decode --json` follows docs/decode-json.md key for key on a ring
file and a dump (header, env, trigger, backtrace, comms, records with the
fixture's exact values), each with "schema": 1; several files print
{"schema": 1, "files": [...]}; the text form
shows the header block, backtrace, communicator table and one line per record
with the documented op syntax; an overflowed ring reports lost records and
still returns every record its communicator's recent[] kept.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toolcheck import check, failures, finish, run  # noqa: E402,F401

NT, MKFIX = sys.argv[1], sys.argv[2]
TOP = ["schema", "file", "format", "version", "header", "env", "trigger", "backtrace", "comms", "records", "stacks",
       "python", "python_threads"]
HEADER = ["host", "pid", "ppid", "exe", "rank", "local_rank", "world_size", "local_world_size", "job",
          "nccl_version", "tracer_version", "proc_state", "exit_code", "signo", "lost", "torn", "dropped",
          "slot_count", "real_base_ns", "tsc_hz", "clock_offset_ns", "clock_uncertainty_ns"]
COMM = ["id", "parent", "rank", "nranks", "lifecycle", "async_error", "coll_seq", "last_enqueued",
        "last_completed", "blocked_kind", "blocked_for_ns", "nonblocking", "lateness_median_ms", "lateness_last",
        "lateness_window"]
RECORD = ["pos", "t_ns", "t_done_ns", "comm", "rank", "nranks", "kind", "phase", "seq", "count", "dtype",
          "redop", "root", "peer", "result", "completed", "flags", "group_depth", "group_id", "tid", "fp",
          "stack_id", "pystack_id", "site", "text", "aux"]
BASE = 1700000000000000000


M64 = (1 << 64) - 1


def fp_mix(h, v):
    # recorder/format.h: ntr_fp_mix
    h ^= (v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)) & M64
    h = (h * 0xff51afd7ed558ccd) & M64
    return (h ^ (h >> 32)) & 0xffffffff


def fp_coll(op, count, dtype, redop, root):
    # recorder/format.h: ntr_fp_coll -- what readers derive from a record
    packed = (op & 0xff) | (dtype & 0xff) << 8 | (redop & 0xffff) << 16 | (root & 0xffffffff) << 32
    return "%08x" % fp_mix(fp_mix(0x6e63636c, packed), count)


def check_keys(obj, keys, where):
    missing = [k for k in keys if k not in obj]
    check(not missing, "%s lacks keys %s" % (where, missing))


def check_canonical(doc, fmt, path):
    check_keys(doc, TOP, fmt)
    check(doc["file"] == path and doc["format"] == fmt and doc["version"] == 2, fmt + " file/format/version")
    check(list(doc)[0] == "schema" and doc["schema"] == 1, fmt + ": \"schema\": 1 first (the JSON form's version)")
    h = doc["header"]
    check_keys(h, HEADER, fmt + " header")
    check(h["job"] == "job-test" and h["exe"] == "fixture" and h["world_size"] == 2 and h["nccl_version"] == 22809,
          fmt + " header identity: %r" % h)
    check(h["proc_state"] == "running" and h["slot_count"] == 64 and h["real_base_ns"] == BASE
          and h["tsc_hz"] == 1000000000, fmt + " header state/clock")
    check(doc["env"] == {"NCCL_PROTO": "Simple", "NCCL_DEBUG": "WARN"}, fmt + " env: %r" % doc["env"])
    check(len(doc["comms"]) == 1, fmt + " one comm")
    c = doc["comms"][0]
    check_keys(c, COMM, fmt + " comm")
    check(c["id"] == "9f2c0123456789ab" and c["rank"] == 0 and c["nranks"] == 2 and c["lifecycle"] == "ready"
          and c["async_error"] == "ncclSuccess" and c["last_enqueued"] == 3 and c["last_completed"] == 2
          and c["blocked_kind"] is None and c["nonblocking"] is False, fmt + " comm values: %r" % c)
    recs = doc["records"]
    check(len(recs) == 7, fmt + " 7 records, got %d" % len(recs))
    if len(recs) != 7:
        return
    for r in recs:
        check_keys(r, RECORD, fmt + " record")
    check([r["pos"] for r in recs] == list(range(7)), fmt + " positions oldest first")
    check([r["kind"] for r in recs] == ["CommInitRank", "CommInitRank", "AllReduce", "Broadcast", "Send", "Mark",
                                        "AllReduce"], fmt + " kinds")
    check(recs[0]["phase"] == "enter" and recs[1]["phase"] == "exit" and recs[1]["result"] == "ncclSuccess"
          and recs[0]["result"] is None, fmt + " lifecycle phases")
    ar = recs[2]
    check(ar["t_ns"] == BASE + 3000000 and ar["t_done_ns"] == BASE + 3250000 and ar["seq"] == 1
          and ar["count"] == 64 and ar["dtype"] == "float32" and ar["redop"] == "sum" and ar["root"] is None
          and ar["peer"] is None and ar["completed"] is True and "completed" in ar["flags"]
          and ar["comm"] == "9f2c0123456789ab" and ar["fp"] == fp_coll(1, 64, 7, 0, -1) and ar["tid"] == 777, fmt + " AllReduce %r" % ar)
    bc = recs[3]
    check(bc["root"] == 0 and bc["peer"] is None and bc["redop"] is None and bc["seq"] == 2, fmt + " Broadcast %r" % bc)
    sd = recs[4]
    check(sd["peer"] == 1 and sd["root"] is None and sd["completed"] is False and sd["t_done_ns"] is None,
          fmt + " Send %r" % sd)
    mk = recs[5]
    check(mk["text"] == "step" and mk["count"] == 1234 and mk["comm"] is None and mk["dtype"] is None
          and mk["phase"] == "event", fmt + " Mark %r" % mk)
    check(recs[6]["seq"] == 3 and recs[6]["completed"] is False, fmt + " pending AllReduce")


def check_text(out, what):
    for needle in ["host:", "job:      job-test", "versions: nccltrace 0.1.0  NCCL 2.28.9", "communicators:",
                   "9f2c0123456789ab", "AllReduce(count=64, float32, sum)", "Broadcast(count=1, float32, root=0)",
                   "Send(count=8, float32, peer=1)", "Mark(step=1234)", "2023-11-14T22:13:20.002000Z",
                   "NCCL_PROTO=Simple", "completed", "pending", "ncclSuccess"]:
        check(needle in out, "%s text lacks %r" % (what, needle))


def main():
    with tempfile.TemporaryDirectory() as d:
        ring, dump = os.path.join(d, "r.ring"), os.path.join(d, "d.zst")
        check(run(MKFIX, "ring", ring, "--host", "fixture-host").returncode == 0, "mkfix ring")
        check(run(MKFIX, "dump", dump, "--host", "fixture-host", "--bt").returncode == 0, "mkfix dump")

        p = run(NT, "decode", "--json", ring)
        check(p.returncode == 0, "decode ring exit %d: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout)
        check_canonical(doc, "ring", ring)
        check(doc["trigger"] is None and doc["backtrace"] is None, "ring: no trigger, no backtrace")
        check(doc["header"]["host"] == "fixture-host" and doc["header"]["lost"] == 0 and doc["header"]["torn"] == 0,
              "ring header host/lost/torn")

        p = run(NT, "decode", "--json", dump)
        check(p.returncode == 0, "decode dump exit %d: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout)
        check_canonical(doc, "dump", dump)
        t = doc["trigger"]
        check(t is not None and t["kind"] == "exit" and t["reason"] == "process exit", "dump trigger %r" % t)
        bt = doc["backtrace"]
        check(bt is not None and bt["signo"] == 11 and bt["tid"] == 4242 and
              bt["frames"] == [{"ip": "0x401000", "sym": "crash_here+0x12"}, {"ip": "0x402000", "sym": "main+0x40"}],
              "dump backtrace %r" % bt)

        p = run(NT, "decode", "--json", ring, dump)
        check(p.returncode == 0, "decode two files")
        both = json.loads(p.stdout)
        check(list(both.keys()) == ["schema", "files"] and both["schema"] == 1 and
              [f["format"] for f in both["files"]] == ["ring", "dump"], "several files -> {schema: 1, files: [...]}")

        p = run(NT, "decode", ring)
        check(p.returncode == 0, "decode text ring")
        check_text(p.stdout, "ring")
        p = run(NT, "decode", dump)
        check_text(p.stdout, "dump")
        check("backtrace (SIGSEGV, thread 4242)" in p.stdout and "crash_here+0x12" in p.stdout, "text backtrace")
        check("trigger:  exit" in p.stdout, "text trigger")
        lines = [l for l in p.stdout.splitlines() if l.startswith("  2023-11-14T22:13:20.0")]
        check(len(lines) == 7, "text: one line per record, got %d" % len(lines))

        # Overflow: 100 records in 64 slots; the comm's recent[] (64) keeps
        # the same window, so 36 are lost and 64 remain, oldest first.
        big = os.path.join(d, "big.ring")
        check(run(MKFIX, "ring", big, "--extra", "93").returncode == 0, "mkfix overflow ring")
        p = run(NT, "decode", "--json", big)
        doc = json.loads(p.stdout)
        pos = [r["pos"] for r in doc["records"]]
        check(doc["header"]["lost"] == 36, "lost = head - slots = 36, got %r" % doc["header"]["lost"])
        check(pos == list(range(36, 100)), "overflowed ring keeps positions 36..99 in order")

        # With 128 slots nothing is lost; the comm's recent[] overlaps the
        # main ring and must be deduplicated.
        p = run(MKFIX, "ring", big, "--extra", "93", "--slots", "128")
        doc = json.loads(run(NT, "decode", "--json", big).stdout)
        pos = [r["pos"] for r in doc["records"]]
        check(pos == list(range(100)) and doc["header"]["lost"] == 0, "dedup main ring + recent[]")

        # Trigger naming: SIGTERM dumps are "sigterm".
        sig = os.path.join(d, "sig.zst")
        run(MKFIX, "dump", sig, "--trigger", "2")
        doc = json.loads(run(NT, "decode", "--json", sig).stdout)
        check(doc["trigger"]["kind"] == "sigterm" and doc["trigger"]["signo"] == 15, "sigterm trigger %r" % doc["trigger"])

    return finish()


if __name__ == "__main__":
    sys.exit(main())
