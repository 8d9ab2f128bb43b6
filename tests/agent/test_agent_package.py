"""The package's public surface is deliberate and importable."""

from __future__ import annotations

import agent
from agent.errors import AgentError


def test_every_exported_name_resolves_and_all_lists_exactly_them() -> None:
    assert set(agent.__all__) == set(agent._EXPORTS)
    for name in agent.__all__:
        assert getattr(agent, name) is not None


def test_every_exception_derives_from_the_package_base() -> None:
    for name in ("AgentSetupError", "ModelAPIError", "FileAccessError"):
        assert issubclass(getattr(agent, name), AgentError)
