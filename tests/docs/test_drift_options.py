#!/usr/bin/env python3
"""test_drift_options.py SRCDIR NCCLTRACE -- the options and variables the
code reads are the ones its help, the man page and the README document.

Proves, mechanically from the sources (so a new option or variable that is
not documented fails here):
  - every long option of each subcommand's option table (tools/*.c
    `struct option`, analyze's strcmp table, coord's in
    interpose/exchange/coord_main.c) appears in `nccltrace SUB --help` and
    in that subcommand's entry of docs/nccltrace.1 (SYNOPSIS or COMMANDS);
  - every NCCLTRACE_* variable named in the tracer's and the tools' C
    sources (interpose/, recorder/, tools/: the string literals they read
    with getenv) has a row in the README's variable table, a mention in
    the man page's ENVIRONMENT section and in `nccltrace --help`.
Exit 0 pass, 1 fail.
"""
import glob
import os
import re
import subprocess
import sys

SRC, NT = sys.argv[1], sys.argv[2]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def read(p):
    with open(os.path.join(SRC, p), encoding="utf-8") as f:
        return f.read()


def table_options(path):
    """Long names of the `struct option` arrays of one source file."""
    text = read(path)
    names = []
    for block in re.findall(r"struct option \w+\[\] = \{(.*?)\};", text, re.S):
        names += re.findall(r'\{"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument', block)
    return names


# subcommand -> the files whose option tables it parses
SOURCES = {
    "run": ["tools/run.c"],
    "decode": ["tools/decode.c"],
    "export": ["tools/export.c"],
    "collect": ["tools/collect.c", "tools/collect_via.c"],
    "status": ["tools/status.c"],
    "bundle": ["tools/bundle.c"],
    "coord": ["interpose/exchange/coord_main.c"],
}
options = {cmd: sorted({o for f in files for o in table_options(f)}) for cmd, files in SOURCES.items()}
# analyze parses by hand: strcmp(argv[i], "--x") and strncmp(argv[i], "--x=", n)
options["analyze"] = sorted(set(re.findall(r'str(?:n)?cmp\(argv\[i\], "--([a-z][a-z0-9-]*)=?"',
                                           read("tools/analyze/main.c"))))
for cmd, opts in options.items():
    check(len(opts) >= 1 or cmd == "none", "%s: found no option table (parser out of date?)" % cmd)


def man_plain(text):
    """The man page as text: font escapes dropped, \\- read as -."""
    text = re.sub(r"\\f[BIRP]", "", text)
    return text.replace("\\-", "-").replace("\\(em", "--")


man = read("docs/nccltrace.1")
man_lines = man.splitlines()


def man_entry(cmd):
    """The SYNOPSIS lines of cmd and its COMMANDS entry (.TP / .B cmd ...)."""
    out, keep = [], False
    section = ""
    for i, line in enumerate(man_lines):
        if line.startswith(".SH "):
            section = line[4:].strip()
            keep = False
        if section == "SYNOPSIS" and line.startswith(".B nccltrace " + cmd):
            keep = True
        elif section == "SYNOPSIS" and line.startswith(".B "):
            keep = False
        if section == "COMMANDS":
            if line == ".TP":
                nxt = man_lines[i + 1] if i + 1 < len(man_lines) else ""
                keep = nxt.split()[1:2] == [cmd] if nxt.startswith(".B ") else False
        if keep:
            out.append(line)
    return man_plain("\n".join(out))


def has_opt(text, name):
    return re.search(r"(?<![a-z0-9-])--%s(?![a-z0-9-])" % re.escape(name), text) is not None


for cmd, opts in sorted(options.items()):
    p = subprocess.run([NT, cmd, "--help"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, "%s --help exits 0 (got %d)" % (cmd, p.returncode))
    entry = man_entry(cmd)
    check(entry.strip() != "", "man page has an entry for %s" % cmd)
    for o in opts:
        if o == "help":
            continue
        check(has_opt(p.stdout, o), "%s --help documents --%s" % (cmd, o))
        check(has_opt(entry, o), "man page entry of %s documents --%s" % (cmd, o))

# The variables: every "NCCLTRACE_X" literal of the product sources.
variables = set()
for pat in ("interpose/**/*.[ch]", "recorder/**/*.[ch]", "tools/**/*.[ch]"):
    for path in glob.glob(os.path.join(SRC, pat), recursive=True):
        if "/tests/" in path:
            continue
        with open(path, encoding="utf-8") as f:
            variables |= set(re.findall(r'"(NCCLTRACE_[A-Z0-9_]*[A-Z0-9])"', f.read()))
check(len(variables) >= 20, "found %d NCCLTRACE_* variables in the sources (parser out of date?)" % len(variables))

readme_rows = set(re.findall(r"^\| `(NCCLTRACE_[A-Z0-9_]+)` \|", read("README.md"), re.M))
env_section = man_plain(man.split(".SH ENVIRONMENT", 1)[1].split("\n.SH ", 1)[0]) if ".SH ENVIRONMENT" in man else ""
top = subprocess.run([NT, "--help"], capture_output=True, text=True, timeout=30).stdout
for v in sorted(variables):
    check(v in readme_rows, "README's variable table has a row for %s" % v)
    check(re.search(r"\b%s\b" % v, env_section) is not None, "man page ENVIRONMENT names %s" % v)
    check(re.search(r"\b%s\b" % v, top) is not None, "nccltrace --help names %s" % v)
for v in sorted(readme_rows - variables):
    check(False, "README documents %s, which no source reads" % v)

# Every verdict class the analyzer can give (tools/analyze/verdict.c
# class_names) is in each list of classes the docs keep.
classes = re.findall(r'\[NTA_[A-Z0-9_]+\] = "([a-z0-9_]+)"', read("tools/analyze/verdict.c"))
check(len(classes) >= 13, "verdict classes read from tools/analyze/verdict.c: %s" % classes)
lists = {
    "README.md": read("README.md").split("evidence priority", 1)[-1].split("## ", 1)[0],
    "docs/design.md class table": read("docs/design.md").split("`class` is one of:", 1)[-1].split("\n\n", 2)[1],
    "docs/user-guide.md class table": "\n".join(
        ln for ln in read("docs/user-guide.md").splitlines() if re.match(r"^\| `[a-z0-9_]+` \|", ln)),
    "docs/analyze.md": read("docs/analyze.md"),
    "docs/analyze.schema.json": read("docs/analyze.schema.json"),
}
for c in classes:
    for where, text in lists.items():
        check("`%s`" % c in text or '"%s"' % c in text, "%s lists verdict class %s" % (where, c))

print("%d options over %d subcommands, %d variables, %d classes; %d failures" %
      (sum(len(o) for o in options.values()), len(options), len(variables), len(classes), len(failures)))
sys.exit(1 if failures else 0)
