"""`ArgumentChecks`: the check of a tool call's arguments against the tool's input schema on the host.

`sandbox.mcp_bridge.McpBridge` validates a call's arguments with it (``jsonschema``, with a linear-time
``uniqueItems``, patterns matched by RE2, ``$ref`` resolved only inside the schema and the drafts' metaschemas — never
fetched — and at most `MAX_VALIDATION_ERRORS` errors considered) and returns the precise error to the script;
unknown properties are refused only where the schema says so. Each tool's validator is built once, at its first
call, from its stored definition; a schema that cannot be used, arguments too costly to validate and a session past
its budget of host CPU for validation are left to the server, which validates its own input, and logged once a tool.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import referencing.exceptions
from jsonschema.protocols import Validator

from sandbox.request_budget import ACCOUNT, RequestBudget
from tool_tree.schema_check import (
    VALIDATION_CALL_SECONDS,
    TooCostly,
    cpu_deadline,
    matches_patterns,
    noting_whole,
    tool_validator,
)
from tool_tree.tree import Manifest, ToolEntry

logger = logging.getLogger("sandbox.mcp_bridge")  # the bridge's log, as before its checks had a module of their own

MAX_VALIDATION_ERRORS = 100
"""Validation errors looked at to pick the one reported (an array of a million wrong items has a million)."""
ARGUMENTS_SAID = 3
"""The most arguments one refusal names as wrong (each once)."""
VALIDATION_BURST_SECONDS = 1.0
VALIDATION_RATE = 0.05
"""Host CPU a session's argument validations may take: 1 s at once, then 5% of a core (each call at most
`schema_check.VALIDATION_CALL_SECONDS`, the one that overdraws it included). Past it, calls go to their servers
unchecked here until it refills: the servers validate their own input. A script's validations are charged to its
sandbox's request budget too (`sandbox.request_budget.ACCOUNT`), and skipped likewise while that is spent."""


class ArgumentChecks:
    """The validators of a bridge's tools, built once, and its session's budget of host CPU for validation.

    Args:
        manifest: the tree's manifest.
        definition: a tool's raw definition as stored in its server's snapshot (None: not readable there).
    """

    def __init__(self, manifest: Manifest, definition: Callable[[ToolEntry], dict[str, Any] | None]) -> None:
        self._manifest = manifest
        self._definition = definition
        self._lock = threading.Lock()
        self.validators: dict[tuple[str, str], Validator | None] = {}
        """Each tool's validator (None: its arguments are left to the server), built at its first call."""
        self._patterned: dict[tuple[str, str], bool] = {}
        self.budget = RequestBudget(burst=VALIDATION_BURST_SECONDS, rate=VALIDATION_RATE)
        """The session's host CPU for validation (`VALIDATION_BURST_SECONDS`, `VALIDATION_RATE`)."""
        self._unchecked_logged: set[tuple[str, str]] = set()

    def companion(self) -> ArgumentChecks:
        """Checks sharing the validators built and the tools logged as unchecked, with a budget of their own."""
        other = copy.copy(self)  # shallow: the validators and the logged set are the same objects
        other.budget = RequestBudget(burst=VALIDATION_BURST_SECONDS, rate=VALIDATION_RATE)
        return other

    def errors(
        self, entry: ToolEntry, arguments: dict[str, Any], whole: set[int] | None = None
    ) -> list[jsonschema.ValidationError]:
        """The errors the host reports for ``arguments`` (none: valid, or left to the server), within the
        session's validation budget and the sandbox's request budget (`ACCOUNT`, when a sandbox's request is served):
        each validation is charged the CPU it took on this thread, to both. The best first, then one of each other
        argument that is wrong, up to `ARGUMENTS_SAID` (before: the best alone, and a call of two wrong arguments was
        refused twice, once for each). ``whole``: where the ids of the floats taken as integers are added
        (`tool_tree.schema_check.noting_whole`)."""
        validator = self._validator(entry)
        if validator is None:
            return []
        if self.budget.charge(0.0) > 0:
            budget = f"{VALIDATION_BURST_SECONDS:g} s at once, then {VALIDATION_RATE:.0%} of a core"
            self._unchecked(entry, f"past the session's budget of host CPU for validation ({budget})")
            return []
        account = ACCOUNT.get()
        if account is not None and account.charge(0.0) > 0:
            self._unchecked(entry, "past the sandbox's budget of host CPU for its requests")
            return []
        started = time.thread_time()
        try:
            with cpu_deadline(VALIDATION_CALL_SECONDS), noting_whole(whole if whole is not None else set()):
                errors = list(itertools.islice(validator.iter_errors(arguments), MAX_VALIDATION_ERRORS))
                best: jsonschema.ValidationError | None = jsonschema.exceptions.best_match(errors)
        except TooCostly:
            self._unchecked(entry, f"arguments that take over {VALIDATION_CALL_SECONDS:g} s of host CPU to validate")
            return []
        except referencing.exceptions.Unresolvable as e:  # a "$ref" outside the schema: left to the server
            logger.warning("not validating %s.%s on the host: %s", entry.server, entry.tool, e)
            self.validators[(entry.server, entry.tool)] = None
            return []
        finally:
            took = time.thread_time() - started
            self.budget.charge(took)
            if account is not None:
                account.charge(took)
        if best is None:
            return []
        said, seen = [best], {_argument(best)}
        for error in errors:
            if len(said) < ARGUMENTS_SAID and (name := _argument(error)) is not None and name not in seen:
                seen.add(name)
                said.append(error)
        return said

    def _unchecked(self, entry: ToolEntry, why: str) -> None:
        """Log once per tool (and session) that some of its calls go to the server unchecked here, and why."""
        key = (entry.server, entry.tool)
        with self._lock:
            first = key not in self._unchecked_logged
            self._unchecked_logged.add(key)
        if first:
            logger.warning("not validating some calls of %s.%s on the host: %s; the server validates them",
                           entry.server, entry.tool, why)  # fmt: skip

    def matches_patterns(self, server: str, tool: str) -> bool:
        """Whether validating the tool's arguments may match schema patterns (costly: see `tool_tree.schema_check`)."""
        key = (server, tool)
        if key not in self._patterned:
            entry = self._manifest.tool_entry(server, tool)
            raw = self._definition(entry) if entry is not None else None
            self._patterned[key] = raw is not None and matches_patterns(raw.get("inputSchema"))
        return self._patterned[key]

    def _validator(self, entry: ToolEntry) -> Validator | None:
        key = (entry.server, entry.tool)
        if key in self.validators:
            return self.validators[key]
        validator: Validator | None = None
        try:
            raw = self._definition(entry)
            schema = raw.get("inputSchema") if raw else None
            if isinstance(schema, dict):
                validator = tool_validator(schema, f"{entry.server}.{entry.tool}")
        except (jsonschema.exceptions.SchemaError, RecursionError) as e:
            # An unusable schema is not checked here; the server still validates its own input.
            logger.warning("not validating %s.%s on the host: %s", entry.server, entry.tool, e)
        self.validators[key] = validator
        return validator


def _argument(error: jsonschema.ValidationError) -> object:
    """The argument a validation error is about (the first key of its place), or None for the arguments as a whole."""
    return error.absolute_path[0] if error.absolute_path else None
