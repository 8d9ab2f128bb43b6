"""The on-disk format of a generated tree: paths, the manifest and the server snapshots.

::

    <tree>/search_index.json              the tool search index (tool_tree.search)
    <tree>/manifest.json                  every stub ↔ server ↔ original tool name ↔ schema hash,
                                          the parameters whose name is not the wire name, and
                                          the hash of every other file the generator wrote
    <tree>/snapshots/<package>.json       the raw ``tools/list`` result of each server (lossless)
    <tree>/servers/INDEX.md               one line per server
    <tree>/servers/__init__.py
    <tree>/servers/<package>/README.md    one line per tool
    <tree>/servers/<package>/__init__.py  re-exports every tool function
    <tree>/servers/<package>/<module>.py  one stub per tool
    <tree>/.tooltree-kept/<path>          a file a rerun replaced or deleted that did not hold what tooltree
                                          wrote there (edited, or the user's), kept (``generator.kept``)

The bridge uses the manifest as its allowlist and the snapshots for argument validation, so
both are read here, in the core, not in the generator. The names in the manifest (packages,
functions, renamed parameters) are also the generator's memory: a name once given is given again
on the next run, so regenerating never breaks a script that imports a stub.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"
SNAPSHOTS_DIR = "snapshots"
SERVERS_DIR = "servers"
INDEX_FILE = f"{SERVERS_DIR}/INDEX.md"
SEARCH_INDEX_FILE = "search_index.json"
MANIFEST_VERSION = 1


class TreeError(Exception):
    """A tree on disk is missing or malformed."""


def canonical_json(value: Any, *, allow_nan: bool = False) -> str:
    """Deterministic JSON: sorted keys, no whitespace, non-ASCII kept.

    ``allow_nan`` writes NaN and the infinities as ``NaN``, ``Infinity`` and ``-Infinity``, which
    are not JSON: use it only for text that is hashed, never for text that is written.

    Raises:
        ValueError: ``value`` holds NaN or an infinity, and ``allow_nan`` is false.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan)


def read_regular(path: str | os.PathLike[str], limit: int = -1) -> bytes:
    """The bytes of the regular file ``path`` (its first ``limit`` bytes, when given).

    Never waits: a FIFO (or a device) put where a tree file belongs would otherwise block the reader
    for as long as no one writes to it (`tooltree search` and `generate-tree` hung there).

    Raises:
        OSError: the file is missing or unreadable; IsADirectoryError: a folder; another OSError (EINVAL):
            not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        return f.read(limit)


def content_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def requires_task(raw_tool: Mapping[str, Any] | None) -> bool:
    """Whether a tool definition says it runs only as an MCP task (``execution.taskSupport: "required"``),
    which a plain ``tools/call`` (all tooltree makes) cannot run."""
    execution = raw_tool.get("execution") if raw_tool else None
    return isinstance(execution, dict) and execution.get("taskSupport") == "required"


def schema_hash(raw_tool: dict[str, Any]) -> str:
    """Hash of everything a stub is generated from: the whole raw tool definition.

    NaN and the infinities (the SDK parses them; JSON has no such values) do not make it raise:
    they are hashed under their Python spelling, so a live definition that holds one at call time
    hashes unlike any tool in a tree (the generator leaves such tools out) and the call is refused
    as a changed tool. A finite definition hashes as it always has.
    """
    return "sha256:" + hashlib.sha256(canonical_json(raw_tool, allow_nan=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ToolEntry:
    """One stub in the tree."""

    server: str
    """The configured server name (as in tooltree.yaml)."""
    tool: str
    """The tool's original MCP name: what goes on the wire."""
    function: str
    """The Python identifier of the stub's module and function."""
    path: str
    """Path of the stub relative to the tree root, e.g. ``servers/crm/list_leads.py``."""
    schema_hash: str
    summary: str = ""
    """First sentence of the description."""
    stub_hash: str = ""
    """Hash of the stub file as generated (lets a rerun reuse an unchanged stub without rendering it)."""
    warnings: tuple[str, ...] = ()
    """What the generator could not convert faithfully."""
    parameters: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Wire name → parameter name, for the parameters whose name is not the wire name (``from`` → ``from_``)."""

    @property
    def qualified_name(self) -> str:
        """``<server package>.<function>``, the name a script imports."""
        return f"{self.path.split('/')[1]}.{self.function}"


@dataclass(frozen=True)
class ServerEntry:
    """One server in the tree."""

    name: str
    """The configured name."""
    package: str
    """The Python package under ``servers/``."""
    tool_count: int
    description: str = ""
    snapshot: str = ""
    """Path of the server's raw ``tools/list`` snapshot relative to the tree root."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    """The tool filters in force when the tree was generated (reused by ``--from-snapshot`` without a config)."""


