#!/usr/bin/env python3
"""pystacks_e2e.py -- Python call sites and Python thread stacks, end to end,
on the CPU emulator with the pynccl-style client
(pynccl_client.py: Python + ctypes over NCCL and the CUDA runtime).

  pystacks_e2e.py TEST    (paths from the environment, see main())

TEST:
  healthy   drop-in (ctypes.CDLL on libnccltrace.so, NCCLTRACE_REAL_NCCL =
            the emulator): `healthy`, output identical to an untraced run,
            every collective carries its Python call site
  mismatch  rank 1 Broadcasts from bad_branch where ranks 0,2 AllReduce from
            train_step: collective_mismatch naming bad_branch and its
            file:line in the text and in verdict.stack, members[].stack;
            rank 0's timeout dump shows its Python stack in train_step
  preload   the same mismatch under LD_PRELOAD, NCCL resolved through the
            global scope (ctypes.CDLL(None) after loading NCCL RTLD_GLOBAL)
  threads   two Python threads issuing NCCL calls get their own stacks
  missing   rank 1 issues AllReduce #2 from lopsided and skips #3:
            missing_collective, verdict.stack = its last call (in
            lopsided), the text names lopsided and where the others wait
  stall     every rank blocks in AllReduce #2 from stuck_step: stall,
            verdict.stack and the text name stuck_step
  exit      rank 1 leaves through os._exit(3) in give_up: rank_exit,
            verdict.stack = the exiting thread's stack (give_up first)
  stale     code objects freed and reallocated at the same address (exec'd
            code): each call's site names its own file and line, not the
            site cached for the address's previous code object
  manysites 1,100 distinct call stacks (the stack table holds 1,024), then
            stall's stall from a site past them: one `nccltrace:` line per
            rank says so, analyze finds the stall and says the sites past
            the first 1024 distinct stacks are not recorded, decode says it
            per record and counts them in the header
  late      a C program that calls NCCL, then embeds Python (dlopen) whose
            code calls NCCL through ctypes: the watchdog notices the new
            Python, the Python calls carry their site, the C calls none
  pyolder   a ring newer than a process's last dump: analyze still shows
            that dump's Python threads, and says which dump
  nopython  a C program: no Python call site on any record, python "none"
  versions  every other CPython 3.10-3.14 installed: sites right, 3.10 refused
  off       NCCLTRACE_PYSTACKS=0: no call sites, state "disabled", exit 0
Exit: 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.join(HERE, "pynccl_client.py")
ENV = {}
TMP = None


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def line_of(func, text):
    """Line number of the first line containing text inside def func."""
    src = open(CLIENT).read().splitlines()
    start = next(i for i, l in enumerate(src) if l.startswith("def %s(" % func) or
                 l.strip().startswith("def %s(" % func))
    for i in range(start, len(src)):
        if text in src[i]:
            return i + 1
    fail("no %r in %s" % (text, func))


def env_for(rank, load, traced=True, extra=None):
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("NCCLTRACE_") or k in ("LD_PRELOAD", "NCCLEMU_FAULT"):
            del e[k]
    e.update({"LD_LIBRARY_PATH": ENV["emu"], "NCCLEMU_DEVICES": "8", "RANK": str(rank), "WORLD_SIZE": "3",
              "NCCLTRACE_RING_DIR": os.path.join(TMP, "rings"), "NCCLTRACE_DIR": os.path.join(TMP, "dumps"),
              "NCCLTRACE_CHECK": "off", "PYNCCL_LOAD": load, "PYTHONDONTWRITEBYTECODE": "1"})
    if load == "dropin":
        e["PYNCCL_LIB"] = ENV["lib"] if traced else os.path.join(ENV["emu"], "libnccl.so.2")
        e["NCCLTRACE_REAL_NCCL"] = os.path.join(ENV["emu"], "libnccl.so.2")
    elif traced:
        e["LD_PRELOAD"] = ENV["lib"]
    if extra:
        e.update(extra)
    return e


def start(mode, load, traced=True, extra=None, python=None):
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    return [subprocess.Popen([python or sys.executable, CLIENT, mode, str(r), "3", iddir], env=env_for(r, load, traced, extra),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(3)]


def finish(procs, timeout=60):
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            fail("a rank timed out")
        out.append((p.returncode, o, e))
    return out


def tool(*args):
    p = subprocess.run([ENV["tool"]] + list(args), capture_output=True, text=True, timeout=60)
    ok = (0, 1) if args[0] == "analyze" else (0,)  # analyze: 1 is a fault found (docs/analyze.md)
    check(p.returncode in ok, "nccltrace %s: rc %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return p.stdout


def decode(path):
    return json.loads(tool("decode", "--json", path))


def dumps(pattern="*"):
    return sorted(glob.glob(os.path.join(TMP, "dumps", "nccltrace-" + pattern + ".zst")))


def wait_for(pred, what, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    fail("timed out waiting for " + what)


def site_funcs(rec):
    return [f.split(" ")[-1] for f in (rec.get("site") or [])]


# ----------------------------------------------------------------- tests --

def t_healthy():
    plain = finish(start("healthy", "dropin", traced=False))
    traced = finish(start("healthy", "dropin"))
    for r in range(3):
        check(plain[r][0] == 0 and traced[r][0] == 0, "rank %d: rc %d / %d: %s" % (r, plain[r][0], traced[r][0],
                                                                                   traced[r][2]))
        check(plain[r][1] == traced[r][1], "rank %d output differs traced:\n%s\nvs\n%s" % (r, traced[r][1], plain[r][1]))
        check("nccltrace:" not in traced[r][2].replace("nccltrace: dump written", ""),
              "rank %d said: %s" % (r, traced[r][2]))
    v = json.loads(tool("analyze", "--json", os.path.join(TMP, "dumps")))
    check(v["verdict"]["class"] == "healthy", "verdict %s" % v["verdict"])
    d = decode(dumps("*-r1-*-exit")[0])
    check(d["python"]["state"] == "on" and d["python"]["version"], "python %s" % d["python"])
    ar = [x for x in d["records"] if x["kind"] == "AllReduce"]
    check(len(ar) == 8, "%d AllReduce records" % len(ar))
    want = "%s:%d Comm.all_reduce" % (CLIENT, line_of("all_reduce", "ncclAllReduce"))
    for x in ar:
        check(x["site"] and x["site"][0] == want, "AllReduce site %s, want %s first" % (x["site"], want))
        check(site_funcs(x)[1:3] == ["train_step", "healthy"], "AllReduce site %s" % x["site"])
    check(len(set(x["pystack_id"] for x in ar)) == 1, "one call site, one stack: %s" % [x["pystack_id"] for x in ar])
    bc = [x for x in d["records"] if x["kind"] == "Broadcast"]
    check(bc and site_funcs(bc[0])[:2] == ["Comm.broadcast", "healthy"], "Broadcast site %s" % bc[0]["site"])
    init = [x for x in d["records"] if x["kind"] == "CommInitRank" and x["phase"] == "enter"]
    check(init and "Comm.__init__" in site_funcs(init[0]), "CommInitRank site %s" % init[0]["site"])
    trace = os.path.join(TMP, "trace.json")
    tool("export", "--chrome", os.path.join(TMP, "dumps"), "-o", trace)
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    sl = [e for e in ev if e.get("name", "").startswith("AllReduce") and e.get("ph") == "X"]
    check(sl and all("in train_step" in e["args"].get("site", "") and e["args"].get("python_stack") for e in sl),
          "chrome slices without call sites: %s" % sl[:2])
    text = tool("decode", dumps("*-r1-*-exit")[0])
    check("at pynccl_client.py:%d in Comm.all_reduce called from pynccl_client.py:%d in train_step" %
          (line_of("all_reduce", "ncclAllReduce"), line_of("train_step", "all_reduce()")) in text,
          "decode text lacks the call site:\n" + text)


def mismatch(load):
    procs = start("mismatch", load, extra={"NCCLTRACE_TIMEOUT": "1"})
    try:
        wait_for(lambda: len(dumps("*-timeout")) >= 2, "timeout dumps")
    finally:
        time.sleep(0.3)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        finish(procs)
    bline = line_of("bad_branch", "broadcast(0)")
    aline = line_of("train_step", "all_reduce()")
    text = tool("analyze", os.path.join(TMP, "dumps"))
    first = text.splitlines()[0]
    check(first.startswith("collective mismatch") and "pynccl_client.py:%d in bad_branch" % bline in first and
          "pynccl_client.py:%d in train_step" % aline in first, "verdict line: " + first)
    check("Python stacks at each rank's last dump" in text, "no Python stacks section:\n" + text)
    v = json.loads(tool("analyze", "--json", os.path.join(TMP, "dumps")))
    vd = v["verdict"]
    check(vd["class"] == "collective_mismatch" and vd["ranks"] == [1], "verdict %s" % vd)
    st = vd.get("stack") or []
    check(len(st) >= 3 and st[1] == "%s:%d bad_branch" % (CLIENT, bline), "verdict.stack %s" % st)
    mem = {m["rank"]: m for c in v["comms"] for m in c["members"]}
    for r in (0, 2):
        s = mem[r].get("stack") or []
        check(len(s) >= 2 and s[1] == "%s:%d train_step" % (CLIENT, aline), "members[%d].stack %s" % (r, s))
    check("bad_branch" in " ".join(mem[1].get("stack") or []), "members[1].stack %s" % mem[1].get("stack"))
    # rank 0's timeout dump: its Python stack, in decode, inside train_step
    t0 = dumps("*-r0-*-timeout")
    check(t0, "no timeout dump of rank 0: %s" % dumps())
    d = decode(t0[0])
    pt = d["python_threads"]
    main = [t for t in pt if any(" train_step" in f for f in t["frames"])]
    check(main, "rank 0 timeout dump threads: %s" % pt)
    check(main[0]["tid"] == d["header"]["pid"] and main[0]["frames"][-1].endswith("<module>"),
          "main thread stack %s" % main[0])
    text = tool("decode", t0[0])
    check("Python threads (at the dump):" in text and "pynccl_client.py:%d train_step" % line_of("train_step", "comm.read()")
          in text, "decode text of the timeout dump:\n" + text)


def hang(mode, ndumps, extra=None, load="dropin"):
    """Run mode until ndumps timeout dumps exist, then SIGTERM every rank;
    @return the ranks' results, analyze's text and JSON (dumps and rings)."""
    e = {"NCCLTRACE_TIMEOUT": "1"}
    e.update(extra or {})
    procs = start(mode, load, extra=e)
    try:
        wait_for(lambda: len(dumps("*-timeout")) >= ndumps, "timeout dumps")
    finally:
        time.sleep(0.3)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        res = finish(procs)
    ev = [os.path.join(TMP, "dumps"), os.path.join(TMP, "rings")]
    return res, tool("analyze", *ev), json.loads(tool("analyze", "--json", *ev))


def t_missing():
    _, text, v = hang("missing", 2)
    vd = v["verdict"]
    check(vd["class"] == "missing_collective" and vd["ranks"] == [1], "verdict %s" % vd)
    lline = line_of("lopsided", "all_reduce()")
    st = vd.get("stack") or []
    check(len(st) >= 3 and st[0].endswith(" Comm.all_reduce") and st[1] == "%s:%d lopsided" % (CLIENT, lline),
          "verdict.stack %s" % st)
    first = text.splitlines()[0]
    check("pynccl_client.py:%d in lopsided" % lline in first and
          "pynccl_client.py:%d in train_step" % line_of("train_step", "all_reduce()") in first, "verdict line: " + first)


def t_stall():
    _, text, v = hang("stall", 3, {"NCCLEMU_FAULT": "stall:2"})
    vd = v["verdict"]
    check(vd["class"] == "stall", "verdict %s" % vd)
    sline = line_of("stuck_step", "all_reduce()")
    st = vd.get("stack") or []
    check(len(st) >= 3 and st[1] == "%s:%d stuck_step" % (CLIENT, sline), "verdict.stack %s" % st)
    first = text.splitlines()[0]
    check("pynccl_client.py:%d in stuck_step" % sline in first, "verdict line: " + first)


def t_exit():
    # under LD_PRELOAD: os._exit reaches our _exit (the exit dump)
    res, text, v = hang("exit", 2, load="global")
    check(res[1][0] == 3, "rank 1 rc %d: %s" % (res[1][0], res[1][2]))
    vd = v["verdict"]
    check(vd["class"] == "rank_exit" and vd["ranks"] == [1] and vd.get("exit_code") == 3, "verdict %s" % vd)
    gline = line_of("give_up", "os._exit(code)")
    st = vd.get("stack") or []
    check(len(st) >= 3 and st[0] == "%s:%d give_up" % (CLIENT, gline) and st[1].endswith(" exit_early"),
          "verdict.stack %s" % st)
    first = text.splitlines()[0]
    check("at pynccl_client.py:%d in give_up" % gline in first, "verdict line: " + first)


def t_stale():
    res = finish(start("stale", "dropin"))
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d rc %d: %s" % (r, rc, e))
    m = re.search(r"reused (\d+)", res[0][1])
    check(m and int(m.group(1)) > 0, "no code object address was reused: %s" % res[0][1])
    d = decode(dumps("*-r0-*-exit")[0])
    ar = [x for x in d["records"] if x["kind"] == "AllReduce"]
    check(len(ar) == 6, "%d AllReduce records" % len(ar))
    got = [(x["site"] or ["", "?"])[1] for x in ar]
    want = ["gen_%d.py:%d f" % (i, i + 2) for i in range(6)]
    check(got == want, "sites %s, want %s" % (got, want))


def t_manysites():
    # Waits for every rank's ring to hold AllReduce #1101 (the stuck one),
    # then SIGTERM dumps every rank: no watchdog timing involved.
    procs = start("manysites", "dropin", extra={"NCCLEMU_FAULT": "stall:1101"})

    def issued():
        rings = glob.glob(os.path.join(TMP, "rings", "**", "*.ring"), recursive=True)
        n = 0
        for ring in rings:
            p = subprocess.run([ENV["tool"], "decode", "--json", ring], capture_output=True, text=True, timeout=60)
            try:
                recs = json.loads(p.stdout)["records"]
            except ValueError:
                continue
            n += any(x["kind"] == "AllReduce" and x.get("seq") == 1101 for x in recs)
        return n == 3
    try:
        wait_for(issued, "AllReduce #1101 on every rank", timeout=50)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        res = finish(procs)
    ev = [os.path.join(TMP, "dumps"), os.path.join(TMP, "rings")]
    text, v = tool("analyze", *ev), json.loads(tool("analyze", "--json", *ev))
    said = "Python call sites past the first 1024 distinct stacks are not recorded"
    for r, (rc, o, e) in enumerate(res):
        lines = [l for l in e.splitlines() if l.startswith("nccltrace:") and "distinct" in l]
        check(len(lines) == 1, "rank %d: %d lines about the full stack table: %s" % (r, len(lines), e))
    first = text.splitlines()[0] if text else ""
    check(first.startswith("stall") and said in first, "verdict line: " + first)
    vd = v["verdict"]
    check(vd["class"] == "stall" and said in vd["summary"] and "stack" not in vd, "verdict %s" % vd)
    t0 = dumps("*-r0-*-sigterm")
    check(t0, "no SIGTERM dump of rank 0: %s" % dumps())
    if t0:
        d = decode(t0[0])
        check(d["python"].get("sites_dropped", 0) > 0, "header python %s" % d["python"])
        last = [x for x in d["records"] if x["kind"] == "AllReduce"][-1]
        check(last["site"] is None and last.get("site_dropped") is True, "last AllReduce %s" % last)
        check(said in tool("decode", t0[0]), "decode text does not say it")
    print("verdict: " + first)


def t_late():
    import sysconfig
    lib = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
    if not os.path.isfile(lib):
        print("skip: no shared libpython (%s)" % lib)
        sys.exit(77)
    e = env_for(0, "global", extra={"PYTHONHOME": sys.base_prefix, "WORLD_SIZE": "1"})
    e.pop("PYTHONPATH", None)
    p = subprocess.run([os.environ["NTI_TEST_EMBED"], lib], env=e, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and "done" in p.stdout, "embed_late rc %d: %s" % (p.returncode, p.stderr))
    d = decode(dumps("*-exit")[0])
    check(d["python"]["state"] == "on", "python %s" % d["python"])
    ar = [x for x in d["records"] if x["kind"] == "AllReduce"]
    check(len(ar) == 6, "%d AllReduce records" % len(ar))
    funcs = [site_funcs(x)[:1] for x in ar]
    check(funcs == [[], [], ["late_step"], ["late_step"], [], []], "sites %s" % [x["site"] for x in ar])


def t_pyolder():
    """Rank 0 is SIGKILLed after its timeout dump: its ring (newer, no
    Python threads) is its latest image; the report shows the timeout
    dump's threads and says so."""
    procs = start("mismatch", "dropin", extra={"NCCLTRACE_TIMEOUT": "1"})
    try:
        wait_for(lambda: len(dumps("*-r0-*-timeout")) >= 1, "rank 0's timeout dump")
        time.sleep(0.3)
        procs[0].kill()
    finally:
        time.sleep(0.3)
        for p in procs[1:]:
            p.send_signal(signal.SIGTERM)
        finish(procs)
    rings = [r for r in glob.glob(os.path.join(TMP, "rings", "**", "*"), recursive=True) if os.path.isfile(r)]
    check(rings, "no ring left by the killed rank 0")
    paths = [os.path.join(TMP, "dumps"), os.path.join(TMP, "rings")]
    v = json.loads(tool("analyze", "--json", *paths))
    p0 = [p for p in v["ranks"] if p["rank"] == 0]
    check(p0 and p0[0]["state"] == "vanished", "rank 0: %s" % p0)
    pt = p0[0].get("python_threads") or []
    check(any(any(" train_step" in f for f in t["frames"]) for t in pt), "rank 0's threads: %s" % pt)
    src = p0[0].get("python_threads_from") or {}
    check(src.get("trigger") == "timeout" and not src.get("latest") and "-timeout" in src.get("path", ""),
          "python_threads_from %s" % src)
    text = tool("analyze", *paths)
    m = re.search(r"rank 0 \(pid \d+, timeout dump at [^,]+, nccltrace-[^ ]*-timeout[^;]*; its newer ring", text)
    check(m, "no source named for rank 0's threads:\n" + text)


