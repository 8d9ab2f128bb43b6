"""`McpBridge`: the `ToolBridge` that carries a sandbox's tool calls to real MCP servers.

For every call from a script it:

1. refuses arguments past the per-call limits of `sandbox.call_limits` (values, depth, bytes),
   before hashing or validating them;
2. accepts only a tool in the tree's manifest (exact match on server and original tool name;
   anything else is refused and audited) whose server the pool was started with (a tree generated
   before its server left the configuration, or was disabled there, says so and to regenerate), and
   refuses one that the configuration's ``include``/``exclude`` for its server now leaves out (a
   tree generated before the filter; say to regenerate), and one that can only run as an MCP task
   (``execution.taskSupport: "required"``): calls go out as plain ``tools/call`` requests;
3. refuses a tool whose live definition no longer matches the schema hash it was generated
   from (a server that changed its tools since generation, possibly maliciously), checked at the tool's first call
   and again after its server was started again or said its tools changed (its listing read again first:
   `tool_tree.pool_relist`);
4. validates the arguments against the tool's input schema on the host (`sandbox.argument_checks`) and returns the
   precise error to the script;
5. enforces per-execution budgets (number of calls, bytes of results: a call is admitted while the results so far
   are under it, and a result that comes once they reach it — a call that ran beside the ones that spent it — is
   not handed on; so an execution's results stay under the budget plus its one result that crossed it);
6. calls the tool through the `ServerPool` and returns the result unflattened (a call that got no usable
   answer, a `CallFailure` such as a timeout, fails with its code instead: it is not the tool's error);
7. writes one JSON audit line (`sandbox.audit_log.AuditLog`): session, server, tool, argument digest, outcome,
   bytes, ms, and the error cleaned and cut as the ledger's is (`sandbox.results.ledger_error`: before, a server's
   error went in whole, 24 MB a line for an error of 2,000,000 emoji, 480 MB of audit log in 10 s); an execution's
   refused calls past `MAX_REFUSED_LINES` are counted in one line at its end.

Secrets (server env, headers) live in the pool on the host; nothing of them enters the sandbox.

(Over 400 lines: the one gate every call of a script passes, whose steps above share its allowlist, its checked
schemas, its budgets and its audit log.)
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from sandbox.argument_checks import ARGUMENTS_SAID as ARGUMENTS_SAID
from sandbox.argument_checks import MAX_VALIDATION_ERRORS as MAX_VALIDATION_ERRORS
from sandbox.argument_checks import VALIDATION_BURST_SECONDS as VALIDATION_BURST_SECONDS
from sandbox.argument_checks import VALIDATION_RATE as VALIDATION_RATE
from sandbox.argument_checks import ArgumentChecks
from sandbox.audit_log import AuditLog as AuditLog
from sandbox.bridge import ToolBridge, ToolCallRefused
from sandbox.call_limits import SMALL, ArgumentsRefused, CallSize, carried_size, measure
from sandbox.results import ledger_error
from sandbox.stored_definitions import StoredDefinition, stored_definition
from sandbox.stored_definitions import manifest_version as manifest_file_version
from sandbox.tool_changes import StaleRefusals, StaleSessionRefused, StaleTools, changed_parts, regenerating
from tool_tree.config import Config, setting_named
from tool_tree.pool import CallFailure, PoolError, ProgressListener, ServerPool, ServerUnavailable, UnknownServerError
from tool_tree.regenerate import shell_word
from tool_tree.schema_check import as_integers, describe_error
from tool_tree.sendable import Unsendable
from tool_tree.server_asks import Asker
from tool_tree.text import clean
from tool_tree.tree import Manifest, ToolEntry, requires_task, schema_hash

logger = logging.getLogger(__name__)

MAX_REFUSED_LINES = 2_000
"""Refused calls of one execution written one audit line each (as many as the ledger lists); the rest are counted by
code in one line at the execution's end (`McpBridge.end_execution`)."""
STDERR_LINES = 8
STDERR_CHARS = 1500
"""How much of a failed server's stderr an error shows: its last lines, at most this many characters."""


