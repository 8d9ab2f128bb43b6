"""Listing the tools of every configured server at once.

Each server is connected in its own task with its own deadline; one that fails to start,
crashes, hangs or sends garbage is reported with the last lines of its stderr, and the others
carry on. Every process started is stopped and reaped before this returns, also on Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp

from tool_tree.config import ServerConfig
from tool_tree.connect import StderrLog, connect, list_tools_raw, server_info


@dataclass
class Discovery:
    """The outcome of listing one server."""

    server: ServerConfig
    tools: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stderr_tail: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


async def discover_one(server: ServerConfig) -> Discovery:
    """Connect to one server, list its tools (all pages) and disconnect. Never raises for server faults."""
    result = Discovery(server=server)
    stderr = StderrLog() if server.command is not None else None
    start = time.perf_counter()
    phase = "start-up"
    try:
        with anyio.fail_after(server.timeout):
            async with connect(server, stderr=stderr) as conn:
                phase = "listing tools"
                result.info = server_info(conn.client)
                result.tools = await list_tools_raw(conn.client)
    except TimeoutError:
        result.error = f"timed out after {server.timeout:g} s"
    except mcp.MCPError as e:
        result.error = f"server error: {e}"
    except OSError as e:
        result.error = f"cannot start: {e}"
    except ValueError as e:
        result.error = f"bad response: {e}"
    except Exception as e:
        result.error = _describe(e)
    finally:
        result.seconds = time.perf_counter() - start
        if stderr is not None:
            if result.error is not None:
                result.stderr_tail = stderr.tail()
            stderr.close()
    if result.error is not None and "connection closed" in result.error.lower() and server.command is not None:
        result.error = (
            "the server exited during start-up" if phase == "start-up" else f"the server exited while {phase}"
        )
    return result


def _describe(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        inner = e.exceptions[0] if e.exceptions else e
        return _describe(inner)
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {text}" if type(e).__name__ not in text else text


async def discover_all(
    servers: Sequence[ServerConfig], *, on_done: Callable[[Discovery], None] | None = None
) -> list[Discovery]:
    """Discover all servers concurrently; results come back in the order given."""
    results: list[Discovery | None] = [None] * len(servers)

    async def run(i: int, server: ServerConfig) -> None:
        result = results[i] = await discover_one(server)
        if on_done is not None:
            on_done(result)

    async with anyio.create_task_group() as tg:
        for i, s in enumerate(servers):
            tg.start_soon(run, i, s)
    return [r for r in results if r is not None]
