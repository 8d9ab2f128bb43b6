"""`ToolResult`: what a tool call returns when the tool declares no output schema.

Besides the raw blocks (``content``) a result offers them by kind: ``text`` (what ``print(result)`` shows, with a
line for each image after it), ``images``, ``resource_links`` and ``resources`` (embedded resources). Every ``repr``
here is bounded, so that printing a result, or a list of its images, shows what it holds rather than every byte of it.

(Over 400 lines: `ToolResult` and the objects it gives (`Image`, `Resource`, `ResourceLink`), whose text, ``repr``
and bounds share one set of limits and readers of the server's blocks.)
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")

_EXCERPT_CHARS = 200
"""Characters of a result's text an error quotes."""
_REPR_TEXT_CHARS = 60
"""Characters of a text block a result's ``repr`` quotes (of its structured content, `_EXCERPT_CHARS`)."""
_REPR_BLOCKS = 10
"""Content blocks a result's ``repr`` lists; the rest are counted."""
_STR_LINES_AFTER_TEXT = 3  # blocks .text leaves out (images) that `str` lists one a line after a text; more: counted
_URI_CHARS = 300
"""Characters of a URI shown in ``.text`` (a ``data:`` URI can be megabytes); the objects keep it whole."""
_NAME_CHARS = 120
"""Characters of a resource's name or title shown in ``.text`` and ``repr`` (and likewise the next two)."""
_DESCRIPTION_CHARS = 200
_MIME_CHARS = 80


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def _one_line(value: object, limit: int) -> str:
    """``value`` as one line of printable characters, capped at ``limit`` with ``…``: a server's name may hold
    newlines or terminal escapes. (`tool_tree.text.one_line` does this on the host; the sandbox has only this
    package.)"""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(value)).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def _quoted(text: str, limit: int) -> str:
    """``repr`` of ``text``, cut to its first ``limit`` characters with a count of them all when longer."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}… ({len(text):,} characters)"


def _cut_repr(value: object) -> str:
    """``repr(value)`` cut to its first `_EXCERPT_CHARS` characters, with its full length when longer."""
    shown = repr(value)
    if len(shown) <= _EXCERPT_CHARS:
        return shown
    return f"{shown[:_EXCERPT_CHARS]}… ({len(shown):,} characters)"


def _decode(data: object) -> bytes | None:
    """The bytes of a base64 string, or None when it is not one."""
    try:
        return base64.b64decode(data, validate=True) if isinstance(data, str) else None
    except (binascii.Error, ValueError):
        return None


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, repr=False)
class Image:
    """An image a tool returned. ``data`` is the decoded bytes."""

    data: bytes
    mime_type: str

    def save(self, path: str) -> str:
        """Write the image to ``path`` and return the path.

        Raises:
            TypeError: ``path`` is not a str or a path (`_file_path`).
        """
        with open(_file_path(path, "Image.save"), "wb") as f:
            f.write(self.data)
        return path

    def __repr__(self) -> str:
        return f"Image({_one_line(self.mime_type, _MIME_CHARS)}, {len(self.data):,} bytes)"


def _file_path(path: object, method: str) -> str | os.PathLike[str]:
    """``path`` checked as a file's path before `open` takes it: an int is a file descriptor to `open`, so
    ``image.save(1)`` wrote the image's bytes into the script's own stdout and closed it (every later print failed),
    and the descriptor of the interpreter's channel to its supervisor had the interpreter restarted.

    Raises:
        TypeError: ``path`` is neither a str nor an ``os.PathLike``.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"{method}: path must be a file's path (a str), got {type(path).__name__} {path!r:.60}")
    return path


@dataclass(frozen=True, repr=False)
class ResourceLink:
    """A link to a resource that a tool returned (a ``resource_link`` block): where it is, not what it holds.

    A script cannot read the resource itself (the sandbox reaches tools only); a tool of the same server may take
    its ``uri``. ``mime_type``, ``title``, ``description`` and ``size`` (in bytes) are None when the server left
    them out.
    """

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None

    def __repr__(self) -> str:
        parts = [_one_line(self.uri, _URI_CHARS), _quoted(self.title or self.name, _NAME_CHARS)]
        parts += [_one_line(self.mime_type, _MIME_CHARS)] if self.mime_type else []
        return f"ResourceLink({', '.join(parts)})"


