"""`StructuredResult`: what the stub of a tool that declares an output schema returns.

It is the structured content, a plain ``dict`` to a script (index it, compare it with a dict, ``json.dumps`` it, pass
it to another tool), which also carries the whole `ToolResult` it came from: the content blocks a server sends beside
its structured content (an image, a resource link, an embedded resource, more text) are in ``.images``,
``.resource_links``, ``.resources``, ``.text`` and ``.content``, named as on a `ToolResult`. Before, the stub returned
the structured content alone and they were lost to the script (and so to the model). Printed, it is the dict followed
by a line for each block the structured content does not hold, as a `ToolResult` names its images; a string of it
that is the base64 data of one of its blocks (an image, audio, an embedded resource's blob) is printed as its size and
where the block is, ``<image/png, 4,312 bytes as base64: result.images[0]>``, the value staying whole.
"""

from __future__ import annotations

import json
from typing import Any

from tool_tree.runtime._result import _MIME_CHARS, Image, Resource, ResourceLink, ToolResult, _embedded, _one_line

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
    tools do), and shows a string that is the base64 data of one of its blocks as its size and where the block is
    (server-filesystem's ``read_media_file`` repeats its image's data there: before, a print showed all of it).
    ``copy``, ``deepcopy`` and pickle keep the result; ``dict(value)`` and ``value.copy()`` are plain dicts.
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
        data = _block_data(self.tool_result.content)
        shown = repr(_shortened(dict(self), data, [0])) if data else dict.__repr__(self)
        if not unheld:
            return shown
        if len(unheld) <= _LINES:
            lines = [f"[{self.tool_result._block_repr(b)}: {_where(self.tool_result.content, n)}]" for n, b in unheld]
        else:
            lines = [_counted([b for _, b in unheld])]
        return "\n".join([shown, *lines])


class _Data:
    """Base64 data of a block in a printed structured result: its ``repr`` says its size and where the block is."""

    __slots__ = ("said",)

    def __init__(self, said: str) -> None:
        self.said = said

    def __repr__(self) -> str:
        return self.said


def _block_data(blocks: list[dict[str, Any]]) -> dict[str, _Data]:
    """The base64 data of the image and audio blocks and of the embedded resources' blobs, each with what a print shows
    instead: ``<image/png, 4,312 bytes as base64: result.images[0]>``."""
    out: dict[str, _Data] = {}
    for n, b in enumerate(blocks):
        kind = b.get("type")
        inner = _embedded(b) if kind == "resource" else b
        data = inner.get("blob" if kind == "resource" else "data")
        if kind not in ("image", "audio", "resource") or not isinstance(data, str) or not data or data in out:
            continue
        mime = _one_line(inner.get("mimeType") or "application/octet-stream", _MIME_CHARS)
        size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
        out[data] = _Data(f"<{mime}, {size:,} bytes as base64: {_where(blocks, n)}>")
    return out


def _shortened(value: Any, data: dict[str, _Data], seen: list[int]) -> Any:
    """``value`` with each string of ``data`` in it replaced by what a print shows instead, at most `_NODES` values
    looked at (the rest as they are); dicts and lists are copied, ``value`` is left as it is."""
    seen[0] += 1
    if seen[0] > _NODES:
        return value
    if isinstance(value, str):
        return data.get(value, value)
    if isinstance(value, dict):
        return {k: _shortened(v, data, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_shortened(v, data, seen) for v in value]
    return value


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
