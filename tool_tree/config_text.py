"""A configuration file's text: read within its format's bounds, and JSON made ready for the YAML reader.

`read_text` reads a file, refusing one larger than its format may be (`MAX_CONFIG_BYTES` for YAML,
`MAX_JSON_CONFIG_BYTES` for JSON) or not UTF-8, before it costs much. `as_yaml` escapes what YAML reads otherwise
than JSON does, keeping every line where it was, so `tool_tree.config_read` reads JSON with its lines;
`is_tooltree_json` tells tooltree's own settings written as JSON from another client's file. Import the bounds
from `tool_tree.config`.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from tool_tree.config_json import top_level_keys
from tool_tree.config_read import ConfigError
from tool_tree.config_sections import SECTIONS

MAX_CONFIG_BYTES = 2 * 1024 * 1024
"""The largest YAML configuration file read, and the largest ``mcpServers`` value of a JSON one, checked before
they are parsed. A config of 10,000 servers, each with its args and env, is about 1.1 MiB (the 70 servers of
LiveMCPBench's catalog: 9 KB, 127 bytes a server); the YAML reader, in pure Python to keep every value's line,
takes about 2 s a MiB of such text (before: a 10 MB file took 31 s and 870 MB before the value cap refused it)."""
MAX_JSON_CONFIG_BYTES = 128 * 1024 * 1024
"""The largest JSON configuration file read, checked before it is read: a ``~/.claude.json`` grows with Claude
Code's history to 8–100 MB. Only its ``mcpServers`` value goes through the YAML reader (`MAX_CONFIG_BYTES` and
the other bounds apply to it); the rest is checked to be JSON by the json module's C scanner and let go
(`tool_tree.config_json`). The cost is reading the file and holding its text: a 50 MB one takes 0.2–0.3 s and
107 MB at peak when ASCII, 153 MB with some CJK, 247 MB with one emoji (Python then keeps 4 bytes a
character); one at this limit, about 2.5 times that."""


def over_the_limit(size: str, what: str = "a configuration") -> str:
    limit = MAX_CONFIG_BYTES // 2**20
    return f"too large: {size}, over the {limit} MiB {what} may have (10,000 servers take about 1.1 MiB)"


def over_the_json_limit(size: str, source: str) -> str:
    return (
        f"too large: {size}, over the {MAX_JSON_CONFIG_BYTES // 2**20} MiB a JSON configuration may have (and "
        f"{MAX_CONFIG_BYTES // 2**20} MiB its mcpServers); to keep its servers alone: "
        f"jq '{{mcpServers}}' {shlex.quote(source)} > .mcp.json"
    )


_BYTE_ORDER_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32 text (byte order mark FF FE 00 00)"),
    (b"\x00\x00\xfe\xff", "UTF-32 text (byte order mark 00 00 FE FF)"),
    (b"\xff\xfe", "UTF-16 text (byte order mark FF FE, as Windows PowerShell's `>` writes)"),
    (b"\xfe\xff", "UTF-16 text (byte order mark FE FF)"),
)


def _wide_encoding(data: bytes) -> str | None:
    """What ``data`` is when it is UTF-16 or UTF-32 text, by its byte order mark or, without one, by the NUL bytes
    beside each ASCII character of its start (which UTF-8 reads as NUL characters); else None."""
    for mark, what in _BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return what
    head = data[:64]
    if len(head) >= 4 and b"\x00" in head and (not any(head[1::2]) or not any(head[0::2])):
        return "UTF-16 text (a NUL byte beside each character)"
    return None


def read_text(p: Path) -> str:
    """The text of the file ``p``, read only when within the limits (its bytes are let go on return).

    Raises:
        ConfigError: the file cannot be read, is larger than its format may be, or is not UTF-8. Of a file that is
            missing or a folder, the ``OSError`` is its ``__cause__``: the message names no option (before: "create
            one, or pass --config PATH" from Python too); the CLI adds what to do.
    """
    try:
        if (size := p.stat().st_size) > MAX_JSON_CONFIG_BYTES:  # refused before it is opened
            raise ConfigError(over_the_json_limit(f"{size:,} bytes", str(p)), file=str(p))
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size  # 0 for a pipe; checked again: it may have grown
            if size > MAX_JSON_CONFIG_BYTES:
                raise ConfigError(over_the_json_limit(f"{size:,} bytes", str(p)), file=str(p))
            data = f.read(MAX_CONFIG_BYTES + 1)  # no more unless it is JSON: a YAML file past it is refused
            is_json = re.match(rb"[ \t\r\n]*\{", data) is not None
            if len(data) > MAX_CONFIG_BYTES and is_json:
                data += f.read(MAX_JSON_CONFIG_BYTES + 1 - len(data))
    except FileNotFoundError as e:  # the cause stays: the CLI says what to do from it (`tooltree_cli.common.load`)
        if p.is_symlink():  # a link to a file moved away (before: "no such file", though `ls` lists it)
            raise ConfigError(f"a link to {os.readlink(p)!r}, which does not exist", file=str(p)) from e
        raise ConfigError("no such file", file=str(p)) from e
    except IsADirectoryError as e:
        raise ConfigError("is a folder, not a configuration file", file=str(p)) from e
    except OSError as e:
        raise ConfigError(f"cannot read: {e.strerror or e}", file=str(p)) from None
    limit = MAX_JSON_CONFIG_BYTES if is_json else MAX_CONFIG_BYTES
    if len(data) > limit:
        shown = f"{size:,} bytes" if size > limit else f"more than {limit:,} bytes"
        raise ConfigError(over_the_json_limit(shown, str(p)) if is_json else over_the_limit(shown), file=str(p))
    if (other := _wide_encoding(data)) is not None:  # before: "byte 0xff in column 1", or invalid JSON at column 2
        raise ConfigError(f"not UTF-8 text: {other} (save the file as UTF-8)", file=str(p), line=1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = data.count(b"\n", 0, e.start) + 1, e.start - data.rfind(b"\n", 0, e.start)
        raise ConfigError(
            f"not UTF-8 text: byte 0x{data[e.start]:02x} in column {column} (save the file as UTF-8)",
            file=str(p),
            line=line,
        ) from None


def empty_json(source: str, said: str = "is empty") -> ConfigError:
    """The error for a JSON file ``source`` that holds nothing (or comments alone; ``said``: what it holds instead, such
    as ``null``), in the terms of its format (before: "expected a `servers:` mapping", tooltree.yaml's, or "invalid
    JSON: Expecting value")."""
    expected = "`mcpServers`" if Path(source).name == ".mcp.json" else "`mcpServers`, `servers` or `context_servers`"
    return ConfigError(f"the file {said}; expected a JSON object with {expected}", file=source)


def is_tooltree_json(text: str) -> bool:
    """Whether the JSON ``text`` is tooltree's own configuration: ``servers`` beside a section of tooltree's
    (``sandbox``, ``agent``, …), which no other client's file has. Read as YAML (which JSON is), its sections are
    read and its keys checked; before, it was taken for VS Code's mcp.json and its sections dropped without a word.
    """
    if len(text) > MAX_CONFIG_BYTES:
        return False
    found = top_level_keys(text, ("servers", *SECTIONS))
    return "servers" in found and len(found) > 1


_SURROGATE_PAIR = re.compile(r"(\\+)u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)
_YAML_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
_YAML_UNPRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff]")
"""Characters JSON takes in a string as they are and YAML refuses anywhere (before: a ReaderError traceback)."""
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"([ \t\r\n]*+:)?')
"""A JSON string and, when it is a key, the space and colon after it (group 1)."""
_TABS = re.compile(r'"(?:[^"\\]++|\\.)*+"|\t++')
"""A JSON string, kept whole, or tabs between tokens, which JSON takes as white space and YAML refuses."""
_LONGEST_SIMPLE_KEY = 1000
"""A key longer than this, with the space before its colon, is not one YAML's flow mapping reads (1,024 at most)."""


def as_yaml(json_text: str) -> str:
    """JSON text the YAML reader reads as JSON does: a character past U+FFFF escaped as a surrogate pair (Python's
    ``json.dump`` writes an emoji so) is that character, not two lone surrogates; NEL, U+2028 and U+2029, which
    YAML takes for line breaks (a key broken, a value's NEL a space), are escaped, and so are the characters YAML
    refuses (DEL, C1 controls). A tab between tokens (a file indented with tabs, as ``json.dump(indent="\\t")``,
    Go's and many editors' write it) is a space: before, such a file was "invalid YAML: found character '\\t' that
    cannot start any token". A key that is long, or apart from its colon by a line break, is made YAML's explicit
    key (``? "key": value``): before, either was "invalid YAML: … expected ',' or '}', but got ':'" for valid JSON.
    Lines and columns stay where they were."""

    def joined(m: re.Match[str]) -> str:
        slashes = m.group(1)
        if len(slashes) % 2 == 0:  # the backslash before ``u`` is itself escaped: text, not an escape
            return m.group(0)
        pair = chr(0x10000 + ((int(m.group(2), 16) - 0xD800) << 10) + (int(m.group(3), 16) - 0xDC00))
        return slashes[:-1] + pair

    def keyed(m: re.Match[str]) -> str:
        colon = m.group(1)
        if colon is None or (len(m.group()) <= _LONGEST_SIMPLE_KEY and "\n" not in colon and "\r" not in colon):
            return m.group()
        return "? " + m.group()

    text = _SURROGATE_PAIR.sub(joined, json_text).translate(_YAML_LINE_BREAKS)
    text = _YAML_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if "\t" in text:
        text = _TABS.sub(lambda m: m.group() if m.group()[0] == '"' else " " * len(m.group()), text)
    return _JSON_STRING.sub(keyed, text)
