"""What one message may carry, sized so that the limits compose: every honest message fits one frame.

The largest message the supervisor sends is an execution's result. Its worst case, with every
limit reached at once (each character of text escaped as ``\\uXXXX``, 6 bytes)::

    images       MAX_IMAGES_TOTAL_BYTES raw (8 MiB) as base64    11,184,812 bytes
                 + MAX_IMAGES × the JSON around each one              1,024
    stdout       MAX_OUTPUT_CHARS × 6 (head and tail together)    1,200,000
    stderr       the same                                          1,200,000
    error        MAX_ERROR_CHARS × 6                                  12,000
    traceback    MAX_TRACEBACK_CHARS × 6                             120,000
    the rest     status, paths, sizes                                  4,096
                                                                  ----------
                                                                  13,721,932  ≤  MAX_FRAME_BYTES (16,777,216)

`largest_execute_result` computes it and a test keeps it under the cap. The other large
messages fit on their own: a file read from the workspace is at most `MAX_READ_BYTES` (base64
11,184,812 bytes), and a tool call's arguments travel in one frame or are refused in the
container with a clear error before they leave it.

Values compose the same way against the wire's `MAX_FRAME_VALUES` (150,000): a tool call whose
arguments hold `MAX_CALL_VALUES` (100,000) is 7 more in its frame; a directory listing is at most
`MAX_LIST_ENTRIES` entries of four values (131,076 in its frame); a workspace batch at most
``transfer.BATCH_ITEMS`` (16,384) items of at most five (81,924); an execution result a few dozen.
A test builds each of them at its largest and counts it.

Standard library only, and the stub runtime the image holds beside it (`tool_tree.runtime`): this runs in the
container; the host imports the same module.
"""

from __future__ import annotations

import re
import signal

from tool_tree.runtime._sendable import MAX_INT_DIGITS as MAX_INT_DIGITS
from tool_tree.runtime._sendable import first_refused

MAX_IMAGES = 8
"""Images one execution may show."""
MAX_IMAGE_BYTES = 5 * 1024 * 1024 * 3 // 4
"""The largest single image: the Messages API takes at most 5 MiB of base64 per image (3.75 MiB of image), so
``show_image`` refuses a bigger one where the script can still act on it."""
MAX_IMAGE_SIDE = 8000
"""The most pixels on either side of an image the Messages API takes (2000 once a request holds more than 20
images): ``show_image`` refuses a wider or taller one where the script can still act on it, and the host leaves one
out (`sandbox.results.ImageBudget`)."""
MAX_IMAGES_TOTAL_BYTES = 8 * 1024 * 1024
"""All images of one execution together."""
MAX_OUTPUT_CHARS = 200_000
"""Characters of stdout (and of stderr) a result carries, whatever ``max_chars`` the host asks for."""
MAX_ERROR_CHARS = 2_000
"""Characters of the one-line error of a result."""
MAX_TRACEBACK_CHARS = 20_000
"""Characters of the traceback of a result: a longer one keeps its start and its end (`cut_middle`), and is saved
whole with the cut outputs, as far as they may hold it (its line says where: `say_where_whole`)."""
TRACEBACK_PART_CHARS = 1 << 20
"""Characters of a longer traceback the worker sends its supervisor in one message, to be saved (at most 6 MiB
escaped: a frame holds it)."""
MAX_READ_BYTES = 8 * 1024 * 1024
"""The most bytes of one workspace file a read returns."""
MAX_CALL_VALUES = 100_000
"""Values one tool call's arguments may hold (the host counts them as parsed: `sandbox.call_limits`)."""
MAX_CALL_DEPTH = 20
"""Levels one tool call's arguments may nest (the host counts them as parsed: `sandbox.call_limits`); a call nested
past what a frame may hold is refused in the container in the same words (`too_deep`)."""
MAX_CALLS_IN_FLIGHT = 64
"""Tool calls and searches of one session in flight at once: the host refuses more (`sandbox.calls`), so the
worker holds a call past them until one returns."""
MAX_LIST_ENTRIES = 32_768
"""Entries one directory listing returns."""

_PER_IMAGE_JSON = 128
_REST = 4096
_ESCAPED_CHAR = 6


_MARKER_CHARS = 80
"""Room `cut_middle` leaves for its line (a count of up to 15 digits and a ``what`` of up to 20 characters)."""


