"""Run model-written scripts in a hardened container whose only way out is a bridge to the tools.

::

    from sandbox import McpBridge, Sandbox
    from tool_tree.pool import BackgroundPool

    with BackgroundPool(config) as servers:
        bridge = McpBridge("tree", servers.pool)
        with Sandbox(tree="tree", tools=bridge, tool_loop=servers.loop) as sb:
            result = sb.execute("from servers.crm import list_leads\\nprint(len(list_leads().json()['leads']))")

`Sandbox` is one session (interpreter state and workspace persist across `Sandbox.execute`
calls); `SandboxPool` keeps sandboxes warm; `SandboxBackend` is the seam behind both, with
`DockerBackend` as the first backend (on the Docker Engine API through `DockerEngine`, which
finds the engine from ``DOCKER_HOST`` as the ``docker`` command does); `ToolBridge` is the seam
to the real tools, `McpBridge` the one to MCP servers, and `Runtime` puts the servers, the bridge and a sandbox
together (as ``tooltree exec`` does). Build the image first: ``python -m sandbox.image build`` (``--offline-base``
without a registry).

Names are imported on first use, so ``python -m sandbox.image`` and friends start clean and
``import sandbox`` costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tool_tree.lazy import lazy_exports

if TYPE_CHECKING:
    from sandbox._docker import DockerEngine
    from sandbox.backend import Connection, SandboxBackend
    from sandbox.bridge import ToolBridge, ToolCallRefused, ToolHandler
    from sandbox.config import SandboxConfig
    from sandbox.docker_backend import DockerBackend
    from sandbox.errors import (
        EngineError,
        EngineUnavailableError,
        HardeningError,
        ImageError,
        ProtocolError,
        SandboxError,
        SessionError,
        Unreported,
        WorkspaceError,
        interrupted_execution,
        interrupted_unreported,
    )
    from sandbox.hardening import check_hardening
    from sandbox.host import Runtime
    from sandbox.image import build_image, image_name
    from sandbox.mcp_bridge import McpBridge
    from sandbox.pool import SandboxPool
    from sandbox.prune import remove_containers, remove_volumes
    from sandbox.results import ExecutionResult, ShownImage, ToolCallRecord
    from sandbox.session import Listing, Sandbox

_EXPORTS = {
    "Connection": "sandbox.backend",
    "SandboxBackend": "sandbox.backend",
    "ToolBridge": "sandbox.bridge",
    "ToolCallRefused": "sandbox.bridge",
    "ToolHandler": "sandbox.bridge",
    "SandboxConfig": "sandbox.config",
    "DockerBackend": "sandbox.docker_backend",
    "DockerEngine": "sandbox._docker",
    "remove_containers": "sandbox.prune",
    "remove_volumes": "sandbox.prune",
    "EngineError": "sandbox.errors",
    "EngineUnavailableError": "sandbox.errors",
    "HardeningError": "sandbox.errors",
    "ImageError": "sandbox.errors",
    "ProtocolError": "sandbox.errors",
    "SandboxError": "sandbox.errors",
    "SessionError": "sandbox.errors",
    "WorkspaceError": "sandbox.errors",
    "Unreported": "sandbox.errors",
    "interrupted_execution": "sandbox.errors",
    "interrupted_unreported": "sandbox.errors",
    "check_hardening": "sandbox.hardening",
    "Runtime": "sandbox.host",
    "McpBridge": "sandbox.mcp_bridge",
    "build_image": "sandbox.image",
    "image_name": "sandbox.image",
    "SandboxPool": "sandbox.pool",
    "ExecutionResult": "sandbox.results",
    "ShownImage": "sandbox.results",
    "ToolCallRecord": "sandbox.results",
    "Listing": "sandbox.session",
    "Sandbox": "sandbox.session",
}

__all__ = [
    "Connection",
    "DockerBackend",
    "DockerEngine",
    "EngineError",
    "EngineUnavailableError",
    "ExecutionResult",
    "HardeningError",
    "ImageError",
    "Listing",
    "McpBridge",
    "ProtocolError",
    "Runtime",
    "Sandbox",
    "SandboxBackend",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "SessionError",
    "ShownImage",
    "ToolBridge",
    "ToolCallRecord",
    "ToolCallRefused",
    "ToolHandler",
    "Unreported",
    "WorkspaceError",
    "build_image",
    "check_hardening",
    "image_name",
    "interrupted_execution",
    "interrupted_unreported",
    "remove_containers",
    "remove_volumes",
]

if not TYPE_CHECKING:  # a type checker sees the imports above, and refuses a name that is not one (`sandbox.Nope`)
    __getattr__, __dir__ = lazy_exports("sandbox", _EXPORTS, globals(), __all__)
