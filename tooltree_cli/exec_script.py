"""`tooltree exec`'s script: the code to run and its name, read from a file, standard input or -c and checked before
any sandbox starts (readable, UTF-8 or the encoding it declares, small enough to send in one execution); what is
wrong with it is a usage error.
"""

from __future__ import annotations

import argparse
import codecs
import json
import re
import sys
from pathlib import Path
from typing import BinaryIO

from tool_tree.text import size


class _UsageError(Exception):
    """A mistake in what the command was given; ``str()`` is the line to print."""


_ENVELOPE_BYTES = 1024
"""What the execute request adds to the script's text on the wire (method, id, limits)."""


def _read_code(args: argparse.Namespace) -> tuple[str, str | None]:
    """The code to run and its name, checked before any sandbox starts: readable, UTF-8 (a file or standard input: or
    the encoding it declares), small enough to send.

    The name is what its traceback calls it: the script's path as given, ``<string>`` for -c and
    ``<stdin>`` for ``-`` (as ``python`` does); None for a path that is not UTF-8 (the sandbox then
    says ``<cell-N>``).

    Raises:
        _UsageError: neither or both of SCRIPT and -c, a script that cannot be read, is not UTF-8 (nor text of the
            encoding it declares) or is too big.
    """
    from sandbox._supervisor.wire import MAX_FRAME_BYTES

    if (args.code is None) == (args.script is None):
        raise _UsageError("give a SCRIPT or -c CODE (one of them)")
    filename: str | None
    if args.code is not None:
        name, code, filename = "-c CODE", str(args.code), "<string>"
    elif args.script == "-":
        name, filename = "standard input", "<stdin>"
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            code = sys.stdin.read(MAX_FRAME_BYTES + 1)
            if len(code) > MAX_FRAME_BYTES:
                raise _UsageError(_too_big(name, None, MAX_FRAME_BYTES))
        else:
            code = _decoded(_read_capped(stream, name, MAX_FRAME_BYTES), name)
    else:
        name, path = args.script, Path(args.script)
        filename = name if _is_utf8(name) else None
        try:
            if path.is_dir():
                raise _UsageError(f"{name}: is a folder, not a script")
            if path.stat().st_size > MAX_FRAME_BYTES:  # refused unread: it could be gigabytes
                raise _UsageError(_too_big(name, path.stat().st_size, MAX_FRAME_BYTES))
            with path.open("rb") as file:  # a pipe or a device (/dev/zero) says 0 bytes: read no more than is taken
                data = _read_capped(file, name, MAX_FRAME_BYTES)
        except FileNotFoundError:
            raise _UsageError(f"{name}: no such file") from None
        except OSError as e:
            raise _UsageError(f"{name}: cannot read: {e.strerror or e}") from None
        code = _decoded(data, name)
    try:
        wire = len(json.dumps([code, filename], ensure_ascii=False).encode("utf-8")) + _ENVELOPE_BYTES
    except UnicodeEncodeError:  # -c with bytes that are not UTF-8 (kept by Python as lone surrogates)
        raise _UsageError(f"{name}: not UTF-8 text") from None
    if wire > MAX_FRAME_BYTES:
        raise _UsageError(_too_big(name, wire, MAX_FRAME_BYTES))
    return code, filename


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, kept by Python as lone surrogates
        return False
    return True


