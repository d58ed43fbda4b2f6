"""jsonschema_lite -- a JSON Schema validator for the keywords the tools'
schemas use (type, required, properties, items, enum, const, minimum, oneOf,
anyOf, $ref to #/definitions/...), standard library only.

validate(instance, schema) returns a list of error strings (empty: valid).
"""

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError("only local $ref supported: " + ref)
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _check(v, s, root, path, errs):
    if "$ref" in s:
        s = _resolve(root, s["$ref"])
    t = s.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_TYPES[x](v) for x in types):
            errs.append("%s: expected %s, got %r" % (path, t, v))
            return
    if "const" in s and v != s["const"]:
        errs.append("%s: expected %r, got %r" % (path, s["const"], v))
    if "enum" in s and v not in s["enum"]:
        errs.append("%s: %r not in %r" % (path, v, s["enum"]))
    if "minimum" in s and _TYPES["number"](v) and v < s["minimum"]:
        errs.append("%s: %r below minimum %r" % (path, v, s["minimum"]))
    if isinstance(v, dict):
        for k in s.get("required", []):
            if k not in v:
                errs.append("%s: missing %r" % (path, k))
        for k, sub in s.get("properties", {}).items():
            if k in v:
                _check(v[k], sub, root, path + "." + k, errs)
    if isinstance(v, list) and "items" in s:
        for i, item in enumerate(v):
            _check(item, s["items"], root, "%s[%d]" % (path, i), errs)
    for key in ("oneOf", "anyOf"):
        if key in s:
            ok = 0
            for alt in s[key]:
                e = []
                _check(v, alt, root, path, e)
                ok += not e
            if (key == "oneOf" and ok != 1) or (key == "anyOf" and ok == 0):
                errs.append("%s: %d alternatives of %s match %r" % (path, ok, key, v))


def validate(instance, schema):
    errs = []
    _check(instance, schema, schema, "$", errs)
    return errs
