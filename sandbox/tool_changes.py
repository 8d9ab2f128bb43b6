"""How a call's tool is not as the session's tree has it, in words: what changed in its definition since the tree was
generated (`changed_parts`), what such a call says while `tooltree serve` regenerates the tree for it
(`regenerating`), and a session whose tree was regenerated since it began (`STALE_SESSION`, refused with
`StaleSessionRefused` and counted in the bridge's `StaleRefusals`; the tools such a session may no longer call:
`StaleTools`). `sandbox.mcp_bridge.McpBridge` refuses such calls with these."""

from __future__ import annotations

import math
import os
from typing import Any, NoReturn

from sandbox.bridge import ToolCallRefused
from sandbox.stored_definitions import manifest_version, records_tree, shared_manifest
from tool_tree.tree import Manifest, ToolEntry, TreeError

STALE_BEGAN = (
    "the tree was regenerated since this session began (its manifest on disk was replaced), and this session keeps "
    "the tree it began with"
)
NEW_RUN = "start a new run to use the regenerated tree"
"""What a refused stale session is told to do (`StaleRefusals.advice`), unless its runner renews it itself (`tooltree
serve` does: before, its sessions without a workspace folder were told to reconnect the client)."""
STALE_SESSION = f"{STALE_BEGAN}: {NEW_RUN}"
"""Why a call of a session whose tree was regenerated since is refused where its tool is not as the session has it
(before: "regenerate the tree", which was done)."""


_SAME_KEPT = 64
"""The most versions of the manifest file a session keeps as its own tree's (each is read again past them)."""


class StaleSessionRefused(ToolCallRefused):
    """A call refused (``tool_changed``) because the tree was regenerated since the session began and its tool is not
    as the session's tree has it: a new session on the regenerated tree may call it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "tool_changed")


class StaleRefusals:
    """What a session's bridges (its sandbox's and their companions: they share it) say of such a call, and how many
    they refused: `tooltree serve` renews a session that had one (`agent.serve.sessions`), and says so in ``advice``
    (before: "reconnect the client", which a model cannot do, and the session was refused until its client did)."""

    def __init__(self) -> None:
        self.count = 0
        self.advice = NEW_RUN

    def refusal(self, what: str) -> StaleSessionRefused:
        """The refusal of a call, ``what`` saying why its tool cannot be called in the session."""
        return StaleSessionRefused(f"{what}; {STALE_BEGAN}: {self.advice}")


class StaleTools:
    """The tools of a session's manifest (read from the file's ``version``) that a tree regenerated since no longer has
    as the session has them, refused for the rest of the session (shared by its bridges); and whether the tree was
    regenerated since at all (`regenerated`).

    A tool is looked up in the regenerated manifest at its first call after each regeneration, whether the session
    called it before or not: before, one the session had called went on being called, its arguments checked against
    the definition it had read, while the regeneration's server may have changed it (`evo.update_record`'s ``note``
    removed, ``status`` made required) and a tool it had not called was refused."""

    def __init__(
        self, tree: str | os.PathLike[str], version: tuple[int, ...], refusals: StaleRefusals, manifest: Manifest
    ) -> None:
        self.tree = tree
        self.version = version
        self.refusals = refusals
        self.manifest = manifest
        self._same: set[tuple[int, ...]] = set()
        """Versions of the manifest file since ``version`` that record the same tree (`Manifest.same_tree`)."""
        self._why: dict[tuple[str, str], str] = {}
        self._rechecked: dict[tuple[str, str], tuple[int, ...]] = {}
        """The version of the regenerated manifest file each tool was last found unchanged in."""

    def regenerated(self) -> bool:
        """Whether the tree was regenerated since the session began: its manifest file was replaced (one ``stat``) by
        one that records another tree. A manifest rewritten for the configuration file it names alone (a run from
        another file naming the same servers, the one it named gone) is the same tree: before, each session was told
        the tree was regenerated, a tool its server changed since was refused as the session's, not the tree's, and
        a `tooltree serve` session whose next sandbox mounted that copy was moved to it, saying so."""
        now = manifest_version(self.tree)
        return now != self.version and not self.same_tree(now)

    def same_tree(self, version: tuple[int, ...] | None) -> bool:
        """Whether ``version`` of the manifest file (a copy of the tree mounted in a sandbox says its own) records
        the session's tree: its own, or one found to since (the file now is read when it is that version)."""
        if version == self.version or version in self._same:
            return True
        if version is None or not records_tree(self.tree, self.manifest, version):
            return False
        if len(self._same) < _SAME_KEPT:
            self._same.add(version)
        return True

    def check(self, entry: ToolEntry) -> bool:
        """Whether the tree was regenerated since the session began (its manifest file replaced: one ``stat``).

        Raises:
            StaleSessionRefused: it was, and the regenerated manifest does not have ``entry``'s tool at the session's
                definition (its schema hash), or cannot be read.
        """
        key = (entry.server, entry.tool)
        if (why := self._why.get(key)) is not None:
            raise self.refusals.refusal(why)
        now = manifest_version(self.tree)
        if now == self.version or self.same_tree(now):
            return False
        if self._rechecked.get(key) != now:
            try:
                held = shared_manifest(self.tree).tool_entry(entry.server, entry.tool)
            except TreeError as e:
                self.refuse(entry, f"cannot be read ({e}), so it may not hold it")
            if held is None:
                self.refuse(entry, "no longer holds it")
            if held.schema_hash != entry.schema_hash:
                self.refuse(entry, "holds another definition of it")
            self._rechecked[key] = now
        return True

    def refuse(self, entry: ToolEntry, held: str) -> NoReturn:
        """Refuse ``entry``'s tool for the rest of the session, the regenerated tree being as ``held`` says.

        Raises:
            StaleSessionRefused: always.
        """
        why = self._why[(entry.server, entry.tool)] = (
            f"{entry.server}.{entry.tool} cannot be called in this session: the regenerated tree {held}, so "
            "its arguments cannot be checked against the definition this session has"
        )
        raise self.refusals.refusal(why)


