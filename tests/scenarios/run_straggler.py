#!/usr/bin/env python3
"""run_straggler.py -- the straggler acceptance scenarios: N ranks of
examples/straggler.c or perf_shape.c on the CPU emulator with
libnccltrace.so preloaded and the async check on (the coordinator embedded
in rank 0), then `nccltrace analyze --json` on what they left.  Checks the
JSON against docs/analyze.schema.json, the verdict class, its ranks, its
seq, the lateness range, a stall's seq, the arrival kind, and that a live
`nccltrace: straggler ...` line naming the rank appeared (or none).

Exit: 0 pass, 1 fail, 77 skip (a build product is missing).
  run_straggler.py --launch L --nccltrace EXE --lib SO --emu-libdir DIR --port P
      --expect-class C [--expect-ranks 2] [--lateness-ms LO:HI] [--expect-stall-seq N]
      [--expect-seq N] [--expect-arrival host|device] [--expect-live RANK | --expect-no-live]
      [--rank-env R:K=V]... [--repeat N --min-pass K] -- PROG ARGS...
With --repeat the job runs N times (ports P..P+N-1) and passes when K or more
runs meet every expectation: detection rates, not one lucky run.
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_scenario import run, SCHEMA  # noqa: E402
import schema_lite  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    for k in ("--launch", "--nccltrace", "--lib", "--emu-libdir", "--expect-class"):
        p.add_argument(k, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--expect-ranks")
    p.add_argument("--lateness-ms")
    p.add_argument("--expect-stall-seq", type=int)
    p.add_argument("--expect-seq", type=int)
    p.add_argument("--expect-arrival")
    p.add_argument("--expect-live", type=int)
    p.add_argument("--expect-no-live", action="store_true")
    p.add_argument("--rank-env", action="append", default=[])
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--min-pass", type=int)
    p.add_argument("prog", nargs=argparse.REMAINDER)
    a = p.parse_args()
    prog = a.prog[1:] if a.prog and a.prog[0] == "--" else a.prog
    for path in (a.launch, a.nccltrace, a.lib, prog[0]):
        if not os.path.exists(path):
            print("SKIP: %s not built" % path)
            return 77
    need = a.repeat if a.min_pass is None else a.min_pass
    passed = 0
    for i in range(a.repeat):
        bad = once(a, prog, a.port + i)
        for b in bad:
            print("FAIL%s: %s" % (" (run %d)" % (i + 1) if a.repeat > 1 else "", b))
        passed += not bad
    if a.repeat > 1:
        print("%d of %d runs passed, %d needed" % (passed, a.repeat, need))
    return 0 if passed >= need else 1


def once(a, prog, port):
    tmp = tempfile.mkdtemp(prefix="nccltrace-strag-")
    env = dict(os.environ)
    for k in ("NCCLEMU_FAULT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCLTRACE_COORD", "NCCLTRACE_SECRET"):
        env.pop(k, None)
    env.update({
        "LD_LIBRARY_PATH": a.emu_libdir, "LD_PRELOAD": os.path.abspath(a.lib),
        "NCCLTRACE_DIR": os.path.join(tmp, "dumps"), "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
        "NCCLTRACE_CHECK": "async", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "NCCLEMU_DEVICES": "8", "UNIQUE_ID_FILE": os.path.join(tmp, "unique-id"),
        "LAUNCH_TIMEOUT": "50", "LAUNCH_GRACE": "2",
        "NCCLTRACE_JOB": "straggler-%d-%d" % (port, os.getpid()),
    })
    for rkv in a.rank_env:
        r, kv = rkv.split(":", 1)
        env["RANKENV_" + r] = (env.get("RANKENV_" + r, "") + " " + kv).strip()
    bad = []
    try:
        rc, out, err = run([a.launch, str(a.ranks)] + prog, env, 90)
        if rc != 0:
            bad.append("launcher rc=%s" % rc)
        live = [ln for ln in err.splitlines() if ln.startswith("nccltrace: straggler")]
        tenv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        rc2, aout, aerr = run([a.nccltrace, "analyze", "--json", tmp], tenv, 60)
        try:
            doc = json.loads(aout)
            v = doc["verdict"]
            bad += ["MISMATCH docs/analyze.schema.json: " + e for e in schema_lite.errors(doc, SCHEMA)]
        except (ValueError, KeyError):
            v = {}
            bad.append("analyze output is not JSON: %s" % aerr[-500:])
        print("verdict:", json.dumps(v))
        print("live lines:", len(live), live[:1])
        if v.get("class") != a.expect_class:
            bad.append("class %s, want %s" % (v.get("class"), a.expect_class))
        if a.expect_ranks is not None and v.get("ranks") != [int(x) for x in a.expect_ranks.split(",")]:
            bad.append("ranks %s, want [%s]" % (v.get("ranks"), a.expect_ranks))
        if a.lateness_ms:
            lo, hi = (float(x) for x in a.lateness_ms.split(":"))
            lat = v.get("lateness_ms") or 0
            if not lo <= lat <= hi:
                bad.append("lateness_ms %s outside %s..%s" % (lat, lo, hi))
        if a.expect_stall_seq is not None:
            seqs = [s["seq"] for s in v.get("stalls", [])]
            if a.expect_stall_seq not in seqs or v.get("seq") != a.expect_stall_seq:
                bad.append("stall seqs %s / seq %s, want %d" % (seqs, v.get("seq"), a.expect_stall_seq))
        if a.expect_seq is not None and v.get("seq") != a.expect_seq:
            bad.append("seq %s, want %d" % (v.get("seq"), a.expect_seq))
        if a.expect_arrival and v.get("arrival") != a.expect_arrival:
            bad.append("arrival %s, want %s" % (v.get("arrival"), a.expect_arrival))
        if a.expect_live is not None:
            want = re.compile(r"^nccltrace: straggler on comm [0-9a-f]{8}: rank %d \(" % a.expect_live)
            if not any(want.match(ln) for ln in live):
                bad.append("no live straggler line naming rank %d" % a.expect_live)
        if a.expect_no_live and live:
            bad.append("live straggler lines on a healthy job: %s" % live[:2])
        if bad:
            print("--- stderr of the job (tail)\n" + err[-3000:])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return bad


if __name__ == "__main__":
    sys.exit(main())
