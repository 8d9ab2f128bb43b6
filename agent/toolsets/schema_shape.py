"""Whether a server's input schema has the shape JSON Schema draft 2020-12 gives its keywords, as the Messages API
checks a tool's ``input_schema``: it refuses a whole request for one tool whose schema is not valid (400
"input_schema: JSON schema is invalid"), so one careless server's tool would fail every request of a `direct`,
`tool-search` or `filtered` run, and of a client given it as serve's passthrough tool.

A walk over the keywords, linear in the schema, not the draft's metaschema: on LiveMCPBench's 527 real tools the
metaschema took 0.8–1.6 ms a tool (seconds at the start of each run over a big tree), and both find the one of those
tools that is not valid (a draft-4 ``"exclusiveMinimum": true``). A ``$schema`` naming an older draft is not a
problem in itself (161 of those tools declare draft-07), nor is an unknown keyword; formats and patterns are not
judged (a pattern is ECMA-262).
"""

from __future__ import annotations

TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains",
           "maxContains")  # fmt: skip
_SCHEMAS = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else",
            "unevaluatedItems", "unevaluatedProperties")  # fmt: skip
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_STRINGS = ("$ref", "$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "pattern", "format")
MAX_DEPTH = 100
"""Levels of nested schemas walked; deeper is said to be too deep to check."""


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a valid JSON Schema draft 2020-12 schema, naming the keyword and where, or None."""
    return _problem(schema, "", 0)


def _problem(schema: object, where: str, depth: int) -> str | None:
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, dict):
        return f"{where or 'the schema'} is {type(schema).__name__}, not an object or a boolean"
    if depth > MAX_DEPTH:
        return f"it nests more than {MAX_DEPTH} levels deep"
    at = f" at {where}" if where else ""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if (
            not kinds
            or any(not isinstance(k, str) or k not in TYPES for k in kinds)
            or len(set(map(str, kinds))) < len(kinds)
        ):
            return f"type{at} is {_short(kind)}, not one of {', '.join(sorted(TYPES))} (or a list of them)"
    for key in _NUMBERS:
        if key in schema and (isinstance(schema[key], bool) or not isinstance(schema[key], int | float)):
            return f"{key}{at} is {_short(schema[key])}, not a number"
    for key in _COUNTS:
        value = schema.get(key)
        if key in schema and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return f"{key}{at} is {_short(value)}, not a whole number of 0 or more"
    for key in _STRINGS:
        if key in schema and not isinstance(schema[key], str):
            return f"{key}{at} is {_short(schema[key])}, not a string"
    if "required" in schema and (
        not isinstance(schema["required"], list) or not all(isinstance(r, str) for r in schema["required"])
    ):
        return f"required{at} is {_short(schema['required'])}, not a list of names"
    if "enum" in schema and not isinstance(schema["enum"], list):
        return f"enum{at} is {_short(schema['enum'])}, not a list"
    for key in _SCHEMAS:
        if key in schema and (problem := _problem(schema[key], f"{where}/{key}", depth + 1)) is not None:
            return problem
    for key in _SCHEMA_MAPS:
        if key not in schema:
            continue
        if not isinstance(schema[key], dict):
            return f"{key}{at} is {_short(schema[key])}, not an object of schemas"
        for name, sub in schema[key].items():
            if (problem := _problem(sub, f"{where}/{key}/{name}", depth + 1)) is not None:
                return problem
    for key in _SCHEMA_LISTS:
        if key not in schema:
            continue
        if not isinstance(schema[key], list) or not schema[key]:
            return f"{key}{at} is {_short(schema[key])}, not a list of schemas"
        for n, sub in enumerate(schema[key]):
            if (problem := _problem(sub, f"{where}/{key}/{n}", depth + 1)) is not None:
                return problem
    return None


def _short(value: object) -> str:
    """``value`` as JSON would write it, at most 40 characters."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