@dataclass
class Manifest:
    servers: list[ServerEntry] = field(default_factory=list)
    tools: list[ToolEntry] = field(default_factory=list)
    generator: str = ""
    """Fingerprint of the generator that wrote the tree; stubs are re-rendered when it changes."""
    version: int = MANIFEST_VERSION
    files: Mapping[str, str] = field(default_factory=dict)
    """Path → `content_hash` of every other file the generator wrote (package ``__init__.py`` and
    ``README.md``, ``INDEX.md``, snapshots; a stub's is its ``stub_hash``): a rerun replaces or deletes
    only files that still hold these bytes without keeping a copy (`generator.files.KEPT_DIR`)."""

    def to_json(self) -> str:
        """One server or tool per line (diffable; written by the C encoder, which matters at 10,000 tools)."""

        def entries(items: list[Any]) -> str:
            return ",\n".join("    " + json.dumps(_plain(x), sort_keys=True, ensure_ascii=False) for x in items)

        servers = entries(sorted(self.servers, key=lambda s: s.name))
        tools = entries(sorted(self.tools, key=lambda t: (t.server, t.tool)))
        head = json.dumps({"generator": self.generator, "version": self.version}, ensure_ascii=False)[1:-1]
        files = ""
        if self.files:
            lines = ",\n".join(
                f"    {json.dumps(k, ensure_ascii=False)}: {json.dumps(v)}" for k, v in sorted(self.files.items())
            )
            files = f',\n  "files": {{\n{lines}\n  }}'
        return f'{{{head},\n  "servers": [\n{servers}\n  ],\n  "tools": [\n{tools}\n  ]{files}\n}}\n'

    @classmethod
    def from_json(cls, text: str, *, source: str = MANIFEST_FILE) -> Manifest:
        """Raises: TreeError: the text is not a manifest this version understands."""
        try:
            data = json.loads(text)
            found = data.get("version") if isinstance(data, dict) else None
            if type(found) is not int or found != MANIFEST_VERSION:  # `true` is not 1 here
                which = f"version {found}" if type(found) is int else "no version"
                raise TreeError(f"{source}: not a version-{MANIFEST_VERSION} tooltree manifest ({which}); regenerate "
                                "the tree with `tooltree generate-tree`")  # fmt: skip
            return cls(
                servers=[
                    ServerEntry(**{**s, "include": tuple(s.get("include", ())), "exclude": tuple(s.get("exclude", ()))})
                    for s in data["servers"]
                ],
                tools=[
                    ToolEntry(**{**t, "warnings": tuple(t.get("warnings", ())), "parameters": _names(t)})
                    for t in data["tools"]
                ],
                generator=str(data.get("generator", "")),
                files=_hashes(data.get("files", {})),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise TreeError(f"{source}: malformed manifest ({e})") from None

    @classmethod
    def load(cls, tree: str | os.PathLike[str]) -> Manifest:
        """The manifest of the tree folder ``tree``.

        Raises:
            TreeError: no manifest, an unreadable or malformed one, or ``tree`` is not a folder.
        """
        tree = Path(tree)
        path = tree / MANIFEST_FILE
        try:
            text = read_regular(path).decode("utf-8")
        except FileNotFoundError:
            raise TreeError(f"{path}: no manifest; run `tooltree generate-tree` first") from None
        except NotADirectoryError:
            raise TreeError(f"{tree}: not a folder; a tree is the folder `tooltree generate-tree` writes") from None
        except IsADirectoryError:
            raise TreeError(f"{path}: a folder, not a manifest; regenerate the tree") from None
        except OSError as e:
            raise TreeError(f"{path}: cannot read the manifest ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise TreeError(f"{path}: malformed manifest ({e})") from None
        return cls.from_json(text, source=str(path))

    def lookup(self, server: str, tool: str) -> ToolEntry | None:
        """The entry for an exact (server, original tool name) pair, or None."""
        for t in self.tools:
            if t.server == server and t.tool == tool:
                return t
        return None


def _names(tool: dict[str, Any]) -> dict[str, str]:
    """The ``parameters`` map of a manifest entry (string to string only).

    Raises:
        TypeError: it is not an object of strings.
    """
    names = tool.get("parameters", {})
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
        raise TypeError(f"parameters of tool {tool.get('tool')!r} is not an object of strings")
    return dict(names)


def _hashes(files: Any) -> dict[str, str]:
    """The ``files`` map of a manifest (string to string only).

    Raises:
        TypeError: it is not an object of strings.
    """
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise TypeError("files is not an object of strings")
    return dict(files)


def _plain(entry: Any) -> dict[str, Any]:
    """A flat dataclass as a dict (faster than `dataclasses.asdict`, which deep-copies)."""
    return {f.name: getattr(entry, f.name) for f in fields(entry)}


def load_snapshot(tree: str | os.PathLike[str], server: ServerEntry) -> list[dict[str, Any]]:
    """The raw tool definitions of one server, as listed at generation time, from the tree folder ``tree``.

    Raises:
        TreeError: the snapshot is missing or malformed.
    """
    path = Path(tree) / (server.snapshot or f"{SNAPSHOTS_DIR}/{server.package}.json")
    try:
        data = json.loads(read_regular(path).decode("utf-8"))
        tools = data["tools"]
        if not isinstance(tools, list):
            raise TypeError("tools is not a list")
        return [t for t in tools if isinstance(t, dict)]
    except FileNotFoundError:
        raise TreeError(f"{path}: snapshot missing; regenerate the tree") from None
    except OSError as e:
        raise TreeError(f"{path}: cannot read the snapshot ({e.strerror or e}); regenerate the tree") from None
    except (ValueError, KeyError, TypeError) as e:
        raise TreeError(f"{path}: malformed snapshot ({e})") from None


@contextlib.contextmanager
def tree_lock(
    root: str | os.PathLike[str], *, shared: bool = False, on_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold a ``flock`` on the tree folder ``root``: exclusive to write the tree, shared to read all of it.

    `generate` holds it exclusively from reading the previous tree to writing the new one, so two
    runs on one tree take turns (each file of a run is written exclusively or replaced, and its
    stale files deleted, which would otherwise fail on, or delete, the other run's files); a reader
    holding it shared (the Docker backend packing the tree) sees one whole generation. Waits for
    the holder; the kernel releases the lock when the holder's process ends. A ``root`` that is
    missing or not a folder holds no tree: nothing to lock (`generator.files.check_out` says what is wrong with it).
    ``on_wait`` is called once, before waiting, when another process holds the lock.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        yield
        return
    try:
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)
