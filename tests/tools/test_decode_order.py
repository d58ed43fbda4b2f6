#!/usr/bin/env python3
"""test_decode_order.py NCCLTRACE LIBNCCLTRACE EMU_LIBDIR -- `decode` lists
records oldest first by time, as it says, even where ring positions are not
in time order (each thread takes its positions in blocks: a second thread's
record sits after the first thread's later ones).  The run: the main thread
marks "first", a second thread marks "second", the main thread marks
"third", then a dump; the listing must show first, second, third.
Exit 0 pass, 1 fail, 77 skip.
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading

if len(sys.argv) == 5 and sys.argv[1] == "--child":
    lib = ctypes.CDLL(sys.argv[2])
    lib.nccltrace_mark.argtypes = [ctypes.c_char_p, ctypes.c_longlong]
    uid = ctypes.create_string_buffer(128)
    lib.ncclGetUniqueId(uid)  # the first NCCL call starts the recorder
    lib.nccltrace_mark(b"first", 1)
    t = threading.Thread(target=lambda: lib.nccltrace_mark(b"second", 2))
    t.start()
    t.join()
    lib.nccltrace_mark(b"third", 3)
    sys.exit(0 if lib.nccltrace_dump(b"order") == 0 else 1)

nt, lib, emu = sys.argv[1:4]
with tempfile.TemporaryDirectory() as d:
    env = dict(os.environ, LD_LIBRARY_PATH=emu, NCCLTRACE_DIR=d, NCCLTRACE_RING_DIR=os.path.join(d, "r"),
               NCCLTRACE_JOB="order")
    r = subprocess.run([sys.executable, __file__, "--child", lib, emu, "x"], env=env,
                       capture_output=True, text=True, timeout=60)
    dumps = sorted(f for f in os.listdir(d) if f.endswith("-user.zst"))
    if r.returncode != 0 or not dumps:
        print("FAIL: child:", r.returncode, r.stderr)
        sys.exit(1)
    out = subprocess.run([nt, "decode", os.path.join(d, dumps[0])], capture_output=True, text=True).stdout
    marks = [w for line in out.splitlines() for w in ("first", "second", "third") if "Mark(%s=" % w in line]
    if marks != ["first", "second", "third"]:
        print("FAIL: marks listed as", marks, "\n" + out)
        sys.exit(1)
    print("ok: records listed by time across threads")
