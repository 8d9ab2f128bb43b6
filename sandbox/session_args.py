"""The checks of `sandbox.session.Sandbox`'s arguments (and `sandbox.host.Runtime`'s and
`sandbox.mcp_bridge.McpBridge`'s): each wrong one refused by name, before anything runs or changes (a wrong one used
to fail later, and elsewhere: every tool call, or the session's state)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sandbox.bridge import ToolBridge, ToolHandler, as_bridge
from sandbox.config import MAX_TIMEOUT, WORKSPACE
from sandbox.errors import SandboxError, SessionError, WorkspaceError
from tool_tree.text import shown


def tool_bridge(tools: ToolBridge | ToolHandler | None, tool_loop: asyncio.AbstractEventLoop | None) -> ToolBridge:
    """The session's bridge for ``tools`` (`as_bridge`), checked against ``tool_loop``.

    Raises:
        TypeError: ``tools`` is not a `ToolBridge`, a function or None.
        ValueError: the bridge is ``loop_bound`` (`McpBridge`) and ``tool_loop`` is None.
    """
    bridge = as_bridge(tools)
    if bridge.loop_bound and tool_loop is None:
        # Its calls would run on the shared background loop: they worked, but the servers they started were
        # tied to that loop, so the pool's loop could not stop them (leaving the pool waited 60 s for them).
        raise ValueError(
            f"tools: {type(bridge).__name__} calls servers whose sessions live on its pool's event loop; "
            "pass that loop too: Sandbox(..., tools=bridge, tool_loop=pool.loop) with pool the BackgroundPool"
        )
    return bridge


def same_tree(bridge: ToolBridge, backend: object) -> None:
    """Refuse a session whose bridge allows the tools of one tree (an `McpBridge`'s manifest) while its sandbox runs
    another's stubs (a `DockerBackend`'s ``tree``): its scripts would import the one and be refused the other's
    tools, each call "not in this tree's manifest".

    Raises:
        ValueError: the two name different folders.
    """
    allowed, run = getattr(bridge, "tree", None), getattr(backend, "tree", None)
    if not (isinstance(allowed, str | os.PathLike) and isinstance(run, str | os.PathLike)):
        return
    if os.path.realpath(allowed) != os.path.realpath(run):
        raise ValueError(
            f"tools: the bridge calls the tools of the tree {os.fspath(allowed)}, and the sandbox runs the tree "
            f"{os.fspath(run)}: give both the same tree (McpBridge(tree, ...) and Sandbox(tree=tree, ...))"
        )


def refuse_on_loop(tool_loop: asyncio.AbstractEventLoop | None) -> None:
    """Refuse to block the thread that runs ``tool_loop`` with an execution: the script's tool calls run there, so
    each would wait, and the script with it, until the execution timed out, having done nothing.

    Raises:
        SessionError: this thread runs ``tool_loop``.
    """
    if tool_loop is not None and _runs_here(tool_loop):
        raise SessionError(
            "execute was called on the thread that runs tool_loop, which the script's tool calls need: "
            "use `await sandbox.aexecute(...)` there"
        )


def refuse_on_pool_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Refuse `Runtime.call_tool` on the thread that runs its server pool's ``loop``: the call is handed to that loop,
    which would wait for it, and every other call of the pool with it, for ever (an ``on_tools_changed`` listener).

    Raises:
        SandboxError: this thread runs ``loop``.
    """
    if _runs_here(loop):
        raise SandboxError(
            "Runtime.call_tool was called on its server pool's own thread, where it would wait for itself for ever: "
            "make the call from another thread (from a coroutine there: "
            "`await asyncio.to_thread(runtime.call_tool, server, tool, arguments)`)"
        )


