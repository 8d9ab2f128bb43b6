"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # `import mcp` takes a second; only the tests that start servers pay for it.
    from mcp import StdioServerParameters

SAMPLE_SERVERS = Path(__file__).resolve().parent / "sample_servers"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) and async fixtures of any scope run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def sample_server_params() -> Callable[[str], StdioServerParameters]:
    """Start parameters for one of our sample servers over stdio: ``sample_server_params("crm")``.

    The names are ``docs``, ``crm`` and ``media`` (see tests/sample_servers/README.md).
    """

    def params(name: str) -> StdioServerParameters:
        from mcp import StdioServerParameters

        script = SAMPLE_SERVERS / f"{name}.py"
        if not script.is_file():
            raise ValueError(f"no sample server named {name!r} in {SAMPLE_SERVERS}")
        return StdioServerParameters(command=sys.executable, args=[str(script)])

    return params
