"""`code` mode: four tools — ``list_files``, ``read_file``, ``search_tools``, ``execute_python``.

The system prompt carries what the tree is, its root ``INDEX.md`` (or, for a catalog too big
to inline, a compact server list that points to it) and the signatures of pinned tools.
Everything else the model learns through tool results, so the prompt and the tools array
stay byte-identical for the whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent.content import execution_blocks, ledger, text_block
from agent.errors import AgentSetupError
from agent.files import FileAccessError, FileView
from agent.prompts import render, sandbox_holds
from agent.toolsets.base import INTERRUPTED_OUTCOME, NOTE_CHARS, ToolOutcome, Toolset, error, note_text, with_note
from agent.toolsets.code_unknown import unknown_code_tool
from agent.toolsets.script_ended import printed_before_end, unreported_outcome
from agent.toolsets.script_running import RunningScript
from agent.toolsets.tree_changed import TreeWatch
from tool_tree.search import SearchError, SearchHit, render_hits, search_tools
from tool_tree.text import counted, one_line, shown, size
from tool_tree.tree import INDEX_FILE, Manifest, ToolEntry, read_in_tree, servers_link

if TYPE_CHECKING:
    from sandbox.host import Runtime
    from sandbox.results import ExecutionResult

INDEX_CHARS = 4_000
"""Inline ``INDEX.md`` when it is at most this long; otherwise a compact list of the servers."""
INDEX_BYTES = 1 << 20
"""The most of ``INDEX.md`` read: a longer one is not inlined anyway."""
MORE_ROOM = 64
"""Kept free at the end of the compact list for the line that says how many servers it left out."""
NEXT_IS_NEW = "the next execute_python starts a new sandbox, without this one's variables, imports and workspace files"
"""Said when a script's sandbox ended under it (`sandbox.Sandbox.ended`)."""

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_files",
        "description": "List a folder of the tool tree (servers/…, read-only) or of /workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "default: /workspace"}},
        },
    },
    {
        "name": "read_file",
        "description": "Read a stub in servers/ or a /workspace file: `limit` lines from line `offset`.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1},
                "limit": {"type": "integer", "minimum": 1},
            },
            "required": ["path"],
        },
    },
    {
        "name": "search_tools",
        "description": "Find tools by what they do or by a pattern (regex). detail: name, summary (signature) or full.",
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "detail": {"type": "string", "enum": ["name", "summary", "full"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                "regex": {"type": "boolean"},
            },
            "required": ["query"],
        },
    },
    {
        "name": "execute_python",
        "description": "Run Python in the sandbox; returns output, errors, images and the tool calls made.",
        "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
]
"""The four tools, as the agent offers them: its system prompt says how to use them. `unknown_arguments` refuses a
call with an argument its schema does not name (before: ignored, so ``execute_python {"code": ..., "timeout": 600}``
ran with the usual time limit, the model none the wiser). The schemas do not say ``additionalProperties: false``:
30 tokens in every request, for what the refusal already says when it matters."""
ARGUMENTS: dict[str, tuple[str, ...]] = {t["name"]: tuple(t["input_schema"]["properties"]) for t in TOOLS}
"""Each tool's arguments, in the order of its schema."""
SEARCH_SIGNATURE = "search_tools(query: str, detail: 'name'|'summary'|'full', limit: int, regex: bool)"
"""How search_tools is called, said when its query is missing."""
UNKNOWN_SHOWN = 5
"""The most unknown arguments one refusal names (a model may send dozens)."""

HOW_TO_RUN = (
    " The tools are functions: `from servers.<server> import <tool>`, called with keyword arguments (find them "
    "with search_tools, or list_files and read_file in servers/). Variables and files in /workspace persist "
    "between calls; show_image(path_or_bytes) adds an image to the result."
)
"""What ``execute_python``'s description adds where the system prompt may not be read: `tooltree serve`'s
clients get it as the server's instructions, which some clients do not show the model (about 70 tokens, which
the agent, whose system prompt says it, does not pay)."""


