"""What a regeneration changes for the scripts that call the stubs, told before any file is replaced.

A server that changes its tools changes the stubs' Python API: a stub removed (its import breaks), a parameter removed
or renamed, one newly required, a type narrowed, a limit added or tightened (``maxLength``, ``pattern``), a stub that
took another name (a tool the server renamed whose stub keeps its name breaks nothing). `api_changes` compares the
previous tree (its manifest, and the stubs on disk or the bytes a run is about to replace) with the plan, and says what
changed for a caller (`generator.stub_signature` compares the signatures as rendered), each change marked breaking or
not (an added stub or optional parameter, a parameter that became optional, a type widened or a limit loosened break no
call).

Cost is bounded by what changed: a stub whose path and hash the manifest records unchanged is not read; only those
that differ are parsed, old and new (in worker processes when there are many).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from generator.stub_signature import Change, compare, signature
from generator.workers import forked_map
from tool_tree.text import one_line, quoted_name
from tool_tree.tree import Manifest, ToolEntry

SHOWN_TYPE = 100
"""Characters of a type a line shows."""
SHOWN_NAME = 80
JSON_TYPE = 2000
"""Characters of a type ``--json`` gives (a ``Literal`` of 100 long values is longer)."""
BREAKING_SHOWN = 20
"""Breaking changes the summary lists one a line; the rest are counted (``--json`` lists them all)."""
ADDED_SHOWN = 5
"""Changes that break nothing the summary's one line names."""


@dataclass(frozen=True, slots=True)
class ApiChange:
    """One change of a stub's API, as a caller sees it."""

    server: str
    tool: str
    """The tool's wire name ("" for a change of a whole server)."""
    stub: str
    """What a script imports, ``<package>.<function>`` (the previous one for a stub removed or renamed); a whole
    server's is its package."""
    change: str
    """One of `KINDS`."""
    breaking: bool
    parameter: str = ""
    old: str = ""
    new: str = ""

    @property
    def text(self) -> str:
        """One line: ``crm.update_record: parameter `note` removed`` (server text cleaned and cut)."""
        stub, param = one_line(self.stub, SHOWN_NAME), one_line(self.parameter, SHOWN_NAME)
        old, new = one_line(self.old, SHOWN_TYPE), one_line(self.new, SHOWN_TYPE)
        if self.change == "tool renamed":  # names, escaped: get\u200b_item is not get_item
            old, new = quoted_name(self.old, SHOWN_NAME), quoted_name(self.new, SHOWN_NAME)
        count = self.old or self.new  # a whole server's stubs
        stubs = f"{count} stub" + ("" if count == "1" else "s")
        line = KINDS[self.change].format(param=param, old=old, new=new, tool=quoted_name(self.tool), stubs=stubs)
        return f"{stub}: {line}"

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "tool": self.tool,
            "stub": self.stub,
            "change": self.change,
            "breaking": self.breaking,
            "parameter": self.parameter,
            "old": self.old[:JSON_TYPE],
            "new": self.new[:JSON_TYPE],
            "text": self.text,
        }


KINDS = {
    "server removed": "server removed ({stubs})",
    "removed": "removed (tool {tool} is no longer in the tree)",
    "renamed": "renamed {new}",
    "parameter removed": "parameter `{param}` removed",
    "parameter renamed": "parameter `{param}` renamed `{new}`",
    "now required": "parameter `{param}` is now required",
    "new required": "new required parameter `{param}`",
    "type changed": "parameter `{param}`: {old} → {new}",
    "keys changed": "parameter `{param}`: {old}: {new}",
    "returns keys changed": "returns {old}: {new}",
    "arguments removed": "no longer takes other keyword arguments (**arguments)",
    "returns changed": "returns {old} → {new}",
    "limit narrowed": "parameter `{param}`: {old} → {new}",
    # break nothing
    "server added": "server added ({stubs})",
    "added": "added",
    "tool renamed": "the server's tool {old} is now {new} (the stub keeps its name and sends the new one)",
    "new optional": "new optional parameter `{param}`",
    "now optional": "parameter `{param}` is now optional",
    "type widened": "parameter `{param}`: {old} → {new} (wider)",
    "keys added": "parameter `{param}`: {old}: {new}",
    "returns keys added": "returns {old}: {new}",
    "arguments added": "now takes other keyword arguments (**arguments)",
    "returns narrowed": "returns {old} → {new} (narrower)",
    "limit widened": "parameter `{param}`: {old} → {new} (wider)",
}
"""Each kind of change and its line (after ``<stub>: ``)."""


# ── a tree against its plan ────────────────────────────────────────────────────────────────


