"""A fingerprint of the generator's own code, recorded in the manifest.

Stubs rendered by a different generator are rendered again, so a rerun after an upgrade never
keeps stale stubs, and a rerun with the same generator can reuse unchanged ones.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import tool_tree.text
from tool_tree import __version__

_SHARED = (Path(tool_tree.text.__file__),)
"""Core modules whose code shapes what the generator writes (summaries, cleaned text)."""


@functools.cache
def generator_fingerprint() -> str:
    """``<version>+<hash of the generator's source files and the core modules it writes text with>``."""
    digest = hashlib.sha256()
    for path in [*sorted(Path(__file__).parent.glob("*.py")), *_SHARED]:
        digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"
