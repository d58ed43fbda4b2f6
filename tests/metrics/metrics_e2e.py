#!/usr/bin/env python3
"""metrics_e2e.py -- the OpenMetrics endpoint (NCCLTRACE_METRICS) on a
traced emulator job of 4 ranks (tests/metrics/metrics_job.c):

  hostile     slowloris, 10,000 connections in a row, 1,000 at once and
              garbage requests: the job's collectives keep running (counted
              before, during and after), the serving process's descriptors
              and memory stay bounded, every bad request gets 400/404/405/431
              or a close, and a good scrape is answered afterwards.
  prometheus  a real Prometheus server (Debian's package, installed here when
              missing) scrapes the job every second: the slow rank shows in
              nccltrace_lateness_seconds (_sum/_count), the planted mismatch
              in nccltrace_mismatches_total; promtool check metrics accepts
              the text output; the OpenMetrics output ends with # EOF.  The
              server is stopped at the end, whatever happened.
  rules       promtool check rules and promtool test rules on
              docs/alerts/nccltrace.rules.yml.

Exit: 0 pass, 1 fail (a missing Prometheus is a failure that says why).
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request


def ensure_prometheus():
    """Debian's prometheus package (prometheus, promtool), installed when
    missing, as scripts/deps.sh installs the build's packages."""
    if shutil.which("prometheus") and shutil.which("promtool"):
        return None
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                                               "prometheus"]):
        try:
            r = subprocess.run(sudo + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return "cannot install Debian's prometheus package (%s): %s" % (" ".join(cmd), e)
        if r.returncode != 0:
            return "cannot install Debian's prometheus package (%s, rc %d): %s" % (
                " ".join(cmd), r.returncode, r.stdout.decode(errors="replace")[-500:])
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        return "apt-get installed prometheus but prometheus/promtool are not on PATH"
    return None


def scrape(port, om=False, timeout=5):
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port)
    if om:
        req.add_header("Accept", "application/openmetrics-text; version=1.0.0")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


def samples(text, name):
    """{labels-string: value} of the samples called name."""
    out = {}
    for ln in text.splitlines():
        if ln.startswith(name + "{") or ln.startswith(name + " "):
            k, _, v = ln.rpartition(" ")
            out[k[len(name):]] = float(v)
    return out


def wait_endpoint(port, procs, secs=30):
    end = time.time() + secs
    while time.time() < end:
        if procs.poll() is not None:
            return None
        try:
            _, t = scrape(port, timeout=2)
            if samples(t, "nccltrace_collectives_issued_total"):
                return t
        except OSError:
            pass
        time.sleep(0.3)
    return None


def serving_pid(port):
    """The process that listens on 127.0.0.1:port (by /proc/net/tcp inode)."""
    inode = None
    with open("/proc/net/tcp") as f:
        for ln in f.readlines()[1:]:
            x = ln.split()
            if x[3] == "0A" and int(x[1].split(":")[1], 16) == port:
                inode = x[9]
    if not inode:
        return None
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == "socket:[%s]" % inode:
                    return int(pid)
        except OSError:
            continue
    return None


def fds_rss(pid):
    """Descriptors and RSS (KiB) of pid; (0, 0) once it is gone."""
    try:
        return fds_rss_(pid)
    except OSError:
        return 0, 0