@dataclass(frozen=True)
class Budgets:
    """Per-execution limits on what one script may pull through the bridge.

    ``result_bytes`` bounds the tool results handed on (as JSON text): a call is admitted while those of the
    execution are under it, and its result is handed on only if they still are when it comes, so they stay under
    ``result_bytes`` plus the one result that crossed it (at most 8 MiB in a session: `sandbox.calls`), however many
    calls were in flight. Before, it was checked only as a call was admitted: 60 threads' calls in flight pulled
    468 MB for a budget of 256 MiB.
    """

    calls: int = 2_000
    result_bytes: int = 256 * 1024 * 1024


class McpBridge(ToolBridge):
    """Routes script tool calls to a `ServerPool`, guarded by the tree's manifest and schemas.

    Args:
        tree: the generated tree whose manifest is the allowlist.
        pool: live sessions to the servers. Its coroutines must run on the loop it was entered on, so a
            session using this bridge is given that loop: ``Sandbox(tools=bridge, tool_loop=background_pool.loop)``
            (`loop_bound`: refused without one).
        budgets: per-execution limits; `begin_execution` resets the counters.
        audit: where to write one line per call (None: no audit).
        session: the session id written into audit lines.
        verify_live: compare each tool's live definition to the manifest before its first call.
        manifest: the tree's manifest, when the caller has loaded it already.
        manifest_version: the version of the manifest's file it was read from
            (`sandbox.stored_definitions.versioned_manifest`; None: the file's now), taken before it was read: a
            file replaced since is a tree regenerated under the session (`sandbox.tool_changes.STALE_SESSION`).
        config: the configuration the pool's servers come from: a tool its ``include``/``exclude`` leaves out
            is refused, and it is named when a call goes to a server of the tree that the pool does not have
            (None: the manifest alone decides, and no file is named).

    Raises:
        TypeError: an argument is of the wrong type (``pool`` a `BackgroundPool`: give its ``.pool``; ``audit`` a
            path: give ``AuditLog(path)``).
        TreeError: the tree has no readable manifest.
    """

    loop_bound = True

    def __init__(
        self,
        tree: str | os.PathLike[str],
        pool: ServerPool,
        *,
        budgets: Budgets | None = None,
        audit: AuditLog | None = None,
        session: str = "",
        verify_live: bool = True,
        manifest: Manifest | None = None,
        config: Config | None = None,
        manifest_version: tuple[int, ...] | None = None,
    ) -> None:
        from sandbox.session_args import bridge_args

        bridge_args(tree, pool, budgets, audit, manifest, config)
        self.tree = Path(tree)
        self.manifest_version = manifest_version if manifest_version is not None else manifest_file_version(self.tree)
        self.manifest = manifest if manifest is not None else Manifest.load(self.tree)
        self.pool = pool
        self.config = config
        self._pooled: frozenset[str] | None = None  # the pool's servers, read at the first call
        self._configured = {s.name: s for s in config.servers} if config is not None else {}
        self.budgets = budgets or Budgets()
        self.audit = audit
        self.session = session
        self.verify_live = verify_live
        self._lock = threading.Lock()
        self._calls = 0
        self._bytes = 0
        self._refused_lines = 0
        self._refused_unwritten: dict[str, int] = {}
        """Refused calls of this execution past `MAX_REFUSED_LINES`, by code: one audit line says them at its end."""
        self._definitions: dict[tuple[str, str], StoredDefinition] = {}
        self.stale = StaleRefusals()
        """The calls refused since the tree was regenerated under the session (shared with its companions)."""
        self._stale = StaleTools(self.tree, self.manifest_version, self.stale, self.manifest)
        self._checks = ArgumentChecks(self.manifest, self._definition)
        """Each tool's validator and the session's host CPU for validation (`sandbox.argument_checks`)."""
        self._verified: dict[tuple[str, str], tuple[int, int]] = {}
        """Tools whose live definition matched the manifest, and the `ServerPool.listed` of the listing that showed it:
        a server started again since, or that said its tools changed since, is checked again."""
        self.following: Callable[[str], float | None] | None = None
        """Given a server's name, the seconds until `tooltree serve` regenerates its part of the tree, as the server
        said its tools changed (0: under way; None: none is due); None: nothing regenerates it. A call of a tool the
        server changed or removed meanwhile says so (`sandbox.tool_changes.regenerating`), not to regenerate it."""
        self.script_asks: Callable[[str], Asker | None] | None = None
        """Who answers what a server asks during a call of the running script, by server (`tool_tree.server_asks`):
        set for an execution by a caller that can ask someone (`tooltree serve` with ``asks_from_scripts``); None:
        such a question is refused. A call's own ``asker`` comes first."""

    def companion(self) -> McpBridge:
        """A bridge on the same pool, manifest and audit log, with budgets of its own.

        It shares what was checked once for all: each tool's stored definition, its schema validator and its
        live definition.
        """
        other = copy.copy(self)  # shallow: the validators and the verified set are the same objects
        other._lock = threading.Lock()
        other._calls = other._bytes = other._refused_lines = 0
        other._refused_unwritten = {}
        other._checks = self._checks.companion()
        other.script_asks = None  # a script's: never a host caller's
        return other

    def keep_refusals(self, of: McpBridge) -> None:
        """Count and word this bridge's refusals of a regeneration's (`stale`) with ``of``'s, the bridge it replaces in
        its runtime (`sandbox.host.Runtime._follow_tree`): they are its session's, whose runner may word and count them
        (`tooltree serve` renews the session)."""
        self.stale = self._stale.refusals = of.stale

    def begin_execution(self) -> None:
        """Reset the per-execution budgets (the session calls this before each execution)."""
        self.end_execution()  # a caller that never said the last one ended
        with self._lock:
            self._calls = 0
            self._bytes = 0
            self._refused_lines = 0

    def end_execution(self) -> None:
        """One audit line for the refused calls of the execution past `MAX_REFUSED_LINES`: how many, by code."""
        with self._lock:
            unwritten, self._refused_unwritten = self._refused_unwritten, {}
        if unwritten and self.audit is not None:
            record = {"session": self.session, "outcome": "refused", "code": "refused_calls_counted"}
            counted = {"calls": sum(unwritten.values()), "codes": unwritten}
            self.audit.write({**record, **counted, "ms": 0.0, "ts": round(time.time(), 3)})

    def _audit(self, record: dict[str, Any]) -> None:
        """Write a call's audit line; past `MAX_REFUSED_LINES` refused calls in an execution, count it instead.

        Before, each refused call had its line: refused calls cost no call budget, so a script making them for its
        whole timeout, each naming a tool of 256 emoji (12 bytes each in ASCII JSON), wrote 45 MB of audit log in
        25 s, growing with the timeout."""
        if self.audit is None:
            return
        if record.get("outcome") == "refused":
            with self._lock:
                if self._refused_lines >= MAX_REFUSED_LINES:
                    code = str(record.get("code"))
                    self._refused_unwritten[code] = self._refused_unwritten.get(code, 0) + 1
                    return
                self._refused_lines += 1
        self.audit.write(record)

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        progress: ProgressListener | None = None,
        asker: Asker | None = None,
    ) -> dict[str, Any]:
        """The call, through the steps the module lists. ``progress``: told the server's progress notifications for
        the call; ``asker``: answers what the server asks during it (`tool_tree.pool.ServerPool.call`; a host
        caller's: a script's calls have neither).

        Raises:
            ToolCallRefused: a step refused it, or the server could not be reached (the audit line says which).
        """
        started = time.monotonic()
        record: dict[str, Any] = {"session": self.session, "server": server, "tool": tool}
        try:
            if self.audit is not None and self.audit.error is not None:  # every call is audited, or not made
                raise ToolCallRefused(f"{self.audit.error}: tool calls are not made while it fails", "audit_failed")
            if not isinstance(arguments, dict):  # a host caller's mistake (Runtime.call_tool): was "no len()"
                raise ToolCallRefused(
                    f"invalid arguments: expected a dict of the tool's arguments by name ({{}} for none), "
                    f"got {type(arguments).__name__}",
                    "invalid_arguments",
                )
            known = self._measured(arguments)  # its session's measure, or one now (at most SMALL: on the loop)
            if known is not None and known.within(SMALL) and not self._checks.matches_patterns(server, tool):
                entry, record["args_sha256"], arguments, sendable = self._admit(server, tool, arguments, known)
            else:  # measuring, hashing and validating large arguments, or matching patterns (RE2 releases the GIL),
                # must not hold up every session's calls on this loop
                entry, record["args_sha256"], arguments, sendable = await anyio.to_thread.run_sync(
                    self._admit, server, tool, arguments, known
                )
            if asker is None and (asks := self.script_asks) is not None:
                asker = asks(server)
            result, size = await self._call(entry, arguments, progress, asker, sendable=sendable)
            record["bytes"] = size
            self._count_result(size)
        except ToolCallRefused as e:
            record.update(outcome="refused", code=e.code, error=ledger_error(e.message))
            if isinstance(e, StaleSessionRefused):
                self.stale.count += 1
            raise
        except anyio.get_cancelled_exc_class():
            record.update(outcome="cancelled", error="the call was cancelled before the server answered")
            raise
        else:
            record["outcome"] = "error" if result.get("isError") else "ok"
            return result
        finally:
            record["ms"] = round((time.monotonic() - started) * 1000, 1)
            record["ts"] = round(time.time(), 3)
            self._audit(record)

    def refused(self, server: str, tool: str, code: str, message: str) -> None:
        """An audit line for a call its session refused before handing it on, as for one refused here (before: none,
        so a script's calls with a server name of a megabyte left no trace)."""
        record = {"session": self.session, "server": server, "tool": tool, "outcome": "refused", "code": code}
        self._audit({**record, "error": ledger_error(message), "ms": 0.0, "ts": round(time.time(), 3)})

    def waiting_on(self, server: str, *, timed_out: bool = False) -> str:
        """A server still starting (or waiting for its turn to) when a call of it was cancelled: said, with the
        settings that bound it when the script's timeout ended it. Before, the ledger said only that the execution
        ended before the server answered, and why (a server hanging in its start-up) was in the host's log alone."""
        try:
            state = self.pool.state(server)
        except UnknownServerError:  # nothing to add (a closing pool says where each server is, as before)
            return ""
        if state == "starting":
            # The advice is for a timeout: after a Ctrl-C it read as if the user had not stopped the script.
            advice = (
                "; a script that waits longer needs a longer sandbox timeout, and the server its own timeout setting"
                if timed_out
                else ""
            )
            return f" (the server {clean(server)} was still starting: it had not answered its start-up yet{advice})"
        if state == "queued":
            return f" (the server {clean(server)} was still waiting for its turn to start: other servers were starting)"
        return ""

    @staticmethod
    def _measured(arguments: dict[str, Any]) -> CallSize | None:
        """The size of ``arguments`` as the script's session measured them (`sandbox.call_limits.MEASURED`), or as
        measured now within `sandbox.call_limits.SMALL` (a host caller's: cheap enough for the event loop, and within
        the per-call limits); None when they are past it or refused there (`_admit` measures them, on a thread)."""
        carried = carried_size(arguments)
        if carried is not None:
            return carried
        try:
            return measure(arguments, SMALL)
        except ArgumentsRefused:
            return None

    def _admit(
        self, server: str, tool: str, arguments: dict[str, Any], size: CallSize | None = None
    ) -> tuple[ToolEntry, str, dict[str, Any], bool]:
        """Everything decided before the server is involved; returns the tool, the arguments' digest, the arguments
        to send (a whole float the schema types as an integer, ``3.0``, as one: `tool_tree.schema_check.as_integers`)
        and whether their measure found them sendable (`sandbox.call_limits.CallSize.sendable`: the pool then does not
        check them again). ``size``: their measure, when it was taken (else it is taken here).

        Raises:
            ToolCallRefused: arguments over the limits, a tool outside the manifest, a budget spent,
                or arguments the tool's schema rejects.
        """
        if size is None:
            try:
                size = measure(arguments)  # before anything is done in proportion to them
            except ArgumentsRefused as e:
                raise ToolCallRefused(e.message, e.code) from None
        digest = size.digest
        entry = self.manifest.tool_entry(server, tool)
        if entry is None:
            raise ToolCallRefused(
                f"{server}.{tool} is not in this tree's manifest (only generated tools can be called)", "not_allowed"
            )
        if self._pooled is None:
            self._pooled = frozenset(self.pool.names)
        if server not in self._pooled:
            # Before: each call failed with "no server named 'time' in the pool", which did not say why.
            raise ToolCallRefused(self._not_configured(server), "not_allowed")
        self._check_filters(server, tool)
        if requires_task(self._definition(entry)):
            # Such a server answers a plain call with an error of its own (server-everything: "MCP error -32601:
            # ... requires task augmentation"), which reads as the tool having failed: retrying cannot help.
            raise ToolCallRefused(
                "the tool runs only as an MCP task (its definition says execution.taskSupport: 'required'); "
                "tooltree calls tools directly, not as tasks, so it cannot be called",
                "unsupported",
            )
        with self._lock:
            if self._calls >= self.budgets.calls:
                raise ToolCallRefused(
                    f"budget exhausted: at most {self.budgets.calls} tool calls per execution", "budget_exhausted"
                )
            if self._bytes >= self.budgets.result_bytes:
                raise ToolCallRefused(
                    f"budget exhausted: at most {self.budgets.result_bytes} bytes of tool results per execution",
                    "budget_exhausted",
                )
            self._calls += 1
        whole: set[int] = set()
        errors = self._checks.errors(entry, arguments, whole)
        if errors:
            said = "; ".join(describe_error(error, "arguments") for error in errors)
            raise ToolCallRefused(f"invalid arguments: {said}", "invalid_arguments")
        return entry, digest, as_integers(arguments, whole), size.sendable

    def _check_filters(self, server: str, tool: str) -> None:
        """Raises: ToolCallRefused: the configuration's include/exclude for ``server`` leaves ``tool`` out."""
        configured = self._configured.get(server)
        if configured is None or (key := configured.list_leaving_out(tool)) is None:
            return
        setting = setting_named(configured, key, self.config.file if self.config is not None else None)
        raise ToolCallRefused(
            f"{server}.{tool} is left out by {setting}, but this tree was generated before "
            f"that: regenerate the tree ({self._regenerate()})",
            "not_allowed",
        )

    def _not_configured(self, server: str) -> str:
        """Why a server of the tree has no place in the pool: its configuration lacks it, or disables it."""
        config = self.config
        if config is None:
            lacks = "the configuration the server pool was started from does not have it (or disables it)"
        else:
            named = "the configuration" if config.source == "<config>" else config.source
            if (configured := self._configured.get(server)) is not None and not configured.enabled:
                key = setting_named(configured, "enabled")
                lacks = f"{named} disables it ({key}: {'true' if key.endswith('.disabled') else 'false'})"
            else:
                lacks = f"{named} does not have it"
        return (
            f"the tree has server {server!r} but {lacks}: the tree was generated from another configuration; "
            f"regenerate the tree ({self._regenerate()}), or configure the server again"
        )

    def _followed(self, server: str) -> str | None:
        """What to do about a tool ``server`` changed when `following` regenerates its part of the tree, else None."""
        due = self.following(server) if self.following is not None else None
        return regenerating(server, due) if due is not None else None

    def _regenerate(self, *more: str) -> str:
        """The command that regenerates this tree from the pool's configuration, with ``more`` options (before:
        ``tooltree generate-tree`` alone, which reads ./tooltree.yaml and writes ./tree). A configuration read from
        no file is not named; each word is one shell word, a path's control characters escaped (`shell_word`)."""
        config = self.config.file if self.config is not None else None
        given = ["--config", config] if config is not None else []
        words = ["tooltree", "generate-tree", *given, "--out", str(self.tree), *more]
        return " ".join(shell_word(word) for word in words)

    async def _call(
        self,
        entry: ToolEntry,
        arguments: dict[str, Any],
        progress: ProgressListener | None = None,
        asker: Asker | None = None,
        *,
        sendable: bool = False,
    ) -> tuple[dict[str, Any], int]:
        """The call itself; returns the result and its size as JSON text. ``sendable``: as `_admit` found them."""
        try:
            if self.verify_live and self._verified.get((entry.server, entry.tool)) != self.pool.listing(entry.server):
                await self._verify(entry)
            # The pool's own entry for the bridge, which measured the arguments (its `call` checks them again).
            result = await self.pool._call_measured(
                entry.server, entry.tool, arguments, timeout=None, progress=progress, asker=asker, sendable=sendable
            )
        except Unsendable as e:  # NaN: before, sent as null (a host caller's, or serve's client)
            raise ToolCallRefused(f"invalid arguments: {e.why}", "invalid_arguments") from None
        except ServerUnavailable as e:
            raise ToolCallRefused(with_stderr(str(e), e.stderr_tail), "server_unavailable") from None
        except PoolError as e:
            raise ToolCallRefused(str(e), "server_unavailable") from None
        if isinstance(result, CallFailure):  # no usable answer (a timeout, a protocol error): not the tool's error
            raise ToolCallRefused(result.message, result.code)
        return result, len(json.dumps(result, ensure_ascii=False))

    def _count_result(self, size: int) -> None:
        """Count a result of ``size`` bytes against the execution's budget of result bytes.

        Raises:
            ToolCallRefused: the results of calls that ran beside this one reached the budget before it came: it is
                not handed on, so what an execution relays stays under the budget plus one result however many
                calls were in flight (before, each of them was: 468 MB for a budget of 256 MiB).
        """
        with self._lock:
            spent = self._bytes >= self.budgets.result_bytes
            if not spent:
                self._bytes += size
        if spent:
            raise ToolCallRefused(
                f"budget exhausted: the result ({size:,} bytes) came after this execution's "
                f"{self.budgets.result_bytes:,} bytes of tool results were spent by calls that ran beside it, so it "
                "is not returned; the call did run on the server (what the tool does, it has done)",
                "budget_exhausted",
            )

    async def _verify(self, entry: ToolEntry) -> None:
        """Compare the tool's live definition with the manifest's, at its first call and at its first call after its
        server was started again (before: at its first call alone, so a server that came back from a crash or a new
        HTTP session listing another definition had its calls go out, checked against the old one) or said its tools
        changed (its listing read again first, `tool_tree.pool_relist`; before, a tool it renamed or removed was
        checked against the listing of the session's start and its call answered by the server's "Unknown tool",
        naming no tree to regenerate).

        Raises:
            ToolCallRefused: the server no longer lists the tool, lists it malformed, or lists another definition.
        """
        live = await self.pool.live_tool(entry.server, entry.tool)
        listed = self.pool.listed(entry.server)  # that listing's: one behind (a change meanwhile) is checked next time
        if live is None:
            if (reason := self.pool.malformed(entry.server, entry.tool)) is not None:
                raise ToolCallRefused(
                    f"{entry.server}.{entry.tool} is now listed by the server with a malformed definition ({reason}); "
                    "tooltree leaves it out until the server fixes it",
                    "tool_changed",
                )
            if self.regenerated():
                raise self.stale.refusal(f"{entry.server}.{entry.tool} is no longer offered by the server")
            todo = self._followed(entry.server) or f"regenerate the tree ({self._regenerate()})"
            raise ToolCallRefused(f"{entry.server}.{entry.tool} is no longer offered by the server; {todo}",
                                  "tool_changed")  # fmt: skip
        if schema_hash(live) != entry.schema_hash:
            stored = self._definition(entry)
            what = f": {changed_parts(stored, live)}" if stored is not None else " (schema hash mismatch)"
            if self.regenerated():
                raise self.stale.refusal(
                    f"{entry.server}.{entry.tool} changed since this session's tree was generated{what}"
                )
            todo = self._followed(entry.server) or (
                f"review the change (`{self._regenerate('--check', '--server', entry.server)}`) and regenerate the "
                f"tree with `{self._regenerate()}`"
            )
            raise ToolCallRefused(f"{entry.server}.{entry.tool} changed since the tree was generated{what}; {todo}",
                                  "tool_changed")  # fmt: skip
        self._verified[(entry.server, entry.tool)] = listed

    def regenerated(self) -> bool:
        """Whether the tree's manifest file was replaced since the session's manifest was read from it (a
        `tooltree generate-tree` since: one ``stat``) by one of another tree: one rewritten for the configuration
        file it names alone is the session's tree (`sandbox.tool_changes.StaleTools.regenerated`)."""
        return self._stale.regenerated()

    def checks_tree(self, version: tuple[int, ...] | None) -> bool:
        """Whether calls are checked against the tree of ``version`` of the manifest file (a sandbox's copy of it)."""
        return self._stale.same_tree(version)

    def _definition(self, entry: ToolEntry) -> dict[str, Any] | None:
        """The tool's raw definition as stored in its server's snapshot (None: not readable there), shared with the
        other bridges of the process (`sandbox.stored_definitions`).

        Raises:
            ToolCallRefused: the tree was regenerated since the session began, and it no longer has the definition the
                session's manifest has (a server dropped, a tool removed or changed), whether the session called the
                tool before the regeneration or not (`sandbox.tool_changes.StaleTools`). Before, a dropped server's
                call went out unchecked, with a warning to regenerate the tree, and a changed tool's arguments were
                checked against its new definition, which the session's model had never seen.
        """
        key = (entry.server, entry.tool)
        stale = self._stale.check(entry)
        stored = self._definitions.get(key)
        if stored is None:
            stored = stored_definition(self.tree, self.manifest.server_entry(entry.server), entry, warn=not stale)
            if stale and (stored.value is None or schema_hash(stored.value) != entry.schema_hash):
                held = "no longer holds it" if stored.value is None else "holds another definition of it"
                self._stale.refuse(entry, held)
            self._definitions[key] = stored
        return stored.value

    def search_tools(self, query: str, *, detail: str = "summary", limit: int = 5, regex: bool = False) -> str:
        from tool_tree.search import SearchError, search_tools

        try:
            # Synchronous, so it runs on the calling thread: a session's thread pool (`sandbox.calls`), never
            # the event loop its tool calls share, and that thread's CPU time is what the search cost the host
            # (a hybrid query embeds the query and its clauses; the first loads the model).
            return search_tools(self.tree, query, detail=detail, limit=limit, regex=regex)
        except SearchError as e:
            raise ToolCallRefused(str(e), "invalid_search") from None


def with_stderr(message: str, stderr_tail: str) -> str:
    """``message`` followed by the last lines of a server's stderr, if it wrote any.

    The tail comes already redacted of the secrets of the server's configuration (`tool_tree.redact`,
    applied where it is read: `StderrLog.tail`), so none reaches the script, serve's clients or its log.
    The server is untrusted: its text is kept as plain text (control, bidi and zero-width characters
    dropped, so no escape sequence reaches a terminal), at most `STDERR_LINES` non-blank lines and
    `STDERR_CHARS` characters, each line indented under the message.
    """
    lines = [line.rstrip() for line in clean(stderr_tail).splitlines() if line.strip()][-STDERR_LINES:]
    excerpt = "\n".join(lines)
    if not excerpt:
        return message
    if len(excerpt) > STDERR_CHARS:
        excerpt = "…" + excerpt[-(STDERR_CHARS - 1) :]
    return f"{message}; the last lines of its stderr:\n" + "\n".join(f"    {line}" for line in excerpt.splitlines())
