"""Whether a tree volume holds a whole copy of its tree: the marker `populate` writes last, checked by both sides.

`populate` writes the marker once every file is in place; a copy cut short (its sender killed midway) leaves none. A
session's supervisor reports whether the tree it was given has it (``tree_complete`` in its status), and the host
starts no session on a tree without it (`sandbox.in_force`): an engine's volume of a tree's name is not proof that
the copy into it finished.

Standard library only: this runs in the container; the host imports the same module.
"""

from __future__ import annotations

import os

MARKER = ".tooltree-complete"


def tree_complete(tree: str) -> bool:
    """Whether the tree mounted at ``tree`` is a whole copy (its marker is there)."""
    return os.path.isfile(os.path.join(tree, MARKER))
