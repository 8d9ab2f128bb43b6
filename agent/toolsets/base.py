"""`Toolset`: what one mode offers the model — its tools array, its system prompt, and the handlers.

A toolset is built from the tree alone (no server, no container), so the first request of a
run can be rendered and measured offline. Its tools and system prompt are fixed at
construction, except in a toolset with a pre-filter: there `before_request` may grow them (tools
appended at the end, never reordered or removed); handlers get the live `Runtime` when a tool is
called.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.errors import AgentError, AgentSetupError
from tool_tree.tree import Manifest, ToolEntry, TreeError

if TYPE_CHECKING:
    from agent.prefilter.gate import FilterStep
    from sandbox.host import Runtime
    from sandbox.results import ToolCallRecord


INTERRUPTED_OUTCOME = "tool_outcome"
"""The attribute of a ``KeyboardInterrupt`` out of a toolset's call holding what the stopped call did so far (a
`ToolOutcome`: a script's output until Ctrl-C); `agent.calls` answers the call with it."""


@dataclass
class ToolOutcome:
    """What one tool call gives back to the model, and what the run summary counts."""

    content: list[dict[str, Any]]
    is_error: bool = False
    script_calls: Sequence[ToolCallRecord] = field(default_factory=list)
    """Tool calls a script made (``execute_python``); their results went to the script, in the sandbox."""
    invocations: int | None = None
    """A ``batch_tool`` call's invocations that ran (each counts as a tool call: `agent.summary.RunSummary`; 0 for a
    batch refused whole, one call); None for any other call (one call)."""
    failed: int = 0
    """Of a batch's ``invocations``, those that failed (the batch itself is then no error)."""
    labels: frozenset[int] = frozenset()
    """Indexes of ``content`` blocks that are the toolset's own short labels (a batch's per-invocation status
    lines and notes): a budget that cuts the result keeps them whole (`agent.budget.ContentBudget.take`)."""
    note: str = ""
    """One line for the live view: cleaned of terminal escapes and control characters, at most `NOTE_CHARS`
    characters (`note_text`), since it may quote the model's input."""


class Toolset(ABC):
    """The tools of one mode."""

    mode: str = ""
    needs_sandbox: bool = False

    def __init__(self, tree: str | Path, *, manifest: Manifest | None = None, config: str | None = None) -> None:
        """``manifest``: the tree's, when the caller read it (`tooltree serve` reloading a regenerated tree).
        ``config``: the configuration file in use, which the command to regenerate the tree names (else the one the
        tree was generated from)."""
        from sandbox.stored_definitions import shared_manifest

        self.tree = Path(tree)
        self.config_file = config
        try:
            # The copy of this version of the file that the process's other readers share (serve's passthrough tools
            # and prompts, each session's runtime), read-only: before, each read its own (0.3 s for 20,000 tools).
            self.manifest = manifest if manifest is not None else shared_manifest(self.tree)
        except TreeError as e:
            raise AgentSetupError(str(e)) from None

    @abstractmethod
    def tools(self) -> list[dict[str, Any]]:
        """The tools array (without cache markers); the same list on every call until
        `before_request` grows it."""

    @abstractmethod
    def system_prompt(self) -> str:
        """The system prompt; the same text on every call."""

    @abstractmethod
    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        """Run one ``tool_use``; failures the model can act on are outcomes with ``is_error``."""

    def concurrent(self, name: str) -> bool:
        """Whether calls of ``name`` may run at the same time as the other calls of one reply."""
        return False

    def calls_in(self, name: str, arguments: Mapping[str, Any]) -> int:
        """How many tool calls one ``tool_use`` of ``name`` makes (a batch makes one per invocation it
        would run), counted against a reply's `agent.calls.MAX_TOOL_USES`."""
        return 1

    def script_running(self, at_least: float = 0.0) -> str | None:
        """What the script a call runs now is doing (``running for 12 s; waiting on crm.x for 10 s; last printed: …``:
        `agent.toolsets.script_running`), from any thread; None when none runs, none has run ``at_least`` seconds, or
        the mode runs none."""
        return None

    def start_conversation(self) -> None:  # noqa: B027 - a hook: most toolsets have nothing to reset
        """A new conversation begins (a pre-filter's admitted set starts over)."""

    def before_request(self, messages: Sequence[dict[str, Any]]) -> FilterStep | None:
        """Called before each request with the conversation so far; a toolset with a pre-filter
        decides here (and may grow its tools or prompt) and returns what it did."""
        return None

    def resolve_pinned(
        self,
        pinned: Sequence[str],
        *,
        what: str = "pinned tool",
        setting: str = "agent.pinned",
        missing: Callable[[AgentSetupError], None] | None = None,
    ) -> list[ToolEntry]:
        """The manifest entries for ``pinned`` names (``crm.update_record``, ``crm/update_record``
        or the original ``<server>.<tool>``); ``what`` names them in the error, ``setting`` is the
        config key they come from when they come from the config. A name that matches no tool of the tree is
        handed to ``missing`` as the error it would raise, and left out, when one is given.

        Raises:
            AgentSetupError: a name matches no tool of the tree (and no ``missing``).
        """
        out: list[ToolEntry] = []
        for name in pinned:
            # The original tool name may hold "/" (``srv.sampling/create``): the name as written, its first "/" as
            # the server's separator, or every "/" one (before: only the last, so such a tool matched no name).
            wanted = {name, name.replace("/", ".", 1), name.replace("/", ".")}
            match = next((t for t in self.manifest.tools if {t.qualified_name, f"{t.server}.{t.tool}"} & wanted), None)
            if match is None:
                why = _missing(self.manifest, wanted, self.tree, self.config_file)
                error = AgentSetupError(
                    f"{what} {name!r} is not in the tree{_close(self.manifest, name)}{why}", setting=setting
                )
                if missing is None:
                    raise error
                missing(error)
                continue
            if match not in out:
                out.append(match)
        return out


