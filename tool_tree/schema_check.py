"""The host's check of a tool call's arguments against the tool's input schema, bounded in work.

`tool_validator` is ``jsonschema``'s validator for the schema's draft with the keywords that would
let a script's arguments (hostile) or a server's schema (untrusted) cost the host without bound
replaced:

- ``uniqueItems`` in linear time (jsonschema compares items pairwise: 3,000 objects took 30 s);
- ``pattern``, ``patternProperties`` and ``additionalProperties`` matched with RE2, never with
  Python's backtracking ``re`` (`_Patterns`); ``unevaluatedProperties`` is left to the server when
  the schema has ``patternProperties``, since jsonschema finds those with ``re`` in a helper that
  cannot be swapped;
- ``$ref`` resolved only inside the schema and against the drafts' metaschemas (`LOCAL_REFS`):
  a reference to a URL is never fetched, where jsonschema's default registry would fetch it from
  an address the server chose (the call then fails with ``referencing.exceptions.Unresolvable``,
  and `sandbox.mcp_bridge` leaves that tool to the server);
- ``anyOf`` and ``oneOf`` keep at most `BRANCH_ERRORS` errors of each branch (jsonschema keeps every
  one, and repeats the whole value in each message: ``[0] * 99000`` against an ``anyOf`` of pydantic's
  ``Optional`` took 3.7 s and 550 MiB to refuse);
- ``multipleOf`` on the numbers as JSON writes them (`_multiple_of`): jsonschema divides floats, so
  ``19.99`` was "not a multiple of 0.01" (pydantic's ``Field(multiple_of=0.01)`` takes it), and an integer
  past a float's range raised ``OverflowError``, failing the call as the host's bug;
- no ``format`` checks.

A whole number written as a float (``3.0``) is an integer to JSON Schema, so ``{"type": "integer"}`` takes it; the
validation notes each one it took so (`noting_whole`), and `as_integers` writes them as integers (``3``): sent as
``3.0``, a server that reads integers strictly (serde's ``i64``: "invalid type: floating point `3.0`, expected i64")
refused what the host had passed.

Whatever the schema, one validation stops once it has taken `VALIDATION_CALL_SECONDS` of its thread's
CPU (`cpu_deadline`, checked as keywords are applied): `TooCostly` is raised, and `sandbox.mcp_bridge`
leaves those arguments to the server (valid arguments can cost as much: 33,000 objects through a
``$ref`` took 1.75 s).

What the host does not check, the server still validates: each exception is logged once.

(Over 400 lines: the validator's keywords, each bounded, and what its check of types notes, share its construction.)
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import logging
import reprlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import jsonschema
import re2  # type: ignore[import-untyped]
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as LOCAL_REFS  # type: ignore[import-untyped]

__all__ = [
    "LOCAL_REFS", "TooCostly", "as_integers", "cpu_deadline", "matches_patterns", "noting_whole", "short_message",
    "tool_validator",
]  # fmt: skip

logger = logging.getLogger(__name__)

PATTERN_MEMORY = 1 << 20
"""Memory RE2 may use for one schema pattern, its automaton included (a larger pattern is not checked here)."""
REGEX_BURST_STEPS = 128 << 20
REGEX_STEPS_PER_S = 12 << 20
"""RE2 work the patterns of one tool's schema may do on the host at once, then each second: bytes matched times
the pattern's program size, RE2's linear worst case (4–5 ns of CPU a step where its DFA gives up for its NFA:
``(\\w+\\s?){1000}z`` over 8 MiB took 260 s), so at most about 0.5–0.7 s at once, then 5–8% of a core, in a
worker thread (`sandbox.mcp_bridge` matches patterns off its event loop; RE2 releases the GIL). Past it a
pattern is not checked here."""

VALIDATION_CALL_SECONDS = 0.25
"""Host CPU (of the validating thread) one call's validation may take; past it the call is left to the server."""
BRANCH_ERRORS = 10
"""Errors of one ``anyOf`` / ``oneOf`` branch kept (to pick the one reported); a branch with any is not taken."""
_CHECK_EVERY = 64
"""Keyword applications between two looks at the thread's CPU time (a look costs about a microsecond)."""

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlist = _short.maxdict = _short.maxtuple = 6
_short.maxlevel = 3


class TooCostly(Exception):
    """A validation ran past its `cpu_deadline`."""


