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

A tree may come from elsewhere (committed by a teammate, downloaded, edited by hand), so what is read of it is
checked here for every reader: each file is reached without following a link and within a size (`read_in_tree`,
from `tool_tree.tree_files` with the tree's lock), and every field and path of a manifest is of its type and stays
in the tree.

(Over 400 lines: the format and the checks of every field a reader relies on belong together, so that no reader of
a tree from elsewhere checks less.)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shlex
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from tool_tree.held_values import HeldValues
from tool_tree.tree_files import MAX_TREE_FILE_BYTES as MAX_TREE_FILE_BYTES  # imported from here by other modules
from tool_tree.tree_files import hard_linked as hard_linked
from tool_tree.tree_files import read_in_tree as read_in_tree
from tool_tree.tree_files import read_regular as read_regular
from tool_tree.tree_files import tree_lock as tree_lock
from tool_tree.tree_files import tree_relpath as tree_relpath
from tool_tree.unparsed import count_values

MANIFEST_FILE = "manifest.json"
SNAPSHOTS_DIR = "snapshots"
SERVERS_DIR = "servers"
INDEX_FILE = f"{SERVERS_DIR}/INDEX.md"
SEARCH_INDEX_FILE = "search_index.json"
MANIFEST_VERSION = 1


MAX_SNAPSHOT_VALUES = 3_500_000
"""The most JSON values a snapshot may hold: its tools' (`tool_tree.connect.MAX_LIST_VALUES`), its three other
lists' (`tool_tree.snapshot_lists.MAX_LIST_VALUES` each) and its ``info``. One from elsewhere is counted on its bytes
before it is parsed (`snapshot_json`): 64 MiB of ``{}`` would be 22 million objects, gigabytes once parsed."""
MAX_MANIFEST_VALUES = 8_000_000
"""The most JSON values a manifest may hold, counted before it is parsed (256 MiB of ``{}`` is 89 million objects,
about 10 GB parsed). A manifest holds about 11 values a tool (6,049 for the 527-tool catalog), so this is some 700,000
tools: a tree of their stubs would be far over what the sandbox takes (`sandbox.tree_pack.MAX_TREE_BYTES`)."""


def lines_kept(text: str) -> str:
    """JSON text with the line breaks `json.dumps` leaves raw (NEL, LINE and PARAGRAPH SEPARATOR, found only in its
    strings) escaped: the same JSON, and its lines are the file's entries (before, a name holding one split a
    manifest's or snapshot's entry in two for an editor, ``str.splitlines`` and JavaScript)."""
    for char in "\x85\u2028\u2029":
        if char in text:  # rare: the manifest of 10,000 tools is looked through, not copied
            text = text.replace(char, f"\\u{ord(char):04x}")
    return text


class TreeError(Exception):
    """A tree on disk is missing or malformed."""


def check_values(raw: bytes, limit: int) -> None:
    """Refuse a tree file's bytes that would parse to more than ``limit`` values, before they are parsed.

    Raises:
        ValueError: they would, saying so.
    """
    if count_values(raw, limit) > limit:
        raise ValueError(f"it holds more than {limit:,} JSON values, more than generate-tree writes")


def snapshot_json(raw: bytes, held: HeldValues | None = None) -> Any:
    """A snapshot file's bytes, parsed once their values are counted: also against ``held``, what the snapshots a
    reader holds at once may hold together (`tool_tree.held_values.MAX_READ_VALUES`).

    Raises:
        ValueError: they hold more than `MAX_SNAPSHOT_VALUES` values, or more than ``held`` has room for, or are not
            JSON.
    """
    check_values(raw, MAX_SNAPSHOT_VALUES)
    if held is not None and not held.take(count_values(raw, held.room + 1, exact=True)):
        raise ValueError(
            f"with the snapshots read before it, it holds more than {held.limit:,} JSON values, more than one run of "
            "generate-tree writes (regenerate the tree)"
        )
    return json.loads(raw.decode("utf-8"))


def canonical_json(value: Any, *, allow_nan: bool = False) -> str:
    """Deterministic JSON: sorted keys, no whitespace, non-ASCII kept.

    ``allow_nan`` writes NaN and the infinities as ``NaN``, ``Infinity`` and ``-Infinity``, which
    are not JSON: use it only for text that is hashed, never for text that is written.

    Raises:
        ValueError: ``value`` holds NaN or an infinity, and ``allow_nan`` is false.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan)


MAX_MODULE_NAME = 256
"""The longest package or module name read from a tree (the generator's are at most 64 characters and a few ``_``)."""


def module_name(name: object) -> str:
    """``name``, a package or module name a tree's manifest or search index gives: an ASCII identifier, as the
    generator makes every one, at most `MAX_MODULE_NAME` characters. Such names are printed (``crm.get_record``) to
    the model and to the terminal; one from a tree written elsewhere could otherwise hold escapes (OSC 52 writes the
    clipboard) or newlines that fake lines.

    Raises:
        ValueError: it is anything else.
    """
    if not isinstance(name, str) or not (name.isascii() and name.isidentifier()) or len(name) > MAX_MODULE_NAME:
        raise ValueError(f"{str(name)[:80]!r} is not a Python identifier of at most {MAX_MODULE_NAME} ASCII characters")
    return name


def servers_link(tree: str | os.PathLike[str]) -> str | None:
    """Why the tree's ``servers/`` cannot be read, when it is a symbolic link (a tree written elsewhere may hold
    ``servers -> /``, and what lists or reads ``servers/...`` from the tree's folder would then show the host's
    files); None otherwise (a missing folder is the reader's to report)."""
    path = os.path.join(os.fspath(tree), SERVERS_DIR)
    try:
        if not stat.S_ISLNK(os.lstat(path).st_mode):
            return None
    except OSError:
        return None
    from tool_tree.regenerate import regenerate_command as again

    return f"{path} is a symbolic link, which is not followed in a tree; regenerate the tree with {again(tree)}"


def enclosing_tree(folder: str | os.PathLike[str]) -> str | None:
    """The tree ``folder`` lies in, as a word to type (``tree`` of ``tree/servers``, ``.`` of ``servers/crm``), when
    it is in a tree's ``servers/`` or ``snapshots/`` (a ``--tree`` given the folder of the stubs), else None."""
    folder = Path(folder)
    for top in folder.parents[:3]:
        if folder.parts[len(top.parts)] in ("servers", "snapshots") and (top / MANIFEST_FILE).is_file():
            return shlex.quote(str(top))
    return None


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
    lists_recorded: bool = False
    """Every server's snapshot records the prompts, resources and resource templates it declares
    (`tool_tree.snapshot_lists`). Written (``"lists_recorded": true``) since tooltree recorded them; a tree of an
    earlier release has none of the keys in its snapshots, as a server that declares none has, and only this tells
    the two apart (`tooltree serve` says when a tree offers none for that)."""
    config: str = ""
    """The configuration file the tree was generated from, relative to the tree's folder ("": not known), named by the
    texts that say to regenerate the tree (`tool_tree.regenerate`): untrusted, shown escaped, and read by
    ``generate-tree``, ``exec``, ``agent`` and ``serve`` given no ``--config`` only when it is the user's own file."""

    def same_tree(self, other: Manifest) -> bool:
        """Whether ``other`` records the same tree, the configuration file it names aside (another file naming the
        same servers gives the same tree: `generator.previous.keep_recorded_config`)."""
        return replace(self, config=other.config) == other

    def to_json(self) -> str:
        """One server or tool per line (diffable; written by the C encoder, which matters at 10,000 tools)."""

        def entries(items: list[Any]) -> str:
            return ",\n".join("    " + json.dumps(_plain(x), sort_keys=True, ensure_ascii=False) for x in items)

        servers = entries(sorted(self.servers, key=lambda s: s.name))
        tools = entries(sorted(self.tools, key=lambda t: (t.server, t.tool)))
        marker = {"lists_recorded": True} if self.lists_recorded else {}
        source = {"config": self.config} if self.config else {}
        head = json.dumps({**source, "generator": self.generator, **marker, "version": self.version},
                          ensure_ascii=False)[1:-1]  # fmt: skip
        files = ""
        if self.files:
            lines = ",\n".join(
                f"    {json.dumps(k, ensure_ascii=False)}: {json.dumps(v)}" for k, v in sorted(self.files.items())
            )
            files = f',\n  "files": {{\n{lines}\n  }}'
        text = f'{{{head},\n  "servers": [\n{servers}\n  ],\n  "tools": [\n{tools}\n  ]{files}\n}}\n'
        return lines_kept(text)

    @classmethod
    def from_json(cls, text: str, *, source: str = MANIFEST_FILE) -> Manifest:
        """Every field is checked for its type, and every path in it for staying in the tree (`tree_relpath`): a
        stub's under ``servers/``, a snapshot's under ``snapshots/`` (a manifest written elsewhere may name
        ``/etc/passwd``, a number for a name, or nest arrays 100,000 deep: before, some of those went on to whoever
        read the tree, and the nesting raised RecursionError).

        Raises: TreeError: the text is not a manifest this version understands."""
        try:
            data = json.loads(text)
            found = data.get("version") if isinstance(data, dict) else None
            if type(found) is not int or found != MANIFEST_VERSION:  # `true` is not 1 here
                which = f"version {found}" if type(found) is int else "no version"
                raise TreeError(f"{source}: not a version-{MANIFEST_VERSION} tooltree manifest ({which}); regenerate "
                                "the tree with `tooltree generate-tree`")  # fmt: skip
            servers, tools = data["servers"], data["tools"]
            if not isinstance(servers, list) or not isinstance(tools, list):
                raise TypeError("servers and tools must be lists")
            if not isinstance(config := data.get("config", ""), str):
                raise TypeError("config must be a string")
            return cls(
                servers=[_server_entry(s) for s in servers],
                tools=[_tool_entry(t) for t in tools],
                generator=str(data.get("generator", "")),
                files=_hashes(data.get("files", {})),
                lists_recorded=data.get("lists_recorded") is True,
                config=config,
            )
        except RecursionError:
            raise TreeError(f"{source}: malformed manifest (nested too deeply)") from None
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
            raw = read_in_tree(tree, MANIFEST_FILE)
            check_values(raw, MAX_MANIFEST_VALUES)
            text = raw.decode("utf-8")
        except FileNotFoundError:
            if (top := enclosing_tree(tree)) is not None:  # before: told to generate a tree inside this one
                raise TreeError(f"{tree}: a folder inside a tree, not a tree itself: pass --tree {top}") from None
            # Where to generate it (before: `tooltree generate-tree` alone, which writes ./tree, not this folder).
            raise TreeError(
                f"{path}: no manifest; run `tooltree generate-tree --out {shlex.quote(str(tree))}` first (with "
                "--config naming your servers' file, unless it is ./tooltree.yaml), or name the folder generate-tree "
                "wrote"
            ) from None
        except NotADirectoryError:
            raise TreeError(f"{tree}: not a folder; a tree is the folder `tooltree generate-tree` writes") from None
        except IsADirectoryError:
            from tool_tree.regenerate import regenerate_command

            raise TreeError(
                f"{path}: a folder, not a manifest; regenerate the tree with {regenerate_command(tree, Manifest())}"
            ) from None
        except OSError as e:
            raise TreeError(f"{path}: cannot read the manifest ({e.strerror or e})") from None
        except ValueError as e:  # undecodable, or too many values
            raise TreeError(f"{path}: malformed manifest ({e})") from None
        return cls.from_json(text, source=str(path))

    def tool_entry(self, server: str, tool: str) -> ToolEntry | None:
        """The entry for an exact (server, original tool name) pair, or None (the first, were a pair named twice)."""
        return self._tables[0].get((server, tool))

    def server_entry(self, name: str) -> ServerEntry | None:
        """The server named ``name``, or None (the first, were a name given twice)."""
        return self._tables[1].get(name)

    @functools.cached_property
    def _tables(self) -> tuple[dict[tuple[str, str], ToolEntry], dict[str, ServerEntry]]:
        """The tools by (server, tool) and the servers by name, made at the first lookup and kept with the manifest,
        which nothing changes once it is looked up in: every bridge holding it shares them (before, each made its
        own: 1.7 MiB in each `tooltree serve` client session for a tree of 20,000 tools)."""
        tools: dict[tuple[str, str], ToolEntry] = {}
        for t in self.tools:
            tools.setdefault((t.server, t.tool), t)
        servers: dict[str, ServerEntry] = {}
        for s in self.servers:
            servers.setdefault(s.name, s)
        return tools, servers


def _server_entry(item: Any) -> ServerEntry:
    """One server of a manifest, each field of its type, its package a `module_name` and its snapshot in ``snapshots/``.

    Raises:
        TypeError, ValueError: it is not.
    """
    entry = ServerEntry(**{**item, "include": _strings(item, "include"), "exclude": _strings(item, "exclude")})
    _typed(entry, ("name", "package", "description", "snapshot"), str)
    _typed(entry, ("tool_count",), int)
    module_name(entry.package)
    if entry.snapshot and not tree_relpath(entry.snapshot).startswith(f"{SNAPSHOTS_DIR}/"):
        raise ValueError(f"snapshot {entry.snapshot!r} of server {entry.name!r} is not in {SNAPSHOTS_DIR}/")
    return entry


def _tool_entry(item: Any) -> ToolEntry:
    """One tool of a manifest, each field of its type and its stub at ``servers/<package>/<module>.py``.

    Raises:
        TypeError, ValueError: it is not.
    """
    entry = ToolEntry(**{**item, "warnings": _strings(item, "warnings"), "parameters": _names(item)})
    _typed(entry, ("server", "tool", "function", "path", "schema_hash", "summary", "stub_hash"), str)
    module_name(entry.function)
    stub_path(entry.path)
    return entry


def stub_path(path: object) -> str:
    """``path``, a stub's path a manifest or search index gives: ``servers/<package>/…/<module>.py``, each folder a
    `module_name`, inside the tree (`tree_relpath`).

    Raises:
        ValueError: it is anything else.
    """
    parts = tree_relpath(path).split("/")
    if len(parts) < 3 or parts[0] != SERVERS_DIR or not parts[-1].endswith(".py"):
        raise ValueError(f"{str(path)[:200]!r} is not a stub's path ({SERVERS_DIR}/<package>/<module>.py)")
    for part in [*parts[1:-1], parts[-1][:-3]]:
        module_name(part)
    return str(path)


def _strings(item: dict[str, Any], key: str) -> tuple[str, ...]:
    """Raises: TypeError: ``item[key]`` is there and not a list of strings."""
    value = item.get(key, [])
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise TypeError(f"{key} of {item.get('name', item.get('tool'))!r} is not a list of strings")
    return tuple(value)


def _typed(entry: object, names: tuple[str, ...], kind: type) -> None:
    """Raises: TypeError: one of the fields ``names`` of ``entry`` is not a ``kind`` (a bool is no int)."""
    for name in names:
        value = getattr(entry, name)
        if type(value) is not kind:
            raise TypeError(f"{name} must be {kind.__name__}, got {type(value).__name__} {str(value)[:80]!r}")


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


def load_snapshot(
    tree: str | os.PathLike[str], server: ServerEntry, held: HeldValues | None = None
) -> list[dict[str, Any]]:
    """The raw tool definitions of one server, as listed at generation time, from the tree folder ``tree``. A reader
    that holds every server's at once counts them against its ``held`` (`snapshot_json`).

    Raises:
        TreeError: the snapshot is missing or malformed.
    """
    return [t for t in snapshot_data(tree, server, held)["tools"] if isinstance(t, dict)]


def snapshot_data(tree: str | os.PathLike[str], server: ServerEntry, held: HeldValues | None = None) -> dict[str, Any]:
    """The whole snapshot of one server (its ``tools`` a list; what else it holds is the reader's to check), its
    values counted against ``held`` (`snapshot_json`).

    Raises:
        TreeError: the snapshot is missing or malformed.
    """
    rel = server.snapshot or f"{SNAPSHOTS_DIR}/{server.package}.json"
    path = Path(tree) / rel
    try:
        data = snapshot_json(read_in_tree(tree, rel), held)
        if not isinstance(data["tools"], list):
            raise TypeError("tools is not a list")
        return data  # type: ignore[no-any-return]
    except FileNotFoundError:
        raise TreeError(f"{path}: snapshot missing; regenerate the tree") from None
    except OSError as e:
        raise TreeError(f"{path}: cannot read the snapshot ({e.strerror or e}); regenerate the tree") from None
    except RecursionError:
        raise TreeError(f"{path}: malformed snapshot (nested too deeply)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise TreeError(f"{path}: malformed snapshot ({e})") from None
