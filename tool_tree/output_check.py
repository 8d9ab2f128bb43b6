"""The check of a tool's structured result against its output schema, bounded in work and off the event loop.

The SDK checks each result that has an output schema (`mcp.ClientSession.validate_tool_result`) with
jsonschema, on the event loop every server's calls share, with Python's backtracking ``re`` and jsonschema's
pairwise ``uniqueItems``. A hostile server froze the whole process with it: a 30-byte result against
``"pattern": "^(a+)+$"`` held the loop 25 s (each character more doubles it), 3,000 objects under
``uniqueItems`` 14 s; no timeout could end it, and every other server's calls (every `tooltree serve` client)
waited. The refusal repeated the whole result (3 MB in, an 11 MB message).

`OutputCheck` takes the SDK's place on a session (`install`): the same decisions (a result whose
``structuredContent`` the schema refuses, or that has none while its tool has an output schema, is refused:
`RuntimeError`, which the pool reports as an ``invalid_result`` the tool ran) made with the host's bounded
validator (`tool_tree.schema_check.tool_validator`: RE2, linear ``uniqueItems``, ``$ref`` only inside the
schema), in a worker thread, each validation stopping at `VALIDATION_CALL_SECONDS` of CPU and a session's at
`OUTPUT_BURST_SECONDS` at once, then `OUTPUT_RATE` of a core. Past either, or with a schema the validator
cannot use, the result is passed on unchecked (logged once per tool). The schema is the one in the listing
tooltree read (``list_tools_raw``), the one its tree was made from: a server can no longer show the tree one
schema and the SDK's own listing another. The refusal is one line of at most a few hundred characters.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import anyio
import jsonschema
import mcp
import mcp.types as mt
import referencing.exceptions
from jsonschema.protocols import Validator

from tool_tree.budget import SharedBucket
from tool_tree.schema_check import VALIDATION_CALL_SECONDS, TooCostly, cpu_deadline, describe_error, tool_validator
from tool_tree.text import cut_name, one_line

logger = logging.getLogger(__name__)

OUTPUT_BURST_SECONDS = 1.0
OUTPUT_RATE = 0.05
"""Host CPU the checks of one session's results may take: 1 s at once, then 5% of a core (each at most
`VALIDATION_CALL_SECONDS`), as the checks of a sandbox session's arguments may (`sandbox.mcp_bridge`)."""
MAX_ERRORS = 100
"""Errors of one result looked at to pick the one reported."""


class OutputCheck:
    """The output schemas of one server's ``tools`` (its raw listing), and the checks of its results."""

    def __init__(self, server: str, tools: list[dict[str, Any]]) -> None:
        self.server = server
        self._schemas = {
            str(t.get("name")): t["outputSchema"] for t in tools if isinstance(t.get("outputSchema"), Mapping)
        }
        self._validators: dict[str, Validator | None] = {}
        self._budget = SharedBucket(OUTPUT_BURST_SECONDS, OUTPUT_RATE)
        self._lock = threading.Lock()
        self._logged: set[str] = set()

    def install(self, client: mcp.Client) -> None:
        """Check ``client``'s results here instead of in the SDK (whose check this replaces, on this session only)."""
        client.session.validate_tool_result = self.validate  # type: ignore[method-assign]  # this instance only

    async def validate(self, name: str, result: mt.CallToolResult) -> None:
        """Raises: RuntimeError: ``result`` is not what the output schema of ``name`` allows (one line, why)."""
        if name not in self._schemas:
            return
        shown = cut_name(name)  # escaped, not cleaned: get\u200b_item is not get_item
        if result.structured_content is None and "structured_content" not in result.model_fields_set:
            raise RuntimeError(f"tool {shown} has an output schema but returned no structured content")
        refusal = await anyio.to_thread.run_sync(self._check, name, result.structured_content)
        if refusal:
            raise RuntimeError(f"structured content that tool {shown}'s output schema refuses: {refusal}")

    def _check(self, name: str, value: Any) -> str:
        """Why the schema of ``name`` refuses ``value`` ("" when it does not, or when it is not checked here)."""
        validator = self._validator(name)
        if validator is None:
            return ""
        if self._budget.charge(0.0) > 0:
            budget = f"{OUTPUT_BURST_SECONDS:g} s at once, then {OUTPUT_RATE:.0%} of a core"
            self._unchecked(name, f"past the session's budget of host CPU for checking results ({budget})")
            return ""
        started = time.thread_time()
        try:
            with cpu_deadline(VALIDATION_CALL_SECONDS):
                best = jsonschema.exceptions.best_match(itertools.islice(validator.iter_errors(value), MAX_ERRORS))
        except TooCostly:
            self._unchecked(name, f"results that take over {VALIDATION_CALL_SECONDS:g} s of host CPU to check")
            return ""
        except (referencing.exceptions.Unresolvable, RecursionError) as e:  # a "$ref" outside the schema
            self._unchecked(name, f"its output schema cannot be used ({type(e).__name__})")
            self._validators[name] = None
            return ""
        finally:
            self._budget.charge(time.thread_time() - started)
        if best is None:
            return ""
        return describe_error(best, "structuredContent")

    def _validator(self, name: str) -> Validator | None:
        if name not in self._validators:
            try:
                self._validators[name] = tool_validator(dict(self._schemas[name]), f"{self.server}.{name}")
            except (jsonschema.exceptions.SchemaError, RecursionError) as e:
                self._unchecked(name, f"its output schema cannot be used ({type(e).__name__})")
                self._validators[name] = None
        return self._validators[name]

    def _unchecked(self, name: str, why: str) -> None:
        """Log once per tool that some of its results are passed on unchecked, and why."""
        with self._lock:
            first = name not in self._logged
            self._logged.add(name)
        if first:
            logger.warning("not checking some results of %s.%s against its output schema: %s",
                           one_line(self.server, 80), cut_name(name), why)  # fmt: skip
