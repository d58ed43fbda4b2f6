#!/usr/bin/env python3
"""test_trust.py NCCLTRACE LIBNCCLTRACE EMU_LIBDIR FAULTS HEALTHY LAUNCH CASE --
analyze on evidence it should not take at face value (docs/analyze.md
"Whose files are read", "Jobs, attempts and duplicate ranks").

The victim's job: 2 ranks of examples/faults, rank 1 SIGKILLed at step 3
(analyze: rank_killed), its dumps in a group-writable team directory owned
by root, analyzed by root.  The attacker is the second local user of
tests/interpose/hostile_e2e.py (ntrhostile).  One CASE per meson test:

  plant_crash  the attacker's dumps of a crash (rank 1 SIGSEGV, earlier)
               under the victim's job id: left out with a line each, the
               verdict stays rank_killed, exit 2; --allow-owner UID reads
               them, and the two claims of each launcher rank are reported
               (duplicate ranks), never merged
  plant_exit   the attacker's `.exit` file saying rank 1 exited 0: left out,
               rank 1 still vanished
  later_job    the attacker's later healthy job: left out, the victim's job
               is analyzed (not "healthy", exit 2); the same later job of the
               victim's own: analyzed, and the verdict line says another job
               is present
  attempts     torchelastic (TORCHELASTIC_RUN_ID + TORCHELASTIC_RESTART_COUNT)
               and Slurm (SLURM_JOB_ID + SLURM_RESTART_COUNT) restarts: attempt
               0 killed a rank, attempt 1 ran healthy; analyze takes attempt 1
               and says so, --attempt 0 gives rank_killed, no duplicate ranks
  dup_rank     two runs under one NCCLTRACE_JOB without restart counts: each
               launcher rank claimed twice is a duplicate-rank finding (text
               and JSON) and one process per rank is analyzed

Exit 0 pass, 1 fail, 77 skip (not root).
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "interpose"))
from toolcheck import check, finish, run  # noqa: E402
import hostile_e2e  # noqa: E402  (other_user: the second local user)

NT, LIB, EMU, FAULTS, HEALTHY, LAUNCH, CASE = [os.path.abspath(a) for a in sys.argv[1:7]] + [sys.argv[7]]


def job(tmp, prog_args, env_extra, name):
    """Run 2 ranks under the tracer into tmp/name/{dumps,rings}, collect the
    rings: @return the dumps directory."""
    base = os.path.join(tmp, name)
    dumps, rings = os.path.join(base, "dumps"), os.path.join(base, "rings")
    os.makedirs(base)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NCCLTRACE_", "NCCL_", "TORCHELASTIC_", "SLURM_")) and k != "LD_PRELOAD"}
    env.update(LD_LIBRARY_PATH=EMU, NCCLEMU_DEVICES="8", NCCLTRACE_CHECK="off", NCCLTRACE_TIMEOUT="1",
               NCCLTRACE_DIR=dumps, NCCLTRACE_RING_DIR=rings, UNIQUE_ID_FILE=os.path.join(base, "uid"),
               LAUNCH_TIMEOUT="20", LAUNCH_GRACE="2")
    env.update(env_extra)
    env["LD_PRELOAD"] = LIB
    subprocess.run([LAUNCH, "2"] + prog_args, env=env, capture_output=True, timeout=60)
    del env["LD_PRELOAD"]
    if os.path.isdir(rings):
        subprocess.run([NT, "collect", "--rings", rings, "--dir", dumps], env=env, capture_output=True, timeout=30)
    return dumps


def killed(tmp, env, name="victim"):
    return job(tmp, [FAULTS, "sigkill", "--step", "3", "--rank", "1"], env, name)


def healthy(tmp, env, name):
    return job(tmp, [HEALTHY, "4"], env, name)


def team_dir(tmp):
    """The team directory: root's, group-writable (umask 002), as the docs allow."""
    d = os.path.join(tmp, "team")
    os.mkdir(d)
    os.chmod(d, 0o775)
    return d


def move(src, dst, owner=None):
    """Move every file of src into dst; owner: (uid, gid) to give them.
    @return the new paths."""
    out = []
    for f in sorted(os.listdir(src)):
        p = os.path.join(dst, f)
        shutil.move(os.path.join(src, f), p)
        if owner:
            os.chown(p, *owner)
        out.append(p)
    return out


def analyze(*args):
    p = run(NT, "analyze", *args, timeout=60)
    j = None
    if "--json" in args:
        try:
            j = json.loads(p.stdout)
        except ValueError:
            check(False, "analyze %s printed no JSON: %d %r" % (" ".join(args), p.returncode, p.stderr[-500:]))
    return p, j


def verdict(j):
    return (j or {}).get("verdict", {}).get("class")


def left_out_lines(p, paths):
    return [ln for ln in p.stderr.splitlines() if any(x in ln for x in paths) and "left out" in ln]


