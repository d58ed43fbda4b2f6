#!/usr/bin/env python3
"""test_bundle.py NCCLTRACE LAUNCH FAULTS EMU_LIBDIR LIVE_WRITER CASE -- `nccltrace bundle`
on the evidence of real jobs: 2-rank jobs of examples/faults.c on the CPU
emulator under `nccltrace run -- launch.sh 2 ...`, rank 1 SIGKILLed at a
step (its ring is left behind; the survivor dumps on SIGTERM; run writes an
exit file).

CASE:
  fault    bundle one such job: the archive lists MANIFEST first, then the
           verdict, the dump, the exit file and the dead rank's ring as a
           collected dump (the ring itself stays); the system's `tar xf`
           extracts it, every MANIFEST size matches its file; analyze of the
           bundle (text and --json), of its extracted directory and the
           bundle's own verdict.txt all equal analyze of the job's
           directories; decode and export read the bundle; a plain .tar
           bundle reads the same; a bundle kept in the dump directory is
           skipped by analyze and export of that directory; no temporary
           directory is left behind
  jobs     two jobs in the same directories: without --job the most recent
           is bundled, said on stderr, nothing of the other inside; --job
           picks the older one (its verdict = analyze --job of the
           directories); --job of no job: exit 2, naming the jobs present
  corrupt  a cut bundle, one with a flipped byte, a tar that is not a bundle,
           garbage named .tar.zst: analyze, decode and export exit 2 with
           one line naming the file and what is wrong, never a crash, and
           leave no temporary directory; --out without .tar/.tar.zst, or a
           PATH that does not exist: exit 2, nothing written
  live     the ring of a process still running (tests/tools/live_writer):
           its snapshot in the bundle is a dump marked alive, and analyze of
           the bundle says what analyze of the live ring says (the process
           "running", the same verdict), not "vanished"; the ring stays
  fr       our dumps with PyTorch Flight Recorder dumps of the same job
           (tests/data/torch-fr/merged-op): the FR dumps go under fr/, and
           analyze --json of the bundle equals that of the directory but for
           file paths (the FR dumps' times, their files' mtimes to the ns,
           survive the trip); FR dumps alone make a bundle too
Exit 0 pass, 1 fail.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

NT, LAUNCH, FAULTS, EMU, LIVE, CASE = sys.argv[1:7]
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def run(args, env, timeout=90, cwd=None):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


def job_env(tmp, job):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "NCCLTRACE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCLEMU_FAULT",
              "NCCLTRACE_DUMP_MODE", "PBS_JOBID", "LSB_JOBID", "OMPI_MCA_ess_base_jobid", "NCCLTRACE_DIR"):
        env.pop(k, None)
    tmpdir = os.path.join(tmp, "tmpdir")
    os.makedirs(tmpdir, exist_ok=True)
    env.update({"LD_LIBRARY_PATH": EMU, "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
                "NCCLTRACE_TIMEOUT": "30", "NCCLTRACE_CHECK": "off", "NCCLEMU_DEVICES": "8",
                "LAUNCH_TIMEOUT": "40", "LAUNCH_GRACE": "2", "TMPDIR": tmpdir})
    if job:
        env["NCCLTRACE_JOB"] = job
    return env


def sigkill_job(tmp, job, step):
    dumps = os.path.join(tmp, "dumps")
    env = job_env(tmp, job)
    p = run([NT, "run", "--dir", dumps, "--", LAUNCH, "2", FAULTS, "sigkill", "--step", str(step), "--rank", "1"],
            env)
    check(p.returncode == 137, "launch.sh exits 137 through run (got %d): %s" % (p.returncode, p.stderr[-800:]))
    return dumps, env


def tar_list(path, env):
    p = run(["tar", "tf", path], env)
    check(p.returncode == 0, "tar tf %s: %s" % (path, p.stderr))
    return p.stdout.split()


def no_tmp_left(env):
    left = os.listdir(env["TMPDIR"])
    check(left == [], "no temporary directory left in TMPDIR: %r" % left)


def manifest_of(path, env):
    top = tar_list(path, env)[0]
    p = subprocess.run(["tar", "xOf", path, top], capture_output=True, env=env)
    return top, p.stdout.decode()


def analyze(args, env):
    t = run([NT, "analyze"] + args, env)
    j = run([NT, "analyze", "--json"] + args, env)
    return t, j


with tempfile.TemporaryDirectory() as tmp:
    rings = os.path.join(tmp, "rings")
    if CASE == "fault":
        dumps, env = sigkill_job(tmp, "jobA", 2)
        ring_files = sorted(os.listdir(rings))
        check(len(ring_files) == 1, "the SIGKILLed rank's ring is left: %r" % ring_files)
        out = os.path.join(tmp, "job.tar.zst")
        b = run([NT, "bundle", "--rings", rings, "--out", out, dumps], env)
        print(b.stdout, b.stderr)
        check(b.returncode == 0, "bundle exits 0: %d %s" % (b.returncode, b.stderr))
        check(b.stderr == "", "one job: nothing on stderr: %r" % b.stderr)
        check(sorted(os.listdir(rings)) == ring_files, "the ring is not removed")
        names = tar_list(out, env)
        print("members:", names)
        check(names[:4] == ["job/MANIFEST", "job/verdict.txt", "job/verdict.json", "job/analyze.stderr"],
              "MANIFEST, then the verdict first: %r" % names[:4])
        dump_names = [n for n in os.listdir(dumps) if n.endswith(".zst")]
        exit_names = [n for n in os.listdir(dumps) if n.endswith(".exit")]
        check(len(dump_names) == 1 and len(exit_names) == 1, "the job left a dump and an exit file")
        for n in dump_names:
            check("job/dumps/" + n in names, "the dump %s is in the bundle" % n)
        for n in exit_names:
            check("job/exit/" + n in names, "the exit file %s is in the bundle" % n)
        snap = [n for n in names if n.startswith("job/rings/")]
        check(len(snap) == 1 and snap[0].endswith("-collected.zst"), "the ring as a collected dump: %r" % snap)
        # the system's tar extracts it; sizes as the MANIFEST says
        x = os.path.join(tmp, "x")
        os.makedirs(x)
        p = run(["tar", "xf", out, "-C", x], env)
        check(p.returncode == 0, "tar xf: %s" % p.stderr)
        man = open(os.path.join(x, "job", "MANIFEST")).read()
        check(man.startswith("nccltrace-bundle 1\n") and "\njob jobA\n" in man, "MANIFEST head:\n" + man)
        files = re.findall(r"^file ([0-9a-f]{16}) (\d+) \d+\.\d{9} (\S+)", man, re.M)
        check(len(files) == len(names) - 1, "every member but the MANIFEST listed: %d of %d" % (len(files), len(names)))
        for _, size, rel in files:
            f = os.path.join(x, "job", rel)
            check(os.path.isfile(f) and os.path.getsize(f) == int(size), "%s: %s bytes as listed" % (rel, size))
        # one verdict, however read
        t0, j0 = analyze([dumps, rings], env)
        check(t0.returncode == 1, "analyze of the directories finds the fault (exit %d)" % t0.returncode)
        check("vanished" in t0.stdout, "the verdict names the killed rank:\n" + t0.stdout)
        t1, j1 = analyze([out], env)
        check(t1.returncode == t0.returncode and j1.returncode == j0.returncode, "same exit status")
        check(t1.stdout == t0.stdout, "analyze of the bundle = of the directories:\n%s\n---\n%s" % (t1.stdout, t0.stdout))
        check(json.loads(j1.stdout) == json.loads(j0.stdout), "analyze --json of the bundle = of the directories")
        check("bundle %s: job jobA" % out in t1.stderr, "analyze says what the bundle holds: %r" % t1.stderr)
        # a bundle kept in the dump directory is no extra evidence there
        shutil.copy(out, os.path.join(dumps, "kept.tar.zst"))
        t4, j4 = analyze([dumps, rings], env)
        check(t4.stdout == t0.stdout and t4.returncode == t0.returncode,
              "a bundle in the dump directory changes nothing (exit %d): %s" % (t4.returncode, t4.stderr))
        e4 = run([NT, "export", "--chrome", "-o", os.path.join(tmp, "t4.json"), dumps, rings], env)
        check(e4.returncode == 0, "export skips the bundle in the dump directory: %s" % e4.stderr)
        os.unlink(os.path.join(dumps, "kept.tar.zst"))
        t2, _ = analyze([os.path.join(x, "job")], env)
        check(t2.stdout == t0.stdout, "analyze of the extracted directory = of the directories")
        check(open(os.path.join(x, "job", "verdict.txt")).read() == t0.stdout, "the bundle's verdict.txt is analyze's")
        check(json.loads(open(os.path.join(x, "job", "verdict.json")).read()) == json.loads(j0.stdout),
              "the bundle's verdict.json is analyze --json's")
        d = run([NT, "decode", out], env)
        check(d.returncode == 0 and d.stdout.count("\n== ") + d.stdout.startswith("== ") == 2,
              "decode prints the dump and the ring snapshot: %d %s" % (d.returncode, d.stderr))
        e = run([NT, "export", "--chrome", "-o", os.path.join(tmp, "t.json"), out], env)
        check(e.returncode == 0 and "2 processes" in e.stderr, "export reads the bundle: %s" % e.stderr)
        # a plain tar: Python's tarfile reads it, and so does analyze
        plain = os.path.join(tmp, "job.tar")
        check(run([NT, "bundle", "--rings", rings, "--out", plain, dumps], env).returncode == 0, "a .tar bundle")
        with tarfile.open(plain) as tf:
            check(tf.getnames()[0] == "job/MANIFEST", "tarfile reads the plain bundle")
        t3, _ = analyze([plain], env)
        check(t3.stdout == t0.stdout, "analyze of the plain bundle = of the directories")
        no_tmp_left(env)
    elif CASE == "jobs":
        dumps, env = sigkill_job(tmp, "jobA", 2)
        dumps, env = sigkill_job(tmp, "jobB", 3)
        out = os.path.join(tmp, "latest.tar.zst")
        b = run([NT, "bundle", "--rings", rings, "--out", out, dumps], env)
        check(b.returncode == 0, "bundle exits 0: %s" % b.stderr)
        check("reading job jobB, the most recent" in b.stderr and "jobA" in b.stderr,
              "the choice is said on stderr: %r" % b.stderr)
        names = tar_list(out, env)
        ev = [n for n in names if "/dumps/" in n or "/rings/" in n or "/exit/" in n]
        check(ev and all("jobB" in n for n in ev), "only job B's files: %r" % ev)
        _, man = manifest_of(out, env)
        check("\njob jobB\n" in man, "MANIFEST names job B:\n" + man)
        check(re.search(r"^note \d+ files of other jobs left out", man, re.M) is not None,
              "the MANIFEST says other jobs' files were left out:\n" + man)
        older = os.path.join(tmp, "older.tar.zst")
        b = run([NT, "bundle", "--rings", rings, "--job", "jobA", "--out", older, dumps], env)
        check(b.returncode == 0 and b.stderr == "", "--job jobA: exit 0, nothing to say: %r" % b.stderr)
        ev = [n for n in tar_list(older, env) if "/dumps/" in n or "/rings/" in n or "/exit/" in n]
        check(len(ev) == 3 and all("jobA" in n for n in ev), "job A's dump, ring and exit file: %r" % ev)
        # the same verdict, but for what the directories hold besides
        # (inputs, "other jobs" notes)
        _, j0 = analyze(["--job", "jobA", dumps, rings], env)
        _, j1 = analyze([older], env)
        a, c = json.loads(j0.stdout), json.loads(j1.stdout)
        check(c["inputs"]["job"] == "jobA" and not c["inputs"]["other_jobs"], "the bundle holds job A alone")
        for k in ("ranks", "comms", "evidence", "secondary"):
            check(a[k] == c[k], "analyze of job A's bundle = analyze --job jobA of the directories: %s" % k)
        va, vc = dict(a["verdict"]), dict(c["verdict"])
        va["summary"] = re.sub(r" \[1 other job in the inputs[^]]*\]", "", va["summary"])
        check(va == vc, "the same verdict:\n%r\n%r" % (va, vc))
        check(j1.returncode == 1, "job A's fault: exit 1 (got %d)" % j1.returncode)
        b = run([NT, "bundle", "--rings", rings, "--job", "nope", "--out", os.path.join(tmp, "n.tar.zst"), dumps], env)
        check(b.returncode == 2 and "no evidence of job nope" in b.stderr and "jobA" in b.stderr,
              "--job of no job: exit 2, the jobs named: %d %r" % (b.returncode, b.stderr))
        check(not os.path.exists(os.path.join(tmp, "n.tar.zst")), "no bundle written for no job")
        no_tmp_left(env)
    elif CASE == "corrupt":
        dumps, env = sigkill_job(tmp, "jobA", 2)
        good = os.path.join(tmp, "good.tar.zst")
        check(run([NT, "bundle", "--rings", rings, "--out", good, dumps], env).returncode == 0, "bundle")
        data = open(good, "rb").read()
        bad = {}
        bad["cut.tar.zst"] = (data[: len(data) // 2], "truncated")
        bad["cut_end.tar.zst"] = (data[:-3], "truncated")
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x10
        bad["flip.tar.zst"] = (bytes(flipped), "corrupt")
        bad["garbage.tar.zst"] = (b"this is not an archive\n" * 40, "not a tar archive")
        other = os.path.join(tmp, "src")
        os.makedirs(other)
        open(os.path.join(other, "readme"), "w").write("hello\n")
        subprocess.run(["tar", "cf", os.path.join(tmp, "other.tar"), "-C", tmp, "src"], check=True)
        bad["other.tar"] = (open(os.path.join(tmp, "other.tar"), "rb").read(), "not an nccltrace bundle")
        # the plain form, cut inside a member
        plain = os.path.join(tmp, "p.tar")
        run([NT, "bundle", "--rings", rings, "--out", plain, dumps], env)
        pd = open(plain, "rb").read()
        bad["pcut.tar"] = (pd[:3000], "truncated")
        pf = bytearray(pd)
        with tarfile.open(plain) as tf:
            pf[tf.getmember("p/verdict.txt").offset_data + 10] ^= 0x01  # inside verdict.txt's bytes
        bad["pflip.tar"] = (bytes(pf), "the bundle is corrupt")
        for name, (content, want) in bad.items():
            path = os.path.join(tmp, name)
            open(path, "wb").write(content)
            for cmd in (["analyze", path], ["decode", path], ["export", "--chrome", "-o", path + ".json", path]):
                p = run([NT] + cmd, env)
                lines = [l for l in p.stderr.splitlines() if l.startswith("nccltrace: %s: " % path)]
                check(p.returncode == 2, "%s %s: exit 2 (got %d): %s" % (cmd[0], name, p.returncode, p.stderr))
                check(len(lines) == 1 and want in lines[0],
                      "%s %s: one line naming the file and '%s': %r" % (cmd[0], name, want, p.stderr))
        p = run([NT, "bundle", "--rings", rings, "--out", os.path.join(tmp, "y.tar.zst"), dumps, tmp + "/nope"], env)
        check(p.returncode == 2 and "nope: No such file" in p.stderr and not os.path.exists(tmp + "/y.tar.zst"),
              "a PATH that is not there: exit 2, nothing written (%d): %r" % (p.returncode, p.stderr))
        p = run([NT, "bundle", "--rings", rings, "--out", os.path.join(tmp, "x.zip"), dumps], env)
        check(p.returncode == 2 and ".tar.zst" in p.stderr, "--out x.zip: exit 2 (%d): %r" % (p.returncode, p.stderr))
        no_tmp_left(env)
    elif CASE == "live":
        env = job_env(tmp, None)
        env["NCCLTRACE_DIR"] = os.path.join(tmp, "no-dumps")
        rd = os.path.join(tmp, "live")
        os.makedirs(rd, mode=0o700)
        w = subprocess.Popen([LIVE, rd], stdout=subprocess.PIPE, text=True)
        try:
            ring = w.stdout.readline().strip()
            check(w.stdout.readline().strip() == "ready", "live_writer is ready")
            _, j0 = analyze([rd], env)
            out = os.path.join(tmp, "live.tar.zst")
            b = run([NT, "bundle", "--rings", rd, "--out", out], env)
            check(b.returncode == 0, "bundle exits 0: %s" % b.stderr)
            _, j1 = analyze([out], env)
            d = run([NT, "decode", "--json", out], env)
        finally:
            w.kill()
            w.wait()
        check(os.path.exists(ring), "the live ring stays")
        a, c = json.loads(j0.stdout), json.loads(j1.stdout)
        check([r["state"] for r in a["ranks"]] == ["running"], "analyze of the live ring: running: %r" % a["ranks"])
        check([r["state"] for r in c["ranks"]] == ["running"], "analyze of its snapshot: running: %r" % c["ranks"])
        check(a["verdict"] == c["verdict"] and a["comms"] == c["comms"],
              "the same verdict:\n%r\n%r" % (a["verdict"], c["verdict"]))
        t = json.loads(d.stdout)["trigger"] if d.returncode == 0 else {}
        check(t.get("kind") == "collected" and t.get("reason", "").startswith("bundled: pid "),
              "the snapshot is a collected dump saying so: %r" % t)
        no_tmp_left(env)
    elif CASE == "fr":
        env = job_env(tmp, None)
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "torch-fr", "merged-op")
        # a copy, with mtimes to the ns, so that the check does not lean on
        # how the checkout stored them
        d = os.path.join(tmp, "merged-op")
        shutil.copytree(src, d)
        for i, n in enumerate(sorted(os.listdir(os.path.join(d, "torch-fr")))):
            os.utime(os.path.join(d, "torch-fr", n), ns=(1796432104173139165 + i * 1001, 1796432104173139165 + i * 1001))
        out = os.path.join(tmp, "fr.tar.zst")
        b = run([NT, "bundle", "--no-rings", "--out", out, d], env)
        check(b.returncode == 0, "bundle exits 0: %s" % b.stderr)
        names = tar_list(out, env)
        check(sorted(n for n in names if "/fr/" in n) == ["fr/fr/rank_%d" % i for i in range(4)],
              "the four FR dumps under fr/: %r" % names)
        _, man = manifest_of(out, env)
        check("Flight Recorder dumps carry no job id" in man, "the MANIFEST says FR dumps have no job id")
        _, j0 = analyze([d], env)
        _, j1 = analyze([out], env)

        def strip(o):
            if isinstance(o, dict):
                return {k: strip(v) for k, v in o.items() if k not in ("path", "file")}
            if isinstance(o, list):
                return [strip(v) for v in o]
            return o
        a, c = json.loads(j0.stdout), json.loads(j1.stdout)
        check(j0.returncode == j1.returncode == 1, "a fault, both ways: %d %d" % (j0.returncode, j1.returncode))
        check(len(a["torch_fr"]) == 4, "analyze reads the 4 FR dumps")
        for k in a:
            check(strip(a[k]) == strip(c[k]), "analyze --json of the bundle = of the directory: %s\n%r\n%r"
                  % (k, strip(a[k]), strip(c[k])))
        # FR dumps alone: bundled, said so, and analyzed from the bundle
        only = os.path.join(tmp, "fronly.tar.zst")
        b = run([NT, "bundle", "--no-rings", "--out", only, os.path.join(d, "torch-fr")], env)
        check(b.returncode == 0 and "Flight Recorder dumps only" in b.stderr, "FR dumps alone: %r" % b.stderr)
        t0, _ = analyze([os.path.join(d, "torch-fr")], env)
        t1, _ = analyze([only], env)
        check(t1.returncode == t0.returncode == 1 and t1.stdout.splitlines()[0] == t0.stdout.splitlines()[0],
              "the FR-only bundle's verdict is the directory's:\n%s\n%s" % (t0.stdout[:300], t1.stdout[:300]))
        no_tmp_left(env)
    else:
        check(False, "unknown case " + CASE)

print("FAILED: %d" % len(fails) if fails else "ok")
sys.exit(1 if fails else 0)
