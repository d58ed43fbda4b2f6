#!/usr/bin/env python3
"""check_exports.py -- the emulator exports every function of the real CUDA
runtime and driver, from the one table of each (cudart_exports.def,
cuda_exports.def), and what it does not model answers "not supported" and
says so once.

  check_exports.py REAL_LIBCUDART STUB_LIBCUDA CUDA_INCLUDE EMU_LIBCUDART EMU_LIBCUDA

1. Each table agrees with the real library it was made from (gen_exports.py --check).
2. The emulator's libcudart.so.13 exports every row with the version node
   libcudart.so.13; its libcuda.so.1 exports every driver row.
3. cudaCreateChannelDesc (returned by value, so it cannot be a stub) is modelled.
4. Called through ctypes: an unmodelled runtime function answers
   cudaErrorNotSupported (801), which becomes the last error, and its name
   is logged once for two calls; cudaGetDriverEntryPointByVersion hands out
   a driver stub for cuMemCreate (PyTorch asserts it exists) and the
   modelled cuDevicePrimaryCtxGetState, which reports a set device's
   primary context active.
Exit 0 pass, 1 fail, 77 skip (no real library or objdump here).
"""
import ctypes
import os
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import gen_exports  # noqa: E402

FAILS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)


def rows(table):
    out = []
    for line in open(os.path.join(here, table)):
        if line.startswith("EMU_"):
            name, kind = line[line.index("(") + 1:line.index(")")].split(", ")
            out.append((name, kind))
    return out


def dynsyms(lib):
    out = subprocess.run(["objdump", "-T", lib], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and "*UND*" not in line and (".text" in line or "emu_stubs" in line):
            syms[f[-1]] = (f[-2], line[17] if len(line) > 17 else "?")
    return syms


def main(argv):
    real_rt, stub_cu, inc, emu_rt, emu_cu = argv
    for f in (real_rt, stub_cu, emu_rt, emu_cu):
        if not os.path.exists(f):
            print("SKIP: missing " + f)
            return 77
    if not shutil.which("objdump"):
        print("SKIP: no objdump")
        return 77
    for which, lib, table in (("cudart", real_rt, "cudart_exports.def"), ("cuda", stub_cu, "cuda_exports.def")):
        want = gen_exports.table(which, lib, inc)
        check(want == open(os.path.join(here, table)).read(), "%s agrees with %s" % (table, lib))
    rt, cu = dynsyms(emu_rt), dynsyms(emu_cu)
    miss = [n for n, _ in rows("cudart_exports.def") if rt.get(n, ("",))[0] != "libcudart.so.13"]
    check(not miss, "the emulator's runtime exports all %d rows as name@libcudart.so.13 (missing: %s)"
          % (len(rows("cudart_exports.def")), " ".join(miss[:10])))
    miss = [n for n, _ in rows("cuda_exports.def") if n not in cu]
    check(not miss, "the emulator's driver exports all %d rows (missing: %s)" % (len(rows("cuda_exports.def")), " ".join(miss[:10])))
    check(rt.get("cudaCreateChannelDesc", ("", "?"))[1] == "g", "cudaCreateChannelDesc is modelled (a global, not a weak stub)")
    modelled = sum(1 for n, _ in rows("cudart_exports.def") if rt.get(n, ("", "?"))[1] == "g")
    print("     runtime: %d of %d functions modelled, the rest answer cudaErrorNotSupported" % (modelled, len(rt)))

    # 4: in a child, so the log lines on fd 2 can be counted
    code = r'''
import ctypes, sys
rt = ctypes.CDLL(sys.argv[1])
r1 = rt.cudaGraphicsMapResources(0, None, None)
r2 = rt.cudaGraphicsMapResources(0, None, None)
last = rt.cudaGetLastError()
fn = ctypes.c_void_p(); st = ctypes.c_int(-1)
g = rt.cudaGetDriverEntryPointByVersion(b"cuMemCreate", ctypes.byref(fn), 13000, ctypes.c_ulonglong(0), ctypes.byref(st))
cu = ctypes.CDLL(sys.argv[2])
stub = cu.emu_is_stub(fn)
fn2 = ctypes.c_void_p()
rt.cudaGetDriverEntryPointByVersion(b"cuDevicePrimaryCtxGetState", ctypes.byref(fn2), 13000, ctypes.c_ulonglong(0), None)
rt.cudaSetDevice(1)
get_state = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_int))(fn2.value)
flags = ctypes.c_uint(); active = ctypes.c_int(-1)
r3 = get_state(1, ctypes.byref(flags), ctypes.byref(active))
print(r1, r2, last, g, st.value, bool(fn.value), stub, bool(fn2.value), cu.emu_is_stub(fn2), r3, active.value)
'''
    p = subprocess.run([sys.executable, "-c", code, emu_rt, emu_cu], capture_output=True, text=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(emu_cu)))
    got = p.stdout.split()
    check(got[:3] == ["801", "801", "801"], "an unmodelled runtime call answers 801, also as the last error: %s %s" % (got[:3], p.stderr[-200:]))
    check(p.stderr.count("cudaGraphicsMapResources is not modelled") == 1, "its name logged once for two calls: %r" % p.stderr)
    check(got[3:7] == ["0", "0", "True", "1"], "cudaGetDriverEntryPointByVersion(cuMemCreate): found, a stub: %s" % got[3:7])
    check(got[7:] == ["True", "0", "0", "1"], "cuDevicePrimaryCtxGetState: modelled, device 1 active after cudaSetDevice: %s" % got[7:])
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
