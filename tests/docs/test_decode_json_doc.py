#!/usr/bin/env python3
"""test_decode_json_doc.py SRCDIR NCCLTRACE FILE... -- docs/decode-json.md
names exactly the keys `nccltrace decode --json` writes.

Proves: the set of keys in the page's ```json block equals the set of keys
tools/json.c, tools/pyfmt.c and tools/decode.c put into the output (read
from their set()/json_object_set_new()/json_pack calls, so a new key that
is not documented, or a documented key no code writes, fails); the page's
"version" is NTR_FORMAT_VERSION of recorder/format.h; and decoding each
FILE (the golden dumps and rings) gives no key the page lacks and the
page's version.
Exit 0 pass, 1 fail.
"""
import json
import os
import re
import subprocess
import sys

SRC, NT, FILES = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL: " + what)


def read(p):
    with open(os.path.join(SRC, p), encoding="utf-8") as f:
        return f.read()


doc = read("docs/decode-json.md")
blocks = re.findall(r"```json\n(.*?)```", doc, re.S)
check(len(blocks) == 1, "one json block in the page (found %d)" % len(blocks))
block = blocks[0] if blocks else ""
# env's keys are variable names (upper case), not keys of the format
doc_keys = {k for k in re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)":', block) if not k[0].isupper()}
doc_keys.add("files")  # the several-files wrapper, described in the prose
check('{"files": [' in doc, "the page describes the several-files wrapper")

code_keys = set(re.findall(r'\bset\(\w+, "([a-z_]+)"', read("tools/json.c")))
py = read("tools/pyfmt.c")
code_keys |= set(re.findall(r'json_object_set_new\(\w+, "([a-z_]+)"', py))
code_keys |= set(re.findall(r'json_pack\("\{s:o\}", "([a-z_]+)"', read("tools/decode.c")))
for args in re.findall(r'json_pack\("\{[^"]*\}", ([^;]*)\)', read("tools/decode.c")):
    code_keys |= set(re.findall(r'"([a-z_]+)"', args))
check(len(code_keys) >= 60, "found %d keys in the sources (parser out of date?)" % len(code_keys))
for k in sorted(code_keys - doc_keys):
    check(False, "the code writes %r, the page does not name it" % k)
for k in sorted(doc_keys - code_keys):
    check(False, "the page names %r, no code writes it" % k)

m = re.search(r'"version": (\d+)', block)
fv = re.search(r"#define NTR_FORMAT_VERSION (\d+)u", read("recorder/format.h"))
check(m is not None and fv is not None and m.group(1) == fv.group(1),
      "page version %s = NTR_FORMAT_VERSION %s" % (m and m.group(1), fv and fv.group(1)))


def keys_of(v, out, parent=""):
    if isinstance(v, dict):
        for k, x in v.items():
            if parent != "env":
                out.add(k)
            keys_of(x, out, k)
    elif isinstance(v, list):
        for x in v:
            keys_of(x, out, parent)


seen = set()
for f in FILES:
    p = subprocess.run([NT, "decode", "--json", f], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "decode --json %s exits 0 (%d: %s)" % (f, p.returncode, p.stderr.strip()))
    if p.returncode:
        continue
    out = json.loads(p.stdout)
    check(str(out.get("version")) == (m.group(1) if m else "?"), "%s: version %r as the page says" %
          (f, out.get("version")))
    keys_of(out, seen)
for k in sorted(seen - doc_keys):
    check(False, "decode --json prints %r, the page does not name it" % k)
check(len(seen) >= 40, "the inputs exercised %d keys" % len(seen))
print("%d keys in the page, %d in the code, %d seen in %d files; %d failures" %
      (len(doc_keys), len(code_keys), len(seen), len(FILES), len(failures)))
sys.exit(1 if failures else 0)
