"""The YAML composer under `tool_tree.config_read`: PyYAML's safe composer builds the nodes of a configuration.

`compose` gives the YAML node of a text (YAML, or JSON read as YAML) with every node's line, stopped past `MAX_DEPTH`
levels or `MAX_NODES` nodes, a tab between tokens read as white space (`tool_tree.config_tabs`); `Reader.to_node`
reads the nodes. Its errors are `ConfigError` values naming the file and the line of the mistake, with a hint
where PyYAML's words do not say what to write.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from tool_tree.config_read import MAX_DEPTH, ConfigError, too_deep
from tool_tree.config_tabs import TabsAsSpaces, tab_hint

if TYPE_CHECKING:
    from yaml import MarkedYAMLError

MAX_NODES = 200_000
"""Values the YAML composer may build, before aliases are expanded (`MAX_VALUES` counts them after): PyYAML
takes about 22 µs and 750 bytes for each, and 2 MiB of ``[a,a,a,…]`` is a million of them. A config of 10,000
servers, each with args and env, has 130,000 (2.8 s); 200,000 take 4.5 s and 150 MB."""


class _TooBig(Exception):
    """The YAML composer stopped: the document nests deeper than `MAX_DEPTH` or holds more than `MAX_NODES` nodes."""

    def __init__(self, problem: str, line: int) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line


@functools.cache
def _loader() -> type:
    """PyYAML's safe loader, composing at most `MAX_DEPTH` levels and `MAX_NODES` nodes (its composer recurses
    once a level, and builds every node before `Reader.to_node` counts them), a tab between tokens white space
    (`TabsAsSpaces`)."""
    import yaml

    class Loader(TabsAsSpaces, yaml.SafeLoader):
        depth = nodes = 0
        odd_breaks = False  # the text holds one of `_ODD_BREAKS` (set by `compose`)

        def forward(self, length: int = 1) -> None:
            """PyYAML's, but NEL, U+2028 and U+2029 do not start a line of the marks (YAML 1.1 reads them as line
            breaks, editors do not: before, an error after a description holding one named a line past the one an
            editor shows); the file is read as before. The text is read whole (`compose` gives a str), so each
            character is at hand."""
            buffer: str = self.buffer
            if not self.odd_breaks or not _ODD_BREAKS.search(buffer, self.pointer, self.pointer + length):
                super().forward(length)
                return
            for _ in range(length):
                odd = buffer[self.pointer] in "\x85\u2028\u2029"
                super().forward(1)
                if odd:  # its column stays 0: the scanner reads indentation from it, as YAML does
                    self.line -= 1

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.depth += 1
            self.nodes += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _TooBig(too_deep(), self._line())
                if self.nodes > MAX_NODES:
                    raise _TooBig(f"the file holds more than {MAX_NODES:,} values", self._line())
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def _line(self) -> int:
            event: Any = self.peek_event()  # type: ignore[no-untyped-call]
            return int(event.start_mark.line) + 1

    return Loader


_ODD_BREAKS = re.compile("[\x85\u2028\u2029]")
"""What YAML 1.1 reads as a line break and an editor does not (`_loader`'s ``forward``)."""


def compose(text: str, source: str, *, line: int = 1, column: int = 0, depth: int = 0) -> Any:
    """The YAML node of ``text``, or None when it holds none. ``line`` and ``column`` say where ``text`` starts
    in its file (so a part of a file keeps the file's lines) and ``depth`` how many levels hold it.

    Raises:
        ConfigError: the text is not valid YAML, nests deeper than `MAX_DEPTH` or holds more than `MAX_NODES` nodes.
    """
    import yaml  # here, not at module level: commands that read no config start faster

    try:
        loader = _loader()(text)  # its reader refuses a NUL or another character YAML does not take, at once
    except yaml.reader.ReaderError as e:  # before: a traceback
        at = line + text.count("\n", 0, e.position)
        character = e.character if isinstance(e.character, int) else ord(e.character)
        problem = f"invalid YAML: the character U+{character:04X} is not allowed (a NUL, a control character)"
        raise ConfigError(problem, file=source, line=at) from None
    # PyYAML's reader counts its marks from these (0-based); nothing has been read yet.
    loader.line, loader.column, loader.depth = line - 1, column, depth
    loader.odd_breaks = _ODD_BREAKS.search(text) is not None
    try:
        node = loader.get_single_node()
        if loader.yaml_version not in (None, (1, 1)):  # before: read by 1.1's rules all the same
            directive = re.search(r"^%YAML", text, re.MULTILINE)
            written = line + text.count("\n", 0, directive.start() if directive else 0)
            raise _TooBig(_yaml_version(loader.yaml_version), written)
        return node
    except _TooBig as e:
        raise ConfigError(e.problem, file=source, line=e.line) from None
    except yaml.MarkedYAMLError as e:
        raise _syntax_error(e, source) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}", file=source) from None
    finally:
        loader.dispose()


