"""`ContentBudget`: what several tool results together may bring into the conversation.

Each result is already held to the caps of one result (`agent.content.MAX_RESULT_CHARS` characters of
text; `MAX_IMAGES` images of at most `MAX_IMAGES_TOTAL_BYTES` together). Results that arrive together
— the invocations of one ``batch_tool`` call, the calls of one reply — share the same caps, in
order: each takes what it needs of what the ones before it left. A text block that crosses the limit
keeps its head and tail; text blocks and images past it are left out; the caller adds `cut_note`
to each result that lost something. A toolset's own labels in a result (a batch's "[2] name: ok"
and its notes) are never cut, only charged: charged the same way, a batch that fit its own budget
passes whole through the reply's. Without a shared budget, ten calls each at the cap would bring in
ten times the cap (a batch of ten 500,000-character results is 5,000,000 characters in one request).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from agent.content import MAX_RESULT_CHARS
from sandbox._supervisor.limits import MAX_IMAGES, MAX_IMAGES_TOTAL_BYTES, base64_size
from tool_tree.text import size

NOTE_ROOM = 10_000
"""Characters of text a group may hold past `MAX_RESULT_CHARS`: room for the notes a result at its own cap
carries about what it left out (a line; in a batch of ten, a line per invocation), so that one result
within its own caps passes through a group whole."""
IMAGE_DATA = base64_size(MAX_IMAGES_TOTAL_BYTES) + 4 * MAX_IMAGES
"""Characters of base64 image data a group may hold: one result's images together, in base64 (each
image rounds up to whole 4-character groups)."""


@dataclass(frozen=True)
class Cut:
    """What one result lost to the budget."""

    chars: int = 0
    """Characters of text left out."""
    images: int = 0
    """Images left out."""

    def __bool__(self) -> bool:
        return bool(self.chars or self.images)


class ContentBudget:
    """The caps a group of results shares: ``chars`` characters of text, ``images`` images whose base64
    data is at most ``image_data`` characters together (default: the caps of one result, with
    `NOTE_ROOM` for its notes)."""

    def __init__(
        self, chars: int = MAX_RESULT_CHARS + NOTE_ROOM, images: int = MAX_IMAGES, image_data: int = IMAGE_DATA
    ) -> None:
        self.limits = (chars, images, image_data)
        self.chars, self.images, self.image_data = chars, images, image_data

    def take(self, blocks: Sequence[dict[str, Any]], keep: Collection[int] = ()) -> tuple[list[dict[str, Any]], Cut]:
        """The blocks of one result that fit in what is left (charged to it), and what was left out.

        A text block longer than what is left keeps its head and tail, with a marker saying how many
        characters are missing, in as many characters as were left; text blocks after the limit are left
        out; an image is kept while the count and the data left allow it. A block that is neither text nor
        an image counts its JSON as text. The blocks at the indexes in ``keep`` (a toolset's own short
        labels: `ToolOutcome.labels`) are kept whole, charged as far as anything is left.
        """
        kept: list[dict[str, Any]] = []
        chars = images = 0
        for i, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "image":
                source = block.get("source")
                data = source.get("data") if isinstance(source, dict) else None
                n = len(data) if isinstance(data, str) else 0
                if self.images > 0 and n <= self.image_data:
                    self.images -= 1
                    self.image_data -= n
                    kept.append(block)
                else:
                    images += 1
                continue
            text = block.get("text") if kind == "text" else None
            n = len(text) if isinstance(text, str) else len(json.dumps(block, ensure_ascii=False))
            if n <= self.chars or i in keep:
                self.chars -= min(n, self.chars)
                kept.append(block)
            elif isinstance(text, str) and (room := self.chars - len(_marker(n))) > 0:
                head, tail = text[: room - room // 2], text[len(text) - room // 2 :]
                kept.append({**block, "text": f"{head}{_marker(n - room)}{tail}"})  # at most what was left
                chars += n - room
                self.chars = 0
            else:
                chars += n
        return kept, Cut(chars, images)

    def cut_note(self, cut: Cut, shared_by: str) -> dict[str, Any]:
        """A text block saying what ``cut`` left out of one result and why (charged, as far as anything is
        left); ``shared_by`` names the group ("the results of one reply")."""
        chars, images, _ = self.limits
        chars = chars - NOTE_ROOM if chars > NOTE_ROOM else chars  # the cap of text: the rest is the notes' room
        lost = [f"{cut.chars:,} characters"] if cut.chars else []
        lost += [f"{cut.images} image(s)"] if cut.images else []
        text = (
            f"[{' and '.join(lost)} of this result were left out: {shared_by} share at most {chars:,} characters "
            f"of text and {images} images ({size(MAX_IMAGES_TOTAL_BYTES)}). Ask for less (a filter, a page, fewer "
            "fields) or for fewer results at once.]"
        )
        self.chars -= min(len(text), self.chars)
        return {"type": "text", "text": text}


def _marker(missing: int) -> str:
    """What stands between the head and the tail of a text that lost ``missing`` characters."""
    return f"\n[... {missing:,} characters left out ...]\n"
