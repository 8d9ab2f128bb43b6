"""Content for the model: MCP tool results and sandbox executions as Anthropic content blocks.

Images stay images (``{"type": "image", "source": {"type": "base64", ...}}``), never base64
text. MCP content the Messages API cannot carry (audio, binary resources) becomes a one-line note
saying what was left out. A server's result is untrusted in size and in content, as a script's
output is:

- its first `MAX_BLOCKS` content blocks are looked at, the rest only counted (a note says how many);
- its images are held to the rules of a script's images (`sandbox.results.ImageBudget`: the first
  `MAX_IMAGES` looked at, each strict base64 of a PNG, JPEG, GIF or WebP that is one, at most 5 MB of
  base64 and 8,000 pixels a side, 8 MiB together); an image that fails one becomes a note saying why,
  those past the count one note; its MIME type is read as the API spells it (`media_type`); an image
  sent as an embedded resource is shown as an image;
- a text resource sent as base64 (a ``text/*``, JSON, XML, … blob) is decoded and shown as text; audio and other
  binary resources become a note with their type and size; a text block of white
  space only is left out (the API refuses one with a 400, on every later request too);
- its structured content is for programs (the spec has a text block repeat it for the model): it is shown,
  as JSON, only when the content gives the model nothing, no image and no text but white space (a server
  that sends structured content alone); a string in it that is binary data as base64 (`BASE64_RUN`
  characters or more, a ``data:`` URI's too) is a note with its size instead, so an image a server repeats
  there (server-filesystem's ``read_media_file`` does) is never sent again as text;
- every string that reaches the model (text, a resource's URI and text, a link's name and URI, the
  structured content's JSON) is cleaned of terminal escapes and control characters like a script's
  output (`sandbox.results.clean_text`) and counted against `MAX_RESULT_CHARS` (head and tail kept);
  nothing is cleaned or copied before it is cut, so the work is bounded by the caps, not the result;

so one call can neither fill the host's memory nor make every later request too large.

(Over 400 lines: an MCP result's blocks and a script's execution with its call ledger are what the model reads of
a tool's work, under the same caps; read together.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from sandbox._supervisor.limits import MAX_IMAGES
from sandbox.results import (
    IMAGE_TYPES,
    ExecutionResult,
    ImageBudget,
    SaidOnce,
    ToolCallRecord,
    clean_text,
    note_label,
)
from tool_tree.answer_items import total
from tool_tree.text import counted, is_text_type, size, text_of_blob

LEDGER_LINES = 8
LEDGER_GROUPS = 20
"""Tools the short ledger names one line each when there are many calls (a script may call thousands of
distinct names, refused ones included); the rest are one line."""
MAX_RESULT_CHARS = 500_000
"""Characters of text one MCP tool result brings into the conversation (about 125,000 tokens: room
left in a 200,000-token context, and a 200 KB document still arrives whole); a longer text keeps its
head and tail, with a note. Past it, a result would fill the context and go out with every request."""
BLOB_CHARS = 1 << 20
"""Base64 characters of a text resource sent as a blob that are decoded (768 KB of text: past the result's cap)."""
MAX_BLOCKS = 1_000
"""Content blocks of one MCP tool result that are looked at (here and in `tooltree serve`'s passthrough);
later ones are counted in a note. Ample for a result listing its items one block each; what bounds
the work and the blocks sent when each block is empty (a million ``{"type": "text", "text": ""}`` cost
nothing against a character cap)."""
BASE64_RUN = 1_000
"""Characters from which a string of structured content that is base64 (standard or URL-safe, line breaks
allowed: its first `BASE64_RUN` characters, with upper case, lower case and digits, so not a hex digest or a
DNA sequence, and its last ones, padding included) is taken for binary data (750 bytes or more): a note with
its size replaces it in the JSON the model gets."""
_BASE64 = re.compile(r"[A-Za-z0-9+/_\-\r\n]*")
_BASE64_END = re.compile(r"[A-Za-z0-9+/_\-\r\n]*(?:={1,2}[\r\n]*)?")
_BASE64_KINDS = (re.compile("[A-Z]"), re.compile("[a-z]"), re.compile("[0-9]"))
_DATA_URI = re.compile(r"data:([^,;]{0,100})(?:;[^,;]{0,100})*;base64,", re.IGNORECASE)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(data_b64: str, mime_type: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data_b64}}


Pieces = list[str]
"""One text block to be, as the strings it is made of (server strings uncut, uncleaned, uncopied)."""


