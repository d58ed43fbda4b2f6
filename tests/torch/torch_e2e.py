#!/usr/bin/env python3
"""torch_e2e.py CASE -- real PyTorch (the pinned CUDA wheel in the
project's venv, scripts/torch-env.sh) on the CPU emulator, under nccltrace.

  faults  examples/torch/run_all.sh, 4 ranks, every fault case, with
          PyTorch's own Flight Recorder on (dump on timeout); each verdict
          as docs/pytorch.md promises, the Python site names the line of
          faults.py, FR dumps are written next to ours, and the time from
          the fault to nccltrace's first live report and to PyTorch's
          watchdog message is printed per case
  train   examples/torch/train.py (--model scale), 2 ranks: exit status and
          output traced are those untraced; the verdict is healthy
  graph   tests/torch/graph.py: torch.cuda.graph (global mode) around an
          all_reduce, sync (on the capturing stream) and async_op=True (on
          the NCCL stream, a cross-stream capture), 20 replays: nothing
          invalidated, 20 replays per rank in decode, healthy
  groups  tests/torch/groups.py split|fresh: new_group by ncclCommSplit and
          by fresh init, a barrier: the comms have the right members

Environment (from meson): NTT_TORCH_PY (the venv's python), NTT_EMU_RUN,
NTT_NCCLTRACE, NTT_SRC.  torch missing is a failure, never a skip: the suite
must not pass quietly without it.  Exit: 0 pass, 1 fail.
"""
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

E = {k: os.environ.get(k, "") for k in ("NTT_TORCH_PY", "NTT_EMU_RUN", "NTT_NCCLTRACE", "NTT_SRC")}
FAILS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS.append(what)


def env():
    e = dict(os.environ)
    venv_bin = os.path.dirname(E["NTT_TORCH_PY"])
    e["PATH"] = venv_bin + os.pathsep + e.get("PATH", "")
    e.pop("LD_PRELOAD", None)
    e["OMP_NUM_THREADS"] = "1"
    e["NCCLEMU_DEVICES"] = "8"
    return e


def torchrun(nproc, port, script, args, tmp, traced=True, extra_env=None, timeout=120):
    e = env()
    e.update(extra_env or {})
    cmd = [E["NTT_EMU_RUN"], "torchrun", "--nproc-per-node", str(nproc), "--master-port", str(port), script] + args
    if traced:
        cmd = [E["NTT_NCCLTRACE"], "run", "--dir", tmp + "/dumps", "--ring-dir", tmp + "/rings", "--"] + cmd
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    return p


def analyze(d):
    p = subprocess.run([E["NTT_NCCLTRACE"], "analyze", "--json", d], capture_output=True, text=True)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return {"verdict": {"class": "<none: %s>" % p.stderr.strip()[:200]}}


def port():
    """A free MASTER_PORT whose +17 (nccltrace's coordinator) is free too."""
    import socket
    for _ in range(200):
        a = socket.socket()
        a.bind(("127.0.0.1", 0))
        p = a.getsockname()[1]
        try:
            b = socket.socket()
            b.bind(("127.0.0.1", p + 17))
            b.close()
            return p
        except OSError:
            pass
        finally:
            a.close()
    return 29000 + os.getpid() % 500 * 2


def line_of(path, needle, after=None):
    """1-based number of the first line holding NEEDLE (after a line holding AFTER)."""
    seen = after is None
    for i, l in enumerate(open(path), 1):
        if not seen and after in l:
            seen = True
        elif seen and needle in l:
            return i
    raise SystemExit("%s: no line with %r" % (path, needle))


def watchdog_time(log):
    """Wall time (s) of PyTorch's first watchdog line in a torchrun log."""
    m = re.search(r"\[E(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+) ProcessGroupNCCL\.cpp:\d+\] .*[Ww]atchdog caught", log)
    if not m:
        return None
    mo, d, h, mi, s = m.groups()
    now = datetime.datetime.now()
    t = datetime.datetime(now.year, int(mo), int(d), int(h), int(mi), 0)
    return t.timestamp() + float(s)


