# SPDX-License-Identifier: MIT
"""Checks API responses against src/api/openapi.yaml.

A small validator for the subset of JSON Schema the spec uses: type (also a
list of types), properties, required, additionalProperties, items, enum,
nullable, $ref into the document, allOf/anyOf/oneOf, minimum/maximum,
minItems, pattern. Formats are not checked here (the tests check times).
"""

import os
import re
import warnings

import yaml

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


class SpecError(AssertionError):
    pass


class OpenApi:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        if not isinstance(self.doc, dict) or "paths" not in self.doc:
            raise SpecError(f"{path}: not an OpenAPI document (no 'paths')")
        self.path = path
        self._routes = []
        for template, item in (self.doc.get("paths") or {}).items():
            item = self.resolve(item)
            names = []

            def repl(m):
                names.append(m.group(1))
                return "([^/]+)"

            regex = "^" + re.sub(r"\\\{([^}]+)\\\}", repl, re.escape(template)) + "$"
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            self._routes.append((literal, template, re.compile(regex), item))
        # the most specific (longest literal part) first
        self._routes.sort(key=lambda r: -r[0])

    # ---- $ref ----
    def resolve(self, node, seen=None):
        seen = seen or set()
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen:
                raise SpecError(f"$ref cycle at {ref}")
            seen.add(ref)
            if not ref.startswith("#/"):
                raise SpecError(f"unsupported $ref {ref}")
            cur = self.doc
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(cur, dict) or part not in cur:
                    raise SpecError(f"dangling $ref {ref}")
                cur = cur[part]
            node = cur
        return node

    # ---- operations ----
    def operation(self, method, path):
        path = path.split("?", 1)[0]
        for _, template, regex, item in self._routes:
            if regex.match(path):
                op = item.get(method.lower())
                if op is None:
                    return template, None
                return template, op
        return None, None

    def response_schema(self, method, path, status, content_type):
        """The schema for this response, None if the spec declares no body
        for it. Raises SpecError if the spec does not know the response."""
        template, op = self.operation(method, path)
        if template is None:
            if status >= 400:
                return self._error_schema() if content_type else None   # a route that does not exist
            raise SpecError(f"{method} {path}: path not in the spec")
        if op is None:
            if status == 405:
                return self._error_schema()
            raise SpecError(f"{method} {template}: operation not in the spec")
        responses = op.get("responses") or {}
        resp = None
        for k in (str(status), f"{str(status)[0]}XX", f"{str(status)[0]}xx", "default"):
            if k in responses:
                resp = self.resolve(responses[k])
                break
        if resp is None:
            raise SpecError(f"{method} {template}: status {status} not in the spec "
                            f"(documented: {', '.join(map(str, responses))})")
        content = resp.get("content") or {}
        if not content or content_type is None:
            return None
        ct = (content_type or "").split(";")[0].strip().lower()
        if ct not in content:
            raise SpecError(f"{method} {template} {status}: Content-Type '{ct}' not in the spec "
                            f"({', '.join(content)})")
        media = content[ct] or {}
        return media.get("schema")

    def _error_schema(self):
        comps = (self.doc.get("components") or {}).get("schemas") or {}
        for name in ("Error", "ErrorResponse", "ApiError"):
            if name in comps:
                return comps[name]
        return None

    # ---- validation ----
    def validate(self, value, schema, where="$"):
        errs = []
        self._check(value, schema, where, errs, 0)
        if errs:
            raise SpecError("response does not match the OpenAPI spec:\n  " + "\n  ".join(errs[:20]))

    def _type_ok(self, value, t):
        if t == "object":
            return isinstance(value, dict)
        if t == "array":
            return isinstance(value, list)
        if t == "string":
            return isinstance(value, str)
        if t == "boolean":
            return isinstance(value, bool)
        if t == "integer":
            return (isinstance(value, int) and not isinstance(value, bool)) or \
                (isinstance(value, float) and value.is_integer())
        if t == "number":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if t == "null":
            return value is None
        return True

    def _check(self, value, schema, where, errs, depth):
        if schema is None or schema is True:
            return
        if schema is False:
            errs.append(f"{where}: no value allowed here")
            return
        if depth > 64:
            errs.append(f"{where}: schema nesting too deep")
            return
        schema = self.resolve(schema)
        if not isinstance(schema, dict):
            return
        if value is None and schema.get("nullable"):
            return
        for sub in schema.get("allOf") or []:
            self._check(value, sub, where, errs, depth + 1)
        for key in ("anyOf", "oneOf"):
            alts = schema.get(key)
            if alts:
                ok = 0
                for sub in alts:
                    e = []
                    self._check(value, sub, where, e, depth + 1)
                    ok += not e
                # oneOf is checked like anyOf: event schemas overlap on purpose
                if ok == 0:
                    errs.append(f"{where}: matches none of {key}")
        t = schema.get("type")
        if t is not None:
            types = t if isinstance(t, list) else [t]
            if not any(self._type_ok(value, x) for x in types):
                errs.append(f"{where}: expected {t}, got {type(value).__name__} {short(value)}")
                return
        if "enum" in schema and value not in schema["enum"]:
            errs.append(f"{where}: {short(value)} not in enum {schema['enum']}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if "minimum" in schema and value < schema["minimum"]:
                errs.append(f"{where}: {value} < minimum {schema['minimum']}")
            if "maximum" in schema and value > schema["maximum"]:
                errs.append(f"{where}: {value} > maximum {schema['maximum']}")
        if isinstance(value, str) and "pattern" in schema:
            if not re.search(schema["pattern"], value):
                errs.append(f"{where}: {short(value)} does not match /{schema['pattern']}/")
        if isinstance(value, dict):
            props = schema.get("properties") or {}
            for req in schema.get("required") or []:
                if req not in value:
                    errs.append(f"{where}: required property '{req}' missing")
            addl = schema.get("additionalProperties", True)
            for k, v in value.items():
                if k in props:
                    self._check(v, props[k], f"{where}.{k}", errs, depth + 1)
                elif addl is False:
                    errs.append(f"{where}: property '{k}' not allowed by the spec")
                elif isinstance(addl, dict):
                    self._check(v, addl, f"{where}.{k}", errs, depth + 1)
        if isinstance(value, list):
            if "minItems" in schema and len(value) < schema["minItems"]:
                errs.append(f"{where}: fewer than {schema['minItems']} items")
            items = schema.get("items")
            if items is not None:
                for i, v in enumerate(value):
                    self._check(v, items, f"{where}[{i}]", errs, depth + 1)


def short(v):
    s = repr(v)
    return s if len(s) < 80 else s[:77] + "..."


_loaded = {}


def load(repo):
    """The spec of this repository, or None (with one warning) while it does
    not exist."""
    path = os.path.join(repo, "src", "api", "openapi.yaml")
    if path in _loaded:
        return _loaded[path]
    spec = None
    if os.path.exists(path):
        spec = OpenApi(path)
    else:
        warnings.warn(f"{path} does not exist yet: responses are not checked against the spec")
    _loaded[path] = spec
    return spec