def cut_middle(text: str, limit: int, what: str = "traceback") -> str:
    """``text`` whole when it has at most ``limit`` characters, else its start (two fifths) and its end around a line
    saying how many characters of the ``what`` were cut: at most ``limit`` characters either way.

    A traceback's start names the frames and the error's type and message, its end where the error was raised (the
    last frames, or the message's end). Before, a traceback kept its end alone: an error whose message was long (a
    list of 1,000 rows, a validation error of each field) came back as the message's last 20,000 characters, with no
    error type, no file, no line and no word that anything was cut.
    """
    if len(text) <= limit:
        return text
    head = text[: limit * 2 // 5]
    tail = text[len(text) - (limit - len(head) - _MARKER_CHARS) :]
    return head + _marker(len(text) - len(head) - len(tail), what) + tail


def _marker(cut: int, what: str, where: str = "") -> str:
    return f"\n[… {cut:,} characters of the {what} cut{where} …]\n"


_CUT = re.compile(r"\n\[… ([\d,]{1,24}) characters of the ([a-z ]{1,20}) cut …\]\n")


def say_where_whole(text: str, limit: int, where: str) -> str:
    """``text`` as `cut_middle` cut it to ``limit``, its line saying ``where`` the whole is (``; the whole traceback
    is in …``): its end shorter by as much, so it still has at most ``limit`` characters. ``text`` unchanged when
    `cut_middle` did not cut it."""
    found = _CUT.match(text, limit * 2 // 5)
    if found is None:
        return text
    cut, what, tail = int(found[1].replace(",", "")), found[2], text[found.end() :]
    more = 0
    while True:  # the count of the characters cut grows with the line: as long as its digits change
        marker = _marker(cut + more, what, where)
        if len(marker) - len(found[0]) == more:
            return text[: found.start()] + marker + tail[more:]
        more = len(marker) - len(found[0])


def base64_size(raw: int) -> int:
    """The length of ``raw`` bytes in base64."""
    return 4 * ((raw + 2) // 3)


def too_many_values(limit: int = MAX_CALL_VALUES) -> str:
    """What a script is told when a call's arguments hold more than ``limit`` values."""
    return (
        f"the arguments hold more than {limit:,} values; send less per call "
        "(split the data over several calls, or write it to a file a tool can read)"
    )


def refused_argument(arguments: object, limit: int = MAX_CALL_DEPTH) -> str | None:
    """What a script is told when a call's arguments (``arguments``) nest deeper than ``limit`` levels, hold a whole
    number of more than `MAX_INT_DIGITS` digits, or a float that is NaN or infinite, naming the argument and where in
    it: the rule the host's check of what a server reads follows too (`tool_tree.runtime._sendable.first_refused`);
    None when they hold none of these.

    Said in the container before a call is sent (a float JSON cannot carry; a number a script that raised its
    interpreter's limit wrote, which the supervisor could not read: the interpreter was restarted, its variables
    lost), and on the host as it measures a call (`sandbox.call_limits`)."""
    if not isinstance(arguments, dict):
        return None
    refused = first_refused(arguments, limit)
    if refused is None:
        return None
    name, where = refused.name, "" if refused.path == refused.name else f" (at {refused.path})"
    if refused.too_deep:
        return f"{too_deep(limit)}: argument {name!r}{where}"
    if isinstance(refused.value, int):
        return (
            f"argument {name!r}{where} holds a whole number of more than {MAX_INT_DIGITS:,} digits, more than a JSON "
            "parser reads (the host's, a server's); send it as a string"
        )
    return f"argument {name!r}{where} holds {refused.value!r}, which JSON cannot carry; send it as a string or None"


def too_deep(limit: int = MAX_CALL_DEPTH) -> str:
    """What a script is told when a call's arguments nest deeper than ``limit`` levels (`refused_argument` names the
    argument after it)."""
    return f"the arguments nest deeper than {limit} levels"


def largest_execute_result() -> int:
    """The encoded size, in bytes, of the largest execution result the supervisor can send."""
    images = base64_size(MAX_IMAGES_TOTAL_BYTES) + MAX_IMAGES * _PER_IMAGE_JSON
    text = (2 * MAX_OUTPUT_CHARS + MAX_ERROR_CHARS + MAX_TRACEBACK_CHARS) * _ESCAPED_CHAR
    return images + text + _REST


WHERE_SIGNAL = signal.SIGUSR2
"""The signal by which the supervisor asks the worker where its running cell is, as the cell's time runs out: the
worker answers with a ``where`` message ({exec, traceback}) and runs on until it is killed."""
WHERE_WAIT = 0.5
"""Seconds a timed-out cell's interpreter is given to say where the cell is before it is killed: the most a time
limit is exceeded by for it."""