def _runs_here(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def check_code(code: object, filename: object) -> None:
    """
    Raises:
        TypeError: ``code`` is not a str, or ``filename`` neither a str nor None.
        ValueError: either has a character UTF-8 cannot encode (a lone surrogate), so it cannot be sent.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str (the Python source to run), got {type(code).__name__} {shown(code)}")
    if filename is not None and not isinstance(filename, str):
        raise TypeError(f"filename must be a str or None, got {type(filename).__name__} {shown(filename)}")
    for name, text in (("code", code), ("filename", filename or "")):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:  # was a SessionError ("cannot send execute"), the session being fine
            raise ValueError(
                f"{name} cannot be sent: it has {text[e.start]!r} at position {e.start}, which UTF-8 cannot encode "
                "(a lone surrogate, as from decoding bytes with errors='surrogateescape')"
            ) from None


def timeout_seconds(timeout: object) -> float:
    """`Sandbox.execute`'s ``timeout``, checked as `SandboxConfig` checks its own.

    Raises:
        TypeError: not an int or float.
        ValueError: not more than 0 and at most `MAX_TIMEOUT` (NaN and infinity included).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(
            f"timeout must be a number of seconds (int or float) or None, got {type(timeout).__name__} {shown(timeout)}"
        )
    if not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(
            f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds (a week), got {shown(timeout)}"
        )
    return float(timeout)


def wait_seconds(timeout: object) -> float:
    """A wait's ``timeout`` (`SandboxPool.wait_ready`, `SandboxPool.acquire`): 0 (take what is there) to `MAX_TIMEOUT`.

    Raises:
        TypeError: not an int or float.
        ValueError: less than 0 or more than `MAX_TIMEOUT` (NaN and infinity included).
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(
            f"timeout must be a number of seconds (int or float), got {type(timeout).__name__} {shown(timeout)}"
        )
    if not 0 <= timeout <= MAX_TIMEOUT:
        raise ValueError(
            f"timeout must be at least 0 and at most {MAX_TIMEOUT:g} seconds (a week), got {shown(timeout)}"
        )
    return float(timeout)


def workspace_folder(path: str | Path, name: str = "workspace") -> Path:
    """The folder a workspace is restored from and saved into: a link to a folder is followed
    (the save goes into the folder, and the link stays). ``name`` is the argument's, for the errors.

    Raises:
        TypeError: ``path`` is not a str or a path.
        ValueError: ``path`` is empty (``Path("")`` is the working folder, which it used to restore and save into).
        WorkspaceError: the path exists and is not a folder.
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(
            f"{name} must be a folder's path (str or Path) or None, got {type(path).__name__} {shown(path)}"
        )
    if os.fspath(path) in ("", b""):
        raise ValueError(f'{name} is an empty path; name a folder ("." for the working folder) or pass None')
    folder = Path(path)
    if folder.is_symlink():
        folder = folder.resolve()
    if folder.exists() and not folder.is_dir():
        raise WorkspaceError(f"{path}: not a folder; a workspace is a folder (created when missing)")
    return folder


def tree_in_workspace(workspace: str | os.PathLike[str], tree: str | os.PathLike[str]) -> str | None:
    """Why ``workspace`` cannot be the workspace of a session on ``tree`` (it holds the tree, or lies inside it:
    a script could rewrite the tree through it, its manifest included, and the saved workspace put its copy in
    place), as the end of a sentence starting with the workspace; None when it can."""
    folder, real = Path(os.path.realpath(workspace)), Path(os.path.realpath(tree))
    if not (real.is_relative_to(folder) or folder.is_relative_to(real)):
        return None
    relation = "holds" if real.is_relative_to(folder) and folder != real else "is inside"
    return (
        f"{relation} the tree {tree}: a script could rewrite the tree (its manifest lists the tools the bridge "
        "allows), and the workspace saved back would put its copy in place; give the workspace a folder of its own"
    )


def workspace_relative(path: str) -> str:
    """A workspace path as the supervisor wants it: relative, without ``.`` parts, empty ones or a trailing ``/``
    (``/workspace/a`` → ``a``, ``./skills//SKILL.md`` → ``skills/SKILL.md``, ``.`` → the workspace). An absolute
    path elsewhere is left as it is: the supervisor refuses it, naming it. (Before, ``.``, ``./a``, ``a//b`` and
    ``servers/`` were refused as they were written.)"""
    if path == WORKSPACE or path.startswith(WORKSPACE + "/"):
        path = path[len(WORKSPACE) :]
    elif path.startswith("/"):
        return path
    return "/".join(part for part in path.split("/") if part not in ("", "."))


def workspace_path(path: object) -> str:
    """A path in the workspace as the supervisor wants it (`workspace_relative`).

    ``path`` is a str or an ``os.PathLike`` of one (a ``Path``, a ``PurePosixPath``): before, a ``Path`` was refused
    though the methods take a path, as a workspace or a tree is taken.

    Raises:
        TypeError: ``path`` is neither a str nor an ``os.PathLike`` whose path is a str.
    """
    given = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(given, str):
        raise TypeError(
            f"path must be a str or Path (a path in the workspace), got {type(path).__name__} {shown(path)}"
        )
    return workspace_relative(given)


def count(value: object, name: str) -> int:
    """A whole number of at least 1 (``max_bytes``, ``limit``).

    Raises:
        TypeError: not an int (a bool neither).
        ValueError: less than 1.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, at least 1, got {type(value).__name__} {shown(value)}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value}")
    return value


def runtime_args(
    tree: object,
    workspace: object,
    audit: object,
    sandbox_config: object,
    sandbox_pool: object,
    sandbox_backend: object,
) -> None:
    """The checks of `sandbox.host.Runtime`'s arguments.

    Raises:
        TypeError: an argument is of the wrong type, named (before: ``audit`` was ignored, no line written; a path
            ``os.fspath`` refused, unnamed; ``sandbox_pool`` an AttributeError at first use).
        ValueError: ``tree``, ``workspace`` or ``audit`` is an empty path (``Path("")`` is the working folder: a
            tree taken from it, a workspace saved into it; an audit log refused only when the runtime
            opened, "audit log .: a folder"), ``sandbox_pool`` or ``sandbox_backend`` runs another tree, or both
            are given.
    """
    from sandbox.config import SandboxConfig
    from sandbox.mcp_bridge import AuditLog

    def got(value: object) -> str:
        return f"got {type(value).__name__} {shown(value)}"

    if not isinstance(tree, str | os.PathLike):
        raise TypeError(f"tree: expected the path (str or os.PathLike) of a generated tree's folder, {got(tree)}")
    if workspace is not None and not isinstance(workspace, str | os.PathLike):
        raise TypeError(f"workspace: expected the path (str or os.PathLike) of a host folder or None, {got(workspace)}")
    if audit is not None and not isinstance(audit, str | os.PathLike | AuditLog):
        raise TypeError(
            "audit: expected the path (str or os.PathLike) of a file to append audit lines to, or an AuditLog "
            f"(AuditLog(stream) writes to a stream), or None, {got(audit)}"
        )
    if os.fspath(tree) in ("", b""):  # before: taken as the working folder
        raise ValueError('tree is an empty path; name the tree\'s folder ("tree", as generate-tree writes it)')
    for name, path in (("workspace", workspace), ("audit", audit)):
        if isinstance(path, str | os.PathLike) and os.fspath(path) in ("", b""):
            what = 'a folder ("." for the working folder)' if name == "workspace" else "a file"
            raise ValueError(f"{name} is an empty path; name {what} or pass None")
    if sandbox_config is not None and not isinstance(sandbox_config, SandboxConfig):
        raise TypeError(
            "sandbox_config: expected a SandboxConfig (SandboxConfig.from_config(config) reads the sandbox: "
            f"section), or None, {got(sandbox_config)}"
        )
    if sandbox_backend is not None:
        from sandbox.backend import SandboxBackend

        if not isinstance(sandbox_backend, SandboxBackend):
            raise TypeError(f"sandbox_backend: expected a SandboxBackend, or None, {got(sandbox_backend)}")
        if sandbox_pool is not None:
            raise ValueError("sandbox_pool and sandbox_backend: give one (the pool's sandboxes run on its backend)")
        _same_tree("sandbox_backend", sandbox_backend, tree, "DockerBackend(config, tree=tree)")
    if sandbox_pool is not None:
        from sandbox.pool import SandboxPool  # only then: it imports the whole session machinery

        if not isinstance(sandbox_pool, SandboxPool):
            raise TypeError(f"sandbox_pool: expected a SandboxPool, or None, {got(sandbox_pool)}")
        _same_tree("sandbox_pool", sandbox_pool.backend, tree, "SandboxPool(config=..., tree=tree)")


def _same_tree(name: str, backend: object, tree: str | os.PathLike[str], made: str) -> None:
    """Raises: ValueError: ``backend``'s sandboxes run another tree than the runtime's ``tree``."""
    run = getattr(backend, "tree", None)  # a `DockerBackend`'s; another backend may have none
    if isinstance(run, str | os.PathLike) and os.path.realpath(run) != os.path.realpath(tree):
        # Before: taken; its scripts imported the pool's tree's stubs, and each call was refused as "not in
        # this tree's manifest" (the runtime's), or went to a tool the scripts' stubs did not describe.
        raise ValueError(
            f"{name}: its sandboxes run the tree {os.fspath(run)}, not {os.fspath(tree)}, whose manifest "
            f"says which tools the runtime's bridge may call: give it the runtime's tree ({made})"
        )


def bridge_args(tree: object, pool: object, budgets: object, audit: object, manifest: object, config: object) -> None:
    """The checks of `sandbox.mcp_bridge.McpBridge`'s arguments.

    Raises:
        TypeError: an argument is of the wrong type, named. Before, ``McpBridge("tree", servers)`` (the
            `BackgroundPool` rather than its ``.pool``) or ``audit="audit.log"`` was taken, and every call of a
            script then failed as "the tool call failed on the host", a traceback in the log.
    """
    from sandbox.mcp_bridge import AuditLog, Budgets
    from tool_tree.config import Config
    from tool_tree.pool import BackgroundPool, ServerPool
    from tool_tree.tree import Manifest

    def got(value: object) -> str:
        return f"got {type(value).__name__} {shown(value)}"

    if not isinstance(tree, str | os.PathLike):
        raise TypeError(f"tree: expected the path (str or os.PathLike) of a generated tree's folder, {got(tree)}")
    if not isinstance(pool, ServerPool):
        hint = (
            " (a BackgroundPool's is its .pool: McpBridge(tree, servers.pool))"
            if isinstance(pool, BackgroundPool)
            else ""
        )
        raise TypeError(f"pool: expected a ServerPool{hint}, {got(pool)}")
    if audit is not None and not isinstance(audit, AuditLog):
        hint = "AuditLog(path) appends to a file, AuditLog(stream) writes to a stream"
        raise TypeError(f"audit: expected an AuditLog ({hint}) or None, {got(audit)}")
    for name, value, kind in (
        ("budgets", budgets, Budgets),
        ("manifest", manifest, Manifest),
        ("config", config, Config),
    ):
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"{name}: expected a {kind.__name__} or None, {got(value)}")
