#!/usr/bin/env python3
"""test_texts.py NCCLTRACE LIBNCCLTRACE EMU_LIBDIR -- three texts of the tools, checked exactly.

1. A trigger reason longer than the dump's field is cut with "..." and
   every parenthesis it opened closed (a lost-peer reason is that long).
2. `nccltrace run --dir REL` prints absolute dump paths.
3. `nccltrace export` of one process says "1 process", not "1 processes".
Exit 0 pass, 1 fail.
"""
import ctypes
import os
import subprocess
import sys
import tempfile

LONG = (b"lost rank 3 (host a-rather-long-hostname-of-a-cluster, pid 123456): its connection closed "
        b"without goodbye (killed, crashed or hung)")

if len(sys.argv) == 2 and sys.argv[1] == "--child":
    lib = ctypes.CDLL(None)  # libnccltrace.so is preloaded by `nccltrace run`
    lib.ncclGetUniqueId(ctypes.create_string_buffer(128))
    sys.exit(0 if lib.nccltrace_dump(LONG) == 0 else 1)

nt, lib, emu = (os.path.abspath(p) for p in sys.argv[1:4])
fails = []
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, LD_LIBRARY_PATH=emu, NCCLTRACE_LIB=lib, NCCLTRACE_RING_DIR=os.path.join(d, "r"),
               NCCLTRACE_JOB="texts")
    r = subprocess.run([nt, "run", "--dir", "rel", "--", sys.executable, os.path.abspath(__file__), "--child"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=60)
    written = [l.split("dump written: ", 1)[1].split(" (")[0] for l in r.stderr.splitlines() if "dump written: " in l]
    if r.returncode != 0 or not written:
        fails.append("run: rc %d, stderr:\n%s" % (r.returncode, r.stderr))
    for p in written:
        if not p.startswith("/"):
            fails.append("relative dump path printed: " + p)
    user = [p if p.startswith("/") else os.path.join(d, p) for p in written if p.endswith("-user.zst")]
    if user:
        out = subprocess.run([nt, "decode", "--json", user[0]], capture_output=True, text=True).stdout
        import json
        reason = json.loads(out)["trigger"]["reason"]
        if reason.count("(") != reason.count(")") or "..." not in reason:
            fails.append("cut reason is not balanced: %r" % reason)
        e = subprocess.run([nt, "export", "--chrome", user[0], "-o", os.path.join(d, "t.json")],
                           capture_output=True, text=True)
        if "(1 process," not in e.stderr:
            fails.append("export says: " + e.stderr.strip())
for f in fails:
    print("FAIL:", f)
if not fails:
    print("ok: cut reasons balanced, absolute dump paths, '1 process'")
sys.exit(1 if fails else 0)
