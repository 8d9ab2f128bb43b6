"""`ExecutionResult` and the host-side checks that build it from what the container reported.

The container's report is hostile input: every field is type-checked and capped, text is
cleaned of terminal escape sequences and control characters (invalid UTF-8 was already
replaced by the supervisor's decoder, and JSON cannot carry invalid UTF-8 past the frame
parser), images are decoded strictly and must be the image type their bytes say they are, with whole headers
(`ImageBudget`: the rules an MCP tool's images are held to as well, in direct mode and passthrough).

(Over 400 lines: the result, the cleaning of its text and the checks of its images are one boundary, read together.)
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass, field
from typing import Any

from sandbox._supervisor.image_check import check_image
from sandbox._supervisor.limits import (
    MAX_ERROR_CHARS,
    MAX_IMAGE_BYTES,
    MAX_IMAGE_SIDE,
    MAX_IMAGES,
    MAX_IMAGES_TOTAL_BYTES,
    MAX_TRACEBACK_CHARS,
    base64_size,
)
from tool_tree.text import size

_OUTPUT_PATH = re.compile(r"^/workspace/\.tooltree/outputs/\d{1,9}-[0-9a-f]{6}-std(out|err)\.txt$")

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, ...
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    # 8-bit OSC, DCS, SOS, PM and APC strings, when ended on the same line within 512 characters (before: their
    # controls went, their text stayed: "52;c;Zm9v"); not otherwise, since mis-decoded text holds these codes too.
    r"|\x9d[^\x07\x9c\x1b\n]{0,512}(?:\x07|\x9c|\x1b\\)"
    r"|[\x90\x98\x9e\x9f][^\x9c\x1b\n]{0,512}(?:\x9c|\x1b\\)"
)
_CONTROLS = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\U000e0000-\U000e007f]"
)
"""Control characters, bidi overrides, surrogates (a lone one, which ``json.loads`` lets through, makes the
request body invalid JSON to the Messages API: a 400 on every later request), and tag characters (U+E0000–U+E007F:
invisible, yet a model reads them as the ASCII they shadow, "ASCII smuggling"; `tool_tree.text.clean` drops them
too)."""

LEDGER_NAME_CHARS = 256
"""The most of a server or tool name a ledger entry shows (as long as a call's name may be)."""
LEDGER_ERROR_CHARS = MAX_ERROR_CHARS
"""The most of an error a ledger entry shows: as much as of an execution's own error, which holds whole the
longest message the bridge writes itself (a failed server's last stderr lines, at most 1,500 characters, under
its reason); only a runaway or hostile message is cut."""
_INDENT = "    "

_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}


def clean_text(text: str) -> str:
    """Strip terminal escape sequences, control characters, bidi overrides, lone surrogates and tag characters
    (tabs and newlines stay; CR ends a line)."""
    text = _ESCAPES.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def ledger_name(name: str) -> str:
    """A server or tool name as the ledger shows it: cleaned (`clean_text`), on one line (white space runs
    become one space), at most `LEDGER_NAME_CHARS` characters (the first ones, and ``…``)."""
    window = 2 * LEDGER_NAME_CHARS
    return cut(" ".join(clean_text(name[:window]).split()), LEDGER_NAME_CHARS, len(name) > window)


def ledger_error(message: Any) -> str:
    """An error as the ledger shows it: cleaned (`clean_text`), each line after the first indented by at
    least four spaces (so none passes for a line of the ledger, or of what prints it; the bridge's own
    indented lines stay as they are), at most `LEDGER_ERROR_CHARS` characters (the first ones, and ``…``).

    Only the first ``2 × LEDGER_ERROR_CHARS`` characters are looked at: a message of any size costs the
    same (this may run on the event loop every session's calls share).
    """
    text = message if isinstance(message, str) else str(message)
    window = 2 * LEDGER_ERROR_CHARS
    first, *rest = clean_text(text[:window]).rstrip().split("\n")
    lines = [first, *(line if line.startswith(_INDENT) else _INDENT + line for line in rest)]
    return cut("\n".join(lines), LEDGER_ERROR_CHARS, len(text) > window)


