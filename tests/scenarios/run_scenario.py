#!/usr/bin/env python3
"""run_scenario.py -- one end-to-end scenario: run N ranks of an example on
the CPU emulator with libnccltrace.so preloaded, let the launcher fail-fast or
time out (SIGTERM, then SIGKILL, like torchrun), collect the rings of killed
ranks, run `nccltrace analyze --json` on everything left behind and check the
verdict, the exit status (0 healthy, 1 a fault) and the document against
docs/analyze.schema.json.

Exit: 0 pass, 1 fail, 77 skip (a required build product is missing).
Every rank is dead when this returns: the launcher kills its ranks, and the
launcher itself runs in its own session that is killed on a runaway.

  run_scenario.py --name NAME --launch launch.sh --nccltrace EXE --lib SO
      --emu-libdir DIR --ranks N [--timeout S] [--env K=V]... [--rank-env R:K=V]...
      [--expect-class C] [--expect-field F] [--expect-seq N] [--expect-ranks 1,2]
      [--expect-exit-code N] [--expect-signal N] [--expect-error NAME]
      [--expect-comm-nranks N] [--min-procs N] [--expect-replays N]
      [--expect-blocked-in TEXT] [--expect-rows-true] -- PROG [ARGS...]
--expect-replays: `nccltrace decode` of every rank's dump shows N graph
replays; --expect-blocked-in: every surviving member's blocked_in is TEXT;
--expect-rows-true: no row says a member is blocked in (or short of) a
collective a peer completed.
Set NCCLTRACE_SCENARIO_KEEP=1 to keep the temporary directory.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schema_lite  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "analyze.schema.json")) as _f:
    SCHEMA = json.load(_f)


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--launch", required=True)
    p.add_argument("--nccltrace", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--emu-libdir", required=True)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--timeout", type=float, default=4.0)
    p.add_argument("--trace-timeout", default="1")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--rank-env", action="append", default=[])
    p.add_argument("--expect-class", required=True)
    p.add_argument("--expect-field")
    p.add_argument("--expect-seq", type=int)
    p.add_argument("--expect-ranks")
    p.add_argument("--expect-exit-code", type=int)
    p.add_argument("--expect-signal", type=int)
    p.add_argument("--expect-error")
    p.add_argument("--expect-comm-nranks", type=int)
    p.add_argument("--expect-text", action="append", default=[],
                   help="a substring of the verdict's summary or next step")
    p.add_argument("--expect-replays", type=int)
    p.add_argument("--expect-blocked-in")
    p.add_argument("--expect-rows-true", action="store_true",
                   help="no member's row of the verdict comm says it is blocked in, or did not complete, a "
                        "collective a peer completed")
    p.add_argument("--expect-timeout", action="store_true",
                   help="the evidence holds a watchdog timeout on every rank")
    p.add_argument("--expect-error-file",
                   help="TORCHELASTIC_ERROR_FILE is set for the ranks: the tracer writes the first cause "
                        "there, in torchelastic's JSON shape, with this text in its message")
    p.add_argument("--error-file-app", action="store_true",
                   help="with --expect-error-file: the application's own error file is there first and "
                        "must be left as it is")
    p.add_argument("--min-procs", type=int,
                   help="processes that must have left evidence (default: every rank)")
    p.add_argument("prog", nargs=argparse.REMAINDER)
    a = p.parse_args()
    if a.prog and a.prog[0] == "--":
        a.prog = a.prog[1:]
    if not a.prog:
        p.error("no program given after --")
    return a


def run(cmd, env, timeout):
    """Run cmd in its own session; on a runaway kill the whole session."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += "\n[run_scenario: killed after %.0fs]" % timeout
    return proc.returncode, out, err


