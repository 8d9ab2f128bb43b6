"""A fingerprint of the generator's own code, recorded in the manifest.

Stubs rendered by a different generator are rendered again, so a rerun after an upgrade never
keeps stale stubs, and a rerun with the same generator can reuse unchanged ones.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from tool_tree import __version__


@functools.cache
def generator_fingerprint() -> str:
    """``<version>+<hash of the generator's source files>``."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return f"{__version__}+{digest.hexdigest()[:16]}"