def cut(text: str, limit: int, longer: bool = False) -> str:
    """``text`` in at most ``limit`` characters, ending in ``…`` when cut (or when the original was ``longer``)."""
    if len(text) <= limit and not longer:
        return text
    return text[: limit - 1].rstrip() + "…"


def image_type_matches(data: bytes, mime: str) -> bool:
    """Whether ``data`` starts the way a ``mime`` image must."""
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return any(data.startswith(m) for m in _MAGIC.get(mime, ()))


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The image types a result may carry: the Messages API's."""
API_MAX_IMAGE_BASE64 = 5 * 1024 * 1024
"""The Messages API's limit per image, counted on its base64 text ("image exceeds 5 MB maximum: 6278112 bytes >
5242880 bytes"): an image of more than 3.75 MiB is refused with a 400, on that request and every later one."""
API_MAX_IMAGE_SIDE = MAX_IMAGE_SIDE
"""The most pixels on either side of an image the Messages API takes (`sandbox._supervisor.limits.MAX_IMAGE_SIDE`)."""


def image_size(data: bytes, mime: str) -> tuple[int, int] | None:
    """The width and height a PNG, GIF, WebP or JPEG header states; None when it cannot be read."""
    try:
        if mime == "image/png" and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return int(width), int(height)
        if mime == "image/gif":
            width, height = struct.unpack("<HH", data[6:10])
            return int(width), int(height)
        if mime == "image/webp":
            return _webp_size(data)
        if mime == "image/jpeg":
            return _jpeg_size(data)
    except struct.error:  # a header cut short
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        (bits,) = struct.unpack("<I", data[21:25])
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """The size in the first start-of-frame marker, found by walking the segments (each jump at least 2 bytes)."""
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        i += 2 + max(length, 2)
    return None


def note_label(value: Any, limit: int = 60) -> str:
    """A value a server or script sent, as a note names it: a string cleaned (`clean_text`), on one line, at
    most ``limit`` characters (only twice as many are looked at); anything else by its type."""
    if not isinstance(value, str):
        return "none" if value is None else type(value).__name__
    return cut(" ".join(clean_text(value[: 2 * limit]).split()), limit, len(value) > 2 * limit)