def tools_with_time_limit(timeout: float | None, packages: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`TOOLS` (copies) for a client that may not read the instructions: ``execute_python`` says how to call
    tools, what persists, what the sandbox has (`sandbox_holds`) and that a run stops after ``timeout`` seconds."""
    tools = [dict(t) for t in TOOLS]
    for tool in tools:
        if tool["name"] == "execute_python":
            limit = f" A run stops after {timeout:g} s." if timeout is not None else ""
            tool["description"] += f"{HOW_TO_RUN} {sandbox_holds(packages)}{limit}"
    return tools


def stub_hit(tool: ToolEntry) -> SearchHit:
    """``tool`` as a search hit, to render its signature like ``search_tools`` does."""
    return SearchHit(tool.server, tool.tool, tool.function, tool.path.split("/")[1], tool.path, 0.0, tool.summary)


def unknown_arguments(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why a call of one of the four tools is refused before anything runs: the arguments its schema does not name,
    and the ones it has (``execute_python has no argument 'timeout'; its arguments are: code``). None when every
    argument is known, or ``name`` is not one of the four (the caller says so)."""
    known = ARGUMENTS.get(name)
    if known is None:
        return None
    unknown = [key for key in arguments if key not in known]
    if not unknown:
        return None
    named = ", ".join(shown(key) for key in unknown[:UNKNOWN_SHOWN])
    if len(unknown) > UNKNOWN_SHOWN:
        named += f" and {len(unknown) - UNKNOWN_SHOWN} more"
    what = "argument" if len(unknown) == 1 else "arguments"
    nothing_ran = "; the script was not run" if name == "execute_python" else ""
    return f"{name} has no {what} {named}; its arguments are: {', '.join(known)}{nothing_ran}"


def _got(value: object) -> str:
    """What a required argument was, for its error: ``; none was given`` (left out or null), or ``, got int 5``."""
    return "; none was given" if value is None else f", got {type(value).__name__} {shown(value)}"


T = TypeVar("T", int, str, bool)
_KINDS = {int: "an integer", str: "a string", bool: "true or false"}


def _arg(arguments: Mapping[str, Any], key: str, default: T) -> T:
    """The argument ``key``, of the type of ``default`` (``default`` when left out or null).

    Before: a wrong type went through unnamed, or, for ``list_files``, a false value of any type (``0``, ``false``,
    ``[]``) was read as no path, and ``/workspace`` listed. An integer may come as a float with no fraction (``2.0``):
    JSON Schema counts it as an integer, and clients send it so (before: "limit must be an integer, got float 2.0").

    Raises:
        ValueError: it is of another type (``True`` is no integer, nor is ``2.5``), named with what it was.
    """
    value = arguments.get(key)
    if value is None:
        return default
    kind = type(default)
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
        raise ValueError(f"{key} must be {_KINDS[kind]}, got {type(value).__name__} {shown(value)}")
    return value


class CodeToolset(Toolset):
    """The tools of ``code`` mode over one tree.

    Args:
        tree: the generated tree.
        pinned: tools whose signatures go into the system prompt.
        index_chars: the longest ``INDEX.md`` inlined as is.
        standalone: the tools must stand without the system prompt (`tooltree serve`, whose instructions a
            client may not show): ``execute_python``'s description says how to call tools and what persists.
        timeout: with ``standalone``, the time limit of one execution in seconds, said in that description.
        pinned_missing: called with the error of each pinned tool the tree does not have, which is left out; without
            it, such a tool is an error.
        manifest: the tree's manifest, when the caller read it (else read here).
        config: the configuration file in use (`agent.toolsets.base.Toolset`).
        packages: the ``sandbox.pip_packages`` the image adds, said with what the sandbox has (`sandbox_holds`).

    Raises:
        AgentSetupError: no manifest, a pinned tool is not in the tree (and no ``pinned_missing``), or the tree's
            ``servers/`` is a link.
    """

    mode = "code"
    needs_sandbox = True

    def __init__(
        self,
        tree: str | Path,
        *,
        pinned: Sequence[str] = (),
        index_chars: int = INDEX_CHARS,
        standalone: bool = False,
        timeout: float | None = None,
        pinned_missing: Callable[[AgentSetupError], None] | None = None,
        manifest: Manifest | None = None,
        config: str | None = None,
        packages: Sequence[str] = (),
    ) -> None:
        self.packages = tuple(packages)  # before the prompt: it says them
        self.tree_watch = TreeWatch(tree)  # before the manifest is read: a file replaced meanwhile is told
        super().__init__(tree, manifest=manifest, config=config)
        self.tree_watch.manifest = self.manifest
        if (link := servers_link(self.tree)) is not None:
            raise AgentSetupError(link)
        self.pinned = self.resolve_pinned(pinned, missing=pinned_missing)
        self.index_chars = index_chars
        self.standalone = standalone
        self.timeout = timeout
        self._system = self.prompt("system_code.md.j2")
        self.script = RunningScript()

    def tools(self) -> list[dict[str, Any]]:
        return tools_with_time_limit(self.timeout, self.packages) if self.standalone else [dict(t) for t in TOOLS]

    def system_prompt(self) -> str:
        return self._system

    def script_running(self, at_least: float = 0.0) -> str | None:
        return self.script.said(at_least)

    def start_conversation(self) -> None:
        self.tree_watch.again()  # a tree regenerated since the system prompt was written is told in each one

    def prompt(self, template: str, *, limit: int | None = None) -> str:
        """``template`` (in ``agent/templates/``) rendered with this tree's index and pinned signatures.

        `system_prompt` is ``system_code.md.j2``; ``tooltree serve`` sends ``serve.md.j2`` as its
        MCP ``instructions``. Both include ``_code.md.j2``, the part that explains the tools.
        With ``limit``, a text longer than that many characters has the longest shorter index that fits (a compact
        list of the servers, then of fewer of them), or the shortest when none does: a client that keeps only the
        start of the text (Claude Code) would lose the index's end and the pinned signatures.
        """
        pinned, picked, holds = self._pinned_text(), self._picked_text(), sandbox_holds(self.packages)

        def rendered(chars: int) -> str:
            return render(template, index=self._index(chars), pinned=pinned, picked=picked, sandbox_holds=holds)

        text = rendered(self.index_chars)
        if limit is None or len(text) <= limit:
            return text
        if len(fits := rendered(0)) > limit:  # the pinned signatures alone are too long (serve warns of it)
            return fits
        low, high = 0, self.index_chars  # an index budget whose text fits, and one whose text does not
        while high - low > 1:
            middle = (low + high) // 2
            if len(text := rendered(middle)) <= limit:
                low, fits = middle, text
            else:
                high = middle
        return fits

    def _index(self, chars: int | None = None) -> str:
        """``INDEX.md`` when it is at most ``chars`` (default `index_chars`) long, else a list of the servers within
        about ``chars``."""
        chars = self.index_chars if chars is None else chars
        try:  # never through a link: a tree written elsewhere may link it to a host file (before: inlined)
            text = read_in_tree(self.tree, INDEX_FILE, INDEX_BYTES).decode("utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text and len(text) <= chars:
            return f"{INDEX_FILE}:\n{text}"
        servers = sorted(self.manifest.servers, key=lambda s: s.package)
        head = (
            f"{counted(len(servers), 'server')}, {counted(len(self.manifest.tools), 'tool')}. {INDEX_FILE} lists each "
            "server's tools; "
            "servers/<package>/README.md has one line per tool."
        )
        names = [f"- {s.package} ({s.tool_count})" for s in servers]
        if len(head) + sum(len(n) + 1 for n in names) > chars:
            # So many servers that even their names would not fit: as many as do, and how to see the rest.
            lines, used = [head], len(head) + MORE_ROOM
            for shown, name in enumerate(names):
                if used + len(name) + 1 > chars:
                    lines.append(f"- … {len(names) - shown} more: list_files('servers') or search_tools")
                    break
                lines.append(name)
                used += len(name) + 1
            return "\n".join(lines)
        room = max(0, (chars - len(head)) // max(1, len(servers)))
        lines = [head]
        for s, line in zip(servers, names, strict=True):
            space = room - len(line) - 3
            purpose = one_line(s.description, space) if space >= 12 else ""
            lines.append(line + " — " + purpose if purpose else line)
        return "\n".join(lines)

    def _pinned_text(self) -> str:
        if not self.pinned:
            return ""
        return render_hits(self.tree, [stub_hit(t) for t in self.pinned], "summary").strip()

    def _picked_text(self) -> str:
        """The tools picked for the task besides the pinned ones (a pre-filter's; none here)."""
        return ""

    # ---- handlers ---------------------------------------------------------------------------

    def concurrent(self, name: str) -> bool:
        # Reading the tree is safe to overlap; scripts run one after another in the one session.
        return name in ("list_files", "read_file", "search_tools")

    def call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        # A sandbox that ended on its own is replaced on the call's first use of it: the call's result says so.
        outcome = with_note(self._call(name, arguments, runtime), runtime.take_sandbox_note())
        # `tooltree serve` follows a regenerated tree, and tells each session its own way
        return outcome if self.standalone else self.tree_watch.tell(name, outcome)

    def _call(self, name: str, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        if name not in ARGUMENTS:
            return error(unknown_code_tool(name, list(ARGUMENTS), self.manifest))
        if (refused := unknown_arguments(name, arguments)) is not None:
            return error(refused)
        if name in ("list_files", "read_file") and (link := servers_link(self.tree)) is not None:
            return error(link)  # `FileView` would list and read where it points (a tree changed since the start)
        files = FileView(self.tree, workspace=lambda: runtime.sandbox)
        try:
            if name == "list_files":
                folder = _arg(arguments, "path", "")
                text = files.list_files(folder)
                return ToolOutcome([{"type": "text", "text": text}], note=note_text(folder or "/workspace"))
            if name == "read_file":
                path = arguments.get("path")
                if not isinstance(path, str):
                    return error(f"read_file needs a path (a string){_got(path)}")
                text = files.read_file(path, _arg(arguments, "offset", 1), _arg(arguments, "limit", 2000))
                return ToolOutcome([{"type": "text", "text": text}], note=note_text(path))
            if name == "search_tools":
                return self._search(arguments)
            return self._execute(arguments, runtime)
        except (FileAccessError, ValueError) as e:
            return error(str(e))

    def _search(self, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Raises: ValueError: an argument of the wrong type."""
        query = arguments.get("query")
        if not isinstance(query, str):
            return error(f"{SEARCH_SIGNATURE} needs a query (a string){_got(query)}")
        detail, regex = _arg(arguments, "detail", "summary"), _arg(arguments, "regex", False)
        try:
            text = search_tools(self.tree, query, detail=detail, limit=_arg(arguments, "limit", 5), regex=regex)
        except SearchError as e:
            return error(str(e))
        return ToolOutcome([{"type": "text", "text": text}], note=note_text(repr(query[: 2 * NOTE_CHARS])))

    def _execute(self, arguments: Mapping[str, Any], runtime: Runtime) -> ToolOutcome:
        from sandbox.errors import SessionError, interrupted_execution, interrupted_unreported

        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            got = ", got blank text" if isinstance(code, str) else _got(code)
            return error(f"execute_python needs code (a string of Python){got}")
        try:
            sandbox = runtime.sandbox
        except SessionError as e:  # it did not start
            return error(f"the sandbox session failed: {e}")
        try:
            with self.script.running(sandbox):
                result = sandbox.execute(code)
        except SessionError as e:  # the calls the script had made follow: they happened (before: not said)
            then = f"; {NEXT_IS_NEW}" if sandbox.ended is not None else ""
            failed = error(f"the sandbox session failed: {e}{then}")
            if printed := printed_before_end(e.stdout, e.stderr):  # before: lost with the sandbox
                failed.content.append(text_block(printed))
            if e.tool_calls:
                failed.content.append(text_block(ledger(e.tool_calls, e.tool_calls_omitted)))
                failed.script_calls = e.tool_calls
            return failed
        except KeyboardInterrupt as e:  # what the stopped script did goes on with the interrupt (`agent.calls`)
            if (stopped := interrupted_execution(e)) is not None:
                setattr(e, INTERRUPTED_OUTCOME, self._outcome(stopped))
            elif (unreported := interrupted_unreported(e)) is not None:  # its result did not come: what is known
                setattr(e, INTERRUPTED_OUTCOME, unreported_outcome(unreported))
            raise
        return self._outcome(result)

    @staticmethod
    def _outcome(result: ExecutionResult) -> ToolOutcome:
        """What an execution gives back to the model. Its note says how many bytes of tool results the script
        received (before: "kept in the sandbox", though what it printed of them went to the model too)."""
        received = sum(c.response_bytes for c in result.tool_calls)
        status = "ok" if result.ok else note_text(result.error or "failed")
        note = f"{status} · {len(result.tool_calls)} call(s) from the script · {size(received)} of results received"
        blocks = execution_blocks(result)
        return ToolOutcome(blocks, is_error=not result.ok, script_calls=result.tool_calls, note=note)
