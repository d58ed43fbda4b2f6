"""schema_lite.py -- a small JSON Schema validator for the subset that
docs/analyze.schema.json uses (draft 2020-12 keywords): type, enum, const,
properties, required, additionalProperties, items, minimum, pattern, anyOf,
$ref to "#/$defs/NAME", and the annotations $schema, $id, $comment, title,
description.

Why our own and not the `jsonschema` package: the tests run with whatever
python3 is first on PATH, and scripts/deps.sh installs Debian packages
(apt-get), which a pyenv or venv python does not see; a validator of fifty
lines needs nothing.  So that a schema cannot pass unchecked, a keyword
outside the subset is an error, never ignored.  When `jsonschema` is
importable, check() also runs it on the same document (tests say which).

  errors(doc, schema) -> ["$.verdict.class: 'x' not in enum [...]", ...]
"""

import re

ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "$defs"}
KEYWORDS = {"type", "enum", "const", "properties", "required", "additionalProperties",
            "items", "minimum", "pattern", "anyOf", "$ref"} | ANNOTATIONS

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


class SchemaError(Exception):
    """The schema uses something this validator does not check."""


def _walk(v, s, root, path, out):
    if s is True:
        return
    if s is False:
        out.append("%s: no value allowed here" % path)
        return
    unknown = set(s) - KEYWORDS
    if unknown:
        raise SchemaError("%s: keyword(s) %s not supported by schema_lite" % (path, sorted(unknown)))
    if "$ref" in s:
        ref = s["$ref"]
        if not ref.startswith("#/$defs/") or ref[8:] not in root.get("$defs", {}):
            raise SchemaError("%s: $ref %r: only #/$defs/NAME is supported" % (path, ref))
        _walk(v, root["$defs"][ref[8:]], root, path, out)
    if "type" in s:
        ts = s["type"] if isinstance(s["type"], list) else [s["type"]]
        for t in ts:
            if t not in TYPES:
                raise SchemaError("%s: type %r unknown" % (path, t))
        if not any(TYPES[t](v) for t in ts):
            out.append("%s: %r is not of type %s" % (path, v, "/".join(ts)))
            return
    if "enum" in s and v not in s["enum"]:
        out.append("%s: %r not in enum %r" % (path, v, s["enum"]))
    if "const" in s and v != s["const"]:
        out.append("%s: %r is not %r" % (path, v, s["const"]))
    if "minimum" in s and TYPES["number"](v) and v < s["minimum"]:
        out.append("%s: %r below minimum %r" % (path, v, s["minimum"]))
    if "pattern" in s and isinstance(v, str) and not re.search(s["pattern"], v):
        out.append("%s: %r does not match %r" % (path, v, s["pattern"]))
    if "anyOf" in s:
        tries = []
        for sub in s["anyOf"]:
            e = []
            _walk(v, sub, root, path, e)
            if not e:
                break
            tries.append(e)
        else:
            out.append("%s: matches none of anyOf: %s" % (path, "; ".join(x[0] for x in tries if x)))
    if isinstance(v, dict):
        props = s.get("properties", {})
        for k in s.get("required", []):
            if k not in v:
                out.append("%s: required key %r missing" % (path, k))
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                _walk(x, props[k], root, "%s.%s" % (path, k), out)
            elif extra is False:
                out.append("%s: key %r is not in the schema (document it in docs/analyze.schema.json)" % (path, k))
            else:
                _walk(x, extra, root, "%s.%s" % (path, k), out)
    if isinstance(v, list) and "items" in s:
        for i, x in enumerate(v):
            _walk(x, s["items"], root, "%s[%d]" % (path, i), out)


def errors(doc, schema):
    out = []
    _walk(doc, schema, schema, "$", out)
    return out


def check(doc, schema):
    """errors() plus, when the `jsonschema` package is importable, its own
    verdict on the same document.  @return (errors, "schema_lite" or
    "schema_lite+jsonschema")."""
    out = errors(doc, schema)
    try:
        import jsonschema  # noqa: F401 (optional cross-check)
        from jsonschema import Draft202012Validator
    except ImportError:
        return out, "schema_lite"
    Draft202012Validator.check_schema(schema)
    for e in Draft202012Validator(schema).iter_errors(doc):
        out.append("jsonschema: $%s: %s" % ("".join("[%r]" % p for p in e.absolute_path), e.message))
    return out, "schema_lite+jsonschema"