def fds_rss_(pid):
    n = len(os.listdir("/proc/%d/fd" % pid))
    with open("/proc/%d/status" % pid) as f:
        rss = [int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")][0]
    return n, rss


def issued(text):
    return sum(samples(text, "nccltrace_collectives_issued_total").values())


def start_job(a, tmp, port, args):
    env = dict(os.environ)
    for k in ("NCCLEMU_FAULT", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "NCCLTRACE_COORD", "NCCLTRACE_SECRET"):
        env.pop(k, None)
    env.update({
        "LD_LIBRARY_PATH": a.emu_libdir, "LD_PRELOAD": os.path.abspath(a.lib),
        "NCCLTRACE_DIR": os.path.join(tmp, "dumps"), "NCCLTRACE_RING_DIR": os.path.join(tmp, "rings"),
        "NCCLTRACE_CHECK": "async", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
        "NCCLEMU_DEVICES": "8", "UNIQUE_ID_FILE": os.path.join(tmp, "unique-id"),
        "LAUNCH_TIMEOUT": "170", "LAUNCH_GRACE": "2",
        "NCCLTRACE_JOB": "metrics-%d-%d" % (port, os.getpid()),
        "NCCLTRACE_METRICS": "127.0.0.1:%d" % (port + 1),
    })
    out = open(os.path.join(tmp, "job.out"), "w")
    return subprocess.Popen([a.launch, "4", a.job] + args, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()


def raw(port, data, wait=3.0):
    """Send data, return what came back before the server closed (or wait)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    got = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    finally:
        s.close()
    return got


def case_hostile(a, tmp, bad):
    # >= 24 s (rank 3 sleeps 4 ms a step): it outlasts the hostile phase
    job = start_job(a, tmp, a.port, ["--steps", "6000", "--slow-rank", "3", "--slow-ms", "4"])
    mport = a.port + 1
    try:
        t0 = wait_endpoint(mport, job)
        if t0 is None:
            bad.append("the endpoint never answered")
            return
        pid = serving_pid(mport)
        fd0, rss0 = fds_rss(pid)
        c0 = issued(t0)
        print("serving pid %d: %d fds, %d KiB RSS; collectives issued %d" % (pid, fd0, rss0, c0))
        peak_fd = fd0
        # slowloris: 40 connections dribbling one byte every 0.2 s
        sl = []
        for _ in range(40):
            try:
                s = socket.create_connection(("127.0.0.1", mport), timeout=1)
                s.setblocking(False)
                sl.append(s)
            except OSError:
                pass
        t_sl = time.time()
        closed_at = {}
        while time.time() - t_sl < 6 and len(closed_at) < len(sl):
            for i, s in enumerate(sl):
                if i in closed_at:
                    continue
                try:
                    s.send(b"G")
                    if s.recv(1) == b"":
                        closed_at[i] = time.time() - t_sl
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at[i] = time.time() - t_sl
            peak_fd = max(peak_fd, fds_rss(pid)[0])
            time.sleep(0.2)
        for s in sl:
            s.close()
        slow = [i for i in range(len(sl)) if i not in closed_at or closed_at[i] > 4.0]
        print("slowloris: %d connections, all closed by %.1f s; %d left open past 4 s" % (
            len(sl), max(closed_at.values() or [0]), len(slow)))
        if slow:
            bad.append("%d slowloris connections were not closed within 4 s" % len(slow))
        # 10,000 connections in a row
        t = time.time()
        for _ in range(10000):
            try:
                socket.create_connection(("127.0.0.1", mport), timeout=2).close()
            except OSError:
                pass
        print("10000 connections in a row: %.1f s" % (time.time() - t))
        # 1,000 at once, held 3 s
        many = []
        for _ in range(1000):
            try:
                many.append(socket.create_connection(("127.0.0.1", mport), timeout=2))
            except OSError:
                pass
        time.sleep(1)
        nfd, rss = fds_rss(pid)
        peak_fd = max(peak_fd, nfd)
        time.sleep(2)
        for s in many:
            s.close()
        print("1000 at once (%d connected): serving process %d fds, %d KiB RSS" % (len(many), nfd, rss))
        # garbage
        cases = {
            b"POST /metrics HTTP/1.1\r\n\r\n": b" 405 ",
            b"GET /nope HTTP/1.1\r\n\r\n": b" 404 ",
            b"GET /metrics HTTP/9\r\n\r\n": b" 400 ",
            b"\x00\x01\x02\xff\r\n\r\n": b" 400 ",
            b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 5000: b" 431 ",
            bytes(random.Random(7).getrandbits(8) for _ in range(3000)) + b"\n\n": b" 400 ",
        }
        for req, want in cases.items():
            got = raw(mport, req)
            if want not in got.split(b"\r\n")[0] + b" ":
                bad.append("request %r answered %r, want%s" % (req[:30], got[:40], want.decode()))
        nfd, rss = fds_rss(pid)
        peak_fd = max(peak_fd, nfd)
        if not fds_rss(pid)[0]:
            bad.append("the serving process %d is gone before the hostile phase ended" % pid)
            return
        t1 = wait_endpoint(mport, job, 10)
        if t1 is None:
            bad.append("no good scrape after the hostile ones")
            return
        c1 = issued(t1)
        nfd, rss = fds_rss(pid)
        print("after: %d fds (peak %d), %d KiB RSS; collectives issued %d (+%d)" % (
            nfd, peak_fd, rss, c1, c1 - c0))
        if peak_fd > fd0 + 16 + 4:
            bad.append("the serving process held %d descriptors (before %d; bound 16 connections)" % (peak_fd, fd0))
        if rss > rss0 + 16 * 1024:
            bad.append("RSS grew from %d to %d KiB" % (rss0, rss))
        if c1 <= c0 + 100:
            bad.append("the job's collectives did not go on (%d -> %d)" % (c0, c1))
        refused = samples(t1, "nccltrace_exporter_refused_total")
        timeouts = samples(t1, "nccltrace_exporter_timeouts_total")
        print("exporter: refused %s, timeouts %s" % (refused, timeouts))
        if not sum(refused.values()) or not sum(timeouts.values()):
            bad.append("the exporter counted no refused or no timed-out connection")
        if job.wait(200) != 0:
            bad.append("the job failed (rc %s)" % job.returncode)
        out = open(os.path.join(tmp, "job.out")).read()
        if out.count("steps 6000") != 4:
            bad.append("not every rank ran its 6000 steps:\n" + out[-2000:])
    finally:
        stop(job)


def prom_query(pport, q):
    u = "http://127.0.0.1:%d/api/v1/query?%s" % (pport, urllib.parse.urlencode({"query": q}))
    with urllib.request.urlopen(u, timeout=5) as r:
        d = json.loads(r.read())
    return {json.dumps(x["metric"], sort_keys=True): float(x["value"][1]) for x in d["data"]["result"]}


def case_prometheus(a, tmp, bad):
    why = ensure_prometheus()
    if why:
        bad.append(why)
        return
    mport, pport = a.port + 1, a.port + 2
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: nccltrace\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % mport)
    prom = subprocess.Popen(["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                             "--web.listen-address=127.0.0.1:%d" % pport],
                            stdout=open(os.path.join(tmp, "prom.log"), "w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    job = start_job(a, tmp, a.port, ["--steps", "2500", "--slow-rank", "2", "--slow-ms", "8",
                                     "--mismatch-step", "200", "--mismatch-rank", "1"])
    try:
        if wait_endpoint(mport, job) is None:
            bad.append("the endpoint never answered:\n" + open(os.path.join(tmp, "job.out")).read()[-2000:])
            return
        ct, om = scrape(mport, om=True)
        if ct != "application/openmetrics-text; version=1.0.0; charset=utf-8" or not om.endswith("# EOF\n"):
            bad.append("OpenMetrics answer: Content-Type %r, ends %r" % (ct, om[-20:]))
        _, text = scrape(mport)
        r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        print("promtool check metrics: rc %d %s" % (r.returncode, r.stdout.decode()[-300:]))
        if r.returncode != 0:
            bad.append("promtool check metrics refused the output: " + r.stdout.decode()[-500:])
        lat, mm, up = {}, {}, {}
        end = time.time() + 60
        while time.time() < end:
            time.sleep(2)
            try:
                up = prom_query(pport, "up")
                lat = prom_query(pport, "sum by (rank) (nccltrace_lateness_seconds_sum) / "
                                        "sum by (rank) (nccltrace_lateness_seconds_count)")
                mm = prom_query(pport, "sum(nccltrace_mismatches_total)")
            except (OSError, ValueError, KeyError):
                continue
            byrank = {json.loads(k).get("rank"): v for k, v in lat.items()}
            if len(byrank) == 4 and byrank.get("2", 0) > 0.004 and mm and max(mm.values()) >= 1:
                break
        byrank = {json.loads(k).get("rank"): v for k, v in lat.items()}
        print("Prometheus: up %s; mean lateness by rank %s; mismatches %s" % (
            list(up.values()), {k: round(v * 1e3, 2) for k, v in sorted(byrank.items())}, list(mm.values())))
        if not up or min(up.values()) != 1:
            bad.append("Prometheus: up %s" % up)
        if len(byrank) != 4:
            bad.append("Prometheus has lateness for ranks %s, want 4" % sorted(byrank))
        elif not (byrank["2"] > 0.004 and all(byrank[r] < byrank["2"] / 4 for r in ("0", "1", "3"))):
            bad.append("the slow rank 2 does not stand out in nccltrace_lateness_seconds: %s" % byrank)
        if not mm or max(mm.values()) < 1:
            bad.append("nccltrace_mismatches_total did not count the planted mismatch: %s" % mm)
    finally:
        stop(job)
        stop(prom)
        if prom.poll() is None:
            bad.append("Prometheus did not stop")


def case_rules(a, tmp, bad):
    why = ensure_prometheus()
    if why:
        bad.append(why)
        return
    d = os.path.join(a.src, "docs", "alerts")
    if not os.path.isfile(os.path.join(d, "nccltrace.rules.yml")):
        bad.append("no rules file %s/nccltrace.rules.yml" % d)
        return
    for cmd in (["promtool", "check", "rules", os.path.join(d, "nccltrace.rules.yml")],
                ["promtool", "test", "rules", os.path.join(d, "nccltrace.rules.test.yml")]):
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=d)
        print("%s: rc %d\n%s" % (" ".join(cmd[:3]), r.returncode, r.stdout.decode()[-1500:]))
        if r.returncode != 0:
            bad.append("%s failed" % " ".join(cmd[:3]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=["hostile", "prometheus", "rules"])
    for k in ("--launch", "--lib", "--emu-libdir", "--job", "--src"):
        p.add_argument(k, required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="nccltrace-metrics-")
    bad = []
    try:
        {"hostile": case_hostile, "prometheus": case_prometheus, "rules": case_rules}[a.case](a, tmp, bad)
    finally:
        if bad and os.path.exists(os.path.join(tmp, "job.out")):
            print("--- job output (tail)\n" + open(os.path.join(tmp, "job.out")).read()[-3000:])
        if not os.environ.get("NTM_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
