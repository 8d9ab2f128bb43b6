"""Passthrough results bounded and cleaned: what a server sent for a passthrough call, as it goes to the client.

A ``tools/call`` result (content, structured content, ``isError``) goes out as the server sent it but bounded and
cleaned as a script's output is (`capped`):

- its first `agent.content.MAX_BLOCKS` content blocks are looked at, the rest only counted;
- every string that goes out (text, a resource's URI and text, a link's name, URI and description, a MIME
  type, annotations, ``_meta``) is counted against the sandbox's ``output_chars`` and cleaned of terminal
  escapes and control characters (`sandbox.results.clean_text`) once it is known to fit: a text is cut to
  what is left, any other field fits whole or its block is left out;
- images are held to the rules of a script's images (`sandbox.results.ImageBudget`: the first 8 looked
  at, each strict base64 of a PNG, JPEG, GIF or WebP that is one, with whole headers, at most 5 MB and 8,000
  pixels a side, 8 MiB together with audio and binary resources); an embedded resource whose blob has an image
  type the API takes (``image/png``) is one of them, as a client shows it as an image; what fails becomes a
  one-line note, and images past the count are counted;
- structured content is kept only when it fits in ``output_chars`` characters on its own.

A note at the end says what was cut. An error (a refusal, a server's JSON-RPC error, a result that is not
one) is held to the same rules (`failed`). Nothing is cleaned or copied before it is counted, so the work
is bounded by the caps, not by the result. A prompt's messages and a resource's contents are bounded by the
same blocks and budget (`agent.serve.upstream_extras`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mcp_types as types

from agent.content import MAX_BLOCKS, media_type
from agent.serve.content import error_result
from sandbox._supervisor.limits import MAX_IMAGES
from sandbox.results import IMAGE_TYPES, ImageBudget, clean_text, note_label
from tool_tree.answer_items import LEFT_OUT, total
from tool_tree.text import counted


def failed(message: str, max_chars: int) -> types.CallToolResult:
    """An error result whose text, which quotes the server, is held to a result's rules: cleaned
    (`sandbox.results.clean_text`) and at most ``max_chars`` characters, with a note when it was cut.

    Before, it went out whole and raw: a server's JSON-RPC error of 300,000 emoji came back to the client as
    300,160 characters with its escape sequences (``\\x1b[31m``) in them.
    """
    if len(message) <= max_chars:
        return error_result(clean_text(message))
    return error_result(
        f"{clean_text(message[:max_chars])}\n[... {len(message) - max_chars:,} of {len(message):,} characters of the "
        f"error cut: a passthrough result is capped at {max_chars:,} characters ...]"
    )


MAX_DEPTH = 100
"""Levels a value of a passthrough result (structured content, ``_meta``, annotations) may nest; a deeper one
is left out (the SDK cannot write one nested past about 250 levels)."""
_LINK_FIELDS = ("name", "title", "uri", "description", "mimeType", "size", "icons", "annotations", "_meta")
_RESOURCE_FIELDS = ("uri", "mimeType", "_meta")
_EXTRA_FIELDS = ("annotations", "_meta")


def copy_json(value: Any, limit: int) -> tuple[Any, int] | None:
    """A copy of a JSON value with every string, keys included, cleaned like a script's output, and what it
    costs: one for every value, plus the characters of its strings and keys, plus the digits of its numbers.
    None when that is over ``limit`` or the value nests deeper than `MAX_DEPTH`; nothing past the limit is
    looked at, and a string is counted before it is cleaned.

    Walked without recursion: how deep a result nests is the server's choice.
    """
    cost = 0
    box: list[Any] = [None]
    todo: list[tuple[Any, Any, Any, int]] = [(box, 0, value, 0)]
    while todo:
        parent, key, item, depth = todo.pop()
        cost += 1 + (len(item) if isinstance(item, str) else len(repr(item)) if isinstance(item, float) else 0)
        cost += item.bit_length() // 3 if isinstance(item, int) else 0
        if cost > limit or depth > MAX_DEPTH:
            return None
        if isinstance(item, str):
            parent[key] = clean_text(item)
        elif isinstance(item, dict):
            mapping: dict[str, Any] = {}
            parent[key] = mapping
            for k, v in item.items():
                cost += len(k) if isinstance(k, str) else 1
                if cost > limit:
                    return None
                name = clean_text(k) if isinstance(k, str) else k
                mapping[name] = None  # its place, so the keys keep their order
                todo.append((mapping, name, v, depth + 1))
        elif isinstance(item, list):
            if cost + len(item) > limit:  # each item costs at least one
                return None
            items: list[Any] = [None] * len(item)
            parent[key] = items
            todo.extend((items, i, v, depth + 1) for i, v in enumerate(item))
        else:
            parent[key] = item
    return box[0], cost


class _Budget:
    """The characters left for one passthrough result's content, and what was cut or left out (for the note)."""

    def __init__(self, chars: int) -> None:
        self.left = chars
        self.text_total = 0
        self.text_shown = 0
        self.left_out = 0
        self.extras_left_out = 0

    def text(self, text: str) -> str | None:
        """``text`` cut to what is left, then cleaned; None when nothing is left (its characters counted as cut)."""
        self.text_total += len(text)
        if self.left <= 0:
            return None
        shown = text[: self.left]
        self.left -= len(shown)
        self.text_shown += len(shown)
        return clean_text(shown)

    def fields(self, holder: dict[str, Any], keys: Sequence[str]) -> dict[str, Any] | None:
        """Those of ``keys`` that ``holder`` has, copied (`copy_json`) if they fit in what is left; else None."""
        picked = {key: holder[key] for key in keys if key in holder}
        if not picked:
            return {}
        copy = copy_json(picked, self.left)
        if copy is None:
            return None
        self.left -= copy[1]
        return dict(copy[0])

    def extras(self, block: dict[str, Any]) -> dict[str, Any]:
        """A block's annotations and ``_meta``, when they fit (else left out and counted)."""
        extras = self.fields(block, _EXTRA_FIELDS)
        self.extras_left_out += extras is None
        return extras or {}

    def note(self, text: str) -> dict[str, Any] | None:
        """A note in place of a block (counted against the characters too); None when it does not fit."""
        if len(text) > self.left:
            self.left_out += 1
            return None
        self.left -= len(text)
        return {"type": "text", "text": text}

    def leave_out(self, text: Any = None) -> None:
        """A block left out whole (its text, if any, counted as cut)."""
        self.left_out += 1
        self.text_total += len(text) if isinstance(text, str) else 0


def _block(block: Any, budget: _Budget, images: ImageBudget) -> dict[str, Any] | None:
    """One content block as it goes out (a note in its place if it cannot), or None when it is left out."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        shown = budget.text(block["text"])
        return None if shown is None else {"type": "text", "text": shown, **budget.extras(block)}
    if kind == "image":
        mime = block.get("mimeType")
        image = images.take(block.get("data"), media_type(mime) if media_type(mime) in IMAGE_TYPES else mime)
        if image is None or isinstance(image, str):
            return None if image is None else budget.note(image)  # past the count: in the last note
        # its type as the API spells it, and as its bytes say (a PNG sent as image/jpeg is a PNG)
        return {"type": "image", "data": block["data"], "mimeType": image.mime_type, **budget.extras(block)}
    if kind == "audio" and (mime := budget.fields(block, ("mimeType",))) is not None:
        taken = images.take_binary(block.get("data"), "audio")
        if isinstance(taken, str):
            return budget.note(taken)
        return {"type": "audio", "data": block["data"], **mime, **budget.extras(block)}
    if kind == "resource" and isinstance(block.get("resource"), dict):
        return _resource(block, block["resource"], budget, images)
    if kind == "resource_link" and (fields := budget.fields(block, _LINK_FIELDS)) is not None:
        return {"type": "resource_link", **fields}
    if isinstance(block, dict) and kind not in ("text", "audio", "resource", "resource_link"):
        return budget.note(f"[content of type {note_label(kind)} left out]")
    budget.leave_out()  # malformed, or its fields too long for what is left
    return None


def _resource(
    block: dict[str, Any], resource: dict[str, Any], budget: _Budget, images: ImageBudget
) -> dict[str, Any] | None:
    text = resource.get("text")
    head = budget.fields(resource, _RESOURCE_FIELDS) if budget.left > 0 else None
    if head is None:
        budget.leave_out(text)
        return None
    if isinstance(text, str):
        shown = budget.text(text)
        if shown is None:
            return None
        return {"type": "resource", "resource": {**head, "text": shown}, **budget.extras(block)}
    if media_type(resource.get("mimeType")) in IMAGE_TYPES:
        # A client shows such a blob as an image (Claude Code does), so it is one of the result's images: before, a
        # PNG's signature and nothing after it went out, and the Messages API refused the conversation.
        image = images.take(resource.get("blob"), media_type(resource["mimeType"]))
        if image is None or isinstance(image, str):
            return None if image is None else budget.note(image)  # past the count: in the last note
        head["mimeType"] = image.mime_type  # the type its bytes say
    elif isinstance(taken := images.take_binary(resource.get("blob"), "a binary resource"), str):
        return budget.note(taken)
    return {"type": "resource", "resource": {**head, "blob": resource["blob"]}, **budget.extras(block)}


def reserved(key: object) -> bool:
    """Whether ``key`` of a ``_meta`` is one MCP reserves (a prefix with a ``modelcontextprotocol`` or ``mcp`` label:
    ``io.modelcontextprotocol/serverInfo``). A passthrough result's are of the server's connection to tooltree, not
    of serve's to its client: passed on, they named the upstream server as the one the client talks to."""
    if not isinstance(key, str) or "/" not in key:
        return False
    return any(label in ("modelcontextprotocol", "mcp") for label in key.partition("/")[0].split("."))


def capped(result: Any, max_chars: int) -> dict[str, Any] | None:
    """A ``tools/call`` result (wire format) bounded and cleaned as the module says, with a last note saying
    what was cut; None when it is not a result (it has no list of content)."""
    if not isinstance(result, dict) or not isinstance(result.get("content"), list):
        return None
    items = result["content"]
    budget, images = _Budget(max_chars), ImageBudget()
    content = [kept for kept in (_block(block, budget, images) for block in items[:MAX_BLOCKS]) if kept is not None]
    out: dict[str, Any] = {"content": content}
    if isinstance(result.get("isError"), bool):
        out["isError"] = result["isError"]
    notes = []
    if budget.text_total > budget.text_shown:
        notes.append(f"{budget.text_total - budget.text_shown:,} of {budget.text_total:,} characters of text cut")
    if images.past:
        notes.append(f"{counted(images.past, 'image')} past the first {MAX_IMAGES} left out")
    if (sent := total(result, "content")) > MAX_BLOCKS:  # those the pool left out counted (`tool_tree.answer_items`)
        notes.append(f"{counted(sent - MAX_BLOCKS, 'content block')} past the first {MAX_BLOCKS:,} left out")
    if budget.left_out:
        notes.append(f"{counted(budget.left_out, 'content block')} left out (malformed, or too long for what was left)")
    if budget.extras_left_out:
        notes.append(f"the annotations or _meta of {counted(budget.extras_left_out, 'content block')} left out")
    structured = result.get("structuredContent")
    if structured is not None:
        copy = copy_json(structured, max_chars)  # on its own: the spec has a text block repeat it
        if copy is None:
            notes.append("the structured content left out")
        else:
            out["structuredContent"] = copy[0]
    given = result.get("_meta")  # the server's own keys: not those MCP reserves, nor the pool's count (`LEFT_OUT`)
    if isinstance(given, dict) and (own := {k: v for k, v in given.items() if not reserved(k) and k != LEFT_OUT}):
        meta = budget.fields({"_meta": own}, ("_meta",))
        if meta is None:
            notes.append("the result's _meta left out")
        else:
            out.update(meta)
    if notes:
        content.append(
            {
                "type": "text",
                "text": f"\n[... {'; '.join(notes)}: a passthrough result is capped at {max_chars:,} characters "
                f"and {MAX_BLOCKS:,} content blocks; call the tool from execute_python to work with all of it ...]",
            }
        )
    return out
