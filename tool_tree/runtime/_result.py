"""`ToolResult`: what a tool call returns when the tool declares no output schema."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

_EXCERPT_CHARS = 200
"""Characters of a result's text an error quotes."""


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


@dataclass(frozen=True)
class Image:
    """An image a tool returned. ``data`` is the decoded bytes."""

    data: bytes
    mime_type: str

    def save(self, path: str) -> str:
        """Write the image to ``path`` and return the path."""
        with open(path, "wb") as f:
            f.write(self.data)
        return path


@dataclass(frozen=True)
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
        """All text blocks joined with newlines."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @property
    def images(self) -> list[Image]:
        """The image blocks, decoded.

        Raises:
            ValueError: an image block's data is not valid base64 (``content`` holds every block as it was sent).
        """
        out: list[Image] = []
        for i, b in enumerate(self.content):
            if b.get("type") != "image":
                continue
            data = b.get("data")
            try:
                raw = base64.b64decode(data, validate=True) if isinstance(data, str) else None
            except (binascii.Error, ValueError):
                raw = None
            if raw is None:
                raise ValueError(
                    f"content block {i} is an image whose data is not valid base64 (see .content[{i}] for what the "
                    "server sent)"
                )
            out.append(Image(raw, str(b.get("mimeType", "application/octet-stream"))))
        return out

    def json(self) -> Any:
        """The structured content if present, else the text parsed as JSON.

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
        text = self.text
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
        return f"its content is {listed} (.images has the images, .content every block as sent)"

    def __str__(self) -> str:
        return self.text
