#!/usr/bin/env python3
"""pynccl_client.py -- a pynccl-style NCCL client: Python and ctypes only,
over the NCCL and CUDA runtime C APIs, as vLLM's pynccl drives NCCL.

  pynccl_client.py MODE RANK NRANKS IDDIR

How NCCL is found (PYNCCL_LOAD):
  dropin   ctypes.CDLL($PYNCCL_LIB), the tracer itself, which forwards to
           NCCLTRACE_REAL_NCCL (vLLM's VLLM_NCCL_SO_PATH pattern)
  global   libnccl.so.2 loaded RTLD_GLOBAL, then every symbol through
           ctypes.CDLL(None): the global scope (LD_PRELOAD puts the tracer
           first in it)
MODE:
  healthy   8 AllReduces and a Broadcast from train_step, checked values;
            prints "sum <value>" per step (same output traced or not)
  mismatch  rank 1 calls Broadcast from bad_branch where the others call
            AllReduce from train_step; ranks 0 and 2 block in it (their
            AllReduce never completes: the watchdog times it out)
  threads   two Python threads, each with its own communicator, issue
            AllReduces from their own functions
  missing   rank 1 issues AllReduce #2 from lopsided and skips #3, which
            ranks 0 and 2 issue from train_step and block in
  stall     every rank issues AllReduce #2 from stuck_step; the emulator
            (NCCLEMU_FAULT=stall:2) never completes it
  exit      rank 1 leaves from give_up (os._exit(3)) while ranks 0 and 2
            block in AllReduce #2
  stale     6 AllReduces, the i-th from f in generated code "gen_i.py"
            (f at line i+1), each code object freed before the next: CPython
            reuses their addresses; prints "reused N" (how many code objects
            had a freed one's address)
"""
import ctypes
import os
import sys
import threading
import time

MODE, RANK, NRANKS, IDDIR = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
N = 256


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def load():
    how = os.environ.get("PYNCCL_LOAD", "dropin")
    if how == "dropin":
        nccl = ctypes.CDLL(os.environ["PYNCCL_LIB"])
    else:
        ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_GLOBAL)
        nccl = ctypes.CDLL(None)
    cudart = ctypes.CDLL("libcudart.so.13")
    for name in ("ncclAllReduce", "ncclBroadcast"):
        getattr(nccl, name).restype = ctypes.c_int
    return nccl, cudart


NCCL, CUDA = load()
ncclFloat32, ncclSum = 7, 0
cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost = 1, 2


def check(rc, what):
    if rc != 0:
        sys.stderr.write("%s failed: %d\n" % (what, rc))
        sys.exit(1)


def share_id(name):
    path = os.path.join(IDDIR, name)
    uid = UniqueId()
    if RANK == 0:
        check(NCCL.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        with open(path + ".tmp", "wb") as f:
            f.write(bytes(uid.internal))
        os.rename(path + ".tmp", path)
        return uid
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path, "rb") as f:
                ctypes.memmove(uid.internal, f.read(128), 128)
            return uid
        time.sleep(0.01)
    sys.exit("no unique id at " + path)


class Comm:
    def __init__(self, name):
        self.comm = ctypes.c_void_p()
        uid = share_id(name)
        check(NCCL.ncclCommInitRank(ctypes.byref(self.comm), NRANKS, uid, RANK), "ncclCommInitRank")
        self.stream = ctypes.c_void_p()
        check(CUDA.cudaStreamCreate(ctypes.byref(self.stream)), "cudaStreamCreate")
        self.buf = ctypes.c_void_p()
        check(CUDA.cudaMalloc(ctypes.byref(self.buf), N * 4), "cudaMalloc")

    def fill(self, v):
        host = (ctypes.c_float * N)(*([float(v)] * N))
        check(CUDA.cudaMemcpy(self.buf, host, N * 4, cudaMemcpyHostToDevice), "cudaMemcpy")

    def read(self):
        host = (ctypes.c_float * N)()
        check(CUDA.cudaStreamSynchronize(self.stream), "cudaStreamSynchronize")
        check(CUDA.cudaMemcpy(host, self.buf, N * 4, cudaMemcpyDeviceToHost), "cudaMemcpy")
        return host[0]

    # pynccl's wrappers: every NCCL call of the program goes through these
    def all_reduce(self):
        check(NCCL.ncclAllReduce(self.buf, self.buf, ctypes.c_size_t(N), ncclFloat32, ncclSum,
                                 self.comm, self.stream), "ncclAllReduce")

    def broadcast(self, root):
        check(NCCL.ncclBroadcast(self.buf, self.buf, ctypes.c_size_t(N), ncclFloat32, root,
                                 self.comm, self.stream), "ncclBroadcast")

    def destroy(self):
        check(NCCL.ncclCommDestroy(self.comm), "ncclCommDestroy")