def expect_left_out(p, j, planted, uid, what):
    names = [x["file"] for x in (j or {}).get("inputs", {}).get("left_out", [])]
    check(sorted(names) == sorted(planted), "%s: inputs.left_out names the planted files: %r" % (what, names))
    lines = left_out_lines(p, planted)
    check(len(lines) == len(planted) and all("owned by uid %d" % uid in ln for ln in lines),
          "%s: one stderr line per planted file saying its owner: %r" % (what, p.stderr))
    check(p.returncode == 2, "%s: inputs left out make the exit status 2: %d" % (what, p.returncode))
    summary = (j or {}).get("verdict", {}).get("summary", "")
    check("left out" in summary, "%s: the verdict line says inputs were left out: %r" % (what, summary))


def case_plant_crash(tmp):
    uid, gid = hostile_e2e.other_user()
    team = team_dir(tmp)
    # The attacker's run comes first, so that its crash is the earliest event.
    planted = move(job(tmp, [FAULTS, "segv", "--step", "1", "--rank", "1"], {"NCCLTRACE_JOB": "team-42"}, "evil"),
                   team, (uid, gid))
    move(killed(tmp, {"NCCLTRACE_JOB": "team-42"}), team)
    p, j = analyze("--json", team)
    check(verdict(j) == "rank_killed", "planted crash dumps: verdict %r, want rank_killed" % verdict(j))
    expect_left_out(p, j, planted, uid, "planted crash")
    pt = run(NT, "analyze", team)
    check("left out: " in pt.stdout and all(x in pt.stdout for x in planted),
          "the text report lists the files left out: %r" % pt.stdout[-800:])
    # Told to read them: they are read, and each launcher rank claimed by
    # two processes is reported, not merged.
    for opt in (["--allow-owner", str(uid)], ["--any-owner"]):
        p, j = analyze("--json", *opt, team)
        dups = (j or {}).get("inputs", {}).get("duplicate_ranks", [])
        check(sorted(d.get("rank") for d in dups) == [0, 1],
              "%s: both launcher ranks are duplicates: %r" % (opt[0], dups))
        check(all(len(d.get("processes", [])) == 2 for d in dups), "%s: two processes per rank: %r" % (opt[0], dups))
        check(len((j or {}).get("ranks", [])) == 2, "%s: one process per launcher rank analyzed: %r" % (
            opt[0], [(r.get("rank"), r.get("pid")) for r in (j or {}).get("ranks", [])]))
        check("duplicate" in (j or {}).get("verdict", {}).get("summary", ""),
              "%s: the verdict line says ranks are duplicated: %r" % (opt[0], (j or {}).get("verdict")))
        want = 0 if verdict(j) == "healthy" else 1  # docs/analyze.md "Exit status"
        check(p.returncode == want and not left_out_lines(p, planted),
              "%s: nothing left out, exit %d: %d %r" % (opt[0], want, p.returncode, p.stderr))
    p = run(NT, "analyze", "--any-owner", team)
    check("duplicate rank" in p.stdout, "the text report names the duplicate ranks: %r" % p.stdout[-800:])


def case_plant_exit(tmp):
    uid, gid = hostile_e2e.other_user()
    team = team_dir(tmp)
    move(killed(tmp, {"NCCLTRACE_JOB": "team-43"}), team)
    p, j = analyze("--json", team)
    check(verdict(j) == "rank_killed", "the victim's job alone: %r" % verdict(j))
    r1 = [r for r in (j or {}).get("ranks", []) if r.get("rank") == 1]
    if not r1:
        check(False, "no rank 1 in the victim's evidence")
        return
    host, pid = r1[0]["host"], r1[0]["pid"]
    ex = os.path.join(team, "nccltrace-team-43-%s-%d.exit" % (host, pid))
    with open(ex, "w") as f:
        f.write("nccltrace-run-exit 1\nhost %s\npid %d\nppid 1\nrank 1\njob team-43\nexe faults\n"
                "start_ns 1\nend_ns %d\nexited 0\n" % (host, pid, 2 ** 62))
    os.chown(ex, uid, gid)
    p, j = analyze("--json", team)
    check(verdict(j) == "rank_killed", "planted .exit: verdict %r, want rank_killed" % verdict(j))
    expect_left_out(p, j, [ex], uid, "planted .exit")
    p, j = analyze("--json", "--allow-owner", str(uid), team)
    check(verdict(j) != "rank_killed", "--allow-owner reads the .exit file: %r" % verdict(j))


