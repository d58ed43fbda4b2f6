#!/usr/bin/env python3
"""plugin_e2e.py -- libnccltrace.so as NCCL's profiler plugin
(NCCL_PROFILER_PLUGIN, docs/interposer.md "Profiler-plugin mode") on the CPU
emulator, which loads the plugin as NCCL does (docs/emulator.md).

  plugin_e2e.py TEST   (paths from the environment, as the other e2e tests)

alone_*: examples/faults.c linked with the emulator's NCCL as a static
library (no libnccl.so.2, no LD_PRELOAD): the plugin alone must give
analyze's verdict.  both: preload and plugin at once record each call
once and add the proxy/kernel view.  ring_kill*: a send/recv ring
with one rank SIGKILLed mid-transfer: analyze names the survivor's
channel, peer and step (the plugin alone, and with the preload).
versions: every table version the
plugin exports is loaded (NCCLEMU_PROFILER_VERSION) and records calls.
Exit: 0 pass, 1 fail, 77 skip.
"""
import collections
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

TMP = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def env_for(plugin=True, preload=False, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCLTRACE_", "NCCL_", "CUDA_")) and k not in ("LD_PRELOAD",)}
    env.update(LD_LIBRARY_PATH=os.environ["NTI_TEST_EMU"], NCCLTRACE_CHECK="off", NCCLTRACE_TIMEOUT="3",
               NCCLTRACE_RING_DIR=os.path.join(TMP, "rings"), NCCLTRACE_DIR=os.path.join(TMP, "dumps"),
               LAUNCH_TIMEOUT="10", LAUNCH_GRACE="2")
    if plugin:
        env["NCCL_PROFILER_PLUGIN"] = os.environ["NTI_TEST_LIB"]
    if preload:
        env["LD_PRELOAD"] = os.environ["NTI_TEST_LIB"]
    env.update(extra)
    return env


def launch(n, prog, args, env):
    launcher = os.path.join(os.environ["NTI_TEST_SRC"], "examples", "launch.sh")
    return subprocess.run([launcher, str(n), prog] + args, env=env, capture_output=True, text=True, timeout=60)


def analyze():
    out = subprocess.run([os.environ["NTI_TEST_TOOL"], "analyze", "--json", os.path.join(TMP, "dumps")],
                         capture_output=True, text=True, timeout=60)
    doc = json.loads(out.stdout)
    want = 0 if doc["verdict"]["class"] == "healthy" else 1  # docs/analyze.md "Exit status"
    check(out.returncode == want, "analyze exited %d, want %d: %s" % (out.returncode, want, out.stderr))
    return doc


def analyze_all(text=False):
    """analyze over the dumps and the rings (a SIGKILLed rank leaves only its ring)."""
    args = [os.environ["NTI_TEST_TOOL"], "analyze"] + ([] if text else ["--json"])
    out = subprocess.run(args + [os.path.join(TMP, "dumps"), os.path.join(TMP, "rings")],
                         capture_output=True, text=True, timeout=60)
    check(out.returncode in (0, 1), "analyze failed: %d %s" % (out.returncode, out.stderr))  # 1: a fault found
    return out.stdout if text else json.loads(out.stdout)


def decode(path):
    out = subprocess.run([os.environ["NTI_TEST_TOOL"], "decode", "--json", path], capture_output=True, text=True,
                         timeout=60)
    check(out.returncode == 0, "decode failed: " + out.stderr)
    return json.loads(out.stdout)


def static_prog():
    p = os.environ["NTI_TEST_FAULTS_STATIC"]
    libs = subprocess.run(["ldd", p], capture_output=True, text=True).stdout
    check("libnccl" not in libs, "the static program links a dynamic libnccl: " + libs)
    return p


def expect(n, fault, args, cls, field=None, ranks=None, **extra):
    r = launch(n, static_prog(), [fault] + args, env_for(**extra))
    v = analyze()["verdict"]
    check(v["class"] == cls, "%s: verdict %s, want %s (%s)\n%s" % (fault, v["class"], cls, v.get("summary"),
                                                                 r.stderr[-2000:]))
    if field:
        check(v.get("field") == field, "%s: field %s, want %s" % (fault, v.get("field"), field))
    if ranks is not None:
        check(v.get("ranks") == ranks, "%s: ranks %s, want %s" % (fault, v.get("ranks"), ranks))
    return v


def t_alone_mismatch():
    expect(2, "op", ["--step", "2"], "collective_mismatch", field="op")


def t_alone_missing():
    # rank 1 leaves the loop before collective 3 (and exits 0)
    v = expect(3, "skip", ["--step", "3"], "missing_collective", ranks=[1])
    check(v.get("seq") == 3, "missing collective at seq %s, want 3" % v.get("seq"))


def t_alone_exit():
    expect(3, "exit42", ["--step", "2"], "rank_exit", ranks=[1])


def t_alone_stall():
    expect(2, "none", [], "stall", NCCLEMU_FAULT="stall:3")


def t_alone_v4():
    expect(2, "op", ["--step", "2"], "collective_mismatch", field="op", NCCLEMU_PROFILER_VERSION="4")


def ops_of(path):
    recs = decode(path)["records"]
    return collections.Counter((r.get("kind"), r.get("phase")) for r in recs), recs


def t_both():
    faults = os.environ["NTI_TEST_FAULTS"]
    launch(2, faults, ["none"], env_for(plugin=False, preload=True))
    pre = sorted(glob.glob(os.path.join(TMP, "dumps", "*r0*exit*.zst")))
    check(pre, "no exit dump (preload)")
    base, _ = ops_of(pre[0])
    shutil.rmtree(os.path.join(TMP, "dumps"))
    launch(2, faults, ["none"], env_for(plugin=True, preload=True))
    both = sorted(glob.glob(os.path.join(TMP, "dumps", "*r0*exit*.zst")))
    check(both, "no exit dump (both)")
    got, recs = ops_of(both[0])
    calls = ("AllReduce", "call")
    check(base[calls] > 0 and got[calls] == base[calls],
          "AllReduce records: %d with preload and plugin, %d with preload alone" % (got[calls], base[calls]))
    check(got[("ProxyOp", "enter")] == base[calls], "proxy ops: %d for %d calls" % (got[("ProxyOp", "enter")],
                                                                                  base[calls]))
    seqs = sorted(r["seq"] for r in recs if r.get("kind") == "AllReduce")
    pseqs = sorted(r["seq"] for r in recs if r.get("kind") == "ProxyOp" and r.get("phase") == "enter")
    check(seqs == pseqs, "proxy op seqs %s, call seqs %s" % (pseqs, seqs))


def t_versions():
    for v in range(1, 7):
        d = os.path.join(TMP, "dumps")
        shutil.rmtree(d, ignore_errors=True)
        launch(2, static_prog(), ["none"], env_for(NCCLEMU_PROFILER_VERSION=str(v)))
        dumps = sorted(glob.glob(os.path.join(d, "*r0*exit*.zst")))
        check(dumps, "v%d: no exit dump" % v)
        got, _ = ops_of(dumps[0])
        check(got[("AllReduce", "call")] >= 5, "v%d: %d AllReduce records" % (v, got[("AllReduce", "call")]))
        check(got[("ProxyStep", "enter")] >= 5, "v%d: %d proxy steps" % (v, got[("ProxyStep", "enter")]))
        if v >= 3:
            check(got[("KernelCh", "enter")] >= 5, "v%d: no kernel channel records" % v)


RING_STEPS = 16   # faults.c "ring": 1 MiB, in the emulator's 64 KiB posts
RING_KILL = 5     # the killed rank dies after consuming this many posts of its first receive


def ring_kill(n, preload, prog):
    """A send/recv ring of n ranks, rank 1 SIGKILLed mid-transfer: the rank
    sending to it (rank 0) is named waiting inside its send, channel 0, at
    the step after the last one rank 1 consumed."""
    os.makedirs(os.path.join(TMP, "rings"), exist_ok=True)
    env = env_for(plugin=True, preload=preload, RANKENV_1="NCCLEMU_FAULT=kill_recv:1:%d" % RING_KILL)
    r = launch(n, prog, ["ring", "--step", "2"], env)
    check("rank 1" in r.stderr and "signal 9" in r.stderr, "rank 1 was not SIGKILLed:\n" + r.stderr[-2000:])
    j = analyze_all()
    comms = [c for c in j["comms"] if c["nranks"] == n]
    check(len(comms) == 1, "comms of %d ranks: %d" % (n, len(comms)))
    mem = {m["rank"]: m for m in comms[0]["members"]}
    check(0 in mem, "no member rank 0")
    w = [x for x in (mem[0].get("waiting_at") or []) if x["op"] == "Send"]
    check(w, "rank 0 waiting_at names no Send: %s\n%s" % (mem[0].get("waiting_at"), r.stderr[-2000:]))
    w = w[0]
    check(w["peer"] == 1 and w["channel"] == 0 and w["steps"] == RING_STEPS and w["seq"] == 1,
          "rank 0 waits at %s, want Send #1 to rank 1, channel 0, of %d steps" % (w, RING_STEPS))
    # Rank 1 consumed RING_KILL posts; the emulator's one slot holds the next.
    check(RING_KILL < w["step"] <= RING_KILL + 2, "rank 0 at step %d, want after %d" % (w["step"], RING_KILL))
    check(w["peer_state"] == "gone", "rank 1's side: %s, want gone" % w.get("peer_state"))
    text = analyze_all(text=True)
    want = "rank 0, Send #1 to rank 1, channel 0: step %d of %d" % (w["step"], RING_STEPS)
    check(want in text, "text does not say %r:\n%s" % (want, text))
    line = [x for x in text.splitlines() if want in x][0]
    check("rank 1 never received it (process gone" in line, "text line: " + line)
    # export --chrome: the same step as an open slice on rank 0's channel-0 send track
    trace = os.path.join(TMP, "trace.json")
    out = subprocess.run([os.environ["NTI_TEST_TOOL"], "export", "--chrome", os.path.join(TMP, "dumps"),
                          os.path.join(TMP, "rings"), "-o", trace], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, "export failed: " + out.stderr)
    with open(trace) as f:
        ev = json.load(f)["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    open_steps = [e for e in ev if e.get("cat") == "proxy_step" and e["args"].get("incomplete") and
                  e["args"].get("rank") == 0 and e["args"].get("peer") == 1]
    check(len(open_steps) == 1 and open_steps[0]["args"]["step"] == w["step"],
          "rank 0's open proxy step slices: %s" % open_steps)
    check("channel 0 send" in tracks.get((open_steps[0]["pid"], open_steps[0]["tid"]), ""),
          "track of the open step: %s" % tracks.get((open_steps[0]["pid"], open_steps[0]["tid"])))
    done = [e for e in ev if e.get("cat") == "proxy_step" and not e["args"].get("incomplete") and
            e["args"].get("rank") == 0 and e["args"].get("peer") == 1]
    check(len(done) == w["step"] - 1, "rank 0's finished steps to rank 1: %d, want %d" % (len(done), w["step"] - 1))


def t_ring_kill():
    ring_kill(3, False, static_prog())


def t_ring_kill_both():
    ring_kill(4, True, os.environ["NTI_TEST_FAULTS"])


TESTS = {"alone_mismatch": t_alone_mismatch, "alone_missing": t_alone_missing, "alone_exit": t_alone_exit,
         "alone_stall": t_alone_stall, "alone_v4": t_alone_v4, "both": t_both, "versions": t_versions,
         "ring_kill": t_ring_kill, "ring_kill_both": t_ring_kill_both}


def main():
    global TMP
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        fail("usage: plugin_e2e.py " + "|".join(TESTS))
    if os.environ.get("NTI_TEST_SANITIZED", "none") not in ("", "none"):
        print("SKIP: sanitized build (the plugin would need the sanitizer runtime)")
        sys.exit(77)
    TMP = tempfile.mkdtemp(prefix="nti-plugin-" + sys.argv[1] + "-")
    try:
        TESTS[sys.argv[1]]()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("PASS " + sys.argv[1])


if __name__ == "__main__":
    main()
