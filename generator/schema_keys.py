"""What an object schema says of its keys: its properties, the keys it requires, and what it allows beyond them.

``unevaluatedProperties`` counts as ``additionalProperties`` where that is absent. The members of an ``allOf`` keep
what each says of further keys (`merged_extra_keys`: JSON Schema's reading, which the host's check shares). Read by
the walk in :mod:`generator.schema_convert` and by :mod:`generator.schema_types`.
"""

from __future__ import annotations

import json
from typing import Any


def required_of(schema: dict[str, Any]) -> list[str]:
    req = schema.get("required")
    return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


def props_of(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties")
    if not isinstance(props, dict):
        return {}
    return {k: v for k, v in props.items() if isinstance(k, str)}


def fields_of(obj: dict[str, Any]) -> dict[str, Any]:
    """``properties``, then each key ``required`` names that no property defines, with the schema its value must
    meet: ``additionalProperties`` when that is a schema and no ``patternProperties`` may judge the key instead,
    else ``{}``. A server that requires a key it does not describe refuses every call without it."""
    props = props_of(obj)
    missing = [r for r in dict.fromkeys(required_of(obj)) if r not in props]
    if not missing:
        return props
    extra = additional_of(obj)
    value = extra if isinstance(extra, dict) and not _patterns_of(obj) else {}
    return {**props, **dict.fromkeys(missing, value)}


def is_open(obj: dict[str, Any]) -> bool:
    """Whether an object schema with ``properties`` allows further keys by saying so: a non-empty
    ``patternProperties``, or ``additionalProperties`` that is a schema or ``true`` (left out, it is
    taken as closed, as nearly every schema writer means it)."""
    extra = additional_of(obj)
    return extra is True or isinstance(extra, dict) or bool(_patterns_of(obj))


def additional_of(obj: dict[str, Any]) -> Any:
    """``additionalProperties``, else ``unevaluatedProperties``: the same thing in an object schema without
    subschemas (an ``allOf``'s ``unevaluatedProperties`` is read where its members are merged)."""
    extra = obj.get("additionalProperties")
    return obj.get("unevaluatedProperties") if extra is None else extra


def _patterns_of(obj: dict[str, Any]) -> dict[str, Any]:
    patterns = obj.get("patternProperties")
    return {k: v for k, v in patterns.items() if isinstance(k, str)} if isinstance(patterns, dict) else {}


def _speaks(scope: dict[str, Any]) -> bool:
    """Whether an object schema says anything of keys beyond its properties (silent: it allows them)."""
    return additional_of(scope) is not None or bool(_patterns_of(scope))


_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})


def _json_types(schema: Any) -> set[str] | None:
    """The JSON types a schema's ``type`` allows (``number`` includes ``integer``); None when it does not say."""
    t = schema.get("type") if isinstance(schema, dict) else None
    names = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else None
    if names is None or not names <= _JSON_TYPES:
        return None
    return names | {"integer"} if "number" in names else names


def _constraint(schemas: list[Any]) -> Any:
    """A schema every value must match: each of ``schemas`` (``{}``: none; several: their ``allOf``)."""
    kept: dict[str, Any] = {}  # by canonical JSON: comparing each to each could take long
    for s in schemas:
        if s != {} and s is not True:
            kept.setdefault(json.dumps(s, sort_keys=True, default=repr), s)
    values = list(kept.values())
    return {} if not values else values[0] if len(values) == 1 else {"allOf": values}


def merged_extra_keys(scopes: list[dict[str, Any]], props: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What an ``allOf``'s merged object allows beyond its properties, as keywords `extra_keys` reads, and
    the properties it refuses.

    ``scopes`` are the object schemas whose key rules the object must meet: each member, the ``allOf``'s own
    keys, and its ``unevaluatedProperties`` (over every member's properties and patterns). A scope that says
    nothing allows any key (JSON Schema); when none says anything the object is taken as closed, as `is_open`
    takes an object that does not say. Otherwise a key beyond the properties is allowed only if every scope
    that speaks allows it: a scope closed by ``additionalProperties: false`` closes the object, scopes open to
    patterns only leave the patterns they all name, and value schemas add up as an ``allOf``. A property is
    refused when a scope closed to every other key (no patterns) does not list it, or when a scope whose
    ``additionalProperties`` schema it must meet instead allows none of its JSON types: JSON Schema's reading,
    and the host's check (``jsonschema``) refuses such a key, so the stub leaves it out. Otherwise a property
    keeps its own type (the other member's value schema is not intersected with it), and one outside a scope
    with patterns is kept: matching a server's pattern here could take without bound (the host uses RE2).
    """
    speaking = [s for s in scopes if _speaks(s)]
    if not speaking:
        return {}, []
    closed = [s for s in speaking if additional_of(s) is False and not _patterns_of(s)]
    allowed = set(props).intersection(*(props_of(s) for s in closed))
    # (own properties, JSON types of the value schema) of each scope whose schema the other keys must meet
    typed = {
        (frozenset(props_of(s)), frozenset(types))
        for s in speaking
        if isinstance(additional_of(s), dict) and not _patterns_of(s) and (types := _json_types(additional_of(s)))
    }
    refused = []
    for k, sub in props.items():
        own = _json_types(sub)
        if k not in allowed or (own and any(k not in keys and not own & types for keys, types in typed)):
            refused.append(k)
    if closed:
        return {"additionalProperties": False}, refused
    values: list[Any] = []  # what every extra key's value must match
    only: list[dict[str, Any]] = []  # the patterns of each scope open to patterned keys only
    for s in speaking:
        extra, patterns = additional_of(s), _patterns_of(s)
        if isinstance(extra, dict):
            values.append({"anyOf": [extra, *patterns.values()]} if patterns else extra)
        elif extra is not True:
            only.append(patterns)
    if not only:
        return {"additionalProperties": _constraint(values) or True}, refused
    common = [p for p in only[0] if all(p in o for o in only[1:])]
    return {
        "additionalProperties": False,
        "patternProperties": {p: _constraint([o[p] for o in only] + values) for p in common},
    }, refused