class ImageBudget:
    """The images of one result, held to an execution's limits (`sandbox._supervisor.limits`), wherever they
    come from (a script's ``show_image``, an MCP tool's result in direct mode or through passthrough).

    The first `MAX_IMAGES` images are looked at. Each must be strict base64 (``validate=True``) of at most
    `API_MAX_IMAGE_BASE64` characters (the Messages API's limit per image), of a type in `IMAGE_TYPES`, whose
    bytes start as one of those types' must (that type's, or another's: the image is then of the type its bytes
    say, as the API refuses one whose bytes are not its stated type) and hold its whole headers
    (`sandbox._supervisor.image_check`: the API refuses a corrupt image, "Could not process image", on every later
    request too), at most `API_MAX_IMAGE_SIDE` pixels a side; all of a result's together at most
    `MAX_IMAGES_TOTAL_BYTES`, charged before decoding
    (so a result decodes at most that much, valid or not). Other binary data (audio, a resource's blob) is
    charged to the same total (`take_binary`). What is refused comes back as a one-line note saying why;
    images past the first `MAX_IMAGES` are only counted (`past`, for one note saying how many).
    """

    def __init__(self) -> None:
        self.images = 0
        self.past = 0
        self.bytes = 0

    def take(self, data: Any, mime: Any) -> ShownImage | str | None:
        """The image (its bytes, and its type as they say it), a note saying why it was left out, or None past the
        first `MAX_IMAGES` (counted)."""
        if self.images >= MAX_IMAGES:
            self.past += 1
            return None
        self.images += 1
        if mime not in IMAGE_TYPES:
            return f"[an image of type {note_label(mime)} that is not PNG, JPEG, GIF or WebP was left out]"
        limit = min(API_MAX_IMAGE_BASE64, base64_size(MAX_IMAGE_BYTES))
        if isinstance(data, str) and len(data) > limit:
            return (
                f"[an image of {size(len(data) * 3 // 4)} ({size(len(data))} as base64) was left out: the API takes "
                f"at most {size(limit)} of base64 ({size(limit * 3 // 4)} of image); show it smaller (fewer pixels, "
                "or as JPEG)]"
            )
        raw = self._decode(data, "an image")
        if isinstance(raw, str):
            return raw
        if not image_type_matches(raw, str(mime)):
            actual = next((kind for kind in IMAGE_TYPES if image_type_matches(raw, kind)), None)
            if actual is None:
                return f"[an image whose bytes are not {mime} was left out]" if raw else "[an empty image was left out]"
            # Labelled as another type the API takes (a server that calls every image image/png): read as what its
            # bytes are, as show_image reads them. Before: a whole picture was left out for its label.
            mime = actual
        problem, dims = check_image(raw, str(mime))
        if problem is not None:
            return f"[an image was left out: {problem}]"
        if dims is not None and max(dims) > API_MAX_IMAGE_SIDE:
            return (
                f"[an image of {dims[0]:,}×{dims[1]:,} pixels was left out: the API takes at most "
                f"{API_MAX_IMAGE_SIDE:,} on a side; show it smaller]"
            )
        return ShownImage(raw, str(mime))

    def take_binary(self, data: Any, what: str) -> bytes | str:
        """Other binary data (``what``: "audio", "a binary resource"): its bytes, or a note saying why it was
        left out."""
        return self._decode(data, what)

    def _decode(self, data: Any, what: str) -> bytes | str:
        if not isinstance(data, str):
            return f"[{what} without base64 data was left out]"
        charged = len(data) * 3 // 4 - data[-2:].count("=")  # exact for valid base64
        if self.bytes + charged > MAX_IMAGES_TOTAL_BYTES:
            return (
                f"[{what} of {size(charged)} was left out: the images and binary data of one result "
                f"take at most {size(MAX_IMAGES_TOTAL_BYTES)}]"
            )
        self.bytes += charged
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return f"[{what} whose data is not valid base64 was left out]"


@dataclass(frozen=True)
class ShownImage:
    """An image the script passed to ``show_image``, or one of a tool's result, as `ImageBudget` took it."""

    data: bytes
    mime_type: str

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")


class SaidOnce:
    """The lines under the first of a ledger's errors (a failed server's last stderr lines, which the bridge
    writes under its message), said once in what shows the ledger: a call whose error's further lines the
    traceback printed above the ledger (``shown``) or an earlier line of it already holds gives its first line
    and ``[as above]``. Before: a script that let a failed server's ``ToolCallError`` go showed the server's stderr
    twice, in the traceback and the ledger, and once more for each other call of it listed (a restart that failed
    the same way). The work is bounded by the caps: an error is at most `LEDGER_ERROR_CHARS`, ``shown`` a
    traceback (at most ``MAX_TRACEBACK_CHARS``), and a ledger lists a bounded number of lines."""

    AS_ABOVE = "[as above]"

    def __init__(self, shown: str | None = None) -> None:
        self._shown = f"\n{shown.rstrip()}\n" if shown else ""
        self._said: set[str] = set()

    def error(self, error: str | None) -> str | None:
        """``error`` as the next line of the ledger gives it."""
        first, _, rest = (error or "").partition("\n")
        if len(rest) <= len(self.AS_ABOVE):
            return error
        if rest in self._said or f"\n{rest}\n" in self._shown:
            return f"{first} {self.AS_ABOVE}"
        self._said.add(rest)
        return error