def regenerating(server: str, due: float) -> str:
    """What a call of a tool ``server`` changed or removed says when `tooltree serve` regenerates its part of the tree
    for it, ``due`` seconds from now (0: under way), instead of the command that regenerates the tree."""
    when = "under way" if due <= 0 else f"due in about {math.ceil(due)} s"
    return (
        f"tooltree serve is regenerating {server}'s part of the tree, as the server said its tools changed ({when}): "
        "call the tool again once that is done, after reading its stub again (its parameters may have changed)"
    )


_PARTS = {
    "description": "its description",
    "title": "its title",
    "annotations": "its annotations",
    "inputSchema": "its parameters",
    "outputSchema": "its output schema",
}


def changed_parts(stored: dict[str, Any], live: dict[str, Any]) -> str:
    """What differs between a tool's definition as the tree stored it and as its server lists it now, in words: its
    description, its parameters' descriptions alone (``its parameters are as they were``) or its parameters, ….

    Before, only "(schema hash mismatch)": a server that writes the machine's time zone into a parameter's description
    (``mcp-server-time``) had every call refused on another machine, saying neither that nor that the types held."""
    said: list[str] = []
    others = 0
    for key in sorted(set(stored) | set(live), key=str):
        if key == "name" or stored.get(key) == live.get(key):
            continue
        if key in ("inputSchema", "outputSchema") and _undescribed(stored.get(key)) == _undescribed(live.get(key)):
            said.append(f"the descriptions in {_PARTS[key]} (their names and types are as they were)")
        elif key in _PARTS:
            said.append(_PARTS[key])
        else:
            others += 1
    if others:
        said.append(f"{others} other field{'s' if others != 1 else ''} of its definition")
    return ", ".join(said) or "its definition"


_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Schema keywords whose object's keys are names (a parameter may be named ``description``)."""


def _undescribed(schema: Any, depth: int = 0) -> Any:
    """``schema`` without the text of its ``description`` keywords, at any depth the listing's checks let through."""
    if depth > 200:
        return schema
    if isinstance(schema, list):
        return [_undescribed(v, depth + 1) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            continue
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: _undescribed(sub, depth + 1) for name, sub in value.items()}
        else:
            out[key] = _undescribed(value, depth + 1)
    return out
