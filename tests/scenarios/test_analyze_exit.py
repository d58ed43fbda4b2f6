#!/usr/bin/env python3
"""test_analyze_exit.py -- `nccltrace analyze`'s exit status per outcome
(docs/analyze.md "Exit status"), and its --json output against
docs/analyze.schema.json, on the real evidence of jobs run on the CPU
emulator with libnccltrace.so preloaded.

  test_analyze_exit.py CASE --launch launch.sh --nccltrace EXE --lib SO
      --emu-libdir DIR --healthy PROG --faults PROG --mkfix EXE --schema FILE

Cases (one meson test each, analyze_exit_CASE):
  healthy            a healthy job: 0
  mismatch           a collective mismatch: 1
  hang               a missing collective (the peers hang): 1
  unreadable         a healthy job beside a file that is no dump: 2
  unreadable_fault   a mismatch beside it: 2 (before 1)
  other_jobs         a healthy job beside another job's dump: 3; with --job: 0
  other_jobs_fault   a mismatch beside another job's dump: 3 (before 1); with --job: 1
  usage              an unknown option, no path: 2
  schema_self        the validator refuses damaged copies of a real document
Every run is made twice, text and --json, which must exit alike; every
JSON document must carry "schema": 1 and validate.
Exit: 0 pass, 1 fail.
"""
import argparse
import copy
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

FAIL = []


def check(cond, msg):
    print("%s: %s" % ("ok" if cond else "FAIL", msg))
    if not cond:
        FAIL.append(msg)


def run(cmd, env, timeout=60):
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        err += "\n[killed after %ds]" % timeout
    return p.returncode, out, err


class Job:
    def __init__(self, a, tmp):
        self.a, self.tmp, self.n = a, tmp, 0

    def env(self, name):
        e = dict(os.environ)
        for k in ("NCCLEMU_FAULT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCLTRACE_JOB"):
            e.pop(k, None)
        e.update({"LD_LIBRARY_PATH": self.a.emu_libdir, "NCCLTRACE_CHECK": "off", "NCCLEMU_DEVICES": "8"})
        return e

    def launch(self, ranks, prog, args):
        """Run a job of RANKS ranks; @return (dump directory, job id)."""
        self.n += 1
        d = os.path.join(self.tmp, "job%d" % self.n)
        job = "exit-%d-%d" % (os.getpid(), self.n)
        e = self.env(d)
        e.update({"LD_PRELOAD": os.path.abspath(self.a.lib), "NCCLTRACE_DIR": os.path.join(d, "dumps"),
                  "NCCLTRACE_RING_DIR": os.path.join(d, "rings"), "NCCLTRACE_TIMEOUT": "1",
                  "UNIQUE_ID_FILE": os.path.join(d, "uid"), "LAUNCH_TIMEOUT": "4", "LAUNCH_GRACE": "2",
                  "NCCLTRACE_JOB": job})
        os.makedirs(d)
        rc, out, err = run([self.a.launch, str(ranks), prog] + args, e, 40)
        rc2, out2, err2 = run([self.a.nccltrace, "collect", "--rings", os.path.join(d, "rings"),
                               "--dir", os.path.join(d, "dumps")], self.env(d))
        dumps = os.path.join(d, "dumps")
        check(os.path.isdir(dumps) and os.listdir(dumps), "job %s left dumps (launcher rc %s)" % (job, rc))
        return dumps, job

    def healthy(self):
        return self.launch(3, self.a.healthy, ["4"])

    def mismatch(self):
        return self.launch(4, self.a.faults, ["op", "--step", "3", "--rank", "1"])

    def hang(self):
        return self.launch(4, self.a.faults, ["skip", "--step", "3", "--rank", "1"])

    def junk(self, d):
        """A file named like a dump that is none: unreadable."""
        with open(os.path.join(d, "junk-rank9.zst"), "wb") as f:
            f.write(b"this is not a dump\n" * 50)

    def other_job(self, d):
        """Another job's dump in the same directory."""
        rc, out, err = run([self.a.mkfix, "dump", os.path.join(d, "stale.zst"), "--pid", "4242",
                            "--job", "stale-job"], self.env(d))
        check(rc == 0, "mkfix wrote another job's dump: %s" % err)


def analyze(a, env, *args):
    """Run analyze text and --json; both must exit alike.  @return (rc, doc, text)."""
    rc_t, out_t, err_t = run([a.nccltrace, "analyze"] + list(args), env)
    rc_j, out_j, err_j = run([a.nccltrace, "analyze", "--json"] + list(args), env)
    check(rc_t == rc_j, "analyze %s: text exits %s, --json %s" % (" ".join(args[-1:]), rc_t, rc_j))
    try:
        doc = json.loads(out_j)
    except ValueError:
        doc = None
    check(doc is not None, "analyze --json printed one JSON object (rc %s, stderr %r)" % (rc_j, err_j[-300:]))
    return rc_j, doc, out_t + err_t


