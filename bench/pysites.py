#!/usr/bin/env python3
"""pysites.py -- what Python call sites cost per NCCL call, measured from a
Python process (ctypes, as pynccl) against the no-op NCCL (bench/noop) in
drop-in mode.  Alternates processes with NCCLTRACE_PYSTACKS=0 and =1 and
reports medians of the difference:

  known site  one call site called over and over (a training loop)
  new site    each call from a call site never seen before (resolved once:
              file, line and function of each of its frames)

  pysites.py LIBNCCLTRACE NOOP_DIR [--calls N] [--sites M] [--rounds R]
Prints "added known: X ns" and "added new: Y ns" (and the raw figures).
"""
import ctypes
import os
import statistics
import subprocess
import sys
import time

CHILD = r'''
import ctypes, os, sys, time
lib = ctypes.CDLL(os.environ["BENCH_LIB"])
uid = (ctypes.c_byte * 128)()
lib.ncclGetUniqueId(uid)
f = lib.ncclAllReduce
args = (None, None, ctypes.c_size_t(1), 7, 0, None, None)
calls, nsites = int(sys.argv[1]), int(sys.argv[2])
def loop(n):
    for _ in range(n):
        f(*args)
loop(1000)
t = time.perf_counter_ns(); loop(calls); known = (time.perf_counter_ns() - t) / calls
# nsites distinct functions, each one call: every call a new site
src = "".join("def s%d(f, a):\n    f(*a)\n" % i for i in range(nsites))
ns = {}
exec(compile(src, "sites.py", "exec"), ns)
fs = [ns["s%d" % i] for i in range(nsites)]
def each(fs):
    t = time.perf_counter_ns()
    for g in fs:
        g(f, args)
    return (time.perf_counter_ns() - t) / len(fs)
new = each(fs)
print(known, new)
'''


def main():
    lib, noop = sys.argv[1], sys.argv[2]
    opts = dict(calls=300000, sites=800, rounds=7)
    a = sys.argv[3:]
    for i in range(0, len(a) - 1, 2):
        opts[a[i].lstrip("-")] = int(a[i + 1])
    env = dict(os.environ, BENCH_LIB=lib, NCCLTRACE_REAL_NCCL=os.path.join(noop, "libnccl.so.2"),
               NCCLTRACE_CHECK="off", NCCLTRACE_RING_DIR="/tmp/nccltrace-bench-rings-%d" % os.getpid(),
               NCCLTRACE_DIR="/tmp/nccltrace-bench-dumps-%d" % os.getpid())
    res = {0: [], 1: []}
    for _ in range(opts["rounds"]):
        for on in (0, 1):
            out = subprocess.run([sys.executable, "-c", CHILD, str(opts["calls"]), str(opts["sites"])],
                                 env=dict(env, NCCLTRACE_PYSTACKS=str(on)), capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("pysites: child failed: " + out.stderr)
            res[on].append([float(x) for x in out.stdout.split()])
    med = {on: [statistics.median(r[k] for r in res[on]) for k in range(2)] for on in (0, 1)}
    print("python %s, %d calls x %d rounds, %d new sites" % (sys.version.split()[0], opts["calls"], opts["rounds"],
                                                          opts["sites"]))
    print("per call, sites off: known %.0f ns, new %.0f ns" % tuple(med[0]))
    print("per call, sites on:  known %.0f ns, new %.0f ns" % tuple(med[1]))
    print("added known: %.0f ns" % (med[1][0] - med[0][0]))
    print("added new: %.0f ns" % (med[1][1] - med[0][1]))
    for d in ("/tmp/nccltrace-bench-rings-%d" % os.getpid(), "/tmp/nccltrace-bench-dumps-%d" % os.getpid()):
        subprocess.run(["rm", "-rf", d])


main()