_BOM = b"\xef\xbb\xbf"
_COOKIE = re.compile(rb"[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
"""An encoding declaration (PEP 263), as Python finds one at the start of a script's line."""
_BLANK = re.compile(rb"[ \t\f]*(?:[#\r]|$)")
"""A line, blank or a comment, after which Python looks for the declaration on the next line too."""


def _declared(data: bytes) -> str | None:
    """The encoding ``data`` declares (PEP 263: on its first line, or on its second after a blank or comment line),
    or None."""
    first, second = [*data.split(b"\n", 2)[:2], b""][:2]
    if match := _COOKIE.match(first) or (_BLANK.match(first) and _COOKIE.match(second)):
        return match.group(1).decode("ascii")
    return None


def _normal_name(declared: str) -> str:
    """``declared`` as Python's tokenizer takes it before it looks the codec up (its ``get_normal_name``): a UTF-8 or
    Latin-1 of Emacs's names (``utf-8-unix``, ``latin-1-dos``, ``iso-latin-1``) is that encoding."""
    name = declared[:12].lower().replace("_", "-")
    if name == "utf-8" or name.startswith("utf-8-"):
        return "utf-8"
    latin = ("latin-1", "iso-8859-1", "iso-latin-1")
    if name in latin or name.startswith(tuple(f"{x}-" for x in latin)):
        return "iso-8859-1"
    return declared


def _keeps_ascii(encoding: str, declared: str) -> bool:
    """Whether ``encoding`` reads the ASCII text of a declaration of it (``# -*- coding: NAME -*-``) as itself: Python
    finds the declaration by reading the script's first lines as ASCII, so a script can be in no encoding that does not
    (UTF-16 and UTF-32, EBCDIC's cp037 and cp500); UTF-7 and the ISO-2022 encodings, which do, are read as python
    reads them."""
    declaration = f"# -*- coding: {declared} -*-\n"
    try:
        return declaration.encode("ascii").decode(encoding) == declaration
    except UnicodeDecodeError:  # UTF-32: the declaration is no whole number of its 4-byte characters
        return False
    except (LookupError, UnicodeError):  # no text encoding (rot13, undefined): said when the script is decoded
        return True


def _decoded(data: bytes, name: str) -> str:
    """A script's text, read as Python reads a file it runs: in the encoding it declares (``# -*- coding: latin-1
    -*-``; before: refused, "not UTF-8 text", though ``python`` runs it), else UTF-8, a byte order mark (some Windows
    editors write one) dropped (before: "SyntaxError: invalid non-printable character U+FEFF")."""
    marked = data.startswith(_BOM)
    data = data.removeprefix(_BOM)
    encoding, said = "utf-8", "UTF-8 text"
    if (declared := _declared(data)) is not None:
        try:
            # Before: an Emacs-style name refused, "an encoding Python does not know: 'utf-8-unix'".
            encoding = codecs.lookup(_normal_name(declared)).name
        except LookupError:
            raise _UsageError(f"{name}: declares an encoding Python does not know: {declared!r}") from None
        if marked and encoding != "utf-8":
            raise _UsageError(f"{name}: starts with UTF-8's byte order mark but declares {declared!r}")
        if not _keeps_ascii(encoding, declared):
            # Before: a script declaring UTF-16 (or EBCDIC's cp037) was read into other characters than its own and
            # sent, to fail oddly in the sandbox; python refuses it ("SyntaxError: encoding problem: utf-16"), or runs
            # nothing of it (utf-16-le, cp037).
            raise _UsageError(
                f"{name}: declares {declared!r}, which Python does not read a script in (it reads the ASCII of the "
                "declaration as other characters: save the script as UTF-8)"
            )
        said = "UTF-8 text" if encoding == "utf-8" else f"{declared} text, as it declares"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line, column = data.count(b"\n", 0, e.start) + 1, e.start - data.rfind(b"\n", 0, e.start)
        raise _UsageError(
            f"{name}: not {said}: byte 0x{data[e.start]:02x} at line {line}, column {column} (save it as UTF-8)"
        ) from None
    except (LookupError, UnicodeError) as e:  # a codec of bytes (rot13, zlib), or one that fails whole (undefined)
        # Before: exit 70, "LookupError: 'rot-13' is not a text encoding" as if tooltree had a bug; python refuses
        # the script too ("SyntaxError: encoding problem: rot13").
        raise _UsageError(f"{name}: declares {declared!r}, which Python does not read a script in ({e})") from None


def _read_capped(stream: BinaryIO, name: str, limit: int) -> bytes:
    """What ``stream`` holds, read only as far as ``limit`` (and a byte order mark) needs: before, standard input or
    a device was read whole before its size was looked at (``tooltree exec /dev/zero`` took the host's memory).

    Raises:
        _UsageError: the stream holds more.
    """
    data = stream.read(limit + 4)
    if len(data.removeprefix(_BOM)) > limit:
        raise _UsageError(_too_big(name, None, limit))
    return data


def _too_big(name: str, length: int | None, limit: int) -> str:
    """The line refusing a script of ``length`` bytes (None: not known, more than ``limit`` was read)."""
    what = f"{size(length)} is more" if length is not None else "it holds more"
    return (
        f"{name}: {what} than the sandbox takes in one execution ({size(limit)}); put the data "
        "in a file in --workspace and read it from the script"
    )


_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([A-Za-z_][A-Za-z0-9_]*)")


def left_behind(args: argparse.Namespace, error: str | None) -> str | None:
    """What to say when the script failed to import a module that is beside it on this machine (a file or package
    next to SCRIPT; in the current folder for -c and standard input): only the script's text goes into the sandbox,
    so ``import helpers`` of the ``helpers.py`` beside it failed with a bare ModuleNotFoundError; None otherwise."""
    match = _NO_MODULE.search(error or "")
    if match is None:
        return None
    module = match.group(1)
    folder = Path(args.script).parent if args.script not in (None, "-") else Path.cwd()
    try:
        found = next((p for p in (folder / f"{module}.py", folder / module) if p.exists()), None)
    except OSError:
        return None
    if found is None:
        return None
    return (
        f"{found} is beside the script on this machine, not in the sandbox, which gets the script's text alone: put "
        "what it imports in a --workspace folder (/workspace in the sandbox, on its import path)"
    )
