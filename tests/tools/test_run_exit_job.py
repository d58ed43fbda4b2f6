#!/usr/bin/env python3
"""test_run_exit_job.py NCCLTRACE LAUNCH FAULTS EMU_LIBDIR CASE -- the
exit-status file of `nccltrace run` carries the job id its command's dumps
carry, and NCCLTRACE_DUMP_MODE covers it and the dump directory.

A 2-rank job of examples/faults.c on the CPU emulator under
`nccltrace run -- launch.sh 2 ...`, rank 1 SIGKILLed at step 2 (launch.sh then
exits 137 and the survivor dumps on SIGTERM).

CASE:
  derived   no launcher id anywhere: the tracer derives the job id from the
            communicator (docs/identity.md); the exit file is named
            nccltrace-<that id>-<host>-<pid>.exit (fields as in dump names) and says "job <that id>",
            never "nojob"; analyze ties it to the job (the verdict names
            launch.sh "started by nccltrace run")
  childenv  the id is set in the ranks' environment only (torchrun sets
            TORCHELASTIC_RUN_ID for its workers, not for itself): the exit
            file carries the ranks' id, not run's (none)
  oldname   an exit file of the old form (nccltrace-nojob-..., "job -") next
            to the same dumps is still read and tied to the job
  mode      NCCLTRACE_DUMP_MODE=0640 under umask 022: the dump directory is
            0750, the dumps and the exit file 0640; also when run makes the
            directory itself (a command that fails before any NCCL call)
  default   NCCLTRACE_DUMP_MODE unset: directory 0700, dumps and exit file 0600
Exit 0 pass, 1 fail.
"""
import json
import os
import re
import socket
import stat
import subprocess
import sys
import tempfile

NT, LAUNCH, FAULTS, EMU, CASE = sys.argv[1:6]
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def run(args, env, timeout=90):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def job_env(tmp, extra=None):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "NCCLTRACE_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCLEMU_FAULT",
              "NCCLTRACE_DUMP_MODE", "PBS_JOBID", "LSB_JOBID", "OMPI_MCA_ess_base_jobid"):
        env.pop(k, None)
    env.update({"LD_LIBRARY_PATH": EMU, "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
                "NCCLTRACE_TIMEOUT": "30", "NCCLTRACE_CHECK": "off", "NCCLEMU_DEVICES": "8",
                "LAUNCH_TIMEOUT": "40", "LAUNCH_GRACE": "2"})
    env.update(extra or {})
    return env


def sigkill_job(tmp, extra=None):
    """Run the job; return (dump dir, exit files, dumps' job ids)."""
    dumps = os.path.join(tmp, "dumps")
    env = job_env(tmp, extra)
    p = run([NT, "run", "--dir", dumps, "--", LAUNCH, "2", FAULTS, "sigkill", "--step", "2", "--rank", "1"], env)
    check(p.returncode == 137, "launch.sh exits 137 through run (got %d): %s" % (p.returncode, p.stderr[-800:]))
    names = sorted(os.listdir(dumps)) if os.path.isdir(dumps) else []
    exits = [n for n in names if n.endswith(".exit")]
    jobs = set()
    for n in names:
        if n.endswith(".zst"):
            d = run([NT, "decode", "--json", os.path.join(dumps, n)], env)
            if d.returncode == 0:
                jobs.add(json.loads(d.stdout)["header"]["job"])
    print("files:", names, "dump jobs:", jobs)
    check(len(exits) == 1, "one exit file: %r" % exits)
    check(len(jobs) == 1 and "" not in jobs, "the dumps carry one job id: %r" % jobs)
    return dumps, exits, jobs


def tied(dumps, env):
    """analyze ties the exit file to the job: it names run's launcher (after
    `collect` made a dump of the SIGKILLed rank's ring, as a user would)."""
    run([NT, "collect", "--rings", env["NCCLTRACE_RING_DIR"], "--dir", dumps], env)
    t = run([NT, "analyze", dumps], env).stdout
    check("started by nccltrace run" in t, "analyze uses the exit file:\n" + t)


def comp(s):
    """A file-name field as the tracer writes it: '-' separates fields."""
    return re.sub(r"[^A-Za-z0-9._]", "_", s)


def named_after(dumps, exits, job):
    ok = len(exits) == 1 and exits[0].startswith("nccltrace-%s-%s-" % (comp(job), comp(socket.gethostname())))
    check(ok, "exit file named after the dumps' job %s: %r" % (job, exits))
    check(not any("nojob" in e for e in exits), "no 'nojob' exit file: %r" % exits)
    if exits:
        body = open(os.path.join(dumps, exits[0])).read()
        check("\njob %s\n" % job in body, "exit file says 'job %s': %r" % (job, body))


def modes(path):
    return stat.S_IMODE(os.stat(path).st_mode)


with tempfile.TemporaryDirectory() as tmp:
    if CASE == "derived":
        dumps, exits, jobs = sigkill_job(tmp)
        if jobs:
            job = next(iter(jobs))
            check(re.fullmatch(r"c[0-9a-f]{16}", job) is not None, "a derived id: %r" % job)
            named_after(dumps, exits, job)
        tied(dumps, job_env(tmp))
    elif CASE == "childenv":
        dumps, exits, jobs = sigkill_job(tmp, {"RANKENV_0": "TORCHELASTIC_RUN_ID=te-job-7",
                                               "RANKENV_1": "TORCHELASTIC_RUN_ID=te-job-7"})
        check(jobs == {"te-job-7"}, "the ranks' launcher id: %r" % jobs)
        named_after(dumps, exits, "te-job-7")
        tied(dumps, job_env(tmp))
    elif CASE == "oldname":
        dumps, exits, jobs = sigkill_job(tmp)
        if exits:
            src = os.path.join(dumps, exits[0])
            body = re.sub(r"\njob [^\n]*\n", "\njob -\n", open(src).read())
            pid = re.search(r"\npid (\d+)\n", body).group(1)
            os.unlink(src)
            with open(os.path.join(dumps, "nccltrace-nojob-%s-%s.exit" % (comp(socket.gethostname()), pid)), "w") as f:
                f.write(body)
        tied(dumps, job_env(tmp))
    elif CASE in ("mode", "default"):
        want_f, want_d = (0o640, 0o750) if CASE == "mode" else (0o600, 0o700)
        extra = {"NCCLTRACE_DUMP_MODE": "0640"} if CASE == "mode" else {}
        os.umask(0o022)
        dumps, exits, jobs = sigkill_job(tmp, extra)
        check(modes(dumps) == want_d, "dump directory %o, want %o" % (modes(dumps), want_d))
        for n in os.listdir(dumps):
            check(modes(os.path.join(dumps, n)) == want_f, "%s: %o, want %o" % (n, modes(os.path.join(dumps, n)), want_f))
        # run makes the directory itself: its command fails before any NCCL call
        own = os.path.join(tmp, "own")
        p = run([NT, "run", "--dir", own, "--", "sh", "-c", "exit 3"], job_env(tmp, extra))
        check(p.returncode == 3, "exit 3 passed on (got %d)" % p.returncode)
        check(os.path.isdir(own) and modes(own) == want_d, "run's directory %o, want %o" %
              (modes(own) if os.path.isdir(own) else -1, want_d))
        for n in os.listdir(own) if os.path.isdir(own) else []:
            check(modes(os.path.join(own, n)) == want_f, "run's %s: %o, want %o" % (n, modes(os.path.join(own, n)), want_f))
    else:
        print("unknown case", CASE)
        sys.exit(1)
print("%d failure(s)" % len(fails) if fails else "ok")
sys.exit(1 if fails else 0)
