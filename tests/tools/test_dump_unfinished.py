#!/usr/bin/env python3
"""test_dump_unfinished.py NCCLTRACE LIBNCCLTRACE EMU_LIBDIR -- a dump that
was never finished is never reported as written, and collect salvages it.

A. The dump directory cannot be written (it is a regular file): the dump
   fails, and the ring (collected after the process is SIGKILLed) holds no
   Dump record -- "dump written" is recorded only after the rename.
B. A process dies while its dump is still a `.nccltrace-....zst.tmp` and
   leaves no ring: `collect` turns the temp file into a finished dump whose
   trigger reason starts "salvaged:", removes the temp file, and `analyze`
   says that it was salvaged.
Exit 0 pass, 1 fail.
"""
import ctypes
import os
import signal
import subprocess
import sys
import tempfile

if len(sys.argv) == 3 and sys.argv[1] == "--child":
    lib = ctypes.CDLL(sys.argv[2])
    lib.nccltrace_mark.argtypes = [ctypes.c_char_p, ctypes.c_longlong]
    lib.ncclGetUniqueId(ctypes.create_string_buffer(128))  # starts the recorder
    lib.nccltrace_mark(b"before", 1)
    lib.nccltrace_dump(b"user")
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)

nt, lib, emu = sys.argv[1:4]
fails = []


def child(dumps, rings):
    env = dict(os.environ, LD_LIBRARY_PATH=emu, NCCLTRACE_DIR=dumps, NCCLTRACE_RING_DIR=rings,
               NCCLTRACE_JOB="unfinished")
    subprocess.run([sys.executable, __file__, "--child", lib], env=env, capture_output=True, timeout=60)


def nccltrace(*args):
    return subprocess.run([nt] + list(args), capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as d:
    # A: the dump cannot be written
    notdir, rings, out = os.path.join(d, "notdir"), os.path.join(d, "ra"), os.path.join(d, "outa")
    open(notdir, "w").close()
    child(notdir, rings)
    nccltrace("collect", "--rings", rings, "--dir", out)
    got = [f for f in os.listdir(out) if f.endswith(".zst")] if os.path.isdir(out) else []
    if not got:
        fails.append("A: collect wrote no dump from the ring")
    else:
        text = nccltrace("decode", os.path.join(out, got[0])).stdout
        if "Mark(before=1)" not in text:
            fails.append("A: the collected ring lacks the mark:\n" + text)
        if "Dump(user)" in text:
            fails.append("A: the ring records a dump that was never written:\n" + text)
    # B: an unfinished dump and no ring
    dumps, rings = os.path.join(d, "db"), os.path.join(d, "rb")
    child(dumps, rings)
    user = [f for f in os.listdir(dumps) if f.endswith("-user.zst")]
    if len(user) != 1:
        fails.append("B: no user dump to make unfinished: %r" % os.listdir(dumps))
    else:
        tmp = os.path.join(dumps, "." + user[0] + ".tmp")
        os.rename(os.path.join(dumps, user[0]), tmp)
        for f in os.listdir(rings):
            os.unlink(os.path.join(rings, f))
        r = nccltrace("collect", "--rings", rings, "--dir", dumps)
        left = os.listdir(dumps)
        if os.path.exists(tmp):
            fails.append("B: collect left the temp file: " + r.stdout + r.stderr)
        # (collect also sweeps the tracer's fallback places, /tmp/nccltrace-<uid>:
        # only this job's dumps count)
        job = user[0].split("-")[1]
        fin = [f for f in left if f.endswith(".zst") and not f.startswith(".") and f.split("-")[1] == job]
        if len(fin) != 1:
            fails.append("B: collect made no finished dump: %r %s" % (left, r.stdout + r.stderr))
        else:
            js = nccltrace("decode", "--json", os.path.join(dumps, fin[0])).stdout
            if '"salvaged: ' not in js:
                fails.append("B: the finished dump's trigger does not say salvaged")
            an = nccltrace("analyze", dumps).stdout
            if "salvaged" not in an:
                fails.append("B: analyze does not say the dump was salvaged:\n" + an)
for f in fails:
    print("FAIL:", f)
if not fails:
    print("ok: failed dumps are not 'written'; an unfinished dump is salvaged and analyze says so")
sys.exit(1 if fails else 0)