def t_mismatch():
    mismatch("dropin")


def t_preload():
    mismatch("global")


def t_threads():
    res = finish(start("threads", "dropin"))
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d rc %d: %s" % (r, rc, e))
    d = decode(dumps("*-r0-*-exit")[0])
    ar = [x for x in d["records"] if x["kind"] == "AllReduce"]
    check(len(ar) == 8, "%d AllReduces" % len(ar))
    by_tid = {}
    for x in ar:
        by_tid.setdefault(x["tid"], set()).add(tuple(x["site"] or ()))
    check(len(by_tid) == 2, "AllReduces from %d threads" % len(by_tid))
    heads = sorted(site_funcs({"site": list(s)})[1] + "@" + site_funcs({"site": list(s)})[-1]
                   for sites in by_tid.values() for s in sites)
    check(heads == ["train_step@Thread._bootstrap", "worker_b@Thread._bootstrap"], "thread sites %s" % heads)
    for sites in by_tid.values():
        check(len(sites) == 1, "one thread, one site: %s" % sites)
    # nccltrace_dump() from worker_b while worker_a and the main thread wait
    u = dumps("*-r0-*-user")
    check(u, "no user dump: %s" % dumps())
    pt = decode(u[0])["python_threads"]
    funcs = sorted({f.split(" ")[-1] for t in pt for f in t["frames"]} & {"worker_a", "worker_b", "threads"})
    check(len(pt) == 3 and funcs == ["threads", "worker_a", "worker_b"], "threads at the dump: %s" % pt)
    check([t["dumping"] for t in pt].count(True) == 1, "one thread wrote the dump: %s" % pt)


