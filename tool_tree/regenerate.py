"""The command that regenerates a tree, for every text that says to (a tree out of date, damaged, or written by
another release): ``tooltree generate-tree --config <file> --out <tree>``, with the configuration file the tree's
manifest records (`tool_tree.tree.Manifest.config`). Before, the texts said ``tooltree generate-tree`` alone, which
reads ./tooltree.yaml and writes ./tree: a user whose configuration or tree was elsewhere regenerated another tree, from
another configuration, or got an error.

A manifest may come from elsewhere: the path it records is shown here, never run (``generate-tree``, ``exec``,
``agent`` and ``serve`` given no ``--config`` read it, when it is the user's own file:
``tooltree_cli.common.recorded_default``), and shown as one shell word (`shell_word`), its control characters
escaped, so that no newline or escape sequence of it reaches a terminal or a model's context as text of its own.
"""

from __future__ import annotations

import os
import shlex

from tool_tree.tree import Manifest, TreeError

__all__ = ["MAX_PATH_CHARS", "recorded_config", "regenerate_command", "shell_word"]

MAX_PATH_CHARS = 4096
"""The longest recorded configuration path shown (Linux's PATH_MAX): a longer one names no file."""


def shell_word(text: str) -> str:
    """``text`` as one word a POSIX shell reads back as ``text`` (`shlex.quote`); one holding a character that is not
    printable (a newline, an escape, a bidirectional override) as a ``$'…'`` word of bash and zsh, each such character
    escaped (a byte that was not UTF-8 as the byte: ``\\xff``)."""
    if text.isprintable():
        return shlex.quote(text)
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogate for a byte that was not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "$'" + "".join(out) + "'"


def recorded_config(tree: str | os.PathLike[str], manifest: Manifest | None = None) -> str | None:
    """The configuration file ``tree`` was generated from, as its manifest (``manifest``, else read now) records it,
    made absolute; None when that is not known (no usable manifest, none recorded, or a path no file could have)."""
    if manifest is None:
        try:
            manifest = Manifest.load(tree)
        except TreeError:
            return None
    recorded = manifest.config
    if not recorded or len(recorded) > MAX_PATH_CHARS or "\0" in recorded:
        return None
    return os.path.normpath(os.path.join(os.path.abspath(tree), recorded))


def regenerate_command(
    tree: str | os.PathLike[str], manifest: Manifest | None = None, *, config: str | None = None
) -> str:
    """The command that regenerates ``tree``, in backticks: from ``config`` when given (the configuration in use),
    else from the file its manifest (``manifest``, else read now) records. When neither is known, or that file is
    gone (moved, renamed), the command has no ``--config`` and the words after it say what to add."""
    out = ["--out", shell_word(os.fspath(tree))]
    source = config if config is not None else recorded_config(tree, manifest)
    if source is not None and (config is not None or os.path.isfile(source)):
        return "`" + " ".join(["tooltree generate-tree", "--config", shell_word(source), *out]) + "`"
    command = "`" + " ".join(["tooltree generate-tree", *out]) + "`"
    if source is not None:
        return f"{command} with --config naming the file it was generated from, {shell_word(source)}, where it is now"
    return f"{command} with --config naming the servers' configuration, unless it is ./tooltree.yaml"