def api_changes(
    previous: Manifest | None,
    manifest: Manifest,
    old: Callable[[str], bytes | None],
    new: Callable[[str], bytes | None],
) -> list[ApiChange]:
    """What the tree of ``manifest`` changes for the callers of the stubs of ``previous`` (none for a first tree),
    breaking changes first, then by stub. ``old`` reads a stub of the previous tree, ``new`` one of the plan; only
    stubs whose path or hash changed are read."""
    if previous is None:
        return []
    now = {(t.server, t.tool): t for t in manifest.tools}
    servers_now = {s.name for s in manifest.servers}
    servers_before = {s.name: s for s in previous.servers}
    changes: list[ApiChange] = []
    gone: dict[str, int] = {}
    changed: list[ToolEntry] = []  # the tools whose stub changed, and what to compare of each
    jobs: list[_Job] = []
    # A tool the server renamed whose stub keeps its path (``get-record`` → ``get.record``: ``get_record`` both):
    # the same stub for its callers, which sends the new name. Before, it read as removed (breaking) and added.
    renamed = _renamed_on_the_wire(previous.tools, now, servers_now)
    for t in previous.tools:
        n = now.pop((t.server, t.tool), None)
        if n is None and (n := renamed.get((t.server, t.tool))) is not None:
            del now[(n.server, n.tool)]
            changes.append(ApiChange(t.server, t.tool, t.qualified_name, "tool renamed", False, old=t.tool, new=n.tool))
        if n is None:
            if t.server in servers_now:
                changes.append(ApiChange(t.server, t.tool, t.qualified_name, "removed", True))
            else:
                gone[t.server] = gone.get(t.server, 0) + 1
            continue
        if n.path == t.path and n.stub_hash == t.stub_hash:
            continue
        if n.path != t.path:
            changes.append(ApiChange(t.server, t.tool, t.qualified_name, "renamed", True, new=n.qualified_name))
        changed.append(n)
        jobs.append((old(t.path), t.function, new(n.path), n.function))
    for n, found in zip(changed, _compare_many(jobs), strict=True):
        changes += [ApiChange(n.server, n.tool, n.qualified_name, *change) for change in found]
    for name, count in gone.items():
        package = servers_before[name].package if name in servers_before else name
        changes.append(ApiChange(name, "", package, "server removed", True, old=str(count)))
    added: dict[str, list[ToolEntry]] = {}
    for n in now.values():  # the tools left are new
        added.setdefault(n.server, []).append(n)
    for name, tools in added.items():
        if name in servers_before:
            changes += [ApiChange(n.server, n.tool, n.qualified_name, "added", False) for n in tools]
        else:
            package = tools[0].path.split("/")[1]
            changes.append(ApiChange(name, "", package, "server added", False, new=str(len(tools))))
    order = {kind: i for i, kind in enumerate(KINDS)}
    changes.sort(key=lambda c: (not c.breaking, c.stub, order[c.change], c.parameter))
    return changes


def _renamed_on_the_wire(
    before: Sequence[ToolEntry], now: dict[tuple[str, str], ToolEntry], servers_now: set[str]
) -> dict[tuple[str, str], ToolEntry]:
    """The tools of ``before`` whose wire name is gone from a server still in the tree while a new wire name of that
    server has a stub at the same path (the same Python name), each with its new entry, by (server, old wire
    name)."""
    kept = {(t.server, t.tool) for t in before}
    new_paths = {n.path: n for key, n in now.items() if key not in kept and n.server in servers_now}
    return {
        (t.server, t.tool): n
        for t in before
        if (t.server, t.tool) not in now and (n := new_paths.get(t.path)) is not None and n.server == t.server
    }


_Job = tuple[bytes | None, str, bytes | None, str]
"""A stub as it was and its function, and as it is to be."""
_Found = list[Change]


def _compare_job(job: _Job) -> _Found:
    before, after = signature(job[0], job[1]), signature(job[2], job[3])
    return compare(before, after) if before is not None and after is not None else []


def _compare_many(jobs: Sequence[_Job]) -> Iterator[_Found]:
    """`_compare_job` of each job, in order: in forked workers when there are many (as `layout.render_many`)."""
    return forked_map(_compare_job, jobs)


def summary(changes: Sequence[ApiChange], *, check: bool) -> list[str]:
    """The lines `generate-tree` prints: a head line, each breaking change (at most `BREAKING_SHOWN`, the rest
    counted), and one line naming the changes that break nothing; no line when nothing changed."""
    breaking = [c for c in changes if c.breaking]
    other = [c for c in changes if not c.breaking]
    if not changes:
        return []
    verb = "a run would change" if check else "this run changed"
    lines = [
        f"{verb} the stubs' API: {len(breaking)} change(s) break calls scripts make, {len(other)} break nothing"
        + (":" if breaking else "")
    ]
    lines += [f"  {c.text}" for c in breaking[:BREAKING_SHOWN]]
    if len(breaking) > BREAKING_SHOWN:
        lines.append(f"  … and {len(breaking) - BREAKING_SHOWN} more (--json lists them all)")
    if other:
        more = f", and {len(other) - ADDED_SHOWN} more" if len(other) > ADDED_SHOWN else ""
        lines.append("  not breaking: " + "; ".join(c.text for c in other[:ADDED_SHOWN]) + more)
    return lines


def breaking_warning(changes: Sequence[ApiChange]) -> str | None:
    """One line counting the breaking changes of a run that wrote them (as `tooltree serve`'s log gives the
    warnings of its refreshes); None when there are none."""
    breaking = [c for c in changes if c.breaking]
    if not breaking:
        return None
    first = breaking[0].text
    more = f" and {len(breaking) - 1} more" if len(breaking) > 1 else ""
    return (
        f"{len(breaking)} change(s) to the stubs break calls scripts make ({first}{more}); "
        "`tooltree generate-tree --check --json` lists such changes before a run writes them"
    )
