"""The install folder of the third-party servers, shared by the tests in this folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import require_install

REPO = Path(__file__).resolve().parents[2]
INSTALL_HINT = "run `make real-servers` (scripts/install-real-servers.sh) to install the third-party MCP servers"


@pytest.fixture(scope="session")
def real_servers_root() -> Path:
    """The install folder of the real servers; skips (or fails under REQUIRE_REAL_SERVERS=1) when it is missing."""
    root = Path(os.environ.get("TOOLTREE_REAL_SERVERS") or REPO / ".real-servers").resolve()
    require_install(root / ".stamp", "third-party MCP servers", INSTALL_HINT)
    return root