@dataclass(frozen=True)
class ToolCallRecord:
    """One line of the tool-call ledger, as the host saw the call (`sandbox.calls` cleans the names and
    error a script gave, with `ledger_name` and `ledger_error`)."""

    server: str
    tool: str
    ok: bool
    request_bytes: int
    response_bytes: int
    duration_ms: float
    error: str | None = None

    def line(self, said: SaidOnce | None = None) -> str:
        """The call on one line (its error's further lines under it); ``said``: those not said again."""
        error = said.error(self.error) if said is not None else self.error
        status = "ok" if self.ok else f"error: {error or 'failed'}"
        return f"{self.server}.{self.tool} {status} ({self.response_bytes} B, {self.duration_ms:.0f} ms)"

    def to_json(self) -> dict[str, Any]:
        """The call as `tooltree exec --json` lists it (``ms``: its duration) and the agent's transcript too."""
        return {
            "server": self.server,
            "tool": self.tool,
            "ok": self.ok,
            "request_bytes": self.request_bytes,
            "response_bytes": self.response_bytes,
            "ms": self.duration_ms,
            "error": self.error,
        }


@dataclass(frozen=True)
class ExecutionResult:
    """What one execution produced. Failures of the script are data here, not exceptions.

    Attributes:
        stdout: captured standard output, cleaned; when longer than the cap, a head and a
            tail around a marker naming the workspace file with everything.
        stderr: the same for standard error.
        exit_status: 0 on success, 1 for an uncaught exception, the ``sys.exit`` code as given (``256``, though a
            process would end with status 0, its low 8 bits; a negative one too, its ``error`` then
            ``SystemExit: -1``), or the negated signal number when the run was killed (timeout: -9).
        duration: seconds, measured on the host.
        error: what ended the script (``"KeyError: 'x'"``, ``"timed out after 30 s"``) or None; an exception's
            message whole, every line of it (``"ValueError: a\\nb"`` for ``raise ValueError("a\\nb")``).
        traceback: the traceback trimmed to the user's own frames, or None.
        timed_out: the wall-clock limit killed the run.
        state_reset: the interpreter was restarted (timeout or crash): variables and imports are gone.
        cancelled: `Sandbox.cancel` stopped the run (or `Sandbox.close`, from another thread: ``error`` says so).
        images: images shown with ``show_image``.
        image_notes: one line for each image shown that the Messages API would refuse (and was left out).
        tool_calls: the ledger of tool calls the script made (the first `sandbox.calls.MAX_LEDGER`).
        tool_calls_omitted: calls made past those, counted only.
        stdout_path / stderr_path: the workspace file holding the whole output, when truncated.
    """

    stdout: str
    stderr: str
    exit_status: int
    duration: float
    error: str | None = None
    traceback: str | None = None
    timed_out: bool = False
    state_reset: bool = False
    cancelled: bool = False
    images: list[ShownImage] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    tool_calls_omitted: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    stdout_path: str | None = None
    stderr_path: str | None = None
    image_notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The script ran to the end without an error."""
        return self.exit_status == 0 and not self.timed_out and self.error is None

    def ledger(self) -> str:
        """The tool-call ledger, one call per line."""
        more = [f"… {self.tool_calls_omitted} more call(s) not listed"] if self.tool_calls_omitted else []
        return "\n".join([*(c.line() for c in self.tool_calls), *more])


def _str(value: Any, cap: int) -> str | None:
    return clean_text(value[:cap]) if isinstance(value, str) else None


MAX_COUNT = (1 << 63) - 1
"""The largest count of bytes or files a report may give (a file's size, ``off_t``, is at most this)."""


def reported_count(value: Any) -> int | None:
    """A count the container reported (bytes, files): a whole number from 0 to `MAX_COUNT`, else None. Before, any
    JSON integer was taken, up to 4,300 digits: a hostile report's ``outputs.budget`` of 10**400 raised
    ``OverflowError`` (its MiB, a float) out of `parse_execution`, and so out of ``Sandbox.execute``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else None


def preview(stream: Any, limit: int, name: str, outputs: Any = None, lost: str = "") -> tuple[str, bool, str | None]:
    """A stream, whole or its head and tail around a note of where it is saved (``outputs``) or why not (``lost``),
    one blank line either side of the note: a head that ends a line, or a tail that starts one, is not given a second
    (before: a script printing 200,000 lines showed two blank lines above the note)."""
    if not isinstance(stream, dict):
        return "", False, None
    half = limit // 2 + 1
    head = _str(stream.get("head"), limit) or ""
    if stream.get("truncated") is not True:
        return head, False, None
    head = head[:half]
    tail = _str(stream.get("tail"), half) or ""
    path = stream.get("path") if isinstance(stream.get("path"), str) and _OUTPUT_PATH.match(stream["path"]) else None
    total, saved = reported_count(stream.get("bytes")), reported_count(stream.get("saved"))
    if path and saved is not None and total is not None and saved < total:
        # Before: "the whole stdout is in …" of a file cut at what saved outputs may take.
        where = f"its first {saved:,} bytes are in {path} (a saved output holds at most that)"
    else:
        where = f"the whole {name} is in {path}" if path else lost or "the rest could not be saved"
    size = f": {total:,} bytes in all" if total is not None else ""
    kept = ""
    if isinstance(outputs, dict) and (budget := reported_count(outputs.get("budget"))) is not None and budget > 0:
        dropped = reported_count(outputs.get("dropped")) or 0
        gone = f" ({dropped:,} older one{'s' if dropped != 1 else ''} deleted)" if dropped > 0 else ""
        kept = f"; saved outputs keep the newest {_amount(budget)}{gone}"
    head, tail = head.removesuffix("\n"), tail.removeprefix("\n")
    return f"{head}\n\n[... {name} cut{size}{kept}; {where} ...]\n\n{tail}", True, path


def _amount(n: int) -> str:
    """Bytes as MiB, or KiB under one MiB (before: "0 MiB" for a folder that keeps 256 KiB)."""
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n / (1 << 10):,.0f} KiB"


def _images(raw: Any) -> tuple[list[ShownImage], list[str]]:
    """The images a report carries that the API takes, and a note for each of the others (none is dropped
    unsaid: the script saw ``show_image`` succeed)."""
    images: list[ShownImage] = []
    notes: list[str] = []
    budget = ImageBudget()
    for item in raw[:MAX_IMAGES] if isinstance(raw, list) else []:
        data = (
            budget.take(item.get("data"), item.get("mime"))
            if isinstance(item, dict)
            else "[a malformed shown image was left out]"
        )
        if isinstance(data, ShownImage):
            images.append(data)
        elif isinstance(data, str):
            notes.append(data.replace("[an image", "[a shown image", 1))
    return images, notes


def parse_execution(
    raw: dict[str, Any],
    *,
    max_chars: int,
    duration: float,
    tool_calls: list[ToolCallRecord],
    tool_calls_omitted: int = 0,
) -> ExecutionResult:
    """Build a result from the supervisor's (untrusted) report."""
    stdout, out_cut, out_path = preview(raw.get("stdout"), max_chars, "stdout", raw.get("outputs"))
    stderr, err_cut, err_path = preview(raw.get("stderr"), max_chars, "stderr", raw.get("outputs"))
    status = raw.get("exit_status")
    # A script's `sys.exit` code as given, within what Python's own exit takes (a C long); before, past ±255 it
    # became 1: `raise SystemExit(256)` was said as "exited 1".
    exit_status = status if isinstance(status, int) and not isinstance(status, bool) and abs(status) < 1 << 63 else 1
    timed_out = raw.get("timed_out") is True
    error = _str(raw.get("error"), MAX_ERROR_CHARS)
    if exit_status != 0 and error is None:
        error = f"exit status {exit_status}"
    images, image_notes = _images(raw.get("images"))
    return ExecutionResult(
        stdout=stdout,
        stderr=stderr,
        exit_status=exit_status,
        duration=duration,
        error=error,
        traceback=_str(raw.get("traceback"), MAX_TRACEBACK_CHARS),
        timed_out=timed_out,
        state_reset=raw.get("state_reset") is True,
        cancelled=raw.get("cancelled") is True,
        images=images,
        image_notes=image_notes,
        tool_calls=tool_calls,
        tool_calls_omitted=tool_calls_omitted,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
        stdout_path=out_path,
        stderr_path=err_path,
    )
