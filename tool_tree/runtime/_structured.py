"""`StructuredResult`: what the stub of a tool that declares an output schema returns.

It is the structured content, a plain ``dict`` to a script (index it, compare it with a dict, ``json.dumps`` it, pass
it to another tool), which also carries the whole `ToolResult` it came from: the content blocks a server sends beside
its structured content (an image, a resource link, an embedded resource, more text) are in ``.images``,
``.resource_links``, ``.resources``, ``.text`` and ``.content``, named as on a `ToolResult`. Before, the stub returned
the structured content alone and they were lost to the script (and so to the model). Printed, it is the dict followed
by a line for each block the structured content does not hold, as a `ToolResult` names its images.
"""

from __future__ import annotations

import json
from typing import Any

from tool_tree.runtime._result import Image, Resource, ResourceLink, ToolResult

_LINES = 3
"""Blocks of the content that ``str`` names one a line; more are counted by kind."""
_NODES = 100_000
"""Values of the structured content searched for a block it repeats; past them, a block is taken as not repeated."""


class StructuredResult(dict[str, Any]):
    """The structured content of a tool call (a ``dict``) with the `ToolResult` it came from (``tool_result``).

    ``.content``, ``.text``, ``.images``, ``.resource_links`` and ``.resources`` are the result's, as a `ToolResult`
    gives them; ``show_image(value)`` shows its images. ``repr`` is the dict's; ``str`` (``print``) adds a line for
    each content block the structured content does not hold (a text block that is its JSON, as the MCP spec asks, the
    JSON of one of its values, or one of its strings is held; so is an image block it repeats, as server-filesystem's
    tools do). ``copy``, ``deepcopy`` and pickle keep the result; ``dict(value)`` and ``value.copy()`` are plain dicts.
    """

    __slots__ = ("tool_result",)
    __module__ = "tool_tree.runtime"  # the public name, as a script's type() and tracebacks show it

    tool_result: ToolResult

    def __init__(self, value: dict[str, Any], tool_result: ToolResult) -> None:
        super().__init__(value)
        self.tool_result = tool_result

    @property
    def content(self) -> list[dict[str, Any]]:
        """The result's content blocks, exactly as the server sent them (`ToolResult.content`)."""
        return self.tool_result.content

    @property
    def text(self) -> str:
        """The result's text (`ToolResult.text`): often the structured content as JSON."""
        return self.tool_result.text

    @property
    def images(self) -> list[Image]:
        """The result's image blocks, decoded (`ToolResult.images`).

        Raises:
            ValueError: an image block's data is not valid base64.
        """
        return self.tool_result.images

    @property
    def resource_links(self) -> list[ResourceLink]:
        """The result's resource links (`ToolResult.resource_links`)."""
        return self.tool_result.resource_links

    @property
    def resources(self) -> list[Resource]:
        """The result's embedded resources (`ToolResult.resources`).

        Raises:
            ValueError: a binary resource's data is not valid base64.
        """
        return self.tool_result.resources

    def __reduce__(self) -> tuple[Any, ...]:
        return _remade, (dict(self), self.tool_result)

    def __str__(self) -> str:
        """The dict, then a line for each content block the structured content does not hold (counted past three)."""
        unheld = _unheld(self.tool_result.content, dict(self))
        if not unheld:
            return dict.__repr__(self)
        if len(unheld) <= _LINES:
            lines = [f"[{self.tool_result._block_repr(b)}: {_where(self.tool_result.content, n)}]" for n, b in unheld]
        else:
            lines = [_counted([b for _, b in unheld])]
        return "\n".join([dict.__repr__(self), *lines])


def _remade(value: dict[str, Any], tool_result: ToolResult) -> StructuredResult:
    """A `StructuredResult` made again (`StructuredResult.__reduce__`: pickle, `copy`)."""
    return StructuredResult(value, tool_result)


_PLACES = {"image": "images", "resource_link": "resource_links", "resource": "resources"}


def _where(blocks: list[dict[str, Any]], n: int) -> str:
    """Where a script finds block ``n``: ``result.images[0]``, ``result.text`` (a text block), ``result.content[n]``."""
    kind = blocks[n].get("type")
    if kind == "text":
        return "result.text"
    place = _PLACES.get(str(kind))
    if place is None:
        return f"result.content[{n}]"
    return f"result.{place}[{sum(1 for b in blocks[:n] if b.get('type') == kind)}]"


def _counted(blocks: list[dict[str, Any]]) -> str:
    """Many blocks, counted by kind: ``[+ 2 images: result.images, 1 text block: result.text]``."""
    counts: dict[str, int] = {}
    for b in blocks:
        kind = str(b.get("type"))
        counts[kind] = counts.get(kind, 0) + 1
    parts = []
    for kind, n in counts.items():
        name = {"image": "image", "resource_link": "resource link", "resource": "embedded resource"}.get(kind)
        noun = name or (f"{kind[:40]!r} block" if kind != "text" else "text block")
        place = "result.text" if kind == "text" else f"result.{_PLACES.get(kind, 'content')}"
        parts.append(f"{n} {noun}{'' if n == 1 else 's'}: {place}")
    return f"[+ {', '.join(parts)}]"


def _unheld(blocks: list[dict[str, Any]], value: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The blocks (with their index) the structured content ``value`` does not hold: a text block that is neither its
    JSON, nor the JSON of one of its values (structured content is an object, so a list comes wrapped:
    server-memory's ``{"entities": [...]}`` beside the list's JSON), nor one of its strings (server-filesystem's
    ``{"content": <the text>}``), another block that is none of its values."""
    held: tuple[list[dict[str, Any]], set[str]] | None = None
    out: list[tuple[int, dict[str, Any]]] = []
    for n, b in enumerate(blocks):
        text = str(b.get("text", "")) if b.get("type") == "text" else None
        if text is not None and (not text.strip() or _is_json_of(text, value)):
            continue
        if held is None:
            held = _values_in(value)
        dicts, strings = held
        if (b not in dicts) if text is None else (text.strip() not in strings):
            out.append((n, b))
    return out


def _is_json_of(text: str, value: dict[str, Any]) -> bool:
    """Whether ``text`` is the JSON of ``value`` or of one of its values that is an object or an array."""
    if text.lstrip()[:1] not in ("{", "["):
        return False
    try:
        parsed = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False
    if parsed == value:
        return True
    return isinstance(parsed, dict | list) and any(parsed == v for v in value.values() if isinstance(v, dict | list))


def _values_in(value: Any) -> tuple[list[dict[str, Any]], set[str]]:
    """The dicts with a ``type`` key and the strings (stripped) in ``value`` (itself, its values, theirs …), at most
    `_NODES` values searched."""
    dicts: list[dict[str, Any]] = []
    strings: set[str] = set()
    stack, seen = [value], 0
    while stack and seen < _NODES:
        node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            if "type" in node:
                dicts.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            strings.add(node.strip())
    return dicts, strings