@dataclass(frozen=True, repr=False)
class Resource:
    """A resource a tool embedded in its result (a ``resource`` block): its ``text``, or the decoded ``data`` of a
    binary (blob) resource. The other of the two is None, as is ``mime_type`` when the server left it out."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    data: bytes | None = None

    def save(self, path: str) -> str:
        """Write the resource's bytes (its text as UTF-8) to ``path`` and return the path.

        Raises:
            TypeError: ``path`` is not a str or a path (`_file_path`).
        """
        with open(_file_path(path, "Resource.save"), "wb") as f:
            f.write(self.data if self.data is not None else (self.text or "").encode("utf-8"))
        return path

    def __repr__(self) -> str:
        parts = [_one_line(self.uri, _URI_CHARS)]
        parts += [_one_line(self.mime_type, _MIME_CHARS)] if self.mime_type else []
        if self.data is not None:
            parts.append(f"{len(self.data):,} bytes")
        elif self.text is not None:
            parts.append(f"{len(self.text):,} characters")
        return f"Resource({', '.join(parts)})"


def _image_of(block: dict[str, Any]) -> Image | None:
    """The image of an ``image`` block; None when its data is not valid base64."""
    data = _decode(block.get("data"))
    return None if data is None else Image(data, str(block.get("mimeType", "application/octet-stream")))


def _link_of(block: dict[str, Any]) -> ResourceLink:
    size = block.get("size")
    return ResourceLink(
        uri=str(block.get("uri", "")),
        name=str(block.get("name", "")),
        title=_optional_str(block.get("title")),
        description=_optional_str(block.get("description")),
        mime_type=_optional_str(block.get("mimeType")),
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
    )


def _embedded(block: dict[str, Any]) -> dict[str, Any]:
    """The ``resource`` object of an embedded-resource block (empty when the server sent none)."""
    inner = block.get("resource")
    return inner if isinstance(inner, dict) else {}


def _link_line(link: ResourceLink) -> str:
    """A resource link as one line of ``.text``: ``Resource link: NAME <URI> (MIME, SIZE) — DESCRIPTION``."""
    line = f"Resource link: {_one_line(link.title or link.name, _NAME_CHARS)} <{_one_line(link.uri, _URI_CHARS)}>"
    facts = [_one_line(link.mime_type, _MIME_CHARS)] if link.mime_type else []
    facts += [f"{link.size:,} bytes"] if link.size is not None else []
    line += f" ({', '.join(facts)})" if facts else ""
    description = _one_line(link.description or "", _DESCRIPTION_CHARS)
    return line + (f" — {description}" if description else "")


def _resource_of(block: dict[str, Any]) -> Resource | None:
    """The embedded resource of a ``resource`` block; None when its blob is not valid base64."""
    inner = _embedded(block)
    uri, mime, text = str(inner.get("uri", "")), _optional_str(inner.get("mimeType")), inner.get("text")
    if isinstance(text, str) or "blob" not in inner:
        return Resource(uri, mime, text=text if isinstance(text, str) else None)
    data = _decode(inner["blob"])
    return None if data is None else Resource(uri, mime, data=data)


def _resource_text(block: dict[str, Any]) -> str:
    """An embedded resource in ``.text``: a line naming it, then its text (a blob of a text type that is UTF-8 too,
    as direct mode shows it); for other data, that line alone with its size (the bytes are in ``.resources``).

    Before, a ``text/plain`` blob showed its size alone, and a script decoded its bytes itself."""
    resource = _resource_of(block)
    if resource is None:
        return f"Resource <{_one_line(_embedded(block).get('uri', ''), _URI_CHARS)}> (data not valid base64)"
    head = f"Resource <{_one_line(resource.uri, _URI_CHARS)}>"
    facts = [_one_line(resource.mime_type, _MIME_CHARS)] if resource.mime_type else []
    shown = resource.text if resource.text is not None else _text_of(resource)
    if shown is not None:
        return f"{head} ({', '.join(facts)}):\n{shown}" if facts else f"{head}:\n{shown}"
    facts.append(
        "no text or data" if resource.data is None else f"{len(resource.data):,} bytes; .resources has its data"
    )
    return f"{head} ({', '.join(facts)})"


_TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/yaml", "application/x-yaml", "application/javascript",
     "application/sql", "application/toml", "application/x-ndjson"}
)  # fmt: skip


def is_text_type(mime: object) -> bool:
    """Whether a MIME type names text (``text/*``, JSON, XML, YAML, …, ``+json`` and ``+xml`` types). Here, since
    the sandbox has only this package; the host's modes use it too (`tool_tree.text`)."""
    if not isinstance(mime, str):
        return False
    kind = mime.split(";", 1)[0].strip().lower()
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))


def _text_of(resource: Resource) -> str | None:
    """The data of a resource of a text type (`is_text_type`), when it is UTF-8; else None."""
    if resource.data is None or not is_text_type(resource.mime_type):
        return None
    try:
        return resource.data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True, repr=False)
class ToolResult:
    """The result of one MCP tool call, with nothing flattened away.

    Attributes:
        content: the raw content blocks, exactly as the server sent them (wire format dicts).
        structured_content: the ``structuredContent`` object, when the server sent one.
        is_error: the server's ``isError`` flag (a stub raises `ToolError` instead of returning such a result).
    """

    content: list[dict[str, Any]] = field(default_factory=list)
    structured_content: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> ToolResult:
        """Build a result from a ``tools/call`` result object (camelCase wire keys)."""
        content = raw.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        structured = raw.get("structuredContent")
        return cls(
            content=blocks,
            structured_content=structured if isinstance(structured, dict) else None,
            is_error=raw.get("isError") is True,
        )

    @property
    def text(self) -> str:
        """What the result says: its blocks in order, joined with newlines (``print(result)`` adds a line per image).

        A text block is its text; a resource link one line (name, ``<URI>``, MIME type, size, the start of its
        description); an embedded resource a line with its URI and MIME type, then its text, or for a binary
        resource that line alone with its size. Images are left out (``.images`` has them).
        """
        parts: list[str] = []
        for b in self.content:
            kind = b.get("type")
            if kind == "text":
                parts.append(str(b.get("text", "")))
            elif kind == "resource_link":
                parts.append(_link_line(_link_of(b)))
            elif kind == "resource":
                parts.append(_resource_text(b))
        return "\n".join(parts)

    @property
    def images(self) -> list[Image]:
        """The image blocks, decoded.

        Raises:
            ValueError: an image block's data is not valid base64 (``content`` holds every block as it was sent).
        """
        return self._decoded("image", "an image", _image_of)

    @property
    def resource_links(self) -> list[ResourceLink]:
        """The resource links (``resource_link`` blocks): each resource's URI, name and what the server said of it."""
        return [_link_of(b) for b in self.content if b.get("type") == "resource_link"]

    @property
    def resources(self) -> list[Resource]:
        """The embedded resources (``resource`` blocks): each one's URI with its text, or its data decoded.

        Raises:
            ValueError: a binary resource's data is not valid base64 (``content`` holds every block as it was sent).
        """
        return self._decoded("resource", "a resource", _resource_of)

    def _decoded(self, kind: str, what: str, decoded: Callable[[dict[str, Any]], _T | None]) -> list[_T]:
        """The blocks of type ``kind``, each ``decoded`` (None: its base64 data is not valid, a ValueError)."""
        out: list[_T] = []
        for i, b in enumerate(self.content):
            if b.get("type") != kind:
                continue
            item = decoded(b)
            if item is None:
                raise ValueError(
                    f"content block {i} is {what} whose data is not valid base64 (see .content[{i}] for what the "
                    "server sent)"
                )
            out.append(item)
        return out

    def json(self) -> Any:
        """The structured content if present, else the text blocks parsed as JSON.

        Raises:
            ValueError: the result has no structured content and its text is not JSON; the message shows the
                start of what came back (``.text`` has the text as it is, ``.content`` every block).
        """
        if self.structured_content is not None:
            return self.structured_content
        texts = [b for b in self.content if b.get("type") == "text"]
        if not texts:
            raise ValueError(
                f"the tool result has no structured content and no text block to parse as JSON: {self._kinds()}"
            )
        # Only the text blocks: a resource's line in `.text` would make a JSON text block unparsable.
        text = "\n".join(str(b.get("text", "")) for b in texts)
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            reason = f"{e.msg} at line {e.lineno} column {e.colno}"
        if len(text) <= _EXCERPT_CHARS:
            came = f"it is {text!r}"
        else:
            came = f"it begins {text[:_EXCERPT_CHARS]!r}… ({len(text):,} characters)"
        message = (
            f"the tool result has no structured content and its text is not JSON ({reason}): {came}; "
            "use .text for plain text"
        )
        if len(texts) < len(self.content):
            message += f"; {self._kinds()}"
        if len(texts) > 1 and all(_is_json(str(b.get("text", ""))) for b in texts):
            message += (
                f"; each of its {len(texts)} text blocks is JSON: "
                "[json.loads(b['text']) for b in result.content if b['type'] == 'text']"
            )
        raise ValueError(message)

    def _kinds(self) -> str:
        """What the content holds, for an error message: ``it has no content`` or ``its content is 1 image, …``."""
        if not self.content:
            return "it has no content"
        counts: dict[str, int] = {}
        for b in self.content:
            kind = str(b.get("type", "?"))[:40]
            counts[kind] = counts.get(kind, 0) + 1
        listed = ", ".join(f"{n} {kind}" for kind, n in counts.items())
        where = [".images has the images"] if "image" in counts else []
        where += [".resource_links the resource links"] if "resource_link" in counts else []
        where += [".resources the embedded resources"] if "resource" in counts else []
        return f"its content is {listed} ({', '.join([*where, '.content every block as sent'])})"

    def _block_repr(self, b: dict[str, Any]) -> str:
        """One content block for ``repr``: short, whatever its size."""
        kind = b.get("type")
        if kind == "text":
            return f"text {_quoted(str(b.get('text', '')), _REPR_TEXT_CHARS)}"
        if kind == "image":
            data = _decode(b.get("data"))
            image_mime = _one_line(b.get("mimeType", "application/octet-stream"), _MIME_CHARS)
            return repr(Image(data, image_mime)) if data is not None else f"Image({image_mime}, data not valid base64)"
        if kind == "resource_link":
            return repr(_link_of(b))
        if kind == "resource":
            resource = _resource_of(b)
            if resource is None:
                return f"Resource({_one_line(_embedded(b).get('uri', ''), _URI_CHARS)}, data not valid base64)"
            return repr(resource)
        return f"{_one_line(b.get('type', '?'), 40)} block"

    def __repr__(self) -> str:
        blocks = [self._block_repr(b) for b in self.content[:_REPR_BLOCKS]]
        if len(self.content) > _REPR_BLOCKS:
            blocks.append(f"… {len(self.content) - _REPR_BLOCKS:,} more blocks")
        parts = [f"[{', '.join(blocks)}]"]
        if self.structured_content is not None:
            parts.append(f"structured_content={_cut_repr(self.structured_content)}")
        parts += ["is_error=True"] if self.is_error else []
        return f"ToolResult({', '.join(parts)})"

    def __str__(self) -> str:
        """``.text``, then a line for each image (or other block it leaves out), counted past three; without, ``.text``.
        Before: an image alone printed an empty line, after a text nothing (a script never learned it came back)."""
        text, unsaid = self.text, [(n, b) for n, b in enumerate(self.content) if _unsaid(b)]
        if not text:
            lines = [self._unsaid_line(n, b) for n, b in unsaid if n < _REPR_BLOCKS]
            more = len(self.content) - _REPR_BLOCKS
            blocks = "block" if more == 1 else "blocks"  # stdlib only: no `tool_tree.text.counted` in the sandbox
            return "\n".join(lines + ([f"[… {more:,} more {blocks}]"] if more > 0 else []))
        if not unsaid:
            return text
        many = len(unsaid) > _STR_LINES_AFTER_TEXT
        lines = _unsaid_summary([b for _, b in unsaid]) if many else [self._unsaid_line(n, b) for n, b in unsaid]
        return "\n".join([text.removesuffix("\n"), *lines])

    def _unsaid_line(self, n: int, b: dict[str, Any]) -> str:
        """Block ``n`` (one ``.text`` leaves out) as a line of ``str``: where the script finds it."""
        if b.get("type") == "image":
            images = sum(1 for c in self.content[:n] if c.get("type") == "image")
            return f"[{self._block_repr(b)}: result.images[{images}]]"
        return f"[a block of type {_one_line(str(b.get('type')), _MIME_CHARS)!r}: result.content[{n}]]"


def _unsaid_summary(blocks: list[dict[str, Any]]) -> list[str]:
    """Many blocks ``.text`` leaves out, counted: a line for the images, one for any other blocks."""
    images = sum(1 for b in blocks if b.get("type") == "image")
    lines = [f"[+ {images} image{'s' if images > 1 else ''}: result.images[0..{images - 1}]]"] if images else []
    others = [_one_line(str(b.get("type")), _MIME_CHARS) for b in blocks if b.get("type") != "image"]
    if others:
        kinds = f"of type {others[0]!r}" if len(set(others)) == 1 else "of other types"
        lines.append(f"[+ {len(others)} block{'s' if len(others) > 1 else ''} {kinds}: result.content]")
    return lines


def _unsaid(block: dict[str, Any]) -> bool:
    """Whether ``.text`` leaves ``block`` out (an image, audio, a type it does not know)."""
    return _one_line(str(block.get("type")), _MIME_CHARS) not in ("text", "resource_link", "resource")