def case_faults(tmp):
    faults = os.path.join(E["NTT_SRC"], "examples/torch/faults.py")
    e = env()
    e.update({"WRAP": E["NTT_EMU_RUN"], "NCCLTRACE": E["NTT_NCCLTRACE"], "NPROC": "4", "OUT": tmp,
              "PG_TIMEOUT": "20", "DEADLINE": "60", "TIMEOUT": "8",
              # PyTorch's Flight Recorder, on at the same time, dumping on timeout
              # (run_all.sh puts each case's dumps in CASE/torch-fr/)
              "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"})
    p = subprocess.run(["bash", os.path.join(E["NTT_SRC"], "examples/torch/run_all.sh")], env=e,
                       capture_output=True, text=True, timeout=1500)
    print(p.stdout)
    check(p.returncode == 0, "run_all.sh: every case's verdict as docs/pytorch.md promises (exit %d)" % p.returncode)
    # The site of the faulty call is faults.py's own line.
    sites = {
        "op": line_of(faults, "dist.broadcast(x, src=0)", 'a.case == "op"'),
        "shape": line_of(faults, "dist.all_reduce(torch.ones(8", 'a.case == "shape"'),
        "order": line_of(faults, "dist.broadcast(x, src=0)", 'a.case == "order"'),
        "exit42": line_of(faults, "os._exit(42)", 'a.case == "exit42"'),
    }
    for c, line in sites.items():
        v = analyze(os.path.join(tmp, c, "dumps")).get("verdict", {})
        want = "faults.py:%d" % line
        check(want in v.get("summary", ""), "%s: the verdict names %s: %s" % (c, want, v.get("summary", "")[:160]))
        check(any(s.startswith(os.path.join(E["NTT_SRC"], "examples/torch/faults.py") + ":%d " % line)
                  for s in v.get("stack", [])), "%s: verdict.stack holds faults.py:%d" % (c, line))
    # PyTorch's Flight Recorder dumped on its watchdog timeout, beside ours;
    # the verdict stays ours (run_all.sh checked it with FR on).
    for c in ("op", "shape", "order", "skip"):
        d = os.path.join(tmp, c, "torch-fr")
        fr = sorted(os.listdir(d)) if os.path.isdir(d) else []
        check(len(fr) >= 3, "%s: Flight Recorder dumps written on timeout: %d (%s)" % (c, len(fr), ", ".join(fr)))
        # FR's dumps alone give the same verdict (tools/analyze/fr.c), and
        # beside ours one timeline with both sources
        want = {"op": ("collective_mismatch", "op"), "shape": ("collective_mismatch", "count"),
                "order": ("collective_mismatch", "op"), "skip": ("missing_collective", None)}[c]
        v = analyze(d).get("verdict", {})
        check((v.get("class"), v.get("field"), v.get("seq"), v.get("ranks")) == want + (2, [1]),
              "%s: FR dumps alone: %s" % (c, v.get("summary", v.get("class"))))
        both = analyze(os.path.join(tmp, c))
        src = {x.get("source") for x in both.get("evidence", [])}
        check(src == {"nccltrace", "torch-fr"} and both["verdict"].get("comm"),
              "%s: ours and FR's dumps: our verdict, one timeline of both sources (%s)" % (c, sorted(map(str, src))))
        keep = os.environ.get("NTT_KEEP_FR")
        if keep and fr:
            os.makedirs(os.path.join(keep, c), exist_ok=True)
            for f in fr:
                shutil.copy(os.path.join(d, f), os.path.join(keep, c))
    # Fault -> first live report of ours, and -> PyTorch's watchdog line.
    print("case        to nccltrace's first live report   to PyTorch's watchdog")
    for c in ["op", "shape", "order", "skip", "exit42", "app_error", "abort"]:
        j = analyze(os.path.join(tmp, c, "dumps"))
        ev = j.get("evidence", [])
        t0 = min((x["t_ns"] for x in ev if x["kind"] == "mark" and x["text"].startswith("fault")), default=None)
        live = min((x["t_ns"] for x in ev if x["kind"] in ("mismatch", "timeout", "peer_lost", "lost", "exit", "abort")
                    and t0 and x["t_ns"] >= t0), default=None)
        try:
            wd = watchdog_time(open(os.path.join(tmp, c, "job.log")).read())
        except OSError:
            wd = None
        f = lambda t: "-" if t is None or t0 is None else "%.3f s" % (t - t0 / 1e9)
        print("%-11s %-34s %s" % (c, f(live / 1e9 if live else None), f(wd)))


