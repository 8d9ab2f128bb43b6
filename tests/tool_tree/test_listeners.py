"""An ``async def`` function given as a listener is refused where it is given (`tool_tree.listeners.refuse_async`):
tooltree calls its listeners without awaiting them. Before: each was taken, and at each event the coroutine it made
was dropped ("coroutine … was never awaited"), its body never run, the caller told nothing."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from sandbox import Sandbox
from sandbox.host import Runtime
from tool_tree.config import parse_config
from tool_tree.pool import BackgroundPool, ServerPool

CONFIG = parse_config("servers:\n  crm:\n    command: crm-server\n")


async def told(*args: Any, **kwargs: Any) -> None:
    """What the caller meant to be told: an async function."""


def message(name: str) -> str:
    return rf"^{name}: expected a plain function, got the async function told: tooltree calls it without awaiting it"


@pytest.mark.parametrize("listener", [told, functools.partial(told, "crm")], ids=["async_def", "partial"])
def test_an_async_listener_is_refused_where_it_is_given(listener: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=message("on_tools_changed")):
        BackgroundPool(CONFIG, on_tools_changed=listener)
    with pytest.raises(TypeError, match=message("on_tools_changed")):
        ServerPool(CONFIG, on_tools_changed=listener)
    with pytest.raises(TypeError, match=message("on_tools_changed")):
        Runtime(CONFIG, tmp_path, on_tools_changed=listener)
    with pytest.raises(TypeError, match=message("on_resource_updated")):
        ServerPool(CONFIG, on_resource_updated=listener)
    with pytest.raises(TypeError, match=message("progress")):
        BackgroundPool(CONFIG).call("crm", "list_leads", {}, progress=listener)
    with pytest.raises(TypeError, match=message("progress")):
        asyncio.run(ServerPool(CONFIG).call("crm", "list_leads", {}, progress=listener))
    with pytest.raises(TypeError, match=message("progress")):
        Runtime(CONFIG, tmp_path).call_tool("crm", "list_leads", {}, progress=listener)
    with pytest.raises(TypeError, match=message("on_output")):
        Sandbox(tree=tmp_path).execute("print(1)", on_output=listener)
