#!/usr/bin/env python3
"""test_fr.py NCCLTRACE DATA CASE -- `nccltrace analyze` on PyTorch Flight
Recorder dumps (tools/fr, tools/analyze/fr.c; docs/analyze.md "PyTorch
Flight Recorder dumps").

DATA is tests/data/torch-fr: real FR dumps of torch 2.11 on the emulator
(README there).  Each fault case's FR-only verdict must be the one
faults.py documents (class, field, seq, ranks) and its summary the golden
one (DATA/golden.json); hostile variants (truncated, an opcode that would
call Python, another format version, another owner, a memory limit) are
made here from the real files with Python's own pickle, never by hand.
"""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

NT, DATA, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
GOLDEN = os.path.join(DATA, "golden.json")
UPDATE = os.environ.get("NTT_FR_UPDATE") == "1"   # rewrite golden.json from this build


def analyze(*args):
    p = subprocess.run([NT, "analyze", "--json"] + list(args), capture_output=True, text=True, timeout=60)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = None
    return p.returncode, out, p.stderr


def ran(rc, d):
    """The analysis ran on all its input: exit 0 for a healthy verdict, 1
    for any other (docs/analyze.md "Exit status")."""
    return d is not None and rc == (0 if d["verdict"]["class"] == "healthy" else 1)