def case_train(tmp):
    script = os.path.join(E["NTT_SRC"], "examples/torch/train.py")
    args = ["--steps", "5", "--width", "256", "--model", "scale"]
    a = torchrun(2, port(), script, args, tmp + "/u", traced=False)
    b = torchrun(2, port(), script, args, tmp + "/t", traced=True)
    # The emulator's kernels compute nothing: the loss digits are not a result.
    mask = lambda s: re.sub(r"last loss \S+", "last loss X", s)
    check(a.returncode == 0, "untraced train.py exits 0 (%d): %s" % (a.returncode, a.stderr[-300:]))
    check(b.returncode == a.returncode, "traced exit status %d == untraced %d" % (b.returncode, a.returncode))
    check(mask(a.stdout) == mask(b.stdout) and "5 steps on 2 rank(s)" in a.stdout,
          "stdout traced == untraced: %r vs %r" % (b.stdout[-200:], a.stdout[-200:]))
    v = analyze(tmp + "/t/dumps")["verdict"]
    check(v["class"] == "healthy", "train.py traced: healthy (%s)" % v.get("summary"))


def case_graph(tmp):
    for mode in ("sync", "async"):
        d = os.path.join(tmp, mode)
        p = torchrun(2, port(), os.path.join(E["NTT_SRC"], "tests/torch/graph.py"), ["20", mode], d)
        check(p.returncode == 0, "graph.py %s exits 0 traced (%d): %s" % (mode, p.returncode, p.stderr[-400:]))
        check(p.stdout.count("replays 20 ok") == 2, "%s: both ranks replayed 20 times: %r" % (mode, p.stdout))
        check("nvalidat" not in p.stderr and "not joined" not in p.stderr, "%s: no capture invalidated" % mode)
        for f in sorted(x for x in os.listdir(d + "/dumps") if x.endswith(".zst")):
            out = subprocess.run([E["NTT_NCCLTRACE"], "decode", os.path.join(d, "dumps", f)], capture_output=True, text=True).stdout
            n = len(re.findall(r"GraphLaunch\(graph \d+ replay \d+: AllReduce", out))
            check(n == 20 and "captured" in out, "%s %s: 20 replays in decode (%d), the captured AllReduce shown" % (mode, f, n))
        v = analyze(d + "/dumps")["verdict"]
        check(v["class"] == "healthy", "graph %s: healthy (%s)" % (mode, v.get("summary")))


def case_groups(tmp):
    for mode in ("split", "fresh"):
        d = os.path.join(tmp, mode)
        p = torchrun(4, port(), os.path.join(E["NTT_SRC"], "tests/torch/groups.py"), [mode], d)
        check(p.returncode == 0 and p.stdout.count(mode + " ok") == 4, "groups %s: 4 ranks ok (%d)" % (mode, p.returncode))
        j = analyze(d + "/dumps")
        check(j["verdict"]["class"] == "healthy", "groups %s: healthy" % mode)
        comms = sorted((c["nranks"], sorted(m["rank"] for m in c["members"]), c.get("parent") or "") for c in j["comms"])
        shapes = [(n, r) for n, r, _ in comms]
        check(shapes == [(2, [0, 1]), (4, [0, 1, 2, 3]), (4, [0, 1, 2, 3])],
              "groups %s: comms default, g_all and g_even with their members: %s" % (mode, shapes))
        parents = [par for _, _, par in comms]
        if mode == "split":
            check(sum(1 for x in parents if x) == 2, "split: g_all and g_even name the default comm as parent")
        else:
            check(not any(parents), "fresh: no comm has a parent")