def validate(a, doc, what):
    with open(a.schema) as f:
        schema = json.load(f)
    check(isinstance(doc, dict) and doc.get("schema") == 1, "%s: JSON carries \"schema\": 1 (got %r)" %
          (what, doc.get("schema") if isinstance(doc, dict) else doc))
    errs, how = schema_lite.check(doc, schema)
    for e in errs[:20]:
        print("  " + e)
    check(not errs, "%s: output valid against %s (%s, %d errors)" % (what, os.path.basename(a.schema), how, len(errs)))


def expect(a, env, want_rc, want_class, *args):
    rc, doc, text = analyze(a, env, *args)
    got = doc.get("verdict", {}).get("class") if isinstance(doc, dict) else None
    check(rc == want_rc, "analyze %s exits %d (%s): got %s" % (" ".join(args), want_rc, want_class, rc))
    if want_class:
        check(got == want_class, "verdict class %s: got %s" % (want_class, got))
    if rc != want_rc:
        print(text[-3000:])
    if doc is not None:
        validate(a, doc, "analyze %s" % " ".join(args))
    return doc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case")
    for k in ("launch", "nccltrace", "lib", "emu_libdir", "healthy", "faults", "mkfix", "schema"):
        p.add_argument("--" + k.replace("_", "-"), required=True)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="nccltrace-exit-")
    j = Job(a, tmp)
    env = j.env(tmp)
    c = a.case
    try:
        if c == "healthy":
            d, _ = j.healthy()
            expect(a, env, 0, "healthy", d)
        elif c == "mismatch":
            d, _ = j.mismatch()
            expect(a, env, 1, "collective_mismatch", d)
        elif c == "hang":
            d, _ = j.hang()
            expect(a, env, 1, "missing_collective", d)
        elif c == "unreadable":
            d, _ = j.healthy()
            j.junk(d)
            doc = expect(a, env, 2, "healthy", d)
            check(doc is not None and len(doc["inputs"]["unreadable"]) == 1, "inputs.unreadable names the file")
            # only that file: exit 2, and stderr says nothing was read
            only = os.path.join(tmp, "only-junk")
            os.makedirs(only)
            j.junk(only)
            rc, out, err = run([a.nccltrace, "analyze", only], env)
            check(rc == 2 and "nothing to analyze: 1 input unreadable" in err,
                  "only an unreadable input: exit 2 and what is missing said (rc %s): %s" % (rc, err.strip()))
        elif c == "unreadable_fault":
            d, _ = j.mismatch()
            j.junk(d)
            expect(a, env, 2, "collective_mismatch", d)
        elif c == "other_jobs":
            d, job = j.healthy()
            j.other_job(d)
            expect(a, env, 3, None, d)
            expect(a, env, 0, "healthy", "--job", job, d)
        elif c == "other_jobs_fault":
            d, job = j.mismatch()
            j.other_job(d)
            expect(a, env, 3, None, d)
            expect(a, env, 1, "collective_mismatch", "--job", job, d)
        elif c == "usage":
            rc, out, err = run([a.nccltrace, "analyze", "--no-such-option", tmp], env)
            check(rc == 2, "an unknown option exits 2: got %s" % rc)
            rc, out, err = run([a.nccltrace, "analyze"], env)
            check(rc == 2, "no path exits 2: got %s" % rc)
            rc, out, err = run([a.nccltrace, "analyze", "--help"], env)
            check(rc == 0 and "Exit status" in out, "--help documents the exit status (rc %s)" % rc)
        elif c == "schema_self":
            d, _ = j.mismatch()
            rc, doc, _ = analyze(a, env, d)
            with open(a.schema) as f:
                schema = json.load(f)
            check(doc is not None and not schema_lite.errors(doc, schema), "the real document validates")
            bad = {}
            for name, damage in {
                "no verdict.class": lambda x: x["verdict"].pop("class"),
                "class not a known one": lambda x: x["verdict"].__setitem__("class", "oops"),
                "ranks a string": lambda x: x.__setitem__("ranks", "0"),
                "undocumented key": lambda x: x["inputs"].__setitem__("surprise", 1),
                "schema 2": lambda x: x.__setitem__("schema", 2),
                "seq a string": lambda x: x["verdict"].__setitem__("seq", "3"),
                "member without rank": lambda x: x["comms"][0]["members"][0].pop("rank"),
            }.items():
                x = copy.deepcopy(doc)
                damage(x)
                bad[name] = schema_lite.errors(x, schema)
                check(bad[name], "a document with %s is refused: %s" % (name, (bad[name] or ["accepted"])[0]))
            try:
                schema_lite.errors({}, {"type": "object", "patternProperties": {}})
                check(False, "an unsupported keyword is an error")
            except schema_lite.SchemaError:
                check(True, "an unsupported keyword is an error")
        else:
            check(False, "unknown case %s" % c)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s: %s" % (c, "FAIL" if FAIL else "PASS"))
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
