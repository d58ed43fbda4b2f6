#!/usr/bin/env python3
"""symbol_agreement.py -- nothing a program finds in the real NCCL and CUDA
runtime is missing from the emulator or from nccltrace's drop-in library.

  symbol_agreement.py REAL_LIBNCCL EMU_LIBNCCL LIBNCCLTRACE REAL_LIBCUDART EMU_LIBCUDART NEWEST_LIBNCCL

REAL_LIBNCCL is the toolkit's NCCL (2.28.9 here), NEWEST_LIBNCCL the newest
release (PyPI's nvidia-nccl-cu13 2.32.6, fetched by scripts/nccl-newest.sh).
For each of the two:
1. Every nccl*/pnccl* function the real libnccl.so.2 exports is exported by
   the emulator's libnccl.so.2 with the same binding (ncclX weak, pncclX
   global, as the real one), and by libnccltrace.so.
2. Drop-in mode: dlopen(libnccltrace.so) and dlsym every one of those names
   on that handle (what vLLM's VLLM_NCCL_SO_PATH does): none is NULL.
And the emulator exports no nccl*/pnccl* that neither real library has.
3. The CUDA runtime calls NCCL programs and test suites commonly use (the
   list below) are exported by the emulator's runtime, with the version
   node libcudart.so.13, and each exists in the real runtime.
Exit 0 pass, 1 fail (a missing NEWEST_LIBNCCL too: its fetch failed), 77 skip
(no toolkit library or no objdump here).
"""
import ctypes
import os
import shutil
import subprocess
import sys

# The runtime calls of NCCL programs, nccl-tests and frameworks' NCCL
# paths, and of programs built by `nvcc -cudart shared` (registration and
# launch): one name per entry.
COMMON_CUDART = """
cudaGetDeviceCount cudaSetDevice cudaGetDevice cudaGetDeviceProperties cudaDeviceGetAttribute
cudaDeviceGetPCIBusId cudaDeviceGetByPCIBusId cudaSetDeviceFlags cudaGetDeviceFlags cudaInitDevice
cudaDeviceReset cudaDeviceSynchronize cudaDeviceSetLimit cudaDeviceGetLimit cudaMemGetInfo
cudaDriverGetVersion cudaRuntimeGetVersion cudaGetLastError cudaPeekAtLastError cudaGetErrorString
cudaGetErrorName cudaDeviceCanAccessPeer cudaDeviceEnablePeerAccess cudaDeviceDisablePeerAccess
cudaDeviceGetP2PAttribute cudaMemcpyPeer cudaMemcpyPeerAsync
cudaMalloc cudaFree cudaMallocHost cudaHostAlloc cudaFreeHost cudaMallocManaged cudaMallocAsync
cudaFreeAsync cudaHostRegister cudaHostUnregister cudaHostGetDevicePointer cudaHostGetFlags
cudaPointerGetAttributes cudaMemcpy cudaMemcpyAsync cudaMemset cudaMemsetAsync
cudaStreamCreate cudaStreamCreateWithFlags cudaStreamCreateWithPriority cudaStreamDestroy
cudaStreamSynchronize cudaStreamQuery cudaStreamWaitEvent cudaStreamGetPriority cudaStreamGetFlags
cudaStreamGetDevice cudaDeviceGetStreamPriorityRange
cudaEventCreate cudaEventCreateWithFlags cudaEventRecord cudaEventRecordWithFlags cudaEventQuery
cudaEventSynchronize cudaEventElapsedTime cudaEventDestroy
cudaFuncGetAttributes cudaFuncSetAttribute cudaFuncSetCacheConfig cudaDeviceSetCacheConfig
cudaDeviceGetCacheConfig cudaLaunchKernel
__cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction
__cudaInitModule __cudaPushCallConfiguration __cudaPopCallConfiguration __cudaLaunchKernel
__cudaGetKernel
""".split()


def dynsyms(path):
    """{name: (binding 'w'|'g', version)} of the defined .text symbols."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        if ".text" not in line:
            continue
        f = line.split()
        if len(f) < 6:
            continue
        bind = "w" if line[17:19].strip() == "w" or line[18:19] == "w" else "g"
        syms[f[-1]] = (bind, f[-2])
    return syms


def main():
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    real, emu, trace, realrt, emurt, newest = sys.argv[1:]
    for p in sys.argv[1:6]:
        if not os.path.exists(p):
            print(f"SKIP: missing {p}")
            return 77
    if not os.path.exists(newest):
        print(f"FAIL: missing {newest}: scripts/nccl-newest.sh fetches it (run-tests.sh runs it)")
        return 1
    if not shutil.which("objdump"):
        print("SKIP: no objdump")
        return 77
    fail = []
    e, t = dynsyms(emu), dynsyms(trace)
    # drop-in: the names as a dlopen'ing framework looks them up
    h = ctypes.CDLL(trace, mode=os.RTLD_LOCAL | os.RTLD_NOW)
    dl = ctypes.CDLL(None)
    dl.dlsym.restype = ctypes.c_void_p
    dl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    every, counts = set(), []
    for lib in (real, newest):
        r = {n: v for n, v in dynsyms(lib).items() if n.startswith(("nccl", "pnccl"))}
        every |= set(r)
        nn = sum(n.startswith("nccl") for n in r)
        np_ = sum(n.startswith("pnccl") for n in r)
        counts.append(f"{nn} nccl* + {np_} pnccl* of {lib}")
        if nn < 50 or np_ < 50:
            fail.append(f"real {lib} exports only {nn} nccl* and {np_} pnccl*: not NCCL 2.28 or later?")
        for n in sorted(r):
            if n not in e:
                fail.append(f"emulator lacks {n} (of {lib})")
            elif e[n][0] != r[n][0]:
                fail.append(f"emulator {n} binding {e[n][0]}, real {r[n][0]} ({lib})")
            if n not in t:
                fail.append(f"libnccltrace.so lacks {n} (of {lib})")
        null = [n for n in sorted(r) if not dl.dlsym(h._handle, n.encode())]
        fail += [f"drop-in: dlsym(libnccltrace.so, {n}) is NULL (of {lib})" for n in null]
    for n in sorted(set(e) - every):
        if n.startswith(("nccl", "pnccl")):
            fail.append(f"emulator exports {n}, which no real NCCL does")
    rt, rrt = dynsyms(emurt), dynsyms(realrt)
    for n in COMMON_CUDART:
        if n not in rrt:
            fail.append(f"list names {n}, which the real runtime lacks")
        if n not in rt:
            fail.append(f"emulator runtime lacks {n}")
        elif rt[n][1] != "libcudart.so.13":
            fail.append(f"emulator runtime {n} has version '{rt[n][1]}', not libcudart.so.13")
    for f in fail:
        print("FAIL:", f)
    if not fail:
        print(f"ok: {'; '.join(counts)} in the emulator and drop-in (dlsym), "
              f"{len(COMMON_CUDART)} runtime calls in the emulator")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
