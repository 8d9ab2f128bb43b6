"""The public surface of `agent.serve`: every exported name resolves, and importing it loads no MCP SDK."""

from __future__ import annotations

import subprocess
import sys

import agent.serve


def test_every_exported_name_resolves_and_all_lists_exactly_them() -> None:
    assert sorted(agent.serve.__all__) == agent.serve.__all__
    for name in agent.serve.__all__:
        assert getattr(agent.serve, name) is not None
    assert set(agent.serve.__all__) <= set(dir(agent.serve))


def test_importing_the_package_or_its_settings_does_not_import_the_mcp_sdk() -> None:
    code = "import sys, agent.serve, agent.serve.settings; print('mcp' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"