_deadline = threading.local()


@contextmanager
def cpu_deadline(seconds: float) -> Iterator[None]:
    """Validations in this block on this thread raise `TooCostly` once they have taken ``seconds`` of its CPU."""
    _deadline.at, _deadline.count = time.thread_time() + seconds, 0
    try:
        yield
    finally:
        _deadline.at = None


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """``keyword`` (a jsonschema keyword function), looking at the `cpu_deadline` every `_CHECK_EVERY` uses."""

    def timed(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        at = getattr(_deadline, "at", None)
        if at is not None:
            _deadline.count += 1
            if _deadline.count % _CHECK_EVERY == 0 and time.thread_time() > at:
                raise TooCostly
        return keyword(validator, value, instance, schema)

    return timed


_WHOLE: contextvars.ContextVar[set[int] | None] = contextvars.ContextVar("tooltree_whole_floats", default=None)
"""The ids of the floats with no fraction a validation in `noting_whole` took as integers."""


@contextmanager
def noting_whole(noted: set[int]) -> Iterator[None]:
    """Validations in this block add to ``noted`` the id of each float with no fraction (``3.0``) they took for a
    ``"type"`` that allows integers and not every number: what `as_integers` writes as integers."""
    token = _WHOLE.set(noted)
    try:
        yield
    finally:
        _WHOLE.reset(token)


def _noted_type(keyword: Callable[..., Any]) -> Callable[..., Any]:
    """The ``type`` keyword, noting a whole float it takes as an integer (`noting_whole`)."""

    def type_(validator: Any, types: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, float) and instance.is_integer() and (noted := _WHOLE.get()) is not None:
            named = [types] if isinstance(types, str) else types
            integer = isinstance(named, list) and "integer" in named and "number" not in named
            if integer and validator.is_type(instance, "integer"):  # draft 4's integers are no floats
                noted.add(id(instance))
        return keyword(validator, types, instance, schema)

    return type_


def as_integers(value: Any, noted: set[int]) -> Any:
    """``value`` with each float whose id is in ``noted`` as the integer it is (``3.0`` → ``3``); ``value`` itself
    when it holds none (the same value in JSON Schema's terms, and in JSON's)."""
    if not noted:
        return value
    if isinstance(value, float) and id(value) in noted:
        return int(value)
    if isinstance(value, dict):
        return {key: as_integers(item, noted) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [as_integers(item, noted) for item in value]
    return value


def tool_validator(schema: dict[str, Any], name: str) -> Validator:
    """The validator of ``schema`` (the input schema of the tool ``name``, for the log), its costly
    keywords replaced as the module says.

    Raises:
        jsonschema.exceptions.SchemaError: the schema is not valid for its draft.
    """
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    patterns = _Patterns(name)
    keywords: dict[str, Any] = {
        **cls.VALIDATORS,
        "uniqueItems": _unique_items,
        "type": _noted_type(cls.VALIDATORS["type"]),
        "multipleOf": _multiple_of,
        "pattern": patterns.pattern,
        "patternProperties": patterns.pattern_properties,
        "additionalProperties": patterns.additional_properties,
    }
    for keyword, bounded in (("anyOf", _any_of), ("oneOf", _one_of)):
        if keyword in keywords:
            keywords[keyword] = bounded
    if "unevaluatedProperties" in cls.VALIDATORS and _mentions(schema, "patternProperties"):
        keywords["unevaluatedProperties"] = _not_checked
        if _mentions(schema, "unevaluatedProperties"):
            logger.warning("not checking unevaluatedProperties of %s on the host: it has patterns", name)
    keywords = {k: _timed(f) for k, f in keywords.items()}
    # a tuple is sent as a JSON array (stubs type tuple schemas `tuple[...] | list[...]`): it is one here too
    arrays = cls.TYPE_CHECKER.redefine("array", lambda _, instance: isinstance(instance, list | tuple))
    linear = jsonschema.validators.extend(cls, keywords, type_checker=arrays)  # type: ignore[no-untyped-call]
    return linear(schema, format_checker=None, registry=LOCAL_REFS)  # type: ignore[no-any-return]


def short_message(error: jsonschema.ValidationError) -> str:
    """``error``'s message with the value it names in a short form (jsonschema repeats the whole value, so a
    refused 3 MB string filled the message and a cut one lost what was wrong with it)."""
    whole = repr(error.instance)
    if len(whole) <= _short.maxstring:
        return error.message
    return error.message.replace(whole, _short.repr(error.instance), 1)


PLACE_KEY_CHARS = 40
"""Most characters of one key in the place of a refused value (`describe_error`)."""
PLACE_CHARS = 200
"""Most characters of the whole place of a refused value."""


def describe_error(error: jsonschema.ValidationError, whole: str) -> str:
    """``place: message`` for a refused value, on one line and bounded: the place (``whole`` for the value itself)
    is made of the value's keys, each cut to 40 characters and all to 200 (a key of 8 MB was repeated whole, and
    a key's line end split the message), the message to 300 characters with its value in a short form."""
    from tool_tree.text import one_line

    where = "".join(
        f"[{p}]" if isinstance(p, int) else f".{one_line(str(p), PLACE_KEY_CHARS)}" for p in error.absolute_path
    )
    return f"{one_line(where.lstrip('.'), PLACE_CHARS) or whole}: {one_line(short_message(error), 300)}"


def matches_patterns(schema: Any) -> bool:
    """Whether validating against ``schema`` may match patterns (RE2 work up to the tool's budget: about 0.5 s of
    CPU at once, with the GIL released, so it belongs off an event loop)."""
    return _mentions(schema, "pattern") or _mentions(schema, "patternProperties")


def _branch_errors(validator: Any, instance: Any, subschema: Any, index: int) -> list[jsonschema.ValidationError]:
    return list(itertools.islice(validator.descend(instance, subschema, schema_path=index), BRANCH_ERRORS))


def _any_of(validator: Any, any_of: list[Any], instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """jsonschema's ``anyOf``, keeping at most `BRANCH_ERRORS` of each branch and a short form of the value."""
    context: list[jsonschema.ValidationError] = []
    for index, subschema in enumerate(any_of):
        errors = _branch_errors(validator, instance, subschema, index)
        if not errors:
            return
        context.extend(errors)
    yield jsonschema.ValidationError(
        f"{_short.repr(instance)} is not valid under any of the given schemas", context=context
    )


def _one_of(validator: Any, one_of: list[Any], instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """jsonschema's ``oneOf``, bounded as `_any_of`."""
    context: list[jsonschema.ValidationError] = []
    branches = enumerate(one_of)
    for index, subschema in branches:
        errors = _branch_errors(validator, instance, subschema, index)
        if not errors:
            break
        context.extend(errors)
    else:
        yield jsonschema.ValidationError(
            f"{_short.repr(instance)} is not valid under any of the given schemas", context=context
        )
        return
    more = [i for i, each in branches if validator.evolve(schema=each).is_valid(instance)]
    if more:
        yield jsonschema.ValidationError(
            f"{_short.repr(instance)} is valid under more than one of the given schemas ({index} and {more[0]})"
        )


def _unique_items(
    validator: Validator, unique: bool, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """``uniqueItems`` in linear time: each item reduced to a hashable key equal where JSON values are equal."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        key = _json_key(item)
        if key in seen:
            yield jsonschema.ValidationError(f"has non-unique elements (item {index} repeats an earlier one)")
            return
        seen.add(key)


def _multiple_of(
    validator: Validator, step: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """``multipleOf`` on the decimal numbers JSON sends (a float as its shortest repr), exactly: ``19.99`` is a
    multiple of ``0.01``, and an integer of any length is compared, never turned into a float."""
    if not validator.is_type(instance, "number"):
        return
    with contextlib.suppress(OverflowError, ZeroDivisionError, TypeError):
        if (instance / step).is_integer():  # as jsonschema took it (and fast): a whole quotient
            return
    try:
        multiple = (_exact(instance) / _exact(step)).denominator == 1
    except (ValueError, TypeError, ZeroDivisionError):  # a step that is no finite number (the schema's): not checked
        return
    if not multiple:
        yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step}")


def _exact(number: Any) -> Fraction:
    return Fraction(repr(number)) if isinstance(number, float) else Fraction(number)


def _json_key(value: Any) -> Any:
    """A hashable key for a JSON value; keys are equal exactly when the values are (``1 == 1.0``, ``1 != true``)."""
    if isinstance(value, bool) or value is None:
        return ("c", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list | tuple):
        return ("a", tuple(_json_key(v) for v in value))
    if isinstance(value, dict):
        return ("o", frozenset((k, _json_key(v)) for k, v in value.items()))
    return ("?", repr(value))


class _Patterns:
    """``pattern``, ``patternProperties`` and ``additionalProperties`` of one tool's schema, matched with RE2.

    jsonschema matches them with Python's ``re``, which backtracks and holds the GIL: ``^(\\w+\\s?)*$``
    against 40 letters and a ``!`` took hours, and every session's calls on the event loop waited. RE2 is
    linear in the text. Each pattern is compiled once. A pattern RE2 refuses (backreferences, lookaround,
    over `PATTERN_MEMORY`), and every match past the tool's budget of RE2 work (`REGEX_BURST_STEPS`), are
    not checked here, never handed to ``re``, and logged once; the server still validates its own input.
    """

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self._compiled: dict[str, Any] = {}  # pattern -> RE2 regexp, or None where RE2 refused it
        self._lock = threading.Lock()
        self._steps = float(REGEX_BURST_STEPS)
        self._at = time.monotonic()
        self._spent = False

    def search(self, pattern: str, text: str) -> bool | None:
        """Whether ``pattern`` occurs in ``text`` (unanchored, as JSON Schema and ``re.search``); None if unchecked."""
        compiled = self._compile(pattern)
        if compiled is None:
            return None
        data = text.encode("utf-8", "surrogatepass")  # RE2 matches bytes; a lone surrogate is no character
        if not self._spend((len(data) + 1) * compiled.programsize):
            return None
        return compiled.search(data) is not None

    def _compile(self, pattern: str) -> Any:
        if pattern in self._compiled:
            return self._compiled[pattern]
        options = re2.Options()
        options.never_capture = True  # groups only group: matching stays on RE2's fastest engines
        options.log_errors = False
        options.max_mem = PATTERN_MEMORY
        try:
            compiled = re2.compile(pattern, options)
        except (re2.error, UnicodeEncodeError) as e:
            reason = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) else str(e)
            logger.warning("not checking pattern %r of %s on the host: RE2 refuses it (%s)", pattern, self.tool, reason)
            compiled = None
        self._compiled[pattern] = compiled
        return compiled

    def _spend(self, steps: int) -> bool:
        with self._lock:
            now = time.monotonic()
            self._steps = min(float(REGEX_BURST_STEPS), self._steps + (now - self._at) * REGEX_STEPS_PER_S)
            self._at = now
            if steps <= self._steps:
                self._steps -= steps
                return True
            first, self._spent = not self._spent, True
        if first:
            logger.warning("not checking some patterns of %s on the host: past its budget of RE2 work", self.tool)
        return False

    # jsonschema's keywords, on RE2; the validator is Any because `descend` is not on jsonschema's protocol.

    def pattern(self, validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
        if validator.is_type(instance, "string") and self.search(pattern, instance) is False:
            yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")

    def pattern_properties(
        self, validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
    ) -> Iterator[jsonschema.ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        for pattern, subschema in patterns.items():
            for key, value in instance.items():
                if self.search(pattern, key):  # not where unchecked: the server decides
                    yield from validator.descend(value, subschema, path=key, schema_path=pattern)

    def additional_properties(
        self, validator: Any, additional: Any, instance: Any, schema: Any
    ) -> Iterator[jsonschema.ValidationError]:
        if not validator.is_type(instance, "object"):
            return
        properties = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        # A key a pattern matched, or could not be checked against here, is not an extra one.
        extras = {k for k in instance if k not in properties and all(self.search(p, k) is False for p in patterns)}
        if validator.is_type(additional, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], additional, path=extra)
        elif not additional and extras:  # jsonschema's messages
            if "patternProperties" in schema:
                verb = "does" if len(extras) == 1 else "do"
                joined = ", ".join(repr(each) for each in sorted(extras))
                listed = ", ".join(repr(each) for each in sorted(patterns))
                yield jsonschema.ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
            else:
                verb = "was" if len(extras) == 1 else "were"
                joined = ", ".join(repr(each) for each in sorted(extras, key=str))
                yield jsonschema.ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


def _not_checked(validator: Validator, value: Any, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    """A keyword left to the server."""
    return iter(())


def _mentions(schema: Any, keyword: str) -> bool:
    """Whether ``keyword`` is a key anywhere in ``schema`` (a property of that name counts too)."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False