def t_nopython():
    e = dict(os.environ)
    for k in list(e):
        if k.startswith("NCCLTRACE_"):
            del e[k]
    e.update({"LD_LIBRARY_PATH": ENV["emu"], "NCCLEMU_DEVICES": "8", "LD_PRELOAD": ENV["lib"],
              "NCCLTRACE_RING_DIR": os.path.join(TMP, "rings"), "NCCLTRACE_DIR": os.path.join(TMP, "dumps"),
              "NCCLTRACE_CHECK": "off"})
    iddir = tempfile.mkdtemp(prefix="ids-", dir=TMP)
    procs = [subprocess.Popen([ENV["rank"], "all", str(r), "2", iddir], env=dict(e, RANK=str(r), WORLD_SIZE="2"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    for r, (rc, o, err) in enumerate(finish(procs)):
        check(rc == 0, "rank %d rc %d: %s" % (r, rc, err))
        check("Python" not in err, "a C program talks about Python: " + err)
    for f in dumps("*-exit"):
        d = decode(f)
        check(d["python"]["state"] == "none" and not d["python_threads"], "python %s" % d["python"])
        check(all(x["pystack_id"] == 0 and x["site"] is None for x in d["records"]), "a C record has a Python site")
        check(not [s for s in d["stacks"] if s["kind"] == "python"], "Python stacks in a C program's dump")


def t_versions():
    """Every other CPython 3.11-3.14 installed here (pyenv, /usr/bin): its
    layout (fixed offsets for 3.11/3.12, _Py_DebugOffsets for 3.13+) gives
    the right call sites; an older one is refused in one line."""
    found = sorted(set(glob.glob("/root/.pyenv/versions/3.*/bin/python3") + glob.glob("/usr/bin/python3.1[0-9]")))
    ran = 0
    for py in found:
        p = subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True)
        if p.returncode != 0:
            continue
        major, minor = map(int, p.stdout.split("."))
        if (major, minor) < (3, 10) or (major, minor) > (3, 14):
            continue
        for f in dumps():
            os.unlink(f)
        res = finish(start("healthy", "dropin", python=py))
        for r, (rc, o, e) in enumerate(res):
            check(rc == 0, "%s rank %d rc %d: %s" % (py, r, rc, e))
        d = decode(dumps("*-r0-*-exit")[0])
        ar = [x for x in d["records"] if x["kind"] == "AllReduce"]
        if minor < 11:
            check(d["python"]["state"] == "unsupported" and all(x["site"] is None for x in ar), "%s: %s" % (py, d["python"]))
            check(res[0][2].count("nccltrace: Python") == 1, "%s: no one line: %s" % (py, res[0][2]))
        else:
            check(d["python"]["state"] == "on", "%s: python %s, stderr %s" % (py, d["python"], res[0][2]))
            check(ar and all(site_funcs(x)[:3] == ["Comm.all_reduce", "train_step", "healthy"] for x in ar),
                  "%s: sites %s" % (py, ar[0]["site"]))
            check(ar[0]["site"][0].endswith("pynccl_client.py:%d Comm.all_reduce" % line_of("all_reduce", "ncclAllReduce")),
                  "%s: line %s" % (py, ar[0]["site"][0]))
        ran += 1
        print("ok %s (%d.%d)" % (py, major, minor))
    if not ran:
        print("skip: no other CPython installed")
        sys.exit(77)


def t_off():
    res = finish(start("healthy", "dropin", extra={"NCCLTRACE_PYSTACKS": "0"}))
    for r, (rc, o, e) in enumerate(res):
        check(rc == 0, "rank %d rc %d: %s" % (r, rc, e))
    d = decode(dumps("*-r0-*-exit")[0])
    check(d["python"]["state"] == "disabled", "python %s" % d["python"])
    check(all(x["pystack_id"] == 0 for x in d["records"]), "a record has a site with NCCLTRACE_PYSTACKS=0")


def main():
    global TMP
    test = sys.argv[1]
    if os.environ.get("NTI_TEST_SANITIZED", "none") not in ("", "none"):
        print("skip: preloading under a sanitizer")
        sys.exit(77)
    ENV.update(lib=os.environ["NTI_TEST_LIB"], emu=os.environ["NTI_TEST_EMU"], tool=os.environ["NTI_TEST_TOOL"],
               rank=os.environ["NTI_TEST_RANK"])
    v = sys.version_info
    if test != "nopython" and not ((3, 11) <= v[:2] <= (3, 14)):
        print("skip: Python %d.%d is not one nccltrace reads" % v[:2])
        sys.exit(77)
    TMP = tempfile.mkdtemp(prefix="nccltrace-py-")
    try:
        globals()["t_" + test]()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print("ok " + test)


if __name__ == "__main__":
    main()
