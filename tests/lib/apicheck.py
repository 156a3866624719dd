#!/usr/bin/env python3
"""Hold recorded responses of gloveboxd to docs/api.yaml.

usage: apicheck.py API_YAML EXCHANGES

EXCHANGES has one JSON object per line: {"method", "path", "status", "body"} (body: the
response text, "" when empty). Each response must be documented for its route, method and
status, and its JSON body must match the schema. Streamed (NDJSON) bodies are checked line
by line. Exit 0 when all match; 1 with the mismatches listed; 77 when PyYAML is missing.
"""
import json
import re
import sys

try:
    import yaml
except ImportError:
    print("skip: PyYAML is not installed, the responses were not checked against the spec")
    sys.exit(77)


def resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = spec
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def check(spec, schema, value, where, errors):
    schema = resolve(spec, schema)
    if value is None:
        if not schema.get("nullable"):
            errors.append(f"{where}: null is not allowed")
        return
    if "oneOf" in schema:
        matches = 0
        for alt in schema["oneOf"]:
            sub = []
            check(spec, alt, value, where, sub)
            matches += not sub
        if matches != 1:
            errors.append(f"{where}: matches {matches} of oneOf")
        return
    t = schema.get("type")
    kinds = {
        "object": dict, "array": list, "string": str, "boolean": bool,
        "integer": int, "number": (int, float),
    }
    if t and not isinstance(value, kinds[t]) or (t in ("integer", "number") and isinstance(value, bool)):
        errors.append(f"{where}: expected {t}, got {type(value).__name__}")
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for r in schema.get("required", []):
            if r not in value:
                errors.append(f"{where}: missing required '{r}'")
        for k, v in value.items():
            if k in props:
                check(spec, props[k], v, f"{where}.{k}", errors)
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: '{k}' is not in the spec")
            elif isinstance(schema.get("additionalProperties"), dict):
                check(spec, schema["additionalProperties"], v, f"{where}.{k}", errors)
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            check(spec, schema["items"], v, f"{where}[{i}]", errors)


def route_for(spec, path):
    for template in spec["paths"]:
        rx = "^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$"
        if re.match(rx, path):
            return template
    return None


def main():
    spec = yaml.safe_load(open(sys.argv[1]))
    errors = []
    n = 0
    for line in open(sys.argv[2]):
        ex = json.loads(line)
        n += 1
        method, path, status, body = ex["method"].lower(), ex["path"], str(ex["status"]), ex["body"]
        where = f"{ex['method']} {path} -> {status}"
        path, _, query = path.partition("?")
        template = route_for(spec, path)
        if template is None:
            if status != "404":
                errors.append(f"{where}: route not in the spec")
            continue
        op = spec["paths"][template].get(method)
        if op is None:
            if status != "405":
                errors.append(f"{where}: method not in the spec")
            continue
        # every query parameter of a request that succeeded is documented
        if query and status < "400":
            known = {resolve(spec, p)["name"] for p in op.get("parameters", []) + spec["paths"][template].get("parameters", [])
                     if resolve(spec, p).get("in") == "query"}
            for k in sorted({kv.partition("=")[0] for kv in query.split("&") if kv}):
                if k not in known:
                    errors.append(f"{where}: query parameter '{k}' not in the spec")
        resp = op["responses"].get(status)
        if resp is None:
            errors.append(f"{where}: status not documented")
            continue
        resp = resolve(spec, resp)
        content = resp.get("content")
        if not content:
            if body.strip():
                errors.append(f"{where}: documented without a body, but one came")
            continue
        ctype, media = next(iter(content.items()))
        if "json" not in ctype:
            continue  # text formats (Prometheus) are checked by their own tests
        docs = body.splitlines() if ctype == "application/x-ndjson" else [body]
        for i, doc in enumerate(docs):
            try:
                value = json.loads(doc)
            except ValueError as e:
                errors.append(f"{where}: body is not JSON ({e})")
                continue
            check(spec, media["schema"], value, f"{where} body" + (f" line {i + 1}" if len(docs) > 1 else ""), errors)
    for e in errors:
        print("mismatch:", e)
    print(f"{n} responses checked against the spec, {len(errors)} mismatches")
    sys.exit(1 if errors else 0)


main()
