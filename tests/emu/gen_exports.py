#!/usr/bin/env python3
"""gen_exports.py -- write the one table of every function a real CUDA
library exports, from its dynamic symbol table (objdump -T) and the return
type each has in the real headers:

  gen_exports.py cudart REAL_LIBCUDART CUDA_INCLUDE_DIR > tests/emu/cudart_exports.def
  gen_exports.py cuda   STUB_LIBCUDA   CUDA_INCLUDE_DIR > tests/emu/cuda_exports.def
  gen_exports.py --check cudart|cuda LIB CUDA_INCLUDE_DIR TABLE

The driver's list comes from the toolkit's link stub (lib64/stubs/libcuda.so),
which exports every driver function of that CUDA version; this machine has
no driver.  Each row is EMU_CUDART(name, kind) or EMU_CU(name, kind): kind
ERR returns cudaError_t or CUresult, PTR a pointer, VOID nothing, OTHER a
scalar that is not an error code.  The emulator's stub files
(emu_cudart_stubs.c, emu_cuda_stubs.c) turn every row it does not model
into a weak function that answers "not supported" (or NULL/0) and logs its
name once.  --check exits 1 when a table and its library differ (test
emu_export_tables).
"""
import glob
import re
import subprocess
import sys


def exports(lib):
    out = subprocess.run(["objdump", "-T", lib], capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 6 and ".text" in line and "DF" in line:
            names[f[-1]] = f[-2]
    return names


def return_kinds(incdir):
    kinds = {}
    text = ""
    for h in ["cuda_runtime_api.h", "crt/host_runtime.h", "cuda_runtime.h"]:
        for p in glob.glob(incdir + "/" + h):
            text += open(p, errors="replace").read()
    # "extern __host__ __cudart_builtin__ cudaError_t CUDARTAPI cudaFoo(" and friends
    for m in re.finditer(r"([A-Za-z_][A-Za-z0-9_ \*]*?)\s+CUDARTAPI\s+(\w+)\s*\(", text):
        ret, name = m.group(1), m.group(2)
        if "*" in ret:
            kinds[name] = "PTR"
        elif re.search(r"\bcudaError_t\b", ret):
            kinds[name] = "ERR"
        elif re.search(r"\bvoid\b", ret):
            kinds[name] = "VOID"
        else:
            kinds[name] = "OTHER"
    return kinds


# The registration entry points nvcc's host stubs call are declared only in
# crt/host_runtime.h with a layout the regex above does not follow.
KNOWN = {
    "__cudaRegisterFatBinary": "PTR", "__cudaRegisterFatBinaryEnd": "VOID",
    "__cudaUnregisterFatBinary": "VOID", "__cudaRegisterFunction": "VOID",
    "__cudaRegisterVar": "VOID", "__cudaRegisterManagedVar": "VOID",
    "__cudaRegisterHostVar": "VOID", "__cudaInitModule": "OTHER",
    "__cudaPushCallConfiguration": "OTHER", "__cudaPopCallConfiguration": "ERR",
    "__cudaRegisterUnifiedTable": "ERR", "__cudaGetKernel": "ERR",
    "__cudaLaunchKernel": "ERR", "__cudaLaunchKernel_ptsz": "ERR",
    "__cudaGetProcAddress": "PTR",
}


def table(which, lib, incdir):
    names = exports(lib)
    if which == "cuda":
        return driver_table(names, lib)
    kinds = return_kinds(incdir)
    rows = []
    for n in sorted(names):
        k = KNOWN.get(n) or kinds.get(n) or kinds.get(re.sub(r"_(v\d+|ptsz|ptds)+$", "", n))
        if k is None:
            k = "ERR"  # every runtime function not otherwise declared returns cudaError_t
        rows.append("EMU_CUDART(%s, %s)" % (n, k))
    version = sorted(set(names.values()))
    head = ["/* cudart_exports.def -- every function the real libcudart.so.13 exports",
            " * (%d, version node %s), with the kind of value it returns." % (len(rows), ",".join(version)),
            " * Made by tests/emu/gen_exports.py from objdump -T of the real",
            " * library and its headers; test emu_export_tables checks it still agrees. */"]
    return "\n".join(head + rows) + "\n"


def driver_table(names, lib):
    # Every driver function returns CUresult (cuda.h: "CUresult CUDAAPI").
    rows = ["EMU_CU(%s, ERR)" % n for n in sorted(names) if n.startswith("cu")]
    head = ["/* cuda_exports.def -- every function the CUDA driver of this toolkit",
            " * exports (%d, read off %s), each returning CUresult." % (len(rows), lib.split("/cuda", 1)[-1]),
            " * Made by tests/emu/gen_exports.py; test emu_export_tables checks it still agrees. */"]
    return "\n".join(head + rows) + "\n"


def main(argv):
    if argv[:1] == ["--check"]:
        want = table(argv[1], argv[2], argv[3])
        have = open(argv[4]).read()
        if want != have:
            w, h = set(want.splitlines()), set(have.splitlines())
            for r in sorted(w - h): print("missing from the table: " + r)
            for r in sorted(h - w): print("not in the real library: " + r)
            return 1
        print("%s agrees with %s" % (argv[4], argv[2]))
        return 0
    sys.stdout.write(table(argv[0], argv[1], argv[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
