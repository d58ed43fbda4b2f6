#!/usr/bin/env python3
"""ctypes_nccl.py -- an NCCL client the way vLLM's pynccl and custom ctypes
clients are written: libnccl is loaded with ctypes.CDLL (dlopen, past the
preload) and every call goes through the handle's symbols.  Ranks as
torchrun gives them (RANK, WORLD_SIZE), the unique id through UNIQUE_ID_FILE
as examples/common.h does.

  ctypes_nccl.py [--lib NAME_OR_PATH] [--second] [--steps N]
                 [--fault shape|exit3 --step K --rank R]

--lib: what is passed to ctypes.CDLL (default libnccl.so.2, found on
LD_LIBRARY_PATH; a full path as vLLM's VLLM_NCCL_SO_PATH gives).  With
--fault shape, rank R's AllReduce at step K has twice the count; with
--fault exit3, rank R exits 3 before it.  --second: --lib is loaded first,
then a copy of it at another path (a second NCCL, as a process with two
frameworks bundling their own ends up with), and every call goes to the
copy.
Exit 0 when every call succeeded.
"""
import argparse
import ctypes
import os
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", default="libnccl.so.2")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--fault", choices=["none", "shape", "exit3"], default="none")
    p.add_argument("--second", action="store_true")
    p.add_argument("--step", type=int, default=2)
    p.add_argument("--rank", type=int, default=1)
    a = p.parse_args()
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    nccl = ctypes.CDLL(a.lib)
    if a.second:
        import shutil
        import tempfile
        src = nccl._name if "/" in nccl._name else next(
            os.path.join(d, a.lib) for d in os.environ.get("LD_LIBRARY_PATH", "").split(":")
            if os.path.exists(os.path.join(d, a.lib)))
        d = tempfile.mkdtemp(prefix="second-nccl-")
        shutil.copy(src, os.path.join(d, "libnccl.so.2"))
        nccl = ctypes.CDLL(os.path.join(d, "libnccl.so.2"))
    cudart = ctypes.CDLL("libcudart.so.13")

    def ok(r, what):
        if r != 0:
            sys.exit("rank %d: %s: error %d" % (rank, what, r))

    uid = ctypes.create_string_buffer(128)  # ncclUniqueId: 128 bytes
    path = os.environ["UNIQUE_ID_FILE"]
    if rank == 0:
        ok(nccl.ncclGetUniqueId(uid), "ncclGetUniqueId")
        with open(path + ".tmp", "wb") as f:
            f.write(uid.raw)
        os.rename(path + ".tmp", path)
    else:
        for _ in range(12000):
            try:
                with open(path, "rb") as f:
                    b = f.read()
                if len(b) == 128:
                    uid = ctypes.create_string_buffer(b, 128)
                    break
            except OSError:
                pass
            time.sleep(0.01)
    ok(cudart.cudaSetDevice(int(os.environ.get("LOCAL_RANK", rank))), "cudaSetDevice")
    comm = ctypes.c_void_p()

    class UniqueId(ctypes.Structure):
        _fields_ = [("internal", ctypes.c_char * 128)]

    u = UniqueId()
    ctypes.memmove(ctypes.byref(u), uid, 128)
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    ok(nccl.ncclCommInitRank(ctypes.byref(comm), size, u, rank), "ncclCommInitRank")
    n = 256
    buf, out, stream = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    ok(cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(8 * n)), "cudaMalloc")
    ok(cudart.cudaMalloc(ctypes.byref(out), ctypes.c_size_t(8 * n)), "cudaMalloc")
    ok(cudart.cudaStreamCreate(ctypes.byref(stream)), "cudaStreamCreate")
    nccl.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                   ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    for step in range(1, a.steps + 1):
        if a.fault == "exit3" and step == a.step and rank == a.rank:
            sys.stdout.flush()
            sys.exit(3)
        count = 2 * n if (a.fault == "shape" and step == a.step and rank == a.rank) else n
        ok(nccl.ncclAllReduce(buf, out, count, 7, 0, comm, stream), "ncclAllReduce")  # float32, sum
        ok(cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
    nccl.ncclCommDestroy(comm)
    print("rank %d: %d AllReduce through ctypes" % (rank, a.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