def train_step(comm, step):
    comm.fill(RANK + step)
    comm.all_reduce()
    return comm.read()


def bad_branch(comm):
    comm.broadcast(0)
    return comm.read()


def healthy():
    comm = Comm("world")
    for step in range(8):
        print("sum %g" % train_step(comm, step), flush=True)
    comm.fill(RANK)
    comm.broadcast(0)
    print("bcast %g" % comm.read(), flush=True)
    comm.destroy()


def mismatch():
    comm = Comm("world")
    train_step(comm, 0)
    print("ready", flush=True)
    if RANK == 1:
        bad_branch(comm)
        time.sleep(60)  # stays alive: the others' dumps are the evidence
    else:
        train_step(comm, 1)  # never completes: rank 1 broadcast
        time.sleep(60)


def lopsided(comm):
    comm.fill(RANK)
    comm.all_reduce()
    return comm.read()


def missing():
    comm = Comm("world")
    train_step(comm, 0)
    print("ready", flush=True)
    if RANK == 1:
        lopsided(comm)  # AllReduce #2, then no #3
        time.sleep(60)
    else:
        train_step(comm, 1)
        train_step(comm, 2)  # never completes: rank 1 skipped it
        time.sleep(60)


def stuck_step(comm):
    comm.fill(RANK)
    comm.all_reduce()
    return comm.read()


def stall():
    comm = Comm("world")
    train_step(comm, 0)
    print("ready", flush=True)
    stuck_step(comm)  # never completes (NCCLEMU_FAULT=stall:2)
    time.sleep(60)


def give_up(code):
    sys.stdout.flush()
    os._exit(code)


def exit_early():
    comm = Comm("world")
    train_step(comm, 0)
    print("ready", flush=True)
    if RANK == 1:
        time.sleep(0.2)  # after the others' AllReduce #2 was issued
        give_up(3)
    train_step(comm, 1)  # never completes: rank 1 is gone
    time.sleep(60)


def stale():
    import gc
    comm = Comm("world")
    seen, reused = set(), 0
    for i in range(6):
        ns = {}
        exec(compile("\n" * i + "def f(comm):\n    comm.all_reduce()\n", "gen_%d.py" % i, "exec"), ns)
        f = ns["f"]
        reused += id(f.__code__) in seen
        seen.add(id(f.__code__))
        f(comm)
        comm.read()
        del f, ns
        gc.collect()  # f and its globals form a cycle
    print("reused %d" % reused, flush=True)
    comm.destroy()


def many_sites():
    """More distinct call stacks than the stack table holds (each exec'd f
    is its own file), then stall()'s stall from a call site past them."""
    comm = Comm("world")
    for i in range(1100):
        ns = {}
        exec(compile("def f(comm):\n    comm.all_reduce()\n", "site_%d.py" % i, "exec"), ns)
        ns["f"](comm)
        if i % 100 == 99:
            comm.read()
    comm.read()
    print("ready", flush=True)
    stuck_step(comm)  # never completes (NCCLEMU_FAULT=stall:1101)
    time.sleep(60)


BARRIER = threading.Barrier(2)


def worker_a(out):
    # each thread its own device and communicator (two communicators
    # sharing a device from two threads may deadlock on real GPUs too)
    check(CUDA.cudaSetDevice(0), "cudaSetDevice")
    comm = Comm("a")
    for step in range(4):
        out.append(train_step(comm, step))
    BARRIER.wait()
    BARRIER.wait()
    comm.destroy()


def worker_b(out):
    check(CUDA.cudaSetDevice(1), "cudaSetDevice")
    comm = Comm("b")
    for step in range(4):
        comm.fill(step)
        comm.all_reduce()
        out.append(comm.read())
    BARRIER.wait()  # both workers alive: rank 0 dumps from here
    time.sleep(0.2)  # once worker_a waits again (a running thread's frames are in flux)
    if RANK == 0 and hasattr(NCCL, "nccltrace_dump"):
        NCCL.nccltrace_dump(b"threads")
    BARRIER.wait()
    comm.destroy()


def threads():
    ra, rb = [], []
    ta = threading.Thread(target=worker_a, args=(ra,), name="worker-a")
    tb = threading.Thread(target=worker_b, args=(rb,), name="worker-b")
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    print("a %s b %s" % (ra, rb), flush=True)


{"healthy": healthy, "mismatch": mismatch, "threads": threads, "missing": missing, "stall": stall,
 "exit": exit_early, "stale": stale, "manysites": many_sites}[MODE]()
