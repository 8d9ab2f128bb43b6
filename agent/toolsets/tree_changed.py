"""What the code tools of a run say when `tooltree generate-tree` regenerates its tree under it.

A run's sandbox holds a copy of the tree taken when it started, and its bridge the manifest read when the runtime
opened, while ``search_tools``, ``list_files`` and ``read_file`` read the tree's folder as it is: after a regeneration,
they show a server or tool the run's scripts may not import or call. `TreeWatch` notices the replaced manifest (its
file's version, `sandbox.stored_definitions.manifest_version`, one ``stat`` per call; a file that records the same
tree, rewritten for the configuration file it names alone, is no regeneration) and says so once in each
conversation, and after each script that failed to import from ``servers``. `tooltree serve` follows a regenerated
tree itself, and tells each of its sessions in its own words (`agent.serve.sessions`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from agent.content import text_block
from agent.toolsets.base import ToolOutcome, with_note

if TYPE_CHECKING:
    from tool_tree.tree import Manifest

TREE_CHANGED = (
    "the tree was regenerated on disk after this run's system prompt was written: search_tools, list_files and "
    "read_file now show the regenerated tree, while the system prompt's index and signatures are of the tree before "
    "and this run's scripts keep the tree their sandbox started with (a server or tool added since may not import or "
    "may be refused when called; one removed may still import); rely on the tools this run saw before, or tell the "
    "user that a new run uses the regenerated tree"
)
"""Said once in each conversation, in front of its first result after `generate-tree` replaced the tree's manifest:
before, a script's ``from servers.docs import …`` that search_tools had just shown failed with
``ModuleNotFoundError``, and nothing said why."""
TREE_CHANGED_IMPORT = (
    "[the tree was regenerated since this run started, and this run's scripts keep what they started with: a server "
    "or tool added since cannot be imported in them; a new run uses the regenerated tree]"
)
"""Said after the output of such a run's script that failed to import from ``servers``."""


def missed_servers(outcome: ToolOutcome) -> bool:
    """Whether a script's output says an import from ``servers`` failed (a module, or a name in one)."""
    text = "\n".join(b.get("text", "") for b in outcome.content if b.get("type") == "text")
    return "No module named 'servers." in text or ("cannot import name" in text and "from 'servers." in text)


class TreeWatch:
    """Whether the manifest of ``tree`` is still the file it was when the watch was made (take it before the
    manifest is read: a file replaced in between is then told, never missed)."""

    def __init__(self, tree: str | Path) -> None:
        from sandbox.stored_definitions import manifest_version

        self.tree = Path(tree)
        self._stamp = manifest_version(self.tree)
        self.told = False
        """The manifest was replaced since, and the conversation was told (`tell`); `again` for a new one."""
        self.manifest: Manifest | None = None
        """The manifest the run read (set once read): a file replaced by one recording the same tree is not told."""

    def again(self) -> None:
        """A new conversation begins (an `agent.Agent`'s next run): it is told too, once."""
        self.told = False

    def tell(self, name: str, outcome: ToolOutcome) -> ToolOutcome:
        """``outcome`` of the tool ``name``, with `TREE_CHANGED` in front of it the first time the manifest is found
        replaced, and `TREE_CHANGED_IMPORT` after a script's that failed to import from ``servers`` since."""
        changed = self.told or self._replaced()
        if changed and name == "execute_python" and missed_servers(outcome):
            outcome.content.append(text_block(TREE_CHANGED_IMPORT))
        if changed and not self.told:
            self.told = True
            outcome = with_note(outcome, TREE_CHANGED)
        return outcome

    def _replaced(self) -> bool:
        """Whether the manifest file was replaced since the run began by one recording another tree. One rewritten for
        the configuration file it names alone (`tooltree generate-tree` from another file naming the same servers, the
        one it named gone: `Manifest.same_tree`) is the run's tree: before, the run was told its tree was regenerated
        and its scripts kept the tree before, though nothing had changed."""
        from sandbox.stored_definitions import manifest_version, records_tree

        now = manifest_version(self.tree)
        if now == self._stamp:
            return False
        if self.manifest is None or not records_tree(self.tree, self.manifest, now):
            return True
        self._stamp = now  # read once per such rewrite
        return False