def _yaml_version(version: tuple[int, int]) -> str:
    return (
        f"%YAML {version[0]}.{version[1]}: tooltree reads YAML by the rules of 1.1, where on, off, yes and no are true "
        "or false, 010 is 8 and 1e3 is text; remove the line (and quote a value you mean as text)"
    )


def _syntax_error(e: MarkedYAMLError, source: str) -> ConfigError:
    """A `ConfigError` for PyYAML's ``MarkedYAMLError`` ``e``, at the line of the mistake.

    PyYAML finds an unclosed quote or bracket only where the text ends (``found unexpected end of stream``, at a
    line past the last): its context (``while scanning a quoted scalar``) marks where the quote or bracket
    opened, which is the line to fix. A block mapping's or sequence's context marks only where it began, lines
    before an entry indented wrong, and a duplicate anchor's its first use: there the problem's own line is the
    one to fix. Both lines are said.

    Two mistakes PyYAML words in its own terms get a hint: a tab where YAML takes spaces, and an unquoted ``${VAR}``
    in a ``[ ]`` or ``{ }`` (``args: [${A}]``, ``headers: {Authorization: Bearer ${T}}``), whose ``{`` is YAML's.
    """
    problem = (e.problem or str(e)) + _hint(e)
    line = e.problem_mark.line + 1 if e.problem_mark else None
    context = e.context
    if not context or e.context_mark is None:
        return ConfigError(f"invalid YAML: {problem}", file=source, line=line)
    opened = e.context_mark.line + 1
    if not context.startswith("while ") or context.startswith("while parsing a block") or "indentless" in context:
        # A block collection, or the composer's "found duplicate anchor 'x'; first occurrence": the problem's line.
        return ConfigError(f"invalid YAML: {context} (at line {opened}): {problem}", file=source, line=line)
    found = f" (at line {line})" if line is not None and line != opened else ""
    return ConfigError(f"invalid YAML: {context}: {problem}{found}", file=source, line=opened)


def _hint(e: MarkedYAMLError) -> str:
    """What to do about the YAML syntax error ``e`` when PyYAML's words do not say it (`_syntax_error`), or nothing."""
    mark, problem = e.problem_mark, e.problem or ""
    if mark is None or not isinstance(mark.buffer, str):
        return ""
    if "character '\\t' that cannot start any token" in problem:  # before: no word of what to do
        return tab_hint(mark.buffer, mark.pointer)
    if e.context == "while scanning a block scalar" and problem.endswith("but found '\\t'"):
        # before: "expected chomping or indentation indicators, but found '\t'", and no more
        return " (tooltree reads no tab after a block scalar's | or >: write a space, or nothing)"
    if problem.endswith("but got '{'") and mark.buffer[mark.pointer - 1 : mark.pointer] == "$":
        # before: "expected ',' or ']', but got '{'", for a reference written as in a block
        return " (inside [ ] or { }, YAML reads the { of ${...} as its own: write the item holding it in quotes)"
    return ""
