#!/usr/bin/env python3
"""test_layout.py DOC FORMAT_H FORMAT_LAYOUT_C -- every row of the byte
tables in docs/dump-format.md (| off | size | field |, under a heading that
names the struct) has its compile-time check: an NTR_LAYOUT row in
recorder/format_layout.c with the same offset and size, or an offsetof
assert in recorder/format.h with the same offset; and every NTR_LAYOUT row
is in the tables.  The compiler checks those files against the structs, so
together the tables are checked against the code."""
import re
import sys


def doc_rows(path):
    rows, struct, in_table = [], None, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("#"):
            m = re.search(r"`struct (ntr_\w+)`", line)
            struct = m.group(1) if m else ("ntr_section" if "Payload: sections" in line else None)
            in_table = False
        elif re.match(r"\|\s*off\s*\|\s*size\s*\|\s*field", line):
            in_table = True
            if struct is None:
                sys.exit("test_layout: a byte table under a heading that names no struct: " + line.strip())
        elif in_table and line.startswith("|---"):
            continue
        elif in_table and line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            size = 1
            for factor in cells[1].replace("×", "*").split("*"):
                size *= int(factor)
            name = re.match(r"[A-Za-z_]\w*", cells[2]).group(0)
            rows.append((struct, name, int(cells[0]), size))
        else:
            in_table = False
    return rows


def main():
    doc, fmt_h, layout_c = sys.argv[1:4]
    rows = doc_rows(doc)
    layout = {}
    for m in re.finditer(r"^NTR_LAYOUT\((\w+), (\w+), (\d+), (\d+)\);", open(layout_c).read(), re.M):
        layout[(m.group(1), m.group(2))] = (int(m.group(3)), int(m.group(4)))
    asserted = {}
    for m in re.finditer(r"offsetof\(struct (\w+), (\w+)\) == (\d+)", open(fmt_h).read()):
        asserted[(m.group(1), m.group(2))] = int(m.group(3))
    bad = []
    for struct, name, off, size in rows:
        key = (struct, name)
        if key in layout:
            if layout.pop(key) != (off, size):
                bad.append("%s.%s: the table says %d, %d bytes; format_layout.c differs" % (struct, name, off, size))
        elif key in asserted:
            if asserted[key] != off:
                bad.append("%s.%s: the table says offset %d, format.h asserts %d" % (struct, name, off, asserted[key]))
        else:
            bad.append("%s.%s (offset %d): no compile-time check" % (struct, name, off))
    for (struct, name), (off, size) in sorted(layout.items()):
        bad.append("%s.%s: checked in format_layout.c, in no table of the document" % (struct, name))
    if len(rows) < 100:
        bad.append("only %d table rows found: the parser lost the tables" % len(rows))
    for b in bad:
        print("test_layout: " + b)
    print("test_layout: %d rows, %d problems" % (len(rows), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