def main():
    a = parse()
    for path in (a.launch, a.nccltrace, a.lib, a.prog[0]):
        if not os.path.exists(path):
            print("SKIP: %s not built" % path)
            return 77
    tmp = tempfile.mkdtemp(prefix="nccltrace-scn-%s-" % a.name)
    dumps, rings = os.path.join(tmp, "dumps"), os.path.join(tmp, "rings")
    env = dict(os.environ)
    env.update({
        "LD_LIBRARY_PATH": a.emu_libdir,
        "LD_PRELOAD": os.path.abspath(a.lib),
        "NCCLTRACE_DIR": dumps,
        "NCCLTRACE_RING_DIR": rings,
        "NCCLTRACE_TIMEOUT": a.trace_timeout,
        "NCCLTRACE_CHECK": "off",
        "NCCLEMU_DEVICES": "8",
        "UNIQUE_ID_FILE": os.path.join(tmp, "unique-id"),
        "LAUNCH_TIMEOUT": str(int(a.timeout)),
        "LAUNCH_GRACE": "2",
        # as torchrun's TORCHELASTIC_RUN_ID would: a rank that never creates
        # a communicator (lazy) must still land in the same job
        "NCCLTRACE_JOB": "scenario-%s-%d" % (a.name, os.getpid()),
    })
    for k in ("NCCLEMU_FAULT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        env.pop(k, None)
    errfile = os.path.join(tmp, "torchelastic-error.json")
    app_error = '{"message": {"message": "RuntimeError: the application\'s own", "extraInfo": {"timestamp": "1"}}}'
    if a.expect_error_file:
        env["TORCHELASTIC_ERROR_FILE"] = errfile
        if a.error_file_app:
            with open(errfile, "w") as f:
                f.write(app_error)
    for kv in a.env:
        k, v = kv.split("=", 1)
        env[k] = v
    for rkv in a.rank_env:
        r, kv = rkv.split(":", 1)
        key = "RANKENV_" + r
        env[key] = (env.get(key, "") + " " + kv).strip()
    ok = False
    log = []
    try:
        rc, out, err = run([a.launch, str(a.ranks)] + a.prog, env, a.timeout + 30)
        log.append("launcher rc=%s\n--- stdout\n%s--- stderr\n%s" % (rc, out, err))
        tenv = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        # Left-behind rings are evidence as they are, before `collect` turns
        # them into dumps: the verdict must not depend on that step.
        left = [f for f in os.listdir(rings) if f.endswith(".ring")] if os.path.isdir(rings) else []
        pre = None
        if left:
            rc, out, err = run([a.nccltrace, "analyze", "--json", tmp], tenv, 30)
            try:
                pre = json.loads(out).get("verdict", {})
            except ValueError:
                pre = {"class": "(no JSON: rc %s %s)" % (rc, err.strip())}
        rc, out, err = run([a.nccltrace, "collect", "--rings", rings, "--dir", dumps], tenv, 30)
        log.append("collect rc=%s\n%s%s" % (rc, out, err))
        rc, out, err = run([a.nccltrace, "analyze", tmp], tenv, 30)
        log.append("analyze (text) rc=%s\n%s%s" % (rc, out, err))
        rc, out, err = run([a.nccltrace, "analyze", "--json", tmp], tenv, 30)
        if rc not in (0, 1):
            log.append("analyze --json exited %s: %s" % (rc, err))
        try:
            doc = json.loads(out)
        except ValueError as e:
            log.append("analyze --json printed no JSON (%s): %r" % (e, out[:2000]))
            doc = None
        if doc is not None:
            # docs/analyze.md "Exit status": 0 healthy, 1 a fault found
            want_rc = 0 if a.expect_class == "healthy" else 1
            if rc != want_rc:
                log.append("MISMATCH analyze --json exit status: got %s, want %d" % (rc, want_rc))
            errs = schema_lite.errors(doc, SCHEMA)
            for e in errs[:20]:
                log.append("MISMATCH docs/analyze.schema.json: " + e)
            ok = check(a, doc, log) and rc == want_rc and not errs
            if a.expect_error_file:
                ok = check_error_file(a, errfile, app_error, log) and ok
            if a.expect_replays is not None:
                ok = check_replays(a, dumps, tenv, log) and ok
            if pre is not None:
                same = (pre.get("class"), sorted(pre.get("ranks", []))) == (
                    doc["verdict"].get("class"), sorted(doc["verdict"].get("ranks", [])))
                log.append("verdict on the rings before collect: %s (%s)" % (
                    json.dumps(pre), "same" if same else "DIFFERENT"))
                ok = ok and same
    finally:
        if not ok:
            sys.stdout.write("\n".join(log) + "\n")
        if os.environ.get("NCCLTRACE_SCENARIO_KEEP"):
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if ok:
        for line in log:
            if line.startswith("verdict"):
                print(line)
    print("%s: %s" % (a.name, "PASS" if ok else "FAIL"))
    return 0 if ok else 1


def check_error_file(a, path, app_error, log):
    """torchelastic's error file: the application's own left alone, else
    ours in the shape torchrun reads (message.message, extraInfo)."""
    try:
        text = open(path).read()
    except OSError as e:
        log.append("MISMATCH error file: %s" % e)
        return False
    if a.error_file_app:
        good = text == app_error
        log.append("error file %s the application's" % ("kept" if good else "REPLACED"))
        return good
    try:
        m = json.loads(text)["message"]
        good = (a.expect_error_file in m["message"] and m["message"].startswith("nccltrace: ") and
                m["message"] in m["extraInfo"]["py_callstack"] and "Its dump: " in m["extraInfo"]["py_callstack"]
                and m["extraInfo"]["timestamp"].isdigit())
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        log.append("MISMATCH error file is not torchelastic's shape (%s): %r" % (e, text[:500]))
        return False
    log.append("error file: %r" % m["message"][:300])
    if not good:
        log.append("MISMATCH error file lacks %r or a part of the shape: %r" % (a.expect_error_file, text[:800]))
    return good


def check_replays(a, dumps, env, log):
    """Every rank's exit dump shows the graph's replays, once each."""
    files = sorted(f for f in os.listdir(dumps) if f.endswith("exit.zst")) if os.path.isdir(dumps) else []
    good = len(files) == a.ranks
    for f in files:
        rc, out, err = run([a.nccltrace, "decode", os.path.join(dumps, f)], env, 30)
        n = sum(1 for line in out.splitlines() if "GraphLaunch(graph" in line and "completed" in line)
        log.append("replays in %s: %d completed" % (f, n))
        good = good and rc == 0 and n == a.expect_replays
    trace = os.path.join(dumps, "..", "trace.json")
    rc, out, err = run([a.nccltrace, "export", "--chrome", dumps, "-o", trace], env, 30)
    try:
        with open(trace) as f:
            doc = json.load(f)
        ev = doc["traceEvents"] if isinstance(doc, dict) else doc
        slices = [e for e in ev if e.get("cat") == "graph_replay" and e.get("ph") == "X"]
    except (OSError, ValueError, KeyError):
        slices = []
    log.append("export --chrome: %d graph replay slices" % len(slices))
    good = good and len(slices) == a.ranks * a.expect_replays
    if not good:
        log.append("MISMATCH replays: want %d completed in each of %d exit dumps, as many slices" %
                   (a.expect_replays, a.ranks))
    return good


def check(a, doc, log):
    v = doc.get("verdict", {})
    bad = []

    def want(name, got, exp):
        if exp is not None and got != exp:
            bad.append("%s: got %r, want %r" % (name, got, exp))

    want("class", v.get("class"), a.expect_class)
    want("field", v.get("field"), a.expect_field)
    want("seq", v.get("seq"), a.expect_seq)
    if a.expect_ranks is not None:
        exp = sorted(int(x) for x in a.expect_ranks.split(",") if x != "")
        want("ranks", sorted(v.get("ranks", [])), exp)
    want("exit_code", v.get("exit_code"), a.expect_exit_code)
    if a.expect_timeout:
        tr = sorted(set(e.get("rank") for e in doc.get("evidence", []) if e.get("kind") == "timeout"))
        want("ranks with a watchdog timeout", len(tr), a.ranks)
    if a.expect_blocked_in is not None:
        comm = [c for c in doc.get("comms", []) if c.get("id") == v.get("comm")] or doc.get("comms", [])[:1]
        dead = v.get("ranks", []) if str(v.get("class", "")).startswith("rank_") else []
        got = sorted(set(m.get("blocked_in") for m in (comm[0].get("members", []) if comm else [])
                         if m.get("rank") not in dead))
        want("survivors' blocked_in", got, [a.expect_blocked_in])
    if a.expect_rows_true:
        # A collective some member completed needed every rank: no row may
        # say a member is blocked in it, nor that it completed less while
        # it issued that call (a killed rank's ring lags its last poll).
        comm = [c for c in doc.get("comms", []) if c.get("id") == v.get("comm")]
        mem = comm[0].get("members", []) if comm else []
        top = max([m.get("last_completed", 0) for m in mem] or [0])
        for m in mem:
            b = m.get("blocked_in") or ""
            seq = b.split("#", 1)[1] if "#" in b else ""
            if seq.isdigit() and int(seq) <= top:
                bad.append("rank %s blocked in %s, which a peer completed (%d)" % (m.get("rank"), b, top))
            if m.get("last_completed", 0) < min(top, m.get("issued", 0)):
                bad.append("rank %s: last done %s, issued %s, while a peer completed %d" % (
                    m.get("rank"), m.get("last_completed"), m.get("issued"), top))
    want("signal", v.get("signal"), a.expect_signal)
    want("error", v.get("error"), a.expect_error)
    if a.expect_comm_nranks is not None:
        comm = [c for c in doc.get("comms", []) if c.get("id") == v.get("comm")]
        want("verdict comm nranks", comm[0].get("nranks") if comm else None, a.expect_comm_nranks)
    for t in a.expect_text:
        if t not in (v.get("summary") or "") + " " + (v.get("next") or ""):
            bad.append("verdict text lacks %r" % t)
    if a.expect_class != "healthy" and not v.get("comm") and a.expect_class not in (
            "rank_exit", "rank_crash", "rank_killed"):
        bad.append("verdict names no communicator")
    for key in ("ranks", "comms", "evidence", "inputs"):
        if key not in doc:
            bad.append("JSON lacks %r" % key)
    nproc = len(doc.get("ranks", []))
    need = a.ranks if a.min_procs is None else a.min_procs
    if nproc < need or nproc > a.ranks:
        bad.append("%d processes analyzed, %d ranks ran, %d needed" % (nproc, a.ranks, need))
    log.append("verdict: %s" % json.dumps(v))
    for b in bad:
        log.append("MISMATCH " + b)
    return not bad


if __name__ == "__main__":
    sys.exit(main())