def _strings(*values: Any) -> Pieces:
    """The non-empty strings among ``values``, a space between them (a missing field is no string)."""
    pieces: Pieces = []
    for value in values:
        if isinstance(value, str) and value:
            pieces += [" ", value] if pieces else [value]
    return pieces


def media_type(mime: Any) -> Any:
    """A MIME type as the Messages API spells it: lower case, without parameters (``IMAGE/PNG; x=y`` is
    ``image/png``), ``image/jpg`` as ``image/jpeg``; anything but a string as it is (`ImageBudget` names it)."""
    if not isinstance(mime, str):
        return mime
    bare = mime[:100].split(";", 1)[0].strip().lower()
    return "image/jpeg" if bare == "image/jpg" else bare


def _binary_note(what: str, data: Any, mime: Any, why: str) -> str:
    """A note for binary content the model is not given: what it was, its type and size, and why."""
    known = f"{size(len(data) * 3 // 4 - data[-2:].count('='))}, " if isinstance(data, str) else ""
    return f"[{what} ({known}{note_label(mime)}) not shown: {why}]"


def _mcp_block(block: dict[str, Any], images: ImageBudget) -> dict[str, Any] | Pieces | None:
    """One MCP content block as an image block, as the pieces of a text block, or None (an image past the
    count, counted in ``images``)."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text", "")
        return [text] if isinstance(text, str) else ["[a malformed text block was left out]"]
    if kind == "image":
        return _image(block.get("data"), block.get("mimeType"), images)
    if kind == "audio":
        return [_binary_note("audio", block.get("data"), block.get("mimeType"), "the model cannot hear audio")]
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, dict):
            return ["[a malformed resource was left out]"]
        uri = resource.get("uri")
        if isinstance(resource.get("text"), str):
            return ["[resource ", *_strings(uri), "]\n", resource["text"]]
        mime = media_type(resource.get("mimeType"))
        if isinstance(mime, str) and mime.startswith("image/"):  # an image sent as a resource is shown as one
            return _image(resource.get("blob"), resource.get("mimeType"), images)
        if is_text_type(resource.get("mimeType")) and (text := text_of_blob(resource.get("blob"), BLOB_CHARS)):
            return ["[resource ", *_strings(uri), "]\n", text]  # text sent as a blob (server-everything's)
        what = f"binary resource {note_label(uri, 200)}"
        return [_binary_note(what, resource.get("blob"), resource.get("mimeType"), "the model reads only text")]
    if kind == "resource_link":
        return _strings("[resource link]", block.get("name"), block.get("uri"))
    return [f"[content of type {note_label(kind)} left out]"]


def _image(data: Any, mime: Any, images: ImageBudget) -> dict[str, Any] | Pieces | None:
    """An image block, a note saying why not, or None (past the count); a type the API does not take is named
    as the server sent it."""
    if media_type(mime) in IMAGE_TYPES:
        mime = media_type(mime)
    taken = images.take(data, mime)
    if taken is None:
        return None
    return [taken] if isinstance(taken, str) else image_block(str(data), taken.mime_type)


def mcp_result_blocks(result: dict[str, Any], max_chars: int = MAX_RESULT_CHARS) -> list[dict[str, Any]]:
    """A ``tools/call`` result (wire format) as content blocks for a ``tool_result``: its first `MAX_BLOCKS`
    blocks, at most ``max_chars`` characters of cleaned text and the images `ImageBudget` lets through."""
    content = result.get("content")
    items: list[Any] = content if isinstance(content, list) else []
    images = ImageBudget()
    blocks = (_mcp_block(block, images) for block in items[:MAX_BLOCKS] if isinstance(block, dict))
    parts = [part for part in blocks if part is not None]
    notes: list[str] = []
    structured = result.get("structuredContent")
    # Shown only when the content gives the model nothing: an image counts (server-filesystem repeats its base64
    # there), and so does a note of ours (it says what was there).
    if structured is not None and not any(isinstance(part, dict) or _says(part) for part in parts):
        text, cut = json_head(structured, max_chars)
        parts.append([text])
        if cut:
            notes.append(f"the structured content is longer than {max_chars:,} characters: its start is shown")
    if images.past:
        were = "was" if images.past == 1 else "were"
        notes.append(f"{counted(images.past, 'image')} past the first {MAX_IMAGES} {were} left out")
    if (sent := total(result, "content")) > MAX_BLOCKS:  # those the pool left out counted (`tool_tree.answer_items`)
        were = "was" if sent - MAX_BLOCKS == 1 else "were"
        notes.append(f"{counted(sent - MAX_BLOCKS, 'content block')} past the first {MAX_BLOCKS:,} {were} left out")
    out = _fit_text(parts, max_chars)
    if notes:
        out.append(text_block(f"[{'; '.join(notes)}. Ask the tool for less: a filter, a page, fewer fields.]"))
    return out or [text_block("(the tool returned no content)")]


def _says(pieces: Pieces) -> bool:
    """Whether the pieces hold more than white space (looked at without copying them)."""
    return any(piece and not piece.isspace() for piece in pieces)


def _fit_text(parts: list[dict[str, Any] | Pieces], max_chars: int) -> list[dict[str, Any]]:
    """The blocks, their text cleaned and at most ``max_chars`` characters of it: the block that crosses the
    limit keeps its head and tail, the text blocks after it are left out, and a last block says what is
    missing. Only what is kept is joined and cleaned."""
    total = sum(len(piece) for part in parts if isinstance(part, list) for piece in part)
    out: list[dict[str, Any]] = []
    left = max_chars
    for part in parts:
        if isinstance(part, dict):
            out.append(part)
            continue
        n = sum(map(len, part))
        if n <= left:
            text = clean_text("".join(part))
            if text.strip():  # the API refuses a text block that is empty or only white space
                out.append(text_block(text))
            left -= n
        elif left > 0:
            head, tail = _head(part, left - left // 2), _tail(part, left // 2)
            out.append(
                text_block(f"{clean_text(head)}\n[... {n - left:,} characters left out ...]\n{clean_text(tail)}")
            )
            left = 0
    if total > max_chars:
        out.append(
            text_block(
                f"[the tool returned {total:,} characters of text; {max_chars:,} are shown (head and tail). "
                "Ask it for less: a filter, a page, fewer fields.]"
            )
        )
    return out


def _head(pieces: Pieces, n: int) -> str:
    """The first ``n`` characters of the pieces joined, joining no more than those."""
    out: Pieces = []
    for piece in pieces:
        if n <= 0:
            break
        out.append(piece[:n])
        n -= len(out[-1])
    return "".join(out)


def _tail(pieces: Pieces, n: int) -> str:
    """The last ``n`` characters of the pieces joined, joining no more than those."""
    out: Pieces = []
    for piece in reversed(pieces):
        if n <= 0:
            break
        out.append(piece[-n:])
        n -= len(out[-1])
    return "".join(reversed(out))


def json_head(value: Any, limit: int) -> tuple[str, bool]:
    """The first ``limit`` characters of ``value`` as JSON (as ``json.dumps`` writes it, non-ASCII unescaped)
    with its strings and keys cleaned (`clean_text`), a string that is binary data as base64 replaced by a note
    (`BASE64_RUN`), and whether there was more.

    Written without recursion, a token at a time, each string cut before it is cleaned and encoded:
    however large or deep the value, the work is bounded by ``limit``.
    """
    out: list[str] = []
    n = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and n <= limit:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        if isinstance(item, dict):
            stack.append(_dict_tokens(item))
            continue
        if isinstance(item, list):
            stack.append(_list_tokens(item))
            continue
        cut = False
        if isinstance(item, _Key):
            piece, cut = _json_string(item.text, limit - n)
            piece += "" if cut else ": "
        elif isinstance(item, _Token):
            piece = item.text
        elif isinstance(item, str):
            piece, cut = _json_string(_base64_note(item) or item, limit - n)
        else:
            piece = json.dumps(item)
        out.append(piece)
        n += len(piece)
        if cut:
            return "".join(out)[:limit], True
    return "".join(out)[:limit], n > limit


def _base64_note(text: str) -> str | None:
    """A note saying how large ``text`` is, when it is binary data as base64: its first `BASE64_RUN` characters
    (after a ``data:`` URI's header) are base64 with upper case, lower case and digits, and so are its last ones,
    padding included; else None. At most `BASE64_RUN` and 100 characters of it are looked at."""
    start, mime = 0, ""
    if text[:5].lower() == "data:":
        uri = _DATA_URI.match(text, 0, 500)
        if uri is None:
            return None
        start, mime = uri.end(), uri.group(1)
    head = start + BASE64_RUN
    if len(text) < head or _BASE64.fullmatch(text, start, head) is None:
        return None
    if _BASE64_END.fullmatch(text, max(head, len(text) - 100)) is None:
        return None
    if not all(kind.search(text, start, head) for kind in _BASE64_KINDS):
        return None
    label = f", {note_label(mime)}" if mime else ""
    return f"[base64 data ({size((len(text) - start) * 3 // 4)}{label}) left out]"


def _json_string(text: str, room: int) -> tuple[str, bool]:
    """``text`` cleaned, as a JSON string, and whether it was cut: a text longer than ``room`` characters
    has only those cleaned and is left open (no closing quote)."""
    if len(text) <= room:
        return json.dumps(clean_text(text), ensure_ascii=False), False
    return json.dumps(clean_text(text[:room]), ensure_ascii=False)[:-1], True


class _Token:
    """JSON punctuation to write as it is."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Key(_Token):
    """A key of an object, to write as a string and a colon."""

    __slots__ = ()


_END = _Token("")


def _dict_tokens(value: dict[Any, Any]) -> Iterator[Any]:
    yield _Token("{")
    for i, (key, item) in enumerate(value.items()):
        if i:
            yield _Token(", ")
        yield _Key(key if isinstance(key, str) else str(key))
        yield item
    yield _Token("}")


def _list_tokens(value: list[Any]) -> Iterator[Any]:
    yield _Token("[")
    for i, item in enumerate(value):
        if i:
            yield _Token(", ")
        yield item
    yield _Token("]")


def ledger(calls: Sequence[ToolCallRecord], omitted: int = 0, shown: str | None = None) -> str:
    """The short call ledger: one line per call, or per tool when there are many calls (at most
    `LEDGER_GROUPS` tools, those called most first); ``omitted`` calls past the listed ones are counted. An error's
    lines under its first that ``shown`` (the traceback above it) or an earlier line holds are not said again."""
    if not calls:
        return ""
    said = SaidOnce(shown)
    total = sum(c.response_bytes for c in calls)
    head = f"tool calls from the script: {len(calls) + omitted}, {size(total)} of results received in the sandbox"
    more = [f"  … {omitted} more call(s) not listed"] if omitted else []
    if len(calls) <= LEDGER_LINES:
        return "\n".join([head, *(f"  {c.line(said)}" for c in calls), *more])
    groups: dict[str, list[ToolCallRecord]] = {}
    for c in calls:
        groups.setdefault(f"{c.server}.{c.tool}", []).append(c)
    named = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    lines = [head]
    for name, group in sorted(named[:LEDGER_GROUPS]):
        failed = [c for c in group if not c.ok]
        status = "all ok" if not failed else f"{len(failed)} failed, first: {said.error(failed[0].error) or 'error'}"
        lines.append(f"  {name} ×{len(group)}: {status} ({size(sum(c.response_bytes for c in group))})")
    if rest := named[LEDGER_GROUPS:]:
        failures = sum(1 for _, group in rest for c in group if not c.ok)
        made = counted(sum(len(g) for _, g in rest), "call")
        lines.append(f"  … {counted(len(rest), 'more tool', 'more tools')}, {made} ({failures} failed)")
    return "\n".join(lines + more)


def printed_parts(stdout: str | None, stderr: str | None) -> list[str]:
    """A script's output as parts of its text: stdout, then stderr under ``[stderr]``."""
    return [*([stdout.rstrip("\n")] if stdout else []), *(["[stderr]\n" + stderr.rstrip("\n")] if stderr else [])]


def execution_blocks(result: ExecutionResult) -> list[dict[str, Any]]:
    """An execution as content blocks: one text block, then the images the script showed."""
    parts = printed_parts(result.stdout, result.stderr)
    shown = result.traceback  # the ledger does not say again what it holds
    if shown:  # a timed-out script's: where it was when its time ran out, ending "TimeoutError: timed out after …"
        parts.append("[error]\n" + shown.rstrip("\n"))
    elif result.timed_out:
        parts.append(f"[error] {result.error or 'timed out'}")
    elif result.error:
        parts.append(f"[error] {result.error}")
    if result.state_reset:
        parts.append("[the interpreter was restarted: variables and imports are gone; files remain]")
    if result.tool_calls:
        parts.append(ledger(result.tool_calls, result.tool_calls_omitted, shown))
    parts += result.image_notes
    text = "\n\n".join(parts)
    if not text.strip():  # the API refuses a text block of white space only
        text = "(the script printed nothing)" if not text else "(the script printed only white space)"
    blocks = [text_block(text)]
    blocks += [image_block(image.base64(), image.mime_type) for image in result.images]
    return blocks


def blocks_bytes(blocks: Sequence[dict[str, Any]]) -> int:
    """Bytes of content that reaches the model: UTF-8 text plus base64 image data."""
    total = 0
    for b in blocks:
        if b.get("type") == "text":
            total += len(str(b.get("text", "")).encode("utf-8"))
        elif b.get("type") == "image":
            total += len(str(b.get("source", {}).get("data", "")))
        else:
            total += len(json.dumps(b, ensure_ascii=False).encode("utf-8"))
    return total