def case_later_job(tmp):
    uid, gid = hostile_e2e.other_user()
    team = team_dir(tmp)
    move(killed(tmp, {"NCCLTRACE_JOB": "team-44"}), team)
    planted = move(healthy(tmp, {"NCCLTRACE_JOB": "team-45"}, "evil"), team, (uid, gid))
    p, j = analyze("--json", team)
    check(verdict(j) == "rank_killed" and (j or {}).get("inputs", {}).get("job") == "team-44",
          "a planted later job: verdict %r of job %r, want rank_killed of team-44" % (
              verdict(j), (j or {}).get("inputs", {}).get("job")))
    expect_left_out(p, j, planted, uid, "planted later job")
    # The victim's own later job: analyzed, and the verdict line says that
    # another job lies in the inputs.
    for f in planted:
        os.chown(f, 0, 0)
    p = run(NT, "analyze", team)
    first = p.stdout.splitlines()[0] if p.stdout else ""
    check(first.startswith("healthy") and "1 other job" in first,
          "own later job: the verdict line says another job is present: %r" % first)
    check(p.returncode == 3, "another job present, none chosen: exit 3, got %d" % p.returncode)
    p = run(NT, "analyze", "--job", "team-45", team)
    check(p.returncode == 0, "the same job chosen with --job: exit 0 (healthy), got %d" % p.returncode)
    p, j = analyze("--json", team)
    check((j or {}).get("inputs", {}).get("other_jobs") == ["team-44"] and "other job" in
          (j or {}).get("verdict", {}).get("summary", ""), "JSON says so too: %r" % (j or {}).get("inputs"))


def case_attempts(tmp):
    for name, idvar, cvar, first in (("torchelastic", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "0"),
                                     ("slurm", "SLURM_JOB_ID", "SLURM_RESTART_COUNT", None)):
        d = os.path.join(tmp, name)
        os.mkdir(d)
        e0 = {idvar: "run-" + name}
        if first is not None:
            e0[cvar] = first
        move(killed(tmp, e0, name + "0"), d)
        move(healthy(tmp, {idvar: "run-" + name, cvar: "1"}, name + "1"), d)
        p, j = analyze("--json", d)
        inp = (j or {}).get("inputs", {})
        check(verdict(j) == "healthy" and inp.get("attempt") == 1 and inp.get("other_attempts") == [0],
              "%s: the latest attempt (1) analyzed, attempt 0 listed: %r %r" % (name, verdict(j), inp))
        check(not inp.get("duplicate_ranks") and len((j or {}).get("ranks", [])) == 2,
              "%s: attempts are not merged into duplicate ranks: %r" % (name, inp.get("duplicate_ranks")))
        check(p.returncode == 0, "%s: exit 0: %d %r" % (name, p.returncode, p.stderr))
        pt = run(NT, "analyze", d)
        first_line = pt.stdout.splitlines()[0] if pt.stdout else ""
        check("attempt 1" in first_line and "--attempt" in first_line,
              "%s: the verdict line says which attempt: %r" % (name, first_line))
        p, j = analyze("--json", "--attempt", "0", d)
        check(verdict(j) == "rank_killed" and (j or {}).get("inputs", {}).get("attempt") == 0,
              "%s: --attempt 0 gives the killed attempt: %r" % (name, verdict(j)))
        p = run(NT, "analyze", "--attempt", "7", d)
        check(p.returncode == 2 and "attempt 7" in p.stderr, "%s: --attempt 7 that is not there: %d %r" % (
            name, p.returncode, p.stderr))


def case_dup_rank(tmp):
    d = os.path.join(tmp, "dup")
    os.mkdir(d)
    move(killed(tmp, {"NCCLTRACE_JOB": "reused"}, "a"), d)
    move(healthy(tmp, {"NCCLTRACE_JOB": "reused"}, "b"), d)
    p, j = analyze("--json", d)
    dups = (j or {}).get("inputs", {}).get("duplicate_ranks", [])
    check(sorted(x.get("rank") for x in dups) == [0, 1], "duplicate ranks 0 and 1 reported: %r" % dups)
    for x in dups:
        procs = x.get("processes", [])
        check(len(procs) == 2 and sum(1 for q in procs if q.get("analyzed")) == 1 and
              all(q.get("pid") and q.get("host") for q in procs),
              "rank %r: two processes, one analyzed: %r" % (x.get("rank"), procs))
    check(len((j or {}).get("ranks", [])) == 2, "one process per launcher rank analyzed: %r" % (
        [(r.get("rank"), r.get("pid")) for r in (j or {}).get("ranks", [])]))
    pt = run(NT, "analyze", d)
    lines = [ln for ln in pt.stdout.splitlines() if ln.startswith("duplicate rank")]
    check(len(lines) == 2, "one text line per duplicate rank: %r" % pt.stdout[-800:])
    check("duplicate" in (pt.stdout.splitlines() or [""])[0], "the verdict line says so: %r" % pt.stdout[:300])


def main():
    if os.geteuid() != 0:
        print("skip: needs root (chown, a second user)")
        return 77
    fn = globals().get("case_" + CASE)
    if not fn:
        print("unknown case", CASE)
        return 1
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        fn(d)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