def text(*args):
    p = subprocess.run([NT, "analyze"] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        print("FAIL " + CASE + ": " + what)
        sys.exit(1)


def expect(d, cls, field=None, seq=None, ranks=None, pg="0"):
    v = d["verdict"]
    check(v["class"] == cls, "class %s, want %s: %s" % (v["class"], cls, v["summary"]))
    check(v["field"] == field, "field %s, want %s" % (v["field"], field))
    check(v["seq"] == seq, "seq %s, want %s" % (v["seq"], seq))
    if ranks is not None:
        check(v["ranks"] == ranks, "ranks %s, want %s" % (v["ranks"], ranks))
    check(v.get("process_group") == pg, "process_group %s, want %s" % (v.get("process_group"), pg))
    check(all(e["source"] == "torch-fr" for e in d["evidence"]), "an FR-only evidence entry not marked torch-fr")


def golden(name, summary):
    g = json.load(open(GOLDEN)) if os.path.exists(GOLDEN) else {}
    if UPDATE:
        g[name] = summary
        with open(GOLDEN, "w") as f:
            json.dump(g, f, indent=1, sort_keys=True)
            f.write("\n")
        return
    check(g.get(name) == summary, "summary differs from golden.json:\n  got  %s\n  want %s" % (summary, g.get(name)))


def copy(case, tmp):
    d = os.path.join(tmp, case)
    shutil.copytree(os.path.join(DATA, case), d)
    return d


# the fault cases of examples/torch/faults.py (4 ranks, rank 1 faulty) and
# the send/recv cases of tests/torch/fr_cases.py
FAULTS = {
    "op": ("collective_mismatch", "op", 2, [1]),
    "shape": ("collective_mismatch", "count", 2, [1]),
    "order": ("collective_mismatch", "op", 2, [1]),
    "skip": ("missing_collective", None, 2, [1]),
    "p2p_ok": ("healthy", None, None, []),
    "p2p_ok_json": ("healthy", None, None, []),
    "p2p_count": ("p2p_mismatch", "count", 1, [0, 1]),
}


def t_fault(tmp):
    name = CASE[len("fault_"):]
    cls, field, seq, ranks = FAULTS[name]
    rc, d, err = analyze(os.path.join(DATA, name))
    check(ran(rc, d), "exit %d: %s" % (rc, err))
    expect(d, cls, field, seq, ranks, pg=None if cls == "healthy" else "0")
    check(len(d["torch_fr"]) == 4, "%d FR dumps read, want 4" % len(d["torch_fr"]))
    form = "json" if name.endswith("_json") else "pickle"
    check(all(x["form"] == form for x in d["torch_fr"]), "form is not %s" % form)
    if cls not in ("healthy", "p2p_mismatch"):
        check(d["verdict"].get("stack") and "faults.py" in d["verdict"]["stack"][0],
              "no Python site from the FR frames: %s" % d["verdict"].get("stack"))
    if cls == "healthy":
        check("no reduction op and no root" in d["verdict"]["summary"], "a healthy FR verdict must say what FR cannot see")
    golden(name, d["verdict"]["summary"])
    rc2, out, _ = text(os.path.join(DATA, name))
    check(rc2 == rc and out.splitlines()[0] == d["verdict"]["summary"], "text verdict line differs from JSON")


def t_merged(tmp):
    """Our dumps and FR's of the same job: our verdict, one timeline, on one clock."""
    rc, d, err = analyze(os.path.join(DATA, "merged-op"))
    check(ran(rc, d), "exit %d: %s" % (rc, err))
    v = d["verdict"]
    check(v["class"] == "collective_mismatch" and v["field"] == "op" and v["seq"] == 2 and v["ranks"] == [1],
          "merged verdict: %s" % v["summary"])
    check(v["comm"] is not None, "the merged verdict must come from our evidence (a comm)")
    src = {e["source"] for e in d["evidence"]}
    check(src == {"nccltrace", "torch-fr"}, "sources in the timeline: %s" % sorted(src))
    ts = [e["t_ns"] for e in d["evidence"] if e["t_ns"]]
    check(ts == sorted(ts), "the merged timeline is not in time order")
    # one clock: each rank's FR entry of seq 2 and our call record of seq 2
    # are the same call, a few microseconds apart (the FR entry is made in
    # ProcessGroupNCCL just before it calls NCCL)
    for r in range(4):
        fr = [e for e in d["evidence"] if e["source"] == "torch-fr" and e["rank"] == r and " seq 2:" in e["text"]]
        ours = [e for e in d["evidence"] if e["source"] == "nccltrace" and e["rank"] == r and e["kind"] == "call"
                and " seq 2:" in e["text"]]
        check(fr and ours, "rank %d: seq 2 missing from one source" % r)
        gap = ours[0]["t_ns"] - fr[0]["t_ns"]
        check(0 <= gap < 5_000_000, "rank %d: FR entry and our record of seq 2 are %d ns apart" % (r, gap))
    rc, out, _ = text(os.path.join(DATA, "merged-op"))
    check(" torch-fr " in out and " nccltrace " in out, "text timeline does not show each item's source")


def t_truncated(tmp):
    """A dump that stops early: refused with why, the rank absent from the FR evidence."""
    d0 = copy("op", tmp)
    p = os.path.join(d0, "rank_1")
    b = open(p, "rb").read()
    open(p, "wb").write(b[: len(b) // 2])
    rc, d, err = analyze(d0)
    check(rc == 2, "exit %d, want 2 (unreadable input)" % rc)
    un = d["inputs"]["unreadable"]
    check(len(un) == 1 and un[0]["file"].endswith("rank_1") and "truncated" in un[0]["reason"],
          "unreadable: %s" % un)
    expect(d, "missing_collective", None, 2, [1])
    check("left no Flight Recorder dump" in d["verdict"]["summary"], d["verdict"]["summary"])


def t_global(tmp):
    """An opcode that would import and call, inside a file that starts as an
    FR dump does: refused by name and offset."""
    for op, name in ((b"cbuiltins\neval\n", "GLOBAL"), (b"R", "REDUCE"), (b"\x93", "STACK_GLOBAL"),
                     (b"b", "BUILD")):
        d0 = copy("op", os.path.join(tmp, name))
        p = os.path.join(d0, "rank_1")
        b = open(p, "rb").read()
        check(b[2:4] == b"}(", "rank_1 does not start as c10's pickler writes: %r" % b[:4])
        open(p, "wb").write(b[:4] + op + b[4:])   # inside the top dict: it still looks like a dump
        rc, d, err = analyze(d0)
        un = d["inputs"]["unreadable"]
        check(rc == 2 and len(un) == 1, "%s: exit %d, unreadable %s" % (name, rc, un))
        check(name + " (opcode" in un[0]["reason"] and "at offset 4" in un[0]["reason"],
              "%s: reason %s" % (name, un[0]["reason"]))


def t_versions(tmp):
    """Other writers: Python's pickle at protocols 2..5, the 2.3 layout
    (PyTorch 2.4: no thread or output dtype fields, no comm_lib_version),
    an unknown major version (refused)."""
    src = pickle.load(open(os.path.join(DATA, "skip", "rank_0"), "rb"))
    for proto in (2, 3, 4, 5):
        d0 = copy("skip", os.path.join(tmp, "p%d" % proto))
        for r in range(4):
            x = pickle.load(open(os.path.join(DATA, "skip", "rank_%d" % r), "rb"))
            with open(os.path.join(d0, "rank_%d" % r), "wb") as f:
                pickle.dump(x, f, protocol=proto)
        rc, d, err = analyze(d0)
        check(ran(rc, d), "protocol %d: exit %d %s" % (proto, rc, err))
        expect(d, "missing_collective", None, 2, [1])
    d0 = copy("skip", os.path.join(tmp, "v23"))
    for r in range(4):
        x = pickle.load(open(os.path.join(DATA, "skip", "rank_%d" % r), "rb"))
        x["version"] = "2.3"
        x.pop("comm_lib_version", None)
        for e in x["entries"]:
            for k in ("thread_id", "thread_name", "output_dtypes"):
                e.pop(k, None)
        with open(os.path.join(d0, "rank_%d" % r), "wb") as f:
            pickle.dump(x, f, protocol=2)
    rc, d, err = analyze(d0)
    check(ran(rc, d), "2.3 layout: exit %d %s" % (rc, err))
    expect(d, "missing_collective", None, 2, [1])
    check(all(x["version"] == "2.3" for x in d["torch_fr"]), "version not read")
    x["version"] = "3.0"
    with open(os.path.join(d0, "rank_3"), "wb") as f:
        pickle.dump(x, f, protocol=2)
    rc, d, err = analyze(d0)
    un = d["inputs"]["unreadable"]
    check(rc == 2 and len(un) == 1 and "version 3.0" in un[0]["reason"], "version 3.0: %s" % un)


def t_owner(tmp):
    """FR files of another owner are left out like ours, unless allowed."""
    d0 = copy("op", tmp)
    os.chown(d0, 0, 0)
    os.chown(os.path.join(d0, "rank_2"), 12345, 12345)
    rc, d, err = analyze(d0)
    lo = d["inputs"]["left_out"]
    check(rc == 2 and len(lo) == 1 and lo[0]["file"].endswith("rank_2") and lo[0]["uid"] == 12345,
          "left out: %s" % lo)
    check(len(d["torch_fr"]) == 3, "a left-out FR file was read")
    rc, d, err = analyze(d0, "--allow-owner", "12345")
    check(ran(rc, d) and len(d["torch_fr"]) == 4, "--allow-owner: exit %d, %d dumps" % (rc, len(d["torch_fr"])))
    expect(d, "collective_mismatch", "op", 2, [1])


def t_memory(tmp):
    """--max-memory bounds what an FR dump may take: refused with why."""
    rc, d, err = analyze("--max-memory", "1K", os.path.join(DATA, "op"))
    lines = [l for l in err.splitlines() if "rank_" in l]
    check(rc == 2 and len(lines) == 4 and all("memory limit" in l for l in lines),
          "1K: exit %d, stderr %s" % (rc, err))
    rc, d, err = analyze("--max-memory", "64K", os.path.join(DATA, "op"))
    check(ran(rc, d) and len(d["torch_fr"]) == 4, "64K: exit %d %s" % (rc, err))


def t_other_files(tmp):
    """Files found in a directory that are no FR dump are not evidence."""
    d0 = copy("op", tmp)
    open(os.path.join(d0, "notes.1"), "w").write("not a dump\n")
    open(os.path.join(d0, "log_2"), "wb").write(b"\x80\x02K\x01.")   # a pickle, but not of a dict
    rc, d, err = analyze(d0)
    check(ran(rc, d) and not d["inputs"]["unreadable"], "exit %d, unreadable %s" % (rc, d["inputs"]["unreadable"]))
    expect(d, "collective_mismatch", "op", 2, [1])


TESTS = {"merged": t_merged, "truncated": t_truncated, "global": t_global, "versions": t_versions,
         "owner": t_owner, "memory": t_memory, "other_files": t_other_files}
TESTS.update({"fault_" + k: t_fault for k in FAULTS})


def main():
    if CASE not in TESTS:
        print("unknown case " + CASE)
        sys.exit(2)
    tmp = tempfile.mkdtemp(prefix="ntt-fr-")
    try:
        TESTS[CASE](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS " + CASE)


if __name__ == "__main__":
    main()
