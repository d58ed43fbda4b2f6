#!/usr/bin/env python3
"""hosts_block.py -- the job is never blocked by an unreachable coordinator
(issue 25): the application's NCCL call latency on a host that cannot reach
the coordinator, traced (strict and async) vs untraced, measured side by
side in one run (bench/run.sh).

  hosts_block.py LIB EMU_DIR XRANK [--rounds N] [--calls N]

Two hosts made of network namespaces (tests/hosts/netns.py): h0 runs rank
0 (which hosts the coordinator), h1 runs rank 1 with `ip route add
blackhole` to h0's address, so its aggregator's SYNs vanish (no refusal,
no close: the worst case).  Each rank is pinned to a CPU of its own with
its tracer threads (taskset): the figures then do not depend on where the
scheduler put them, and whatever the tracer's threads do is paid by the
rank.  Each job is the emulator's `xrank timed` (tests/exchange/xrank.c):
20 warm-up AllReduce of 64 floats (in strict mode the first waits
NCCLTRACE_STRICT_TIMEOUT=1 s and fails open), then --calls AllReduce back
to back, each timed from the call to the end of its stream synchronize.
A job's figure is h1's rank's least median of 10 batches of its calls
(what a call costs while nothing else on the machine takes the CPU).
Untraced, strict, async and check-off jobs alternate (the order rotates
each round); each configuration's figure is the median over rounds.  The
collective joins both ranks, so what the coordinator's host pays (its
strict requests go unanswered: h1 never registers) reaches h1 too.
Prints "lat_us CONFIG MEDIAN (rounds ...)" and "ratio CONFIG R" (to
untraced; check off: the recorder's own cost on these calls, for scale).

Needs root (namespaces): otherwise prints one "cannot run: ..." line and
exits 3.  Exit 0 when every job ran, 1 otherwise.
Thread-safety: none (one driver thread).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "hosts"))
import netns  # noqa: E402

R = 1           # rank per host (2 processes on 2 cores: steadier)
N = 2 * R
CONFIGS = ["untraced", "strict", "async", "off"]


def job(hosts, lib, emu, xrank, cfg, calls, port, tmp):
    """One job; returns (h1's figure in us, h1's stderr)."""
    idfile = os.path.join(tmp, "id.%d" % port)
    procs, outs = [], []
    for r in range(N):
        k = r // R
        env = {k2: v for k2, v in os.environ.items()
               if not k2.startswith(("NCCLTRACE_", "NCCL_", "NCCLEMU_")) and k2 != "LD_PRELOAD"}
        env.update({"LD_LIBRARY_PATH": emu, "NCCLEMU_DEVICES": "8", "RANK": str(r), "LOCAL_RANK": str(r % R),
                    "WORLD_SIZE": str(N), "LOCAL_WORLD_SIZE": str(R), "MASTER_ADDR": hosts.addr(0),
                    "MASTER_PORT": str(port), "XRANK_CALLS": str(calls)})
        if cfg != "untraced":
            env.update({"LD_PRELOAD": lib, "NCCLTRACE_CHECK": cfg, "NCCLTRACE_STRICT_TIMEOUT": "1",
                        "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"), "NCCLTRACE_DIR": os.path.join(tmp, "dumps"),
                        "NCCLTRACE_JOB": "block"})
        out = os.path.join(tmp, "out.%d.%d" % (port, r))
        err = os.path.join(tmp, "err.%d.%d" % (port, r))
        outs.append((out, err))
        with open(out, "w") as fo, open(err, "w") as fe:
            # each rank on a CPU of its own, its tracer threads with it: the
            # figure then does not depend on where the scheduler put them
            cpu = str(r % (os.cpu_count() or 1))
            procs.append(hosts.popen(k, ["taskset", "-c", cpu, xrank, "timed", str(r), str(N), idfile], env=env,
                                     stdout=fo, stderr=fe))
    ok = True
    for p in procs:
        try:
            ok = p.wait(120) == 0 and ok
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            ok = False
    lat, errs = [], ""
    for r in range(R, N):
        with open(outs[r][0]) as f:
            for ln in f:
                if ln.startswith("lat_us "):
                    lat.append(float(ln.split()[4]))
        with open(outs[r][1]) as f:
            errs += f.read()
    if not ok or len(lat) != R:
        sys.stderr.write("hosts_block: %s job failed; h1's stderr:\n%s" % (cfg, errs))
        return None, errs
    return sum(lat) / len(lat), errs


def main():
    args = sys.argv[1:]
    rounds, calls = 5, 2000
    while len(args) > 3 and args[-2] in ("--rounds", "--calls"):
        if args[-2] == "--rounds":
            rounds = int(args[-1])
        else:
            calls = int(args[-1])
        args = args[:-2]
    if len(args) != 3:
        sys.exit("usage: hosts_block.py LIB EMU_DIR XRANK [--rounds N] [--calls N]")
    lib, emu, xrank = args
    why = netns.can_create()
    if why:
        print("cannot run: " + why)
        sys.exit(3)
    tmp = tempfile.mkdtemp(prefix="ntr-block-")
    os.chmod(tmp, 0o755)
    got = {c: [] for c in CONFIGS}
    failed = 0
    try:
        with netns.Hosts(2) as hosts:
            netns.sh("ip", "-n", hosts.ns(1), "route", "add", "blackhole", hosts.addr(0) + "/32")
            port = 29500
            for i in range(rounds):
                for cfg in CONFIGS[i % 4:] + CONFIGS[:i % 4]:
                    port += 100
                    v, errs = job(hosts, lib, emu, xrank, cfg, calls, port, tmp)
                    if v is None:
                        failed = 1
                        continue
                    if cfg == "strict" and "no answer within NCCLTRACE_STRICT_TIMEOUT" not in errs \
                            and "no coordinator connection" not in errs:
                        sys.stderr.write("hosts_block: h1 did not say it runs unchecked:\n" + errs)
                        failed = 1
                    got[cfg].append(v)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for c in CONFIGS:
        if got[c]:
            print("lat_us %s %.2f (rounds %s)" % (c, statistics.median(got[c]),
                                                " ".join("%.1f" % v for v in got[c])))
    base = statistics.median(got["untraced"]) if got["untraced"] else 0
    for c in CONFIGS[1:]:
        if got[c] and base > 0:
            print("ratio %s %.3f" % (c, statistics.median(got[c]) / base))
    sys.exit(failed)


if __name__ == "__main__":
    main()