def case_errfile(tmp):
    """torchrun's ChildFailedError summary shows the tracer's first cause:
    a strict-mode mismatch (tests/torch/errfile_case.py) is refused, every
    rank raises and exits 1, and the root cause's traceback is the line the
    tracer wrote into TORCHELASTIC_ERROR_FILE (interpose/errfile.c)."""
    p = torchrun(3, port(), os.path.join(E["NTT_SRC"], "tests/torch/errfile_case.py"), [], tmp,
                 extra_env={"NCCLTRACE_CHECK": "strict", "NCCLTRACE_STRICT_TIMEOUT": "10"}, timeout=180)
    out = p.stdout + p.stderr
    check(p.returncode != 0 and "ChildFailedError" in out, "errfile: torchrun failed with ChildFailedError (exit %d)"
          % p.returncode)
    m = re.search(r"Root Cause \(first observed failure\):.*?error_file\s*:\s*(\S+).*?traceback\s*:\s*(.*?)\n",
                  out, re.S)
    check(m is not None and m.group(2).startswith("nccltrace: "),
          "errfile: the root cause's traceback is the tracer's line: %r" % (m.group(2)[:300] if m else out[-1500:]))
    if m:
        print("root cause: " + m.group(2)[:300])


def case_fr_p2p(tmp):
    """Send/recv under PyTorch's Flight Recorder (tests/torch/fr_cases.py):
    a healthy exchange is healthy by FR alone, in both of FR's forms (PyTorch's
    own analyzer, matching by collective_seq_id, flags it); a count mismatch
    is named with its field."""
    script = os.path.join(E["NTT_SRC"], "tests/torch/fr_cases.py")
    fr_env = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "PG_TIMEOUT": "10"}
    ok = os.path.join(tmp, "ok")
    p = torchrun(4, port(), script, ["p2p_ok", ok], tmp + "/t-ok", traced=False, extra_env=fr_env)
    check(p.returncode == 0, "p2p_ok ran (exit %d): %s" % (p.returncode, p.stderr[-300:]))
    for d in (ok, os.path.join(ok, "json")):
        v = analyze(d).get("verdict", {})
        check(v.get("class") == "healthy", "%s: healthy by FR alone: %s" % (d, v.get("summary", v.get("class"))))
    bad = os.path.join(tmp, "count")
    e = dict(fr_env, TORCH_FR_DUMP_TEMP_FILE=bad + "/rank_")
    os.makedirs(bad)
    torchrun(4, port() + 1, script, ["p2p_count", bad], tmp + "/t-count", traced=False, extra_env=e, timeout=120)
    v = analyze(bad).get("verdict", {})
    check((v.get("class"), v.get("field"), v.get("ranks")) == ("p2p_mismatch", "count", [0, 1]),
          "p2p_count: FR alone names the send/recv count mismatch: %s" % v.get("summary", v.get("class")))


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("faults", "train", "graph", "groups", "fr_p2p", "errfile"):
        sys.exit(__doc__)
    py = E["NTT_TORCH_PY"]
    if not py or not os.access(py, os.X_OK) or subprocess.run([py, "-c", "import torch"]).returncode:
        print("FAIL torch is not installed in %r: run scripts/torch-env.sh (run-tests.sh does)" % py)
        return 1
    tmp = tempfile.mkdtemp(prefix="ntt-torch-")
    try:
        globals()["case_" + sys.argv[1]](tmp)
    finally:
        if not FAILS:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("evidence kept in " + tmp)
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