def _close(manifest: Manifest, name: str) -> str:
    """`` (did you mean 'crm.update_record'?)`` for a name a typo away from a tool of the tree, as an unknown config key
    is told (before: a pinned ``crm.update_recrd`` was said to be a tool its server no longer lists, and to
    regenerate the tree, which never brings it), else ""."""
    import difflib

    names = {t.qualified_name for t in manifest.tools} | {f"{t.server}.{t.tool}" for t in manifest.tools}
    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _missing(manifest: Manifest, wanted: set[str], tree: Path, config: str | None) -> str:
    """What to do about a tool name the tree does not have: regenerate it when its server is in the tree (the server
    may list the tool only now: one it added, or one it lists only to a client of the capabilities its
    ``client_capabilities`` declare), with the command for ``tree`` and ``config`` (else the configuration the tree was
    generated from; before: `tooltree generate-tree` alone, of ./tooltree.yaml and ./tree), else name the form of a
    name."""
    from tool_tree.regenerate import regenerate_command

    again = f"{regenerate_command(tree, manifest, config=config)}, or `tooltree serve --regenerate-first`"
    servers = {s.name for s in manifest.servers}
    if not any(name.partition(".")[0] in servers for name in wanted):
        # Before: only "(use <server>.<tool>)", though the name was of that form and its server had failed when the
        # tree was generated.
        named = sorted({name.partition(".")[0] for name in wanted if "." in name})
        if not named:
            return " (use <server>.<tool>)"
        return (
            f": the tree has no server {named[0]!r} (a server that failed when the tree was generated, or one added "
            f"to the config since, is in it once it is regenerated: {again})"
        )
    return (
        ": its server listed no such tool when the tree was generated; if it offers it now (a tool it added, or "
        f"one it lists only to a client declaring `client_capabilities`), regenerate the tree ({again})"
    )


NOTE_CHARS = 120
"""The most characters of a `ToolOutcome` note."""


def note_text(value: str) -> str:
    """``value`` as a note: its first line, cleaned of terminal escapes and control characters
    (`sandbox.results.clean_text`), at most `NOTE_CHARS` characters (only the first few hundred are looked at)."""
    from sandbox.results import note_label

    return note_label(value[: 4 * NOTE_CHARS].split("\n", 1)[0], NOTE_CHARS)


def error(message: str) -> ToolOutcome:
    """An error outcome with one text block; its note is the message's first line (`note_text`)."""
    return ToolOutcome([{"type": "text", "text": message}], is_error=True, note=note_text(message))


def with_note(outcome: ToolOutcome, note: str) -> ToolOutcome:
    """``outcome`` with ``note`` in brackets in front of its first text block (as is, when it has none or no note)."""
    if note and outcome.content and outcome.content[0].get("type") == "text":
        first = outcome.content[0]
        outcome.content[0] = {**first, "text": f"[{note}]\n\n{first['text']}"}
    return outcome


def for_the_developer(e: Exception) -> bool:
    """Whether ``e`` is an error of the setup, which ends the run, not a call's error the model is told: the sandbox
    cannot start (no engine, no image, a hardening check failed), the runtime was closed, the agent's setup. The
    model cannot fix those, and the engine's words about the host are not for it. A broken session
    (`sandbox.errors.SessionError`) and a refused call stay the model's: the next call may succeed."""
    from sandbox.bridge import ToolCallRefused
    from sandbox.errors import SandboxError, SessionError

    if isinstance(e, SessionError | ToolCallRefused):
        return False
    return isinstance(e, SandboxError | AgentError)


RAISED_CHARS = 1000
"""Most characters of an exception's message in the error of the call that raised it (`raised`)."""


def raised(name: str, exception: Exception) -> ToolOutcome:
    """The error outcome of a call of ``name`` that raised ``exception`` (named, its message cut short): one call's
    failure, which must not take the other calls of the reply, or the run, with it."""
    message = str(exception)[:RAISED_CHARS] or "no message"
    return error(f"the call of {name} failed: {type(exception).__name__}: {message}")
