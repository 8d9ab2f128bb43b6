"""`ToolResult`: what a tool call returns when the tool declares no output schema."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any


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
            ValueError: the result has no structured content and its text is not JSON.
        """
        if self.structured_content is not None:
            return self.structured_content
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as e:
            raise ValueError(f"tool result text is not JSON: {e}") from None

    def __str__(self) -> str:
        return self.text
